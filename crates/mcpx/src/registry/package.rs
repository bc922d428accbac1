//! A registry server's `server.json` made an mcpx entry: one of its `packages` (npm,
//! PyPI, NuGet, OCI, MCPB) or `remotes`, chosen by `--package` or by the runtimes found
//! on this machine, with its arguments and inputs filled in and its version pinned
//! (the `server.json` schema's `Package`, `Argument`, `KeyValueInput` and `Transport`;
//! see `crates/mcpx/tests/fixtures/registry/README.md`).
//!
//! - `npm` → `npx -y <identifier>@<version>`; `pypi` → `uvx <identifier>==<version>`;
//!   `nuget` → `dnx <identifier>@<version> --yes` (a `runtimeHint` names another runner,
//!   and `runtimeArguments` come before the package);
//! - `oci` → `docker run -i --rm -e NAME... <image>` (or `podman`), the values in the
//!   entry's `env`; a container engine counts only when its `info` answers;
//! - `mcpb` → the bundle downloaded, its `fileSha256` checked (nothing is written or run
//!   when it does not match), unpacked under `<state>/mcpb/`, and run as its
//!   `manifest.json` says (`server.mcp_config`);
//! - a `remotes` entry → a URL entry, its `{variables}` filled and its headers set.
//!
//! Inputs (arguments, environment variables, URL variables, headers) take `--input K=V`,
//! else their `default`, else are asked for on a terminal; one that is required and has
//! none is an error that names it. A secret one is kept in the secret store as
//! `<name>.<KEY>` and written `${secret:<name>.<KEY>}`.

use std::collections::{BTreeMap, HashMap};
use std::io::{IsTerminal, Read};
use std::path::Path;
use std::time::Duration;

use mcpx_api::{ApiError, ErrorKind};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

/// One server as a registry answers it: its `server.json` and its status.
#[derive(Debug, Clone)]
pub struct Found {
    /// The `server.json` document.
    pub server: Value,
    /// `active`, `deprecated` or `deleted` (the registry's `_meta`); `active` when unsaid.
    pub status: String,
    /// The registry it came from.
    pub registry: String,
    /// How old the answer is when it came from the cache after the registry could not be reached.
    pub stale: Option<Duration>,
}

/// A server's status as shown: nothing when active.
pub fn marked(status: &str) -> String {
    match status {
        "active" => String::new(),
        other => format!(" [{}]", other.to_uppercase()),
    }
}

/// An entry made of a `server.json`, and what goes with it.
#[derive(Debug)]
pub struct Made {
    /// The entry, in mcpx's shape.
    pub entry: Map<String, Value>,
    /// Secrets to store first: name → value (`None`: asked for when stored).
    pub secrets: BTreeMap<String, Option<String>>,
    /// Which package was chosen and why, one line.
    pub why: String,
}

/// The kinds of package and their runners, in the order a choice says them.
fn runner(kind: &str) -> Option<&'static str> {
    match kind {
        "npm" => Some("npx"),
        "pypi" => Some("uvx"),
        "nuget" => Some("dnx"),
        _ => None,
    }
}

/// Whether `program` is on `PATH`.
fn on_path(program: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|path| std::env::split_paths(&path).any(|d| d.join(program).is_file()))
}

/// The container engine whose `info` answers (within 10 s): `docker`, else `podman`.
fn container_engine() -> Option<&'static str> {
    ["docker", "podman"].into_iter().filter(|e| on_path(e)).find(|engine| {
        #[allow(clippy::disallowed_methods)] // Reason: asking the engine whether it runs, as `docker info` does.
        let child = std::process::Command::new(engine)
            .arg("info")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn();
        let Ok(mut child) = child else { return false };
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            match child.try_wait() {
                Ok(Some(status)) => return status.success(),
                Ok(None) if std::time::Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return false;
                }
            }
        }
    })
}

