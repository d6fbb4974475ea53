//! Rule 4 of a preview: the needle survives a crowd. Each case hides one actionable block in
//! the omitted middle of an output crowded with other candidates or noise.

use super::*;
use crate::engine::capture::{Capture, Limits, SpillPolicy};
use crate::engine::test_text::letters;
use crate::program::CliSteps;
use crate::storage::spill::DataDir;

fn preview(text: &str, lines: u64, bytes: u64) -> Preview {
    preview_in(text, lines, bytes, Direction::Both)
}

fn preview_in(text: &str, lines: u64, bytes: u64, direction: Direction) -> Preview {
    let tmp = tempfile::tempdir().unwrap();
    let dir = DataDir::open(tmp.path()).unwrap();
    let mut c = Capture::new(Limits::new(lines, bytes).unwrap(), SpillPolicy::Always(dir));
    c.write(text);
    c.finish();
    Preview::build(&c.view(), direction, &CliSteps)
}

/// The notice's count of omitted lines that look like errors (0 without one).
fn more_count(p: &Preview) -> u64 {
    p.content
        .split('\n')
        .find_map(|l| {
            l.split_once(" more omitted line")
                .and_then(|(n, _)| n.parse().ok())
        })
        .unwrap_or(0)
}

#[test]
fn a_unique_root_cause_among_hundreds_of_one_error_is_shown() {
    let ts7006 = |i: usize| {
        format!(
            "src/{}.ts({i},5): error TS7006: Parameter '{}' implicitly has an 'any' type.\n",
            letters(i * 7),
            letters(i)
        )
    };
    let mut text: String = (0..250).map(ts7006).collect();
    let root = "src/app.ts(1,20): error TS2307: Cannot find module 'lodash' or its corresponding type declarations.\n";
    text.push_str(root);
    text.extend((250..499).map(ts7006));
    text.push_str("Found 500 errors in 500 files.\n");
    let p = preview(&text, 100, 51200);
    assert!(p.content.contains(root), "{}", p.content);
    let omitted = p.omitted_lines;
    let more = more_count(&p);
    assert!(more <= omitted, "{more} > {omitted}");
    // Exactly the omitted TS7006 lines that are not shown as highlights.
    let shown_ts7006 = p.content.matches("error TS7006").count() as u64;
    assert_eq!(more, 499 - shown_ts7006);
}

#[test]
fn a_traceback_in_a_flood_keeps_its_innermost_frame() {
    let log = |i: usize| {
        format!(
            "2026-11-23 12:00:{:02} INFO worker handled job {i} in {}ms\n",
            i % 60,
            i * 7 % 900
        )
    };
    let mut text: String = (0..2000).map(log).collect();
    let traceback = "Traceback (most recent call last):\n  File \"/srv/app/main.py\", line 88, in <module>\n    run()\n  File \"/srv/app/jobs.py\", line 41, in run\n    total = parse(row)\n  File \"/srv/app/parse.py\", line 12, in parse\n    return int(row[\"qty\"]) / int(row[\"n\"])\nZeroDivisionError: division by zero\n";
    text.push_str(traceback);
    text.extend((2000..4000).map(log));
    let p = preview(&text, 60, 51200);
    let innermost = "  File \"/srv/app/parse.py\", line 12, in parse\n    return int(row[\"qty\"]) / int(row[\"n\"])\nZeroDivisionError: division by zero\n";
    assert!(p.content.contains(innermost), "{}", p.content);
}

#[test]
fn sanitizer_and_valgrind_reports_keep_their_first_frame() {
    let noise = |i: usize| format!("[{i:05}] processed batch {i} of 9000 ok\n");
    let mut text: String = (0..3000).map(noise).collect();
    text.push_str("=================================================================\n==4242==ERROR: AddressSanitizer: heap-buffer-overflow on address 0x602000000014 at pc 0x4c3b1f bp 0x7ffd sp 0x7ffc\nREAD of size 4 at 0x602000000014 thread T0\n    #0 0x4c3b1e in frame_len /src/frame.c:34:14\n    #1 0x4c2a10 in main /src/main.c:9:3\n");
    text.extend((3000..6000).map(noise));
    text.push_str("==4243== Invalid read of size 8\n==4243==    at 0x1091A6: next_token (lexer.c:77)\n==4243==    by 0x109230: main (main.c:12)\n");
    text.extend((6000..9000).map(noise));
    let p = preview(&text, 40, 51200);
    assert!(
        p.content
            .contains("==4242==ERROR: AddressSanitizer: heap-buffer-overflow")
            && p.content
                .contains("    #0 0x4c3b1e in frame_len /src/frame.c:34:14\n"),
        "{}",
        p.content
    );
    assert!(
        p.content.contains(
            "==4243== Invalid read of size 8\n==4243==    at 0x1091A6: next_token (lexer.c:77)\n"
        ),
        "{}",
        p.content
    );
}

#[test]
fn a_rustc_error_keeps_its_location_and_note() {
    let noise = |i: usize| format!("   Compiling crate{i} v0.{i}.0\n");
    let mut text: String = (0..800).map(noise).collect();
    let error = "error[E0308]: mismatched types\n --> src/main.rs:4:18\n  |\n4 |     let x: i32 = \"a\";\n  |            ---   ^^^ expected `i32`, found `&str`\n  |            |\n";
    text.push_str(error);
    text.extend((800..1600).map(noise));
    let p = preview(&text, 40, 51200);
    assert!(p.content.contains(error), "{}", p.content);
}

