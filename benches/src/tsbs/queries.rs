//! The QuestDB blog's three filter queries and the 13 TSBS IoT query types
//! (`shared/benchdata/tsbs_iot/QUERY_TYPES.md`), each written once and
//! rendered for every engine's dialect.
//!
//! Templates use three macros for what the dialects spell differently:
//! `BIN10(x)` (10-minute bucket), `BIN1D(x)` (day bucket), `EPOCH_S(x)`
//! (seconds since the epoch, a double). Window `lead`/`lag` are rewritten to
//! ClickHouse's `leadInFrame`/`lagInFrame` over the whole partition, with
//! `toNullable` so that the missing neighbour is NULL as in SQL.
//!
//! ```
//! use tsjoin_bench::tsbs::{TsbsConfig, queries::{Dialect, queries}};
//! let qs = queries(&TsbsConfig::default());
//! assert_eq!(qs.len(), 16);
//! assert!(qs[1].sql(Dialect::Tsjoin).contains("LIMIT -10"));
//! ```

use super::{DAY_US, FLEETS, START_US, TsbsConfig, day_name};
use crate::generate::Rng;

/// An engine's SQL dialect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// tsjoin's SQL (QuestDB's `LIMIT -n`).
    Tsjoin,
    /// DataFusion 55's plain SQL.
    DataFusion,
    /// DuckDB.
    DuckDb,
    /// ClickHouse (chdb).
    ClickHouse,
}

/// How answers are compared across engines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// The rows as a multiset (floats with a tolerance).
    Rows,
    /// Only column `n` (the timestamps of a LIMIT that ties on `ts`: which
    /// of the trucks reporting at the same instant come out is the engine's
    /// choice).
    Column(usize),
}

/// One benchmark query.
#[derive(Debug, Clone)]
pub struct Query {
    /// TSBS label, or `blog-q1`..`blog-q3`.
    pub name: &'static str,
    /// The template (macros unexpanded).
    pub template: String,
    /// tsjoin's own spelling when it differs (QuestDB's `LIMIT -10`).
    pub tsjoin: Option<String>,
    /// How answers are compared.
    pub check: Check,
}

impl Query {
    /// The SQL for `dialect`.
    ///
    /// ```
    /// use tsjoin_bench::tsbs::{TsbsConfig, queries::{Dialect, queries}};
    /// let q = &queries(&TsbsConfig::default())[8];
    /// assert!(q.sql(Dialect::ClickHouse).contains("toStartOfTenMinutes(ts)"));
    /// ```
    pub fn sql(&self, dialect: Dialect) -> String {
        if dialect == Dialect::Tsjoin
            && let Some(s) = &self.tsjoin
        {
            return s.clone();
        }
        render(&self.template, dialect)
    }
}

/// Expands the macros for `dialect`.
pub fn render(template: &str, dialect: Dialect) -> String {
    let (bin10, bin1d, epoch) = match dialect {
        Dialect::Tsjoin | Dialect::DataFusion => (
            "date_bin(INTERVAL '10 minutes', {})",
            "date_bin(INTERVAL '1 day', {})",
            "date_part('epoch', {})",
        ),
        Dialect::DuckDb => (
            "time_bucket(INTERVAL '10 minutes', {})",
            "time_bucket(INTERVAL '1 day', {})",
            "epoch({})",
        ),
        // DateTime64, so that buckets come out as timestamps (not seconds).
        Dialect::ClickHouse => (
            "toDateTime64(toStartOfTenMinutes({}), 6)",
            "toDateTime64(toStartOfDay({}), 6)",
            "toUnixTimestamp({})",
        ),
    };
    let mut s = expand(template, "BIN10(", bin10);
    s = expand(&s, "BIN1D(", bin1d);
    s = expand(&s, "EPOCH_S(", epoch);
    if dialect == Dialect::ClickHouse {
        s = expand(&s, "lead(", "leadInFrame(toNullable({}))");
        s = expand(&s, "lag(", "lagInFrame(toNullable({}))");
        s = s.replace(
            " OVER (PARTITION BY name ORDER BY ten_minutes",
            " OVER (PARTITION BY name ORDER BY ten_minutes \
             ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING",
        );
        s = s.replace(
            "ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING, model NULLS LAST)",
            ", model NULLS LAST ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)",
        );
    }
    s
}

/// Replaces every `name(arg)` (balanced parentheses) by `format` with
/// `{}` standing for `arg`.
fn expand(s: &str, name: &str, format: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(at) = rest.find(name) {
        out.push_str(&rest[..at]);
        let args = &rest[at + name.len()..];
        let mut depth = 1;
        let end = args
            .char_indices()
            .find(|&(_, c)| {
                depth += match c {
                    '(' => 1,
                    ')' => -1,
                    _ => 0,
                };
                depth == 0
            })
            .map_or(args.len(), |(i, _)| i);
        out.push_str(&format.replace("{}", &args[..end]));
        rest = args.get(end + 1..).unwrap_or("");
    }
    out.push_str(rest);
    out
}

