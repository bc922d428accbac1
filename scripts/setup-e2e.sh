#!/usr/bin/env bash
# Installs the real MCP servers used by the end-to-end tests and the quickstart, inside e2e/:
#   - e2e/node_modules: server-everything, server-memory, the conformance suite, the Inspector,
#     puppeteer-core and axe-core (the dashboard's browser tests drive Debian's chromium, which
#     .ci/run installs),
#     the TypeScript SDK (for e2e/sdk_client.mjs), oidc-provider (the authorization server of
#     e2e/oidc-provider.mjs), supergateway (for scripts/bench.sh), Claude
#     Code's CLI (`claude`, a native binary its postinstall copies from a per-platform package),
#     OpenAI's Codex CLI (`codex`) and Gemini CLI (`gemini`), for `mcpx connect`'s tests,
#     and Node 22, server-filesystem, and Deno (the code-mode runtime and type checker: the npm
#     package `deno`, whose postinstall copies the binary of the platform's `@deno/*` package)
#     (npm install from e2e/package-lock.json; needs Node >= 20 and npm);
#   - e2e/.venv: mcp-server-time, mcp-server-git and uv's uvx (pip install -r e2e/requirements.txt; needs Python >= 3.10 with
#     the venv module);
#   - e2e/mcp-proxy/.venv: the Python mcp-proxy, for scripts/bench.sh (pip install -r
#     e2e/requirements-mcp-proxy.txt), in a venv of its own: it needs mcp < 2, e2e/.venv has mcp 2;
#   - e2e/compat/mcpx: mcpx as built from the commit in e2e/compat-rev, for the compatibility
#     tests (cargo build, from this clone's git history).
# Idempotent: each part is reinstalled only when it is missing or its lock file changed (a stamp
# file inside the install records what was installed). Nothing is written outside e2e/ except
# npm's and pip's download caches.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
e2e="$root/e2e"

say() { printf 'setup-e2e: %s\n' "$*"; }
die() {
    printf 'setup-e2e: error: %s\n' "$*" >&2
    exit 1
}

# Runs a command quietly; on failure prints its output and what failed, and exits.
quietly() {
    local what="$1"
    shift
    local log
    log="$(mktemp "${TMPDIR:-/tmp}/mcpx-setup-e2e.XXXXXX")"
    if ! "$@" >"$log" 2>&1; then
        cat "$log" >&2
        rm -f "$log"
        die "$what failed (command: $*); see the output above"
    fi
    rm -f "$log"
}

# The fingerprint of the given files (plus any extra words), for the stamp files.
fingerprint() {
    local extra="$1"
    shift
    { printf '%s\n' "$extra"; cat "$@"; } | cksum
}

# Checks that Claude Code's CLI runs: `claude --version`, offline, in a throwaway HOME (it keeps
# its state there), with its nonessential traffic (update checks, telemetry) off.
check_claude() {
    local home
    home="$(mktemp -d "${TMPDIR:-/tmp}/mcpx-setup-e2e-home.XXXXXX")"
    if ! HOME="$home" CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 "$e2e/node_modules/.bin/claude" --version \
        >"$home/out" 2>&1; then
        cat "$home/out" >&2
        rm -rf "$home"
        die "e2e/node_modules/.bin/claude --version failed (output above): remove e2e/node_modules and run this script again"
    fi
    rm -rf "$home"
}

need() {
    command -v "$1" >/dev/null 2>&1 || die "$1 not found on PATH: $2"
}

# --- Node servers -------------------------------------------------------------------------------

need node "install Node.js 20 or newer (https://nodejs.org)"
need npm "install npm (it comes with Node.js)"
node_major="$(node -p 'process.versions.node.split(".")[0]')"
[[ "$node_major" -ge 20 ]] || die "Node.js $(node --version) is too old: the e2e servers need Node.js 20 or newer"

