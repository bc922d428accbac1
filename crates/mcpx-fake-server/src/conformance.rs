//! The fixtures of the official MCP conformance suite's *server* scenarios
//! (`@modelcontextprotocol/conformance`), served next to the fake's own
//! tools, resources and prompts so the suite can run against the fake
//! (directly or through mcpx).
//!
//! - tools `test_*` (text, image, audio, embedded resource, mixed content,
//!   logging, error, progress, sampling, elicitation, SEP-1034 defaults,
//!   SEP-1330 enums, SEP-1699 reconnection) and `json_schema_2020_12_tool`;
//! - resources `test://static-text`, `test://static-binary`,
//!   `test://watched-resource`, template `test://template/{id}/data`;
//! - prompts `test_simple_prompt`, `test_prompt_with_arguments`,
//!   `test_prompt_with_embedded_resource`, `test_prompt_with_image`;
//! - `completion/complete` suggestions for prompt and template arguments.

use std::thread;
use std::time::Duration;

use serde_json::{Value, json};

use crate::protocol;
use crate::server::{Reply, Server};
use crate::tools::ask_client_raw;

/// Every conformance tool but [`SCHEMA_TOOL`] starts with this.
pub const TOOL_PREFIX: &str = "test_";

/// The SEP-1613 tool whose input schema uses JSON Schema 2020-12 keywords.
pub const SCHEMA_TOOL: &str = "json_schema_2020_12_tool";

/// A 1×1 red PNG.
const PNG_BASE64: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";

/// An empty 8 kHz mono 16-bit WAV file (header only).
const WAV_BASE64: &str = "UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YQAAAAA=";

/// Pause between the logging / progress notifications of a tool.
const STEP: Duration = Duration::from_millis(50);

/// How long `test_reconnection` waits after closing its stream before replying.
const RECONNECTION_PAUSE: Duration = Duration::from_millis(100);

/// An input schema with no properties.
fn no_args() -> Value {
    json!({ "type": "object", "properties": {}, "required": [] })
}

/// An input schema with one required string property.
fn one_string(name: &str, description: &str) -> Value {
    json!({
        "type": "object",
        "properties": { name: { "type": "string", "description": description } },
        "required": [name],
    })
}

/// The conformance tools, as `tools/list` entries (without `x-fake`).
pub fn tools() -> Vec<Value> {
    let specs = [
        ("test_simple_text", "Returns a simple text response.", no_args()),
        ("test_image_content", "Returns a 1x1 PNG image.", no_args()),
        ("test_audio_content", "Returns a tiny WAV file.", no_args()),
        ("test_embedded_resource", "Returns an embedded text resource.", no_args()),
        ("test_multiple_content_types", "Returns text, image and resource content.", no_args()),
        ("test_tool_with_logging", "Sends three info log notifications while running.", no_args()),
        ("test_error_handling", "Always returns a tool error.", no_args()),
        ("test_tool_with_progress", "Sends progress 0, 50 and 100 of 100 while running.", no_args()),
        (
            "test_sampling",
            "Asks the client to sample an LLM with `prompt`.",
            one_string("prompt", "The prompt to send to the LLM"),
        ),
        (
            "test_elicitation",
            "Asks the client for a username and email with `message`.",
            one_string("message", "The message to show the user"),
        ),
        ("test_elicitation_sep1034_defaults", "Elicits a form whose fields all have defaults.", no_args()),
        ("test_elicitation_sep1330_enums", "Elicits a form with the five enum variants.", no_args()),
        (
            "test_reconnection",
            "Over HTTP, primes and closes its SSE stream, then replies (resumed with Last-Event-ID).",
            no_args(),
        ),
    ];
    let mut tools: Vec<Value> = specs
        .into_iter()
        .map(|(name, description, schema)| json!({ "name": name, "description": description, "inputSchema": schema }))
        .collect();
    tools.push(json!({
        "name": SCHEMA_TOOL,
        "description": "Tool with JSON Schema 2020-12 features",
        "inputSchema": {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "$defs": {
                "address": {
                    "type": "object",
                    "properties": { "street": { "type": "string" }, "city": { "type": "string" } },
                },
            },
            "properties": { "name": { "type": "string" }, "address": { "$ref": "#/$defs/address" } },
            "additionalProperties": false,
        },
    }));
    tools
}

