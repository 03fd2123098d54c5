//! The rows of the five SSB tables, one Arrow batch per table (per file
//! for `lineorder`), following `shared/benchdata/ssb/DOMAINS.md` rule by
//! rule. Every table draws from its own random stream
//! ([`SsbConfig::stream`]), and every `lineorder` file from one of its own,
//! so a file's bytes depend only on the seed and its number, never on the
//! thread that wrote it.
//!
//! ```
//! use tsjoin_bench::ssb::{SsbConfig, tables};
//! let c = SsbConfig::new(0.01, 1);
//! assert_eq!(tables::customer(&c).unwrap().num_rows(), 300);
//! ```

use super::values::*;
use super::{LAST_ORDER_DAY, SsbConfig, Table, calendar, date_key, schema};
use crate::generate::Rng;
use datafusion::arrow::array::{
    ArrayRef, Int32Array, Int64Array, RecordBatch, StringArray,
};
use datafusion::error::Result;
use std::sync::Arc;

/// dbgen's `CUST_MORTALITY`: customer keys divisible by it never order.
pub const CUST_MORTALITY: i64 = 3;

/// Characters of the random addresses.
const ALNUM: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";

/// Random-stream numbers, one per table (see [`SsbConfig::stream`]).
pub(super) const CUSTOMER_STREAM: u64 = 1;
pub(super) const SUPPLIER_STREAM: u64 = 2;
pub(super) const PART_STREAM: u64 = 3;
pub(super) const LINEORDER_STREAM: u64 = 4;

fn int32(v: Vec<i32>) -> ArrayRef {
    Arc::new(Int32Array::from(v))
}

fn text<S: AsRef<str>>(v: impl IntoIterator<Item = S>) -> ArrayRef {
    Arc::new(StringArray::from_iter_values(v))
}

/// A random alphanumeric string of U[6, 24] characters (dbgen's V_STR of
/// average length 15: 0.4 to 1.6 times it).
fn address(rng: &mut Rng) -> String {
    let len = rng.between(6, 24);
    (0..len)
        .map(|_| ALNUM[rng.between(0, ALNUM.len() as i64 - 1) as usize] as char)
        .collect()
}

/// `CC-AAA-EEE-NNNN`, CC = 10 + nation key.
fn phone(rng: &mut Rng, nation: usize) -> String {
    format!(
        "{}-{}-{}-{}",
        10 + nation,
        rng.between(100, 999),
        rng.between(100, 999),
        rng.between(1000, 9999)
    )
}

/// The first 9 characters of the nation, space-padded, and a digit 0..9.
fn city(rng: &mut Rng, nation: usize) -> String {
    format!("{:<9.9}{}", NATIONS[nation].0, rng.between(0, 9))
}

/// The columns customer and supplier share: key, name, address, city,
/// nation, region, phone.
struct Party {
    keys: Vec<i32>,
    names: Vec<String>,
    addresses: Vec<String>,
    cities: Vec<String>,
    nations: Vec<usize>,
    phones: Vec<String>,
}

impl Party {
    fn generate(rng: &mut Rng, rows: u32, prefix: &str) -> Self {
        let mut p = Party {
            keys: vec![],
            names: vec![],
            addresses: vec![],
            cities: vec![],
            nations: vec![],
            phones: vec![],
        };
        for key in 1..=rows as i32 {
            p.keys.push(key);
            p.names.push(format!("{prefix}#{key:09}"));
            p.addresses.push(address(rng));
            let nation = rng.between(0, 24) as usize;
            p.cities.push(city(rng, nation));
            p.phones.push(phone(rng, nation));
            p.nations.push(nation);
        }
        p
    }

    /// Key, name, address, city, nation, region (the phone goes last).
    fn columns(&self) -> Vec<ArrayRef> {
        vec![
            int32(self.keys.clone()),
            text(&self.names),
            text(&self.addresses),
            text(&self.cities),
            text(self.nations.iter().map(|&n| NATIONS[n].0)),
            text(self.nations.iter().map(|&n| NATIONS[n].1)),
        ]
    }
}

/// `customer`: 30,000 × SF rows.
pub fn customer(config: &SsbConfig) -> Result<RecordBatch> {
    let mut rng = config.stream(CUSTOMER_STREAM, 0);
    let p = Party::generate(&mut rng, config.customers(), "Customer");
    let segments: Vec<&str> = (0..p.keys.len())
        .map(|_| SEGMENTS[rng.between(0, 4) as usize])
        .collect();
    let mut cols = p.columns();
    cols.push(text(&p.phones));
    cols.push(text(segments));
    Ok(RecordBatch::try_new(schema(Table::Customer), cols)?)
}

/// `supplier`: 2,000 × SF rows.
pub fn supplier(config: &SsbConfig) -> Result<RecordBatch> {
    let mut rng = config.stream(SUPPLIER_STREAM, 0);
    let p = Party::generate(&mut rng, config.suppliers(), "Supplier");
    let mut cols = p.columns();
    cols.push(text(&p.phones));
    Ok(RecordBatch::try_new(schema(Table::Supplier), cols)?)
}

