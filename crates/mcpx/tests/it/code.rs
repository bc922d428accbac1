//! Code mode: `mcpx run`, `mcpx exec` and `mcpx serve --code` with Deno (pinned in
//! e2e/package.json): tool calls through the channel, what is printed, the type check,
//! every escape the sandbox refuses, and the time and memory limits.

use serde_json::json;

use crate::harness::{World, e2e_dir};

/// A world with the fake server and Deno from e2e/.
fn code_world() -> World {
    let mut w = World::new(json!({}));
    w.set_servers(json!({ "fake": { "command": w.fake_server() } }));
    w.env.push(("MCPX_DENO".to_owned(), deno()));
    w
}

fn deno() -> String {
    e2e_dir().join("node_modules/.bin/deno").display().to_string()
}

#[test]
fn exec_calls_tools_prints_what_it_returns_and_logs_to_stderr() {
    let w = code_world();
    let run =
        w.run(&["exec", "console.log('working'); const r = await fake.echo({ message: 'hi' }); return r.content"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&run.stdout).unwrap(),
        json!([{ "text": "hi", "type": "text" }])
    );
    assert!(run.stderr.contains("working"), "{}", run.stderr);
    // Strings print as text; calls may run concurrently.
    let code = "const [a, b] = await Promise.all([fake.echo({ message: 'a' }), fake.echo({ message: 'b' })]);\n\
                const text = (r: CallToolResult) => r.content.map((c) => (c.type === 'text' ? c.text : '')).join('');\n\
                return text(a) + text(b)";
    assert_eq!(w.run(&["exec", code]).ok(), "ab\n");
    // Nothing returned prints nothing.
    assert_eq!(w.run(&["exec", "--no-check", "await fake.echo({ message: 'x' })"]).ok(), "");
}

#[test]
fn run_prints_the_default_export_and_passes_arguments() {
    let w = code_world();
    let script = w.path("script.ts");
    std::fs::write(
        &script,
        "const r = await fake.echo({ message: Deno.args.join(' ') });\nexport default { said: r.content[0].text };\n",
    )
    .unwrap();
    let out = w.run(&["run", script.to_str().unwrap(), "one", "--two"]).ok();
    assert_eq!(serde_json::from_str::<serde_json::Value>(&out).unwrap(), json!({ "said": "one --two" }));
}

