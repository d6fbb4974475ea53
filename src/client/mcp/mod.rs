//! `spillway mcp`: a Model Context Protocol server on stdin/stdout, so agents that speak MCP
//! (Claude Code, opencode, any MCP client) run their shell commands through spillway and get
//! bounded previews, with tools to read and search the rest.
//!
//! It is a thin client of the daemon, started on demand as `spillway run` starts it: each
//! tool call opens a connection ([`Connection::open`]), sends one protocol request and turns
//! the answer into a tool result. A result is text only, what the model reads (see [`success`]
//! for why there is no structured content). Anything that goes wrong (an
//! unknown id, a bad regex, an unreachable daemon) is a tool error whose text says what, so
//! the model can correct itself; a command that exits non-zero is a normal result that says
//! its exit code.
//!
//! Notices are worded by the daemon for the command line; [`words::reword`] words their next
//! steps and the line on what a run's end stopped as calls of this server's tools
//! ([`words::McpSteps`]) on the way out, where the preview's facts say they stand. The lines
//! on limits reached are not reworded yet: the preview does not say where they stand.

mod params;
mod words;

use std::sync::Arc;

use anyhow::{Context, Result};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, Implementation, ServerCapabilities, ServerConfig};
use rmcp::{ServerHandler, ServiceExt, tool, tool_handler, tool_router};

pub use params::{
    BashParams, GrepParams, HistoryParams, KillParams, ReadParams, SendParams, WaitParams,
};

use crate::client::Endpoint;
use crate::client::args::parse_limit_size;
use crate::client::calls::{self, CallError, RunAnswer};
use crate::client::run_request::{self, ToRun};
use crate::protocol::{
    ErrorEvent, GrepRequest, HistoryRequest, KillRequest, RunRequest, SendRequest, ShowRequest,
    WaitRequest,
};

/// What the server tells the model about itself when a session starts.
const INSTRUCTIONS: &str = "Runs shell commands through spillway: `bash` returns a bounded \
preview of the output (its first and last lines, and lines that look like errors) and keeps \
all of it; when the preview is cut, its notice says which tool call reads on (`read_output`) \
or searches the rest (`grep_output`). Long commands can return early with `yield_seconds` and \
be continued with `wait`, typed into with `send_input` and stopped with `kill`. Whatever a \
command leaves running in the background (`cmd &`) is stopped when it ends, and the result \
says so: start a server as the command itself with `yield_seconds` and `until_port` (or \
`until`), and it runs until `kill`. `history` lists past runs.";

/// The MCP server: where the daemon is, and the tools.
#[derive(Clone)]
pub struct SpillwayMcp {
    endpoint: Arc<Endpoint>,
    tool_router: ToolRouter<SpillwayMcp>,
}

/// Serves MCP on stdin/stdout until the client closes them.
pub fn serve_stdio(endpoint: Endpoint) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async {
        let service = SpillwayMcp::new(endpoint)
            .serve(rmcp::transport::stdio())
            .await
            .context("the MCP client did not complete the handshake")?;
        service.waiting().await.context("the MCP session failed")?;
        Ok(())
    })
}

/// A tool result the model reads as a failure, with what went wrong.
fn failure(message: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message.into())])
}

/// A tool result: `text` for the model, and nothing else.
///
/// No `structuredContent`: hosts differ in what they pass on when a result has both. Claude
/// Code gives the model only `JSON.stringify(structuredContent)` (the preview would reach it
/// as one JSON string full of `\n` escapes, or not at all were it left out of the structure),
/// others pass both (every preview twice). The text already says everything a model acts on:
/// the run's id, how it ended, the exit code and the next calls.
fn success(text: String) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(text)])
}

/// The daemon's error as the model should read it: the message, which says what to do, and
/// the code for tools that match on it.
fn error_message(error: &ErrorEvent) -> String {
    let code = serde_json::to_value(error.code)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    format!("spillway: {} ({code})", error.message)
}