#[test]
fn error_level_log_lines_and_tool_failures_are_candidates() {
    let noise = |i: usize| format!("2026-11-23T12:00:00Z INFO request {i} ok\n");
    for needle in [
        "2026-11-23T12:00:01Z ERROR db: connection refused (os error 111)",
        "fatal: unable to access 'https://example.invalid/x.git/': Could not resolve host",
        "ERROR: No matching distribution found for nopenope==9.9",
        "Error: ENOENT: no such file or directory, open '/srv/app/config.json'",
        "tests/test_io.py::test_roundtrip FAILED                                  [ 52%]",
        "Segmentation fault (core dumped)",
    ] {
        let mut text: String = (0..3000).map(noise).collect();
        text.push_str(needle);
        text.push('\n');
        text.extend((3000..6000).map(noise));
        let p = preview(&text, 40, 51200);
        assert!(p.content.contains(needle), "{needle}: {}", p.content);
    }
}

#[test]
fn counts_in_the_notice_never_exceed_the_omitted_lines() {
    let mut text = String::new();
    for i in 0..600 {
        text.push_str(&format!("error: failure in {}\n", letters(i)));
    }
    let p = preview(&text, 20, 51200);
    assert!(more_count(&p) <= p.omitted_lines);
    let shown_errors = p.content.matches("error: failure in").count() as u64;
    assert_eq!(more_count(&p), 600 - shown_errors);
}

#[test]
fn a_partial_line_never_starts_or_ends_inside_a_token() {
    let token = format!("ghp_{}", "Zq8Xw7Vu6Ts5Rq4Po3Nm2Lk1Jh0Gf9Ed8Cb7A");
    let line = format!(
        "{} token={token} and then the end of it",
        "filler ".repeat(3000)
    );
    // Tail: the last 50 bytes would start inside the token.
    let tail = preview_in(&format!("{line}\n"), 10, 50, Direction::Tail);
    let part = tail.partial_line.unwrap();
    let shown = &line[line.len() - part.shown_bytes as usize..];
    assert!(!shown.contains("Cb7A"), "{shown:?}");
    assert!(shown.starts_with(' '), "{shown:?}");
    // Head: a token at the cut is left out whole.
    let text = format!("export GITHUB_TOKEN={token} {}\n", "x ".repeat(5000));
    let head = preview_in(&text, 10, 40, Direction::Head);
    let part = head.partial_line.unwrap();
    assert_eq!(
        &text[..part.shown_bytes as usize],
        "export ",
        "{}",
        head.content
    );
}

/// A linter's routine findings, several kinds of each, numbered as the linter numbers lines.
fn routine_finding(i: usize) -> String {
    let message = [
        "E501 line too long (88 > 79 characters)",
        "W291 trailing whitespace",
        "E231 missing whitespace after ','",
        "E302 expected 2 blank lines, found 1",
    ][i % 4];
    format!("settings.py:{}:{}: {message}\n", i / 3 + 1, i % 7 + 1)
}

#[test]
fn a_line_no_pattern_names_is_shown_when_it_is_rare_among_routine_ones() {
    let needle = "settings.py:172:12: F821 undefined name 'undefined_total'\n";
    let mut text: String = (0..850).map(routine_finding).collect();
    text.push_str(needle);
    text.extend((850..1700).map(routine_finding));
    for (lines, bytes) in [(2000, 51200), (100, 4096), (50, 2048)] {
        let p = preview(&text, lines, bytes);
        assert!(p.truncated);
        assert!(p.content.contains(needle), "{lines}/{bytes}: {}", p.content);
        // It is shown at its own line number, as one of the lines shown.
        assert!(p.shown.iter().any(|r| r.first <= 851 && 851 <= r.last));
        // It is not said to look like an error: no pattern matches it.
        assert_eq!(more_count(&p), 0);
    }
}

#[test]
fn a_surprising_needle_comes_before_a_restatement_when_room_is_short() {
    // One failed test among 3,000 passing, after a dozen restatements of failures (make's,
    // each of its own kind, but all of one shape, so none is surprising), all far from the
    // ends: more than the highlights' room holds, which takes the failure first.
    // Too few letters for the outline to fold them as a similar run.
    let ok = |i: usize| format!("ok {i} - t{i}\n");
    let mut text: String = (0..1000).map(ok).collect();
    for i in 0..12 {
        let target = format!("t{}1", letters(i + 100));
        text.push_str(&format!("make: *** [{target}] Error 1\n"));
        text.extend((1000 + i * 10..1010 + i * 10).map(ok));
    }
    text.push_str("not ok 1500 - t1500\n");
    text.extend((1500..3000).map(ok));
    let p = preview(&text, 50, 2048);
    assert!(p.content.contains("not ok 1500 - t1500\n"), "{}", p.content);
}

/// Under a budget of a few lines, the highlights' fifth of it was no line at all: the tail
/// showed routine lines while the error waited, omitted, with lines to spare.
#[test]
fn a_few_lines_of_budget_show_the_error_before_routine_lines() {
    let mut text = String::from("\nerror[E0308]: mismatched types\n  --> src/a.rs:1:2\n\r\n\r\n ");
    text.extend((0..8).map(|i| format!("Downloading step {i} of 8\n")));
    text.push(' ');
    let p = preview_in(&text, 13, 777, Direction::Tail);
    assert!(
        p.content.contains("error[E0308]: mismatched types"),
        "{}",
        p.content
    );
    assert!(p.content.lines().count() <= 13, "{}", p.content);
    assert!(p.shown.last().is_some_and(|r| r.last == p.total_lines));
}
