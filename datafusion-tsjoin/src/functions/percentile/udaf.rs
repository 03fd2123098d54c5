//! The SQL functions: argument checking (QuestDB's messages), types, and
//! the accumulators DataFusion asks for.

use super::accumulator::PercentileAccumulator;
use super::groups::PercentileGroups;
use super::histogram::Spec;
use datafusion::arrow::array::{Array, AsArray};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef, Float64Type};
use datafusion::common::{Result, ScalarValue, plan_datafusion_err, plan_err};
use datafusion::logical_expr::expr::{AggregateFunctionParams, WindowFunctionParams};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::utils::format_state_name;
use datafusion::logical_expr::{
    Accumulator, AggregateUDFImpl, GroupsAccumulator, Signature, Volatility,
    udaf_default_schema_name, udaf_default_window_function_schema_name,
};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::Literal;
use std::sync::Arc;

/// The name tsjoin registers QuestDB's median under; `tsjoin_sql` calls it
/// for `approx_median` (see [`super::rename_approx_median`]).
pub const HDR_MEDIAN: &str = "approx_median_hdr";

/// `approx_percentile(x, p[, precision])` or, as [`HDR_MEDIAN`],
/// `approx_median(x[, precision])`: QuestDB's HdrHistogram percentiles.
///
/// ```
/// use datafusion::logical_expr::AggregateUDF;
/// use datafusion_tsjoin::functions::ApproxPercentile;
/// let f = AggregateUDF::new_from_impl(ApproxPercentile::percentile());
/// assert_eq!(f.name(), "approx_percentile");
/// ```
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct ApproxPercentile {
    median: bool,
    signature: Signature,
}

impl ApproxPercentile {
    /// `approx_percentile(x, p[, precision])`, `p` a constant in `[0, 1]`
    /// or an array of them.
    pub fn percentile() -> Self {
        Self {
            median: false,
            signature: Signature::user_defined(Volatility::Immutable),
        }
    }

    /// `approx_median(x[, precision])` (registered as [`HDR_MEDIAN`]).
    pub fn median() -> Self {
        Self {
            median: true,
            signature: Signature::user_defined(Volatility::Immutable),
        }
    }

    /// Where the precision argument is.
    fn precision_at(&self) -> usize {
        if self.median { 1 } else { 2 }
    }

    fn spec(&self, args: &AccumulatorArgs) -> Result<Arc<Spec>> {
        self.spec_of(args.expr_fields[0].data_type(), args.exprs)
    }

    /// The constants of a call on `exprs` (the value first, read as
    /// `value`), checked as at planning.
    pub(crate) fn spec_of(
        &self,
        value: &DataType,
        exprs: &[Arc<dyn PhysicalExpr>],
    ) -> Result<Arc<Spec>> {
        let (ps, list) = if self.median {
            (vec![0.5], false)
        } else {
            let Some(p) = exprs.get(1) else {
                return plan_err!("approx_percentile needs a percentile");
            };
            percentiles(p)?
        };
        let precision = match exprs.get(self.precision_at()) {
            None => 1,
            Some(e) => precision(e)?,
        };
        Ok(Arc::new(Spec::new(precision, value, ps, list)))
    }
}

fn constant(e: &Arc<dyn PhysicalExpr>) -> Option<&ScalarValue> {
    e.downcast_ref::<Literal>().map(Literal::value)
}

/// The percentile argument: one value or a list (the array form).
fn percentiles(e: &Arc<dyn PhysicalExpr>) -> Result<(Vec<f64>, bool)> {
    let Some(v) = constant(e) else {
        return plan_err!("percentile must be a constant or runtime constant");
    };
    let in_range = |p: f64| (0.0..=1.0).contains(&p);
    match v {
        ScalarValue::List(_)
        | ScalarValue::LargeList(_)
        | ScalarValue::FixedSizeList(_) => {
            let arr = v.to_array()?;
            let values = datafusion::arrow::compute::cast(
                &arr.as_list_opt::<i32>()
                    .map(|l| l.values().clone())
                    .or_else(|| arr.as_list_opt::<i64>().map(|l| l.values().clone()))
                    .or_else(|| arr.as_fixed_size_list_opt().map(|l| l.values().clone()))
                    .ok_or_else(|| plan_datafusion_err!("invalid percentile array"))?,
                &DataType::Float64,
            )?;
            let values = values.as_primitive::<Float64Type>();
            let mut ps = Vec::with_capacity(values.len());
            for i in 0..values.len() {
                let p = values.is_valid(i).then(|| values.value(i));
                match p {
                    Some(p) if in_range(p) => ps.push(p),
                    _ => {
                        return plan_err!(
                            "invalid percentile [value={}]: percentiles must be between 0.0 and 1.0",
                            p.map_or("null".into(), |p| p.to_string())
                        );
                    }
                }
            }
            if ps.is_empty() {
                return plan_err!("invalid percentile array: it must not be empty");
            }
            Ok((ps, true))
        }
        v => match v.cast_to(&DataType::Float64)? {
            ScalarValue::Float64(Some(p)) if in_range(p) => Ok((vec![p], false)),
            _ => plan_err!("percentile must be between 0.0 and 1.0"),
        },
    }
}

