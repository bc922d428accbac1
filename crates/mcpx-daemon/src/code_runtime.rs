//! The code-mode runtime module (`GET /v1/code/runtime`): the TypeScript a script run
//! by `mcpx run`/`mcpx exec` imports, and the declarations of what it defines. The
//! daemon serves them so the CLI always writes the runtime of the daemon it talks to
//! (docs/code-mode.md, "The channel").

/// The runtime module's source: `install(table)` defines one global per server (its
/// tools as async functions that send calls on the channel) and `mcpx`, and sends log
/// output to stderr; `main(module)` awaits the default export and sends what it gives.
pub const MODULE: &str = include_str!("code_runtime/runtime.ts");

/// Ambient declarations of the `mcpx` global (`mcpx.raw`, `mcpx.ToolError`,
/// `mcpx.Result`), for the type check beside the servers' declarations.
pub const DECLARATIONS: &str = include_str!("code_runtime/runtime.d.ts");

/// The body of `GET /v1/code/runtime`: `{"module": <TypeScript>, "declarations":
/// <TypeScript declarations>, "protocol": 1}`. `protocol` is the channel's version; a
/// CLI that does not know it refuses to run, rather than talk past the runtime.
pub fn answer() -> serde_json::Value {
    serde_json::json!({ "module": MODULE, "declarations": DECLARATIONS, "protocol": PROTOCOL })
}

/// The version of the channel's frames (docs/code-mode.md, "The channel").
pub const PROTOCOL: u32 = 1;
