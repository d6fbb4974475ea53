//! Times on the wire: RFC 3339 in UTC with milliseconds.

use chrono::{DateTime, SecondsFormat, SubsecRound, Utc};

/// `t` as the wire carries it, to the millisecond: an event's time compares and sorts as the
/// text a client receives does.
pub fn wire_time(t: DateTime<Utc>) -> DateTime<Utc> {
    t.trunc_subsecs(3)
}

/// `t` as the wire writes it: `2026-11-21T10:15:02.331Z`.
pub fn wire_text(t: &DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// Times in JSON: RFC 3339 in UTC with milliseconds, like the protocol's events.
pub mod rfc3339 {
    use chrono::{DateTime, Utc};
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(t: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::wire_text(t))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<DateTime<Utc>, D::Error> {
        let text = String::deserialize(d)?;
        DateTime::parse_from_rfc3339(&text)
            .map(|t| t.with_timezone(&Utc))
            .map_err(|e| {
                serde::de::Error::custom(format!("expected an RFC 3339 time, got {text:?}: {e}"))
            })
    }
}

/// [`rfc3339`] for an optional time (`null` when absent).
pub mod rfc3339_opt {
    use chrono::{DateTime, Utc};
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(t: &Option<DateTime<Utc>>, s: S) -> Result<S::Ok, S::Error> {
        match t {
            Some(t) => super::rfc3339::serialize(t, s),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<DateTime<Utc>>, D::Error> {
        #[derive(Deserialize)]
        struct Time(#[serde(with = "super::rfc3339")] DateTime<Utc>);
        Ok(Option::<Time>::deserialize(d)?.map(|Time(t)| t))
    }
}
