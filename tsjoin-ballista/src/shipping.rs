//! The client's query planner: makes a logical plan survive the trip to the
//! scheduler, then hands it to Ballista's planner.
//!
//! datafusion-proto 55 rebuilds a decoded plan with `LogicalPlanBuilder`,
//! which does not always give back the plan that was encoded. Two shapes
//! that tsjoin's SQL produces come back wrong, so the scheduler could not
//! parse them:
//!
//! - **An empty relation loses its schema.** `EmptyRelationNode` carries
//!   only `produce_one_row`, so `WHERE FALSE` under a join or an aggregate
//!   decodes to an input with no columns. Below the root it is sent as
//!   `LIMIT 0` over one row of typed NULLs with the same qualified names,
//!   which the scheduler's optimizer folds back into an empty relation of
//!   the right schema. A plan that is only an empty relation is answered
//!   here, with its schema (Ballista's planner answers it with no columns).
//! - **A sort over a single-input node is rewritten in terms of that
//!   node's expressions.** `sort_with_limit` treats its input's expressions
//!   as a projection's, so the outer sort of `Sort(e) <- Sort(e, fetch)`
//!   (QuestDB's `ORDER BY e LIMIT -n`) decodes to a column named after `e`
//!   that no input has. Such a sort gets an identity projection between it
//!   and its input, which the scheduler's optimizer removes again.
//!
//! Neither change alters what the query answers; both are undone by the
//! scheduler's optimizer, so the physical plan is the one the client would
//! have made.

use ballista_core::config::BallistaConfig;
use ballista_core::planner::BallistaQueryPlanner;
use datafusion::catalog::Session;
use datafusion::common::tree_node::Transformed;
use datafusion::common::{DFSchema, Result, ScalarValue};
use datafusion::execution::context::QueryPlanner;
use datafusion::logical_expr::{
    EmptyRelation, Expr, Limit, LogicalPlan, Projection, Sort, lit,
};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::empty::EmptyExec;
use datafusion::physical_plan::placeholder_row::PlaceholderRowExec;
use datafusion_proto::logical_plan::LogicalExtensionCodec;
use datafusion_proto::protobuf::LogicalPlanNode;
use std::sync::Arc;

/// Ballista's client planner behind [`ship_safe`]: every plan the client
/// sends to the scheduler decodes there to the plan that was planned here.
#[derive(Debug)]
pub(crate) struct ClusterQueryPlanner {
    ballista: BallistaQueryPlanner<LogicalPlanNode>,
}

impl ClusterQueryPlanner {
    /// A planner that sends plans to `scheduler_url` (`http://HOST:PORT`)
    /// encoded with `codec`.
    pub(crate) fn new(
        scheduler_url: String,
        config: BallistaConfig,
        codec: Arc<dyn LogicalExtensionCodec>,
    ) -> Self {
        Self {
            ballista: BallistaQueryPlanner::with_extension(scheduler_url, config, codec),
        }
    }
}

#[async_trait::async_trait]
impl QueryPlanner for ClusterQueryPlanner {
    async fn create_physical_plan(
        &self,
        plan: &LogicalPlan,
        state: &dyn Session,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if let LogicalPlan::EmptyRelation(empty) = plan {
            let schema = Arc::clone(empty.schema.inner());
            return Ok(if empty.produce_one_row {
                Arc::new(PlaceholderRowExec::new(schema))
            } else {
                Arc::new(EmptyExec::new(schema))
            });
        }
        self.ballista
            .create_physical_plan(&ship_safe(plan.clone())?, state)
            .await
    }
}

/// `plan` with the two shapes datafusion-proto cannot rebuild replaced by
/// equivalent ones it can (see the module docs). Subqueries included.
///
/// ```ignore
/// // Filter(false) under an aggregate: the empty input keeps its columns.
/// let shipped = ship_safe(plan)?;
/// ```
pub(crate) fn ship_safe(plan: LogicalPlan) -> Result<LogicalPlan> {
    plan.transform_up_with_subqueries(|node| match node {
        LogicalPlan::EmptyRelation(empty)
            if !empty.produce_one_row && !empty.schema.fields().is_empty() =>
        {
            Ok(Transformed::yes(typed_empty(&empty.schema)?))
        }
        LogicalPlan::Sort(sort) if rewrites_sorts(&sort.input) => {
            let input = Projection::try_new(
                sort.input
                    .schema()
                    .columns()
                    .into_iter()
                    .map(Expr::Column)
                    .collect(),
                Arc::clone(&sort.input),
            )?;
            Ok(Transformed::yes(LogicalPlan::Sort(Sort {
                input: Arc::new(LogicalPlan::Projection(input)),
                ..sort
            })))
        }
        other => Ok(Transformed::no(other)),
    })
    .map(|t| t.data)
}

/// Whether decoding a sort over `input` would rewrite the sort's
/// expressions in terms of `input`'s: a node with one input and
/// expressions that are not its output columns (a projection's, an
/// aggregate's and a window's are, so the rewrite is right for them).
fn rewrites_sorts(input: &LogicalPlan) -> bool {
    !matches!(
        input,
        LogicalPlan::Projection(_) | LogicalPlan::Aggregate(_) | LogicalPlan::Window(_)
    ) && input.inputs().len() == 1
        && input
            .expressions()
            .iter()
            .any(|e| !matches!(e, Expr::Column(_)))
}

