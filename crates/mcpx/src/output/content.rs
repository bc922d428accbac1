//! Content blocks for a person (MCP 2025-11-25, Server Features, "Tools", "Tool
//! Result"; the same blocks make up prompt messages and embedded resources): text as
//! text, a resource link as its name and URI, and image, audio and blob content saved
//! to files with `--out`, else one line that says what it is and how to save it.
//! Binary content never reaches the terminal.

use std::path::{Path, PathBuf};

use base64::Engine as _;
use mcpx_api::{ApiError, ErrorKind};
use mcpx_platform::fs::Dir;
use serde_json::Value;

/// Where binary content goes: a directory (`--out DIR`), one file (`mcpx read --out
/// FILE`), or nowhere (a hint is printed instead).
#[derive(Debug)]
pub enum Out {
    /// No `--out`: each binary item is described, with the hint `use --out <flag>`.
    Nowhere {
        /// What `--out` takes in this command: `DIR`, or `FILE` for `mcpx read`.
        flag: &'static str,
    },
    /// Files in this directory, named after the item.
    Dir(PathBuf),
    /// This one file (`mcpx read --out FILE` of a resource with one blob).
    File(PathBuf),
}

impl Out {
    /// `--out PATH` of `mcpx call` and `mcpx prompt`: always a directory (made when missing).
    pub fn dir(path: Option<PathBuf>) -> Out {
        path.map_or(Out::Nowhere { flag: "DIR" }, Out::Dir)
    }

    /// `--out PATH` of `mcpx read`: an existing directory, else a file.
    pub fn dir_or_file(path: Option<PathBuf>) -> Out {
        match path {
            None => Out::Nowhere { flag: "FILE" },
            Some(p) if p.is_dir() => Out::Dir(p),
            Some(p) => Out::File(p),
        }
    }
}

/// Renders content blocks, numbering the unnamed binary items `<stem>-<n>.<ext>` for
/// the files it saves.
#[derive(Debug)]
pub struct Render {
    /// Where binary content goes.
    out: Out,
    /// The name of unnamed saved files before `-<n>`: the tool or prompt.
    stem: String,
    /// Binary items seen so far, for `<n>`.
    count: usize,
}

impl Render {
    /// A renderer for `out`; `stem` (the tool or prompt) names unnamed files.
    pub fn new(out: Out, stem: &str) -> Render {
        Render { out, stem: safe_name(stem).unwrap_or_else(|| "content".to_owned()), count: 0 }
    }

    /// The renderer of `mcpx call`'s result, `--out DIR` given or not: unnamed files
    /// are named after the tool (`--tool`, else what follows the target's last dot).
    pub fn for_call(out: Option<PathBuf>, tool: Option<&str>, target: Option<&str>) -> Render {
        let tool = tool.or_else(|| target.map(|t| t.rsplit('.').next().unwrap_or(t)));
        Render::new(Out::dir(out), tool.unwrap_or("content"))
    }

    /// One content block as lines: text as is; `[resource link] name <uri> (mime)`; an
    /// embedded resource's text under `[resource <uri>]`; image, audio and blob data
    /// saved (`saved <path> (mime, N bytes)`) or described
    /// (`[image image/png, N bytes; use --out DIR to save it]`).
    ///
    /// Errors (`usage`): a file that cannot be written, or a base64 payload that does not decode.
    pub fn block(&mut self, block: &Value) -> Result<Vec<String>, ApiError> {
        let kind = block["type"].as_str().unwrap_or_default();
        let mime = block["mimeType"].as_str();
        match kind {
            "text" => Ok(vec![block["text"].as_str().unwrap_or_default().to_owned()]),
            "image" | "audio" => Ok(vec![self.binary(kind, block["data"].as_str().unwrap_or_default(), mime, None)?]),
            "resource_link" => {
                let name = block["name"].as_str().unwrap_or_default();
                let uri = block["uri"].as_str().unwrap_or_default();
                let mime = mime.map(|m| format!(" ({m})")).unwrap_or_default();
                Ok(vec![format!("[resource link] {name} <{uri}>{mime}")])
            }
            "resource" => self.contents(&block["resource"]),
            other => Ok(vec![format!("[{other}]")]),
        }
    }

