//! A real terminal for the client: `spillway` spawned on the slave side of a PTY the test
//! holds, as the leader of its own session with the PTY as its controlling terminal, so that
//! a Ctrl-C typed into the master reaches it as SIGINT, as at a person's terminal.

use std::io::Read;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use nix::pty::{Winsize, openpty};

use super::daemon::{PATIENCE, wait_child};

pub struct Terminal {
    master: OwnedFd,
    child: Option<Child>,
    screen: Arc<Mutex<Vec<u8>>>,
}

impl Terminal {
    /// Spawns `cmd` on a new `cols` x `rows` terminal (stdin, stdout and stderr).
    pub fn spawn(cmd: Command, cols: u16, rows: u16) -> Terminal {
        Self::spawn_with_stdin(cmd, cols, rows, None)
    }

    /// As [`Terminal::spawn`], with `stdin` instead of the terminal as standard input.
    pub fn spawn_with_stdin(
        mut cmd: Command,
        cols: u16,
        rows: u16,
        stdin: Option<Stdio>,
    ) -> Terminal {
        let size = Winsize {
            ws_row: rows,
            ws_col: cols,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        let pty = openpty(Some(&size), None).expect("openpty");
        let slave = pty.slave;
        cmd.stdin(stdin.unwrap_or_else(|| Stdio::from(slave.try_clone().unwrap())))
            .stdout(Stdio::from(slave.try_clone().unwrap()))
            .stderr(Stdio::from(slave.try_clone().unwrap()));
        // SAFETY: setsid and ioctl are async-signal-safe; fd 1 is the slave, set by `std`.
        unsafe {
            cmd.pre_exec(|| {
                nix::unistd::setsid()?;
                if nix::libc::ioctl(1, nix::libc::TIOCSCTTY, 0) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().expect("spawn on the terminal");
        drop(cmd);
        drop(slave);
        let screen = Arc::new(Mutex::new(Vec::new()));
        let reader = pty.master.try_clone().unwrap();
        let sink = Arc::clone(&screen);
        std::thread::spawn(move || {
            let mut file = std::fs::File::from(reader);
            let mut buf = [0u8; 4096];
            // EIO once the slave is closed everywhere: the end of the output.
            while let Ok(n) = file.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        Terminal {
            master: pty.master,
            child: Some(child),
            screen,
        }
    }

    /// Everything the terminal was sent so far, as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.screen.lock().unwrap()).into_owned()
    }

    /// Waits until the terminal shows `needle`; returns all it shows.
    pub fn wait_for_text(&self, needle: &str) -> String {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let text = self.text();
            if text.contains(needle) {
                return text;
            }
            assert!(
                Instant::now() < deadline,
                "never saw {needle:?} in:\n{text}"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// Types `bytes` (`\x03` is Ctrl-C).
    pub fn type_keys(&self, bytes: &[u8]) {
        nix::unistd::write(&self.master, bytes).expect("type into the terminal");
    }

    /// Resizes the terminal; the kernel sends its foreground group SIGWINCH.
    pub fn resize(&self, cols: u16, rows: u16) {
        let size = Winsize {
            ws_row: rows,
            ws_col: cols,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        // SAFETY: TIOCSWINSZ reads a `winsize` from the pointer, which is valid for the call.
        let rc = unsafe { nix::libc::ioctl(self.master.as_raw_fd(), nix::libc::TIOCSWINSZ, &size) };
        assert_eq!(rc, 0, "TIOCSWINSZ");
    }

    /// Waits for the client to exit (bounded).
    pub fn wait(&mut self) -> ExitStatus {
        wait_child(self.child.as_mut().expect("running"))
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child
            && child.try_wait().ok().flatten().is_none()
        {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