/// An empty relation of `schema` that datafusion-proto can carry: `LIMIT 0`
/// over one row of typed NULLs, named and qualified as `schema`'s fields.
fn typed_empty(schema: &DFSchema) -> Result<LogicalPlan> {
    let one_row = Arc::new(LogicalPlan::EmptyRelation(EmptyRelation {
        produce_one_row: true,
        schema: Arc::new(DFSchema::empty()),
    }));
    let nulls = schema
        .iter()
        .map(|(qualifier, field)| {
            let null = lit(ScalarValue::try_from(field.data_type())?);
            Ok(match qualifier {
                Some(q) => null.alias_qualified(Some(q.clone()), field.name()),
                None => null.alias(field.name()),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let row = Projection::try_new(nulls, one_row)?;
    Ok(LogicalPlan::Limit(Limit {
        skip: None,
        fetch: Some(Box::new(lit(ScalarValue::Int64(Some(0))))),
        input: Arc::new(LogicalPlan::Projection(row)),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::ClusterLogicalCodec;
    use datafusion::prelude::SessionContext;
    use datafusion_proto::bytes::{
        logical_plan_from_bytes_with_extension_codec,
        logical_plan_to_bytes_with_extension_codec,
    };
    use datafusion_tsjoin::TsJoinContextExt;

    /// `sql`'s optimised plan, shipped as the client ships it, decodes to
    /// a plan with the same schema that optimises to the same physical
    /// output.
    async fn round_trip(ctx: &SessionContext, sql: &str) -> Result<LogicalPlan> {
        let plan = ctx.tsjoin_sql(sql).await?.into_optimized_plan()?;
        let codec = ClusterLogicalCodec::default();
        let bytes = logical_plan_to_bytes_with_extension_codec(
            &ship_safe(plan.clone())?,
            &codec,
        )?;
        let back = logical_plan_from_bytes_with_extension_codec(
            &bytes,
            &ctx.task_ctx(),
            &codec,
        )?;
        assert_eq!(back.schema().as_arrow(), plan.schema().as_arrow(), "{sql}");
        ctx.state().optimize(&back)
    }

    /// A session with table `t` (ts, k, v) in a Parquet file under `dir`
    /// (in-memory tables cannot be encoded).
    async fn context(dir: &std::path::Path) -> Result<SessionContext> {
        let ctx = datafusion_tsjoin::tsjoin_context(Default::default());
        let path = dir.join("t.parquet");
        ctx.tsjoin_sql(&format!(
            "COPY (SELECT * FROM (VALUES (CAST('2024-01-01T00:00:00' AS TIMESTAMP), 1, 1.0), \
             (CAST('2024-01-01T00:00:01' AS TIMESTAMP), 2, 2.0)) AS v(ts, k, v)) \
             TO '{}' STORED AS PARQUET",
            path.display()
        ))
        .await?
        .collect()
        .await?;
        ctx.register_parquet("t", path.to_str().unwrap(), Default::default())
            .await?;
        Ok(ctx)
    }

    #[tokio::test]
    async fn empty_relations_keep_their_schema() -> Result<()> {
        let dir = tempfile::tempdir()?;
        let ctx = context(dir.path()).await?;
        for sql in [
            "SELECT sum(v), max(k) FROM t WHERE false",
            "SELECT k, v FROM t WHERE 1 = 2 UNION ALL SELECT k, v FROM t",
        ] {
            let plan = round_trip(&ctx, sql).await?;
            let rows = ctx.execute_logical_plan(plan).await?.collect().await?;
            let want = ctx.tsjoin_sql(sql).await?.collect().await?;
            assert_eq!(
                datafusion::arrow::util::pretty::pretty_format_batches(&rows)?
                    .to_string(),
                datafusion::arrow::util::pretty::pretty_format_batches(&want)?
                    .to_string(),
                "{sql}"
            );
        }
        Ok(())
    }

    #[tokio::test]
    async fn sort_over_sort_of_an_expression_decodes() -> Result<()> {
        let dir = tempfile::tempdir()?;
        let ctx = context(dir.path()).await?;
        let sql = "SELECT k FROM t WHERE k % 64 < 3 ORDER BY k % 64, ts LIMIT -1";
        let plan = round_trip(&ctx, sql).await?;
        let rows = ctx.execute_logical_plan(plan).await?.collect().await?;
        assert_eq!(rows.iter().map(|b| b.num_rows()).sum::<usize>(), 1);
        Ok(())
    }

    #[test]
    fn typed_empty_names_and_types_match() -> Result<()> {
        use datafusion::arrow::datatypes::{DataType, Field, Schema};
        let schema = DFSchema::try_from_qualified_schema(
            "t",
            &Schema::new(vec![
                Field::new("a", DataType::Int32, false),
                Field::new("b", DataType::Utf8, true),
            ]),
        )?;
        let plan = typed_empty(&schema)?;
        assert_eq!(plan.schema().columns(), schema.columns());
        let types: Vec<_> = plan
            .schema()
            .fields()
            .iter()
            .map(|f| f.data_type().clone())
            .collect();
        assert_eq!(types, vec![DataType::Int32, DataType::Utf8]);
        Ok(())
    }
}
