//! A JSON object read as if one of its fields were not there: a request line read as its
//! request, without the envelope's `v`.
//!
//! The derived way, a struct holding `v` beside the request (`#[serde(flatten)]`), buffers every
//! value of the line before the request, itself buffered once more to find its `op` tag, is
//! read from the copy: two copies of a `run`'s whole environment for each run. Skipping `v` as
//! the object is read leaves the tag's one.

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, IntoDeserializer, MapAccess, Visitor};

/// Deserializes an object from `inner` with its field `hidden` skipped (a value of any type).
pub(super) struct WithoutField<D> {
    pub inner: D,
    pub hidden: &'static str,
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for WithoutField<D> {
    type Error = D::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        self.inner.deserialize_map(Hiding {
            visitor,
            hidden: self.hidden,
        })
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map struct enum
        identifier ignored_any
    }
}

/// Hands its visitor the object's fields but the hidden one.
struct Hiding<V> {
    visitor: V,
    hidden: &'static str,
}

impl<'de, V: Visitor<'de>> Visitor<'de> for Hiding<V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.visitor.expecting(f)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        self.visitor.visit_map(HidingMap {
            map,
            hidden: self.hidden,
        })
    }
}

struct HidingMap<A> {
    map: A,
    hidden: &'static str,
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for HidingMap<A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        while let Some(key) = self.map.next_key::<FieldName<'de>>()? {
            if key.as_str() == self.hidden {
                self.map.next_value::<IgnoredAny>()?;
                continue;
            }
            return seed.deserialize(key.as_str().into_deserializer()).map(Some);
        }
        Ok(None)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, A::Error> {
        self.map.next_value_seed(seed)
    }

    fn size_hint(&self) -> Option<usize> {
        self.map.size_hint()
    }
}

/// A field's name, borrowed from the line unless it had escapes (the envelope reads its
/// fields' names with it too).
pub(super) enum FieldName<'de> {
    Borrowed(&'de str),
    Owned(String),
}

impl FieldName<'_> {
    pub(super) fn as_str(&self) -> &str {
        match self {
            FieldName::Borrowed(key) => key,
            FieldName::Owned(key) => key,
        }
    }
}

impl<'de> serde::Deserialize<'de> for FieldName<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<FieldName<'de>, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = FieldName<'de>;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a field name")
            }

            fn visit_borrowed_str<E: serde::de::Error>(
                self,
                key: &'de str,
            ) -> Result<FieldName<'de>, E> {
                Ok(FieldName::Borrowed(key))
            }

            fn visit_str<E: serde::de::Error>(self, key: &str) -> Result<FieldName<'de>, E> {
                Ok(FieldName::Owned(key.to_string()))
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Clone, PartialEq, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Fields {
        a: u32,
        #[serde(default)]
        b: Option<String>,
    }

    fn read(line: &str) -> Result<Fields, String> {
        let mut de = serde_json::Deserializer::from_str(line);
        let without = WithoutField {
            inner: &mut de,
            hidden: "v",
        };
        Fields::deserialize(without).map_err(|e| e.to_string())
    }

    #[test]
    fn the_hidden_field_is_skipped_wherever_it_is_and_whatever_it_holds() {
        let want = Fields {
            a: 1,
            b: Some("x".into()),
        };
        for line in [
            r#"{"v":1,"a":1,"b":"x"}"#,
            r#"{"a":1,"v":{"deep":[1,2]},"b":"x"}"#,
            r#"{"a":1,"b":"x","v":null}"#,
            r#"{"a":1,"b":"x"}"#,
            // An escaped name is the same name.
            r#"{"\u0076":1,"\u0061":1,"b":"x"}"#,
        ] {
            assert_eq!(read(line), Ok(want.clone()), "{line}");
        }
    }

    #[test]
    fn other_fields_are_checked_as_before() {
        assert!(
            read(r#"{"v":1,"a":1,"c":2}"#)
                .unwrap_err()
                .contains("unknown field `c`")
        );
        assert!(
            read(r#"{"v":1}"#)
                .unwrap_err()
                .contains("missing field `a`")
        );
        assert!(
            read(r#"{"v":1,"a":"1"}"#)
                .unwrap_err()
                .contains("invalid type")
        );
    }
}
