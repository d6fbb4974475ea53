//! Where each host keeps its hooks and its MCP servers, and what spillway adds there.
//!
//! Every entry spillway adds is recognisable as its own (a command whose program is named
//! `spillway`), so installing again replaces it in place and uninstalling removes exactly it,
//! whatever else the user keeps beside it.

use std::path::PathBuf;

use anyhow::{Context, bail};

use super::entries::{edit_hook_groups, edit_mcp, is_spillway};
use super::json::{Json, obj, string};
use super::{Edit, Format, Mode, Scope, Setup};
use crate::client::hook::{Host, quote};

/// The files `host` needs edited at `setup`'s scope, in the order they are applied.
pub(crate) fn edits(host: Host, setup: &Setup) -> Vec<Edit> {
    let user = setup.scope == Scope::User;
    let home = &setup.home;
    let project = &setup.project;
    let hook = format!("{} hook {}", quote(&setup.program), host.name());
    let program = setup.program.clone();
    match host {
        Host::ClaudeCode => vec![
            claude_prefix(
                pick(
                    user,
                    home.join(".claude/settings.json"),
                    project.join(".claude/settings.json"),
                ),
                &program,
            ),
            mcp_json(
                pick(user, home.join(".claude.json"), project.join(".mcp.json")),
                "mcpServers",
                plain_mcp(&program),
            ),
        ],
        Host::Codex => {
            let dir = pick(user, setup.codex_home.clone(), project.join(".codex"));
            vec![
                hook_groups(
                    dir.join("hooks.json"),
                    host,
                    "PreToolUse",
                    obj([("matcher", string("Bash")), ("hooks", Json::Array(vec![]))]),
                    obj([("type", string("command")), ("command", string(&hook))]),
                ),
                codex_mcp(dir.join("config.toml"), program),
            ]
        }
        Host::Gemini => {
            let path = pick(
                user,
                home.join(".gemini/settings.json"),
                project.join(".gemini/settings.json"),
            );
            let entry = obj([
                ("name", string("spillway")),
                ("type", string("command")),
                ("command", string(&hook)),
            ]);
            let group = obj([
                ("matcher", string("run_shell_command")),
                ("hooks", Json::Array(vec![])),
            ]);
            let mcp = plain_mcp(&program);
            vec![Edit::json(path, move |doc, mode| {
                edit_hook_groups(doc, host, "BeforeTool", &group, &entry, mode)?;
                edit_mcp(doc, "mcpServers", &mcp, mode)
            })]
        }
        Host::Opencode => {
            let dir = pick(
                user,
                setup.xdg_config.join("opencode"),
                project.join(".opencode"),
            );
            let config_dir = pick(user, setup.xdg_config.join("opencode"), project.clone());
            let config = ["opencode.json", "opencode.jsonc"]
                .iter()
                .map(|name| config_dir.join(name))
                .find(|p| p.exists())
                .unwrap_or_else(|| config_dir.join("opencode.json"));
            let mcp = obj([
                ("type", string("local")),
                (
                    "command",
                    Json::Array(vec![string(&program), string("mcp")]),
                ),
                ("enabled", Json::Bool(true)),
            ]);
            vec![
                Edit::owned(
                    dir.join("plugins/spillway.js"),
                    opencode_plugin(&program),
                    OPENCODE_MARK,
                ),
                Edit::json(config, move |doc, mode| edit_mcp(doc, "mcp", &mcp, mode)),
            ]
        }
        Host::Copilot => {
            let hooks = pick(
                user,
                home.join(".copilot/hooks/spillway.json"),
                project.join(".github/hooks/spillway.json"),
            );
            let file = obj([
                ("version", Json::number(1)),
                (
                    "hooks",
                    obj([(
                        "postToolUse",
                        Json::Array(vec![obj([
                            ("type", string("command")),
                            ("matcher", string("bash")),
                            ("bash", string(&hook)),
                            ("timeoutSec", Json::number(30)),
                        ])]),
                    )]),
                ),
            ]);
            let mcp = if user {
                obj([
                    ("type", string("local")),
                    ("command", string(&program)),
                    ("args", Json::Array(vec![string("mcp")])),
                    ("tools", Json::Array(vec![string("*")])),
                ])
            } else {
                plain_mcp(&program)
            };
            vec![
                Edit::owned(hooks, file.render("  ") + "\n", "hook copilot"),
                mcp_json(
                    pick(
                        user,
                        home.join(".copilot/mcp-config.json"),
                        project.join(".mcp.json"),
                    ),
                    "mcpServers",
                    mcp,
                ),
            ]
        }
    }
}

