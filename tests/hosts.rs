//! spillway in the agent hosts:
//! - `spillway hook HOST` is fed the JSON each host documents for a shell tool call, and the
//!   command it answers with, run with `bash -c` as the host runs it, gives the exit code and
//!   output the original gives, with spillway's preview and notice when the output is long;
//! - `spillway init` then `init --uninstall` leaves every file byte-identical, `init` twice
//!   equals `init` once, `--dry-run` writes nothing, at both scopes, with and without configs;
//! - the hosts' own CLIs (pinned, from npm) see the MCP server `init` registered;
//! - the MCP Inspector CLI reads each tool result of `spillway mcp` once, and a 200,000-line
//!   output comes back small.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};

use crate::helper::daemon::TestDaemon;
use crate::helper::npm;
use crate::helper::run_with_input;

const HOSTS: [&str; 5] = ["claude-code", "codex", "gemini", "opencode", "copilot"];

/// The hosts whose hook rewrites the command (Claude Code runs it through the shell prefix and
/// opencode replaces only the output: their hooks give no opinion).
const REWRITING: [&str; 2] = ["codex", "gemini"];

/// The most bytes each rewriting host passes to its model before cutting (see
/// `src/client/hook/budget.rs`).
fn host_cap(host: &str) -> usize {
    match host {
        "codex" => 10_000,
        "gemini" => 40_000,
        _ => 30_000,
    }
}

/// Gemini CLI refuses command substitution in the model's command itself: its hook leaves
/// such commands alone for Gemini to judge.
fn left_alone_by(host: &str, command: &str) -> bool {
    host == "gemini" && ["$(", "`", "<(", ">("].iter().any(|s| command.contains(s))
}

/// Commands whose quoting, expansion and shell features must survive the rewrite unchanged.
const COMMANDS: &[&str] = &[
    "echo 'single quoted' \"double quoted\"",
    "printf '%s\\n' \"it's\" 'say \"hi\"'",
    "echo \"$SPILLWAY_TEST_VAR\" '$SPILLWAY_TEST_VAR' ${SPILLWAY_TEST_VAR:-unset}",
    "echo `echo backticks` $(echo dollar-paren)",
    "cat <<'EOF'\nquoted $SPILLWAY_TEST_VAR `not run`\nEOF",
    "cat <<EOF\nexpanded $SPILLWAY_TEST_VAR\nEOF",
    "true && echo and || echo or; false || echo or-ran",
    "echo one\necho two\n\necho three",
    "printf 'back\\\\slash \\\\n kept\\n'; echo 'a\\b'",
    "pwd",
    "for i in 1 2 3; do echo \"n=$i\"; done | tac",
    "[[ -n \"$BASH_VERSION\" ]] && echo bash || echo not-bash",
    "echo before; exit 3",
    "kill -TERM $$",
    "x=$'tab\\there'; echo \"$x\"",
    "echo ünïcödé ✓ '✓'",
    "  echo leading-space",
];

/// The JSON `host` documents for its shell tool running `command` in `cwd`.
fn host_input(host: &str, command: &str, cwd: &Path) -> Value {
    let cwd = cwd.to_str().unwrap();
    match host {
        // code.claude.com/docs/en/hooks: PreToolUse input, Bash tool_input.
        "claude-code" => json!({
            "session_id": "abc123",
            "transcript_path": "/tmp/transcript.jsonl",
            "cwd": cwd,
            "permission_mode": "default",
            "hook_event_name": "PreToolUse",
            "tool_name": "Bash",
            "tool_input": {"command": command, "description": "test", "timeout": 120000},
            "tool_use_id": "toolu_01"
        }),
        // codex-rs/hooks: PreToolUseCommandInput; shell-like tools pass {"command"}.
        "codex" => json!({
            "session_id": "019a0000-0000-7000-8000-000000000000",
            "turn_id": "1",
            "transcript_path": null,
            "cwd": cwd,
            "hook_event_name": "PreToolUse",
            "model": "gpt-5",
            "permission_mode": "default",
            "tool_name": "Bash",
            "tool_input": {"command": command},
            "tool_use_id": "call_1"
        }),
        // geminicli.com/docs/hooks/reference: BeforeTool input.
        "gemini" => json!({
            "session_id": "s1",
            "transcript_path": "/tmp/t.json",
            "cwd": cwd,
            "hook_event_name": "BeforeTool",
            "timestamp": "2026-11-24T00:00:00Z",
            "tool_name": "run_shell_command",
            "tool_input": {"command": command, "description": "test"}
        }),
        // The plugin `init` writes passes tool.execute.before's input.tool and output.args.
        "opencode" => json!({"tool": "bash", "args": {"command": command, "description": "d"}}),
        // docs.github.com Copilot CLI hooks reference: preToolUse (camelCase) input; toolArgs
        // arrives as a JSON string.
        "copilot" => json!({
            "sessionId": "s1",
            "timestamp": 1_763_942_400_000u64,
            "cwd": cwd,
            "toolName": "bash",
            "toolArgs": json!({"command": command, "description": "d"}).to_string()
        }),
        other => panic!("unknown host {other}"),
    }
}

