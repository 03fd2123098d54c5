//! Checks on input files before DataFusion reads them, and panic
//! containment at tsjoin's SQL entry point.
//!
//! The Parquet reader of parquet 59 panics (an arithmetic overflow in its
//! footer decoder) on a file whose footer gives a metadata length beyond the
//! file: [`check_parquet_files`] reports such files, and files too short to
//! be Parquet, by name before any reader sees them. tsjoin runs it on
//! `CREATE EXTERNAL TABLE … STORED AS PARQUET` over local paths; the CLI and
//! the Python module on every Parquet file they register. Library code
//! registers Parquet files with [`register_parquet`] (the check, then
//! DataFusion's `register_parquet` with panics contained).

use datafusion::common::{DataFusionError, Result};
use datafusion::prelude::{ParquetReadOptions, SessionContext};
use futures::FutureExt;
use std::future::Future;
use std::io::{Read, Seek, SeekFrom};
use std::panic::AssertUnwindSafe;
use std::path::Path;

/// Checks the footer of every Parquet file at `path` (a file, or a
/// directory's `*.parquet` files at any depth): a file too short to be
/// Parquet, or whose footer gives a metadata length beyond the file, is an
/// error naming it. Other damage is left to the reader, which reports it as
/// an error. A path that does not exist is not checked (DataFusion reports
/// it).
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("bad.parquet");
/// std::fs::write(&path, b"PAR1").unwrap();
/// let err = datafusion_tsjoin::files::check_parquet_files(&path).unwrap_err();
/// assert!(err.to_string().contains("corrupt Parquet file"));
/// ```
pub fn check_parquet_files(path: &Path) -> Result<()> {
    if !path.exists() {
        return Ok(());
    }
    check(path).map_err(|e| DataFusionError::Plan(e.to_string()))
}

fn check(path: &Path) -> std::io::Result<()> {
    use std::io::Error;
    if path.is_dir() {
        for entry in std::fs::read_dir(path)? {
            let child = entry?.path();
            if child.is_dir() || child.extension().is_some_and(|e| e == "parquet") {
                check(&child)?;
            }
        }
        return Ok(());
    }
    let mut file = std::fs::File::open(path)?;
    let len = file.metadata()?.len();
    let corrupt = |why: String| {
        Error::other(format!("corrupt Parquet file {}: {why}", path.display()))
    };
    if len < 12 {
        return Err(corrupt(format!(
            "{len} bytes, shorter than Parquet's header and footer"
        )));
    }
    let mut tail = [0u8; 8];
    file.seek(SeekFrom::End(-8))?;
    file.read_exact(&mut tail)?;
    let metadata = u64::from(u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]));
    if &tail[4..] == b"PAR1" && metadata + 12 > len {
        return Err(corrupt(format!(
            "the footer gives {metadata} bytes of metadata in a file of {len} bytes"
        )));
    }
    Ok(())
}

/// DataFusion's `SessionContext::register_parquet`, safe on damaged files:
/// a local path is checked first ([`check_parquet_files`]) and a panic while
/// the files are read for their schema comes back as an error, so a corrupt
/// or truncated file is an error naming it and the session goes on. The CLI
/// and the Python module register Parquet files this way.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use datafusion::prelude::{ParquetReadOptions, SessionContext};
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("cut.parquet");
/// std::fs::write(&path, b"PAR1").unwrap();
/// let ctx = SessionContext::new();
/// let path = path.to_str().unwrap();
/// let err = datafusion_tsjoin::files::register_parquet(
///     &ctx, "t", path, ParquetReadOptions::default(),
/// ).await.unwrap_err();
/// assert!(err.to_string().contains("corrupt Parquet file"));
/// # }
/// ```
pub async fn register_parquet(
    ctx: &SessionContext,
    name: &str,
    path: &str,
    options: ParquetReadOptions<'_>,
) -> Result<()> {
    if let Some(local) = local_path(path) {
        check_parquet_files(local)?;
    }
    contained(ctx.register_parquet(name, path, options)).await
}

/// The local path of a table location (`file://` URLs and plain paths;
/// `None` for other object stores).
pub(crate) fn local_path(location: &str) -> Option<&Path> {
    match location.split_once("://") {
        None => Some(Path::new(location)),
        Some(("file", rest)) => Some(Path::new(rest)),
        Some(_) => None,
    }
}

/// Runs `work`, turning a panic inside it (a bug, here or in a dependency)
/// into an error naming it, so that one bad statement does not bring the
/// caller's process or session down.
pub(crate) async fn contained<T>(work: impl Future<Output = Result<T>>) -> Result<T> {
    AssertUnwindSafe(work)
        .catch_unwind()
        .await
        .unwrap_or_else(|panic| {
            Err(DataFusionError::Execution(format!(
                "internal error: {} (please report this bug)",
                panic_text(panic.as_ref())
            )))
        })
}

/// A panic payload's message (`"panic"` when it is not text).
///
/// ```
/// let payload: Box<dyn std::any::Any + Send> = Box::new("boom");
/// assert_eq!(datafusion_tsjoin::files::panic_text(payload.as_ref()), "boom");
/// ```
pub fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panic".into())
}
