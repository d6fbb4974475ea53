//! Each host's hook contract: the JSON it sends for a shell tool call, and the answer that
//! replaces the command. Checked against the hosts' documentation and source (the README's
//! "In every agent host with one command" says which versions).

use serde_json::{Map, Value, json};

use super::{Context, Host, rewrite};

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
fn rewritten_args(args: &Map<String, Value>, ctx: &Context) -> Option<Map<String, Value>> {
    let command = args.get("command")?.as_str()?;
    let new = rewrite(command, ctx)?;
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

/// Claude Code (`PreToolUse`, matcher `Bash`): `tool_input.command`; the answer is
/// `hookSpecificOutput.updatedInput`, which Claude Code applies only together with a
/// `permissionDecision`, and against which it then checks its permission rules.
fn claude_code(input: &Map<String, Value>, ctx: &Context) -> Option<Value> {
    if !is_tool(input, "tool_name", &["Bash"]) {
        return None;
    }
    let decision = claude_decision(
        input.get("permission_mode").and_then(Value::as_str),
        ctx.approve,
    )?;
    let updated = rewritten_args(input.get("tool_input")?.as_object()?, ctx)?;
    Some(json!({
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": decision,
            "permissionDecisionReason": "spillway: runs the command through `spillway run` for a bounded preview",
            "updatedInput": updated,
        }
    }))
}

/// Which `permissionDecision` goes with a rewrite, so that spillway never lets run what Claude
/// Code would have stopped: `"allow"` skips Claude Code's own prompt, so it is given only where
/// nothing would have been asked (`bypassPermissions`) or where the user said so
/// (`SPILLWAY_HOOK_APPROVE=allow`); elsewhere `"ask"` shows the user the rewritten command. In
/// `auto` (a classifier decides) and `dontAsk` (anything not pre-approved is refused) an `"ask"`
/// would change how the session works, so the command is left alone there.
fn claude_decision(permission_mode: Option<&str>, approve: bool) -> Option<&'static str> {
    if approve {
        return Some("allow");
    }
    match permission_mode {
        Some("bypassPermissions") => Some("allow"),
        Some("auto" | "dontAsk") => None,
        _ => Some("ask"),
    }
}

/// Codex (`PreToolUse`, matcher `Bash`): `tool_input.command`; `updatedInput` is accepted only
/// with `permissionDecision: "allow"`, which in Codex means "not blocked": its approval policy
/// and sandbox still apply to the command that runs.
fn codex(input: &Map<String, Value>, ctx: &Context) -> Option<Value> {
    if !is_tool(input, "tool_name", &["Bash"]) {
        return None;
    }
    let updated = rewritten_args(input.get("tool_input")?.as_object()?, ctx)?;
    Some(json!({
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "allow",
            "updatedInput": updated,
        }
    }))
}

/// Gemini CLI (`BeforeTool`, matcher `run_shell_command`): `tool_input.command`; the answer's
/// `hookSpecificOutput.tool_input` is merged over the model's arguments.
fn gemini(input: &Map<String, Value>, ctx: &Context) -> Option<Value> {
    if !is_tool(input, "tool_name", &["run_shell_command"]) {
        return None;
    }
    let command = input.get("tool_input")?.get("command")?.as_str()?;
    let new = rewrite(command, ctx)?;
    Some(json!({
        "hookSpecificOutput": {
            "hookEventName": "BeforeTool",
            "tool_input": { "command": new },
        }
    }))
}

/// opencode has no hook program of its own: the plugin `init` writes passes its
/// `tool.execute.before` arguments as `{"tool": "bash", "args": {...}}` and sets
/// `output.args` from the `args` of the answer.
fn opencode(input: &Map<String, Value>, ctx: &Context) -> Option<Value> {
    if !is_tool(input, "tool", &["bash"]) {
        return None;
    }
    let args = rewritten_args(input.get("args")?.as_object()?, ctx)?;
    Some(json!({ "args": args }))
}

/// Copilot CLI (`preToolUse`): `toolName` and `toolArgs` (an object, or the same as a JSON
/// string); the answer is `modifiedArgs`, with no `permissionDecision`, so Copilot's own approval
/// flow still applies. The VS Code-compatible payload (`PreToolUse`, `tool_name`,
/// `tool_input`) is answered with `hookSpecificOutput.updatedInput`.
fn copilot(input: &Map<String, Value>, ctx: &Context) -> Option<Value> {
    if input.contains_key("toolName") || input.contains_key("toolArgs") {
        if !is_tool(input, "toolName", &["bash"]) {
            return None;
        }
        let args = match input.get("toolArgs")? {
            Value::Object(args) => args.clone(),
            Value::String(text) => serde_json::from_str::<Map<String, Value>>(text).ok()?,
            _ => return None,
        };
        let modified = rewritten_args(&args, ctx)?;
        return Some(json!({ "modifiedArgs": modified }));
    }
    if !is_tool(input, "tool_name", &["bash", "Bash"]) {
        return None;
    }
    let updated = rewritten_args(input.get("tool_input")?.as_object()?, ctx)?;
    Some(json!({
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "updatedInput": updated,
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx() -> Context {
        Context {
            program: "spillway".into(),
            disabled: false,
            approve: false,
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
    fn claude_keeps_other_fields_and_asks_unless_bypassing() {
        let input = json!({
            "tool_name": "Bash",
            "permission_mode": "default",
            "tool_input": {"command": "ls", "description": "list", "timeout": 5000}
        });
        let out = ask(Host::ClaudeCode, input.clone()).unwrap();
        let specific = &out["hookSpecificOutput"];
        assert_eq!(specific["permissionDecision"], "ask");
        assert_eq!(specific["updatedInput"]["description"], "list");
        assert_eq!(specific["updatedInput"]["timeout"], 5000);
        let mut bypass = input.clone();
        bypass["permission_mode"] = json!("bypassPermissions");
        let out = ask(Host::ClaudeCode, bypass).unwrap();
        assert_eq!(out["hookSpecificOutput"]["permissionDecision"], "allow");
        let mut auto = input;
        auto["permission_mode"] = json!("auto");
        assert_eq!(ask(Host::ClaudeCode, auto), None);
    }

    #[test]
    fn copilot_takes_args_as_a_json_string_too() {
        let out = ask(
            Host::Copilot,
            json!({"toolName": "bash", "toolArgs": "{\"command\":\"ls\",\"description\":\"d\"}"}),
        )
        .unwrap();
        assert!(
            out["modifiedArgs"]["command"]
                .as_str()
                .unwrap()
                .ends_with("bash -c ls")
        );
        assert_eq!(out["modifiedArgs"]["description"], "d");
    }
}