/// The command in `host`'s answer.
fn answered_command(host: &str, answer: &Value) -> Option<String> {
    let command = match host {
        "claude-code" | "codex" => &answer["hookSpecificOutput"]["updatedInput"]["command"],
        "gemini" => &answer["hookSpecificOutput"]["tool_input"]["command"],
        "opencode" => &answer["args"]["command"],
        other => panic!("unknown host {other}"),
    };
    command.as_str().map(str::to_string)
}

fn hook(daemon: &TestDaemon, host: &str, input: &Value, env: &[(&str, &str)]) -> Output {
    let mut cmd = daemon.spillway();
    cmd.args(["hook", host]).envs(env.iter().copied());
    run_with_input(cmd, input.to_string().as_bytes())
}

/// Runs `command` with `bash -c`, as the hosts run their shell tool's command.
fn bash(command: &str, cwd: &Path, daemon: &TestDaemon) -> Output {
    Command::new("bash")
        .arg("-c")
        .arg(command)
        .current_dir(cwd)
        .env("SPILLWAY_TEST_VAR", "v a l$ue")
        .env("SPILLWAY_SOCKET", &daemon.socket)
        .env("SPILLWAY_DATA_DIR", daemon.sandbox.data_dir())
        .stdin(Stdio::null())
        .output()
        .expect("run bash")
}

/// The exit code as a host reports it: 128+N for a shell ended by signal N. (`bash -c 'kill
/// $$'` dies by the signal itself; through spillway the outer shell exits 128+N.)
fn exit_code(out: &Output) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    out.status
        .code()
        .or_else(|| out.status.signal().map(|n| 128 + n))
        .expect("an exit code or a signal")
}

/// The command each host would run for `original`, or a failure message.
fn rewritten(daemon: &TestDaemon, host: &str, original: &str, cwd: &Path) -> String {
    let out = hook(daemon, host, &host_input(host, original, cwd), &[]);
    assert!(out.status.success(), "{host}: the hook failed: {out:?}");
    let answer: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{host}: no JSON answer for {original:?} ({e}): {out:?}"));
    answered_command(host, &answer).unwrap_or_else(|| panic!("{host}: no command in {answer}"))
}

#[test]
fn each_hosts_rewrite_keeps_the_commands_meaning() {
    let daemon = TestDaemon::start();
    let cwd = tempfile::tempdir().unwrap();
    for original in COMMANDS {
        let direct = bash(original, cwd.path(), &daemon);
        for host in REWRITING {
            if left_alone_by(host, original) {
                let out = hook(&daemon, host, &host_input(host, original, cwd.path()), &[]);
                assert!(
                    out.stdout.is_empty(),
                    "{host}: rewrote {original:?}: {out:?}"
                );
                continue;
            }
            let new = rewritten(&daemon, host, original, cwd.path());
            assert!(new.contains(" run "), "{host}: {new}");
            let via = bash(&new, cwd.path(), &daemon);
            assert_eq!(
                exit_code(&via),
                exit_code(&direct),
                "{host}: exit code of {original:?} via {new:?}: {via:?}"
            );
            assert_eq!(
                String::from_utf8_lossy(&via.stdout),
                String::from_utf8_lossy(&direct.stdout),
                "{host}: output of {original:?} via {new:?}"
            );
        }
    }
}

