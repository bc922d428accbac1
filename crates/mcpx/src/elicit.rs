//! A server's `elicitation/create` during `mcpx call`, answered at the terminal (MCP
//! 2025-11-25, "Elicitation", form mode): the requested schema becomes a form on
//! stderr, and the person accepts it filled in, declines or cancels. A URL-mode
//! request is declined with a message (mcpx declares form mode only).

use dialoguer::console::Term;
use dialoguer::theme::SimpleTheme;
use dialoguer::{Confirm, Input, MultiSelect, Select};
use serde_json::{Map, Value, json};

use mcpx_platform::sanitize;

/// One field of the form: a property of `requestedSchema`.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    /// The property's name: the key of the answer's `content`.
    pub name: String,
    /// What the prompt says: the `title`, else the name, with the `description`.
    pub label: String,
    /// Listed in the schema's `required`.
    pub required: bool,
    /// The kind of value and its constraints.
    pub kind: Kind,
    /// The `default`, offered first.
    pub default: Option<Value>,
}

/// The kinds of value a form may ask for ("Elicitation", "Supported schema types").
#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    /// A string, with `minLength`/`maxLength` (characters) and `format` (`email`,
    /// `uri`, `date`, `date-time`).
    Text { min: Option<u64>, max: Option<u64>, format: Option<String> },
    /// An integer (`integer`) or any number (`number`) within `minimum`/`maximum`.
    Number { integer: bool, min: Option<f64>, max: Option<f64> },
    /// A boolean.
    Bool,
    /// One of these values (`enum`, with `enumNames` titles, or `oneOf` of
    /// `{const, title}`), each with what to show.
    Choice(Vec<(Value, String)>),
    /// Several of these values (an `array` whose `items` are such a choice), with
    /// `minItems`/`maxItems`.
    Choices { options: Vec<(Value, String)>, min: Option<u64>, max: Option<u64> },
}

/// How the person answered (the result's `action`, with `content` when accepted).
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Submitted the form.
    Accept(Map<String, Value>),
    /// Explicitly said no.
    Decline,
    /// Dismissed it without choosing (Esc, or a broken terminal).
    Cancel,
}

impl Action {
    /// The `ElicitResult`: `{"action":"accept","content":{...}}`, `{"action":"decline"}`
    /// or `{"action":"cancel"}`.
    pub fn to_result(&self) -> Value {
        match self {
            Action::Accept(content) => json!({ "action": "accept", "content": content }),
            Action::Decline => json!({ "action": "decline" }),
            Action::Cancel => json!({ "action": "cancel" }),
        }
    }
}

/// The fields of `requestedSchema`, in the order of their names (see [`written_order`]
/// for the server's order).
///
/// Errors: a property of a kind a form cannot hold (an object, say), named.
pub fn fields(schema: &Value) -> Result<Vec<Field>, String> {
    let required: Vec<&str> =
        schema["required"].as_array().map(|r| r.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
    let Some(properties) = schema["properties"].as_object() else { return Ok(Vec::new()) };
    let mut fields = Vec::new();
    for (name, p) in properties {
        let title = p["title"].as_str().unwrap_or(name);
        let label = match p["description"].as_str() {
            Some(d) => format!("{title} ({d})"),
            None => title.to_owned(),
        };
        fields.push(Field {
            name: name.clone(),
            label: sanitize::text(&label).into_owned(),
            required: required.contains(&name.as_str()),
            kind: kind(p).ok_or_else(|| format!("the form's field `{name}` is of a kind mcpx cannot ask for"))?,
            default: p.get("default").cloned(),
        });
    }
    Ok(fields)
}

/// The kind of property `p`, or `None` for one a form cannot hold.
fn kind(p: &Value) -> Option<Kind> {
    if let Some(options) = options(p) {
        return Some(Kind::Choice(options));
    }
    let bound = |k: &str| p[k].as_f64();
    match p["type"].as_str()? {
        "string" => Some(Kind::Text {
            min: p["minLength"].as_u64(),
            max: p["maxLength"].as_u64(),
            format: p["format"].as_str().map(str::to_owned),
        }),
        "integer" => Some(Kind::Number { integer: true, min: bound("minimum"), max: bound("maximum") }),
        "number" => Some(Kind::Number { integer: false, min: bound("minimum"), max: bound("maximum") }),
        "boolean" => Some(Kind::Bool),
        "array" => Some(Kind::Choices {
            options: options(&p["items"])?,
            min: p["minItems"].as_u64(),
            max: p["maxItems"].as_u64(),
        }),
        _ => None,
    }
}

/// The values of an enumeration and their titles: `enum` (with the legacy
/// `enumNames`), or `oneOf`/`anyOf` of `{"const", "title"}`.
fn options(p: &Value) -> Option<Vec<(Value, String)>> {
    let show = |v: &Value| v.as_str().map(str::to_owned).unwrap_or_else(|| v.to_string());
    if let Some(values) = p["enum"].as_array() {
        let names = p["enumNames"].as_array();
        return Some(
            values
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    let title =
                        names.and_then(|n| n.get(i)).and_then(Value::as_str).map_or_else(|| show(v), str::to_owned);
                    (v.clone(), sanitize::text(&title).into_owned())
                })
                .collect(),
        );
    }
    let branches = p["oneOf"].as_array().or_else(|| p["anyOf"].as_array())?;
    branches
        .iter()
        .map(|b| {
            let value = b.get("const")?.clone();
            let title = b["title"].as_str().map_or_else(|| show(&value), str::to_owned);
            Some((value, sanitize::text(&title).into_owned()))
        })
        .collect()
}

