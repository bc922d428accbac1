//! macOS confinement: a Seatbelt profile (the SBPL language `sandbox-exec -p` reads)
//! written from the policy, deny by default. Built by the macOS check; not run on the
//! machines this project is tested on.

use std::io;
use std::path::Path;

use crate::confine::{Access, Grant, Network, Policy, Support};

/// The program that applies a profile to the program it executes.
pub(crate) const SANDBOX_EXEC: &str = "/usr/bin/sandbox-exec";

/// The profile, passed to [`SANDBOX_EXEC`] with `-p`.
pub(crate) struct Prepared {
    pub(crate) profile: String,
}

pub(crate) fn confine_support() -> Support {
    if Path::new(SANDBOX_EXEC).is_file() {
        Support::Kernel { mechanism: "Seatbelt (sandbox-exec)".to_owned(), abi: 0, scoped: true }
    } else {
        Support::Unavailable(format!("{SANDBOX_EXEC} is missing, so Seatbelt cannot confine"))
    }
}

pub(crate) fn confine_runtime_base() -> Vec<Grant> {
    vec![
        // dyld, the system libraries and frameworks (and the shared cache beneath them).
        Grant::new("/usr/lib", Access::Read),
        Grant::new("/System/Library", Access::Read),
        Grant::new("/System/Volumes/Preboot/Cryptexes/OS", Access::Read),
        // The local time zone and its database.
        Grant::new("/private/etc/localtime", Access::Read),
        Grant::new("/private/var/db/timezone", Access::Read),
        Grant::new("/usr/share/zoneinfo", Access::Read),
        Grant::new("/dev/null", Access::ReadWrite),
        Grant::new("/dev/urandom", Access::Read),
    ]
}

pub(crate) fn confine_prepare(policy: &Policy) -> io::Result<Prepared> {
    let mut profile = String::from(
        "(version 1)\n(deny default)\n\
         ; Metadata (stat) of any path, as Landlock leaves it; not contents.\n\
         (allow file-read-metadata)\n\
         (allow sysctl-read)\n\
         (allow signal (target self))\n",
    );
    for grant in &policy.grants {
        // Seatbelt matches the resolved path (/tmp is /private/tmp).
        let path = grant.path.canonicalize().map_err(|e| {
            io::Error::new(e.kind(), format!("cannot resolve {} for the sandbox: {e}", grant.path.display()))
        })?;
        let filter = if path.is_dir() { "subpath" } else { "literal" };
        let quoted = quote(&path);
        let operations: &[&str] = match grant.access {
            Access::Read => &["file-read*"],
            Access::ReadExecute => &["file-read*", "process-exec"],
            Access::Write => &["file-write*"],
            Access::ReadWrite => &["file-read*", "file-write*"],
        };
        for operation in operations {
            profile.push_str(&format!("(allow {operation} ({filter} {quoted}))\n"));
        }
    }
    profile.push_str(&network(&policy.network));
    Ok(Prepared { profile })
}

/// The rules of `network`: none when closed; TCP to and on its ports, or any IP, and
/// name resolution (mDNSResponder's socket, DNS over UDP) when it opens any.
fn network(network: &Network) -> String {
    let resolve = "(allow network-outbound (literal \"/private/var/run/mDNSResponder\"))\n\
                   (allow network-outbound (remote udp \"*:53\"))\n";
    match network {
        Network::Closed => String::new(),
        Network::Open => {
            format!("{resolve}(allow network-outbound (remote ip))\n(allow network-bind network-inbound (local ip))\n")
        }
        Network::Ports { connect, bind } => {
            let mut rules = resolve.to_owned();
            for port in connect {
                rules.push_str(&format!("(allow network-outbound (remote tcp \"*:{port}\"))\n"));
            }
            for port in bind {
                rules.push_str(&format!("(allow network-bind network-inbound (local tcp \"*:{port}\"))\n"));
            }
            rules
        }
    }
}

/// A path as an SBPL string literal: in double quotes, `\` and `"` escaped.
fn quote(path: &Path) -> String {
    let text = path.to_string_lossy();
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}
