//! The secret store in the Secret Service: each test starts its own session bus
//! (`dbus-daemon`, a configuration of its own with no service activation) and an
//! unlocked `gnome-keyring-daemon` on it, in the world's directory, and kills both on
//! drop. `.ci/run` installs them from Debian; where they are missing the tests are
//! skipped with a note, and fail under `CI=true`.

use std::io::Write;
use std::os::unix::fs::DirBuilderExt;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::json;

use crate::harness::{Run, Spawned, World, fake_server, wait_until};

/// A value no test output would hold by chance.
const VALUE: &str = "kr-s3cr3t-94e0b2";

/// A private session bus and an unlocked GNOME Keyring serving the Secret Service on
/// it; both killed on drop (the keyring first).
struct Keyring {
    /// `gnome-keyring-daemon --foreground`.
    keyring: Option<Spawned>,
    /// `dbus-daemon --nofork`.
    bus: Option<Spawned>,
    /// The bus's address, `unix:path=<socket>`.
    address: String,
}

impl Keyring {
    /// Starts a bus listening on `socket` and a keyring on it whose files are under
    /// `dir`; waits until the keyring owns `org.freedesktop.secrets`. `None`, after a
    /// note, when the programs are not installed (a failure under `CI=true`).
    fn start(w: &World, dir: &Path, socket: &Path) -> Option<Keyring> {
        let missing: Vec<&str> = ["dbus-daemon", "dbus-send", "gnome-keyring-daemon"]
            .into_iter()
            .filter(|p| !["/usr/bin", "/bin", "/usr/local/bin"].iter().any(|d| Path::new(d).join(p).exists()))
            .collect();
        if !missing.is_empty() {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "the Secret Service tests need {missing:?} (`.ci/run` installs gnome-keyring, dbus-daemon and dbus-bin), and CI=true forbids skipping them"
            );
            eprintln!(
                "skipped: the Secret Service tests need {missing:?} (apt-get install gnome-keyring dbus-daemon dbus-bin)"
            );
            return None;
        }
        for sub in ["home", "xdg-run"] {
            std::fs::DirBuilder::new().mode(0o700).recursive(true).create(dir.join(sub)).unwrap();
        }
        let address = format!("unix:path={}", socket.display());
        let config = dir.join("bus.conf");
        std::fs::write(
            &config,
            format!(
                r#"<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>{address}</listen>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
"#
            ),
        )
        .unwrap();
        let mut kr = Keyring { keyring: None, bus: None, address };
        let mut bus = w.launcher().program("dbus-daemon");
        bus.arg("--nofork").arg(format!("--config-file={}", config.display()));
        kr.bus = Some(Spawned(bus.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap()));
        wait_until("the session bus listens", Duration::from_secs(20), || {
            std::os::unix::net::UnixStream::connect(socket).is_ok()
        });

        let mut keyring = w.launcher().program("gnome-keyring-daemon");
        keyring
            .args(["--foreground", "--unlock", "--components=secrets"])
            .env("DBUS_SESSION_BUS_ADDRESS", &kr.address)
            .env("HOME", dir.join("home"))
            .env("XDG_DATA_HOME", dir.join("home/.local/share"))
            .env("XDG_RUNTIME_DIR", dir.join("xdg-run"))
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let mut child = keyring.spawn().unwrap();
        // The login keyring's password, on stdin; `--unlock` reads it to its end.
        child.stdin.take().unwrap().write_all(b"test-password").unwrap();
        kr.keyring = Some(Spawned(child));
        wait_until("the keyring serves org.freedesktop.secrets", Duration::from_secs(30), || kr.serves());
        Some(kr)
    }

    /// Whether `org.freedesktop.secrets` has an owner on the bus.
    fn serves(&self) -> bool {
        #[allow(clippy::disallowed_methods)] // Reason: tests run the bus's own tools.
        let out = std::process::Command::new("dbus-send")
            .args([
                &format!("--bus={}", self.address),
                "--print-reply",
                "--dest=org.freedesktop.DBus",
                "/org/freedesktop/DBus",
                "org.freedesktop.DBus.NameHasOwner",
                "string:org.freedesktop.secrets",
            ])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).contains("boolean true")
    }

    /// Stops the keyring and the bus: the store no longer answers.
    fn stop(&mut self) {
        self.keyring.take();
        self.bus.take();
    }
}

impl Drop for Keyring {
    fn drop(&mut self) {
        self.stop();
    }
}

/// `mcpx secret set NAME` in the world's directory, the value piped on stdin.
fn set(w: &World, name: &str, value: &str) -> Run {
    crate::secrets::set(w, w.dir.path(), name, value)
}

/// `mcpx call SERVER.env '{"name": VAR}'` in the world's directory.
fn env_of(w: &World, server: &str, var: &str) -> Run {
    crate::secrets::env_of(w, w.dir.path(), server, var)
}

/// Asserts that `text` (what `what` printed or kept) does not hold the value.
#[track_caller]
fn assert_hidden(what: &str, text: &str) {
    assert!(!text.contains(VALUE), "the secret's value shows in {what}:\n{text}");
}

/// A world whose servers `s` and `t` read `${secret:API_TOKEN}`, choosing its store
/// the way a user's first `mcpx secret set` does (no `MCPX_SECRET_STORE`).
fn world() -> World {
    let server = |var: &str| json!({ "command": fake_server(), "env": { var: "${secret:API_TOKEN}" } });
    let mut w = World::new(json!({ "s": server("K"), "t": server("T") }));
    w.env.retain(|(k, _)| k != "MCPX_SECRET_STORE");
    w.unset.push("MCPX_SECRET_STORE".to_owned());
    w
}

