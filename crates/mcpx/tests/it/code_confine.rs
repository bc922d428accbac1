//! Code mode's confinement (docs/security.md, "Code mode"): every way a script could
//! reach a file, a socket, a process, the environment or a signal outside what it may,
//! each run twice: with Deno's permission flags, and with them switched off
//! (`MCPX_TEST_RUNTIME_FLAGS_OFF`, which also skips the graph check), so the kernel
//! alone is shown to hold. Each refused script exits 1 naming what was refused, and
//! the secret's text appears nowhere in mcpx's output nor in the daemon's log.

use std::path::Path;

use serde_json::json;

use crate::harness::{World, e2e_dir};

/// The text of every file a script must not read.
const SECRET: &str = "MCPX-SECRET-7c1e9a";

/// One script that tries to escape, and the words its refusal must contain (any one
/// of each group).
struct Escape {
    what: &'static str,
    /// `exec` code, or a `run` file's text (`File`).
    script: Script,
    /// Extra flags of `exec`/`run`.
    flags: Vec<String>,
    /// Each group: the refusal names at least one of these.
    names: Vec<Vec<String>>,
}

enum Script {
    Exec(String),
    File(String),
}

/// A world with the fake server, Deno, and beside them: `secret.txt`, `secret.json` and
/// `secret.js` (outside every allowed directory); `allowed/` (read), holding links to
/// the secret and to the world's directory; `writable/` (write), holding a link to the
/// secret; an environment variable whose value is the secret.
struct Fixture {
    w: World,
}

impl Fixture {
    fn new() -> Fixture {
        let mut w = World::new(json!({}));
        w.set_servers(json!({ "fake": { "command": w.fake_server() } }));
        w.env.push(("MCPX_DENO".to_owned(), e2e_dir().join("node_modules/.bin/deno").display().to_string()));
        w.env.push(("MCPX_TEST_ENV_SECRET".to_owned(), SECRET.to_owned()));
        std::fs::write(w.path("secret.txt"), SECRET).unwrap();
        std::fs::write(w.path("secret.json"), json!({ "k": SECRET }).to_string()).unwrap();
        std::fs::write(
            w.path("secret.js"),
            format!("export default {SECRET:?};\nif (typeof WorkerGlobalScope !== 'undefined') self.postMessage({SECRET:?});\n"),
        )
        .unwrap();
        for dir in ["allowed", "writable", "both"] {
            std::fs::create_dir(w.path(dir)).unwrap();
        }
        std::fs::write(w.path("allowed/ok.txt"), "fine").unwrap();
        std::os::unix::fs::symlink(w.path("secret.txt"), w.path("allowed/link.txt")).unwrap();
        std::os::unix::fs::symlink(w.dir.path(), w.path("allowed/up")).unwrap();
        std::os::unix::fs::symlink(w.path("secret.txt"), w.path("writable/link.txt")).unwrap();
        Fixture { w }
    }

    fn p(&self, sub: &str) -> String {
        self.w.path(sub).display().to_string()
    }

    fn flag(&self, name: &str, sub: &str) -> Vec<String> {
        vec![name.to_owned(), self.p(sub)]
    }

    /// Runs each escape with Deno's flags on and off; each must exit 1, name its
    /// refusal, and leak nothing.
    fn refuse_all(&self, escapes: &[Escape]) {
        for flags_off in [false, true] {
            for e in escapes {
                self.refuse(e, flags_off);
            }
        }
        assert_eq!(std::fs::read_to_string(self.w.path("secret.txt")).unwrap(), SECRET, "the secret was changed");
        let log = self.w.log();
        assert!(!log.contains(SECRET), "the daemon's log holds the secret");
    }

