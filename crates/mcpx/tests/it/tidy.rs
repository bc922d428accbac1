//! The tidy tests: they read the workspace's source and fail when an architecture
//! invariant that can be seen there breaks (ARCHITECTURE.md, "Invariants that hold
//! across crates"), or when `docs/security.md` names a test that does not exist. Each check prints every violation with its file and line, and says
//! how to fix it. They start no process and open no socket.
//!
//! Test code is outside every check but the `/proc` one: `#[cfg(test)]` and
//! `#[cfg(feature = "test-hooks")]` code, `#[test]` functions, files reached only
//! through them (`tests.rs`), the integration tests, and the fake server.

mod graph;
mod source;

use std::collections::BTreeSet;
use std::path::Path;

use graph::{SourceFile, Workspace, circles};
use source::{Tok, Token};

/// The crate the import-circle check leaves out: a test fixture, not the product.
const FAKE_SERVER: &str = "mcpx-fake-server";

/// How many elementary cycles are printed per circle.
const CYCLES_SHOWN: usize = 12;

fn workspace() -> &'static Workspace {
    static WS: std::sync::OnceLock<Workspace> = std::sync::OnceLock::new();
    WS.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap();
        Workspace::load(&root)
    })
}

/// Fails with every violation of one invariant, and what to do about it.
#[track_caller]
fn report(invariant: &str, violations: &[String], fix: &str) {
    assert!(
        violations.is_empty(),
        "Architecture invariant broken: {invariant}\n\n{}\n\n{fix}\n",
        violations.join("\n")
    );
}

/// Production files of crates other than the fake server.
fn product(ws: &Workspace) -> impl Iterator<Item = &SourceFile> {
    ws.files.iter().filter(|f| !f.test && !f.rel.starts_with(&format!("crates/{FAKE_SERVER}/")))
}

/// Check 1: no module of any crate but the fake server imports another that imports
/// it back, directly or around a circle. A module is a file; an edge goes from A to B
/// when A's production code names a path into B, child to parent included.
#[test]
fn no_import_circles_between_modules() {
    let ws = workspace();
    let mut violations = Vec::new();
    for tree in ws.crates.iter().filter(|t| t.name != FAKE_SERVER) {
        let edges = tree.edges(ws);
        let pairs: BTreeSet<_> = edges.keys().cloned().collect();
        for (members, cycles) in circles(&pairs, CYCLES_SHOWN) {
            let name = |m: &graph::ModPath| tree.short(ws, m);
            let listed: Vec<String> = members.iter().map(name).collect();
            violations.push(format!("{}: a circle among {}", tree.src, listed.join(", ")));
            for cycle in &cycles {
                violations.push(format!("    {}", cycle.iter().map(name).collect::<Vec<_>>().join(" -> ")));
            }
            violations.push("  because".to_owned());
            for ((from, to), why) in edges.iter().filter(|((a, b), _)| members.contains(a) && members.contains(b)) {
                violations.push(format!("    {} -> {}: {} names `{}`", name(from), name(to), why.place, why.path));
            }
        }
    }
    report(
        "no two modules import each other, directly or around a circle",
        &violations,
        "To break a circle, move what both sides need into a module of its own that imports neither \
         (or pass it in: a parameter, a trait the caller implements), so every import points one way. \
         A child module must not reach back into its parent's items while the parent uses the child: \
         give those items a module of their own.",
    );
}

/// Check 2: the string `/proc` appears in no source file outside `mcpx-platform`; the
/// integration tests may read `/proc` to check processes from the outside.
#[test]
fn only_the_platform_crate_reads_proc() {
    let ws = workspace();
    let allowed = ["crates/mcpx-platform/", "crates/mcpx/tests/"];
    let violations: Vec<String> = ws
        .files
        .iter()
        .filter(|f| !allowed.iter().any(|a| f.rel.starts_with(a)))
        .flat_map(|f| {
            f.text
                .lines()
                .enumerate()
                .filter(|(_, line)| line.contains("/proc"))
                .map(move |(n, line)| format!("{}:{}: {}", f.rel, n + 1, line.trim()))
        })
        .collect();
    report(
        "nothing outside mcpx-platform reads /proc",
        &violations,
        "Ask mcpx-platform for the fact instead (process_start_time, liveness, boot_id, ...), \
         adding a function there, with its macOS counterpart, when the fact is new.",
    );
}

/// The names of the transports' own types and functions, which nothing above
/// `transport/` may name.
const TRANSPORT_OWN: [&str; 10] = [
    "RemoteLauncher",
    "SupervisedLauncher",
    "DirectLauncher",
    "AttachConn",
    "AttachFailure",
    "ConnError",
    "FrameReader",
    "FrameWriter",
    "reap_orphan",
    "stdin_frames",
];

