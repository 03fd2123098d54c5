//! [`KeyChunk`]: one Parquet column chunk of a group key (INT32, INT64,
//! DOUBLE or a BYTE_ARRAY string), read as group ids straight from its
//! dictionary codes.
//!
//! Each dictionary entry is interned once, the first time a row refers to
//! it (or all at once, for a column of a multi-column key,
//! [`KeyChunk::intern_dictionary`]); after that a row costs one code decode
//! and one table read. A
//! count-only query does not even do that: it histograms the codes (an RLE
//! run adds its length at once) and adds the histogram to the groups.
//! Pages that fell back to PLAIN are decoded and interned like any batch.

use super::accumulate::count_ids;
use super::group_keys::GroupKeys;
use crate::kernels::rle::HybridDecoder;
use crate::parquet_read::{FlatPage, flat_page};
use bytes::Bytes;
use datafusion::arrow::array::{
    ArrayRef, Float64Array, Int64Array, StringViewBuilder, new_null_array,
};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::{DataFusionError, Result};
use datafusion::parquet::basic::Encoding;
use datafusion::parquet::column::page::PageReader;
use std::sync::Arc;

/// Group of a dictionary entry no row has used yet.
const UNMAPPED: u32 = u32::MAX;
/// Widest codes looked up through a padded table (4 MiB of `u32`).
const MAX_PADDED_WIDTH: u32 = 20;

fn corrupt(what: impl std::fmt::Display) -> DataFusionError {
    DataFusionError::External(format!("corrupt Parquet key column: {what}").into())
}

/// Where the current data page's values stand.
enum Values {
    /// Dictionary codes.
    Codes(HybridDecoder<Bytes>),
    /// PLAIN values from byte `.1` on.
    Plain(Bytes, usize),
}

/// Physical type of a key column chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Physical {
    Int32,
    Int64,
    /// DOUBLE, interned as `Float64` (grouped by bits, as DataFusion's
    /// table groups floats).
    Double,
    /// UTF-8 strings (BYTE_ARRAY), interned as views.
    Utf8,
}

impl Physical {
    /// Arrow type of the values [`KeyChunk`] interns for this column.
    fn interned_type(self) -> DataType {
        match self {
            Physical::Int32 | Physical::Int64 => DataType::Int64,
            Physical::Double => DataType::Float64,
            Physical::Utf8 => DataType::Utf8View,
        }
    }
}

/// PLAIN-encoded values of a page or a dictionary, in order.
enum Plain {
    Ints(Vec<i64>),
    Floats(Vec<f64>),
    /// Strings as `(start, len)` into `data` (UTF-8 checked when they are
    /// interned).
    Strings {
        data: Bytes,
        spans: Vec<(usize, usize)>,
    },
}

impl Default for Plain {
    fn default() -> Self {
        Plain::Ints(vec![])
    }
}

impl Plain {
    fn len(&self) -> usize {
        match self {
            Plain::Ints(v) => v.len(),
            Plain::Floats(v) => v.len(),
            Plain::Strings { spans, .. } => spans.len(),
        }
    }

    /// The values `entries` (indices into `self`) as an array: `Int64`,
    /// `Float64` or `Utf8View`. Invalid UTF-8 is a corrupt file.
    fn array(&self, entries: impl Iterator<Item = usize>) -> Result<ArrayRef> {
        Ok(match self {
            Plain::Ints(v) => {
                Arc::new(Int64Array::from_iter_values(entries.map(|e| v[e])))
            }
            Plain::Floats(v) => {
                Arc::new(Float64Array::from_iter_values(entries.map(|e| v[e])))
            }
            Plain::Strings { data, spans } => {
                let mut b = StringViewBuilder::new();
                for e in entries {
                    let (start, len) = spans[e];
                    b.append_value(
                        std::str::from_utf8(&data[start..start + len])
                            .map_err(|_| corrupt("string key is not UTF-8"))?,
                    );
                }
                Arc::new(b.finish())
            }
        })
    }

