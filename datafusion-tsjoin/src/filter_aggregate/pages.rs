//! One column's comparisons evaluated page by page, straight from a
//! Parquet column chunk: a bit per row, no column array built.
//!
//! Parquet writers dictionary-encode a column while its distinct values
//! fit a page (telemetry's rounded readings, prices on a tick grid, codes,
//! enums). Arrow's reader turns each row's code back into its 8-byte value
//! and the filter compares the values; here the comparisons run once per
//! dictionary entry, and a row's bit is its code looked up in that table,
//! fused into the decoding of the codes ([`HybridDecoder::read_map`]).
//! Pages that fell back to PLAIN are compared by DataFusion's kernels
//! over the page's bytes. Either way the comparisons are DataFusion's own
//! expressions evaluated on arrays of the column's type, so NaN, -0.0 and
//! NULL compare exactly as in its filter.
//!
//! ```text
//! dictionary [12.0, 80.5, 77.0]  --velocity > 75-->  table [0, 1, 1]
//! codes      0 1 1 2 0 ...       --table[code]---->  bits  0 1 1 1 0 ...
//! ```
//!
//! Invariants: [`ColumnPredicate::append_chunk`] appends exactly the
//! chunk's rows or returns an error (corrupt data) or `false` (a value
//! encoding it does not read: the caller reads the chunk with arrow
//! instead); it never panics on malformed pages.

use super::row_bits::RowBits;
use crate::kernels::rle::{HybridDecoder, Run};
use crate::parquet_read::{FlatPage, flat_page};
use bytes::Bytes;
use datafusion::arrow::array::{
    Array, ArrayData, ArrayRef, BooleanArray, RecordBatch, make_array,
};
use datafusion::arrow::buffer::{BooleanBuffer, Buffer};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{DataFusionError, Result, internal_err};
use datafusion::parquet::basic::Encoding;
use datafusion::parquet::column::page::PageReader;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_plan::PhysicalExpr;
use std::sync::Arc;

/// Table entry of a code past the dictionary (a corrupt page).
const OUT_OF_RANGE: u32 = 2;

fn corrupt(what: impl std::fmt::Display) -> DataFusionError {
    DataFusionError::External(format!("corrupt Parquet page: {what}").into())
}

/// The comparisons of a WHERE on one column, over a one-column batch of
/// the column's (table) type.
///
/// ```text
/// velocity@11 > 75 AND velocity@11 < 90   (over the scan's schema)
///   => velocity@0 > 75, velocity@0 < 90   (over [velocity: Float64])
/// ```
#[derive(Debug, Clone)]
pub(crate) struct ColumnPredicate {
    name: String,
    data_type: DataType,
    schema: SchemaRef,
    exprs: Vec<Arc<dyn PhysicalExpr>>,
}

impl ColumnPredicate {
    /// `exprs` (each reading only column `name`, of `data_type`) moved onto
    /// a batch holding that column alone.
    pub(crate) fn try_new(
        name: &str,
        data_type: &DataType,
        exprs: &[Arc<dyn PhysicalExpr>],
    ) -> Result<Self> {
        let exprs = exprs
            .iter()
            .map(|e| {
                Arc::clone(e)
                    .transform(|node| {
                        Ok(match node.downcast_ref::<Column>() {
                            Some(c) if c.name() == name => {
                                Transformed::yes(Arc::new(Column::new(name, 0))
                                    as Arc<dyn PhysicalExpr>)
                            }
                            Some(c) => {
                                return internal_err!(
                                    "a comparison on {name} reads {}",
                                    c.name()
                                );
                            }
                            None => Transformed::no(node),
                        })
                    })
                    .map(|t| t.data)
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            name: name.to_string(),
            data_type: data_type.clone(),
            schema: Arc::new(Schema::new(vec![Field::new(
                name,
                data_type.clone(),
                true,
            )])),
            exprs,
        })
    }

    /// The column's name.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// The column's type in the table.
    pub(crate) fn data_type(&self) -> &DataType {
        &self.data_type
    }

    /// Values of `values` where every comparison is TRUE (NULL is not).
    pub(crate) fn eval(&self, values: &ArrayRef) -> Result<BooleanBuffer> {
        let n = values.len();
        let batch =
            RecordBatch::try_new(Arc::clone(&self.schema), vec![Arc::clone(values)])?;
        let mut mask: Option<BooleanBuffer> = None;
        for e in &self.exprs {
            let r = e.evaluate(&batch)?.into_array(n)?;
            let Some(r) = r.as_any().downcast_ref::<BooleanArray>() else {
                return internal_err!("a comparison gave {}", r.data_type());
            };
            let bits = match r.nulls() {
                Some(nulls) => r.values() & nulls.inner(),
                None => r.values().clone(),
            };
            mask = Some(match mask {
                Some(m) => &m & &bits,
                None => bits,
            });
        }
        Ok(mask.unwrap_or_else(|| BooleanBuffer::new_set(n)))
    }