/// One way to run the server: a package or a remote, and why it can run here or not.
struct Candidate<'a> {
    kind: String,
    spec: &'a Value,
    remote: bool,
    /// `Ok(runner)` when it can run here; `Err(what is missing)`.
    runs: Result<String, String>,
}

/// Every package and remote of `server`, in its order, with what each needs.
fn candidates(server: &Value) -> Vec<Candidate<'_>> {
    let mut found = Vec::new();
    for spec in server["packages"].as_array().into_iter().flatten() {
        let kind = spec["registryType"].as_str().unwrap_or_default().to_owned();
        let runs = match kind.as_str() {
            "npm" | "pypi" | "nuget" => {
                let program = spec["runtimeHint"].as_str().or(runner(&kind)).unwrap_or_default().to_owned();
                if on_path(&program) { Ok(program) } else { Err(format!("{program} is not on PATH")) }
            }
            "oci" => {
                container_engine().map(str::to_owned).ok_or_else(|| "no docker or podman answers `info`".to_owned())
            }
            "mcpb" => Ok("its manifest's command".to_owned()),
            other => Err(format!("mcpx does not run `{other}` packages")),
        };
        found.push(Candidate { kind, spec, remote: false, runs });
    }
    for spec in server["remotes"].as_array().into_iter().flatten() {
        found.push(Candidate { kind: "remote".into(), spec, remote: true, runs: Ok("its URL".to_owned()) });
    }
    found
}

/// What to install for a package kind.
fn install_hint(kind: &str) -> &'static str {
    match kind {
        "npm" => "install Node.js, which brings npx",
        "pypi" => "`pip install uv`, which brings uvx",
        "nuget" => "install the .NET 10 SDK, which brings dnx",
        "oci" => "install and start Docker or Podman",
        _ => "",
    }
}

/// The entry for `found` as `local`, from the package `prefer` names first (else the
/// first this machine can run), with `inputs` (`--input K=V`; a repeated argument's
/// values comma-separated). An MCPB bundle is downloaded and checked, and unpacked
/// under `state` unless `dry_run`.
///
/// Errors: nothing of it can run here, a non-stdio package, a required input missing,
/// a bad choice (`usage`); a bundle that cannot be had or whose checksum does not match
/// (`config`).
pub async fn entry(
    found: &Found,
    local: &str,
    prefer: &[String],
    inputs: &HashMap<String, String>,
    state: &Path,
    dry_run: bool,
) -> Result<Made, ApiError> {
    let server = &found.server;
    let name = server["name"].as_str().unwrap_or_default();
    let all = candidates(server);
    if all.is_empty() {
        return Err(usage(format!("`{name}` lists no package and no remote: there is nothing to run")));
    }
    let chosen = if prefer.is_empty() {
        all.iter().find(|c| c.runs.is_ok()).ok_or_else(|| {
            let missing: Vec<String> = all
                .iter()
                .map(|c| {
                    format!(
                        "{} ({}; {})",
                        c.kind,
                        c.runs.as_ref().err().map_or("", String::as_str),
                        install_hint(&c.kind)
                    )
                })
                .collect();
            usage(format!("no package of `{name}` can run here: {}; or pass --package TYPE", missing.join("; ")))
        })?
    } else {
        prefer.iter().find_map(|p| all.iter().find(|c| c.kind == *p)).ok_or_else(|| {
            let kinds: Vec<&str> = all.iter().map(|c| c.kind.as_str()).collect();
            usage(format!("`{name}` has no {} package; it has: {}", prefer.join(" or "), kinds.join(", ")))
        })?
    };
    let others: Vec<String> = all
        .iter()
        .filter(|c| !std::ptr::eq(*c, chosen))
        .map(|c| match &c.runs {
            Ok(_) => c.kind.clone(),
            Err(why) => format!("{} ({why})", c.kind),
        })
        .collect();
    let reason = match (&chosen.runs, prefer.is_empty()) {
        (Ok(runner), true) => format!("it runs here ({runner})"),
        (Ok(runner), false) => format!("--package asked for it ({runner})"),
        (Err(why), _) => format!("--package asked for it, though {why}"),
    };
    let mut why = format!("chose the {} of `{name}`: {reason}", if chosen.remote { "remote" } else { "package" });
    if !others.is_empty() {
        why.push_str(&format!("; it also offers {}", others.join(", ")));
    }
    let mut fill = Fill { local, inputs, secrets: BTreeMap::new() };
    let entry = if chosen.remote {
        remote(chosen.spec, &mut fill)?
    } else {
        package(chosen, &mut fill, state, dry_run).await?
    };
    Ok(Made { entry, secrets: fill.secrets, why })
}

