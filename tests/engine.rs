//! Properties of the whole engine (normalise -> capture -> preview) over random inputs,
//! random limits and random chunkings; the properties themselves are in `invariants.rs`,
//! which the fuzz targets check too.

use proptest::prelude::*;
use spillway::engine::capture::{Capture, Limits, SpillPolicy};
use spillway::engine::normalise::{NormaliseOptions, normalise};
use spillway::protocol::Direction;
use spillway::storage::spill::DataDir;

use crate::invariants::{EngineCase, engine};

/// Pieces that terminal output is made of, including the awkward ones.
fn piece() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => "[a-z0-9 ]{0,30}".prop_map(String::into_bytes),
        3 => Just(b"\r\n".to_vec()),
        2 => Just(b"\n".to_vec()),
        1 => Just(b"\r".to_vec()),
        1 => Just(b"\x08".to_vec()),
        1 => (0u8..=99, prop::sample::select(vec!['m', 'K', 'G', 'C', 'D', 'H', 'J', 'A']))
            .prop_map(|(n, f)| format!("\x1b[{n}{f}").into_bytes()),
        1 => Just(b"\x1b]0;title\x07".to_vec()),
        1 => Just(b"\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\".to_vec()),
        1 => Just("héllo ✓ 日本".as_bytes().to_vec()),
        1 => prop::collection::vec(any::<u8>(), 1..6),
        1 => (100usize..3000).prop_map(|n| vec![b'w'; n]),
        // Lines the highlights pick up, with a location line after one of them.
        1 => Just(b"\nerror[E0308]: mismatched types\n  --> src/a.rs:1:2\n".to_vec()),
        1 => Just(b"\nFAILED tests/x.py::t - AssertionError\n".to_vec()),
        1 => Just(b"\nmake: *** [all] Error 2\n".to_vec()),
        // A counter: lines alike but for digits, which previews fold.
        1 => (1usize..40).prop_map(|n| (0..n).map(|i| format!("Downloading step {i} of {n}\n")).collect::<String>().into_bytes()),
    ]
}

fn input() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(piece(), 0..60).prop_map(|pieces| pieces.concat())
}

fn direction() -> impl Strategy<Value = Direction> {
    prop::sample::select(vec![Direction::Head, Direction::Tail, Direction::Both])
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn engine_invariants(
        input in input(),
        cuts in prop::collection::vec(any::<usize>(), 0..8),
        max_lines in 1u64..40,
        max_bytes in 1u64..3000,
        dir in direction(),
        small_line_cap in any::<bool>(),
        raw in any::<bool>(),
    ) {
        let opts = NormaliseOptions {
            raw,
            max_line_bytes: if small_line_cap { 64 } else { NormaliseOptions::default().max_line_bytes },
            ..NormaliseOptions::default()
        };
        engine(&EngineCase {
            input: &input,
            cuts,
            opts,
            limits: Limits::new(max_lines, max_bytes).unwrap(),
            direction: dir,
            highlights: true,
            max_tokens: None,
        });
    }
}

/// Every engine invariant (`crate::invariants::engine`) over a generated text, normalised by
/// default with the default highlights, at `max_lines` and `max_bytes` (and `max_tokens`): fed
/// whole, or with `piece` in seven cuts that far apart, so a chunk boundary falls anywhere.
fn check_text(
    text: &str,
    (max_lines, max_bytes): (u64, u64),
    direction: Direction,
    max_tokens: Option<usize>,
    piece: Option<usize>,
) {
    let cuts = piece.map_or(Vec::new(), |n| (1..8).map(|i| i * n).collect());
    engine(&EngineCase {
        input: text.as_bytes(),
        cuts,
        opts: NormaliseOptions::default(),
        limits: Limits::new(max_lines, max_bytes).unwrap(),
        direction,
        highlights: true,
        max_tokens,
    });
}

