//! Panics in dependencies come back as errors: a script or an interactive
//! session reports the statement that hit one and loses nothing else. (The
//! Parquet reader of parquet 59 panics on some corrupt footers, for one.)

use datafusion::error::{DataFusionError, Result};
use futures::FutureExt;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Mutex;

/// Where the last panic happened and what it said, kept by the hook that
/// [`install_hook`] sets instead of printing it.
static LAST: Mutex<Option<String>> = Mutex::new(None);

/// Records each panic for the error [`contained`] returns instead of
/// printing it; with RUST_BACKTRACE set, the default hook still prints it
/// (and the backtrace) for whoever is debugging.
pub fn install_hook() {
    let default = std::panic::take_hook();
    let debugging = std::env::var_os("RUST_BACKTRACE").is_some_and(|v| v != "0");
    std::panic::set_hook(Box::new(move |info| {
        if debugging {
            default(info);
        }
        let message = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "panic".into());
        let at = info
            .location()
            .map(|l| format!(" (at {}:{})", l.file(), l.line()))
            .unwrap_or_default();
        *LAST.lock().unwrap_or_else(|e| e.into_inner()) = Some(format!("{message}{at}"));
    }));
}

/// The error for a panic caught by [`contained`] or at the top level.
pub fn panic_error() -> DataFusionError {
    let last = LAST.lock().unwrap_or_else(|e| e.into_inner()).take();
    DataFusionError::Execution(format!(
        "internal error: {}",
        last.as_deref().unwrap_or("panic")
    ))
}

/// Runs `work`, turning a panic inside it (or inside a task it waits on)
/// into an error.
pub async fn contained<T>(work: impl Future<Output = Result<T>>) -> Result<T> {
    AssertUnwindSafe(work)
        .catch_unwind()
        .await
        .unwrap_or_else(|_| Err(panic_error()))
}
