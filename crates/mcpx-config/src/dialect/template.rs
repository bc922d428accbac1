//! Small pieces every client's mapping uses: the strings mcpx expands in an entry,
//! bare `$NAME` variables, and durations in milliseconds.

use serde_json::{Map, Value};

/// Calls `f` on every string mcpx expands: `command`, each of `args`, `env` and `headers`
/// values, `cwd` and `url`.
pub(super) fn for_each_template(entry: &mut Map<String, Value>, mut f: impl FnMut(&mut String)) {
    for key in ["command", "cwd", "url"] {
        if let Some(Value::String(s)) = entry.get_mut(key) {
            f(s);
        }
    }
    if let Some(Value::Array(args)) = entry.get_mut("args") {
        args.iter_mut().filter_map(|a| if let Value::String(s) = a { Some(s) } else { None }).for_each(&mut f);
    }
    for key in ["env", "headers"] {
        if let Some(Value::Object(map)) = entry.get_mut(key) {
            map.values_mut().filter_map(|v| if let Value::String(s) = v { Some(s) } else { None }).for_each(&mut f);
        }
    }
}

/// Gemini CLI's (and Crush's, and Copilot CLI's) `$NAME` and `${NAME}` as `${NAME:-}` (unset is empty there); `${NAME:-x}`
/// and a `$` not followed by a name stay.
pub(super) fn bare_vars(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    let mut rest = s;
    while let Some(pos) = rest.find('$') {
        out.push_str(&rest[..pos]);
        let after = &rest[pos + 1..];
        let braced = after.strip_prefix('{');
        let body = braced.unwrap_or(after);
        let len = body.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(body.len());
        let name = &body[..len];
        let is_name = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
        let closed = braced.is_none() || body[len..].starts_with('}');
        if is_name && closed {
            out.push_str("${");
            out.push_str(name);
            out.push_str(":-}");
            rest = &body[len + usize::from(braced.is_some())..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// A number of milliseconds as an mcpx duration (`"1500ms"`); `None` when not a number.
pub(super) fn millis(v: &Value) -> Option<Value> {
    let ms = v.as_f64()?;
    Some(Value::String(format!("{}ms", ms.round() as u64)))
}
