//! The workloads: real tools run on projects generated here, at bench time, each with the lines
//! an agent must see to act on it (its key lines) and the counts its output states (its truths).
//! A workload whose tool is not on the machine (nor installed by `scripts/install-peers.sh`) is
//! left out, and the benchmark says so.

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::BenchResult;

/// One command to measure.
pub struct Workload {
    pub name: &'static str,
    /// Where the command runs.
    pub dir: PathBuf,
    /// The command, as a shell would be given it.
    pub command: String,
    /// What a tool's text must carry, verbatim, for an agent to act: the failing test's name
    /// and its reason, the error and its file, the wanted line's words. Fragments of the key
    /// lines, not whole lines, so a tool that rewords a line but keeps what matters keeps the
    /// key; the verdict's counts are checked as truths instead.
    pub keys: Vec<String>,
    /// Counts the output states, by noun (`passed`, `error`, `warning`, `problem`, `test`):
    /// what a tool's own summary is checked against.
    pub truths: Vec<(&'static str, u64)>,
}

/// Sets up every workload under `root`; each that cannot be set up is returned as its name and
/// why.
pub fn all(root: &Path, peers: &Path) -> (Vec<Workload>, Vec<(&'static str, String)>) {
    type Setup = fn(&Path, &Path) -> BenchResult<Workload>;
    let setups: [(&str, Setup); 16] = [
        ("cargo test", cargo_test),
        ("cargo build", cargo_build),
        ("pytest -v", pytest),
        ("unittest -v", unittest),
        ("node --test", node_test),
        ("go test", go_test),
        ("eslint", eslint),
        ("tsc", tsc),
        ("make -k", make_k),
        ("pip download (tty)", pip_download),
        ("git log", git_log),
        ("git diff", git_diff),
        ("git status", git_status),
        ("app log, 1 traceback", app_log),
        ("find", find),
        ("long JSON line", long_json),
    ];
    let (mut made, mut skipped) = (Vec::new(), Vec::new());
    for (name, setup) in setups {
        let dir = root.join(name.replace([' ', ',', '(', ')'], "_"));
        let result = fs::create_dir_all(&dir)
            .map_err(Into::into)
            .and_then(|()| setup(&dir, peers));
        match result {
            Ok(workload) => made.push(workload),
            Err(e) => skipped.push((name, e.to_string())),
        }
    }
    (made, skipped)
}

fn workload(name: &'static str, dir: &Path, command: &str, keys: &[&str]) -> Workload {
    Workload {
        name,
        dir: dir.to_owned(),
        command: command.to_owned(),
        keys: keys.iter().map(|k| (*k).to_owned()).collect(),
        truths: Vec::new(),
    }
}

fn write(path: &Path, text: &str) -> BenchResult<()> {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent)?;
    }
    Ok(fs::write(path, text)?)
}

