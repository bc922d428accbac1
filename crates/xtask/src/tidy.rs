//! The tidy checks: they read the workspace's source and report where an architecture
//! invariant that can be seen there breaks (ARCHITECTURE.md, "Invariants that hold
//! across crates"), where ARCHITECTURE.md no longer says what the tree holds, or when
//! `docs/security.md` names a test that does not exist. Each finding lists every
//! violation with its file and line, and says how to fix it. They build nothing of
//! the product, start no process and open no socket: `cargo xtask tidy` runs them
//! all, and `cargo test -p xtask` runs each as a test.
//!
//! Test code is outside every check but the `/proc` one: `#[cfg(test)]` and
//! `#[cfg(feature = "test-hooks")]` code, `#[test]` functions, files reached only
//! through them (`tests.rs`), the integration tests, and the fake server. Bans that
//! clippy can express (`Command::new` outside the one spawn function) are clippy's
//! `disallowed-methods`, in `clippy.toml`.

pub mod graph;
pub mod source;
#[cfg(test)]
mod tests;

use std::collections::BTreeSet;
use std::path::Path;

use graph::{SourceFile, Workspace, circles};
use source::{Tok, Token};

/// The crate the import-circle check leaves out: a test fixture, not the product.
const FAKE_SERVER: &str = "mcpx-fake-server";

/// How many elementary cycles are printed per circle.
const CYCLES_SHOWN: usize = 12;

/// The repository's root, where `crates/`, `docs/` and `ARCHITECTURE.md` are.
pub fn root() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap_or_else(|_| ".".into())
}

/// The repository's sources, read once.
pub fn workspace() -> &'static Workspace {
    static WS: std::sync::OnceLock<Workspace> = std::sync::OnceLock::new();
    WS.get_or_init(|| Workspace::load(&root()))
}

/// What one check found: the invariant, every violation (empty: it holds), and what to
/// do about them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The invariant, one line.
    pub invariant: String,
    /// Each violation, with its file and line.
    pub violations: Vec<String>,
    /// How to fix a violation.
    pub fix: String,
}

impl Finding {
    fn new(invariant: &str, violations: Vec<String>, fix: impl Into<String>) -> Finding {
        Finding { invariant: invariant.to_owned(), violations, fix: fix.into() }
    }
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Architecture invariant broken: {}\n\n{}\n\n{}\n",
            self.invariant,
            self.violations.join("\n"),
            self.fix
        )
    }
}

