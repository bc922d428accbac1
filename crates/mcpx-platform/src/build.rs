//! The build id: which binary a process runs, so `status` can tell two builds of
//! the same version apart (after `mcpx upgrade`, say).

use std::os::unix::fs::MetadataExt;
use std::sync::OnceLock;

/// `<version>+<8 hex digits>`: the workspace's version, then a hash of the running
/// executable's identity (path, device, inode, size, modification time). Two copies of
/// one binary, or a rebuilt one, get different ids. `MCPX_BUILD_TAG` set at compile time
/// replaces the version part. The daemon reports it in `status` and `/v1/health`, the
/// supervisor in its record and hello. Computed once per process.
pub fn build_id() -> &'static str {
    static ID: OnceLock<String> = OnceLock::new();
    ID.get_or_init(|| {
        let base = option_env!("MCPX_BUILD_TAG").unwrap_or(env!("CARGO_PKG_VERSION"));
        let identity = std::env::current_exe()
            .and_then(|p| {
                let m = std::fs::metadata(&p)?;
                Ok(format!(
                    "{}:{}:{}:{}:{}",
                    p.display(),
                    m.dev(),
                    m.ino(),
                    m.size(),
                    m.mtime_nsec() + m.mtime() * 1_000_000_000
                ))
            })
            .unwrap_or_default();
        // FNV-1a: a stable, dependency-free 32-bit hash is plenty to tell builds apart.
        let mut h: u32 = 0x811c_9dc5;
        for b in identity.bytes() {
            h ^= u32::from(b);
            h = h.wrapping_mul(0x0100_0193);
        }
        format!("{base}+{h:08x}")
    })
}
