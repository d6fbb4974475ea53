//! What a run's threads, its deadline task and its controls share: where its leader is, why
//! spillway ended it, and the acts on its process group that must see one state (a stop, its
//! signals, the leader's reaping, the members' reaping, the outcome).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid, waitpid};
use nix::unistd::Pid;
use tokio::sync::Notify;

use super::descendants::Tracker;
use super::reaper;
use super::waiter::REAP_PATIENCE;
use crate::protocol::{RunId, RunStatus};

/// Why spillway ended a run, if it did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Cause {
    TimedOut,
    Killed,
}

/// Where the run's leader (the command itself) is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Leader {
    Running,
    /// Exited but not reaped: its pid, and so the group's id, cannot be reused yet.
    Exited,
    /// Reaped: the group's id may now belong to someone else, so nothing is sent to it.
    Reaped,
}

#[derive(Debug)]
pub(super) struct State {
    pub(super) leader: Leader,
    pub(super) cause: Option<Cause>,
    /// When a stop's SIGKILL is due.
    pub(super) kill_at: Option<Instant>,
}

/// What a run's threads, its deadline task and its [`super::RunControl`]s share.
#[derive(Debug)]
pub(super) struct Shared {
    /// For the logs.
    pub(super) id: RunId,
    /// The process group's id (the leader's pid).
    pub(super) pgid: Pid,
    pub(super) kill_grace: Duration,
    pub(super) state: Mutex<State>,
    /// Set when the leader has exited: the reader checks it after each read.
    pub(super) leader_exited: AtomicBool,
    /// Wakes the deadline task when a stop begins.
    pub(super) stopping: Notify,
    /// Every process of the run.
    pub(super) tracker: Tracker,
    /// See [`Finished::limits_note`].
    pub(super) limits_note: Option<String>,
}

impl Shared {
    pub(super) fn new(
        id: RunId,
        pid: u32,
        kill_grace: Duration,
        tracker: Tracker,
        limits_note: Option<String>,
    ) -> Shared {
        Shared {
            tracker,
            limits_note,
            id,
            // `std` made the u32 from a pid_t, so this gives back the kernel's value.
            pgid: Pid::from_raw(pid as i32),
            kill_grace,
            state: Mutex::new(State {
                leader: Leader::Running,
                cause: None,
                kill_at: None,
            }),
            leader_exited: AtomicBool::new(false),
            stopping: Notify::new(),
        }
    }

    pub(super) fn state(&self) -> MutexGuard<'_, State> {
        crate::sync::lock(&self.state)
    }

    /// Starts stopping the run for `cause` with `signal` (see [`RunControl::stop`]).
    pub(super) fn begin_stop(&self, cause: Cause, signal: Signal) {
        let mut state = self.state();
        match state.leader {
            Leader::Reaped => return,
            Leader::Running if state.cause.is_none() => {
                state.cause = Some(cause);
                state.kill_at = Instant::now().checked_add(self.kill_grace);
            }
            Leader::Running | Leader::Exited => {}
        }
        self.send(signal);
        drop(state);
        self.stopping.notify_one();
    }

    /// Sends `signal` to the group, unless the run has ended.
    pub(super) fn signal(&self, signal: Signal) {
        let state = self.state();
        if state.leader != Leader::Reaped {
            self.send(signal);
        }
    }

    /// Sends `signal` to the group, and SIGCONT after it so stopped members act on it. The
    /// caller holds the state lock and has checked that the leader is not reaped.
    pub(super) fn send(&self, signal: Signal) {
        let send = |signal| match killpg(self.pgid, signal) {
            Ok(()) | Err(Errno::ESRCH) => {}
            Err(e) => tracing::warn!(run = %self.id, "cannot send {signal} to the group: {e}"),
        };
        send(signal);
        if signal != Signal::SIGKILL && signal != Signal::SIGCONT {
            send(Signal::SIGCONT);
        }
    }

    pub(super) fn kill_at(&self) -> Option<Instant> {
        self.state().kill_at
    }

    pub(super) fn mark_exited(&self) {
        let mut state = self.state();
        if state.leader == Leader::Running {
            state.leader = Leader::Exited;
        }
        self.leader_exited.store(true, Ordering::Release);
    }

    /// Kills what is left of the group and reaps the leader; returns how it ended (`None` if
    /// it had been reaped by someone else).
    pub(super) fn reap(&self) -> Option<WaitStatus> {
        let mut state = self.state();
        self.send(Signal::SIGKILL);
        let status = loop {
            match waitpid(self.pgid, None) {
                Err(Errno::EINTR) => continue,
                Ok(status) => break Some(status),
                Err(e) => {
                    tracing::warn!(run = %self.id, "cannot reap the command: {e}");
                    break None;
                }
            }
        };
        state.leader = Leader::Reaped;
        reaper::forget_leader(self.pgid.as_raw() as u32);
        status
    }

    /// Gives up on a run whose waiter could not start: kills the group and reaps the leader.
    pub(super) fn abandon(&self) {
        self.tracker.stop(Duration::ZERO);
        self.reap();
        self.reap_members();
        self.tracker.finish(Vec::new(), Vec::new(), &[]);
    }

    /// Waits for the leader to exit, leaving it unreaped.
    pub(super) fn wait_for_exit(&self) {
        loop {
            match waitid(
                Id::Pid(self.pgid),
                WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT,
            ) {
                Err(Errno::EINTR) => {}
                Ok(_) => return,
                Err(e) => {
                    tracing::warn!(run = %self.id, "cannot wait for the command: {e}");
                    return;
                }
            }
        }
    }

    /// Reaps the group's other members: orphans handed to this process (a subreaper) while the
    /// run went on. They have been sent SIGKILL, so the wait is short; a member that is not this
    /// process's child yet becomes one when its dying parent exits, and is reaped in turn.
    pub(super) fn reap_members(&self) {
        let give_up = Instant::now() + REAP_PATIENCE;
        // Looked at before they are reaped, so that how each died is remembered (see
        // `reaper::hung_up_since`).
        let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT;
        loop {
            match waitid(Id::PGid(self.pgid), flags) {
                Ok(WaitStatus::StillAlive) if Instant::now() >= give_up => {
                    tracing::warn!(run = %self.id, "group members still dying: left unreaped");
                    return;
                }
                Ok(WaitStatus::StillAlive) => thread::sleep(Duration::from_millis(1)),
                Ok(status) => match status.pid() {
                    Some(pid) => {
                        reaper::reap_zombie(pid.as_raw());
                    }
                    None => return,
                },
                Err(Errno::EINTR) => {}
                // ECHILD: no child of ours is left in the group.
                Err(_) => return,
            }
        }
    }

    /// The run's status given how its leader ended.
    pub(super) fn outcome(
        &self,
        wait: Option<WaitStatus>,
    ) -> (RunStatus, Option<i32>, Option<i32>) {
        let (exit_code, signal) = match wait {
            Some(WaitStatus::Exited(_, code)) => (Some(code), None),
            Some(WaitStatus::Signaled(_, signal, _)) => (None, Some(signal as i32)),
            _ => (None, None),
        };
        let status = match self.state().cause {
            Some(Cause::TimedOut) => RunStatus::TimedOut,
            Some(Cause::Killed) => RunStatus::Killed,
            None if signal.is_some() => RunStatus::Signaled,
            None => RunStatus::Exited,
        };
        (status, exit_code, signal)
    }
}
