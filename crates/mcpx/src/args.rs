//! `mcpx call`'s and `mcpx prompt`'s arguments as people type them: `key=value`
//! words (their `@FILE`s read here, in the caller's directory), one JSON object, or
//! `-` for a JSON object on stdin. The daemon types the pairs by the tool's
//! `inputSchema` and checks them ([`mcpx_api::arguments`]).

use std::io::Read;

use mcpx_api::arguments::{Given, Pair};
use mcpx_api::client::{Client, Method};
use mcpx_api::{ApiError, ErrorKind, ListRequest, RefreshRequest};
use serde_json::Value;

/// How the arguments were given on the command line.
#[derive(Debug)]
pub enum Input {
    /// No arguments: the tool gets `{}`.
    None,
    /// One JSON object (given as is, or read from stdin with `-`).
    Json(Box<serde_json::value::RawValue>),
    /// `key=value`, `key:=JSON`, `key=@FILE` and `key:=@FILE` words, in order, each
    /// `@FILE` read.
    Pairs(Vec<Pair>),
}

impl Input {
    /// Reads the words after the tool: none, `-` (a JSON object on stdin), one word
    /// starting with `{` or `[` (JSON), else `key=value` words. `target` is the tool
    /// as typed, for the hint when the first word looks like a tool (`mcpx call
    /// server tool`).
    ///
    /// Errors (`usage`): stdin cannot be read; the JSON is not an object; a word is
    /// neither JSON nor `key=value`; a `key=@FILE`'s file cannot be read.
    pub fn parse(words: &[String], target: Option<&str>) -> Result<Input, ApiError> {
        let usage = |text: String| ApiError::new(ErrorKind::Usage, text);
        match words {
            [] => return Ok(Input::None),
            [one] if one == "-" => {
                let mut text = String::new();
                std::io::stdin()
                    .read_to_string(&mut text)
                    .map_err(|e| usage(format!("cannot read the arguments from stdin: {e}")))?;
                return json_object(&text).map(Input::Json);
            }
            [one] if one.trim_start().starts_with(['{', '[']) => return json_object(one).map(Input::Json),
            _ => {}
        }
        for (i, word) in words.iter().enumerate() {
            if split_pair(word).is_some() {
                continue;
            }
            return Err(match target {
                Some(server) if i == 0 && !server.contains('.') && !word.contains('.') => usage(format!(
                    "`{word}` is not key=value; to call tool `{word}` of server `{server}`, join them with a dot: `mcpx call {server}.{word}`"
                )),
                _ => usage(format!(
                    "`{word}` is not an argument: write key=value (key:=JSON for JSON, key=@FILE for a file's text), or one JSON object"
                )),
            });
        }
        let mut pairs = Vec::with_capacity(words.len());
        for word in words {
            let Some((key, json, value)) = split_pair(word) else { continue };
            let value = value_text(key, json, value).map_err(usage)?;
            pairs.push(Pair { key: key.to_owned(), value, json });
        }
        Ok(Input::Pairs(pairs))
    }

    /// The arguments as the daemon's typing takes them.
    pub fn given(self) -> Given {
        match self {
            Input::None => Given::None,
            Input::Json(raw) => Given::Json(raw),
            Input::Pairs(pairs) => Given::Pairs(pairs),
        }
    }

    /// The arguments as `POST /v1/call` takes them: a JSON object as it is, `key=value`
    /// pairs as an array of [`Pair`]s for the daemon to type; `None` for none.
    ///
    /// Errors (`usage`): the pairs cannot be encoded (never, in practice).
    pub fn for_call(&self) -> Result<Option<Box<serde_json::value::RawValue>>, ApiError> {
        match self {
            Input::None => Ok(None),
            Input::Json(raw) => Ok(Some(raw.clone())),
            Input::Pairs(pairs) => serde_json::value::to_raw_value(pairs)
                .map(Some)
                .map_err(|e| ApiError::new(ErrorKind::Usage, format!("cannot encode the arguments: {e}"))),
        }
    }
}

/// `key=value` as (key, whether the value is JSON (`:=`), value), or `None` for a
/// word with no `=` or an empty key.
fn split_pair(word: &str) -> Option<(&str, bool, &str)> {
    let (key, value) = word.split_once('=')?;
    let (key, json) = match key.strip_suffix(':') {
        Some(k) => (k, true),
        None => (key, false),
    };
    (!key.is_empty()).then_some((key, json, value))
}

