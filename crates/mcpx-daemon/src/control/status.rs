//! `GET /v1/status`: the daemon and every instance, as `mcpx status` shows them.

use std::sync::atomic::Ordering;

use crate::api::{DaemonStatus, InstanceStatus, Status};
use crate::config::Client;
use crate::daemon::Daemon;
use crate::instance::{CallError, ERROR_TAIL_BYTES, State};
use crate::sync::lock;

/// `GET /v1/status`: the daemon, and every instance: live, ended but not yet replaced,
/// failed to start, or left running by an incompatible supervisor.
pub fn status(d: &Daemon) -> Status {
    let mut instances: Vec<InstanceStatus> = d
        .pool
        .instances()
        .into_iter()
        .map(|i| {
            let state = i.state();
            InstanceStatus {
                server: i.identity.server.clone(),
                key: i.identity.key.clone(),
                pid: i.info.pid(),
                state: state.as_str().to_owned(),
                calls: i.in_flight(),
                calls_served: i.calls_served(),
                in_flight: i.in_flight(),
                holders: i.holders(),
                supervised: i.supervised(),
                supervisor_pid: i.info.supervisor.as_ref().map(|s| s.pid),
                supervisor_protocol: i.info.supervisor.as_ref().map(|s| s.protocol.clone()),
                url: i.info.remote.clone(),
                command: i.origin.command.clone(),
                sandbox: i.origin.sandbox.clone(),
                source: i.origin.source.clone(),
                dropped_bytes: i.info.dropped(),
                skipped_lines: i.info.skipped_lines.load(Ordering::Relaxed),
                buffered_at_attach: i.info.buffered_at_attach.load(Ordering::Relaxed),
                dropped_notifications: i.dropped_notifications(),
                null_id_errors: i.null_id_errors(),
                last_error: match state {
                    State::Exited(e) => Some(format!("server {e}")),
                    State::Lost if i.info.remote.is_some() => Some("the remote server could not be reached".into()),
                    State::Lost => Some("instance lost: its supervisor went away".into()),
                    _ => None,
                },
                stderr_tail: i.info.stderr_tail(ERROR_TAIL_BYTES),
                idle_s: Some(i.idle_for().as_secs()),
                uptime_s: Some(i.started.elapsed().as_secs()),
            }
        })
        .collect();
    for (server, key, error) in d.pool.failures() {
        let stderr_tail = match &error {
            CallError::Exited { stderr_tail, .. } => stderr_tail.clone(),
            CallError::Confined { error, .. } => match &**error {
                CallError::Exited { stderr_tail, .. } => stderr_tail.clone(),
                _ => String::new(),
            },
            _ => String::new(),
        };
        instances.push(InstanceStatus {
            server,
            key: key.to_string(),
            state: "error".into(),
            last_error: Some(error.to_string()),
            stderr_tail,
            ..InstanceStatus::default()
        });
    }
    for (record, theirs) in lock(&d.incompatible).iter() {
        instances.push(InstanceStatus {
            server: record.identity.server.clone(),
            key: record.identity.key.clone(),
            pid: record.child.map(|c| c.pid),
            state: "incompatible".into(),
            supervised: true,
            supervisor_pid: Some(record.supervisor.pid),
            supervisor_protocol: Some(theirs.to_string()),
            last_error: Some(format!(
                "its supervisor speaks attach protocol {theirs}, this daemon {}; `mcpx restart {}` replaces it",
                mcpx_proto::attach::Version::ours(),
                record.identity.server
            )),
            ..InstanceStatus::default()
        });
    }
    instances.sort_by(|a, b| (&a.server, &a.key).cmp(&(&b.server, &b.key)));
    // `lost` remote instances of one server and URL are one row: they differ only in
    // pool key, and none can come back.
    let mut lost = std::collections::HashSet::new();
    instances.retain(|i| i.state != "lost" || i.url.is_none() || lost.insert((i.server.clone(), i.url.clone())));
    Status {
        daemon: DaemonStatus {
            pid: std::process::id(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            build: mcpx_platform::build::build_id().to_owned(),
            uptime_s: d.started.elapsed().as_secs(),
            socket: d.dirs.paths.socket(),
            http_url: d.http_url().map(str::to_owned),
            config_files: d.config.known_files(),
            user_config: d.config.env().user_file(),
            client_files: Client::ALL
                .iter()
                .filter_map(|c| Some((c.name().to_owned(), c.user_file(d.config.env())?)))
                .collect(),
            log_file: d.dirs.paths.log_file(),
            warnings: d.warnings.clone(),
            config_errors: d.config_errors(),
            dropped_notifications: d.dropped_notifications().load(Ordering::Relaxed),
            held: d.pins.held_counts(),
            flagged_definitions: d.pins.flagged(),
            activity_lost: d.activity.dropped.load(Ordering::Relaxed) + d.activity.failed.load(Ordering::Relaxed),
            activity_error: crate::sync::lock(&d.activity.last_error).clone(),
            otel_url: d.telemetry.traces.as_ref().map(|t| t.export.url.clone()),
            spans_exported: d.telemetry.traces.as_ref().map_or(0, |t| t.exported.load(Ordering::Relaxed)),
            spans_dropped: d.telemetry.traces.as_ref().map_or(0, |t| t.dropped.load(Ordering::Relaxed)),
            otel_error: d
                .telemetry
                .traces
                .as_ref()
                .and_then(|t| crate::sync::lock(&t.last_error).clone())
                .or_else(|| d.telemetry.problem.clone()),
            ui_url: d.ui.port().map(|port| format!("http://127.0.0.1:{port}/")),
        },
        instances,
    }
}
