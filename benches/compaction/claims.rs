//! What the benchmark checks of each tool's text, mechanically: which key lines it kept, and
//! how many statements it makes that are false of the output.

use std::sync::LazyLock;

use regex::Regex;

use crate::workloads::Workload;

/// How many of the workload's key lines appear whole in `text`.
pub fn keys_kept(workload: &Workload, text: &str) -> usize {
    workload
        .keys
        .iter()
        .filter(|key| text.contains(key.as_str()))
        .count()
}

/// Statements in `text` that the output disproves:
/// - a count of a noun the workload knows (a number alone, not a line or column number) the truth of (`299 passed`, `1 error`, `151 problems`,
///   `No tests collected`, `No issues found`) that differs from it;
/// - spillway's markers: `N lines omitted (lines A-B)`, `N similar lines, lines A-B` and
///   `repeated N times, lines A-B` whose N is not the range's size or whose range is not in
///   the output (and, for a repeat, whose lines differ), a partial line's marker whose sizes,
///   start or end are not its line's, and a notice's `of T lines` that is not the output's
///   line count.
pub fn false_statements(workload: &Workload, lines: &[&str], text: &str) -> usize {
    count_claims(workload, text) + marker_claims(lines, text)
}

fn count_claims(workload: &Workload, text: &str) -> usize {
    static COUNT: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(
            r"(?im)(?:^|[^\w:./-])(\d[\d,]*)[ \t]+(?:previous[ \t]+)?(passed|failed|errors?|warnings?|problems?|tests?)\b",
        )
            .expect("a valid pattern")
    });
    static NONE: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"(?i)\bno (tests?|issues?|errors?|warnings?|problems?) (collected|found|ran)")
            .expect("a valid pattern")
    });
    let truth = |noun: &str| {
        let noun = noun.to_ascii_lowercase();
        let noun = noun.trim_end_matches('s');
        let noun = if noun == "issue" { "problem" } else { noun };
        workload
            .truths
            .iter()
            .find(|(n, _)| n.trim_end_matches('s') == noun)
            .map(|(_, v)| *v)
    };
    let counts = COUNT.captures_iter(text).filter(|c| {
        let said: Option<u64> = c[1].replace(',', "").parse().ok();
        truth(&c[2]).is_some_and(|t| said != Some(t))
    });
    let nones = NONE
        .captures_iter(text)
        .filter(|c| truth(&c[1]).is_some_and(|t| t != 0));
    counts.count() + nones.count()
}

fn marker_claims(lines: &[&str], text: &str) -> usize {
    static RANGE: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(
            r"\[\.\.\. (?:(\d+) lines? omitted \(lines (\d+)-(\d+)\)|(\d+) similar lines, lines (\d+)-(\d+)|repeated (\d+) times, lines (\d+)-(\d+))",
        )
        .expect("a valid pattern")
    });
    static TOTAL: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"\bof (\d+) lines \(").expect("a valid pattern"));
    let number =
        |c: &regex::Captures<'_>, i: usize| c.get(i).and_then(|m| m.as_str().parse::<usize>().ok());
    let mut wrong = 0;
    for c in RANGE.captures_iter(text) {
        let (n, a, b, repeat) = match (number(&c, 1), number(&c, 4), number(&c, 7)) {
            (Some(n), _, _) => (n, number(&c, 2), number(&c, 3), false),
            (_, Some(n), _) => (n, number(&c, 5), number(&c, 6), false),
            (_, _, Some(n)) => (n, number(&c, 8), number(&c, 9), true),
            _ => continue,
        };
        let ok = match (a, b) {
            (Some(a), Some(b)) if a >= 1 && a <= b && b <= lines.len() => {
                n == b - a + 1 && (!repeat || lines[a - 1..b].windows(2).all(|w| w[0] == w[1]))
            }
            _ => false,
        };
        wrong += usize::from(!ok);
    }
    wrong
        + partial_claims(lines, text)
        + template_claims(lines, text)
        + TOTAL
            .captures_iter(text)
            .filter(|c| c[1].parse::<usize>().ok() != Some(lines.len()))
            .count()
}

