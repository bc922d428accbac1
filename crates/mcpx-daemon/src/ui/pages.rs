//! The dashboard's HTML, rendered on the server (maud escapes every value it writes).
//! Every text a server or a configuration file supplied also goes through
//! [`shown`]: control, zero-width and bidirectional characters made visible, as the
//! terminal shows them. A page is its frame and a live region (`#live`), whose
//! fragment [`super::live`] renders again as things change.

use maud::{DOCTYPE, Markup, html};
use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};

use crate::api::activity::{ActivityRequest, Entry};
use mcpx_platform::clock::{time_of_day, utc};

use super::view::{FileServers, Overview, ServerPage, ToolPage, TrustPage};

/// Which page a frame is, for the navigation's `aria-current`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nav {
    /// The overview, `/`.
    Overview,
    /// A server's page, `/servers/<name>`.
    Server,
    /// The activity record, `/activity`.
    Activity,
}

/// `text` as the page shows it: see the module's doc.
pub fn shown(text: &str) -> String {
    mcpx_platform::sanitize::visible(text).into_owned()
}

/// The path of the trust page of a project file.
pub fn trust_href(file: &std::path::Path) -> String {
    format!("/trust?file={}", utf8_percent_encode(&file.display().to_string(), NON_ALPHANUMERIC))
}

/// The path of the page that tries `server`'s tool `tool`.
pub fn tool_href(server: &str, tool: &str) -> String {
    format!("{}/tools/{}", server_href(server), utf8_percent_encode(tool, NON_ALPHANUMERIC))
}

/// The path of a server's page.
pub fn server_href(name: &str) -> String {
    format!("/servers/{}", utf8_percent_encode(name, NON_ALPHANUMERIC))
}

/// A whole page: the frame around `before` (what stays as it is) and the live region,
/// which starts as `fragment` and follows `live` (the path of its event stream);
/// `csrf` is the session's token, which the page's actions carry.
pub fn page(title: &str, nav: Nav, csrf: &str, before: Markup, live: &str, fragment: Markup) -> Markup {
    let current = |n: Nav| (n == nav).then_some("page");
    html! {
        (DOCTYPE)
        html lang="en" {
            (head(title, html! { meta name="mcpx-csrf" content=(csrf); script src="/assets/app.js" defer {} }))
            body {
                a.skip href="#main" { "Skip to the content" }
                header {
                    span.brand { "mcpx" }
                    nav aria-label="Dashboard" {
                        ul {
                            li { a href="/" aria-current=[current(Nav::Overview)] { "Overview" } }
                            li { a href="/activity" aria-current=[current(Nav::Activity)] { "Activity" } }
                        }
                    }
                    p #connection role="status" aria-live="polite" {}
                }
                main #main {
                    h1 { (title) }
                    p #action role="status" aria-live="polite" {}
                    (before)
                    div #live data-live=(live) aria-live="polite" { (fragment) }
                }
            }
        }
    }
}

/// The `<head>` every page shares: its `title`, the style sheet, and `extra`.
fn head(title: &str, extra: Markup) -> Markup {
    html! {
        head {
            meta charset="utf-8";
            meta name="viewport" content="width=device-width, initial-scale=1";
            meta name="color-scheme" content="light dark";
            meta name="referrer" content="no-referrer";
            title { (title) " · mcpx" }
            link rel="stylesheet" href="/assets/app.css";
            (extra)
        }
    }
}

/// A page that only says why: a refusal, or a server that is not configured.
pub fn notice(title: &str, said: &str) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            (head(title, html! {}))
            body { main #main { h1 { (title) } p { (said) } } }
        }
    }
}

/// The page that follows a good code: it sets no script going, and moves on to the
/// overview by itself (a same-origin navigation, which carries the new cookie).
pub fn entered() -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            (head("Signed in", html! { meta http-equiv="refresh" content="0; url=/"; }))
            body { main #main { h1 { "Signed in" } p { a href="/" { "Go to the dashboard" } } } }
        }
    }
}