/// Check 3: nothing above `transport/` names a transport's own module or type. The
/// daemon library outside `transport/` and the binary (whose daemon process builds the
/// launchers with `Launchers::new`) see only what `transport/mod.rs` offers.
#[test]
fn nothing_above_transport_names_a_transports_own_type() {
    let ws = workspace();
    let daemon = ws.crates.iter().find(|t| t.name == "mcpx-daemon").expect("the mcpx-daemon crate");
    let transports: BTreeSet<&str> =
        daemon.modules.keys().filter(|m| m.len() == 2 && m[0] == "transport").map(|m| m[1].as_str()).collect();
    let above = |rel: &str| {
        let in_daemon = rel.starts_with("crates/mcpx-daemon/src/")
            && !rel.starts_with("crates/mcpx-daemon/src/transport/")
            && rel != "crates/mcpx-daemon/src/transport.rs";
        in_daemon || rel.starts_with("crates/mcpx/src/")
    };
    // (file, line, what): a path naming a transport module, or a transport's own name
    // that no such path on the same line already shows.
    let mut found: Vec<(String, usize, String)> = Vec::new();
    for f in product(ws).filter(|f| above(&f.rel)) {
        let line = |at: usize| source::line_of(&f.text, at);
        for r in f.facts.uses.iter().chain(&f.facts.paths) {
            if r.segs.windows(2).any(|w| w[0] == "transport" && transports.contains(w[1].as_str())) {
                found.push((f.rel.clone(), line(r.at), r.segs.join("::")));
            }
        }
        for t in &f.facts.tokens {
            let Tok::Ident(name) = &t.kind else { continue };
            let shown = |(rel, n, path): &(String, usize, String)| {
                *rel == f.rel && *n == line(t.at) && path.ends_with(name.as_str())
            };
            if TRANSPORT_OWN.contains(&name.as_str()) && !found.iter().any(shown) {
                found.push((f.rel.clone(), line(t.at), name.clone()));
            }
        }
    }
    found.sort();
    found.dedup();
    let violations: Vec<String> = found.iter().map(|(rel, n, what)| format!("{rel}:{n}: names `{what}`")).collect();
    report(
        "nothing above transport/ names a transport's own type",
        &violations,
        &format!(
            "Outside crates/mcpx-daemon/src/transport/, use only what transport/mod.rs offers (the Link, \
             the Launcher trait, the transport error); move what a caller needs behind that interface. \
             The binary builds the launchers with Launchers::new. The transports: {transports:?}; their own names: \
             {TRANSPORT_OWN:?}."
        ),
    );
}

/// Writes that do not go through `write_atomic`, each allowed in files under a path
/// prefix when its statement contains a snippet (whitespace ignored), with the reason.
/// The files that cannot be written atomically (the logs and the lock) are opened
/// with `Dir::open_file`: in their directory's descriptor, `O_NOFOLLOW`, mode 0600.
const WRITES_ALLOWED: [(&str, &str, &str); 8] = [
    (
        "crates/mcpx-daemon/src/log_file.rs",
        "open_file(LOG, FileUse::Append)",
        "daemon.log is an append-only log, opened with O_NOFOLLOW and mode 0600: nothing is rewritten; \
         at its cap it is renamed aside (renameat in the state directory) and a new one is opened the same way",
    ),
    (
        "crates/mcpx/src/foreground.rs",
        "open_file(LOCK, FileUse::Lock)",
        "daemon.lock is opened (created when missing, O_NOFOLLOW, 0600) only to hold a flock(2) on it; it is never written",
    ),
    (
        "crates/mcpx/src/trust.rs",
        "open_file(TRUST_LOCK, FileUse::Lock)",
        "trust.lock is opened (created when missing, O_NOFOLLOW, 0600) only to hold a flock(2) while `mcpx trust` or `mcpx untrust` changes trust.json; it is never written",
    ),
    (
        "crates/mcpx/src/import.rs",
        "open_file(IMPORT_LOCK, FileUse::Lock)",
        "import.lock is opened (created when missing, O_NOFOLLOW, 0600) only to hold a flock(2) while `mcpx import` edits the config; it is never written",
    ),
    (
        "crates/mcpx-platform/src/secrets/file.rs",
        "open_file(SECRETS_LOCK, FileUse::Lock)",
        "secrets.lock is opened (created when missing, O_NOFOLLOW, 0600) only to hold a flock(2) on it; it is never written",
    ),
    (
        "crates/mcpx-supervisor/src/log.rs",
        "open_file(name, mcpx_platform::fs::FileUse::Append)",
        "supervisors.log is an append-only log, opened with O_NOFOLLOW and mode 0600: nothing is rewritten",
    ),
    (
        "crates/mcpx-supervisor/src/",
        r#".open("/dev/null")"#,
        "the supervisor points its standard streams at /dev/null: nothing is stored",
    ),
    (
        "crates/mcpx-daemon/src/transport/",
        "fs::write(marker",
        "the marker of the MCPX_TEST_PAUSE_MID_MESSAGE test hook, which only the test-hooks feature reaches",
    ),
];