/// A `key=value`'s text: `@FILE`'s contents, `\@…` as `@…`, else the value as typed.
///
/// Errors: the file cannot be read (the message names the word).
fn value_text(key: &str, json: bool, value: &str) -> Result<String, String> {
    if let Some(path) = value.strip_prefix('@') {
        let word = if json { format!("{key}:=@{path}") } else { format!("{key}=@{path}") };
        return std::fs::read_to_string(path).map_err(|e| format!("`{word}`: cannot read the file: {e}"));
    }
    Ok(value.strip_prefix("\\@").map_or_else(|| value.to_owned(), |rest| format!("@{rest}")))
}

/// The tool's `tools/list` entry from the daemon's schema cache (`POST /v1/tools`,
/// `req` naming it by `target` or `server` and `tool`), for typing `key=value` pairs
/// against a daemon older than typing in `POST /v1/call`: a server never listed is
/// listed first (`POST /v1/refresh`), as that daemon's own typing would.
///
/// Errors: those of `/v1/tools` and `/v1/refresh` (`unknown_server`, `unknown_tool`,
/// `server` (or `auth`, `timeout`...: the kind the daemon gave) when the listing
/// fails, `daemon`).
pub async fn tool_schema(client: &Client, req: &ListRequest) -> Result<Option<Value>, ApiError> {
    let parse = |body: &[u8]| serde_json::from_slice::<Value>(body).ok();
    match client.call(Method::POST, "/v1/tools", Some(req)).await {
        Ok(body) => Ok(parse(&body)),
        Err(e) if e.kind == ErrorKind::Server => {
            let refresh =
                RefreshRequest { caller: req.caller.clone(), server: req.server.clone(), target: req.target.clone() };
            let body = client.call(Method::POST, "/v1/refresh", Some(&refresh)).await?;
            let results = parse(&body).unwrap_or_default();
            let failed = results.as_object().and_then(|r| r.values().find(|v| v["error"].is_string()));
            if let Some(failed) = failed {
                // The kind the daemon gave (`auth` for a missing login), else `server`.
                let kind = serde_json::from_value(failed["kind"].clone()).unwrap_or(ErrorKind::Server);
                return Err(ApiError::new(kind, failed["error"].as_str().unwrap_or_default()));
            }
            Ok(parse(&client.call(Method::POST, "/v1/tools", Some(req)).await?))
        }
        Err(e) => Err(e),
    }
}

/// Checks the tool's arguments are one JSON object.
fn json_object(text: &str) -> Result<Box<serde_json::value::RawValue>, ApiError> {
    let bad = |why: String| {
        ApiError::new(
            ErrorKind::Usage,
            format!("the arguments must be a JSON object, like '{{\"message\":\"hi\"}}': {why}"),
        )
    };
    let value: Box<serde_json::value::RawValue> = serde_json::from_str(text.trim()).map_err(|e| bad(e.to_string()))?;
    if !value.get().starts_with('{') {
        return Err(bad(format!("got `{}`", value.get().chars().take(40).collect::<String>())));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(words: &[&str]) -> Result<Vec<Pair>, String> {
        let words: Vec<String> = words.iter().map(|w| (*w).to_owned()).collect();
        match Input::parse(&words, Some("x.t")).map_err(|e| e.message)? {
            Input::Pairs(pairs) => Ok(pairs),
            other => Err(format!("not pairs: {other:?}")),
        }
    }

    #[test]
    fn files_are_read_and_an_escaped_at_sign_is_kept() {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), "@text of the file").unwrap();
        let path = file.path().display().to_string();
        let pairs = parsed(&[&format!("a=@{path}"), "b=\\@me", "c:=5"]).unwrap();
        let pair = |key: &str, value: &str, json: bool| Pair { key: key.into(), value: value.into(), json };
        assert_eq!(pairs, [pair("a", "@text of the file", false), pair("b", "@me", false), pair("c", "5", true)]);
        let unreadable = parsed(&["n=@/nonexistent/mcpx-test"]).unwrap_err();
        assert!(unreadable.starts_with("`n=@/nonexistent/mcpx-test`: cannot read the file"), "{unreadable}");
    }
}
