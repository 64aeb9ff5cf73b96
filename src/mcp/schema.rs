//! JSON Schemas for tool parameters and results, and the validator that runs before any
//! handler.
//!
//! Schemas are generated with schemars from the types: a tool's `inputSchema` from the
//! MCP layer's parameter struct (what it deserializes, [`schema_for`]), its `outputSchema`
//! from the result type its handler returns, which derives `JsonSchema` beside `Serialize`
//! (what it serializes to, [`output_schema_for`]). Both go through one generator function,
//! with subschemas inlined so an agent reads one flat document, and only standard
//! formats. The validator covers the subset of JSON Schema that those types produce
//! (`type`, `enum`, `const`, `properties`, `required`, `additionalProperties`, `items`,
//! `minItems`/`maxItems`, `minLength`/`maxLength`, `pattern`, `minimum`/`maximum`,
//! `anyOf`/`oneOf`) and reports *every* problem with its field path, not just the first.

use schemars::JsonSchema;
use serde_json::{Map, Value};

use crate::error::FieldError;

/// The schema of what `T` accepts (a tool's parameters), inlined, as a JSON object.
pub(crate) fn schema_for<T: JsonSchema>() -> Map<String, Value> {
    generate::<T>(schemars::generate::SchemaSettings::draft2020_12().for_deserialize())
}

/// The schema of what `T` serializes to (a tool's result): a field that
/// `skip_serializing_if` may leave out is not `required`, so the `outputSchema` tells
/// the truth about every result.
pub(crate) fn output_schema_for<T: JsonSchema>() -> Map<String, Value> {
    generate::<T>(schemars::generate::SchemaSettings::draft2020_12().for_serialize())
}

/// The schema of `T` under `settings` (the deserialize or the serialize contract), as
/// tools list it: subschemas inlined, no `$schema`/`title`/`$defs`, always an object with
/// `properties`, only standard formats.
fn generate<T: JsonSchema>(settings: schemars::generate::SchemaSettings) -> Map<String, Value> {
    let settings = settings.with(|s| {
        s.inline_subschemas = true;
    });
    let schema = settings.into_generator().into_root_schema_for::<T>();
    let mut value = serde_json::to_value(schema).unwrap_or_else(|_| Value::Object(Map::new()));
    if let Value::Object(map) = &mut value {
        map.remove("$schema");
        map.remove("title");
        map.remove("$defs");
        if !map.contains_key("type") {
            map.insert("type".into(), Value::String("object".into()));
        }
        if !map.contains_key("properties") {
            map.insert("properties".into(), Value::Object(Map::new()));
        }
    }
    strip_nonstandard_formats(&mut value);
    if let Value::Object(map) = &mut value {
        return std::mem::take(map);
    }
    Map::new()
}

/// The `format` values JSON Schema 2020-12 defines. schemars adds its own (`uint8`,
/// `uint32`, `int64`, `double`, ...), which validators such as ajv warn about once per
/// field; the range they imply is already in `minimum`/`maximum`.
const STANDARD_FORMATS: &[&str] = &[
    "date-time",
    "date",
    "time",
    "duration",
    "email",
    "idn-email",
    "hostname",
    "idn-hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "iri",
    "iri-reference",
    "uuid",
    "uri-template",
    "json-pointer",
    "relative-json-pointer",
    "regex",
];

/// The keyword by which a field keeps a `format` that is not a standard one:
/// `#[schemars(extend("x-format" = "float"))]` lists `"format": "float"` for that field
/// alone ([`strip_nonstandard_formats`] removes the one schemars writes for every `f32`).
/// `add_learning`'s `similarity` is listed so, as `tools/list` listed it before its
/// output schemas were derived.
pub(crate) const KEPT_FORMAT: &str = "x-format";

