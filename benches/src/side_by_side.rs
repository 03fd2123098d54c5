//! What the join benchmarks `tsjoin-bench ssb` and `tsjoin-bench tpch`
//! share: the same engine columns (tsjoin, tsjoin with
//! `tsjoin.join_filters = false`, DataFusion 55 plain and with
//! `pushdown_filters` + `reorder_filters`, then the Python peers), run by
//! run alternation of the in-process engines, the rows out of the fact
//! tables' scans, and the report pieces: time cells with ratios to tsjoin,
//! answers checked against DataFusion 55's, the JSON of every measurement.
//!
//! ```text
//! let mut notes = vec![];
//! let engines = engines(&dir, threads, tsjoin_bench::tpch::register, &mut notes).await?;
//! let res = run_all(&engines, &queries, &[LINEITEM], &args.run, "tpch.py", &dir, threads, notes).await;
//! ```

use super::{PeerRunArgs, write_report};
use datafusion::error::Result;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::joins::HashJoinExec;
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion_tsjoin::TsJoinContextExt;
use serde_json::{Map, Value, json};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;
use tsjoin_bench::runner::{self, Measurement, Query, normalise};

pub(crate) const TSJOIN: &str = "tsjoin";
pub(crate) const TSJOIN_NO_FILTERS: &str = "tsjoin (join filters off)";
pub(crate) const DATAFUSION: &str = "DataFusion 55";
pub(crate) const DATAFUSION_PUSHDOWN: &str = "DataFusion 55 pushdown_filters";

/// An in-process engine: its session, and whether SQL goes through
/// `tsjoin_sql`.
pub(crate) struct Engine {
    pub(crate) name: &'static str,
    pub(crate) ctx: SessionContext,
    pub(crate) tsjoin: bool,
}

/// The four in-process engines over `dir`, each with the tables `register`
/// declares (three when this build of tsjoin has no
/// `tsjoin.join_filters`: a note says so).
pub(crate) async fn engines(
    dir: &Path,
    threads: usize,
    register: impl AsyncFn(&SessionContext, &Path) -> Result<()>,
    notes: &mut Vec<String>,
) -> Result<Vec<Engine>> {
    let config = SessionConfig::new().with_target_partitions(threads);
    let mut pushdown = config.clone();
    pushdown.options_mut().execution.parquet.pushdown_filters = true;
    pushdown.options_mut().execution.parquet.reorder_filters = true;
    let mut out = vec![Engine {
        name: TSJOIN,
        ctx: datafusion_tsjoin::tsjoin_context(config.clone()),
        tsjoin: true,
    }];
    let no_filters = datafusion_tsjoin::tsjoin_context(config.clone());
    match no_filters
        .tsjoin_sql("SET tsjoin.join_filters = false")
        .await
    {
        Ok(_) => out.push(Engine {
            name: TSJOIN_NO_FILTERS,
            ctx: no_filters,
            tsjoin: true,
        }),
        Err(e) => {
            let note = format!(
                "'{TSJOIN_NO_FILTERS}' skipped: SET tsjoin.join_filters = false failed ({e})"
            );
            eprintln!("note: {note}");
            notes.push(note);
        }
    }
    out.push(Engine {
        name: DATAFUSION,
        ctx: SessionContext::new_with_config(config),
        tsjoin: false,
    });
    out.push(Engine {
        name: DATAFUSION_PUSHDOWN,
        ctx: SessionContext::new_with_config(pushdown),
        tsjoin: false,
    });
    for e in &out {
        register(&e.ctx, dir).await?;
    }
    Ok(out)
}

/// DataFusion 55's session among `engines` (the reference answers').
pub(crate) fn plain(engines: &[Engine]) -> &SessionContext {
    &engines
        .iter()
        .find(|e| e.name == DATAFUSION)
        .expect("engines() always has DataFusion 55")
        .ctx
}

/// The one number `sql` answers (0 when it is not a number).
pub(crate) async fn count(ctx: &SessionContext, sql: &str) -> Result<usize> {
    let batches = ctx.sql(sql).await?.collect().await?;
    Ok(normalise(&batches)
        .first()
        .and_then(|c| c.parse().ok())
        .unwrap_or(0))
}

/// A fact table, whose scans' output rows each in-process run records:
/// its name and the prefix of its columns.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Fact {
    pub(crate) name: &'static str,
    pub(crate) prefix: &'static str,
}

