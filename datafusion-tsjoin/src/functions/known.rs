//! Which aggregate a function is, decided by its implementation's type.
//!
//! tsjoin's fast paths compute `count`, `sum`, `min`, `max`, `avg` and the
//! positional aggregates themselves. They must only do so for DataFusion's
//! and tsjoin's own functions: a session that registers its own `sum` under
//! that name gets its own function, so names are never compared (as in
//! DataFusion's own rewrites, `func.inner().is::<Sum>()`).

use super::first_last::{FirstLast, Position};
use datafusion::functions_aggregate::average::Avg;
use datafusion::functions_aggregate::count::Count;
use datafusion::functions_aggregate::min_max::{Max, Min};
use datafusion::functions_aggregate::sum::Sum;
use datafusion::logical_expr::AggregateUDF;

/// An aggregate function tsjoin has a fast path for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KnownAggregate {
    /// DataFusion's `count`.
    Count,
    /// DataFusion's `sum`.
    Sum,
    /// DataFusion's `min`.
    Min,
    /// DataFusion's `max`.
    Max,
    /// DataFusion's `avg` (also called `mean`).
    Avg,
    /// tsjoin's `first` / `last` family.
    Positional(Position),
}

impl KnownAggregate {
    /// The aggregate `udf` implements, or `None` for any other function
    /// (including a user's function registered under a known name).
    pub(crate) fn of(udf: &AggregateUDF) -> Option<Self> {
        let inner = udf.inner();
        Some(if inner.is::<Count>() {
            Self::Count
        } else if inner.is::<Sum>() {
            Self::Sum
        } else if inner.is::<Min>() {
            Self::Min
        } else if inner.is::<Max>() {
            Self::Max
        } else if inner.is::<Avg>() {
            Self::Avg
        } else if let Some(f) = inner.downcast_ref::<FirstLast>() {
            Self::Positional(f.position())
        } else {
            return None;
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::functions_aggregate::{count::count_udaf, sum::sum_udaf};
    use datafusion::logical_expr::{AggregateUDFImpl, Signature, Volatility};

    /// A user's aggregate that happens to be called `sum`.
    #[derive(Debug, PartialEq, Eq, Hash)]
    struct MySum(Signature);

    impl AggregateUDFImpl for MySum {
        fn name(&self) -> &str {
            "sum"
        }
        fn signature(&self) -> &Signature {
            &self.0
        }
        fn return_type(
            &self,
            _: &[datafusion::arrow::datatypes::DataType],
        ) -> datafusion::common::Result<datafusion::arrow::datatypes::DataType> {
            Ok(datafusion::arrow::datatypes::DataType::Int64)
        }
        fn accumulator(
            &self,
            _: datafusion::logical_expr::function::AccumulatorArgs,
        ) -> datafusion::common::Result<Box<dyn datafusion::logical_expr::Accumulator>>
        {
            unimplemented!("never run")
        }
    }

    #[test]
    fn identifies_by_type_not_name() {
        assert_eq!(KnownAggregate::of(&sum_udaf()), Some(KnownAggregate::Sum));
        assert_eq!(
            KnownAggregate::of(&count_udaf()),
            Some(KnownAggregate::Count)
        );
        let mine =
            AggregateUDF::new_from_impl(MySum(Signature::any(1, Volatility::Immutable)));
        assert_eq!(mine.name(), "sum");
        assert_eq!(KnownAggregate::of(&mine), None);
        let positions: Vec<_> = crate::functions::first_last_udafs()
            .iter()
            .map(|f| KnownAggregate::of(f))
            .collect();
        assert_eq!(
            positions,
            [
                Position::First,
                Position::Last,
                Position::FirstNotNull,
                Position::LastNotNull
            ]
            .map(|p| Some(KnownAggregate::Positional(p)))
        );
    }
}
