//! Who the CLI talks to: a daemon socket that another uid serves is refused before
//! anything is sent to it.

use std::path::PathBuf;

use serde_json::json;

use crate::harness::{World, fake_server};

/// The uid that plays another local user.
const OTHER_UID: u32 = 65534;

/// A fake daemon, in perl (in every Debian base system): it binds `socket`, prints
/// `ready`, and for each connection appends what it received to `record` and answers
/// a forged success.
const FAKE_DAEMON: &str = r#"
use IO::Socket::UNIX; use Socket; $SIG{PIPE} = "IGNORE";
my ($path, $record) = @ARGV;
my $l = IO::Socket::UNIX->new(Type => SOCK_STREAM, Local => $path, Listen => 8) or die "bind: $!";
$| = 1; print "ready\n";
while (my $c = $l->accept) {
    my $got = '';
    while ($got !~ /\r\n\r\n/) { my $n = sysread($c, my $buf, 65536); last unless $n; $got .= $buf; }
    open(my $f, '>>', $record) or die "record: $!"; print $f $got; close $f;
    my $body = '{"pid":1,"build":"forged","started_at_ms":1}';
    print $c "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " . length($body) . "\r\nConnection: close\r\n\r\n$body";
    close $c;
}
"#;

/// A directory of the other uid's, where it binds its socket and keeps its record.
struct OtherUsersDir(tempfile::TempDir);

impl OtherUsersDir {
    fn new() -> OtherUsersDir {
        let dir = tempfile::Builder::new().prefix("mcpx-other").tempdir_in("/tmp").unwrap();
        std::os::unix::fs::chown(dir.path(), Some(OTHER_UID), Some(OTHER_UID)).unwrap();
        OtherUsersDir(dir)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.path().join(name)
    }
}

/// Runs the fake daemon as the other uid on `<dir>/fake.sock` and waits until it listens.
fn fake_daemon(dir: &OtherUsersDir) -> crate::harness::Spawned {
    use std::io::BufRead;
    #[allow(clippy::disallowed_methods)] // Reason: setpriv runs the fake daemon as another uid.
    let mut child = std::process::Command::new("setpriv")
        .arg(format!("--reuid={OTHER_UID}"))
        .arg(format!("--regid={OTHER_UID}"))
        .args(["--clear-groups", "/usr/bin/perl", "-e", FAKE_DAEMON])
        .arg(dir.path("fake.sock"))
        .arg(dir.path("received"))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let child = crate::harness::Spawned(child);
    let mut line = String::new();
    std::io::BufReader::new(stdout).read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready", "the fake daemon did not start");
    child
}

/// A socket that another uid bound, renamed into the user's own runtime directory, is
/// refused before anything is sent: first by its owner, then (chowned to the user) by
/// the uid of the process serving it. `status`, `call` and `serve` all refuse it,
/// with exit 3, naming the socket and the uid.
#[test]
fn a_daemon_socket_served_by_another_uid_is_refused_and_sent_nothing() {
    let w = World::new(json!({ "fake": { "command": fake_server() } }));
    let other = OtherUsersDir::new();
    let _fake = fake_daemon(&other);
    let socket = w.path("run/daemon.sock");
    std::fs::rename(other.path("fake.sock"), &socket).unwrap();
    let me = nix::unistd::geteuid().as_raw();
    for owner in ["the other uid", "me"] {
        if owner == "me" {
            std::os::unix::fs::chown(&socket, Some(me), None).unwrap();
        }
        for args in [&["status"][..], &["call", "fake.echo", r#"{"password":"hunter2"}"#], &["serve"]] {
            let run = w.run(args);
            let received = std::fs::read_to_string(other.path("received")).unwrap_or_default();
            assert!(received.is_empty(), "socket owned by {owner}: the fake daemon received: {received:?}");
            assert_eq!(run.code, 3, "socket owned by {owner}, `mcpx {}`: {run:?}", args.join(" "));
            assert!(
                run.stderr.contains(&format!("uid {OTHER_UID}")) && run.stderr.contains(&*socket.to_string_lossy()),
                "socket owned by {owner}: {}",
                run.stderr
            );
            assert_eq!(run.stderr.trim_end().lines().count(), 1, "one line: {}", run.stderr);
        }
    }
}
