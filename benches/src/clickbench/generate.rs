//! A synthetic ClickBench `hits` table: the full 105-column schema with the
//! physical types of the published files (Int16 for SMALLINT, Unix-second
//! Int64 times, UInt16 day numbers for `EventDate`, plain strings with
//! `''` for "missing"), rows clustered as the real file is (counter, date,
//! user sessions), and the value shapes the 43 queries depend on (see
//! `../shared/benchdata/clickbench/NOTES.md` and the README's list of
//! departures). Deterministic for a seed and a row count.

use crate::generate::{Rng, Zipf};
use datafusion::arrow::array::{
    ArrayRef, Int16Builder, Int32Builder, Int64Builder, StringBuilder, UInt16Builder,
};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::error::Result;
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::parquet::basic::Compression;
use datafusion::parquet::file::properties::WriterProperties;
use std::path::Path;
use std::sync::Arc;

/// The 105 columns in file order, `name:type`.
const COLUMNS: &str = "WatchID:i64 JavaEnable:i16 Title:s GoodEvent:i16 EventTime:i64 EventDate:u16 \
CounterID:i32 ClientIP:i32 RegionID:i32 UserID:i64 CounterClass:i16 OS:i16 UserAgent:i16 URL:s Referer:s \
IsRefresh:i16 RefererCategoryID:i16 RefererRegionID:i32 URLCategoryID:i16 URLRegionID:i32 ResolutionWidth:i16 \
ResolutionHeight:i16 ResolutionDepth:i16 FlashMajor:i16 FlashMinor:i16 FlashMinor2:s NetMajor:i16 NetMinor:i16 \
UserAgentMajor:i16 UserAgentMinor:s CookieEnable:i16 JavascriptEnable:i16 IsMobile:i16 MobilePhone:i16 \
MobilePhoneModel:s Params:s IPNetworkID:i32 TraficSourceID:i16 SearchEngineID:i16 SearchPhrase:s AdvEngineID:i16 \
IsArtifical:i16 WindowClientWidth:i16 WindowClientHeight:i16 ClientTimeZone:i16 ClientEventTime:i64 \
SilverlightVersion1:i16 SilverlightVersion2:i16 SilverlightVersion3:i32 SilverlightVersion4:i16 PageCharset:s \
CodeVersion:i32 IsLink:i16 IsDownload:i16 IsNotBounce:i16 FUniqID:i64 OriginalURL:s HID:i32 IsOldCounter:i16 \
IsEvent:i16 IsParameter:i16 DontCountHits:i16 WithHash:i16 HitColor:s LocalEventTime:i64 Age:i16 Sex:i16 \
Income:i16 Interests:i16 Robotness:i16 RemoteIP:i32 WindowName:i32 OpenerName:i32 HistoryLength:i16 \
BrowserLanguage:s BrowserCountry:s SocialNetwork:s SocialAction:s HTTPError:i16 SendTiming:i32 DNSTiming:i32 \
ConnectTiming:i32 ResponseStartTiming:i32 ResponseEndTiming:i32 FetchTiming:i32 SocialSourceNetworkID:i16 \
SocialSourcePage:s ParamPrice:i64 ParamOrderID:s ParamCurrency:s ParamCurrencyID:i16 OpenstatServiceName:s \
OpenstatCampaignID:s OpenstatAdID:s OpenstatSourceID:s UTMSource:s UTMMedium:s UTMCampaign:s UTMContent:s \
UTMTerm:s FromTag:s HasGCLID:i16 RefererHash:i64 URLHash:i64 CLID:i32";

/// Files of the partitioned variant (as `hits_partitioned`).
pub const PARTITIONS: usize = 100;
/// Row count that makes every query of the 43 return rows.
pub const MIN_ROWS: u64 = 200_000;

/// Planted constants the queries look for.
const PLANTED_USER: i64 = 435_090_932_899_640_449;
const PLANTED_REFERER_HASH: i64 = 3_594_120_000_172_545_465;
const PLANTED_URL_HASH: i64 = 2_868_770_270_353_813_622;
const COUNTER_62: i32 = 62;
/// Days: 2013-07-02 ..= 2013-07-31 (`EventDate` is a Moscow date, UTC+4).
const FIRST_DAY: u16 = 15888;
const DAYS: u16 = 30;

