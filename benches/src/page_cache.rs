//! Cold runs without root: dropping a data set's files from the operating
//! system's page cache with `posix_fadvise(POSIX_FADV_DONTNEED)`, so that
//! the next query reads them from the disk again.
//!
//! `echo 3 > /proc/sys/vm/drop_caches` needs root and drops everything;
//! the advice needs only a file descriptor and drops only the files named.
//! It drops the clean pages it is given (data files are not written while
//! a benchmark runs), not what an engine keeps in its own memory (Parquet
//! footers, statistics), and not what a virtual machine's host caches.
//!
//! ```no_run
//! let bytes = tsjoin_bench::page_cache::evict(std::path::Path::new("benches/data/tsbs-10000000-1000"))?;
//! println!("{bytes} bytes dropped from the page cache");
//! # Ok::<(), std::io::Error>(())
//! ```

use std::fs::File;
use std::io;
use std::path::Path;

/// Advises the kernel to drop every regular file under `path` (a file or a
/// directory, walked recursively) from the page cache; returns the bytes
/// advised. An error where a file cannot be opened or the platform has no
/// such advice (only Linux and Android are wired).
pub fn evict(path: &Path) -> io::Result<u64> {
    let meta = std::fs::metadata(path)?;
    if meta.is_file() {
        drop_file(&File::open(path)?)?;
        return Ok(meta.len());
    }
    let mut bytes = 0;
    for entry in std::fs::read_dir(path)? {
        bytes += evict(&entry?.path())?;
    }
    Ok(bytes)
}

#[cfg(any(target_os = "linux", target_os = "android"))]
fn drop_file(file: &File) -> io::Result<()> {
    // Offset 0 and length 0: the whole file, whatever its size.
    rustix::fs::fadvise(file, 0, None, rustix::fs::Advice::DontNeed)?;
    Ok(())
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn drop_file(_: &File) -> io::Result<()> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "dropping files from the page cache is wired for Linux only",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evicts_every_file_under_a_directory() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("day")).unwrap();
        std::fs::write(dir.path().join("a.parquet"), vec![1u8; 10_000]).unwrap();
        std::fs::write(dir.path().join("day/b.parquet"), vec![2u8; 5_000]).unwrap();
        assert_eq!(evict(dir.path()).unwrap(), 15_000);
        // The files read back unchanged.
        assert_eq!(
            std::fs::read(dir.path().join("day/b.parquet")).unwrap(),
            vec![2u8; 5_000]
        );
        assert!(evict(&dir.path().join("missing")).is_err());
    }
}
