//! The terminal's settings (POSIX termios, the same on Linux and macOS): saved before a
//! prompt puts the terminal in raw mode, and put back if the command ends while the
//! prompt still holds it.

use std::os::fd::AsFd;

use nix::sys::termios::{SetArg, Termios, tcgetattr, tcsetattr};

/// The settings of standard input's terminal at one moment.
#[derive(Clone)]
pub struct Saved(Termios);

impl Saved {
    /// Standard input's terminal settings now; `None` when stdin is not a terminal.
    pub fn stdin() -> Option<Saved> {
        tcgetattr(std::io::stdin().as_fd()).ok().map(Saved)
    }

    /// Puts the settings back at once (`TCSANOW`). Failures are ignored: this is the
    /// last thing done on the way out, and there is nothing better to do then.
    pub fn restore(&self) {
        let _ = tcsetattr(std::io::stdin().as_fd(), SetArg::TCSANOW, &self.0);
    }
}