#[test]
fn a_long_output_comes_back_as_a_preview_with_its_notice() {
    let daemon = TestDaemon::start();
    let cwd = tempfile::tempdir().unwrap();
    for host in REWRITING {
        let new = rewritten(&daemon, host, "seq 1 100000; exit 4", cwd.path());
        let via = bash(&new, cwd.path(), &daemon);
        let text = String::from_utf8_lossy(&via.stdout);
        assert_eq!(via.status.code(), Some(4), "{host}: {via:?}");
        assert!(text.starts_with("1\n2\n3\n"), "{host}: {text}");
        assert!(text.contains("100000\n"), "{host}: the tail is shown");
        assert!(
            text.contains("[spillway: output truncated"),
            "{host}: {text}"
        );
        assert!(
            text.contains("spillway read "),
            "{host}: the notice says how to read on"
        );
        assert!(
            text.len() <= host_cap(host),
            "{host}: {} bytes over its cap",
            text.len()
        );
        // The host states the exit code itself: spillway adds no line of its own.
        assert!(via.stderr.is_empty(), "{host}: {via:?}");
    }
}

#[test]
fn the_hook_leaves_alone_what_it_should() {
    let daemon = TestDaemon::start();
    let cwd = tempfile::tempdir().unwrap();
    for host in HOSTS {
        let no_answer = |input: Value, env: &[(&str, &str)]| {
            let out = hook(&daemon, host, &input, env);
            assert!(out.status.success(), "{host}: {out:?}");
            assert!(out.stdout.is_empty(), "{host}: answered {input}: {out:?}");
        };
        no_answer(
            host_input(host, "SPILLWAY_SKIP=1 make -j8", cwd.path()),
            &[],
        );
        no_answer(
            host_input(host, "spillway history --limit 3", cwd.path()),
            &[],
        );
        no_answer(
            host_input(host, "ls", cwd.path()),
            &[("SPILLWAY_HOOK", "off")],
        );
        if REWRITING.contains(&host) {
            // The rewritten command is itself left alone: a second hook in line changes nothing.
            let once = rewritten(&daemon, host, "ls", cwd.path());
            no_answer(host_input(host, &once, cwd.path()), &[]);
        } else {
            // Claude Code, opencode and Copilot CLI: never a rewrite, whatever the command.
            no_answer(host_input(host, "rm -f x; ls", cwd.path()), &[]);
        }
        for garbage in [
            json!(null),
            json!({"tool_input": 1}),
            json!({"unrelated": true}),
        ] {
            no_answer(garbage, &[]);
        }
        let out = run_with_input(
            {
                let mut cmd = daemon.spillway();
                cmd.args(["hook", host]);
                cmd
            },
            b"{not json",
        );
        assert!(
            out.status.success() && out.stdout.is_empty(),
            "{host}: {out:?}"
        );
    }
}

#[test]
fn the_opencode_plugin_replaces_only_a_cut_output() {
    let daemon = TestDaemon::start();
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let out = init(home.path(), project.path(), "opencode", "user", &[]);
    assert!(out.status.success(), "{out:?}");
    let plugin = home.path().join(".config/opencode/plugins/spillway.js");
    let whole = project.path().join("whole-output.txt");
    let text: String = (1..=100_000).map(|n| format!("line {n}\n")).collect();
    std::fs::write(&whole, &text).unwrap();
    // opencode calls "tool.execute.after"(input, output) with the tool's result; when it cut
    // the output, the result's metadata names the file holding all of it.
    let script = format!(
        "const m = await import({plugin:?});\n\
         for (const make of Object.values(m)) {{\n\
           const hooks = await make({{}});\n\
           if ('tool.execute.before' in hooks) process.exit(8);\n\
           const cut = {{ output: 'cut by opencode', metadata: {{ outputPath: process.argv[1] }} }};\n\
           await hooks['tool.execute.after']({{ tool: 'bash', sessionID: 's', callID: 'c', args: {{}} }}, cut);\n\
           const small = {{ output: 'small', metadata: {{}} }};\n\
           await hooks['tool.execute.after']({{ tool: 'bash', sessionID: 's', callID: 'c', args: {{}} }}, small);\n\
           if (small.output !== 'small') process.exit(9);\n\
           process.stdout.write(cut.output);\n\
         }}\n",
        plugin = plugin.to_str().unwrap()
    );
    let out = Command::new("node")
        .args([
            "--input-type=module",
            "-e",
            &script,
            whole.to_str().unwrap(),
        ])
        .env("SPILLWAY_SOCKET", &daemon.socket)
        .env("SPILLWAY_DATA_DIR", daemon.sandbox.data_dir())
        .output()
        .expect("run node");
    assert!(out.status.success(), "{out:?}");
    let preview = String::from_utf8(out.stdout).unwrap();
    assert!(preview.starts_with("line 1\nline 2\n"), "{preview}");
    assert!(preview.contains("line 100000\n"), "the tail is shown");
    assert!(preview.contains("[spillway: "), "the notice is there");
    assert!(preview.len() <= 50 * 1024, "{} bytes", preview.len());
    assert!(preview.lines().count() <= 2_000);
}

