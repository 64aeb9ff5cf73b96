#!/usr/bin/env python3
"""Checks MCP tool input schemas against the documented rules of strict LLM
function-calling dialects.

Input: a `tools/list` snapshot (tests/snapshots/tools_list.json: a JSON array of tools,
or a `{"tools": [...]}` result). Only each tool's `inputSchema` is checked.

Dialects:
  portable       the rules OpenAI strict and Gemini share, plus the ones the issue names
                 (single-string `type`, no unions/refs/format/const..., objects closed
                 with `additionalProperties: false`, arrays with `items`, ...).
  openai-strict  OpenAI Structured Outputs / function calling with `strict: true`.
  gemini         Gemini API `FunctionDeclaration.parameters` (the `Schema` object, "a
                 select subset of an OpenAPI 3.0 schema object").

Usage:
  python3 tests/dialect_check.py SNAPSHOT [--dialect portable|openai-strict|gemini|all] [--json]
  python3 tests/dialect_check.py --self-test

Each violation is printed as `dialect: tool: json-path: rule: detail`; a per-dialect
summary (count per rule) goes to stderr. Exit status 0 when the selected dialect(s) have
no violation, 1 otherwise (2 for a usage or input error).

As a module: `check(schema, dialect) -> list[str]` (each "json-path: rule: detail"), and
`check_violations(schema, dialect) -> list[Violation]`.

Sources (read 2026; the documents are versioned by their publishers, not by us):
  [OAI-SO]  OpenAI, "Structured model outputs" > "Supported schemas",
            https://developers.openai.com/api/docs/guides/structured-outputs#supported-schemas
            (formerly platform.openai.com/docs/guides/structured-outputs)
  [OAI-FC]  OpenAI, "Function calling" > "Strict mode",
            https://platform.openai.com/docs/guides/function-calling
  [OAI-ERR] OpenAI API 400 texts quoted in public issues, e.g. "In context=(), 'required'
            is required to be supplied and to be an array including every key in
            properties" (kevinwatt/mysql-mcp#5), "schema must have a 'type' key"
            (can1357/oh-my-pi#211), "'uri' is not a valid format" (can1357/oh-my-pi#206),
            "propertyNames is not permitted" (vercel-labs/json-render#180).
  [GEM-S]   Gemini API reference, "Schema", https://ai.google.dev/api/caching#Schema
            (same type in google-genai: googleapis.github.io/js-genai types.Schema)
  [GEM-FD]  Gemini API reference, "FunctionDeclaration",
            https://ai.google.dev/api/caching#FunctionDeclaration; Vertex AI
            "FunctionDeclaration" (cloud.google.com/vertex-ai/docs/reference/rest/v1beta1/
            FunctionDeclaration) for parameter-name rules.
  [GEM-ERR] Gemini API 400 texts quoted in public issues: "Invalid JSON payload received.
            Unknown name \"additionalProperties\" at 'tools[0].function_declarations[0]
            .parameters': Cannot find field." (Laisky/one-api#60, zed-industries/zed#43231,
            ax-llm/ax#293); "... .items.required[0]: property is not defined"
            (Kilo-Org/kilocode#11950); "...: only allowed for OBJECT type"
            (anomalyco/opencode#13150).
  [GCLI]    Gemini CLI: PR google-gemini/gemini-cli#400 (strips `additionalProperties` and
            `$schema` from MCP schemas, workaround for #398); PR #4176 / #5330 (MCP and all
            tools moved to `parametersJsonSchema`, `sanitizeParameters` removed);
            `hasValidTypes()` in packages/core/src/tools/mcp-client.ts ("Skipping tool ...
            because it has missing types in its parameter schema").
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from typing import Any, Iterator

DIALECTS = ("portable", "openai-strict", "gemini")


@dataclass(frozen=True)
class Violation:
    path: str
    rule: str
    detail: str

    def __str__(self) -> str:
        return f"{self.path}: {self.rule}: {self.detail}"


# --------------------------------------------------------------------------------------
# Rule registry: every rule id a dialect can emit, with its short description. The
# self-test asserts each one is triggered by at least one hand-written bad schema.
# --------------------------------------------------------------------------------------

RULES: dict[str, dict[str, str]] = {
    "portable": {
        "root-not-object": "root schema must be `type: object`",
        "schema-not-object": "every subschema must be a JSON object",
        "type-missing": "every schema node has a `type`",
        "type-array": "`type` is a single string (no type arrays such as [\"string\",\"null\"])",
        "type-invalid": "`type` is one of string, number, integer, boolean, array, object",
        "keyword": "only keywords both dialects document are used",
        "object-properties": "an object schema has `properties`",
        "object-additional-properties": "an object schema has `additionalProperties: false`",
        "array-items": "an array schema has a single-schema `items`",
        "enum": "enum is a non-empty array of strings, on a string type",
        "required": "`required` is an array naming existing properties, once each",
        "keyword-type-mismatch": "type-specific keywords sit on a node of that type",
    },
    "openai-strict": {
        "root-not-object": "root is `type: object` and not `anyOf`",
        "schema-not-object": "every subschema must be a JSON object",
        "type-missing": "every node has a `type` (or anyOf/$ref)",
        "type-invalid": "types are string, number, boolean, integer, object, array, null",
        "unsupported-keyword": "keyword documented as not supported",
        "undocumented-keyword": "keyword not in the documented supported list",
        "additional-properties": "`additionalProperties: false` on every object",
        "all-required": "every property listed in `required`",
        "format": "string `format` from the documented list",
        "limit-properties": "at most 5000 object properties in total",
        "limit-nesting": "at most 10 levels of object nesting",
        "limit-string-length": "property names + definition names + enum + const values <= 120,000 chars",
        "limit-enum-values": "at most 1000 enum values across the schema",
        "limit-enum-string-length": "one string enum with > 250 values totals <= 15,000 chars",
    },
    "gemini": {
        "root-not-object": "parameters describe an object",
        "schema-not-object": "every subschema must be a JSON object",
        "unknown-field": "only `Schema` fields are accepted (unknown names are a 400)",
        "type-missing": "every node has a `type` (or anyOf)",
        "type-array": "`type` is a single enum value (no type arrays; use `nullable`)",
        "type-invalid": "`type` is one of STRING NUMBER INTEGER BOOLEAN ARRAY OBJECT NULL",
        "nullable": "`nullable` is a boolean",
        "enum": "`enum` is a non-empty array of strings",
        "required": "`required` names defined properties",
        "keyword-type-mismatch": "type-specific fields sit on a node of that type",
        "parameter-name": "parameter names match ^[A-Za-z_][A-Za-z0-9_]{0,63}$",
    },
}

# --------------------------------------------------------------------------------------
# Traversal
# --------------------------------------------------------------------------------------

_MAP_KEYWORDS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SINGLE_KEYWORDS = (
    "items", "additionalProperties", "not", "if", "then", "else", "contains",
    "propertyNames", "unevaluatedProperties", "unevaluatedItems", "additionalItems",
)
_LIST_KEYWORDS = ("anyOf", "oneOf", "allOf", "prefixItems")
# Where a boolean is the idiomatic value rather than a degenerate subschema.
_BOOL_OK = ("additionalProperties", "unevaluatedProperties", "unevaluatedItems", "additionalItems")

_IDENT = re.compile(r"^[A-Za-z_$][A-Za-z0-9_$-]*$")


def _key_path(path: str, key: str) -> str:
    return f"{path}.{key}" if _IDENT.match(key) else f"{path}[{json.dumps(key)}]"


def _children(node: dict) -> Iterator[tuple[Any, str]]:
    """(subschema, relative path) for every subschema position of `node`."""
    for kw in _MAP_KEYWORDS:
        sub = node.get(kw)
        if isinstance(sub, dict):
            for name, child in sub.items():
                yield child, _key_path("." + kw if _IDENT.match(kw) else f"[{json.dumps(kw)}]", name)
    for kw in _SINGLE_KEYWORDS:
        if kw not in node:
            continue
        sub = node[kw]
        if kw == "items" and isinstance(sub, list):  # draft-04 tuple form
            for i, child in enumerate(sub):
                yield child, f".items[{i}]"
        elif isinstance(sub, dict):
            yield sub, "." + kw
        elif not (isinstance(sub, bool) and kw in _BOOL_OK):
            yield sub, "." + kw
    for kw in _LIST_KEYWORDS:
        sub = node.get(kw)
        if isinstance(sub, list):
            for i, child in enumerate(sub):
                yield child, f".{kw}[{i}]"


def _walk(schema: Any, path: str = "$", obj_depth: int = 0) -> Iterator[tuple[Any, str, int]]:
    """Every schema node with its JSON path and object nesting depth (root object = 1)."""
    if isinstance(schema, dict) and "object" in _types(schema):
        obj_depth += 1
    yield schema, path, obj_depth
    if isinstance(schema, dict):
        for child, rel in _children(schema):
            yield from _walk(child, path + rel, obj_depth)


def _types(node: dict) -> list[str]:
    t = node.get("type")
    if isinstance(t, str):
        return [t]
    if isinstance(t, list):
        return [x for x in t if isinstance(x, str)]
    return []


def _single_type(node: dict) -> str | None:
    t = node.get("type")
    return t if isinstance(t, str) else None


# Keywords that only make sense on one JSON type (JSON Schema validation vocabulary).
_TYPE_SPECIFIC = {
    "properties": {"object"}, "required": {"object"}, "additionalProperties": {"object"},
    "minProperties": {"object"}, "maxProperties": {"object"}, "propertyOrdering": {"object"},
    "items": {"array"}, "minItems": {"array"}, "maxItems": {"array"},
    "minLength": {"string"}, "maxLength": {"string"}, "pattern": {"string"},
    "minimum": {"number", "integer"}, "maximum": {"number", "integer"},
}


def _mismatches(node: dict, keywords: set[str]) -> Iterator[str]:
    t = _single_type(node)
    if t is None:
        return
    t = t.lower()
    for kw in keywords:
        allowed = _TYPE_SPECIFIC.get(kw)
        if kw in node and allowed and t not in allowed:
            yield f"`{kw}` on a `{t}` node"


def _check_required(node: dict) -> Iterator[str]:
    req = node.get("required")
    if req is None:
        return
    if not isinstance(req, list) or not all(isinstance(r, str) for r in req):
        yield "`required` is not an array of strings"
        return
    props = node.get("properties") if isinstance(node.get("properties"), dict) else {}
    seen: set[str] = set()
    for r in req:
        if r in seen:
            yield f"`{r}` listed twice"
        seen.add(r)
        if r not in props:
            yield f"`{r}` is not a defined property"


# --------------------------------------------------------------------------------------
# portable
# --------------------------------------------------------------------------------------

# Kept: what both [OAI-SO] and [GEM-S] list. description/enum/properties/required/items:
# both. minimum/maximum: [OAI-SO] "Supported number properties", [GEM-S] `minimum`,
# `maximum`. minItems/maxItems: [OAI-SO] "Supported array properties", [GEM-S]. pattern:
# [OAI-SO] "Supported string properties", [GEM-S] `pattern`. minLength/maxLength: [GEM-S]
# lists them; [OAI-SO] does not list them as supported but names them only in "For
# fine-tuned models, we additionally do not support ... minLength, maxLength", i.e.
# supported by implication on other models (reported as an open point, kept here).
# additionalProperties: required `false` by this dialect although [GEM-S] has no such
# field -- the issue's choice; see the conflict report.
PORTABLE_KEYWORDS = {
    "type", "description", "enum", "properties", "required", "items",
    "additionalProperties", "minimum", "maximum", "minItems", "maxItems",
    "minLength", "maxLength", "pattern",
}
PORTABLE_TYPES = {"string", "number", "integer", "boolean", "array", "object"}

# Why a keyword is not portable (for the violation's detail).
_NOT_PORTABLE = {
    "anyOf": "union; OpenAI only nested, Gemini's anyOf differs, named non-portable",
    "oneOf": "not in OpenAI's supported list; no such Gemini Schema field",
    "allOf": "OpenAI: not supported; no such Gemini Schema field",
    "not": "OpenAI: not supported; no such Gemini Schema field",
    "if": "OpenAI: not supported; no such Gemini Schema field",
    "then": "OpenAI: not supported; no such Gemini Schema field",
    "else": "OpenAI: not supported; no such Gemini Schema field",
    "dependentRequired": "OpenAI: not supported; no such Gemini Schema field",
    "dependentSchemas": "OpenAI: not supported; no such Gemini Schema field",
    "$ref": "OpenAI supports it; no such Gemini Schema field",
    "$defs": "OpenAI supports it; no such Gemini Schema field",
    "definitions": "OpenAI supports it; no such Gemini Schema field",
    "$schema": "Gemini rejects it (Unknown name \"$schema\"); not in OpenAI's list",
    "format": "the dialects' format value sets differ",
    "const": "OpenAI counts const values; no such Gemini Schema field",
    "default": "Gemini accepts and ignores it; OpenAI does not list it",
    "title": "Gemini lists it; OpenAI does not",
    "nullable": "Gemini only; OpenAI expresses null with type unions",
    "multipleOf": "OpenAI only; no such Gemini Schema field",
    "exclusiveMinimum": "OpenAI only; no such Gemini Schema field",
    "exclusiveMaximum": "OpenAI only; no such Gemini Schema field",
    "patternProperties": "OpenAI fine-tuned: not supported; no such Gemini Schema field",
    "prefixItems": "not in OpenAI's list; no such Gemini Schema field",
    "minProperties": "Gemini only; OpenAI does not list it",
    "maxProperties": "Gemini only; OpenAI does not list it",
    "propertyOrdering": "Gemini only",
    "example": "Gemini only",
}


def _portable(schema: Any) -> list[Violation]:
    out: list[Violation] = []
    v = lambda p, r, d: out.append(Violation(p, r, d))  # noqa: E731
    # Root object: [OAI-SO] "Root objects must not be anyOf and must be an object";
    # [GEM-FD] parametersJsonSchema "must describe an object".
    if not isinstance(schema, dict) or schema.get("type") != "object":
        v("$", "root-not-object", "root `type` must be \"object\"")
    for node, path, _ in _walk(schema):
        if not isinstance(node, dict):
            v(path, "schema-not-object", f"subschema is {json.dumps(node)}")
            continue
        for kw in node:
            if kw not in PORTABLE_KEYWORDS:
                v(_key_path(path, kw), "keyword",
                  f"`{kw}` is not portable ({_NOT_PORTABLE.get(kw, 'not documented by both dialects')})")
        # type: [GEM-S] `type` "Required. Data type." (enum, one value); [OAI-ERR] "schema
        # must have a 'type' key"; [GCLI] hasValidTypes skips tools with typeless nodes.
        if "type" not in node:
            v(path, "type-missing", "node has no `type`")
        elif isinstance(node["type"], list):
            v(path + ".type", "type-array", f"type array {json.dumps(node['type'])}")
        elif node["type"] not in PORTABLE_TYPES:
            v(path + ".type", "type-invalid", f"type {json.dumps(node['type'])}")
        t = _single_type(node)
        types = _types(node)  # object/array checks also apply inside a (non-portable) type array
        if "object" in types:
            # The issue's rule; matches [OAI-SO] "additionalProperties: false must always
            # be set in objects".
            if not isinstance(node.get("properties"), dict):
                v(path, "object-properties", "object without `properties`")
            if node.get("additionalProperties") is not False:
                v(path, "object-additional-properties",
                  "object without `additionalProperties: false`")
        if "array" in types and not isinstance(node.get("items"), dict):
            # Gemini 400 "...items: missing field" [GEM-ERR]; the issue's rule.
            v(path, "array-items", "array without a single-schema `items`")
        if "enum" in node:
            # [GEM-S] `enum[]` is `string` ("Possible values of the element of Type.STRING").
            e = node["enum"]
            if not isinstance(e, list) or not e:
                v(path + ".enum", "enum", "enum must be a non-empty array")
            elif not all(isinstance(x, str) for x in e):
                v(path + ".enum", "enum", "enum values must be strings")
            elif t is not None and t != "string":
                v(path + ".enum", "enum", f"enum on a `{t}` node (Gemini's enum is string-only)")
        for d in _check_required(node):
            v(path + ".required", "required", d)
        for d in _mismatches(node, PORTABLE_KEYWORDS & set(_TYPE_SPECIFIC)):
            v(path, "keyword-type-mismatch", d)
    return out


# --------------------------------------------------------------------------------------
# openai-strict
# --------------------------------------------------------------------------------------

# [OAI-SO] "Supported types": String, Number, Boolean, Integer, Object, Array, Enum, anyOf;
# null via unions ("emulate an optional parameter by using a union type with null").
OPENAI_TYPES = {"string", "number", "boolean", "integer", "object", "array", "null"}
# [OAI-SO] "Supported properties": string pattern, format; number multipleOf, maximum,
# exclusiveMaximum, minimum, exclusiveMinimum; array minItems, maxItems. Objects:
# properties, required, additionalProperties. "Definitions are supported" ($defs, $ref;
# "definitions" in the older examples). const: counted in "Limitations on total string
# size". minLength/maxLength: only implied (named among the fine-tuned-model exclusions).
OPENAI_KEYWORDS = {
    "type", "description", "properties", "required", "additionalProperties", "items",
    "enum", "const", "anyOf", "$ref", "$defs", "definitions",
    "pattern", "format", "multipleOf", "maximum", "exclusiveMaximum", "minimum",
    "exclusiveMinimum", "minItems", "maxItems", "minLength", "maxLength",
}
# [OAI-SO] "Some type-specific keywords are not yet supported": "Composition: allOf, not,
# dependentRequired, dependentSchemas, if, then, else".
OPENAI_UNSUPPORTED = {"allOf", "not", "dependentRequired", "dependentSchemas", "if", "then", "else"}
# [OAI-SO] "format — Predefined formats for strings. Currently supported: ..."
OPENAI_FORMATS = {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
# [OAI-SO] "Objects have limitations on nesting depth and size", "Limitations on total
# string size", "Limitations on enum size".
OPENAI_MAX_PROPERTIES = 5000
OPENAI_MAX_NESTING = 10
OPENAI_MAX_STRING_TOTAL = 120_000
OPENAI_MAX_ENUM_VALUES = 1000
OPENAI_BIG_ENUM = 250
OPENAI_BIG_ENUM_MAX_CHARS = 15_000


def _openai(schema: Any) -> list[Violation]:
    out: list[Violation] = []
    v = lambda p, r, d: out.append(Violation(p, r, d))  # noqa: E731
    # [OAI-SO] "the root level object of a schema must be an object, and not use anyOf".
    if not isinstance(schema, dict) or _types(schema) != ["object"]:
        v("$", "root-not-object", "root `type` must be \"object\"")
    elif "anyOf" in schema:
        v("$.anyOf", "root-not-object", "root must not use anyOf")
    total_props = 0
    string_total = 0
    enum_total = 0
    max_depth = 0
    for node, path, depth in _walk(schema):
        if not isinstance(node, dict):
            v(path, "schema-not-object", f"subschema is {json.dumps(node)}")
            continue
        max_depth = max(max_depth, depth)
        for kw in node:
            if kw in OPENAI_UNSUPPORTED:
                v(_key_path(path, kw), "unsupported-keyword", f"`{kw}` is not supported")
            elif kw not in OPENAI_KEYWORDS:
                # "If you turn on Structured Outputs by supplying strict: true and call the
                # API with an unsupported JSON Schema, you will receive an error" [OAI-SO];
                # e.g. "propertyNames is not permitted" [OAI-ERR].
                v(_key_path(path, kw), "undocumented-keyword",
                  f"`{kw}` is not in the documented supported list")
        # [OAI-ERR] "In context=('properties', 'x'), schema must have a 'type' key."
        if "type" not in node and not any(k in node for k in ("anyOf", "$ref", "oneOf", "allOf", "not")):
            v(path, "type-missing", "node has no `type`")
        bad = [t for t in (node["type"] if isinstance(node.get("type"), list) else [node.get("type")])
               if "type" in node and t not in OPENAI_TYPES]
        if bad:
            v(path + ".type", "type-invalid", f"type {json.dumps(node['type'])}")
        types = _types(node)
        if "object" in types:
            # [OAI-SO] "additionalProperties: false must always be set in objects";
            # [OAI-FC] "additionalProperties must be set to false for each object".
            if node.get("additionalProperties") is not False:
                v(path, "additional-properties", "object without `additionalProperties: false`")
            # [OAI-SO] "All fields must be required"; [OAI-FC] "All fields in properties
            # must be marked as required"; optional = union with null.
            props = node.get("properties") if isinstance(node.get("properties"), dict) else {}
            req = node.get("required") if isinstance(node.get("required"), list) else []
            missing = [p for p in props if p not in req]
            if missing:
                v(path + ".required", "all-required", "not in `required`: " + ", ".join(missing))
        if "format" in node and node["format"] not in OPENAI_FORMATS:
            # [OAI-ERR] "'uri' is not a valid format".
            v(path + ".format", "format", f"format {json.dumps(node['format'])} is not supported")
        # Limits: [OAI-SO] "total string length of all property names, definition names,
        # enum values, and const values".
        if isinstance(node.get("properties"), dict):
            total_props += len(node["properties"])
            string_total += sum(len(k) for k in node["properties"])
        for dk in ("$defs", "definitions"):
            if isinstance(node.get(dk), dict):
                string_total += sum(len(k) for k in node[dk])
        if isinstance(node.get("const"), str):
            string_total += len(node["const"])
        if isinstance(node.get("enum"), list):
            e = node["enum"]
            enum_total += len(e)
            chars = sum(len(x) for x in e if isinstance(x, str))
            string_total += chars
            if len(e) > OPENAI_BIG_ENUM and all(isinstance(x, str) for x in e) \
                    and chars > OPENAI_BIG_ENUM_MAX_CHARS:
                v(path + ".enum", "limit-enum-string-length",
                  f"{len(e)} values totalling {chars} chars (> {OPENAI_BIG_ENUM_MAX_CHARS})")
    # "A schema may have up to 5000 object properties total, with up to 10 levels of
    # nesting." Nesting is counted in object schemas (root object = level 1); the page does
    # not say whether arrays count.
    if total_props > OPENAI_MAX_PROPERTIES:
        v("$", "limit-properties", f"{total_props} object properties (> {OPENAI_MAX_PROPERTIES})")
    if max_depth > OPENAI_MAX_NESTING:
        v("$", "limit-nesting", f"{max_depth} levels of object nesting (> {OPENAI_MAX_NESTING})")
    if string_total > OPENAI_MAX_STRING_TOTAL:
        v("$", "limit-string-length", f"{string_total} chars (> {OPENAI_MAX_STRING_TOTAL})")
    # "A schema may have up to 1000 enum values across all enum properties."
    if enum_total > OPENAI_MAX_ENUM_VALUES:
        v("$", "limit-enum-values", f"{enum_total} enum values (> {OPENAI_MAX_ENUM_VALUES})")
    return out


# --------------------------------------------------------------------------------------
# gemini
# --------------------------------------------------------------------------------------

# [GEM-S] Schema fields: type, format, title, description, nullable, enum[], maxItems,
# minItems, properties, required[], minProperties, maxProperties, minLength, maxLength,
# pattern, example, anyOf[], propertyOrdering[], default, items, minimum, maximum.
# Anything else is rejected by the proto JSON parser ("Unknown name ... Cannot find
# field." [GEM-ERR]); the reference itself says `default` was added "so that developers
# who send schemas with a default field don't get unknown-field errors".
GEMINI_FIELDS = {
    "type", "format", "title", "description", "nullable", "enum", "maxItems", "minItems",
    "properties", "required", "minProperties", "maxProperties", "minLength", "maxLength",
    "pattern", "example", "anyOf", "propertyOrdering", "default", "items", "minimum", "maximum",
}
# [GEM-S] "Type contains the list of OpenAPI data types": STRING NUMBER INTEGER BOOLEAN
# ARRAY OBJECT NULL (TYPE_UNSPECIFIED "should not be used"); lowercase is accepted.
GEMINI_TYPES = {"string", "number", "integer", "boolean", "array", "object", "null"}
# [GEM-FD] Vertex AI FunctionDeclaration.parameters: "Parameter names must start with a
# letter or an underscore and must only contain chars a-z, A-Z, 0-9, or underscores with
# a maximum length of 64."
GEMINI_PARAM_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")


def _gemini(schema: Any) -> list[Violation]:
    out: list[Violation] = []
    v = lambda p, r, d: out.append(Violation(p, r, d))  # noqa: E731
    # [GEM-FD] parameters "Reflects the Open API 3.03 Parameter Object" (type: OBJECT in the
    # example); parametersJsonSchema "must describe an object".
    if not isinstance(schema, dict) or str(schema.get("type", "")).lower() != "object":
        v("$", "root-not-object", "root `type` must be OBJECT")
    elif isinstance(schema.get("properties"), dict):
        for name in schema["properties"]:
            if not GEMINI_PARAM_NAME.match(name):
                v(_key_path("$.properties", name), "parameter-name", f"parameter name {json.dumps(name)}")
    for node, path, _ in _walk(schema):
        if not isinstance(node, dict):
            v(path, "schema-not-object", f"subschema is {json.dumps(node)}")
            continue
        for kw in node:
            if kw not in GEMINI_FIELDS:
                v(_key_path(path, kw), "unknown-field", f"`{kw}` is not a Schema field")
        # [GEM-S] `type` is one `enum (Type)` value ("Required. Data type." in the v1beta
        # reference); a JSON array there is a 400 (the field is not repeated).
        # [GCLI] hasValidTypes(): a node without type and without anyOf/allOf/oneOf makes
        # the CLI skip the whole tool.
        if "type" not in node:
            if "anyOf" not in node:
                v(path, "type-missing", "node has no `type`")
        elif isinstance(node["type"], list):
            v(path + ".type", "type-array",
              f"type array {json.dumps(node['type'])} (use one type + `nullable: true`)")
        elif not isinstance(node["type"], str) or node["type"].lower() not in GEMINI_TYPES:
            v(path + ".type", "type-invalid", f"type {json.dumps(node['type'])}")
        if "nullable" in node and not isinstance(node["nullable"], bool):
            v(path + ".nullable", "nullable", "`nullable` must be a boolean")
        if "enum" in node:
            # [GEM-S] `enum[]` `string`.
            e = node["enum"]
            if not isinstance(e, list) or not e or not all(isinstance(x, str) for x in e):
                v(path + ".enum", "enum", "enum must be a non-empty array of strings")
        # [GEM-ERR] "...required[0]: property is not defined".
        for d in _check_required(node):
            v(path + ".required", "required", d)
        # [GEM-S] "Properties of Type.OBJECT", "Schema of the elements of Type.ARRAY",
        # "Minimum length of the Type.STRING", "Minimum value of the Type.INTEGER and
        # Type.NUMBER"; [GEM-ERR] "...properties: only allowed for OBJECT type".
        for d in _mismatches(node, set(_TYPE_SPECIFIC) - {"additionalProperties"}):
            v(path, "keyword-type-mismatch", d)
    return out


# --------------------------------------------------------------------------------------
# API
# --------------------------------------------------------------------------------------

_CHECKERS = {"portable": _portable, "openai-strict": _openai, "gemini": _gemini}


def check_violations(schema: Any, dialect: str) -> list[Violation]:
    if dialect not in _CHECKERS:
        raise ValueError(f"unknown dialect {dialect!r}; expected one of {', '.join(DIALECTS)}")
    found = _CHECKERS[dialect](schema)
    for x in found:
        assert x.rule in RULES[dialect], (dialect, x.rule)
    return found


def check(schema: Any, dialect: str) -> list[str]:
    """Violations of `dialect` in one input schema, each as "json-path: rule: detail"."""
    return [str(x) for x in check_violations(schema, dialect)]


def load_tools(path: str) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    if isinstance(data, dict):
        data = data.get("tools", data.get("result", {}).get("tools"))
    if not isinstance(data, list):
        raise ValueError("snapshot is not a JSON array of tools (nor a {\"tools\": [...]} object)")
    return data


# --------------------------------------------------------------------------------------
# Self-test
# --------------------------------------------------------------------------------------

def _obj(props: dict, required: list | None = None, closed: bool = True, **extra) -> dict:
    s: dict = {"type": "object", "properties": props}
    s["required"] = list(props) if required is None else required
    if closed:
        s["additionalProperties"] = False
    s.update(extra)
    return s


S = {"type": "string"}

# A schema every rule of its dialect accepts.
GOOD = {
    "portable": _obj({"name": {"type": "string", "minLength": 1, "maxLength": 64, "pattern": "^[a-z]+$"},
                      "n": {"type": "integer", "minimum": 0, "maximum": 9},
                      "tags": {"type": "array", "items": S, "minItems": 0, "maxItems": 3},
                      "mode": {"type": "string", "enum": ["a", "b"]},
                      "opt": {"type": "boolean", "description": "optional"}},
                     required=["name", "n", "tags", "mode"]),
    "openai-strict": _obj({"name": {"type": "string", "format": "email"},
                           "note": {"type": ["string", "null"], "description": "optional via null"},
                           "pick": {"anyOf": [S, {"type": "null"}]},
                           "x": {"type": "number", "exclusiveMinimum": 0, "multipleOf": 0.5},
                           "sub": _obj({"a": {"type": "integer"}})}),
    "gemini": {"type": "object",
               "properties": {"name": {"type": "STRING", "format": "date-time"},
                              "note": {"type": "string", "nullable": True, "default": "x", "title": "t"},
                              "pick": {"anyOf": [S, {"type": "integer"}]},
                              "sub": {"type": "object", "properties": {"a": {"type": "integer"}},
                                      "required": ["a"], "propertyOrdering": ["a"]}},
               "required": ["name"]},
}


def _many_props(n: int, name_len: int = 1) -> dict:
    return {f"p{i:0{max(name_len - 1, 1)}d}": {"type": "string"} for i in range(n)}


def _nested(levels: int) -> dict:
    s: dict = _obj({"leaf": S})
    for _ in range(levels - 1):
        s = _obj({"child": s})
    return s


# (dialect, expected rule, bad schema): each bad schema breaks that rule.
BAD: list[tuple[str, str, Any]] = [
    ("portable", "root-not-object", {"type": "string"}),
    ("portable", "schema-not-object", _obj({"a": True})),
    ("portable", "type-missing", _obj({"a": {"description": "no type"}})),
    ("portable", "type-array", _obj({"a": {"type": ["string", "null"]}})),
    ("portable", "type-invalid", _obj({"a": {"type": "null"}})),
    ("portable", "keyword", _obj({"a": {"type": "string", "format": "uuid"}})),
    ("portable", "keyword", _obj({"a": {"anyOf": [S, {"type": "integer"}]}})),
    ("portable", "keyword", _obj({"a": {"type": "string", "const": "x"}})),
    ("portable", "keyword", _obj({"a": {"$ref": "#/$defs/x"}}, **{"$defs": {"x": S}})),
    ("portable", "object-properties", {"type": "object", "additionalProperties": False}),
    ("portable", "object-additional-properties", _obj({"a": S}, closed=False)),
    ("portable", "object-additional-properties",
     _obj({"m": {"type": ["object", "null"], "additionalProperties": True}})),
    ("portable", "array-items", _obj({"a": {"type": "array"}})),
    ("portable", "enum", _obj({"a": {"type": "string", "enum": []}})),
    ("portable", "enum", _obj({"a": {"type": "integer", "enum": [1, 2]}})),
    ("portable", "required", _obj({"a": S}, required=["a", "b"])),
    ("portable", "keyword-type-mismatch", _obj({"a": {"type": "integer", "maxLength": 3}})),
    ("openai-strict", "root-not-object", {"anyOf": [_obj({"a": S}), _obj({"b": S})]}),
    ("openai-strict", "root-not-object", {"type": "object", "properties": {}, "additionalProperties": False,
                                          "required": [], "anyOf": [_obj({})]}),
    ("openai-strict", "schema-not-object", _obj({"a": {"type": "array", "items": True}})),
    ("openai-strict", "type-missing", _obj({"a": {"type": "array", "items": {}}})),
    ("openai-strict", "type-invalid", _obj({"a": {"type": "text"}})),
    ("openai-strict", "unsupported-keyword", _obj({"a": {"allOf": [S]}})),
    ("openai-strict", "undocumented-keyword", _obj({"a": {"type": "string", "default": "x"}})),
    ("openai-strict", "undocumented-keyword", _obj({"a": {"oneOf": [S]}})),
    ("openai-strict", "additional-properties", _obj({"a": S}, closed=False)),
    ("openai-strict", "additional-properties", _obj({"a": _obj({"b": S}, closed=False)})),
    ("openai-strict", "all-required", _obj({"a": S, "b": S}, required=["a"])),
    ("openai-strict", "format", _obj({"a": {"type": "string", "format": "uri"}})),
    ("openai-strict", "limit-properties", _obj(_many_props(OPENAI_MAX_PROPERTIES + 1))),
    ("openai-strict", "limit-nesting", _nested(OPENAI_MAX_NESTING + 1)),
    ("openai-strict", "limit-string-length", _obj(_many_props(130, name_len=1000))),
    ("openai-strict", "limit-enum-values",
     _obj({"a": {"type": "string", "enum": [f"v{i}" for i in range(OPENAI_MAX_ENUM_VALUES + 1)]}})),
    ("openai-strict", "limit-enum-string-length",
     _obj({"a": {"type": "string", "enum": [f"{i:070d}" for i in range(OPENAI_BIG_ENUM + 1)]}})),
    ("gemini", "root-not-object", {"type": "array", "items": S}),
    ("gemini", "schema-not-object", {"type": "object", "properties": {"a": True}}),
    ("gemini", "unknown-field", _obj({"a": S})),  # additionalProperties: false
    ("gemini", "unknown-field", {"$schema": "https://json-schema.org/draft/2020-12/schema",
                                 "type": "object", "properties": {"a": S}}),
    ("gemini", "unknown-field", {"type": "object", "properties": {"a": {"type": "string", "const": "x"}}}),
    ("gemini", "unknown-field", {"type": "object", "properties": {"a": {"oneOf": [S]}}}),
    ("gemini", "type-missing", {"type": "object", "properties": {"a": {"description": "?"}}}),
    ("gemini", "type-array", {"type": "object", "properties": {"a": {"type": ["string", "null"]}}}),
    ("gemini", "type-invalid", {"type": "object", "properties": {"a": {"type": "text"}}}),
    ("gemini", "nullable", {"type": "object", "properties": {"a": {"type": "string", "nullable": "yes"}}}),
    ("gemini", "enum", {"type": "object", "properties": {"a": {"type": "integer", "enum": [1, 2]}}}),
    ("gemini", "required", {"type": "object", "properties": {"a": S}, "required": ["b"]}),
    ("gemini", "keyword-type-mismatch",
     {"type": "object", "properties": {"a": {"type": "string", "properties": {"b": S}}}}),
    ("gemini", "parameter-name", {"type": "object", "properties": {"a-b": S}}),
]


def self_test() -> int:
    failures: list[str] = []
    covered: dict[str, set[str]] = {d: set() for d in DIALECTS}
    for d in DIALECTS:
        got = check(GOOD[d], d)
        if got:
            failures.append(f"good {d} schema flagged: {got}")
    for d, rule, schema in BAD:
        got = check_violations(schema, d)
        if not any(x.rule == rule for x in got):
            failures.append(f"{d}: {rule} not caught in {json.dumps(schema)[:200]}: got {[str(x) for x in got]}")
        covered[d] |= {x.rule for x in got if x.rule == rule}
    for d in DIALECTS:
        missing = set(RULES[d]) - covered[d]
        if missing:
            failures.append(f"{d}: rules without a bad case: {sorted(missing)}")
    # The documented conflict must show: OpenAI strict's required
    # `additionalProperties: false` is an unknown field to Gemini, and Gemini's type-array
    # ban meets OpenAI's documented optional-as-null union.
    g = check_violations(GOOD["openai-strict"], "gemini")
    if not any(x.rule == "unknown-field" and x.path.endswith(".additionalProperties") for x in g):
        failures.append("conflict not seen: additionalProperties should be unknown to gemini")
    if not any(x.rule == "type-array" for x in g):
        failures.append("conflict not seen: [T, null] should be a gemini type-array")
    o = check_violations(GOOD["gemini"], "openai-strict")
    if not any(x.rule == "all-required" for x in o) or not any(x.rule == "additional-properties" for x in o):
        failures.append("conflict not seen: the gemini schema should break openai-strict")
    if not check_violations(GOOD["portable"], "openai-strict"):
        failures.append("a portable schema with an optional property should break openai-strict")
    if not check_violations(GOOD["portable"], "gemini"):
        failures.append("a portable schema (additionalProperties: false) should break gemini")
    for f in failures:
        print("FAIL", f, file=sys.stderr)
    n = len(BAD) + len(DIALECTS) + 5
    print(f"self-test: {n - len(failures)}/{n} passed"
          + ("" if failures else f"; {sum(len(r) for r in RULES.values())} rules covered"), file=sys.stderr)
    return 1 if failures else 0


# --------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("snapshot", nargs="?", help="tools/list snapshot (JSON)")
    ap.add_argument("--dialect", default="portable", choices=DIALECTS + ("all",))
    ap.add_argument("--json", action="store_true", help="print violations as a JSON array")
    ap.add_argument("--self-test", action="store_true", help="check the checker")
    a = ap.parse_args(argv)
    if a.self_test:
        return self_test()
    if not a.snapshot:
        ap.error("SNAPSHOT is required unless --self-test")
    try:
        tools = load_tools(a.snapshot)
    except (OSError, ValueError) as e:
        print(f"dialect_check: {a.snapshot}: {e}", file=sys.stderr)
        return 2
    dialects = DIALECTS if a.dialect == "all" else (a.dialect,)
    rows = []
    for d in dialects:
        for tool in tools:
            name = tool.get("name", "?") if isinstance(tool, dict) else "?"
            schema = tool.get("inputSchema") if isinstance(tool, dict) else None
            for x in check_violations(schema, d):
                rows.append({"dialect": d, "tool": name, "path": x.path, "rule": x.rule, "detail": x.detail})
    if a.json:
        json.dump(rows, sys.stdout, indent=1)
        print()
    else:
        for r in rows:
            print(f"{r['dialect']}: {r['tool']}: {r['path']}: {r['rule']}: {r['detail']}")
    for d in dialects:
        mine = [r for r in rows if r["dialect"] == d]
        per_rule: dict[str, int] = {}
        for r in mine:
            per_rule[r["rule"]] = per_rule.get(r["rule"], 0) + 1
        tools_hit = len({r["tool"] for r in mine})
        detail = ", ".join(f"{k} {n}" for k, n in sorted(per_rule.items(), key=lambda kv: (-kv[1], kv[0])))
        print(f"{d}: {len(mine)} violation(s) in {tools_hit}/{len(tools)} tool(s)"
              + (f" [{detail}]" if detail else ""), file=sys.stderr)
    return 1 if rows else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:  # e.g. piped into `head`
        sys.stderr.close()
        sys.exit(1)