/// Captures `text` (already normalised) in `chunks`-sized writes with the spill capped at
/// `cap`; returns the capture, finished, and the spill file's content.
fn capture_capped(text: &str, chunk: usize, cap: u64, root: &std::path::Path) -> (Capture, String) {
    let limits = Limits::new(5, 200).unwrap();
    let dir = DataDir::open(root).unwrap();
    let mut capture = Capture::new(limits, SpillPolicy::Always(dir)).with_spill_cap(cap);
    let mut start = 0;
    while start < text.len() {
        let mut end = (start + chunk).min(text.len());
        while !text.is_char_boundary(end) {
            end += 1;
        }
        capture.write(&text[start..end]);
        start = end;
    }
    capture.finish();
    let spill = std::fs::read_to_string(capture.view().spill_path.unwrap()).unwrap();
    (capture, spill)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// A capped spill is the longest prefix of the output that fits the cap and ends at a
    /// char boundary; the counters, the tail and the highlights are those of the whole output.
    #[test]
    fn a_capped_spill_is_a_prefix_and_nothing_else_changes(
        input in input(),
        chunk in 1usize..400,
        cap_share in 0.0f64..1.2,
    ) {
        let text = normalise(&input, NormaliseOptions::default());
        let cap = ((text.len() as f64 * cap_share) as u64).max(1);
        let tmp = tempfile::tempdir().unwrap();
        let (capped, spill) = capture_capped(&text, chunk, cap, tmp.path());
        let (whole, _) = capture_capped(&text, chunk, u64::MAX, tmp.path());

        let mut keep = (cap as usize).min(text.len());
        while !text.is_char_boundary(keep) {
            keep -= 1;
        }
        prop_assert_eq!(spill.as_str(), &text[..keep]);
        let (v, w) = (capped.view(), whole.view());
        if keep < text.len() {
            let line = text[..keep].matches('\n').count() as u64 + 1;
            prop_assert_eq!(v.spill_capped.map(|c| (c.bytes, c.line)), Some((cap, line)));
        } else {
            prop_assert_eq!(v.spill_capped, None);
        }
        prop_assert_eq!((v.total_bytes, v.total_lines), (w.total_bytes, w.total_lines));
        prop_assert_eq!((v.head, v.tail), (w.head, w.tail));
        prop_assert_eq!(&v.findings.candidates, &w.findings.candidates);
        prop_assert_eq!(v.findings.found, w.findings.found);
    }
}

/// Lines of a log: runs of one line, runs of lines alike but for their numbers, lines all
/// different, and now and then one too long for a small budget.
fn log_line_runs() -> impl Strategy<Value = String> {
    let run = prop_oneof![
        3 => ("[a-z ]{12,40}", 1usize..60).prop_map(|(line, n)| format!("{line}\n").repeat(n)),
        3 => ("[a-z ]{12,40}", 1usize..300).prop_map(|(words, n)| {
            (0..n).map(|i| format!("{words} {i} took {}ms\n", i * 7 % 1000)).collect()
        }),
        3 => prop::collection::vec("[a-zA-Z ]{0,60}", 1..40)
            .prop_map(|lines| lines.iter().map(|l| format!("{l}\n")).collect()),
        1 => (200usize..4000).prop_map(|n| format!("{}\n", "x".repeat(n))),
        1 => Just("error[E0308]: mismatched types\n --> src/a.rs:1:2\n".to_string()),
    ];
    prop::collection::vec(run, 1..12).prop_map(|runs| runs.concat())
}

/// Outputs of a few line templates interleaved (test results, requests, compiler steps), with
/// variable fields (numbers, paths, names), now and then a line the highlighter keeps or a
/// line of its own: what template folds act on.
fn templated_lines() -> impl Strategy<Value = String> {
    let line = prop_oneof![
        6 => ("[a-z]{2,8}", 0u32..999).prop_map(|(name, i)| format!("test {name}::case_{i} ... ok\n")),
        3 => (0u32..99_999, prop::sample::select(vec!["GET", "POST"]))
            .prop_map(|(i, verb)| format!("{verb} /api/items/{i} 200 {}ms\n", i % 97)),
        2 => ("[a-z]{3,9}", 0u32..20).prop_map(|(name, v)| format!("   Compiling {name} v0.{v}.1\n")),
        1 => ("[a-z]{3,9}", 0u32..50).prop_map(|(name, i)| format!("test {name}::case_{i} ... FAILED\n")),
        1 => "[a-z ]{10,50}".prop_map(|l| format!("{l}\n")),
        1 => Just("error[E0308]: mismatched types\n --> src/a.rs:1:2\n".to_string()),
    ];
    prop::collection::vec(line, 1..600).prop_map(|lines| lines.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(60))]

    /// Template folds hold rules 1-5 at any budget, within the limits (folded, nothing cut)
    /// and over them (folded, then cut): every marker's count, range and templates are true
    /// of the spill (see `check_template_fold`).
    #[test]
    fn template_folds_are_true_of_the_spill_at_any_budget(
        text in templated_lines(),
        max_lines in 4u64..2000,
        max_bytes in 200u64..60_000,
        dir in direction(),
        max_tokens in prop::option::of(50usize..5000),
    ) {
        check_text(&text, (max_lines, max_bytes), dir, max_tokens, None);
    }
}

