//! A JSON value that keeps its keys in the order they were written, and prints itself the way
//! the hosts' own files are laid out (pretty, with the file's own indent).
//!
//! `serde_json::Value` sorts keys unless the crate-wide `preserve_order` feature is on, which
//! would change the order of every map the daemon and the MCP server print. Users' settings
//! files are edited here only, so their order is kept here only.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    /// A number as written in the file (`1e3`, `1.10` and a 30-digit integer stay as they are).
    Number(String),
    String(String),
    Array(Vec<Json>),
    Object(Vec<(String, Json)>),
}

/// An object with these entries, in this order.
pub fn obj<const N: usize>(entries: [(&str, Json); N]) -> Json {
    Json::Object(
        entries
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
    )
}

pub fn string(text: &str) -> Json {
    Json::String(text.to_string())
}

impl Json {
    pub fn parse(text: &str) -> Result<Json, serde_json::Error> {
        let mut json: Json = serde_json::from_str(text)?;
        // The numbers come back in the order they are written: each keeps its own text.
        let literals = number_literals(text);
        if json.count_numbers() == literals.len() {
            json.put_literals(&mut literals.into_iter());
        }
        Ok(json)
    }

    /// A number node, for values `init` writes.
    pub fn number(n: u64) -> Json {
        Json::Number(n.to_string())
    }

    fn count_numbers(&self) -> usize {
        match self {
            Json::Number(_) => 1,
            Json::Array(items) => items.iter().map(Json::count_numbers).sum(),
            Json::Object(entries) => entries.iter().map(|(_, v)| v.count_numbers()).sum(),
            _ => 0,
        }
    }

    fn put_literals(&mut self, literals: &mut impl Iterator<Item = String>) {
        match self {
            Json::Number(n) => {
                if let Some(text) = literals.next() {
                    *n = text;
                }
            }
            Json::Array(items) => items.iter_mut().for_each(|i| i.put_literals(literals)),
            Json::Object(entries) => entries
                .iter_mut()
                .for_each(|(_, v)| v.put_literals(literals)),
            _ => {}
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Json::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Object(entries) => entries.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    pub fn get_mut(&mut self, key: &str) -> Option<&mut Json> {
        match self {
            Json::Object(entries) => entries.iter_mut().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// Sets `key`, in place when it exists (keeping its position), else at the end.
    pub fn insert(&mut self, key: &str, value: Json) {
        if let Json::Object(entries) = self {
            match entries.iter_mut().find(|(k, _)| k == key) {
                Some((_, v)) => *v = value,
                None => entries.push((key.to_string(), value)),
            }
        }
    }

    pub fn remove(&mut self, key: &str) -> Option<Json> {
        match self {
            Json::Object(entries) => {
                let at = entries.iter().position(|(k, _)| k == key)?;
                Some(entries.remove(at).1)
            }
            _ => None,
        }
    }

    pub fn is_empty_container(&self) -> bool {
        match self {
            Json::Object(entries) => entries.is_empty(),
            Json::Array(items) => items.is_empty(),
            _ => false,
        }
    }

    /// Pretty-printed with `indent` per level, as `JSON.stringify(v, null, indent)` would.
    pub fn render(&self, indent: &str) -> String {
        let mut out = String::new();
        self.write(&mut out, indent, 0);
        out
    }

    fn write(&self, out: &mut String, indent: &str, depth: usize) {
        match self {
            Json::Null => out.push_str("null"),
            Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Json::Number(n) => out.push_str(n),
            Json::String(s) => push_string(out, s),
            Json::Array(items) if items.is_empty() => out.push_str("[]"),
            Json::Object(entries) if entries.is_empty() => out.push_str("{}"),
            Json::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    out.push_str(if i == 0 { "\n" } else { ",\n" });
                    out.push_str(&indent.repeat(depth + 1));
                    item.write(out, indent, depth + 1);
                }
                out.push('\n');
                out.push_str(&indent.repeat(depth));
                out.push(']');
            }
            Json::Object(entries) => {
                out.push('{');
                for (i, (key, value)) in entries.iter().enumerate() {
                    out.push_str(if i == 0 { "\n" } else { ",\n" });
                    out.push_str(&indent.repeat(depth + 1));
                    push_string(out, key);
                    out.push_str(": ");
                    value.write(out, indent, depth + 1);
                }
                out.push('\n');
                out.push_str(&indent.repeat(depth));
                out.push('}');
            }
        }
    }
}

fn push_string(out: &mut String, s: &str) {
    // serde_json's escaping of a plain string cannot fail.
    out.push_str(&serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into()));
}

/// The numbers of a JSON text as written, in order: the tokens outside strings that start
/// with a digit or `-`.
fn number_literals(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = text.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        if c == '"' {
            let mut escaped = false;
            for (_, c) in chars.by_ref() {
                match (escaped, c) {
                    (false, '\\') => escaped = true,
                    (false, '"') => break,
                    _ => escaped = false,
                }
            }
        } else if c == '-' || c.is_ascii_digit() {
            let mut end = at + c.len_utf8();
            while let Some(&(i, c)) = chars.peek() {
                if !(c.is_ascii_digit() || "+-.eE".contains(c)) {
                    break;
                }
                end = i + c.len_utf8();
                chars.next();
            }
            out.push(text[at..end].to_string());
        }
    }
    out
}

