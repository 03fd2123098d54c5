//! QuestDB's LIMIT: negative bounds count from the end of the LIMIT's
//! input, and `LIMIT lo, hi` is the row range `[lo, hi)` (not MySQL's offset
//! and count). See `docs/limit.md` for the rules and their sources.
//!
//! Two passes. Before DataFusion's parser, a LIMIT in one of QuestDB's forms
//! (a comma, or a leading minus) becomes a marker call that DataFusion plans
//! as the LIMIT's row count:
//!
//! ```text
//! SELECT * FROM t WHERE x > 1 LIMIT -3, -1
//! ⇒ SELECT * FROM t WHERE x > 1 LIMIT __tsjoin_limit(-3, -1)
//! ```
//!
//! After planning, [`plan_limits`] replaces each marked `Limit` node by a plan
//! for its rows: a plain `Limit` for ranges from the start; for ranges from
//! the end, a reversed TopK sort and a re-sort when the input has an order
//! tsjoin can reverse (an ORDER BY, or the designated timestamp of a table
//! scan), else a [`TailNode`].

use super::rewrite::{error_at, word_is};
use crate::config::TimestampRegistry;
use crate::tail::{TailNode, TailRange};
use datafusion::arrow::array::{Array, Int64Array};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Schema};
use datafusion::arrow::record_batch::{RecordBatch, RecordBatchOptions};
use datafusion::common::tree_node::{Transformed, TransformedResult};
use datafusion::common::{Column, DFSchema, Result, plan_datafusion_err, plan_err};
use datafusion::execution::context::ExecutionProps;
use datafusion::logical_expr::physical_planning_context::PhysicalPlanningContext;
use datafusion::logical_expr::{
    ColumnarValue, Expr, ExprSchemable, Extension, LogicalPlan, LogicalPlanBuilder,
    ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, SortExpr, Volatility,
};
use datafusion::physical_expr::create_physical_expr;
use sqlparser::tokenizer::{Token, TokenWithSpan, Whitespace};
use std::sync::Arc;

/// Name of the marker function that carries a QuestDB LIMIT's bounds.
pub const LIMIT_MARKER: &str = "__tsjoin_limit";

/// Words that end a LIMIT clause at its nesting level.
const CLAUSE_END: [&str; 10] = [
    "OFFSET",
    "UNION",
    "EXCEPT",
    "INTERSECT",
    "FETCH",
    "FOR",
    "BY",
    "SETTINGS",
    "FORMAT",
    "ORDER",
];

/// Rewrites each LIMIT in one of QuestDB's forms (`LIMIT -n`, `LIMIT lo,
/// hi`, `LIMIT lo,`, `LIMIT , hi`) into `LIMIT __tsjoin_limit(…)`; a plain
/// `LIMIT n [OFFSET k]` stays DataFusion's.
pub fn rewrite_limits(tokens: Vec<TokenWithSpan>) -> Result<Vec<TokenWithSpan>> {
    let significant = |ts: &[TokenWithSpan]| -> Vec<TokenWithSpan> {
        ts.iter()
            .filter(|t| !matches!(t.token, Token::Whitespace(_)))
            .cloned()
            .collect()
    };
    let mut out = Vec::with_capacity(tokens.len() + 8);
    let mut i = 0;
    while i < tokens.len() {
        if !word_is(&tokens[i].token, "LIMIT") {
            out.push(tokens[i].clone());
            i += 1;
            continue;
        }
        let start = i + 1;
        let (mut end, mut depth, mut commas) = (start, 0i32, vec![]);
        while end < tokens.len() {
            match &tokens[end].token {
                Token::LParen => depth += 1,
                Token::RParen if depth == 0 => break,
                Token::RParen => depth -= 1,
                Token::SemiColon | Token::EOF if depth == 0 => break,
                Token::Comma if depth == 0 => commas.push(end),
                t if depth == 0 && CLAUSE_END.iter().any(|k| word_is(t, k)) => break,
                _ => {}
            }
            end += 1;
        }
        let (lo, hi) = match commas.as_slice() {
            [] => (significant(&tokens[start..end]), None),
            [c] => (
                significant(&tokens[start..*c]),
                Some(significant(&tokens[c + 1..end])),
            ),
            _ => (vec![], None),
        };
        // A leading minus, or a string or fractional bound (QuestDB's type
        // errors), makes a single bound QuestDB's too.
        let questdb_single = matches!(lo.first().map(|t| &t.token), Some(Token::Minus))
            || lo.iter().any(|t| match &t.token {
                Token::SingleQuotedString(_) => true,
                Token::Number(n, _) => n.contains(['.', 'e', 'E']),
                _ => false,
            });
        if commas.len() > 1 || (hi.is_none() && !questdb_single) {
            out.push(tokens[i].clone());
            i += 1;
            continue;
        }
        let hi = hi.unwrap_or_default();
        if lo.is_empty() && hi.is_empty() {
            return Err(error_at(tokens[i].span, "LIMIT needs a value"));
        }
        // Literal bounds: QuestDB's error points at the negative one.
        if let (Some(l), Some(h)) = (literal(&lo), literal(&hi))
            && l < 0
            && h > 0
        {
            return Err(error_at(lo[0].span, NEGATIVE_POSITIVE));
        }
        let span = tokens[i].span;
        let tok = |t: Token| TokenWithSpan::new(t, span);
        out.push(tokens[i].clone());
        out.push(tok(Token::Whitespace(Whitespace::Space)));
        out.push(tok(Token::make_word(LIMIT_MARKER, None)));
        out.push(tok(Token::LParen));
        out.extend(lo.iter().cloned());
        if !lo.is_empty() && !hi.is_empty() {
            out.push(tok(Token::Comma));
        }
        out.extend(hi.iter().cloned());
        out.push(tok(Token::RParen));
        out.push(tok(Token::Whitespace(Whitespace::Space)));
        i = end;
    }
    Ok(out)
}

