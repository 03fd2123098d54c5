//! The process's allocator and its settings, shared by `tsjoin-cli` and
//! `tsjoin-bench` (which includes this file), so that the benchmark's
//! figures are the CLI's.
//!
//! ```ignore
//! mod allocator;
//! fn main() {
//!     allocator::tune_allocator();
//! }
//! ```

// DataFusion allocates and frees large buffers all through a query: mimalloc
// (as in datafusion-cli), with an arena reserved up front and purging off,
// so that freed memory (large buffers included) is reused rather than
// returned to the OS and faulted in again as fresh zeroed pages: that was a
// quarter of the CPU time of a WINDOW JOIN over a few million rows, and
// twice the time of a one-shot query. The process holds its peak memory
// until it exits. See `no_transparent_huge_pages` for the other setting.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `mi_option_purge_delay` in mimalloc.h (not named by the Rust bindings).
const MI_OPTION_PURGE_DELAY: i32 = 15;

/// Turns transparent huge pages off for this process (Linux) unless the
/// environment sets `TSJOIN_THP=1`. mimalloc advises its memory for them
/// (`MADV_HUGEPAGE`, before `main` runs), so where the kernel's THP mode is
/// `madvise` every fresh 2 MiB page is zeroed whole at its first touch: a
/// 61-offset HORIZON JOIN spent a quarter of its CPU time in the kernel
/// zeroing pages (three queries in one process: 4.5 s with THP, 3.0 s
/// without).
fn no_transparent_huge_pages() {
    #[cfg(target_os = "linux")]
    if std::env::var_os("TSJOIN_THP").is_none_or(|v| v != "1") {
        // SAFETY: `prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0)` takes integers
        // only and sets a flag of this process; on failure THP stays as it
        // was.
        unsafe {
            libc::prctl(
                libc::PR_SET_THP_DISABLE,
                1 as libc::c_ulong,
                0 as libc::c_ulong,
                0 as libc::c_ulong,
                0 as libc::c_ulong,
            );
        }
    }
}

/// Applies the settings above; call first thing in `main`.
pub(crate) fn tune_allocator() {
    no_transparent_huge_pages();
    // SAFETY: plain option setters and a reservation of address space (not
    // of memory: pages are backed when touched); failure leaves the defaults.
    unsafe {
        libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, -1);
        libmimalloc_sys::mi_reserve_os_memory_ex(
            4 << 30,
            false,
            true,
            false,
            std::ptr::null_mut(),
        );
    }
}
