//! [`Chunks`]: the column chunks of one Parquet row group, fetched in one
//! request and read back as if they were the file, so that the page reader
//! and arrow's record batch reader work on bytes already in memory.
//!
//! ```text
//! file:    [ k chunk ][ other columns ... ][ v chunk ]
//! Chunks:  (offset of k, k's bytes), (offset of v, v's bytes)
//! reads:   any range inside one fetched chunk; anything else is an error
//! ```

use bytes::Bytes;
use datafusion::parquet::file::metadata::ColumnChunkMetaData;
use datafusion::parquet::file::reader::{ChunkReader, Length};
use std::ops::Range;

/// The file byte range of a column chunk.
pub(super) fn chunk_range(c: &ColumnChunkMetaData) -> Range<u64> {
    let (start, len) = c.byte_range();
    start..start + len
}

/// The fetched column chunks of one row group, read as a file.
#[derive(Clone)]
pub(super) struct Chunks {
    /// The file's size.
    pub(super) size: u64,
    /// (file offset, bytes) of each chunk.
    pub(super) parts: Vec<(u64, Bytes)>,
}

impl Chunks {
    /// The fetched bytes from file offset `start` to the end of its chunk.
    fn tail(&self, start: u64) -> datafusion::parquet::errors::Result<Bytes> {
        self.parts
            .iter()
            .find(|(at, b)| *at <= start && start < at + b.len() as u64)
            .map(|(at, b)| b.slice((start - at) as usize..))
            .ok_or_else(|| {
                datafusion::parquet::errors::ParquetError::General(format!(
                    "offset {start} was not fetched"
                ))
            })
    }
}

impl Length for Chunks {
    fn len(&self) -> u64 {
        self.size
    }
}

impl ChunkReader for Chunks {
    type T = bytes::buf::Reader<Bytes>;

    fn get_read(&self, start: u64) -> datafusion::parquet::errors::Result<Self::T> {
        use bytes::Buf;
        Ok(self.tail(start)?.reader())
    }

    fn get_bytes(
        &self,
        start: u64,
        length: usize,
    ) -> datafusion::parquet::errors::Result<Bytes> {
        if length == 0 {
            return Ok(Bytes::new());
        }
        let tail = self.tail(start)?;
        if length > tail.len() {
            return Err(datafusion::parquet::errors::ParquetError::General(format!(
                "bytes {start}..{} were not fetched",
                start + length as u64
            )));
        }
        Ok(tail.slice(..length))
    }
}