/// Copilot CLI's `postToolUse` input for a shell call whose result the model would read.
fn copilot_result(text: &str) -> Value {
    json!({
        "sessionId": "s1",
        "timestamp": 1_763_942_400_000u64,
        "cwd": "/tmp",
        "toolName": "bash",
        "toolArgs": {"command": "make", "description": "d"},
        "toolResult": {"resultType": "success", "textResultForLlm": text}
    })
}

#[test]
fn the_copilot_hook_replaces_only_an_output_copilot_saved() {
    let daemon = TestDaemon::start();
    // Copilot CLI saves an output over 20,000 characters to $TMPDIR/<ms>-copilot-tool-output-
    // <...>.txt and tells the model where, with its first 500 characters and its exit line.
    let saved = tempfile::Builder::new()
        .prefix("1795707989410-copilot-tool-output-")
        .suffix(".txt")
        .tempfile_in("/tmp")
        .unwrap();
    let text: String = (1..=100_000).map(|n| format!("line {n}\n")).collect();
    std::fs::write(saved.path(), format!("{text}error: boom\n")).unwrap();
    let note = |path: &Path| {
        format!(
            "Output too large to read at once (1.1 MB). Saved to: {}\nConsider using tools like \
             rg.\n\nPreview (first 500 chars):\nline 1\nline 2\n\n<shellId: 4 completed with exit \
             code 2>",
            path.display()
        )
    };
    let out = hook(
        &daemon,
        "copilot",
        &copilot_result(&note(saved.path())),
        &[],
    );
    let answer: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no JSON answer ({e}): {out:?}"));
    let result = &answer["modifiedResult"];
    assert_eq!(result["resultType"], "success");
    let shown = result["textResultForLlm"].as_str().unwrap();
    assert!(shown.starts_with("line 1\nline 2\n"), "{shown}");
    assert!(shown.contains("error: boom\n"), "the end is shown: {shown}");
    assert!(shown.contains("[spillway: output truncated"), "{shown}");
    assert!(
        shown.ends_with("]\n\n<shellId: 4 completed with exit code 2>"),
        "Copilot's exit line is kept, last: {shown}"
    );
    assert!(shown.chars().count() <= 20_000, "{} chars", shown.len());
    // The notice's spill holds the whole output, byte for byte.
    let spill = shown
        .lines()
        .find_map(|l| l.strip_prefix("Full output: "))
        .expect("a spill path");
    assert_eq!(
        std::fs::read_to_string(spill).unwrap(),
        format!("{text}error: boom\n")
    );

    // A result Copilot kept whole, and a look-alike note naming another file, are left alone.
    let other = tempfile::NamedTempFile::new_in("/tmp").unwrap();
    std::fs::write(other.path(), &text).unwrap();
    for result in ["line 1\nline 2\n".to_string(), note(other.path())] {
        let out = hook(&daemon, "copilot", &copilot_result(&result), &[]);
        assert!(out.status.success() && out.stdout.is_empty(), "{out:?}");
    }
    // A link with the host's name is not followed.
    let dir = tempfile::tempdir_in("/tmp").unwrap();
    let link = Path::new("/tmp").join(format!(
        "1795707989411-copilot-tool-output-{}.txt",
        dir.path().file_name().unwrap().to_string_lossy()
    ));
    std::os::unix::fs::symlink(other.path(), &link).unwrap();
    let out = hook(&daemon, "copilot", &copilot_result(&note(&link)), &[]);
    std::fs::remove_file(&link).unwrap();
    assert!(out.status.success() && out.stdout.is_empty(), "{out:?}");
}

/// Every file under `root`, with its bytes, and every directory.
fn snapshot(root: &Path) -> BTreeMap<PathBuf, Option<Vec<u8>>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let rel = path.strip_prefix(root).unwrap().to_path_buf();
            if path.is_dir() {
                out.insert(rel, None);
                stack.push(path);
            } else {
                out.insert(rel, Some(std::fs::read(&path).unwrap()));
            }
        }
    }
    out
}