const NEGATIVE_POSITIVE: &str = "LIMIT <negative>, <positive> is not allowed";

/// `[-]digits` as a number.
fn literal(tokens: &[TokenWithSpan]) -> Option<i64> {
    match tokens {
        [t] => match &t.token {
            Token::Number(n, _) => n.parse().ok(),
            _ => None,
        },
        [m, t] if m.token == Token::Minus => literal(std::slice::from_ref(t)).map(|v| -v),
        _ => None,
    }
}

/// The marker function: its arguments are a QuestDB LIMIT's bounds. It is
/// never evaluated; [`plan_limits`] replaces the `Limit` node it sits in.
///
/// ```
/// use datafusion_tsjoin::sql::limit_marker;
/// assert_eq!(limit_marker().name(), "__tsjoin_limit");
/// ```
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct LimitMarker {
    signature: Signature,
}

/// The marker as a [`ScalarUDF`] (tsjoin registers it in its sessions).
pub fn limit_marker() -> ScalarUDF {
    ScalarUDF::new_from_impl(LimitMarker {
        signature: Signature::variadic_any(Volatility::Immutable),
    })
}

impl ScalarUDFImpl for LimitMarker {
    fn name(&self) -> &str {
        LIMIT_MARKER
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Int64)
    }

    fn invoke_with_args(&self, _args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        plan_err!("QuestDB's LIMIT forms need tsjoin's SQL entry point (tsjoin_sql)")
    }
}

/// The bound values of a marked LIMIT, or `None` for any other LIMIT.
fn marker_args(fetch: &Expr) -> Option<&[Expr]> {
    match fetch {
        Expr::ScalarFunction(f) if f.func.inner().is::<LimitMarker>() => Some(&f.args),
        _ => None,
    }
}

/// QuestDB's name for a bound's type (its error says `invalid type: STRING`).
fn questdb_type_name(t: &DataType) -> String {
    match t {
        DataType::Null => "NULL".into(),
        t if t.is_floating() || t.is_decimal() => "DOUBLE".into(),
        DataType::Utf8 | DataType::Utf8View | DataType::LargeUtf8 => "STRING".into(),
        DataType::Boolean => "BOOLEAN".into(),
        t => t.to_string().to_uppercase(),
    }
}

/// A LIMIT bound: an integer constant.
fn bound_value(e: &Expr) -> Result<i64> {
    let schema = DFSchema::empty();
    let t = e.get_type(&schema)?;
    if !t.is_integer() {
        return plan_err!("invalid type: {}", questdb_type_name(&t));
    }
    let physical = create_physical_expr(
        e,
        &schema,
        &ExecutionProps::new(),
        &PhysicalPlanningContext::default(),
    )
    .map_err(|_| plan_datafusion_err!("LIMIT bound must be a constant: {e}"))?;
    let one_row = RecordBatch::try_new_with_options(
        Arc::new(Schema::empty()),
        vec![],
        &RecordBatchOptions::new().with_row_count(Some(1)),
    )?;
    let array = physical.evaluate(&one_row)?.into_array(1)?;
    let array = cast(&array, &DataType::Int64)?;
    let values = array
        .as_any()
        .downcast_ref::<Int64Array>()
        .ok_or_else(|| plan_datafusion_err!("LIMIT bound must be an integer"))?;
    if values.is_null(0) {
        return plan_err!("invalid type: NULL");
    }
    Ok(values.value(0))
}

