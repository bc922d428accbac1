//! Property tests with arbitrary text for the config readers, which read files users
//! (and the clients mcpx imports from) write: the JSONC preprocessor and the parsers
//! of every file kind, JSON(C) and Codex's TOML. Each asserts that nothing panics,
//! that the preprocessor keeps the text's length and line breaks (so it holds no more
//! than the file, and errors point into it), and that comments, whitespace and
//! trailing commas anywhere between tokens decode as the plain JSON does.
//!
//! `PROPTEST_CASES` (100000, say) runs them long; CI runs [`CI_CASES`].

use std::path::Path;

use proptest::prelude::*;
use serde_json::{Value, json};

use super::clients::{Client, FileKind};
use super::error::ConfigError;
use super::jsonc;
use super::parse::parse_file;

/// Cases per property unless `PROPTEST_CASES` says otherwise.
const CI_CASES: u32 = 512;

/// [`CI_CASES`] or `PROPTEST_CASES` cases; a failure prints its minimal input, which
/// becomes a unit test (nothing is written into the source tree).
fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(CI_CASES);
    ProptestConfig { failure_persistence: None, ..ProptestConfig::with_cases(cases) }
}

const JSONC_TOKENS: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    "\"",
    "\\",
    "//",
    "/*",
    "*/",
    "/",
    "\n",
    "\r\n",
    " ",
    "\u{feff}",
    "é",
    "\"mcpServers\"",
    "\"servers\"",
    "\"command\"",
    "\"args\"",
    "\"env\"",
    "\"url\"",
    "\"mcpx\"",
    "\"imports\"",
    "\"projects\"",
    "true",
    "null",
    "12",
    "\"x\"",
    "\"${HOME}\"",
    "\"${env:A}\"",
    "\"${input:k}\"",
    "\"5s\"",
    "\"8MiB\"",
];

const TOML_TOKENS: &[&str] = &[
    "[mcp_servers]",
    "[mcp_servers.a]",
    "[[mcp_servers.b]]",
    "\n",
    "=",
    "command",
    "args",
    "env",
    "\"x\"",
    "'x'",
    "[\"a\", 1]",
    "{ A = \"b\" }",
    "1979-05-27",
    "1e400",
    "\"\"\"",
    "#",
    " ",
    ".",
    "\\u00e9",
    "true",
];

/// Text made of `tokens` and arbitrary characters between them.
fn mixed(tokens: &'static [&'static str]) -> impl Strategy<Value = String> {
    let token = prop_oneof![3 => proptest::sample::select(tokens).prop_map(str::to_owned), 1 => ".{0,4}"];
    proptest::collection::vec(token, 0..48).prop_map(|parts| parts.concat())
}

/// Every kind of file mcpx reads: its own, and each client's.
fn kinds() -> Vec<FileKind> {
    let clients = Client::ALL.into_iter().map(Some).chain([None]);
    clients.map(|client| FileKind { client, workspace: Some("/w".into()) }).collect()
}

/// Parses `text` as every kind of file; a syntax error's place is in the text.
fn parse_all(text: &str) -> Result<(), TestCaseError> {
    let lines = text.split('\n').count();
    for kind in kinds() {
        if let Err(ConfigError::Syntax { line, .. }) = parse_file(Path::new("/w/.mcp.json"), &kind, text) {
            prop_assert!(line <= lines + 1, "line {} of {}", line, lines);
        }
    }
    Ok(())
}

/// A config of the shape users write: servers with commands, arguments,
/// environment, URLs and options.
fn config_value() -> impl Strategy<Value = Value> {
    let text = "[a-zA-Z0-9 ${}:/._-]{0,10}";
    let server = (
        text,
        proptest::collection::vec(text, 0..3),
        proptest::collection::btree_map("[A-Z_]{1,6}", text, 0..3),
        proptest::option::of(prop_oneof![Just(json!({ "scope": "session" })), Just(json!({ "idleTimeout": "5s" }))]),
    )
        .prop_map(|(command, args, env, mcpx)| {
            let mut s = json!({ "command": command, "args": args, "env": env });
            if let Some(m) = mcpx {
                s["mcpx"] = m;
            }
            s
        });
    proptest::collection::btree_map("[a-z][a-z0-9-]{0,8}", server, 0..4)
        .prop_map(|servers| json!({ "mcpServers": servers.into_iter().collect::<serde_json::Map<_, _>>() }))
}

/// What may stand between two tokens of JSONC.
const GAPS: &[&str] =
    &["", " ", "\n", "\t", "// a comment, with \"quotes\" and /* */\n", "/* block\n comment */", "\r\n"];

