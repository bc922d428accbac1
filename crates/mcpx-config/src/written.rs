//! The `mcpx` block of an entry written back in the config's own spelling, defaults
//! filled in: what `mcpx config` shows (`docs/configuration.md`, "The `mcpx` block").

use std::time::Duration;

use serde_json::{Value, json};

use super::entry::ServerOptions;

impl ServerOptions {
    /// Every key of the `mcpx` block, as a JSON object in the file's spelling
    /// (`idleTimeout`, ...): durations like `"5m"` (`"0"` for none, as a file writes
    /// it), sizes in bytes, `description` and `includeTools` `null` when unset.
    pub fn written(&self) -> Value {
        json!({
            "sharing": self.sharing.as_str(),
            "scope": self.scope.as_str(),
            "max": self.max,
            "min": self.min,
            "idleTimeout": duration(self.idle_timeout),
            "callTimeout": duration(self.call_timeout),
            "startTimeout": duration(self.start_timeout),
            "supervised": self.supervised,
            "bufferBytes": self.buffer_bytes,
            "maxMessageBytes": self.max_message_bytes,
            "orphanTimeout": duration(self.orphan_timeout),
            "description": self.description,
            "disabled": self.disabled,
            "includeTools": self.include_tools,
            "excludeTools": self.exclude_tools,
            "maxResultBytes": self.max_result_bytes,
            "maxResultBytesPerTool": self.max_result_bytes_per_tool,
            "pinning": self.pinning.map(|p| p.as_str()),
            "sandbox": self.sandbox.as_ref().map(|s| s.written()),
        })
    }
}

/// A duration as a config file writes it: in the largest whole unit of h, m, s and ms;
/// `"0"` for none.
fn duration(d: Option<Duration>) -> String {
    match d.map_or(0, |d| d.as_millis()) {
        0 => "0".to_owned(),
        ms if ms % 3_600_000 == 0 => format!("{}h", ms / 3_600_000),
        ms if ms % 60_000 == 0 => format!("{}m", ms / 60_000),
        ms if ms % 1000 == 0 => format!("{}s", ms / 1000),
        ms => format!("{ms}ms"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_written_in_the_files_spelling() {
        let written = ServerOptions::default().written();
        assert_eq!(written["idleTimeout"], "5m");
        assert_eq!(written["callTimeout"], "2m");
        assert_eq!(written["orphanTimeout"], "1h");
        assert_eq!(written["max"], 4);
        assert_eq!(written["sharing"], "shared");
        let odd =
            ServerOptions { call_timeout: Some(Duration::from_millis(1500)), idle_timeout: None, ..Default::default() };
        assert_eq!(odd.written()["callTimeout"], "1500ms");
        assert_eq!(odd.written()["idleTimeout"], "0");
    }
}