    /// All values, as [`Self::array`].
    fn all(&self) -> Result<ArrayRef> {
        self.array(0..self.len())
    }
}

/// `n` PLAIN values of type `kind` from `bytes[*pos..]` (`pos` moved past
/// them): little-endian INT32/INT64/DOUBLE, or BYTE_ARRAY (a 4-byte length,
/// then the bytes).
fn plain(kind: Physical, bytes: &Bytes, pos: &mut usize, n: usize) -> Result<Plain> {
    let rest = bytes.get(*pos..).unwrap_or_default();
    let past = || corrupt("PLAIN values past the end of the page");
    Ok(match kind {
        Physical::Int32 | Physical::Int64 => {
            let w = if kind == Physical::Int32 { 4 } else { 8 };
            let b = rest.get(..n * w).ok_or_else(past)?;
            *pos += n * w;
            Plain::Ints(if w == 4 {
                b.chunks_exact(4)
                    .map(|b| i32::from_le_bytes(b.try_into().expect("4 bytes")) as i64)
                    .collect()
            } else {
                b.chunks_exact(8)
                    .map(|b| i64::from_le_bytes(b.try_into().expect("8 bytes")))
                    .collect()
            })
        }
        Physical::Double => {
            let b = rest.get(..n * 8).ok_or_else(past)?;
            *pos += n * 8;
            Plain::Floats(
                b.chunks_exact(8)
                    .map(|b| f64::from_le_bytes(b.try_into().expect("8 bytes")))
                    .collect(),
            )
        }
        Physical::Utf8 => {
            // (Each value takes 4 bytes at least: a corrupt count cannot
            // reserve more than the page could hold.)
            let mut spans = Vec::with_capacity(n.min(rest.len() / 4));
            let mut at = *pos;
            for _ in 0..n {
                let len = bytes.get(at..at + 4).ok_or_else(past)?;
                let len = u32::from_le_bytes(len.try_into().expect("4 bytes")) as usize;
                if bytes.len() - (at + 4) < len {
                    return Err(past());
                }
                spans.push((at + 4, len));
                at += 4 + len;
            }
            *pos = at;
            Plain::Strings {
                data: bytes.clone(),
                spans,
            }
        }
    })
}

/// The data page being read.
struct PageState {
    rows_left: usize,
    /// Definition levels (0: NULL) when the column is nullable.
    levels: Option<HybridDecoder<Bytes>>,
    values: Values,
}

/// One column chunk of a key.
pub(super) struct KeyChunk {
    pages: Box<dyn PageReader>,
    kind: Physical,
    nullable: bool,
    /// Dictionary values and the group of each ([`UNMAPPED`] until used).
    dict: Plain,
    groups: Vec<u32>,
    /// Rows per dictionary entry, in count-only reading.
    hist: Vec<u64>,
    /// `groups` padded with [`UNMAPPED`] to every code of the page's bit
    /// width, so that decoding can look codes up unchecked
    /// ([`Self::mapped`]); rebuilt when stale.
    padded: Vec<u32>,
    padded_stale: bool,
    /// The last batch brought entries new to the chunk.
    expect_new: bool,
    page: Option<PageState>,
    levels: Vec<u32>,
    codes: Vec<u32>,
    scratch: Vec<u32>,
    /// Groups of the non-NULL rows of a batch with NULLs.
    vals: Vec<u32>,
    /// The NULL key's group, once met.
    null: Option<u32>,
}

impl KeyChunk {
    /// A reader over `pages` of a flat column of type `kind`, nullable
    /// when its max definition level is 1.
    pub(super) fn new(
        pages: Box<dyn PageReader>,
        kind: Physical,
        nullable: bool,
    ) -> Self {
        Self {
            pages,
            kind,
            nullable,
            dict: Plain::default(),
            groups: vec![],
            hist: vec![],
            padded: vec![],
            padded_stale: true,
            expect_new: false,
            page: None,
            levels: vec![],
            codes: vec![],
            scratch: vec![],
            vals: vec![],
            null: None,
        }
    }

