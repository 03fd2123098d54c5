//! Key filters: the key pairs of joins that DataFusion pushes to no scan
//! (a join on keys from several tables, TPC-H Q5's `l_suppkey = s_suppkey
//! AND c_nationkey = s_nationkey`) filter the scans their probe columns
//! come from. Same answers with and without them over random snowflakes
//! (inner, semi, anti and outer joins; NULL and duplicate keys), and exact
//! filters where they are placed.

use crate::join_filter::{
    executed, register_star, session, tables, with_and_without, write_table,
};
use crate::support::{case_count, cells};
use datafusion::arrow::array::{ArrayRef, Float64Array, Int64Array, RecordBatch};
use datafusion::arrow::datatypes::{Field, Schema};
use datafusion::physical_plan::ExecutionPlan;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::path::Path;
use std::sync::Arc;

/// Rows the key filters (named `probe=build`) of `plan` checked and let
/// through.
fn key_filter_rows(plan: &Arc<dyn ExecutionPlan>) -> (usize, usize) {
    let own = if plan.name() == "LipFilterExec" {
        plan.metrics().map_or((0, 0), |m| {
            let sum = |suffix: &str| {
                m.iter()
                    .filter(|x| {
                        let name = x.value().name();
                        name.contains('=') && name.ends_with(suffix)
                    })
                    .map(|x| x.value().as_usize())
                    .sum::<usize>()
            };
            (sum(".rows_in"), sum(".rows_out"))
        })
    } else {
        (0, 0)
    };
    plan.children()
        .into_iter()
        .map(key_filter_rows)
        .fold(own, |(i, o), (ci, co)| (i + ci, o + co))
}

/// The `LipFilterExec` of `plan` that applies a filter named `name`.
fn lip_filtering<'a>(
    plan: &'a Arc<dyn ExecutionPlan>,
    name: &str,
) -> Option<&'a Arc<dyn ExecutionPlan>> {
    let line = datafusion::physical_plan::displayable(plan.as_ref())
        .one_line()
        .to_string();
    if plan.name() == "LipFilterExec" && line.contains(name) {
        return Some(plan);
    }
    plan.children()
        .into_iter()
        .find_map(|c| lip_filtering(c, name))
}

/// A nullable Int64 column of `n` values from `0..domain`, about
/// `nulls` in 100 NULL.
fn ints(rng: &mut StdRng, n: usize, domain: i64, nulls: u32) -> ArrayRef {
    Arc::new(Int64Array::from(
        (0..n)
            .map(|_| {
                (rng.random_range(0..100) >= nulls).then(|| rng.random_range(0..domain))
            })
            .collect::<Vec<_>>(),
    ))
}

/// Writes `columns` as table `name` under `dir` in random files and row
/// groups.
fn table(rng: &mut StdRng, dir: &Path, name: &str, columns: Vec<(&str, ArrayRef)>) {
    let schema = Schema::new(
        columns
            .iter()
            .map(|(n, a)| Field::new(*n, a.data_type().clone(), true))
            .collect::<Vec<_>>(),
    );
    let batch = RecordBatch::try_new(
        Arc::new(schema),
        columns.into_iter().map(|(_, a)| a).collect(),
    )
    .unwrap();
    let files = rng.random_range(1..4);
    let group = 1 + rng.random_range(0..batch.num_rows().max(1));
    write_table(&dir.join(name), &batch, files, group);
}

