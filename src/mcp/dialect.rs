//! The input schemas as `tools/list` shows them: the subset of JSON Schema that the
//! strictest function-calling dialects accept (docs/mcp-dialects.md).
//!
//! The server validates every call against the full schema generated from the
//! parameter types ([`super::schema`]); what a client sees is a projection of it that
//! loses no constraint the agent must know:
//!
//! - a nullable type (`["string", "null"]`) is its non-null type: an optional field is
//!   one that is not `required`, and `null` is still accepted for it;
//! - a choice of constants (`oneOf`/`anyOf` of `const`, nullable or not) is a string
//!   `enum`, each constant's description folded into the field's;
//! - `const` is a one-value `enum`; `null` leaves enums;
//! - `default` moves into the description;
//! - an object of free keys (`additionalProperties` other than `false`) is shown as a
//!   string holding a JSON object; the server accepts either
//!   ([`accept_object_text`]).
//!
//! Two dialects contradict each other and the portable form in one rule each, so a
//! client that hands the schemas to one of them as they are can ask for its own form
//! ([`Dialect`]): `openai-strict` lists every property as `required` and an optional one
//! as nullable (`["T", "null"]`), `gemini` leaves out `additionalProperties`. Whatever
//! was listed, `null` for an optional field means the field is absent
//! ([`absent_nulls`]).
//!
//! `tests/dialect_check.py` checks the listed schemas against the documented rules.

use serde_json::{Map, Value};

/// The form `tools/list` shows input schemas in (`--schema-dialect`, the daemon's
/// `?schema_dialect=`; named in kebab case: `openai-strict`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, clap::ValueEnum)]
pub(crate) enum Dialect {
    /// The subset OpenAI strict and Gemini share (the default).
    #[default]
    Portable,
    /// OpenAI Structured Outputs with `strict: true`: every property required, optional
    /// ones nullable.
    OpenaiStrict,
    /// Gemini `FunctionDeclaration.parameters`: no `additionalProperties`.
    Gemini,
}

/// The listed form of the input schema `schema` in `dialect`.
pub(crate) fn listed(schema: &Map<String, Value>, dialect: Dialect) -> Map<String, Value> {
    let mut out = schema.clone();
    node(&mut out);
    match dialect {
        Dialect::Portable => {}
        Dialect::OpenaiStrict => all_required(&mut out),
        Dialect::Gemini => open_objects(&mut out),
    }
    out
}

/// The object nodes of a portable schema (`properties` and array `items` nest them).
fn objects(map: &mut Map<String, Value>, f: &mut impl FnMut(&mut Map<String, Value>)) {
    if map.get("type").and_then(Value::as_str) == Some("object") {
        f(map);
    }
    if let Some(Value::Object(props)) = map.get_mut("properties") {
        for p in props.values_mut().filter_map(Value::as_object_mut) {
            objects(p, f);
        }
    }
    if let Some(Value::Object(items)) = map.get_mut("items") {
        objects(items, f);
    }
}

/// OpenAI strict: every property in `required`; one that was optional takes `null` too.
fn all_required(schema: &mut Map<String, Value>) {
    objects(schema, &mut |obj| {
        let required: Vec<Value> = match obj.get("required") {
            Some(Value::Array(r)) => r.clone(),
            _ => Vec::new(),
        };
        let Some(Value::Object(props)) = obj.get_mut("properties") else {
            return;
        };
        let mut all = required.clone();
        for (name, p) in props.iter_mut() {
            let key = Value::String(name.clone());
            if required.contains(&key) {
                continue;
            }
            all.push(key);
            let Value::Object(p) = p else { continue };
            if let Some(Value::String(t)) = p.get("type") {
                let t = Value::String(t.clone());
                p.insert("type".into(), Value::Array(vec![t, "null".into()]));
            }
            if let Some(Value::Array(values)) = p.get_mut("enum") {
                values.push(Value::Null);
            }
        }
        obj.insert("required".into(), Value::Array(all));
    });
}

/// Gemini: no `additionalProperties` field (the objects stay closed on the server).
fn open_objects(schema: &mut Map<String, Value>) {
    objects(schema, &mut |obj| {
        obj.remove("additionalProperties");
    });
}

