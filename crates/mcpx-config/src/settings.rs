//! The daemon's own settings: the top-level `activity` block of the user config (or of
//! the daemon's `MCPX_CONFIG` file), read when the daemon starts
//! (`docs/configuration.md`, "The activity record").
//!
//! ```jsonc
//! { "activity": { "enabled": true, "arguments": false, "keep": "720h", "maxBytes": "64MiB", "maxValueBytes": "16KiB" } }
//! ```

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use super::clients::ConfigEnv;
use super::error::ConfigError;
use super::jsonc;
use super::parse::line_column;
use super::units::{duration_from_json, json_kind, size_from_json};

/// The keys of the `activity` block.
pub const ACTIVITY_KEYS: [&str; 5] = ["enabled", "arguments", "keep", "maxBytes", "maxValueBytes"];

/// The activity record's settings (`activity` at the top level of the user config).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActivitySettings {
    /// `enabled`: whether calls are recorded at all (default `true`).
    pub enabled: bool,
    /// `arguments`: whether a call's arguments and result are kept (default `false`),
    /// secrets replaced by `[secret]`.
    pub arguments: bool,
    /// `keep`: how long an entry is kept (default 30 days).
    pub keep: Duration,
    /// `maxBytes`: the most the record's file may take on disk, in allocated blocks as
    /// `du` counts them (default 64 MiB; at least 1 MiB).
    pub max_bytes: u64,
    /// `maxValueBytes`: where kept arguments and results are cut (default 16 KiB).
    pub max_value_bytes: u64,
}

impl Default for ActivitySettings {
    fn default() -> Self {
        ActivitySettings {
            enabled: true,
            arguments: false,
            keep: Duration::from_secs(30 * 24 * 3600),
            max_bytes: 64 << 20,
            max_value_bytes: 16 << 10,
        }
    }
}

/// The smallest `maxBytes` taken: an empty record takes half of it.
const MIN_MAX_BYTES: u64 = 1 << 20;

/// The file the daemon's settings come from: `explicit` (the daemon's `MCPX_CONFIG`)
/// when set, else the user config ([`ConfigEnv::user_file`]).
pub fn settings_file(env: &ConfigEnv, explicit: Option<&Path>) -> Option<PathBuf> {
    explicit.map(Path::to_path_buf).or_else(|| env.user_file())
}

impl ActivitySettings {
    /// The settings in `file`'s top-level `activity` block; the defaults when the file
    /// or the block is absent.
    ///
    /// Errors: the file cannot be read or is not JSON(C) ([`ConfigError::Io`],
    /// [`ConfigError::Syntax`]); a key of the block is unknown or its value has the
    /// wrong type ([`ConfigError::InvalidSetting`], naming `activity.<key>`).
    pub fn read(file: &Path) -> Result<ActivitySettings, ConfigError> {
        let text = match std::fs::read_to_string(file) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(ActivitySettings::default()),
            Err(error) => return Err(ConfigError::Io { file: file.to_owned(), error }),
        };
        let syntax = |offset: usize, message: String| {
            let (line, column) = line_column(&text, offset);
            ConfigError::Syntax { file: file.to_owned(), line, column, message }
        };
        let json = jsonc::to_json(&text).map_err(|e| syntax(e.offset, e.message.to_owned()))?;
        let top: Value = serde_json::from_str(&json).map_err(|e| ConfigError::Syntax {
            file: file.to_owned(),
            line: e.line(),
            column: e.column(),
            message: e.to_string(),
        })?;
        match top.get("activity") {
            None | Some(Value::Null) => Ok(ActivitySettings::default()),
            Some(block) => ActivitySettings::parse(block).map_err(|(key, message)| ConfigError::InvalidSetting {
                file: file.to_owned(),
                key,
                message,
            }),
        }
    }

    /// The settings of an `activity` block. Errors: `(key, message)`.
    fn parse(block: &Value) -> Result<ActivitySettings, (String, String)> {
        let Value::Object(block) = block else {
            return Err(("activity".into(), format!("expected an object, found {}", json_kind(block))));
        };
        let mut settings = ActivitySettings::default();
        for (name, value) in block {
            let key = format!("activity.{name}");
            let flag = || {
                value
                    .as_bool()
                    .ok_or_else(|| (key.clone(), format!("expected true or false, found {}", json_kind(value))))
            };
            match name.as_str() {
                "enabled" => settings.enabled = flag()?,
                "arguments" => settings.arguments = flag()?,
                "keep" => settings.keep = duration_from_json(value).map_err(|m| (key.clone(), m))?,
                "maxBytes" => {
                    settings.max_bytes = size_from_json(value).map_err(|m| (key.clone(), m))?;
                    if settings.max_bytes < MIN_MAX_BYTES {
                        return Err((key, "the record needs at least 1MiB".into()));
                    }
                }
                "maxValueBytes" => settings.max_value_bytes = size_from_json(value).map_err(|m| (key.clone(), m))?,
                _ => {
                    return Err((key, format!("unknown key; an `activity` block takes: {}", ACTIVITY_KEYS.join(", "))));
                }
            }
        }
        Ok(settings)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Result<ActivitySettings, String> {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("config.json");
        std::fs::write(&file, text).unwrap();
        ActivitySettings::read(&file).map_err(|e| e.to_string())
    }

    #[test]
    fn the_block_sets_what_it_names_and_leaves_the_defaults() {
        assert_eq!(read("{}").unwrap(), ActivitySettings::default());
        let set = read(
            r#"{ "activity": { "arguments": true, "maxBytes": "1MiB", "keep": "48h", }, // on
            "mcpServers": {} }"#,
        )
        .unwrap();
        assert!(set.enabled && set.arguments);
        assert_eq!((set.max_bytes, set.keep), (1 << 20, Duration::from_secs(2 * 24 * 3600)));
        assert!(!read(r#"{ "activity": { "enabled": false } }"#).unwrap().enabled);
        let missing = ActivitySettings::read(Path::new("/nonexistent/mcpx/config.json")).unwrap();
        assert_eq!(missing, ActivitySettings::default());
    }

    #[test]
    fn a_bad_value_names_the_file_and_key() {
        let wrong = [
            (r#"{ "activity": { "enabled": "yes" } }"#, "`activity.enabled`: expected true or false, found a string"),
            (r#"{ "activity": { "maxBytes": "512KiB" } }"#, "`activity.maxBytes`: the record needs at least 1MiB"),
            (r#"{ "activity": { "kept": "1d" } }"#, "`activity.kept`: unknown key; an `activity` block takes: enabled"),
            (r#"{ "activity": { "keep": "soon" } }"#, "`activity.keep`: "),
            (r#"{ "activity": [] }"#, "`activity`: expected an object"),
        ];
        for (text, said) in wrong {
            let error = read(text).unwrap_err();
            assert!(error.contains("config.json: invalid ") && error.contains(said), "{text}: {error}");
        }
        assert!(read("{ nope").unwrap_err().contains("config.json:1:3"));
    }
}