/// Runs conformance tool `name`; `None` if there is no such tool.
pub fn call_tool(server: &Server, name: &str, params: &Value) -> Option<Reply> {
    let arg = |key: &str| params.pointer(&format!("/arguments/{key}")).and_then(Value::as_str).unwrap_or_default();
    let result = match name {
        "test_simple_text" => text("This is a simple text response for testing."),
        "test_image_content" => json!({ "content": [image()] }),
        "test_audio_content" => {
            json!({ "content": [{ "type": "audio", "data": WAV_BASE64, "mimeType": "audio/wav" }] })
        }
        "test_embedded_resource" => json!({ "content": [{
            "type": "resource",
            "resource": {
                "uri": "test://embedded-resource",
                "mimeType": "text/plain",
                "text": "This is an embedded resource content.",
            },
        }] }),
        "test_multiple_content_types" => json!({ "content": [
            { "type": "text", "text": "Multiple content types test:" },
            image(),
            {
                "type": "resource",
                "resource": {
                    "uri": "test://mixed-content-resource",
                    "mimeType": "application/json",
                    "text": r#"{"test":"data","value":123}"#,
                },
            },
        ] }),
        "test_tool_with_logging" => {
            let messages = ["Tool execution started", "Tool processing data", "Tool execution completed"];
            for (i, message) in messages.into_iter().enumerate() {
                if i > 0 {
                    thread::sleep(STEP);
                }
                server.out.send(&protocol::notification(
                    "notifications/message",
                    json!({ "level": "info", "logger": "test_tool_with_logging", "data": message }),
                ));
            }
            text("Tool with logging executed successfully")
        }
        "test_error_handling" => json!({
            "content": [{ "type": "text", "text": "This tool intentionally returns an error for testing" }],
            "isError": true,
        }),
        "test_tool_with_progress" => {
            let token = params.pointer("/_meta/progressToken");
            for (i, progress) in [0, 50, 100].into_iter().enumerate() {
                if i > 0 {
                    thread::sleep(STEP);
                }
                if let Some(token) = token {
                    server.out.send(&protocol::notification(
                        "notifications/progress",
                        json!({ "progressToken": token, "progress": progress, "total": 100 }),
                    ));
                }
            }
            text("Tool with progress executed successfully")
        }
        "test_sampling" => {
            let request = json!({
                "messages": [{ "role": "user", "content": { "type": "text", "text": arg("prompt") } }],
                "maxTokens": 100,
            });
            match ask_client_raw(server, "sampling/createMessage", request) {
                Ok(answer) => {
                    let said = match answer.pointer("/content/text").and_then(Value::as_str) {
                        Some(said) => said.to_owned(),
                        None => protocol::to_line(&answer),
                    };
                    text(format!("LLM response: {said}"))
                }
                Err(message) => error(format!("Sampling failed: {message}")),
            }
        }
        "test_elicitation" => {
            let schema = json!({
                "type": "object",
                "properties": {
                    "username": { "type": "string", "description": "User's response" },
                    "email": { "type": "string", "description": "User's email address" },
                },
                "required": ["username", "email"],
            });
            elicit(server, arg("message"), schema, "User response")
        }
        "test_elicitation_sep1034_defaults" => elicit(
            server,
            "Test client default value handling - please accept with defaults",
            json!({
                "type": "object",
                "properties": {
                    "name": { "type": "string", "description": "User name", "default": "John Doe" },
                    "age": { "type": "integer", "description": "User age", "default": 30 },
                    "score": { "type": "number", "description": "User score", "default": 95.5 },
                    "status": {
                        "type": "string",
                        "description": "User status",
                        "enum": ["active", "inactive", "pending"],
                        "default": "active",
                    },
                    "verified": { "type": "boolean", "description": "Verification status", "default": true },
                },
                "required": [],
            }),
            "Elicitation completed",
        ),
        "test_elicitation_sep1330_enums" => elicit(
            server,
            "Test enum schema variants (SEP-1330)",
            json!({
                "type": "object",
                "properties": {
                    "untitledSingle": {
                        "type": "string",
                        "description": "Untitled single-select",
                        "enum": ["option1", "option2", "option3"],
                    },
                    "titledSingle": {
                        "type": "string",
                        "description": "Titled single-select",
                        "oneOf": [
                            { "const": "value1", "title": "First Option" },
                            { "const": "value2", "title": "Second Option" },
                            { "const": "value3", "title": "Third Option" },
                        ],
                    },
                    "legacyEnum": {
                        "type": "string",
                        "description": "Legacy titled enum",
                        "enum": ["opt1", "opt2", "opt3"],
                        "enumNames": ["Option One", "Option Two", "Option Three"],
                    },
                    "untitledMulti": {
                        "type": "array",
                        "description": "Untitled multi-select",
                        "items": { "type": "string", "enum": ["option1", "option2", "option3"] },
                    },
                    "titledMulti": {
                        "type": "array",
                        "description": "Titled multi-select",
                        "items": {
                            "anyOf": [
                                { "const": "value1", "title": "First Choice" },
                                { "const": "value2", "title": "Second Choice" },
                                { "const": "value3", "title": "Third Choice" },
                            ],
                        },
                    },
                },
                "required": [],
            }),
            "Elicitation completed",
        ),
        "test_reconnection" => {
            // SEP-1699: the client must resume the closed stream to get this answer.
            server.out.prime_and_close();
            thread::sleep(RECONNECTION_PAUSE);
            text("Reconnection test completed.")
        }
        SCHEMA_TOOL => text(format!("Received: {}", protocol::to_line(params.get("arguments").unwrap_or(&json!({}))))),
        _ => return None,
    };
    Some(Reply::Result(result))
}

