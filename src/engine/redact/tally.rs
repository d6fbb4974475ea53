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