/// A failed call as the model should read it.
fn call_message(error: &CallError) -> String {
    match error {
        CallError::Unreachable(e) => format!("spillway: the daemon is unreachable: {e:#}"),
        CallError::Refused(error) => error_message(error),
        other => format!("spillway: {other}"),
    }
}

/// Milliseconds of an optional number of seconds a model gave: positive and finite.
fn millis(seconds: Option<f64>, name: &str) -> Result<Option<u64>, String> {
    match seconds {
        None => Ok(None),
        Some(s) if s.is_finite() && s > 0.0 => Ok(Some(((s * 1000.0).ceil() as u64).max(1))),
        Some(s) => Err(format!(
            "{name} must be a positive number of seconds, got {s}"
        )),
    }
}

/// The answer to `run`, `wait` or `kill`: the preview with its notice worded for this
/// server's tools, and how the run ended (or that it goes on).
fn run_result(answer: RunAnswer) -> CallToolResult {
    match answer {
        RunAnswer::Exit(mut exit) => {
            words::reword_exit(&mut exit);
            success(words::exit_text(&exit))
        }
        RunAnswer::Running(mut running) => {
            words::reword(&mut running.preview, &running.id, &[]);
            success(words::running_text(&running))
        }
    }
}

impl SpillwayMcp {
    pub fn new(endpoint: Endpoint) -> SpillwayMcp {
        SpillwayMcp {
            endpoint: Arc::new(endpoint),
            tool_router: Self::tool_router(),
        }
    }

    /// One call to the daemon, off the async runtime (the client is synchronous, and a run
    /// may take as long as its command), its answer made a tool result by `answer`.
    async fn call<T: Send + 'static>(
        &self,
        ask: impl FnOnce(&Endpoint) -> Result<T, CallError> + Send + 'static,
        answer: impl FnOnce(T) -> CallToolResult,
    ) -> CallToolResult {
        let endpoint = Arc::clone(&self.endpoint);
        match tokio::task::spawn_blocking(move || ask(&endpoint)).await {
            Ok(Ok(value)) => answer(value),
            Ok(Err(error)) => failure(call_message(&error)),
            Err(e) => failure(format!("spillway: internal error: {e}")),
        }
    }
}

/// The request `bash` sends: `bash -c COMMAND` in the server's environment and directory,
/// as if the agent had run it itself.
fn run_request(p: BashParams) -> Result<RunRequest, String> {
    let command = ToRun::Argv(vec!["bash".into(), "-c".into(), p.command]);
    let begun = run_request::here(command, p.cwd.as_deref().map(std::path::Path::new))
        .map_err(|e| format!("cannot determine the working directory: {e}"))?;
    Ok(RunRequest {
        max_lines: p.max_lines,
        max_bytes: p.max_bytes,
        direction: p.direction,
        timeout_ms: millis(p.timeout_seconds, "timeout_seconds")?,
        tags: p.tags,
        max_tokens: p.max_tokens,
        compact: p.compact,
        yield_ms: millis(p.yield_seconds, "yield_seconds")?,
        until: p.until,
        until_port: p.until_port,
        memory: p
            .memory
            .as_deref()
            .map(|m| {
                parse_limit_size(m)
                    .map_err(|e| format!("memory must be a size such as 512MiB: {e}"))
            })
            .transpose()?,
        pids: p.pids,
        cpu: p.cpu,
        ..begun
    })
}

/// The request `history` sends.
fn history_request(p: HistoryParams) -> Result<HistoryRequest, String> {
    let since = p
        .since
        .as_deref()
        .map(crate::client::args::parse_when)
        .transpose()?;
    let status = p.status.as_deref().map(str::parse).transpose()?;
    Ok(HistoryRequest {
        no_redact: false,
        since,
        until: None,
        status,
        command: p.command,
        tags: p.tags,
        limit: Some(p.limit.unwrap_or(20)),
    })
}

