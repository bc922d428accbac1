//! Becoming a supervisor: read the launch request, detach (double fork, own
//! session), prepare the process (SIGPIPE ignored, inherited descriptors closed,
//! subreaper), bind the socket, spawn the child ([`crate::child`]), report
//! readiness, then hand over to the loop ([`crate::event_loop`]).
//!
//! Everything here runs before any async runtime, in a single-threaded process,
//! which is what makes `fork` sound.
#![allow(unsafe_code)] // Reason: fork(2) for the double fork; see the Safety comments.

use std::io::{Read, Write};
use std::os::unix::net::UnixListener;

use mcpx_platform::fs::Dir;
use mcpx_proto::attach::{LaunchRequest, ProcessId};
use nix::unistd::{ForkResult, fork, setsid};

use crate::child::{Child, SpawnError};
use crate::event_loop::Supervisor;
use crate::log::log;

/// `mcpx supervise`: reads a [`LaunchRequest`] (JSON) on stdin, and reports on stdout
/// one JSON line, `{"pid":…,"child":{"pid":…,"start_time":…}}` once the server runs,
/// or `{"error":"…"}`; the process the daemon started exits at once, and the
/// supervisor lives on, detached. Returns the exit status of the calling process.
pub fn main() -> i32 {
    let mut input = String::new();
    if let Err(e) = std::io::stdin().read_to_string(&mut input) {
        return report_error(&format!("cannot read the launch request: {e}"));
    }
    let req: LaunchRequest = match serde_json::from_str(&input) {
        Ok(r) => r,
        Err(e) => return report_error(&format!("malformed launch request: {e}")),
    };
    // Safety: the process is single-threaded here (no runtime, no threads started),
    // so the child may run arbitrary code after fork.
    match unsafe { fork() } {
        Ok(ForkResult::Parent { .. }) => return 0,
        Ok(ForkResult::Child) => {}
        Err(e) => return report_error(&format!("fork failed: {e}")),
    }
    let _ = setsid();
    // Safety: as above; still single-threaded.
    match unsafe { fork() } {
        Ok(ForkResult::Parent { .. }) => std::process::exit(0),
        Ok(ForkResult::Child) => {}
        Err(e) => {
            report_error(&format!("fork failed: {e}"));
            std::process::exit(1);
        }
    }
    std::process::exit(supervise(req))
}

/// The supervisor proper, in the grandchild.
fn supervise(req: LaunchRequest) -> i32 {
    if let Err(e) = prepare() {
        return report_error(&format!("cannot prepare the supervisor: {e}"));
    }
    if let Some(path) = &req.log {
        crate::log::open(path);
    }
    // Its files are reached through the directory, checked as the daemon checked it.
    let dir = match Dir::open_private(&req.dir, false) {
        Ok(dir) => dir,
        Err(e) => return report_error(&format!("cannot use {}: {e}", req.dir.display())),
    };
    // A socket is bound by path: the path must still name the directory checked.
    if !dir.still_at_path() {
        return report_error(&format!("{} was replaced while the supervisor started", req.dir.display()));
    }
    let socket_path = dir.join(format!("{}.sock", req.id));
    let listener = match UnixListener::bind(&socket_path) {
        Ok(l) => l,
        Err(e) => return report_error(&format!("cannot listen on {}: {e}", socket_path.display())),
    };
    if let Err(e) = listener.set_nonblocking(true) {
        return report_error(&format!("cannot set up {}: {e}", socket_path.display()));
    }
    // Before the spawn, so no exit goes unnoticed; the child starts with no signal
    // blocked all the same (`mcpx_platform::process::command` unblocks them).
    let exits = match mcpx_platform::ChildExitWake::install() {
        Ok(exits) => exits,
        Err(e) => return report_error(&format!("cannot watch for exits (SIGCHLD): {e}")),
    };
    let child = match Child::spawn(&req) {
        Ok(c) => c,
        Err(e) => {
            let _ = dir.remove(&format!("{}.sock", req.id));
            return report_error(&match e {
                SpawnError::Start { .. } => e.to_string(),
                SpawnError::Watch(e) => format!("cannot watch the server: {e}"),
            });
        }
    };
    let pid = std::process::id();
    let me = ProcessId { pid, start_time: mcpx_platform::process_start_time(pid).unwrap_or(0) };
    let boot_id = mcpx_platform::boot_id().unwrap_or_default();
    let sup = Supervisor::new(req, listener, dir, me, boot_id, child, exits);
    let ready = serde_json::json!({ "pid": pid, "child": sup.child_id() });
    log!("ready: {ready}");
    let _ = writeln!(std::io::stdout(), "{ready}");
    let _ = std::io::stdout().flush();
    // The readiness pipe is done with: stdout goes to /dev/null like the rest.
    redirect_to_null(Std::Out);
    // What the start-up allocated and freed (the request, the spawn) leaves the heap.
    mcpx_platform::release_free_heap();
    sup.run()
}

/// Ignores SIGPIPE, points stdin and stderr at /dev/null, closes every other
/// inherited descriptor, moves to `/`, and (on Linux) becomes the subreaper of the
/// server's descendants.
fn prepare() -> std::io::Result<()> {
    mcpx_platform::ignore_sigpipe()?;
    redirect_to_null(Std::In);
    redirect_to_null(Std::Err);
    mcpx_platform::close_inherited_fds(&[0, 1, 2])?;
    std::env::set_current_dir("/")?;
    mcpx_platform::set_child_subreaper()?;
    Ok(())
}

/// A standard descriptor.
enum Std {
    In,
    Out,
    Err,
}

/// Points a standard descriptor at `/dev/null`.
fn redirect_to_null(which: Std) {
    if let Ok(null) = std::fs::OpenOptions::new().read(true).write(true).open("/dev/null") {
        let _ = match which {
            Std::In => nix::unistd::dup2_stdin(&null),
            Std::Out => nix::unistd::dup2_stdout(&null),
            Std::Err => nix::unistd::dup2_stderr(&null),
        };
    }
}

/// Reports a failed launch on stdout as `{"error":"…"}`; returns the exit status, 1.
fn report_error(message: &str) -> i32 {
    let line = serde_json::json!({ "error": message });
    let _ = writeln!(std::io::stdout(), "{line}");
    let _ = std::io::stdout().flush();
    1
}
