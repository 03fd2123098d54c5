//! The generated tables, their registration, the 22 queries on them, and
//! where DataFusion puts Q7's and Q19's ORs.

use super::queries::{
    QUERIES, REFERENCE_ERRATA, clickhouse, matches_reference, queries, reference,
};
use super::*;
use crate::runner::{canon_rows, normalise, same_rows};
use datafusion::prelude::SessionConfig;
use std::collections::BTreeMap;

/// SF 0.01 in a temporary directory, generated once for all the tests.
fn data() -> &'static Path {
    static DIR: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        generate(dir.path(), &TpchConfig::new(0.01), 2).unwrap();
        dir
    })
    .path()
}

fn config() -> SessionConfig {
    SessionConfig::new().with_target_partitions(2)
}

/// Plain DataFusion (`false`) or tsjoin (`true`) over the SF 0.01 tables.
async fn context(tsjoin: bool) -> SessionContext {
    let ctx = if tsjoin {
        datafusion_tsjoin::tsjoin_context(config())
    } else {
        SessionContext::new_with_config(config())
    };
    register(&ctx, data()).await.unwrap();
    ctx
}

fn query(name: &str) -> String {
    queries(0.01)
        .into_iter()
        .find(|q| q.name == name)
        .unwrap()
        .datafusion
}

