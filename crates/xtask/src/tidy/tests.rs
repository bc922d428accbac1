//! Each check on the repository itself, and each new one on a planted violation; then
//! the tidy machinery on small made-up sources.

use std::collections::BTreeSet;

use super::graph::{Workspace, circles};
use super::source::{Tok, facts, lex};
use super::*;

/// Runs check `name` on the repository and fails with its finding.
fn holds(name: &str) {
    let (_, check) = CHECKS.iter().find(|(n, _)| *n == name).expect("a check of that name");
    let finding = check(workspace());
    assert!(finding.violations.is_empty(), "{finding}");
}

#[test]
fn the_repository_has_no_import_circles_between_modules() {
    holds("no_import_circles_between_modules");
}

#[test]
fn the_repository_reads_proc_only_in_the_platform_crate() {
    holds("only_the_platform_crate_reads_proc");
}

#[test]
fn the_repository_names_no_transports_own_type_above_transport() {
    holds("nothing_above_transport_names_a_transports_own_type");
}

#[test]
fn the_repository_writes_persisted_files_only_through_write_atomic() {
    holds("persisted_files_are_written_only_through_write_atomic");
}

#[test]
fn the_repository_has_every_test_docs_security_names() {
    holds("every_test_docs_security_names_exists");
}

#[test]
fn the_repository_reads_disabled_and_the_tool_filters_only_in_the_policy_point() {
    holds("only_the_policy_point_reads_disabled_and_the_tool_filters");
}

#[test]
fn the_repository_names_every_source_file_in_the_architecture() {
    holds("every_source_file_is_named_in_the_architecture");
}

#[test]
fn the_repository_has_no_file_over_700_lines_outside_tests() {
    holds("no_file_is_over_700_lines_outside_tests");
}

#[test]
fn the_repository_never_imports_the_endpoint_from_transport_or_instance() {
    holds("transport_and_instance_never_import_the_endpoint");
}

#[test]
fn the_repository_architecture_names_no_file_that_is_gone() {
    holds("the_architecture_names_no_file_that_is_gone");
}

/// A workspace of these files and this ARCHITECTURE.md text.
fn planted(files: &[(&str, &str)], architecture: &str) -> Workspace {
    let mut ws = Workspace::from_files(files.iter().map(|(p, t)| ((*p).to_owned(), (*t).to_owned())).collect());
    ws.architecture = architecture.to_owned();
    ws
}

#[test]
fn a_file_the_architecture_does_not_name_is_found() {
    let files = [
        ("crates/c/src/lib.rs", "mod named; mod unnamed;"),
        ("crates/c/src/named.rs", ""),
        ("crates/c/src/unnamed.rs", ""),
        ("crates/d/src/lib.rs", ""),
    ];
    let ws = planted(&files, "`c/src/lib.rs` is the facade; `named.rs` does a thing; `d/src/lib.rs` too.");
    let finding = every_source_file_is_named_in_the_architecture(&ws);
    assert_eq!(finding.violations.len(), 1, "{finding}");
    assert!(finding.violations[0].starts_with("crates/c/src/unnamed.rs"), "{finding}");
    // A name two crates share needs its crate.
    let ws = planted(&files, "`lib.rs`, `named.rs`, `unnamed.rs`");
    let finding = every_source_file_is_named_in_the_architecture(&ws);
    assert_eq!(finding.violations.len(), 2, "{finding}");
}

#[test]
fn a_file_the_architecture_names_that_is_gone_is_found() {
    let ws = planted(&[("crates/c/src/lib.rs", "")], "`c/src/lib.rs`, and `moved/away.rs::f`");
    let finding = the_architecture_names_no_file_that_is_gone(&ws);
    assert_eq!(finding.violations, ["ARCHITECTURE.md: `moved/away.rs`: no such file"], "{finding}");
}

#[test]
fn a_file_over_700_lines_outside_its_tests_is_found() {
    let long = "fn f() {}\n".repeat(MAX_LINES + 1);
    let tested =
        format!("{}#[cfg(test)]\nmod tests {{\n{}}}\n", "fn f() {}\n".repeat(MAX_LINES - 5), "// t\n".repeat(300));
    let files = [
        ("crates/c/src/lib.rs", "mod long; mod tested;"),
        ("crates/c/src/long.rs", &long),
        ("crates/c/src/tested.rs", &tested),
    ];
    let ws = planted(&files, "");
    let finding = no_file_is_over_700_lines_outside_tests(&ws);
    assert_eq!(
        finding.violations,
        [format!("crates/c/src/long.rs: {} lines outside its tests", MAX_LINES + 1)],
        "{finding}"
    );
}

