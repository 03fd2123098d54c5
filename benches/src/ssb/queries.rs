//! The 13 SSB queries (rev. 3, standard SQL, as
//! `shared/benchdata/ssb/queries/*.sql`) and the FROM-order permutations of
//! Q4.1. The text is the same for every engine: DataFusion 55, DuckDB and
//! ClickHouse all accept the table `date` unquoted.
//!
//! ```
//! use tsjoin_bench::ssb::queries::{QUERIES, q41_permutations};
//! assert_eq!(QUERIES.len(), 13);
//! assert_eq!(QUERIES[10].0, "q4.1");
//! assert!(q41_permutations().iter().any(|(_, sql)| sql == QUERIES[10].1));
//! ```

/// `(name, sql)` of the 13 queries, flight by flight.
pub const QUERIES: [(&str, &str); 13] = [
    (
        "q1.1",
        "SELECT sum(lo_extendedprice * lo_discount) AS revenue \
         FROM lineorder, date \
         WHERE lo_orderdate = d_datekey AND d_year = 1993 AND lo_discount BETWEEN 1 AND 3 \
         AND lo_quantity < 25",
    ),
    (
        "q1.2",
        "SELECT sum(lo_extendedprice * lo_discount) AS revenue \
         FROM lineorder, date \
         WHERE lo_orderdate = d_datekey AND d_yearmonthnum = 199401 \
         AND lo_discount BETWEEN 4 AND 6 AND lo_quantity BETWEEN 26 AND 35",
    ),
    (
        "q1.3",
        "SELECT sum(lo_extendedprice * lo_discount) AS revenue \
         FROM lineorder, date \
         WHERE lo_orderdate = d_datekey AND d_weeknuminyear = 6 AND d_year = 1994 \
         AND lo_discount BETWEEN 5 AND 7 AND lo_quantity BETWEEN 26 AND 35",
    ),
    (
        "q2.1",
        "SELECT sum(lo_revenue), d_year, p_brand1 \
         FROM lineorder, date, part, supplier \
         WHERE lo_orderdate = d_datekey AND lo_partkey = p_partkey \
         AND lo_suppkey = s_suppkey AND p_category = 'MFGR#12' AND s_region = 'AMERICA' \
         GROUP BY d_year, p_brand1 \
         ORDER BY d_year, p_brand1",
    ),
    (
        "q2.2",
        "SELECT sum(lo_revenue), d_year, p_brand1 \
         FROM lineorder, date, part, supplier \
         WHERE lo_orderdate = d_datekey AND lo_partkey = p_partkey \
         AND lo_suppkey = s_suppkey AND p_brand1 BETWEEN 'MFGR#2221' AND 'MFGR#2228' \
         AND s_region = 'ASIA' \
         GROUP BY d_year, p_brand1 \
         ORDER BY d_year, p_brand1",
    ),
    (
        "q2.3",
        "SELECT sum(lo_revenue), d_year, p_brand1 \
         FROM lineorder, date, part, supplier \
         WHERE lo_orderdate = d_datekey AND lo_partkey = p_partkey \
         AND lo_suppkey = s_suppkey AND p_brand1 = 'MFGR#2239' AND s_region = 'EUROPE' \
         GROUP BY d_year, p_brand1 \
         ORDER BY d_year, p_brand1",
    ),
    (
        "q3.1",
        "SELECT c_nation, s_nation, d_year, sum(lo_revenue) AS revenue \
         FROM customer, lineorder, supplier, date \
         WHERE lo_custkey = c_custkey AND lo_suppkey = s_suppkey \
         AND lo_orderdate = d_datekey AND c_region = 'ASIA' AND s_region = 'ASIA' \
         AND d_year >= 1992 AND d_year <= 1997 \
         GROUP BY c_nation, s_nation, d_year \
         ORDER BY d_year ASC, revenue DESC",
    ),
    (
        "q3.2",
        "SELECT c_city, s_city, d_year, sum(lo_revenue) AS revenue \
         FROM customer, lineorder, supplier, date \
         WHERE lo_custkey = c_custkey AND lo_suppkey = s_suppkey \
         AND lo_orderdate = d_datekey AND c_nation = 'UNITED STATES' \
         AND s_nation = 'UNITED STATES' AND d_year >= 1992 AND d_year <= 1997 \
         GROUP BY c_city, s_city, d_year \
         ORDER BY d_year ASC, revenue DESC",
    ),
    (
        "q3.3",
        "SELECT c_city, s_city, d_year, sum(lo_revenue) AS revenue \
         FROM customer, lineorder, supplier, date \
         WHERE lo_custkey = c_custkey AND lo_suppkey = s_suppkey \
         AND lo_orderdate = d_datekey AND (c_city = 'UNITED KI1' OR c_city = 'UNITED KI5') \
         AND (s_city = 'UNITED KI1' OR s_city = 'UNITED KI5') \
         AND d_year >= 1992 AND d_year <= 1997 \
         GROUP BY c_city, s_city, d_year \
         ORDER BY d_year ASC, revenue DESC",
    ),
    (
        "q3.4",
        "SELECT c_city, s_city, d_year, sum(lo_revenue) AS revenue \
         FROM customer, lineorder, supplier, date \
         WHERE lo_custkey = c_custkey AND lo_suppkey = s_suppkey \
         AND lo_orderdate = d_datekey AND (c_city = 'UNITED KI1' OR c_city = 'UNITED KI5') \
         AND (s_city = 'UNITED KI1' OR s_city = 'UNITED KI5') AND d_yearmonth = 'Dec1997' \
         GROUP BY c_city, s_city, d_year \
         ORDER BY d_year ASC, revenue DESC",
    ),
    (
        "q4.1",
        "SELECT d_year, c_nation, sum(lo_revenue - lo_supplycost) AS profit \
         FROM date, customer, supplier, part, lineorder \
         WHERE lo_custkey = c_custkey AND lo_suppkey = s_suppkey \
         AND lo_partkey = p_partkey AND lo_orderdate = d_datekey AND c_region = 'AMERICA' \
         AND s_region = 'AMERICA' AND (p_mfgr = 'MFGR#1' OR p_mfgr = 'MFGR#2') \
         GROUP BY d_year, c_nation \
         ORDER BY d_year, c_nation",
    ),
    (
        "q4.2",
        "SELECT d_year, s_nation, p_category, sum(lo_revenue - lo_supplycost) AS profit \
         FROM date, customer, supplier, part, lineorder \
         WHERE lo_custkey = c_custkey AND lo_suppkey = s_suppkey \
         AND lo_partkey = p_partkey AND lo_orderdate = d_datekey AND c_region = 'AMERICA' \
         AND s_region = 'AMERICA' AND (d_year = 1997 OR d_year = 1998) \
         AND (p_mfgr = 'MFGR#1' OR p_mfgr = 'MFGR#2') \
         GROUP BY d_year, s_nation, p_category \
         ORDER BY d_year, s_nation, p_category",
    ),
    (
        "q4.3",
        "SELECT d_year, s_city, p_brand1, sum(lo_revenue - lo_supplycost) AS profit \
         FROM date, customer, supplier, part, lineorder \
         WHERE lo_custkey = c_custkey AND lo_suppkey = s_suppkey \
         AND lo_partkey = p_partkey AND lo_orderdate = d_datekey AND c_region = 'AMERICA' \
         AND s_nation = 'UNITED STATES' AND (d_year = 1997 OR d_year = 1998) \
         AND p_category = 'MFGR#14' \
         GROUP BY d_year, s_city, p_brand1 \
         ORDER BY d_year, s_city, p_brand1",
    ),
];

