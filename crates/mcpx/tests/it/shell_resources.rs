//! Everything a server offers besides tools, from the shell: `mcpx resources`,
//! `read`, `prompts` and `prompt` (with "did you mean" and the prompt's usage),
//! `tools`/`resources`/`prompts` of a server never listed (started, not refused),
//! `--out` saving binary content, resource links, and `ls`'s one-line descriptions.
//! Against the fake server and the real server-everything; human outputs snapshotted.

use serde_json::json;

use crate::harness::{World, e2e_dir, fake_server};

/// A world with the fake server as `fake` and server-everything as `everything`.
fn world() -> World {
    let w = World::new(json!({}));
    let everything = e2e_dir().join("node_modules/.bin/mcp-server-everything").display().to_string();
    w.set_servers(json!({
        "fake": { "command": fake_server() },
        "everything": { "command": everything, "args": ["stdio"] },
    }));
    w
}

/// `mcpx <args>`'s stdout, expecting exit 0, with the world's directory redacted.
#[track_caller]
fn out(w: &World, args: &[&str]) -> String {
    let run = w.run(args);
    assert_eq!(run.code, 0, "`mcpx {}`: {run:?}", args.join(" "));
    w.redact(&run.stdout)
}

/// `mcpx <args>`'s stderr, expecting exit `code` and nothing on stdout.
#[track_caller]
fn failing(w: &World, code: i32, args: &[&str]) -> String {
    let run = w.run(args);
    assert_eq!(run.code, code, "`mcpx {}`: {run:?}", args.join(" "));
    assert!(run.stdout.is_empty(), "errors go to stderr: {run:?}");
    w.redact(run.stderr.trim_end())
}

/// `tools`, `resources` and `prompts` of a server never listed start it and list it;
/// `ls` and the lists of every server start nothing.
#[test]
fn naming_a_server_never_listed_starts_it_and_lists_it() {
    let w = world();
    let all = w.run(&["resources", "--json"]).json();
    assert_eq!(all.as_array().unwrap().len(), 2, "{all}");
    assert!(all.as_array().unwrap().iter().all(|r| r["listed"] == false), "{all}");
    let prompts = w.run(&["prompts"]);
    assert!(prompts.stderr.contains("never listed: everything, fake"), "{prompts:?}");
    assert_eq!(w.ls_row("fake")["state"], "unread", "nothing was started");

    let tools = w.run(&["tools", "fake", "--json"]).json();
    assert!(tools.as_array().unwrap().iter().any(|t| t["name"] == "echo"), "{tools}");
    assert_eq!(w.ls_row("fake")["state"], "running");
    insta::assert_snapshot!("resources_of_one_server", out(&w, &["resources", "fake"]));
    insta::assert_snapshot!("prompts_of_one_server", out(&w, &["prompts", "fake"]));
    let listed = w.run(&["resources", "--json"]).json();
    let fake = listed.as_array().unwrap().iter().find(|r| r["server"] == "fake").unwrap();
    assert_eq!(fake["resources"][0]["uri"], "fake://static", "{listed}");
    assert_eq!(fake["resourceTemplates"][0]["uriTemplate"], "fake://item/{id}", "{listed}");
}

/// `read` prints text, saves blobs with `--out` (a file or a directory, never
/// overwriting) and otherwise describes them; a wrong URI gets "did you mean".
#[test]
fn read_prints_text_and_saves_blobs() {
    let w = world();
    assert_eq!(out(&w, &["read", "fake", "fake://static"]), "static resource\n");
    assert_eq!(out(&w, &["read", "fake", "fake://item/42"]), "item 42\n");
    insta::assert_snapshot!("read_blob_without_out", out(&w, &["read", "fake", "test://static-binary"]));
    let file = w.path("pixel.png");
    let saved = out(&w, &["read", "fake", "test://static-binary", "--out", file.to_str().unwrap()]);
    assert_eq!(saved, "saved [TMP]/pixel.png (image/png, 70 bytes)\n");
    assert!(std::fs::read(&file).unwrap().starts_with(b"\x89PNG"), "the decoded PNG");
    let again = failing(&w, 2, &["read", "fake", "test://static-binary", "--out", file.to_str().unwrap()]);
    assert_eq!(again, "mcpx: [TMP]/pixel.png exists; remove it or name another file");
    let dir = w.path("saved");
    std::fs::create_dir(&dir).unwrap();
    for expected in ["static-binary", "static-binary-1"] {
        let saved = out(&w, &["read", "fake", "test://static-binary", "--out", dir.to_str().unwrap()]);
        assert_eq!(saved, format!("saved [TMP]/saved/{expected} (image/png, 70 bytes)\n"));
    }

    insta::assert_snapshot!("read_unknown_uri", failing(&w, 4, &["read", "fake", "fake://statc"]));
    let json = w.run(&["read", "fake", "fake://statc", "--json"]);
    assert_eq!(json.code, 4, "{json:?}");
    assert_eq!(json.json()["error"]["kind"], "rpc");
}