#[test]
fn transport_or_instance_naming_the_endpoint_is_found() {
    let files = [
        ("crates/mcpx-daemon/src/lib.rs", "mod mcp; mod transport; mod instance;"),
        ("crates/mcpx-daemon/src/mcp.rs", "pub mod era { pub const X: u8 = 1; }"),
        ("crates/mcpx-daemon/src/transport.rs", "mod http;"),
        ("crates/mcpx-daemon/src/transport/http.rs", "use crate::mcp::era;"),
        ("crates/mcpx-daemon/src/instance.rs", "fn f() -> u8 { crate::mcp::era::X }"),
    ];
    let ws = planted(&files, "");
    let finding = transport_and_instance_never_import_the_endpoint(&ws);
    assert_eq!(finding.violations.len(), 2, "{finding}");
    assert!(finding.violations[0].contains("transport/http.rs") || finding.violations[1].contains("transport/http.rs"));
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn comments_and_literals_are_not_code() {
    let text = r####"let a = "crate::x::Y"; // crate::x::Z
        /* crate::x::W /* nested */ */ let b = r#"crate::x::V"#; let c = '"'; fn f<'a>(x: &'a str) {}
        let d = b"crate::x::U"; let e = crate::x::T;"####;
    let paths = facts(text).paths;
    assert_eq!(paths.len(), 1, "{paths:?}");
    assert_eq!(paths[0].segs, strings(&["crate", "x", "T"]));
    assert_eq!(lex("r#type").first().map(|t| t.kind.clone()), Some(Tok::Ident("type".to_owned())));
}

#[test]
fn test_only_code_is_left_out_and_use_trees_are_expanded() {
    let text = r#"
        use crate::a::{b::{self, C}, d as e, *};
        #[cfg(test)] mod tests { use crate::t::X; }
        #[cfg(all(test, unix))] use crate::t::Y;
        #[cfg(feature = "test-hooks")] let hook = crate::t::Z;
        #[cfg(not(test))] use crate::kept::W;
        #[cfg(test)] mod more;
        mod child;
        mod inline { use super::super::up::V; }
    "#;
    let f = facts(text);
    let uses: Vec<(Vec<String>, Option<String>)> = f.uses.iter().map(|u| (u.segs.clone(), u.binds.clone())).collect();
    let bound = |p: &[&str], b: Option<&str>| (strings(p), b.map(str::to_owned));
    assert_eq!(
        uses,
        [
            bound(&["crate", "a", "b"], Some("b")),
            bound(&["crate", "a", "b", "C"], Some("C")),
            bound(&["crate", "a", "d"], Some("e")),
            bound(&["crate", "a", "*"], None),
            bound(&["crate", "kept", "W"], Some("W")),
            bound(&["super", "super", "up", "V"], Some("V")),
        ]
    );
    assert_eq!(f.uses[5].scope, strings(&["inline"]));
    let mods: Vec<(&str, bool)> = f.mods.iter().map(|m| (m.name.as_str(), m.inline)).collect();
    assert_eq!(mods, [("child", false), ("inline", true)]);
    assert!(f.paths.iter().all(|p| p.segs[1] != "t"), "{:?}", f.paths);
}

#[test]
fn circles_are_found_through_parents_and_re_exports() {
    let ws = Workspace::from_files(
        [
            ("crates/c/src/lib.rs", "mod a; mod b; mod leaf; pub use a::Thing;"),
            ("crates/c/src/a.rs", "pub struct Thing; fn f() { crate::b::g(); crate::leaf::h(); }"),
            ("crates/c/src/b.rs", "mod inner; use crate::Thing; pub fn g() {}"),
            ("crates/c/src/b/inner.rs", "fn k() { super::g(); }"),
            ("crates/c/src/leaf.rs", "pub fn h() {}"),
            ("crates/c/src/tests.rs", "use crate::a::Thing;"),
        ]
        .iter()
        .map(|(p, t)| ((*p).to_owned(), (*t).to_owned()))
        .collect(),
    );
    let tree = &ws.crates[0];
    let edges: BTreeSet<(String, String)> =
        tree.edges(&ws).keys().map(|(a, b)| (tree.short(&ws, a), tree.short(&ws, b))).collect();
    let edge = |a: &str, b: &str| (a.to_owned(), b.to_owned());
    let expected = [
        edge("lib.rs", "a.rs"),
        edge("a.rs", "b.rs"),
        edge("a.rs", "leaf.rs"),
        edge("b.rs", "a.rs"),
        edge("b/inner.rs", "b.rs"),
    ];
    assert_eq!(edges, expected.into_iter().collect());
    assert!(ws.file("crates/c/src/tests.rs").unwrap().test);
    let found = circles(&edges, 10);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].0, ["a.rs", "b.rs"]);
    assert_eq!(found[0].1, [vec!["a.rs", "b.rs", "a.rs"]]);
}
