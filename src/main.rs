//! The `spillway` executable: its entry point, and what of Rust's own start-up spillway needs,
//! done here instead.
//!
//! An agent host starts `spillway` once per command, so its start is on every command's path.
//! Rust's start-up (`lang_start`) also installs a handler that names a thread whose stack
//! overflowed; to find the main thread's stack for it, glibc reads and parses
//! `/proc/self/maps` (`pthread_getattr_np`, 0.05 M instructions and four system calls), and
//! with the handler installed every thread the daemon starts, two a run, maps an alternate
//! signal stack as well. Without it a stack overflow still ends the process, by `SIGSEGV` and
//! the guard page below each stack, only without the message. The rest of that start-up,
//! which spillway does need, is here: standard descriptors that are closed are opened on
//! `/dev/null`, `SIGPIPE` is ignored (a closed pipe is an error to handle, not a death), a
//! panic ends the process with status 101, and standard output's buffer is flushed at the
//! end.
#![cfg_attr(not(test), no_main)]

use std::process::ExitCode;

/// The entry point and what it does before and after spillway's own `main` (not in a test
/// build, which has the test harness's `main`).
#[cfg(not(test))]
mod start {
    use std::ffi::{c_char, c_int};
    use std::process::ExitCode;

    /// The status of a process whose `main` panicked, as Rust's start-up gives it.
    const PANICKED: u8 = 101;

    /// The C entry point, in place of Rust's.
    #[unsafe(no_mangle)]
    extern "C" fn main(_argc: c_int, _argv: *const *const c_char) -> c_int {
        open_closed_standard_fds();
        // SAFETY: installing SIG_IGN runs no code in signal context, and no other thread
        // exists yet to be changing the disposition meanwhile.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
        let code = std::panic::catch_unwind(spillway::client::cli::main)
            .unwrap_or(ExitCode::from(PANICKED));
        let _ = std::io::Write::flush(&mut std::io::stdout());
        c_int::from(super::status_of(code))
    }

    /// Opens `/dev/null` on each of the standard descriptors (0, 1, 2) that is closed, lowest
    /// first, so that each takes its place: else the first file spillway opens would take it,
    /// and text meant for the terminal would be written into that file (a `truncate`'s preview
    /// into its spill). Aborts, as Rust's start-up does, when `/dev/null` cannot be opened.
    fn open_closed_standard_fds() {
        for fd in 0..=2 {
            // SAFETY: F_GETFD reads a descriptor's flags and touches no memory.
            let closed = unsafe { libc::fcntl(fd, libc::F_GETFD) } == -1
                && std::io::Error::last_os_error().raw_os_error() == Some(libc::EBADF);
            // SAFETY: a constant, NUL-terminated path; the descriptor is left open on purpose.
            if closed && unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDWR) } != fd {
                std::process::abort();
            }
        }
    }
}

/// The exit status `code` stands for: `ExitCode` does not give its value back on stable
/// Rust, but compares with the codes made from each status.
fn status_of(code: ExitCode) -> u8 {
    (0..=u8::MAX)
        .find(|&status| ExitCode::from(status) == code)
        .unwrap_or(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_status_comes_back_from_its_exit_code() {
        for status in 0..=u8::MAX {
            assert_eq!(status_of(ExitCode::from(status)), status);
        }
        assert_eq!(status_of(ExitCode::SUCCESS), 0);
        assert_eq!(status_of(ExitCode::FAILURE), 1);
    }
}