    /// One item of a resource's `contents` (an embedded resource, or what
    /// `resources/read` answered): its text under `[resource <uri>]`, or its blob saved
    /// under the URI's last segment or described.
    ///
    /// Errors: as [`Render::block`].
    pub fn contents(&mut self, item: &Value) -> Result<Vec<String>, ApiError> {
        let uri = item["uri"].as_str().unwrap_or_default();
        let mime = item["mimeType"].as_str();
        match (item["text"].as_str(), item["blob"].as_str()) {
            (Some(text), _) => Ok(vec![format!("[resource {uri}]"), text.to_owned()]),
            (None, Some(blob)) => Ok(vec![self.binary("blob", blob, mime, Some(uri))?]),
            (None, None) => Ok(vec![format!("[resource {uri}]")]),
        }
    }

    /// A binary item (`kind` is `image`, `audio` or `blob`; `data` base64; `uri` names
    /// the file when it has a usable last segment): saved, or described with the hint.
    fn binary(&mut self, kind: &str, data: &str, mime: Option<&str>, uri: Option<&str>) -> Result<String, ApiError> {
        self.count += 1;
        let mime_text = mime.unwrap_or("unknown type");
        let bytes = base64::engine::general_purpose::STANDARD.decode(data.trim()).map_err(|e| {
            ApiError::new(ErrorKind::Protocol, format!("the server's {kind} content is not valid base64: {e}"))
        })?;
        let named = uri.and_then(|u| safe_name(u.trim_end_matches('/').rsplit('/').next().unwrap_or_default()));
        let name =
            named.unwrap_or_else(|| format!("{}-{}.{}", self.stem, self.count, extension(mime.unwrap_or_default())));
        let path = match &self.out {
            Out::Nowhere { flag } => {
                let what = uri.map(|u| format!(" {u}")).unwrap_or_default();
                return Ok(format!("[{kind}{what} {mime_text}, {} bytes; use --out {flag} to save it]", bytes.len()));
            }
            Out::Dir(dir) => save_in(dir, &name, &bytes)?,
            Out::File(file) => save_as(file, &bytes, self.count)?,
        };
        Ok(format!("saved {} ({mime_text}, {} bytes)", path.display(), bytes.len()))
    }
}

/// A file name made from a server-given `name`: only letters, digits, `.`, `-`, `_`
/// and `+` kept (others become `_`), at most 100 characters; `None` for a name that
/// would be empty, hidden, or `.`/`..`, so nothing a server sends can reach outside
/// the directory.
fn safe_name(name: &str) -> Option<String> {
    let name: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '+') { c } else { '_' })
        .take(100)
        .collect();
    (!name.is_empty() && !name.starts_with('.')).then_some(name)
}

/// Writes `bytes` into `dir` (made when missing) as `name`, or as `<stem>-1.<ext>`,
/// `-2`, ... when that exists: a file is never overwritten. Returns its path.
fn save_in(dir: &Path, name: &str, bytes: &[u8]) -> Result<PathBuf, ApiError> {
    let cannot = |e: std::io::Error| {
        ApiError::new(ErrorKind::Usage, format!("cannot save into {}: {e}; name a writable directory", dir.display()))
    };
    std::fs::create_dir_all(dir).map_err(cannot)?;
    let opened = Dir::open_unchecked(dir).map_err(cannot)?;
    let (stem, ext) = match name.rsplit_once('.') {
        Some((stem, ext)) if !stem.is_empty() => (stem, format!(".{ext}")),
        _ => (name, String::new()),
    };
    let free = std::iter::once(name.to_owned())
        .chain((1..1000).map(|n| format!("{stem}-{n}{ext}")))
        .find(|n| !opened.contains(n) && !dir.join(n).exists())
        .ok_or_else(|| cannot(std::io::Error::other(format!("{name} and 999 others like it exist"))))?;
    mcpx_platform::fs::write_atomic(&opened, &free, bytes, 0o644).map_err(cannot)?;
    Ok(dir.join(free))
}