#[test]
fn previews_through_the_daemon_hold_rules_one_to_three_and_five() {
    use crate::helper::daemon::TestDaemon;
    use proptest::test_runner::{Config, TestRunner};
    use spillway::protocol::Preview;

    let daemon = TestDaemon::start();
    let input_dir = tempfile::tempdir().unwrap();
    let mut runner = TestRunner::new(Config::with_cases(24));
    let strategy = (log_line_runs(), 4u64..200, 200u64..20_000, direction());
    runner
        .run(&strategy, |(text, max_lines, max_bytes, dir)| {
            let file = input_dir.path().join("output.txt");
            std::fs::write(&file, &text).unwrap();
            let direction = format!("{dir:?}").to_lowercase();
            let out = daemon.run(&[
                "--json",
                "--no-tty",
                "--max-lines",
                &max_lines.to_string(),
                "--max-bytes",
                &max_bytes.to_string(),
                "--direction",
                &direction,
                "--",
                "cat",
                file.to_str().unwrap(),
            ]);
            let p: Preview = serde_json::from_slice(&out.stdout).expect("the exit event");
            if !p.truncated {
                prop_assert_eq!(&p.content, &text);
                return Ok(());
            }
            let spill = std::fs::read_to_string(p.spill_path.as_ref().unwrap()).unwrap();
            prop_assert_eq!(&spill, &text);
            let limits = Limits::new(max_lines, max_bytes).unwrap();
            crate::invariants::truncated_preview(&p, &spill, dir, limits, None);
            let notice = &p.content[p.content.rfind("\n\n[spillway: ").unwrap() + 2..];
            let path = p.spill_path.as_deref().unwrap();
            // The budget `check_notice` gives, for a notice whose next steps name `spillway`;
            // these name the binary under test by its path (it is not the `spillway` on PATH),
            // as long as the checkout's directory makes it.
            let exe = env!("CARGO_BIN_EXE_spillway");
            let named = if notice.contains(exe) {
                exe.len() - "spillway".len()
            } else {
                0
            };
            prop_assert!(
                notice.len() <= 600 + 3 * path.len().saturating_sub(76) + named,
                "{}",
                notice
            );
            Ok(())
        })
        .unwrap();
}

/// Next steps worded as a tool call with an id, the way a front end other than the command
/// line words them; padded to the command line's length, so that a preview built with them
/// leaves its lines the same room (the whole text is held to the limits) and chooses the
/// same lines.
struct ToolSteps;

impl spillway::protocol::NextStep for ToolSteps {
    fn read_from(&self, spill: &std::path::Path, line: u64) -> String {
        let cli = spillway::program::CliSteps.read_from(spill, line);
        format!("{:<1$}", format!("call read(offset={line})"), cli.len())
    }

    fn search(&self, spill: &std::path::Path, pattern: &str) -> String {
        let cli = spillway::program::CliSteps.search(spill, pattern);
        format!(
            "{:<1$}",
            format!("call grep(pattern={pattern:?})"),
            cli.len()
        )
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(120))]

    /// A preview's next steps, reworded where its facts say they stand, read exactly as a
    /// preview built with that wording from the start, before and after its text is redacted
    /// (which changes the length of what comes before them).
    #[test]
    fn next_steps_reworded_by_their_facts_equal_steps_built_so(
        input in input(),
        secret_at in any::<prop::sample::Index>(),
        max_lines in 1u64..30,
        max_bytes in 200u64..3000,
        dir in direction(),
    ) {
        use spillway::engine::driver::Engine;
        use spillway::engine::normalise::Normaliser;
        use spillway::program::CliSteps;
        use spillway::protocol::Preview;

        let mut input = input;
        let secret = b"\nAWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n";
        let at = secret_at.index(input.len() + 1);
        input.splice(at..at, secret.iter().copied());
        let tmp = tempfile::tempdir().unwrap();
        let dir_data = DataDir::open(tmp.path()).unwrap();
        let capture = Capture::new(Limits::new(max_lines, max_bytes).unwrap(), SpillPolicy::Always(dir_data));
        let mut engine = Engine::new(Normaliser::new(NormaliseOptions::default()), capture);
        engine.feed(&input);
        engine.finish();
        let view = engine.capture().view();
        let cli = Preview::build(&view, dir, &CliSteps);
        let tool = Preview::build(&view, dir, &ToolSteps);
        let mut reworded = cli.clone();
        reworded.reword_steps(&ToolSteps);
        // The same text, and the steps' places where building with the tool's words puts them.
        prop_assert_eq!(&reworded, &tool);
        prop_assert_eq!(cli.next.is_some(), cli.truncated && cli.spill_path.is_some());

        let redactor = spillway::engine::redact::Redactor::builtin();
        let (mut cli_r, mut tool_r) = (cli.clone(), tool.clone());
        cli_r.redact(redactor);
        tool_r.redact(redactor);
        cli_r.reword_steps(&ToolSteps);
        prop_assert_eq!(cli_r, tool_r);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// The daemon's limits over logs of repeated, similar and plain lines, whole or in pieces:
    /// a similar run in the middle, far from both buffers, is opened from the spill while
    /// the budget has room (it was left as two lines of a mostly empty budget).
    #[test]
    fn log_runs_fill_the_budget_wherever_they_are(
        text in log_line_runs(),
        max_lines in 4u64..200,
        max_bytes in 200u64..20_000,
        dir in direction(),
        piece in prop::option::of(1usize..5000),
    ) {
        check_text(&text, (max_lines, max_bytes), dir, None, piece);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(100))]

    /// A token budget binds as lines and bytes do: rules 1-3 and 5 hold, and a cut leaves no
    /// more than a fifth of the tokens unused (the byte budget found for them grows back
    /// after overshooting).
    #[test]
    fn token_budgets_hold_the_rules_and_are_filled(
        text in log_line_runs(),
        max_tokens in 20usize..3000,
        dir in direction(),
    ) {
        check_text(&text, (2000, 51200), dir, Some(max_tokens), None);
    }
}