/// Reads typed text as a value of `kind` (a text or number field), or says what is
/// wrong with it, in words for the person typing.
pub fn check(kind: &Kind, typed: &str) -> Result<Value, String> {
    match kind {
        Kind::Text { min, max, format } => {
            let n = typed.chars().count() as u64;
            if let Some(min) = min.filter(|m| n < *m) {
                return Err(format!("at least {min} characters"));
            }
            if let Some(max) = max.filter(|m| n > *m) {
                return Err(format!("at most {max} characters"));
            }
            check_format(format.as_deref(), typed)?;
            Ok(Value::String(typed.to_owned()))
        }
        Kind::Number { integer, min, max } => {
            let value: f64 = typed.trim().parse().map_err(|_| "a number, like 42 or 0.5".to_owned())?;
            if *integer && value.fract() != 0.0 {
                return Err("a whole number".into());
            }
            if let Some(min) = min.filter(|m| value < *m) {
                return Err(format!("at least {min}"));
            }
            if let Some(max) = max.filter(|m| value > *m) {
                return Err(format!("at most {max}"));
            }
            Ok(if *integer { json!(value as i64) } else { json!(value) })
        }
        Kind::Bool | Kind::Choice(_) | Kind::Choices { .. } => Err("chosen from a list, not typed".into()),
    }
}

/// Checks the `format` of a string field, loosely: enough to catch a slip of the hand.
fn check_format(format: Option<&str>, typed: &str) -> Result<(), String> {
    let ok = match format {
        Some("email") => typed.split_once('@').is_some_and(|(a, b)| !a.is_empty() && b.contains('.')),
        Some("uri") => typed.split_once(':').is_some_and(|(scheme, _)| {
            !scheme.is_empty() && scheme.chars().all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
        }),
        Some("date") => is_date(typed),
        Some("date-time") => typed.get(..10).is_some_and(is_date) && typed[10..].starts_with(['T', 't']),
        _ => true,
    };
    let format = sanitize::text(format.unwrap_or("value"));
    if ok { Ok(()) } else { Err(format!("a valid {format}")) }
}

/// `YYYY-MM-DD` (RFC 3339 full-date), by its shape.
fn is_date(text: &str) -> bool {
    let b = text.as_bytes();
    b.len() == 10
        && b[4] == b'-'
        && b[7] == b'-'
        && b.iter().enumerate().all(|(i, c)| i == 4 || i == 7 || c.is_ascii_digit())
}

/// Answers an `elicitation/create` request (the whole JSON-RPC request, as text) of
/// the call of `tool` (`fake.echo`, named so the person knows who asks) at the
/// terminal (stderr, keys from stdin), and returns the JSON-RPC response to send back,
/// with the request's id. Blocks while the person types.
pub fn answer(request: &str, tool: &str) -> String {
    let order = written_order(request);
    let request: Value = serde_json::from_str(request).unwrap_or_default();
    let params = &request["params"];
    let action = ask(params, &order, tool);
    json!({ "jsonrpc": "2.0", "id": request["id"], "result": action.to_result() }).to_string()
}

/// The property names of the request's `requestedSchema`, in the order the server
/// wrote them (the form asks in that order; a JSON object has none of its own).
pub fn written_order(request: &str) -> Vec<String> {
    use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
    #[derive(serde::Deserialize)]
    struct Request {
        params: Params,
    }
    #[derive(serde::Deserialize)]
    struct Params {
        #[serde(rename = "requestedSchema")]
        schema: Schema,
    }
    #[derive(serde::Deserialize)]
    struct Schema {
        properties: Keys,
    }
    struct Keys(Vec<String>);
    impl<'de> serde::Deserialize<'de> for Keys {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Keys, D::Error> {
            struct InOrder;
            impl<'de> Visitor<'de> for InOrder {
                type Value = Keys;
                fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    f.write_str("an object")
                }
                fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Keys, A::Error> {
                    let mut keys = Vec::new();
                    while let Some((key, IgnoredAny)) = map.next_entry::<String, IgnoredAny>()? {
                        keys.push(key);
                    }
                    Ok(Keys(keys))
                }
            }
            d.deserialize_map(InOrder)
        }
    }
    serde_json::from_str::<Request>(request).map(|r| r.params.schema.properties.0).unwrap_or_default()
}

