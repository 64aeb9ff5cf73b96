//! How tool parameters describe the domain's enums: the MCP layer's `JsonSchema` for
//! each domain enum a parameter names, so the domain never names schemars.
//!
//! The variants come from the domain (each enum's `ALL`) and their wire names from serde
//! (the names the parameters deserialize), so no variant is listed twice; what is written
//! here is only the descriptions an agent reads. The schema is the one the schemars
//! derive made before, so `tools/list` did not change: a string `enum` of the names, or,
//! when some variants carry a description, a `oneOf` whose first branch lists the
//! undescribed names and whose next ones are a `const` per described variant.

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::colibri::Priority;
use crate::colibri::audit::AuditScope;
use crate::colibri::tasks::{SortBy, SortOrder};
use crate::colibri::thoughts::ThoughtType;
use crate::issues::Status;
use crate::learnings::{LearningType, Outcome};
use crate::trail::runs::{EventSubtype, EventType};
use crate::work::memory::MemoryScope;
use crate::work::phases::{Confidence, Phase};

/// The wire name of a variant: what serde writes (and reads) for it.
fn wire_name<T: Serialize>(variant: &T) -> Value {
    serde_json::to_value(variant).unwrap_or(Value::Null)
}

/// The schema of an enum of unit variants, serialized as strings.
fn string_enum<T: Serialize + PartialEq>(
    description: &str,
    all: &[T],
    described: &[(T, &str)],
) -> Schema {
    let mut schema = Map::new();
    schema.insert("description".into(), json!(description));
    let plain: Vec<Value> = all
        .iter()
        .filter(|v| !described.iter().any(|(d, _)| d == *v))
        .map(wire_name)
        .collect();
    if described.is_empty() {
        schema.insert("type".into(), json!("string"));
        schema.insert("enum".into(), Value::Array(plain));
        return schema.into();
    }
    let mut branches = Vec::new();
    if !plain.is_empty() {
        branches.push(json!({"type": "string", "enum": plain}));
    }
    for v in all {
        if let Some((_, text)) = described.iter().find(|(d, _)| d == v) {
            branches.push(json!({"type": "string", "const": wire_name(v), "description": text}));
        }
    }
    schema.insert("oneOf".into(), Value::Array(branches));
    schema.into()
}

/// `describe!(Type, "what it is", Variant => "what it means", ...)`: the `JsonSchema` of
/// a domain enum, with the enum's description and those of the variants named.
macro_rules! describe {
    ($ty:ident, $description:literal $(, $variant:ident => $text:literal)* $(,)?) => {
        impl JsonSchema for $ty {
            fn schema_name() -> Cow<'static, str> {
                Cow::Borrowed(stringify!($ty))
            }

            fn schema_id() -> Cow<'static, str> {
                Cow::Borrowed(concat!(module_path!(), "::", stringify!($ty)))
            }

            fn json_schema(_: &mut SchemaGenerator) -> Schema {
                string_enum($description, &$ty::ALL, &[$(($ty::$variant, $text)),*])
            }
        }
    };
}

describe!(
    Status,
    "The statuses an issue can have (one set for both vocabularies)."
);
describe!(LearningType, "What kind of lesson a learning is.");
describe!(
    Outcome,
    "How the learning did for the bound issue.",
    Helped => "It applied and helped with the work.",
    NotRelevant => "It did not apply to this work (says little about its truth).",
    Wrong => "It is wrong or outdated: following it caused a problem.",
);
describe!(
    Priority,
    "Colibri's priority names, mapped onto the issue scale (1 = most urgent)."
);
describe!(
    SortBy,
    "`task_list` sort keys.",
    Priority => "Descending puts critical first.",
);
describe!(SortOrder, "Sort direction.");
describe!(ThoughtType, "The kinds of thought the document names.");
describe!(
    AuditScope,
    "How much an audit session covers.",
    Shallow => "The task only.",
    Deep => "The task and all its sub-tasks, recursively.",
);
describe!(EventType, "Event types of a stream-JSON log.");
describe!(EventSubtype, "Event subtypes.");
describe!(
    MemoryScope,
    "Where a memory file applies.",
    Project => "This project only.",
    Global => "Every project.",
);
describe!(Phase, "A phase that can be claimed complete.");
describe!(Confidence, "How sure the claimant is.");

#[cfg(test)]
mod tests {
    use super::*;
    use serde::de::DeserializeOwned;

    /// Every name the schema lists deserializes, and to a distinct variant: the schema
    /// offers exactly what the parameters accept.
    fn names_round_trip<T>()
    where
        T: JsonSchema + DeserializeOwned + Serialize + PartialEq + std::fmt::Debug,
    {
        let schema = crate::mcp::schema::schema_for::<Vec<T>>();
        let items = &schema["items"];
        let mut names: Vec<Value> = Vec::new();
        if let Some(Value::Array(e)) = items.get("enum") {
            names.extend(e.iter().cloned());
        }
        for b in items
            .get("oneOf")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            names.extend(
                b.get("enum")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .cloned(),
            );
            names.extend(b.get("const").cloned());
        }
        let variants: Vec<T> = names
            .iter()
            .map(|n| serde_json::from_value(n.clone()).unwrap_or_else(|e| panic!("{n}: {e}")))
            .collect();
        for (i, v) in variants.iter().enumerate() {
            assert!(!variants[..i].contains(v), "{v:?} listed twice");
        }
        assert!(!variants.is_empty(), "{}", T::schema_name());
    }

    #[test]
    fn every_described_enum_lists_what_its_parameters_accept() {
        names_round_trip::<Status>();
        names_round_trip::<LearningType>();
        names_round_trip::<Outcome>();
        names_round_trip::<Priority>();
        names_round_trip::<SortBy>();
        names_round_trip::<SortOrder>();
        names_round_trip::<ThoughtType>();
        names_round_trip::<AuditScope>();
        names_round_trip::<EventType>();
        names_round_trip::<EventSubtype>();
        names_round_trip::<MemoryScope>();
        names_round_trip::<Phase>();
        names_round_trip::<Confidence>();
    }

    #[test]
    fn described_variants_become_consts_after_the_plain_ones() {
        let schema = Value::from(string_enum(
            "Sort keys.",
            &SortBy::ALL,
            &[(SortBy::Priority, "Critical first.")],
        ));
        assert_eq!(
            schema,
            json!({"description": "Sort keys.", "oneOf": [
                {"type": "string", "enum": ["created", "updated", "progress"]},
                {"type": "string", "const": "priority", "description": "Critical first."}]})
        );
        let plain = Value::from(string_enum("Direction.", &SortOrder::ALL, &[]));
        assert_eq!(
            plain,
            json!({"description": "Direction.", "type": "string", "enum": ["asc", "desc"]})
        );
    }
}