/// The indent a file uses: the leading whitespace of its first indented line (2 spaces when it
/// has none, as the hosts write theirs).
pub fn detect_indent(text: &str) -> String {
    text.lines()
        .map(|line| &line[..line.len() - line.trim_start().len()])
        .find(|ws| !ws.is_empty())
        .unwrap_or("  ")
        .to_string()
}

impl<'de> Deserialize<'de> for Json {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Json, D::Error> {
        deserializer.deserialize_any(JsonVisitor)
    }
}

struct JsonVisitor;

impl<'de> Visitor<'de> for JsonVisitor {
    type Value = Json;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_unit<E>(self) -> Result<Json, E> {
        Ok(Json::Null)
    }

    fn visit_bool<E>(self, b: bool) -> Result<Json, E> {
        Ok(Json::Bool(b))
    }

    fn visit_i64<E>(self, n: i64) -> Result<Json, E> {
        Ok(Json::Number(n.to_string()))
    }

    fn visit_u64<E>(self, n: u64) -> Result<Json, E> {
        Ok(Json::Number(n.to_string()))
    }

    fn visit_f64<E: de::Error>(self, n: f64) -> Result<Json, E> {
        serde_json::Number::from_f64(n)
            .map(|n| Json::Number(n.to_string()))
            .ok_or_else(|| E::custom("a number JSON cannot hold"))
    }

    fn visit_str<E>(self, s: &str) -> Result<Json, E> {
        Ok(Json::String(s.to_string()))
    }

    fn visit_string<E>(self, s: String) -> Result<Json, E> {
        Ok(Json::String(s))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Json::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json, A::Error> {
        let mut entries = Vec::new();
        while let Some((key, value)) = map.next_entry::<String, Json>()? {
            entries.push((key, value));
        }
        Ok(Json::Object(entries))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_order_and_layout() {
        let text = "{\n    \"z\": 1,\n    \"a\": [\n        true,\n        null\n    ],\n    \"m\": {},\n    \"s\": \"q\\\"\\n\",\n    \"f\": 1.5\n}";
        let json = Json::parse(text).unwrap();
        assert_eq!(json.render(&detect_indent(text)), text);
    }

    #[test]
    fn insert_keeps_position() {
        let mut json = Json::parse(r#"{"a": 1, "b": 2}"#).unwrap();
        json.insert("a", string("x"));
        json.insert("c", Json::Null);
        assert_eq!(
            json.render("  "),
            "{\n  \"a\": \"x\",\n  \"b\": 2,\n  \"c\": null\n}"
        );
        assert_eq!(json.remove("b"), Some(Json::number(2)));
    }

    #[test]
    fn numbers_keep_their_text() {
        let text = "{\n  \"a\": 1e3,\n  \"b\": 1.10,\n  \"c\": 123456789012345678901234567890,\n  \"s\": \"x1.0\\\"2\",\n  \"d\": [\n    -0.50,\n    2E-3\n  ]\n}";
        let json = Json::parse(text).unwrap();
        assert_eq!(json.render("  "), text);
    }
}
