//! JSON configuration files as they are: objects keep their key order, so a file `cairn
//! connect` merges into reads the same afterwards except for what it added. Duplicate keys
//! are refused (clients disagree on which one wins).

use std::fmt;

use serde::de::{self, MapAccess, SeqAccess, Visitor};
use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A JSON value whose objects keep their keys in file order.
#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    Number(serde_json::Number),
    String(String),
    Array(Vec<Json>),
    Object(Vec<(String, Json)>),
}

impl Json {
    /// Parse a whole document; `Err` says why it is not strict JSON.
    pub fn parse(text: &str) -> Result<Json, String> {
        serde_json::from_str(text).map_err(|e| e.to_string())
    }

    /// Two-space indented, as the clients write their own files, with a final newline.
    pub fn pretty(&self) -> String {
        let mut out = serde_json::to_string_pretty(self).unwrap_or_default();
        out.push('\n');
        out
    }

    /// The member `key` of an object.
    pub fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Object(m) => m.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// The member at `path` (object keys, outermost first).
    pub fn at(&self, path: &[String]) -> Option<&Json> {
        path.iter().try_fold(self, |v, k| v.get(k))
    }

    /// Set the member at `path`, creating objects on the way; `Err` names the first
    /// step that is not an object.
    pub fn set(&mut self, path: &[String], value: Json) -> Result<(), String> {
        let Some((last, parents)) = path.split_last() else {
            *self = value;
            return Ok(());
        };
        let mut here = self;
        for (i, k) in parents.iter().enumerate() {
            let Json::Object(m) = here else {
                return Err(format!("{} is not an object", path[..i].join(".")));
            };
            if !m.iter().any(|(key, _)| key == k) {
                m.push((k.clone(), Json::Object(Vec::new())));
            }
            here = m
                .iter_mut()
                .find(|(key, _)| key == k)
                .map(|(_, v)| v)
                .expect("just inserted");
        }
        let Json::Object(m) = here else {
            return Err(format!("{} is not an object", parents.join(".")));
        };
        match m.iter_mut().find(|(k, _)| k == last) {
            Some((_, v)) => *v = value,
            None => m.push((last.clone(), value)),
        }
        Ok(())
    }

    /// Remove the member at `path`, then every object on the way that this left empty
    /// (down to, not including, the root). Returns the removed value.
    pub fn remove(&mut self, path: &[String]) -> Option<Json> {
        let (first, rest) = path.split_first()?;
        let Json::Object(m) = self else { return None };
        let i = m.iter().position(|(k, _)| k == first)?;
        if rest.is_empty() {
            return Some(m.remove(i).1);
        }
        let removed = m[i].1.remove(rest)?;
        if matches!(&m[i].1, Json::Object(inner) if inner.is_empty()) {
            m.remove(i);
        }
        Some(removed)
    }
}

impl Serialize for Json {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Json::Null => s.serialize_unit(),
            Json::Bool(b) => s.serialize_bool(*b),
            Json::Number(n) => n.serialize(s),
            Json::String(v) => s.serialize_str(v),
            Json::Array(a) => {
                let mut seq = s.serialize_seq(Some(a.len()))?;
                for v in a {
                    seq.serialize_element(v)?;
                }
                seq.end()
            }
            Json::Object(m) => {
                let mut map = s.serialize_map(Some(m.len()))?;
                for (k, v) in m {
                    map.serialize_entry(k, v)?;
                }
                map.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for Json {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Json, D::Error> {
        d.deserialize_any(JsonVisitor)
    }
}

struct JsonVisitor;

impl<'de> Visitor<'de> for JsonVisitor {
    type Value = Json;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_unit<E>(self) -> Result<Json, E> {
        Ok(Json::Null)
    }
    fn visit_bool<E>(self, v: bool) -> Result<Json, E> {
        Ok(Json::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Json, E> {
        Ok(Json::Number(v.into()))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Json, E> {
        Ok(Json::Number(v.into()))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Json, E> {
        serde_json::Number::from_f64(v)
            .map(Json::Number)
            .ok_or_else(|| E::custom("a number JSON cannot hold"))
    }
    fn visit_str<E>(self, v: &str) -> Result<Json, E> {
        Ok(Json::String(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<Json, E> {
        Ok(Json::String(v))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json, A::Error> {
        let mut out = Vec::new();
        while let Some(v) = seq.next_element()? {
            out.push(v);
        }
        Ok(Json::Array(out))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json, A::Error> {
        let mut out: Vec<(String, Json)> = Vec::new();
        while let Some((k, v)) = map.next_entry::<String, Json>()? {
            if out.iter().any(|(key, _)| *key == k) {
                return Err(de::Error::custom(format!("duplicate key {k:?}")));
            }
            out.push((k, v));
        }
        Ok(Json::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &[&str]) -> Vec<String> {
        s.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn key_order_survives_a_round_trip_and_an_edit() {
        let mut j = Json::parse(r#"{"z": 1, "a": {"y": [1, 2.5, "x"], "b": null}}"#).unwrap();
        j.set(&p(&["a", "new"]), Json::Bool(true)).unwrap();
        assert_eq!(
            serde_json::to_string(&j).unwrap(),
            r#"{"z":1,"a":{"y":[1,2.5,"x"],"b":null,"new":true}}"#
        );
        assert_eq!(j.remove(&p(&["a", "new"])), Some(Json::Bool(true)));
        assert_eq!(
            serde_json::to_string(&j).unwrap(),
            r#"{"z":1,"a":{"y":[1,2.5,"x"],"b":null}}"#
        );
    }

    #[test]
    fn removing_the_last_member_removes_the_objects_it_emptied() {
        let mut j = Json::parse(r#"{"keep": 1}"#).unwrap();
        j.set(&p(&["mcpServers", "cairn"]), Json::Null).unwrap();
        j.remove(&p(&["mcpServers", "cairn"]));
        assert_eq!(serde_json::to_string(&j).unwrap(), r#"{"keep":1}"#);
    }

    #[test]
    fn duplicate_keys_and_non_objects_are_refused() {
        assert!(
            Json::parse(r#"{"a": 1, "a": 2}"#)
                .unwrap_err()
                .contains("duplicate")
        );
        let mut j = Json::parse(r#"{"mcpServers": []}"#).unwrap();
        let err = j.set(&p(&["mcpServers", "cairn"]), Json::Null).unwrap_err();
        assert!(err.contains("mcpServers is not an object"), "{err}");
    }
}
