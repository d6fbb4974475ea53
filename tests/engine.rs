//! Properties of the whole engine (normalise -> capture -> preview) over random inputs,
//! random limits and random chunkings; the properties themselves are in `invariants.rs`,
//! which the fuzz targets check too.

use proptest::prelude::*;
use spillway::capture::Limits;
use spillway::normalise::NormaliseOptions;
use spillway::preview::Direction;

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
