//! What the client tells its reader about a run, worded per audience: [`cli`] for a person or
//! an agent at the command line (with [`tables`] for the operator's tables), `mcp/words.rs`
//! for the MCP server's model. The facts both word are taken from the daemon's events here,
//! once, so the two wordings cannot drift in what they say, only in how.

pub mod cli;
pub mod tables;

use crate::protocol::{ExitEvent, LimitHit, Ready, Resource, RunStatus};

/// How a finished run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// It ran out of time; its process group was killed.
    TimedOut,
    /// Stopped by this signal on request (`kill`).
    Stopped(i32),
    /// Killed by this signal.
    Killed(i32),
    /// Exited with this code.
    Exited(i32),
    /// None of these: the status says it.
    Other(RunStatus),
}

/// The facts of a run's end that a reader is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ending<'e> {
    pub ended: Ended,
    /// It exited with code 0: a success, of which the command line says nothing.
    pub succeeded: bool,
    /// The memory limit it reached, whose OOM kills explain the end.
    pub out_of_memory: Option<&'e LimitHit>,
}

/// How `exit`'s run ended.
pub fn ending(exit: &ExitEvent) -> Ending<'_> {
    let ended = match (exit.status, exit.exit_code, exit.signal) {
        (RunStatus::TimedOut, _, _) => Ended::TimedOut,
        (RunStatus::Killed, _, Some(signal)) => Ended::Stopped(signal),
        (_, _, Some(signal)) => Ended::Killed(signal),
        (_, Some(code), None) => Ended::Exited(code),
        (status, None, None) => Ended::Other(status),
    };
    Ending {
        ended,
        succeeded: exit.status == RunStatus::Exited && exit.exit_code == Some(0),
        out_of_memory: exit
            .limits_hit
            .iter()
            .find(|h| h.resource == Resource::Memory),
    }
}

/// Why a run was ready before its yield ran out, in the same words for every reader.
pub fn ready_reason(ready: &Ready) -> String {
    match ready {
        Ready::Line { line, text } => format!("line {line} matched: {text}"),
        Ready::Port { port } => format!("port {port} accepts connections"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ready_port_is_named() {
        assert_eq!(
            ready_reason(&Ready::Port { port: 80 }),
            "port 80 accepts connections"
        );
    }
}
