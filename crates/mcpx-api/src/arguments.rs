//! Tool arguments as people type them, typed and checked by the daemon (`POST
//! /v1/call` with `key=value` pairs, [`Pair`]) and by the CLI (`mcpx prompt`): each
//! value typed by the tool's `inputSchema` (JSON Schema 2020-12: `type`, local
//! `$ref`s, `anyOf`/`oneOf`, `enum`, `required`, `additionalProperties`), and the
//! checks made before a call, with the tool's usage when one fails.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::{ApiError, ErrorKind};

/// One `key=value` argument as typed on the command line, its `@FILE` already read
/// by the CLI (`value` is the file's text): `{"key":"n","value":"5"}`, or
/// `{"key":"n","value":"5","json":true}` for `n:=5` (the value is JSON as it is).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pair {
    /// The argument's name.
    pub key: String,
    /// The value's text.
    pub value: String,
    /// Given as `key:=JSON`: the value is read as JSON, not typed by the schema.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub json: bool,
}

/// A tool's arguments as given.
#[derive(Debug)]
pub enum Given {
    /// No arguments: the tool gets `{}`.
    None,
    /// One JSON object, as it is.
    Json(Box<RawValue>),
    /// `key=value` pairs, in order.
    Pairs(Vec<Pair>),
}

/// The arguments object for `tool` (its `tools/list` entry, `None` when no schema
/// is known), checked against its `inputSchema`: required arguments present, each
/// given one of its types (and `enum` values), no unknown one in the `key=value`
/// form or under `additionalProperties: false`. `shown` is the command and the tool
/// as the user named them (`call everything.echo`), for the usage.
///
/// Errors (`usage`): a value that is not of its type or not JSON, or a failed check; each failed check's message ends with the tool's
/// usage ([`usage`]).
pub fn build(input: Given, tool: Option<&Value>, shown: &str) -> Result<Option<Box<RawValue>>, ApiError> {
    let schema = tool.and_then(|t| t.get("inputSchema"));
    let properties = schema.and_then(|s| s.get("properties")).and_then(Value::as_object);
    let pairs = matches!(input, Given::Pairs(_));
    let mut problems = Vec::new();
    // The keys whose value could not be read.
    let mut failed = std::collections::BTreeSet::new();
    let arguments: Map<String, Value> = match &input {
        Given::None => Map::new(),
        Given::Json(raw) => match serde_json::from_str(raw.get()) {
            Ok(map) => map,
            Err(_) => return Ok(Some(raw.clone())),
        },
        Given::Pairs(pairs) => {
            let mut map = Map::new();
            let mut seen = std::collections::BTreeSet::new();
            for Pair { key, value, json } in pairs {
                let (key, json) = (key.as_str(), *json);
                if !seen.insert(key) {
                    problems.push(format!("`{key}` is given twice; give it once"));
                    continue;
                }
                let prop = properties.and_then(|p| p.get(key)).or_else(|| extra(schema));
                let prop = prop.map(|p| flatten(p, schema.unwrap_or(&Value::Null)));
                match value_of(key, json, value, prop.as_ref()) {
                    Ok(v) => {
                        map.insert(key.to_owned(), v);
                    }
                    Err(problem) => {
                        failed.insert(key.to_owned());
                        problems.push(problem);
                    }
                }
            }
            map
        }
    };
    if let Some(schema) = schema {
        // A value that could not be read is not also "missing".
        let checked = check(&arguments, schema, pairs);
        problems.extend(
            checked.into_iter().filter(|p| !failed.iter().any(|k| p == &format!("missing required argument `{k}`"))),
        );
    }
    if !problems.is_empty() {
        let usage = tool.map(|t| format!("\n\n{}", usage(shown, t))).unwrap_or_default();
        return Err(ApiError::new(ErrorKind::Usage, format!("{}{usage}", problems.join("\n"))));
    }
    match input {
        Given::None => Ok(None),
        Given::Json(raw) => Ok(Some(raw)),
        Given::Pairs(_) => serde_json::value::to_raw_value(&arguments)
            .map(Some)
            .map_err(|e| ApiError::new(ErrorKind::Usage, format!("cannot encode the arguments: {e}"))),
    }
}

