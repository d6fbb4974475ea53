//! spillway installed in the agent hosts' real CLIs (the versions tests/hosts/package.json pins),
//! each driven end to end by a scripted model on 127.0.0.1 (tests/hosts/model_server.py): every
//! scenario runs with and without `spillway init`, and what ran (files on disk) and the tool
//! result the next model request carries are compared. Installed, spillway must change nothing
//! but the output the model reads.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::helper::daemon::TestDaemon;
use crate::helper::npm;

/// A scripted model server, stopped on drop.
struct ModelServer {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl ModelServer {
    fn start(dir: &Path, steps: &Value) -> ModelServer {
        let script = dir.join("script.json");
        std::fs::write(&script, json!({ "steps": steps }).to_string()).unwrap();
        let log = dir.join("requests.jsonl");
        let port_file = dir.join("port");
        let server = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/hosts/model_server.py");
        let child = Command::new("python3")
            .arg(server)
            .args([&script, &log, &port_file])
            .stdin(Stdio::null())
            .spawn()
            .expect("start the scripted model");
        let deadline = Instant::now() + Duration::from_secs(20);
        let port = loop {
            if let Some(port) = std::fs::read_to_string(&port_file)
                .ok()
                .and_then(|p| p.trim().parse().ok())
            {
                break port;
            }
            assert!(
                Instant::now() < deadline,
                "the scripted model did not start"
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        ModelServer { child, port, log }
    }

    /// The text of each tool result the host sent back, in order, each once.
    fn tool_results(&self) -> Vec<String> {
        let mut seen = Vec::new();
        let mut results = Vec::new();
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        for line in text.lines() {
            let request: Value = serde_json::from_str(line).unwrap();
            let body = &request["body"];
            let mut found = responses_results(body);
            found.extend(gemini_results(body));
            for (id, text) in found {
                if !seen.contains(&id) {
                    seen.push(id);
                    results.push(text);
                }
            }
            for message in body["messages"].as_array().into_iter().flatten() {
                let found = match message["role"].as_str() {
                    // Anthropic: tool_result blocks in a user message.
                    Some("user") => message["content"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter(|c| c["type"] == "tool_result")
                        .map(|c| (c["tool_use_id"].to_string(), content_text(&c["content"])))
                        .collect::<Vec<_>>(),
                    // Chat Completions: a tool message.
                    Some("tool") => vec![(
                        message["tool_call_id"].to_string(),
                        content_text(&message["content"]),
                    )],
                    _ => vec![],
                };
                for (id, text) in found {
                    if !seen.contains(&id) {
                        seen.push(id);
                        results.push(text);
                    }
                }
            }
        }
        results
    }

    /// The commands of the shell calls the host's history shows the model (Chat Completions).
    fn history_commands(&self) -> Vec<String> {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let last = text.lines().last().unwrap_or("{}");
        let request: Value = serde_json::from_str(last).unwrap();
        request["body"]["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|m| m["tool_calls"].as_array().cloned().unwrap_or_default())
            .filter_map(|call| {
                let args: Value =
                    serde_json::from_str(call["function"]["arguments"].as_str()?).ok()?;
                args["command"].as_str().map(str::to_string)
            })
            .collect()
    }
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// OpenAI Responses (Codex): `function_call_output` items of the input.
fn responses_results(body: &Value) -> Vec<(String, String)> {
    body["input"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|item| item["type"] == "function_call_output")
        .map(|item| (item["call_id"].to_string(), content_text(&item["output"])))
        .collect()
}

/// Gemini: `functionResponse` parts; a refusal is an `error`, a result an `output`. Gemini
/// keeps no call id, so the text itself tells results apart.
fn gemini_results(body: &Value) -> Vec<(String, String)> {
    body["contents"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|c| c["parts"].as_array().cloned().unwrap_or_default())
        .filter_map(|part| {
            let response = &part["functionResponse"]["response"];
            let text = response["output"]
                .as_str()
                .or_else(|| response["error"].as_str())?
                .to_string();
            Some((format!("gemini:{text}"), text))
        })
        .collect()
}

fn content_text(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        other => other.to_string(),
    }
}

fn host_bin(name: &str) -> PathBuf {
    let package = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/hosts/package.json");
    npm::installed(&package)
        .join("node_modules/.bin")
        .join(name)
}

/// Installs Debian packages the hosts' sandboxes need, when missing (CI runs as root).
fn ensure_debian_packages(programs: &[(&str, &str)]) {
    let missing: Vec<&str> = programs
        .iter()
        .filter(|(program, _)| {
            !Command::new("sh")
                .args(["-c", &format!("command -v {program}")])
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .map(|(_, package)| *package)
        .collect();
    if missing.is_empty() {
        return;
    }
    let _ = Command::new("apt-get").arg("update").output();
    let out = Command::new("apt-get")
        .args(["install", "-y", "-q"])
        .args(&missing)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .output()
        .expect("run apt-get");
    assert!(out.status.success(), "cannot install {missing:?}: {out:?}");
}

/// One scenario's world: a home, a project, and the daemon spillway would use.
struct World {
    root: tempfile::TempDir,
    daemon: TestDaemon,
}

impl World {
    fn new() -> World {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("home")).unwrap();
        std::fs::create_dir_all(root.path().join("project")).unwrap();
        World {
            root,
            daemon: TestDaemon::start(),
        }
    }

    fn home(&self) -> PathBuf {
        self.root.path().join("home")
    }

    fn project(&self) -> PathBuf {
        self.root.path().join("project")
    }

    fn install(&self, host: &str) {
        let out = Command::new(env!("CARGO_BIN_EXE_spillway"))
            .args(["init", "--agent", host, "--scope", "user"])
            .current_dir(self.project())
            .env("HOME", self.home())
            .env("XDG_CONFIG_HOME", self.home().join(".config"))
            .env_remove("CODEX_HOME")
            .output()
            .unwrap();
        assert!(out.status.success(), "init {host}: {out:?}");
    }

    /// Merges `settings` into the JSON file at `rel` under the home.
    fn merge_json(&self, rel: &str, settings: &Value) {
        let path = self.home().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let mut doc: Value = std::fs::read_to_string(&path)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_else(|| json!({}));
        for (key, value) in settings.as_object().unwrap() {
            doc[key] = value.clone();
        }
        std::fs::write(&path, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
    }

    fn env<'a>(&'a self, cmd: &'a mut Command) -> &'a mut Command {
        cmd.current_dir(self.project())
            .env("HOME", self.home())
            .env("XDG_CONFIG_HOME", self.home().join(".config"))
            .env("XDG_DATA_HOME", self.home().join(".local/share"))
            .env("XDG_STATE_HOME", self.home().join(".local/state"))
            .env("SPILLWAY_SOCKET", &self.daemon.socket)
            .env("SPILLWAY_DATA_DIR", self.daemon.sandbox.data_dir())
            .env_remove("CLAUDECODE")
            .stdin(Stdio::null())
    }
}

/// Runs Claude Code headless in `world` against `model`.
fn claude(world: &World, model: &ModelServer, mode: &str) -> Output {
    let mut cmd = Command::new(host_bin("claude"));
    world
        .env(&mut cmd)
        .args([
            "-p",
            "go",
            "--output-format",
            "json",
            "--permission-mode",
            mode,
        ])
        .env(
            "ANTHROPIC_BASE_URL",
            format!("http://127.0.0.1:{}", model.port),
        )
        .env("ANTHROPIC_API_KEY", "sk-test")
        .env("DISABLE_TELEMETRY", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("DISABLE_ERROR_REPORTING", "1")
        .env("IS_SANDBOX", "1")
        .output()
        .expect("run claude")
}

/// Claude Code's tool results for `steps` under `settings` and `mode`, with or without
/// spillway; `prepare` lays out the project first.
fn claude_scenario(
    settings: &Value,
    steps: &Value,
    mode: &str,
    with_spillway: bool,
    prepare: impl Fn(&Path),
) -> (Vec<String>, World) {
    let world = World::new();
    prepare(&world.project());
    if with_spillway {
        world.install("claude-code");
    }
    world.merge_json(".claude/settings.json", settings);
    let dir = world.root.path().join("model");
    std::fs::create_dir_all(&dir).unwrap();
    let model = ModelServer::start(&dir, steps);
    let out = claude(&world, &model, mode);
    assert!(out.status.success(), "claude: {out:?}");
    (model.tool_results(), world)
}

/// The results without and with spillway, checked equal, with the worlds they ran in.
fn claude_same(
    settings: Value,
    steps: Value,
    mode: &str,
    prepare: impl Fn(&Path) + Copy,
) -> (World, World) {
    let (without, plain) = claude_scenario(&settings, &steps, mode, false, prepare);
    let (with, installed) = claude_scenario(&settings, &steps, mode, true, prepare);
    assert_eq!(
        without.len(),
        steps.as_array().unwrap().len(),
        "every step got a result: {without:?}"
    );
    let normalise = |texts: Vec<String>, world: &World| -> Vec<String> {
        let root = world.root.path().to_string_lossy().into_owned();
        texts.iter().map(|t| t.replace(&root, "ROOT")).collect()
    };
    assert_eq!(
        normalise(with, &installed),
        normalise(without, &plain),
        "the model read something else with spillway"
    );
    (plain, installed)
}

#[test]
fn claude_code_deny_rules_hold_in_bypass_mode() {
    let keep = |project: &Path| std::fs::write(project.join("keepme"), "x").unwrap();
    let (plain, installed) = claude_same(
        json!({"permissions": {"deny": ["Bash(rm:*)"]}}),
        json!([{"command": "rm -f keepme"}, {"command": "ls"}]),
        "bypassPermissions",
        keep,
    );
    assert!(plain.project().join("keepme").exists());
    assert!(
        installed.project().join("keepme").exists(),
        "a deny rule stopped nothing with spillway"
    );
}

#[test]
fn claude_code_allow_rules_and_refusals_hold_in_default_mode() {
    let (plain, installed) = claude_same(
        json!({"permissions": {"allow": ["Bash(echo:*)"]}}),
        json!([{"command": "echo allowed"}, {"command": "touch refused"}]),
        "default",
        |_| {},
    );
    assert!(!plain.project().join("refused").exists());
    assert!(!installed.project().join("refused").exists());
}

#[test]
fn claude_code_keeps_the_working_directory_quoting_and_exit_codes() {
    claude_same(
        json!({}),
        json!([
            {"command": "mkdir -p sub && cd sub && echo in-sub"},
            {"command": "pwd; echo to-stderr >&2; exit 3"},
            {"command": "nosuchcommand-xyz"},
            {"command": "echo 'single' \"double\" $(echo sub) `echo tick` ünï ✓"},
            {"command": "cat <<'EOF'\nheredoc $HOME\nEOF"},
        ]),
        "bypassPermissions",
        |_| {},
    );
}

#[test]
fn claude_code_sandboxed_commands_run_inside_the_sandbox() {
    ensure_debian_packages(&[("bwrap", "bubblewrap"), ("socat", "socat")]);
    let (plain, installed) = claude_same(
        json!({"sandbox": {"enabled": true}}),
        json!([{"command": "echo inside; touch ../outside; echo made=$?; touch inside-file"}]),
        "bypassPermissions",
        |_| {},
    );
    for world in [&plain, &installed] {
        assert!(!world.root.path().join("outside").exists());
        assert!(world.project().join("inside-file").exists());
    }
}

#[test]
fn claude_code_long_outputs_arrive_whole_under_its_cap() {
    let world = World::new();
    world.install("claude-code");
    let dir = world.root.path().join("model");
    std::fs::create_dir_all(&dir).unwrap();
    // 28 KB, 1.3 MB and 4.5 MB of 150-character lines, with a failure in the middle.
    let wide = |lines: u32| {
        format!(
            "for i in $(seq 1 {lines}); do printf 'row %07d %0140d\\n' $i 0; \
             [ $i = {} ] && echo 'error: the one line that matters'; done; exit 1",
            lines / 2
        )
    };
    let steps = json!([
        {"command": wide(190)},
        {"command": wide(8_700)},
        {"command": wide(30_000)},
    ]);
    let model = ModelServer::start(&dir, &steps);
    let out = claude(&world, &model, "bypassPermissions");
    assert!(out.status.success(), "{out:?}");
    let results = model.tool_results();
    assert_eq!(results.len(), 3, "{results:?}");
    for text in &results {
        assert!(
            !text.contains("persisted-output"),
            "Claude Code saved it: {text}"
        );
        assert!(
            !text.contains("characters truncated"),
            "Claude Code cut it: {text}"
        );
        assert!(text.chars().count() <= 10_000, "{} characters", text.len());
        assert!(text.contains("row 0000001 "), "the head is shown");
        assert!(text.contains("error: the one line that matters"), "{text}");
    }
    for text in &results[1..] {
        assert!(text.contains("\n\n[spillway: output"), "the notice: {text}");
        assert!(text.contains("spillway read "), "how to read on: {text}");
    }
}

#[test]
fn init_replaces_the_claude_code_hook_of_earlier_versions() {
    let world = World::new();
    let old = json!({
        "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command",
            "command": format!("{} hook claude-code", env!("CARGO_BIN_EXE_spillway"))}]}]}
    });
    world.merge_json(".claude/settings.json", &old);
    world.install("claude-code");
    let text = std::fs::read_to_string(world.home().join(".claude/settings.json")).unwrap();
    assert!(!text.contains("hook claude-code"), "{text}");
    assert!(text.contains("CLAUDE_CODE_SHELL_PREFIX"), "{text}");
}

/// Runs opencode headless in `world` against `model`.
fn opencode(world: &World, model: &ModelServer, permission: &Value) -> Output {
    let provider = json!({
        "provider": {"mock": {
            "npm": "@ai-sdk/openai-compatible",
            "name": "Mock",
            "options": {"baseURL": format!("http://127.0.0.1:{}/v1", model.port), "apiKey": "x"},
            "models": {"m": {"name": "m"}}
        }},
        "model": "mock/m",
        "permission": permission,
    });
    world.merge_json(".config/opencode/opencode.json", &provider);
    let mut cmd = Command::new(host_bin("opencode"));
    world.env(&mut cmd).args(["run", "go"]).output().unwrap()
}

/// The tool results the model reads for `steps` without and with spillway installed in `host`,
/// a host spillway joins after its shell tool ran: in both, the file the first step may try to
/// remove (`keepme`) must survive, and the history must show the model's own commands.
fn output_only_results(
    host: &str,
    steps: &Value,
    run: impl Fn(&World, &ModelServer) -> Output,
) -> [Vec<String>; 2] {
    [false, true].map(|with_spillway| {
        let world = World::new();
        std::fs::write(world.project().join("keepme"), "x").unwrap();
        if with_spillway {
            world.install(host);
        }
        let dir = world.root.path().join("model");
        std::fs::create_dir_all(&dir).unwrap();
        let model = ModelServer::start(&dir, steps);
        let out = run(&world, &model);
        assert!(world.project().join("keepme").exists(), "{host}: {out:?}");
        let history = model.history_commands();
        assert!(
            history.iter().all(|c| !c.contains("spillway")),
            "{host}: the model's history shows a rewritten command: {history:?}"
        );
        model.tool_results()
    })
}

#[test]
fn opencode_rules_history_and_cap_hold_with_spillway() {
    let steps = json!([
        {"command": "rm -f keepme"},
        {"command": "seq 1 200000 | sed 's/^/a wide line of output number /'"},
    ]);
    let permission = json!({"bash": {"*": "allow", "rm *": "deny"}});
    let [without, with] = &output_only_results("opencode", &steps, |world, model| {
        opencode(world, model, &permission)
    });
    assert_eq!(with.len(), without.len(), "{with:?}");
    assert_eq!(with[0], without[0], "the refusal reads the same");
    let preview = with.last().unwrap();
    assert!(preview.contains("[spillway: output"), "{preview}");
    let tail = &preview[preview.len().saturating_sub(800)..];
    assert!(
        preview.contains("number 200000"),
        "the tail is shown: {tail}"
    );
    assert!(preview.len() <= 50 * 1024 && preview.lines().count() <= 2_000);
}

/// Runs Copilot CLI headless in `world` against `model` (its own provider settings, offline:
/// no GitHub login), with `flags` (its permission flags).
fn copilot(world: &World, model: &ModelServer, flags: &[&str]) -> Output {
    let mut cmd = Command::new(host_bin("copilot"));
    world
        .env(&mut cmd)
        .env("COPILOT_OFFLINE", "true")
        .env(
            "COPILOT_PROVIDER_BASE_URL",
            format!("http://127.0.0.1:{}/v1", model.port),
        )
        .env("COPILOT_PROVIDER_TYPE", "openai")
        .env("COPILOT_PROVIDER_API_KEY", "x")
        .env("COPILOT_MODEL", "gpt-5.5")
        .args(["-p", "go"])
        .args(flags)
        .output()
        .unwrap()
}

#[test]
fn copilot_rules_history_and_saved_outputs_hold_with_spillway() {
    let steps = json!([
        {"command": "rm -f keepme"},
        {"command": "echo short"},
        {"command": "seq 1 100000; echo 'error: boom' >&2; exit 3"},
    ]);
    let flags = ["--allow-all-tools", "--deny-tool", "shell(rm)"];
    let [without, with] = &output_only_results("copilot", &steps, |world, model| {
        copilot(world, model, &flags)
    });
    assert_eq!(with.len(), 3, "{with:?}");
    assert_eq!(
        with[..2],
        without[..2],
        "the refusal and a short result read the same"
    );
    // Without spillway the model reads the first 500 characters of the output; with it, a
    // preview with the end, the notice, and Copilot's own exit line, under Copilot's cap.
    assert!(!without[2].contains("error: boom"), "{}", without[2]);
    let preview = &with[2];
    assert!(preview.starts_with("1\n2\n3\n"), "{preview}");
    // Copilot reads stdout and stderr apart, so the error line may be anywhere in its file: the
    // preview shows it wherever it is, and the output's last line.
    assert!(preview.lines().any(|l| l == "error: boom"), "{preview}");
    assert!(preview.contains("\n100000\n"), "{preview}");
    assert!(preview.contains("[spillway: output truncated"), "{preview}");
    assert!(
        preview.ends_with("completed with exit code 3>"),
        "{preview}"
    );
    assert!(preview.chars().count() <= 20_000, "{} chars", preview.len());
}

#[test]
fn a_sandboxed_host_run_runs_in_process_with_the_same_preview() {
    let data = tempfile::tempdir().unwrap();
    let socket = data.path().join("never.sock");
    let run = |marker: Option<&str>| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_spillway"));
        cmd.args(["run", "--host", "codex", "--no-tty", "--", "bash", "-c"])
            .arg("seq 1 50000; echo 'error: here' >&2; exit 3")
            .env("SPILLWAY_DATA_DIR", data.path())
            .env("SPILLWAY_SOCKET", &socket)
            .stdin(Stdio::null());
        if let Some(marker) = marker {
            cmd.env(marker, "1");
        }
        cmd.output().unwrap()
    };
    for marker in ["SANDBOX_RUNTIME", "CODEX_SANDBOX"] {
        let out = run(Some(marker));
        assert_eq!(out.status.code(), Some(3), "{out:?}");
        assert!(out.stderr.is_empty(), "{out:?}");
        assert!(!socket.exists(), "a sandboxed run asked the daemon");
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(text.starts_with("1\n2\n"), "{text}");
        assert!(text.contains("error: here"), "{text}");
        assert!(text.len() <= 10_000, "{} bytes", text.len());
        let spill = text
            .lines()
            .find_map(|l| l.strip_prefix("Full output: "))
            .expect("the notice names the spill");
        let kept = std::fs::read_to_string(spill).unwrap();
        assert!(kept.starts_with("1\n2\n") && kept.contains("\n50000\n"));
    }
}

/// The lines a host writes around a result that differ from run to run (Codex's chunk id and
/// wall time, Gemini's process group), and the line Gemini adds when a hook changed the
/// input, which is the one difference Gemini CLI's hooks cannot avoid.
fn without_run_details(text: &str) -> String {
    text.lines()
        .filter(|l| {
            !l.starts_with("Chunk ID:")
                && !l.starts_with("Wall time:")
                && !l.starts_with("Process Group PGID:")
                && !l.starts_with("[System] Tool input parameters")
        })
        .collect::<Vec<_>>()
        .join("\n")
        .trim_end()
        .to_string()
}

/// The tool results `model` got in `world`, with the world's paths and each run's details
/// taken out, to be compared between runs with and without spillway.
fn comparable_results(model: &ModelServer, world: &World) -> Vec<String> {
    let root = world.root.path().to_string_lossy().into_owned();
    model
        .tool_results()
        .iter()
        .map(|t| without_run_details(&t.replace(&root, "ROOT")))
        .collect()
}

/// Runs `codex exec` in `world` (its provider already points at the model) in `sandbox` mode (None: Codex's default).
fn codex(world: &World, sandbox: Option<&str>) -> Output {
    let mut cmd = Command::new(host_bin("codex"));
    world
        .env(&mut cmd)
        .args([
            "exec",
            "--dangerously-bypass-hook-trust",
            "--skip-git-repo-check",
        ])
        .args(sandbox.map(|s| vec!["-s", s]).unwrap_or_default())
        .arg("go")
        .env_remove("CODEX_HOME")
        .output()
        .expect("run codex")
}

/// A world set up for Codex: its provider pointed at `model`, a rule forbidding `rm`.
fn codex_world(model: &ModelServer, with_spillway: bool) -> World {
    let world = World::new();
    let codex = world.home().join(".codex");
    std::fs::create_dir_all(codex.join("rules")).unwrap();
    std::fs::write(
        codex.join("config.toml"),
        format!(
            "model = \"gpt-5.5\"\nmodel_provider = \"mock\"\n\n[model_providers.mock]\n\
             name = \"mock\"\nbase_url = \"http://127.0.0.1:{}/v1\"\nwire_api = \"responses\"\n\
             supports_websockets = false\n",
            model.port
        ),
    )
    .unwrap();
    std::fs::write(
        codex.join("rules/default.rules"),
        "prefix_rule(pattern = [\"rm\"], decision = \"forbidden\")\n",
    )
    .unwrap();
    std::fs::write(world.project().join("keepme"), "x").unwrap();
    if with_spillway {
        world.install("codex");
    }
    world
}

#[test]
fn codex_rules_sandbox_exit_codes_and_cap_hold_with_spillway() {
    let steps = json!([
        {"command": "rm -f keepme"},
        {"command": "pwd; echo to-stderr >&2; nosuchcommand-xyz; exit 3"},
        {"command": "echo 'q\"uo'\"'\"'te' $(echo sub); touch made"},
        {"command": "seq 1 100000"},
    ]);
    for sandbox in [Some("danger-full-access"), None] {
        let mut results = Vec::new();
        for with_spillway in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let model = ModelServer::start(dir.path(), &steps);
            let world = codex_world(&model, with_spillway);
            let out = codex(&world, sandbox);
            assert!(out.status.success(), "codex: {out:?}");
            assert!(
                world.project().join("keepme").exists(),
                "{sandbox:?}: rm ran"
            );
            let made = world.project().join("made").exists();
            let texts = comparable_results(&model, &world);
            assert_eq!(texts.len(), 4, "{texts:?}");
            results.push((texts, made));
        }
        let (without, with) = (&results[0], &results[1]);
        assert_eq!(
            with.1, without.1,
            "{sandbox:?}: a file was made in one only"
        );
        // The same lines: Codex reads a command's stdout and stderr on pipes of their own
        // and interleaves them as they come, so their order varies from run to run.
        assert_eq!(
            in_any_order(&with.0[..3]),
            in_any_order(&without.0[..3]),
            "{sandbox:?}: {:?} against {:?}",
            &with.0[..3],
            &without.0[..3]
        );
        let preview = &with.0[3];
        assert!(preview.len() <= 10_000, "{} bytes", preview.len());
        if without.0[3].contains("\n100000") {
            // The command ran (outside a sandbox this machine cannot give Codex): spillway's
            // preview, with its notice, in place of Codex's cut.
            assert!(preview.contains("[spillway: output"), "{preview}");
            assert!(preview.contains("\n100000\n"), "the tail is shown");
        }
    }
}

#[test]
fn gemini_policies_parameters_and_cap_hold_with_spillway() {
    let steps = json!([
        {"command": "rm -f keepme"},
        {"command": "pwd; echo hi; nosuchcommand-xyz; exit 3", "dir_path": "sub"},
        {"command": "seq 1 100000"},
    ]);
    let mut results = Vec::new();
    for with_spillway in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let model = ModelServer::start(dir.path(), &steps);
        let world = World::new();
        std::fs::write(world.project().join("keepme"), "x").unwrap();
        std::fs::create_dir_all(world.project().join("sub")).unwrap();
        let policies = world.home().join(".gemini/policies");
        std::fs::create_dir_all(&policies).unwrap();
        std::fs::write(
            policies.join("deny.toml"),
            "[[rule]]\ntoolName = \"run_shell_command\"\ncommandPrefix = \"rm\"\n\
             decision = \"deny\"\npriority = 500\n",
        )
        .unwrap();
        world.merge_json(
            ".gemini/settings.json",
            &json!({"security": {"auth": {"selectedType": "gemini-api-key"}}}),
        );
        if with_spillway {
            world.install("gemini");
        }
        let mut cmd = Command::new(host_bin("gemini"));
        let out = world
            .env(&mut cmd)
            .args(["-p", "go", "--approval-mode", "yolo"])
            .env("GEMINI_API_KEY", "x")
            .env(
                "GOOGLE_GEMINI_BASE_URL",
                format!("http://127.0.0.1:{}", model.port),
            )
            .env("GEMINI_CLI_TRUST_WORKSPACE", "true")
            .output()
            .expect("run gemini");
        assert!(world.project().join("keepme").exists(), "rm ran: {out:?}");
        let texts = comparable_results(&model, &world);
        assert_eq!(texts.len(), 3, "{texts:?} {out:?}");
        results.push(texts);
    }
    // Gemini CLI runs the command inside a script of its own, so the shell's messages name
    // another line of it than a bare `bash -c` does.
    let lines = regex::Regex::new(r"bash: line \d+:").unwrap();
    let results: Vec<Vec<String>> = results
        .iter()
        .map(|r| {
            r.iter()
                .map(|t| lines.replace_all(t, "bash: line N:").into_owned())
                .collect()
        })
        .collect();
    let (without, with) = (&results[0], &results[1]);
    assert_eq!(with[..2], without[..2]);
    assert!(
        with[1].contains("ROOT/project/sub"),
        "dir_path kept: {}",
        with[1]
    );
    let preview = &with[2];
    assert!(preview.contains("[spillway: output"), "{preview}");
    assert!(preview.chars().count() <= 40_000);
}

