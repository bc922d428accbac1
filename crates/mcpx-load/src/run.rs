//! One run: the callers set up, a warm-up, the measured phase and the CPU samples around it.
//! Every caller is a task; three barriers line them up (all set up, all warm, all done), and
//! the CPU times are read right after the second and the third.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow};
use tokio::sync::{Barrier, mpsc};

use crate::report::{Latency, Report, per_call_us, round1};
use crate::{answer, http, stdio};

/// What the callers drive.
#[derive(Debug, Clone)]
pub enum Target {
    /// Each caller its own child process (program and arguments).
    Stdio(Vec<std::ffi::OsString>),
    /// Each caller its own connection and session.
    Http(http::Endpoint),
}

/// How long the measured phase lasts.
#[derive(Debug, Clone, Copy)]
pub enum Length {
    /// Each caller calls until this much time has passed.
    Time(Duration),
    /// Each caller makes this many calls.
    Calls(u64),
}

/// The settings of one run.
#[derive(Debug, Clone)]
pub struct Plan {
    /// What to drive.
    pub target: Target,
    /// Concurrent callers.
    pub callers: usize,
    /// The tool to call with `{"message": ...}`; it must answer with that message as its
    /// only text (the fake server's `echo`, or `fake__echo` through `/mcp`).
    pub tool: String,
    /// Untimed calls before the measured phase, per caller, for this long.
    pub warmup: Duration,
    /// The measured phase.
    pub length: Length,
    /// Processes whose CPU time per call is reported, by name.
    pub pids: Vec<(String, u32)>,
}

/// What one caller brings back.
#[derive(Default)]
struct Tally {
    latencies: Vec<u64>,
    checked: u64,
    warmup_calls: u64,
    reconnects: u64,
}

/// One caller, whichever the transport.
enum Caller {
    Stdio(stdio::Caller),
    Http(http::Caller),
}

impl Caller {
    async fn call(&mut self, tool_json: &str, id: u64, message: &str) -> Result<()> {
        match self {
            Caller::Stdio(c) => c.call(tool_json, id, message).await,
            Caller::Http(c) => c.call(tool_json, id, message).await,
        }
    }
}

/// Runs `plan` and reports.
///
/// # Errors
///
/// A caller failed (its first error, naming the caller), or a named process is gone.
pub async fn run(plan: Plan) -> Result<Report> {
    let plan = Arc::new(plan);
    let n = plan.callers;
    // Set up; warmed up; measured; sampled (a caller's process must outlive the sample).
    let barriers = Arc::new([Barrier::new(n + 1), Barrier::new(n + 1), Barrier::new(n + 1), Barrier::new(n + 1)]);
    let children = Arc::new(Mutex::new(Vec::new()));
    let (errors, mut failed) = mpsc::unbounded_channel::<anyhow::Error>();
    let mut tasks = Vec::with_capacity(n);
    for index in 0..n {
        let (plan, barriers, children, errors) = (plan.clone(), barriers.clone(), children.clone(), errors.clone());
        tasks.push(tokio::spawn(async move {
            let result = caller(index, &plan, &barriers, &children).await;
            if let Err(err) = &result {
                let _ = errors.send(anyhow!("caller {index}: {err:#}"));
            }
            result
        }));
    }
    let phase = async |i: usize, failed: &mut mpsc::UnboundedReceiver<anyhow::Error>| -> Result<()> {
        tokio::select! {
            _ = barriers[i].wait() => Ok(()),
            Some(err) = failed.recv() => Err(err),
        }
    };
    phase(0, &mut failed).await?;
    phase(1, &mut failed).await?;
    let children: Vec<u32> = children.lock().map_err(|_| anyhow!("a caller panicked"))?.clone();
    let cpu_before = sample(&plan.pids, &children)?;
    let start = Instant::now();
    phase(2, &mut failed).await?;
    let seconds = start.elapsed().as_secs_f64();
    let cpu_after = sample(&plan.pids, &children)?;
    phase(3, &mut failed).await?;
    let mut total = Tally::default();
    for task in tasks {
        let tally = task.await.context("a caller panicked")??;
        total.latencies.extend(tally.latencies);
        total.checked += tally.checked;
        total.warmup_calls += tally.warmup_calls;
        total.reconnects += tally.reconnects;
    }
    let calls = total.latencies.len() as u64;
    let cpu_us_per_call = cpu_before
        .iter()
        .zip(&cpu_after)
        .map(|((name, a), (_, b))| (name.clone(), per_call_us(b.saturating_sub(*a), calls)))
        .collect();
    Ok(Report {
        mode: match plan.target {
            Target::Stdio(_) => "stdio",
            Target::Http(_) => "http",
        },
        target: describe(&plan.target),
        callers: n,
        calls,
        checked: total.checked,
        warmup_calls: total.warmup_calls,
        reconnects: total.reconnects,
        seconds: (seconds * 1e4).round() / 1e4,
        calls_per_s: if seconds > 0.0 { round1(calls as f64 / seconds) } else { 0.0 },
        latency_us: Latency::of(&mut total.latencies),
        cpu_us_per_call,
    })
}

