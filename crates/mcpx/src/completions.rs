//! `mcpx completions`, `mcpx man` and the hidden `mcpx __complete`: shell completion
//! scripts and man pages generated from the clap definition (`clap_complete`,
//! `clap_mangen`), and the dynamic part of the scripts, server and tool names, read
//! from local files only.
//!
//! The scripts clap_complete writes know the subcommands and options. For the names of
//! servers and tools each script is extended with a few lines that run
//! `mcpx __complete servers|targets|tools SERVER`, which resolves the caller's
//! configuration from its files and reads the schema cache (`<cache>/servers/<key>.json`):
//! it never connects to the daemon nor starts a server, so a tab press stays fast.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use clap::ValueEnum;
use mcpx_api::paths::Dirs;
use mcpx_api::{ApiError, ErrorKind};
use mcpx_daemon::config::{ConfigCache, ConfigEnv, ResolveRequest, TRUST_FILE};
use mcpx_daemon::policy;
use mcpx_daemon::schema::SchemaCache;
use mcpx_platform::fs::Dir;

/// The shells `mcpx completions` writes a script for.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Shell {
    /// Bash: `source <(mcpx completions bash)`.
    Bash,
    /// Zsh: save as `_mcpx` in a directory of `$fpath`.
    Zsh,
    /// Fish: save as `~/.config/fish/completions/mcpx.fish`.
    Fish,
}

/// What `mcpx __complete` lists, one name a line.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Names {
    /// The servers offered: configured, enabled and trusted.
    Servers,
    /// `server.tool` for every cached tool of those servers.
    Targets,
    /// The cached tools of the server given after it.
    Tools,
}

/// Bash: the subcommand's positional arguments complete from `mcpx __complete`, the
/// rest from clap_complete's `_mcpx`.
const BASH: &str = r#"
_mcpx_dynamic() {
    local cur="${COMP_WORDS[COMP_CWORD]}" sub="" i words=""
    for ((i = 1; i < COMP_CWORD; i++)); do
        case "${COMP_WORDS[i]}" in
            --config) ((i++)) ;;
            -*) ;;
            *) sub="${COMP_WORDS[i]}"; break ;;
        esac
    done
    if [[ -n "$sub" && "$cur" != -* ]]; then
        case "$sub:$((COMP_CWORD - i))" in
            call:1) words="$("${COMP_WORDS[0]}" __complete targets 2>/dev/null)" ;;
            tools:1 | resources:1 | prompts:1 | restart:1 | refresh:1 | logs:1)
                words="$("${COMP_WORDS[0]}" __complete servers 2>/dev/null)" ;;
            tools:2) words="$("${COMP_WORDS[0]}" __complete tools "${COMP_WORDS[i + 1]}" 2>/dev/null)" ;;
            types:*) words="$("${COMP_WORDS[0]}" __complete servers 2>/dev/null)" ;;
        esac
        if [[ -n "$words" ]]; then
            COMPREPLY=($(compgen -W "$words" -- "$cur"))
            return 0
        fi
    fi
    _mcpx "$@"
}
complete -F _mcpx_dynamic -o nosort -o bashdefault -o default mcpx
"#;