#[test]
fn doctor_reports_each_hosts_integration_and_what_it_does() {
    let world = World::new();
    let doctor = |world: &World| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_spillway"));
        let out = world.env(&mut cmd).arg("doctor").output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let (code, text) = doctor(&world);
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.contains("claude-code:\n  user scope: not installed"),
        "{text}"
    );
    world.install("claude-code");
    world.install("codex");
    let (code, text) = doctor(&world);
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.contains("claude-code:\n  user scope: installed"),
        "{text}"
    );
    assert!(text.contains("through the shell prefix"), "{text}");
    assert!(text.contains("once trusted"), "{text}");
    assert!(
        text.contains("rewritten to `spillway run --host codex"),
        "{text}"
    );
    // An earlier version's Claude Code hook left in the settings: out of date, exit code 1.
    let old = json!({
        "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command",
            "command": format!("{} hook claude-code", env!("CARGO_BIN_EXE_spillway"))}]}]}
    });
    world.merge_json(".claude/settings.json", &old);
    let (code, text) = doctor(&world);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("user scope: ! installed in part"), "{text}");
    // A Codex rule about the sample's program: the hook leaves it alone, and doctor says so.
    let rules = world.home().join(".codex/rules");
    std::fs::create_dir_all(&rules).unwrap();
    std::fs::write(
        rules.join("r.rules"),
        "prefix_rule(pattern = [\"cargo\"], decision = \"prompt\")\n",
    )
    .unwrap();
    let (_, text) = doctor(&world);
    assert!(text.contains("left alone (a rule of yours"), "{text}");
}