/// Writes `bytes` as `file` (the `n`th binary item: only the first may go there),
/// refusing to overwrite one that exists. Returns its path.
fn save_as(file: &Path, bytes: &[u8], n: usize) -> Result<PathBuf, ApiError> {
    let usage = |text: String| ApiError::new(ErrorKind::Usage, text);
    if n > 1 {
        return Err(usage(format!(
            "the resource has more than one blob and --out names one file ({}); give a directory",
            file.display()
        )));
    }
    if file.exists() {
        return Err(usage(format!("{} exists; remove it or name another file", file.display())));
    }
    let name = file
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| usage(format!("--out {}: name a file or a directory", file.display())))?;
    let parent = file.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let cannot = |e: std::io::Error| usage(format!("cannot write {}: {e}", file.display()));
    let dir = Dir::open_unchecked(parent).map_err(cannot)?;
    mcpx_platform::fs::write_atomic(&dir, name, bytes, 0o644).map_err(cannot)?;
    Ok(file.to_owned())
}

/// The usual file extension of a MIME type (`bin` when unknown).
fn extension(mime: &str) -> &'static str {
    let essence = mime.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
    match essence.as_str() {
        "image/png" => "png",
        "image/jpeg" | "image/jpg" => "jpg",
        "image/gif" => "gif",
        "image/webp" => "webp",
        "image/svg+xml" => "svg",
        "audio/wav" | "audio/x-wav" | "audio/wave" => "wav",
        "audio/mpeg" | "audio/mp3" => "mp3",
        "audio/ogg" => "ogg",
        "audio/flac" => "flac",
        "application/pdf" => "pdf",
        "application/json" => "json",
        "application/gzip" => "gz",
        "application/zip" => "zip",
        "text/plain" => "txt",
        "text/markdown" => "md",
        "text/html" => "html",
        "text/csv" => "csv",
        _ => "bin",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_given_names_cannot_leave_the_directory() {
        assert_eq!(safe_name("cat.png").as_deref(), Some("cat.png"));
        assert_eq!(safe_name("..").as_deref(), None);
        assert_eq!(safe_name(".bashrc").as_deref(), None);
        assert_eq!(safe_name("a/../../b").as_deref(), Some("a_.._.._b"));
        assert_eq!(safe_name("").as_deref(), None);
        assert_eq!(extension("image/png"), "png");
        assert_eq!(extension("audio/wav; rate=8000"), "wav");
        assert_eq!(extension("x/y"), "bin");
    }

    #[test]
    fn embedded_blobs_are_saved_under_a_safe_name() {
        let dir = tempfile::tempdir().unwrap();
        let mut render = Render::new(Out::Dir(dir.path().to_owned()), "tool");
        let blob = |uri: &str| serde_json::json!({ "type": "resource", "resource": { "uri": uri, "mimeType": "application/pdf", "blob": "AAEC" } });
        let saved = render.block(&blob("x://a/b/report.pdf")).unwrap();
        assert_eq!(saved, [format!("saved {} (application/pdf, 3 bytes)", dir.path().join("report.pdf").display())]);
        // A name that would climb out of the directory is not used: the item is numbered.
        let saved = render.block(&blob("x://a/..")).unwrap();
        assert_eq!(saved, [format!("saved {} (application/pdf, 3 bytes)", dir.path().join("tool-2.pdf").display())]);
        assert_eq!(std::fs::read(dir.path().join("tool-2.pdf")).unwrap(), [0, 1, 2]);
        let mut hint = Render::new(Out::dir(None), "tool");
        let line =
            hint.block(&serde_json::json!({ "type": "audio", "data": "AAEC", "mimeType": "audio/wav" })).unwrap();
        assert_eq!(line, ["[audio audio/wav, 3 bytes; use --out DIR to save it]"]);
    }

    #[test]
    fn saving_never_overwrites() {
        let dir = tempfile::tempdir().unwrap();
        let first = save_in(dir.path(), "a.png", b"1").unwrap();
        let second = save_in(dir.path(), "a.png", b"2").unwrap();
        assert_eq!(first, dir.path().join("a.png"));
        assert_eq!(second, dir.path().join("a-1.png"));
        assert_eq!(std::fs::read(first).unwrap(), b"1");
        let file = dir.path().join("b.bin");
        save_as(&file, b"x", 1).unwrap();
        assert!(save_as(&file, b"y", 1).unwrap_err().message.contains("exists"));
    }
}
