//! Keyword assignments: `KEY=VALUE`, `"key": "value"`, `--flag value`, where the key names a
//! secret (`DB_PASSWORD`, `clientSecret`) and the value, judged in code, looks like one.

use super::MARKER;
use super::rules::{Find, RULES, key_names_secret, value_is_secret};

/// Longest key (`--aws-secret-access-key`, `spring.datasource.password`) looked at; a longer
/// run of key characters is data, not a key, and ends the look.
const MAX_KEY: usize = 100;
/// Longest value looked at, so a hit in a megabyte line costs a bounded amount.
const MAX_VALUE: usize = 16 * 1024;

/// Judges the keyword hit at `at..end`: widens it to the whole key (skipping a key already
/// judged, `last_key`), parses what follows and returns the naming rule and the value's span if
/// it is to be redacted. The first keyword family in table order that the key holds names it.
/// The key must end its keyword at a word boundary (`DB_PASSWORD`, `clientSecret`,
/// `PGPASSWORD`, not `tokenizer`), not be metadata (`TOKEN_URL`) nor a path component, and the
/// value must pass [`value_is_secret`] at the strictness its syntax calls for.
pub(super) fn keyword_at(
    text: &str,
    at: usize,
    end: usize,
    last_key: &mut (usize, usize),
) -> Option<(usize, usize, usize)> {
    let b = text.as_bytes();
    let is_key = |c: u8| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-');
    let mut ks = at;
    while ks > 0 && is_key(b[ks - 1]) {
        ks -= 1;
        if end - ks > MAX_KEY {
            return None;
        }
    }
    let mut ke = end;
    while ke < b.len() && is_key(b[ke]) {
        ke += 1;
        if ke - ks > MAX_KEY {
            return None;
        }
    }
    if (ks, ke) == *last_key {
        return None;
    }
    *last_key = (ks, ke);
    let flag = b[ks] == b'-';
    if matches!(b.get(ks.wrapping_sub(1)), Some(b'/' | b'\\'))
        || text.as_bytes()[..ks].ends_with(MARKER)
    {
        return None; // a path component (`tests/test_token.py`) or our own marker's kind
    }
    let (has_op, start, end, quoted) = parse_assignment(b, ke, (ke + MAX_VALUE).min(b.len()))?;
    if !has_op && !flag {
        return None; // `unexpected token '}'`: a space separates only `--flag value`.
    }
    let (key, value) = (&text[ks..ke], &text[start..end]);
    if echoes_key(key, value) {
        return None; // `DATA_API_KEY = '.data-api'`, `token: "token"`: a label.
    }
    let family = RULES.iter().position(|r| match r.find {
        Find::Keyword(words) => key_names_secret(key, words),
        _ => false,
    })?;
    let strict = !quoted && {
        // `password = get_password()`, `token = headers["x"]`: a reference, not a value.
        if matches!(b.get(end), Some(b'(' | b'[')) {
            return None;
        }
        let env_style = key
            .bytes()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == b'_');
        let has_eq = b[ke..start].contains(&b'=');
        !(has_eq && (flag || env_style))
    };
    value_is_secret(value, strict).then_some((family, start, end))
}

/// Parses what follows a key at `i`: an optional closing quote or bracket, a separator (`=`,
/// `:`, `:=`, `=>` with blanks around, or blanks alone) and a value, quoted (with `\"` escapes
/// in double quotes) or bare, all before `limit` and on this line. Returns whether the separator
/// had an operator, the value's span, and whether it was quoted.
fn parse_assignment(b: &[u8], i: usize, limit: usize) -> Option<(bool, usize, usize, bool)> {
    let blanks = |i: usize| {
        i + b[i..limit]
            .iter()
            .take_while(|c| matches!(c, b' ' | b'\t'))
            .count()
    };
    let i = i + b[i..limit.min(i + 2)]
        .iter()
        .take_while(|c| matches!(c, b'"' | b'\'' | b']'))
        .count();
    let j = blanks(i);
    let op = match &b[j..limit] {
        [b'=', b'>', ..] | [b':', b'=', ..] => 2,
        [b'=' | b':', ..] => 1,
        _ if j > i => 0,
        _ => return None,
    };
    let v = blanks(j + op);
    let ends = |c: &u8| {
        c.is_ascii_whitespace()
            || matches!(c, b'"' | b'\'' | b'`' | b',' | b';' | b'&' | b'<' | b'>')
            || matches!(c, b'(' | b')' | b'{' | b'}' | b'[' | b']')
    };
    match b.get(v)? {
        q @ (b'"' | b'\'') => {
            let mut k = v + 1;
            while k < limit {
                match b[k] {
                    b'\r' | b'\n' => return None,
                    c if c == *q => return Some((op > 0, v + 1, k, true)),
                    b'\\' if *q == b'"' && !matches!(b.get(k + 1), Some(b'\r' | b'\n')) => k += 2,
                    _ => k += 1,
                }
            }
            None
        }
        c if ends(c) || matches!(c, b':' | b'=') => None,
        _ => {
            let end = v + b[v..limit].iter().take_while(|c| !ends(c)).count();
            (end < limit || limit == b.len()).then_some((op > 0, v, end, false))
        }
    }
}

/// Whether the value's letters and digits occur in the key's: a label, not a secret.
fn echoes_key(key: &str, value: &str) -> bool {
    let squash = |s: &str, out: &mut [u8; MAX_KEY]| {
        let mut n = 0;
        for c in s.bytes().filter(u8::is_ascii_alphanumeric) {
            if n == MAX_KEY {
                return None;
            }
            out[n] = c.to_ascii_lowercase();
            n += 1;
        }
        Some(n)
    };
    let (mut k, mut v) = ([0; MAX_KEY], [0; MAX_KEY]);
    match (squash(key, &mut k), squash(value, &mut v)) {
        (Some(kn), Some(vn)) => vn == 0 || k[..kn].windows(vn).any(|w| w == &v[..vn]),
        _ => false,
    }
}
