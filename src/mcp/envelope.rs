//! The error envelope every failed tool call returns, and the help prompt that lets an
//! agent correct its call in the same turn.
//!
//! Shape (satisfies both `tool-call-validation.md` and Colibri's envelope):
//! `{"status": "VALIDATION_FAILED" | "ERROR" | "PERMISSION_DENIED",
//!   "error": {"code", "message", "details": {...}}, "help_prompt"?: "..."}`.
//!
//! [`wire_code`] is the one table from a domain [`ErrorKind`] to the envelope's `status`
//! and stable `code`. Both vocabularies share it: where Colibri names a failure
//! differently (`ERR_TASK_NOT_FOUND`, `ERR_SESSION_NOT_FOUND`), the domain already
//! reports a kind of its own, so the code does not depend on the tool's name.

use serde_json::{Value, json};

use crate::error::{Error, ErrorKind, FieldError};

use super::tool::ToolDef;

/// The envelope's `status` and stable `code` for a kind of failure. One table, no
/// wildcard arm: a new kind does not compile until it has a code.
pub(crate) fn wire_code(kind: ErrorKind) -> (&'static str, &'static str) {
    match kind {
        ErrorKind::InvalidInput => ("VALIDATION_FAILED", "ERR_INVALID_INPUT"),
        ErrorKind::NotFound => ("ERROR", "ERR_NOT_FOUND"),
        ErrorKind::TaskNotFound => ("ERROR", "ERR_TASK_NOT_FOUND"),
        ErrorKind::ProjectNotFound => ("ERROR", "ERR_PROJECT_NOT_FOUND"),
        ErrorKind::SessionNotFound => ("ERROR", "ERR_SESSION_NOT_FOUND"),
        ErrorKind::InvalidTransition => ("ERROR", "ERR_INVALID_TRANSITION"),
        ErrorKind::PermissionDenied => ("PERMISSION_DENIED", "PERMISSION_DENIED"),
        ErrorKind::NoBoundIssue => ("ERROR", "ERR_NO_BOUND_ISSUE"),
        ErrorKind::Conflict => ("ERROR", "ERR_CONFLICT"),
        ErrorKind::AlreadyFinalized => ("ERROR", "ERR_ALREADY_FINALIZED"),
        ErrorKind::FailedPrecondition => ("ERROR", "ERR_FAILED_PRECONDITION"),
        ErrorKind::WorkspaceInvalid => ("ERROR", "ERR_WORKSPACE_INVALID"),
        ErrorKind::ModelUnavailable => ("ERROR", "ERR_MODEL_UNAVAILABLE"),
        ErrorKind::Index => ("ERROR", "ERR_INDEX"),
        ErrorKind::StorageFull => ("ERROR", "ERR_STORAGE_FULL"),
        ErrorKind::Internal => ("ERROR", "ERR_INTERNAL"),
    }
}

/// The envelope's `status` and `error` members.
fn envelope(kind: ErrorKind, message: String, details: Value) -> Value {
    let (status, code) = wire_code(kind);
    json!({
        "status": status,
        "error": { "code": code, "message": message, "details": details },
    })
}

/// Validation failed before the handler ran.
pub(crate) fn validation_failed(tool: &ToolDef, errors: &[FieldError]) -> Value {
    let summary = errors
        .iter()
        .map(|e| format!("{}: {}", e.field, e.message))
        .collect::<Vec<_>>()
        .join("; ");
    let mut out = envelope(
        ErrorKind::InvalidInput,
        format!("{}{summary}", invalid_arguments_prefix(tool.name)),
        json!({ "errors": errors }),
    );
    out["help_prompt"] = json!(help_prompt(tool));
    out
}

/// The tool name is not one this caller may use.
/// The message of [`unknown_tool`].
pub(crate) fn unknown_tool_message(name: &str) -> String {
    let shown: String = name.chars().take(100).collect();
    format!("Unknown tool: {shown}")
}

/// How [`unknown_tool`]'s help prompt begins (the tools listed follow).
pub(crate) const UNKNOWN_TOOL_HELP: &str = "Unknown tool name. Available tools:\n";

/// How the message of [`validation_failed`] begins for `tool` (the problems follow).
pub(crate) fn invalid_arguments_prefix(tool: &str) -> String {
    format!("invalid arguments for {tool}: ")
}

/// The message of an internal error of `tool` (its details stay in the log).
pub(crate) fn internal_message(tool: &str) -> String {
    format!(
        "{tool} failed with an internal error; the server logged the details and keeps serving. \
         Retry once; if it persists, report it."
    )
}

pub(crate) fn unknown_tool(name: &str, available: &[&str]) -> Value {
    let message = unknown_tool_message(name);
    let details = json!({ "errors": [FieldError::new("tool_name", message.clone())] });
    let mut out = envelope(ErrorKind::InvalidInput, message, details);
    out["help_prompt"] = json!(format!(
        "{UNKNOWN_TOOL_HELP}{}",
        available
            .iter()
            .map(|t| format!("- {t}"))
            .collect::<Vec<_>>()
            .join("\n")
    ));
    out
}