/// Remove every `format` that is not a standard one, at any depth (a field's
/// [`KEPT_FORMAT`] becomes its `format`), and spell a bare `true` subschema (any value;
/// schemars' form for a `serde_json::Value`) as `{}`, the same contract, which strict
/// clients accept where a schema object is expected.
fn strip_nonstandard_formats(v: &mut Value) {
    let Value::Object(map) = v else { return };
    if let Some(f) = map.get("format").and_then(Value::as_str)
        && !STANDARD_FORMATS.contains(&f)
    {
        // The range a numeric format implied becomes explicit, so that the validator
        // (not the typed parameters) refuses an out-of-range value, naming the field.
        let range: Option<(Value, Value)> = match f {
            "uint8" => Some((0.into(), u8::MAX.into())),
            "uint16" => Some((0.into(), u16::MAX.into())),
            "uint32" => Some((0.into(), u32::MAX.into())),
            "uint64" | "uint" => Some((0.into(), u64::MAX.into())),
            "int8" => Some((i8::MIN.into(), i8::MAX.into())),
            "int16" => Some((i16::MIN.into(), i16::MAX.into())),
            "int32" => Some((i32::MIN.into(), i32::MAX.into())),
            "int64" | "int" => Some((i64::MIN.into(), i64::MAX.into())),
            _ => None,
        };
        if let Some((lo, hi)) = range {
            map.entry("minimum").or_insert(lo);
            map.entry("maximum").or_insert(hi);
        }
        map.remove("format");
    }
    if let Some(kept) = map.remove(KEPT_FORMAT) {
        map.insert("format".into(), kept);
    }
    let any = |s: &mut Value| {
        if *s == Value::Bool(true) {
            *s = Value::Object(Map::new());
        }
    };
    for (key, child) in map.iter_mut() {
        match key.as_str() {
            // Values, not schemas: left as they are.
            "default" | "const" | "enum" | "examples" | "required" => {}
            "properties" | "$defs" => {
                if let Value::Object(props) = child {
                    for p in props.values_mut() {
                        any(p);
                        strip_nonstandard_formats(p);
                    }
                }
            }
            "items" | "additionalProperties" => {
                if key == "items" {
                    any(child);
                }
                strip_nonstandard_formats(child);
            }
            _ => match child {
                Value::Array(items) => items.iter_mut().for_each(strip_nonstandard_formats),
                other => strip_nonstandard_formats(other),
            },
        }
    }
}

/// Whether `schema` says its value may be of JSON type `name`: `"type": name`, or a
/// type array naming it.
pub(crate) fn admits_type(schema: &Map<String, Value>, name: &str) -> bool {
    match schema.get("type") {
        Some(Value::String(t)) => t == name,
        Some(Value::Array(ts)) => ts.iter().any(|t| t == name),
        _ => false,
    }
}

/// Rewrite integral numbers written as floats (`2.0`) as integers wherever the schema
/// says `integer`: JSON Schema counts `2.0` as an integer, so the validator accepts it,
/// and the typed parameters then read it as `2`.
pub(crate) fn coerce_integers(schema: &Map<String, Value>, v: &mut Value) {
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(branches)) = schema.get(key) {
            for b in branches.iter().filter_map(Value::as_object) {
                if validate(b, v).is_empty() {
                    coerce_integers(b, v);
                    return;
                }
            }
        }
    }
    let says_integer = admits_type(schema, "integer");
    match v {
        Value::Number(n) if says_integer && !(n.is_i64() || n.is_u64()) => {
            if let Some(f) = n.as_f64()
                && f.fract() == 0.0
            {
                if f >= 0.0 && f < u64::MAX as f64 {
                    *v = Value::from(f as u64);
                } else if f < 0.0 && f >= i64::MIN as f64 {
                    *v = Value::from(f as i64);
                }
            }
        }
        Value::Array(items) => {
            if let Some(Value::Object(item)) = schema.get("items") {
                items.iter_mut().for_each(|i| coerce_integers(item, i));
            }
        }
        Value::Object(obj) => {
            if let Some(Value::Object(props)) = schema.get("properties") {
                for (k, val) in obj.iter_mut() {
                    if let Some(Value::Object(p)) = props.get(k) {
                        coerce_integers(p, val);
                    }
                }
            }
        }
        _ => {}
    }
}

/// Validate `value` against `schema`; returns every violation found.
pub(crate) fn validate(schema: &Map<String, Value>, value: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    check(schema, value, "", &mut errors);
    errors
}