fn init(home: &Path, project: &Path, host: &str, scope: &str, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_spillway"))
        .args(["init", "--agent", host, "--scope", scope])
        .args(extra)
        .current_dir(project)
        .env("HOME", home)
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("CODEX_HOME")
        .output()
        .expect("run spillway init")
}

fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// Configurations a user may already have: other settings, other hooks, other MCP servers,
/// another indent, comments in TOML, keys out of alphabetical order.
fn seed(host: &str, home: &Path, project: &Path) {
    let claude_settings = "{\n    \"permissions\": {\n        \"allow\": [\"Bash(ls:*)\"]\n    },\n    \"model\": \"opus\",\n    \"hooks\": {\n        \"PreToolUse\": [\n            {\n                \"matcher\": \"Bash\",\n                \"hooks\": [{\"type\": \"command\", \"command\": \"audit.sh\"}]\n            }\n        ],\n        \"Stop\": [{\"hooks\": [{\"type\": \"command\", \"command\": \"notify\"}]}]\n    }\n}\n";
    let mcp =
        "{\"mcpServers\": {\"other\": {\"command\": \"other-mcp\", \"args\": []}}, \"zeta\": 1}";
    match host {
        "claude-code" => {
            write(home, ".claude/settings.json", claude_settings);
            write(home, ".claude.json", mcp);
            write(project, ".claude/settings.json", claude_settings);
            write(project, ".mcp.json", mcp);
        }
        "codex" => {
            let hooks = "{\n  \"hooks\": {\n    \"PreToolUse\": [\n      {\"matcher\": \"Bash\", \"hooks\": [{\"type\": \"command\", \"command\": \"guard\"}]}\n    ]\n  }\n}\n";
            let toml = "# my codex\nmodel = \"o3\"  # fast\n\n[mcp_servers.other]\ncommand = \"other-mcp\"\n\n[profiles.deep]\nmodel = \"gpt-5\"\n";
            write(home, ".codex/hooks.json", hooks);
            write(home, ".codex/config.toml", toml);
            write(project, ".codex/hooks.json", hooks);
            write(project, ".codex/config.toml", toml);
        }
        "gemini" => {
            let settings = "{\n\t\"ui\": {\"theme\": \"GitHub\"},\n\t\"hooks\": {\"BeforeTool\": [{\"matcher\": \"write_file\", \"hooks\": [{\"type\": \"command\", \"command\": \"lint\"}]}]},\n\t\"mcpServers\": {\"other\": {\"command\": \"other-mcp\"}}\n}";
            write(home, ".gemini/settings.json", settings);
            write(project, ".gemini/settings.json", settings);
        }
        "opencode" => {
            let config = "{\n  \"$schema\": \"https://opencode.ai/config.json\",\n  \"model\": \"anthropic/claude-sonnet-4-5\",\n  \"mcp\": {\"other\": {\"type\": \"remote\", \"url\": \"http://localhost:1\"}}\n}\n";
            write(home, ".config/opencode/opencode.json", config);
            write(
                home,
                ".config/opencode/plugins/other.js",
                "export const Other = async () => ({})\n",
            );
            write(project, "opencode.json", config);
            write(
                project,
                ".opencode/plugins/other.js",
                "export const Other = async () => ({})\n",
            );
        }
        "copilot" => {
            let hooks = "{\"version\": 1, \"hooks\": {\"preToolUse\": [{\"type\": \"command\", \"bash\": \"audit\"}]}}\n";
            write(home, ".copilot/hooks/audit.json", hooks);
            write(home, ".copilot/mcp-config.json", mcp);
            write(project, ".github/hooks/audit.json", hooks);
            write(project, ".mcp.json", mcp);
        }
        other => panic!("unknown host {other}"),
    }
}