/// The one place that writes persisted files.
const WRITE_ATOMIC: &str = "crates/mcpx-platform/src/fs.rs";

/// Check 4: persisted files are written only through `mcpx_platform::fs::write_atomic`:
/// no `fs::write`, `File::create`, `OpenOptions` that writes, creates, appends or
/// truncates, `tracing_appender::rolling` (it opens its file by path), or
/// `Dir::open_file` (a write that cannot be atomic), outside `fs.rs`, test code and the
/// allowed writes above.
#[test]
fn persisted_files_are_written_only_through_write_atomic() {
    let ws = workspace();
    let mut violations = Vec::new();
    for f in product(ws).filter(|f| f.rel != WRITE_ATOMIC) {
        let tokens = &f.facts.tokens;
        for k in 0..tokens.len() {
            let what = match path3(tokens, k) {
                Some(("fs", "write")) => "fs::write",
                Some(("File", "create")) => "File::create",
                Some(("OpenOptions", "new") | ("File", "options")) => "OpenOptions",
                Some(("rolling", _)) => "tracing_appender::rolling",
                _ if tokens[k].kind == Tok::Ident("open_file".to_owned())
                    && tokens.get(k + 1).is_some_and(|t| t.kind == Tok::Punct("(")) =>
                {
                    "Dir::open_file"
                }
                _ => continue,
            };
            let end = statement_end(tokens, k);
            let modes: Vec<&str> = (k..end)
                .filter(|&j| tokens[j].kind == Tok::Punct("."))
                .filter_map(|j| match &tokens[j + 1..(j + 5).min(end)] {
                    [m, open, value, close]
                        if open.kind == Tok::Punct("(")
                            && value.kind == Tok::Ident("true".to_owned())
                            && close.kind == Tok::Punct(")") =>
                    {
                        match &m.kind {
                            Tok::Ident(m) => {
                                ["write", "create", "create_new", "append", "truncate"].into_iter().find(|w| w == m)
                            }
                            _ => None,
                        }
                    }
                    _ => None,
                })
                .collect();
            if what == "OpenOptions" && modes.is_empty() {
                continue;
            }
            let until = tokens.get(end).map_or(f.text.len(), |t| t.at);
            let statement = &f.text[tokens[k].at..until];
            let squeezed = |s: &str| s.split_whitespace().collect::<String>();
            let allowed = WRITES_ALLOWED.iter().any(|(prefix, snippet, _)| {
                f.rel.starts_with(prefix) && squeezed(statement).contains(&squeezed(snippet))
            });
            if !allowed {
                let modes = if modes.is_empty() { String::new() } else { format!(" ({})", modes.join(", ")) };
                let statement = statement.split_whitespace().collect::<Vec<_>>().join(" ");
                violations.push(format!("{}: {what}{modes}: {statement}", f.place(tokens[k].at)));
            }
        }
    }
    report(
        "persisted files are written only through mcpx_platform::fs::write_atomic",
        &violations,
        "Write the file with mcpx_platform::fs::write_atomic(dir, name, bytes, mode) (a temporary file, fsync, \
         renameat in the checked directory), so a crash never leaves half a file and no link is followed. \
         A write that stores nothing, only appends to a log, or holds a lock uses Dir::open_file and goes \
         into WRITES_ALLOWED in crates/mcpx/tests/it/tidy.rs, with its reason.",
    );
}

/// The one place that builds processes.
const SPAWN: &str = "crates/mcpx-platform/src/process.rs";

/// Check 5: `Command::new` appears only in `mcpx_platform::process` and in test code
/// (`clippy.toml` forbids it elsewhere; this makes it visible in the suite).
#[test]
fn every_process_is_built_by_the_one_spawn_function() {
    let ws = workspace();
    let violations: Vec<String> = product(ws)
        .filter(|f| f.rel != SPAWN)
        .flat_map(|f| {
            let tokens = &f.facts.tokens;
            (0..tokens.len())
                .filter(|&k| path3(tokens, k) == Some(("Command", "new")))
                .map(|k| format!("{}: Command::new", f.place(tokens[k].at)))
                .collect::<Vec<_>>()
        })
        .collect();
    report(
        "every process is built by mcpx_platform::process::command",
        &violations,
        "Describe the process with a mcpx_platform::process::SpawnSpec and build it with \
         mcpx_platform::process::command (or spawn), which clears the environment and detaches as asked.",
    );
}

