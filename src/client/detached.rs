//! Starting a child that this process neither waits for nor hears from again: `fork` and
//! `exec`, returning as soon as the child exists.
//!
//! `std::process::Command` returns only once the child has `exec`ed (`posix_spawn` shares
//! the parent's memory until then, and the fork path waits on a pipe to report a failed
//! `exec`). For the token count `truncate` leaves behind, that wait was 1.1-1.6 ms of the
//! time after its input ended, on the path to its exit; a `fork` returns at once, and the
//! child's `exec` runs on another core while this process exits. A failed `exec` goes
//! unreported: the child ends with status 127, which nobody collects.

use std::ffi::{CString, OsStr};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::Path;
use std::ptr::null;

/// Starts `program` with `args` and this process's environment, with `stdin` as its standard
/// input, `/dev/null` as its standard output and error, in a process group of its own (so a
/// Ctrl-C at the caller's terminal does not reach it), and with no signal blocked.
pub(crate) fn spawn(program: &Path, args: &[&OsStr], stdin: OwnedFd) -> io::Result<()> {
    let c = |s: &OsStr| CString::new(s.as_bytes()).map_err(io::Error::other);
    let program = c(program.as_os_str())?;
    let args: Vec<CString> = std::iter::once(Ok(program.clone()))
        .chain(args.iter().map(|a| c(a)))
        .collect::<io::Result<_>>()?;
    let env: Vec<CString> = std::env::vars_os()
        .map(|(key, value)| {
            let mut pair = key.into_vec();
            pair.push(b'=');
            pair.extend(value.into_vec());
            CString::new(pair).map_err(io::Error::other)
        })
        .collect::<io::Result<_>>()?;
    // The null-terminated arrays of pointers `execve` takes.
    let null_ended =
        |s: &[CString]| -> Vec<_> { s.iter().map(|s| s.as_ptr()).chain([null()]).collect() };
    let (argv, envp) = (null_ended(&args), null_ended(&env));
    let dev_null = File::options().read(true).write(true).open("/dev/null")?;
    let (stdin_fd, null_fd) = (stdin.as_raw_fd(), dev_null.as_raw_fd());
    // SAFETY: `fork` has no preconditions; what the child may do after it, in a process with
    // other threads, is kept to below.
    match unsafe { libc::fork() } {
        -1 => Err(io::Error::last_os_error()),
        // SAFETY: the child calls only async-signal-safe functions (`sigprocmask`, `setpgid`,
        // `dup2`, `execve`, `_exit`), on memory made before the `fork`: no lock another thread
        // held at the `fork` can stop it, and it never returns.
        0 => unsafe {
            let mut none = std::mem::zeroed::<libc::sigset_t>();
            libc::sigemptyset(&raw mut none);
            libc::sigprocmask(libc::SIG_SETMASK, &raw const none, std::ptr::null_mut());
            libc::setpgid(0, 0);
            if libc::dup2(stdin_fd, 0) == 0
                && libc::dup2(null_fd, 1) == 1
                && libc::dup2(null_fd, 2) == 2
            {
                libc::execve(program.as_ptr(), argv.as_ptr(), envp.as_ptr());
            }
            libc::_exit(127)
        },
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;

    /// A file holding `text`, open to read from its start.
    fn input(text: &str) -> OwnedFd {
        let mut file = tempfile::tempfile().unwrap();
        std::io::Write::write_all(&mut file, text.as_bytes()).unwrap();
        std::io::Seek::rewind(&mut file).unwrap();
        file.into()
    }

    /// The child reads the given input, writes to `/dev/null`, and leads a process group of
    /// its own; the call returned without waiting for it.
    #[test]
    fn the_child_gets_its_input_and_a_group_of_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        // The line read, the group (the fifth field of `stat`), the pid, standard output.
        let script = format!(
            "read -r line; stat=$(cat /proc/$$/stat); set -- ${{stat#*) }}; \
             printf '%s|%s|%s|%s' \"$line\" \"$3\" $$ \"$(readlink /proc/$$/fd/1)\" > {out}.tmp \
             && mv {out}.tmp {out}",
            out = out.display()
        );
        let args = ["-c".as_ref(), script.as_ref()];
        spawn(Path::new("/bin/sh"), &args, input("the job\n")).unwrap();
        let begun = Instant::now();
        while !out.exists() {
            let waited = begun.elapsed();
            assert!(waited < Duration::from_secs(20), "the child wrote nothing");
            std::thread::sleep(Duration::from_millis(10));
        }
        let written = std::fs::read_to_string(&out).unwrap();
        let [line, group, pid, stdout] = written.split('|').collect::<Vec<_>>()[..] else {
            panic!("the child wrote {written:?}");
        };
        assert_eq!(line, "the job");
        assert_eq!(group, pid, "the child leads its own process group");
        assert_eq!(stdout, "/dev/null");
    }

    /// A program that cannot be run is not an error of the call's: the child ends.
    #[test]
    fn a_missing_program_leaves_the_caller_unharmed() {
        spawn(Path::new("/nonexistent/program"), &[], input("")).unwrap();
    }
}