fn usage(message: String) -> ApiError {
    ApiError::new(ErrorKind::Usage, message)
}

/// Filling in inputs: the values given, and the secrets to store.
struct Fill<'a> {
    local: &'a str,
    inputs: &'a HashMap<String, String>,
    secrets: BTreeMap<String, Option<String>>,
}

impl Fill<'_> {
    /// The value of the input `key` (`spec` is its `Input`: `description`, `default`,
    /// `isRequired`, `isSecret`, `choices`): given, else its default, else asked for;
    /// `None` when it is optional and has none. A secret value is stored and its
    /// `${secret:...}` returned.
    ///
    /// Errors: required and missing (with no terminal to ask on), or not one of its
    /// `choices` (`usage`).
    fn value(&mut self, key: &str, spec: &Value) -> Result<Option<String>, ApiError> {
        let secret = spec["isSecret"] == true;
        let given = self.inputs.get(key).cloned();
        let value = given.or_else(|| spec["default"].as_str().map(str::to_owned));
        let value = match value {
            Some(v) => Some(v),
            None if spec["isRequired"] == true => {
                let about = spec["description"].as_str().map(|d| format!(" ({d})")).unwrap_or_default();
                if !std::io::stdin().is_terminal() {
                    return Err(usage(format!("`{key}`{about} is required: pass --input {key}=VALUE")));
                }
                if secret {
                    // Asked for when it is stored.
                    let stored = format!("{}.{key}", self.local);
                    self.secrets.insert(stored.clone(), None);
                    return Ok(Some(format!("${{secret:{stored}}}")));
                }
                eprint!("{key}{about}: ");
                let mut line = String::new();
                std::io::stdin().read_line(&mut line).map_err(|e| usage(format!("cannot read `{key}`: {e}")))?;
                Some(line.trim_end_matches(['\n', '\r']).to_owned()).filter(|l| !l.is_empty())
            }
            None => None,
        };
        let Some(value) = value else { return Ok(None) };
        if let Some(choices) = spec["choices"].as_array() {
            if !choices.iter().any(|c| c.as_str() == Some(value.as_str())) {
                let list: Vec<&str> = choices.iter().filter_map(Value::as_str).collect();
                return Err(usage(format!("`{key}` must be one of {}, not `{value}`", list.join(", "))));
            }
        }
        if secret {
            let stored = format!("{}.{key}", self.local);
            self.secrets.insert(stored.clone(), Some(value));
            return Ok(Some(format!("${{secret:{stored}}}")));
        }
        Ok(Some(value))
    }

    /// `template` with each `{var}` of `variables` filled ([`Fill::value`]). A `${`
    /// written in the registry's text is kept literal.
    fn template(&mut self, template: &str, variables: &Value) -> Result<String, ApiError> {
        let mut out = template.replace("${", "$${");
        for (var, spec) in variables.as_object().into_iter().flatten() {
            let needle = format!("{{{var}}}");
            if out.contains(&needle) {
                let value = self.value(var, spec)?.unwrap_or_default();
                out = out.replace(&needle, &value);
            }
        }
        Ok(out)
    }

    /// The words an `Argument` adds: a positional's value, or a named one's name and
    /// value (a flag alone when it has no value); repeated when the input is (`,`
    /// between values). Errors: as [`Fill::value`].
    fn argument(&mut self, arg: &Value) -> Result<Vec<String>, ApiError> {
        let named = arg["type"] == "named";
        let flag = arg["name"].as_str().unwrap_or_default();
        let key = match named {
            true => flag.trim_start_matches('-').to_owned(),
            false => arg["valueHint"].as_str().or(arg["name"].as_str()).unwrap_or("value").to_owned(),
        };
        let values: Vec<String> = match arg["value"].as_str() {
            Some(fixed) => vec![self.template(fixed, &arg["variables"])?],
            None => match self.value(&key, arg)? {
                Some(v) if arg["isRepeated"] == true => v.split(',').map(str::to_owned).collect(),
                Some(v) => vec![v],
                None if named && arg["value"].is_null() && arg["default"].is_null() && arg["isRequired"] != true => {
                    return Ok(Vec::new());
                }
                None => return Ok(Vec::new()),
            },
        };
        Ok(values.into_iter().flat_map(|v| if named { vec![flag.to_owned(), v] } else { vec![v] }).collect())
    }

    /// The words of a list of `Argument`s.
    fn arguments(&mut self, list: &Value) -> Result<Vec<String>, ApiError> {
        let mut words = Vec::new();
        for arg in list.as_array().into_iter().flatten() {
            words.extend(self.argument(arg)?);
        }
        Ok(words)
    }

    /// The `environmentVariables` (or `headers`) of a spec as a map.
    fn key_values(&mut self, list: &Value) -> Result<Map<String, Value>, ApiError> {
        let mut map = Map::new();
        for kv in list.as_array().into_iter().flatten() {
            let Some(name) = kv["name"].as_str() else { continue };
            let value = match kv["value"].as_str() {
                Some(fixed) => Some(self.template(fixed, &kv["variables"])?),
                None => self.value(name, kv)?,
            };
            if let Some(value) = value {
                map.insert(name.to_owned(), Value::String(value));
            }
        }
        Ok(map)
    }
}