/// The `hits` schema with the Arrow types DataFusion reads from the real
/// files (strings as plain Utf8 here; DataFusion reads them as Utf8View).
pub fn hits_schema() -> SchemaRef {
    let fields: Vec<Field> = COLUMNS
        .split_whitespace()
        .map(|c| {
            let (name, t) = c.split_once(':').expect("name:type");
            let t = match t {
                "i16" => DataType::Int16,
                "i32" => DataType::Int32,
                "i64" => DataType::Int64,
                "u16" => DataType::UInt16,
                _ => DataType::Utf8,
            };
            Field::new(name, t, false)
        })
        .collect();
    Arc::new(Schema::new(fields))
}

/// Counters with a fixed share of the rows (the hot ones of the real data,
/// Q27) and, for counter 62 (Q36–Q42), a floor so its OFFSET queries have
/// enough groups at small scales.
const HOT_COUNTERS: [(i32, f64); 6] = [
    (3922, 0.085),
    (199_550, 0.071),
    (122_612, 0.036),
    (233_773, 0.029),
    (245_438, 0.025),
    (COUNTER_62, 0.0075),
];
/// Regions and their shares (Q8, Q9); the rest spread over 2,000 ids.
const HOT_REGIONS: [(i32, f64); 10] = [
    (229, 0.183),
    (2, 0.067),
    (208, 0.043),
    (169, 0.033),
    (32, 0.018),
    (34, 0.018),
    (184, 0.018),
    (42, 0.015),
    (107, 0.015),
    (51, 0.014),
];
/// Non-zero `AdvEngineID`s and their row counts in the real data (Q7).
const ADV_ENGINES: [(i16, u32); 18] = [
    (2, 404_602),
    (27, 113_167),
    (13, 45_631),
    (45, 38_960),
    (44, 9_730),
    (3, 6_896),
    (62, 5_266),
    (52, 3_554),
    (50, 938),
    (28, 836),
    (53, 350),
    (25, 343),
    (61, 158),
    (21, 38),
    (42, 20),
    (16, 7),
    (7, 3),
    (22, 1),
];
const PHONE_MODELS: [(&str, i16, f64); 10] = [
    ("iPad", 1, 0.55),
    ("iPhone", 6, 0.1),
    ("A500", 118, 0.06),
    ("N8-00", 5, 0.04),
    ("iPho", 6, 0.03),
    ("ONE TOUCH 6030A", 7, 0.03),
    ("GT-P7300B", 10, 0.03),
    ("3110000", 32, 0.03),
    ("GT-I9500", 13, 0.03),
    ("eagle75", 26, 0.1),
];
const SITES: [&str; 12] = [
    "kinopoisk.ru",
    "smeshariki.ru",
    "irr.ru",
    "auto.ru",
    "avito.ru",
    "mail.ru",
    "yandex.ru",
    "rambler.ru",
    "liveinternet.ru",
    "vk.com",
    "odnoklassniki.ru",
    "korablitz.ru",
];
const SYLLABLES: [&str; 16] = [
    "ка", "ро", "ми", "на", "ст", "ле", "во", "ту", "pro", "net", "de", "ma", "ri", "ko",
    "sa", "te",
];
const WIDTHS: [i16; 7] = [1368, 1638, 1996, 1087, 1750, 1917, 2038];

/// One visitor.
#[derive(Clone, Copy)]
struct User {
    id: i64,
    region: i32,
    ip: i32,
    width: i16,
    /// Index into [`PHONE_MODELS`] plus one, or 0.
    phone: u8,
}

/// A run of hits by one user on one counter's site on one day.
#[derive(Clone, Copy)]
struct Session {
    counter: i32,
    day: u16,
    user: u32,
    start: u32,
    hits: u32,
    seed: u64,
}

/// Generates `rows` hits: 100 files `hits_0.parquet` .. `hits_99.parquet`
/// under `dir/partitioned/` and the same rows as one `dir/hits.parquet`.
pub fn generate_hits(dir: &Path, rows: u64, seed: u64) -> Result<()> {
    let sessions = sessions(rows, seed);
    let users = users(rows, seed);
    let schema = hits_schema();
    if dir.exists() {
        std::fs::remove_dir_all(dir)?;
    }
    std::fs::create_dir_all(dir.join("partitioned"))?;
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_max_row_group_row_count(Some(256 * 1024))
        .build();
    let mut single = ArrowWriter::try_new(
        std::fs::File::create(dir.join("hits.parquet"))?,
        Arc::clone(&schema),
        Some(props.clone()),
    )?;
    let per_file = rows.div_ceil(PARTITIONS as u64).max(1);
    let mut rows_iter = RowGen::new(&sessions, &users, rows, seed);
    for f in 0..PARTITIONS as u64 {
        let path = dir.join("partitioned").join(format!("hits_{f}.parquet"));
        let mut w = ArrowWriter::try_new(
            std::fs::File::create(&path)?,
            Arc::clone(&schema),
            Some(props.clone()),
        )?;
        let mut left = per_file.min(rows.saturating_sub(f * per_file));
        while left > 0 {
            let n = left.min(64 * 1024) as usize;
            let batch = rows_iter.batch(&schema, n)?;
            w.write(&batch)?;
            single.write(&batch)?;
            left -= n as u64;
        }
        w.close()?;
    }
    single.close()?;
    // Written last: a half-written directory is never taken as done.
    std::fs::write(dir.join("rows"), marker(rows, seed))?;
    Ok(())
}