/// The tool's usage, several lines: `usage: mcpx <shown> key=TYPE [key=TYPE]` (`shown`
/// is the command and the tool as the user named them: `call everything.echo`)
/// (the required parameters first),
/// the tool's description's first line, then one line per parameter with its name,
/// type, whether it is required, and its description (with its default and allowed
/// values). `tool` is the tool's `tools/list` entry.
pub fn usage(shown: &str, tool: &Value) -> String {
    let schema = &tool["inputSchema"];
    let required = required(schema);
    let mut params: Vec<(&String, &Value)> =
        schema["properties"].as_object().map(|p| p.iter().collect()).unwrap_or_default();
    // The required ones first, in the order `required` lists them; then by name.
    params.sort_by_key(|(name, _)| required.iter().position(|r| r == name).unwrap_or(usize::MAX));
    let mut line = format!("usage: mcpx {shown}");
    let params: Vec<(&String, Value)> = params.into_iter().map(|(n, p)| (n, flatten(p, schema))).collect();
    for (name, prop) in &params {
        let word = format!("{name}={}", type_label(prop).to_uppercase());
        if required.contains(&name.as_str()) {
            line.push_str(&format!(" {word}"));
        } else {
            line.push_str(&format!(" [{word}]"));
        }
    }
    let mut out = vec![line];
    if let Some(first) = tool["description"].as_str().and_then(|d| d.lines().next()).filter(|d| !d.trim().is_empty()) {
        out.push(first.trim().to_owned());
    }
    if params.is_empty() {
        out.push("(no arguments)".to_owned());
        return out.join("\n");
    }
    out.push(String::new());
    out.push("arguments:".to_owned());
    let width = params.iter().map(|(n, _)| n.chars().count()).max().unwrap_or(0);
    let types: Vec<String> = params.iter().map(|(_, p)| type_label(p)).collect();
    let type_width = types.iter().map(|t| t.chars().count()).max().unwrap_or(0);
    for ((name, prop), ty) in params.iter().zip(&types) {
        let need = if required.contains(&name.as_str()) { "required" } else { "optional" };
        let mut about =
            prop["description"].as_str().and_then(|d| d.lines().next()).unwrap_or_default().trim().to_owned();
        if let Some(values) = prop["enum"].as_array() {
            let values: Vec<String> = values.iter().map(short).collect();
            about = format!("{about} (one of {})", values.join(", ")).trim_start().to_owned();
        }
        if let Some(default) = prop.get("default") {
            about = format!("{about} (default {})", short(default)).trim_start().to_owned();
        }
        out.push(format!("  {name:width$}  {ty:type_width$}  {need}  {about}").trim_end().to_owned());
    }
    out.push(String::new());
    out.push(
        "values: key=value (typed by the schema), key:=JSON, key=@FILE (a file's text; \\@ for a literal @)".to_owned(),
    );
    out.join("\n")
}

/// One `key=value`'s value: JSON for `:=`, else typed by `prop`'s `type`: a string
/// stays a string; a number, boolean, null, array or object is read as JSON when one
/// of those is allowed.
fn value_of(key: &str, json: bool, text: &str, prop: Option<&Value>) -> Result<Value, String> {
    let text = text.to_owned();
    let types = prop.map(types).unwrap_or_default();
    if json {
        let value = serde_json::from_str(&text).map_err(|e| format!("`{key}:=`: the value is not JSON: {e}"))?;
        return whole(key, value, &types);
    }
    let parsed = serde_json::from_str::<Value>(text.trim()).ok().filter(|v| !v.is_string());
    match parsed {
        Some(v) if types.iter().any(|t| *t != "string" && has_type(&v, t)) => whole(key, v, &types),
        _ if types.is_empty() || types.contains(&"string") => Ok(Value::String(text)),
        _ => Err(format!(
            "`{key}` takes {}; `{}` is not one (numbers like 3 or 2.5, true or false, null, or JSON)",
            types.join(" or "),
            short(&Value::String(text))
        )),
    }
}

