#!/usr/bin/env node
// A scripted browser for e2e/oidc-provider.mjs: opens a URL and does what a user who
// approves everything would do. It follows redirects (keeping cookies) and submits
// the page's form, with the form's inputs, until a page has no form (the provider's
// "done" page, or mcpx's loopback redirect listener answering "the login is done").
//
// usage: oidc-browser.mjs <url> [<user code>]
//
// As mcpx's BROWSER for the authorization code flow it gets the authorization URL. For
// the device flow (RFC 8628) the test runs it with the verification URI and the user
// code, which it types into the page's `user_code` field.
// Exits 0 when it reached a page without a form, 1 (with what it saw) otherwise.

const [url, userCode] = process.argv.slice(2);
if (!url) {
  console.error("usage: oidc-browser.mjs <url> [<user code>]");
  process.exit(2);
}

const cookies = new Map();
const attribute = (tag, name) => new RegExp(`\\s${name}="([^"]*)"`).exec(tag)?.[1];
const unescape = (text) =>
  text.replaceAll("&quot;", '"').replaceAll("&#39;", "'").replaceAll("&lt;", "<").replaceAll("&gt;", ">").replaceAll("&amp;", "&");

let request = { url: new URL(url), method: "GET", body: undefined };
for (let step = 0; step < 30; step++) {
  const headers = { cookie: [...cookies].map(([k, v]) => `${k}=${v}`).join("; ") };
  // Who logs in: the provider takes it from this header (its default account without).
  if (process.env.OIDC_BROWSER_ACCOUNT) headers["x-oidc-account"] = process.env.OIDC_BROWSER_ACCOUNT;
  if (request.body) headers["content-type"] = "application/x-www-form-urlencoded";
  const answer = await fetch(request.url, { method: request.method, body: request.body, headers, redirect: "manual" });
  for (const line of answer.headers.getSetCookie()) {
    const [pair] = line.split(";");
    const at = pair.indexOf("=");
    cookies.set(pair.slice(0, at).trim(), pair.slice(at + 1).trim());
  }
  const location = answer.headers.get("location");
  if (answer.status >= 300 && answer.status < 400 && location) {
    request = { url: new URL(location, request.url), method: "GET", body: undefined };
    continue;
  }
  const html = await answer.text();
  if (!answer.ok) {
    console.error(`oidc-browser: ${request.method} ${request.url} answered ${answer.status}: ${html.slice(0, 500)}`);
    process.exit(1);
  }
  const form = /<form\b[^>]*>[\s\S]*?<\/form>/i.exec(html)?.[0];
  if (!form) process.exit(0);
  const fields = new URLSearchParams();
  for (const [input] of form.matchAll(/<input\b[^>]*>/gi)) {
    const name = attribute(input, "name");
    if (!name) continue;
    const value = name === "user_code" && userCode ? userCode : unescape(attribute(input, "value") ?? "");
    fields.append(name, value);
  }
  const action = unescape(attribute(form.slice(0, form.indexOf(">") + 1), "action") ?? request.url.href);
  request = { url: new URL(action, request.url), method: "POST", body: fields.toString() };
}
console.error(`oidc-browser: no end after 30 pages, last ${request.method} ${request.url}`);
process.exit(1);
