//! `first`, `last`, `first_not_null`, `last_not_null`: QuestDB's positional
//! aggregates. Inside a WINDOW JOIN "first" means the oldest row of the
//! window (the prevailing row when there is one); in an ordinary GROUP BY it
//! means the first row the aggregate sees, which is input order within a
//! partition and unspecified across partitions (like DuckDB's `first`).

use datafusion::arrow::array::{Array, ArrayRef, AsArray, BooleanArray};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, Signature, Volatility,
};
use std::sync::Arc;

/// Which of the four positional aggregates a [`FirstLast`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Position {
    /// `first(x)`: the first row, NULL included.
    First,
    /// `last(x)`: the last row, NULL included.
    Last,
    /// `first_not_null(x)`
    FirstNotNull,
    /// `last_not_null(x)`
    LastNotNull,
}

/// One of the four positional aggregates.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct FirstLast {
    name: &'static str,
    last: bool,
    skip_nulls: bool,
    signature: Signature,
}

impl FirstLast {
    /// Which of the four this is.
    pub(crate) fn position(&self) -> Position {
        match (self.last, self.skip_nulls) {
            (false, false) => Position::First,
            (true, false) => Position::Last,
            (false, true) => Position::FirstNotNull,
            (true, true) => Position::LastNotNull,
        }
    }

    fn new(name: &'static str, last: bool, skip_nulls: bool) -> Self {
        Self {
            name,
            last,
            skip_nulls,
            signature: Signature::any(1, Volatility::Immutable),
        }
    }
}

/// The four UDAFs, ready for `SessionStateBuilder::with_aggregate_functions`.
///
/// ```
/// let names: Vec<String> = datafusion_tsjoin::functions::first_last_udafs()
///     .iter().map(|f| f.name().to_string()).collect();
/// assert_eq!(names, ["first", "last", "first_not_null", "last_not_null"]);
/// ```
pub fn first_last_udafs() -> Vec<Arc<AggregateUDF>> {
    [
        FirstLast::new("first", false, false),
        FirstLast::new("last", true, false),
        FirstLast::new("first_not_null", false, true),
        FirstLast::new("last_not_null", true, true),
    ]
    .into_iter()
    .map(|f| Arc::new(AggregateUDF::new_from_impl(f)))
    .collect()
}

impl AggregateUDFImpl for FirstLast {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        Ok(arg_types[0].clone())
    }

    fn accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        Ok(Box::new(FirstLastAccumulator {
            value: ScalarValue::try_from(args.return_field.data_type())?,
            set: false,
            last: self.last,
            skip_nulls: self.skip_nulls,
        }))
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        Ok(vec![
            Arc::new(Field::new(
                format!("{}[value]", args.name),
                args.return_type().clone(),
                true,
            )),
            Arc::new(Field::new(
                format!("{}[set]", args.name),
                DataType::Boolean,
                false,
            )),
        ])
    }
}

#[derive(Debug)]
struct FirstLastAccumulator {
    value: ScalarValue,
    set: bool,
    last: bool,
    skip_nulls: bool,
}

impl FirstLastAccumulator {
    /// Index of the row to keep from `values` (restricted to `ok` rows).
    fn pick(&self, values: &ArrayRef, ok: impl Fn(usize) -> bool) -> Option<usize> {
        let usable = |i: &usize| ok(*i) && (!self.skip_nulls || values.is_valid(*i));
        if self.last {
            (0..values.len()).rev().find(usable)
        } else if self.set {
            None
        } else {
            (0..values.len()).find(usable)
        }
    }
}

impl Accumulator for FirstLastAccumulator {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        if let Some(i) = self.pick(&values[0], |_| true) {
            self.value = ScalarValue::try_from_array(&values[0], i)?;
            self.set = true;
        }
        Ok(())
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        let set: &BooleanArray = states[1].as_boolean();
        let skip = self.skip_nulls;
        self.skip_nulls = false; // a set state already obeyed the rule
        let picked = self.pick(&states[0], |i| set.value(i));
        self.skip_nulls = skip;
        if let Some(i) = picked {
            self.value = ScalarValue::try_from_array(&states[0], i)?;
            self.set = true;
        }
        Ok(())
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        Ok(vec![
            self.value.clone(),
            ScalarValue::Boolean(Some(self.set)),
        ])
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        Ok(self.value.clone())
    }

    fn size(&self) -> usize {
        size_of_val(self) + self.value.size() - size_of_val(&self.value)
    }
}
