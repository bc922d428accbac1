//! Unit tests of the declaration file: names, ordering, the result type.

use serde_json::json;

use super::*;

fn server(name: &str, tools: Vec<Value>) -> ServerTools {
    ServerTools { server: name.to_owned(), tools }
}

#[test]
fn names_are_identifiers_mapped_back() {
    let d = declarations(&[
        server(
            "my-server",
            vec![json!({"name": "get-time", "inputSchema": {"type": "object"}}), json!({"name": "get_time"})],
        ),
        server("fetch", vec![json!({"name": "fetch", "inputSchema": {"type": "object"}})]),
    ]);
    let names: Vec<(&str, &str, &str, &str)> = d
        .names
        .iter()
        .map(|n| (n.server.as_str(), n.tool.as_str(), n.namespace.as_str(), n.function.as_str()))
        .collect();
    assert_eq!(
        names,
        [
            ("fetch", "fetch", "fetch_", "fetch"),
            ("my-server", "get-time", "my_server", "get_time"),
            ("my-server", "get_time", "my_server", "get_time_2")
        ]
    );
    assert!(d.text.contains("declare namespace fetch_ {"));
    assert!(d.text.contains("@tool get-time"));
    assert!(d.text.contains("@server my-server"));
}

#[test]
fn output_schema_types_the_result() {
    let d = declarations(&[server(
        "s",
        vec![
            json!({"name": "a", "inputSchema": {"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]},
                   "outputSchema": {"type": "object", "properties": {"y": {"type": "number"}}, "required": ["y"]}}),
            json!({"name": "b", "inputSchema": {"type": "object"}}),
        ],
    )]);
    assert!(d.text.contains("export function a(args: a.Input): Promise<a.Output>;"), "{}", d.text);
    assert!(d.text.contains("export type Output = {\n      y: number;\n    };"), "{}", d.text);
    assert!(d.text.contains("export function b(args?: b.Input): Promise<b.Output>;"), "{}", d.text);
    assert!(d.text.contains("export type Output = CallToolResult;"));
    assert_eq!(d.names.iter().map(|n| n.structured).collect::<Vec<_>>(), [true, false]);
    assert_eq!(d.text.matches("interface CallToolResult").count(), 1);
}

#[test]
fn output_is_sorted_and_deterministic() {
    let a = declarations(&[server("b", vec![json!({"name": "z"}), json!({"name": "a"})]), server("a", vec![])]);
    let b = declarations(&[server("a", vec![]), server("b", vec![json!({"name": "a"}), json!({"name": "z"})])]);
    assert_eq!(a, b);
    assert!(a.text.find("declare namespace a {").unwrap() < a.text.find("declare namespace b {").unwrap());
}

#[test]
fn input_and_output_defs_stay_apart() {
    let defs =
        json!({"$defs": {"Item": {"type": "string"}}, "type": "object", "properties": {"i": {"$ref": "#/$defs/Item"}}});
    let d = declarations(&[server("s", vec![json!({"name": "t", "inputSchema": defs, "outputSchema": defs})])]);
    assert!(d.text.contains("export type Item = string;"), "{}", d.text);
    assert!(d.text.contains("export type Item_ = string;"), "{}", d.text);
    assert!(d.text.contains("i?: Item_;"), "{}", d.text);
}

#[test]
fn control_and_hidden_characters_are_escaped() {
    let hostile = "evil\u{1b}[31m\r\u{9b}\u{202e}é\u{7}";
    let d = declarations(&[server(
        "s",
        vec![
            json!({"name": hostile, "description": hostile, "inputSchema": {"properties": {hostile: {"const": hostile}}}}),
        ],
    )]);
    for c in ['\u{1b}', '\r', '\u{9b}', '\u{202e}', '\u{7}'] {
        assert!(!d.text.contains(c), "{:?} in {}", c, d.text);
    }
    assert!(d.text.contains("@tool evil\\u001b[31m\\u000d\\u009b\\u202eé\\u0007"), "{}", d.text);
    assert_eq!(d.names[0].tool, hostile);
    assert_eq!(d.names[0].function, "evil__31m_____");
}
