//! `mcpx`: every MCP server you have configured, behind one daemon, one CLI and one
//! endpoint. This binary is the command-line front end and, as `mcpx daemon`, the
//! daemon itself.

mod activity;
mod add;
mod args;
mod auth;
mod browser;
mod call_stream;
mod cli;
mod code;
mod completions;
mod connect;
mod doctor;
mod elicit;
mod foreground;
mod import;
mod logs;
mod offers;
mod output;
mod pins;
mod registry;
mod secret;
mod serve;
mod serve_code;
mod serve_io;
mod serve_link;
mod service;
mod show_config;
mod status_line;
mod trust;
mod types;
mod ui;

fn main() {
    std::process::exit(cli::main());
}
