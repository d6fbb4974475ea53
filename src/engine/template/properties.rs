//! What the learner and the planner promise, checked on examples and on generated input: every
//! folded line matches the template its marker names, every count and range is true of the
//! input, a marker's range is exactly the lines it hides, the caps hold on hostile input, and
//! no input panics.

use proptest::prelude::*;

use super::*;

fn learn_all(learner: &mut Learner, lines: &[&str]) -> Vec<LineTemplate> {
    lines
        .iter()
        .enumerate()
        .map(|(i, line)| LineTemplate {
            line: i as u64 + 1,
            template: learner.learn(line),
        })
        .collect()
}

/// Checks every promise of `folds` over `lines` (1-based line numbers), or says which broke.
fn check_folds(
    lines: &[&str],
    planned: &[LineTemplate],
    learner: &Learner,
    folds: &[Fold],
    keep: &dyn Fn(u64) -> bool,
) -> Result<(), String> {
    let total = lines.len() as u64;
    let mut previous_last = 0;
    for fold in folds {
        if fold.first <= previous_last || fold.first > fold.last || fold.last > total {
            return Err(format!("bad range {}-{}", fold.first, fold.last));
        }
        previous_last = fold.last;
        if fold.groups.is_empty()
            || fold.groups.len() > MAX_GROUPS
            || fold.lines() < MIN_FOLDED * fold.groups.len() as u64
        {
            return Err(format!("bad fold size or groups: {fold:?}"));
        }
        let counted: u64 = fold.groups.iter().map(|g| g.count).sum();
        if counted != fold.lines() {
            return Err(format!("counts {counted} != range {}", fold.lines()));
        }
        for group in &fold.groups {
            let template = learner.template(group.template).ok_or("evicted template")?;
            if template.text() != group.text {
                return Err("group text is not the template's".into());
            }
            let shown = lines[group.shown_line as usize - 1];
            if group.shown_line >= fold.first || !template.matches(shown) {
                return Err(format!(
                    "shown line {} is not before or not like it",
                    group.shown_line
                ));
            }
            let in_range = (fold.first..=fold.last)
                .filter(|n| {
                    let line = lines[*n as usize - 1];
                    template.matches(line)
                        && planned[*n as usize - 1].template == Some(group.template)
                })
                .count() as u64;
            if in_range != group.count {
                return Err(format!(
                    "{} lines of {:?} in range, counted {}",
                    in_range, group.text, group.count
                ));
            }
        }
        for n in fold.first..=fold.last {
            if n == 1 || n == total || keep(n) {
                return Err(format!("line {n} folded though kept"));
            }
            let line = lines[n as usize - 1];
            if !fold.groups.iter().any(|g| {
                learner
                    .template(g.template)
                    .is_some_and(|t| t.matches(line))
            }) {
                return Err(format!(
                    "line {n} {line:?} matches none of its marker's templates"
                ));
            }
        }
    }
    Ok(())
}

fn plan_and_check(
    lines: &[&str],
    limits: Limits,
    keep: &dyn Fn(u64) -> bool,
) -> Result<Vec<Fold>, String> {
    let mut learner = Learner::new(limits);
    let planned = learn_all(&mut learner, lines);
    for l in &planned {
        if let Some(template) = l.template.and_then(|id| learner.template(id))
            && !template.matches(lines[l.line as usize - 1])
        {
            return Err(format!("line {} does not match its own template", l.line));
        }
    }
    let folds = plan_folds(&planned, &learner, lines.len() as u64, keep);
    check_folds(lines, &planned, &learner, &folds, keep)?;
    Ok(folds)
}

fn cargo_test_output(tests: usize, failing: usize) -> Vec<String> {
    let mut lines = vec![
        "   Compiling demo v0.1.0 (/tmp/demo)".to_owned(),
        "    Finished `test` profile [unoptimized + debuginfo] target(s) in 1.52s".to_owned(),
        "     Running unittests src/lib.rs (target/debug/deps/demo-1a2b3c4d)".to_owned(),
        String::new(),
        format!("running {tests} tests"),
    ];
    for i in 0..tests {
        let verdict = if i == failing { "FAILED" } else { "ok" };
        lines.push(format!("test tests::case_{i:03} ... {verdict}"));
    }
    lines.push(String::new());
    lines.push(format!(
        "test result: FAILED. {} passed; 1 failed; 0 ignored",
        tests - 1
    ));
    lines
}

