#!/usr/bin/env bash
# Captures the search corpus: the `tools/list` of pinned npm and PyPI MCP servers, one JSON file
# per server in crates/mcpx-daemon/tests/search/corpus/, named <registry>-<package>@<version>.json
# (a `/` in a package name becomes `+`). The files are committed; the ranking test reads them and
# CI never runs this script.
#
# It installs the packages below in a temporary directory (npm, and pip in a venv), puts every
# server in one temporary mcpx config, and asks mcpx itself for each server's tools
# (`mcpx refresh`, then `mcpx tools <server> --json`), with a daemon of its own in temporary
# directories. Servers that need a token get a dummy one: they list their tools without
# using it. Browsers are not downloaded; the browser servers list their tools without one.
#
# Usage: scripts/capture-search-corpus.sh [path/to/mcpx]   (default: target/debug/mcpx, built
# with `cargo build`). Needs Node >= 20 with npm, and Python >= 3.10 with venv.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="$root/crates/mcpx-daemon/tests/search/corpus"
mcpx="${1:-${CARGO_TARGET_DIR:-$root/target}/debug/mcpx}"
[ -x "$mcpx" ] || { echo "capture-search-corpus: no mcpx at $mcpx: run cargo build or pass its path" >&2; exit 1; }

# name|registry|package|version|command and arguments after the installed executable|env (JSON)
servers=(
    "everything|npm|@modelcontextprotocol/server-everything|2026.8.31|mcp-server-everything|{}"
    "memory|npm|@modelcontextprotocol/server-memory|2026.8.31|mcp-server-memory|{}"
    "filesystem|npm|@modelcontextprotocol/server-filesystem|2026.8.31|mcp-server-filesystem /tmp|{}"
    "sequential-thinking|npm|@modelcontextprotocol/server-sequential-thinking|2026.8.31|mcp-server-sequential-thinking|{}"
    "github|npm|@modelcontextprotocol/server-github|2025.4.8|mcp-server-github|{\"GITHUB_PERSONAL_ACCESS_TOKEN\":\"dummy\"}"
    "gitlab|npm|@modelcontextprotocol/server-gitlab|2025.4.25|mcp-server-gitlab|{\"GITLAB_PERSONAL_ACCESS_TOKEN\":\"dummy\"}"
    "slack|npm|@modelcontextprotocol/server-slack|2025.4.25|mcp-server-slack|{\"SLACK_BOT_TOKEN\":\"dummy\",\"SLACK_TEAM_ID\":\"T0\"}"
    "puppeteer|npm|@modelcontextprotocol/server-puppeteer|2025.5.12|mcp-server-puppeteer|{}"
    "brave-search|npm|@modelcontextprotocol/server-brave-search|0.6.2|mcp-server-brave-search|{\"BRAVE_API_KEY\":\"dummy\"}"
    "postgres|npm|@modelcontextprotocol/server-postgres|0.6.2|mcp-server-postgres postgresql://localhost/dummy|{}"
    "google-maps|npm|@modelcontextprotocol/server-google-maps|0.6.2|mcp-server-google-maps|{\"GOOGLE_MAPS_API_KEY\":\"dummy\"}"
    "playwright|npm|@playwright/mcp|0.0.83|playwright-mcp|{}"
    "chrome-devtools|npm|chrome-devtools-mcp|1.11.0|chrome-devtools-mcp|{}"
    "notion|npm|@notionhq/notion-mcp-server|2.5.2|notion-mcp-server|{}"
    "context7|npm|@upstash/context7-mcp|4.1.1|context7-mcp|{}"
    "firecrawl|npm|firecrawl-mcp|3.26.0|firecrawl-mcp|{\"FIRECRAWL_API_KEY\":\"fc-dummy\"}"
    "time|pypi|mcp-server-time|2026.10.19|mcp-server-time|{}"
    "fetch|pypi|mcp-server-fetch|2026.10.24|mcp-server-fetch|{}"
    "git|pypi|mcp-server-git|2026.10.19|mcp-server-git|{}"
)

tmp="$(mktemp -d "${TMPDIR:-/tmp}/mcpx-corpus.XXXXXX")"
export MCPX_STATE_DIR="$tmp/state" MCPX_CACHE_DIR="$tmp/cache" MCPX_RUNTIME_DIR="$tmp/run"
cleanup() {
    "$mcpx" stop --all >/dev/null 2>&1 || true
    rm -rf "$tmp"
}
trap cleanup EXIT

npm_pkgs=()
pip_pkgs=()
for s in "${servers[@]}"; do
    IFS='|' read -r _ registry package version _ _ <<<"$s"
    case "$registry" in
    npm) npm_pkgs+=("$package@$version") ;;
    pypi) pip_pkgs+=("$package==$version") ;;
    esac
done

echo "capture-search-corpus: installing ${#npm_pkgs[@]} npm and ${#pip_pkgs[@]} PyPI packages in $tmp"
mkdir -p "$tmp/npm"
echo '{"private":true}' >"$tmp/npm/package.json"
# No install scripts: they would download browsers, which listing tools does not need.
(cd "$tmp/npm" && npm install --silent --no-audit --no-fund --ignore-scripts "${npm_pkgs[@]}")
python3 -m venv "$tmp/venv"
"$tmp/venv/bin/pip" install --quiet "${pip_pkgs[@]}"

# One config holding every server, by the absolute path of its installed executable.
config="$tmp/config.json"
python3 - "$config" "$tmp" "${servers[@]}" <<'PY'
import json, sys
config, tmp, rows = sys.argv[1], sys.argv[2], sys.argv[3:]
servers = {}
for row in rows:
    name, registry, _package, _version, argv, env = row.split("|")
    exe, *args = argv.split(" ")
    bindir = f"{tmp}/npm/node_modules/.bin" if registry == "npm" else f"{tmp}/venv/bin"
    servers[name] = {"command": f"{bindir}/{exe}", "args": args, "env": json.loads(env),
                     "mcpx": {"startTimeout": "120s"}}
with open(config, "w") as f:
    json.dump({"mcpServers": servers}, f, indent=2)
PY
export MCPX_CONFIG="$config"

mkdir -p "$out"
failed=0
for s in "${servers[@]}"; do
    IFS='|' read -r name registry package version _ _ <<<"$s"
    file="$out/$registry-${package//\//+}@$version.json"
    if "$mcpx" refresh "$name" >/dev/null && "$mcpx" tools "$name" --json >"$tmp/tools.json"; then
        python3 - "$tmp/tools.json" "$file" "$name" "$registry" "$package" "$version" <<'PY'
import json, sys
src, dst, name, registry, package, version = sys.argv[1:]
tools = json.load(open(src))
with open(dst, "w") as f:
    json.dump({"server": name, "registry": registry, "package": package, "version": version,
               "tools": tools}, f, indent=2, ensure_ascii=False)
    f.write("\n")
print(f"capture-search-corpus: {name}: {len(tools)} tools -> {dst}")
PY
    else
        echo "capture-search-corpus: $name ($package@$version) did not list its tools" >&2
        failed=1
    fi
done
exit "$failed"