fn marker(rows: u64, seed: u64) -> String {
    format!("{rows} rows, seed {seed}")
}

/// True when `dir` holds a complete table of `rows` rows made with `seed`.
pub fn is_generated(dir: &Path, rows: u64, seed: u64) -> bool {
    std::fs::read_to_string(dir.join("rows"))
        .is_ok_and(|s| s.trim() == marker(rows, seed))
}

fn users(rows: u64, seed: u64) -> Vec<User> {
    let n = ((rows as f64 / 5.67) as usize).max(1000);
    let mut rng = Rng::new(seed ^ 0x05E2);
    let regions = Zipf::new(2000, 1.1);
    let ips = Zipf::new(n.max(2), 0.3);
    (0..n)
        .map(|i| {
            let u = rng.unit();
            let mut acc = 0.0;
            let mut region = None;
            for (r, share) in HOT_REGIONS {
                acc += share;
                if u < acc {
                    region = Some(r);
                    break;
                }
            }
            let phone = if rng.unit() < 0.02 {
                let (u, mut acc) = (rng.unit(), 0.0);
                (PHONE_MODELS
                    .iter()
                    .position(|m| {
                        acc += m.2;
                        u < acc
                    })
                    .unwrap_or(0)
                    + 1) as u8
            } else {
                0
            };
            User {
                id: if i == 0 {
                    PLANTED_USER
                } else {
                    rng.next_u64() as i64
                },
                region: region.unwrap_or_else(|| 300 + regions.sample(&mut rng) as i32),
                ip: (ips.sample(&mut rng) as u32).wrapping_mul(2_654_435_761) as i32,
                width: if rng.unit() < 0.6 {
                    WIDTHS[(rng.next_u64() % 7) as usize]
                } else {
                    800 + (rng.next_u64() % 1500) as i16
                },
                phone,
            }
        })
        .collect()
}

/// Sessions covering `rows` hits, sorted as the real file is (counter,
/// date, user, time).
fn sessions(rows: u64, seed: u64) -> Vec<Session> {
    let mut rng = Rng::new(seed ^ 0x5E55);
    let users = ((rows as f64 / 5.67) as u64).max(1000);
    let heavy = Zipf::new(1000, 1.0);
    let others = Zipf::new(20_000, 1.05);
    // Scale floors (they matter below about 2M rows): counter 62 keeps at
    // least 50,000 rows so Q38–Q42 reach their OFFSETs, and counter 3922
    // at least 110,000 so Q27's HAVING COUNT(*) > 100000 keeps a group.
    let floor = |n: f64| n / rows.max(1) as f64;
    let mut out = Vec::with_capacity((rows / 5) as usize);
    let mut made = 0u64;
    // The planted user: 4 hits.
    out.push(Session {
        counter: 1,
        day: FIRST_DAY + 3,
        user: 0,
        start: 40_000,
        hits: 4,
        seed: rng.next_u64(),
    });
    made += 4;
    while made < rows {
        let u = rng.unit();
        let mut acc = 0.0;
        let mut counter = None;
        for (c, share) in HOT_COUNTERS {
            acc += match c {
                COUNTER_62 => share.max(floor(50_000.0)),
                3922 => share.max(floor(110_000.0)),
                _ => share,
            };
            if u < acc {
                counter = Some(c);
                break;
            }
        }
        let counter = counter.unwrap_or_else(|| 1000 + others.sample(&mut rng) as i32);
        // 20 % of sessions come from a heavy-tailed set of frequent users.
        let user = if rng.unit() < 0.2 {
            heavy.sample(&mut rng) as u32 + 1
        } else {
            1 + (rng.next_u64() % (users - 1)) as u32
        };
        let hits = (1.0 + (-rng.unit().max(1e-12).ln()) * 4.67) as u32;
        let hits = hits.min((rows - made) as u32).max(1);
        out.push(Session {
            counter,
            day: FIRST_DAY + (rng.next_u64() % DAYS as u64) as u16,
            user,
            start: (rng.next_u64() % 86_000) as u32,
            hits,
            seed: rng.next_u64(),
        });
        made += hits as u64;
    }
    out.sort_by_key(|s| (s.counter, s.day, s.user, s.start));
    out
}