    /// Appends one bit per row of a column chunk (`rows` rows, its pages in
    /// `pages`, fixed-width values of `width` bytes, nullable when its max
    /// definition level is 1) to `out`: whether every comparison holds.
    /// `false` (with `out` as it was) when a page's values are encoded
    /// other than PLAIN or with a dictionary.
    pub(crate) fn append_chunk(
        &self,
        pages: &mut dyn PageReader,
        width: usize,
        nullable: bool,
        rows: usize,
        out: &mut RowBits,
        scratch: &mut Scratch,
    ) -> Result<bool> {
        let start = out.len();
        // Per dictionary entry, 1 where the comparisons hold (empty until
        // the dictionary page; never empty after it: padded to at least 1).
        let mut table: Vec<u32> = vec![];
        while out.len() - start < rows {
            let page = pages
                .get_next_page()
                .map_err(|e| DataFusionError::External(Box::new(e)))?
                .ok_or_else(|| corrupt("fewer values than the row group has rows"))?;
            let (n, encoding, levels, values) = match flat_page(page, nullable)? {
                FlatPage::Dictionary { values, len } => {
                    let dict = plain_array(&values, len, width, &self.data_type)?;
                    let bits = self.eval(&dict)?;
                    // Padded to a power of two: every code of the width a
                    // writer gives this dictionary indexes the table.
                    table = bits.iter().map(u32::from).collect();
                    table.resize(len.max(1).next_power_of_two(), OUT_OF_RANGE);
                    continue;
                }
                FlatPage::Data(p) => (p.rows, p.encoding, p.levels, p.values),
            };
            if n > rows - (out.len() - start) {
                return Err(corrupt("more values than the row group has rows"));
            }
            // Definition levels: 1 for a value, 0 for NULL.
            scratch.validity.truncate(0);
            let valid = match levels {
                Some(l) => {
                    // At width 1 a bit-packed run is the validity bitmap.
                    let validity = &mut scratch.validity;
                    let read =
                        HybridDecoder::new(l, 1)?.visit_runs(n, |run| match run {
                            Run::Repeat { value, count } => {
                                validity.push_run(value != 0, count)
                            }
                            Run::Packed {
                                bytes,
                                first,
                                count,
                            } => validity.push_bitmap_at(bytes, first, count),
                        })?;
                    if read < n {
                        return Err(corrupt("fewer definition levels than values"));
                    }
                    validity.count()
                }
                None => n,
            };
            // Without NULLs the values' bits are the rows'.
            let bits = if valid == n {
                &mut *out
            } else {
                scratch.values.truncate(0);
                &mut scratch.values
            };
            match encoding {
                Encoding::PLAIN_DICTIONARY | Encoding::RLE_DICTIONARY => {
                    if table.is_empty() {
                        return Err(corrupt("dictionary codes without a dictionary"));
                    }
                    codes_to_bits(&values, &table, valid, &mut scratch.codes)?;
                    bits.push_flags(&scratch.codes[..valid]);
                }
                Encoding::PLAIN => {
                    let array = plain_array(&values, valid, width, &self.data_type)?;
                    let passing = self.eval(&array)?;
                    bits.push_bitmap(passing.sliced().as_slice(), valid);
                }
                _ => {
                    out.truncate(start);
                    return Ok(false);
                }
            }
            if valid != n {
                out.push_spread(&scratch.validity, &scratch.values);
            }
        }
        Ok(true)
    }
}

/// Reused buffers of [`ColumnPredicate::append_chunk`].
#[derive(Debug, Default)]
pub(crate) struct Scratch {
    /// A page's definition levels as bits.
    validity: RowBits,
    /// Table lookups of a page's codes (0 or 1 each).
    codes: Vec<u32>,
    /// A page's non-NULL values' bits, when it has NULLs.
    values: RowBits,
}

/// The bits (0 or 1) of the `valid` dictionary codes in `values` (a bit
/// width byte, then the RLE / bit-packed codes), looked up in `table`
/// ([`OUT_OF_RANGE`] past the dictionary), into `out[..valid]` (grown to
/// `valid` when shorter).
fn codes_to_bits(
    values: &Bytes,
    table: &[u32],
    valid: usize,
    out: &mut Vec<u32>,
) -> Result<()> {
    let width = *values.first().unwrap_or(&0);
    let mut d = HybridDecoder::new(values.slice(1.min(values.len())..), width)?;
    // (Grown, never shrunk: the decoder overwrites what it reads, so the
    // buffer is not zeroed page after page.)
    if out.len() < valid {
        out.resize(valid, 0);
    }
    let out = &mut out[..valid];
    let read = if d.width() < 32 && 1usize << d.width() <= table.len() {
        d.read_map(out, |c| table[c as usize])?
    } else {
        d.read_map(out, |c| {
            table.get(c as usize).copied().unwrap_or(OUT_OF_RANGE)
        })?
    };
    if read < valid {
        return Err(corrupt("fewer dictionary codes than values"));
    }
    if out.iter().fold(0, |a, &b| a | b) & OUT_OF_RANGE != 0 {
        return Err(corrupt("dictionary index out of range"));
    }
    Ok(())
}