impl Fact {
    /// The key of the figure in a measurement's `extra` and in the JSON.
    pub(crate) fn key(&self) -> String {
        format!("{}_scan_rows", self.name)
    }

    /// Whether a scan reads this table (its columns carry the prefix).
    fn scans(&self, plan: &Arc<dyn ExecutionPlan>) -> bool {
        plan.schema()
            .fields()
            .iter()
            .any(|f| f.name().starts_with(self.prefix))
    }
}

/// The join operators of `plan`, top down: a hash join as its type
/// (`Inner`, `RightSemi`, …), any other join by its operator name.
fn joins(plan: &Arc<dyn ExecutionPlan>, out: &mut Vec<String>) {
    if let Some(j) = plan.downcast_ref::<HashJoinExec>() {
        out.push(j.join_type().to_string());
    } else if plan.name().contains("Join") {
        out.push(plan.name().to_string());
    }
    for c in plan.children() {
        joins(c, out);
    }
}

/// Runs every engine `runs` times on `query`, alternating; an engine that
/// fails is noted and left out of this query.
async fn measure(
    engines: &[Engine],
    query: &Query,
    facts: &[Fact],
    runs: usize,
    notes: &mut Vec<String>,
) -> Vec<Measurement> {
    let name = &query.name;
    let mut ms: Vec<Measurement> = engines
        .iter()
        .map(|e| Measurement {
            engine: e.name.into(),
            query: name.clone(),
            times: vec![],
            answer: None,
            extra: json!({}),
        })
        .collect();
    let mut failed = vec![false; engines.len()];
    for _ in 0..runs.max(1) {
        for (i, e) in engines.iter().enumerate() {
            if failed[i] {
                continue;
            }
            match runner::run_query(&e.ctx, e.tsjoin, &query.datafusion).await {
                Ok((batches, secs, plan)) => {
                    let mut js = vec![];
                    joins(&plan, &mut js);
                    let mut extra = Map::new();
                    for f in facts {
                        let rows = runner::scan_rows(&plan, &|p| f.scans(p));
                        extra.insert(f.key(), json!(rows));
                    }
                    extra.insert("joins".into(), json!(js));
                    ms[i].times.push(secs);
                    ms[i].answer = Some(normalise(&batches));
                    ms[i].extra = Value::Object(extra);
                }
                Err(err) => {
                    failed[i] = true;
                    notes.push(format!("{} {name} failed: {err}", e.name));
                }
            }
        }
    }
    let best: Vec<String> = ms
        .iter()
        .filter(|m| !m.times.is_empty())
        .map(|m| format!("{} {:.3} s", m.engine, m.best()))
        .collect();
    eprintln!("{name}: {}", best.join(", "));
    ms.retain(|m| !m.times.is_empty());
    ms
}

/// Every query on the in-process engines (query by query, the engines
/// alternating run by run), then on the Python peers of
/// `benches/peers/<script>` (unless `--no-peers`); `notes` gathers what
/// failed.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn run_all(
    engines: &[Engine],
    queries: &[Query],
    facts: &[Fact],
    run: &PeerRunArgs,
    script: &str,
    dir: &Path,
    threads: usize,
    mut notes: Vec<String>,
) -> Results {
    let mut results = vec![];
    for q in queries {
        results.extend(measure(engines, q, facts, run.runs, &mut notes).await);
    }
    let list = queries.iter().map(Query::peer_json).collect();
    let (ms, n) = run.peers(script, dir, threads, list, false);
    results.extend(ms.into_iter().filter(|m| !m.times.is_empty()));
    notes.extend(n);
    Results {
        results,
        notes,
        facts: facts.to_vec(),
    }
}

/// What one run measured, and the report pieces every join benchmark has.
pub(crate) struct Results {
    pub(crate) results: Vec<Measurement>,
    pub(crate) notes: Vec<String>,
    pub(crate) facts: Vec<Fact>,
}

impl Results {
    pub(crate) fn find(&self, engine: &str, query: &str) -> Option<&Measurement> {
        self.results
            .iter()
            .find(|m| m.engine == engine && m.query == query)
    }

    /// Engines in the order they first appear.
    pub(crate) fn engines(&self) -> Vec<String> {
        let mut out: Vec<String> = vec![];
        for m in &self.results {
            if !out.contains(&m.engine) {
                out.push(m.engine.clone());
            }
        }
        out
    }

    /// The in-process engines (those whose plans the runner sees).
    pub(crate) fn local_engines(&self) -> Vec<String> {
        self.engines()
            .into_iter()
            .filter(|e| e.starts_with("tsjoin") || e.starts_with("DataFusion"))
            .collect()
    }