/// A random snowflake like TPC-H Q5's: `l(lo, ls, lx, m)` joined to
/// `o(ok, oc)`, `o` to `c(ck, cn)`, and `l` to `s(sk, sn, sa)` on two keys
/// (from `l` and `c`, or both from `l`), that last join inner, semi
/// (`EXISTS`), anti (`NOT EXISTS`) or left outer. NULL, duplicate and
/// missing keys everywhere. Returns the query.
fn random_snowflake(rng: &mut StdRng, dir: &Path) -> String {
    let (nc, no, nl, ns) = (
        rng.random_range(0..300),
        rng.random_range(0..600),
        rng.random_range(0..3000),
        rng.random_range(0..60),
    );
    let suppliers = rng.random_range(1..80);
    let ck = ints(rng, nc, nc as i64 + 1, 3);
    let cn = ints(rng, nc, 6, 5);
    table(rng, dir, "c", vec![("ck", ck), ("cn", cn)]);
    let ok = ints(rng, no, no as i64 + 1, 3);
    let oc = ints(rng, no, nc as i64 + 20, 5);
    table(rng, dir, "o", vec![("ok", ok), ("oc", oc)]);
    let lo = ints(rng, nl, no as i64 + 20, 5);
    let ls = ints(rng, nl, suppliers, 5);
    let lx = ints(rng, nl, 6, 5);
    let m: ArrayRef = Arc::new(Float64Array::from(
        (0..nl)
            .map(|i| match i % 13 {
                0 => None,
                1 => Some(f64::NAN),
                _ => Some(rng.random_range(-100.0..100.0)),
            })
            .collect::<Vec<_>>(),
    ));
    table(
        rng,
        dir,
        "l",
        vec![("lo", lo), ("ls", ls), ("lx", lx), ("m", m)],
    );
    let sk = ints(rng, ns, suppliers, 3);
    let sn = ints(rng, ns, 6, 5);
    let sa = ints(rng, ns, 4, 0);
    table(rng, dir, "s", vec![("sk", sk), ("sn", sn), ("sa", sa)]);

    let nation = if rng.random_bool(0.7) { "c.cn" } else { "l.lx" };
    let a = rng.random_range(1..=4);
    let spine = "c.ck = o.oc AND l.lo = o.ok";
    match rng.random_range(0..4) {
        0 => format!(
            "SELECT s.sn, count(*), sum(l.m), count(l.m) FROM c, o, l, s \
             WHERE {spine} AND l.ls = s.sk AND {nation} = s.sn AND s.sa < {a} \
             GROUP BY s.sn ORDER BY s.sn"
        ),
        1 => format!(
            "SELECT c.cn, count(*), sum(l.m), count(l.m) FROM c, o, l WHERE {spine} \
             AND EXISTS (SELECT 1 FROM s WHERE s.sk = l.ls AND s.sn = {nation} AND s.sa < {a}) \
             GROUP BY c.cn ORDER BY c.cn"
        ),
        2 => format!(
            "SELECT c.cn, count(*), sum(l.m), count(l.m) FROM c, o, l WHERE {spine} \
             AND NOT EXISTS (SELECT 1 FROM s WHERE s.sk = l.ls AND s.sn = {nation} AND s.sa < {a}) \
             GROUP BY c.cn ORDER BY c.cn"
        ),
        _ => format!(
            "SELECT c.cn, count(*), sum(l.m), count(s.sk) FROM c JOIN o ON c.ck = o.oc \
             JOIN l ON l.lo = o.ok LEFT JOIN s ON l.ls = s.sk AND {nation} = s.sn AND s.sa < {a} \
             GROUP BY c.cn ORDER BY c.cn"
        ),
    }
}

/// Random snowflakes (1–4 partitions, collect-left or partitioned joins,
/// random batch and row-group sizes): with join filters, the answer is
/// the one without; the key filters ran and dropped rows in many cases.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_snowflakes_answer_as_without_join_filters() {
    let cases = case_count("TSJOIN_KEY_FILTER_CASES", 40);
    let mut dropped = 0;
    for case in 0..cases {
        let mut rng = StdRng::seed_from_u64(9100 + case);
        let dir = tempfile::tempdir().unwrap();
        let sql = random_snowflake(&mut rng, dir.path());
        let (with, without) = with_and_without(&mut rng, dir.path(), &sql, case).await;
        let off = key_filter_rows(&without).0;
        assert_eq!(off, 0, "case {case}: key filters ran while off");
        let (rows_in, rows_out) = key_filter_rows(&with);
        dropped += usize::from(rows_out < rows_in);
    }
    assert!(
        dropped * 3 >= cases as usize,
        "key filters dropped rows in only {dropped} of {cases} cases"
    );
}

