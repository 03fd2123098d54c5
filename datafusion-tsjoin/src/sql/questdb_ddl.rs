//! Token-level rewrite of QuestDB's dialect (its `CREATE TABLE` and `ALTER
//! TABLE`, its types, literals and implicit SELECT) into SQL that DataFusion
//! plans, so that scripts written for QuestDB (its own test suites, its
//! documentation) run unchanged:
//!
//! ```text
//! CREATE TABLE trades (sym SYMBOL CAPACITY 256 CACHE INDEX, qty LONG, ts TIMESTAMP)
//!   TIMESTAMP(ts) PARTITION BY DAY WAL DEDUP UPSERT KEYS(ts, sym)
//! ⇒
//! CREATE TABLE trades (sym VARCHAR, qty BIGINT, ts TIMESTAMP)
//!   WITH (designated_timestamp = 'ts')
//! ```
//!
//! - QuestDB's float literals (`1.5f`) lose their suffix, and its implicit
//!   SELECT (`(trades WHERE …)`, `(trades LIMIT lo, hi)`) is spelt out, in
//!   any statement (see [`Edit::implicit_selects`]).
//! - QuestDB-only column types become their DataFusion equivalents
//!   ([`questdb_type`]), in column definitions, in `CAST(x AS type)` and in
//!   `x::type`;
//!   `SYMBOL`'s storage options (`CAPACITY n`, `CACHE`, `NOCACHE`, `INDEX
//!   [CAPACITY n]`) are dropped.
//! - `TIMESTAMP(col)`, the designated timestamp, becomes the table option
//!   `designated_timestamp` (placed before `AS` in `CREATE TABLE … AS
//!   (query) TIMESTAMP(col)`), which [`super::prepare`] takes out and
//!   records in the session's registry.
//! - Storage clauses with no meaning here are dropped: `PARTITION BY unit`,
//!   `WAL`, `BYPASS WAL`, `DEDUP UPSERT KEYS(…)`, `WITH k = v, …` (QuestDB's
//!   unparenthesised table parameters), `IN VOLUME name`, `OWNED BY name`.
//!
//! - `ALTER TABLE … ADD COLUMN` maps types and drops SYMBOL's options as
//!   above, and QuestDB's column lists (`ADD COLUMN a INT, b DOUBLE`, `DROP
//!   COLUMN a, b`) are spelt out one operation per column; [`super::alter`]
//!   runs the statement.
//!
//! Only statements that start with `CREATE [OR REPLACE] TABLE` or `ALTER
//! TABLE` are touched (and casts, float literals and implicit SELECTs
//! anywhere); everything else passes through token for token.

use super::rewrite::word_is;
use crate::config::DESIGNATED_TIMESTAMP_OPTION;
use sqlparser::tokenizer::{Token, TokenWithSpan, Whitespace};

/// The DataFusion type for a QuestDB-only type name, if it is one.
///
pub fn questdb_type(name: &str) -> Option<&'static str> {
    Some(match name.to_ascii_uppercase().as_str() {
        "SYMBOL" | "STRING" => "VARCHAR",
        "LONG" => "BIGINT",
        "SHORT" => "SMALLINT",
        "BYTE" => "TINYINT",
        // DataFusion's TIMESTAMP keeps nanoseconds (QuestDB's TIMESTAMP, in
        // microseconds, is mapped in the DDL of a table with a designated
        // timestamp, see `create_table`).
        "TIMESTAMP_NS" => "TIMESTAMP",
        _ => return None,
    })
}

/// Rewrites every QuestDB `CREATE TABLE` in `tokens` (see the module docs).
pub fn rewrite_questdb_ddl(tokens: Vec<TokenWithSpan>) -> Vec<TokenWithSpan> {
    let mut out = Vec::with_capacity(tokens.len());
    let mut start = 0;
    while start < tokens.len() {
        let end = statement_end(&tokens, start);
        let statement = &tokens[start..end];
        let edit = if is_create_table(statement) {
            create_table(statement)
        } else if starts_with(statement, &["ALTER", "TABLE"]) {
            alter_table(statement)
        } else {
            Edit::anywhere(statement)
        };
        edit.apply(statement, &mut out);
        start = end;
    }
    out
}

