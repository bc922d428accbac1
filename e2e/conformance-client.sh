#!/usr/bin/env bash
# mcpx as the client of the MCP conformance suite (@modelcontextprotocol/conformance,
# pinned in package.json). The suite runs this script with its scenario server's URL
# as the last argument:
#
#   node node_modules/@modelcontextprotocol/conformance/dist/index.js client \
#     --command "bash e2e/conformance-client.sh" --scenario auth/metadata-default
#
# It reads MCP_CONFORMANCE_SCENARIO and, where the scenario pre-registers a client,
# MCP_CONFORMANCE_CONTEXT (JSON: client_id, and client_secret or private_key_pem),
# writes a private mcpx config with one server, `conformance`, logs in where the
# scenario asks for authorization (BROWSER is conformance-browser.sh, which follows the
# suite's authorization redirect), then lists the tools and calls each of them.
#
# MCPX is the mcpx binary (else `mcpx` on PATH). The MCPX_*_DIR variables are kept
# when set (the test suite sets them, to clean up after a run that fails); otherwise
# the run gets private directories. Either way the daemon and its sessions stop when
# the run ends, so the scenario's server is left with no open connection.
set -u

url="${!#}"
scenario="${MCP_CONFORMANCE_SCENARIO:?the conformance suite sets MCP_CONFORMANCE_SCENARIO}"
context="${MCP_CONFORMANCE_CONTEXT:-{\}}"
mcpx="${MCPX:-mcpx}"
here="$(cd "$(dirname "$0")" && pwd)"
dir="$(mktemp -d "${TMPDIR:-/tmp}/mcpx-conformance.XXXXXX")"

for sub in state cache run; do mkdir -m 700 "$dir/$sub"; done
export MCPX_STATE_DIR="${MCPX_STATE_DIR:-$dir/state}"
export MCPX_CACHE_DIR="${MCPX_CACHE_DIR:-$dir/cache}"
export MCPX_RUNTIME_DIR="${MCPX_RUNTIME_DIR:-$dir/run}"
export MCPX_SECRET_STORE="${MCPX_SECRET_STORE:-file}"
export MCPX_CONFIG="$dir/config.json"
trap '"$mcpx" stop --all >/dev/null 2>&1; rm -rf "$dir"' EXIT

# Runs `mcpx "$@"`. With MCPX_CONFORMANCE_LOG set, what it prints is copied there too
# (the test suite greps it for tokens).
# (Through files, not `tee`: a daemon that mcpx starts must hold no pipe of ours.)
step() {
    echo "+ mcpx $*" >&2
    if [ -z "${MCPX_CONFORMANCE_LOG:-}" ]; then
        "$mcpx" "$@"
        return
    fi
    local status=0
    "$mcpx" "$@" >"$dir/out" 2>"$dir/err" || status=$?
    cat "$dir/out" "$dir/err" >>"$MCPX_CONFORMANCE_LOG"
    cat "$dir/out"
    cat "$dir/err" >&2
    return "$status"
}

# The entry's `oauth` block: the pre-registered client of the context, its secret in
# the secret store and its private key in the daemon's environment (a PEM is several
# lines, and `secret set` reads one).
client_id="$(jq -r '.client_id // empty' <<<"$context")"
client_secret="$(jq -r '.client_secret // empty' <<<"$context")"
export CONFORMANCE_PRIVATE_KEY="$(jq -r '.private_key_pem // empty' <<<"$context")"
oauth='{}'
if [ -n "$client_id" ]; then
    oauth="$(jq -n --arg id "$client_id" '{clientId: $id}')"
fi
if [ -n "$client_secret" ]; then
    printf '%s\n' "$client_secret" | step secret set conformance-client-secret || exit 1
    oauth="$(jq '. + {clientSecret: "${secret:conformance-client-secret}"}' <<<"$oauth")"
fi
if [ -n "$CONFORMANCE_PRIVATE_KEY" ]; then
    oauth="$(jq '. + {privateKey: "${CONFORMANCE_PRIVATE_KEY}"}' <<<"$oauth")"
