//! A server's `sandbox` (`docs/configuration.md`, "Sandbox") made into the kernel
//! confinement its process starts under ([`mcpx_platform::confine::Policy`]), which the
//! server's supervisor applies between `fork` and `exec` (or the daemon, for a server
//! with `supervised: false`).
//!
//! Every sandbox grants the system files any program needs
//! ([`confine::runtime_base`]), the program itself and, for a script, its interpreter
//! (the `#!` line, and the program `/usr/bin/env` names), read and run. Its `preset`
//! adds the runtime's own paths, those that exist:
//! - `binary`: nothing more;
//! - `node`: the `node` the server's `PATH` finds, its whole install (read and run),
//!   the `node_modules` tree the program is in (read and run), npm's cache `~/.npm` (read and
//!   write: `npx` keeps its packages there), and OpenSSL's configuration and the
//!   system's certificates (read);
//! - `python`: the install of the interpreter the program's virtual environment was
//!   made from (`home` in its `pyvenv.cfg`; else of the `python3` the server's `PATH`
//!   finds), read and run, the virtual environment (read and run), uv's cache
//!   `~/.cache/uv` (read and write: `uvx` keeps its packages there), and the system's
//!   certificates (read).
//!
//! With the network on, the resolver's files (`/etc/resolv.conf`, `/etc/hosts`,
//! `/etc/nsswitch.conf`, `/etc/gai.conf`) are readable too. Then come the entry's
//! `read` (read) and `write` (read and write) paths.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::io::Read;
use std::path::{Path, PathBuf};

use mcpx_platform::confine::{self, Access, Grant, Network, Policy};

use crate::config::{ExpandedSandbox, NetworkSpec, Preset, SandboxSpec, ServerEntry, TransportSpec};

/// Why `sandbox` cannot be applied as written: a path of its `read` or `write` that
/// does not exist (the kernel grants only what exists; the message names the path).
pub fn missing(sandbox: &ExpandedSandbox) -> Option<String> {
    let path = sandbox.read.iter().chain(&sandbox.write).find(|p| !p.exists())?;
    Some(format!(
        "its sandbox grants {}, which does not exist (make it, or take it out of `read`/`write`)",
        path.display()
    ))
}

/// The confinement of `program` (resolved), started with `env` (its whole
/// environment), under `sandbox`, whose paths exist ([`missing`]).
pub fn policy(sandbox: &ExpandedSandbox, program: &Path, env: &BTreeMap<OsString, OsString>) -> Policy {
    let mut grants = confine::runtime_base();
    let home = env.get(OsStr::new("HOME")).map(PathBuf::from);
    // A runtime the server's `PATH` finds, as its start finds its program.
    let path_var = env.get(OsStr::new("PATH")).and_then(|p| p.to_str()).map(str::to_owned);
    let which = |name: &str| crate::config::resolve_command(name, path_var.as_deref(), None).ok();
    let run = |path: &Path| Grant::new(path, Access::ReadExecute);
    grants.push(run(program));
    for interpreter in interpreters(program, &which) {
        grants.push(run(&interpreter));
    }
    let real = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_owned());
    match sandbox.spec.preset {
        Preset::Binary => {}
        Preset::Node => {
            // `<prefix>/bin/node`: the whole install (its own modules, npm, npx).
            if let Some(prefix) = which("node").map(|n| real(&n)).and_then(|n| n.parent()?.parent().map(Path::to_owned))
            {
                grants.push(run(&prefix));
            }
            if let Some(tree) = real(program).ancestors().find(|d| d.file_name() == Some(OsStr::new("node_modules"))) {
                grants.push(run(tree));
            }
            grants.extend(home.as_ref().map(|h| Grant::new(h.join(".npm"), Access::ReadWrite)));
            for file in ["/etc/ssl", "/usr/lib/ssl", "/usr/share/ca-certificates"] {
                grants.push(Grant::new(file, Access::Read));
            }
        }
        Preset::Python => {
            // The interpreter's install: the one the program's virtual environment was
            // made from (`home` in its `pyvenv.cfg`), else the `python3` on `PATH`.
            let venv = program.ancestors().find(|d| d.join("pyvenv.cfg").is_file()).map(Path::to_owned);
            let made_from = venv.as_ref().and_then(|v| venv_home(&v.join("pyvenv.cfg")));
            let prefix = made_from
                .or_else(|| which("python3").map(|p| real(&p)).and_then(|p| p.parent().map(Path::to_owned)))
                .and_then(|bin| bin.parent().map(Path::to_owned));
            grants.extend(prefix.map(|p| run(&real(&p))));
            grants.extend(venv.map(|v| run(&v)));
            grants.extend(home.as_ref().map(|h| Grant::new(h.join(".cache/uv"), Access::ReadWrite)));
            for file in ["/etc/ssl", "/usr/share/ca-certificates"] {
                grants.push(Grant::new(file, Access::Read));
            }
        }
    }
    let network = match &sandbox.spec.network {
        NetworkSpec::Off => Network::Closed,
        NetworkSpec::On => Network::Open,
        NetworkSpec::Ports { connect, bind } => Network::Ports { connect: connect.clone(), bind: bind.clone() },
    };
    if network != Network::Closed {
        for file in ["/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf", "/etc/gai.conf", "/etc/host.conf"] {
            grants.push(Grant::new(file, Access::Read));
        }
    }
    // The runtime's paths are granted when they exist; the entry's exist ([`missing`]).
    grants.retain(|g| g.path.exists());
    grants.extend(sandbox.read.iter().map(|p| Grant::new(p, Access::Read)));
    grants.extend(sandbox.write.iter().map(|p| Grant::new(p, Access::ReadWrite)));
    Policy { grants, network }
}