/// One past the `;` that ends the statement starting at `start` (or the end).
fn statement_end(tokens: &[TokenWithSpan], start: usize) -> usize {
    let mut depth = 0i32;
    for (i, t) in tokens.iter().enumerate().skip(start) {
        match t.token {
            Token::LParen => depth += 1,
            Token::RParen => depth -= 1,
            Token::SemiColon if depth <= 0 => return i + 1,
            _ => {}
        }
    }
    tokens.len()
}

/// The statement's tokens other than whitespace, with their indexes.
fn significant(tokens: &[TokenWithSpan]) -> Vec<usize> {
    (0..tokens.len())
        .filter(|&i| !matches!(tokens[i].token, Token::Whitespace(_)))
        .collect()
}

/// Whether the statement's first significant tokens are the words `words`.
fn starts_with(statement: &[TokenWithSpan], words: &[&str]) -> bool {
    let sig = significant(statement);
    sig.len() >= words.len()
        && words
            .iter()
            .zip(sig)
            .all(|(w, i)| word_is(&statement[i].token, w))
}

fn is_create_table(statement: &[TokenWithSpan]) -> bool {
    let words: Vec<&Token> = significant(statement)
        .into_iter()
        .take(4)
        .map(|i| &statement[i].token)
        .collect();
    match words.as_slice() {
        [c, t, ..] if word_is(c, "CREATE") && word_is(t, "TABLE") => true,
        [c, o, r, t] => {
            word_is(c, "CREATE")
                && word_is(o, "OR")
                && word_is(r, "REPLACE")
                && word_is(t, "TABLE")
        }
        _ => false,
    }
}

/// What to change in one statement, by index of its significant tokens
/// (`sig`): tokens to drop, type names to map, and tokens to insert (before
/// which significant token, in order).
struct Edit {
    sig: Vec<usize>,
    drop: Vec<bool>,
    retype: Vec<bool>,
    inserts: Vec<(usize, Vec<Token>)>,
}

impl Edit {
    /// Maps QuestDB types in `AS type)` (the tail of a `CAST`) and after
    /// `::` (the cast operator QuestDB shares with PostgreSQL), and drops the
    /// suffix of QuestDB's float literals (`1.5f`: a number with `f` right
    /// after it, which reads as DOUBLE and is cast where a FLOAT is stored).
    fn anywhere(statement: &[TokenWithSpan]) -> Self {
        let sig = significant(statement);
        let tok = |p: usize| &statement[sig[p]].token;
        let mut retype = vec![false; sig.len()];
        for p in (1..sig.len().saturating_sub(1))
            .filter(|&p| word_is(tok(p - 1), "AS") && tok(p + 1) == &Token::RParen)
        {
            retype[p] = true;
        }
        for p in (1..sig.len()).filter(|&p| tok(p - 1) == &Token::DoubleColon) {
            retype[p] = true;
        }
        let mut drop = vec![false; sig.len()];
        for p in (1..sig.len()).filter(|&p| sig[p] == sig[p - 1] + 1) {
            drop[p] = matches!(tok(p - 1), Token::Number(..)) && word_is(tok(p), "f");
        }
        let mut edit = Edit {
            drop,
            retype,
            inserts: vec![],
            sig,
        };
        edit.implicit_selects(statement);
        edit
    }

    /// QuestDB's implicit SELECT, a table name in parentheses with a clause:
    /// `(trades WHERE price > 5)`, `(trades LATEST ON ts PARTITION BY sym)`
    /// and `(trades LIMIT 5)` read `(SELECT *
    /// FROM trades …)`, and its `LIMIT lo, hi` (rows lo+1 to hi, unlike
    /// MySQL's offset and count) becomes `LIMIT hi-lo OFFSET lo`.
    fn implicit_selects(&mut self, statement: &[TokenWithSpan]) {
        let sig = &self.sig;
        let tok = |p: usize| &statement[sig[p]].token;
        let is = |p: usize, w: &str| p < sig.len() && word_is(tok(p), w);
        let number = |p: usize| match (p < sig.len()).then(|| tok(p)) {
            Some(Token::Number(n, _)) => n.parse::<u64>().ok(),
            _ => None,
        };
        let space = || Token::Whitespace(Whitespace::Space);
        for p in 1..sig.len().saturating_sub(1) {
            let table = matches!(tok(p), Token::Word(w) if !["SELECT", "WITH", "VALUES"].iter().any(|k| w.value.eq_ignore_ascii_case(k)));
            if tok(p - 1) != &Token::LParen
                || !table
                || !(is(p + 1, "WHERE") || is(p + 1, "LIMIT") || is(p + 1, "LATEST"))
            {
                continue;
            }
            let select = vec![
                Token::make_keyword("SELECT"),
                space(),
                Token::Mul,
                space(),
                Token::make_keyword("FROM"),
            ];
            self.inserts.push((p, select));
            // The clause's own closing parenthesis, and `LIMIT lo, hi` right before it.
            let mut depth = 0;
            let Some(close) = (p..sig.len()).find(|&q| {
                depth += match tok(q) {
                    Token::LParen => 1,
                    Token::RParen => -1,
                    _ => 0,
                };
                depth < 0
            }) else {
                continue;
            };
            let q = close.saturating_sub(4);
            if q > p
                && is(q, "LIMIT")
                && tok(q + 2) == &Token::Comma
                && let (Some(lo), Some(hi)) = (number(q + 1), number(q + 3))
                && lo <= hi
            {
                self.drop[q + 1..close].iter_mut().for_each(|d| *d = true);
                let limit = vec![
                    Token::Number((hi - lo).to_string(), false),
                    space(),
                    Token::make_keyword("OFFSET"),
                    space(),
                    Token::Number(lo.to_string(), false),
                ];
                self.inserts.push((close, limit));
            }
        }
        self.inserts.sort_by_key(|&(p, _)| p);
    }

