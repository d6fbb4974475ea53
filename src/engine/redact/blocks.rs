//! The two shapes of secret that span lines: private key blocks (PEM, OpenSSH, PuTTY) and the
//! `data:` of a Kubernetes Secret in YAML.

use std::sync::LazyLock;

use regex::Regex;

use super::build;

static BEGIN_RE: LazyLock<Regex> = LazyLock::new(|| {
    build(r"-{4,5} ?BEGIN[ A-Z0-9]*PRIVATE KEY(?: BLOCK)? ?-{4,5}|PuTTY-User-Key-File-[0-9]+:")
        .expect("key BEGIN regex compiles")
});
static END_RE: LazyLock<Regex> = LazyLock::new(|| {
    build(r"-{4,5} ?END[ A-Z0-9]*PRIVATE KEY(?: BLOCK)? ?-{4,5}|Private-MAC: ?[0-9a-fA-F]+")
        .expect("key END regex compiles")
});

/// `(start, end)` of each line, without its `\r\n` / `\n`.
fn line_at(text: &str, pos: usize) -> (usize, usize) {
    let b = text.as_bytes();
    let start = memchr::memrchr(b'\n', &b[..pos]).map_or(0, |i| i + 1);
    let mut end = memchr::memchr(b'\n', &b[pos..]).map_or(b.len(), |i| pos + i);
    if end > start && b[end - 1] == b'\r' {
        end -= 1;
    }
    (start, end)
}

fn is_b64(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'+' || b == b'/' || b == b'='
}

/// A line of key material: base64, maybe indented, quoted or followed by `,` (YAML, JSON arrays).
fn is_body_line(line: &str) -> bool {
    let t = line
        .trim()
        .trim_matches(['"', '\'', ','])
        .trim_end_matches('\\');
    !t.is_empty() && t.bytes().all(is_b64)
}

/// `Proc-Type: 4,ENCRYPTED`, `Comment: ...`, `Private-Lines: 14`: headers inside a key block.
fn is_header_line(line: &str) -> bool {
    line.trim_start().split_once(": ").is_some_and(|(k, _)| {
        k.len() <= 40
            && k.bytes().next().is_some_and(|b| b.is_ascii_alphabetic())
            && k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
    })
}

/// Finds private key blocks. From a BEGIN line the block runs to its END line, or, when the
/// text was cut before it, over the following lines that can be key material (base64, headers,
/// a blank line before more base64) and stops at the first that cannot: in a page cut mid-key
/// that is the end of the text, while grep output listing a BEGIN line keeps its other lines.
/// An END line with no BEGIN takes the base64 lines just above it. A BEGIN with no key
/// material after it (code that greps for the marker) is left alone.
pub(super) fn key_blocks(text: &str, push: &mut dyn FnMut(usize, usize)) {
    let mut blocks: Vec<(usize, usize)> = Vec::new();
    for m in BEGIN_RE.find_iter(text) {
        if blocks.last().is_some_and(|&(_, e)| m.start() < e) {
            continue;
        }
        if let Some(end) = block_end(text, m.end(), m.as_str().ends_with('-')) {
            blocks.push((m.start(), end));
        }
    }
    for m in END_RE.find_iter(text) {
        if blocks.iter().any(|&(s, e)| m.start() >= s && m.start() < e) {
            continue;
        }
        if let Some(start) = block_start(text, m.start()) {
            blocks.push((start, m.end()));
        }
    }
    for (s, e) in blocks {
        push(s, e);
    }
}

fn block_end(text: &str, after: usize, pem: bool) -> Option<usize> {
    let b = text.as_bytes();
    let (_, line_end) = line_at(text, after);
    if pem
        && !text[after..line_end]
            .trim()
            .trim_matches(['"', '\'', ','])
            .is_empty()
    {
        // One-line form: JSON's `\n` escapes, or a key flattened with spaces.
        let mut p = after;
        while p < line_end && (is_b64(b[p]) || matches!(b[p], b'\\' | b' ' | b'\t')) {
            p += 1;
        }
        if let Some(m) = END_RE.find(&text[p..line_end]).filter(|m| m.start() == 0) {
            return Some(p + m.end());
        }
        let body = text[after..p].bytes().filter(|&c| is_b64(c)).count();
        return (body >= 16).then_some(text[..p].trim_end().len());
    }
    // Multi-line form. Headers may come between body lines but never end a cut block.
    let mut end = None;
    let mut next = line_end;
    while let Some(nl) = memchr::memchr(b'\n', &b[next..]).map(|i| next + i) {
        let (ls, le) = line_at(text, nl + 1);
        let line = &text[ls..le];
        if let Some(m) = END_RE.find(line) {
            return end.map(|_| ls + m.end());
        }
        if is_body_line(line) {
            end = Some(le);
        } else if is_header_line(line) {
            // An encrypted key's `Proc-Type:` or an armoured key's `Version:` says a key
            // starts here even when the page or the grep context stops before its body.
            end = end.or(Some(le));
        } else if line.trim().is_empty() {
            let after_blank = memchr::memchr(b'\n', &b[le..]).map(|i| line_at(text, le + i + 1));
            if !after_blank.is_some_and(|(s, e)| is_body_line(&text[s..e])) {
                break;
            }
        } else {
            break;
        }
        next = le;
    }
    end
}

