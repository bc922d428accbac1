//! OAuth for remote servers (MCP 2025-11-25, Authorization): what a 401's challenge
//! says ([`challenge`]) and where the authorization server is ([`discovery`]). The
//! HTTP requests are the transport's (`transport/http/metadata.rs`): this module
//! decides what to ask and checks the answers.

pub mod challenge;
pub mod discovery;
