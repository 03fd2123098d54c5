//! ClickBench on a synthetic `hits` table: the generator ([`generate`])
//! and the runner behind `tsjoin-bench clickbench`, which times the 43
//! queries three times per engine configuration and writes ClickBench's
//! result JSON per configuration plus a markdown summary.

pub mod generate;

use datafusion::arrow::record_batch::RecordBatch;
use datafusion::error::Result;
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion_tsjoin::TsJoinContextExt;
use serde_json::{Value, json};
use std::path::Path;
use std::time::Instant;

/// The 43 queries, one per line, as ClickBench runs them on DataFusion.
pub const QUERIES: &str = include_str!("../../clickbench/queries.sql");

/// The queries as a list.
pub fn queries() -> Vec<&'static str> {
    QUERIES
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect()
}

/// A session over the generated files as ClickBench's DataFusion entry
/// sets it up (`hits_raw` over the Parquet files, `hits` a view that turns
/// the day number `EventDate` into a DATE), with tsjoin's optimizations on
/// or off.
pub async fn session(
    files: &Path,
    threads: usize,
    tsjoin: bool,
) -> Result<SessionContext> {
    let ctx = datafusion_tsjoin::tsjoin_context(
        SessionConfig::new().with_target_partitions(threads),
    );
    ctx.tsjoin_sql(&format!("SET tsjoin.inline_aggregate = {tsjoin}"))
        .await?;
    let location = files.to_str().expect("utf-8 path");
    for sql in [
        format!("CREATE EXTERNAL TABLE hits_raw STORED AS PARQUET LOCATION '{location}' OPTIONS ('binary_as_string' 'true')"),
        "CREATE VIEW hits AS SELECT * EXCEPT (\"EventDate\"), CAST(CAST(\"EventDate\" AS INTEGER) AS DATE) AS \"EventDate\" \
         FROM hits_raw"
            .to_string(),
    ] {
        ctx.tsjoin_sql(&sql).await?.collect().await?;
    }
    Ok(ctx)
}

/// One query's runs: seconds (`None`: failed) and the rows of the first
/// successful run.
#[derive(Debug, Clone)]
pub struct QueryRuns {
    pub times: Vec<Option<f64>>,
    pub rows: Option<usize>,
    pub error: Option<String>,
}

impl QueryRuns {
    /// ClickBench's hot time: the best run after the first (the only run
    /// when there is one); `None` when any of those runs failed.
    pub fn hot(&self) -> Option<f64> {
        let warm = if self.times.len() > 1 {
            &self.times[1..]
        } else {
            &self.times[..]
        };
        warm.iter()
            .copied()
            .collect::<Option<Vec<f64>>>()?
            .into_iter()
            .reduce(f64::min)
    }
}

/// The error recorded for a query that `--only` left out.
const SKIPPED: &str = "skipped";

/// Runs every query `runs` times on each context, timing planning,
/// execution and collecting the result: one `Vec` per context.
///
/// The contexts take turns run by run (cold runs first, then the hot
/// ones), and which one starts rotates per query: a configuration running
/// a query alone in a row would pay for the memory the query needs to grow
/// into while the next one reuses it, and its hot runs would be measured
/// against the other's.
pub async fn run_all(
    ctxs: &[SessionContext],
    runs: usize,
    only: Option<&[usize]>,
) -> Vec<Vec<QueryRuns>> {
    let mut out: Vec<Vec<QueryRuns>> = ctxs.iter().map(|_| vec![]).collect();
    for (i, q) in queries().into_iter().enumerate() {
        if only.is_some_and(|o| !o.contains(&i)) {
            for o in &mut out {
                o.push(QueryRuns {
                    times: vec![None; runs],
                    rows: None,
                    error: Some(SKIPPED.into()),
                });
            }
            continue;
        }
        let mut results: Vec<QueryRuns> = ctxs
            .iter()
            .map(|_| QueryRuns {
                times: vec![],
                rows: None,
                error: None,
            })
            .collect();
        for _ in 0..runs {
            for turn in 0..ctxs.len() {
                let c = (i + turn) % ctxs.len();
                run_once(&ctxs[c], q, &mut results[c]).await;
            }
        }
        for (o, r) in out.iter_mut().zip(results) {
            eprintln!("clickbench: Q{i}: {:?}", r.times);
            o.push(r);
        }
    }
    out
}

/// One run of query `q` on `ctx`, recorded in `r`.
async fn run_once(ctx: &SessionContext, q: &str, r: &mut QueryRuns) {
    let start = Instant::now();
    let got: Result<Vec<RecordBatch>> =
        async { ctx.tsjoin_sql(q).await?.collect().await }.await;
    match got {
        Ok(batches) => {
            r.times.push(Some(start.elapsed().as_secs_f64()));
            r.rows
                .get_or_insert(batches.iter().map(|b| b.num_rows()).sum());
        }
        Err(e) => {
            eprintln!("clickbench: error: {e}");
            r.times.push(None);
            r.error.get_or_insert(e.to_string());
        }
    }
}

