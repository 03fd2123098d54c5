//! Harness code shared by the tests and `tsjoin-bench` (`verify`, `fuzz`):
//! a small deterministic random generator ([`Rng`]), the naive references
//! of WINDOW JOIN ([`reference`]), ASOF JOIN ([`asof`]), HORIZON JOIN
//! ([`horizon`]) and `approx_percentile` ([`percentile`]), the
//! differential cases ([`verify`]), the SQL generator of the fuzzer
//! ([`fuzz`]) and answers as comparable text ([`text`]). Not part of the
//! query engine; kept small and dependency-free so that a test and a long
//! run by command check the same thing.
//!
//! A new operator joins the harnesses by adding its reference next to
//! [`reference::window_join`] (and a random shape with its SQL) and its
//! syntax to [`fuzz::SEEDS`].
//!
//! ```
//! use datafusion_tsjoin::testing::{Rng, reference};
//! let mut rng = Rng::new(7);
//! let left = reference::random_rows(&mut rng, 10, 100, 3);
//! let shape = reference::Shape::random(&mut rng);
//! assert_eq!(reference::window_join(&left, &left, &shape).len(), 10);
//! ```

pub mod asof;
pub mod fuzz;
pub mod horizon;
pub mod percentile;
pub mod reference;
mod rng;
pub mod text;
pub mod verify;

pub use rng::Rng;

/// A query of every kind tsjoin runs, over tables `l` and `r` of
/// [`reference::schema`]: WINDOW JOIN (fast path shapes, general path
/// shapes, INCLUDE PREVAILING, dynamic bounds), inline GROUP BY (integer,
/// string, composite keys, one group per row), both together, LIMIT …
/// OFFSET under ORDER BY, plain DataFusion, ASOF / LT JOIN (QuestDB's and
/// Snowflake's forms), HORIZON JOIN (RANGE, LIST, under a GROUP BY) and
/// `approx_percentile` / `approx_median` (grouped, global, array form). Used by the concurrency test
/// and `tsjoin-bench soak`; add new operators' queries here.
pub const MIXED_QUERIES: &[&str] = &[
    "SELECT l.id, count(*), sum(r.v), min(r.v), max(r.v) FROM l WINDOW JOIN r ON r.k = l.k \
     RANGE BETWEEN 20 milliseconds PRECEDING AND 5 milliseconds FOLLOWING ORDER BY l.id",
    "SELECT l.id, count(*), first(r.v), last(r.v) FROM l WINDOW JOIN r ON r.k = l.k AND r.i > l.i \
     RANGE BETWEEN 30 milliseconds PRECEDING AND CURRENT ROW INCLUDE PREVAILING ORDER BY l.id",
    "SELECT l.id, count(*), avg(r.i) FROM l WINDOW JOIN r \
     RANGE BETWEEN l.i milliseconds PRECEDING AND 10 milliseconds FOLLOWING ORDER BY l.id",
    "SELECT k, count(*), sum(v), min(i), max(i), avg(v) FROM r GROUP BY k ORDER BY k",
    "SELECT CAST(k AS VARCHAR) AS s, count(*), sum(i) FROM r GROUP BY s ORDER BY s",
    "SELECT k, i, count(*), sum(v) FROM r GROUP BY k, i ORDER BY k, i",
    "SELECT ts, count(*) FROM r GROUP BY ts ORDER BY ts",
    "SELECT x.k, sum(x.n) FROM (SELECT l.k, count(*) AS n FROM l WINDOW JOIN r ON r.k = l.k \
     RANGE BETWEEN 50 milliseconds PRECEDING AND CURRENT ROW) x GROUP BY x.k ORDER BY x.k",
    "SELECT * FROM (SELECT id, ts FROM r ORDER BY id LIMIT 50 OFFSET 20) ORDER BY ts DESC, id",
    "SELECT count(*), sum(v), max(ts) FROM r WHERE k > 1",
    // The matched time, not the row: among equal right times the row
    // depends on the partitions' order, the time does not.
    "SELECT l.id, r.ts FROM l ASOF JOIN r ON (k) ORDER BY l.id",
    "SELECT l.id, r.ts FROM l LT JOIN r ON (k) TOLERANCE 50T ORDER BY l.id",
    "SELECT l.id, r.ts FROM l ASOF JOIN r MATCH_CONDITION(l.ts <= r.ts) ON l.k = r.k \
     ORDER BY l.id",
    "SELECT h.offset, count(*), count(r.ts), min(r.ts), max(r.ts) FROM l HORIZON JOIN r \
     ON (k) RANGE FROM -100T TO 100T STEP 20T AS h ORDER BY h.offset",
    "SELECT l.k, h.offset, count(r.ts), max(r.ts) FROM l HORIZON JOIN r ON (k) \
     LIST (-1s, 0, 5T, 1s) AS h GROUP BY l.k, h.offset ORDER BY l.k, h.offset",
    "SELECT k, approx_percentile(abs(v), 0.9), approx_median(abs(i), 2), \
     approx_percentile(CAST(ts AS BIGINT), ARRAY[0.5, 0.99], 3) FROM r GROUP BY k ORDER BY k",
    "SELECT approx_percentile(abs(v), 0.5, 4), approx_median(CAST(ts AS BIGINT)) FROM r",
];
