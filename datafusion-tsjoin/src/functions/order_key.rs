//! `tsjoin_order_key(DOUBLE) -> BIGINT`: a double's place in the order as
//! an integer, so that the temporal engine (which orders `i64` ticks) can
//! join on floating-point "times" (DuckDB's ASOF JOIN allows them).
//!
//! The map is monotonic over SQL's order of doubles: `-0.0` and `0.0` are
//! one key (they compare equal), every NaN is one key above `+inf` (DuckDB
//! and DataFusion sort NaN last), NULL stays NULL.

use datafusion::arrow::array::{ArrayRef, AsArray, Int64Array};
use datafusion::arrow::datatypes::{DataType, Float64Type};
use datafusion::common::{Result, ScalarValue, exec_err};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use std::sync::Arc;

/// The function's name in SQL plans.
pub(crate) const ORDER_KEY: &str = "tsjoin_order_key";

/// See the module docs.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(crate) struct OrderKey {
    signature: Signature,
}

/// The function as a [`ScalarUDF`] (tsjoin registers it in its sessions,
/// so that plans using it decode on another node).
pub(crate) fn order_key_udf() -> ScalarUDF {
    ScalarUDF::new_from_impl(OrderKey {
        signature: Signature::exact(vec![DataType::Float64], Volatility::Immutable),
    })
}

/// The key of one double (see the module docs): IEEE-754 bits with the
/// magnitude bits flipped for negative numbers order like the numbers.
pub(crate) fn order_key(x: f64) -> i64 {
    let x = if x.is_nan() {
        f64::NAN
    } else if x == 0.0 {
        0.0
    } else {
        x
    };
    let bits = x.to_bits() as i64;
    bits ^ ((bits >> 63) & i64::MAX)
}

impl ScalarUDFImpl for OrderKey {
    fn name(&self) -> &str {
        ORDER_KEY
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Int64)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let [arg] = args.args.as_slice() else {
            return exec_err!("{ORDER_KEY} takes one argument");
        };
        Ok(match arg {
            ColumnarValue::Scalar(ScalarValue::Float64(v)) => {
                ColumnarValue::Scalar(ScalarValue::Int64(v.map(order_key)))
            }
            ColumnarValue::Scalar(other) => {
                return exec_err!(
                    "{ORDER_KEY} takes a DOUBLE, not {}",
                    other.data_type()
                );
            }
            ColumnarValue::Array(a) => {
                let keys: Int64Array = a.as_primitive::<Float64Type>().unary(order_key);
                ColumnarValue::Array(Arc::new(keys) as ArrayRef)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    /// Keys compare as the doubles do (`total_cmp` after folding -0.0 and
    /// NaNs), on edge values and random bits.
    #[test]
    fn keys_order_like_the_doubles() {
        let mut rng = StdRng::seed_from_u64(3);
        let mut xs = vec![
            f64::NEG_INFINITY,
            -1e300,
            -1.5,
            -f64::MIN_POSITIVE,
            -0.0,
            0.0,
            f64::MIN_POSITIVE,
            1.0,
            1e300,
            f64::INFINITY,
            f64::NAN,
            -f64::NAN,
        ];
        xs.extend((0..2000).map(|_| f64::from_bits(rng.random())));
        let fold = |x: f64| {
            if x.is_nan() {
                f64::NAN
            } else if x == 0.0 {
                0.0
            } else {
                x
            }
        };
        for &a in &xs {
            for &b in xs.iter().take(40) {
                assert_eq!(
                    order_key(a).cmp(&order_key(b)),
                    fold(a).total_cmp(&fold(b)),
                    "{a} vs {b}"
                );
            }
        }
        assert_eq!(order_key(-0.0), order_key(0.0));
        assert_eq!(order_key(f64::NAN), order_key(-f64::NAN));
        assert!(order_key(f64::NAN) > order_key(f64::INFINITY));
    }
}
