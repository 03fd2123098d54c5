//! What users read: errors, EXPLAIN and result column names name only what
//! the query wrote, and a tsjoin session answers SHOW TABLES.

use crate::support::context;
use datafusion::arrow::util::pretty::pretty_format_batches;
use datafusion::prelude::SessionContext;
use datafusion_tsjoin::TsJoinContextExt;

async fn tables(ctx: &SessionContext) {
    ctx.tsjoin_sql(
        "CREATE TABLE t (ts TIMESTAMP, symbol VARCHAR, price DOUBLE) AS VALUES
          ('2024-01-01T00:00:01', 'A', 10.0), ('2024-01-01T00:00:05', 'A', 11.0);
         CREATE TABLE p (ts TIMESTAMP, sym VARCHAR, bid DOUBLE) AS VALUES
          ('2024-01-01T00:00:00', 'A', 9.5), ('2024-01-01T00:00:02', 'A', 10.0)",
    )
    .await
    .unwrap();
}

const JOIN: &str = "FROM t WINDOW JOIN p ON p.sym = t.symbol \
                    RANGE BETWEEN 1 second PRECEDING AND 1 second FOLLOWING";

async fn text(ctx: &SessionContext, sql: &str) -> String {
    let batches = ctx.tsjoin_sql(sql).await.unwrap().collect().await.unwrap();
    pretty_format_batches(&batches).unwrap().to_string()
}

async fn error(ctx: &SessionContext, sql: &str) -> String {
    let result = match ctx.tsjoin_sql(sql).await {
        Ok(df) => df.collect().await.map(|_| ()),
        Err(e) => Err(e),
    };
    result.expect_err(sql).to_string()
}

#[tokio::test]
async fn show_tables_and_describe_work() {
    let ctx = context(2);
    tables(&ctx).await;
    let shown = text(&ctx, "SHOW TABLES").await;
    assert!(shown.contains("| t ") && shown.contains("| p "), "{shown}");
    let described = text(&ctx, "DESCRIBE t").await;
    assert!(described.contains("symbol"), "{described}");
    let columns = text(&ctx, "SHOW COLUMNS FROM p").await;
    assert!(columns.contains("bid"), "{columns}");
}

#[tokio::test]
async fn errors_name_only_what_the_query_wrote() {
    let ctx = context(2);
    tables(&ctx).await;
    for sql in [
        format!("SELECT t.nope, avg(p.bid) {JOIN}"),
        format!("SELECT t.ts, avg(p.bid) AS a {JOIN} ORDER BY nope"),
        format!("SELECT t.ts, avg(p.nope) {JOIN}"),
        format!("SELECT t.ts, count(*) {JOIN} WHERE nope > 1"),
        format!("SELECT t.ts, avg(p.bid) + 'x' {JOIN}"),
        format!("SELECT t.ts, avg(p.bid) {JOIN} GROUP BY t.ts"),
        format!("SELECT * FROM (SELECT t.ts, avg(p.bid) {JOIN}) WHERE nope"),
        format!("SELECT t.ts, avg(p.bid) {JOIN} trailing garbage"),
    ] {
        let e = error(&ctx, &sql).await;
        assert!(!e.contains("__tsjoin"), "{sql}: {e}");
    }
    let e = error(&ctx, &format!("SELECT t.nope, avg(p.bid) {JOIN}")).await;
    assert!(e.contains("avg(p.bid)"), "{e}");
}

#[tokio::test]
async fn explain_and_columns_show_aggregates_as_written() {
    let ctx = context(2);
    tables(&ctx).await;
    let sql =
        format!("SELECT t.ts, avg(p.bid), count(*) AS n {JOIN} ORDER BY avg(p.bid)");
    let plan = text(&ctx, &format!("EXPLAIN {sql}")).await;
    assert!(!plan.contains("__tsjoin"), "{plan}");
    assert!(
        plan.contains("aggs=[avg(p.bid), count(Int64(1)) AS count(*)]"),
        "{plan}"
    );
    let df = ctx.tsjoin_sql(&sql).await.unwrap();
    let names: Vec<&String> = df.schema().fields().iter().map(|f| f.name()).collect();
    assert_eq!(names, ["ts", "avg(p.bid)", "n"]);
    let result = text(&ctx, &sql).await;
    assert!(result.contains("| 9.75"), "{result}");
}

/// COPY (query) TO writes a WINDOW JOIN's result (the query gets the
/// WINDOW JOIN rewrite as a SELECT does).
#[tokio::test]
async fn copy_to_writes_a_window_join() {
    let ctx = context(2);
    tables(&ctx).await;
    let dir = tempfile::tempdir().unwrap();
    let query = format!("SELECT t.ts, avg(p.bid) AS a {JOIN} ORDER BY t.ts");
    let expected = text(&ctx, &query).await;
    for ext in ["parquet", "csv", "json"] {
        let file = dir.path().join(format!("out.{ext}"));
        let written =
            text(&ctx, &format!("COPY ({query}) TO '{}'", file.display())).await;
        assert!(written.contains("| 2     |"), "{ext}: {written}");
        let read = match ext {
            "parquet" => {
                ctx.read_parquet(file.to_str().unwrap(), Default::default())
                    .await
            }
            "csv" => {
                ctx.read_csv(file.to_str().unwrap(), Default::default())
                    .await
            }
            _ => {
                ctx.read_json(file.to_str().unwrap(), Default::default())
                    .await
            }
        }
        .unwrap();
        ctx.register_table("back", read.into_view()).unwrap();
        let back = text(&ctx, "SELECT ts, a FROM back ORDER BY ts").await;
        ctx.deregister_table("back").unwrap();
        assert_eq!(back, expected, "{ext}");
    }
}

/// An aggregate whose text is also a left column's name (a sub-query's
/// unaliased aggregate) is an error that says so.
#[tokio::test]
async fn aggregate_named_like_a_left_column() {
    let ctx = context(2);
    tables(&ctx).await;
    let sql = format!(
        "SELECT w.ts, count(*) FROM (SELECT t.ts, t.symbol, count(*) {JOIN}) w \
         WINDOW JOIN p ON p.sym = w.symbol RANGE BETWEEN 1 second PRECEDING AND CURRENT ROW"
    );
    let e = error(&ctx, &sql).await;
    assert!(e.contains("already has a column named count(*)"), "{e}");
}

/// `tsjoin_sql` on a plain DataFusion session (the benchmarks' baseline)
/// plans as DataFusion would (tsjoin's own syntax needs a tsjoin session).
#[tokio::test]
async fn tsjoin_sql_runs_on_a_plain_datafusion_session() {
    let ctx = SessionContext::new();
    let batches = ctx
        .tsjoin_sql(
            "SELECT x FROM (VALUES (1), (2), (3)) t(x) ORDER BY x LIMIT 2 OFFSET 1",
        )
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    assert_eq!(
        crate::support::cells(&batches),
        vec![vec!["2".to_string()], vec!["3".to_string()]]
    );
}