/// A result file in ClickBench's format.
pub fn result_json(
    system: &str,
    machine: &str,
    tags: &[&str],
    data_size: u64,
    runs: &[QueryRuns],
    comment: &str,
) -> Value {
    let round = |t: &Option<f64>| t.map(|t| (t * 1000.0).round() / 1000.0);
    json!({
        "system": system,
        "date": today(),
        "machine": machine,
        "cluster_size": 1,
        "proprietary": "no",
        "hardware": "cpu",
        "tuned": "no",
        "tags": tags,
        "comment": comment,
        "load_time": 0,
        "data_size": data_size,
        "concurrent_qps": null,
        "concurrent_error_ratio": null,
        "result": runs.iter().map(|r| r.times.iter().map(round).collect::<Vec<_>>()).collect::<Vec<_>>(),
    })
}

/// Today's date (UTC), `YYYY-MM-DD`.
pub fn today() -> String {
    let days = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() / 86_400) as i64;
    // Civil from days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + (m <= 2) as i64;
    format!("{y:04}-{m:02}-{d:02}")
}

/// ClickBench's per-query ratio against a baseline time (10 ms added to
/// both sides); a missing time counts as `penalty`.
pub fn ratio(t: Option<f64>, base: f64, penalty: f64) -> f64 {
    (0.010 + t.unwrap_or(penalty)) / (0.010 + base)
}