#[test]
fn init_then_uninstall_leaves_every_file_as_it_was() {
    for host in HOSTS {
        for scope in ["user", "project"] {
            for seeded in [false, true] {
                let what = format!("{host} --scope {scope} (existing config: {seeded})");
                let root = tempfile::tempdir().unwrap();
                let (home, project) = (root.path().join("home"), root.path().join("project"));
                std::fs::create_dir_all(&home).unwrap();
                std::fs::create_dir_all(&project).unwrap();
                if seeded {
                    seed(host, &home, &project);
                }
                let before = snapshot(root.path());

                let dry = init(&home, &project, host, scope, &["--dry-run"]);
                assert!(dry.status.success(), "{what}: {dry:?}");
                assert!(
                    String::from_utf8_lossy(&dry.stdout).contains("would "),
                    "{what}"
                );
                assert_eq!(snapshot(root.path()), before, "{what}: --dry-run wrote");

                let first = init(&home, &project, host, scope, &[]);
                assert!(first.status.success(), "{what}: {first:?}");
                let installed = snapshot(root.path());
                assert_ne!(installed, before, "{what}: init changed nothing");
                let text: String = installed
                    .values()
                    .flatten()
                    .map(|b| String::from_utf8_lossy(b).into_owned())
                    .collect();
                let hook = match host {
                    "claude-code" => vec!["CLAUDE_CODE_SHELL_PREFIX".to_string()],
                    "opencode" => vec!["tool.execute.after".to_string()],
                    _ => vec![format!("hook {host}"), format!("[\"hook\", \"{host}\"]")],
                };
                assert!(hook.iter().any(|h| text.contains(h)), "{what}: no hook");
                if seeded {
                    // Everything the user had is still there, and the originals are kept.
                    for needle in ["other-mcp", "other", "audit", "guard", "lint", "notify"] {
                        let had = before
                            .values()
                            .flatten()
                            .any(|b| String::from_utf8_lossy(b).contains(needle));
                        assert!(!had || text.contains(needle), "{what}: lost {needle}");
                    }
                    let backups = installed
                        .keys()
                        .filter(|p| p.to_string_lossy().ends_with(".spillway-backup"));
                    for backup in backups {
                        let original = PathBuf::from(
                            backup
                                .to_string_lossy()
                                .trim_end_matches(".spillway-backup"),
                        );
                        assert_eq!(installed[backup], before[&original], "{what}: {backup:?}");
                    }
                }

                let again = init(&home, &project, host, scope, &[]);
                assert!(again.status.success(), "{what}: {again:?}");
                assert_eq!(
                    snapshot(root.path()),
                    installed,
                    "{what}: init twice differs"
                );
                assert!(
                    String::from_utf8_lossy(&again.stdout)
                        .lines()
                        .filter(|l| !l.starts_with("note:"))
                        .all(|l| l.starts_with("unchanged ")),
                    "{what}: {again:?}"
                );

                let dry = init(&home, &project, host, scope, &["--uninstall", "--dry-run"]);
                assert!(dry.status.success(), "{what}: {dry:?}");
                assert_eq!(snapshot(root.path()), installed, "{what}: --dry-run wrote");

                let undone = init(&home, &project, host, scope, &["--uninstall"]);
                assert!(undone.status.success(), "{what}: {undone:?}");
                let after = snapshot(root.path());
                assert_eq!(
                    after.keys().collect::<Vec<_>>(),
                    before.keys().collect::<Vec<_>>(),
                    "{what}: files differ after uninstall"
                );
                assert!(after == before, "{what}: contents differ after uninstall");
            }
        }
    }
}

#[test]
fn init_refuses_a_config_it_cannot_read_and_writes_nothing() {
    let root = tempfile::tempdir().unwrap();
    let home = root.path().join("home");
    write(
        &home,
        ".claude.json",
        "{ \"mcpServers\": { // a comment\n } }",
    );
    let before = snapshot(root.path());
    let out = init(&home, root.path(), "claude-code", "user", &[]);
    assert_eq!(out.status.code(), Some(125), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(".claude.json"),
        "{out:?}"
    );
    // Nothing at all was written, not even the other file of the pair.
    assert_eq!(snapshot(root.path()), before);
}

fn host_clis() -> PathBuf {
    let package = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/hosts/package.json");
    npm::installed(&package).join("node_modules/.bin")
}

/// `spillway init --agent HOST` in a scratch home, then the host's own `mcp list` there.
fn host_cli_lists_spillway(host: &str, cli: &str, scope: &str, expect: &[&str]) {
    let bin = host_clis();
    let daemon = TestDaemon::start();
    let root = tempfile::tempdir().unwrap();
    let (home, project) = (root.path().join("home"), root.path().join("project"));
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&project).unwrap();
    if host == "codex" && scope == "project" {
        // Codex reads a project's .codex/ only once the user has trusted the project.
        write(
            &home,
            ".codex/config.toml",
            &format!(
                "[projects.{:?}]\ntrust_level = \"trusted\"\n",
                project.to_str().unwrap()
            ),
        );
    }
    let out = init(&home, &project, host, scope, &[]);
    assert!(out.status.success(), "{out:?}");
    let spillway_dir = Path::new(env!("CARGO_BIN_EXE_spillway")).parent().unwrap();
    let path = format!(
        "{}:{}",
        spillway_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new(bin.join(cli))
        .args(["mcp", "list"])
        .current_dir(&project)
        .env("HOME", &home)
        .env("PATH", path)
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("CODEX_HOME")
        .env("SPILLWAY_SOCKET", &daemon.socket)
        .env("SPILLWAY_DATA_DIR", daemon.sandbox.data_dir())
        .stdin(Stdio::null())
        .output()
        .expect("run the host's CLI");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{cli} mcp list: {text}");
    for needle in expect {
        assert!(
            text.contains(needle),
            "{cli} mcp list lacks {needle:?}:\n{text}"
        );
    }
}

