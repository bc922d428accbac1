//! `mcpx types`: TypeScript declarations of the tools, snapshotted for the fake server,
//! server-everything and mcp-server-time, and type-checked with Deno (pinned in e2e/) for
//! every tool of five servers, with scripts that use them and scripts that misuse them.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::harness::{Run, World, e2e_dir};

/// The fake server with its schema fixture (`FAKE_SCHEMAS=1`), as `fake`.
fn fake_entry(w: &World) -> Value {
    json!({ "command": w.fake_server(), "env": { "FAKE_SCHEMAS": "1" } })
}

/// A world with the fake server and the real ones: server-everything, server-memory,
/// server-filesystem (serving the world's `files/`) and mcp-server-time.
fn real_world() -> World {
    let w = World::new(json!({}));
    let e2e = e2e_dir();
    let bin = |name: &str| e2e.join("node_modules/.bin").join(name).display().to_string();
    std::fs::create_dir(w.path("files")).unwrap();
    std::fs::write(w.path("files/notes.txt"), "mcpx keeps servers alive\n").unwrap();
    w.set_servers(json!({
        "fake": fake_entry(&w),
        "everything": { "command": bin("mcp-server-everything"), "args": ["stdio"] },
        "memory": { "command": bin("mcp-server-memory"), "env": { "MEMORY_FILE_PATH": w.path("memory.jsonl") } },
        "filesystem": { "command": bin("mcp-server-filesystem"), "args": [w.path("files")] },
        "time": { "command": e2e.join(".venv/bin/mcp-server-time").display().to_string(), "args": ["--local-timezone", "UTC"] },
    }));
    w
}

/// Runs `deno check` on `script` in the world, with a private `DENO_DIR`.
fn deno_check(w: &World, script: &Path) -> Run {
    let mut cmd = w.launcher().program(e2e_dir().join("node_modules/.bin/deno"));
    cmd.args(["check", "--quiet"]).arg(script).env("DENO_DIR", w.path("deno")).env("NO_COLOR", "1");
    Run::of(cmd, "deno check")
}

/// Writes `text` as `name` in the world's directory and returns its path.
fn write(w: &World, name: &str, text: &str) -> PathBuf {
    let path = w.path(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn the_fake_servers_declarations_and_their_names() {
    let w = World::new(json!({}));
    w.set_servers(json!({ "fake": fake_entry(&w), "never": { "command": w.fake_server() } }));
    // Named: started and listed first.
    let text = w.run(&["types", "fake"]).ok();
    insta::assert_snapshot!("fake", text);

    let answer = w.run(&["types", "fake", "--json"]).json();
    let names = answer["names"].as_array().unwrap();
    let find = |tool: &str| names.iter().find(|n| n["tool"] == tool).unwrap_or_else(|| panic!("{tool}: {answer}"));
    assert_eq!(find("get-item.v2")["function"], "get_item_v2");
    assert_eq!(find("get-item.v2")["structured"], true);
    assert_eq!(find("delete")["function"], "delete_");
    assert_eq!(find("odd schema")["function"], "odd_schema");
    assert_eq!(find("echo")["namespace"], "fake");
    assert_eq!(find("echo")["structured"], false);
    assert_eq!(answer["text"].as_str(), Some(text.as_str()));

    // All servers: from the cache only; the one never listed is named, not started.
    let all = w.run(&["types"]);
    assert_eq!(all.code, 0, "{all:?}");
    assert_eq!(all.stdout, text);
    assert!(all.stderr.contains("not declared, never listed: never"), "{}", all.stderr);
    assert!(w.instance("never").is_none());

    // --out replaces the file.
    let out = write(&w, "types.d.ts", "old");
    assert_eq!(w.run(&["types", "fake", "--out", out.to_str().unwrap()]).ok(), "");
    assert_eq!(std::fs::read_to_string(&out).unwrap(), text);

    let unknown = w.run(&["types", "nope"]);
    assert_eq!(unknown.code, 2, "{unknown:?}");
    assert!(unknown.stderr.contains("nope"), "{}", unknown.stderr);
}

#[test]
fn declarations_of_five_servers_type_check_with_deno() {
    let w = real_world();
    insta::assert_snapshot!("everything", w.run(&["types", "everything"]).ok());
    insta::assert_snapshot!("time", w.run(&["types", "time"]).ok());

    let decl = w.path("mcpx.d.ts");
    let servers = ["fake", "everything", "memory", "filesystem", "time"];
    let mut args = vec!["types"];
    args.extend(servers);
    args.extend(["--out", decl.to_str().unwrap()]);
    w.run(&args).ok();
    let text = std::fs::read_to_string(&decl).unwrap();
    // Every tool of every server is declared.
    let answer = w.run(&["types", "--json"]).json();
    for server in servers {
        let tools = w.run(&["tools", server, "--json"]).json();
        for tool in tools.as_array().unwrap() {
            let declared =
                answer["names"].as_array().unwrap().iter().any(|n| n["server"] == server && n["tool"] == tool["name"]);
            assert!(declared, "{server}.{} is not declared", tool["name"]);
            assert!(text.contains(&format!("@tool {}", tool["name"].as_str().unwrap())), "{server}.{}", tool["name"]);
        }
    }

    // The declarations alone type-check...
    let run = deno_check(&w, &decl);
    assert_eq!(run.code, 0, "deno check of the declarations failed:\n{}{}", run.stdout, run.stderr);
    // ...and so does a script that uses them, across servers.
    let good = write(
        &w,
        "good.ts",
        r#"/// <reference path="./mcpx.d.ts" />
const echoed: CallToolResult = await everything.echo({ message: "hi" });
const first: ContentBlock | undefined = echoed.content[0];
const item = await fake.get_item_v2({ id: "i-1", kind: "book", coords: [1, 2], tree: { label: "a", children: [{ label: "b" }] } });
const id: string = item.item.id;
const pair: [string, number] = item.pair;
await fake.delete_({ path: "/x", reason: "none", extra: 1 });
await fake.odd_schema({ anything: { x: 1 } });
const file = await filesystem.read_text_file({ path: "notes.txt" });
await memory.create_entities({ entities: [{ name: "mcpx", entityType: "project", observations: ["typed"] }] });
await time.get_current_time({ timezone: "UTC" });
export const seen = [first, id, pair, file];
"#,
    );
    let run = deno_check(&w, &good);
    assert_eq!(run.code, 0, "deno check of a good script failed:\n{}{}", run.stdout, run.stderr);

    // A script that misuses them is refused, each mistake at its line.
    let bad = write(
        &w,
        "bad.ts",
        r#"/// <reference path="./mcpx.d.ts" />
await everything.echo({ mesage: "hi" });
const n: number = (await fake.get_item_v2({ id: "i-1" })).item.id;
await fake.get_item_v2({ id: "i-1", kind: "car" });
await time.get_current_time({});
export {};
"#,
    );
    let run = deno_check(&w, &bad);
    assert_ne!(run.code, 0, "a bad script type-checked:\n{}{}", run.stdout, run.stderr);
    let out = format!("{}{}", run.stdout, run.stderr);
    for (line, code) in [(2, "TS2561"), (3, "TS2322"), (4, "TS2322"), (5, "TS2345")] {
        assert!(out.contains(code) && out.contains(&format!("bad.ts:{line}:")), "line {line} ({code}):\n{out}");
    }
}