fn field_name(path: &str) -> String {
    if path.is_empty() {
        "arguments".to_string()
    } else {
        path.to_string()
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn type_matches(expected: &str, v: &Value) -> bool {
    match expected {
        "integer" => match v {
            Value::Number(n) => {
                n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
            }
            _ => false,
        },
        "number" => v.is_number(),
        other => other == type_name(v),
    }
}

fn check(schema: &Map<String, Value>, v: &Value, path: &str, errors: &mut Vec<FieldError>) {
    // anyOf / oneOf: accept when any branch accepts; otherwise report the branch that
    // got furthest (fewest errors), so the message stays specific.
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(branches)) = schema.get(key) {
            let mut best: Option<Vec<FieldError>> = None;
            for b in branches.iter().filter_map(Value::as_object) {
                let mut e = Vec::new();
                check(b, v, path, &mut e);
                if e.is_empty() {
                    best = None;
                    break;
                }
                if best.as_ref().is_none_or(|x| e.len() < x.len()) {
                    best = Some(e);
                }
            }
            if let Some(e) = best {
                let consts: Vec<String> = branches
                    .iter()
                    .filter_map(|b| b.get("const").or_else(|| b.get("enum")))
                    .map(|c| c.to_string())
                    .collect();
                if consts.len() == branches.len() {
                    errors.push(FieldError::new(
                        field_name(path),
                        format!("must be one of: {}", consts.join(", ")),
                    ));
                } else {
                    errors.extend(e);
                }
                return;
            }
        }
    }

    if let Some(t) = schema.get("type") {
        let allowed: Vec<&str> = match t {
            Value::String(s) => vec![s.as_str()],
            Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
            _ => vec![],
        };
        if !allowed.is_empty() && !allowed.iter().any(|a| type_matches(a, v)) {
            let wanted: Vec<&str> = allowed.into_iter().filter(|a| *a != "null").collect();
            errors.push(FieldError::new(
                field_name(path),
                format!("expected {}, got {}", wanted.join(" or "), type_name(v)),
            ));
            return;
        }
    }
    if let Some(Value::Array(options)) = schema.get("enum")
        && !options.contains(v)
    {
        let list: Vec<String> = options
            .iter()
            .filter(|o| !o.is_null())
            .map(|o| o.to_string())
            .collect();
        errors.push(FieldError::new(
            field_name(path),
            format!("must be one of: {}", list.join(", ")),
        ));
        return;
    }
    if let Some(c) = schema.get("const")
        && c != v
    {
        errors.push(FieldError::new(field_name(path), format!("must be {c}")));
        return;
    }
    match v {
        Value::String(s) => check_string(schema, s, path, errors),
        Value::Number(n) => check_number(schema, n, path, errors),
        Value::Array(items) => check_array(schema, items, path, errors),
        Value::Object(obj) => check_object(schema, obj, path, errors),
        Value::Null | Value::Bool(_) => {}
    }
}

fn check_string(schema: &Map<String, Value>, s: &str, path: &str, errors: &mut Vec<FieldError>) {
    let len = s.chars().count();
    if let Some(max) = schema.get("maxLength").and_then(Value::as_u64)
        && len as u64 > max
    {
        errors.push(FieldError::new(
            field_name(path),
            format!("too long: {len} characters, at most {max}"),
        ));
    }
    if let Some(min) = schema.get("minLength").and_then(Value::as_u64)
        && (len as u64) < min
    {
        errors.push(FieldError::new(
            field_name(path),
            if min == 1 {
                "must not be empty".to_string()
            } else {
                format!("too short: {len} characters, at least {min}")
            },
        ));
    }
    if let Some(p) = schema.get("pattern").and_then(Value::as_str) {
        match regex::Regex::new(p) {
            Ok(re) if !re.is_match(s) => errors.push(FieldError::new(
                field_name(path),
                format!("must match the pattern {p}"),
            )),
            Ok(_) => {}
            Err(_) => errors.push(FieldError::new(
                field_name(path),
                "the schema's pattern is invalid (a bug in cairn)",
            )),
        }
    }
}

fn check_number(
    schema: &Map<String, Value>,
    n: &serde_json::Number,
    path: &str,
    errors: &mut Vec<FieldError>,
) {
    let Some(x) = n.as_f64() else { return };
    let min = schema.get("minimum").and_then(Value::as_f64);
    let max = schema.get("maximum").and_then(Value::as_f64);
    let out_of_range = min.is_some_and(|m| x < m) || max.is_some_and(|m| x > m);
    if out_of_range {
        let range = match (min, max) {
            (Some(a), Some(b)) => format!("between {a} and {b}"),
            (Some(a), None) => format!("at least {a}"),
            (None, Some(b)) => format!("at most {b}"),
            (None, None) => unreachable!("out of range needs a bound"),
        };
        errors.push(FieldError::new(
            field_name(path),
            format!("must be {range} (got {n})"),
        ));
    }
}

fn check_array(
    schema: &Map<String, Value>,
    items: &[Value],
    path: &str,
    errors: &mut Vec<FieldError>,
) {
    if let Some(max) = schema.get("maxItems").and_then(Value::as_u64)
        && items.len() as u64 > max
    {
        errors.push(FieldError::new(
            field_name(path),
            format!("too many items: {}, at most {max}", items.len()),
        ));
    }
    if let Some(min) = schema.get("minItems").and_then(Value::as_u64)
        && (items.len() as u64) < min
    {
        errors.push(FieldError::new(
            field_name(path),
            format!("needs at least {min} items"),
        ));
    }
    if let Some(Value::Object(item_schema)) = schema.get("items") {
        for (i, item) in items.iter().enumerate() {
            check(item_schema, item, &format!("{path}[{i}]"), errors);
        }
    }
}

