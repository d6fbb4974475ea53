//! Redaction of text that leaves the daemon in parts: what was redacted, counted by kind
//! across the parts, and the one line that tells the reader.

use std::collections::BTreeMap;

use super::Redactor;

/// Secrets redacted, by kind: what a JSON result carries as `redactions`.
pub type Counts = BTreeMap<String, u64>;

impl Redactor {
    /// Redacts `text` in place, adding what it redacted to `counts`.
    pub fn redact_into(&self, text: &mut String, counts: &mut Counts) {
        let redacted = self.redact(text);
        if redacted.counts.is_empty() {
            return;
        }
        for (kind, n) in &redacted.counts {
            *counts.entry((*kind).to_string()).or_default() += n;
        }
        *text = redacted.text.into_owned();
    }

    /// Redacts each run of lines of `text` between lines that `is_marker` picks out on its
    /// own, so a block that one part starts (a key's BEGIN line before an omission marker) is
    /// never taken to run on through the markers into the next part. Markers stay as they are.
    pub fn redact_parts(
        &self,
        text: &str,
        is_marker: impl Fn(&str) -> bool,
        counts: &mut Counts,
    ) -> String {
        let mut out = String::with_capacity(text.len());
        let mut part = String::new();
        for line in text.split_inclusive('\n') {
            if is_marker(line) {
                self.redact_into(&mut part, counts);
                out.push_str(&part);
                part.clear();
                out.push_str(line);
            } else {
                part.push_str(line);
            }
        }
        self.redact_into(&mut part, counts);
        out.push_str(&part);
        out
    }

    /// Redacts `text` (whole lines) as part of the lines around it, `before` and `after`
    /// (whole lines too): a page or a block of matches inside a private key is redacted as the
    /// whole key would be. Returns `text`'s lines redacted, as many as it had, and counts the
    /// secrets whose markers appear in them.
    pub fn redact_window(
        &self,
        before: &str,
        text: &str,
        after: &str,
        counts: &mut Counts,
    ) -> String {
        let mut window = String::with_capacity(before.len() + text.len() + after.len());
        for part in [before, text, after] {
            window.push_str(part);
            if !window.is_empty() && !window.ends_with('\n') {
                window.push('\n');
            }
        }
        let redacted = self.redact(&window);
        if redacted.counts.is_empty() {
            return text.to_string();
        }
        let skip = before.split_inclusive('\n').count();
        let take = text.split_inclusive('\n').count();
        let mut out: String = redacted
            .text
            .split_inclusive('\n')
            .skip(skip)
            .take(take)
            .collect();
        if !text.ends_with('\n') && out.ends_with('\n') {
            out.pop();
        }
        let had = marker_counts(text);
        let mut counted = false;
        for (kind, n) in marker_counts(&out) {
            let had = had.get(kind).copied().unwrap_or(0);
            if n > had {
                *counts.entry(kind.to_string()).or_default() += n - had;
                counted = true;
            }
        }
        // Lines emptied by a block whose marker stands outside them (a page inside a key's
        // body): the block still counts, so the reader is told why they are empty.
        if !counted && out != text {
            let kind = match redacted.counts.keys().next() {
                _ if redacted.counts.contains_key("private-key") => "private-key",
                Some(kind) => kind,
                None => "private-key",
            };
            *counts.entry(kind.to_string()).or_default() += 1;
        }
        out
    }
}

/// The redaction markers in `text`, by kind.
fn marker_counts(text: &str) -> BTreeMap<&str, u64> {
    let mut found = BTreeMap::new();
    for (at, _) in text.match_indices("[redacted: ") {
        let rest = &text[at + "[redacted: ".len()..];
        if let Some(end) = rest.find(']') {
            *found.entry(&rest[..end]).or_default() += 1;
        }
    }
    found
}

/// The line that says what was redacted, or `None` when nothing was.
pub fn notice_line(counts: &Counts) -> Option<String> {
    redaction_line(counts, "the spill file holds the original")
}

/// As [`notice_line`], for a text no spill file keeps (a `truncate` output that fit its
/// preview): it says where the original is not.
pub fn unkept_notice_line(counts: &Counts) -> Option<String> {
    redaction_line(
        counts,
        "the original was not kept (the output fit the preview): --no-redact shows it",
    )
}

fn redaction_line(counts: &Counts, original: &str) -> Option<String> {
    let total: u64 = counts.values().sum();
    if total == 0 {
        return None;
    }
    let kinds: Vec<&str> = counts.keys().map(String::as_str).collect();
    Some(format!(
        "[spillway: {total} secret{} redacted ({}); {original}]",
        if total == 1 { "" } else { "s" },
        kinds.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token() -> String {
        format!("ghp_{}", &"a1B2c3D4e5".repeat(4)[..36])
    }

    #[test]
    fn parts_are_redacted_apart_and_counted_together() {
        let text = format!(
            "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA1x2y3z4AbCdEfGhIjKlMnOpQrStUvWxYz0123456789ab\n[... 40 lines omitted (lines 3-42) ...]\nafter the marker\nGITHUB_TOKEN={}\n",
            token()
        );
        let mut counts = Counts::new();
        let out = Redactor::builtin().redact_parts(&text, |l| l.starts_with("[... "), &mut counts);
        assert!(
            out.contains("[... 40 lines omitted (lines 3-42) ...]\nafter the marker\n"),
            "{out}"
        );
        assert!(!out.contains("MIIEowIBAAKCAQEA"), "{out}");
        assert!(!out.contains(&token()), "{out}");
        assert_eq!(out.lines().count(), text.lines().count());
        assert_eq!(counts.get("github-token"), Some(&1));
        assert_eq!(counts.get("private-key"), Some(&1));
        let line = notice_line(&counts).unwrap();
        assert_eq!(
            line,
            "[spillway: 2 secrets redacted (github-token, private-key); the spill file holds the original]"
        );
        assert_eq!(notice_line(&Counts::new()), None);
    }
}