/// `'YYYY-MM-DD HH:MM:SS.ffffff'` of a microsecond timestamp.
pub fn ts_literal(us: i64) -> String {
    let day = (us - START_US).div_euclid(DAY_US);
    let rest = (us - START_US).rem_euclid(DAY_US);
    let (s, frac) = (rest / 1_000_000, rest % 1_000_000);
    format!(
        "'{} {:02}:{:02}:{:02}.{frac:06}'",
        day_name(day),
        s / 3600,
        s / 60 % 60,
        s % 60
    )
}

/// The random parameters of one run, drawn from the data's seed as TSBS's
/// query generator draws them.
#[derive(Debug, Clone)]
pub struct Params {
    /// `{fleet}`.
    pub fleet: &'static str,
    /// `{truck}`.
    pub truck: String,
    /// `{start}` of the 10-minute, 4-hour and 24-hour windows (µs).
    pub starts: [i64; 3],
}

/// Window lengths of stationary-trucks, long-driving-sessions and
/// long-daily-sessions (µs).
const WINDOWS: [i64; 3] = [600_000_000, 4 * 3_600_000_000, 24 * 3_600_000_000];

impl Params {
    /// Draws the parameters for `config`.
    pub fn new(config: &TsbsConfig) -> Self {
        let mut rng = Rng::new(config.seed ^ 0x9E0_u64);
        let fleet = FLEETS[(rng.next_u64() % 4) as usize];
        let truck = format!("truck_{}", rng.next_u64() % config.trucks.max(1) as u64);
        let span = config.end_us() - START_US;
        let starts = WINDOWS
            .map(|len| START_US + ((span - len).max(1) as f64 * rng.unit()) as i64);
        Self {
            fleet,
            truck,
            starts,
        }
    }
}

const BLOG_WHERE: &str = "velocity > 75.0 AND fuel_consumption < 10.0";

