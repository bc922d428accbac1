//! Adoption (`docs/attach-protocol.md`, "Adopt or reap"): what becomes of each
//! supervisor a previous daemon left in `<runtime>/sup/`, and the end of those
//! whose attach protocol this daemon cannot speak.

use std::sync::Arc;
use std::time::Duration;

use mcpx_platform::Liveness;
use mcpx_platform::fs::Dir;
use mcpx_proto::attach::{ChildState, Record, Version};

use super::attach::AttachFailure;
use super::link::{ExitInfo, Inbound, Link, LinkInfo};
use super::sup_dir;
use super::supervised::connect;

/// What adopting one supervisor came to.
#[derive(Debug)]
pub enum Adoption {
    /// Its server runs: the live link. [`Link::resumed`] holds the MCP session the
    /// previous daemon stored; `None` when it stored none (it died during
    /// `initialize`), and the server must be restarted.
    Running(Link),
    /// Its server exited while no daemon was attached. The exit is acknowledged, so
    /// the supervisor removes its files and exits.
    Exited {
        /// How the server ended.
        exit: ExitInfo,
        /// The link's facts: the stderr the supervisor kept, for the error.
        info: Arc<LinkInfo>,
    },
    /// It speaks an attach protocol (this version) that this daemon cannot adopt: it
    /// is left running, until [`stop_incompatible`].
    Incompatible(Version),
    /// Nothing to adopt, and nothing left to do: a record from before the last
    /// reboot (its files are removed), a dead supervisor (its server is killed and
    /// its files removed), or one that runs but does not answer (left alone). Each
    /// is logged.
    Nothing,
}

/// Adopts the supervisor `rec` describes, in `dir`: attaches to its socket (each
/// step within `deadline`), with `max_message_bytes` as the limit of what its server
/// may send until the instance's configuration is known. `boot_id` is this boot's
/// (empty: unknown, never stale).
pub async fn adopt(dir: &Dir, rec: &Record, boot_id: &str, max_message_bytes: usize, deadline: Duration) -> Adoption {
    let server = rec.identity.server.as_str();
    if !boot_id.is_empty() && rec.boot_id != boot_id {
        tracing::info!(server, id = rec.id, "removing a supervisor record from before the last reboot");
        sup_dir::remove_files(rec, dir);
        return Adoption::Nothing;
    }
    match connect(dir, &rec.id, server, max_message_bytes, deadline).await {
        Ok((shook, link)) => match (&shook.hello.state, shook.hello.exit) {
            (ChildState::Exited, Some(exit)) => {
                let exit = ExitInfo { code: exit.code, signal: exit.signal };
                tracing::info!(server, "adopted a supervisor whose server {exit} while no daemon was attached");
                // The link acknowledges the exit when it arrives (after the buffered
                // output); the supervisor then removes its files and exits.
                let Link { tx, mut rx, info, .. } = link;
                while let Some(item) = rx.recv().await {
                    if matches!(item, Inbound::Exited(_) | Inbound::Lost(_)) {
                        break;
                    }
                }
                drop(tx);
                Adoption::Exited { exit, info }
            }
            _ => Adoption::Running(link),
        },
        Err(AttachFailure::Incompatible { theirs, ours }) => {
            tracing::warn!(server, %theirs, %ours, "leaving an incompatible supervisor running");
            Adoption::Incompatible(theirs)
        }
        Err(e) => {
            if mcpx_platform::liveness(rec.supervisor.pid, Some(rec.supervisor.start_time)) != Liveness::Running {
                tracing::info!(server, id = rec.id, "its supervisor is gone: cleaning up");
                sup_dir::reap_orphan(rec, dir);
            } else {
                tracing::warn!(server, id = rec.id, error = %e, "a supervisor runs but does not answer; leaving it alone");
            }
            Adoption::Nothing
        }
    }
}

/// Stops an incompatible supervisor and its server: it cannot be asked, so both are
/// killed, each only if it still runs with its recorded start time, and its files
/// are removed from `dir`.
pub fn stop_incompatible(rec: &Record, dir: &Dir) {
    sup_dir::stop_supervisor(rec, dir);
}