/// A check: its name and what it finds in a workspace.
pub type Check = (&'static str, fn(&Workspace) -> Finding);

/// Every check, in order.
pub const CHECKS: [Check; 10] = [
    ("no_import_circles_between_modules", no_import_circles_between_modules),
    ("only_the_platform_crate_reads_proc", only_the_platform_crate_reads_proc),
    ("nothing_above_transport_names_a_transports_own_type", nothing_above_transport_names_a_transports_own_type),
    ("persisted_files_are_written_only_through_write_atomic", persisted_files_are_written_only_through_write_atomic),
    ("every_test_docs_security_names_exists", every_test_docs_security_names_exists),
    (
        "only_the_policy_point_reads_disabled_and_the_tool_filters",
        only_the_policy_point_reads_disabled_and_the_tool_filters,
    ),
    ("every_source_file_is_named_in_the_architecture", every_source_file_is_named_in_the_architecture),
    ("no_file_is_over_700_lines_outside_tests", no_file_is_over_700_lines_outside_tests),
    ("transport_and_instance_never_import_the_endpoint", transport_and_instance_never_import_the_endpoint),
    ("the_architecture_names_no_file_that_is_gone", the_architecture_names_no_file_that_is_gone),
];

/// Production files of crates other than the fake server.
fn product(ws: &Workspace) -> impl Iterator<Item = &SourceFile> {
    ws.files.iter().filter(|f| !f.test && !f.rel.starts_with(&format!("crates/{FAKE_SERVER}/")))
}

/// Check 1: no module of any crate but the fake server imports another that imports
/// it back, directly or around a circle. A module is a file; an edge goes from A to B
/// when A's production code names a path into B, child to parent included.
pub fn no_import_circles_between_modules(ws: &Workspace) -> Finding {
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
    Finding::new(
        "no two modules import each other, directly or around a circle",
        violations,
        "To break a circle, move what both sides need into a module of its own that imports neither \
         (or pass it in: a parameter, a trait the caller implements), so every import points one way. \
         A child module must not reach back into its parent's items while the parent uses the child: \
         give those items a module of their own.",
    )
}

/// Check 2: the string `/proc` appears in no source file outside `mcpx-platform`; the
/// integration tests may read `/proc` to check processes from the outside, and this
/// check names it.
pub fn only_the_platform_crate_reads_proc(ws: &Workspace) -> Finding {
    let allowed = ["crates/mcpx-platform/", "crates/mcpx/tests/", "crates/xtask/"];
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
    Finding::new(
        "nothing outside mcpx-platform reads /proc",
        violations,
        "Ask mcpx-platform for the fact instead (process_start_time, liveness, boot_id, ...), \
         adding a function there, with its macOS counterpart, when the fact is new.",
    )
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
pub fn nothing_above_transport_names_a_transports_own_type(ws: &Workspace) -> Finding {
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
    Finding::new(
        "nothing above transport/ names a transport's own type",
        violations,
        format!(
            "Outside crates/mcpx-daemon/src/transport/, use only what transport/mod.rs offers (the Link, \
             the Launcher trait, the transport error); move what a caller needs behind that interface. \
             The binary builds the launchers with Launchers::new. The transports: {transports:?}; their own names: \
             {TRANSPORT_OWN:?}."
        ),
    )
}

/// Writes that do not go through `write_atomic`, each allowed in files under a path
/// prefix when its statement contains a snippet (whitespace ignored), with the reason.
/// The files that cannot be written atomically (the logs and the lock) are opened
/// with `Dir::open_file`: in their directory's descriptor, `O_NOFOLLOW`, mode 0600.
const WRITES_ALLOWED: [(&str, &str, &str); 9] = [
    (
        "crates/mcpx-daemon/src/activity/store.rs",
        "open_file(name, FileUse::ReadWrite)",
        "activity/record.persy is an embedded database (persy) opened with O_NOFOLLOW and mode 0600 and handed to it: \
         persy makes each commit durable and crash-safe itself (a journal, two-phase commit)",
    ),
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
        "crates/mcpx-config/src/trust.rs",
        "open_file(TRUST_LOCK, FileUse::Lock)",
        "trust.lock is opened (created when missing, O_NOFOLLOW, 0600) only to hold a flock(2) while `mcpx trust`, `mcpx untrust` or the dashboard changes trust.json; it is never written",
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
pub fn persisted_files_are_written_only_through_write_atomic(ws: &Workspace) -> Finding {
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
    Finding::new(
        "persisted files are written only through mcpx_platform::fs::write_atomic",
        violations,
        "Write the file with mcpx_platform::fs::write_atomic(dir, name, bytes, mode) (a temporary file, fsync, \
         renameat in the checked directory), so a crash never leaves half a file and no link is followed. \
         A write that stores nothing, only appends to a log, or holds a lock uses Dir::open_file and goes \
         into WRITES_ALLOWED in crates/xtask/src/tidy.rs, with its reason.",
    )
}

/// Check 5: every test `docs/security.md` names exists. The last cell of each table
/// row there names tests: `module::test` for `crates/mcpx/tests/it/<module>.rs`, or
/// `<crate path>.rs::test` for a file under `crates/`.
pub fn every_test_docs_security_names_exists(ws: &Workspace) -> Finding {
    let root = &ws.root;
    let doc = std::fs::read_to_string(root.join("docs/security.md")).unwrap_or_default();
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
    if named < 10 {
        violations
            .push(format!("docs/security.md names only {named} tests: is its table format still `| ... | test |`?"));
    }
    Finding::new(
        "every test docs/security.md names exists",
        violations,
        "Name the test as it is (`module::test` for crates/mcpx/tests/it/<module>.rs, `<crate path>.rs::test` \
         otherwise), or restore the test the row relies on.",
    )
}

/// Where the daemon reads the options that decide what a configuration offers: the
/// policy point, and the configuration that parses and defines them.
const POLICY_READERS: [&str; 2] = ["crates/mcpx-daemon/src/policy.rs", "crates/mcpx-config/src/"];

/// The options [`POLICY_READERS`] alone read: `disabled`, `includeTools`, `excludeTools`,
/// and whether a project file's entry is trusted.
const POLICY_OPTIONS: [&str; 5] = ["disabled", "include_tools", "exclude_tools", "tool_allowed", "trusted"];

/// Check 6: trust, `disabled` and `includeTools`/`excludeTools` are read in one place,
/// `mcpx_daemon::policy`, which every path that lists or reaches a server asks: no
/// other production code reads `.trusted`, `.disabled`, `.include_tools`, `.exclude_tools` or
/// calls `.tool_allowed`.
pub fn only_the_policy_point_reads_disabled_and_the_tool_filters(ws: &Workspace) -> Finding {
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
    Finding::new(
        "only mcpx_daemon::policy reads `trusted`, `disabled`, `includeTools` and `excludeTools`",
        violations,
        "Ask mcpx_daemon::policy instead (offered, server_offered, server_trusted, tool_offered, check_trusted, \
         check_server, check_tool), so \
         every path refuses and filters the same way.",
    )
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

/// The words of `text` set in backticks that may be file paths: each backticked span
/// cut at anything that cannot be in a path (`control/reach.rs::through_pool` gives
/// `control/reach.rs` and `through_pool`).
fn backticked_words(text: &str) -> BTreeSet<&str> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .flat_map(|span| span.split(|c: char| !(c.is_ascii_alphanumeric() || "_./-".contains(c))))
        .filter(|w| !w.is_empty())
        .collect()
}

/// A source file's crate and its path inside the crate's `src/`, for a file under
/// `crates/<crate>/src/`.
fn in_src(rel: &str) -> Option<(&str, &str)> {
    rel.strip_prefix("crates/")?.split_once("/src/")
}

/// The names ARCHITECTURE.md may give `rel`: its path from `crates/`, and its path in
/// its crate's `src/` when no other crate has a file there (`pool.rs`,
/// `control/reach.rs`; a `lib.rs` or a `tests.rs` needs its crate: `mcpx-api/src/lib.rs`).
fn names_of(ws: &Workspace, rel: &str) -> Vec<String> {
    let Some((krate, inner)) = in_src(rel) else { return Vec::new() };
    let mut names = vec![format!("{krate}/src/{inner}"), format!("crates/{krate}/src/{inner}")];
    let shared = ws.files.iter().filter(|f| in_src(&f.rel).is_some_and(|(_, i)| i == inner)).count() > 1;
    if !shared {
        names.push(inner.to_owned());
    }
    names
}

/// Check 7: every source file (`crates/<crate>/src/**.rs`) is named in ARCHITECTURE.md,
/// in backticks, by its path in its crate's `src/` (`pool.rs`, `control/reach.rs`) or,
/// when another crate has a file at that path, from `crates/` (`mcpx-api/src/lib.rs`).
pub fn every_source_file_is_named_in_the_architecture(ws: &Workspace) -> Finding {
    let words = backticked_words(&ws.architecture);
    let violations: Vec<String> = ws
        .files
        .iter()
        .filter(|f| in_src(&f.rel).is_some())
        .filter(|f| !names_of(ws, &f.rel).iter().any(|n| words.contains(n.as_str())))
        .map(|f| format!("{}: not named in ARCHITECTURE.md (as `{}`)", f.rel, names_of(ws, &f.rel).join("` or `")))
        .collect();
    Finding::new(
        "ARCHITECTURE.md names every source file",
        violations,
        "Say in ARCHITECTURE.md, in a line, what the file is for, naming it in backticks as shown; \
         or remove the file if nothing needs it.",
    )
}

/// Check 10: every `.rs` path ARCHITECTURE.md names in backticks is a file of the
/// tree (by one of the names check 7 accepts), so it names none that was moved or removed.
pub fn the_architecture_names_no_file_that_is_gone(ws: &Workspace) -> Finding {
    let known: BTreeSet<String> = ws.files.iter().flat_map(|f| names_of(ws, &f.rel)).collect();
    let suffixes: Vec<&str> = ws.files.iter().map(|f| f.rel.as_str()).collect();
    let violations: Vec<String> = backticked_words(&ws.architecture)
        .into_iter()
        .filter(|w| w.ends_with(".rs") && w.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| !known.contains(*w) && !suffixes.iter().any(|rel| rel.ends_with(&format!("/{w}"))))
        .map(|w| format!("ARCHITECTURE.md: `{w}`: no such file"))
        .collect();
    Finding::new(
        "ARCHITECTURE.md names no file that is gone",
        violations,
        "Name the file where it is now, or take out what the document says of it.",
    )
}

/// The most lines a source file may have outside its test-only items.
pub const MAX_LINES: usize = 700;

/// Check 8: no source file has over [`MAX_LINES`] lines outside its test-only items
/// (`#[cfg(test)] mod tests { … }`, `#[test]` functions); files that are test code
/// alone (`tests.rs`) are not counted.
pub fn no_file_is_over_700_lines_outside_tests(ws: &Workspace) -> Finding {
    let mut violations = Vec::new();
    for f in ws.files.iter().filter(|f| !f.test && in_src(&f.rel).is_some()) {
        let total = f.text.lines().count();
        let in_tests: usize = f
            .facts
            .test_items
            .iter()
            .map(|r| source::line_of(&f.text, r.end) - source::line_of(&f.text, r.start) + 1)
            .sum();
        let lines = total.saturating_sub(in_tests);
        if lines > MAX_LINES {
            violations.push(format!("{}: {lines} lines outside its tests", f.rel));
        }
    }
    Finding::new(
        &format!("no file is over {MAX_LINES} lines outside its tests"),
        violations,
        "Split the file along a seam it already has: a type and its methods, or a step of what it does, \
         into a module of its own (a child module when only this file uses it).",
    )
}

/// Check 9: nothing under the daemon's `transport/` or `instance/` (nor their
/// `transport.rs` and `instance.rs`) names a path into `mcp/`, the MCP endpoint built
/// on them: what both need (the protocol's facts) lives in `mcpx-proto`.
pub fn transport_and_instance_never_import_the_endpoint(ws: &Workspace) -> Finding {
    let below = |rel: &str| {
        ["transport", "instance"].iter().any(|m| {
            rel == format!("crates/mcpx-daemon/src/{m}.rs") || rel.starts_with(&format!("crates/mcpx-daemon/src/{m}/"))
        })
    };
    let mut violations = Vec::new();
    for f in product(ws).filter(|f| below(&f.rel)) {
        for r in f.facts.uses.iter().chain(&f.facts.paths) {
            if r.segs.len() >= 2 && r.segs[0] == "crate" && r.segs[1] == "mcp" {
                violations.push(format!("{}: names `{}`", f.place(r.at), r.segs.join("::")));
            }
        }
    }
    Finding::new(
        "transport/ and instance/ never import mcp/",
        violations,
        "Move what both need into mcpx-proto (a protocol fact) or into the module below both, \
         and import it from there.",
    )
}