#[test]
fn claude_code_lists_and_connects_to_spillway() {
    host_cli_lists_spillway("claude-code", "claude", "user", &["spillway", "Connected"]);
}

#[test]
fn codex_lists_spillway() {
    host_cli_lists_spillway("codex", "codex", "user", &["spillway", "enabled"]);
    host_cli_lists_spillway("codex", "codex", "project", &["spillway"]);
}

#[test]
fn gemini_lists_spillway() {
    // Gemini CLI lists it "Disabled" in a folder the user has not trusted (a scratch one).
    host_cli_lists_spillway("gemini", "gemini", "user", &["spillway", "spillway mcp"]);
}

#[test]
fn opencode_lists_and_connects_to_spillway() {
    host_cli_lists_spillway("opencode", "opencode", "user", &["spillway", "connected"]);
    host_cli_lists_spillway(
        "opencode",
        "opencode",
        "project",
        &["spillway", "connected"],
    );
}

#[test]
fn copilot_lists_spillway() {
    host_cli_lists_spillway("copilot", "copilot", "user", &["spillway (local)"]);
}

/// `npx @modelcontextprotocol/inspector --cli spillway mcp --method ...`, parsed.
fn inspector(daemon: &TestDaemon, args: &[&str]) -> (Value, usize) {
    let bin = host_clis();
    let out = Command::new(bin.join("mcp-inspector"))
        .arg("--cli")
        .arg(env!("CARGO_BIN_EXE_spillway"))
        .args(["mcp", "--socket"])
        .arg(&daemon.socket)
        .arg("--data-dir")
        .arg(daemon.sandbox.data_dir())
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run the MCP Inspector");
    let value: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("inspector {args:?}: not JSON ({e}): {out:?}"));
    // A tool error (`isError`, e.g. input for a run that has ended) is a result too; the
    // Inspector exits non-zero for it.
    assert!(
        out.status.success() || value["isError"] == true,
        "inspector {args:?}: {out:?}"
    );
    (value, out.stdout.len())
}

/// A tool result the model reads once: one text block, no structured copy beside it.
fn single_text(result: &Value) -> &str {
    assert!(result.get("structuredContent").is_none(), "{result}");
    let content = result["content"].as_array().expect("content");
    assert_eq!(content.len(), 1, "{result}");
    assert_eq!(content[0]["type"], "text", "{result}");
    content[0]["text"].as_str().unwrap()
}