    fn refuse(&self, e: &Escape, flags_off: bool) {
        let mode = if flags_off { "kernel alone" } else { "with Deno's flags" };
        let mut args: Vec<String> = Vec::new();
        match &e.script {
            Script::Exec(code) => {
                args.extend(["exec".to_owned(), "--no-check".to_owned(), "--timeout".to_owned(), "30s".to_owned()]);
                args.extend(e.flags.iter().cloned());
                args.push(code.clone());
            }
            Script::File(text) => {
                // In `allowed/`, so that `../secret.txt` is the world's secret.
                let file = self.w.path("allowed/script.ts");
                std::fs::write(&file, text).unwrap();
                args.extend(["run".to_owned(), "--no-check".to_owned(), "--timeout".to_owned(), "30s".to_owned()]);
                args.extend(e.flags.iter().cloned());
                args.push(file.display().to_string());
            }
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let run = self.w.run_with(&args, |cmd| {
            if flags_off {
                cmd.env("MCPX_TEST_RUNTIME_FLAGS_OFF", "1");
            }
        });
        let all = format!("{}{}", run.stdout, run.stderr);
        assert!(!all.contains(SECRET), "{} ({mode}): the secret leaked: {run:?}", e.what);
        assert_eq!(run.code, 1, "{} ({mode}): {run:?}", e.what);
        for group in &e.names {
            assert!(
                group.iter().any(|n| run.stderr.contains(n.as_str())),
                "{} ({mode}): {group:?} not named: {}",
                e.what,
                run.stderr
            );
        }
    }
}

fn exec(what: &'static str, code: impl Into<String>, names: &[&[&str]]) -> Escape {
    Escape { what, script: Script::Exec(code.into()), flags: Vec::new(), names: groups(names) }
}

fn file(what: &'static str, text: impl Into<String>, names: &[&[&str]]) -> Escape {
    Escape { what, script: Script::File(text.into()), flags: Vec::new(), names: groups(names) }
}

fn groups(names: &[&[&str]]) -> Vec<Vec<String>> {
    names.iter().map(|g| g.iter().map(|n| (*n).to_owned()).collect()).collect()
}

impl Escape {
    fn with(mut self, flags: Vec<String>) -> Escape {
        self.flags.extend(flags);
        self
    }
}

/// How each layer words a refused read: Deno's flags, the graph check, the kernel.
const READ: &[&str] = &["Requires read access", "outside what it may read", "os error 13", "EACCES", "leads to"];
const WRITE: &[&str] = &["Requires write access", "os error 13", "os error 18", "os error 1)"];

fn url(path: &str) -> String {
    format!("file://{path}")
}

#[test]
fn the_file_system_api_reads_nothing_outside() {
    let f = Fixture::new();
    let secret = f.p("secret.txt");
    let escapes = [
        exec("readTextFile", format!("return await Deno.readTextFile({secret:?})"), &[READ, &["secret.txt"]]),
        exec(
            "readFileSync",
            format!("return new TextDecoder().decode(Deno.readFileSync({secret:?}))"),
            &[READ, &["secret.txt"]],
        ),
        exec(
            "open and read",
            format!(
                "const f = await Deno.open({secret:?}); const b = new Uint8Array(64); const n = await f.read(b); return new TextDecoder().decode(b.subarray(0, n ?? 0))"
            ),
            &[READ, &["secret.txt"]],
        ),
        exec("a path relative to the working directory", "return await Deno.readTextFile('secret.txt')", &[READ]),
        exec(
            "listing a directory",
            format!("return [...Deno.readDirSync({:?})].map((e) => e.name).join(',')", f.p("")),
            &[READ],
        ),
        exec(
            "node:fs",
            format!("const fs = await import('node:fs'); return fs.readFileSync({secret:?}, 'utf8')"),
            &[READ, &["secret.txt"]],
        ),
        exec(
            "a link inside an --allow-read directory",
            format!("return await Deno.readTextFile({:?})", f.p("allowed/link.txt")),
            &[READ, &["link.txt"]],
        )
        .with(f.flag("--allow-read", "allowed")),
        exec(
            "a directory link inside an --allow-read directory",
            format!("return await Deno.readTextFile({:?})", f.p("allowed/up/secret.txt")),
            &[READ, &["secret.txt"]],
        )
        .with(f.flag("--allow-read", "allowed")),
        exec(
            "a link inside an --allow-write directory",
            format!("return await Deno.readTextFile({:?})", f.p("writable/link.txt")),
            &[READ, &["link.txt"]],
        )
        .with(f.flag("--allow-write", "writable")),
        exec(
            "/proc/self/root",
            format!("return await Deno.readTextFile('/proc/self/root{secret}')"),
            &[READ, &["/proc/self/root"]],
        ),
        exec(
            "/proc/self/cwd",
            "return await Deno.readTextFile('/proc/self/cwd/secret.txt')",
            &[READ, &["/proc/self/cwd"]],
        ),
        exec("/proc/self/environ", "return await Deno.readTextFile('/proc/self/environ')", &[READ, &["environ"]]),
        // The cache other runs compiled their modules into.
        exec(
            "the shared Deno cache",
            format!("return [...Deno.readDirSync({:?})].map((e) => e.name).join(',')", f.p("cache/deno")),
            &[READ],
        ),
    ];
    f.refuse_all(&escapes);
}

/// `/proc/<pid>/` of the daemon and of the CLI that runs the script: their
/// environments (which hold the secret), roots, working directories and memory.
#[test]
fn other_processes_proc_files_are_closed() {
    let f = Fixture::new();
    f.w.call("fake.echo", r#"{"message":"up"}"#).ok();
    let daemon = f.w.daemon_pid().unwrap();
    let secret = f.p("secret.txt");
    let mut escapes = Vec::new();
    for pid in [daemon.to_string(), "' + Deno.ppid + '".to_owned()] {
        escapes.extend([
            exec("/proc/<pid>/environ", format!("return await Deno.readTextFile('/proc/{pid}/environ')"), &[READ]),
            exec("/proc/<pid>/root", format!("return await Deno.readTextFile('/proc/{pid}/root{secret}')"), &[READ]),
            exec("/proc/<pid>/cwd", format!("return await Deno.readTextFile('/proc/{pid}/cwd/secret.txt')"), &[READ]),
            exec("/proc/<pid>/mem", format!("const f = await Deno.open('/proc/{pid}/mem'); return 'opened'"), &[READ]),
        ]);
    }
    f.refuse_all(&escapes);
}

#[test]
fn no_import_form_loads_a_file_outside() {
    let f = Fixture::new();
    let (secret, json_file, js) = (f.p("secret.txt"), f.p("secret.json"), f.p("secret.js"));
    let encoded = url(&secret).replace("secret.txt", "%73ecret%2Etxt");
    // From the run directory (`<run>/code/<id>/`), three levels up is the world's.
    let dotted = "../../../secret.txt";
    let escapes = [
        file(
            "static text import",
            format!("import s from {secret:?} with {{ type: 'text' }};\nexport default s;\n"),
            &[READ, &["secret"]],
        ),
        file(
            "static json import",
            format!("import s from {json_file:?} with {{ type: 'json' }};\nexport default s;\n"),
            &[READ, &["secret"]],
        ),
        file("static module import", format!("import s from {js:?};\nexport default s;\n"), &[READ, &["secret"]]),
        file(
            "static import by file: URL",
            format!("import s from {:?} with {{ type: 'text' }};\nexport default s;\n", url(&secret)),
            &[READ, &["secret"]],
        ),
        file(
            "static import with ..",
            "import s from '../secret.txt' with { type: 'text' };\nexport default s;\n".to_owned(),
            &[READ, &["secret"]],
        )
        .with(f.flag("--allow-read", "allowed")),
        file("re-export", format!("export {{ default }} from {js:?};\n"), &[READ, &["secret"]]),
        exec(
            "dynamic import with a literal",
            format!("return (await import({secret:?}, {{ with: {{ type: 'text' }} }})).default"),
            &[READ, &["secret"]],
        ),
        exec(
            "dynamic json import",
            format!("return (await import({json_file:?}, {{ with: {{ type: 'json' }} }})).default"),
            &[READ, &["secret"]],
        ),
        exec("dynamic module import", format!("return (await import({js:?})).default"), &[READ, &["secret"]]),
        exec(
            "dynamic import with a computed path",
            format!(
                "const p = [{:?}, 'secret' + '.txt'].join('/'); return (await import(p, {{ with: {{ type: 'text' }} }})).default",
                f.p("")
            ),
            &[READ, &["secret"]],
        ),
        exec(
            "dynamic import of a file: URL",
            format!("return (await import({:?}, {{ with: {{ type: 'text' }} }})).default", url(&secret)),
            &[READ, &["secret"]],
        ),
        exec(
            "dynamic import with ..",
            format!("return (await import({dotted:?}, {{ with: {{ type: 'text' }} }})).default"),
            &[READ, &["secret"]],
        ),
        exec(
            "a percent-encoded path",
            format!("return (await import({encoded:?}, {{ with: {{ type: 'text' }} }})).default"),
            &[READ, &["ecret"]],
        ),
        exec(
            "an import through a link in --allow-read",
            format!("return (await import({:?}, {{ with: {{ type: 'text' }} }})).default", f.p("allowed/link.txt")),
            &[READ, &["link.txt"]],
        )
        .with(f.flag("--allow-read", "allowed")),
        exec(
            "an import through a directory link in --allow-read",
            format!(
                "return (await import({:?}, {{ with: {{ type: 'text' }} }})).default",
                f.p("allowed/up/secret.txt")
            ),
            &[READ, &["secret"]],
        )
        .with(f.flag("--allow-read", "allowed")),
        exec(
            "an import through /proc/self/root",
            format!("return (await import('/proc/self/root{secret}', {{ with: {{ type: 'text' }} }})).default"),
            &[READ, &["secret"]],
        ),
    ];
    f.refuse_all(&escapes);
}

#[test]
fn workers_load_and_read_nothing_outside() {
    let f = Fixture::new();
    let (secret, js) = (f.p("secret.txt"), f.p("secret.js"));
    let worker = |module: &str| {
        format!(
            "return await new Promise((resolve, reject) => {{\n\
               const w = new Worker({module}, {{ type: 'module' }});\n\
               w.onmessage = (e) => {{ w.terminate(); resolve(String(e.data)); }};\n\
               w.onerror = (e) => {{ e.preventDefault(); w.terminate(); reject(new Error('the worker failed: ' + e.message)); }};\n\
             }})"
        )
    };
    let reader =
        format!("'data:text/javascript,' + encodeURIComponent('self.postMessage(Deno.readTextFileSync({secret:?}))')");
    let escapes = [
        exec("a worker from a file outside", worker(&format!("{:?}", url(&js))), &[READ, &["secret"]]),
        exec(
            "a worker from a path with ..",
            worker("new URL('../../../secret.js', import.meta.url).href"),
            &[READ, &["secret"]],
        ),
        exec("a worker that reads a file", worker(&reader), &[READ, &["secret"]]),
    ];
    f.refuse_all(&escapes);
}

#[test]
fn nothing_is_written_outside_the_allowed_directories() {
    let f = Fixture::new();
    let (secret, outside) = (f.p("secret.txt"), f.p("written.txt"));
    let escapes = [
        exec("writeTextFile", format!("await Deno.writeTextFile({outside:?}, 'x'); return 'written'"), &[WRITE]),
        exec("mkdir", format!("await Deno.mkdir({:?}); return 'made'", f.p("made")), &[WRITE]),
        exec("remove", format!("await Deno.remove({secret:?}); return 'removed'"), &[WRITE]),
        exec("truncate", format!("await Deno.truncate({secret:?}); return 'cut'"), &[WRITE]),
        exec(
            "planting a module in the shared Deno cache",
            format!("await Deno.writeTextFile({:?}, 'x'); return 'planted'", f.p("cache/deno/planted.js")),
            &[WRITE],
        ),
        // Metadata through a link in a writable directory: mode, owner, times.
        exec(
            "chmod through a link in --allow-write",
            format!("await Deno.chmod({:?}, 0o666); return 'changed'", f.p("writable/link.txt")),
            &[&[WRITE, &["Requires write access", "os error 1)"]].concat()],
        )
        .with(f.flag("--allow-write", "writable")),
        exec(
            "utime through a link in --allow-write",
            format!("await Deno.utime({:?}, 0, 0); return 'changed'", f.p("writable/link.txt")),
            &[&[WRITE, &["os error 1)"]].concat()],
        )
        .with(f.flag("--allow-write", "writable")),
        exec(
            "chown through a link in --allow-write",
            format!("await Deno.chown({:?}, 0, 0); return 'changed'", f.p("writable/link.txt")),
            &[&[WRITE, &["os error 1)"]].concat()],
        )
        .with(f.flag("--allow-write", "writable")),
        exec(
            "a write through a link in --allow-write",
            format!("await Deno.writeTextFile({:?}, 'x'); return 'written'", f.p("writable/link.txt")),
            &[WRITE],
        )
        .with(f.flag("--allow-write", "writable")),
        exec(
            "moving the secret into an allowed directory",
            format!(
                "await Deno.rename({secret:?}, {:?}); return await Deno.readTextFile({:?})",
                f.p("both/moved"),
                f.p("both/moved")
            ),
            &[&[READ, WRITE].concat()],
        )
        .with([f.flag("--allow-read", "both"), f.flag("--allow-write", "both")].concat()),
        exec(
            "a hard link to the secret in a readable and writable directory",
            format!(
                "await Deno.link({secret:?}, {:?}); return await Deno.readTextFile({:?})",
                f.p("both/hard"),
                f.p("both/hard")
            ),
            &[&[READ, WRITE].concat()],
        )
        .with([f.flag("--allow-read", "both"), f.flag("--allow-write", "both")].concat()),
    ];
    f.refuse_all(&escapes);
    for made in ["written.txt", "made", "both/moved", "both/hard", "cache/deno/planted.js"] {
        assert!(!f.w.path(made).exists(), "{made} was made");
    }
    let secret = std::fs::metadata(f.w.path("secret.txt")).unwrap();
    assert_eq!(std::os::unix::fs::PermissionsExt::mode(&secret.permissions()) & 0o777, 0o644, "its mode changed");
    assert!(secret.modified().unwrap().elapsed().unwrap() < std::time::Duration::from_secs(3600), "its time changed");
}

/// A local listener proves that no connection was made; the daemon's and a
/// supervisor's sockets are refused like any other.
#[test]
fn no_connection_is_made() {
    let f = Fixture::new();
    f.w.call("fake.echo", r#"{"message":"up"}"#).ok();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let supervisor = std::fs::read_dir(f.w.path("run/sup"))
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "sock"))
        .expect("a supervisor's socket");
    let net: &[&str] = &["Requires net access", "os error 1)", "Operation not permitted", "tcp open error"];
    let unix: &[&str] = &["Requires read access", "Requires write access", "os error 1)"];
    let escapes = [
        exec("fetch", format!("return await (await fetch('http://127.0.0.1:{port}/')).text()"), &[net]),
        exec(
            "Deno.connect",
            format!("await Deno.connect({{ hostname: '127.0.0.1', port: {port} }}); return 'connected'"),
            &[net],
        ),
        exec(
            "WebSocket",
            format!(
                "return await new Promise((resolve, reject) => {{ const ws = new WebSocket('ws://127.0.0.1:{port}/'); \
                 ws.onopen = () => resolve('open'); ws.onerror = (e) => reject(new Error('websocket: ' + (e.message ?? e.type))); }})"
            ),
            &[net],
        ),
        exec(
            "node:net",
            format!(
                "const net = await import('node:net'); return await new Promise((resolve, reject) => {{ const s = net.connect({port}, '127.0.0.1', () => resolve('connected')); s.on('error', reject); }})"
            ),
            &[&["os error 1)", "EPERM", "EACCES", "Requires net access", "NotCapable"]],
        ),
        exec("Deno.listen", "Deno.listen({ hostname: '127.0.0.1', port: 0 }); return 'listening'", &[net]),
        exec(
            "the daemon's socket",
            format!(
                "await Deno.connect({{ transport: 'unix', path: {:?} }}); return 'connected'",
                f.p("run/daemon.sock")
            ),
            &[unix],
        ),
        exec(
            "a supervisor's socket",
            format!(
                "await Deno.connect({{ transport: 'unix', path: {:?} }}); return 'connected'",
                supervisor.display().to_string()
            ),
            &[unix],
        ),
    ];
    f.refuse_all(&escapes);
    assert!(listener.accept().is_err(), "a script reached the listener");
}

#[test]
fn no_process_is_started_and_no_one_is_signalled() {
    let f = Fixture::new();
    f.w.call("fake.echo", r#"{"message":"up"}"#).ok();
    let daemon = f.w.daemon_pid().unwrap();
    let marker = f.p("spawned");
    let run: &[&str] = &["Requires run access", "os error 1)", "EPERM", "NotCapable"];
    let escapes = [
        exec(
            "Deno.Command",
            format!("new Deno.Command('/bin/sh', {{ args: ['-c', 'echo x > {marker}'] }}).outputSync(); return 'ran'"),
            &[run],
        ),
        exec(
            "Deno itself again",
            "new Deno.Command(Deno.execPath(), { args: ['--version'] }).outputSync(); return 'ran'",
            &[run],
        ),
        exec(
            "node:child_process",
            format!("const cp = await import('node:child_process'); cp.execSync('echo x > {marker}'); return 'ran'"),
            // Deno's Node layer words a refused spawn this way, naming the command.
            &[&[run, &["Command failed: echo x"]].concat()],
        ),
        exec("signalling the daemon", format!("Deno.kill({daemon}, 'SIGKILL'); return 'sent'"), &[run]),
        exec("signalling the CLI", "Deno.kill(Deno.ppid, 'SIGKILL'); return 'sent'", &[run]),
        exec(
            "node:process.kill",
            format!("const p = await import('node:process'); p.kill({daemon}, 'SIGKILL'); return 'sent'"),
            &[run],
        ),
    ];
    f.refuse_all(&escapes);
    assert!(!Path::new(&marker).exists(), "a process ran");
    assert_eq!(f.w.daemon_pid(), Some(daemon));
    assert_eq!(f.w.call("fake.echo", r#"{"message":"alive"}"#).ok(), "alive\n");
}

/// The sandbox process starts with Deno's own settings only: with Deno's flags its
/// environment is refused; without them it holds nothing of the user's.
#[test]
fn the_environment_is_closed() {
    let f = Fixture::new();
    f.refuse(&exec("Deno.env", "return Deno.env.get('MCPX_TEST_ENV_SECRET')", &[&["Requires env access"]]), false);
    let run = f.w.run_with(&["exec", "--no-check", "return JSON.stringify(Deno.env.toObject())"], |cmd| {
        cmd.env("MCPX_TEST_RUNTIME_FLAGS_OFF", "1");
    });
    let env: serde_json::Value = serde_json::from_str(run.ok().trim()).unwrap();
    let names: Vec<&str> = env.as_object().unwrap().keys().map(String::as_str).collect();
    assert!(!env.to_string().contains(SECRET), "{env}");
    assert!(
        names.iter().all(|n| n.starts_with("DENO_") || ["NO_COLOR", "RUST_BACKTRACE", "PATH"].contains(n)),
        "{names:?}"
    );
}

/// What is allowed still works under the kernel: reading and writing the allowed
/// directories, a `run` file's own directory when allowed, and importing from it.
#[test]
fn what_is_allowed_still_works() {
    let f = Fixture::new();
    std::fs::write(f.w.path("allowed/helper.ts"), "export const n: number = 41;\n").unwrap();
    let script = f.w.path("allowed/main.ts");
    std::fs::write(
        &script,
        format!(
            "import {{ n }} from './helper.ts';\nimport ok from './ok.txt' with {{ type: 'text' }};\n\
             await Deno.writeTextFile({:?}, ok);\nexport default `${{n + 1}} ${{await Deno.readTextFile({:?})}}`;\n",
            f.p("writable/out.txt"),
            f.p("allowed/ok.txt")
        ),
    )
    .unwrap();
    let run =
        f.w.run(&["run", "--allow-read", &f.p("allowed"), "--allow-write", &f.p("writable"), script.to_str().unwrap()]);
    assert_eq!(run.ok(), "42 fine\n");
    assert_eq!(std::fs::read_to_string(f.w.path("writable/out.txt")).unwrap(), "fine");
}

/// On a kernel without Landlock (simulated), code mode refuses to run and says why;
/// `--unconfined` runs it and says what stays open; `mcpx doctor` says which applies.
#[test]
fn without_landlock_code_mode_refuses_unless_unconfined() {
    let f = Fixture::new();
    let doctor = f.w.run(&["doctor", "--json"]).json();
    let finding = |d: &serde_json::Value| {
        d["findings"].as_array().unwrap().iter().find(|x| x["check"] == "code-mode").cloned().unwrap()
    };
    let confined = finding(&doctor);
    assert_eq!(confined["level"], "ok", "{confined}");
    assert!(confined["message"].as_str().unwrap().contains("Landlock ABI"), "{confined}");
    let no_landlock = |cmd: &mut std::process::Command| {
        cmd.env("MCPX_TEST_LANDLOCK_ABI", "0");
    };
    let run = f.w.run_with(&["exec", "return 'ran'"], no_landlock);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stdout.is_empty());
    assert!(
        run.stderr.contains("only under the kernel's confinement") && run.stderr.contains("no Landlock"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("--unconfined"), "{}", run.stderr);
    let run = f.w.run_with(&["exec", "--unconfined", "return 'ran'"], no_landlock);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.stdout, "ran\n");
    assert!(
        run.stderr.contains("the kernel does not confine this script") && run.stderr.contains("the network"),
        "{}",
        run.stderr
    );
    // An ABI below 4 cannot close the network: no confinement either.
    let run = f.w.run_with(&["exec", "return 'ran'"], |cmd| {
        cmd.env("MCPX_TEST_LANDLOCK_ABI", "3");
    });
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("ABI 3"), "{}", run.stderr);
    let doctor = f.w.run_with(&["doctor", "--json"], no_landlock).json();
    let unconfined = finding(&doctor);
    assert_eq!(unconfined["level"], "warn", "{unconfined}");
    assert!(unconfined["message"].as_str().unwrap().contains("not confined"), "{unconfined}");
}

/// `serve --code`'s `mcpx_exec` runs under the same confinement, says so in its
/// description, and answers an escape as an `isError` result naming the refusal.
#[test]
fn serve_code_runs_scripts_under_the_same_confinement() {
    let f = Fixture::new();
    let secret = f.p("secret.txt");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    for flags_off in [false, true] {
        let mut cmd = f.w.command();
        if flags_off {
            cmd.env("MCPX_TEST_RUNTIME_FLAGS_OFF", "1");
        }
        cmd.args(["serve", "--code"]);
        let mut serve = crate::harness::Serve::start_cmd_args(cmd, json!({}));
        let listed = serve.request("tools/list", json!({}));
        let exec_tool =
            listed["result"]["tools"].as_array().unwrap().iter().find(|t| t["name"] == "mcpx_exec").unwrap();
        let description = exec_tool["description"].as_str().unwrap();
        assert!(
            description.contains("no file (not even by an import)") && description.contains("Landlock"),
            "{description}"
        );
        for code in [
            format!("return (await import({secret:?}, {{ with: {{ type: 'text' }} }})).default"),
            format!("return await Deno.readTextFile({secret:?})"),
            format!("return await (await fetch('http://127.0.0.1:{port}/')).text()"),
        ] {
            let ran = serve.request("tools/call", json!({ "name": "mcpx_exec", "arguments": { "code": code } }));
            assert_eq!(ran["result"]["isError"], true, "{code}: {ran}");
            let text = ran["result"]["content"][0]["text"].as_str().unwrap();
            assert!(!text.contains(SECRET), "{code}: {text}");
            assert!(
                ["Requires", "outside what it may read", "os error 13", "os error 1)"].iter().any(|n| text.contains(n)),
                "{code}: {text}"
            );
        }
    }
    assert!(listener.accept().is_err(), "a script reached the listener");
}