/// A number for a property that takes integers but not other numbers, as a JSON integer
/// (`1e3` is sent as `1000`); one too large to hold exactly is refused, never rounded.
fn whole(key: &str, value: Value, types: &[&str]) -> Result<Value, String> {
    let Some(f) = value.as_f64().filter(|_| value.is_f64() && types.contains(&"integer") && !types.contains(&"number"))
    else {
        return Ok(value);
    };
    // 2^53: past it an f64 no longer holds every whole number.
    const EXACT: f64 = 9_007_199_254_740_992.0;
    if f.fract() == 0.0 && f.abs() <= EXACT {
        // Exact below 2^53, so the cast loses nothing; `-0` becomes 0.
        #[allow(clippy::cast_possible_truncation)]
        return Ok(Value::from(f as i64));
    }
    Err(format!(
        "`{key}` takes an integer; `{value}` is not a whole number that JSON numbers hold exactly (up to 2^53)"
    ))
}

/// The schema of arguments no property names (`additionalProperties` as a schema).
fn extra(schema: Option<&Value>) -> Option<&Value> {
    schema.and_then(|s| s.get("additionalProperties")).filter(|a| a.is_object())
}

/// `prop` with what decides a `key=value`'s type brought to its top, for the checks and
/// the usage: a local `$ref` (`#/$defs/X`, `#/definitions/X`) followed, `anyOf`/`oneOf`
/// branches' types gathered, and a `type` read from an `enum`'s values when it has none.
fn flatten(prop: &Value, root: &Value) -> Value {
    let mut prop = prop.clone();
    for _ in 0..8 {
        let Some(target) = prop.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix('#')) else { break };
        let Some(found) = root.pointer(target).cloned() else { break };
        let mut merged = found;
        if let (Value::Object(m), Value::Object(own)) = (&mut merged, &prop) {
            for (k, v) in own.iter().filter(|(k, _)| *k != "$ref") {
                m.entry(k.clone()).or_insert_with(|| v.clone());
            }
        }
        prop = merged;
    }
    if prop.get("type").is_none() {
        let mut found: Vec<Value> = Vec::new();
        for key in ["anyOf", "oneOf"] {
            for branch in prop.get(key).and_then(Value::as_array).into_iter().flatten() {
                let branch = flatten(branch, root);
                for t in types(&branch) {
                    if !found.iter().any(|f| f == t) {
                        found.push(t.into());
                    }
                }
            }
        }
        if found.is_empty() {
            for v in prop.get("enum").and_then(Value::as_array).into_iter().flatten() {
                let t = match v {
                    Value::Number(n) if n.is_f64() => "number",
                    Value::Number(_) => "integer",
                    Value::String(_) => "string",
                    Value::Bool(_) => "boolean",
                    Value::Null => "null",
                    Value::Array(_) => "array",
                    Value::Object(_) => "object",
                };
                if !found.iter().any(|f| f == t) {
                    found.push(t.into());
                }
            }
        }
        if !found.is_empty() {
            if let Value::Object(m) = &mut prop {
                m.insert("type".into(), Value::Array(found));
            }
        }
    }
    prop
}