#[test]
fn a_test_run_folds_its_passing_tests_around_the_failure() {
    let owned = cargo_test_output(300, 150);
    let lines: Vec<&str> = owned.iter().map(String::as_str).collect();
    let failure = 6 + 150;
    let folds =
        plan_and_check(&lines, Limits::default(), &|n| n == failure as u64).expect("true folds");
    assert_eq!(folds.len(), 2, "{folds:?}");
    assert_eq!((folds[0].first, folds[0].last), (7, 155));
    assert_eq!(folds[0].groups[0].text, "test <*> ... ok");
    assert_eq!(folds[0].groups[0].shown_line, 6);
    // After the kept failure, the first passing test is shown again, then the rest fold.
    assert_eq!((folds[1].first, folds[1].last), (158, 305));
    assert_eq!(
        fold_text(&folds[1]),
        "[... 148 more lines like \"test <*> ... ok\", lines 158-305 ...]"
    );
}

#[test]
fn interleaved_templates_share_one_marker() {
    let owned: Vec<String> = (0..100)
        .flat_map(|i| {
            [
                format!("GET /api/items/{i} 200 {i}ms"),
                format!("cache miss for key item{i}"),
            ]
        })
        .collect();
    let mut lines: Vec<&str> = vec!["server started"];
    lines.extend(owned.iter().map(String::as_str));
    lines.push("server stopped");
    let folds = plan_and_check(&lines, Limits::default(), &|_| false).expect("true folds");
    assert_eq!(folds.len(), 1, "{folds:?}");
    assert_eq!((folds[0].first, folds[0].last), (4, 201));
    let counts: Vec<u64> = folds[0].groups.iter().map(|g| g.count).collect();
    assert_eq!(counts, [99, 99]);
}

#[test]
fn a_cycle_of_five_line_shapes_folds_into_one_marker() {
    let owned: Vec<String> = (0..100)
        .flat_map(|i| {
            [
                format!("# Subtest: triples {i}"),
                format!("ok {} - triples {i}", i + 1),
                "  ---".to_owned(),
                format!("  duration_ms: 0.{i}"),
                "  ...".to_owned(),
            ]
        })
        .collect();
    let mut lines: Vec<&str> = vec!["TAP version 13"];
    lines.extend(owned.iter().map(String::as_str));
    lines.push("# fail 0");
    let folds = plan_and_check(&lines, Limits::default(), &|_| false).expect("true folds");
    assert_eq!(folds.len(), 1, "{folds:?}");
    assert_eq!((folds[0].first, folds[0].last), (7, 501));
    assert_eq!(folds[0].groups.len(), 5);
}

#[test]
fn lines_of_a_template_seen_once_and_the_ends_stay() {
    let lines = [
        "a first line",
        "one two three",
        "alpha beta gamma",
        "the last line",
    ];
    assert!(
        plan_and_check(&lines, Limits::default(), &|_| false)
            .expect("true")
            .is_empty()
    );
    let same = ["job 1 done", "job 2 done", "job 3 done", "job 4 done"];
    // Lines 2 and 3 alone could fold, but a marker for fewer than MIN_FOLDED lines costs more.
    assert!(
        plan_and_check(&same, Limits::default(), &|_| false)
            .expect("true")
            .is_empty()
    );
}

#[test]
fn a_full_learner_evicts_single_lines_first_then_stops_making_templates() {
    let limits = Limits {
        max_templates: 4,
        max_bytes: 1 << 20,
    };
    let mut learner = Learner::new(limits);
    let a = learner.learn("alpha one 1").expect("a");
    assert_eq!(learner.learn("alpha one 2"), Some(a));
    let b = learner.learn("beta two 1").expect("b");
    assert_eq!(learner.learn("beta two 2"), Some(b));
    let lonely = learner.learn("gamma three 1").expect("c");
    learner.learn("delta four 1").expect("d");
    // At the cap: the oldest single-line template goes, the two-line ones stay.
    let e = learner.learn("epsilon five 1").expect("e");
    assert!(learner.template(lonely).is_none());
    assert!(learner.template(a).is_some() && learner.template(b).is_some());
    assert_eq!(learner.learn("epsilon five 2"), Some(e));
    learner.learn("zeta six 1").expect("d evicted for it");
    assert_eq!(
        learner
            .learn("zeta six 2")
            .map(|id| learner.template(id).map(Template::count)),
        Some(Some(2))
    );
    // Every template now has two lines: a new kind of line gets none, known kinds still join.
    assert_eq!(learner.learn("eta seven 1"), None);
    assert_eq!(learner.learn("alpha one 3"), Some(a));
    assert_eq!(learner.templates().count(), 4);
}

