//! The CLI's extras: shell completion scripts (with server and tool names from the
//! schema cache), man pages, and `mcpx config`.

use std::path::Path;

use serde_json::json;

use crate::harness::{Run, World, fake_server, mcpx_bin};

/// What bash's completion offers for the words `line` (the last one being completed),
/// with the script `mcpx completions bash` printed loaded, as a person's shell would.
fn bash_completes(w: &World, line: &[&str]) -> Vec<String> {
    let script = w.run(&["completions", "bash"]).ok();
    let words: Vec<String> = line.iter().map(|word| format!("'{word}'")).collect();
    let bin = mcpx_bin().display().to_string();
    let (cur, prev) = (line[line.len() - 1], line.len().checked_sub(2).map_or(bin.as_str(), |i| line[i]));
    // As bash calls a completion function: the command, the current word, the one before.
    let program = format!(
        "{script}\nCOMP_WORDS=('{bin}' {}); COMP_CWORD={}; _mcpx_dynamic '{bin}' '{cur}' '{prev}'; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        words.join(" "),
        line.len()
    );
    let mut bash = w.launcher().program("bash");
    bash.args(["--norc", "-c", &program]).stdin(std::process::Stdio::null());
    Run::of(bash, "bash completion").ok().lines().filter(|l| !l.is_empty()).map(str::to_owned).collect()
}

#[test]
fn completion_scripts_generate_for_every_shell_and_name_the_cached_tools() {
    let w = World::new(json!({ "fake": { "command": fake_server() }, "other": { "command": "npx", "args": ["x"] } }));
    for shell in ["bash", "zsh", "fish"] {
        let script = w.run(&["completions", shell]).ok();
        // Generated from the clap definition: it knows every subcommand, and asks
        // mcpx for the names.
        for word in ["call", "completions", "__complete"] {
            assert!(script.contains(word), "{shell} script lacks {word}");
        }
    }
    // Before any listing: the servers are known from the config, no tools yet, and
    // nothing was started to say so.
    assert_eq!(w.run(&["__complete", "servers"]).ok(), "fake\nother\n");
    assert_eq!(w.run(&["__complete", "targets"]).ok(), "");
    assert!(w.daemon_pid().is_none(), "completion must not start the daemon");
    assert_eq!(bash_completes(&w, &["restart", "o"]), ["other"]);
    assert_eq!(bash_completes(&w, &["types", "fake", "o"]), ["other"]);

    w.run(&["refresh", "fake"]).ok();
    w.run(&["stop", "--all"]).ok();
    let tools = w.run(&["__complete", "tools", "fake"]).ok();
    assert!(tools.lines().any(|t| t == "echo"), "{tools}");
    let targets = w.run(&["__complete", "targets"]).ok();
    assert!(targets.lines().all(|t| t.starts_with("fake.")) && targets.contains("fake.echo\n"), "{targets}");
    assert!(bash_completes(&w, &["call", "fake.ec"]).contains(&"fake.echo".to_owned()));
    assert!(bash_completes(&w, &["tools", "fake", "ec"]).contains(&"echo".to_owned()));
    // Subcommands still come from clap's part of the script.
    assert!(bash_completes(&w, &["comp"]).contains(&"completions".to_owned()));
    assert!(w.daemon_pid().is_none(), "completion must not start the daemon");
}

/// The visible subcommands, as `mcpx --help` lists them.
fn subcommands(w: &World) -> Vec<String> {
    let help = w.run(&["--help"]).ok();
    let listed = help.split("Commands:\n").nth(1).unwrap().split("\n\n").next().unwrap();
    let names = listed.lines().filter_map(|l| l.split_whitespace().next()).filter(|n| *n != "help");
    names.map(str::to_owned).collect()
}

#[test]
fn man_pages_render_and_name_every_subcommand() {
    let w = World::new(json!({}));
    let page = w.run(&["man"]).ok();
    assert!(page.lines().take(5).any(|l| l.starts_with(".TH mcpx 1")), "{page}");
    let subcommands = subcommands(&w);
    assert!(subcommands.len() > 15, "{subcommands:?}");
    for sub in &subcommands {
        assert!(page.contains(&format!("mcpx\\-{sub}")) || page.contains(&format!("\n{sub}\n")), "no {sub} in mcpx.1");
    }
    let out = w.path("man");
    let written = w.run(&["man", "--out", out.to_str().unwrap()]).ok();
    for sub in subcommands.iter().map(|s| format!("mcpx-{s}.1")).chain(["mcpx.1".to_owned()]) {
        let text = std::fs::read_to_string(out.join(&sub)).unwrap_or_else(|e| panic!("{sub}: {e}"));
        assert!(text.lines().take(5).any(|l| l.starts_with(".TH")), "{sub}: {text}");
        assert!(text.contains(".SH \"EXIT STATUS\"") && text.contains("needs a login"), "{sub}: no exit codes");
        assert!(written.contains(&sub), "{written}");
    }
    assert!(!Path::new(&out.join("mcpx-supervise.1")).exists(), "hidden subcommands have no page");
}