/// The problems of `arguments` against `schema` (an `inputSchema`), one line each.
fn check(arguments: &Map<String, Value>, schema: &Value, pairs: bool) -> Vec<String> {
    let properties = schema["properties"].as_object();
    let mut problems = Vec::new();
    for name in required(schema) {
        if !arguments.contains_key(name) {
            problems.push(format!("missing required argument `{name}`"));
        }
    }
    let open = match schema.get("additionalProperties") {
        Some(Value::Bool(false)) => false,
        Some(_) => true,
        // A schema that names no property says nothing of its arguments: take them.
        None => !pairs || properties.is_none_or(|p| p.is_empty()),
    };
    for (key, value) in arguments {
        let Some(prop) =
            properties.and_then(|p| p.get(key)).or_else(|| extra(Some(schema))).map(|p| flatten(p, schema))
        else {
            if !open {
                let known = properties.map(|p| p.keys().map(String::as_str).collect::<Vec<_>>()).unwrap_or_default();
                let dym = crate::suggest::did_you_mean(key, known);
                problems.push(format!("unknown argument `{key}`;{dym}").trim_end_matches(';').to_owned());
            }
            continue;
        };
        let prop = &prop;
        let types = types(prop);
        if !types.is_empty() && !types.iter().any(|t| has_type(value, t)) {
            problems.push(format!("`{key}` takes {}; got `{}`", types.join(" or "), short_json(value)));
        } else if let Some(values) = prop["enum"].as_array().filter(|v| !v.contains(value)) {
            let values: Vec<String> = values.iter().map(short).collect();
            problems.push(format!("`{key}` must be one of {}; got `{}`", values.join(", "), short_json(value)));
        }
    }
    problems
}

/// The names in `schema`'s `required` list.
fn required(schema: &Value) -> Vec<&str> {
    schema["required"].as_array().map(|r| r.iter().filter_map(Value::as_str).collect()).unwrap_or_default()
}