/// Runs a set-up step; fails with its output when it does not exit with 0 (or `allowed`).
fn sh(dir: &Path, script: &str) -> BenchResult<()> {
    let out = Command::new("sh")
        .arg("-c")
        .arg(script)
        .current_dir(dir)
        .output()?;
    if !out.status.success() {
        return Err(format!(
            "`{script}` failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    Ok(())
}

fn require(program: &str) -> BenchResult<()> {
    let found = Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {program}"))
        .output()?
        .status
        .success();
    if found {
        Ok(())
    } else {
        Err(format!("{program} is not installed").into())
    }
}

fn cargo_manifest(dir: &Path) -> BenchResult<()> {
    write(
        &dir.join("Cargo.toml"),
        "[package]\nname = \"demo\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n",
    )
}

/// 300 unit tests, one failing with a reason; built once first, so every tool sees the same run.
fn cargo_test(dir: &Path, _: &Path) -> BenchResult<Workload> {
    cargo_manifest(dir)?;
    let mut lib = String::from(
        "pub fn add(a: u64, b: u64) -> u64 {\n    a + b\n}\n\n#[cfg(test)]\nmod tests {\n    use super::*;\n",
    );
    for i in 0..300 {
        let expected = if i == 150 { "i + 2" } else { "i + 1" };
        let _ = write!(
            lib,
            "\n    #[test]\n    fn batch_{i:03}_sums() {{\n        let i = {i};\n        assert_eq!(add(i, 1), {expected}, \"checksum of batch {i}\");\n    }}\n"
        );
    }
    lib.push_str("}\n");
    write(&dir.join("src/lib.rs"), &lib)?;
    sh(dir, "cargo test --quiet --no-run 2>/dev/null")?;
    let mut w = workload(
        "cargo test",
        dir,
        "cargo test",
        &["batch_150_sums", "checksum of batch 150"],
    );
    w.truths = vec![("passed", 299), ("failed", 1), ("test", 300)];
    Ok(w)
}

/// 60 warnings (unused variables) and one type error among them.
fn cargo_build(dir: &Path, _: &Path) -> BenchResult<Workload> {
    cargo_manifest(dir)?;
    let mut lib = String::new();
    for i in 0..60 {
        let _ = write!(
            lib,
            "pub fn step_{i}(input: u32) -> u32 {{\n    let scratch_{i} = input * 2;\n    input + 1\n}}\n\n"
        );
    }
    lib.push_str("pub fn total(count: u32) -> u32 {\n    let label: u32 = \"total\";\n    count + label\n}\n");
    write(&dir.join("src/lib.rs"), &lib)?;
    let mut w = workload(
        "cargo build",
        dir,
        "cargo build",
        &["mismatched types", "src/lib.rs:302"],
    );
    w.truths = vec![("warning", 60)];
    Ok(w)
}

fn python_tests(failing: [usize; 2]) -> String {
    let mut text = String::from(
        "import unittest\n\n\ndef double(n):\n    return n * 2\n\n\nclass TestDouble(unittest.TestCase):\n",
    );
    for i in 0..400 {
        let expected = if failing.contains(&i) {
            i * 2 + 1
        } else {
            i * 2
        };
        let _ = write!(
            text,
            "    def test_double_{i:03}(self):\n        self.assertEqual(double({i}), {expected})\n\n"
        );
    }
    text
}

/// 400 tests, 2 failing, with pytest from the project's virtualenv.
fn pytest(dir: &Path, peers: &Path) -> BenchResult<Workload> {
    let pytest = peers.join("venv/bin/pytest");
    if !pytest.exists() {
        return Err("no pytest (run scripts/install-peers.sh)".into());
    }
    write(&dir.join("test_double.py"), &python_tests([123, 321]))?;
    let mut w = workload(
        "pytest -v",
        dir,
        "pytest -v -p no:cacheprovider test_double.py",
        &[
            "test_double_123",
            "test_double_321",
            "246 != 247",
            "642 != 643",
        ],
    );
    w.truths = vec![("passed", 398), ("failed", 2)];
    Ok(w)
}

/// The same 400 tests with the standard library's runner.
fn unittest(dir: &Path, _: &Path) -> BenchResult<Workload> {
    require("python3")?;
    write(&dir.join("test_double.py"), &python_tests([123, 321]))?;
    let mut w = workload(
        "unittest -v",
        dir,
        "python3 -m unittest -v test_double",
        &[
            "test_double_123",
            "test_double_321",
            "246 != 247",
            "642 != 643",
        ],
    );
    w.truths = vec![("test", 400)];
    Ok(w)
}

/// 200 tests of node's own runner, one failing.
fn node_test(dir: &Path, _: &Path) -> BenchResult<Workload> {
    require("node")?;
    let mut text = String::from(
        "const test = require('node:test');\nconst assert = require('node:assert');\n\n",
    );
    for i in 0..200 {
        let expected = if i == 77 { i * 3 + 1 } else { i * 3 };
        let _ = write!(
            text,
            "test('triples {i}', () => {{\n  assert.strictEqual({i} * 3, {expected});\n}});\n"
        );
    }
    write(&dir.join("triple.test.js"), &text)?;
    let mut w = workload(
        "node --test",
        dir,
        "node --test triple.test.js",
        &["triples 77", "231 !== 232"],
    );
    w.truths = vec![("test", 200)];
    Ok(w)
}

fn go_test(dir: &Path, _: &Path) -> BenchResult<Workload> {
    require("go")?;
    write(&dir.join("go.mod"), "module demo\n\ngo 1.21\n")?;
    let mut text = String::from("package demo\n\nimport \"testing\"\n\n");
    for i in 0..200 {
        let expected = if i == 42 { i + 2 } else { i + 1 };
        let _ = write!(
            text,
            "func TestInc{i:03}(t *testing.T) {{\n\tif {i}+1 != {expected} {{\n\t\tt.Fatalf(\"inc of {i}: got %d\", {i}+1)\n\t}}\n}}\n\n"
        );
    }
    write(&dir.join("inc_test.go"), &text)?;
    Ok(workload(
        "go test",
        dir,
        "go test -v ./...",
        &["TestInc042", "inc of 42: got 43"],
    ))
}

/// 150 warnings (unused variables) and one error (an undefined name) over 10 files.
fn eslint(dir: &Path, peers: &Path) -> BenchResult<Workload> {
    project_node_modules(dir, peers, "eslint")?;
    write(
        &dir.join("eslint.config.mjs"),
        "export default [{ files: ['src/**/*.js'], languageOptions: { sourceType: 'commonjs', globals: { module: 'readonly' } }, rules: { 'no-unused-vars': 'warn', 'no-undef': 'error' } }];\n",
    )?;
    for f in 0..10 {
        let mut text = String::new();
        for v in 0..15 {
            let _ = writeln!(
                text,
                "function helper{v}() {{\n  const unused{f}x{v} = {v};\n  return {v};\n}}\nmodule.exports.h{v} = helper{v};"
            );
        }
        if f == 6 {
            text.push_str("module.exports.total = () => undefinedTotal + 1;\n");
        }
        write(&dir.join(format!("src/file{f}.js")), &text)?;
    }
    let mut w = workload("eslint", dir, "eslint src", &["undefinedTotal", "file6.js"]);
    w.truths = vec![("problem", 151), ("error", 1), ("warning", 150)];
    Ok(w)
}

/// Links the installed `node_modules` into the project, where a project has its linters and
/// where the peers (through `npx`) look for them.
fn project_node_modules(dir: &Path, peers: &Path, tool: &str) -> BenchResult<()> {
    let modules = peers.join("node/node_modules");
    if !modules.join(".bin").join(tool).exists() {
        return Err(format!("no {tool} (run scripts/install-peers.sh)").into());
    }
    std::os::unix::fs::symlink(&modules, dir.join("node_modules"))?;
    Ok(())
}

/// 150 implicit-any errors and, first, the one that matters: a module that does not exist.
fn tsc(dir: &Path, peers: &Path) -> BenchResult<Workload> {
    project_node_modules(dir, peers, "tsc")?;
    write(
        &dir.join("tsconfig.json"),
        r#"{"compilerOptions": {"strict": true, "noEmit": true, "module": "commonjs", "target": "es2020"}, "include": ["src"]}"#,
    )?;
    let mut text = String::from("import { settings } from './missing-config';\n\n");
    for i in 0..150 {
        let _ = writeln!(
            text,
            "export function handler{i}(event, context) {{ return settings.base + {i}; }}"
        );
    }
    write(&dir.join("src/handlers.ts"), &text)?;
    let mut w = workload("tsc", dir, "tsc -p .", &["TS2307", "missing-config"]);
    w.truths = vec![("error", 301)];
    Ok(w)
}

/// 300 C files, one with an error, built with `make -k`.
fn make_k(dir: &Path, _: &Path) -> BenchResult<Workload> {
    require("make")?;
    require("cc")?;
    let mut objects = String::new();
    for i in 0..300 {
        let body = if i == 150 {
            format!("int f{i}(void) {{ return undefined_total + {i}; }}\n")
        } else {
            format!("int f{i}(void) {{ return {i}; }}\n")
        };
        write(&dir.join(format!("src/f{i:03}.c")), &body)?;
        let _ = write!(objects, " obj/f{i:03}.o");
    }
    write(
        &dir.join("Makefile"),
        &format!(
            "all:{objects}\n\nobj/%.o: src/%.c\n\t@mkdir -p obj\n\tcc -O0 -Wall -c -o $@ $<\n"
        ),
    )?;
    Ok(workload(
        "make -k",
        dir,
        "make -k",
        &["undefined_total", "f150.c"],
    ))
}

/// pip's progress bars, drawn with `\r` on a terminal (`script` gives it one).
fn pip_download(dir: &Path, peers: &Path) -> BenchResult<Workload> {
    require("script")?;
    let pip = peers.join("venv/bin/pip");
    if !pip.exists() {
        return Err("no virtualenv pip (run scripts/install-peers.sh)".into());
    }
    // Into a new directory each time, so every tool sees the downloads (and their bars).
    let command = "rm -rf dl && pip download --no-deps --no-cache-dir --progress-bar on -d dl setuptools==75.6.0 wheel==0.45.1 pip==24.3.1";
    Ok(workload(
        "pip download (tty)",
        dir,
        &format!("script -qefc '{command}' /dev/null"),
        &["Successfully downloaded"],
    ))
}

const GIT_ENV: &str = "GIT_AUTHOR_NAME=bench GIT_AUTHOR_EMAIL=bench@example.invalid GIT_COMMITTER_NAME=bench GIT_COMMITTER_EMAIL=bench@example.invalid GIT_AUTHOR_DATE='2026-01-01T00:00:00Z' GIT_COMMITTER_DATE='2026-01-01T00:00:00Z'";

/// A repository of 40 files and 30 commits, one of which is the fix an agent looks for.
fn git_repo(dir: &Path) -> BenchResult<()> {
    sh(dir, "git init -q -b main .")?;
    for i in 0..40 {
        let mut text = String::new();
        for l in 0..30 {
            let _ = writeln!(text, "pub fn item_{i}_{l}() -> u32 {{ {l} }}");
        }
        write(&dir.join(format!("src/module_{i:02}.rs")), &text)?;
    }
    sh(
        dir,
        &format!("git add -A && {GIT_ENV} git commit -qm 'initial import'"),
    )?;
    for c in 0..30 {
        let file = dir.join(format!("src/module_{:02}.rs", c % 40));
        let mut text = fs::read_to_string(&file)?;
        let _ = writeln!(text, "pub fn added_{c}() -> u32 {{ {c} }}");
        fs::write(&file, text)?;
        let subject = if c == 17 {
            "fix: reject empty batch ids".to_owned()
        } else {
            format!("refactor: tidy module {}", c % 40)
        };
        sh(dir, &format!("{GIT_ENV} git commit -qam '{subject}'"))?;
    }
    Ok(())
}

fn git_log(dir: &Path, _: &Path) -> BenchResult<Workload> {
    require("git")?;
    git_repo(dir)?;
    Ok(workload(
        "git log",
        dir,
        "git log --stat",
        &["reject empty batch ids"],
    ))
}

fn git_diff(dir: &Path, _: &Path) -> BenchResult<Workload> {
    require("git")?;
    git_repo(dir)?;
    for i in 0..20 {
        let file = dir.join(format!("src/module_{i:02}.rs"));
        let text = fs::read_to_string(&file)?;
        let text = if i == 13 {
            text.replace(
                "pub fn item_13_7() -> u32 { 7 }",
                "pub fn item_13_7() -> u32 { panic!(\"empty batch\") }",
            )
        } else {
            text.replace(&format!("item_{i}_3()"), &format!("item_{i}_3_renamed()"))
        };
        fs::write(&file, text)?;
    }
    Ok(workload(
        "git diff",
        dir,
        "git diff",
        &["panic!(\"empty batch\")", "module_13.rs"],
    ))
}

fn git_status(dir: &Path, _: &Path) -> BenchResult<Workload> {
    require("git")?;
    git_repo(dir)?;
    for i in 0..40 {
        let file = dir.join(format!("src/module_{i:02}.rs"));
        if i == 29 {
            fs::remove_file(&file)?;
        } else {
            let mut text = fs::read_to_string(&file)?;
            text.push_str("// touched\n");
            fs::write(&file, text)?;
        }
    }
    for i in 0..60 {
        write(&dir.join(format!("notes/draft_{i:02}.md")), "draft\n")?;
    }
    Ok(workload(
        "git status",
        dir,
        "git status --untracked-files=all",
        &["module_29.rs"],
    ))
}

/// A service's log: 600 request lines and one traceback in the middle.
fn app_log(dir: &Path, _: &Path) -> BenchResult<Workload> {
    require("python3")?;
    write(
        &dir.join("app.py"),
        r#"import logging, sys
logging.basicConfig(stream=sys.stdout, level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
log = logging.getLogger("orders")

def compute_ratio(done, total):
    return done / total

for i in range(600):
    log.info("GET /api/orders/%d 200 %dms user=u%04d", 1000 + i, 3 + i * 7 % 40, i * 37 % 9000)
    if i == 300:
        try:
            compute_ratio(i, 0)
        except ZeroDivisionError:
            log.exception("failed to compute ratio for batch %d", i)
"#,
    )?;
    Ok(workload(
        "app log, 1 traceback",
        dir,
        "python3 app.py",
        &["ZeroDivisionError", "compute_ratio", "batch 300"],
    ))
}

/// A tree of 500 files, one of them the file wanted.
fn find(dir: &Path, _: &Path) -> BenchResult<Workload> {
    for i in 0..500 {
        let name = if i == 333 {
            "data/archive/needle-config.toml".to_owned()
        } else {
            format!("data/part_{:02}/record_{i:04}.json", i % 25)
        };
        write(&dir.join(name), "{}\n")?;
    }
    Ok(workload(
        "find",
        dir,
        "find . -type f",
        &["needle-config.toml"],
    ))
}

/// A 200 KB JSON response on one line: its head says how many results there are.
fn long_json(dir: &Path, _: &Path) -> BenchResult<Workload> {
    require("python3")?;
    write(
        &dir.join("response.py"),
        r#"import json
items = [{"id": i, "name": "item-%05d" % i, "tags": ["a", "b"], "price": i * 1.5} for i in range(2600)]
print(json.dumps({"total_count": 48213, "page": 1, "items": items, "next_page": "cursor-7f3a"}))
"#,
    )?;
    Ok(workload(
        "long JSON line",
        dir,
        "python3 response.py",
        &["\"total_count\": 48213", "cursor-7f3a"],
    ))
}

/// Where the workload's tool binaries are looked for first.
pub fn path_with(peers: &Path) -> String {
    let mut path = vec![peers.join("venv/bin"), peers.join("node/node_modules/.bin")];
    path.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    std::env::join_paths(path)
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default()
}