/// A package's entry (stdio only). Errors: as [`entry`].
async fn package(
    chosen: &Candidate<'_>,
    fill: &mut Fill<'_>,
    state: &Path,
    dry_run: bool,
) -> Result<Map<String, Value>, ApiError> {
    let spec = chosen.spec;
    let id = spec["identifier"].as_str().unwrap_or_default();
    let transport = spec["transport"]["type"].as_str().unwrap_or("stdio");
    if transport != "stdio" {
        return Err(usage(format!(
            "the {} package {id} serves {transport} on its own, which mcpx does not start: run it yourself and `mcpx add NAME URL`, or choose another package with --package",
            chosen.kind
        )));
    }
    let version = spec["version"].as_str().filter(|v| !v.is_empty() && *v != "latest");
    let env = fill.key_values(&spec["environmentVariables"])?;
    let runtime_args = fill.arguments(&spec["runtimeArguments"])?;
    let package_args = fill.arguments(&spec["packageArguments"])?;
    let pinned = |sep: &str| -> Result<String, ApiError> {
        let version =
            version.ok_or_else(|| usage(format!("the {} package {id} names no version to pin", chosen.kind)))?;
        Ok(format!("{id}{sep}{version}"))
    };
    let (command, mut args) = match chosen.kind.as_str() {
        "npm" | "pypi" | "nuget" => {
            let program = chosen.runs.clone().unwrap_or_else(|_| runner(&chosen.kind).unwrap_or_default().to_owned());
            let mut args = runtime_args;
            match chosen.kind.as_str() {
                "npm" => {
                    if args.is_empty() && program == "npx" {
                        args.push("-y".into());
                    }
                    args.push(pinned("@")?);
                }
                "pypi" => args.push(pinned("==")?),
                _ => {
                    args.push(pinned("@")?);
                    args.push("--yes".into());
                }
            }
            (program, args)
        }
        "oci" => {
            let engine = chosen.runs.clone().unwrap_or_else(|_| "docker".to_owned());
            let image = match version {
                Some(v) if !id.rsplit('/').next().unwrap_or(id).contains(':') && !id.contains('@') => {
                    format!("{id}:{v}")
                }
                _ => id.to_owned(),
            };
            let mut args: Vec<String> = vec!["run".into(), "-i".into(), "--rm".into()];
            for name in env.keys() {
                args.extend(["-e".to_owned(), name.clone()]);
            }
            args.extend(runtime_args);
            args.push(image);
            (engine, args)
        }
        "mcpb" => return mcpb(spec, fill, env, package_args, state, dry_run).await,
        other => return Err(usage(format!("mcpx does not run `{other}` packages"))),
    };
    args.extend(package_args);
    let mut entry = Map::new();
    entry.insert("command".into(), Value::String(command));
    entry.insert("args".into(), json!(args));
    if !env.is_empty() {
        entry.insert("env".into(), Value::Object(env));
    }
    Ok(entry)
}