fn describe(map: &mut Map<String, Value>, extra: &str) {
    let text = match map.get("description").and_then(Value::as_str) {
        Some(d) if !d.is_empty() => format!("{} {extra}", d.trim_end()),
        _ => extra.to_owned(),
    };
    map.insert("description".into(), Value::String(text));
}

/// The constants of a branch (`const` or `enum`) with its description, when it is one.
fn constants(branch: &Map<String, Value>) -> Option<(Vec<Value>, Option<String>)> {
    let values = match (branch.get("const"), branch.get("enum")) {
        (Some(c), _) => vec![c.clone()],
        (None, Some(Value::Array(e))) => e.clone(),
        _ => return None,
    };
    let description = branch
        .get("description")
        .and_then(Value::as_str)
        .map(String::from);
    Some((values, description))
}

/// The branches of a union, nested unions flattened, `null` branches dropped.
fn branches(map: &Map<String, Value>, out: &mut Vec<Map<String, Value>>) {
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(bs)) = map.get(key) {
            for b in bs.iter().filter_map(Value::as_object) {
                if b.get("type").and_then(Value::as_str) == Some("null") {
                    continue;
                }
                if b.contains_key("anyOf") || b.contains_key("oneOf") {
                    branches(b, out);
                } else {
                    out.push(b.clone());
                }
            }
        }
    }
}

fn node(map: &mut Map<String, Value>) {
    if map.contains_key("anyOf") || map.contains_key("oneOf") {
        let mut bs = Vec::new();
        branches(map, &mut bs);
        map.remove("anyOf");
        map.remove("oneOf");
        let consts: Option<Vec<_>> = bs.iter().map(constants).collect();
        match consts {
            Some(consts) if bs.len() > 1 => {
                let mut values = Vec::new();
                let mut notes = Vec::new();
                for (vs, d) in consts {
                    if let (Some(d), [v]) = (&d, vs.as_slice()) {
                        notes.push(format!("{}: {}", v.as_str().unwrap_or_default(), d));
                    }
                    values.extend(vs);
                }
                map.insert("type".into(), Value::String("string".into()));
                map.insert("enum".into(), Value::Array(values));
                if !notes.is_empty() {
                    describe(map, &format!("({})", notes.join("; ")));
                }
            }
            _ => {
                if let [only] = bs.as_slice() {
                    for (k, v) in only {
                        if k != "description" || !map.contains_key("description") {
                            map.insert(k.clone(), v.clone());
                        }
                    }
                }
            }
        }
    }
    if let Some(Value::Array(types)) = map.get("type") {
        let kept: Vec<Value> = types.iter().filter(|t| *t != "null").cloned().collect();
        if let [one] = kept.as_slice() {
            map.insert("type".into(), one.clone());
        }
    }
    if let Some(Value::Array(values)) = map.get_mut("enum") {
        values.retain(|v| !v.is_null());
    }
    if let Some(c) = map.remove("const") {
        map.insert("enum".into(), Value::Array(vec![c]));
    }
    if let Some(d) = map.remove("default") {
        describe(map, &format!("Default: {d}."));
    }
    if map.get("type").and_then(Value::as_str) == Some("object")
        && map.get("additionalProperties") != Some(&Value::Bool(false))
    {
        map.clear();
        map.insert("type".into(), Value::String("string".into()));
        describe(map, "A JSON object as text (an object is accepted too).");
    }
    if let Some(Value::Object(props)) = map.get_mut("properties") {
        for p in props.values_mut() {
            if let Value::Object(p) = p {
                node(p);
            }
        }
    }
    if let Some(Value::Object(items)) = map.get_mut("items") {
        node(items);
    }
}

/// Drop every `null` given for a field `schema` does not require (at any depth of
/// objects and arrays of objects): a client of the `openai-strict` listing sends `null`
/// for what it leaves out.
pub(crate) fn absent_nulls(schema: &Map<String, Value>, args: &mut Value) {
    match args {
        Value::Object(given) => {
            let required = match schema.get("required") {
                Some(Value::Array(r)) => r.as_slice(),
                _ => &[],
            };
            given.retain(|k, v| !v.is_null() || required.iter().any(|r| r == k.as_str()));
            let Some(Value::Object(props)) = schema.get("properties") else {
                return;
            };
            for (name, value) in given.iter_mut() {
                if let Some(Value::Object(p)) = props.get(name) {
                    absent_nulls(p, value);
                }
            }
        }
        Value::Array(items) => {
            if let Some(Value::Object(item)) = schema.get("items") {
                for v in items {
                    absent_nulls(item, v);
                }
            }
        }
        _ => {}
    }
}