/// `value` written as JSONC: `gaps` (cycled) between every two tokens, and a trailing
/// comma after the last member or element where `trailing` says.
fn write_jsonc(value: &Value, gaps: &[usize], trailing: bool, out: &mut String, at: &mut usize) {
    let gap = |out: &mut String, at: &mut usize| {
        out.push_str(GAPS[gaps.get(*at % gaps.len().max(1)).copied().unwrap_or(0) % GAPS.len()]);
        *at += 1;
    };
    match value {
        Value::Object(map) => {
            out.push('{');
            for (i, (k, v)) in map.iter().enumerate() {
                gap(out, at);
                out.push_str(&Value::String(k.clone()).to_string());
                gap(out, at);
                out.push(':');
                gap(out, at);
                write_jsonc(v, gaps, trailing, out, at);
                gap(out, at);
                if i + 1 < map.len() || trailing {
                    out.push(',');
                }
            }
            gap(out, at);
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                gap(out, at);
                write_jsonc(v, gaps, trailing, out, at);
                gap(out, at);
                if i + 1 < items.len() || trailing {
                    out.push(',');
                }
            }
            gap(out, at);
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// A file users write, in each syntax mcpx reads, to be mangled.
const JSONC_FILE: &str = r#"{
  // Servers for this project.
  "imports": ["claude-desktop", "codex"],
  "mcpServers": {
    "fs": { "command": "npx", "args": ["-y", "@scope/fs", "${HOME}/src",], "env": { "TOKEN": "${secret:gh}" } },
    "docs": { "url": "https://example.com/mcp", "headers": { "Authorization": "Bearer ${env:T}" },
              "mcpx": { "scope": "session", "idleTimeout": "5m", "bufferBytes": "8MiB" } }, /* trailing */
  },
  "servers": { "vs": { "type": "stdio", "command": "${workspaceFolder}/bin/s", "inputs": [] } },
  "projects": { "/w": { "mcpServers": { "p": { "command": "p" } } } },
}"#;

const TOML_FILE: &str = r#"model = "o3"
[mcp_servers.fs]
command = "npx"
args = ["-y", "@scope/fs"]
env = { TOKEN = "x" }
startup_timeout_ms = 20_000
[mcp_servers.remote]
url = "https://example.com/mcp"
"#;

/// `text` with characters changed, removed or put in at random places.
fn mangled(text: &'static str) -> impl Strategy<Value = String> {
    let edit = (
        any::<usize>(),
        proptest::sample::select(JSONC_TOKENS.iter().chain(TOML_TOKENS).copied().collect::<Vec<_>>()),
        0u8..3,
    );
    proptest::collection::vec(edit, 0..5).prop_map(move |edits| {
        let mut chars: Vec<String> = text.chars().map(String::from).collect();
        for (at, token, how) in edits {
            let at = at % (chars.len() + 1);
            match how {
                0 if at < chars.len() => chars[at] = token.to_owned(),
                1 if at < chars.len() => {
                    chars.remove(at);
                }
                _ => chars.insert(at, token.to_owned()),
            }
        }
        chars.concat()
    })
}

proptest! {
    #![proptest_config(config())]

    /// A real file with a few edits, as every file kind: no panic, and a syntax
    /// error's line is in the file.
    #[test]
    fn every_file_kind_reads_a_mangled_file(jsonc in mangled(JSONC_FILE), toml in mangled(TOML_FILE)) {
        parse_all(&jsonc)?;
        parse_all(&toml)?;
    }

    /// The JSONC preprocessor on any text: no panic; when it succeeds, the same
    /// length with every line break where it was.
    #[test]
    fn jsonc_keeps_length_and_lines(text in mixed(JSONC_TOKENS)) {
        if let Ok(json) = jsonc::to_json(&text) {
            prop_assert_eq!(json.len(), text.len());
            for (a, b) in json.bytes().zip(text.bytes()) {
                prop_assert_eq!(a == b'\n', b == b'\n');
            }
        }
    }

    /// Every file kind's parser on any JSON(C)-like or TOML-like text: no panic, and
    /// a syntax error's line is in the file.
    #[test]
    fn every_file_kind_reads_any_text(jsonish in mixed(JSONC_TOKENS), tomlish in mixed(TOML_TOKENS)) {
        parse_all(&jsonish)?;
        parse_all(&tomlish)?;
    }

    /// Comments, whitespace and trailing commas anywhere between tokens: the JSONC
    /// file reads as its plain JSON does.
    #[test]
    fn jsonc_reads_as_plain_json(value in config_value(), gaps in proptest::collection::vec(any::<usize>(), 1..16), trailing in any::<bool>()) {
        let mut text = String::new();
        write_jsonc(&value, &gaps, trailing, &mut text, &mut 0);
        let json = jsonc::to_json(&text).map_err(|e| TestCaseError::fail(format!("{e:?} in {text}")))?;
        let read: Value = serde_json::from_str(&json).map_err(|e| TestCaseError::fail(format!("{e} in {text}")))?;
        prop_assert_eq!(&read, &value);
        let file = Path::new("/w/.mcp.json");
        let kind = FileKind { client: None, workspace: Some("/w".into()) };
        let read = |text: &str| parse_file(file, &kind, text).map(|p| format!("{:?}", (p.main.servers, p.main.errors)));
        prop_assert_eq!(read(&value.to_string()).ok(), read(&text).ok());
    }
}

/// The files the properties mangle read as they are, so a few edits land in files
/// that mostly parse.
#[test]
fn the_files_to_mangle_read_unchanged() {
    let kind = |client| FileKind { client, workspace: Some("/w".into()) };
    for (client, text) in [(None, JSONC_FILE), (Some(Client::ClaudeCode), JSONC_FILE), (Some(Client::Codex), TOML_FILE)]
    {
        let parsed = parse_file(Path::new("/w/.mcp.json"), &kind(client), text).unwrap();
        assert!(parsed.main.servers.len() >= 2, "{client:?}: {:?}", parsed.main.errors);
    }
}