/// Checks what a store in the Secret Service leaves behind: the record says
/// `secret-service`, no secrets file exists, and the value is in no output of
/// `outputs`, no state file, the daemon's log, `status --json`, `ls --json`, and not
/// on the daemon's or `s`'s supervisor's command line.
fn assert_kept_in_the_keyring_only(w: &World, outputs: &mut Vec<String>) {
    assert_eq!(std::fs::read_to_string(w.path("state/secret-store")).unwrap(), "secret-service\n");
    assert!(!w.path("state/secrets.json").exists(), "the file store was used");
    let instance = w.instance("s").expect("s runs");
    let supervisor = instance["supervisor_pid"].as_i64().expect("s is supervised");
    for pid in [i64::from(w.daemon_pid().unwrap()), supervisor] {
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
        assert_hidden(&format!("/proc/{pid}/cmdline"), &String::from_utf8_lossy(&cmdline));
    }
    for args in [&["status", "--json"][..], &["ls", "--json"], &["secret", "ls"]] {
        outputs.push(format!("{:?}", w.run(args)));
    }
    for (i, output) in outputs.iter().enumerate() {
        assert_hidden(&format!("command output {i}"), output);
    }
    for entry in std::fs::read_dir(w.path("state")).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            assert_hidden(&path.display().to_string(), &String::from_utf8_lossy(&std::fs::read(&path).unwrap()));
        }
    }
}

/// With a Secret Service on the session bus (`DBUS_SESSION_BUS_ADDRESS`), the first
/// `secret set` records `secret-service` and keeps the value in the keyring; a
/// `${secret:}` entry gets it; `secret ls` lists it there. Once the keyring stops,
/// nothing falls back to the file: `secret ls`, `secret set` and a server that needs
/// the secret fail with exit 2, saying the Secret Service did not answer and what to
/// do. The value shows in no output, error, log, state file or command line.
#[test]
fn the_secret_service_keeps_the_secret_and_nothing_falls_back_to_the_file() {
    let mut w = world();
    let Some(mut keyring) = Keyring::start(&w, &w.path("keyring"), &w.path("keyring/bus")) else { return };
    w.env.push(("DBUS_SESSION_BUS_ADDRESS".to_owned(), keyring.address.clone()));
    let mut outputs = Vec::new();

    let done = set(&w, "API_TOKEN", VALUE);
    outputs.push(format!("{done:?}"));
    assert!(done.ok().contains(&format!("secret-service {}", keyring.address)), "{outputs:?}");
    assert_eq!(env_of(&w, "s", "K").ok(), format!("{VALUE}\n"));
    let ls = w.run(&["secret", "ls", "--json"]);
    outputs.push(format!("{ls:?}"));
    let location = format!("secret-service {}", keyring.address);
    assert_eq!(
        ls.json(),
        json!({ "store": "secret-service", "location": location, "names": ["API_TOKEN"], "logins": [] })
    );
    assert_kept_in_the_keyring_only(&w, &mut outputs);

    keyring.stop();
    for run in [w.run(&["secret", "ls"]), set(&w, "OTHER", VALUE), env_of(&w, "t", "T")] {
        outputs.push(format!("{run:?}"));
        assert_eq!(run.code, 2, "{run:?}");
        assert!(
            run.stderr.contains("the Secret Service on the session bus") && run.stderr.contains("did not answer"),
            "{run:?}"
        );
        assert!(run.stderr.contains("start your keyring") && run.stderr.contains("file store"), "{run:?}");
    }
    assert!(!w.path("state/secrets.json").exists(), "a secret went to the file when the keyring stopped");
    outputs.push(w.log());
    for (i, output) in outputs.iter().enumerate() {
        assert_hidden(&format!("command output {i}"), output);
    }
}

/// A daemon and a CLI whose environment has no `DBUS_SESSION_BUS_ADDRESS` (as a
/// systemd service's) find the Secret Service at `/run/user/<uid>/bus` (moved by the
/// runtime-root hook `MCPX_TEST_RUN_USER`): the secret set there reaches the server.
/// With no bus there, a server that needs it fails, naming that address.
#[test]
fn a_stripped_environment_finds_the_secret_service_under_run_user() {
    let mut w = world();
    let uid = w.uid();
    let user_dir = w.path(&format!("run-user/{uid}"));
    std::fs::DirBuilder::new().mode(0o700).recursive(true).create(&user_dir).unwrap();
    let Some(mut keyring) = Keyring::start(&w, &w.path("keyring"), &user_dir.join("bus")) else { return };
    w.unset.push("DBUS_SESSION_BUS_ADDRESS".to_owned());
    w.env.push(("MCPX_TEST_RUN_USER".to_owned(), w.path("run-user").display().to_string()));
    let mut outputs = Vec::new();

    let done = set(&w, "API_TOKEN", VALUE);
    outputs.push(format!("{done:?}"));
    assert!(done.ok().contains(&format!("secret-service {}", keyring.address)), "{outputs:?}");
    assert_eq!(env_of(&w, "s", "K").ok(), format!("{VALUE}\n"));
    let daemon = w.daemon_pid().unwrap();
    let environ = std::fs::read(format!("/proc/{daemon}/environ")).unwrap();
    assert!(!String::from_utf8_lossy(&environ).contains("DBUS_SESSION_BUS_ADDRESS"), "the daemon has a bus address");
    assert_kept_in_the_keyring_only(&w, &mut outputs);

    keyring.stop();
    let failed = env_of(&w, "t", "T");
    outputs.push(format!("{failed:?}"));
    assert_eq!(failed.code, 2, "{failed:?}");
    assert!(failed.stderr.contains(&format!("session bus {} did not answer", keyring.address)), "{failed:?}");
    outputs.push(w.log());
    for (i, output) in outputs.iter().enumerate() {
        assert_hidden(&format!("command output {i}"), output);
    }
}