/// Claude Code's variable for the shell prefix (see [`crate::client::hook::prefix`]).
const CLAUDE_PREFIX_ENV: &str = "CLAUDE_CODE_SHELL_PREFIX";

/// Claude Code: `env.CLAUDE_CODE_SHELL_PREFIX` in `settings.json`, applied after Claude Code's
/// permission check, so its rules judge the command the model wrote. The `PreToolUse` hook
/// that earlier versions of `init` wrote (whose rewrite Claude Code judged instead of the
/// model's command) is removed on install as well as on uninstall.
fn claude_prefix(path: PathBuf, program: &str) -> Edit {
    let prefix = program.to_string();
    let usable = !program.contains(" -");
    let program = program.to_string();
    Edit::json(path, move |doc, mode| {
        let no_group = Json::Object(vec![]);
        edit_hook_groups(
            doc,
            Host::ClaudeCode,
            "PreToolUse",
            &no_group,
            &no_group,
            Mode::Uninstall,
        )?;
        let ours = |value: &Json| value.as_str().is_some_and(is_our_prefix);
        if mode == Mode::Uninstall {
            if let Some(env) = doc.get_mut("env") {
                if env.get(CLAUDE_PREFIX_ENV).is_some_and(ours) {
                    env.remove(CLAUDE_PREFIX_ENV);
                }
                if env.is_empty_container() {
                    doc.remove("env");
                }
            }
            return Ok(());
        }
        if !usable {
            bail!(
                "the path to spillway ({program}) contains \" -\", which Claude Code splits a shell prefix at: install spillway under a path without it"
            );
        }
        if doc.get("env").is_none() {
            doc.insert("env", Json::Object(vec![]));
        }
        let Some(env @ Json::Object(_)) = doc.get_mut("env") else {
            bail!("its \"env\" is not an object");
        };
        match env.get(CLAUDE_PREFIX_ENV) {
            Some(existing) if existing.as_str() == Some(prefix.as_str()) => {}
            Some(existing) if !ours(existing) => bail!(
                "it already sets {CLAUDE_PREFIX_ENV}, and Claude Code takes only one shell prefix"
            ),
            _ => env.insert(CLAUDE_PREFIX_ENV, string(&prefix)),
        }
        Ok(())
    })
}

/// Whether `value` is a spillway program, as `init` writes the prefix (unquoted: Claude Code
/// quotes the prefix itself).
fn is_our_prefix(value: &str) -> bool {
    is_spillway(value)
}

fn pick(user: bool, user_path: PathBuf, project_path: PathBuf) -> PathBuf {
    if user { user_path } else { project_path }
}

/// The `{"command", "args"}` entry that Claude Code's `.mcp.json` and `~/.claude.json`, Gemini
/// CLI's `mcpServers` and Copilot CLI's `.mcp.json` all read as a stdio server.
fn plain_mcp(program: &str) -> Json {
    obj([
        ("command", string(program)),
        ("args", Json::Array(vec![string("mcp")])),
    ])
}

fn mcp_json(path: PathBuf, key: &'static str, entry: Json) -> Edit {
    Edit::json(path, move |doc, mode| edit_mcp(doc, key, &entry, mode))
}

fn hook_groups(path: PathBuf, host: Host, event: &'static str, group: Json, entry: Json) -> Edit {
    Edit::json(path, move |doc, mode| {
        edit_hook_groups(doc, host, event, &group, &entry, mode)
    })
}