/// Makes the rows, session after session.
struct RowGen<'a> {
    sessions: &'a [Session],
    users: &'a [User],
    next_session: usize,
    hit: u32,
    row: u64,
    phrases: Zipf,
    urls: Zipf,
    referers: Zipf,
    referer_floor: f64,
    rng: Rng,
}

impl<'a> RowGen<'a> {
    fn new(sessions: &'a [Session], users: &'a [User], rows: u64, seed: u64) -> Self {
        Self {
            sessions,
            users,
            next_session: 0,
            hit: 0,
            row: 0,
            phrases: Zipf::new(((rows as f64 * 0.06) as usize).max(100), 1.0),
            urls: Zipf::new(((rows as f64 * 0.25) as usize).max(1000), 1.0),
            referers: Zipf::new(SITES.len() * 50, 1.0),
            referer_floor: (110_000.0 / (0.65 * rows.max(1) as f64)).min(1.0),
            rng: Rng::new(seed ^ 0xBA7C),
        }
    }

    /// The next `n` rows as a batch.
    fn batch(&mut self, schema: &SchemaRef, n: usize) -> Result<RecordBatch> {
        let mut cols: Vec<Builder> = schema
            .fields()
            .iter()
            .map(|f| Builder::new(f.name(), f.data_type(), n))
            .collect();
        for _ in 0..n {
            let hit = self.next_hit();
            for c in &mut cols {
                c.push(&hit);
            }
        }
        Ok(RecordBatch::try_new(
            Arc::clone(schema),
            cols.into_iter().map(Builder::finish).collect(),
        )?)
    }