/// `prompt` checks the arguments against the prompt's before the call (exit 2, with
/// its usage), prints the messages, and saves images with `--out`.
#[test]
fn prompt_prints_messages_and_checks_arguments() {
    let w = world();
    insta::assert_snapshot!(
        "prompt_missing_argument",
        failing(&w, 2, &["prompt", "fake.test_prompt_with_arguments", "arg1=a"])
    );
    insta::assert_snapshot!(
        "prompt_with_arguments",
        out(&w, &["prompt", "fake.test_prompt_with_arguments", "arg1=a", "arg2=b"])
    );
    assert_eq!(
        out(&w, &["prompt", "fake.greet", r#"{"name":"Ada"}"#]),
        "# Greets someone by name.\n\n[user]\nHello, Ada!\n"
    );
    insta::assert_snapshot!("prompt_unknown", failing(&w, 2, &["prompt", "fake.gret"]));
    insta::assert_snapshot!("prompt_no_name", failing(&w, 2, &["prompt", "fake"]));
    let unknown = failing(&w, 2, &["prompt", "fake.greet", "nme=Ada"]);
    assert!(unknown.contains("usage: mcpx prompt fake.greet [name=STRING]"), "{unknown}");

    let dir = w.path("images");
    let saved = out(&w, &["prompt", "fake.test_prompt_with_image", "--out", dir.to_str().unwrap()]);
    assert!(saved.contains("saved [TMP]/images/test_prompt_with_image-1.png (image/png, 70 bytes)"), "{saved}");
    let json = w.run(&["prompt", "fake.greet", "--json"]).json();
    assert_eq!(json["messages"][0]["content"]["text"], "Hello, world!");
}

/// `call --out DIR` saves image and audio content and embedded blobs; without it each
/// is one line with its size, type and how to save it.
#[test]
fn call_saves_binary_content_with_out() {
    let w = world();
    insta::assert_snapshot!("call_multiple_content", out(&w, &["call", "fake.test_multiple_content_types"]));
    let dir = w.path("out");
    let saved = out(&w, &["call", "fake.test_image_content", "--out", dir.to_str().unwrap()]);
    assert_eq!(saved, "saved [TMP]/out/test_image_content-1.png (image/png, 70 bytes)\n");
    let saved = out(&w, &["call", "fake.test_audio_content", "--out", dir.to_str().unwrap()]);
    assert!(saved.starts_with("saved [TMP]/out/test_audio_content-1.wav (audio/wav, "), "{saved}");
    let again = out(&w, &["call", "fake.test_image_content", "--out", dir.to_str().unwrap()]);
    assert_eq!(again, "saved [TMP]/out/test_image_content-1-1.png (image/png, 70 bytes)\n", "never overwritten");
}

/// server-everything: its resources, templates and prompts, a prompt with arguments,
/// an image saved, resource links with their URIs, and `ls`'s description as the
/// first sentence of its Markdown instructions.
#[test]
fn server_everything_resources_prompts_and_content() {
    let w = world();
    insta::assert_snapshot!("everything_resources", out(&w, &["resources", "everything"]));
    insta::assert_snapshot!("everything_prompts", out(&w, &["prompts", "everything"]));
    let text = out(&w, &["read", "everything", "demo://resource/dynamic/text/1"]);
    assert!(text.contains("1"), "{text}");
    let blob = out(&w, &["read", "everything", "demo://resource/dynamic/blob/1"]);
    assert!(blob.contains("use --out FILE to save it]"), "{blob}");
    let dym = failing(&w, 4, &["read", "everything", "demo://resource/static/document/architecture.mdx"]);
    assert!(dym.contains("did you mean `demo://resource/static/document/architecture.md`?"), "{dym}");
    let by_name = failing(&w, 4, &["read", "everything", "Dynamic Text Resource"]);
    assert!(by_name.ends_with("; `Dynamic Text Resource` is the name of `demo://resource/dynamic/text/{resourceId}`: read it by its URI (see `mcpx resources everything`)"), "{by_name}");
    let usage = failing(&w, 2, &["prompt", "everything.args-prompt"]);
    assert!(usage.contains("missing required argument `city`"), "{usage}");
    insta::assert_snapshot!("everything_args_prompt", out(&w, &["prompt", "everything.args-prompt", "city=Paris"]));
    let dym = failing(&w, 2, &["prompt", "everything.args_prompt"]);
    assert!(dym.contains("did you mean `args-prompt`?"), "{dym}");

    let dir = w.path("out");
    let image = out(&w, &["call", "everything.get-tiny-image", "--out", dir.to_str().unwrap()]);
    assert!(image.contains("saved [TMP]/out/get-tiny-image-"), "{image}");
    let links = out(&w, &["call", "everything.get-resource-links", "count=2"]);
    assert!(links.contains("[resource link] "), "{links}");
    assert!(links.contains(" <demo://resource/"), "{links}");
    let ls = out(&w, &["ls"]);
    let row = ls.lines().find(|l| l.starts_with("everything")).unwrap();
    assert!(row.ends_with("Everything Server – Server Instructions"), "{ls}");
}

/// On a terminal, naming a server never listed that is slow to start shows a status
/// line while it starts, erased after; once listed, nothing extra is drawn.
#[test]
fn a_terminal_hears_that_a_server_never_listed_starts() {
    let w = World::new(json!({ "fake": { "command": fake_server(), "env": { "FAKE_INIT_DELAY_MS": "1000" } } }));
    w.run(&["ls"]).ok(); // Starts the daemon, so that it holds no descriptor of the terminal.
    for starts in [true, false] {
        let mut cmd = w.command();
        cmd.args(["prompts", "fake"]).stdin(std::process::Stdio::null());
        let (run, terminal) = crate::terminal::with_stderr_on_a_terminal(cmd);
        assert_eq!(run.code, 0, "{run:?}");
        assert_eq!(terminal.contains("starting fake to list it"), starts, "{terminal:?}");
        assert!(terminal.is_empty() || terminal.ends_with("\r\u{1b}[2K"), "erased at the end: {terminal:?}");
        assert!(run.stdout.contains("fake.greet"), "{run:?}");
    }
}
