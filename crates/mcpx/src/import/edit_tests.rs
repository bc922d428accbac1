//! Tests of the comment-keeping edits.

#![allow(clippy::unwrap_used)] // Reason: a failed unwrap is a failed test, with its location.

use serde_json::{Map, Value, json};

use super::*;

const COMMENTED: &str = r#"// My servers.
{
  /* the ones I use every day */
  "mcpServers": {
    "memory": { "command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"] }, // keep
  },
}
"#;

fn entry(value: Value) -> Map<String, Value> {
    value.as_object().unwrap().clone()
}

fn refused(result: Result<Edited, impl Into<CopyError> + std::fmt::Debug>) -> (String, String) {
    match result.map_err(Into::into) {
        Err(CopyError::Refused(Refused { reason, paste })) => (reason, paste),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn imports_are_added_keeping_every_comment() {
    let edited = add_imports(Some(COMMENTED), &["cursor", "vscode", "cursor"]).unwrap();
    assert_eq!(edited.added, ["cursor", "vscode"]);
    let text = edited.text.unwrap();
    for kept in ["// My servers.", "/* the ones I use every day */", "// keep", "server-memory"] {
        assert!(text.contains(kept), "{kept:?} is gone:\n{text}");
    }
    let value = CstRootNode::parse(&text, &options()).unwrap().to_serde_value().unwrap();
    assert_eq!(value["imports"], json!(["cursor", "vscode"]));
    assert_eq!(value["mcpServers"]["memory"]["command"], "npx");

    // Again, with one more: only the new one is added, after the others.
    let again = add_imports(Some(&text), &["vscode", "codex"]).unwrap();
    assert_eq!((again.added.clone(), again.present.clone()), (vec!["codex".to_owned()], vec!["vscode".to_owned()]));
    let value = CstRootNode::parse(again.text.as_ref().unwrap(), &options()).unwrap().to_serde_value().unwrap();
    assert_eq!(value["imports"], json!(["cursor", "vscode", "codex"]));
}

#[test]
fn names_already_imported_change_nothing() {
    let text = "{ \"imports\": [\"cursor\"] }\n";
    let edited = add_imports(Some(text), &["cursor"]).unwrap();
    assert_eq!(edited, Edited { text: None, added: vec![], present: vec!["cursor".into()] });
}

#[test]
fn a_missing_or_blank_file_gets_a_new_object() {
    for text in [None, Some(""), Some("\n  \n")] {
        let edited = add_imports(text, &["gemini"]).unwrap();
        let out = edited.text.unwrap();
        let value: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(value, json!({ "imports": ["gemini"] }), "{out}");
        assert!(out.ends_with("}\n"), "{out:?}");
    }
}

#[test]
fn a_byte_order_mark_is_kept() {
    let edited = add_imports(Some("\u{feff}{}"), &["cursor"]).unwrap();
    assert!(edited.text.unwrap().starts_with("\u{feff}{"));
}

#[test]
fn what_cannot_be_edited_safely_is_refused_with_the_lines_to_paste() {
    let (reason, paste) = refused(add_imports(Some("{\n  \"a\": 1\n  \"b\": 2\n}\n"), &["cursor"]));
    assert!(reason.starts_with("it does not parse (line 2, column 9"), "{reason}");
    assert_eq!(paste, r#""imports": ["cursor"]"#);

    let (reason, paste) = refused(add_imports(Some(r#"{"imports": "cursor"}"#), &["vscode"]));
    assert!(reason.contains("`imports` is not an array"), "{reason}");
    assert_eq!(paste, r#""imports": ["vscode"]"#);

    let (reason, _) = refused(add_imports(Some("[]"), &["vscode"]));
    assert!(reason.contains("top level is not an object"), "{reason}");

    // JSON5 that mcpx itself would not read is not edited either.
    let (reason, _) = refused(add_imports(Some("{ 'a': 1 }"), &["vscode"]));
    assert!(reason.starts_with("it does not parse"), "{reason}");
    let (reason, _) = refused(add_imports(Some("{ a: 1 }"), &["vscode"]));
    assert!(reason.starts_with("it does not parse"), "{reason}");
}

#[test]
fn servers_are_copied_keeping_comments_and_clashes_need_force() {
    let copied = [
        ("docs".to_owned(), entry(json!({ "url": "https://example.invalid/mcp", "headers": { "X-A": "b\"c" } }))),
        (
            "git".to_owned(),
            entry(json!({ "command": "uvx", "args": ["mcp-server-git"], "mcpx": { "disabled": true } })),
        ),
    ];
    let edited = add_servers(Some(COMMENTED), &copied, false).unwrap();
    assert_eq!(edited.added, ["docs", "git"]);
    let text = edited.text.unwrap();
    for kept in ["// My servers.", "/* the ones I use every day */", "// keep"] {
        assert!(text.contains(kept), "{kept:?} is gone:\n{text}");
    }
    let value = CstRootNode::parse(&text, &options()).unwrap().to_serde_value().unwrap();
    assert_eq!(value["mcpServers"]["docs"]["headers"]["X-A"], "b\"c");
    // In the order people write them: what runs first, mcpx's block last.
    let git = &text[text.find("\"git\"").unwrap()..];
    let at = |key: &str| git.find(&format!("\"{key}\"")).unwrap();
    assert!(at("command") < at("args") && at("args") < at("mcpx"), "{text}");
    assert_eq!(value["mcpServers"]["git"]["mcpx"]["disabled"], true);
    assert_eq!(value["mcpServers"]["memory"]["command"], "npx");

    let clash = [("memory".to_owned(), entry(json!({ "command": "other" })))];
    assert_eq!(add_servers(Some(&text), &clash, false), Err(CopyError::Clash(vec!["memory".into()])));
    let forced = add_servers(Some(&text), &clash, true).unwrap();
    assert_eq!(forced.present, ["memory"]);
    let value = CstRootNode::parse(forced.text.as_ref().unwrap(), &options()).unwrap().to_serde_value().unwrap();
    assert_eq!(value["mcpServers"]["memory"], json!({ "command": "other" }));

    // A name under VS Code's `servers` clashes too.
    let vscode = r#"{ "servers": { "memory": { "command": "x" } } }"#;
    assert_eq!(add_servers(Some(vscode), &clash, false), Err(CopyError::Clash(vec!["memory".into()])));
}

#[test]
fn copying_into_what_is_not_an_object_is_refused_with_the_entries_to_paste() {
    let copied = [("git".to_owned(), entry(json!({ "command": "uvx" })))];
    let (reason, paste) = refused(add_servers(Some(r#"{"mcpServers": []}"#), &copied, false));
    assert!(reason.contains("`mcpServers` is not an object"), "{reason}");
    let pasted: Value = serde_json::from_str(&format!("{{{paste}}}")).unwrap();
    assert_eq!(pasted, json!({ "mcpServers": { "git": { "command": "uvx" } } }));
}

#[test]
fn null_imports_and_servers_count_as_absent() {
    let edited = add_imports(Some("{ // mine\n  \"imports\": null\n}\n"), &["cursor"]).unwrap();
    let text = edited.text.unwrap();
    assert!(text.contains("// mine") && text.contains(r#""imports": ["cursor"]"#), "{text}");
    assert_eq!(imports_of(Some("{\"imports\": null}")).unwrap(), Vec::<String>::new());
    let copied = [("docs".to_owned(), entry(json!({ "command": "docs" })))];
    let text = match add_servers(Some("{\"mcpServers\": null}"), &copied, false) {
        Ok(edited) => edited.text.unwrap(),
        Err(_) => panic!("refused"),
    };
    let value: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(value["mcpServers"]["docs"]["command"], "docs", "{text}");
}