/// Partial-line markers whose line is not the output's or whose text beside them is not that
/// line's start or end in the sizes they give: `[... line N goes on: M more bytes ...]` after
/// the line's start, `[... line N is L bytes; its last E follow ...]` before its end, and
/// `[... line N goes on: M bytes omitted; its last E follow ...]` between the two.
fn partial_claims(lines: &[&str], text: &str) -> usize {
    static PART: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(
            r"^\[\.\.\. line (\d+) (?:goes on: (\d+) more bytes|is (\d+) bytes; its last (\d+) follow|goes on: (\d+) bytes omitted; its last (\d+) follow) \.\.\.\]$",
        )
        .expect("a valid pattern")
    });
    let shown: Vec<&str> = text.split('\n').collect();
    let mut wrong = 0;
    for (i, marker) in shown.iter().enumerate() {
        let Some(c) = PART.captures(marker) else {
            continue;
        };
        let number = |k: usize| c.get(k).and_then(|m| m.as_str().parse::<usize>().ok());
        let line = number(1).and_then(|n| lines.get(n.checked_sub(1)?));
        let before = i.checked_sub(1).map(|at| shown[at]);
        let after = shown.get(i + 1).copied();
        let ok = match (line, before, after) {
            (Some(line), Some(start), _) if number(2).is_some() => {
                line.starts_with(start) && number(2) == Some(line.len() - start.len())
            }
            (Some(line), _, Some(end)) if number(3).is_some() => {
                number(3) == Some(line.len()) && number(4) == Some(end.len()) && line.ends_with(end)
            }
            (Some(line), Some(start), Some(end)) => {
                line.starts_with(start)
                    && line.ends_with(end)
                    && number(6) == Some(end.len())
                    && number(5).map(|m| start.len() + m + end.len()) == Some(line.len())
            }
            _ => false,
        };
        wrong += usize::from(!ok);
    }
    wrong
}

/// Template fold markers (`[... N more lines like "T", lines A-B ...]`, `[... N lines: n like
/// "T", m like "U", lines A-B ...]`) whose count is not the range's size, whose range is not in
/// the output, or one of whose lines matches none of its templates.
fn template_claims(lines: &[&str], text: &str) -> usize {
    static FOLD: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r#"(?m)^\[\.\.\. (?:(\d+) more lines? like "(.*)"|(\d+) lines: (.*)), lines? (\d+)(?:-(\d+))? \.\.\.\]$"#)
            .expect("a valid pattern")
    });
    static GROUP: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r#"(\d+) like "(.*?)"(?:, |$)"#).expect("a valid pattern"));
    let mut wrong = 0;
    for c in FOLD.captures_iter(text) {
        let number = |i: usize| c.get(i).and_then(|m| m.as_str().parse::<usize>().ok());
        let Some(a) = number(5) else { continue };
        let b = number(6).unwrap_or(a);
        let (n, templates): (Option<usize>, Vec<String>) = match (number(1), number(3)) {
            (Some(n), _) => (Some(n), vec![c[2].to_owned()]),
            (_, Some(n)) => (
                Some(n),
                GROUP
                    .captures_iter(&c[4])
                    .map(|g| g[2].to_owned())
                    .collect(),
            ),
            _ => (None, Vec::new()),
        };
        let ok = n.is_some_and(|n| n == b + 1 - a)
            && a >= 2
            && a <= b
            && b < lines.len()
            && lines[a - 1..b]
                .iter()
                .all(|line| templates.iter().any(|t| matches(t, line)));
        wrong += usize::from(!ok);
    }
    wrong
}

/// Whether `line` has the template's words, `<*>` standing for any one word (a template quoted
/// cut, ending in `…`, is compared on its whole words).
fn matches(template: &str, line: &str) -> bool {
    let words: Vec<&str> = line.split_ascii_whitespace().collect();
    let (template, cut) = match template.strip_suffix('…') {
        Some(t) => (t, true),
        None => (template, false),
    };
    let fixed: Vec<&str> = template.split(' ').collect();
    let whole = if cut {
        fixed.len().saturating_sub(1)
    } else {
        fixed.len()
    };
    (if cut {
        words.len() >= whole
    } else {
        words.len() == whole
    }) && fixed[..whole]
        .iter()
        .zip(&words)
        .all(|(f, w)| *f == "<*>" || f == w)
}