/// What a QuestDB LIMIT selects, its bounds resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LimitRows {
    /// Rows `[skip, skip + fetch)` from the start (DataFusion's LIMIT).
    Head { skip: u64, fetch: u64 },
    /// Rows counted from the end.
    Range(TailRange),
}

/// QuestDB's rules for `LIMIT a` and `LIMIT lo, hi` (empty bound = 0
/// omitted): `[lo, hi)` with both bounds non-negative (swapped if `lo >
/// hi`), `[size-m, size-n)` for `-m, -n` (swapped if `m < n`), `[m,
/// size-n)` for `m, -n`; `-m, n` is an error.
pub(crate) fn resolve(bounds: &[i64]) -> Result<LimitRows> {
    let abs = |v: i64| v.unsigned_abs();
    Ok(match *bounds {
        [a] if a >= 0 => LimitRows::Head {
            skip: 0,
            fetch: abs(a),
        },
        [a] => LimitRows::Range(TailRange {
            skip_first: 0,
            keep_last: Some(abs(a)),
            drop_last: 0,
        }),
        [lo, hi] if lo < 0 && hi > 0 => return plan_err!("{NEGATIVE_POSITIVE}"),
        [lo, hi] if lo >= 0 && hi >= 0 => {
            let (lo, hi) = (abs(lo.min(hi)), abs(lo.max(hi)));
            LimitRows::Head {
                skip: lo,
                fetch: hi - lo,
            }
        }
        [lo, hi] if lo < 0 => {
            let (m, n) = (abs(lo).max(abs(hi)), abs(lo).min(abs(hi)));
            if m == n {
                LimitRows::Head { skip: 0, fetch: 0 }
            } else {
                LimitRows::Range(TailRange {
                    skip_first: 0,
                    keep_last: Some(m),
                    drop_last: n,
                })
            }
        }
        [lo, hi] => LimitRows::Range(TailRange {
            skip_first: abs(lo),
            keep_last: None,
            drop_last: abs(hi),
        }),
        _ => return plan_err!("LIMIT takes one or two bounds"),
    })
}

/// Replaces every `Limit` whose row count is the marker by the plan of
/// QuestDB's rows (see the module docs).
pub fn plan_limits(
    plan: LogicalPlan,
    registry: &TimestampRegistry,
) -> Result<LogicalPlan> {
    plan.transform_up_with_subqueries(|node| {
        let LogicalPlan::Limit(limit) = &node else {
            return Ok(Transformed::no(node));
        };
        let Some(args) = limit.fetch.as_deref().and_then(marker_args) else {
            return Ok(Transformed::no(node));
        };
        if limit.skip.is_some() {
            return plan_err!(
                "OFFSET cannot be combined with a negative LIMIT or LIMIT lo, hi"
            );
        }
        let bounds = args.iter().map(bound_value).collect::<Result<Vec<_>>>()?;
        let rows = resolve(&bounds)?;
        let input = Arc::unwrap_or_clone(Arc::clone(&limit.input));
        let plan = match rows {
            // `LIMIT lo, hi` takes rows in the input's order too (a plain
            // `LIMIT n` stays DataFusion's: rows as the scan yields them).
            LimitRows::Head { skip, fetch } => {
                let head = |x: LogicalPlan| {
                    LogicalPlanBuilder::from(x)
                        .limit(skip as usize, Some(fetch as usize))?
                        .build()
                };
                let ordered = with_order(&input, registry, &|x, keys| {
                    head(LogicalPlanBuilder::from(x).sort(keys)?.build()?)
                })?;
                match ordered {
                    Some(plan) => plan,
                    None => head(input)?,
                }
            }
            LimitRows::Range(range) => {
                let ordered = match range {
                    TailRange {
                        skip_first: 0,
                        keep_last: Some(m),
                        drop_last: n,
                    } => with_order(&input, registry, &|x, keys| {
                        reverse_sort(x, keys, m, n)
                    })?,
                    _ => with_order(&input, registry, &|x, keys| {
                        let sorted = LogicalPlanBuilder::from(x).sort(keys)?.build()?;
                        Ok(tail_node(sorted, range))
                    })?,
                };
                ordered.unwrap_or_else(|| tail_node(input, range))
            }
        };
        Ok(Transformed::yes(plan))
    })
    .data()
}

fn tail_node(input: LogicalPlan, range: TailRange) -> LogicalPlan {
    LogicalPlan::Extension(Extension {
        node: Arc::new(TailNode::new(input, range)),
    })
}

