// An independent OAuth 2.0 authorization server for mcpx's tests: oidc-provider
// (pinned in package.json), configured as a typical hosted MCP server's authorization
// server would be:
//
//   - dynamic client registration (RFC 7591), PKCE required, resource indicators
//     (RFC 8707) whose resource servers get opaque access tokens with scope `mcp`;
//   - refresh tokens for every client allowed the `refresh_token` grant, rotated at
//     every use;
//   - revocation (RFC 7009), introspection (RFC 7662) and the device authorization
//     grant (RFC 8628);
//   - its own small login and consent pages at /interaction/<uid>: each is one form
//     with an "Approve" button (any user: the account is `mcpx-test-user`, or the one
//     the scripted browser names in `x-oidc-account`), so a
//     scripted browser (oidc-browser.mjs) completes a login over plain HTTP.
//
// usage: node oidc-provider.mjs
//
// Listens on 127.0.0.1 (a free port) and prints its issuer URL on stdout once ready.
// Settings, from the environment:
//   OIDC_ACCESS_TOKEN_TTL      access token lifetime in seconds (default 5);
//   OIDC_DEVICE_INTERVAL       the device flow's polling `interval` in seconds (default 1);
//   OIDC_DEVICE_FLOW=0         no device flow (a server that offers none);
//   OIDC_RESOURCE_CLIENT_ID    the client a protected resource introspects tokens as
//   OIDC_RESOURCE_CLIENT_SECRET  (client_secret_post; defaults `mcp-resource`, `mcp-resource-secret`).
//
// oidc-provider is taken from the node_modules of $MCPX_E2E_DIR when it is set (where
// scripts/setup-e2e.sh installed it), else of this script's directory.

import http from "node:http";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const e2e = process.env.MCPX_E2E_DIR ?? dirname(fileURLToPath(import.meta.url));
const { default: Provider } = await import(pathToFileURL(join(e2e, "node_modules/oidc-provider/lib/index.js")).href);

const seconds = (name, fallback) => {
  const value = Number(process.env[name] ?? fallback);
  if (!Number.isInteger(value) || value <= 0) {
    console.error(`oidc-provider.mjs: ${name} must be a whole number of seconds, not ${process.env[name]}`);
    process.exit(2);
  }
  return value;
};
const accessTtl = seconds("OIDC_ACCESS_TOKEN_TTL", 5);
const deviceInterval = seconds("OIDC_DEVICE_INTERVAL", 1);
const ACCOUNT = "mcpx-test-user";

// stdout carries the issuer line only (a test may stop reading it after that):
// oidc-provider's notices go to stderr.
console.log = console.info = console.warn;

const server = http.createServer();
await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
const issuer = `http://127.0.0.1:${server.address().port}`;

const provider = new Provider(issuer, {
  clients: [
    {
      client_id: process.env.OIDC_RESOURCE_CLIENT_ID ?? "mcp-resource",
      client_secret: process.env.OIDC_RESOURCE_CLIENT_SECRET ?? "mcp-resource-secret",
      token_endpoint_auth_method: "client_secret_post",
      grant_types: [],
      redirect_uris: [],
      response_types: [],
    },
  ],
  cookies: { keys: ["mcpx-e2e-only-not-a-secret"] },
  features: {
    devInteractions: { enabled: false },
    registration: { enabled: true },
    revocation: { enabled: true },
    introspection: { enabled: true },
    deviceFlow: { enabled: process.env.OIDC_DEVICE_FLOW !== "0" },
    resourceIndicators: {
      enabled: true,
      defaultResource: (_ctx, _client, oneOf) => oneOf,
      useGrantedResource: () => true,
      getResourceServerInfo: () => ({ scope: "mcp", accessTokenTTL: accessTtl, accessTokenFormat: "opaque" }),
    },
  },
  findAccount: (_ctx, id) => ({ accountId: id, claims: () => ({ sub: id }) }),
  interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
  issueRefreshToken: (_ctx, client) => client.grantTypeAllowed("refresh_token"),
  rotateRefreshToken: true,
  scopes: ["openid", "offline_access", "mcp"],
  ttl: {
    AccessToken: accessTtl,
    AuthorizationCode: 60,
    DeviceCode: 600,
    Grant: 3600,
    Interaction: 600,
    RefreshToken: 3600,
    Session: 3600,
  },
});

const page = (title, body) =>
  `<!doctype html><html><head><meta charset="utf-8"><title>${title}</title></head><body><h1>${title}</h1>${body}</body></html>`;

// The login and consent pages: GET shows the prompt's form, POST .../approve
// completes the prompt (login as ACCOUNT; consent to every scope and resource asked).
provider.use(async (ctx, next) => {
  const match = /^\/interaction\/([\w-]+)(\/approve)?$/.exec(ctx.path);
  if (!match) {
    await next();
    // RFC 8628 §3.2: `interval` is optional (5 s by default); a short one keeps tests fast.
    if (ctx.oidc?.route === "device_authorization" && ctx.status === 200 && ctx.body?.device_code) {
      ctx.body = { ...ctx.body, interval: deviceInterval };
    }
    return;
  }
  const details = await provider.interactionDetails(ctx.req, ctx.res);
  const { prompt, params } = details;
  if (ctx.method === "GET" && !match[2]) {
    const what = prompt.name === "login" ? "Log in" : `Allow ${params.client_id} (${params.scope ?? ""})`;
    ctx.type = "html";
    ctx.body = page(
      what,
      `<form method="post" action="/interaction/${match[1]}/approve"><button type="submit">Approve</button></form>`,
    );
    return;
  }
  if (ctx.method !== "POST" || !match[2]) {
    ctx.status = 405;
    return;
  }
  let result;
  if (prompt.name === "login") {
    // A second account for the tests of identities: the scripted browser names it.
    result = { login: { accountId: ctx.get("x-oidc-account") || ACCOUNT } };
  } else {
    const grant = details.grantId
      ? await provider.Grant.find(details.grantId)
      : new provider.Grant({ accountId: details.session.accountId, clientId: params.client_id });
    const missing = prompt.details;
    if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(" "));
    if (missing.missingOIDCClaims) grant.addOIDCClaims(missing.missingOIDCClaims);
    for (const [indicator, scopes] of Object.entries(missing.missingResourceScopes ?? {})) {
      grant.addResourceScope(indicator, scopes.join(" "));
    }
    result = { consent: { grantId: await grant.save() } };
  }
  const to = await provider.interactionResult(ctx.req, ctx.res, result, { mergeWithLastSubmission: true });
  ctx.status = 303;
  ctx.redirect(to);
});

server.on("request", provider.callback());
process.stdout.write(`${issuer}\n`);