#[test]
fn a_tool_error_rejects_and_an_is_error_result_too_unless_raw() {
    let w = code_world();
    // An unknown tool: the daemon's error, with its kind.
    let run = w.run(&["exec", "--no-check", "try { await fake.nope({}) } catch (e) { return `${e.name} ${e.kind}` }"]);
    assert_eq!(run.ok(), "ToolError unknown_tool\n");
    // The fake's echo without `message` is an `isError` result.
    let run = w.run(&[
        "exec",
        "--no-check",
        "try { await fake.echo({}) } catch (e) { return e.kind + ' ' + e.result.isError }",
    ]);
    assert_eq!(run.ok(), "tool true\n");
    let run = w.run(&["exec", "--no-check", "return (await mcpx.raw(fake.echo)({})).isError"]);
    assert_eq!(run.ok(), "true\n");
    // Uncaught, it fails the script: exit 1, the error on stderr.
    let run = w.run(&["exec", "--no-check", "await fake.nope({})"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("the script failed: ToolError") && run.stderr.contains("nope"), "{}", run.stderr);
}

#[test]
fn a_type_error_is_refused_before_running_with_the_line() {
    let w = code_world();
    let marker = w.path("ran");
    let code = format!(
        "await Deno.writeTextFile({:?}, 'x');\nconst n: number = 'text';\nreturn n",
        marker.display().to_string()
    );
    let run = w.run(&["exec", "--allow-write", w.dir.path().to_str().unwrap(), &code]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("does not type-check"), "{}", run.stderr);
    assert!(run.stderr.contains("TS2322") && run.stderr.contains("<code>:2:7"), "{}", run.stderr);
    assert!(!marker.exists(), "the script ran");
    // In a file, the file's own path and line.
    let script = w.path("bad.ts");
    std::fs::write(&script, "// one\nconst n: number = 'text';\nexport default n;\n").unwrap();
    let run = w.run(&["run", script.to_str().unwrap()]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains(&format!("{}:2:7", script.display())), "{}", run.stderr);
    // --no-check runs it anyway.
    assert_eq!(w.run(&["run", "--no-check", script.to_str().unwrap()]).ok(), "text\n");
}

/// Each escape fails the script (exit 1) with the sandbox's reason.
#[test]
fn escapes_are_refused_with_a_clear_error() {
    let w = code_world();
    // A listener the fetch would reach: it must see no connection at all.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let allowed = w.path("allowed");
    std::fs::create_dir(&allowed).unwrap();
    let outside = w.path("outside.txt");
    let sock = w.path("run/daemon.sock");
    let cases = [
        ("await Deno.readTextFile('/etc/passwd')", "Requires read access to \"/etc/passwd\"", "reads no files"),
        (&*format!("await fetch('http://127.0.0.1:{port}/')"), "Requires net access", "has no network"),
        ("await fetch('https://example.com/')", "Requires net access to \"example.com:443\"", "has no network"),
        ("return Deno.env.get('HOME')", "Requires env access", "has no environment"),
        ("new Deno.Command('/bin/sh', { args: ['-c', 'true'] }).spawn()", "Requires run access", "starts no processes"),
        (
            &*format!("await Deno.writeTextFile({:?}, 'x')", outside.display().to_string()),
            "Requires write access",
            "writes no files",
        ),
        (
            &*format!("await Deno.connect({{ transport: 'unix', path: {:?} }})", sock.display().to_string()),
            "Requires read access",
            "reads no files",
        ),
    ];
    for (code, refused, hint) in cases {
        let run = w.run(&["exec", "--no-check", "--allow-write", allowed.to_str().unwrap(), code]);
        assert_eq!(run.code, 1, "{code}: {run:?}");
        assert!(run.stderr.contains(refused) && run.stderr.contains(hint), "{code}: {}", run.stderr);
        assert!(run.stderr.contains("<code>:1:"), "{code}: the place: {}", run.stderr);
    }
    assert!(listener.accept().is_err(), "the fetch reached the listener");
    assert!(!outside.exists());
    // At a file's top level, the refusal is worded the same.
    let file = w.path("top.ts");
    std::fs::write(&file, "export default Deno.readTextFileSync('/etc/passwd').length\n").unwrap();
    let run = w.run(&["run", "--no-check", file.to_str().unwrap()]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr.contains("mcpx: the script failed: NotCapable") && run.stderr.contains("reads no files"),
        "{run:?}"
    );
    assert!(!run.stderr.contains("Uncaught"), "{}", run.stderr);
    // Inside the allowed directory, writing works.
    let inside = allowed.join("in.txt");
    let code = format!("await Deno.writeTextFile({:?}, 'ok'); return 'written'", inside.display().to_string());
    assert_eq!(w.run(&["exec", "--no-check", "--allow-write", allowed.to_str().unwrap(), &code]).ok(), "written\n");
    assert_eq!(std::fs::read_to_string(&inside).unwrap(), "ok");
}

/// The channel carries tool calls only: a script that writes a control request on
/// it is stopped, and the daemon never sees it.
#[test]
fn the_control_api_is_out_of_reach() {
    let w = code_world();
    w.call("fake.echo", r#"{"message":"up"}"#).ok();
    let pid = w.daemon_pid().unwrap();
    let code = "Deno.stdout.writeSync(new TextEncoder().encode(JSON.stringify({ path: '/v1/stop', all: true }) + '\\n'));\n\
                await new Promise(() => {})";
    let run = w.run(&["exec", "--no-check", "--timeout", "20s", code]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("carries tool calls only"), "{}", run.stderr);
    // A call frame smuggling a path is refused the same way.
    let code = "Deno.stdout.writeSync(new TextEncoder().encode(JSON.stringify({ call: 1, server: 'fake', tool: 'echo', path: '/v1/stop' }) + '\\n'));\n\
                await new Promise(() => {})";
    let run = w.run(&["exec", "--no-check", "--timeout", "20s", code]);
    assert!(run.stderr.contains("carries tool calls only"), "{}", run.stderr);
    assert_eq!(w.daemon_pid(), Some(pid));
    assert_eq!(w.call("fake.echo", r#"{"message":"still"}"#).ok(), "still\n");
}

#[test]
fn a_runaway_loop_and_a_memory_hog_are_stopped_and_the_daemon_keeps_serving() {
    let w = code_world();
    let started = std::time::Instant::now();
    let run = w.run(&["exec", "--no-check", "--timeout", "2s", "while (true) {}"]);
    assert_eq!(run.code, 5, "{run:?}");
    assert!(run.stderr.contains("ran longer than 2s"), "{}", run.stderr);
    assert!(started.elapsed() < std::time::Duration::from_secs(30));
    let run = w.run(&[
        "exec",
        "--no-check",
        "--max-memory",
        "64MiB",
        "const a = []; while (true) a.push({ n: Math.random(), s: 'x'.repeat(64) })",
    ]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("ran out of memory") && run.stderr.contains("64 MiB"), "{}", run.stderr);
    assert_eq!(w.call("fake.echo", r#"{"message":"alive"}"#).ok(), "alive\n");
    // No sandbox process is left.
    let left = w.run(&["exec", "--no-check", "return 'again'"]).ok();
    assert_eq!(left, "again\n");
}

#[test]
fn output_is_cut_at_its_limit_with_a_note() {
    let w = code_world();
    let run = w.run(&[
        "exec",
        "--no-check",
        "--max-output",
        "1KiB",
        "console.log('y'.repeat(5000)); return 'x'.repeat(5000)",
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.stdout.trim_end().len(), 1024);
    assert!(run.stderr.contains("the answer was cut at 1024 bytes"), "{}", run.stderr);
    assert!(run.stderr.contains("log output was cut at 1024 bytes"), "{}", run.stderr);
}

#[test]
fn without_deno_it_says_how_to_install_it() {
    let mut w = code_world();
    w.env.retain(|(k, _)| k != "MCPX_DENO");
    w.env.push(("PATH".to_owned(), "/nonexistent".to_owned()));
    let run = w.run(&["exec", "return 1"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr.contains("Deno is not installed") && run.stderr.contains("npm install -g deno"),
        "{}",
        run.stderr
    );
}

#[test]
fn a_wrong_mcpx_deno_is_named() {
    let mut w = code_world();
    w.env.retain(|(k, _)| k != "MCPX_DENO");
    w.env.push(("MCPX_DENO".to_owned(), "/nonexistent/deno".to_owned()));
    let run = w.run(&["exec", "return 1"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("MCPX_DENO is /nonexistent/deno, which is not an executable file"), "{}", run.stderr);
    // An executable that is not Deno runs, says nothing and is named.
    w.env.retain(|(k, _)| k != "MCPX_DENO");
    w.env.push(("MCPX_DENO".to_owned(), "/bin/true".to_owned()));
    let run = w.run(&["exec", "return 1"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("printed nothing: check that /bin/true is Deno"), "{}", run.stderr);
}

/// A world with server-filesystem (rooted in the world) and server-memory.
fn two_servers() -> World {
    let mut w = World::new(json!({}));
    let e2e = e2e_dir();
    let bin = |name: &str| e2e.join("node_modules/.bin").join(name).display().to_string();
    let root = w.path("files");
    std::fs::create_dir(&root).unwrap();
    std::fs::write(root.join("facts.txt"), "Ada wrote the first program\nGrace built a compiler\n").unwrap();
    w.set_servers(json!({
        "files": { "command": bin("mcp-server-filesystem"), "args": [root] },
        "memory": { "command": bin("mcp-server-memory"), "env": { "MEMORY_FILE_PATH": w.path("memory.jsonl") } },
    }));
    w.env.push(("MCPX_DENO".to_owned(), deno()));
    w
}

/// Reads a file with server-filesystem and stores one entity per line in
/// server-memory, then reads the graph back: the chain, as the body of `exec`.
const CHAIN: &str = "const file = await files.read_text_file({ path: FILE });
const text = file.content;
const entities = text.trim().split('\\n').map((line: string) => ({
  name: line.split(' ')[0], entityType: 'person', observations: [line],
}));
await memory.create_entities({ entities });
const graph = await memory.read_graph({});
return graph.entities.map((e: { name: string }) => e.name).sort();";

#[test]
fn a_script_chains_calls_across_two_servers_by_run_and_by_exec() {
    let w = two_servers();
    let file = w.path("files/facts.txt").display().to_string();
    let code = CHAIN.replace("FILE", &format!("{file:?}"));
    let out = w.run(&["exec", &code]).ok();
    assert_eq!(serde_json::from_str::<serde_json::Value>(&out).unwrap(), json!(["Ada", "Grace"]));
    let script = w.path("chain.ts");
    std::fs::write(&script, format!("export default async function () {{\n{code}\n}}\n")).unwrap();
    let out = w.run(&["run", "--no-check", script.to_str().unwrap()]).ok();
    assert_eq!(serde_json::from_str::<serde_json::Value>(&out).unwrap(), json!(["Ada", "Grace"]));
}

#[test]
fn serve_code_offers_two_tools_and_runs_the_chain_for_the_python_sdk() {
    let w = two_servers();
    let e2e = e2e_dir();
    let file = w.path("files/facts.txt").display().to_string();
    let code = CHAIN.replace("FILE", &format!("{file:?}"));
    let cmd = w.command();
    // The `initialize` era, then a client pinned to 2026-07-28 (no `initialize`).
    for (mode, protocol) in [(None, "2025-11-25"), (Some("2026-07-28"), "2026-07-28")] {
        #[allow(clippy::disallowed_methods)] // Reason: the Python SDK client under test.
        let mut py = std::process::Command::new(e2e.join(".venv/bin/python"));
        py.arg(e2e.join("sdk_code_client.py")).arg(crate::harness::mcpx_bin()).arg(&code).args(mode);
        py.envs(cmd.get_envs().filter_map(|(k, v)| v.map(|v| (k.to_owned(), v.to_owned())))).current_dir(w.dir.path());
        let run = crate::harness::Run::of(py, "sdk_code_client.py");
        assert_eq!(run.code, 0, "{protocol}: {}", run.stderr);
        let seen: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
        assert_eq!(seen["protocol"], protocol, "{seen}");
        assert_eq!(seen["tools"], json!(["mcpx_exec", "mcpx_types"]));
        assert!(seen["types"].as_str().unwrap().contains("memory"), "{seen}");
        assert_eq!(seen["exec_error"], false, "{seen}");
        let returned: serde_json::Value = serde_json::from_str(seen["exec"].as_str().unwrap()).unwrap();
        assert_eq!(returned, json!(["Ada", "Grace"]), "{protocol}");
        // An escape is the tool's error, and the session goes on.
        assert_eq!(seen["escape_error"], true, "{seen}");
        assert!(seen["escape"].as_str().unwrap().contains("Requires read access"), "{seen}");
    }
}

/// `--unsafe-node`: Node's permission model under the kernel's confinement, no type check,
/// and it says what is open (more with `--unconfined`).
#[test]
fn unsafe_node_runs_under_nodes_permission_model_and_says_what_is_left_open() {
    let mut w = code_world();
    let bin = e2e_dir().join("node_modules/.bin");
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    w.env.push(("PATH".to_owned(), path));
    let run =
        w.run(&["exec", "--unsafe-node", "const r = await fake.echo({ message: 'node' }); return r.content[0].text"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.stdout, "node\n");
    assert!(
        run.stderr.contains("without a type check") && run.stderr.contains("the kernel still confines it"),
        "{}",
        run.stderr
    );
    // A Node older than 22 (a stand-in that says it is 20) is named, not run.
    let old = w.path("old-node");
    std::fs::create_dir(&old).unwrap();
    std::fs::write(old.join("node"), "#!/bin/sh\necho v20.20.2\n").unwrap();
    std::fs::set_permissions(old.join("node"), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let run = w.run_with(&["exec", "--unsafe-node", "return 1"], |cmd| {
        cmd.env("PATH", format!("{}:/usr/bin:/bin", old.display()));
    });
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("needs Node 22 or later") && run.stderr.contains("v20.20.2"), "{}", run.stderr);
    let run = w.run(&["exec", "--unsafe-node", "--unconfined", "return 'open'"]);
    assert_eq!(run.stdout, "open\n", "{run:?}");
    assert!(run.stderr.contains("left open: the network") && run.stderr.contains("--unconfined"), "{}", run.stderr);
    let run = w.run(&[
        "exec",
        "--unsafe-node",
        "const fs = await import('node:fs'); return fs.readFileSync('/etc/passwd', 'utf8')",
    ]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("Access to this API has been restricted"), "{}", run.stderr);
}

/// `serve --code --server S`: the declarations and the calls of `S` only.
#[test]
fn serve_code_with_server_offers_that_server_only() {
    let mut w = code_world();
    let fake = w.fake_server();
    w.set_servers(json!({ "fake": { "command": fake }, "other": { "command": fake } }));
    w.env.push(("MCPX_DENO".to_owned(), deno()));
    let mut serve = crate::harness::Serve::start_args(&w, &["--code", "--server", "fake"], json!({}));
    let listed = serve.request("tools/list", json!({}));
    let names: Vec<&str> =
        listed["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["mcpx_types", "mcpx_exec"]);
    let types = serve.request("tools/call", json!({ "name": "mcpx_types", "arguments": {} }));
    let text = types["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("fake") && !text.contains("other"), "{text}");
    let code = "const [c] = (await fake.echo({ message: 'mine' })).content;\nreturn c.type === 'text' ? c.text : ''";
    let ran = serve.request("tools/call", json!({ "name": "mcpx_exec", "arguments": { "code": code } }));
    assert_eq!(ran["result"]["content"][0]["text"], "mine", "{ran}");
    assert_eq!(ran["result"]["isError"], false);
    let code = "try { await (globalThis as any).other.echo({ message: 'x' }) } catch (e) { return String(e) }";
    let ran = serve.request("tools/call", json!({ "name": "mcpx_exec", "arguments": { "code": code } }));
    let text = ran["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("TypeError") || text.contains("only `fake`"), "{text}");
    // A type error is the tool's error, with the line.
    let ran = serve.request(
        "tools/call",
        json!({ "name": "mcpx_exec", "arguments": { "code": "const n: number = 'x';\nreturn n" } }),
    );
    assert_eq!(ran["result"]["isError"], true, "{ran}");
    assert!(ran["result"]["content"][0]["text"].as_str().unwrap().contains("<code>:1:7"), "{ran}");
    // Malformed messages are answered as `mcpx serve` answers them (C16, C19).
    serve.send(json!({ "jsonrpc": "2.0", "id": null, "method": "tools/list" }));
    let refused = serve.recv();
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    assert!(refused["error"]["message"].as_str().unwrap().contains("invalid request id"), "{refused}");
    serve.send(json!([{ "jsonrpc": "2.0", "id": 5, "method": "tools/list" }]));
    let refused = serve.recv();
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    assert!(refused["error"]["message"].as_str().unwrap().contains("batches are not allowed"), "{refused}");
}

/// `mcpx_types` finds tools by words and names each hit as a script calls it.
#[test]
fn serve_code_search_names_what_a_script_calls() {
    let w = code_world();
    let fake = w.fake_server();
    w.set_servers(json!({ "my-fake": { "command": fake } }));
    assert_eq!(w.run(&["tools", "my-fake"]).code, 0);
    let mut serve = crate::harness::Serve::start_args(&w, &["--code"], json!({}));
    let found = serve.request("tools/call", json!({ "name": "mcpx_types", "arguments": { "search": "echo" } }));
    let text = found["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("my_fake.echo (server `my-fake`, tool `echo`)"), "{text}");
    let bad = serve.request(
        "tools/call",
        json!({ "name": "mcpx_exec", "arguments": { "code": "const n: number = 'x';\nreturn n" } }),
    );
    let text = bad["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("(fix it)") && !text.contains("--no-check"), "{text}");
}

/// What a script returns and logs goes through the terminal sanitizer, as every human
/// output does; a channel line without an end is cut at its limit, not held without
/// bound.
#[test]
fn output_is_escaped_and_a_channel_line_has_a_limit() {
    let w = code_world();
    let run = w.run(&["exec", "--no-check", "console.log('\\x1b]0;title\\x07 log'); return '\\x1b[2Kforged\\rline'"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.stdout, "\\e[2Kforged\\rline\n");
    assert!(run.stderr.contains("\\e]0;title\\x07 log") && !run.stderr.contains('\u{1b}'), "{:?}", run.stderr);
    let flood = "const b = new Uint8Array(16 << 20).fill(120); for (let i = 0; i < 5; i++) Deno.stdout.writeSync(b); await new Promise(() => {})";
    let run = w.run(&["exec", "--no-check", "--timeout", "60s", flood]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("a line of over 64 MiB on its channel"), "{}", run.stderr);
}