/// The overview's live fragment.
pub fn overview(o: &Overview) -> Markup {
    let d = &o.status.daemon;
    let untrusted: Vec<&FileServers> =
        o.files.iter().filter(|f| f.servers.iter().any(|s| s.row.state == "untrusted")).collect();
    let looping: Vec<&str> = o
        .files
        .iter()
        .flat_map(|f| &f.servers)
        .filter(|s| s.row.state == "crash-loop")
        .map(|s| s.row.name.as_str())
        .collect();
    let logins: Vec<_> = o.files.iter().flat_map(|f| &f.servers).filter_map(|s| Some((s, s.login.as_ref()?))).collect();
    let held: usize = o.files.iter().flat_map(|f| &f.servers).map(|s| s.row.held).sum();
    html! {
        section aria-labelledby="daemon-h" {
            h2 #daemon-h { "Daemon" }
            dl.facts {
                dt { "Version" } dd { (d.version) " (" (d.build) ")" }
                dt { "Process" } dd { "pid " (d.pid) ", up " (span(d.uptime_s)) }
                dt { "Socket" } dd { code { (shown(&d.socket.display().to_string())) } }
                dt { "Log" } dd { code { (shown(&d.log_file.display().to_string())) } }
                @for (what, dir) in &o.dirs { dt { (what) } dd { code { (shown(&dir.display().to_string())) } } }
                @if let Some(url) = &d.http_url { dt { "MCP over HTTP" } dd { code { (url) } } }
                @if let Some(url) = &d.otel_url {
                    dt { "Traces" } dd { (url) ": " (d.spans_exported) " exported, " (d.spans_dropped) " dropped" }
                }
                dt { "Activity record" } dd { (d.activity_lost) " entries lost" }
            }
            @for w in &d.warnings { p.warning { (shown(w)) } }
        }
        @if !looping.is_empty() || held > 0 || !untrusted.is_empty() {
            section aria-labelledby="attention-h" {
                h2 #attention-h { "Needs attention" }
                ul.attention {
                    @for name in &looping {
                        li.error { "Crash loop: " a href=(server_href(name)) { (shown(name)) } " keeps exiting at start; its page shows its stderr." }
                    }
                    @if held > 0 {
                        li.warning { (held) " changed tool or prompt definitions are held for review: run " code { "mcpx pins review" } "." }
                    }
                    @for f in &untrusted {
                        li.warning {
                            "Waiting for trust: " code { (shown(&f.file.display().to_string())) } ". "
                            a href=(trust_href(&f.file)) { "Review its entries" }
                            " (or run " code { "mcpx trust " (shown(&f.file.parent().unwrap_or(&f.file).display().to_string())) } ")."
                        }
                    }
                }
            }
        }
        @if !logins.is_empty() {
            section aria-labelledby="logins-h" {
                h2 #logins-h { "Logins" }
                div.scroll {
                    table {
                        thead { tr { th scope="col" { "Server" } th scope="col" { "Login" } th scope="col" { "Expires" } } }
                        tbody {
                            @for (line, login) in &logins {
                                tr {
                                    td { a href=(server_href(&line.row.name)) { (shown(&line.row.name)) } }
                                    td.state data-state=(login["state"].as_str().unwrap_or_default()) { (login["state"].as_str().unwrap_or_default().replace('_', " ")) }
                                    td { @if let Some(at) = login["expires_at"].as_u64() { (utc(at)) } @else { "-" } }
                                }
                            }
                        }
                    }
                }
            }
        }
        @for f in &o.files { (file_section(f)) }
        @if o.files.is_empty() {
            p { "No configuration file is known yet. Run " code { "mcpx ls" } " in a project, or add servers to " code { "~/.config/mcpx/config.json" } "." }
        }
    }
}

