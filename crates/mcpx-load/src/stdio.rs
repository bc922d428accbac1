//! A caller over stdio (MCP 2025-11-25, Transports: stdio): its own child process (`mcpx
//! serve`, or the server itself for the direct baseline) spoken to in newline-delimited
//! JSON-RPC, one request at a time.

use std::ffi::OsString;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use mcpx_platform::process::{Detach, SpawnSpec};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout};

use crate::answer::{self, Seen};

/// How long a child may take to exit once its stdin is closed before it is killed.
const EXIT_GRACE: Duration = Duration::from_secs(5);

/// One child process and its pipes.
pub struct Caller {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    /// The line being read, kept to reuse its allocation.
    line: Vec<u8>,
    /// The command line, for errors.
    what: String,
}

impl Caller {
    /// Starts `argv` (program first; found on `PATH` when it has no slash) with this
    /// process's environment, its stderr going to ours, and initializes an MCP session on it.
    ///
    /// # Errors
    ///
    /// The process cannot start, or `initialize` does not succeed.
    pub async fn start(argv: &[OsString]) -> Result<Caller> {
        let (program, args) = argv.split_first().context("no command given after `stdio --`")?;
        let spec = SpawnSpec {
            program: program.into(),
            args: args.to_vec(),
            env: std::env::vars_os().collect(),
            cwd: None,
            piped: true,
            detach: Detach::Group,
            confine: None,
        };
        let mut cmd = tokio::process::Command::from(mcpx_platform::process::command(&spec));
        cmd.stderr(Stdio::inherit()).kill_on_drop(true);
        let what = argv.iter().map(|a| a.to_string_lossy()).collect::<Vec<_>>().join(" ");
        let mut child = cmd.spawn().with_context(|| format!("starting `{what}`: check the command and its path"))?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            bail!("`{what}` started without pipes");
        };
        let mut caller = Caller { child, stdin, stdout: BufReader::new(stdout), line: Vec::new(), what };
        caller.send(&answer::initialize()).await?;
        caller.answer(1).await.context("initialize")?;
        caller.send(answer::INITIALIZED).await?;
        Ok(caller)
    }

    /// The child's pid, for its CPU time.
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// One `tools/call` of `tool_json` with id `id` and `message`, its answer checked.
    ///
    /// # Errors
    ///
    /// The pipe broke, or the answer is not the echo of `message`.
    pub async fn call(&mut self, tool_json: &str, id: u64, message: &str) -> Result<()> {
        self.send(&answer::call(tool_json, id, message)).await?;
        self.answer(id).await?;
        answer::check_echo(&self.line, id, message).with_context(|| self.what.clone())
    }

    /// Closes the child's stdin and waits for it to exit (killing it after 5 s).
    ///
    /// # Errors
    ///
    /// It did not exit in time, or exited with a failure status.
    pub async fn finish(mut self) -> Result<()> {
        drop(self.stdin);
        let status = match tokio::time::timeout(EXIT_GRACE, self.child.wait()).await {
            Ok(status) => status.with_context(|| format!("waiting for `{}`", self.what))?,
            Err(_) => {
                self.child.kill().await.ok();
                bail!("`{}` did not exit within 5 s of its stdin closing; it was killed", self.what);
            }
        };
        if !status.success() {
            bail!("`{}` exited with {status} when its stdin closed: see its stderr above", self.what);
        }
        Ok(())
    }

    /// Writes one line.
    async fn send(&mut self, line: &str) -> Result<()> {
        let mut bytes = Vec::with_capacity(line.len() + 1);
        bytes.extend_from_slice(line.as_bytes());
        bytes.push(b'\n');
        self.stdin.write_all(&bytes).await.with_context(|| format!("writing to `{}`: it has exited", self.what))
    }

    /// Reads lines until the answer to `id`, which stays in `self.line`.
    async fn answer(&mut self, id: u64) -> Result<()> {
        loop {
            self.line.clear();
            let n = self
                .stdout
                .read_until(b'\n', &mut self.line)
                .await
                .with_context(|| format!("reading from `{}`", self.what))?;
            if n == 0 {
                bail!("`{}` closed its stdout while request {id} waited for its answer", self.what);
            }
            if answer::classify(&self.line, id).with_context(|| self.what.clone())? == Seen::Answer {
                return Ok(());
            }
        }
    }
}