/// What a sandboxed server's failed start says of its sandbox: what confines it; that
/// the path or port refused cannot be named (the kernel's Landlock audit records are
/// not readable by an unprivileged process); what to widen; and for `npx`, `uvx`,
/// `bunx` or `pipx` with the network off, that they cannot download.
pub fn failure_note(sandbox: &SandboxSpec, entry: &ServerEntry) -> String {
    let mut note = format!(
        "it runs in a sandbox ({}), and the kernel does not tell an unprivileged process which path or port it \
         refused (Landlock's audit records need root): if the server needs more, add the path to the sandbox's \
         `read` or `write`, or open its `network`",
        sandbox.written()
    );
    let command = match &entry.transport {
        TransportSpec::Stdio { command, .. } => Path::new(command).file_name().and_then(OsStr::to_str).unwrap_or(""),
        TransportSpec::Remote { .. } => "",
    };
    if ["npx", "uvx", "bunx", "pipx"].contains(&command) && sandbox.network != NetworkSpec::On {
        note.push_str(&format!(
            "; `{command}` downloads the package, which a sandbox without the network forbids: run the installed \
             package's own command instead, or let it reach the registry (`\"network\": {{\"connect\": [443]}}`)"
        ));
    }
    note
}

/// The `home` of a virtual environment's `pyvenv.cfg`: the directory of the
/// interpreter it was made from.
fn venv_home(cfg: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(cfg).ok()?;
    let line = text.lines().find_map(|l| l.split_once('=').filter(|(k, _)| k.trim() == "home"))?;
    Some(PathBuf::from(line.1.trim()))
}

/// The interpreters a script `program` runs under: its `#!` program, and the one
/// `/usr/bin/env` finds for it (`#!/usr/bin/env node`, `-S` and options skipped).
fn interpreters(program: &Path, which: &dyn Fn(&str) -> Option<PathBuf>) -> Vec<PathBuf> {
    let mut head = [0u8; 256];
    let read = std::fs::File::open(program).and_then(|mut f| f.read(&mut head)).unwrap_or(0);
    let Some(line) = head[..read].strip_prefix(b"#!") else { return Vec::new() };
    let line = String::from_utf8_lossy(line.split(|b| *b == b'\n').next().unwrap_or_default()).into_owned();
    let mut words = line.split_whitespace();
    let Some(first) = words.next() else { return Vec::new() };
    let mut found = vec![PathBuf::from(first)];
    if Path::new(first).file_name() == Some(OsStr::new("env")) {
        if let Some(named) = words.find(|w| !w.starts_with('-')).and_then(which) {
            found.push(named);
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_script_runs_under_its_interpreter_and_the_entrys_paths_must_exist() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        std::fs::write(bin.join("node"), "").unwrap();
        // Executable, as `/usr/bin/env` needs it to be.
        std::fs::set_permissions(bin.join("node"), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let script = dir.path().join("server.js");
        std::fs::write(&script, "#!/usr/bin/env -S node --no-warnings\nconsole.log(1)\n").unwrap();
        let env: BTreeMap<OsString, OsString> = [(OsString::from("PATH"), bin.clone().into_os_string())].into();
        let spec =
            SandboxSpec { preset: Preset::Binary, read: Vec::new(), write: Vec::new(), network: NetworkSpec::Off };
        let sandbox = ExpandedSandbox { read: vec![dir.path().to_owned()], write: Vec::new(), spec };
        assert_eq!(missing(&sandbox), None);
        let policy = policy(&sandbox, &script, &env);
        let runs = |p: &Path| policy.grants.iter().any(|g| g.path == p && g.access == Access::ReadExecute);
        assert!(runs(&script) && runs(&bin.join("node")), "{policy:?}");
        assert!(runs(Path::new("/usr/bin/env")) || !Path::new("/usr/bin/env").exists());
        assert_eq!(policy.network, Network::Closed);
        let missing = ExpandedSandbox { read: vec![dir.path().join("nope")], ..sandbox };
        let err = super::missing(&missing).unwrap();
        assert!(err.contains("nope") && err.contains("does not exist"), "{err}");
    }
}