/// The 16 queries for `config`: the blog's three, then TSBS's 13.
pub fn queries(config: &TsbsConfig) -> Vec<Query> {
    let p = Params::new(config);
    let fleet = p.fleet;
    let window = |i: usize| {
        format!(
            "ts >= {} AND ts < {}",
            ts_literal(p.starts[i]),
            ts_literal(p.starts[i] + WINDOWS[i])
        )
    };
    let q = |name: &'static str, template: String| Query {
        name,
        template,
        tsjoin: None,
        check: Check::Rows,
    };
    let latest = |table: &str, cols: &str, cond: &str| {
        format!(
            "SELECT {cols} FROM (SELECT {cols}, row_number() OVER (PARTITION BY name, driver \
             ORDER BY ts DESC) AS rn FROM {table} WHERE name IS NOT NULL AND fleet = '{fleet}') t \
             WHERE rn = 1{cond}"
        )
    };
    let sessions = |i: usize, min: u32| {
        format!(
            "SELECT name, driver FROM (SELECT name, driver, BIN10(ts) AS ten_minutes \
             FROM readings WHERE {} AND name IS NOT NULL AND fleet = '{fleet}' \
             GROUP BY name, driver, ten_minutes HAVING avg(velocity) > 1) r \
             GROUP BY name, driver HAVING count(ten_minutes) > {min}",
            window(i)
        )
    };
    vec![
        q(
            "blog-q1",
            "SELECT * FROM readings WHERE velocity > 90.0 AND latitude BETWEEN 7.75 AND 7.80 \
             AND longitude BETWEEN 14.90 AND 14.95"
                .into(),
        ),
        Query {
            name: "blog-q2",
            template: format!(
                "SELECT * FROM readings WHERE {BLOG_WHERE} ORDER BY ts DESC LIMIT 10"
            ),
            tsjoin: Some(format!("SELECT * FROM readings WHERE {BLOG_WHERE} LIMIT -10")),
            check: Check::Column(15),
        },
        q(
            "blog-q3",
            format!("SELECT count(*) FROM readings WHERE {BLOG_WHERE}"),
        ),
        q(
            "last-loc",
            latest("readings", "name, driver, latitude, longitude", ""),
        ),
        q(
            "single-last-loc",
            format!(
                "SELECT name, driver, latitude, longitude FROM readings \
                 WHERE name IN ('{}') ORDER BY ts DESC LIMIT 1",
                p.truck
            ),
        ),
        q(
            "low-fuel",
            latest("diagnostics", "name, driver, fuel_state", " AND fuel_state < 0.1"),
        ),
        q(
            "high-load",
            latest(
                "diagnostics",
                "name, driver, current_load, load_capacity",
                " AND current_load / load_capacity > 0.9",
            ),
        ),
        q(
            "stationary-trucks",
            format!(
                "SELECT name, driver FROM readings WHERE {} AND name IS NOT NULL \
                 AND fleet = '{fleet}' GROUP BY name, driver HAVING avg(velocity) < 1",
                window(0)
            ),
        ),
        q("long-driving-sessions", sessions(1, 22)),
        q("long-daily-sessions", sessions(2, 60)),
        q(
            "avg-vs-projected-fuel-consumption",
            "SELECT fleet, avg(fuel_consumption) AS avg_fuel_consumption, \
             avg(nominal_fuel_consumption) AS projected_fuel_consumption FROM readings \
             WHERE velocity > 1 AND fleet IS NOT NULL AND nominal_fuel_consumption IS NOT NULL \
             AND name IS NOT NULL GROUP BY fleet"
                .into(),
        ),
        q(
            "avg-daily-driving-duration",
            "WITH ten_minute_driving_sessions AS (SELECT name, driver, fleet, \
             BIN10(ts) AS ten_minutes FROM readings GROUP BY name, driver, fleet, ten_minutes \
             HAVING avg(velocity) > 1), \
             daily_total_session AS (SELECT name, driver, fleet, BIN1D(ten_minutes) AS day, \
             floor(count(*) / 6.0) AS hours FROM ten_minute_driving_sessions \
             GROUP BY name, driver, fleet, day) \
             SELECT fleet, name, driver, avg(hours) AS avg_daily_hours \
             FROM daily_total_session GROUP BY fleet, name, driver"
                .into(),
        ),
        q(
            "avg-daily-driving-session",
            "WITH driver_status AS (SELECT name, BIN10(ts) AS ten_minutes, \
             avg(velocity) > 5 AS driving FROM readings GROUP BY name, ten_minutes), \
             changes AS (SELECT name, ten_minutes AS start_ts, \
             lead(ten_minutes) OVER (PARTITION BY name ORDER BY ten_minutes) AS stop_ts, driving \
             FROM (SELECT name, ten_minutes, driving, \
             lag(driving) OVER (PARTITION BY name ORDER BY ten_minutes) AS prev_driving \
             FROM driver_status) x WHERE x.driving <> x.prev_driving) \
             SELECT name, BIN1D(start_ts) AS day, \
             avg(EPOCH_S(stop_ts) - EPOCH_S(start_ts)) AS duration_s \
             FROM changes WHERE name IS NOT NULL AND driving = true \
             GROUP BY name, day ORDER BY name, day"
                .into(),
        ),
        q(
            "avg-load",
            "SELECT fleet, model, load_capacity, avg(avg_load / load_capacity) AS avg_load_percentage \
             FROM (SELECT name, driver, fleet, model, load_capacity, avg(current_load) AS avg_load \
             FROM diagnostics WHERE name IS NOT NULL \
             GROUP BY name, driver, fleet, model, load_capacity) d \
             GROUP BY fleet, model, load_capacity"
                .into(),
        ),
        q(
            "daily-activity",
            "SELECT fleet, model, day, sum(ten_mins_per_day) / 144.0 AS daily_activity \
             FROM (SELECT fleet, model, name, BIN1D(ts) AS day, BIN10(ts) AS ten_minutes, \
             count(*) AS ten_mins_per_day FROM diagnostics WHERE name IS NOT NULL \
             GROUP BY fleet, model, name, day, ten_minutes HAVING avg(status) < 1) y \
             GROUP BY fleet, model, day ORDER BY day"
                .into(),
        ),
        q(
            "breakdown-frequency",
            "WITH per_ten AS (SELECT name, model, BIN10(ts) AS ten_minutes, \
             avg(CASE WHEN status = 0 THEN 1.0 ELSE 0.0 END) >= 0.5 AS broken_down \
             FROM diagnostics GROUP BY name, model, ten_minutes), \
             transitions AS (SELECT name, model, broken_down, \
             lead(broken_down) OVER (PARTITION BY name ORDER BY ten_minutes, model NULLS LAST) \
             AS next_broken_down \
             FROM per_ten) \
             SELECT model, count(*) FROM transitions \
             WHERE name IS NOT NULL AND broken_down = false AND next_broken_down = true \
             GROUP BY model"
                .into(),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_and_dialects() {
        assert_eq!(
            ts_literal(START_US + 3_723_000_001),
            "'2020-01-01 01:02:03.000001'"
        );
        let s = render(
            "SELECT lag(x) OVER (PARTITION BY name ORDER BY ten_minutes)",
            Dialect::ClickHouse,
        );
        assert_eq!(
            s,
            "SELECT lagInFrame(toNullable(x)) OVER (PARTITION BY name ORDER BY ten_minutes \
             ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)"
        );
        let s = render(
            "SELECT BIN1D(BIN10(ts)), EPOCH_S(a) - EPOCH_S(b)",
            Dialect::ClickHouse,
        );
        assert_eq!(
            s,
            "SELECT toDateTime64(toStartOfDay(toDateTime64(toStartOfTenMinutes(ts), 6)), 6), \
             toUnixTimestamp(a) - toUnixTimestamp(b)"
        );
        let qs = queries(&TsbsConfig::default());
        let names: std::collections::HashSet<_> = qs.iter().map(|q| q.name).collect();
        assert_eq!(names.len(), 16);
        for q in &qs {
            for d in [
                Dialect::Tsjoin,
                Dialect::DataFusion,
                Dialect::DuckDb,
                Dialect::ClickHouse,
            ] {
                let s = q.sql(d);
                assert!(!s.contains("BIN") && !s.contains("EPOCH_S"), "{s}");
            }
        }
    }
}