/// Sends `elicitation/create` and describes the client's answer, prefixed
/// with `label`.
fn elicit(server: &Server, message: &str, schema: Value, label: &str) -> Value {
    match ask_client_raw(server, "elicitation/create", json!({ "message": message, "requestedSchema": schema })) {
        Ok(answer) => {
            let action = answer.get("action").and_then(Value::as_str).unwrap_or("unknown");
            let content = protocol::to_line(answer.get("content").unwrap_or(&json!({})));
            text(format!("{label}: action={action}, content={content}"))
        }
        Err(message) => error(format!("Elicitation failed: {message}")),
    }
}

/// A tool result with one text block.
fn text(text: impl Into<String>) -> Value {
    json!({ "content": [{ "type": "text", "text": text.into() }] })
}

/// A tool error result with one text block.
fn error(text: impl Into<String>) -> Value {
    json!({ "content": [{ "type": "text", "text": text.into() }], "isError": true })
}

/// The test PNG as an image content block.
fn image() -> Value {
    json!({ "type": "image", "data": PNG_BASE64, "mimeType": "image/png" })
}

/// The conformance resources, as `resources/list` entries.
pub fn resources() -> Vec<Value> {
    vec![
        json!({
            "uri": "test://static-text",
            "name": "static-text",
            "description": "A static text resource for testing",
            "mimeType": "text/plain",
        }),
        json!({
            "uri": "test://static-binary",
            "name": "static-binary",
            "description": "A static binary resource (1x1 PNG) for testing",
            "mimeType": "image/png",
        }),
        json!({
            "uri": "test://watched-resource",
            "name": "watched-resource",
            "description": "A resource clients can subscribe to",
            "mimeType": "text/plain",
        }),
    ]
}

/// The conformance resource templates, as `resources/templates/list` entries.
pub fn resource_templates() -> Vec<Value> {
    vec![json!({
        "uriTemplate": "test://template/{id}/data",
        "name": "template-data",
        "description": "Data for the given id",
        "mimeType": "application/json",
    })]
}