/// `n` PLAIN fixed-width values (`width` bytes each, little-endian) at the
/// start of `bytes`, as an array of `data_type` (whose values are those
/// bytes: INT32/FLOAT/INT64/DOUBLE read as their Arrow types).
pub(crate) fn plain_array(
    bytes: &Bytes,
    n: usize,
    width: usize,
    data_type: &DataType,
) -> Result<ArrayRef> {
    let len = n
        .checked_mul(width)
        .filter(|&l| l <= bytes.len())
        .ok_or_else(|| corrupt("PLAIN values past the end of the page"))?;
    let values = bytes.slice(..len);
    // Zero-copy when the page's bytes happen to be aligned for the type.
    let buffer = if (values.as_ptr() as usize).is_multiple_of(width) {
        Buffer::from(values)
    } else {
        Buffer::from_slice_ref(&values[..])
    };
    let data = ArrayData::builder(data_type.clone())
        .len(n)
        .add_buffer(buffer)
        .build()?;
    Ok(make_array(data))
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Float64Array, Int32Array};
    use datafusion::common::ScalarValue;
    use datafusion::logical_expr::Operator;
    use datafusion::physical_expr::expressions::{BinaryExpr, Literal};

    fn cmp(
        name: &str,
        index: usize,
        op: Operator,
        v: ScalarValue,
    ) -> Arc<dyn PhysicalExpr> {
        Arc::new(BinaryExpr::new(
            Arc::new(Column::new(name, index)),
            op,
            Arc::new(Literal::new(v)),
        ))
    }

    #[test]
    fn comparisons_move_onto_their_column_and_compare_as_datafusion() {
        let p = ColumnPredicate::try_new(
            "v",
            &DataType::Float64,
            &[
                cmp("v", 7, Operator::Gt, ScalarValue::Float64(Some(0.0))),
                cmp(
                    "v",
                    7,
                    Operator::LtEq,
                    ScalarValue::Float64(Some(f64::INFINITY)),
                ),
            ],
        )
        .unwrap();
        let values: ArrayRef = Arc::new(Float64Array::from(vec![
            Some(1.0),
            Some(-0.0),
            Some(0.0),
            Some(f64::NAN),
            None,
            Some(f64::INFINITY),
        ]));
        let got: Vec<bool> = p.eval(&values).unwrap().iter().collect();
        // NaN sorts above infinity in arrow's order, so `<= inf` is false.
        assert_eq!(got, [true, false, false, false, false, true]);
        // A comparison reading another column is refused.
        let err = ColumnPredicate::try_new(
            "v",
            &DataType::Float64,
            &[cmp("w", 1, Operator::Gt, ScalarValue::Float64(Some(0.0)))],
        )
        .unwrap_err();
        assert!(err.to_string().contains("reads w"), "{err}");
    }

    #[test]
    fn plain_values_read_aligned_or_not_and_short_pages_are_errors() {
        let raw: Vec<u8> = [5i32, -1, 7].iter().flat_map(|v| v.to_le_bytes()).collect();
        let mut shifted = vec![0u8];
        shifted.extend_from_slice(&raw);
        for bytes in [Bytes::from(raw.clone()), Bytes::from(shifted).slice(1..)] {
            let a = plain_array(&bytes, 3, 4, &DataType::Int32).unwrap();
            let a = a.as_any().downcast_ref::<Int32Array>().unwrap();
            assert_eq!(a.values().as_ref(), &[5, -1, 7]);
        }
        let err = plain_array(&Bytes::from(raw), 4, 4, &DataType::Int32).unwrap_err();
        assert!(err.to_string().contains("past the end"), "{err}");
    }

    #[test]
    fn codes_outside_the_dictionary_are_errors() {
        // Width 2, one RLE run of four 3s; the table holds codes 0..3.
        let values = Bytes::from(vec![2u8, 8, 3]);
        let mut out = vec![];
        codes_to_bits(&values, &[0, 1, 1, OUT_OF_RANGE], 4, &mut out).unwrap_err();
        codes_to_bits(&values, &[0, 1], 4, &mut out).unwrap_err();
        codes_to_bits(&values, &[0, 1, 1, 1], 4, &mut out).unwrap();
        assert_eq!(out[..4], [1, 1, 1, 1]);
        // Fewer codes than values.
        let err = codes_to_bits(&values, &[0, 1, 1, 1], 5, &mut out).unwrap_err();
        assert!(err.to_string().contains("fewer dictionary codes"), "{err}");
    }
}