fn check_object(
    schema: &Map<String, Value>,
    obj: &Map<String, Value>,
    path: &str,
    errors: &mut Vec<FieldError>,
) {
    let empty = Map::new();
    let props = schema
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let join = |k: &str| {
        if path.is_empty() {
            k.to_string()
        } else {
            format!("{path}.{k}")
        }
    };
    if let Some(Value::Array(required)) = schema.get("required") {
        for r in required.iter().filter_map(Value::as_str) {
            if !obj.contains_key(r) {
                errors.push(FieldError::new(join(r), "Required"));
            }
        }
    }
    for (k, v) in obj {
        match props.get(k).and_then(Value::as_object) {
            Some(s) => check(s, v, &join(k), errors),
            None => match schema.get("additionalProperties") {
                Some(Value::Bool(false)) => {
                    let mut known: Vec<&str> = props.keys().map(String::as_str).collect();
                    known.sort_unstable();
                    errors.push(FieldError::new(
                        join(k),
                        if known.is_empty() {
                            "unknown field; this tool takes no arguments".to_string()
                        } else {
                            format!("unknown field; allowed: {}", known.join(", "))
                        },
                    ));
                }
                Some(Value::Object(s)) => check(s, v, &join(k), errors),
                _ => {}
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[derive(serde::Deserialize, schemars::JsonSchema)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Params {
        #[schemars(length(min = 1, max = 5))]
        name: String,
        #[schemars(range(min = 1, max = 4))]
        priority: Option<u8>,
        #[schemars(length(max = 2))]
        tags: Option<Vec<String>>,
        kind: Option<Kind>,
    }

    #[derive(serde::Deserialize, schemars::JsonSchema)]
    #[serde(rename_all = "snake_case")]
    #[allow(dead_code)]
    enum Kind {
        /// First.
        Alpha,
        /// Second.
        Beta,
    }

    fn errs(v: Value) -> Vec<(String, String)> {
        validate(&schema_for::<Params>(), &v)
            .into_iter()
            .map(|e| (e.field, e.message))
            .collect()
    }

    #[test]
    fn a_valid_value_passes() {
        assert!(
            errs(json!({"name": "abc", "priority": 2, "tags": ["x"], "kind": "beta"})).is_empty()
        );
        assert!(errs(json!({"name": "abc", "priority": null})).is_empty());
    }

    #[test]
    fn every_problem_is_reported_with_its_field() {
        let e = errs(json!({"priority": 9, "tags": ["a", 1, "c"], "kind": "gamma", "extra": true}));
        let fields: Vec<&str> = e.iter().map(|(f, _)| f.as_str()).collect();
        assert!(fields.contains(&"name"), "{e:?}");
        assert!(fields.contains(&"priority"));
        assert!(fields.contains(&"tags"));
        assert!(fields.contains(&"tags[1]"));
        assert!(fields.contains(&"kind"));
        assert!(fields.contains(&"extra"));
        let kind = e.iter().find(|(f, _)| f == "kind").unwrap();
        assert!(kind.1.contains("\"alpha\""), "{kind:?}");
    }

    #[test]
    fn schemas_carry_only_standard_formats() {
        #[derive(schemars::JsonSchema)]
        #[allow(dead_code)]
        struct Numbers {
            a: u8,
            b: u32,
            c: i64,
            d: f64,
            e: Option<Vec<u16>>,
        }
        let s = Value::Object(schema_for::<Numbers>());
        let text = s.to_string();
        assert!(!text.contains("\"format\""), "{text}");
        assert_eq!(s["properties"]["a"]["maximum"], 255, "{text}");
        assert_eq!(s["properties"]["b"]["maximum"], u32::MAX, "{text}");
        let e = validate(
            &schema_for::<Numbers>(),
            &serde_json::json!({
            "a": 1, "b": 5_000_000_000u64, "c": 1, "d": 1.5}),
        );
        assert_eq!(e.len(), 1, "{e:?}");
        assert_eq!(e[0].field, "b");
    }

    #[test]
    fn integral_floats_become_integers_where_the_schema_says_integer() {
        let schema = schema_for::<Params>();
        let mut v = json!({"name": "abc", "priority": 2.0});
        assert!(validate(&schema, &v).is_empty());
        coerce_integers(&schema, &mut v);
        assert_eq!(v["priority"], json!(2));
        assert!(v["priority"].is_u64());
        let p: Params = serde_json::from_value(v).unwrap();
        assert_eq!(p.priority, Some(2));
        let e = errs(json!({"name": "abc", "priority": 2.5}));
        assert_eq!(e[0].0, "priority", "{e:?}");
    }

    #[test]
    fn wrong_types_say_what_was_expected() {
        let e = errs(json!({"name": 42}));
        assert_eq!(
            e,
            [(
                "name".to_string(),
                "expected string, got integer".to_string()
            )]
        );
        let e = errs(json!({"name": "toolong"}));
        assert!(e[0].1.contains("at most 5"));
    }
}