/// `part`: 200,000 × ⌊1 + log2 SF⌋ rows.
pub fn part(config: &SsbConfig) -> Result<RecordBatch> {
    let mut rng = config.stream(PART_STREAM, 0);
    let rows = config.parts();
    let (mut names, mut mfgrs, mut categories, mut brands) =
        (vec![], vec![], vec![], vec![]);
    let (mut colors, mut types, mut sizes, mut containers) =
        (vec![], vec![], vec![], vec![]);
    let pick = |rng: &mut Rng, n: usize| rng.between(0, n as i64 - 1) as usize;
    for _ in 0..rows {
        // Three distinct words: the first is the colour, the others the name.
        let w1 = pick(&mut rng, COLORS.len());
        let w2 = loop {
            let w = pick(&mut rng, COLORS.len());
            if w != w1 {
                break w;
            }
        };
        let w3 = loop {
            let w = pick(&mut rng, COLORS.len());
            if w != w1 && w != w2 {
                break w;
            }
        };
        colors.push(COLORS[w1]);
        names.push(format!("{} {}", COLORS[w2], COLORS[w3]));
        let mfgr = format!("MFGR#{}", rng.between(1, 5));
        let category = format!("{mfgr}{}", rng.between(1, 5));
        brands.push(format!("{category}{}", rng.between(1, 40)));
        mfgrs.push(mfgr);
        categories.push(category);
        let (a, b, c) = &TYPE_SYLLABLES;
        types.push(format!(
            "{} {} {}",
            a[pick(&mut rng, 6)],
            b[pick(&mut rng, 5)],
            c[pick(&mut rng, 5)]
        ));
        sizes.push(rng.between(1, 50) as i32);
        let (a, b) = &CONTAINER_SYLLABLES;
        containers.push(format!("{} {}", a[pick(&mut rng, 5)], b[pick(&mut rng, 8)]));
    }
    let cols = vec![
        int32((1..=rows as i32).collect()),
        text(names),
        text(mfgrs),
        text(categories),
        text(brands),
        text(colors),
        text(types),
        int32(sizes),
        text(containers),
    ];
    Ok(RecordBatch::try_new(schema(Table::Part), cols)?)
}

/// `date`: one row per day 1992-01-01 … 1998-12-31 (2,557 rows). The four
/// weekday columns keep dbgen's quirk (the name is one day ahead of the
/// real weekday: 1992-01-01, a Wednesday, is `Thursday`, day 5).
pub fn date() -> Result<RecordBatch> {
    let days = calendar();
    let n = days.len();
    let (mut keys, mut dates, mut dows, mut months) = (vec![], vec![], vec![], vec![]);
    let (mut years, mut yms, mut ym_names, mut dnw) = (vec![], vec![], vec![], vec![]);
    let (mut dnm, mut dny, mut mny, mut wny) = (vec![], vec![], vec![], vec![]);
    let (mut seasons, mut last_week, mut last_month) = (vec![], vec![], vec![]);
    let (mut holidays, mut weekdays) = (vec![], vec![]);
    for (i, d) in days.iter().enumerate() {
        let month = MONTHS[d.month as usize - 1];
        keys.push(date_key(d));
        dates.push(format!("{month} {}, {}", d.day, d.year));
        // dbgen: ((tm_wday + 1) mod 7) + 1 with tm_wday 0 = Sunday.
        let day_in_week = (d.weekday + 1) % 7 + 1;
        dows.push(WEEKDAYS[day_in_week as usize - 1]);
        months.push(month);
        years.push(d.year);
        yms.push(d.year * 100 + d.month);
        ym_names.push(format!("{}{}", &month[..3], d.year));
        dnw.push(day_in_week);
        dnm.push(d.day);
        dny.push(d.day_of_year);
        mny.push(d.month);
        wny.push(d.day_of_year / 7 + 1);
        seasons.push(match d.month {
            1..=3 => "Winter",
            4 => "Spring",
            5..=8 => "Summer",
            9 | 10 => "Fall",
            _ => "Christmas",
        });
        let flag = |b: bool| if b { "1" } else { "0" };
        last_week.push(flag(day_in_week == 7));
        last_month.push(flag(days.get(i + 1).is_none_or(|next| next.day == 1)));
        let holiday = matches!((d.month, d.day), (12, 24) | (1, 1))
            || (d.day == 20 && matches!(d.month, 2 | 4 | 5 | 7 | 8 | 9 | 10 | 11));
        holidays.push(flag(holiday));
        weekdays.push(flag(!matches!(day_in_week, 1 | 7)));
    }
    debug_assert_eq!(n, super::DATE_ROWS);
    let cols = vec![
        int32(keys),
        text(dates),
        text(dows),
        text(months),
        int32(years),
        int32(yms),
        text(ym_names),
        int32(dnw),
        int32(dnm),
        int32(dny),
        int32(mny),
        int32(wny),
        text(seasons),
        text(last_week),
        text(last_month),
        text(holidays),
        text(weekdays),
    ];
    Ok(RecordBatch::try_new(schema(Table::Date), cols)?)
}