/// One configuration file's servers and problems.
fn file_section(f: &FileServers) -> Markup {
    let file = shown(&f.file.display().to_string());
    html! {
        section.file aria-label=(file) {
            h2 { code { (file) } " " span.badge { @if f.project { "project" } @else { "user" } } }
            @for e in &f.errors { p.error role="note" { (shown(&e.message)) } }
            @if f.servers.is_empty() { p { "No servers." } } @else {
                div.scroll {
                    table {
                        thead { tr {
                            th scope="col" { "Server" } th scope="col" { "State" } th scope="col" { "Instances" }
                            th scope="col" { "Tools" } th scope="col" { "Calls" } th scope="col" { "Errors" } th scope="col" { "Last error" }
                        } }
                        tbody {
                            @for s in &f.servers {
                                tr data-server=(shown(&s.row.name)) {
                                    td { a href=(server_href(&s.row.name)) { (shown(&s.row.name)) } }
                                    td.state data-state=(s.row.state) { (s.row.state) }
                                    td { (s.row.live) }
                                    td { @if let Some(n) = s.row.tools { (n) } @else { "-" } }
                                    td { (s.calls) }
                                    td { (s.errors) }
                                    td.said { (shown(s.row.error.as_deref().or(s.last_error.as_deref()).unwrap_or(""))) }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The trust page's live fragment: each entry as `mcpx trust` shows it, with its hash
/// and whether it is trusted, and one button that trusts the untrusted ones as shown.
pub fn trust(page: &Result<TrustPage, String>) -> Markup {
    let page = match page {
        Ok(page) => page,
        Err(e) => return html! { p.error { (shown(e)) } },
    };
    let file = page.file.display().to_string();
    let untrusted: Vec<_> = page.entries.iter().filter(|(e, trusted)| !trusted && e.refused.is_none()).collect();
    let asked: Vec<serde_json::Value> =
        untrusted.iter().map(|(e, _)| serde_json::json!({ "server": e.server, "hash": e.hash })).collect();
    html! {
        p { "What each entry of " code { (shown(&file)) } " runs, as " code { "mcpx trust" } " shows it. An entry runs nothing until it is trusted; an entry changed since it was trusted needs trust again." }
        @if page.entries.is_empty() { p { "The file has no entries." } }
        ul.items {
            @for (e, trusted) in &page.entries {
                @let (head, details) = e.described();
                @let state = if e.refused.is_some() { "refused" } else if *trusted { "trusted" } else { "untrusted" };
                li {
                    span.state data-state=(state) { (state) } " "
                    pre.entry { (shown(&head)) @for l in &details { "\n    " (shown(l)) } }
                    @if let Some(why) = &e.refused { p.error { "Refused, not trusted: " (shown(why)) } }
                    @if e.refused.is_none() { p.said { "hash " code { (e.hash) } } }
                }
            }
        }
        @if !untrusted.is_empty() {
            p.actions {
                button type="button" data-action="trust" data-file=(file) data-entries=(serde_json::Value::from(asked).to_string()) {
                    "Trust " (untrusted.len()) @if untrusted.len() == 1 { " entry" } @else { " entries" } " as shown"
                }
            }
        }
    }
}

/// The page that tries a tool: a form made from its `inputSchema` (each argument an
/// input of its type, a nested object a group of its own, an array one item a line),
/// the directory the call runs in, and where its progress, questions and result show.
/// The form is static; the script sends it and shows what comes back.
pub fn tool(t: &ToolPage) -> Markup {
    let name = t.tool["name"].as_str().unwrap_or_default();
    let said =
        [&t.tool["title"], &t.tool["description"]].iter().filter_map(|v| v.as_str()).collect::<Vec<_>>().join(": ");
    let schema = &t.tool["inputSchema"];
    html! {
        @if !said.is_empty() { p.said { (shown(&said)) } }
        p {
            "The call runs "
            @match &t.dir {
                Some(dir) => { "as a caller in " code { (shown(&dir.display().to_string())) } " (the project of " code { (shown(&t.file.display().to_string())) } ")" }
                None => { "with no directory, for your own configuration (" code { (shown(&t.file.display().to_string())) } ")" }
            }
            ", and is recorded in the activity record as the dashboard's."
        }
        form #try data-server=(t.server) data-tool=(name) data-file=(t.file.display().to_string()) {
            (fields(schema, "", 0))
            p.actions {
                button type="submit" { "Call " (shown(name)) }
                button #cancel type="button" disabled { "Cancel" }
            }
        }
        p #progress-line hidden { label for="progress" { "Progress" } " " progress #progress {} " " span #progress-said {} }
        section #question hidden aria-labelledby="question-h" { h2 #question-h { "The server asks" } div #question-body {} }
        section aria-labelledby="result-h" { h2 #result-h { "Result" } div #result aria-live="polite" { p.said { "Not called yet." } } }
    }
}

/// The inputs of an object schema's properties, under `path` (`/`-separated), at
/// nesting `depth` (deeper than 4, an object is one JSON field).
fn fields(schema: &serde_json::Value, path: &str, depth: usize) -> Markup {
    let empty = serde_json::Map::new();
    let properties = schema["properties"].as_object().unwrap_or(&empty);
    let required: Vec<&str> = schema["required"].as_array().into_iter().flatten().filter_map(|v| v.as_str()).collect();
    html! {
        @if properties.is_empty() && path.is_empty() { p { "It takes no arguments." } }
        @for (key, prop) in properties {
            @let at = if path.is_empty() { key.clone() } else { format!("{path}/{key}") };
            @let id = format!("arg-{}", at.bytes().map(|b| if b.is_ascii_alphanumeric() { (b as char).to_string() } else { format!("_{b:02x}") }).collect::<String>());
            @let kind = kind_of(prop);
            @let need = required.contains(&key.as_str());
            @let label = html! { code { (shown(key)) } @if need { " (required)" } @if let Some(d) = prop["description"].as_str() { " " span.said { (shown(d)) } } };
            @if kind == "object" && depth < 4 && prop["properties"].is_object() {
                fieldset { legend { (label) } (fields(prop, &at, depth + 1)) }
            } @else {
                p.field {
                    @if kind == "boolean" {
                        input id=(id) type="checkbox" data-path=(at) data-type=(kind) data-required=[need.then_some("1")];
                        " " label for=(id) { (label) }
                    } @else {
                        label for=(id) { (label) }
                        @if let Some(choices) = prop["enum"].as_array() {
                            select id=(id) data-path=(at) data-type="json" data-required=[need.then_some("1")] {
                                @if !need { option value="" { "(none)" } }
                                @for c in choices { option value=(c.to_string()) { (shown(&c.as_str().map(str::to_owned).unwrap_or_else(|| c.to_string()))) } }
                            }
                        } @else if kind == "integer" || kind == "number" {
                            input id=(id) type="number" step=(if kind == "integer" { "1" } else { "any" }) data-path=(at) data-type=(kind) data-required=[need.then_some("1")];
                        } @else if kind == "string" {
                            input id=(id) type="text" data-path=(at) data-type=(kind) data-required=[need.then_some("1")];
                        } @else {
                            @let items = kind_of(&prop["items"]);
                            @let hint = if kind == "array" && items != "object" && items != "array" { "one item a line" } else { "JSON" };
                            textarea id=(id) rows="3" data-path=(at) data-type=(if hint == "JSON" { "json" } else { "array" }) data-items=(items) data-required=[need.then_some("1")] placeholder=(hint) {}
                        }
                    }
                }
            }
        }
    }
}

/// The type a schema names: its `type` (the first that is not `null`, when it lists
/// several), `object` for one with `properties`, else `any`.
fn kind_of(schema: &serde_json::Value) -> &str {
    match &schema["type"] {
        serde_json::Value::String(t) => t,
        serde_json::Value::Array(ts) => ts.iter().filter_map(|t| t.as_str()).find(|t| *t != "null").unwrap_or("any"),
        _ if schema["properties"].is_object() => "object",
        _ => "any",
    }
}

/// The filter box above a server's lists.
pub fn server_before() -> Markup {
    html! {
        p.filter {
            label for="filter" { "Filter tools, resources and prompts" }
            input #filter type="search" autocomplete="off" spellcheck="false";
        }
    }
}

/// A server's live fragment.
pub fn server(p: &ServerPage) -> Markup {
    html! {
        section aria-labelledby="defined-h" {
            h2 #defined-h { "Where it is defined" }
            ul {
                @for (file, row) in &p.rows {
                    li {
                        code { (shown(&file.display().to_string())) } ": "
                        span.state data-state=(row.state) { (row.state) }
                        ", " (row.sharing) ", scope " (row.scope)
                        @if let Some(e) = &row.error { ". " span.said { (shown(e)) } }
                        @if let Some(d) = &row.description { p.said { (shown(d)) } }
                        @if row.state != "untrusted" && row.state != "disabled" {
                            p.actions {
                                @for (verb, label) in [("restart", "Restart"), ("stop", "Stop"), ("refresh", "Refresh the listing")] {
                                    button type="button" data-action=(verb) data-server=(p.name) data-file=(file.display().to_string()) { (label) }
                                    " "
                                }
                                @if p.remote {
                                    @for (verb, label, device) in [("login", "Log in", "0"), ("login", "Log in with a code", "1"), ("logout", "Log out", "0")] {
                                        button type="button" data-action=(verb) data-device=(device) data-server=(p.name) data-file=(file.display().to_string()) { (label) }
                                        " "
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        section aria-labelledby="instances-h" {
            h2 #instances-h { "Instances" }
            @if p.instances.is_empty() { p { "None running." } } @else {
                div.scroll {
                    table {
                        thead { tr {
                            th scope="col" { "Pid" } th scope="col" { "Pool key" } th scope="col" { "State" } th scope="col" { "Up" }
                            th scope="col" { "Calls" } th scope="col" { "In flight" } th scope="col" { "Dropped bytes" }
                        } }
                        tbody {
                            @for i in &p.instances {
                                tr {
                                    td { @if let Some(pid) = i.pid { (pid) } @else { "-" } }
                                    td { code { (shown(&i.key)) } }
                                    td.state data-state=(i.state) { (i.state) }
                                    td { (i.uptime_s.map(span).unwrap_or_else(|| "-".into())) }
                                    td { (i.calls_served) }
                                    td { (i.in_flight) }
                                    td { (i.dropped_bytes) }
                                }
                            }
                        }
                    }
                }
                @for i in p.instances.iter().filter(|i| !i.stderr_tail.is_empty() || i.last_error.is_some()) {
                    h3 { "Instance " (i.pid.map(|p| p.to_string()).unwrap_or_else(|| shown(&i.key))) }
                    @if let Some(e) = &i.last_error { p.error { (shown(e)) } }
                    @if !i.stderr_tail.is_empty() {
                        p { "Its stderr, last lines:" }
                        pre.stderr tabindex="0" { (shown(&i.stderr_tail)) }
                    }
                }
            }
        }
        @if !p.held.is_empty() {
            section aria-labelledby="held-h" {
                h2 #held-h { "Held for your review" }
                p { "Pinning holds these definitions: no client sees or calls them until you approve. What changed, field by field, and what the poisoning scan found, as " code { "mcpx pins review" } " shows it." }
                @for h in &p.held {
                    @let what = match (&h.change.before, h.rejected) { (None, _) => "is new", (Some(_), false) => "changed", (Some(_), true) => "changed (rejected before)" };
                    h3 { (h.kind) " " code { (shown(&h.name)) } " " (what) }
                    @for (field, lines) in h.change.diff() {
                        p { code { (shown(&field)) } ":" }
                        pre.diff tabindex="0" {
                            @for (sign, text) in &lines {
                                @let class = match sign { '+' => "added", '-' => "removed", _ => "kept" };
                                span class=(class) { (sign) " " (shown(text)) } "\n"
                            }
                        }
                    }
                    @if !h.change.findings.is_empty() {
                        ul.findings {
                            @for f in &h.change.findings { li.warning { "found: " (f.pattern) " at " code { (shown(&f.at)) } ": " (shown(&f.detail)) } }
                        }
                    }
                    p.actions {
                        @for (approve, label) in [(true, "Approve"), (false, "Reject")] {
                            @let decision = serde_json::json!({ "kind": h.kind, "name": h.name, "hash": h.change.hash, "approve": approve });
                            button type="button" data-action="review" data-server=(p.name) data-file=(h.file.display().to_string()) data-decision=(decision.to_string()) {
                                (label) " " (h.kind) " " (shown(&h.name))
                            }
                            " "
                        }
                    }
                }
            }
        }
        (listing("tools-h", "Tools", &p.tools, Some(&|tool: &str| tool_href(&p.name, tool))))
        (listing("resources-h", "Resources", &p.resources, None))
        (listing("prompts-h", "Prompts", &p.prompts, None))
        section aria-labelledby="log-h" {
            h2 #log-h { "Log" }
            @if p.log.is_empty() { p { "No lines about it in the daemon log." } } @else {
                pre.log tabindex="0" { @for l in &p.log { (shown(l)) "\n" } }
            }
        }
    }
}

/// One of a server's lists: `(name, what it says)` each; `try_href` links each to
/// the page that tries it.
fn listing(id: &str, title: &str, items: &[(String, String)], try_href: Option<&dyn Fn(&str) -> String>) -> Markup {
    html! {
        section aria-labelledby=(id) {
            h2 id=(id) { (title) " " span.count { "(" (items.len()) ")" } }
            @if items.is_empty() { p { "None listed." } } @else {
                ul.items {
                    @for (name, said) in items {
                        li data-filter=(format!("{} {}", name, said).to_lowercase()) {
                            code { (shown(name)) }
                            @if !said.is_empty() { " " span.said { (shown(said)) } }
                            @if let Some(href) = try_href { " " a href=(href(name)) aria-label=(format!("Try {}", shown(name))) { "Try" } }
                        }
                    }
                }
            }
        }
    }
}

/// The activity page's filter form, filled in from `req`.
pub fn activity_before(req: &ActivityRequest) -> Markup {
    let value = |v: &Option<String>| v.clone().unwrap_or_default();
    html! {
        form.filters method="get" action="/activity" {
            p { label for="f-server" { "Server" } input #f-server name="server" value=(value(&req.server)); }
            p { label for="f-name" { "Tool, prompt or URI" } input #f-name name="name" value=(value(&req.name)); }
            p { label for="f-client" { "Client" } input #f-client name="client" value=(value(&req.client)); }
            p.check { input #f-errors type="checkbox" name="errors" value="1" checked[req.errors]; label for="f-errors" { "Only errors" } }
            p { button type="submit" { "Filter" } }
        }
    }
}

/// The activity page's live fragment: `entries` newest first, or why none could be read.
pub fn activity(entries: &Result<Vec<Entry>, String>) -> Markup {
    html! {
        @match entries {
            Err(e) => { p.error { (shown(e)) } }
            Ok(entries) if entries.is_empty() => { p { "No requests recorded yet (or none the filters keep)." } }
            Ok(entries) => { div.scroll {
                table.activity {
                    caption { "Newest first, times in UTC" }
                    thead { tr {
                        th scope="col" { "Time" } th scope="col" { "Server" } th scope="col" { "Request" }
                        th scope="col" { "Outcome" } th scope="col" { "ms" } th scope="col" { "Client" } th scope="col" { "Path" }
                    } }
                    tbody {
                        @for e in entries {
                            tr data-id=(e.id) {
                                td { (time_of_day(e.started_ms)) }
                                td { a href=(server_href(&e.server)) { (shown(&e.server)) } }
                                td { (shown(&e.method)) " " code { (shown(&e.name)) } }
                                td.state data-state=(e.outcome) {
                                    (shown(&e.outcome))
                                    @if let Some(err) = &e.error { br; span.said { (shown(err)) } }
                                }
                                td.num { (format!("{:.1}", e.duration_us as f64 / 1000.0)) }
                                td { (shown(&e.client)) }
                                td { (shown(&e.path)) }
                            }
                        }
                    }
                }
            } }
        }
    }
}

/// A length of time in seconds, in its largest unit or two (`3 h 5 min`).
fn span(secs: u64) -> String {
    match secs {
        s if s < 60 => format!("{s} s"),
        s if s < 3600 => format!("{} min {} s", s / 60, s % 60),
        s if s < 86_400 => format!("{} h {} min", s / 3600, s % 3600 / 60),
        s => format!("{} d {} h", s / 86_400, s % 86_400 / 3600),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_server_wrote_is_text_and_its_hidden_characters_show() {
        let hostile = "<script>alert(1)</script><img src=x onerror=alert(2)>\u{202E}evil\u{1b}[2J";
        let items = [(hostile.to_owned(), "<a href=\"javascript:alert(3)\">x</a>".to_owned())];
        let html = listing("t", "Tools", &items, None).into_string();
        assert!(!html.contains("<script") && !html.contains("<img") && !html.contains("<a href"), "{html}");
        assert!(html.contains("&lt;script&gt;") && html.contains("&lt;U+202E&gt;evil\\e[2J"), "{html}");
        assert_eq!(server_href("a/b c"), "/servers/a%2Fb%20c");
    }
}
