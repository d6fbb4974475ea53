//! Lays out o200k's vocabulary as static tables (`src/engine/o200k/`), so that no spillway
//! process builds it at run time: `tiktoken-rs`'s `CoreBPE` (tens of MiB, the only way to the
//! vocabulary's bytes) is built here, once per compile, and its tokens written to `OUT_DIR`.

#[path = "src/engine/o200k/layout.rs"]
mod layout;

use std::path::Path;

use layout::{RANK_BITS, TABLE_SLOTS, first_slot, hash, tag};

/// Ranks looked up past the last one found before the vocabulary is taken to have ended
/// (o200k's ranks have a gap of 19 before its last special token).
const RANK_GAP: u32 = 1000;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-changed=src/engine/o200k/layout.rs");
    link_position_dependent();
    let bpe = tiktoken_rs::o200k_base()?;
    let special = bpe.special_tokens();
    let (mut bytes, mut ends, mut table) = (Vec::new(), Vec::new(), vec![0u32; TABLE_SLOTS]);
    let (mut rank, mut last_found) = (0u32, 0u32);
    while rank - last_found <= RANK_GAP {
        if let Ok(token) = bpe.decode_bytes(&[rank]) {
            last_found = rank;
            // Special tokens (`<|endoftext|>`) are not made from text by `encode_ordinary`.
            if !std::str::from_utf8(&token).is_ok_and(|text| special.contains(text)) {
                bytes.extend_from_slice(&token);
                insert(&mut table, &token, rank)?;
            }
        }
        ends.extend_from_slice(&u32::try_from(bytes.len())?.to_le_bytes());
        rank += 1;
    }
    ends.truncate((last_found as usize + 1) * 4);
    let out = std::env::var("OUT_DIR")?;
    let out = Path::new(&out);
    std::fs::write(out.join("o200k_bytes.bin"), &bytes)?;
    std::fs::write(out.join("o200k_ends.bin"), &ends)?;
    let table: Vec<u8> = table.iter().flat_map(|slot| slot.to_le_bytes()).collect();
    std::fs::write(out.join("o200k_table.bin"), table)?;
    Ok(())
}

/// Links the `spillway` executable at a fixed address (`-no-pie`) on Linux with glibc, unless
/// `SPILLWAY_PIE=1` asks for a position-independent one (a distribution whose policy wants
/// every executable so).
///
/// An agent host starts the binary once per command, and a position-independent one spends
/// about 0.7 ms of CPU of each start on its 27,939 relative relocations: nearly all are
/// pointers in `.data.rel.ro` (480 KiB), and writing them costs a copy-on-write page fault for
/// every page they touch. At a fixed address the linker applies them once. The shared
/// libraries, heap, stack and mappings are still placed at random; only the executable's own
/// image is not.
///
/// A static build (`-C target-feature=+crt-static`, see the README) is linked at a fixed
/// address too: `-static` beside `-no-pie`, for alone `-no-pie` would turn rustc's
/// `-static-pie` into an executable that asks for a dynamic loader it has no table for, and
/// crashes at its first instruction.
fn link_position_dependent() {
    println!("cargo::rerun-if-env-changed=SPILLWAY_PIE");
    let is = |key: &str, value: &str| std::env::var(key).is_ok_and(|v| v == value);
    let glibc_linux = is("CARGO_CFG_TARGET_OS", "linux") && is("CARGO_CFG_TARGET_ENV", "gnu");
    if glibc_linux && !is("SPILLWAY_PIE", "1") {
        println!("cargo::rustc-link-arg-bins=-no-pie");
        let features = std::env::var("CARGO_CFG_TARGET_FEATURE").unwrap_or_default();
        if features.split(',').any(|feature| feature == "crt-static") {
            println!("cargo::rustc-link-arg-bins=-static");
        }
    }
}

/// Puts `rank` in the first free slot from its token's own.
fn insert(table: &mut [u32], token: &[u8], rank: u32) -> Result<(), String> {
    if rank + 1 >= 1 << RANK_BITS {
        return Err(format!("rank {rank} does not fit in {RANK_BITS} bits"));
    }
    let h = hash(token);
    let mut i = first_slot(h);
    while table[i] != 0 {
        i = (i + 1) % TABLE_SLOTS;
    }
    table[i] = (tag(h) << RANK_BITS) | (rank + 1);
    Ok(())
}