/// A property's JSON Schema `type`s (a string or a list); empty when it has none.
fn types(prop: &Value) -> Vec<&str> {
    match &prop["type"] {
        Value::String(t) => vec![t.as_str()],
        Value::Array(list) => list.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

/// How the usage names a property's type: its `type`s joined by `|`, else `value`.
fn type_label(prop: &Value) -> String {
    let types = types(prop);
    if types.is_empty() { "value".to_owned() } else { types.join("|") }
}

/// Whether `value` is of JSON Schema type `ty` (an unknown type accepts anything);
/// `integer` takes whole numbers, `5.0` included (JSON Schema 2020-12, 6.1.1).
fn has_type(value: &Value, ty: &str) -> bool {
    match ty {
        "string" => value.is_string(),
        "integer" => value.is_i64() || value.is_u64() || value.as_f64().is_some_and(|f| f.fract() == 0.0),
        "number" => value.is_number(),
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        "array" => value.is_array(),
        "object" => value.is_object(),
        _ => true,
    }
}

/// A value for a message: strings bare, anything else as JSON, cut at 40 characters.
fn short(value: &Value) -> String {
    let text = value.as_str().map_or_else(|| value.to_string(), str::to_owned);
    if text.chars().count() > 40 { format!("{}…", text.chars().take(39).collect::<String>()) } else { text }
}

/// A value as JSON for a message (`"5"` for a string), cut at 40 characters.
fn short_json(value: &Value) -> String {
    short(&Value::String(value.to_string()))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn tool() -> Value {
        json!({ "name": "t", "inputSchema": { "type": "object", "required": ["n"], "properties": {
            "n": { "type": "integer", "description": "How many" },
            "s": { "type": "string" },
            "b": { "type": "boolean" },
            "l": { "type": "array" },
            "o": { "type": ["string", "null"] },
        } } })
    }

    fn built(words: &[&str]) -> Result<Value, String> {
        built_for(&tool(), words)
    }

    /// `words` as the CLI sends them: one JSON object, or `key=value` pairs.
    fn built_for(tool: &Value, words: &[&str]) -> Result<Value, String> {
        let input = match words {
            [one] if one.starts_with('{') => Given::Json(serde_json::from_str(one).unwrap()),
            _ => Given::Pairs(
                words
                    .iter()
                    .map(|w| {
                        let (key, value) = w.split_once('=').unwrap();
                        let (key, json) = key.strip_suffix(':').map_or((key, false), |k| (k, true));
                        Pair { key: key.to_owned(), value: value.to_owned(), json }
                    })
                    .collect(),
            ),
        };
        let raw = build(input, Some(tool), "call x.t").map_err(|e| e.message)?;
        Ok(raw.map(|r| serde_json::from_str(r.get()).unwrap()).unwrap_or(Value::Null))
    }

    #[test]
    fn integers_go_out_as_integers_and_are_never_rounded() {
        assert_eq!(built(&["n=1e3"]).unwrap(), json!({ "n": 1000 }));
        assert_eq!(built(&["n=-0"]).unwrap(), json!({ "n": 0 }));
        assert_eq!(built(&["n:=2.0"]).unwrap(), json!({ "n": 2 }));
        let huge = built(&["n=99999999999999999999999"]).unwrap_err();
        assert!(huge.starts_with("`n` takes an integer; `1e+23` is not a whole number"), "{huge}");
    }

    #[test]
    fn refs_unions_enums_and_open_schemas_type_their_values() {
        let tool = json!({ "name": "t", "inputSchema": { "type": "object",
            "$defs": { "Count": { "type": "integer" } },
            "properties": {
                "r": { "$ref": "#/$defs/Count" },
                "u": { "anyOf": [{ "type": "integer" }, { "type": "null" }] },
                "e": { "enum": [1, 2, 3] },
                "ob": { "$ref": "#/$defs/Place" },
            } } });
        assert_eq!(built_for(&tool, &["r=5", "u=3", "e=2"]).unwrap(), json!({ "r": 5, "u": 3, "e": 2 }));
        assert_eq!(built_for(&tool, &["u=null"]).unwrap(), json!({ "u": null }));
        assert!(built_for(&tool, &["u=x"]).unwrap_err().starts_with("`u` takes integer or null"));
        let open = json!({ "name": "t", "inputSchema": { "type": "object" } });
        assert_eq!(built_for(&open, &["a=1"]).unwrap(), json!({ "a": "1" }));
        let typed_extra =
            json!({ "name": "t", "inputSchema": { "type": "object", "additionalProperties": { "type": "integer" } } });
        assert_eq!(built_for(&typed_extra, &["q=5"]).unwrap(), json!({ "q": 5 }));
    }

    #[test]
    fn a_key_given_twice_or_of_the_wrong_type_is_said_once() {
        assert!(built(&["n=1", "n=2"]).unwrap_err().starts_with("`n` is given twice; give it once"));
        let unreadable = built(&["n=three"]).unwrap_err();
        assert!(!unreadable.contains("missing required argument"), "{unreadable}");
    }

    #[test]
    fn values_are_typed_by_the_schema() {
        let got = built(&["n=3", "s=3", "b=true", "l=[1,2]", "o=null"]).unwrap();
        assert_eq!(got, json!({ "n": 3, "s": "3", "b": true, "l": [1, 2], "o": null }));
        assert_eq!(built(&["n:=4", "s:=\"x\"", "o=hi"]).unwrap(), json!({ "n": 4, "s": "x", "o": "hi" }));
    }

    #[test]
    fn mistakes_are_caught_with_the_usage() {
        let missing = built(&["s=x"]).unwrap_err();
        assert!(missing.starts_with("missing required argument `n`\n\nusage: mcpx call x.t n=INTEGER"), "{missing}");
        assert!(built(&["n=three"]).unwrap_err().starts_with("`n` takes integer; `three` is not one"));
        assert!(built(&["n=1", "ss=x"]).unwrap_err().starts_with("unknown argument `ss`; did you mean `s`?"));
        assert!(built(&[r#"{"n":"1"}"#]).unwrap_err().starts_with("`n` takes integer; got `\"1\"`"));
        assert_eq!(built(&[r#"{"n":1,"extra":2}"#]).unwrap(), json!({ "n": 1, "extra": 2 }));
    }
}