    fn next_hit(&mut self) -> Hit {
        let s = self.sessions[self.next_session.min(self.sessions.len() - 1)];
        let user = self.users[s.user as usize % self.users.len()];
        let k = self.hit;
        self.hit += 1;
        if self.hit >= s.hits {
            self.hit = 0;
            self.next_session += 1;
        }
        self.row += 1;
        let mut r = Rng::new(s.seed ^ (k as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let rng = &mut self.rng;
        // Per session: one search phrase (13 % of sessions), one engine.
        let mut sr = Rng::new(s.seed);
        let phrase = if sr.unit() < 0.132 {
            phrase(self.phrases.sample(&mut sr))
        } else {
            String::new()
        };
        let engine: i16 = if phrase.is_empty() {
            0
        } else if sr.unit() < 0.72 {
            2
        } else {
            3
        };
        let site = SITES[(s.counter as usize * 7) % SITES.len()];
        let url_rank = self.urls.sample(rng);
        let url = if rng.unit() < 0.004 {
            String::new()
        } else if rng.unit() < 0.0005 {
            format!(
                "http://www.google.ru/search?q={}",
                phrase_or(&phrase, url_rank)
            )
        } else if url_rank == 0 {
            "http://kinopoisk.ru".to_string()
        } else {
            url(site, url_rank, &mut r)
        };
        let plant_url = s.counter == COUNTER_62 && rng.unit() < 0.6;
        let plant_referer = s.counter == COUNTER_62 && rng.unit() < 0.2;
        let referer = if plant_referer {
            "http://www.yandex.ru/clck/jsredir?from=www.yandex.ru;search".to_string()
        } else if rng.unit() < 0.65 {
            // (Scale floor: one referer domain keeps more than 100,000 rows for Q28.)
            let rank = if rng.unit() < self.referer_floor {
                0
            } else {
                self.referers.sample(rng)
            };
            format!(
                "http://{}{}/{}",
                if rank % 3 == 0 { "www." } else { "" },
                SITES[rank % SITES.len()],
                word(rank as u64 * 31 + 7, 3)
            )
        } else {
            String::new()
        };
        let adv = if rng.unit() < 0.0063 {
            adv_engine(rng)
        } else {
            0
        };
        let (model, phone) = match user.phone {
            0 => ("", 0),
            p => (
                PHONE_MODELS[p as usize - 1].0,
                PHONE_MODELS[p as usize - 1].1,
            ),
        };
        let time = (s.day as i64) * 86_400 - 4 * 3600
            + s.start as i64
            + k as i64 * (5 + (r.next_u64() % 60) as i64);
        Hit {
            watch_id: r.next_u64() as i64,
            title: if url.is_empty() {
                String::new()
            } else {
                title(url_rank, rng)
            },
            event_time: time,
            event_date: s.day,
            counter: s.counter,
            client_ip: user.ip,
            region: user.region,
            user_id: user.id,
            url_hash: if plant_url {
                PLANTED_URL_HASH
            } else {
                hash(&url)
            },
            referer_hash: if plant_referer {
                PLANTED_REFERER_HASH
            } else {
                hash(&referer)
            },
            url,
            referer,
            is_refresh: (rng.unit() < 0.12) as i16,
            width: user.width,
            phone,
            model,
            trafic: [0, 0, 0, 1, 1, 2, 3, -1, 6, 6][(r.next_u64() % 10) as usize],
            engine,
            phrase,
            adv,
            win_w: 200 + (r.next_u64() % 1800) as i16,
            win_h: 200 + (r.next_u64() % 1000) as i16,
            is_link: (rng.unit() < 0.05) as i16,
            is_download: (rng.unit() < 0.001) as i16,
            dont_count: (rng.unit() < 0.05) as i16,
            noise: r.next_u64(),
        }
    }
}

/// The columns the queries read, for one row; everything else is filled
/// from `noise` (small integers, mostly empty strings).
struct Hit {
    watch_id: i64,
    title: String,
    event_time: i64,
    event_date: u16,
    counter: i32,
    client_ip: i32,
    region: i32,
    user_id: i64,
    url: String,
    referer: String,
    is_refresh: i16,
    width: i16,
    phone: i16,
    model: &'static str,
    trafic: i16,
    engine: i16,
    phrase: String,
    adv: i16,
    win_w: i16,
    win_h: i16,
    is_link: i16,
    is_download: i16,
    dont_count: i16,
    url_hash: i64,
    referer_hash: i64,
    noise: u64,
}

fn adv_engine(rng: &mut Rng) -> i16 {
    let total: u32 = ADV_ENGINES.iter().map(|a| a.1).sum();
    let mut x = (rng.next_u64() % total as u64) as u32;
    for (id, n) in ADV_ENGINES {
        if x < n {
            return id;
        }
        x -= n;
    }
    2
}

/// A pseudo-word of `n` syllables for `k` (Cyrillic and Latin syllables,
/// as the obfuscated data mixes them).
fn word(k: u64, n: usize) -> String {
    let mut r = Rng::new(k);
    (0..n)
        .map(|_| SYLLABLES[(r.next_u64() % SYLLABLES.len() as u64) as usize])
        .collect()
}

fn phrase(rank: usize) -> String {
    let mut r = Rng::new(rank as u64 ^ 0x9A);
    let words = 1 + (r.next_u64() % 3) as usize;
    (0..words)
        .map(|i| word(rank as u64 * 3 + i as u64, 2 + (r.next_u64() % 3) as usize))
        .collect::<Vec<_>>()
        .join(" ")
}

fn phrase_or(phrase: &str, rank: usize) -> String {
    if phrase.is_empty() {
        word(rank as u64, 3)
    } else {
        phrase.replace(' ', "+")
    }
}

/// A URL on `site`, about 90 bytes with percent-encoded parts.
fn url(site: &str, rank: usize, r: &mut Rng) -> String {
    let path = word(rank as u64, 3);
    let tail: String = (0..(8 + r.next_u64() % 10))
        .map(|_| format!("%D{:X}", r.next_u64() % 16))
        .collect();
    format!("http://{site}/{path}/{rank}.html?{tail}")
}

fn title(rank: usize, rng: &mut Rng) -> String {
    let brand = if rng.unit() < 0.001 { " - Google" } else { "" };
    format!(
        "{} {} - {}{brand}",
        word(rank as u64 ^ 0x7, 3),
        word(rank as u64 ^ 0x8, 2),
        word(rank as u64 % 97, 2)
    )
}

/// A stable 64-bit hash of a string (`URLHash`, `RefererHash`).
fn hash(s: &str) -> i64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    }) as i64
}