/// `plan` with `build(input, keys)` in place of the part of it whose row
/// order is known, if any: looks through projections and aliases (they keep
/// rows and order) for an ORDER BY (`input` is what it sorts) or a scan of a
/// table with a designated timestamp under filters (`input` is the filter).
fn with_order(
    plan: &LogicalPlan,
    registry: &TimestampRegistry,
    build: &dyn Fn(LogicalPlan, Vec<SortExpr>) -> Result<LogicalPlan>,
) -> Result<Option<LogicalPlan>> {
    match plan {
        LogicalPlan::Projection(_) | LogicalPlan::SubqueryAlias(_) => {
            let Some(input) = with_order(plan.inputs()[0], registry, build)? else {
                return Ok(None);
            };
            Ok(Some(plan.with_new_exprs(plan.expressions(), vec![input])?))
        }
        LogicalPlan::Sort(sort) if sort.fetch.is_none() => {
            let input = Arc::unwrap_or_clone(Arc::clone(&sort.input));
            build(input, sort.expr.clone()).map(Some)
        }
        LogicalPlan::Filter(_) | LogicalPlan::TableScan(_) => {
            match designated_column(plan, registry) {
                Some(ts) => {
                    let keys = vec![SortExpr::new(Expr::Column(ts), true, true)];
                    build(plan.clone(), keys).map(Some)
                }
                None => Ok(None),
            }
        }
        _ => Ok(None),
    }
}

/// Rows `[size-m, size-n)` of `input` ordered by `keys`: sorted the other
/// way, rows `[n, m)`, sorted back (a TopK of `m` rows, then a small sort).
fn reverse_sort(
    input: LogicalPlan,
    keys: Vec<SortExpr>,
    m: u64,
    n: u64,
) -> Result<LogicalPlan> {
    let reversed = keys.iter().map(SortExpr::reverse).collect::<Vec<_>>();
    LogicalPlanBuilder::from(input)
        .sort(reversed)?
        .limit(n as usize, Some((m - n) as usize))?
        .sort(keys)?
        .build()
}

/// The designated timestamp of the table a chain of filters reads.
fn designated_column(plan: &LogicalPlan, registry: &TimestampRegistry) -> Option<Column> {
    match plan {
        LogicalPlan::Filter(f) => designated_column(&f.input, registry),
        LogicalPlan::TableScan(scan) => {
            let name = registry.get(scan.table_name.table())?;
            let (q, f) = scan
                .projected_schema
                .qualified_field_with_unqualified_name(&name)
                .ok()?;
            Some(Column::new(q.cloned(), f.name()))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(skip_first: u64, keep_last: Option<u64>, drop_last: u64) -> LimitRows {
        LimitRows::Range(TailRange {
            skip_first,
            keep_last,
            drop_last,
        })
    }

    #[test]
    fn questdb_bounds() {
        let head = |skip, fetch| LimitRows::Head { skip, fetch };
        assert_eq!(resolve(&[5]).unwrap(), head(0, 5));
        assert_eq!(resolve(&[0]).unwrap(), head(0, 0));
        assert_eq!(resolve(&[-5]).unwrap(), range(0, Some(5), 0));
        assert_eq!(resolve(&[2, 5]).unwrap(), head(2, 3));
        assert_eq!(resolve(&[6, 5]).unwrap(), head(5, 1));
        assert_eq!(resolve(&[5, 0]).unwrap(), head(0, 5));
        assert_eq!(resolve(&[5, 5]).unwrap(), head(5, 0));
        assert_eq!(resolve(&[-10, -3]).unwrap(), range(0, Some(10), 3));
        assert_eq!(resolve(&[-3, -10]).unwrap(), range(0, Some(10), 3));
        assert_eq!(resolve(&[-3, -3]).unwrap(), head(0, 0));
        assert_eq!(resolve(&[-2, 0]).unwrap(), range(0, Some(2), 0));
        assert_eq!(resolve(&[4, -6]).unwrap(), range(4, None, 6));
        assert!(resolve(&[-3, 2]).is_err());
    }

    #[test]
    fn rows_of_ranges() {
        let r = |k, d| TailRange {
            skip_first: 0,
            keep_last: Some(k),
            drop_last: d,
        };
        // QuestDB's clamping: -35,-28 on 30 rows → rows 0, 1; -33,-31 → none.
        assert_eq!(r(35, 28).rows_of(30), 0..2);
        assert_eq!(r(33, 31).rows_of(30), 0..0);
        let mid = TailRange {
            skip_first: 4,
            keep_last: None,
            drop_last: 6,
        };
        assert_eq!(mid.rows_of(30), 4..24);
        assert_eq!(mid.rows_of(8), 4..4);
    }
}