/// The `contents` entry for conformance resource `uri`, if there is one.
pub fn read_resource(uri: &str) -> Option<Value> {
    let content = match uri {
        "test://static-text" => json!({
            "uri": uri,
            "mimeType": "text/plain",
            "text": "This is the content of the static text resource.",
        }),
        "test://static-binary" => json!({ "uri": uri, "mimeType": "image/png", "blob": PNG_BASE64 }),
        "test://watched-resource" => json!({
            "uri": uri,
            "mimeType": "text/plain",
            "text": "This is a watched resource.",
        }),
        _ => {
            let id = uri.strip_prefix("test://template/")?.strip_suffix("/data")?;
            if id.is_empty() || id.contains('/') {
                return None;
            }
            let data = json!({ "id": id, "templateTest": true, "data": format!("Data for ID: {id}") });
            json!({ "uri": uri, "mimeType": "application/json", "text": protocol::to_line(&data) })
        }
    };
    Some(content)
}

/// The conformance prompts, as `prompts/list` entries.
pub fn prompts() -> Vec<Value> {
    vec![
        json!({ "name": "test_simple_prompt", "description": "A simple prompt without arguments" }),
        json!({
            "name": "test_prompt_with_arguments",
            "description": "A prompt with two required arguments",
            "arguments": [
                { "name": "arg1", "description": "First test argument", "required": true },
                { "name": "arg2", "description": "Second test argument", "required": true },
            ],
        }),
        json!({
            "name": "test_prompt_with_embedded_resource",
            "description": "A prompt embedding a resource",
            "arguments": [{ "name": "resourceUri", "description": "URI of the resource to embed", "required": true }],
        }),
        json!({ "name": "test_prompt_with_image", "description": "A prompt with an image" }),
    ]
}

/// `prompts/get` of conformance prompt `name`; `None` if there is no such prompt.
pub fn get_prompt(name: &str, params: &Value) -> Option<Value> {
    let arg = |key: &str| params.pointer(&format!("/arguments/{key}")).and_then(Value::as_str).unwrap_or_default();
    let user_text = |text: String| json!({ "role": "user", "content": { "type": "text", "text": text } });
    let messages = match name {
        "test_simple_prompt" => vec![user_text("This is a simple prompt for testing.".to_owned())],
        "test_prompt_with_arguments" => {
            vec![user_text(format!("Prompt with arguments: arg1='{}', arg2='{}'", arg("arg1"), arg("arg2")))]
        }
        "test_prompt_with_embedded_resource" => vec![
            json!({
                "role": "user",
                "content": {
                    "type": "resource",
                    "resource": {
                        "uri": arg("resourceUri"),
                        "mimeType": "text/plain",
                        "text": "Embedded resource content for testing.",
                    },
                },
            }),
            user_text("Please process the embedded resource above.".to_owned()),
        ],
        "test_prompt_with_image" => {
            vec![json!({ "role": "user", "content": image() }), user_text("Please analyze the image above.".to_owned())]
        }
        _ => return None,
    };
    Some(json!({ "messages": messages }))
}

/// `completion/complete`: candidates for the argument named in `params`,
/// filtered by the prefix typed so far (case-insensitive).
pub fn complete(params: &Value) -> Value {
    let kind = params.pointer("/ref/type").and_then(Value::as_str).unwrap_or_default();
    let target = match kind {
        "ref/prompt" => params.pointer("/ref/name"),
        _ => params.pointer("/ref/uri"),
    };
    let target = target.and_then(Value::as_str).unwrap_or_default();
    let argument = params.pointer("/argument/name").and_then(Value::as_str).unwrap_or_default();
    let typed = params.pointer("/argument/value").and_then(Value::as_str).unwrap_or_default().to_lowercase();
    let candidates: &[&str] = match (target, argument) {
        ("test_prompt_with_arguments", "arg1" | "arg2") => &["paris", "park", "party", "test", "testValue1"],
        ("test_prompt_with_embedded_resource", "resourceUri") => &["test://static-text", "test://static-binary"],
        ("greet", "name") => &["world", "Alice", "Bob"],
        ("test://template/{id}/data" | "fake://item/{id}", "id") => &["1", "2", "3", "123"],
        _ => &[],
    };
    let values: Vec<&str> =
        candidates.iter().copied().filter(|value| value.to_lowercase().starts_with(&typed)).collect();
    json!({ "completion": { "values": values, "total": values.len(), "hasMore": false } })
}