/// Outputs with lines too long for the budget (issue 27 rule 6): blocks of short lines and long
/// lines in any order, so a long line comes first, last, alone, in the middle or among the
/// tail's last lines; made of ASCII, multi-byte characters and JSON-like punctuation, with or
/// without a final newline.
fn long_line_outputs() -> impl Strategy<Value = String> {
    let block = prop_oneof![
        3 => prop::collection::vec("[a-zA-Z ]{0,40}", 1..30)
            .prop_map(|lines| lines.iter().map(|l| format!("{l}\n")).collect::<String>()),
        2 => ("[a-z0-9\", :{}é日]{1,8}", 100usize..30_000)
            .prop_map(|(unit, bytes)| format!("{}\n", unit.repeat(bytes / unit.len() + 1))),
    ];
    (prop::collection::vec(block, 1..6), any::<bool>()).prop_map(|(blocks, newline)| {
        let text = blocks.concat();
        match newline {
            true => text,
            false => text.trim_end_matches('\n').to_string(),
        }
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Long lines at every position and budget: a line shown by both ends shows a prefix and
    /// a suffix of its spill line with a true marker between them, and every other rule
    /// holds (see `check_both_ends`).
    #[test]
    fn long_lines_show_true_ends_at_any_budget(
        text in long_line_outputs(),
        max_lines in 1u64..60,
        max_bytes in 1u64..20_000,
        dir in direction(),
        max_tokens in prop::option::weighted(0.25, 20usize..3000),
        piece in prop::option::of(1usize..9000),
    ) {
        check_text(&text, (max_lines, max_bytes), dir, max_tokens, piece);
    }
}

/// What `rustc` prints, in colour, for a file with `errors` type errors: a flood of error
/// lines with their notes, real compiler output many times a preview's limits.
fn rustc_flood(errors: usize) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("many.rs");
    let body: String = (0..errors)
        .map(|i| format!("    let v{i}: u32 = \"text number {i}\";\n"))
        .collect();
    std::fs::write(&source, format!("fn main() {{\n{body}}}\n")).unwrap();
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_string());
    let out = std::process::Command::new(rustc)
        .args(["--edition", "2021", "--color", "always", "-o"])
        .arg(dir.path().join("many"))
        .arg(&source)
        .output()
        .expect("rustc runs");
    assert!(!out.status.success(), "the file does not compile");
    out.stderr
}

/// `od`'s dump of this test's own executable, cut to `bytes`: offsets that count up, runs of
/// like lines, and `*` for repeated ones.
fn od_dump(bytes: usize) -> Vec<u8> {
    let exe = std::env::current_exe().unwrap();
    let out = std::process::Command::new("od")
        .args(["-A", "d", "-t", "x1z"])
        .arg(exe)
        .output()
        .expect("od runs");
    let mut dump = out.stdout;
    let end = dump[..bytes.min(dump.len())]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    dump.truncate(end);
    dump
}