    /// Moves to the next data page, taking in a dictionary page on the way.
    /// `false` when the chunk has no more pages.
    fn next_page(&mut self, keys: &mut GroupKeys, counts: &mut Vec<u64>) -> Result<bool> {
        loop {
            let page = self
                .pages
                .get_next_page()
                .map_err(|e| DataFusionError::External(Box::new(e)))?;
            let Some(page) = page else { return Ok(false) };
            let (rows, encoding, levels, values) = match flat_page(page, self.nullable)? {
                FlatPage::Dictionary { values, len } => {
                    // Rows counted against the old dictionary go to its groups.
                    self.flush_hist(keys, counts)?;
                    self.dict = plain(self.kind, &values, &mut 0, len)?;
                    self.groups = vec![UNMAPPED; self.dict.len()];
                    self.padded_stale = true;
                    continue;
                }
                FlatPage::Data(p) => (p.rows, p.encoding, p.levels, p.values),
            };
            let values = match encoding {
                Encoding::PLAIN_DICTIONARY | Encoding::RLE_DICTIONARY => {
                    // (Without a dictionary page every code is out of range.)
                    let width = *values.first().unwrap_or(&0);
                    Values::Codes(HybridDecoder::new(
                        values.slice(1.min(values.len())..),
                        width,
                    )?)
                }
                Encoding::PLAIN => Values::Plain(values, 0),
                other => return Err(corrupt(format!("values encoded as {other}"))),
            };
            let levels = levels.map(|l| HybridDecoder::new(l, 1)).transpose()?;
            self.page = Some(PageState {
                rows_left: rows,
                levels,
                values,
            });
            return Ok(true);
        }
    }

    /// Entries in the chunk's dictionary (read with the first data page);
    /// the groups the chunk can add at most, when all its pages hold codes.
    pub(super) fn dictionary_len(
        &mut self,
        keys: &mut GroupKeys,
        counts: &mut Vec<u64>,
    ) -> Result<usize> {
        self.page(keys, counts)?;
        Ok(self.dict.len())
    }

    /// Interns every entry of the chunk's dictionary (read with the first
    /// data page), used by a row or not: a multi-column key then knows its
    /// columns' codes before it reads a row. Returns the entries.
    pub(super) fn intern_dictionary(
        &mut self,
        keys: &mut GroupKeys,
        counts: &mut Vec<u64>,
    ) -> Result<usize> {
        self.page(keys, counts)?;
        let missing: Vec<u32> = (0..self.groups.len() as u32)
            .filter(|&c| self.groups[c as usize] == UNMAPPED)
            .collect();
        if !missing.is_empty() {
            self.intern(&missing, keys, counts)?;
        }
        Ok(self.dict.len())
    }

    /// The current page, moving on when it is used up; an error when the
    /// chunk ends first (the footer promised more rows).
    fn page(&mut self, keys: &mut GroupKeys, counts: &mut Vec<u64>) -> Result<()> {
        while self.page.as_ref().is_none_or(|p| p.rows_left == 0) {
            if !self.next_page(keys, counts)? {
                return Err(corrupt("fewer values than the row group has rows"));
            }
        }
        Ok(())
    }

    /// Appends the groups of the next `valid` codes of `d` to `out`, the
    /// codes looked up as they are decoded in the groups padded to every
    /// code the bit width allows. `false` (with `d` and `out` as they were)
    /// when a code is new to this chunk or past the dictionary: the caller
    /// then takes the slow way, which interns or reports it.
    fn mapped(
        &mut self,
        d: &mut HybridDecoder<Bytes>,
        valid: usize,
        out: &mut Vec<u32>,
    ) -> Result<bool> {
        if d.width() > MAX_PADDED_WIDTH {
            return Ok(false);
        }
        let size = (1usize << d.width()).max(self.groups.len());
        if self.padded.len() != size || self.padded_stale {
            self.padded.clear();
            self.padded.extend_from_slice(&self.groups);
            self.padded.resize(size, UNMAPPED);
            self.padded_stale = false;
        }
        let (again, start) = (d.clone(), out.len());
        out.resize(start + valid, 0);
        let padded = &self.padded;
        let read = d.read_map(&mut out[start..], |c| padded[c as usize])?;
        if read == valid && !out[start..].contains(&UNMAPPED) {
            return Ok(true);
        }
        *d = again;
        out.truncate(start);
        Ok(false)
    }