#[test]
fn lines_too_long_or_without_a_fixed_word_get_no_template() {
    let mut learner = Learner::new(Limits::default());
    assert_eq!(learner.learn(&"word ".repeat(MAX_WORDS + 1)), None);
    assert_eq!(learner.learn(&"x".repeat(MAX_LINE_BYTES + 1)), None);
    assert_eq!(learner.learn("12 0.5 /a/b"), None);
    assert_eq!(learner.learn(""), None);
    assert_eq!(learner.lines(), 4);
}

/// Lines from a few shapes with variable fields, so templates form and interleave.
fn line_strategy() -> impl Strategy<Value = String> {
    prop_oneof![
        (0u32..500).prop_map(|n| format!("test case_{n} ... ok")),
        (0u32..500, 0u32..99).prop_map(|(n, ms)| format!("GET /items/{n} 200 {ms}ms")),
        (0u32..3).prop_map(
            |n| ["warning: unused", "warning: unused import", "note: see"][n as usize].to_owned()
        ),
        "[a-c]{1,3}( [a-c0-9]{1,3}){0,4}",
        Just("test case ... FAILED".to_owned()),
        Just(String::new()),
    ]
}

proptest! {
    #[test]
    fn every_fold_says_only_what_is_so(
        lines in prop::collection::vec(line_strategy(), 0..200),
        kept in prop::collection::vec(1u64..200, 0..10),
        max_templates in 1usize..20,
    ) {
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        let limits = Limits { max_templates, max_bytes: 1 << 20 };
        let keep = |n: u64| kept.contains(&n);
        if let Err(e) = plan_and_check(&refs, limits, &keep) {
            prop_assert!(false, "{}", e);
        }
    }

    #[test]
    fn folds_skip_gaps_between_head_and_tail(
        lines in prop::collection::vec(line_strategy(), 10..200),
        head in 0usize..100,
        tail in 0usize..100,
    ) {
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        let mut learner = Learner::new(Limits::default());
        let all = learn_all(&mut learner, &refs);
        let head = head.min(all.len());
        let tail_start = all.len() - tail.min(all.len() - head);
        let mut given = all[..head].to_vec();
        given.extend_from_slice(&all[tail_start..]);
        for fold in plan_folds(&given, &learner, all.len() as u64, &|_| false) {
            let inside = |n: u64| (n as usize) <= head || (n as usize) > tail_start;
            prop_assert!((fold.first..=fold.last).all(inside), "{:?} spans the gap", fold);
            let contiguous = tail_start == head;
            prop_assert!(contiguous || fold.first as usize > head || fold.last as usize <= head);
        }
    }

    #[test]
    fn the_caps_hold_on_hostile_input(
        lines in prop::collection::vec(prop_oneof![
            "\\PC{0,300}",
            prop::collection::vec(any::<u8>(), 0..300).prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
            (0u64..u64::MAX).prop_map(|n| format!("distinct line number {n} with words w{n}")),
            (1usize..5000).prop_map(|n| "long ".repeat(n)),
        ], 0..300),
        max_templates in 1usize..64,
        max_bytes in 0usize..20_000,
    ) {
        let mut learner = Learner::new(Limits { max_templates, max_bytes });
        for line in &lines {
            let id = learner.learn(line);
            prop_assert!(learner.templates().count() <= max_templates);
            prop_assert!(learner.held_bytes() <= max_bytes);
            let recount: usize = learner.templates().map(|(_, t)| t.held_bytes()).sum();
            prop_assert_eq!(recount, learner.held_bytes());
            if let Some(template) = id.and_then(|id| learner.template(id)) {
                prop_assert!(template.matches(line));
            }
        }
        let planned: Vec<LineTemplate> = Vec::new();
        prop_assert!(plan_folds(&planned, &learner, 0, &|_| false).is_empty());
    }
}
