//! The module graph check (docs/code-mode.md, "The sandbox"): before a script runs, every
//! module Deno can see it load (`deno info --json`: static imports, and dynamic ones with
//! a literal specifier, of any type) must be a file the script may read. Deno gates a
//! module it first meets at run time by its read permission, but not the graph it
//! loads before the run, so this check (and, beneath it, the kernel) closes that.
//!
//! `deno info` runs under the same confinement as the script, so a refused file is
//! never read; this module only reads the graph's JSON and names what it refuses.

use std::path::{Path, PathBuf};

use serde::Deserialize;

/// What a script may load: files beneath `dirs`, and exactly `files`. Both are
/// resolved (symbolic links followed) when the check is made.
#[derive(Debug, Clone, Default)]
pub struct Loadable {
    /// The run directory and the `--allow-read` directories.
    pub dirs: Vec<PathBuf>,
    /// The script's own file (`mcpx run`).
    pub files: Vec<PathBuf>,
}

/// The part of `deno info --json` this check reads.
#[derive(Deserialize)]
struct Info {
    #[serde(default)]
    modules: Vec<Module>,
}

#[derive(Deserialize)]
struct Module {
    specifier: String,
}

/// Checks the graph `deno info --json` printed against what the script may load.
///
/// Errors: one sentence per refused module, naming its specifier (and, for a link,
/// where it leads), never its contents; or that the graph could not be read.
pub fn check(info_json: &[u8], loadable: &Loadable) -> Result<(), String> {
    let info: Info = serde_json::from_slice(info_json)
        .map_err(|e| format!("cannot read the script's module graph from `deno info --json`: {e}"))?;
    let dirs: Vec<PathBuf> = loadable.dirs.iter().map(|d| resolved(d)).collect();
    let files: Vec<PathBuf> = loadable.files.iter().map(|f| resolved(f)).collect();
    let refused: Vec<String> = info.modules.iter().filter_map(|m| refusal(&m.specifier, &dirs, &files)).collect();
    if refused.is_empty() {
        return Ok(());
    }
    Err(format!(
        "the script loads {}, so it did not run: a script loads only its own files, the run's, and files under --allow-read directories",
        refused.join("; and ")
    ))
}

/// Why the module at `specifier` may not be loaded, or `None` when it may.
fn refusal(specifier: &str, dirs: &[PathBuf], files: &[PathBuf]) -> Option<String> {
    let Some((scheme, _)) = specifier.split_once(':') else {
        return Some(format!("{specifier}, which is not a URL"));
    };
    match scheme {
        // Inline modules read no file; Node's built-in modules are under Deno's
        // permissions and the kernel's like any other API.
        "data" | "node" => return None,
        "file" => {}
        _ => return Some(format!("{specifier} (remote and npm modules are refused)")),
    }
    let Some(path) = file_path(specifier) else {
        return Some(format!("{specifier}, which names no local file"));
    };
    let real = resolved(&path);
    if dirs.iter().any(|d| real.starts_with(d)) || files.contains(&real) {
        return None;
    }
    if real != path {
        Some(format!("{specifier} (it leads to {}, outside what it may read)", real.display()))
    } else {
        Some(format!("{specifier}, outside what it may read"))
    }
}

/// The path a `file:` URL names, percent-decoded (RFC 8089; `..` already resolved by the
/// URL's parsing).
fn file_path(specifier: &str) -> Option<PathBuf> {
    url::Url::parse(specifier).ok()?.to_file_path().ok()
}

/// `path` with its symbolic links followed; when it cannot be (it does not exist),
/// its nearest existing ancestor's resolved path joined with the rest, so a link
/// among the ancestors is still followed.
fn resolved(path: &Path) -> PathBuf {
    if let Ok(real) = path.canonicalize() {
        return real;
    }
    match (path.parent(), path.file_name()) {
        (Some(parent), Some(name)) if parent != path => resolved(parent).join(name),
        _ => path.to_path_buf(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(specifiers: &[&str]) -> Vec<u8> {
        let modules: Vec<serde_json::Value> =
            specifiers.iter().map(|s| serde_json::json!({ "kind": "esm", "specifier": s })).collect();
        serde_json::json!({ "version": 1, "roots": [specifiers[0]], "modules": modules }).to_string().into_bytes()
    }

    #[test]
    fn only_the_run_its_file_and_allowed_directories_load() {
        let root = tempfile::tempdir().unwrap();
        let base = root.path().canonicalize().unwrap();
        let (run, allowed, other) = (base.join("run"), base.join("allowed"), base.join("other"));
        for d in [&run, &allowed, &other] {
            std::fs::create_dir(d).unwrap();
        }
        let script = other.join("script.ts");
        std::fs::write(&script, "").unwrap();
        std::fs::write(other.join("secret.txt"), "s3cret").unwrap();
        std::os::unix::fs::symlink(other.join("secret.txt"), allowed.join("link.txt")).unwrap();
        std::os::unix::fs::symlink(&other, allowed.join("dirlink")).unwrap();
        let loadable = Loadable { dirs: vec![run.clone(), allowed.clone()], files: vec![script.clone()] };
        let url = |p: &Path| url::Url::from_file_path(p).unwrap().to_string();
        let ok = graph(&[
            &url(&run.join("main.ts")),
            &url(&script),
            &url(&allowed.join("data.json")),
            "node:fs",
            "data:text/javascript,export default 1",
        ]);
        assert_eq!(check(&ok, &loadable), Ok(()));
        let secret = other.join("secret.txt");
        let encoded = format!("file://{}", secret.display()).replace("secret", "%73ecret");
        for bad in [
            url(&secret),
            encoded,
            format!("file://{}/../other/secret.txt", run.display()),
            url(&allowed.join("link.txt")),
            url(&allowed.join("dirlink/secret.txt")),
            "https://example.com/x.ts".to_owned(),
            "npm:left-pad".to_owned(),
            "jsr:@std/path".to_owned(),
        ] {
            let err = check(&graph(&[&url(&run.join("main.ts")), &bad]), &loadable).unwrap_err();
            assert!(err.contains("did not run"), "{bad}: {err}");
            assert!(!err.contains("s3cret"), "{bad}: {err}");
        }
        // A link is named, and where it leads.
        let err = check(&graph(&[&url(&allowed.join("link.txt"))]), &loadable).unwrap_err();
        assert!(err.contains("link.txt") && err.contains(&format!("leads to {}", secret.display())), "{err}");
        // A file that does not exist under an allowed directory is left to Deno.
        assert_eq!(check(&graph(&[&url(&allowed.join("missing/x.ts"))]), &loadable), Ok(()));
        assert!(check(b"not json", &loadable).unwrap_err().contains("module graph"));
    }
}
