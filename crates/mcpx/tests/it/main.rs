//! mcpx's integration tests: one test binary (one link) whose modules share the
//! harness. Every test drives the real `mcpx` binary in private directories and
//! stops what it started when it ends, pass or fail.

#![allow(clippy::unwrap_used)] // Reason: a failed unwrap is a failed test, with its location.

mod harness;

mod activity;
mod args;
mod at_terminal;
mod boundaries;
mod cases;
mod claude_code;
mod cli;
mod cli_extras;
mod clients;
mod code;
mod code_confine;
mod code_types;
mod compat;
mod conformance;
mod conformance_client;
mod connect;
mod doctor;
mod era_cache;
mod era_matrix;
mod errors;
mod fake_modern;
mod flood;
mod hostile;
mod ids;
mod import;
mod input_callers;
mod input_modern;
mod input_upstream;
mod keyring;
mod lease;
mod listen_modern;
mod listen_upstream;
mod load;
mod messy;
mod modern;
mod oauth;
mod offers;
mod oidc;
mod peer;
mod pins;
mod policy;
mod pools;
mod profiles;
mod real_servers;
mod registry;
mod remote;
mod results;
mod sandbox;
mod secrets;
mod security;
mod serve;
mod serve_link;
mod shell_resources;
mod start;
mod status;
mod supervisor;
mod tcp;
mod telemetry;
mod terminal;
mod trust;
mod ui;
mod ui_browser;
mod upstream_era;