fn precision(e: &Arc<dyn PhysicalExpr>) -> Result<u8> {
    let Some(v) = constant(e) else {
        return plan_err!("precision must be a constant");
    };
    match v.cast_to(&DataType::Int64) {
        Ok(ScalarValue::Int64(Some(p))) if (0..=5).contains(&p) => Ok(p as u8),
        _ => plan_err!("precision must be between 0 and 5"),
    }
}

/// The type the value argument is read as: integers on the integer
/// histogram (`UInt64` kept as is), everything else numeric as `Float64`.
fn value_type(t: &DataType) -> Result<DataType> {
    Ok(match t {
        DataType::UInt64 => DataType::UInt64,
        t if t.is_integer() => DataType::Int64,
        t if t.is_floating() || t.is_decimal() || t.is_null() => DataType::Float64,
        DataType::Dictionary(_, v) => value_type(v)?,
        t => return plan_err!("approx_percentile does not support input type {t}"),
    })
}

fn is_list(t: &DataType) -> bool {
    matches!(
        t,
        DataType::List(_) | DataType::LargeList(_) | DataType::FixedSizeList(..)
    )
}

impl AggregateUDFImpl for ApproxPercentile {
    fn name(&self) -> &str {
        if self.median {
            HDR_MEDIAN
        } else {
            "approx_percentile"
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        let (min, max) = if self.median { (1, 2) } else { (2, 3) };
        if arg_types.len() < min || arg_types.len() > max {
            let shape = if self.median {
                "approx_median(value[, precision])"
            } else {
                "approx_percentile(value, percentile[, precision])"
            };
            return plan_err!("wrong number of arguments: {shape}");
        }
        let mut out = vec![value_type(&arg_types[0])?];
        if !self.median {
            let p = &arg_types[1];
            out.push(if is_list(p) {
                DataType::new_list(DataType::Float64, true)
            } else if p.is_numeric() || p.is_null() {
                DataType::Float64
            } else {
                return plan_err!("percentile must be between 0.0 and 1.0");
            });
        }
        if let Some(t) = arg_types.get(self.precision_at()) {
            if !(t.is_integer() || t.is_null()) {
                return plan_err!("precision must be between 0 and 5");
            }
            out.push(DataType::Int64);
        }
        Ok(out)
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        if !self.median && arg_types.get(1).is_some_and(is_list) {
            Ok(DataType::new_list(DataType::Float64, true))
        } else {
            Ok(DataType::Float64)
        }
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        Ok(vec![Arc::new(Field::new(
            format_state_name(args.name, "hdr_counts"),
            DataType::Binary,
            true,
        ))])
    }

    fn accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        Ok(Box::new(PercentileAccumulator::new(self.spec(&args)?)))
    }

    fn groups_accumulator_supported(&self, _args: AccumulatorArgs) -> bool {
        true
    }

    fn create_groups_accumulator(
        &self,
        args: AccumulatorArgs,
    ) -> Result<Box<dyn GroupsAccumulator>> {
        Ok(Box::new(PercentileGroups::new(self.spec(&args)?)))
    }

    fn schema_name(&self, params: &AggregateFunctionParams) -> Result<String> {
        let name = udaf_default_schema_name(self, params)?;
        Ok(self.public_name(name))
    }

    fn window_function_schema_name(
        &self,
        params: &WindowFunctionParams,
    ) -> Result<String> {
        let name = udaf_default_window_function_schema_name(self, params)?;
        Ok(self.public_name(name))
    }
}

impl ApproxPercentile {
    /// Columns of QuestDB's median are named `approx_median(...)`, as
    /// users wrote them.
    fn public_name(&self, name: String) -> String {
        match name.strip_prefix(HDR_MEDIAN) {
            Some(rest) if self.median => format!("approx_median{rest}"),
            _ => name,
        }
    }
}