node_stamp="$e2e/node_modules/.mcpx-setup-stamp"
node_want="$(fingerprint "node$node_major" "$e2e/package.json" "$e2e/package-lock.json")"
if [[ -f "$node_stamp" && "$(cat "$node_stamp")" == "$node_want" \
    && -x "$e2e/node_modules/.bin/mcp-server-everything" && -x "$e2e/node_modules/.bin/mcp-server-memory" \
    && -x "$e2e/node_modules/.bin/claude" && -x "$e2e/node_modules/.bin/mcp-server-filesystem" \
    && -x "$e2e/node_modules/.bin/deno" \
    && -f "$e2e/node_modules/supergateway/dist/index.js" \
    && -f "$e2e/node_modules/@modelcontextprotocol/sdk/package.json" \
    && -f "$e2e/node_modules/oidc-provider/package.json" \
    && -f "$e2e/node_modules/puppeteer-core/package.json" \
    && -f "$e2e/node_modules/axe-core/axe.min.js" ]]; then
    check_claude
    say "node servers up to date (e2e/node_modules)"
else
    say "installing node servers and clients into e2e/node_modules (npm install from the lock)..."
    # Not `npm ci`: the Inspector pulls vite, whose lock entry names an optional
    # dependency the registry does not have (404), which `npm ci` refuses. `npm install`
    # follows the lock for everything else; --no-save keeps the lock as committed.
    quietly "npm install in e2e/" npm install --prefix "$e2e" --no-audit --no-fund --no-save --loglevel=error
    for bin in mcp-server-everything mcp-server-memory mcp-server-filesystem claude codex gemini deno; do
        [[ -x "$e2e/node_modules/.bin/$bin" ]] || die "npm install finished but e2e/node_modules/.bin/$bin is missing"
    done
    [[ -f "$e2e/node_modules/supergateway/dist/index.js" ]] \
        || die "npm install finished but e2e/node_modules/supergateway/dist/index.js is missing"
    [[ -f "$e2e/node_modules/@modelcontextprotocol/sdk/package.json" ]] \
        || die "npm install finished but e2e/node_modules/@modelcontextprotocol/sdk is missing"
    [[ -f "$e2e/node_modules/oidc-provider/package.json" ]] \
        || die "npm install finished but e2e/node_modules/oidc-provider is missing"
    check_claude
    "$e2e/node_modules/.bin/deno" --version >/dev/null 2>&1 \
        || die "e2e/node_modules/.bin/deno does not run: remove e2e/node_modules and run this script again"
    printf '%s\n' "$node_want" >"$node_stamp"
fi

# --- Python servers -----------------------------------------------------------------------------

need python3 "install Python 3.10 or newer"
python3 -c 'import sys; sys.exit(sys.version_info < (3, 10))' \
    || die "$(python3 --version 2>&1) is too old: mcp-server-time needs Python 3.10 or newer"

# venv_install <venv dir, relative to e2e/> <requirements file> <a program it must provide>:
# (re)creates the venv from the pinned requirements unless its stamp says they are installed.
venv_install() {
    local venv="$e2e/$1" requirements="$e2e/$2" program="$3"
    local stamp="$venv/.mcpx-setup-stamp" want
    want="$(fingerprint "$(python3 --version 2>&1)" "$requirements")"
    if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" && -x "$venv/bin/$program" ]]; then
        say "python packages up to date (e2e/$1)"
        return
    fi
    say "installing python packages into e2e/$1 (pip install -r e2e/$2)..."
    # --clear: start from an empty venv so packages dropped from the requirements go away.
    quietly "python3 -m venv (on Debian/Ubuntu, install python3-venv)" python3 -m venv --clear "$venv"
    quietly "pip install -r e2e/$2" \
        "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-input -r "$requirements"
    [[ -x "$venv/bin/$program" ]] || die "pip finished but e2e/$1/bin/$program is missing"
    printf '%s\n' "$want" >"$stamp"
}