/// Q5's shape, fixed: the supplier join's keys `l.ls = s.sk` and
/// `c.cn = s.sn` filter the scans of `l` and `c` (`l` with exact bits: only
/// rows whose key some selected supplier holds pass); outer and anti joins,
/// and joins whose build reads a whole table, get none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_key_joins_filter_the_scans_their_keys_come_from() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = session(2, 1000, true);
    tables(
        &ctx,
        dir.path(),
        &[
            ("c", "SELECT value AS ck, value % 25 AS cn FROM generate_series(1, 3000)"),
            ("o", "SELECT value AS ok, value % 3000 + 1 AS oc FROM generate_series(1, 20000)"),
            (
                "l",
                "SELECT value % 20000 + 1 AS lo, value % 1000 AS ls, value AS m \
                   FROM generate_series(1, 80000)",
            ),
            ("s", "SELECT value AS sk, value % 25 AS sn FROM generate_series(0, 999)"),
        ],
    )
    .await;
    // Suppliers of nations 0..5: 200 of 1000; customers of those nations: a
    // fifth.
    let sql = "SELECT s.sn, count(*), sum(l.m) FROM c, o, l, s \
               WHERE c.ck = o.oc AND l.lo = o.ok AND l.ls = s.sk AND c.cn = s.sn \
               AND s.sn < 5 GROUP BY s.sn ORDER BY s.sn";
    let (physical, batches) = executed(&ctx, sql).await;
    let without = session(2, 1000, false);
    register_star(&without, dir.path()).await;
    let (_, want) = executed(&without, sql).await;
    assert_eq!(cells(&batches), cells(&want));
    let plan = datafusion::physical_plan::displayable(physical.as_ref())
        .indent(false)
        .to_string();
    assert!(plan.contains("ls=sk: exact_bits"), "{plan}");
    // Placed; whether it is taken up depends on timing: the build side of a
    // collect-left join starts with the plan (its coalescing starts every
    // input partition), maybe before the supplier build ends.
    assert!(plan.contains("cn=sn"), "{plan}");
    assert!(plan.contains("LipBuildKeysExec: key=sk"), "{plan}");
    // Both of `l`'s filters are exact and taken up before its first row
    // (its joins' builds are done first): exactly the rows that match both
    // builds pass.
    let l = lip_filtering(&physical, "ls=sk").expect("l's LipFilterExec");
    let want = crate::support::query_rows(
        &without,
        "SELECT count(*) FROM l WHERE l.ls IN (SELECT sk FROM s WHERE sn < 5) \
         AND l.lo IN (SELECT ok FROM o WHERE o.oc IN (SELECT ck FROM c WHERE cn < 5))",
    )
    .await;
    let out = l.metrics().unwrap().output_rows().unwrap();
    assert_eq!(vec![vec![out.to_string()]], want, "{plan}");
    let (rows_in, rows_out) = key_filter_rows(&physical);
    assert!(
        rows_out < rows_in,
        "{rows_out} of {rows_in} rows passed: {plan}"
    );

    // Outer and anti joins keep (or answer by) the rows that match nothing;
    // a build that reads its whole table holds every key (nothing to drop).
    for sql in [
        "SELECT s.sn, count(*) FROM c, o, l, s WHERE c.ck = o.oc AND l.lo = o.ok \
         AND l.ls = s.sk AND c.cn = s.sn GROUP BY s.sn ORDER BY s.sn",
        "SELECT count(*), count(s.sk) FROM c JOIN o ON c.ck = o.oc JOIN l ON l.lo = o.ok \
         LEFT JOIN s ON l.ls = s.sk AND c.cn = s.sn AND s.sn < 5",
        "SELECT count(*) FROM c, o, l WHERE c.ck = o.oc AND l.lo = o.ok AND NOT EXISTS \
         (SELECT 1 FROM s WHERE s.sk = l.ls AND s.sn = c.cn AND s.sn < 5)",
    ] {
        let (physical, batches) = executed(&ctx, sql).await;
        let (_, want) = executed(&without, sql).await;
        assert_eq!(cells(&batches), cells(&want), "{sql}");
        let plan = datafusion::physical_plan::displayable(physical.as_ref())
            .indent(false)
            .to_string();
        assert!(!plan.contains("ls=sk") && !plan.contains("cn=sn"), "{plan}");
    }
}