/// Shows the form of `params` and takes the person's answer.
fn ask(params: &Value, order: &[String], tool: &str) -> Action {
    let term = Term::stderr();
    let say = |text: &str| {
        let _ = term.write_line(&sanitize::text(text));
    };
    let message = params["message"].as_str().unwrap_or("The server asks for input.");
    if params["mode"].as_str().is_some_and(|m| m != "form") {
        say(&format!("{tool} asks: {message}"));
        say("mcpx: declined: the server asked to open a URL, and `mcpx call` answers forms only");
        return Action::Decline;
    }
    let fields = match fields(&params["requestedSchema"]) {
        Ok(mut f) => {
            f.sort_by_key(|f| order.iter().position(|n| *n == f.name));
            f
        }
        Err(e) => {
            say(&format!("mcpx: declined: {e}"));
            return Action::Decline;
        }
    };
    say(&format!("{tool} asks: {message}"));
    let choice = Select::with_theme(&SimpleTheme)
        .with_prompt("Answer")
        .items(["fill in the form", "decline", "cancel"])
        .default(0)
        .interact_on_opt(&term);
    match choice {
        Ok(Some(0)) => {}
        Ok(Some(1)) => return Action::Decline,
        _ => return Action::Cancel,
    }
    let mut content = Map::new();
    for field in &fields {
        match ask_field(&term, field) {
            Ok(Some(value)) => {
                content.insert(field.name.clone(), value);
            }
            Ok(None) => {}
            Err(()) => return Action::Cancel,
        }
    }
    Action::Accept(content)
}

