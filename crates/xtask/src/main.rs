//! `cargo xtask <task>`: the repository's own tasks (the xtask pattern: a binary of
//! the workspace, run through the `xtask` alias in `.cargo/config.toml`).
//!
//! - `tidy`: every check of [`tidy::CHECKS`] on the repository; prints each broken
//!   invariant with its violations and what to do, and exits 1 when any is broken.
//!   It builds nothing of the product, so CI runs it before the build.

mod tidy;

fn main() {
    let task = std::env::args().nth(1);
    match task.as_deref() {
        Some("tidy") => std::process::exit(run_tidy()),
        _ => {
            eprintln!("usage: cargo xtask tidy");
            std::process::exit(2);
        }
    }
}

/// Runs every check; returns the exit status.
fn run_tidy() -> i32 {
    let ws = tidy::workspace();
    let mut broken = 0;
    for (name, check) in tidy::CHECKS {
        let finding = check(ws);
        if finding.violations.is_empty() {
            println!("tidy: ok      {name}");
        } else {
            broken += 1;
            println!("tidy: BROKEN  {name}\n{finding}");
        }
    }
    println!("tidy: {} checks, {broken} broken", tidy::CHECKS.len());
    i32::from(broken > 0)
}
