//! The executable as `build.rs` links it (on Linux with glibc, statically and at a fixed
//! address, so that an agent host's every start maps no shared library and applies no
//! relocation; see docs/security.md), unless the build asked for `SPILLWAY_PIE=1` or the C
//! toolchain has no static glibc; and what its own start-up (`src/main.rs`) does in place of
//! Rust's: closed standard descriptors opened on `/dev/null`, `SIGPIPE` ignored.

/// `ET_EXEC` of `<elf.h>`: an executable linked at a fixed address.
const ET_EXEC: u16 = 2;
/// `PT_INTERP` of `<elf.h>`: the program header naming a dynamic loader.
const PT_INTERP: u32 = 3;
/// `PT_DYNAMIC` of `<elf.h>`: the program header of a dynamic section.
const PT_DYNAMIC: u32 = 2;

fn u16_at(bytes: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(bytes[at..at + 2].try_into().unwrap())
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap())
}

fn u64_at(bytes: &[u8], at: usize) -> usize {
    usize::try_from(u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap())).unwrap()
}

/// The ELF type and the program headers' types of a little-endian 64-bit ELF file.
fn elf_types(path: &str) -> (u16, Vec<u32>) {
    use std::io::Read;
    let mut head = vec![0; 64 * 1024];
    let mut file = std::fs::File::open(path).unwrap();
    let read = file.read(&mut head).unwrap();
    head.truncate(read);
    assert_eq!(&head[..4], b"\x7fELF", "{path} is not an ELF file");
    assert_eq!(
        (head[4], head[5]),
        (2, 1),
        "{path}: not 64-bit little-endian"
    );
    let (phoff, phentsize, phnum) = (
        u64_at(&head, 32),
        usize::from(u16_at(&head, 54)),
        usize::from(u16_at(&head, 56)),
    );
    let kinds = (0..phnum)
        .map(|i| u32_at(&head, phoff + i * phentsize))
        .collect();
    (u16_at(&head, 16), kinds)
}

#[cfg(all(target_os = "linux", target_env = "gnu", target_arch = "x86_64"))]
#[test]
fn the_executable_is_static_at_a_fixed_address() {
    // What `build.rs` linked: a build asked for position independence (`SPILLWAY_PIE=1`), or
    // on a C toolchain with no static glibc, says so (a cargo warning) and links dynamically.
    match env!("SPILLWAY_LINKED") {
        "static" => {}
        other => {
            eprintln!("SKIPPED: build.rs linked this executable {other}, not static");
            return;
        }
    }
    let path = env!("CARGO_BIN_EXE_spillway");
    let (kind, headers) = elf_types(path);
    assert_eq!(kind, ET_EXEC, "{path} is not linked at a fixed address");
    assert!(
        !headers.contains(&PT_INTERP) && !headers.contains(&PT_DYNAMIC),
        "{path} is linked dynamically: program headers {headers:?}"
    );
    let version = std::process::Command::new(path)
        .arg("--version")
        .output()
        .unwrap();
    assert!(version.status.success(), "{version:?}");
}

/// A `truncate` started with its standard output closed opens `/dev/null` in its place at its
/// start: its preview goes nowhere, not into the first file it opens, its spill, which holds
/// the input byte for byte.
#[test]
fn a_closed_standard_output_is_not_the_spill() {
    let sandbox = crate::helper::Sandbox::new();
    let input = crate::helper::numbered(20_000);
    let mut truncate = sandbox.spillway();
    truncate.arg("truncate");
    // SAFETY: close(2) between fork and exec touches nothing of the parent's.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut truncate, || {
            libc::close(1);
            Ok(())
        });
    }
    let out = crate::helper::run_with_input(truncate, input.as_bytes());
    assert!(out.status.success(), "{out:?}");
    let spills = sandbox.spills();
    assert_eq!(spills.len(), 1, "{spills:?}");
    let spilled = std::fs::read(&spills[0]).unwrap();
    assert!(spilled == input.as_bytes(), "the spill is not the input");
}

/// spillway's own status is 0 when what reads its output goes away early: a closed pipe is an
/// error it handles (`SIGPIPE` is ignored), not a signal that kills it.
#[test]
fn a_reader_gone_early_is_not_a_failure() {
    let sandbox = crate::helper::Sandbox::new();
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg(
            r#"seq 1 200000 | "$0" truncate --max-bytes 10000000 --max-lines 1000000 | head -n 1;
               echo "status ${PIPESTATUS[1]}""#,
        )
        .arg(env!("CARGO_BIN_EXE_spillway"))
        .env("SPILLWAY_DATA_DIR", sandbox.data_dir())
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "1\nstatus 0\n",
        "{out:?}"
    );
}