fn block_start(text: &str, end_marker: usize) -> Option<usize> {
    let b = text.as_bytes();
    let (ls, _) = line_at(text, end_marker);
    let mut p = end_marker;
    while p > ls && (is_b64(b[p - 1]) || b[p - 1] == b'\\') {
        p -= 1;
    }
    if p < end_marker {
        // One-line form cut before its BEGIN: the escaped body runs up to the END marker.
        return (end_marker - p >= 16).then_some(p);
    }
    if !text[ls..end_marker].trim().is_empty() {
        return None;
    }
    let mut start = None;
    let mut cur = ls;
    while cur > 0 {
        let (ps, pe) = line_at(text, cur - 1);
        let line = &text[ps..pe];
        if !is_body_line(line) {
            break;
        }
        start = Some(ps + line.len() - line.trim_start().len());
        cur = ps;
    }
    start
}

/// Indentation of a YAML line, counting a list item's `- ` as indentation, and its content.
fn yaml_content(line: &str) -> (usize, bool, &str) {
    let indent = line.len() - line.trim_start_matches(' ').len();
    let rest = &line[indent..];
    match rest.strip_prefix("- ") {
        Some(item) => (indent + 2, true, item.trim_end()),
        None => (indent, false, rest.trim_end()),
    }
}

/// Redacts every value under `data:` / `stringData:` of a mapping that has `kind: Secret`
/// (kubectl prints `data:` before `kind:`, so the whole mapping is searched). All keys are
/// redacted, not only those named like secrets: a Secret's data is secret by declaration
/// (`username`, `tls.key`, `.dockerconfigjson` alike). ConfigMaps are left alone.
pub(super) fn kube_secret(text: &str, push: &mut dyn FnMut(usize, usize)) {
    let mut pos = 0;
    let lines: Vec<(usize, usize)> = text
        .split_inclusive('\n')
        .map(|l| {
            let start = pos;
            pos += l.len();
            (start, start + l.trim_end_matches(['\n', '\r']).len())
        })
        .collect();
    let content = |i: usize| yaml_content(&text[lines[i].0..lines[i].1]);
    let is_kind_secret =
        |c: &str| matches!(c, "kind: Secret" | "kind: \"Secret\"" | "kind: 'Secret'");
    for i in 0..lines.len() {
        let (col, item, body) = content(i);
        if body != "data:" && body != "stringData:" {
            continue;
        }
        // The mapping holding `data:` runs up to its first line (a list item's `- `) and down
        // to the first line indented less.
        let mut secret = false;
        if !item {
            for j in (0..i).rev() {
                let (c, it, b) = content(j);
                if b.is_empty() {
                    continue;
                }
                if c < col || b == "---" {
                    break;
                }
                secret |= c == col && is_kind_secret(b);
                if c == col && it {
                    break;
                }
            }
        }
        for j in i + 1..lines.len() {
            let (c, it, b) = content(j);
            if b.is_empty() {
                continue;
            }
            if secret || c < col || b == "---" || (c == col && it) {
                break;
            }
            secret |= c == col && is_kind_secret(b);
        }
        if !secret {
            continue;
        }
        let mut child = None;
        for (j, &(ls, le)) in lines.iter().enumerate().skip(i + 1) {
            let (c, _, b) = content(j);
            if b.is_empty() {
                continue;
            }
            if c <= col {
                break;
            }
            // A line deeper than the keys continues a block scalar (`key: |`): all value.
            let value_at = if c == *child.get_or_insert(c) {
                b.find(": ").map(|p| p + 2)
            } else {
                Some(0)
            };
            if let Some(p) = value_at {
                let value = b[p..].trim();
                let indicator = matches!(value, "|" | ">" | "|-" | ">-" | "|+" | ">+");
                if !value.is_empty() && !indicator && !value.starts_with("[redacted") {
                    let start = ls + c + p + (b[p..].len() - b[p..].trim_start().len());
                    push(start, (start + value.len()).min(le));
                }
            }
        }
    }
}