    /// Whether `m`'s answer agrees with DataFusion 55's (None: nothing to
    /// compare).
    pub(crate) fn agrees(&self, m: &Measurement) -> Option<bool> {
        let reference = self.find(DATAFUSION, &m.query)?.answer.as_ref()?;
        let answer = m.answer.as_ref()?;
        Some(runner::same_rows(
            runner::canon_rows(answer),
            runner::canon_rows(reference),
        ))
    }

    /// `seconds (ratio to tsjoin)` of each engine for `names`, summed, as
    /// markdown cells; a sum that misses a query is marked `*`, an answer
    /// that differs from DataFusion 55's **DIFFERS**.
    pub(crate) fn cells(&self, engines: &[String], names: &[&str]) -> String {
        let sum = |e: &str| -> (f64, bool) {
            let found: Vec<f64> = names
                .iter()
                .filter_map(|q| self.find(e, q).map(Measurement::best))
                .collect();
            (found.iter().sum(), found.len() == names.len())
        };
        let (ours, ours_complete) = sum(TSJOIN);
        let mut row = String::new();
        for e in engines {
            let (t, complete) = sum(e);
            if t == 0.0 && !complete {
                row += " – |";
                continue;
            }
            let ratio = if e != TSJOIN && complete && ours_complete && ours > 0.0 {
                format!(" ({:.2}x)", t / ours)
            } else {
                String::new()
            };
            let flags: String = names
                .iter()
                .filter_map(|q| self.find(e, q))
                .filter(|m| self.agrees(m) == Some(false))
                .map(|_| " **DIFFERS**")
                .take(1)
                .collect();
            let star = if complete { "" } else { "*" };
            row += &format!(" {t:.3}{star}{ratio}{flags} |");
        }
        row
    }

    /// A markdown table header: `first`, the `extra` cells (`" name |"`,
    /// right-aligned), one column per engine.
    pub(crate) fn header(&self, first: &str, engines: &[String], extra: &str) -> String {
        let mut md = format!("| {first} |{extra}");
        for e in engines {
            md += &format!(" {e} |");
        }
        md += "\n|---|";
        md += &"---:|".repeat(engines.len() + extra.matches('|').count());
        md + "\n"
    }

