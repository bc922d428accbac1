//! The schema fixture (`FAKE_SCHEMAS=1`): tools whose schemas use every JSON Schema construct
//! that `mcpx types` translates (draft-07 and 2020-12), with names that are not identifiers,
//! and an `outputSchema` with the `structuredContent` that matches it, for the code-mode tests.

use serde_json::{Value, json};

use crate::server::Reply;

/// A tool with a dotted, dashed name, draft-07 `definitions` (one recursive), and an
/// `outputSchema` (2020-12 `$defs`, `prefixItems`); calling it returns `structuredContent`.
pub const ITEM: &str = "get-item.v2";

/// A tool named by a reserved word, with `allOf`, `anyOf`, `nullable` and typed
/// `additionalProperties`; calling it returns the arguments as text.
pub const DELETE: &str = "delete";

/// A tool whose schema has what TypeScript cannot say (`not`, a remote `$ref`, `if`/`then`)
/// beside `patternProperties`; calling it returns `odd` as text.
pub const ODD: &str = "odd schema";

/// The fixture's `tools/list` entries.
pub fn tools() -> Vec<Value> {
    vec![
        json!({
            "name": ITEM,
            "title": "Get an item",
            "description": "Looks an item up by id; returns it with a tree of its parts.",
            "inputSchema": {
                "$schema": "http://json-schema.org/draft-07/schema#",
                "type": "object",
                "definitions": {
                    "node": {
                        "type": "object",
                        "description": "A part, with its own parts.",
                        "properties": {
                            "label": { "type": "string" },
                            "children": { "type": "array", "items": { "$ref": "#/definitions/node" } },
                        },
                        "required": ["label"],
                    },
                    "kind": { "enum": ["book", "tool", "other"], "default": "other" },
                },
                "properties": {
                    "id": { "type": "string", "title": "Item id", "examples": ["i-1", "i-2"] },
                    "kind": { "$ref": "#/definitions/kind" },
                    "version": { "const": 2 },
                    "note": { "type": ["string", "null"], "description": "A note kept with the item." },
                    "limit": { "type": "integer", "minimum": 1, "default": 10 },
                    "filter": { "oneOf": [{ "type": "string" }, { "type": "array", "items": { "type": "string" } }] },
                    "tree": { "$ref": "#/definitions/node" },
                    "coords": { "type": "array", "items": [{ "type": "number" }, { "type": "number" }], "minItems": 2, "additionalItems": false },
                },
                "required": ["id"],
            },
            "outputSchema": {
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "$defs": { "item": { "type": "object", "properties": { "id": { "type": "string" }, "kind": { "type": "string" } }, "required": ["id", "kind"] } },
                "properties": {
                    "item": { "$ref": "#/$defs/item" },
                    "pair": { "type": "array", "prefixItems": [{ "type": "string" }, { "type": "integer" }], "minItems": 2, "items": false },
                },
                "required": ["item", "pair"],
            },
            "x-fake": true,
        }),
        json!({
            "name": DELETE,
            "description": "Deletes nothing: returns its arguments as text.",
            "inputSchema": {
                "type": "object",
                "allOf": [
                    { "properties": { "path": { "type": "string" } }, "required": ["path"] },
                    { "properties": { "force": { "type": "boolean", "nullable": true } } },
                ],
                "anyOf": [{ "properties": { "reason": { "type": "string" } } }, { "properties": { "ticket": { "type": "integer" } } }],
                "properties": { "path": { "type": "string" }, "tags": { "type": "object", "additionalProperties": { "type": "string" } } },
                "additionalProperties": { "type": ["number", "string"] },
            },
            "x-fake": true,
        }),
        json!({
            "name": ODD,
            "description": "Has schema parts TypeScript cannot express. */ Not even this.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "not_a_string": { "not": { "type": "string" } },
                    "remote": { "$ref": "https://example.com/schemas/thing.json" },
                    "conditional": { "if": { "type": "string" }, "then": { "minLength": 1 } },
                    "by_pattern": { "type": "object", "patternProperties": { "^x-": { "type": "integer" } } },
                    "anything": true,
                },
            },
            "x-fake": true,
        }),
    ]
}

/// Answers a call of a fixture tool, or `None` when `name` is none of them.
pub fn call(name: &str, params: &Value) -> Option<Reply> {
    let arguments = params.get("arguments").cloned().unwrap_or(json!({}));
    let result = match name {
        ITEM => {
            let id = arguments.get("id").and_then(Value::as_str).unwrap_or("none");
            let kind = arguments.get("kind").and_then(Value::as_str).unwrap_or("other");
            let structured = json!({ "item": { "id": id, "kind": kind }, "pair": [id, 2] });
            json!({ "content": [{ "type": "text", "text": structured.to_string() }], "structuredContent": structured })
        }
        DELETE => json!({ "content": [{ "type": "text", "text": arguments.to_string() }] }),
        ODD => json!({ "content": [{ "type": "text", "text": "odd" }] }),
        _ => return None,
    };
    Some(Reply::Result(result))
}
