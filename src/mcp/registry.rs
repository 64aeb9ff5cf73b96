//! The tool registry: every tool Cairn serves, in one list, the scope matrix derived from
//! it, and the call-size limit of the call path. Each tool is declared with
//! [`super::tool::tool`] in its family's file under [`super::tools`], with the profiles
//! that may use it.

/// Largest total size of one call's arguments, serialized, in bytes.
pub const MAX_ARGUMENT_BYTES: usize = 4 * 1024 * 1024;

use std::sync::OnceLock;

use crate::access::scope::ScopeMatrix;

use super::tool::ToolDef;

/// Every tool Cairn serves, in a stable order. Built once per process: the definitions
/// never change, and building their schemas costs about 2 ms, which every new session of a
/// daemon paid before its first call.
pub fn all_tools() -> &'static [ToolDef] {
    static TOOLS: OnceLock<Vec<ToolDef>> = OnceLock::new();
    TOOLS.get_or_init(|| {
        let mut tools = Vec::new();
        tools.extend(super::tools::system::tools());
        tools.extend(super::tools::trail::tools());
        tools.extend(super::tools::work::tools());
        tools.extend(super::tools::colibri::tools());
        tools.extend(super::tools::learnings::tools());
        tools.extend(super::tools::vault::tools());
        tools
    })
}

/// The scope matrix: each tool's declared profiles, in registry order.
pub fn scope_matrix() -> ScopeMatrix {
    ScopeMatrix::new(
        all_tools()
            .iter()
            .map(|t| (t.name, t.profiles.unwrap_or_default())),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    #[test]
    fn every_tool_has_schemas_and_a_valid_example() {
        let tools = all_tools();
        let mut names = std::collections::HashSet::new();
        for t in tools {
            assert!(names.insert(t.name), "{} registered twice", t.name);
            assert!(!t.description.is_empty(), "{} has no description", t.name);
            assert!(
                t.profiles.is_some(),
                "{} does not declare its profiles (`.profiles(...)`)",
                t.name
            );
            assert_eq!(t.input_schema["type"], "object", "{}", t.name);
            assert_eq!(
                t.input_schema.get("additionalProperties"),
                Some(&Value::Bool(false)),
                "{} must reject unknown properties",
                t.name
            );
            assert_eq!(t.output_schema["type"], "object", "{} output", t.name);
            assert!(
                t.output_schema
                    .get("properties")
                    .and_then(Value::as_object)
                    .is_some_and(|p| !p.is_empty()),
                "{} output has no properties",
                t.name
            );
            let errors = t.validate(&t.example);
            assert!(errors.is_empty(), "{} example invalid: {errors:?}", t.name);
        }
    }

    #[test]
    fn every_string_field_has_a_length_limit() {
        fn walk(name: &str, path: &str, schema: &Value) {
            let is_string = schema
                .as_object()
                .is_some_and(|m| crate::mcp::schema::admits_type(m, "string"));
            let constrained = schema.get("enum").is_some()
                || schema.get("const").is_some()
                || schema.get("maxLength").is_some();
            assert!(!is_string || constrained, "{name}: {path} has no maxLength");
            if let Some(Value::Object(props)) = schema.get("properties") {
                for (k, v) in props {
                    walk(name, &format!("{path}.{k}"), v);
                }
            }
            if let Some(items) = schema.get("items") {
                assert!(
                    schema.get("maxItems").is_some(),
                    "{name}: {path} array has no maxItems"
                );
                walk(name, &format!("{path}[]"), items);
            }
            for k in ["anyOf", "oneOf"] {
                if let Some(Value::Array(bs)) = schema.get(k) {
                    for b in bs {
                        walk(name, path, b);
                    }
                }
            }
        }
        for t in all_tools() {
            walk(t.name, "", &Value::Object(t.input_schema.clone()));
        }
    }

    #[test]
    fn every_critical_tool_is_in_its_profiles_defaults() {
        let matrix = scope_matrix();
        for profile in crate::access::scope::PROFILES {
            let defaults = matrix.profile_defaults(profile).unwrap();
            for t in crate::access::scope::critical_tools(profile) {
                assert!(
                    defaults.contains(t),
                    "{profile}: critical {t} not in its row"
                );
            }
        }
    }
}