/// One column being filled.
enum Builder {
    I16(Int16Builder, fn(&Hit) -> i16),
    I32(Int32Builder, fn(&Hit) -> i32),
    I64(Int64Builder, fn(&Hit) -> i64),
    U16(UInt16Builder, fn(&Hit) -> u16),
    Str(StringBuilder, fn(&Hit) -> &str),
}

impl Builder {
    fn new(name: &str, t: &DataType, n: usize) -> Self {
        match t {
            DataType::Int16 => Builder::I16(
                Int16Builder::with_capacity(n),
                match name {
                    "IsRefresh" => |h| h.is_refresh,
                    "ResolutionWidth" => |h| h.width,
                    "MobilePhone" => |h| h.phone,
                    "TraficSourceID" => |h| h.trafic,
                    "SearchEngineID" => |h| h.engine,
                    "AdvEngineID" => |h| h.adv,
                    "WindowClientWidth" => |h| h.win_w,
                    "WindowClientHeight" => |h| h.win_h,
                    "IsLink" => |h| h.is_link,
                    "IsDownload" => |h| h.is_download,
                    "DontCountHits" => |h| h.dont_count,
                    "ResolutionHeight" => |h| (h.width as i32 * 9 / 16) as i16,
                    "ResolutionDepth" => |_| 24,
                    "JavaEnable" | "CookieEnable" | "JavascriptEnable" | "GoodEvent" => {
                        |h| (h.noise % 10 != 0) as i16
                    }
                    "IsMobile" => |h| (h.phone != 0) as i16,
                    "Age" => |h| (h.noise % 6 * 10) as i16,
                    "Sex" => |h| (h.noise % 3) as i16,
                    _ => |h| ((h.noise >> 8) % 4) as i16,
                },
            ),
            DataType::Int32 => Builder::I32(
                Int32Builder::with_capacity(n),
                match name {
                    "CounterID" => |h| h.counter,
                    "ClientIP" => |h| h.client_ip,
                    "RegionID" => |h| h.region,
                    "RemoteIP" => |h| h.client_ip ^ 0x5555,
                    _ => |h| ((h.noise >> 16) % 1000) as i32,
                },
            ),
            DataType::Int64 => Builder::I64(
                Int64Builder::with_capacity(n),
                match name {
                    "WatchID" => |h| h.watch_id,
                    "EventTime" | "ClientEventTime" => |h| h.event_time,
                    "LocalEventTime" => |h| h.event_time + 4 * 3600,
                    "UserID" | "FUniqID" => |h| h.user_id,
                    "URLHash" => |h| h.url_hash,
                    "RefererHash" => |h| h.referer_hash,
                    _ => |_| 0,
                },
            ),
            DataType::UInt16 => {
                Builder::U16(UInt16Builder::with_capacity(n), |h| h.event_date)
            }
            _ => Builder::Str(
                StringBuilder::with_capacity(n, n * 8),
                match name {
                    "Title" => |h| &h.title,
                    "URL" | "OriginalURL" => |h| &h.url,
                    "Referer" => |h| &h.referer,
                    "MobilePhoneModel" => |h| h.model,
                    "SearchPhrase" => |h| &h.phrase,
                    "BrowserLanguage" => |h| if h.noise % 5 == 0 { "en" } else { "ru" },
                    "BrowserCountry" => |h| if h.noise % 7 == 0 { "ua" } else { "ru" },
                    "HitColor" => |h| ["5", "D", "E"][(h.noise % 3) as usize],
                    "PageCharset" => |h| {
                        if h.noise % 4 == 0 {
                            "utf-8"
                        } else {
                            "windows-1251"
                        }
                    },
                    _ => |_| "",
                },
            ),
        }
    }

    fn push(&mut self, h: &Hit) {
        match self {
            Builder::I16(b, f) => b.append_value(f(h)),
            Builder::I32(b, f) => b.append_value(f(h)),
            Builder::I64(b, f) => b.append_value(f(h)),
            Builder::U16(b, f) => b.append_value(f(h)),
            Builder::Str(b, f) => b.append_value(f(h)),
        }
    }

    fn finish(self) -> ArrayRef {
        match self {
            Builder::I16(mut b, _) => Arc::new(b.finish()),
            Builder::I32(mut b, _) => Arc::new(b.finish()),
            Builder::I64(mut b, _) => Arc::new(b.finish()),
            Builder::U16(mut b, _) => Arc::new(b.finish()),
            Builder::Str(mut b, _) => Arc::new(b.finish()),
        }
    }
}
