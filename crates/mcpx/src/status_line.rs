//! The status line of a long wait on a terminal: after about half a second, a spinner
//! on stderr says what the command waits on (`starting everything (npx) 4s`, `waiting:
//! ...`, a progress bar), and it is cleared when the answer comes. Fed by the `status`
//! and progress lines of a streamed call (`docs/api.md`, "Streaming").

use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use mcpx_platform::sanitize;

/// How long a wait lasts before the status line shows: shorter waits show nothing.
pub const DELAY: Duration = Duration::from_millis(500);

/// A status line on stderr, or nothing when stderr is not a terminal (or with
/// `--json`). Cloning gives another handle on the same line.
#[derive(Clone)]
pub struct StatusLine {
    /// `None` when nothing is to be drawn.
    bar: Option<ProgressBar>,
    /// Set while a prompt has the terminal: nothing may draw the line then.
    paused: Arc<AtomicBool>,
}

impl StatusLine {
    /// A status line saying `text` (already in plain words, for instance `calling
    /// fake.echo`), shown after [`DELAY`] when `enabled` and stderr is a terminal.
    /// It shows only while the async runtime runs, which is while the command waits.
    pub fn new(enabled: bool, text: &str) -> StatusLine {
        if !enabled || !std::io::stderr().is_terminal() {
            return StatusLine { bar: None, paused: Arc::default() };
        }
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::hidden());
        bar.set_style(spinner_style());
        bar.set_message(sanitize::text(text).into_owned());
        let line = StatusLine { bar: Some(bar), paused: Arc::default() };
        let (shown, paused) = (line.bar.as_ref().map(ProgressBar::downgrade), line.paused.clone());
        tokio::spawn(async move {
            tokio::time::sleep(DELAY).await;
            if let Some(bar) = shown.and_then(|b| b.upgrade()) {
                if !bar.is_finished() && !paused.load(Ordering::Relaxed) {
                    show(&bar);
                }
            }
        });
        line
    }

    /// Runs `work` with a status line saying `text` (see [`StatusLine::new`]), erased
    /// when it ends: for a command that waits on a request the daemon does not stream
    /// (a server listed first, say).
    pub async fn during<T>(enabled: bool, text: &str, work: impl std::future::Future<Output = T>) -> T {
        let line = StatusLine::new(enabled, text);
        let out = work.await;
        line.clear();
        out
    }

    /// Whether anything is drawn (stderr is a terminal and the line is enabled).
    pub fn is_on(&self) -> bool {
        self.bar.is_some()
    }

    /// Says what the wait is now, from a stream's `{"status": {...}}` line: `starting`
    /// (with the server and its command), `waiting` (with the reason) or `calling`
    /// (with the tool). The clock restarts.
    pub fn status(&self, status: &serde_json::Value) {
        let Some(bar) = &self.bar else { return };
        let server = status["server"].as_str().unwrap_or("the server");
        let text = match status["phase"].as_str() {
            Some("starting") => match status["command"].as_str() {
                Some(command) => format!("starting {server} ({command})"),
                None => format!("starting {server}"),
            },
            Some("waiting") => {
                format!("waiting for a free instance of {server}: {}", status["reason"].as_str().unwrap_or("busy"))
            }
            Some("calling") => format!("calling {server}.{}", status["tool"].as_str().unwrap_or("?")),
            _ => return,
        };
        bar.set_style(spinner_style());
        bar.set_length(0);
        bar.set_message(sanitize::text(&text).into_owned());
        bar.reset_elapsed();
    }

    /// Shows a `notifications/progress` (its `params`): a bar when it has a `total`,
    /// else the count, with its message. Progress shows at once, without the delay.
    /// False when there is no line to show it on.
    pub fn progress(&self, params: &serde_json::Value) -> bool {
        let Some(bar) = &self.bar else { return false };
        let message = params["message"].as_str().map(|m| sanitize::text(m).into_owned()).unwrap_or_default();
        let progress = params["progress"].as_f64().unwrap_or(0.0);
        match params["total"].as_f64() {
            Some(total) if total > 0.0 => {
                // Bars count in thousandths, so fractional progress moves them too.
                bar.set_style(bar_style());
                bar.set_length(1000);
                bar.set_position(((progress / total).clamp(0.0, 1.0) * 1000.0) as u64);
                bar.set_message(format!("progress {progress}/{total}: {message}"));
            }
            _ => {
                bar.set_style(spinner_style());
                bar.set_message(format!("progress {progress}: {message}"));
            }
        }
        show(bar);
        true
    }

    /// Runs `print` (which writes lines on stderr) with the line out of the way.
    pub fn print_above(&self, print: impl FnOnce()) {
        match &self.bar {
            Some(bar) => bar.suspend(print),
            None => print(),
        }
    }

    /// Takes the line off the screen until [`StatusLine::resume`], for a prompt.
    pub fn pause(&self) {
        self.paused.store(true, Ordering::Relaxed);
        if let Some(bar) = self.bar.as_ref().filter(|b| !b.is_hidden()) {
            bar.disable_steady_tick();
            bar.set_draw_target(ProgressDrawTarget::hidden());
            // A hidden target does not erase what was drawn: clear it by hand.
            let _ = console_clear_line();
        }
    }

    /// Puts the line back after [`StatusLine::pause`].
    pub fn resume(&self) {
        self.paused.store(false, Ordering::Relaxed);
        if let Some(bar) = &self.bar {
            show(bar);
        }
    }

    /// Clears the line for good: the answer came, or the command ends otherwise (call
    /// it on every way out: a line left unfinished stays on the screen).
    pub fn clear(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// Draws `bar` on stderr, redrawn ten times a second so the spinner and clock move.
fn show(bar: &ProgressBar) {
    if bar.is_hidden() {
        bar.set_draw_target(ProgressDrawTarget::stderr());
        bar.enable_steady_tick(Duration::from_millis(100));
    }
}

/// Erases the terminal's current line on stderr (`CR`, `EL`).
fn console_clear_line() -> std::io::Result<()> {
    use std::io::Write;
    let mut err = std::io::stderr();
    err.write_all(b"\r\x1b[2K")?;
    err.flush()
}

/// `⠋ starting everything (npx) 4s`.
fn spinner_style() -> ProgressStyle {
    ProgressStyle::with_template("{spinner} {msg} {elapsed}").unwrap_or_else(|_| ProgressStyle::default_spinner())
}

/// `⠋ [=========>              ] 2/5 indexing 3s`.
fn bar_style() -> ProgressStyle {
    ProgressStyle::with_template("{spinner} [{bar:24}] {msg} {elapsed}")
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ")
}