#[tool_router]
impl SpillwayMcp {
    #[tool(
        description = "Run a shell command (bash -c) and return a bounded preview of its output: the first and last lines, and lines from the middle that look like errors, within max_lines/max_bytes. Every byte is kept: when the preview is cut, its notice says how to read on (read_output with the run's id and an offset) or search (grep_output). A non-zero exit is a normal result whose last line says the exit code. Runs under a pseudo-terminal with pagers disabled; a command that waits for input can be answered with send_input after yield_seconds. Use yield_seconds for commands that may take long: you get a preview of the output so far and the run goes on (continue with wait, stop with kill). Anything the command leaves running in the background (cmd &) is stopped when it ends; to start a server that stays up, make it the command itself and give yield_seconds with until_port (or until, a regex of its ready line): bash returns once it is ready and it runs until kill. memory, pids and cpu limit the whole run."
    )]
    async fn bash(&self, Parameters(p): Parameters<BashParams>) -> CallToolResult {
        match run_request(p) {
            Ok(request) => self.call(move |e| calls::run(e, request), run_result).await,
            Err(message) => failure(message),
        }
    }

    #[tool(
        description = "Read lines of a run's full output by its id, from line `offset` (1-based; a notice's offset works as is), at most `limit` lines (default 2000) and 50 KiB. Ends with the offset to continue from when more lines remain."
    )]
    async fn read_output(&self, Parameters(p): Parameters<ReadParams>) -> CallToolResult {
        let id = match words::parse_id(&p.id) {
            Ok(id) => id,
            Err(message) => return failure(message),
        };
        let request = ShowRequest {
            no_redact: false,
            id,
            offset: p.offset,
            limit: p.limit,
            max_bytes: None,
        };
        self.call(
            move |e| calls::show(e, request),
            |page| success(words::show_text(&page)),
        )
        .await
    }

    #[tool(
        description = "Search a run's full output by its id with a regular expression; returns matching lines as `N:line` (N is the line number, usable as read_output's offset), with `context` lines around them as `N-line`, at most `max_count` matches (default 100)."
    )]
    async fn grep_output(&self, Parameters(p): Parameters<GrepParams>) -> CallToolResult {
        let id = match words::parse_id(&p.id) {
            Ok(id) => id,
            Err(message) => return failure(message),
        };
        let context = p.context.unwrap_or(0);
        let request = GrepRequest {
            no_redact: false,
            id,
            pattern: p.pattern.clone(),
            ignore_case: p.ignore_case,
            context,
            max_count: p.max_count,
        };
        self.call(
            move |e| calls::grep(e, request),
            |found| success(words::grep_text(&found, &p.pattern, context)),
        )
        .await
    }

    #[tool(
        description = "Wait for a run that bash returned still running (yield_seconds): returns its final preview and exit code once it ends, or, after yield_seconds, a preview of the output you have not seen yet while it goes on."
    )]
    async fn wait(&self, Parameters(p): Parameters<WaitParams>) -> CallToolResult {
        let request = match (
            words::parse_id(&p.id),
            millis(p.yield_seconds, "yield_seconds"),
        ) {
            (Ok(id), Ok(yield_ms)) => WaitRequest {
                no_redact: false,
                id,
                yield_ms,
                new: p.new_only.unwrap_or(true),
                caller: None,
                until: p.until,
                until_port: p.until_port,
                max_lines: None,
                max_bytes: None,
            },
            (Err(message), _) | (_, Err(message)) => return failure(message),
        };
        self.call(move |e| calls::wait(e, request), run_result)
            .await
    }

    #[tool(
        description = "Type text into a running command's terminal, then Enter (unless newline is false), and optionally end its input (eof). Use it to answer a prompt such as [y/N]; then call wait to see what the command does."
    )]
    async fn send_input(&self, Parameters(p): Parameters<SendParams>) -> CallToolResult {
        let id = match words::parse_id(&p.id) {
            Ok(id) => id,
            Err(message) => return failure(message),
        };
        let request = SendRequest {
            id,
            text: p.text,
            newline: p.newline.unwrap_or(true),
            eof: p.eof,
            timeout_ms: None,
        };
        self.call(
            move |e| calls::send(e, request),
            |sent| success(words::sent_text(&sent)),
        )
        .await
    }

    #[tool(
        description = "Stop a running command: signal its whole process group (TERM by default), SIGKILL after a grace period, and return its final preview."
    )]
    async fn kill(&self, Parameters(p): Parameters<KillParams>) -> CallToolResult {
        let id = match words::parse_id(&p.id) {
            Ok(id) => id,
            Err(message) => return failure(message),
        };
        let signal = match p.signal.as_deref().map(str::parse).transpose() {
            Ok(signal) => signal,
            Err(message) => return failure(message),
        };
        let request = KillRequest {
            no_redact: false,
            id,
            signal,
        };
        self.call(
            move |e| calls::kill(e, request),
            |exit| run_result(RunAnswer::Exit(exit)),
        )
        .await
    }

    #[tool(
        description = "List recent runs, newest first: id, start time (UTC), exit code or status, lines of output, tokens of the whole output -> of the preview you were given, command. Filter by since (\"2h\" or an RFC 3339 time), status (\"failed\" or a status), a command substring, or tags. Read or search any listed run's output by its id."
    )]
    async fn history(&self, Parameters(p): Parameters<HistoryParams>) -> CallToolResult {
        match history_request(p) {
            Ok(request) => {
                self.call(
                    move |e| calls::history(e, request),
                    |history| success(words::history_text(&history)),
                )
                .await
            }
            Err(message) => failure(message),
        }
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for SpillwayMcp {
    fn get_info(&self) -> ServerConfig {
        let mut config = ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_instructions(INSTRUCTIONS);
        config.server_info = Implementation::new("spillway", env!("CARGO_PKG_VERSION"));
        config
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_must_be_positive_and_finite() {
        assert_eq!(millis(Some(1.5), "t"), Ok(Some(1500)));
        assert_eq!(millis(Some(0.0001), "t"), Ok(Some(1)));
        assert_eq!(millis(None, "t"), Ok(None));
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(millis(Some(bad), "t").is_err(), "{bad}");
        }
    }

    #[test]
    fn an_unreachable_daemon_is_a_clear_error() {
        // Nothing can be created under /proc: no daemon is started, and the call says why.
        let endpoint = Endpoint {
            socket: "/proc/spillway-none/s.sock".into(),
            data_dir: "/proc/spillway-none".into(),
        };
        let message = call_message(&calls::stats(&endpoint).unwrap_err());
        assert!(message.contains("the daemon is unreachable"), "{message}");
    }

    #[test]
    fn every_tool_has_a_schema_and_a_description() {
        let server = SpillwayMcp::new(Endpoint {
            socket: "/nonexistent/s.sock".into(),
            data_dir: "/nonexistent".into(),
        });
        let tools = server.tool_router.list_all();
        let mut names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
        names.sort_unstable();
        assert_eq!(
            names,
            [
                "bash",
                "grep_output",
                "history",
                "kill",
                "read_output",
                "send_input",
                "wait"
            ]
        );
        for tool in &tools {
            assert!(
                tool.description.as_deref().is_some_and(|d| d.len() > 40),
                "{}",
                tool.name
            );
        }
        let bash = tools.iter().find(|t| t.name == "bash").unwrap();
        let schema = serde_json::to_string(&bash.input_schema).unwrap();
        assert!(
            schema.contains("\"command\"") && schema.contains("yield_seconds"),
            "{schema}"
        );
        for field in ["until", "until_port", "memory", "pids", "cpu"] {
            assert!(
                schema.contains(&format!("\"{field}\"")),
                "{field}: {schema}"
            );
        }
        let wait = tools.iter().find(|t| t.name == "wait").unwrap();
        let schema = serde_json::to_string(&wait.input_schema).unwrap();
        assert!(schema.contains("until_port"), "{schema}");
    }
}