    /// Copies `statement` into `out` with the edits.
    fn apply(&self, statement: &[TokenWithSpan], out: &mut Vec<TokenWithSpan>) {
        let mut p = 0;
        let mut inserts = self.inserts.iter().peekable();
        for (k, t) in statement.iter().enumerate() {
            while let Some((_, tokens)) = inserts.next_if(|(at, _)| self.sig[*at] == k) {
                let space =
                    || TokenWithSpan::new(Token::Whitespace(Whitespace::Space), t.span);
                out.push(space());
                out.extend(
                    tokens
                        .iter()
                        .map(|tok| TokenWithSpan::new(tok.clone(), t.span)),
                );
                out.push(space());
            }
            if self.sig.get(p) != Some(&k) {
                out.push(t.clone());
                continue;
            }
            let (drop, retype) = (self.drop[p], self.retype[p]);
            p += 1;
            match &t.token {
                _ if drop => {}
                Token::Word(w) if retype && w.quote_style.is_none() => {
                    out.push(match questdb_type(&w.value) {
                        Some(df) => {
                            TokenWithSpan::new(Token::make_word(df, None), t.span)
                        }
                        None => t.clone(),
                    })
                }
                _ => out.push(t.clone()),
            }
        }
    }
}

/// The edits of one `CREATE TABLE` statement: casts as anywhere, column
/// types and SYMBOL options in the column list, storage clauses and
/// `TIMESTAMP(col)` after it.
fn create_table(statement: &[TokenWithSpan]) -> Edit {
    let mut edit = Edit::anywhere(statement);
    let sig = &edit.sig;
    let tok = |p: usize| &statement[sig[p]].token;
    let is = |p: usize, w: &str| p < sig.len() && word_is(tok(p), w);
    let word = |p: usize| p < sig.len() && matches!(tok(p), Token::Word(_));
    let (drop, retype) = (&mut edit.drop, &mut edit.retype);
    let mut designated: Option<(String, usize)> = None;
    let (mut depth, mut column_next, mut as_at) = (0i32, false, None);
    let mut p = 0;
    while p < sig.len() {
        match tok(p) {
            Token::LParen => {
                depth += 1;
                column_next = depth == 1 && as_at.is_none();
            }
            Token::RParen => depth -= 1,
            Token::Comma if depth == 1 && as_at.is_none() => column_next = true,
            _ if depth == 0 && is(p, "AS") && as_at.is_none() => as_at = Some(p),
            Token::Word(_) if depth == 1 && column_next => {
                column_next = false;
                column_definition(statement, sig, p, drop, retype);
            }
            _ if depth == 0 => {
                let skip = if is(p, "TIMESTAMP")
                    && p + 3 < sig.len()
                    && tok(p + 1) == &Token::LParen
                    && word(p + 2)
                    && tok(p + 3) == &Token::RParen
                {
                    if let Token::Word(w) = tok(p + 2) {
                        designated = Some((w.value.clone(), p));
                    }
                    4
                } else if is(p, "PARTITION") && is(p + 1, "BY") && word(p + 2) {
                    3
                } else if is(p, "BYPASS") && is(p + 1, "WAL") {
                    2
                } else if is(p, "WAL") {
                    1
                } else if (is(p, "IN") && is(p + 1, "VOLUME"))
                    || (is(p, "OWNED") && is(p + 1, "BY"))
                {
                    // `IN VOLUME name`, `OWNED BY name`
                    if p + 2 < sig.len() { 3 } else { 0 }
                } else if is(p, "DEDUP")
                    && is(p + 1, "UPSERT")
                    && is(p + 2, "KEYS")
                    && p + 3 < sig.len()
                    && tok(p + 3) == &Token::LParen
                {
                    let close = (p + 4..sig.len()).find(|&q| tok(q) == &Token::RParen);
                    close.map_or(0, |c| c + 1 - p)
                } else if is(p, "WITH")
                    && word(p + 1)
                    && p + 2 < sig.len()
                    && tok(p + 2) == &Token::Eq
                {
                    // `WITH k = v, k = v` (values such as `1s` span tokens):
                    // up to `IN VOLUME`, `OWNED BY` or the statement's end.
                    let mut q = p + 1;
                    while q < sig.len()
                        && tok(q) != &Token::SemiColon
                        && !(is(q, "IN") && is(q + 1, "VOLUME"))
                        && !(is(q, "OWNED") && is(q + 1, "BY"))
                    {
                        q += 1;
                    }
                    q - p
                } else {
                    0
                };
                if skip > 0 {
                    drop[p..p + skip].iter_mut().for_each(|d| *d = true);
                    p += skip;
                    continue;
                }
            }
            _ => {}
        }
        p += 1;
    }
    // The option goes before `AS` when there is one, else where the clause
    // stood.
    if let Some((column, at)) = designated {
        // A table with a designated timestamp is QuestDB's: its TIMESTAMP
        // holds microseconds (TIMESTAMP_NS nanoseconds), so a bound or an
        // offset without a unit means what it means in QuestDB.
        let bare = |p: usize| {
            is(p, "TIMESTAMP") && !(p + 1 < sig.len() && tok(p + 1) == &Token::LParen)
        };
        for p in (0..sig.len()).filter(|&p| retype[p] && bare(p)) {
            drop[p] = true;
            let micros = vec![
                Token::make_keyword("TIMESTAMP"),
                Token::LParen,
                Token::Number("6".into(), false),
                Token::RParen,
            ];
            edit.inserts.push((p, micros));
        }
        let option = vec![
            Token::make_keyword("WITH"),
            Token::LParen,
            Token::make_word(DESIGNATED_TIMESTAMP_OPTION, None),
            Token::Eq,
            Token::SingleQuotedString(column),
            Token::RParen,
        ];
        edit.inserts.push((as_at.unwrap_or(at), option));
        edit.inserts.sort_by_key(|&(p, _)| p);
    }
    edit
}