    /// The note under a time table whose sums miss a failed query.
    pub(crate) fn missing_note(
        &self,
        engines: &[String],
        names: &[&str],
    ) -> &'static str {
        if engines
            .iter()
            .any(|e| names.iter().any(|q| self.find(e, q).is_none()))
        {
            "\n`*`: a query is missing from the sum (it failed; see the notes).\n"
        } else {
            ""
        }
    }

    /// One markdown section per fact table: the rows out of its scans per
    /// query and in-process engine, `extra` adding cells after the query's
    /// (under the header cells `extra_header`); and the same as JSON
    /// (`{fact_scan_rows: {query: {engine: rows}}}`).
    pub(crate) fn scan_sections(
        &self,
        queries: &[&str],
        extra_header: &str,
        extra: impl Fn(&str) -> String,
    ) -> (String, Map<String, Value>) {
        let local = self.local_engines();
        let mut md = String::new();
        let mut json = Map::new();
        for f in &self.facts {
            md += &format!(
                "\n## {} rows into the joins (out of the scan, or of the LipFilterExec above it)\n\n",
                f.name
            );
            md += &self.header("query", &local, extra_header);
            let mut per_query = Map::new();
            for q in queries {
                let mut row = format!("| {q} |{}", extra(q));
                let mut per = Map::new();
                for e in &local {
                    let n = self.find(e, q).map(|m| m.extra[f.key()].clone());
                    row += &format!(" {} |", n.clone().unwrap_or(json!("–")));
                    per.insert(e.clone(), n.unwrap_or(Value::Null));
                }
                md += &row;
                md += "\n";
                per_query.insert(q.to_string(), Value::Object(per));
            }
            json.insert(f.key(), Value::Object(per_query));
        }
        (md, json)
    }

    /// The joins of query `q`'s plans (top down), one line per in-process
    /// engine.
    pub(crate) fn joins_md(&self, q: &str) -> String {
        let mut md = String::new();
        for e in &self.local_engines() {
            if let Some(m) = self.find(e, q) {
                let js: Vec<&str> = m.extra["joins"]
                    .as_array()
                    .map(|a| a.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                md += &format!("- {e}: {}\n", js.join(", "));
            }
        }
        md
    }

    /// `engine query` of the answers that differ from DataFusion 55's.
    pub(crate) fn mismatches(&self) -> Vec<String> {
        self.results
            .iter()
            .filter(|m| self.agrees(m) == Some(false))
            .map(|m| format!("{} {}", m.engine, m.query))
            .collect()
    }

    /// The report's end: the answers that differ from DataFusion 55's or
    /// could not be checked, and the notes.
    pub(crate) fn checks_md(&self) -> String {
        let mut md = String::new();
        let mismatches = self.mismatches();
        let unchecked: Vec<String> = self
            .results
            .iter()
            .filter(|m| self.agrees(m).is_none())
            .map(|m| format!("{} {}", m.engine, m.query))
            .collect();
        if !mismatches.is_empty() {
            md += &format!(
                "\n**MISMATCH: answers differ from {DATAFUSION}'s: {}**\n",
                mismatches.join(", ")
            );
        }
        if !unchecked.is_empty() {
            md += &format!(
                "\nNot checked (no {DATAFUSION} answer): {}\n",
                unchecked.join(", ")
            );
        }
        for n in &self.notes {
            md += &format!("\nNote: {n}\n");
        }
        md
    }

    /// Every measurement as JSON: times, agreement with DataFusion 55, the
    /// answer's size and head, the fact scans' rows, the joins; `extra`
    /// adds fields.
    pub(crate) fn results_json(
        &self,
        extra: impl Fn(&Measurement) -> Map<String, Value>,
    ) -> Value {
        let list: Vec<Value> = self
            .results
            .iter()
            .map(|m| {
                let mut o = Map::new();
                o.insert("engine".into(), json!(m.engine));
                o.insert("query".into(), json!(m.query));
                o.insert("times_s".into(), json!(m.times));
                o.insert("best_s".into(), json!(m.best()));
                o.insert("agrees_with_datafusion".into(), json!(self.agrees(m)));
                o.insert("answer_rows".into(), json!(m.answer.as_ref().map(Vec::len)));
                o.insert(
                    "answer_head".into(),
                    json!(
                        m.answer
                            .as_ref()
                            .map(|a| a.iter().take(12).collect::<Vec<_>>())
                    ),
                );
                for f in &self.facts {
                    o.insert(
                        f.key(),
                        m.extra.get(f.key()).cloned().unwrap_or(Value::Null),
                    );
                }
                o.insert(
                    "joins".into(),
                    m.extra.get("joins").cloned().unwrap_or(Value::Null),
                );
                o.extend(extra(m));
                Value::Object(o)
            })
            .collect();
        Value::Array(list)
    }

    /// Writes `<stem>.json` and `<stem>.md` into `out`, and says on stderr
    /// which answers differ from DataFusion 55's (a mismatch is reported,
    /// not fatal).
    pub(crate) fn write(
        &self,
        out: &Path,
        stem: &str,
        json: &Value,
        md: &str,
    ) -> Result<()> {
        write_report(out, stem, json, md)?;
        let mismatches = self.mismatches();
        if !mismatches.is_empty() {
            eprintln!(
                "MISMATCH: {} answers differ from {DATAFUSION}'s: {}",
                mismatches.len(),
                mismatches.join(", ")
            );
        }
        Ok(())
    }
}

/// The data directory: `data`, or `benches/data/<dir_name>`; generated by
/// `generate` (with `threads` threads) when `is_generated` says it is not
/// complete, `what` naming the data set in the message.
pub(crate) fn ensure_data<R: std::fmt::Debug>(
    data: Option<&PathBuf>,
    dir_name: String,
    what: &str,
    is_generated: impl Fn(&Path) -> bool,
    generate: impl FnOnce(&Path) -> Result<R>,
) -> Result<PathBuf> {
    let dir = data
        .cloned()
        .unwrap_or_else(|| PathBuf::from("benches/data").join(dir_name));
    if !is_generated(&dir) {
        let start = Instant::now();
        let rows = generate(&dir)?;
        eprintln!(
            "generated {what} ({rows:?}) in {:.1} s into {}",
            start.elapsed().as_secs_f64(),
            dir.display()
        );
    }
    Ok(dir)
}

/// The UTC time now (`date -u`), for the JSON.
pub(crate) fn now() -> Option<String> {
    std::process::Command::new("date")
        .arg("-u")
        .arg("+%Y-%m-%dT%H:%M:%SZ")
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
}