    /// Appends the groups of the dictionary entries in `self.codes` to
    /// `out`, interning the entries no row used before; `true` when there
    /// were such entries.
    fn map_codes(
        &mut self,
        keys: &mut GroupKeys,
        counts: &mut Vec<u64>,
        out: &mut Vec<u32>,
    ) -> Result<bool> {
        let start = out.len();
        let mut fresh = false;
        for &c in &self.codes {
            let g = *self
                .groups
                .get(c as usize)
                .ok_or_else(|| corrupt("dictionary index out of range"))?;
            fresh |= g == UNMAPPED;
            out.push(g);
        }
        if fresh {
            let mut missing = vec![];
            for &c in &self.codes {
                if self.groups[c as usize] == UNMAPPED {
                    self.groups[c as usize] = UNMAPPED - 1;
                    missing.push(c);
                }
            }
            self.intern(&missing, keys, counts)?;
            for (o, &c) in out[start..].iter_mut().zip(&self.codes) {
                *o = self.groups[c as usize];
            }
        }
        Ok(fresh)
    }

    /// Interns dictionary entries `entries`.
    fn intern(
        &mut self,
        entries: &[u32],
        keys: &mut GroupKeys,
        counts: &mut Vec<u64>,
    ) -> Result<()> {
        let values = self.dict.array(entries.iter().map(|&c| c as usize))?;
        keys.assign(&[values], &mut self.scratch, None, 0)?;
        for (&c, &g) in entries.iter().zip(&self.scratch) {
            self.groups[c as usize] = g;
        }
        self.padded_stale = true;
        counts.resize(keys.len(), 0);
        Ok(())
    }

    /// Interns PLAIN values; their groups go to `out`.
    fn intern_plain(
        values: Plain,
        keys: &mut GroupKeys,
        counts: &mut Vec<u64>,
        out: &mut Vec<u32>,
    ) -> Result<()> {
        let mut ids = vec![];
        keys.assign(&[values.all()?], &mut ids, None, 0)?;
        counts.resize(keys.len(), 0);
        out.extend(ids);
        Ok(())
    }

    /// The NULL key's group, interned the first time the chunk meets it.
    fn null_group(&mut self, keys: &mut GroupKeys, counts: &mut Vec<u64>) -> Result<u32> {
        if let Some(g) = self.null {
            return Ok(g);
        }
        let t = self.kind.interned_type();
        keys.assign(&[new_null_array(&t, 1)], &mut self.scratch, None, 0)?;
        counts.resize(keys.len(), 0);
        self.null = Some(self.scratch[0]);
        Ok(self.scratch[0])
    }

    /// The group ids of the next `n` rows into `ids` (replaced), each row
    /// counted in `counts`.
    pub(super) fn ids(
        &mut self,
        n: usize,
        keys: &mut GroupKeys,
        counts: &mut Vec<u64>,
        ids: &mut Vec<u32>,
    ) -> Result<()> {
        self.codes(n, keys, counts, ids)?;
        count_ids(ids, counts);
        Ok(())
    }

