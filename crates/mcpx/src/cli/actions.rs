//! The subcommands of `mcpx secret`, `mcpx auth`, `mcpx pins` and `mcpx service`.

use clap::Subcommand;

#[derive(Debug, Subcommand)]
pub(super) enum SecretAction {
    /// Set a secret: typed hidden on a terminal, else the first line of stdin.
    Set {
        /// The name: letters, digits, `_`, `-` and `.`.
        name: String,
    },
    /// List the secrets' names (never their values) and where they are kept.
    Ls,
    /// Remove a secret.
    Rm {
        /// The name.
        name: String,
    },
}

#[derive(Debug, Subcommand)]
pub(super) enum AuthAction {
    /// Log in to a remote server: open its authorization page, keep the tokens in the secret store.
    Login {
        /// The server.
        server: String,
        /// Print the URL instead of opening a browser (for a browser on another machine).
        #[arg(long)]
        no_browser: bool,
        /// Log in with a code entered on any device (RFC 8628 device flow; over SSH, in a container).
        #[arg(long, conflicts_with = "no_browser")]
        device: bool,
    },
    /// Show each remote server's login: logged in or not, expiry, scopes, and where the tokens are kept.
    Status,
    /// Revoke a server's login at its authorization server (where offered) and forget it.
    Logout {
        /// The server.
        server: String,
    },
}

#[derive(Debug, Subcommand)]
pub(super) enum PinsAction {
    /// Show each server's pinned, held and flagged tools and prompts.
    Ls {
        /// One server (default: every one offered here).
        server: Option<String>,
    },
    /// Show each held change against what was approved, and approve or reject it (y/N).
    Review {
        /// One server (default: every one offered here).
        server: Option<String>,
        /// Approve every held change without asking (required when stdin is not a terminal).
        #[arg(long, short)]
        yes: bool,
    },
}

#[derive(Debug, Subcommand)]
pub(super) enum ServiceAction {
    /// Write the unit (Linux: ~/.config/systemd/user/mcpx.service; macOS: ~/Library/LaunchAgents/dev.mcpx.daemon.plist).
    Install {
        /// Print the file instead of writing it.
        #[arg(long)]
        print: bool,
    },
}