venv_install .venv requirements.txt mcp-server-time
[[ -x "$e2e/.venv/bin/uvx" ]] || die "pip finished but e2e/.venv/bin/uvx (from uv) is missing"
[[ -x "$e2e/.venv/bin/mcp-server-git" ]] || die "pip finished but e2e/.venv/bin/mcp-server-git is missing"
# mcp-proxy needs mcp < 2 (e2e/.venv has mcp 2), so it gets a venv of its own.
venv_install mcp-proxy/.venv requirements-mcp-proxy.txt mcp-proxy

# --- promtool, for the /metrics test ---------------------------------------------------------------
# crates/mcpx/tests/it/telemetry.rs checks `GET /metrics` with Debian's `promtool check metrics`:
# the prometheus package, pinned, downloaded (not installed: no service is set up) and unpacked into
# e2e/prometheus.
prometheus_version="2.42.0+ds-5+deb12u1"
promtool="$e2e/prometheus/usr/bin/promtool"
if [[ -x "$promtool" && "$(cat "$e2e/prometheus/.stamp" 2>/dev/null)" == "$prometheus_version" ]]; then
    say "promtool up to date (e2e/prometheus, prometheus $prometheus_version)"
else
    need apt-get "the /metrics test needs Debian's promtool (the prometheus package); on another system, unpack it into e2e/prometheus/usr/bin/promtool"
    need dpkg-deb "the /metrics test needs Debian's promtool (the prometheus package)"
    say "downloading Debian's prometheus $prometheus_version for promtool into e2e/prometheus..."
    deb_dir="$(mktemp -d)"
    if ! (cd "$deb_dir" && apt-get download -qq "prometheus=$prometheus_version" >/dev/null 2>&1); then
        quietly "apt-get update" apt-get update -qq
        (cd "$deb_dir" && quietly "apt-get download prometheus=$prometheus_version" apt-get download -qq "prometheus=$prometheus_version")
    fi
    rm -rf "$e2e/prometheus"
    quietly "unpacking the prometheus package" dpkg-deb -x "$deb_dir"/prometheus_*.deb "$e2e/prometheus"
    rm -rf "$deb_dir"
    "$promtool" --version >/dev/null 2>&1 || die "e2e/prometheus/usr/bin/promtool does not run"
    printf '%s\n' "$prometheus_version" >"$e2e/prometheus/.stamp"
fi

# --- The previous mcpx, for the compatibility tests ----------------------------------------------
# crates/mcpx/tests/it/compat.rs runs an older CLI against this daemon and this CLI against an
# older daemon, as they meet during an upgrade: mcpx built from the commit e2e/compat-rev names
# (from this clone's history, `git archive`), into e2e/compat/mcpx, with its own target directory.
compat_rev="$(tr -d '[:space:]' <"$e2e/compat-rev")"
compat="$e2e/compat"
if [[ -x "$compat/mcpx" && "$(cat "$compat/.stamp" 2>/dev/null)" == "$compat_rev" ]]; then
    say "previous mcpx up to date (e2e/compat/mcpx, $compat_rev)"
else
    git -C "$root" cat-file -e "$compat_rev^{commit}" 2>/dev/null ||
        die "commit $compat_rev (e2e/compat-rev) is not in this clone's history; fetch it (git fetch --unshallow)"
    say "building mcpx at $compat_rev into e2e/compat (a few minutes)..."
    rm -rf "$compat/src"
    mkdir -p "$compat/src"
    git -C "$root" archive "$compat_rev" | tar -x -C "$compat/src"
    quietly "building the previous mcpx" cargo build --locked -p mcpx \
        --manifest-path "$compat/src/Cargo.toml" --target-dir "$compat/target"
    cp "$compat/target/debug/mcpx" "$compat/mcpx"
    printf '%s\n' "$compat_rev" >"$compat/.stamp"
fi

say "ready: e2e/node_modules/.bin/{mcp-server-everything,mcp-server-memory,mcp-server-filesystem,claude,deno}, e2e/node_modules/supergateway," \
    "e2e/.venv/bin/{mcp-server-time,mcp-server-git}, e2e/mcp-proxy/.venv/bin/mcp-proxy, e2e/prometheus/usr/bin/promtool, e2e/compat/mcpx"