fi
# Credentials go only to the authorization server that issued them (`oauth.issuer`). A
# user copies it from their provider; here it is looked up once, as the server's
# protected resource metadata names it (the first `authorization_servers`).
if [ -n "$client_secret" ] || [ -n "$CONFORMANCE_PRIVATE_KEY" ]; then
    challenge="$(curl -s -o /dev/null -D - -X POST -H 'content-type: application/json' \
        -H 'accept: application/json, text/event-stream' \
        --data '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"lookup","version":"1"}}}' \
        "$url" | tr -d '\r' | sed -n 's/.*resource_metadata="\([^"]*\)".*/\1/Ip' | head -n 1)"
    origin="$(sed -E 's#^(https?://[^/]+).*#\1#' <<<"$url")"
    path="$(sed -E 's#^https?://[^/]+##' <<<"$url")"
    issuer=""
    for prm in "$challenge" "$origin/.well-known/oauth-protected-resource$path" "$origin/.well-known/oauth-protected-resource"; do
        [ -n "$prm" ] || continue
        issuer="$(curl -s "$prm" | jq -r '.authorization_servers[0] // empty' 2>/dev/null)"
        [ -n "$issuer" ] && break
    done
    oauth="$(jq --arg issuer "$issuer" '. + {issuer: $issuer}' <<<"$oauth")"
fi
case "$scenario" in
    auth/client-credentials-*) oauth="$(jq '. + {grant: "client_credentials"}' <<<"$oauth")" ;;
    # The suite's authorization server takes this client ID metadata document's URL
    # as the client id (SEP-991); an entry names its own.
    auth/basic-cimd)
        oauth="$(jq '. + {clientMetadataUrl: "https://conformance-test.local/client-metadata.json"}' <<<"$oauth")"
        ;;
esac
jq -n --arg url "$url" --argjson oauth "$oauth" \
    '{mcpServers: {conformance: ({url: $url} + (if $oauth == {} then {} else {oauth: $oauth} end))}}' \
    >"$MCPX_CONFIG"

login() {
    BROWSER="$here/conformance-browser.sh" step auth login conformance
}

# Runs `mcpx "$@"`; when it fails saying to log in (a server that wants more scopes,
# say), logs in once more, as a user would, and runs it again.
with_login() {
    local out
    if out="$(step "$@" 2>&1)"; then
        printf '%s\n' "$out"
        return 0
    fi
    printf '%s\n' "$out" >&2
    case "$out" in
        *"mcpx auth login"*) login && step "$@" ;;
        *) return 1 ;;
    esac
}

# A user logs in once; a machine-to-machine client (client credentials) needs no login.
# The daemon that ran the login stops (its servers too), so the calls go through a new
# one: the login is kept in the secret store, not in a daemon.
case "$scenario" in
    auth/client-credentials-*) ;;
    auth/*) { login && step stop --all >&2; } || exit 1 ;;
esac

with_login refresh conformance >&2 || exit 1
tools="$(step tools conformance --json)" || { echo "$tools" >&2; exit 1; }
for tool in $(jq -r '.[].name' <<<"$tools"); do
    case "$tool" in
        add_numbers) args='{"a":5,"b":3}' ;;
        *) args='{}' ;;
    esac
    with_login call "conformance.$tool" "$args" || exit 1
done

# With MCPX_CONFORMANCE_LOGOUT (a directory; the test suite sets it), the login is then
# shown, logged out of and shown again (`status.json`, `logout.json`, `after.json`),
# and a refresh must fail saying to log in (exit 4; what it said in `refresh.txt`).
if [ -n "${MCPX_CONFORMANCE_LOGOUT:-}" ]; then
    out="$MCPX_CONFORMANCE_LOGOUT"
    step auth status --json >"$out/status.json" || exit 1
    step auth logout conformance --json >"$out/logout.json" || exit 1
    step auth status --json >"$out/after.json" || exit 1
    refreshed=0
    step refresh conformance 2>"$out/refresh.txt" >&2 || refreshed=$?
    [ "$refreshed" = 4 ] || { echo "a refresh after the logout exited $refreshed, not 4" >&2; exit 1; }
fi
