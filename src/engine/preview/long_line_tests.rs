//! Issue 27 rule 6: a line too long for the budget shows its start and its end, with the size
//! of the middle in a marker, wherever it stands among the tail's lines; a head shows a line's
//! start only.

use super::*;
use crate::engine::capture::{Capture, Limits, SpillPolicy};
use crate::program::CliSteps;
use crate::protocol::{LineEnds, LineRange, PartialLine};
use crate::storage::spill::DataDir;

fn preview_in(text: &str, lines: u64, bytes: u64, direction: Direction) -> Preview {
    preview_with(text, lines, bytes, direction, None)
}

fn preview_with(
    text: &str,
    lines: u64,
    bytes: u64,
    direction: Direction,
    max_tokens: Option<usize>,
) -> Preview {
    let tmp = tempfile::tempdir().unwrap();
    let dir = DataDir::open(tmp.path()).unwrap();
    let mut c = Capture::new(Limits::new(lines, bytes).unwrap(), SpillPolicy::Always(dir));
    c.write(text);
    c.finish();
    Preview::build_with(&c.view(), direction, &CliSteps, max_tokens)
}

/// A JSON response on one line, its count at the start and its cursor at the end.
fn json_line(items: usize) -> String {
    let items: Vec<String> = (0..items)
        .map(|i| format!(r#"{{"id": {i}, "name": "item-{i:05}", "tags": ["a", "b"]}}"#))
        .collect();
    format!(
        r#"{{"total_count": 48213, "items": [{}], "next_page": "cursor-7f3a"}}"#,
        items.join(", ")
    )
}

/// The marker between a line's two ends.
fn marker(line: u64, left_out: u64, end: u64) -> String {
    format!("\n[... line {line} goes on: {left_out} bytes omitted; its last {end} follow ...]\n")
}

/// Checks that `p` shows line `n` of `text` by both ends, and returns them.
fn both_ends<'a>(p: &Preview, text: &'a str, n: u64) -> (&'a str, &'a str) {
    let line = text.lines().nth(n as usize - 1).unwrap();
    let part = p.partial_line.expect("a partial line");
    let ends = part.ends.expect("both ends shown");
    assert_eq!((part.line, part.line_bytes), (n, line.len() as u64));
    assert_eq!(ends.start_bytes + ends.end_bytes, part.shown_bytes);
    let start = &line[..ends.start_bytes as usize];
    let end = &line[line.len() - ends.end_bytes as usize..];
    let left_out = part.line_bytes - part.shown_bytes;
    let shown = format!("{start}{}{end}\n", marker(n, left_out, ends.end_bytes));
    assert!(p.content.contains(&shown), "{}", p.content);
    (start, end)
}

#[test]
fn a_single_long_json_line_keeps_its_count_and_its_cursor() {
    let text = format!("{}\n", json_line(3000));
    assert!(text.len() > 150_000);
    for direction in [Direction::Both, Direction::Tail] {
        let p = preview_in(&text, 2000, 51_200, direction);
        let (start, end) = both_ends(&p, &text, 1);
        assert!(start.contains(r#""total_count": 48213"#), "{direction:?}");
        assert!(end.ends_with(r#""next_page": "cursor-7f3a"}"#));
        // The budget less what the markers and the notice take, half each (the start cut
        // before a token cut in two, the end after one).
        assert!(p.content.len() <= 51_200);
        assert!(start.len() + end.len() + 1024 >= 51_200);
        assert!(start.len().abs_diff(end.len()) <= 256);
        assert!(
            p.content.starts_with(start),
            "nothing comes before the line's start"
        );
        assert!(p.content.contains(&format!(
            "showing the first {} and the last {} of line 1's {} bytes",
            start.len(),
            end.len(),
            text.len() - 1
        )));
        assert!(p.shown.is_empty());
    }
    // A head shows the line's start: where the output begins, and where to read on from.
    let p = preview_in(&text, 2000, 51_200, Direction::Head);
    let part = p.partial_line.unwrap();
    assert_eq!(part.ends, None);
    assert!(p.content.starts_with(r#"{"total_count": 48213"#));
    assert!(p.content.contains("\n[... line 1 goes on: "));
    assert!(!p.content.contains("cursor-7f3a"));
}

#[test]
fn a_long_last_line_after_a_few_short_ones_shows_both_ends() {
    let text = format!("GET /search?q=items\nHTTP 200\n{}", json_line(3000));
    for direction in [Direction::Both, Direction::Tail] {
        let p = preview_in(&text, 2000, 51_200, direction);
        let (start, end) = both_ends(&p, &text, 3);
        assert!(start.starts_with(r#"{"total_count": 48213"#));
        assert!(end.ends_with("cursor-7f3a\"}"));
        if direction == Direction::Both {
            assert!(p.content.starts_with("GET /search?q=items\nHTTP 200\n"));
            assert_eq!(p.shown, vec![LineRange { first: 1, last: 2 }]);
        }
    }
}

#[test]
fn a_long_line_among_short_ones_shows_both_ends_between_them() {
    let before = "$ curl -s api/items\nconnected\n";
    let after = "exit 0\ndone in 2.1s\n";
    let text = format!("{before}{}\n{after}", json_line(3000));
    for direction in [Direction::Both, Direction::Tail] {
        let p = preview_in(&text, 2000, 51_200, direction);
        let (start, end) = both_ends(&p, &text, 3);
        assert!(start.contains("total_count"));
        let after_ends = format!("{end}\n{after}\n[spillway: ");
        assert!(p.content.contains(&after_ends), "{direction:?}");
        assert!(p.shown.contains(&LineRange { first: 4, last: 5 }));
        assert_eq!(
            p.omitted_lines,
            if direction == Direction::Both { 1 } else { 3 }
        );
        // The notice reads on from the first line not shown whole.
        let read_from = if direction == Direction::Both { 3 } else { 1 };
        assert!(
            p.content
                .contains(&format!("read on from line {read_from}:"))
        );
    }
    let both = preview_in(&text, 2000, 51_200, Direction::Both);
    assert!(both.content.starts_with(before));
    assert!(
        !both.content.contains(" omitted (lines "),
        "nothing else left out"
    );
}

#[test]
fn a_long_line_deep_in_the_tail_shares_what_the_tail_lines_leave() {
    // Many short lines after it: the tail takes them first, and the line gets what is left
    // when that is over a fifth of the budget. Lines that differ in their letters, kept
    // without a spill, so nothing folds.
    let record = |i: u8| {
        let name = [b'a' + i % 26, b'a' + i / 26];
        format!("wrote {}\n", String::from_utf8_lossy(&name))
    };
    let mut text = format!("{}\n", json_line(500));
    text.extend((0..40).map(record));
    let mut c = Capture::new(Limits::new(2000, 8192).unwrap(), SpillPolicy::Never);
    c.write(&text);
    c.finish();
    let p = Preview::build(&c.view(), Direction::Tail, &CliSteps);
    let (start, _) = both_ends(&p, &text, 1);
    assert!(start.starts_with(r#"{"total_count""#));
    assert_eq!(p.shown, vec![LineRange { first: 2, last: 41 }]);
    let shown: usize = (0..40).map(|i| record(i).len()).sum();
    assert!(shown + p.partial_line.unwrap().shown_bytes as usize <= 8192);
}

#[test]
fn a_long_first_line_shows_both_ends_in_its_half() {
    // Longer than the whole budget, so its end is neither in the head nor in the tail buffer:
    // the capture kept it when the line ended.
    let text = format!("{}\nsecond\nthird\n", json_line(3000));
    let p = preview_in(&text, 2000, 51_200, Direction::Both);
    assert!(p.content.starts_with(r#"{"total_count": 48213"#));
    let line = text.lines().next().unwrap();
    let start_end = p.content.find("\n[... line 1 goes on: ").unwrap();
    let start = &p.content[..start_end];
    assert!(start.len() <= 12_800 && line.starts_with(start));
    let marker_end = start_end + p.content[start_end + 1..].find('\n').unwrap() + 2;
    let end = p.content[marker_end..].split('\n').next().unwrap();
    assert!(end.ends_with(r#""next_page": "cursor-7f3a"}"#) && line.ends_with(end));
    assert!(start.len() + end.len() <= 25_600);
    assert!(p.content.contains(&format!(
        "\n[... line 1 goes on: {} bytes omitted; its last {} follow ...]\n{end}\nsecond\nthird\n",
        line.len() - start.len() - end.len(),
        end.len()
    )));
    // A head shows its start only.
    let head = preview_in(&text, 2000, 51_200, Direction::Head);
    assert!(!head.content.contains("cursor-7f3a"));
    assert!(head.content.contains("\n[... line 1 goes on: "));
}

#[test]
fn both_ends_are_cut_at_char_boundaries() {
    for pad in 0..4 {
        let line = format!("{}{}", "x".repeat(pad), "日本語のテキスト".repeat(400));
        let text = format!("first\n{line}\n");
        for bytes in [64, 101, 333, 1000] {
            let p = preview_in(&text, 10, bytes, Direction::Tail);
            let part = p.partial_line.unwrap();
            let ends = part.ends.unwrap();
            assert!(line.is_char_boundary(ends.start_bytes as usize));
            assert!(line.is_char_boundary(line.len() - ends.end_bytes as usize));
            assert!(part.shown_bytes <= bytes);
            both_ends(&p, &text, 2);
        }
    }
}

#[test]
fn a_budget_too_small_to_share_shows_the_end_alone() {
    let text = format!("{}\n", "word ".repeat(200));
    let p = preview_in(&text, 10, 40, Direction::Tail);
    let part = p.partial_line.unwrap();
    assert_eq!(part.ends, None);
    assert!(p.content.contains("[... line 1 is 1000 bytes; its last "));
}

#[test]
fn a_token_budget_holds_both_ends() {
    let text = format!("{}\n", json_line(3000));
    for budget in [100, 1000, 5000] {
        let p = preview_with(&text, 2000, 51_200, Direction::Both, Some(budget));
        let (start, end) = both_ends(&p, &text, 1);
        let shown = format!("{start}{end}");
        assert!(crate::engine::tokens::count(&shown) <= budget, "{budget}");
        assert!(start.contains("total_count"), "{budget}: {start:?}");
    }
}

#[test]
fn the_json_says_which_bytes_are_shown_and_only_when_both_ends_are() {
    let text = format!("{}\n", json_line(3000));
    let p = preview_in(&text, 2000, 51_200, Direction::Both);
    let value = serde_json::to_value(&p).unwrap();
    let part: PartialLine = serde_json::from_value(value["partial_line"].clone()).unwrap();
    assert_eq!(Some(part), p.partial_line);
    let ends = &value["partial_line"]["ends"];
    assert!(ends["start_bytes"].as_u64().unwrap() > 0);
    assert!(ends["end_bytes"].as_u64().unwrap() > 0);
    let head = preview_in(&text, 2000, 51_200, Direction::Head);
    let value = serde_json::to_value(&head).unwrap();
    let keys: Vec<&String> = value["partial_line"].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["line", "line_bytes", "shown_bytes"]);
    // A client of the old shape reads the new one.
    let old = r#"{"line": 1, "shown_bytes": 3, "line_bytes": 9}"#;
    let part: PartialLine = serde_json::from_str(old).unwrap();
    assert_eq!(part.ends, None);
    let _ = LineEnds {
        start_bytes: 1,
        end_bytes: 2,
    };
}