/// The target as the report names it.
fn describe(target: &Target) -> String {
    match target {
        Target::Stdio(argv) => argv.iter().map(|a| a.to_string_lossy()).collect::<Vec<_>>().join(" "),
        Target::Http(e) => match &e.addr {
            http::Addr::Tcp(addr) => format!("http://{addr}{}", e.path),
            http::Addr::Unix(path) => format!("{} on {}", e.path, path.display()),
        },
    }
}

/// The CPU time of every named process, of the callers' children (summed, as `callers`)
/// and of this process (`self`).
fn sample(pids: &[(String, u32)], children: &[u32]) -> Result<Vec<(String, Duration)>> {
    let cpu = |pid: u32, name: &str| {
        mcpx_platform::process_cpu_time(pid)
            .with_context(|| format!("reading the CPU time of {name} (pid {pid}): is it still running?"))
    };
    let mut out = Vec::with_capacity(pids.len() + 2);
    for (name, pid) in pids {
        out.push((name.clone(), cpu(*pid, name)?));
    }
    if !children.is_empty() {
        let mut sum = Duration::ZERO;
        for pid in children {
            sum += cpu(*pid, "a caller's process")?;
        }
        out.push(("callers".into(), sum));
    }
    out.push(("self".into(), cpu(std::process::id(), "mcpx-load")?));
    Ok(out)
}

/// One caller: set up, wait for all; warm up, wait for all; the measured calls, wait for
/// all; wait for the CPU times to be read; then close.
async fn caller(index: usize, plan: &Plan, barriers: &[Barrier; 4], children: &Mutex<Vec<u32>>) -> Result<Tally> {
    let tool_json = serde_json::to_string(&plan.tool)?;
    let mut caller = match &plan.target {
        Target::Stdio(argv) => {
            let c = stdio::Caller::start(argv).await?;
            if let Some(pid) = c.pid() {
                children.lock().map_err(|_| anyhow!("another caller panicked"))?.push(pid);
            }
            Caller::Stdio(c)
        }
        Target::Http(endpoint) => Caller::Http(http::Caller::start(endpoint.clone()).await?),
    };
    let mut tally = Tally { checked: 1, ..Tally::default() };
    let mut id = 1;
    barriers[0].wait().await;
    let warm_until = Instant::now() + plan.warmup;
    while Instant::now() < warm_until {
        id += 1;
        caller.call(&tool_json, id, &answer::message(index, id)).await?;
        tally.warmup_calls += 1;
    }
    barriers[1].wait().await;
    let start = Instant::now();
    let mut made = 0;
    loop {
        let more = match plan.length {
            Length::Time(d) => start.elapsed() < d,
            Length::Calls(n) => made < n,
        };
        if !more {
            break;
        }
        id += 1;
        let message = answer::message(index, id);
        let t = Instant::now();
        caller.call(&tool_json, id, &message).await?;
        tally.latencies.push(u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX));
        made += 1;
    }
    tally.checked += tally.warmup_calls + made;
    barriers[2].wait().await;
    barriers[3].wait().await;
    match caller {
        Caller::Stdio(c) => c.finish().await?,
        Caller::Http(c) => {
            tally.reconnects = c.reconnects;
            c.finish().await;
        }
    }
    Ok(tally)
}