/// Check 6: every test `docs/security.md` names exists. The last cell of each table
/// row there names tests: `module::test` for `crates/mcpx/tests/it/<module>.rs`, or
/// `<crate path>.rs::test` for a file under `crates/`.
#[test]
fn every_test_docs_security_names_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let doc = std::fs::read_to_string(root.join("docs/security.md")).unwrap();
    let mut named = 0;
    let mut violations = Vec::new();
    for (i, line) in doc.lines().enumerate() {
        let row = line.trim().strip_prefix('|').and_then(|l| l.strip_suffix('|'));
        let Some(cell) = row.and_then(|r| r.rsplit('|').next()) else { continue };
        for name in cell.split('`').skip(1).step_by(2) {
            let Some((module, test)) = name.rsplit_once("::") else { continue };
            let file = if module.ends_with(".rs") {
                root.join("crates").join(module)
            } else {
                root.join("crates/mcpx/tests/it").join(format!("{}.rs", module.replace("::", "/")))
            };
            named += 1;
            if !std::fs::read_to_string(&file).is_ok_and(|text| text.contains(&format!("fn {test}("))) {
                violations.push(format!("docs/security.md:{}: `{name}`: no `fn {test}` in {}", i + 1, file.display()));
            }
        }
    }
    assert!(named >= 10, "docs/security.md names only {named} tests: is its table format still `| ... | test |`?");
    report(
        "every test docs/security.md names exists",
        &violations,
        "Name the test as it is (`module::test` for crates/mcpx/tests/it/<module>.rs, `<crate path>.rs::test` \
         otherwise), or restore the test the row relies on.",
    );
}

/// Where the daemon reads the options that decide what a configuration offers: the
/// policy point, and the configuration that parses and defines them.
const POLICY_READERS: [&str; 2] = ["crates/mcpx-daemon/src/policy.rs", "crates/mcpx-config/src/"];

/// The options [`POLICY_READERS`] alone read: `disabled`, `includeTools`, `excludeTools`,
/// and whether a project file's entry is trusted.
const POLICY_OPTIONS: [&str; 5] = ["disabled", "include_tools", "exclude_tools", "tool_allowed", "trusted"];

/// Check 7: trust, `disabled` and `includeTools`/`excludeTools` are read in one place,
/// `mcpx_daemon::policy`, which every path that lists or reaches a server asks: no
/// other production code reads `.trusted`, `.disabled`, `.include_tools`, `.exclude_tools` or
/// calls `.tool_allowed`.
#[test]
fn only_the_policy_point_reads_disabled_and_the_tool_filters() {
    let ws = workspace();
    let violations: Vec<String> = product(ws)
        .filter(|f| !POLICY_READERS.iter().any(|r| f.rel.starts_with(r)))
        .flat_map(|f| {
            let tokens = &f.facts.tokens;
            tokens
                .windows(2)
                .filter(|w| w[0].kind == Tok::Punct("."))
                .filter_map(|w| match &w[1].kind {
                    Tok::Ident(name) if POLICY_OPTIONS.contains(&name.as_str()) => {
                        Some(format!("{}: .{name}", f.place(w[1].at)))
                    }
                    _ => None,
                })
                .collect::<Vec<_>>()
        })
        .collect();
    report(
        "only mcpx_daemon::policy reads `trusted`, `disabled`, `includeTools` and `excludeTools`",
        &violations,
        "Ask mcpx_daemon::policy instead (offered, server_offered, server_trusted, tool_offered, check_trusted, \
         check_server, check_tool), so \
         every path refuses and filters the same way.",
    );
}

/// The two names of `a::b` at token `k`, if there is such a path there.
fn path3(tokens: &[Token], k: usize) -> Option<(&str, &str)> {
    match &tokens[k..(k + 3).min(tokens.len())] {
        [
            Token { kind: Tok::Ident(a), .. },
            Token { kind: Tok::Punct("::"), .. },
            Token { kind: Tok::Ident(b), .. },
        ] => Some((a, b)),
        _ => None,
    }
}

/// The index of the `;` or `{` that ends the statement around token `k` (nested
/// parentheses and brackets skipped), or of the delimiter that closes around it.
fn statement_end(tokens: &[Token], k: usize) -> usize {
    let mut depth = 0usize;
    for (j, t) in tokens.iter().enumerate().skip(k) {
        match t.kind {
            Tok::Punct("(" | "[") => depth += 1,
            Tok::Punct(")" | "]" | "}") if depth == 0 => return j,
            Tok::Punct(")" | "]") => depth -= 1,
            Tok::Punct(";" | "{") if depth == 0 => return j,
            _ => {}
        }
    }
    tokens.len()
}

/// The tidy machinery itself, on small made-up sources.
mod tests {
    use super::graph::{Workspace, circles};
    use super::source::{Tok, facts, lex};
    use std::collections::BTreeSet;

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
        let uses: Vec<(Vec<String>, Option<String>)> =
            f.uses.iter().map(|u| (u.segs.clone(), u.binds.clone())).collect();
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
}