/// The markdown summary of several configurations' runs: hot times per
/// query with the ratio of each configuration to the first one (above 1:
/// the first is faster), the queries where the first loses listed first,
/// then totals and geometric means.
pub fn summary(configs: &[(String, Vec<QueryRuns>)], header: &str) -> String {
    let qs = queries();
    let (first, base_runs) = &configs[0];
    let penalty = |runs: &[QueryRuns]| {
        2.0 * runs.iter().filter_map(QueryRuns::hot).fold(300.0, f64::max)
    };
    // Queries left out by `--only` are neither shown nor counted as failed.
    let skipped = |r: &QueryRuns| r.error.as_deref() == Some(SKIPPED);
    let mut rows: Vec<(usize, f64)> = (0..qs.len())
        .filter(|&i| !skipped(&base_runs[i]))
        .map(|i| {
            // The first configuration's standing on this query: its best
            // ratio against the others (below 1: it loses).
            let mine = base_runs[i].hot();
            let worst = configs[1..]
                .iter()
                .filter_map(|(_, r)| r[i].hot())
                .map(|t| (0.010 + t) / (0.010 + mine.unwrap_or(f64::INFINITY)))
                .fold(f64::INFINITY, f64::min);
            (i, if worst.is_finite() { worst } else { 1.0 })
        })
        .collect();
    rows.sort_by(|a, b| a.1.total_cmp(&b.1));
    let mut md = format!(
        "{header}\n\n| query | {} | rows | ",
        configs
            .iter()
            .map(|c| c.0.as_str())
            .collect::<Vec<_>>()
            .join(" | ")
    );
    md += &configs[1..]
        .iter()
        .map(|c| format!("{} / {first}", c.0))
        .collect::<Vec<_>>()
        .join(" | ");
    md += " |\n|---|";
    md += &"---|".repeat(configs.len() * 2);
    md += "\n";
    for (i, standing) in &rows {
        let mark = if *standing < 0.95 { " (loses)" } else { "" };
        md += &format!("| Q{i}{mark} |");
        for (_, runs) in configs {
            md += &match runs[*i].hot() {
                Some(t) => format!(" {t:.3} |"),
                None => " failed |".to_string(),
            };
        }
        md += &format!(
            " {} |",
            base_runs[*i].rows.map_or("–".into(), |r| r.to_string())
        );
        for (_, runs) in &configs[1..] {
            md += &match (runs[*i].hot(), base_runs[*i].hot()) {
                (Some(t), Some(b)) => format!(" {:.2}x |", (0.010 + t) / (0.010 + b)),
                _ => " – |".into(),
            };
        }
        md += "\n";
    }
    md += "\n| configuration | total hot (s) | total cold (s) | failed | geometric mean of ClickBench ratios (hot; 1 = fastest on every query) |\n|---|---|---|---|---|\n";
    let best: Vec<f64> = (0..qs.len())
        .map(|i| {
            configs
                .iter()
                .filter_map(|(_, r)| r[i].hot())
                .fold(f64::INFINITY, f64::min)
        })
        .collect();
    for (name, runs) in configs {
        let hot: f64 = runs.iter().filter_map(QueryRuns::hot).sum();
        let cold: f64 = runs
            .iter()
            .filter_map(|r| r.times.first().copied().flatten())
            .sum();
        let failed = runs
            .iter()
            .filter(|r| r.hot().is_none() && !skipped(r))
            .count();
        let p = penalty(runs);
        let logs: f64 = runs
            .iter()
            .zip(&best)
            .filter(|(_, b)| b.is_finite())
            .map(|(r, &b)| ratio(r.hot(), b, p).ln())
            .sum();
        let n = best.iter().filter(|b| b.is_finite()).count().max(1);
        md += &format!(
            "| {name} | {hot:.3} | {cold:.3} | {failed} | {:.3} |\n",
            (logs / n as f64).exp()
        );
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::AsArray;
    use datafusion::arrow::datatypes::Int64Type;
    use datafusion::arrow::util::pretty::pretty_format_batches;

    fn sorted_lines(batches: &[RecordBatch]) -> Vec<String> {
        let text = pretty_format_batches(batches).expect("format").to_string();
        let mut lines: Vec<String> = text
            .lines()
            .skip(3)
            .filter(|l| !l.starts_with('+'))
            .map(String::from)
            .collect();
        lines.sort();
        lines
    }

    /// Cells equal, or floats within rounding (summation order differs
    /// between partitionings).
    fn same_row(a: &str, b: &str) -> bool {
        a.split('|').zip(b.split('|')).all(|(x, y)| {
            let (x, y) = (x.trim(), y.trim());
            x == y
                || match (x.parse::<f64>(), y.parse::<f64>()) {
                    (Ok(x), Ok(y)) => (x - y).abs() <= 1e-9 * x.abs().max(y.abs()),
                    _ => false,
                }
        })
    }

    /// At the smallest scale every one of the 43 queries returns rows
    /// (counts above zero), and tsjoin's answers equal DataFusion's where
    /// the query has no LIMIT (with a LIMIT, ties may pick other rows).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn all_43_queries_return_rows_and_agree() {
        let dir = tempfile::tempdir().unwrap();
        generate::generate_hits(dir.path(), generate::MIN_ROWS, 1).unwrap();
        assert!(generate::is_generated(dir.path(), generate::MIN_ROWS, 1));
        assert!(!generate::is_generated(dir.path(), generate::MIN_ROWS, 2));
        let files = dir.path().join("partitioned");
        assert_eq!(
            std::fs::read_dir(&files).unwrap().count(),
            generate::PARTITIONS
        );
        let ours = session(&files, 2, true).await.unwrap();
        let theirs = session(&dir.path().join("hits.parquet"), 2, false)
            .await
            .unwrap();
        let qs = queries();
        assert_eq!(qs.len(), 43);
        for (i, q) in qs.iter().enumerate() {
            let a = ours
                .tsjoin_sql(q)
                .await
                .unwrap()
                .collect()
                .await
                .unwrap_or_else(|e| panic!("Q{i}: {e}"));
            let rows: usize = a.iter().map(|b| b.num_rows()).sum();
            assert!(rows > 0, "Q{i} returned no rows: {q}");
            if q.starts_with("SELECT COUNT(*) FROM") {
                let n = a
                    .iter()
                    .find(|b| b.num_rows() > 0)
                    .unwrap()
                    .column(0)
                    .as_primitive::<Int64Type>()
                    .value(0);
                assert!(n > 0, "Q{i} counted nothing: {q}");
            }
            let b = theirs.tsjoin_sql(q).await.unwrap().collect().await.unwrap();
            assert_eq!(
                rows,
                b.iter().map(|b| b.num_rows()).sum::<usize>(),
                "Q{i}: row counts differ"
            );
            if !q.contains("LIMIT") {
                let (a, b) = (sorted_lines(&a), sorted_lines(&b));
                assert!(
                    a.iter().zip(&b).all(|(a, b)| same_row(a, b)),
                    "Q{i}: answers differ: {q}\n{a:?}\n{b:?}"
                );
            }
        }
        // Plausibility beyond "some rows": the shapes the queries rely on.
        let one = |sql: &'static str| {
            let ctx = ours.clone();
            async move {
                let b = ctx.sql(sql).await.unwrap().collect().await.unwrap();
                b[0].column(0).as_primitive::<Int64Type>().value(0)
            }
        };
        let total = generate::MIN_ROWS as i64;
        // SearchPhrase is mostly empty (about 87% in the real data).
        let empty_phrase =
            one("SELECT count(*) FROM hits WHERE \"SearchPhrase\" = ''").await;
        assert!(
            empty_phrase > total * 3 / 4 && empty_phrase < total * 19 / 20,
            "{empty_phrase}"
        );
        // AdvEngineID is 0 on almost every row.
        let adv = one("SELECT count(*) FROM hits WHERE \"AdvEngineID\" <> 0").await;
        assert!(adv > 0 && adv < total / 10, "{adv}");
        // Users: roughly one per 5-6 hits, heavy hitters present.
        let users = one("SELECT count(DISTINCT \"UserID\") FROM hits").await;
        assert!(users > total / 20 && users < total / 2, "{users}");
        let days = one("SELECT count(DISTINCT \"EventDate\") FROM hits").await;
        assert!((28..=31).contains(&days), "{days}");
    }
}