/// Codex's MCP servers live in `config.toml`, under `[mcp_servers.spillway]`; `toml_edit`
/// keeps every other byte of the file as it was.
fn codex_mcp(path: PathBuf, program: String) -> Edit {
    Edit {
        path,
        format: Format::Toml,
        change: Box::new(move |old, mode| {
            let text = old.unwrap_or("");
            let mut doc: toml_edit::DocumentMut =
                text.parse().context("cannot parse it as TOML")?;
            let table = doc.as_table_mut();
            if mode == Mode::Uninstall {
                if let Some(servers) = table
                    .get_mut("mcp_servers")
                    .and_then(|s| s.as_table_like_mut())
                {
                    if servers.get("spillway").is_some_and(is_our_toml_server) {
                        servers.remove("spillway");
                    }
                    if servers.is_empty() {
                        table.remove("mcp_servers");
                    }
                }
                return Ok(Some(doc.to_string()));
            }
            let servers = table
                .entry("mcp_servers")
                .or_insert_with(|| {
                    let mut t = toml_edit::Table::new();
                    t.set_implicit(true);
                    toml_edit::Item::Table(t)
                })
                .as_table_like_mut()
                .context("its mcp_servers is not a table")?;
            let current = servers.get("spillway");
            let same = current.is_some_and(|s| {
                s.get("command").and_then(|c| c.as_str()) == Some(program.as_str())
                    && s.get("args").and_then(|a| a.as_array()).is_some_and(|a| {
                        a.len() == 1 && a.get(0).and_then(|v| v.as_str()) == Some("mcp")
                    })
            });
            if same {
                return Ok(old.map(str::to_string));
            }
            if let Some(current) = current {
                let runs_spillway = current
                    .get("command")
                    .and_then(|c| c.as_str())
                    .is_some_and(is_spillway);
                if !runs_spillway {
                    bail!(
                        "it already has an MCP server named \"spillway\" that does not run spillway"
                    );
                }
                if !is_our_toml_server(current) {
                    // The user's own spillway server (their flags): theirs to keep.
                    return Ok(old.map(str::to_string));
                }
            }
            let mut server = toml_edit::Table::new();
            server["command"] = toml_edit::value(program.as_str());
            server["args"] = toml_edit::value(toml_edit::Array::from_iter(["mcp"]));
            servers.insert("spillway", toml_edit::Item::Table(server));
            Ok(Some(doc.to_string()))
        }),
    }
}

/// Whether a Codex `[mcp_servers.spillway]` is what `init` writes (a spillway program and
/// `args = ["mcp"]`, nothing else), whatever the program's path.
fn is_our_toml_server(server: &toml_edit::Item) -> bool {
    let Some(table) = server.as_table_like() else {
        return false;
    };
    let program = table.get("command").and_then(|c| c.as_str());
    let args = table.get("args").and_then(|a| a.as_array());
    program.is_some_and(is_spillway)
        && args.is_some_and(|a| a.len() == 1 && a.get(0).and_then(|v| v.as_str()) == Some("mcp"))
        && table.len() == 2
}

/// What marks the opencode plugin file as spillway's own.
const OPENCODE_MARK: &str = "Written by `spillway init --agent opencode`";

/// opencode's plugin. It changes nothing before a `bash` call (a rewrite there would change
/// what opencode's permission check and the model's history see): after the call, when
/// opencode had to cut the output (it saves the whole of it to a file and names that file in
/// the result's metadata), the plugin hands that file to `spillway truncate` and the model
/// reads spillway's preview instead of opencode's cut, sized under opencode's own cap.
/// Anything unexpected leaves the result as opencode made it.
fn opencode_plugin(program: &str) -> String {
    let program = serde_json::to_string(program).unwrap_or_else(|_| "\"spillway\"".into());
    let budget = crate::client::hook::budget::for_host(Host::Opencode, |_| None);
    let (lines, bytes) = (budget.max_lines, budget.max_bytes);
    format!(
        r#"// {OPENCODE_MARK}; removed by `spillway init --agent opencode --uninstall`.
// When opencode cuts a bash command's output, the model reads spillway's preview of the whole
// output instead (the most telling lines, the rest on disk). Set SPILLWAY_HOOK=off to turn it
// off.
import {{ spawnSync }} from "node:child_process";
import {{ readFileSync, statSync }} from "node:fs";

const SPILLWAY = {program};

// opencode may still be writing the file when the hook runs: wait until its size holds
// still (at most 5 s), so the preview is of the whole output.
async function settled(path) {{
  let last = -1;
  for (let i = 0; i < 50; i++) {{
    const size = statSync(path).size;
    if (size === last) return;
    last = size;
    await new Promise((done) => setTimeout(done, 100));
  }}
}}

export const SpillwayPlugin = async () => ({{
  "tool.execute.after": async (input, output) => {{
    if (input?.tool !== "bash" || typeof output?.output !== "string") return;
    if (/^(off|0|false|no)$/i.test((process.env.SPILLWAY_HOOK ?? "").trim())) return;
    const whole = output?.metadata?.outputPath;
    if (typeof whole !== "string") return;
    try {{
      await settled(whole);
      const preview = spawnSync(
        SPILLWAY,
        ["truncate", "--max-lines", "{lines}", "--max-bytes", "{bytes}"],
        {{ input: readFileSync(whole), encoding: "utf8", timeout: 60000, maxBuffer: 1 << 24 }},
      );
      if (preview.status === 0 && preview.stdout) output.output = preview.stdout;
    }} catch {{
      // No opinion: the model reads opencode's own result.
    }}
  }},
}});
"#
    )
}