    /// [`Self::ids`] without counting the rows (`counts` is only grown to
    /// the groups): the codes of one column of a multi-column key.
    pub(super) fn codes(
        &mut self,
        n: usize,
        keys: &mut GroupKeys,
        counts: &mut Vec<u64>,
        ids: &mut Vec<u32>,
    ) -> Result<()> {
        ids.clear();
        let mut vals = std::mem::take(&mut self.vals);
        while ids.len() < n {
            self.page(keys, counts)?;
            let mut page = self.page.take().expect("a page");
            let k = page.rows_left.min(n - ids.len());
            page.rows_left -= k;
            let valid = match &mut page.levels {
                Some(levels) => {
                    self.levels.resize(k, 0);
                    if levels.read(&mut self.levels)? < k {
                        return Err(corrupt("fewer definition levels than values"));
                    }
                    self.levels.iter().filter(|&&l| l != 0).count()
                }
                None => k,
            };
            vals.clear();
            // Without NULLs the values' groups are the rows' groups.
            let out = if valid == k { &mut *ids } else { &mut vals };
            match &mut page.values {
                Values::Codes(d) => {
                    // While batches keep bringing new entries (a large
                    // dictionary early in its chunk) the fast try would be
                    // wasted: it is skipped until a batch brings none.
                    if !(self.expect_new && d.width() <= MAX_PADDED_WIDTH)
                        && self.mapped(d, valid, out)?
                    {
                        self.expect_new = false;
                    } else {
                        self.codes.resize(valid, 0);
                        if d.read(&mut self.codes)? < valid {
                            return Err(corrupt("fewer dictionary codes than values"));
                        }
                        self.expect_new = self.map_codes(keys, counts, out)?;
                    }
                }
                Values::Plain(bytes, pos) => {
                    Self::intern_plain(
                        plain(self.kind, bytes, pos, valid)?,
                        keys,
                        counts,
                        out,
                    )?;
                }
            }
            self.page = Some(page);
            if valid != k {
                let null = self.null_group(keys, counts)?;
                let mut it = vals.iter();
                ids.extend(self.levels.iter().map(|&l| {
                    if l != 0 {
                        *it.next().expect("one value per level")
                    } else {
                        null
                    }
                }));
            }
        }
        self.vals = vals;
        Ok(())
    }

    /// Counts `rows` rows (the whole chunk) into `counts` without group ids
    /// per row: codes go into a histogram over the dictionary.
    pub(super) fn count(
        &mut self,
        rows: usize,
        keys: &mut GroupKeys,
        counts: &mut Vec<u64>,
    ) -> Result<()> {
        let mut left = rows;
        while left > 0 {
            self.page(keys, counts)?;
            if self.hist.len() != self.dict.len() {
                self.hist = vec![0; self.dict.len()];
            }
            let mut page = self.page.take().expect("a page");
            let k = page.rows_left.min(left);
            page.rows_left -= k;
            left -= k;
            let valid = match &mut page.levels {
                Some(levels) => {
                    let mut valid = [0u64; 2];
                    if levels.count(k, &mut valid)? < k {
                        return Err(corrupt("fewer definition levels than values"));
                    }
                    if valid[0] > 0 {
                        let null = self.null_group(keys, counts)?;
                        counts[null as usize] += valid[0];
                    }
                    valid[1] as usize
                }
                None => k,
            };
            match &mut page.values {
                Values::Codes(d) => {
                    if d.count(valid, &mut self.hist)? < valid {
                        return Err(corrupt("fewer dictionary codes than values"));
                    }
                }
                Values::Plain(bytes, pos) => {
                    let mut ids = vec![];
                    Self::intern_plain(
                        plain(self.kind, bytes, pos, valid)?,
                        keys,
                        counts,
                        &mut ids,
                    )?;
                    count_ids(&ids, counts);
                }
            }
            self.page = Some(page);
        }
        self.flush_hist(keys, counts)
    }

