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

/// Links the `spillway` executable at a fixed address (`-no-pie`) and statically on Linux
/// with glibc, unless `SPILLWAY_PIE=1` asks for a position-independent, dynamically linked one
/// (a distribution whose policy wants every executable so).
///
/// An agent host starts the binary once per command. A position-independent one spends about
/// 0.7 ms of CPU of each start on its 27,939 relative relocations: nearly all are pointers in
/// `.data.rel.ro` (480 KiB), and writing them costs a copy-on-write page fault for every page
/// they touch. At a fixed address the linker applies them once. A dynamically linked one
/// spends about 0.9 ms more of each start on the shared libraries (three opened, mapped and
/// protected, some 90 page faults, their mappings torn down at exit). The heap, stack and
/// mappings are still placed at random; only the executable's own image is not.
fn link_position_dependent() {
    println!("cargo::rerun-if-env-changed=SPILLWAY_PIE");
    let is = |key: &str, value: &str| std::env::var(key).is_ok_and(|v| v == value);
    let glibc_linux = is("CARGO_CFG_TARGET_OS", "linux") && is("CARGO_CFG_TARGET_ENV", "gnu");
    let linked = if !glibc_linux {
        "default"
    } else if is("SPILLWAY_PIE", "1") {
        "pie"
    } else {
        println!("cargo::rustc-link-arg-bins=-no-pie");
        if link_statically() {
            "static"
        } else {
            "dynamic"
        }
    };
    // What the tests expect of the executable (`tests/executable.rs`).
    println!("cargo::rustc-env=SPILLWAY_LINKED={linked}");
}

/// Links the executable against glibc's and libgcc's static archives.
///
/// rustc's own way, `-C target-feature=+crt-static`, has to be given in `RUSTFLAGS`, which
/// cargo also applies to the build's procedural macros unless `--target` is named, and a
/// procedural macro cannot be linked statically. Without it, rustc asks for the system
/// libraries as shared ones (`-Bdynamic -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc`), so
/// `-static` alone would link them dynamically with no loader named, an executable that
/// crashes at once. So a directory that holds, under those names, only static archives is
/// searched first (a linker takes a library from the first directory that has either form),
/// with libgcc's unwinder standing for `libgcc_s`; `-static` then gives the C start-up
/// files of a static executable. With `-static` alone (a build with `crt-static`) rustc
/// names the static archives itself.
///
/// Where the C toolchain has no static glibc, the executable stays dynamically linked, with
/// a warning. Returns whether it is linked statically.
fn link_statically() -> bool {
    let features = std::env::var("CARGO_CFG_TARGET_FEATURE").unwrap_or_default();
    if !features.split(',').any(|feature| feature == "crt-static") {
        match static_archives() {
            Ok(dir) => {
                println!("cargo::rustc-link-arg-bins=-L{}", dir.display());
                // What libc's archive needs back from libgcc's, after it.
                println!("cargo::rustc-link-arg-bins=-lgcc_eh");
                println!("cargo::rustc-link-arg-bins=-lgcc");
                println!("cargo::rustc-link-arg-bins=-lc");
            }
            Err(why) => {
                println!("cargo::warning=spillway is linked dynamically: {why}");
                return false;
            }
        }
    }
    println!("cargo::rustc-link-arg-bins=-static");
    true
}

/// The libraries rustc links a Linux executable with, and the static archive standing for
/// each.
const ARCHIVES: [(&str, &str); 7] = [
    ("gcc_s", "libgcc_eh.a"),
    ("util", "libutil.a"),
    ("rt", "librt.a"),
    ("pthread", "libpthread.a"),
    ("m", "libm.a"),
    ("dl", "libdl.a"),
    ("c", "libc.a"),
];

/// A directory in `OUT_DIR` with a `libNAME.a` link to the C toolchain's archive for each of
/// [`ARCHIVES`].
fn static_archives() -> Result<std::path::PathBuf, String> {
    let out = std::env::var("OUT_DIR").map_err(|e| e.to_string())?;
    let dir = Path::new(&out).join("static-libs");
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    for (name, archive) in ARCHIVES {
        let found = archive_path(archive)?;
        let link = dir.join(format!("lib{name}.a"));
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&found, &link)
            .map_err(|e| format!("{}: {e}", link.display()))?;
    }
    Ok(dir)
}

/// Where the C compiler cargo links with finds `archive`.
fn archive_path(archive: &str) -> Result<std::path::PathBuf, String> {
    let cc = std::env::var("RUSTC_LINKER")
        .or_else(|_| std::env::var("CC"))
        .unwrap_or_else(|_| "cc".to_string());
    let printed = std::process::Command::new(&cc)
        .arg(format!("-print-file-name={archive}"))
        .output()
        .map_err(|e| format!("{cc}: {e}"))?;
    let path = std::path::PathBuf::from(String::from_utf8_lossy(&printed.stdout).trim());
    // A compiler that does not find the file prints its name back.
    if printed.status.success() && path.is_absolute() && path.is_file() {
        Ok(path)
    } else {
        Err(format!("{cc} finds no {archive}"))
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