#[test]
fn claude_code_shows_the_output_so_far_when_a_call_outlives_its_timeout() {
    let steps = json!([
        {"command": "echo begin; sleep 6; echo finish", "timeout": 2000},
        {"command": "seq 1 30000; sleep 6; echo late", "timeout": 2000},
    ]);
    for with_spillway in [false, true] {
        let world = World::new();
        if with_spillway {
            world.install("claude-code");
        }
        let dir = world.root.path().join("model");
        std::fs::create_dir_all(&dir).unwrap();
        let model = ModelServer::start(&dir, &steps);
        let out = claude(&world, &model, "bypassPermissions");
        assert!(out.status.success(), "{out:?}");
        let results = model.tool_results();
        assert!(
            results[0].starts_with("begin\n"),
            "{with_spillway}: {}",
            results[0]
        );
        assert!(
            results[0].contains("moved to the background"),
            "{}",
            results[0]
        );
        // Claude Code shows the last lines printed so far: with spillway, the live head's.
        assert!(
            results[1].lines().any(|l| l.parse::<u32>().is_ok()),
            "{with_spillway}: no output so far: {}",
            results[1]
        );
        assert!(results[1].chars().count() <= 30_000, "{}", results[1].len());
    }
}

#[test]
fn a_host_run_whose_request_the_daemon_refuses_runs_in_process() {
    // An environment over the daemon's 1 MiB request cap: the daemon refuses the request
    // before the command starts, and the command runs here instead of failing.
    let daemon = TestDaemon::start();
    let mut cmd = daemon.spillway();
    cmd.args(["run", "--host", "codex", "--no-tty", "--", "bash", "-c"])
        .arg("echo ran; exit 4")
        .stdin(Stdio::null());
    for i in 0..10 {
        cmd.env(format!("SPILLWAY_BIG_{i}"), "x".repeat(110_000));
    }
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "ran\n");
    assert!(out.stderr.is_empty(), "{out:?}");
}

/// Each text's lines, sorted: what two results share when only the order of their lines may
/// differ.
fn in_any_order(texts: &[String]) -> Vec<Vec<&str>> {
    texts
        .iter()
        .map(|text| {
            let mut lines: Vec<&str> = text.lines().collect();
            lines.sort_unstable();
            lines
        })
        .collect()
}