/// dbgen's retail price of a part, in cents.
pub fn rprice(partkey: i64) -> i64 {
    90_000 + ((partkey / 10) % 20_001) + 100 * (partkey % 1000)
}

/// TPC-H's sparse order key of the `i`-th order (1-based): the low 3 bits
/// kept, 2 bits of gap above them.
pub fn sparse_key(i: u64) -> i64 {
    (((i >> 3) << 5) | (i & 7)) as i64
}

/// A uniform customer key that is not a multiple of [`CUST_MORTALITY`]:
/// dbgen moves such a key one up, then one down, … (capped at the largest
/// key) until it is not.
pub fn order_customer(rng: &mut Rng, customers: i64) -> i64 {
    let mut key = rng.between(1, customers);
    let mut delta = 1;
    while key % CUST_MORTALITY == 0 {
        key = (key + delta).min(customers);
        delta = -delta;
    }
    key
}

/// The `lineorder` rows of orders `config.file_orders(file)`.
pub fn lineorder(config: &SsbConfig, file: u64) -> Result<RecordBatch> {
    let mut rng = config.stream(LINEORDER_STREAM, file);
    let keys: Vec<i32> = calendar().iter().map(date_key).collect();
    let (customers, suppliers) = (config.customers() as i64, config.suppliers() as i64);
    let part_keys = config.part_key_max() as i64;
    let orders = config.file_orders(file);
    let cap = (orders.end - orders.start) as usize * 4;
    let mut c = LineorderColumns::with_capacity(cap);
    for i in orders {
        let lines = rng.between(1, 7);
        let custkey = order_customer(&mut rng, customers) as i32;
        let day = rng.between(0, LAST_ORDER_DAY) as usize;
        let priority = PRIORITIES[rng.between(0, 4) as usize];
        let first = c.revenue.len();
        let mut total = 0i64;
        for line in 1..=lines {
            let partkey = rng.between(1, part_keys);
            let quantity = rng.between(1, 50);
            let discount = rng.between(0, 10);
            let tax = rng.between(0, 8);
            let extended = rprice(partkey) * quantity;
            let revenue = extended * (100 - discount) / 100;
            total += revenue * (100 + tax) / 100;
            c.orderkey.push(sparse_key(i));
            c.linenumber.push(line as i32);
            c.custkey.push(custkey);
            c.partkey.push(partkey as i32);
            c.suppkey.push(rng.between(1, suppliers) as i32);
            c.orderdate.push(keys[day]);
            c.priority.push(priority);
            c.quantity.push(quantity as i32);
            c.extended.push(extended as i32);
            c.discount.push(discount as i32);
            c.revenue.push(revenue as i32);
            c.supplycost.push((6 * rprice(partkey) / 10) as i32);
            c.tax.push(tax as i32);
            c.commitdate.push(keys[day + rng.between(30, 90) as usize]);
            c.shipmode.push(SHIP_MODES[rng.between(0, 6) as usize]);
        }
        // The order's total is known once all its lines are drawn.
        c.total
            .extend(std::iter::repeat_n(total as i32, c.revenue.len() - first));
    }
    c.batch()
}

/// `lineorder`'s columns while a file is drawn.
#[derive(Default)]
struct LineorderColumns {
    orderkey: Vec<i64>,
    linenumber: Vec<i32>,
    custkey: Vec<i32>,
    partkey: Vec<i32>,
    suppkey: Vec<i32>,
    orderdate: Vec<i32>,
    priority: Vec<&'static str>,
    quantity: Vec<i32>,
    extended: Vec<i32>,
    total: Vec<i32>,
    discount: Vec<i32>,
    revenue: Vec<i32>,
    supplycost: Vec<i32>,
    tax: Vec<i32>,
    commitdate: Vec<i32>,
    shipmode: Vec<&'static str>,
}

impl LineorderColumns {
    fn with_capacity(n: usize) -> Self {
        let mut c = Self::default();
        for v in [
            &mut c.linenumber,
            &mut c.custkey,
            &mut c.partkey,
            &mut c.suppkey,
            &mut c.orderdate,
            &mut c.quantity,
            &mut c.extended,
            &mut c.total,
            &mut c.discount,
            &mut c.revenue,
            &mut c.supplycost,
            &mut c.tax,
            &mut c.commitdate,
        ] {
            v.reserve(n);
        }
        c.orderkey.reserve(n);
        c
    }

    fn batch(self) -> Result<RecordBatch> {
        let rows = self.orderkey.len();
        let cols = vec![
            Arc::new(Int64Array::from(self.orderkey)) as ArrayRef,
            int32(self.linenumber),
            int32(self.custkey),
            int32(self.partkey),
            int32(self.suppkey),
            int32(self.orderdate),
            text(self.priority),
            text(std::iter::repeat_n("0", rows)),
            int32(self.quantity),
            int32(self.extended),
            int32(self.total),
            int32(self.discount),
            int32(self.revenue),
            int32(self.supplycost),
            int32(self.tax),
            int32(self.commitdate),
            text(self.shipmode),
        ];
        Ok(RecordBatch::try_new(schema(Table::Lineorder), cols)?)
    }
}
