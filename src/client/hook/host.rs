//! Each host's hook contract: the JSON it sends for a shell tool call, and the answer that
//! replaces the command. Checked against the hosts' documentation and source (docs/hosts.md's
//! "In every agent host with one command" says which versions).

use serde_json::{Map, Value, json};

use super::rules::RuleWords;
use super::{Context, Host, budget, rewrite, saved_output};

/// The answer to print for `input`, or None for "no opinion" (the host runs the call as is).
pub fn answer(host: Host, input: &[u8], ctx: &Context) -> Option<String> {
    let input: Value = serde_json::from_slice(input).ok()?;
    let input = input.as_object()?;
    let answer = match host {
        Host::ClaudeCode => claude_code(input, ctx),
        Host::Codex => codex(input, ctx),
        Host::Gemini => gemini(input, ctx),
        Host::Opencode => opencode(input, ctx),
        Host::Copilot => copilot(input, ctx),
    }?;
    serde_json::to_string(&answer).ok()
}

/// The tool's arguments with `command` rewritten, every other field kept: the hosts that take a
/// whole replacement input (Claude Code, Codex) would otherwise lose the description, timeout
/// or background flag.
fn rewritten_args(
    host: Host,
    args: &Map<String, Value>,
    ctx: &Context,
) -> Option<Map<String, Value>> {
    let command = args.get("command")?.as_str()?;
    let new = rewrite(host, command, ctx)?;
    let mut args = args.clone();
    args.insert("command".into(), Value::String(new));
    Some(args)
}

/// Whether the call is for `tool`; a missing name counts as a match, since the matcher in the
/// host's configuration already chose the tool.
fn is_tool(input: &Map<String, Value>, key: &str, tool: &[&str]) -> bool {
    match input.get(key) {
        None => true,
        Some(name) => name.as_str().is_some_and(|name| tool.contains(&name)),
    }
}

/// Claude Code: no opinion, ever. Claude Code judges a `PreToolUse` rewrite with its
/// permission rules instead of the model's command (a deny rule on `rm` then stops nothing),
/// so `init` now installs the shell prefix ([`super::prefix`]), which Claude Code applies after
/// its checks; the hook that earlier versions of `init` wrote stays harmless until `init` is
/// run again and removes it.
fn claude_code(_input: &Map<String, Value>, _ctx: &Context) -> Option<Value> {
    None
}

/// Codex (`PreToolUse`, matcher `Bash`): `tool_input.command`; `updatedInput` is accepted only
/// with `permissionDecision: "allow"`, which in Codex means "not blocked": its approval policy
/// and sandbox still apply to the command that runs. Its execpolicy rules judge the rewritten
/// command, so a command any of the user's rules could be about is left alone
/// ([`RuleWords::codex`]).
fn codex(input: &Map<String, Value>, ctx: &Context) -> Option<Value> {
    if !is_tool(input, "tool_name", &["Bash"]) {
        return None;
    }
    let args = input.get("tool_input")?.as_object()?;
    let rules = RuleWords::codex(&ctx.codex_home, &cwd_of(input));
    if rules.may_match(args.get("command")?.as_str()?) {
        return None;
    }
    let updated = rewritten_args(Host::Codex, args, ctx)?;
    Some(json!({
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "allow",
            "updatedInput": updated,
        }
    }))
}

/// Gemini CLI (`BeforeTool`, matcher `run_shell_command`): `tool_input.command`; the answer's
/// `hookSpecificOutput.tool_input` is the whole input the call is rebuilt from, so every other
/// field (`dir_path`, `is_background`, `description`) is handed back as the model gave it.
/// Gemini CLI refuses command substitution in the model's command itself, and judges its
/// policies and `--allowed-tools` on the rewritten command: a command with `$(`, backticks or
/// process substitution, or one the user's rules could be about, is left alone.
fn gemini(input: &Map<String, Value>, ctx: &Context) -> Option<Value> {
    if !is_tool(input, "tool_name", &["run_shell_command"]) {
        return None;
    }
    let args = input.get("tool_input")?.as_object()?;
    let command = args.get("command")?.as_str()?;
    if ["$(", "`", "<(", ">("].iter().any(|s| command.contains(s)) {
        return None;
    }
    let rules = RuleWords::gemini(&ctx.home, &cwd_of(input), &ctx.parent_cmdline);
    if rules.may_match(command) {
        return None;
    }
    let updated = rewritten_args(Host::Gemini, args, ctx)?;
    Some(json!({
        "hookSpecificOutput": {
            "hookEventName": "BeforeTool",
            "tool_input": updated,
        }
    }))
}

/// The working directory the host says the call runs in.
fn cwd_of(input: &Map<String, Value>) -> std::path::PathBuf {
    input
        .get("cwd")
        .and_then(Value::as_str)
        .map(std::path::PathBuf::from)
        .unwrap_or_default()
}