/// Asks one field: its value, `None` when an optional field is left empty, or
/// `Err` when the person dismissed the form (Esc, Ctrl-C).
fn ask_field(term: &Term, field: &Field) -> Result<Option<Value>, ()> {
    let theme = SimpleTheme;
    let optional = if field.required { "" } else { " (optional)" };
    let prompt = format!("{}{optional}", field.label);
    match &field.kind {
        Kind::Bool => {
            let default = field.default.as_ref().and_then(Value::as_bool).unwrap_or(false);
            let yes = Confirm::with_theme(&theme).with_prompt(prompt).default(default).interact_on_opt(term);
            yes.ok().flatten().map(|b| Some(Value::Bool(b))).ok_or(())
        }
        Kind::Choice(options) => {
            let titles: Vec<&str> = options.iter().map(|(_, t)| t.as_str()).collect();
            let default = field.default.as_ref().and_then(|d| options.iter().position(|(v, _)| v == d)).unwrap_or(0);
            let picked =
                Select::with_theme(&theme).with_prompt(prompt).items(&titles).default(default).interact_on_opt(term);
            picked.ok().flatten().map(|i| Some(options[i].0.clone())).ok_or(())
        }
        Kind::Choices { options, .. } => {
            let titles: Vec<&str> = options.iter().map(|(_, t)| t.as_str()).collect();
            let defaults: Vec<bool> = options
                .iter()
                .map(|(v, _)| field.default.as_ref().and_then(Value::as_array).is_some_and(|d| d.contains(v)))
                .collect();
            let picked = MultiSelect::with_theme(&theme)
                .with_prompt(format!("{prompt} (space to pick, enter when done)"))
                .items(&titles)
                .defaults(&defaults)
                .interact_on_opt(term);
            let picked = picked.ok().flatten().ok_or(())?;
            Ok(Some(Value::Array(picked.into_iter().map(|i| options[i].0.clone()).collect())))
        }
        Kind::Text { .. } | Kind::Number { .. } => {
            // The default is shown escaped in the prompt but sent as the server wrote it.
            let default = field.default.as_ref().map(|d| d.as_str().map_or_else(|| d.to_string(), str::to_owned));
            let prompt = match &default {
                Some(d) => format!("{prompt} [{}]", sanitize::text(d)),
                None => prompt,
            };
            loop {
                let kind = field.kind.clone();
                let required = field.required && default.is_none();
                // Not dialoguer's default, which it would echo raw once taken: an empty
                // answer takes it here.
                let typed = Input::<String>::with_theme(&theme)
                    .with_prompt(prompt.clone())
                    .allow_empty(true)
                    .validate_with(move |t: &String| -> Result<(), String> {
                        if t.is_empty() && !required { Ok(()) } else { check(&kind, t).map(|_| ()) }
                    })
                    .interact_text_on(term)
                    .map_err(|_| ())?;
                let typed = match (typed.is_empty(), &default) {
                    (false, _) => typed,
                    (true, Some(d)) => d.clone(),
                    (true, None) => return Ok(None),
                };
                // A default is not checked as it is taken: check it here, and ask again.
                match check(&field.kind, &typed) {
                    Ok(value) => return Ok(Some(value)),
                    Err(e) => {
                        let _ = term.write_line(&format!("error: {}", sanitize::text(&e)));
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_schema_becomes_fields_of_each_kind() {
        let schema = json!({
            "type": "object",
            "properties": {
                "name": { "type": "string", "title": "Name", "description": "yours", "minLength": 2 },
                "n": { "type": "integer", "minimum": 1 },
                "ok": { "type": "boolean", "default": true },
                "size": { "type": "string", "enum": ["s", "l"], "enumNames": ["Small", "Large"] },
                "tone": { "type": "string", "oneOf": [{ "const": "a", "title": "Calm" }] },
                "tags": { "type": "array", "items": { "anyOf": [{ "const": "x", "title": "X" }] }, "maxItems": 1 },
            },
            "required": ["name"],
        });
        let f = fields(&schema).unwrap();
        assert_eq!(f.len(), 6);
        let field = |name: &str| f.iter().find(|f| f.name == name).unwrap();
        assert_eq!((field("name").label.as_str(), field("name").required), ("Name (yours)", true));
        assert_eq!(field("n").kind, Kind::Number { integer: true, min: Some(1.0), max: None });
        assert_eq!((&field("ok").kind, &field("ok").default), (&Kind::Bool, &Some(json!(true))));
        assert_eq!(field("size").kind, Kind::Choice(vec![(json!("s"), "Small".into()), (json!("l"), "Large".into())]));
        assert_eq!(field("tone").kind, Kind::Choice(vec![(json!("a"), "Calm".into())]));
        assert_eq!(
            field("tags").kind,
            Kind::Choices { options: vec![(json!("x"), "X".into())], min: None, max: Some(1) }
        );
        let bad = fields(&json!({ "properties": { "o": { "type": "object" } } })).unwrap_err();
        assert!(bad.contains("`o`"), "{bad}");
    }

    #[test]
    fn typed_values_are_checked_against_their_field() {
        let text = Kind::Text { min: Some(2), max: Some(3), format: None };
        assert_eq!(check(&text, "ab"), Ok(json!("ab")));
        assert_eq!(check(&text, "a"), Err("at least 2 characters".into()));
        assert_eq!(check(&text, "abcd"), Err("at most 3 characters".into()));
        let email = Kind::Text { min: None, max: None, format: Some("email".into()) };
        assert!(check(&email, "a@b.c").is_ok());
        assert!(check(&email, "ab.c").is_err());
        let date = Kind::Text { min: None, max: None, format: Some("date".into()) };
        assert!(check(&date, "2025-06-18").is_ok() && check(&date, "18/06/2025").is_err());
        let int = Kind::Number { integer: true, min: Some(0.0), max: Some(150.0) };
        assert_eq!(check(&int, "42"), Ok(json!(42)));
        assert_eq!(check(&int, "4.5"), Err("a whole number".into()));
        assert_eq!(check(&int, "151"), Err("at most 150".into()));
        assert!(check(&int, "x").is_err());
        let num = Kind::Number { integer: false, min: None, max: None };
        assert_eq!(check(&num, "0.5"), Ok(json!(0.5)));
    }

    #[test]
    fn the_form_keeps_the_servers_order() {
        let request = r#"{"jsonrpc":"2.0","id":"mcpx-1","method":"elicitation/create","params":{"message":"m",
            "requestedSchema":{"type":"object","properties":{"zeta":{"type":"string"},"alpha":{"type":"boolean"}}}}}"#;
        assert_eq!(written_order(request), ["zeta", "alpha"]);
        assert!(written_order("{}").is_empty());
    }

    #[test]
    fn actions_are_the_specifications_results() {
        let mut content = Map::new();
        content.insert("n".into(), json!(1));
        assert_eq!(Action::Accept(content).to_result(), json!({ "action": "accept", "content": { "n": 1 } }));
        assert_eq!(Action::Decline.to_result(), json!({ "action": "decline" }));
        assert_eq!(Action::Cancel.to_result(), json!({ "action": "cancel" }));
    }
}