/// Q4.1's FROM list as the benchmark writes it.
const Q41_FROM: &str = "FROM date, customer, supplier, part, lineorder";

/// The flight of a query name: `q3.2` → `q3`.
pub fn flight(name: &str) -> &str {
    name.split('.').next().unwrap_or(name)
}

/// Q4.1 with its five tables in other FROM orders: `(name, sql)`, the name
/// spelling the order with one letter a table (`L`ineorder, `d`ate,
/// `c`ustomer, `s`upplier, `p`art), e.g. `q4.1/dcspL` (the benchmark's own
/// order, listed first).
///
/// DataFusion does not enumerate join orders: `EliminateCrossJoin` starts
/// from the first table in FROM and joins, one after the other, the first
/// remaining table that has a join predicate with what is joined so far,
/// and `JoinSelection` only swaps a join's build and probe sides. For a
/// star that means the dimensions meet lineorder in their FROM order,
/// wherever lineorder stands; its position only decides the sides of the
/// first join. So the list is the 24 orders of the four dimensions with
/// lineorder last (as in the benchmark), then lineorder at the four other
/// positions with the dimensions in the benchmark's order (lineorder first
/// included): 28 in all. Quickstep's LIP claims to make the time
/// independent of that order; 120 orders would mostly repeat these.
pub fn q41_permutations() -> Vec<(String, String)> {
    let sql = QUERIES[10].1;
    let dims = [
        ("date", 'd'),
        ("customer", 'c'),
        ("supplier", 's'),
        ("part", 'p'),
    ];
    let fact = ("lineorder", 'L');
    // The 24 orders in lexicographic order of the benchmark's positions
    // (0123 = dcsp first): every 4-digit base-4 number with distinct digits.
    let mut orders: Vec<Vec<(&str, char)>> = (0..256usize)
        .map(|n| [n / 64, n / 16 % 4, n / 4 % 4, n % 4])
        .filter(|ix| (0..4).all(|i| (0..i).all(|j| ix[i] != ix[j])))
        .map(|ix| ix.iter().map(|&i| dims[i]).chain([fact]).collect())
        .collect();
    for pos in 0..4 {
        let mut order = dims.to_vec();
        order.insert(pos, fact);
        orders.push(order);
    }
    orders
        .into_iter()
        .map(|tables| {
            let name: String = tables.iter().map(|t| t.1).collect();
            let from: Vec<&str> = tables.iter().map(|t| t.0).collect();
            let sql = sql.replacen(Q41_FROM, &format!("FROM {}", from.join(", ")), 1);
            (format!("q4.1/{name}"), sql)
        })
        .collect()
}

/// The query reduced to `SELECT count(*)` over its FROM and WHERE: the
/// `lineorder` rows that qualify (every join is on a dimension's key).
///
/// ```
/// use tsjoin_bench::ssb::queries::{QUERIES, count_sql};
/// assert!(count_sql(QUERIES[3].1).starts_with("SELECT count(*) FROM lineorder, date"));
/// assert!(!count_sql(QUERIES[3].1).contains("GROUP BY"));
/// ```
pub fn count_sql(sql: &str) -> String {
    let from = sql.find(" FROM ").map_or(0, |i| i + 1);
    let end = sql.find(" GROUP BY").unwrap_or(sql.len());
    format!("SELECT count(*) {}", &sql[from..end])
}
