//! The README and the pages under `docs/` hold no stale command and no broken link: every
//! `spillway` command they show names only flags the command line has today, every example in a
//! `sh` block parses as written, and every relative link lands on a file and heading that exist.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The README and every Markdown page under `docs/`.
fn pages() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut pages = vec![root.join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
}

fn read(page: &Path) -> String {
    std::fs::read_to_string(page).unwrap_or_else(|e| panic!("{}: {e}", page.display()))
}

/// One line of a page: inside a fenced block (with the fence's language) or prose.
struct Line<'a> {
    number: usize,
    text: &'a str,
    fence: Option<&'a str>,
}

fn lines(text: &str) -> Vec<Line<'_>> {
    let mut fence = None;
    let mut out = Vec::new();
    for (i, text) in text.lines().enumerate() {
        if let Some(info) = text.trim_start().strip_prefix("```") {
            fence = match fence {
                None => Some(info.trim()),
                Some(_) => None,
            };
            continue;
        }
        out.push(Line {
            number: i + 1,
            text,
            fence,
        });
    }
    out
}

/// GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// Every heading's anchor, with GitHub's `-1`, `-2` suffixes for repeats.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut out = BTreeSet::new();
    for line in lines(text).iter().filter(|l| l.fence.is_none()) {
        let Some(heading) = line.text.strip_prefix('#') else {
            continue;
        };
        let base = slug(heading.trim_start_matches('#'));
        let n = seen.entry(base.clone()).or_default();
        out.insert(if *n == 0 {
            base.clone()
        } else {
            format!("{base}-{n}")
        });
        *n += 1;
    }
    out
}

/// The targets of `[text](target)` links in prose.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for line in lines(text).iter().filter(|l| l.fence.is_none()) {
        let mut rest = line.text;
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            if let Some(end) = rest.find(')') {
                out.push((line.number, rest[..end].to_string()));
                rest = &rest[end..];
            }
        }
    }
    out
}

#[test]
fn every_relative_link_lands_on_a_file_and_heading() {
    let mut broken = Vec::new();
    for page in pages() {
        let text = read(&page);
        for (number, target) in links(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (file, anchor) = match target.split_once('#') {
                Some((file, anchor)) => (file, Some(anchor)),
                None => (target.as_str(), None),
            };
            let path = if file.is_empty() {
                page.clone()
            } else {
                page.parent().unwrap().join(file)
            };
            let place = format!("{}:{number}: {target}", page.display());
            if !path.exists() {
                broken.push(format!("{place} (no such file)"));
            } else if let Some(anchor) = anchor
                && !anchors(&read(&path)).contains(anchor)
            {
                broken.push(format!("{place} (no such heading)"));
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// A `spillway` command shown in a page: its text, cut where the shell would end it.
struct Shown {
    place: String,
    text: String,
    runnable: bool,
}

/// The part of a shell line before a comment, pipe, redirection or list operator.
fn command_part(line: &str) -> &str {
    let mut quote = None;
    for (i, c) in line.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '#' | '|' | '>' | '<' | ';' | '&') => return line[..i].trim_end(),
            _ => {}
        }
    }
    line.trim_end()
}

/// Every `spillway ...` command a page shows: lines of code blocks (with their indented
/// continuation lines) and inline code spans.
fn shown_commands(page: &Path) -> Vec<Shown> {
    let text = read(page);
    let all = lines(&text);
    let mut out: Vec<Shown> = Vec::new();
    for (i, line) in all.iter().enumerate() {
        let place = format!("{}:{}", page.display(), line.number);
        let Some(fence) = line.fence else {
            for span in line.text.split('`').skip(1).step_by(2) {
                if span.starts_with("spillway ") {
                    out.push(Shown {
                        place: place.clone(),
                        text: span.to_string(),
                        runnable: false,
                    });
                }
            }
            continue;
        };
        let code = line.text.trim_start().trim_start_matches("$ ");
        if !code.starts_with("spillway ") {
            continue;
        }
        let mut text = code.to_string();
        for next in all[i + 1..].iter().take_while(|l| {
            l.fence.is_some()
                && l.text.starts_with(' ')
                && !l.text.trim_start().starts_with("spillway ")
        }) {
            text.push(' ');
            text.push_str(next.text.trim());
        }
        out.push(Shown {
            place,
            text,
            runnable: fence == "sh",
        });
    }
    out
}

/// The subcommand words of a shown command (`daemon status` of `spillway daemon
/// status|stop|restart [--json]`), the first of alternatives.
fn subcommand(words: &[&str]) -> Vec<String> {
    words
        .iter()
        .skip(1)
        .take_while(|w| {
            w.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '|')
                && !w.starts_with('-')
        })
        .map(|w| w.split('|').next().unwrap().to_string())
        .collect()
}

