//! Giving freed heap memory back to the kernel (glibc's `malloc_trim(3)`).

/// See [`crate::release_free_heap`].
#[cfg(target_env = "gnu")]
pub(crate) fn release_free_heap() {
    // Safety: `malloc_trim` only walks the allocator's own free lists under its lock; it
    // takes no pointer and is safe to call at any time from any thread.
    unsafe {
        nix::libc::malloc_trim(0);
    }
}

/// See [`crate::release_free_heap`]: other C libraries have no such call.
#[cfg(not(target_env = "gnu"))]
pub(crate) fn release_free_heap() {}