/// Long outputs of real tools, many times a preview's limits, fed in pieces longer than twice
/// a preview's bytes (so that the outline takes most of them from their latest lines) and
/// whole: every engine invariant holds, at the default limits and at small ones, and the
/// notice's count of omitted lines that look like errors is the spill's.
#[test]
fn long_outputs_of_real_tools_keep_every_invariant() {
    for output in [rustc_flood(1000), od_dump(1 << 20)] {
        assert!(output.len() > 300_000, "{} bytes", output.len());
        let cuts: Vec<usize> = (1..output.len() / 150_000).map(|i| i * 150_000).collect();
        let cases = [
            ((2000, 51200), Direction::Both),
            ((20, 3000), Direction::Tail),
        ];
        for ((max_lines, max_bytes), direction) in cases {
            let case = EngineCase {
                input: &output,
                cuts: cuts.clone(),
                opts: NormaliseOptions::default(),
                limits: Limits::new(max_lines, max_bytes).unwrap(),
                direction,
                highlights: true,
                max_tokens: None,
            };
            engine(&case);
            let tmp = tempfile::tempdir().unwrap();
            let run = crate::invariants::run(&case, &cuts, tmp.path());
            let (said, so) = omitted_errors(&run.preview, &run.spill);
            assert_eq!(said, so, "omitted lines that look like errors, said and so");
        }
    }
}

/// How many omitted lines look like errors: as the preview's notice says (0 when it says
/// nothing), and as the spill has it: its lines the default patterns match (short enough to be
/// found) that the preview neither shows nor stands for with a fold's marker.
fn omitted_errors(p: &spillway::protocol::Preview, spill: &str) -> (u64, u64) {
    let said = p
        .content
        .rsplit_once(" more omitted line")
        .map_or(0, |(before, _)| {
            let number = before.rsplit(|c: char| !c.is_ascii_digit()).next();
            number.unwrap().parse().unwrap()
        });
    let mut covered: Vec<(u64, u64)> = p.shown.iter().map(|r| (r.first, r.last)).collect();
    // A fold's marker ends naming its lines (`..., lines 10-15 ...]`); an omission's and the
    // tail's own marker stand for nothing shown.
    let folds = p.content.lines().filter(|l| {
        l.starts_with("[... ") && !l.contains(" omitted (lines ") && l.ends_with(" ...]")
    });
    for marker in folds {
        let Some((_, range)) = marker.rsplit_once(", lines ") else {
            continue;
        };
        let mut numbers = range.split(|c: char| !c.is_ascii_digit());
        let first: u64 = numbers.next().unwrap().parse().unwrap();
        let last = numbers.next().and_then(|n| n.parse().ok()).unwrap_or(first);
        covered.push((first, last));
    }
    let patterns = spillway::engine::highlight::Patterns::defaults();
    let so = spill
        .lines()
        .zip(1u64..)
        .filter(|(line, n)| {
            line.len() <= 4096
                && !covered.iter().any(|&(a, b)| (a..=b).contains(n))
                && patterns.is_match(line)
        })
        .count() as u64;
    (said, so)
}

/// An open defect, found by `engine_invariants` (its shrunk case): a preview of the tail that
/// ends in a folded run of similar lines shows that run and nothing before it, though the line
/// before it fits. The preview fills 79-80 % of its byte budget and a tenth of its line budget,
/// so the property test fails only when the spill's path (in the notice, twice) is short
/// enough: with the temporary directory `/tmp`, for one.
#[test]
#[ignore = "open defect: a tail preview ending in a folded similar run leaves the room before it unused"]
fn a_tail_preview_ending_in_a_similar_run_uses_the_room_before_it() {
    let error = "\nerror[E0308]: mismatched types\n  --> src/a.rs:1:2\n";
    let mut input = error.repeat(3);
    input.push_str("\r\n\r\n0aaa0a0 a00a00a aaa0a   0aaaa 0a0a");
    input.push_str(error);
    input.push_str(" 0 a0a0aaa0");
    input.push_str(&error.repeat(2));
    input.push_str("\nmake: *** [all] Error 2\n\nFAILED tests/x.py::t - AssertionError\n");
    input.push_str(" a000aa 0  a0aaaaaaa 000 a0a  a a0 aa00a0  0a");
    input.extend((0..22).map(|i| format!("Downloading step {i} of 22\n")));
    let case = EngineCase {
        input: input.as_bytes(),
        cuts: Vec::new(),
        opts: NormaliseOptions::default(),
        limits: Limits::new(30, 780).unwrap(),
        direction: Direction::Tail,
        highlights: true,
        max_tokens: None,
    };
    let tmp = tempfile::tempdir().unwrap();
    let shown = crate::invariants::run(&case, &[], tmp.path()).preview.shown;
    // Line 25 (69 bytes) fits beside the notice and the fold: the preview is some 620 of the
    // 780 bytes and 9 of the 30 lines.
    assert!(
        shown.iter().any(|r| r.first <= 25 && 25 <= r.last),
        "shown: {shown:?}"
    );
}
