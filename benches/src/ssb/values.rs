//! The value lists of SSB's columns (`shared/benchdata/ssb/value_lists.tsv`
//! and `nations.tsv`, from dbgen's `dists.dss`); every choice from a list
//! is uniform.
//!
//! ```
//! use tsjoin_bench::ssb::values::{COLORS, NATIONS};
//! assert_eq!((COLORS.len(), NATIONS[23].0), (92, "UNITED KINGDOM"));
//! ```

/// The 25 TPC-H nations (`nations.tsv`): the index is the nation key, the
/// phone country code is 10 + index.
pub const NATIONS: [(&str, &str); 25] = [
    ("ALGERIA", "AFRICA"),
    ("ARGENTINA", "AMERICA"),
    ("BRAZIL", "AMERICA"),
    ("CANADA", "AMERICA"),
    ("EGYPT", "MIDDLE EAST"),
    ("ETHIOPIA", "AFRICA"),
    ("FRANCE", "EUROPE"),
    ("GERMANY", "EUROPE"),
    ("INDIA", "ASIA"),
    ("INDONESIA", "ASIA"),
    ("IRAN", "MIDDLE EAST"),
    ("IRAQ", "MIDDLE EAST"),
    ("JAPAN", "ASIA"),
    ("JORDAN", "MIDDLE EAST"),
    ("KENYA", "AFRICA"),
    ("MOROCCO", "AFRICA"),
    ("MOZAMBIQUE", "AFRICA"),
    ("PERU", "AMERICA"),
    ("CHINA", "ASIA"),
    ("ROMANIA", "EUROPE"),
    ("SAUDI ARABIA", "MIDDLE EAST"),
    ("VIETNAM", "ASIA"),
    ("RUSSIA", "EUROPE"),
    ("UNITED KINGDOM", "EUROPE"),
    ("UNITED STATES", "AMERICA"),
];
/// The five regions.
pub const REGIONS: [&str; 5] = ["AFRICA", "AMERICA", "ASIA", "EUROPE", "MIDDLE EAST"];
/// `c_mktsegment`.
pub const SEGMENTS: [&str; 5] = [
    "AUTOMOBILE",
    "BUILDING",
    "FURNITURE",
    "HOUSEHOLD",
    "MACHINERY",
];
/// `lo_orderpriority`.
pub const PRIORITIES: [&str; 5] =
    ["1-URGENT", "2-HIGH", "3-MEDIUM", "4-NOT SPECIFIED", "5-LOW"];
/// `lo_shipmode`.
pub const SHIP_MODES: [&str; 7] =
    ["REG AIR", "AIR", "RAIL", "TRUCK", "MAIL", "FOB", "SHIP"];
/// The 92 colour words of `p_color` and `p_name`.
#[rustfmt::skip]
pub const COLORS: [&str; 92] = [
    "almond", "antique", "aquamarine", "azure", "beige", "bisque", "black", "blanched",
    "blue", "blush", "brown", "burlywood", "burnished", "chartreuse", "chiffon", "chocolate",
    "coral", "cornflower", "cornsilk", "cream", "cyan", "dark", "deep", "dim",
    "dodger", "drab", "firebrick", "floral", "forest", "frosted", "gainsboro", "ghost",
    "goldenrod", "green", "grey", "honeydew", "hot", "indian", "ivory", "khaki",
    "lace", "lavender", "lawn", "lemon", "light", "lime", "linen", "magenta",
    "maroon", "medium", "metallic", "midnight", "mint", "misty", "moccasin", "navajo",
    "navy", "olive", "orange", "orchid", "pale", "papaya", "peach", "peru",
    "pink", "plum", "powder", "puff", "purple", "red", "rose", "rosy",
    "royal", "saddle", "salmon", "sandy", "seashell", "sienna", "sky", "slate",
    "smoke", "snow", "spring", "steel", "tan", "thistle", "tomato", "turquoise",
    "violet", "wheat", "white", "yellow",
];
/// The three syllables of `p_type` (6 × 5 × 5 = 150 types).
pub const TYPE_SYLLABLES: ([&str; 6], [&str; 5], [&str; 5]) = (
    ["STANDARD", "SMALL", "MEDIUM", "LARGE", "ECONOMY", "PROMO"],
    ["ANODIZED", "BURNISHED", "PLATED", "POLISHED", "BRUSHED"],
    ["TIN", "NICKEL", "BRASS", "STEEL", "COPPER"],
);
/// The two syllables of `p_container` (5 × 8 = 40 containers).
pub const CONTAINER_SYLLABLES: ([&str; 5], [&str; 8]) = (
    ["SM", "LG", "MED", "JUMBO", "WRAP"],
    ["CASE", "BOX", "BAG", "JAR", "PACK", "PKG", "CAN", "DRUM"],
);
/// Full month names.
pub const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
/// Day names as dbgen indexes them (`d_daynuminweek` − 1).
pub const WEEKDAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];
