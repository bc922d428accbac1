//! The trust checks of a program file and running it by its descriptor, on real files.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::Executable;

/// A private directory (0700, ours) with a copy of `/bin/echo` in it, mode 0755.
fn with_echo() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let echo = dir.path().join("echo");
    std::fs::copy("/bin/echo", &echo).unwrap();
    std::fs::set_permissions(&echo, std::fs::Permissions::from_mode(0o755)).unwrap();
    (dir, echo)
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn refusal(path: &Path) -> String {
    let e = Executable::open_trusted(path).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::PermissionDenied, "{e}");
    e.to_string()
}

#[test]
fn a_private_binary_runs_as_the_file_that_was_opened() {
    let (_dir, echo) = with_echo();
    let exe = Executable::open_trusted(&echo).unwrap();
    assert_eq!(exe.path(), echo);
    exe.check_path().unwrap();
    #[allow(clippy::disallowed_methods)] // Reason: the test runs the probe path directly.
    let out = std::process::Command::new(exe.program().unwrap()).arg("probed").output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "probed\n");
}

#[test]
fn a_link_to_a_private_binary_is_followed_once() {
    let (dir, echo) = with_echo();
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&echo, &link).unwrap();
    let exe = Executable::open_trusted(&link).unwrap();
    exe.check_path().unwrap();
    assert_eq!(exe, Executable::open_trusted(&link).unwrap());
}

#[test]
fn a_binary_others_can_write_is_refused() {
    let (_dir, echo) = with_echo();
    chmod(&echo, 0o775);
    let e = refusal(&echo);
    assert!(e.contains("is writable by its group or others (mode 0775)") && e.contains("chmod go-w"), "{e}");
    chmod(&echo, 0o757);
    assert!(refusal(&echo).contains("mode 0757"));
}

#[test]
fn a_directory_others_can_write_is_refused_unless_roots_and_sticky() {
    let (dir, _echo) = with_echo();
    let open = dir.path().join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::copy("/bin/echo", open.join("echo")).unwrap();
    chmod(&open.join("echo"), 0o755);
    chmod(&open, 0o777);
    let e = refusal(&open.join("echo"));
    assert!(e.contains(&format!("{}, a directory above", open.display())) && e.contains("mode 0777"), "{e}");
    // Sticky but not root's: still refused (unless the tests run as root, who owns it).
    chmod(&open, 0o1777);
    if nix::unistd::geteuid().is_root() {
        Executable::open_trusted(&open.join("echo")).unwrap();
    } else {
        assert!(refusal(&open.join("echo")).contains("mode 1777"));
    }
}

#[test]
fn something_that_is_not_a_regular_executable_file_is_refused() {
    let (dir, echo) = with_echo();
    chmod(&echo, 0o644);
    assert!(refusal(&echo).contains("is not executable (mode 0644)"));
    let fifo = dir.path().join("fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o700)).unwrap();
    // Opening it does not wait for a writer.
    assert!(refusal(&fifo).contains("is not a regular file"));
    let missing = Executable::open_trusted(&dir.path().join("missing")).unwrap_err();
    assert_eq!(missing.kind(), std::io::ErrorKind::NotFound);
    assert!(missing.to_string().contains("missing"), "{missing}");
}

#[test]
fn a_swapped_path_is_noticed() {
    let (dir, echo) = with_echo();
    let exe = Executable::open_trusted(&echo).unwrap();
    let other = dir.path().join("other");
    std::fs::copy("/bin/echo", &other).unwrap();
    std::fs::rename(&other, &echo).unwrap();
    let e = exe.check_path().unwrap_err().to_string();
    assert!(e.contains("was replaced after it was checked (it now names another file)"), "{e}");
    std::fs::remove_file(&echo).unwrap();
    assert!(exe.check_path().is_err());
}

#[cfg(target_os = "linux")]
#[test]
fn the_probe_path_runs_the_opened_file_after_a_swap() {
    let (dir, echo) = with_echo();
    let exe = Executable::open_trusted(&echo).unwrap();
    std::fs::copy("/bin/true", dir.path().join("true")).unwrap();
    std::fs::rename(dir.path().join("true"), &echo).unwrap();
    #[allow(clippy::disallowed_methods)] // Reason: the test runs the probe path directly.
    let out = std::process::Command::new(exe.program().unwrap()).arg("still echo").output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "still echo\n");
}

#[test]
fn the_running_binary_opens() {
    let exe = Executable::running().unwrap();
    assert_eq!(exe.path(), std::env::current_exe().unwrap());
}