/// Read the JSON text given for a free-keyed object field (listed as a string by
/// [`listed`]) as the object it holds, so that validation and the handler see an
/// object. Anything else is left for the validator to report.
pub(crate) fn accept_object_text(schema: &Map<String, Value>, args: &mut Value) {
    let (Some(Value::Object(props)), Value::Object(given)) = (schema.get("properties"), args)
    else {
        return;
    };
    for (name, value) in given.iter_mut() {
        let Some(Value::Object(p)) = props.get(name) else {
            continue;
        };
        let takes_object = super::schema::admits_type(p, "object");
        let free = p.get("additionalProperties") != Some(&Value::Bool(false));
        if let (true, true, Value::String(text)) = (takes_object, free, &*value)
            && let Ok(parsed @ Value::Object(_)) = serde_json::from_str::<Value>(text)
        {
            *value = parsed;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn map(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn projections_keep_the_constraints_in_the_listed_subset() {
        let full = map(json!({
            "type": "object", "additionalProperties": false, "required": ["q"],
            "properties": {
                "q": {"type": "string", "minLength": 1},
                "n": {"type": ["integer", "null"], "minimum": 1, "maximum": 5},
                "status": {"type": ["string", "null"], "enum": ["open", "done", null]},
                "scope": {"description": "Where.", "oneOf": [
                    {"const": "project", "type": "string", "description": "This project."},
                    {"const": "global", "type": "string", "description": "Everywhere."}]},
                "sort": {"anyOf": [{"oneOf": [{"enum": ["a", "b"], "type": "string"}]},
                                   {"type": "null"}]},
                "flag": {"type": "boolean", "default": false},
                "meta": {"type": ["object", "null"], "additionalProperties": true},
                "list": {"type": "array", "items": {"type": ["string", "null"]}}
            }
        }));
        let p = Value::Object(listed(&full, Dialect::Portable));
        assert_eq!(p["properties"]["n"]["type"], "integer");
        assert_eq!(p["properties"]["n"]["maximum"], 5);
        assert_eq!(p["properties"]["status"]["enum"], json!(["open", "done"]));
        assert_eq!(p["properties"]["scope"]["type"], "string");
        assert_eq!(
            p["properties"]["scope"]["enum"],
            json!(["project", "global"])
        );
        assert_eq!(
            p["properties"]["scope"]["description"],
            "Where. (project: This project.; global: Everywhere.)"
        );
        assert_eq!(p["properties"]["sort"]["enum"], json!(["a", "b"]));
        assert_eq!(p["properties"]["sort"]["type"], "string");
        assert!(p["properties"]["sort"].get("anyOf").is_none());
        assert_eq!(p["properties"]["flag"]["description"], "Default: false.");
        assert_eq!(p["properties"]["meta"]["type"], "string");
        assert_eq!(p["properties"]["list"]["items"]["type"], "string");
        assert_eq!(p["required"], json!(["q"]));
        assert_eq!(p["additionalProperties"], false);

        let strict = Value::Object(listed(&full, Dialect::OpenaiStrict));
        assert_eq!(
            strict["required"],
            json!(["q", "flag", "list", "meta", "n", "scope", "sort", "status"])
        );
        assert_eq!(strict["properties"]["q"]["type"], "string");
        assert_eq!(
            strict["properties"]["n"]["type"],
            json!(["integer", "null"])
        );
        assert_eq!(
            strict["properties"]["status"]["enum"],
            json!(["open", "done", null])
        );
        let gemini = Value::Object(listed(&full, Dialect::Gemini));
        assert!(gemini.get("additionalProperties").is_none());
        assert_eq!(gemini["properties"], p["properties"]);

        let mut args = json!({"q": null, "n": null, "list": [null], "flag": false});
        absent_nulls(&full, &mut args);
        assert_eq!(args, json!({"q": null, "list": [null], "flag": false}));

        let mut args = json!({"meta": "{\"k\": 1}", "q": "{\"not\": \"an object field\"}"});
        accept_object_text(&full, &mut args);
        assert_eq!(args["meta"], json!({"k": 1}));
        assert_eq!(args["q"], "{\"not\": \"an object field\"}");
    }
}