#[test]
fn config_shows_sources_defaults_and_trust_but_no_values() {
    let mut w = World::new(json!({}));
    let (home, proj) = (w.path("home"), w.path("proj"));
    std::fs::create_dir_all(home.join(".config/mcpx")).unwrap();
    std::fs::create_dir_all(&proj).unwrap();
    w.unset.push("MCPX_CONFIG".to_owned());
    w.env.push(("HOME".to_owned(), home.display().to_string()));
    w.env.push(("XDG_CONFIG_HOME".to_owned(), home.join(".config").display().to_string()));
    w.env.push(("DOCS_TOKEN".to_owned(), "value-of-the-variable".to_owned()));
    let user = json!({ "mcpServers": {
        "docs": {
            "command": "npx", "args": ["-y", "docs-mcp", "--token", "${DOCS_TOKEN}"],
            "env": { "TOKEN": "${secret:docs}", "PLAIN": "literal-value" },
            "mcpx": { "scope": "repo", "idleTimeout": "10m", "excludeTools": ["delete"] },
        },
        "search": { "url": "https://example.com/mcp", "headers": { "Authorization": "Bearer ${DOCS_TOKEN}" } },
        "tracker": { "url": "https://tracker.example.com/mcp", "oauth": {
            "issuer": "https://auth.tracker.example.com", "clientId": "mcpx-cli", "clientSecret": "${secret:tracker}",
            "scopes": ["issues:read"], "redirectPort": 8765,
        } },
        "machine": { "url": "https://m.example.com/mcp", "oauth": {
            "issuer": "https://auth.m.example.com", "clientId": "m", "clientSecret": "literal-value",
            "grant": "client_credentials",
        } },
    }});
    std::fs::write(home.join(".config/mcpx/config.json"), user.to_string()).unwrap();
    let project = json!({ "mcpServers": { "local": { "command": "./serve.sh", "mcpx": { "disabled": true } } } });
    std::fs::write(proj.join(".mcp.json"), project.to_string()).unwrap();

    let in_proj = |args: &[&str]| {
        w.run_with(args, |cmd| {
            cmd.current_dir(&proj);
        })
        .ok()
    };
    let text = in_proj(&["config"]);
    for secret in ["value-of-the-variable", "literal-value"] {
        assert!(!text.contains(secret), "{text}");
    }
    insta::assert_snapshot!(w.redact(&text));

    w.trust_in(&proj);
    let listed = serde_json::from_str::<serde_json::Value>(&in_proj(&["config", "--json"])).unwrap();
    let servers = listed["servers"].as_array().unwrap();
    let local = servers.iter().find(|s| s["name"] == "local").unwrap();
    assert_eq!(local["trusted"], true);
    assert_eq!(local["source"], proj.join(".mcp.json").display().to_string());
    let docs = servers.iter().find(|s| s["name"] == "docs").unwrap();
    assert_eq!(docs["args"][3], "${DOCS_TOKEN}", "as written, never expanded");
    assert_eq!(docs["env"], json!(["PLAIN", "TOKEN"]), "names only");
    assert_eq!(docs["mcpx"]["max"], 4);
    assert_eq!(docs["mcpx"]["idleTimeout"], "10m");
    assert_eq!(docs["mcpx"]["callTimeout"], "2m");
    let tracker = servers.iter().find(|s| s["name"] == "tracker").unwrap();
    assert_eq!(tracker["oauth"]["clientSecret"], "${secret:tracker}", "the secret's name only");
    assert_eq!(tracker["oauth"]["grant"], "authorization_code");
    assert!(!listed.to_string().contains("value-of-the-variable") && !listed.to_string().contains("literal-value"));
    assert!(w.daemon_pid().is_none(), "config needs no daemon");

    // A wrong entry is a configuration error: shown, and exit 2.
    let project = json!({ "mcpServers": { "bad": { "command": 5 } } });
    std::fs::write(proj.join(".mcp.json"), project.to_string()).unwrap();
    let wrong = w.run_with(&["config"], |cmd| {
        cmd.current_dir(&proj);
    });
    assert_eq!(wrong.code, 2, "{wrong:?}");
    assert!(wrong.stdout.contains("error: ") && wrong.stdout.contains("server `bad`"), "{wrong:?}");
}