/// A remote's entry: its URL with `{variables}` filled, its transport, its headers.
fn remote(spec: &Value, fill: &mut Fill<'_>) -> Result<Map<String, Value>, ApiError> {
    let url = fill.template(spec["url"].as_str().unwrap_or_default(), &spec["variables"])?;
    let mut entry = Map::new();
    entry.insert("url".into(), Value::String(url));
    let transport = match spec["type"].as_str() {
        Some("sse") => "sse",
        _ => "http",
    };
    entry.insert("transport".into(), json!(transport));
    let headers = fill.key_values(&spec["headers"])?;
    if !headers.is_empty() {
        entry.insert("headers".into(), Value::Object(headers));
    }
    Ok(entry)
}

/// An MCPB bundle's entry: downloaded, checked against `fileSha256`, unpacked under
/// `<state>/mcpb/<sha>` (unless `dry_run`), and run as its manifest's
/// `server.mcp_config` says, `${__dirname}` being the bundle's directory.
async fn mcpb(
    spec: &Value,
    fill: &mut Fill<'_>,
    mut env: Map<String, Value>,
    package_args: Vec<String>,
    state: &Path,
    dry_run: bool,
) -> Result<Map<String, Value>, ApiError> {
    let url = spec["identifier"].as_str().unwrap_or_default();
    let config = |m: String| ApiError::new(ErrorKind::Config, m);
    let want = spec["fileSha256"].as_str().map(str::to_ascii_lowercase).ok_or_else(|| {
        config(format!("the MCPB bundle {url} has no fileSha256, so it cannot be checked: mcpx does not run it"))
    })?;
    let bytes = download(url).await.map_err(config)?;
    let got: String = Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect();
    if got != want {
        return Err(config(format!(
            "the MCPB bundle {url} has SHA-256 {got}, not the {want} its registry entry says: nothing was written or run (the bundle changed, or the download was tampered with)"
        )));
    }
    let mut archive = zip::ZipArchive::new(std::io::Cursor::new(&bytes))
        .map_err(|e| config(format!("the MCPB bundle {url} is not a zip file: {e}")))?;
    let mut manifest = String::new();
    archive
        .by_name("manifest.json")
        .map_err(|e| config(format!("the MCPB bundle {url} has no manifest.json: {e}")))?
        .read_to_string(&mut manifest)
        .map_err(|e| config(format!("the MCPB bundle {url}'s manifest.json cannot be read: {e}")))?;
    let manifest: Value = serde_json::from_str(&manifest)
        .map_err(|e| config(format!("the MCPB bundle {url}'s manifest.json is not JSON: {e}")))?;
    let dir = state.join("mcpb").join(&got[..16]);
    if !dry_run {
        std::fs::create_dir_all(&dir).map_err(|e| config(format!("cannot make {}: {e}", dir.display())))?;
        archive
            .extract(&dir)
            .map_err(|e| config(format!("cannot unpack the MCPB bundle into {}: {e}", dir.display())))?;
    }
    let here = dir.display().to_string().replace("${", "$${");
    let at_dir = |s: &str| s.replace("${", "$${").replace("$${__dirname}", &here);
    let run = &manifest["server"]["mcp_config"];
    let command = run["command"]
        .as_str()
        .map(at_dir)
        .ok_or_else(|| config(format!("the MCPB bundle {url}'s manifest.json has no server.mcp_config.command")))?;
    let mut args: Vec<String> =
        run["args"].as_array().into_iter().flatten().filter_map(Value::as_str).map(at_dir).collect();
    args.extend(package_args);
    for (k, v) in run["env"].as_object().into_iter().flatten() {
        if let Some(v) = v.as_str() {
            env.entry(k.clone()).or_insert_with(|| Value::String(at_dir(v)));
        }
    }
    let _ = fill;
    let mut entry = Map::new();
    entry.insert("command".into(), Value::String(command));
    entry.insert("args".into(), json!(args));
    entry.insert("cwd".into(), Value::String(here));
    if !env.is_empty() {
        entry.insert("env".into(), Value::Object(env));
    }
    Ok(entry)
}

