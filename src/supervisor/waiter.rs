//! The waiter thread: waits for the command to end (as the reaper's leader), reaps it, and
//! says how it ended.

use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use chrono::Utc;
use tokio::sync::oneshot;

use crate::engine::capture::{Outcome, OutputSource};
use crate::protocol::StoppedProcess;
use crate::supervisor::descendants::{self, EndReport};
use crate::supervisor::live::Live;
use crate::supervisor::pty::Output;
use crate::supervisor::{reaper, strays};

use super::{Finished, Shared};

/// How long the end of a run waits for its group's killed members to die before it leaves
/// them unreaped (they have been sent SIGKILL: only a process stuck in the kernel takes this
/// long).
pub(super) const REAP_PATIENCE: Duration = Duration::from_secs(1);

/// What the reader hands the waiter when the output has ended: the run's live state, whose
/// final preview waits for the command's end, and where the token accounting will find the
/// output's text.
pub(super) type Finish = (Arc<Live>, OutputSource);

/// The waiter thread: learns of the leader's exit, then, once the reader is done, reaps the
/// leader and the group and sends the result.
pub(super) struct Waiter {
    pub(super) shared: Arc<Shared>,
    /// Dropped at the leader's exit, which wakes the reader.
    pub(super) wake: OwnedFd,
    pub(super) exited: oneshot::Sender<()>,
    /// What the reader thread handed on as it ended (or the panic it ended with); closed
    /// without a word when the reader never started.
    pub(super) reader: mpsc::Receiver<std::thread::Result<(Finish, Output)>>,
    pub(super) finished: oneshot::Sender<Finished>,
    pub(super) started_at: chrono::DateTime<Utc>,
    /// When the waiter was made, just after the command started: the processes a hangup
    /// ended are looked for from then, because the daemon may reap them (the leader's exit
    /// hangs up its terminal at once) before this thread learns of the exit.
    pub(super) launched: Instant,
}

impl Waiter {
    pub(super) fn run(self) {
        self.shared.wait_for_exit();
        // What the command left running, looked at as soon as it has exited (a stop's
        // signals are still at work on the group then: only what outlives them counts).
        let by_itself = self.shared.state().cause.is_none();
        let mut at_exit = if by_itself {
            self.shared.tracker.members(false)
        } else {
            Vec::new()
        };
        descendants::describe(&mut at_exit);
        self.shared.mark_exited();
        drop(self.wake);
        let _ = self.exited.send(());
        // No reader means the launch failed after the spawn and the group has been killed.
        let read = self.reader.recv();
        // A command that exited leaving no process behind has nothing left to stop: only
        // the processes it left could have started more since.
        let stopped = if by_itself && at_exit.is_empty() {
            Vec::new()
        } else {
            self.shared.tracker.stop(self.shared.kill_grace)
        };
        let wait = self.shared.reap();
        self.shared.reap_members();
        let hung_up = if by_itself {
            reaper::hung_up_since(self.shared.pgid.as_raw() as u32, self.launched)
        } else {
            Vec::new()
        };
        let EndReport {
            mut stopped,
            limits_hit,
        } = self.shared.tracker.finish(at_exit, stopped, &hung_up);
        // What left its run (its cgroup, its session, its marker) is stopped all the same,
        // and told of here.
        stopped.extend(
            strays::sweep(self.shared.kill_grace)
                .into_iter()
                .map(|m| StoppedProcess {
                    pid: m.pid,
                    command: m.command,
                    ports: m.ports,
                }),
        );
        let ended_at = Utc::now();
        let (live, output) = match read {
            // The output is closed only now, after the command's exit: closing a PTY's master
            // hangs the terminal up, and the command, which may have closed its own copies
            // and gone on, would get SIGHUP.
            Ok(Ok((finish, output))) => {
                drop(output);
                finish
            }
            Ok(Err(panic)) => std::panic::resume_unwind(panic),
            Err(_) => return,
        };
        let (status, exit_code, signal) = self.shared.outcome(wait);
        let preview = live.final_preview(Outcome::of_exit(exit_code));
        let _ = self.finished.send(Finished {
            status,
            exit_code,
            signal,
            started_at: self.started_at,
            ended_at,
            preview,
            output,
            stopped,
            limits_hit,
            limits_note: self.shared.limits_note.clone(),
        });
    }
}