#[test]
fn the_mcp_inspector_reads_each_result_once() {
    let daemon = TestDaemon::start();
    let (tools, _) = inspector(&daemon, &["--method", "tools/list"]);
    let mut names: Vec<&str> = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
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

    let call = |tool: &str, args: &[String]| {
        let mut argv = vec!["--method", "tools/call", "--tool-name", tool];
        for arg in args {
            argv.extend(["--tool-arg", arg.as_str()]);
        }
        inspector(&daemon, &argv)
    };
    let (result, bytes) = call("bash", &["command=seq 1 200000".into()]);
    let text = single_text(&result);
    assert!(bytes < 60_000, "{bytes} bytes for 200,000 lines");
    assert!(text.contains("call read_output with id="), "{text}");
    assert!(text.ends_with("200000 lines of output]"), "{text}");
    let id = text
        .split("id=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("the run's id")
        .to_string();

    for (tool, args) in [
        (
            "read_output",
            vec![format!("id={id}"), "offset=1001".into(), "limit=5".into()],
        ),
        (
            "grep_output",
            vec![format!("id={id}"), "pattern=^19999[0-9]$".into()],
        ),
        ("wait", vec![format!("id={id}")]),
        ("history", vec!["limit=3".into()]),
        ("send_input", vec![format!("id={id}"), "text=y".into()]),
        ("kill", vec![format!("id={id}")]),
    ] {
        let (result, bytes) = call(tool, &args);
        let text = single_text(&result);
        assert!(bytes < 60_000, "{tool}: {bytes} bytes");
        assert!(!text.is_empty(), "{tool}: {result}");
        if tool == "read_output" {
            assert!(text.contains("1001") && text.contains("1005"), "{text}");
        }
        if tool == "grep_output" {
            assert!(text.contains("199999"), "{text}");
        }
    }
}

fn mode_of(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn init_keeps_private_modes_numbers_links_and_the_users_own_entries() {
    use std::os::unix::fs::PermissionsExt;
    let root = tempfile::tempdir().unwrap();
    let (home, project) = (root.path().join("home"), root.path().join("project"));
    std::fs::create_dir_all(&project).unwrap();
    // A private ~/.claude.json with the user's own spillway server, and numbers in the settings.
    let own = "{\n  \"mcpServers\": {\n    \"spillway\": {\n      \"command\": \"spillway\",\n      \"args\": [\"mcp\", \"--data-dir\", \"/srv/x\"]\n    }\n  },\n  \"token\": \"k\"\n}\n";
    write(&home, ".claude.json", own);
    std::fs::set_permissions(
        home.join(".claude.json"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    // The settings are a link into a dotfiles folder, with numbers serde would rewrite.
    let numbers =
        "{\n  \"n\": 1e3,\n  \"m\": 1.10,\n  \"big\": 123456789012345678901234567890\n}\n";
    write(&home, "dotfiles/claude-settings.json", numbers);
    std::fs::create_dir_all(home.join(".claude")).unwrap();
    std::os::unix::fs::symlink(
        home.join("dotfiles/claude-settings.json"),
        home.join(".claude/settings.json"),
    )
    .unwrap();
    let out = init(&home, &project, "claude-code", "user", &[]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        std::fs::read_to_string(home.join(".claude.json")).unwrap(),
        own
    );
    assert_eq!(mode_of(&home.join(".claude.json")), 0o600);
    let link = home.join(".claude/settings.json");
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    let edited = std::fs::read_to_string(&link).unwrap();
    assert!(edited.contains("CLAUDE_CODE_SHELL_PREFIX"), "{edited}");
    for number in ["1e3", "1.10", "123456789012345678901234567890"] {
        assert!(edited.contains(number), "{number} rewritten: {edited}");
    }
    let out = init(&home, &project, "claude-code", "user", &["--uninstall"]);
    assert!(out.status.success(), "{out:?}");
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(std::fs::read_to_string(&link).unwrap(), numbers);
    assert_eq!(
        std::fs::read_to_string(home.join(".claude.json")).unwrap(),
        own
    );

    // A private file that init edits: its backup and the file stay private.
    let private = "{\"mcpServers\": {}, \"apiKey\": \"secret\"}\n";
    write(&home, ".gemini/settings.json", private);
    let settings = home.join(".gemini/settings.json");
    std::fs::set_permissions(&settings, std::fs::Permissions::from_mode(0o600)).unwrap();
    let out = init(&home, &project, "gemini", "user", &[]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(mode_of(&settings), 0o600);
    assert_eq!(
        mode_of(&home.join(".gemini/settings.json.spillway-backup")),
        0o600
    );

    // A project file that is a link (to a file of the user's home, say): refused, untouched.
    std::os::unix::fs::symlink(home.join(".claude.json"), project.join(".mcp.json")).unwrap();
    let out = init(&home, &project, "claude-code", "project", &[]);
    assert!(!out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("symbolic link"),
        "{out:?}"
    );
    assert_eq!(
        std::fs::read_to_string(home.join(".claude.json")).unwrap(),
        own
    );
    assert!(
        !project.join(".claude/settings.json").exists(),
        "nothing was written"
    );

    // A read-only file: refused, untouched.
    write(&home, ".codex/hooks.json", "{}\n");
    let hooks = home.join(".codex/hooks.json");
    std::fs::set_permissions(&hooks, std::fs::Permissions::from_mode(0o444)).unwrap();
    let out = init(&home, &project, "codex", "user", &[]);
    assert!(!out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("read-only"),
        "{out:?}"
    );
    assert_eq!(std::fs::read_to_string(&hooks).unwrap(), "{}\n");
}