/// Zsh: clap_complete's function is renamed `_mcpx_static`; this `_mcpx` answers the
/// subcommand's positional arguments and hands the rest to it.
const ZSH: &str = r#"
_mcpx() {
    local -a names
    case "${words[2]}:$CURRENT" in
        call:3) names=(${(f)"$(${words[1]} __complete targets 2>/dev/null)"}) ;;
        tools:3 | resources:3 | prompts:3 | restart:3 | refresh:3 | logs:3)
            names=(${(f)"$(${words[1]} __complete servers 2>/dev/null)"}) ;;
        tools:4) names=(${(f)"$(${words[1]} __complete tools ${words[3]} 2>/dev/null)"}) ;;
        types:*) names=(${(f)"$(${words[1]} __complete servers 2>/dev/null)"}) ;;
    esac
    if (( ${#names} )) && [[ "${words[CURRENT]}" != -* ]]; then
        compadd -- $names
        return
    fi
    _mcpx_static "$@"
}

if [ "$funcstack[1]" = "_mcpx" ]; then
    _mcpx "$@"
else
    compdef _mcpx mcpx
fi
"#;

/// Fish: the positional arguments of the subcommands that take a server or a tool.
const FISH: &str = r#"
complete -c mcpx -n '__fish_seen_subcommand_from call; and test (count (commandline -opc)) -eq 2' -f -a '(mcpx __complete targets)'
complete -c mcpx -n '__fish_seen_subcommand_from tools resources prompts restart refresh logs; and test (count (commandline -opc)) -eq 2' -f -a '(mcpx __complete servers)'
complete -c mcpx -n '__fish_seen_subcommand_from tools; and test (count (commandline -opc)) -eq 3' -f -a '(mcpx __complete tools (commandline -opc)[3])'
complete -c mcpx -n '__fish_seen_subcommand_from types' -f -a '(mcpx __complete servers)'
"#;

/// The completion script for `shell`: clap_complete's, from `cmd` (the CLI's clap
/// definition), with the dynamic server and tool names added.
pub fn script(shell: Shell, mut cmd: clap::Command) -> String {
    let mut out = Vec::new();
    let generator = match shell {
        Shell::Bash => clap_complete::Shell::Bash,
        Shell::Zsh => clap_complete::Shell::Zsh,
        Shell::Fish => clap_complete::Shell::Fish,
    };
    clap_complete::generate(generator, &mut cmd, "mcpx", &mut out);
    let generated = String::from_utf8_lossy(&out).into_owned();
    match shell {
        Shell::Bash => generated + BASH,
        Shell::Fish => generated + FISH,
        Shell::Zsh => {
            // Its own dispatch at the end is replaced by ours, which calls it by its new name.
            let body = match generated.find("if [ \"$funcstack[1]\" = \"_mcpx\" ]") {
                Some(end) => &generated[..end],
                None => generated.as_str(),
            };
            body.replacen("\n_mcpx() {", "\n_mcpx_static() {", 1) + ZSH
        }
    }
}

/// `mcpx man [--out DIR]`, from `cmd` (the CLI's clap definition): without `out`, `mcpx.1` on stdout; with it, `mcpx.1` and one
/// `mcpx-<subcommand>.1` per visible subcommand (and theirs) written into `out` (made
/// when missing), each path printed.
///
/// Errors: a directory or file that cannot be written (exit 2).
pub fn man(cmd: clap::Command, out: Option<&Path>) -> Result<i32, ApiError> {
    let cmd = cmd.disable_help_subcommand(true);
    let Some(out) = out else {
        let mut page = Vec::new();
        render(cmd, &mut page)?;
        print!("{}", String::from_utf8_lossy(&page));
        return Ok(0);
    };
    let cannot = |e: std::io::Error| {
        ApiError::new(
            ErrorKind::Usage,
            format!("cannot write the man pages to {}: {e}; name a writable directory", out.display()),
        )
    };
    std::fs::create_dir_all(out).map_err(cannot)?;
    let dir = Dir::open_unchecked(out).map_err(cannot)?;
    let mut cmd = cmd;
    cmd.build();
    let mut pages = Vec::new();
    collect(&cmd, &mut pages);
    for page in pages {
        let name = clap_mangen::Man::new(page.clone()).get_filename();
        let mut text = Vec::new();
        render(page, &mut text)?;
        mcpx_platform::fs::write_atomic(&dir, &name, &text, 0o644).map_err(cannot)?;
        println!("{}", out.join(name).display());
    }
    Ok(0)
}

/// `cmd` and its visible subcommands, depth first, each named as clap_mangen names
/// them (`mcpx-secret-set`).
fn collect(cmd: &clap::Command, pages: &mut Vec<clap::Command>) {
    pages.push(cmd.clone());
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        collect(sub, pages);
    }
}

/// The EXIT STATUS section every page ends with: the exit codes of README's table
/// and `docs/api.md` "Errors", in roff.
const EXIT_STATUS: &str = r#".SH "EXIT STATUS"
.TP
\fB0\fR
Success.
.TP
\fB1\fR
The tool (or prompt) answered with \fBisError\fR; for \fBmcpx doctor\fR, a finding is an error.
.TP
\fB2\fR
A usage or configuration error: a malformed command or argument, a config file that does not parse, an unknown server, tool or prompt.
.TP
\fB3\fR
The daemon could not be reached or started, or it died during the request.
.TP
\fB4\fR
The server failed: it did not start, exited, broke MCP, answered with a JSON-RPC error, or needs a login (\fBmcpx auth login\fR).
.TP
\fB5\fR
No reply within the deadline (\fB--timeout\fR), or no instance became free before it.
.TP
\fB130\fR
Interrupted (Ctrl-C): the call was cancelled.
"#;

fn render(cmd: clap::Command, out: &mut Vec<u8>) -> Result<(), ApiError> {
    clap_mangen::Man::new(cmd)
        .render(out)
        .map_err(|e| ApiError::new(ErrorKind::Usage, format!("cannot render the man page: {e}")))?;
    out.extend_from_slice(EXIT_STATUS.as_bytes());
    Ok(())
}

/// `mcpx __complete`: prints the names, one a line; prints nothing (and succeeds) when
/// the configuration or the cache cannot be read, as a shell completion must not fail loudly.
pub fn names(what: Names, server: Option<&str>, config: Option<PathBuf>) -> i32 {
    let env: HashMap<String, String> = std::env::vars().collect();
    let Ok(dirs) = Dirs::from_env(&env) else { return 0 };
    let cwd = std::env::current_dir().ok();
    let cache = ConfigCache::new(ConfigEnv::from_vars(&env)).with_trust_file(dirs.state.join(TRUST_FILE));
    let Ok(resolved) = cache.resolve(&ResolveRequest { cwd, explicit: config }) else { return 0 };
    let schemas = Dir::open_private(&dirs.cache, false).ok().map(SchemaCache::new);
    let tools_of = |entry: &mcpx_daemon::config::ServerEntry| -> Vec<String> {
        let Some(cached) = schemas.as_ref().and_then(|s| s.get(&entry.cache_key())) else { return Vec::new() };
        // Names for a person's shell, not definitions for a model: what pinning holds is
        // the daemon's to refuse when the name is called.
        let none = mcpx_daemon::pins::Holds::default();
        cached.tool_summaries().into_iter().map(|t| t.name).filter(|t| policy::tool_offered(entry, &none, t)).collect()
    };
    let mut lines = BTreeSet::new();
    for entry in policy::offered(&resolved) {
        match what {
            Names::Servers => {
                lines.insert(entry.name.clone());
            }
            Names::Targets => lines.extend(tools_of(entry).into_iter().map(|t| format!("{}.{t}", entry.name))),
            Names::Tools if Some(entry.name.as_str()) == server => lines.extend(tools_of(entry)),
            Names::Tools => {}
        }
    }
    for line in lines {
        println!("{line}");
    }
    0
}