/// A domain failure. Internal errors are reported without their details (they are
/// logged on stderr by the caller).
pub(crate) fn domain_error(tool: &ToolDef, err: &Error) -> Value {
    if let Error::InvalidInput(fields) = err {
        return validation_failed(tool, fields);
    }
    let message = if err.is_internal() {
        internal_message(tool.name)
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
    envelope(err.kind(), message, Value::Object(details))
}

/// The tool is outside this caller's scope.
pub(crate) fn permission_denied(name: &str, profile: &str) -> Value {
    envelope(
        ErrorKind::PermissionDenied,
        format!("tool {name} is not in the tool scope of this server ({profile})"),
        json!({ "tool": name }),
    )
}

/// The arguments are larger than any call may be.
pub(crate) fn too_large(tool: &ToolDef, bytes: usize, max: usize) -> Value {
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
pub(crate) fn help_prompt(tool: &ToolDef) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The codes clients saw before kinds existed (`Error::code()`), with the status of
    /// each; a change here is a change of the wire contract.
    const TABLE: [(ErrorKind, &str, &str); 16] = [
        (
            ErrorKind::InvalidInput,
            "VALIDATION_FAILED",
            "ERR_INVALID_INPUT",
        ),
        (ErrorKind::NotFound, "ERROR", "ERR_NOT_FOUND"),
        (ErrorKind::TaskNotFound, "ERROR", "ERR_TASK_NOT_FOUND"),
        (ErrorKind::ProjectNotFound, "ERROR", "ERR_PROJECT_NOT_FOUND"),
        (ErrorKind::SessionNotFound, "ERROR", "ERR_SESSION_NOT_FOUND"),
        (
            ErrorKind::InvalidTransition,
            "ERROR",
            "ERR_INVALID_TRANSITION",
        ),
        (
            ErrorKind::PermissionDenied,
            "PERMISSION_DENIED",
            "PERMISSION_DENIED",
        ),
        (ErrorKind::NoBoundIssue, "ERROR", "ERR_NO_BOUND_ISSUE"),
        (ErrorKind::Conflict, "ERROR", "ERR_CONFLICT"),
        (
            ErrorKind::AlreadyFinalized,
            "ERROR",
            "ERR_ALREADY_FINALIZED",
        ),
        (
            ErrorKind::FailedPrecondition,
            "ERROR",
            "ERR_FAILED_PRECONDITION",
        ),
        (
            ErrorKind::WorkspaceInvalid,
            "ERROR",
            "ERR_WORKSPACE_INVALID",
        ),
        (
            ErrorKind::ModelUnavailable,
            "ERROR",
            "ERR_MODEL_UNAVAILABLE",
        ),
        (ErrorKind::Index, "ERROR", "ERR_INDEX"),
        (ErrorKind::StorageFull, "ERROR", "ERR_STORAGE_FULL"),
        (ErrorKind::Internal, "ERROR", "ERR_INTERNAL"),
    ];

    fn tool() -> &'static ToolDef {
        crate::mcp::registry::all_tools()
            .iter()
            .find(|t| t.name == "add_learning")
            .unwrap()
    }

    #[test]
    fn every_tools_help_prompt_is_short_and_names_a_valid_example() {
        for t in crate::mcp::registry::all_tools() {
            let help = help_prompt(t);
            // ~4 characters per token is the usual estimate for English and JSON.
            let tokens = help.chars().count().div_ceil(4);
            assert!(tokens < 500, "{} help prompt is ~{tokens} tokens", t.name);
            assert!(help.contains(t.name) && help.contains("Valid example"));
        }
    }

    #[test]
    fn every_kind_has_its_status_and_code() {
        let covered: std::collections::HashSet<_> = TABLE.iter().map(|(k, ..)| *k).collect();
        assert_eq!(covered.len(), ErrorKind::ALL.len());
        let tool = tool();
        for (kind, status, code) in TABLE {
            assert_eq!(wire_code(kind), (status, code), "{kind:?}");
            let body = domain_error(tool, &Error::example(kind));
            assert_eq!(body["status"], status, "{kind:?}: {body}");
            assert_eq!(body["error"]["code"], code, "{kind:?}: {body}");
            assert_eq!(
                body.get("help_prompt").is_some(),
                kind == ErrorKind::InvalidInput,
                "{kind:?}: only invalid input gets the help prompt"
            );
        }
    }

    #[test]
    fn internal_details_stay_in_the_log_and_conflicts_name_the_existing_id() {
        let tool = tool();
        for internal in [
            Error::example(ErrorKind::Internal),
            Error::Database("secret query failed: boom".into()),
            Error::io("/secret/path", std::io::Error::other("boom")),
        ] {
            let body = domain_error(tool, &internal);
            assert_eq!(body["error"]["code"], "ERR_INTERNAL");
            let message = body["error"]["message"].as_str().unwrap();
            assert!(message.contains("internal error"), "{message}");
            assert!(
                !message.contains("secret") && !message.contains("boom"),
                "{message}"
            );
        }
        let body = domain_error(tool, &Error::example(ErrorKind::Conflict));
        assert_eq!(body["error"]["details"]["existing_id"], "L-1");
        assert_eq!(body["error"]["details"]["tool"], "add_learning");
        let body = domain_error(tool, &Error::example(ErrorKind::InvalidInput));
        assert_eq!(body["error"]["details"]["errors"][0]["field"], "field");
    }

    #[test]
    fn refusals_before_the_handler_use_the_same_table() {
        let denied = permission_denied("create_pr", "reviewer");
        assert_eq!(denied["status"], "PERMISSION_DENIED");
        assert_eq!(denied["error"]["code"], "PERMISSION_DENIED");
        let unknown = unknown_tool("nope", &["server_ping"]);
        assert_eq!(unknown["status"], "VALIDATION_FAILED");
        assert_eq!(unknown["error"]["code"], "ERR_INVALID_INPUT");
        assert!(
            unknown["help_prompt"]
                .as_str()
                .unwrap()
                .contains("- server_ping")
        );
    }
}
