//! The error envelope every failed tool call returns, and the help prompt that lets an
//! agent correct its call in the same turn.
//!
//! Shape (satisfies both `tool-call-validation.md` and Colibri's envelope):
//! `{"status": "VALIDATION_FAILED" | "ERROR" | "PERMISSION_DENIED",
//!   "error": {"code", "message", "details": {...}}, "help_prompt"?: "..."}`.

use serde_json::{Value, json};

use crate::error::{Error, FieldError};

use super::tool::ToolDef;

/// Validation failed before the handler ran.
pub fn validation_failed(tool: &ToolDef, errors: &[FieldError]) -> Value {
    let summary = errors
        .iter()
        .map(|e| format!("{}: {}", e.field, e.message))
        .collect::<Vec<_>>()
        .join("; ");
    json!({
        "status": "VALIDATION_FAILED",
        "error": {
            "code": "ERR_INVALID_INPUT",
            "message": format!("invalid arguments for {}: {summary}", tool.name),
            "details": { "errors": errors },
        },
        "help_prompt": help_prompt(tool),
    })
}

/// The tool name is not one this caller may use.
pub fn unknown_tool(name: &str, available: &[&str]) -> Value {
    let shown: String = name.chars().take(100).collect();
    let message = format!("Unknown tool: {shown}");
    json!({
        "status": "VALIDATION_FAILED",
        "error": {
            "code": "ERR_INVALID_INPUT",
            "message": message,
            "details": { "errors": [FieldError::new("tool_name", message.clone())] },
        },
        "help_prompt": format!(
            "Unknown tool name. Available tools:\n{}",
            available.iter().map(|t| format!("- {t}")).collect::<Vec<_>>().join("\n")
        ),
    })
}

/// A domain failure. Internal errors are reported without their details (they are
/// logged on stderr by the caller).
pub fn domain_error(tool: &ToolDef, err: &Error) -> Value {
    if let Error::InvalidInput(fields) = err {
        return validation_failed(tool, fields);
    }
    let status = match err {
        Error::PermissionDenied(_) => "PERMISSION_DENIED",
        _ => "ERROR",
    };
    let message = if err.is_internal() {
        format!(
            "{} failed with an internal error; the server logged the details and keeps serving. \
             Retry once; if it persists, report it.",
            tool.name
        )
    } else {
        err.to_string()
    };
    let mut details = serde_json::Map::new();
    details.insert("tool".into(), json!(tool.name));
    if let Error::Conflict {
        existing_id: Some(id),
        ..
    } = err
    {
        details.insert("existing_id".into(), json!(id));
    }
    json!({
        "status": status,
        "error": { "code": err.code(), "message": message, "details": details },
    })
}

/// The tool is outside this caller's scope.
pub fn permission_denied(name: &str, profile: &str) -> Value {
    json!({
        "status": "PERMISSION_DENIED",
        "error": {
            "code": "PERMISSION_DENIED",
            "message": format!("tool {name} is not in the tool scope of this server ({profile})"),
            "details": { "tool": name },
        },
    })
}

/// The arguments are larger than any call may be.
pub fn too_large(tool: &ToolDef, bytes: usize, max: usize) -> Value {
    validation_failed(
        tool,
        &[FieldError::new(
            "arguments",
            format!("arguments are {bytes} bytes; at most {max} bytes are accepted"),
        )],
    )
}

fn type_label(schema: &Value) -> String {
    let base = match schema.get("type") {
        Some(Value::String(t)) => t.clone(),
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .filter(|t| *t != "null")
            .collect::<Vec<_>>()
            .join("|"),
        _ => {
            let consts: Vec<String> = ["oneOf", "anyOf"]
                .iter()
                .filter_map(|k| schema.get(*k).and_then(Value::as_array))
                .flatten()
                .filter_map(|b| b.get("const").map(|c| c.to_string()))
                .collect();
            if consts.is_empty() {
                "value".into()
            } else {
                return consts.join("|");
            }
        }
    };
    if let Some(Value::Array(options)) = schema.get("enum") {
        let list: Vec<String> = options
            .iter()
            .filter(|o| !o.is_null())
            .map(|o| o.to_string())
            .collect();
        return list.join("|");
    }
    if base == "array"
        && let Some(items) = schema.get("items")
    {
        return format!("{}[]", type_label(items));
    }
    base
}

/// The help prompt: tool name, description, each required field with its type, the
/// optional field names, and a complete valid example. Kept under 500 tokens.
pub fn help_prompt(tool: &ToolDef) -> String {
    let props = tool
        .input_schema
        .get("properties")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let required: Vec<&str> = tool
        .input_schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut out = format!(
        "Tool call failed for: {}\nDescription: {}\n",
        tool.name, tool.description
    );
    out.push_str("Required fields:\n");
    if required.is_empty() {
        out.push_str("- (none)\n");
    }
    for r in &required {
        let schema = props.get(*r).cloned().unwrap_or(Value::Null);
        let desc = schema
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or("");
        let desc: String = desc.chars().take(120).collect();
        out.push_str(&format!("- {r} ({}): {desc}\n", type_label(&schema)));
    }
    let optional: Vec<String> = props
        .iter()
        .filter(|(k, _)| !required.contains(&k.as_str()))
        .map(|(k, s)| format!("{k} ({})", type_label(s)))
        .collect();
    if !optional.is_empty() {
        out.push_str(&format!("Optional fields: {}\n", optional.join(", ")));
    }
    out.push_str(&format!(
        "Valid example:\n```json\n{}\n```",
        serde_json::to_string(&tool.example).unwrap_or_default()
    ));
    out
}
