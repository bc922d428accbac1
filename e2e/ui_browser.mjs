#!/usr/bin/env node
// A real browser for the dashboard's tests (crates/mcpx/tests/it/ui_browser.rs): Debian's
// chromium, headless, driven by puppeteer-core. The test sends one JSON command per line on
// stdin and reads one JSON answer per line on stdout:
//
//   {"do":"open","url":U}                      -> {"status","url","h1","text"}
//   {"do":"wait","text":T,"in":SEL,"timeout_ms":N} -> {"ms"} once SEL holds T, or {"error"}
//   {"do":"click","selector":S}               -> {} once the element was clicked
//   {"do":"fill","selector":S,"value":V}      -> {} once the field holds V (typed, as a user would)
//   {"do":"attr","selector":S,"name":N}       -> {"value"}: the attribute N of the element S
//   {"do":"axe","dark":B}                      -> {"violations":[{"id","impact","help","nodes"}]}
//   {"do":"screenshot","path":P,"width":W,"dark":B} -> {"path"}
//   {"do":"report"}  -> {"requests","responses","dialogs","ran","csp","errors","images","scripts"}
//   {"do":"quit"}
//
// Everything the page does that a hostile text could cause is recorded from the start of each
// document: every request the browser makes, every dialog, every call of alert/confirm/prompt,
// print or open, every CSP violation, and uncaught errors.
//
// usage: ui_browser.mjs <chromium> <axe.min.js>

import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import puppeteer from "puppeteer-core";

const [chromium, axePath] = process.argv.slice(2);
if (!chromium || !axePath) {
  console.error("usage: ui_browser.mjs <chromium> <axe.min.js>");
  process.exit(2);
}
const axeSource = readFileSync(axePath, "utf8");

const browser = await puppeteer.launch({
  executablePath: chromium,
  headless: true,
  // The tests run as root in CI, where chromium's own sandbox cannot start.
  args: ["--no-sandbox", "--disable-gpu", "--no-first-run", "--no-default-browser-check"],
});
const page = await browser.newPage();
await page.setViewport({ width: 1280, height: 900 });

const seen = { requests: [], responses: [], dialogs: [], errors: [] };
page.on("request", (r) => seen.requests.push(r.url()));
page.on("response", (r) => seen.responses.push({ url: r.url(), status: r.status() }));
page.on("dialog", async (d) => {
  seen.dialogs.push(d.message());
  await d.dismiss();
});
page.on("pageerror", (e) => seen.errors.push(String(e)));
await page.evaluateOnNewDocument(() => {
  window.__mcpxRan = [];
  window.__mcpxCsp = [];
  for (const name of ["alert", "confirm", "prompt", "print", "open"]) {
    window[name] = () => {
      window.__mcpxRan.push(name);
      return null;
    };
  }
  document.addEventListener("securitypolicyviolation", (e) =>
    window.__mcpxCsp.push(`${e.violatedDirective} ${e.blockedURI}`),
  );
});

const answer = (value) => process.stdout.write(`${JSON.stringify(value)}\n`);

async function handle(cmd) {
  switch (cmd.do) {
    case "open": {
      const response = await page.goto(cmd.url, { waitUntil: "load" });
      // The entry page moves on to the overview by itself.
      if (new URL(page.url()).pathname === "/enter" && response && response.status() === 200) {
        await page.waitForNavigation({ waitUntil: "load", timeout: 5000 }).catch(() => {});
      }
      const h1 = await page.$eval("h1", (e) => e.textContent).catch(() => null);
      const text = await page.evaluate(() => document.body.innerText);
      return { status: response ? response.status() : 0, url: page.url(), h1, text };
    }
    case "wait": {
      const started = Date.now();
      try {
        await page.waitForFunction(
          (sel, text) => [...document.querySelectorAll(sel)].some((e) => e.textContent.includes(text)),
          { timeout: cmd.timeout_ms ?? 5000, polling: 20 },
          cmd.in ?? "#live",
          cmd.text,
        );
        return { ms: Date.now() - started };
      } catch (e) {
        return { error: String(e), text: await page.evaluate(() => document.body.innerText) };
      }
    }
    case "click": {
      // The live pages re-render their fragment while open: an element found a moment ago
      // may be replaced before the click lands. Find it again then, as a person would.
      for (let tries = 0; ; tries++) {
        try {
          await page.click(cmd.selector);
          return {};
        } catch (e) {
          if (tries >= 20 || !String(e).includes("detached")) {
            throw e;
          }
        }
      }
    }
    case "attr": {
      return { value: await page.$eval(cmd.selector, (e, n) => e.getAttribute(n), cmd.name) };
    }
    case "fill": {
      await page.$eval(cmd.selector, (e) => {
        e.value = "";
      });
      await page.type(cmd.selector, cmd.value);
      return {};
    }
    case "axe": {
      // axe runs through the DevTools protocol, which the page's CSP does not govern.
      await page.emulateMediaFeatures([{ name: "prefers-color-scheme", value: cmd.dark ? "dark" : "light" }]);
      await page.evaluate(axeSource);
      const result = await page.evaluate(async () => await window.axe.run(document));
      await page.emulateMediaFeatures([{ name: "prefers-color-scheme", value: "light" }]);
      return {
        violations: result.violations.map((v) => ({
          id: v.id,
          impact: v.impact,
          help: v.help,
          nodes: v.nodes.map((n) => n.target.join(" ")),
        })),
      };
    }
    case "screenshot": {
      await page.setViewport({ width: cmd.width ?? 1280, height: 900 });
      await page.emulateMediaFeatures([{ name: "prefers-color-scheme", value: cmd.dark ? "dark" : "light" }]);
      await page.screenshot({ path: cmd.path, fullPage: true });
      await page.emulateMediaFeatures([{ name: "prefers-color-scheme", value: "light" }]);
      await page.setViewport({ width: 1280, height: 900 });
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
      return { path: cmd.path, overflow };
    }
    case "report": {
      const inPage = await page.evaluate(() => ({
        ran: window.__mcpxRan,
        csp: window.__mcpxCsp,
        images: document.images.length,
        scripts: [...document.scripts].map((s) => s.getAttribute("src")),
      }));
      return { ...seen, ...inPage };
    }
    default:
      return { error: `unknown command ${JSON.stringify(cmd)}` };
  }
}

for await (const line of createInterface({ input: process.stdin })) {
  if (!line.trim()) continue;
  const cmd = JSON.parse(line);
  if (cmd.do === "quit") break;
  try {
    answer(await handle(cmd));
  } catch (e) {
    answer({ error: String(e && e.stack ? e.stack : e) });
  }
}
await browser.close();