/// The `--flags` a shown command names before its own `--` and outside quoted text.
fn flags(text: &str) -> BTreeSet<String> {
    let mut plain = String::new();
    let mut quote = None;
    for c in text.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, c) => plain.push(c),
        }
    }
    let before = plain.split(" -- ").next().unwrap_or("");
    before
        .split(|c: char| c.is_whitespace() || matches!(c, '[' | ']' | '(' | ')' | '|' | '='))
        .filter(|w| w.starts_with("--") && w.len() > 2)
        .map(|w| w.trim_end_matches(['.', ',', ':']).to_string())
        .collect()
}

fn spillway(args: &[String]) -> std::process::Output {
    let scratch = tempfile::tempdir().unwrap();
    Command::new(env!("CARGO_BIN_EXE_spillway"))
        .args(args)
        .env("SPILLWAY_DATA_DIR", scratch.path().join("data"))
        .env("SPILLWAY_SOCKET", scratch.path().join("no.sock"))
        .env_remove("CLAUDECODE")
        .output()
        .unwrap()
}

#[test]
fn every_flag_a_page_names_exists_on_its_command() {
    let mut helps: HashMap<Vec<String>, String> = HashMap::new();
    let mut stale = Vec::new();
    for page in pages() {
        for shown in shown_commands(&page) {
            let words: Vec<&str> = shown.text.split_whitespace().collect();
            let sub = subcommand(&words);
            let help = helps.entry(sub.clone()).or_insert_with(|| {
                let mut args = sub.clone();
                args.push("--help".into());
                let out = spillway(&args);
                String::from_utf8_lossy(&out.stdout).into_owned()
            });
            for flag in flags(&shown.text) {
                let named = help
                    .split(|c: char| c.is_whitespace() || c == ',' || c == '=' || c == '[')
                    .any(|w| w == flag);
                if !named {
                    stale.push(format!("{}: `{}` has no {flag}", shown.place, shown.text));
                }
            }
        }
    }
    assert!(stale.is_empty(), "stale flags:\n{}", stale.join("\n"));
}

#[test]
fn every_example_in_a_shell_block_parses() {
    let mut refused = Vec::new();
    for page in pages() {
        for shown in shown_commands(&page).into_iter().filter(|s| s.runnable) {
            let words = shlex::split(command_part(&shown.text))
                .unwrap_or_else(|| panic!("{}: cannot split `{}`", shown.place, shown.text));
            let mut args: Vec<String> = words.into_iter().skip(1).collect();
            let at = args.iter().position(|a| a == "--").unwrap_or(args.len());
            args.insert(at, "--help".into());
            let out = spillway(&args);
            if !out.status.success() {
                refused.push(format!(
                    "{}: `{}`: {}",
                    shown.place,
                    shown.text,
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
            }
        }
    }
    assert!(
        refused.is_empty(),
        "examples refused:\n{}",
        refused.join("\n")
    );
}

#[test]
fn the_readme_links_every_page_under_docs() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = read(&root.join("README.md"));
    let missing: Vec<String> = pages()
        .into_iter()
        .skip(1)
        .map(|p| format!("docs/{}", p.file_name().unwrap().to_string_lossy()))
        .filter(|p| !readme.contains(&format!("]({p})")))
        .collect();
    assert!(
        missing.is_empty(),
        "pages the README does not link: {missing:?}"
    );
}