#[test]
fn files_follow_the_scale_factor() {
    let c = TpchConfig::new(10.0);
    assert_eq!(c.files(Table::LineItem), 61);
    assert_eq!(c.files(Table::Orders), 15);
    assert_eq!(c.files(Table::PartSupp), 8);
    assert_eq!(c.files(Table::Supplier), 1);
    assert_eq!(c.files(Table::Region), 1);
    let c = TpchConfig::new(0.01);
    assert_eq!((c.files(Table::LineItem), c.files(Table::Orders)), (2, 2));
    assert_eq!(c.files(Table::Customer), 1);
    assert_eq!(c.dir_name(), "tpch-sf0.01");
    assert!(is_generated(data(), &c));
    assert!(!is_generated(data(), &TpchConfig::new(0.02)));
    let lineitem: Vec<_> = std::fs::read_dir(data().join("lineitem"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(lineitem.len(), 2, "{lineitem:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registered_tables_have_the_generator_types_rows_and_keys() {
    let ctx = context(false).await;
    // TPC-H 4.2.5 at SF 0.01; lineitem is dbgen's count.
    let rows = [
        ("region", 5),
        ("nation", 25),
        ("supplier", 100),
        ("customer", 1_500),
        ("part", 2_000),
        ("partsupp", 8_000),
        ("orders", 15_000),
        ("lineitem", 60_175),
    ];
    for (t, (name, n)) in Table::ALL.iter().zip(rows) {
        assert_eq!(t.name(), name);
        let provider = ctx.table_provider(name).await.unwrap();
        // The DDL's SQL types come back as the generator's Arrow types:
        // Decimal128(15, 2), Date32, Utf8View (VARCHAR in DataFusion 55).
        let declared: Vec<_> = provider
            .schema()
            .fields()
            .iter()
            .map(|f| (f.name().clone(), f.data_type().clone(), f.is_nullable()))
            .collect();
        let written: Vec<_> = t
            .schema()
            .fields()
            .iter()
            .map(|f| (f.name().clone(), f.data_type().clone(), false))
            .collect();
        assert_eq!(declared, written, "{name}");
        let constraints = provider.constraints().expect("a primary key");
        assert!(format!("{constraints:?}").contains("PrimaryKey"), "{name}");
        let count = ctx
            .sql(&format!("SELECT count(*) FROM {name}"))
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        assert_eq!(normalise(&count), [n.to_string()], "{name}");
    }
    let types: BTreeMap<String, String> = [
        ("lineitem", "l_extendedprice"),
        ("lineitem", "l_shipdate"),
        ("lineitem", "l_shipmode"),
        ("lineitem", "l_linenumber"),
        ("orders", "o_orderkey"),
    ]
    .iter()
    .map(|(t, c)| {
        let schema = Table::ALL.iter().find(|x| x.name() == *t).unwrap().schema();
        let f = schema.field_with_name(c).unwrap().data_type().to_string();
        (c.to_string(), f)
    })
    .collect();
    assert_eq!(types["l_extendedprice"], "Decimal128(15, 2)");
    assert_eq!(types["l_shipdate"], "Date32");
    assert_eq!(types["l_shipmode"], "Utf8View");
    assert_eq!(types["l_linenumber"], "Int32");
    assert_eq!(types["o_orderkey"], "Int64");
}

#[test]
fn same_bytes_whatever_the_threads() {
    let files = |dir: &Path| {
        let mut out = BTreeMap::new();
        for t in Table::ALL {
            for e in std::fs::read_dir(dir.join(t.name())).unwrap() {
                let p = e.unwrap().path();
                out.insert(
                    p.strip_prefix(dir).unwrap().to_owned(),
                    std::fs::read(&p).unwrap(),
                );
            }
        }
        out
    };
    let c = TpchConfig::new(0.002);
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let rows = generate(a.path(), &c, 1).unwrap();
    generate(b.path(), &c, 3).unwrap();
    assert_eq!(files(a.path()), files(b.path()));
    assert_eq!(rows[0], (Table::Region, 5));
    assert_eq!(rows[6], (Table::Orders, 3_000));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_22_queries_run_and_tsjoin_answers_as_datafusion() {
    let (plain, ours) = (context(false).await, context(true).await);
    let mut empty = vec![];
    for q in queries(0.01) {
        let expected = plain
            .sql(&q.datafusion)
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        let got = datafusion_tsjoin::TsJoinContextExt::tsjoin_sql(&ours, &q.datafusion)
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        let (expected, got) = (normalise(&expected), normalise(&got));
        assert!(
            same_rows(canon_rows(&got), canon_rows(&expected)),
            "{}: {got:?} vs {expected:?}",
            q.name
        );
        if expected.is_empty() {
            empty.push(q.name);
        }
    }
    // Every query has an answer at SF 0.01 (Q17's is one NULL row).
    assert!(empty.is_empty(), "{empty:?}");
}

#[test]
fn queries_and_answers() {
    assert_eq!(QUERIES.len(), 22);
    let qs = queries(1.0);
    for (i, q) in qs.iter().enumerate() {
        assert_eq!(q.name, format!("q{}", i + 1));
        // One statement each (Q15's view is a CTE).
        assert!(!q.datafusion.contains(';'), "{}", q.name);
        assert_eq!(q.duckdb, q.datafusion);
        let answer = reference(&q.name).unwrap();
        assert!(!answer.is_empty(), "{}", q.name);
    }
    assert!(!qs[14].datafusion.to_lowercase().contains("create view"));
    // The header is not a row; cells are trimmed.
    let q1 = reference("q1").unwrap();
    assert_eq!(q1.len(), 4);
    assert!(q1[0].starts_with("A|F|37734107.00|56586554400.73|"));
    assert_eq!(reference("q3").unwrap()[2], "492164|390324.06|1995-02-19|0");
    assert_eq!(reference("q16").unwrap().len(), 18_314);
    assert!(reference("q23").is_none() && reference("x1").is_none());
    // Q11's fraction is 0.0001 / SF.
    assert!(queries(0.01)[10].datafusion.contains("* 0.01\n"));
    assert!(queries(100.0)[10].datafusion.contains("* 0.000001\n"));
    // ClickHouse: the same parameters, SQL's semantics through settings.
    assert_eq!(clickhouse("q1", "select 1"), "select 1");
    assert!(qs[5].clickhouse.contains("between 0.05 and 0.07"));
    assert!(
        qs[16]
            .clickhouse
            .ends_with("SETTINGS aggregate_functions_null_for_empty = 1")
    );
}

#[test]
fn answers_are_checked_by_the_validation_rules() {
    let q1 = reference("q1").unwrap();
    assert_eq!(matches_reference("q1", &q1), Some(true));
    // Exact decimals as DataFusion prints them; rows in another order.
    let mut exact: Vec<String> =
        q1.iter().map(|r| r.replace("|0.05|", "|0.0500|")).collect();
    exact.reverse();
    assert_eq!(matches_reference("q1", &exact), Some(true));
    // A count one off, a sum $101 off, a row missing: differs.
    let count = q1[0].replace("|1478493", "|1478494");
    assert_eq!(
        matches_reference("q1", &[count, q1[1].clone(), q1[2].clone(), q1[3].clone()]),
        Some(false)
    );
    let sum = q1[0].replace("|37734107.00|", "|37734208.00|");
    assert_eq!(
        matches_reference("q1", &[sum, q1[1].clone(), q1[2].clone(), q1[3].clone()]),
        Some(false)
    );
    assert_eq!(matches_reference("q1", &q1[1..]), Some(false));
    // An average within 1% (after rounding) matches; 2% off does not.
    assert_eq!(
        matches_reference("q17", &["348406.054286".into()]),
        Some(true)
    );
    assert_eq!(
        matches_reference("q17", &["348506.054286".into()]),
        Some(false)
    );
    assert_eq!(
        matches_reference("q8", &["1995|0.03443589".into(), "1996|0.04148552".into()]),
        Some(true)
    );
    assert_eq!(
        matches_reference("q8", &["1995|0.04443589".into(), "1996|0.04148552".into()]),
        Some(false)
    );
    // Text is compared trimmed (the answers are fixed-width).
    let q20 = reference("q20").unwrap();
    let padded: Vec<String> = q20.iter().map(|r| format!(" {r} ")).collect();
    assert_eq!(matches_reference("q20", &padded), Some(true));
    // Q11's keys are not compared (an erratum), its values are.
    assert_eq!(REFERENCE_ERRATA[0].0, "q11");
    let q11 = reference("q11").unwrap();
    let full: Vec<String> = q11
        .iter()
        .map(|r| {
            let (key, value) = r.split_once('|').unwrap();
            format!("{key}42|{value}")
        })
        .collect();
    assert_eq!(matches_reference("q11", &full), Some(true));
    assert_eq!(matches_reference("q11", &full[1..]), Some(false));
    assert_eq!(matches_reference("q0", &q1), None);
}

/// The `predicate=` of the scans whose first projected column starts with
/// `prefix`, from an indented physical plan.
fn scan_predicates(physical: &str, prefix: &str) -> Vec<String> {
    physical
        .lines()
        .filter(|l| {
            l.contains("DataSourceExec") && l.contains(&format!("projection=[{prefix}"))
        })
        .filter_map(|l| {
            let p = l.split(", predicate=").nth(1)?;
            Some(p.split(", pruning_predicate=").next()?.to_string())
        })
        .collect()
}

/// TPC-H Q7 and Q19 on plain DataFusion and on tsjoin: the partial
/// push-down of disjunctions (`extract_or_clauses_for_join`, DataFusion
/// 14) puts one OR per table below the joins, down to the scans.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ors_are_pushed_to_each_table_scan_in_q7_and_q19() {
    for tsjoin in [false, true] {
        let ctx = context(tsjoin).await;

        // Q7: `(n1 = FRANCE AND n2 = GERMANY) OR (n1 = GERMANY AND n2 =
        // FRANCE)` stays at the join and is relaxed to `n_name = 'FRANCE'
        // OR n_name = 'GERMANY'` on each of the two nation scans.
        let (logical, physical) = explain(&ctx, &query("q7"), tsjoin).await.unwrap();
        let scans: Vec<&str> = logical
            .lines()
            .filter(|l| l.trim_start().starts_with("TableScan: nation"))
            .collect();
        assert_eq!(scans.len(), 2, "{logical}");
        for s in &scans {
            assert!(
                s.contains("partial_filters=[nation.n_name = Utf8View(\"FRANCE\") OR nation.n_name = Utf8View(\"GERMANY\")]")
                    || s.contains("partial_filters=[nation.n_name = Utf8View(\"GERMANY\") OR nation.n_name = Utf8View(\"FRANCE\")]"),
                "{s}"
            );
        }
        let nation = scan_predicates(&physical, "n_nationkey");
        assert_eq!(nation.len(), 2, "{physical}");
        for p in &nation {
            assert!(
                p == "n_name@1 = FRANCE OR n_name@1 = GERMANY"
                    || p == "n_name@1 = GERMANY OR n_name@1 = FRANCE",
                "{p}"
            );
        }
        // Below the join that keeps the whole disjunction.
        let lines: Vec<&str> = physical.lines().collect();
        let depth = |l: &str| l.len() - l.trim_start().len();
        let join = lines
            .iter()
            .position(|l| {
                l.contains("HashJoinExec") && l.contains("n_name@1 = GERMANY OR")
            })
            .expect("the join keeps the OR");
        for (i, l) in lines.iter().enumerate() {
            if l.contains("DataSourceExec") && l.contains("projection=[n_nationkey") {
                assert!(i > join && depth(l) > depth(lines[join]), "{physical}");
            }
        }
        assert!(or_lines(&physical).len() >= 5, "{physical}");

        // Q19: three disjuncts over part and lineitem. Each table's share
        // of every disjunct, ORed, reaches that table's scan.
        let (_, physical) = explain(&ctx, &query("q19"), tsjoin).await.unwrap();
        let part = scan_predicates(&physical, "p_partkey");
        assert_eq!(part.len(), 1, "{physical}");
        let part = &part[0];
        for want in [
            "p_brand@3 = Brand#12 AND p_container@6 IN (SET) ([SM CASE, SM BOX, SM PACK, SM PKG]) AND p_size@5 <= 5 OR",
            "p_brand@3 = Brand#23 AND p_container@6 IN (SET) ([MED BAG, MED BOX, MED PKG, MED PACK]) AND p_size@5 <= 10 OR",
            "p_brand@3 = Brand#34 AND p_container@6 IN (SET) ([LG CASE, LG BOX, LG PACK, LG PKG]) AND p_size@5 <= 15",
        ] {
            assert!(part.contains(want), "{part}");
        }
        let lineitem = scan_predicates(&physical, "l_partkey");
        assert_eq!(lineitem.len(), 1, "{physical}");
        let lineitem = &lineitem[0];
        for want in [
            // The ORs common to all three disjuncts, and the quantities'.
            "(l_shipmode@14 = AIR OR l_shipmode@14 = AIR REG) AND l_shipinstruct@13 = DELIVER IN PERSON",
            "(l_quantity@4 >= 1.00 AND l_quantity@4 <= 11.00 OR l_quantity@4 >= 10.00 AND l_quantity@4 <= 20.00 OR l_quantity@4 >= 20.00 AND l_quantity@4 <= 30.00)",
        ] {
            assert!(lineitem.contains(want), "{lineitem}");
        }
    }
}

#[test]
fn or_lines_keep_the_depth_and_drop_file_lists() {
    let plan = "HashJoinExec: mode=CollectLeft, filter=a@0 = 1 OR b@1 = 2\n  \
                DataSourceExec: file_groups={2 groups: [[x/a.parquet:0..10], [x/b.parquet]]}, \
                projection=[a], file_type=parquet, predicate=a@0 = 1 OR a@0 = 3, \
                pruning_predicate=a_min@0 <= 1 OR a_min@0 <= 3, required_guarantees=[]\n  \
                DataSourceExec: file_groups={1 group: [[y.parquet]]}, projection=[b]";
    assert_eq!(
        or_lines(plan),
        [
            "HashJoinExec: mode=CollectLeft, filter=a@0 = 1 OR b@1 = 2",
            "  DataSourceExec: projection=[a], file_type=parquet, predicate=a@0 = 1 OR a@0 = 3",
        ]
    );
}