    /// Adds the histogram to the groups of its entries and clears it.
    fn flush_hist(&mut self, keys: &mut GroupKeys, counts: &mut Vec<u64>) -> Result<()> {
        if self.hist.iter().all(|&h| h == 0) {
            return Ok(());
        }
        let missing: Vec<u32> = (0..self.hist.len() as u32)
            .filter(|&c| self.hist[c as usize] > 0 && self.groups[c as usize] == UNMAPPED)
            .collect();
        if !missing.is_empty() {
            self.intern(&missing, keys, counts)?;
        }
        for (c, h) in self.hist.iter_mut().enumerate() {
            if *h > 0 {
                counts[self.groups[c] as usize] += *h;
                *h = 0;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::parquet::column::page::{Page, PageMetadata};

    /// Pages handed out from memory.
    struct Pages(std::vec::IntoIter<Page>);

    impl Iterator for Pages {
        type Item = datafusion::parquet::errors::Result<Page>;
        fn next(&mut self) -> Option<Self::Item> {
            self.0.next().map(Ok)
        }
    }

    impl PageReader for Pages {
        fn get_next_page(&mut self) -> datafusion::parquet::errors::Result<Option<Page>> {
            Ok(self.0.next())
        }
        fn peek_next_page(
            &mut self,
        ) -> datafusion::parquet::errors::Result<Option<PageMetadata>> {
            Ok(None)
        }
        fn skip_next_page(&mut self) -> datafusion::parquet::errors::Result<()> {
            Ok(())
        }
    }

    /// A V1 data page of a nullable column: RLE definition levels with their
    /// length prefix, then `values`.
    fn data_page(levels: &[u8], values: &[u8], rows: u32, encoding: Encoding) -> Page {
        let mut buf = (levels.len() as u32).to_le_bytes().to_vec();
        buf.extend_from_slice(levels);
        buf.extend_from_slice(values);
        Page::DataPage {
            buf: Bytes::from(buf),
            num_values: rows,
            encoding,
            def_level_encoding: Encoding::RLE,
            rep_level_encoding: Encoding::RLE,
            statistics: None,
        }
    }

    /// Two pages of one nullable INT32 chunk: dictionary codes, then a page
    /// that fell back to PLAIN (an entry's value repeated, a new value, a
    /// NULL). Rows: 7, NULL, 9, 7 | 9, 11, NULL.
    fn pages() -> Box<dyn PageReader> {
        let dict: Vec<u8> = [7i32, 9].iter().flat_map(|v| v.to_le_bytes()).collect();
        // Levels 1,0,1,1 (one bit-packed group); codes 0,1,0 at width 1.
        let page1 = data_page(&[3, 0b1101], &[1, 3, 0b010], 4, Encoding::RLE_DICTIONARY);
        // Levels 1,1,0; PLAIN 9, 11.
        let plain: Vec<u8> = [9i32, 11].iter().flat_map(|v| v.to_le_bytes()).collect();
        let page2 = data_page(&[3, 0b011], &plain, 3, Encoding::PLAIN);
        let dict = Page::DictionaryPage {
            buf: Bytes::from(dict),
            num_values: 2,
            encoding: Encoding::PLAIN,
            is_sorted: false,
        };
        Box::new(Pages(vec![dict, page1, page2].into_iter()))
    }

    /// Keys in group order with their counts, from a table.
    fn groups(keys: &mut GroupKeys, counts: &[u64]) -> Vec<(Option<i64>, u64)> {
        let k = keys.emit().unwrap();
        let k = datafusion::arrow::compute::cast(&k[0], &DataType::Int64).unwrap();
        let k = datafusion::arrow::array::AsArray::as_primitive::<
            datafusion::arrow::datatypes::Int64Type,
        >(&k);
        k.iter().zip(counts.iter().copied()).collect()
    }

    #[test]
    fn codes_plain_pages_and_nulls_give_the_same_groups_both_ways() {
        // Groups in the order rows first bring them (a batch's values before
        // its NULL).
        let want = vec![(Some(7), 2), (Some(9), 2), (None, 2), (Some(11), 1)];
        // Row by row, in batches that cross the page boundary.
        let (mut keys, mut counts, mut ids) = (
            GroupKeys::try_new(&[DataType::Int32]).unwrap(),
            vec![],
            vec![],
        );
        let mut chunk = KeyChunk::new(pages(), Physical::Int32, true);
        let mut all = vec![];
        for n in [3, 3, 1] {
            chunk.ids(n, &mut keys, &mut counts, &mut ids).unwrap();
            all.extend_from_slice(&ids);
        }
        assert_eq!(all, vec![0, 2, 1, 0, 1, 3, 2]);
        assert_eq!(groups(&mut keys, &counts), want);
        // Count-only: the same groups and counts.
        let (mut keys, mut counts) =
            (GroupKeys::try_new(&[DataType::Int32]).unwrap(), vec![]);
        KeyChunk::new(pages(), Physical::Int32, true)
            .count(7, &mut keys, &mut counts)
            .unwrap();
        let mut got = groups(&mut keys, &counts);
        got.sort();
        let mut want = want;
        want.sort();
        assert_eq!(got, want);
        // A chunk shorter than its row group is an error, not a panic.
        let (mut keys, mut counts) =
            (GroupKeys::try_new(&[DataType::Int32]).unwrap(), vec![]);
        let err = KeyChunk::new(pages(), Physical::Int32, true)
            .count(8, &mut keys, &mut counts)
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("fewer values than the row group has rows"),
            "{err}"
        );
    }

    /// BYTE_ARRAY entries and values: 4-byte length, then the bytes.
    fn byte_array(values: &[&[u8]]) -> Vec<u8> {
        values
            .iter()
            .flat_map(|v| {
                (v.len() as u32)
                    .to_le_bytes()
                    .into_iter()
                    .chain(v.iter().copied())
            })
            .collect()
    }

    #[test]
    fn string_chunks_group_codes_plain_pages_and_nulls_and_reject_bad_utf8() {
        let string_pages = |dict: &[&[u8]]| -> Box<dyn PageReader> {
            let dict = Page::DictionaryPage {
                buf: Bytes::from(byte_array(dict)),
                num_values: 2,
                encoding: Encoding::PLAIN,
                is_sorted: false,
            };
            // Levels 1,0,1,1; codes 1,0,1 at width 1.
            let page1 =
                data_page(&[3, 0b1101], &[1, 3, 0b101], 4, Encoding::RLE_DICTIONARY);
            // Levels 1,1,0; PLAIN "x", "a string past twelve bytes".
            let page2 = data_page(
                &[3, 0b011],
                &byte_array(&[b"x", b"a string past twelve bytes"]),
                3,
                Encoding::PLAIN,
            );
            Box::new(Pages(vec![dict, page1, page2].into_iter()))
        };
        let (mut keys, mut counts, mut ids) = (
            GroupKeys::column(&DataType::Utf8View).unwrap(),
            vec![],
            vec![],
        );
        let mut chunk = KeyChunk::new(string_pages(&[b"x", b"yy"]), Physical::Utf8, true);
        let mut all = vec![];
        for n in [2, 5] {
            chunk.ids(n, &mut keys, &mut counts, &mut ids).unwrap();
            all.extend_from_slice(&ids);
        }
        // yy, NULL, x, yy | x, long, NULL
        assert_eq!(all, vec![0, 1, 2, 0, 2, 3, 1]);
        assert_eq!(counts, vec![2, 2, 2, 1]);
        let emitted = keys.emit().unwrap();
        let s = datafusion::arrow::array::AsArray::as_string_view(&emitted[0]);
        let got: Vec<Option<&str>> = s.iter().collect();
        assert_eq!(
            got,
            vec![
                Some("yy"),
                None,
                Some("x"),
                Some("a string past twelve bytes")
            ]
        );
        // An entry that is not UTF-8: an error when a row uses it.
        let (mut keys, mut counts) =
            (GroupKeys::column(&DataType::Utf8View).unwrap(), vec![]);
        let mut chunk =
            KeyChunk::new(string_pages(&[b"x", &[0xff, 0xfe]]), Physical::Utf8, true);
        let err = chunk.ids(4, &mut keys, &mut counts, &mut ids).unwrap_err();
        assert!(err.to_string().contains("not UTF-8"), "{err}");
        // A dictionary page claiming a billion entries in a few bytes.
        let err = plain(
            Physical::Utf8,
            &Bytes::from(byte_array(&[b"x"])),
            &mut 0,
            1 << 30,
        )
        .err()
        .unwrap();
        assert!(err.to_string().contains("past the end"), "{err}");
    }
}