/// A column definition whose name is significant token `p`: its type is
/// mapped and SYMBOL's storage options dropped. Returns the position after
/// the definition's type and options.
fn column_definition(
    statement: &[TokenWithSpan],
    sig: &[usize],
    p: usize,
    drop: &mut [bool],
    retype: &mut [bool],
) -> usize {
    let tok = |q: usize| &statement[sig[q]].token;
    let is = |q: usize, w: &str| q < sig.len() && word_is(tok(q), w);
    if p + 1 >= sig.len() {
        return sig.len();
    }
    retype[p + 1] = true;
    let mut q = p + 2;
    if is(p + 1, "SYMBOL") {
        loop {
            let n = if is(q, "CAPACITY")
                && q + 1 < sig.len()
                && matches!(tok(q + 1), Token::Number(..))
            {
                2
            } else if is(q, "CACHE") || is(q, "NOCACHE") || is(q, "INDEX") {
                1
            } else {
                break;
            };
            drop[q..q + n].iter_mut().for_each(|d| *d = true);
            q += n;
        }
    }
    q
}

/// The edits of one `ALTER TABLE` statement: column types and SYMBOL
/// options in `ADD COLUMN`, and QuestDB's lists (`ADD COLUMN a INT, b
/// DOUBLE`, `DROP COLUMN a, b`) spelt out one operation per column, as the
/// parser expects (`ADD COLUMN a INT, ADD COLUMN b DOUBLE`).
fn alter_table(statement: &[TokenWithSpan]) -> Edit {
    let mut edit = Edit::anywhere(statement);
    let sig = &edit.sig;
    let tok = |p: usize| &statement[sig[p]].token;
    let is = |p: usize, w: &str| p < sig.len() && word_is(tok(p), w);
    let (drop, retype, inserts) = (&mut edit.drop, &mut edit.retype, &mut edit.inserts);
    // The operation a bare list item continues: ADD or DROP.
    let mut list: Option<&str> = None;
    let (mut depth, mut p) = (0i32, 2);
    while p < sig.len() {
        match tok(p) {
            Token::LParen => depth += 1,
            Token::RParen => depth -= 1,
            _ if depth != 0 => {}
            _ if is(p, "ADD") => {
                let mut q = p + 1 + usize::from(is(p + 1, "COLUMN"));
                if is(q, "IF") && is(q + 1, "NOT") && is(q + 2, "EXISTS") {
                    q += 3;
                }
                list = Some("ADD");
                p = column_definition(statement, sig, q, drop, retype);
                continue;
            }
            _ if is(p, "DROP") => list = Some("DROP"),
            Token::Comma => {
                let next = p + 1;
                let bare = next < sig.len()
                    && matches!(tok(next), Token::Word(_))
                    && !["ADD", "DROP", "RENAME", "ALTER", "SET", "SWAP"]
                        .iter()
                        .any(|w| is(next, w));
                if let (Some(op), true) = (list, bare) {
                    let space = Token::Whitespace(Whitespace::Space);
                    inserts.push((
                        next,
                        vec![
                            Token::make_keyword(op),
                            space,
                            Token::make_keyword("COLUMN"),
                        ],
                    ));
                    if op == "ADD" {
                        p = column_definition(statement, sig, next, drop, retype);
                        continue;
                    }
                }
            }
            _ if ["RENAME", "ALTER", "SET", "SWAP"].iter().any(|w| is(p, w)) => {
                list = None
            }
            _ => {}
        }
        p += 1;
    }
    edit
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn questdb_only_types_map_to_datafusions() {
        assert_eq!(questdb_type("symbol"), Some("VARCHAR"));
        assert_eq!(questdb_type("DOUBLE"), None);
    }
    use sqlparser::dialect::GenericDialect;
    use sqlparser::tokenizer::Tokenizer;

    fn rewrite(sql: &str) -> String {
        let tokens = Tokenizer::new(&GenericDialect {}, sql)
            .tokenize_with_location()
            .unwrap();
        let out = rewrite_questdb_ddl(tokens);
        let text: String = out.iter().map(|t| t.token.to_string()).collect();
        text.split_whitespace().collect::<Vec<_>>().join(" ")
    }

    #[test]
    fn create_table_in_questdb_dialect() {
        assert_eq!(
            rewrite(
                "create table trades (sym symbol capacity 256 nocache index capacity 64, qty long, ts timestamp) \
                 timestamp(ts) partition by day bypass wal dedup upsert keys(ts, sym) with maxUncommittedRows=10, o3MaxLag=1s;"
            ),
            "create table trades (sym VARCHAR , qty BIGINT, ts TIMESTAMP(6) ) WITH(designated_timestamp='ts') ;"
        );
        // With a designated timestamp, TIMESTAMP is QuestDB's (microseconds),
        // casts included; TIMESTAMP_NS and an explicit precision stay; without
        // one, TIMESTAMP is DataFusion's.
        assert_eq!(
            rewrite(
                "create table t (a timestamp, b timestamp_ns, c timestamp(3)) timestamp(a); create table u (a timestamp)"
            ),
            "create table t (a TIMESTAMP(6) , b TIMESTAMP, c timestamp(3)) WITH(designated_timestamp='a') ; create table u (a timestamp)"
        );
        assert_eq!(
            rewrite(
                "create table x as (select cast(s as timestamp) ts from t) timestamp(ts)"
            ),
            "create table x WITH(designated_timestamp='ts') as (select cast(s as TIMESTAMP(6) ) ts from t)"
        );
        // CREATE TABLE AS: the option goes before AS; casts in the query.
        assert_eq!(
            rewrite(
                "CREATE TABLE x AS (SELECT CAST(a AS long) a, ts FROM t) TIMESTAMP(ts) PARTITION BY NONE WAL"
            ),
            "CREATE TABLE x WITH(designated_timestamp='ts') AS (SELECT CAST(a AS BIGINT) a, ts FROM t)"
        );
        // Other statements: only casts change; a column named like a type stays.
        assert_eq!(
            rewrite(
                "INSERT INTO t SELECT symbol, CAST(x AS timestamp_ns), CAST(y AS symbol), z::long FROM u; SELECT long FROM v"
            ),
            "INSERT INTO t SELECT symbol, CAST(x AS TIMESTAMP), CAST(y AS VARCHAR), z::BIGINT FROM u; SELECT long FROM v"
        );
        // Clauses cut short are left for the parser to report, never a panic.
        for cut in [
            "create table t (a int) dedup upsert keys",
            "create table t (a int) timestamp(",
            "create table t (a symbol capacity",
        ] {
            assert_eq!(rewrite(cut), cut.replace("symbol", "VARCHAR"));
        }
        // Standard DDL passes through.
        assert_eq!(
            rewrite("CREATE TABLE t (a INT, b VARCHAR) AS VALUES (1, 'x')"),
            "CREATE TABLE t (a INT, b VARCHAR) AS VALUES (1, 'x')"
        );
    }

    #[test]
    fn alter_table_in_questdb_dialect() {
        assert_eq!(
            rewrite(
                "alter table trades add column sym symbol capacity 64 index, price double, qty long"
            ),
            "alter table trades add column sym VARCHAR , ADD COLUMN price double, ADD COLUMN qty BIGINT"
        );
        assert_eq!(
            rewrite(
                "ALTER TABLE t ADD COLUMN IF NOT EXISTS ts2 timestamp_ns; alter table t drop column a, b"
            ),
            "ALTER TABLE t ADD COLUMN IF NOT EXISTS ts2 TIMESTAMP; alter table t drop column a, DROP COLUMN b"
        );
        // Operations already spelt out, and renames, pass through.
        for sql in [
            "ALTER TABLE t ADD COLUMN a INT, ADD COLUMN b long",
            "ALTER TABLE t RENAME COLUMN a TO b, DROP COLUMN c",
        ] {
            assert_eq!(rewrite(sql), sql.replace("long", "BIGINT"));
        }
        // Cut short: left for the parser to report.
        for cut in [
            "alter table t add column",
            "alter table t add column a",
            "alter table t drop column a,",
        ] {
            assert_eq!(rewrite(cut), cut);
        }
    }

    #[test]
    fn float_literals_and_implicit_selects() {
        // Float literals lose their suffix; an alias after a space stays.
        assert_eq!(
            rewrite("INSERT INTO y VALUES (1.0f, 2F, 'f'); SELECT 1.5 f, x f FROM t"),
            "INSERT INTO y VALUES (1.0, 2, 'f'); SELECT 1.5 f, x f FROM t"
        );
        // QuestDB's implicit SELECT and its LIMIT lo, hi; a sub-query's LIMIT
        // a, b and a function's arguments stay.
        assert_eq!(
            rewrite(
                "select * from (trades where price > 5 limit 2, 9) t join (prices limit 13) p on true"
            ),
            "select * from ( SELECT * FROM trades where price > 5 limit 7 OFFSET 2 ) t join ( SELECT * FROM prices limit 13) p on true"
        );
        for sql in [
            "select * from (select a from t limit 2, 9) x",
            "select f(a) from t where (a) in (1)",
        ] {
            assert_eq!(rewrite(sql), sql);
        }
    }

    /// Random token soup from the clause words never panics, and leaves
    /// statements that are not CREATE TABLE without casts untouched.
    #[test]
    fn random_clauses_never_panic() {
        let words = [
            "create",
            "table",
            "t",
            "(",
            ")",
            ",",
            "a",
            "symbol",
            "capacity",
            "5",
            "index",
            "timestamp",
            "partition",
            "by",
            "day",
            "wal",
            "bypass",
            "dedup",
            "upsert",
            "keys",
            "with",
            "x",
            "=",
            "in",
            "volume",
            "owned",
            "as",
            "select",
            ";",
            "long",
            "add",
            "column",
            "drop",
            "rename",
            "if",
            "not",
            "exists",
            "limit",
            "where",
            "::",
            "1f",
        ];
        let mut seed = 5u64;
        for _ in 0..3000 {
            let n = {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (seed >> 33) % 14
            };
            let mut sql = String::from(if seed.is_multiple_of(2) {
                "create table t "
            } else {
                "alter table t "
            });
            for _ in 0..n {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                sql.push_str(words[((seed >> 33) % words.len() as u64) as usize]);
                sql.push(' ');
            }
            rewrite(&sql);
        }
        assert_eq!(
            rewrite("select a, b from t where x = 1"),
            "select a, b from t where x = 1"
        );
    }
}
