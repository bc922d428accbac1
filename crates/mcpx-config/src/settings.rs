//! The daemon's own settings: the top-level `activity` and `otel` blocks of the user
//! config (or of the daemon's `MCPX_CONFIG` file), read when the daemon starts
//! (`docs/configuration.md`, "The activity record"; `docs/telemetry.md`).
//!
//! ```jsonc
//! { "activity": { "enabled": true, "arguments": false, "keep": "720h", "maxBytes": "64MiB", "maxValueBytes": "16KiB" },
//!   "otel": { "endpoint": "http://localhost:4318", "serviceName": "mcpx", "headers": { "x-team": "a" } } }
//! ```

use std::collections::BTreeMap;
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
        read_block(file, "activity", ActivitySettings::parse)
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

/// The settings `parse` makes of `file`'s top-level block `name`; the defaults when the
/// file or the block is absent.
///
/// Errors: as [`block`]; what `parse` says of a key, as [`ConfigError::InvalidSetting`].
fn read_block<T: Default>(
    file: &Path,
    name: &str,
    parse: fn(&Value) -> Result<T, (String, String)>,
) -> Result<T, ConfigError> {
    match block(file, name)? {
        None => Ok(T::default()),
        Some(block) => {
            parse(&block).map_err(|(key, message)| ConfigError::InvalidSetting { file: file.to_owned(), key, message })
        }
    }
}

/// The top-level block `name` of `file`; `None` when the file or the block is absent
/// (or `null`).
///
/// Errors: the file cannot be read or is not JSON(C) ([`ConfigError::Io`],
/// [`ConfigError::Syntax`]).
fn block(file: &Path, name: &str) -> Result<Option<Value>, ConfigError> {
    let text = match std::fs::read_to_string(file) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(ConfigError::Io { file: file.to_owned(), error }),
    };
    let syntax = |offset: usize, message: String| {
        let (line, column) = line_column(&text, offset);
        ConfigError::Syntax { file: file.to_owned(), line, column, message }
    };
    let json = jsonc::to_json(&text).map_err(|e| syntax(e.offset, e.message.to_owned()))?;
    let mut top: Value = serde_json::from_str(&json).map_err(|e| ConfigError::Syntax {
        file: file.to_owned(),
        line: e.line(),
        column: e.column(),
        message: e.to_string(),
    })?;
    Ok(top.get_mut(name).map(Value::take).filter(|b| !b.is_null()))
}

/// The keys of the `otel` block.
pub const OTEL_KEYS: [&str; 4] = ["enabled", "endpoint", "serviceName", "headers"];

/// The OpenTelemetry export's settings (`otel` at the top level of the user config;
/// `docs/telemetry.md`). The standard `OTEL_*` variables of the daemon's environment
/// fill in what the block leaves out; the daemon resolves the two.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OtelSettings {
    /// `enabled`: `false` turns the export off whatever the environment says; `true`
    /// with no endpoint anywhere exports to `http://localhost:4318`, OTLP's default.
    pub enabled: Option<bool>,
    /// `endpoint`: the collector's OTLP/HTTP base URL, as `OTEL_EXPORTER_OTLP_ENDPOINT`
    /// takes it (`/v1/traces` is appended).
    pub endpoint: Option<String>,
    /// `serviceName`: the `service.name` of the spans (else `OTEL_SERVICE_NAME`, else
    /// `mcpx`).
    pub service_name: Option<String>,
    /// `headers`: sent with every export (an API key), over those of
    /// `OTEL_EXPORTER_OTLP_HEADERS`.
    pub headers: BTreeMap<String, String>,
}

impl OtelSettings {
    /// The settings in `file`'s top-level `otel` block; the defaults when the file or
    /// the block is absent.
    ///
    /// Errors: as [`ActivitySettings::read`], naming `otel.<key>`.
    pub fn read(file: &Path) -> Result<OtelSettings, ConfigError> {
        read_block(file, "otel", OtelSettings::parse)
    }

    /// The settings of an `otel` block. Errors: `(key, message)`.
    fn parse(block: &Value) -> Result<OtelSettings, (String, String)> {
        let Value::Object(block) = block else {
            return Err(("otel".into(), format!("expected an object, found {}", json_kind(block))));
        };
        let mut settings = OtelSettings::default();
        for (name, value) in block {
            let key = format!("otel.{name}");
            let text = || {
                value
                    .as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| (key.clone(), format!("expected a string, found {}", json_kind(value))))
            };
            match name.as_str() {
                "enabled" => {
                    let flag = value.as_bool();
                    settings.enabled =
                        Some(flag.ok_or_else(|| {
                            (key.clone(), format!("expected true or false, found {}", json_kind(value)))
                        })?);
                }
                "endpoint" => {
                    let url = text()?;
                    if !(url.starts_with("http://") || url.starts_with("https://")) {
                        return Err((key, format!("expected an http:// or https:// URL, found `{url}`")));
                    }
                    settings.endpoint = Some(url);
                }
                "serviceName" => settings.service_name = Some(text()?),
                "headers" => {
                    let Value::Object(headers) = value else {
                        return Err((key, format!("expected an object of strings, found {}", json_kind(value))));
                    };
                    for (header, v) in headers {
                        let v = v.as_str().ok_or_else(|| {
                            (format!("{key}.{header}"), format!("expected a string, found {}", json_kind(v)))
                        })?;
                        settings.headers.insert(header.clone(), v.to_owned());
                    }
                }
                _ => return Err((key, format!("unknown key; an `otel` block takes: {}", OTEL_KEYS.join(", ")))),
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

    #[test]
    fn the_otel_block_is_read_and_a_bad_key_named() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("config.json");
        std::fs::write(&file, r#"{ "otel": { "endpoint": "http://127.0.0.1:4318", "headers": { "x-key": "k" } } }"#)
            .unwrap();
        let set = OtelSettings::read(&file).unwrap();
        assert_eq!(set.endpoint.as_deref(), Some("http://127.0.0.1:4318"));
        assert_eq!(set.headers.get("x-key").map(String::as_str), Some("k"));
        assert_eq!(set.enabled, None);
        for (text, said) in [
            (r#"{ "otel": { "endpoint": "localhost:4318" } }"#, "`otel.endpoint`: expected an http:// or https:// URL"),
            (r#"{ "otel": { "headers": { "a": 1 } } }"#, "`otel.headers.a`: expected a string"),
            (r#"{ "otel": { "sampler": "x" } }"#, "`otel.sampler`: unknown key"),
        ] {
            std::fs::write(&file, text).unwrap();
            let error = OtelSettings::read(&file).unwrap_err().to_string();
            assert!(error.contains("config.json: invalid ") && error.contains(said), "{text}: {error}");
        }
        std::fs::write(&file, "{}").unwrap();
        assert_eq!(OtelSettings::read(&file).unwrap(), OtelSettings::default());
    }
}
