//! The ranking's tests, and the corpus test: the captured `tools/list` of real servers
//! (`tests/search/corpus/`) searched with users' queries (`tests/search/queries.json`).

use std::path::Path;
use std::time::Instant;

use serde::Deserialize;
use serde_json::value::RawValue;

use super::*;

#[test]
fn words_split_names_at_separators_and_camel_case() {
    assert_eq!(words("get_file-info.v2"), ["get", "file", "info", "v2"]);
    assert_eq!(words("getUserProfile HTTPServer"), ["get", "user", "profile", "http", "server"]);
    assert_eq!(words("API-post-search"), ["api", "post", "search"]);
    assert_eq!(words("Größe ändern"), ["größe", "ändern"]);
}

#[test]
fn stems_meet_across_plurals_and_tenses() {
    for (a, b) in [
        ("files", "file"),
        ("created", "create"),
        ("creating", "creates"),
        ("issues", "issue"),
        ("branches", "branch"),
        ("running", "run"),
        ("directories", "directory"),
        ("addresses", "address"),
        ("timezones", "timezone"),
    ] {
        assert_eq!(stem(a), stem(b), "{a} and {b}");
    }
    for w in ["status", "string", "use", "css", "news"] {
        assert!(stem(w).len() >= 3, "{w} -> {}", stem(w));
    }
}

fn tool(server: &str, name: &str, description: &str) -> ToolText {
    ToolText {
        server: server.into(),
        name: name.into(),
        title: None,
        description: Some(description.into()),
        params: Vec::new(),
    }
}

#[test]
fn a_word_in_the_name_outranks_the_same_word_in_a_description() {
    let tools = [
        tool("a", "list_things", "Lists every echo of the past"),
        tool("b", "echo", "Returns its input"),
        tool("c", "unrelated", "Does something else"),
    ];
    let hits = rank(&tools, &["echo".into()]);
    assert_eq!(hits.iter().map(|h| h.0).collect::<Vec<_>>(), [1, 0], "no match, no hit");
    assert!(rank(&tools, &["zebra".into()]).is_empty());
}

#[test]
fn common_words_are_searched_only_when_nothing_else_is_asked() {
    let tools = [tool("a", "the_tool", "Does it"), tool("b", "other", "Reads a file")];
    assert_eq!(rank(&tools, &["read the file".into()])[0].0, 1);
    assert_eq!(rank(&tools, &["the".into()])[0].0, 0);
}

#[test]
fn parameters_and_titles_are_read_from_the_tool_object() {
    let raw = RawValue::from_string(
        r#"{"name":"t","annotations":{"title":"Nice Tool"},"inputSchema":{"type":"object","properties":{"filePath":{}}}}"#
            .into(),
    )
    .unwrap();
    let t = ToolText::from_tool("s", &raw).unwrap();
    assert_eq!(t.title.as_deref(), Some("Nice Tool"));
    assert_eq!(t.params, ["filePath"]);
    assert!(ToolText::from_tool("s", &RawValue::from_string("{}".into()).unwrap()).is_none());
}

#[derive(Deserialize)]
struct Capture {
    server: String,
    tools: Vec<Box<RawValue>>,
}

#[derive(Deserialize)]
struct Queries {
    queries: Vec<Query>,
}

#[derive(Deserialize)]
struct Query {
    query: String,
    expected: Vec<String>,
}

/// The captured tools of every server in the corpus, in file name order.
fn corpus() -> Vec<(String, Box<RawValue>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/search/corpus");
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    let mut tools = Vec::new();
    for file in files {
        let capture: Capture = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        tools.extend(capture.tools.into_iter().map(|t| (capture.server.clone(), t)));
    }
    tools
}

#[test]
fn users_queries_find_their_tool_in_the_captured_corpus() {
    let raw = corpus();
    assert!(raw.len() >= 200, "the corpus has {} tools; it should have at least 200", raw.len());
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/search/queries.json");
    let queries: Queries = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    assert!(queries.queries.len() >= 30);
    let (mut first, mut top3, mut misses) = (0, 0, Vec::new());
    let started = Instant::now();
    for q in &queries.queries {
        // What the daemon does per request: read the cached tool objects, then rank.
        let tools: Vec<ToolText> = raw.iter().filter_map(|(server, t)| ToolText::from_tool(server, t)).collect();
        let hits = rank(&tools, std::slice::from_ref(&q.query));
        let names: Vec<String> =
            hits.iter().take(3).map(|(i, _)| format!("{}.{}", tools[*i].server, tools[*i].name)).collect();
        let at = names.iter().position(|n| q.expected.contains(n));
        match at {
            Some(0) => first += 1,
            _ => misses.push(format!("{:?}: expected {:?}, got {:?}", q.query, q.expected, names)),
        }
        if at.is_some() {
            top3 += 1;
        }
    }
    let per_query = started.elapsed() / queries.queries.len() as u32;
    let n = queries.queries.len();
    println!(
        "search corpus: {} tools, {n} queries: first {first}/{n} ({:.0}%), top 3 {top3}/{n} ({:.0}%), {per_query:?} per query",
        raw.len(),
        100.0 * first as f64 / n as f64,
        100.0 * top3 as f64 / n as f64,
    );
    for m in &misses {
        println!("  not first: {m}");
    }
    assert!(first * 10 >= n * 9, "first place for {first} of {n} queries, under 90%");
    assert_eq!(top3, n, "every query's tool is in the top 3");
}