/// opencode: no opinion, ever. A rewrite in `tool.execute.before` changes what opencode's
/// permission check and the model's history see, so the plugin `init` now writes replaces
/// only the output, in `tool.execute.after`; the plugin of earlier versions, which asks this
/// hook, then leaves every command alone until `init` is run again.
fn opencode(_input: &Map<String, Value>, _ctx: &Context) -> Option<Value> {
    None
}

/// Copilot CLI (`postToolUse`): after its shell tool ran, a result Copilot saved to a file
/// because it was too long (the model would read its first 500 characters) is replaced by
/// spillway's preview of that file, with Copilot's exit line; any other result is left as it
/// is. The `preToolUse` calls of hooks that earlier versions of `init` wrote get no opinion:
/// Copilot CLI asks for approval of a call whose arguments a hook changed, which headless
/// (`-p`) denies, even with `--allow-all-tools`.
fn copilot(input: &Map<String, Value>, ctx: &Context) -> Option<Value> {
    if !is_tool(input, "toolName", &["bash"]) {
        return None;
    }
    let result = input.get("toolResult")?.as_object()?;
    let text = result.get("textResultForLlm")?.as_str()?;
    let file = saved_output::saved_file(text)?;
    let budget = budget::for_host(Host::Copilot, |name| std::env::var(name).ok());
    let preview = saved_output::preview(&ctx.program, &file, budget)?;
    let text = match saved_output::exit_line(text) {
        Some(exit) => format!("{}\n\n{exit}", preview.trim_end()),
        None => preview,
    };
    let kind = result
        .get("resultType")
        .cloned()
        .unwrap_or(json!("success"));
    Some(json!({ "modifiedResult": { "textResultForLlm": text, "resultType": kind } }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx() -> Context {
        Context {
            program: "spillway".into(),
            disabled: false,
            home: "/nonexistent".into(),
            codex_home: "/nonexistent".into(),
            parent_cmdline: String::new(),
        }
    }

    fn ask(host: Host, input: Value) -> Option<Value> {
        answer(host, input.to_string().as_bytes(), &ctx())
            .map(|a| serde_json::from_str(&a).unwrap())
    }

    #[test]
    fn malformed_or_foreign_input_gets_no_opinion() {
        for host in Host::ALL {
            for input in [&b""[..], b"not json", b"[]", b"{}", b"{\"tool_input\": 3}"] {
                assert_eq!(answer(host, input, &ctx()), None, "{host:?} {input:?}");
            }
        }
        assert_eq!(
            ask(
                Host::ClaudeCode,
                json!({"tool_name": "Read", "tool_input": {"command": "ls"}})
            ),
            None
        );
        assert_eq!(
            ask(
                Host::Gemini,
                json!({"tool_name": "read_file", "tool_input": {"command": "ls"}})
            ),
            None
        );
        assert_eq!(
            ask(
                Host::Copilot,
                json!({"toolName": "edit", "toolArgs": {"command": "ls"}})
            ),
            None
        );
    }

    #[test]
    fn claude_code_and_opencode_never_get_a_rewrite() {
        for mode in ["default", "bypassPermissions", "acceptEdits", "plan"] {
            let input = json!({
                "tool_name": "Bash",
                "permission_mode": mode,
                "tool_input": {"command": "rm -f x"}
            });
            assert_eq!(ask(Host::ClaudeCode, input), None);
        }
        let input = json!({"tool": "bash", "args": {"command": "ls"}});
        assert_eq!(ask(Host::Opencode, input), None);
    }

    #[test]
    fn gemini_keeps_every_field_and_leaves_substitutions_alone() {
        let input = json!({
            "tool_name": "run_shell_command",
            "tool_input": {"command": "ls", "dir_path": "sub", "is_background": true}
        });
        let out = ask(Host::Gemini, input).unwrap();
        let tool_input = &out["hookSpecificOutput"]["tool_input"];
        assert_eq!(tool_input["dir_path"], "sub");
        assert_eq!(tool_input["is_background"], true);
        assert!(
            tool_input["command"]
                .as_str()
                .unwrap()
                .contains("--host gemini")
        );
        for command in ["echo $(id)", "echo `id`", "diff <(ls) <(ls a)"] {
            let input = json!({
                "tool_name": "run_shell_command",
                "tool_input": {"command": command}
            });
            assert_eq!(ask(Host::Gemini, input), None, "{command}");
        }
    }

    #[test]
    fn copilot_leaves_calls_and_short_results_alone() {
        let call = json!({"toolName": "bash", "toolArgs": {"command": "ls"}});
        assert_eq!(ask(Host::Copilot, call), None);
        let short = json!({"toolName": "bash", "toolArgs": {"command": "ls"},
                           "toolResult": {"resultType": "success", "textResultForLlm": "a\nb"}});
        assert_eq!(ask(Host::Copilot, short), None);
    }
}