/// The bytes at `url` (http, https), 100 MiB at most. Errors: a sentence.
async fn download(url: &str) -> Result<Vec<u8>, String> {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(120))
        .build()
        .map_err(|e| format!("cannot make an HTTP client: {e}"))?;
    let answer = client.get(url).send().await.map_err(|e| format!("cannot download the MCPB bundle {url}: {e}"))?;
    if !answer.status().is_success() {
        return Err(format!("downloading the MCPB bundle {url} answered HTTP {}", answer.status().as_u16()));
    }
    let bytes = answer.bytes().await.map_err(|e| format!("the download of {url} broke off: {e}"))?;
    if bytes.len() > 100 << 20 {
        return Err(format!("the MCPB bundle {url} is over 100 MiB"));
    }
    Ok(bytes.to_vec())
}

/// `mcpx registry show`'s text: the server, its status, its packages and remotes with
/// their inputs.
pub fn describe(found: &Found) -> String {
    let s = &found.server;
    let text = |v: &Value| mcpx_platform::sanitize::line(v.as_str().unwrap_or_default()).into_owned();
    let mut out = format!("{}@{}{}", text(&s["name"]), text(&s["version"]), marked(&found.status));
    if !s["description"].is_null() {
        out.push_str(&format!("\n  {}", text(&s["description"])));
    }
    let inputs = |out: &mut String, list: &Value, what: &str| {
        for kv in list.as_array().into_iter().flatten() {
            let mut marks = Vec::new();
            if kv["isRequired"] == true {
                marks.push("required");
            }
            if kv["isSecret"] == true {
                marks.push("secret");
            }
            let marks = if marks.is_empty() { String::new() } else { format!(" ({})", marks.join(", ")) };
            out.push_str(&format!("\n      {what} {}{marks}: {}", text(&kv["name"]), text(&kv["description"])));
        }
    };
    for p in s["packages"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "\n  package {} {}@{} ({})",
            text(&p["registryType"]),
            text(&p["identifier"]),
            text(&p["version"]),
            text(&p["transport"]["type"])
        ));
        inputs(&mut out, &p["environmentVariables"], "env");
    }
    for r in s["remotes"].as_array().into_iter().flatten() {
        out.push_str(&format!("\n  remote {} {}", text(&r["type"]), text(&r["url"])));
        inputs(&mut out, &r["headers"], "header");
    }
    if let Some(age) = found.stale {
        out.push_str(&format!("\n  (from the cache, {} s old: the registry could not be reached)", age.as_secs()));
    }
    out
}
