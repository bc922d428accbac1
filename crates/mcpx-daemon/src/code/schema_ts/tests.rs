//! Unit tests of the JSON Schema to TypeScript translation, one construct at a time.

use serde_json::{Value, json};

use super::*;

/// The root type of `schema`, named `Root`, at no indentation.
fn ts(schema: Value) -> String {
    translate(&schema, "Root", &[], 0).root
}

#[test]
fn simple_types() {
    assert_eq!(ts(json!({"type": "string"})), "string");
    assert_eq!(ts(json!({"type": "integer"})), "number");
    assert_eq!(ts(json!({"type": "number"})), "number");
    assert_eq!(ts(json!({"type": "boolean"})), "boolean");
    assert_eq!(ts(json!({"type": "null"})), "null");
    assert_eq!(ts(json!({})), "unknown");
    assert_eq!(ts(json!(true)), "unknown");
    assert_eq!(ts(json!(false)), "never");
}

#[test]
fn nullable_types() {
    assert_eq!(ts(json!({"type": ["string", "null"]})), "string | null");
    assert_eq!(ts(json!({"type": "integer", "nullable": true})), "number | null");
    assert_eq!(ts(json!({"type": ["integer", "number"]})), "number");
}

#[test]
fn enum_and_const() {
    assert_eq!(ts(json!({"enum": ["a", "b", 3, null]})), r#""a" | "b" | 3 | null"#);
    assert_eq!(ts(json!({"const": "x"})), r#""x""#);
    assert_eq!(ts(json!({"const": {"a": [1, true]}})), "{ a: [1, true] }");
    assert_eq!(ts(json!({"enum": ["a"], "nullable": true})), r#""a" | null"#);
    assert!(ts(json!({"enum": []})).starts_with("unknown /*"));
}

#[test]
fn objects_required_and_optional() {
    let t = ts(json!({
        "type": "object",
        "properties": {"a": {"type": "string"}, "b-c": {"type": "number", "description": "B."}},
        "required": ["a"]
    }));
    assert_eq!(t, "{\n  a: string;\n  /** B. */\n  \"b-c\"?: number;\n}");
}

#[test]
fn additional_properties() {
    assert_eq!(ts(json!({"type": "object"})), "{\n  [key: string]: unknown;\n}");
    assert_eq!(ts(json!({"type": "object", "additionalProperties": false})), "{}");
    assert_eq!(
        ts(json!({"type": "object", "additionalProperties": {"type": "number"}})),
        "{\n  [key: string]: number;\n}"
    );
    // Properties join the index signature's type, which each must fit.
    assert_eq!(
        ts(
            json!({"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "number"}})
        ),
        "{\n  a?: string;\n  [key: string]: number | string | undefined;\n}"
    );
    // Absent with properties: closed, so a misspelt key is an error in the script.
    assert_eq!(ts(json!({"properties": {"a": {"type": "string"}}})), "{\n  a?: string;\n}");
    assert_eq!(
        ts(json!({"type": "object", "patternProperties": {"^x": {"type": "boolean"}}})),
        "{\n  [key: string]: boolean;\n}"
    );
}

#[test]
fn arrays_and_tuples() {
    assert_eq!(ts(json!({"type": "array", "items": {"type": "string"}})), "string[]");
    assert_eq!(ts(json!({"type": "array"})), "unknown[]");
    assert_eq!(ts(json!({"type": "array", "items": {"type": ["string", "null"]}})), "(string | null)[]");
    // 2020-12: `prefixItems`, the rest from `items`; elements past `minItems` optional.
    assert_eq!(
        ts(
            json!({"type": "array", "prefixItems": [{"type": "string"}, {"type": "number"}], "minItems": 1, "items": false})
        ),
        "[string, number?]"
    );
    assert_eq!(
        ts(json!({"type": "array", "prefixItems": [{"type": "string"}], "minItems": 1, "items": {"type": "boolean"}})),
        "[string, ...boolean[]]"
    );
    assert_eq!(ts(json!({"prefixItems": [{"type": "string"}], "minItems": 1})), "[string, ...unknown[]]");
    // Draft-07: `items` as a list, the rest from `additionalItems`.
    assert_eq!(
        ts(
            json!({"type": "array", "items": [{"type": "string"}, {"type": "number"}], "minItems": 2, "additionalItems": false})
        ),
        "[string, number]"
    );
}

#[test]
fn combinations() {
    assert_eq!(ts(json!({"anyOf": [{"type": "string"}, {"type": "number"}]})), "string | number");
    assert_eq!(ts(json!({"oneOf": [{"const": 1}, {"const": 2}]})), "1 | 2");
    assert_eq!(
        ts(json!({"allOf": [{"properties": {"a": {"type": "string"}}}, {"properties": {"b": {"type": "string"}}}]})),
        "{\n  a?: string;\n} & {\n  b?: string;\n}"
    );
    // A union inside an intersection keeps its parentheses.
    assert_eq!(
        ts(json!({"allOf": [{"type": "string"}], "anyOf": [{"const": "a"}, {"const": "b"}]})),
        "string & (\"a\" | \"b\")"
    );
    // An `anyOf` of `required` lists only narrows presence: the object's type stands.
    assert_eq!(
        ts(json!({"type": "object", "properties": {"a": {"type": "string"}}, "anyOf": [{"required": ["a"]}]})),
        "{\n  a?: string;\n}"
    );
}

#[test]
fn refs_to_defs_are_named_types() {
    let t = translate(
        &json!({
            "$defs": {"Node": {"type": "object", "description": "A node.", "properties": {"next": {"$ref": "#/$defs/Node"}}}},
            "$ref": "#/$defs/Node"
        }),
        "Root",
        &[],
        0,
    );
    assert_eq!(t.root, "Node");
    assert_eq!(
        t.defs,
        vec![NamedType { name: "Node".into(), ty: "{\n  next?: Node;\n}".into(), doc: Some("A node.".into()) }]
    );
}

#[test]
fn draft07_definitions_and_root_refs() {
    let t = translate(
        &json!({
            "definitions": {"a b": {"type": "string"}, "string": {"type": "number"}, "Root": {"type": "boolean"}},
            "properties": {"x": {"$ref": "#/definitions/a%20b"}, "y": {"$ref": "#/definitions/string"}, "self": {"$ref": "#"}}
        }),
        "Root",
        &[],
        0,
    );
    assert_eq!(t.root, "{\n  self?: Root;\n  x?: a_b;\n  y?: string_;\n}");
    let names: Vec<&str> = t.defs.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["Root_", "a_b", "string_"]);
}

#[test]
fn inline_refs_and_their_cycles_end() {
    // A pointer that is not a `$defs` entry is followed inline...
    assert_eq!(
        ts(json!({"properties": {"a": {"type": "string"}, "b": {"$ref": "#/properties/a"}}})),
        "{\n  a?: string;\n  b?: string;\n}"
    );
    // ...and a cycle through such pointers ends as `unknown`.
    let t = ts(json!({"properties": {"a": {"$ref": "#/properties/b"}, "b": {"$ref": "#/properties/a"}}}));
    assert!(t.contains("refers to itself"), "{t}");
}

#[test]
fn unsupported_degrades_to_commented_unknown() {
    assert_eq!(
        ts(json!({"$ref": "https://example.com/s.json"})),
        "unknown /* $ref \"https://example.com/s.json\" is not in this schema */"
    );
    assert_eq!(ts(json!({"$ref": "#/nowhere"})), "unknown /* $ref \"#/nowhere\" leads nowhere */");
    assert_eq!(ts(json!({"not": {"type": "string"}})), "unknown /* `not` is not expressible */");
    assert_eq!(ts(json!({"type": "strange"})), "unknown /* unknown type \"strange\" */");
    assert_eq!(
        ts(json!({"if": {"type": "string"}, "then": {}})),
        "unknown /* `if`/`then`/`else` is not expressible */"
    );
    // A comment cannot be closed from inside the schema.
    assert!(!ts(json!({"$ref": "x*/y"})).contains("x*/"));
}

#[test]
fn deep_nesting_is_cut() {
    let mut schema = json!({"type": "string"});
    for _ in 0..200 {
        schema = json!({"type": "array", "items": schema});
    }
    assert!(ts(schema).contains("nested too deeply"));
}

#[test]
fn jsdoc_from_annotations() {
    let doc = doc_text(&json!({
        "title": "T", "description": "D */ x", "default": 5, "examples": ["a", "b"], "deprecated": true
    }));
    assert_eq!(doc.as_deref(), Some("T\n\nD */ x\n\n@default 5\n@example \"a\"\n@example \"b\"\n@deprecated"));
    let mut out = String::new();
    write_doc(&mut out, doc.as_deref().unwrap_or_default(), 1);
    assert!(out.contains("D *\\/ x"), "{out}");
    assert!(out.starts_with("  /**\n  * T\n") || out.starts_with("  /**\n   * T\n"), "{out}");
    assert_eq!(doc_text(&json!({"type": "string"})), None);
}

#[test]
fn parentheses_only_around_top_level_operators() {
    assert!(has_top_level_operator("a | b"));
    assert!(!has_top_level_operator("{\n  a: b | c;\n}"));
    assert!(!has_top_level_operator("\"a|b\""));
    assert!(!has_top_level_operator("unknown /* a | b */"));
    assert_eq!(top_level_parts("a | { b: c | d } | \"|\"", '|'), ["a", "{ b: c | d }", "\"|\""]);
    // Unions are flattened, so a type met twice is written once.
    assert_eq!(ts(json!({"anyOf": [{"type": ["string", "null"]}, {"type": "string"}]})), "string | null");
    assert_eq!(
        ts(json!({"type": "array", "items": {"type": "object", "properties": {"a": {"type": ["string", "null"]}}}})),
        "{\n  a?: string | null;\n}[]"
    );
}
