//! Properties of the whole engine (normalise -> capture -> preview) over random inputs,
//! random limits and random chunkings.

use proptest::prelude::*;
use spillway::capture::{Capture, Limits, SpillPolicy};
use spillway::normalise::{NormaliseOptions, Normaliser, normalise};
use spillway::preview::{CliSteps, Direction, Preview};
use spillway::spill::DataDir;

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

struct Run {
    preview: Preview,
    spill: String,
}

/// Runs the engine over `input` cut at `cuts`, spilling into `root`.
fn run(
    input: &[u8],
    cuts: &[usize],
    opts: NormaliseOptions,
    limits: Limits,
    dir: Direction,
    root: &std::path::Path,
) -> Run {
    let mut normaliser = Normaliser::new(opts);
    let mut capture = Capture::new(limits, SpillPolicy::Always(DataDir::open(root).unwrap()));
    let mut text = String::new();
    let mut start = 0;
    let mut bounds: Vec<usize> = cuts.iter().map(|c| c % (input.len() + 1)).collect();
    bounds.sort_unstable();
    bounds.push(input.len());
    for end in bounds {
        normaliser.feed(&input[start..end], &mut text);
        capture.write(&text);
        text.clear();
        start = end;
    }
    normaliser.finish(&mut text);
    capture.write(&text);
    capture.finish();
    let preview = Preview::build(&capture.view(), dir, &CliSteps);
    let spill = std::fs::read_to_string(preview.spill_path.as_ref().unwrap()).unwrap();
    Run { preview, spill }
}

fn line_range(spill: &str, first: u64, last: u64) -> String {
    spill
        .split_inclusive('\n')
        .skip(first as usize - 1)
        .take((last - first + 1) as usize)
        .collect()
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
        let tmp = tempfile::tempdir().unwrap();
        let opts = NormaliseOptions {
            raw,
            max_line_bytes: if small_line_cap { 64 } else { NormaliseOptions::default().max_line_bytes },
        };
        let limits = Limits::new(max_lines, max_bytes).unwrap();
        let r = run(&input, &cuts, opts, limits, dir, tmp.path());
        let p = &r.preview;

        // The spill is exactly the normalised output, however the input was chunked.
        prop_assert_eq!(&r.spill, &normalise(&input, opts));
        prop_assert_eq!(p.total_bytes, r.spill.len() as u64);
        prop_assert_eq!(p.total_lines, r.spill.split_inclusive('\n').count() as u64);

        let fits = p.total_bytes <= max_bytes && p.total_lines <= max_lines;
        prop_assert_eq!(p.truncated, !fits);
        if fits {
            prop_assert_eq!(&p.content, &r.spill);
            return Ok(());
        }

        // Every shown range is the spill's own lines, in order, appearing in the content,
        // and together they respect both limits.
        let mut lines = 0;
        let mut bytes = 0;
        let mut prev_last = 0;
        for range in &p.shown {
            prop_assert!(range.first > prev_last && range.first <= range.last);
            prop_assert!(range.last <= p.total_lines);
            prev_last = range.last;
            let text = line_range(&r.spill, range.first, range.last);
            prop_assert!(p.content.contains(&text));
            lines += range.last - range.first + 1;
            bytes += text.len() as u64;
        }
        prop_assert!(lines <= max_lines);
        prop_assert!(bytes <= max_bytes);
        prop_assert_eq!(p.omitted_lines, p.total_lines - lines);
        if let Some(part) = p.partial_line {
            prop_assert!(p.shown.is_empty());
            prop_assert!(part.shown_bytes <= max_bytes && part.shown_bytes <= part.line_bytes);
        } else {
            prop_assert!(!p.shown.is_empty());
        }
        prop_assert!(p.content.contains(p.spill_path.as_deref().unwrap()));

        // Chunking never changes the preview (but for the spill's own name).
        let whole = run(&input, &[], opts, limits, dir, tmp.path());
        let same_path = whole.preview.content.replace(
            whole.preview.spill_path.as_deref().unwrap(),
            p.spill_path.as_deref().unwrap(),
        );
        prop_assert_eq!(&same_path, &p.content);
        prop_assert_eq!(&whole.preview.shown, &p.shown);
    }
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
