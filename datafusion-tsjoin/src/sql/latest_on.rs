//! QuestDB's `LATEST ON ts PARTITION BY k [, …]`: the newest row of each
//! key, after the WHERE and before any GROUP BY, in timestamp order.
//!
//! Two steps. The token pass turns the clause into a marker that sqlparser
//! parses, placed where a QUALIFY may stand (after GROUP BY and HAVING):
//!
//! ```text
//! SELECT * FROM trades t WHERE price > 0 LATEST ON ts PARTITION BY sym, side
//! ⇒
//! SELECT * FROM trades t WHERE price > 0 QUALIFY __tsjoin_latest_on(ts, sym, side) = 1
//! ```
//!
//! The AST pass ([`rewrite_query`]) then moves the FROM, the WHERE and the
//! newest-row filter into a derived table named as the relation was, so the
//! SELECT list, GROUP BY and HAVING apply to the newest rows with the same
//! qualifiers, and orders the rows by the timestamp when the query has no
//! ORDER BY and is not an aggregation (QuestDB returns them so):
//!
//! ```text
//! SELECT * FROM (SELECT * FROM trades t WHERE price > 0 QUALIFY
//!   row_number() OVER (PARTITION BY sym, side ORDER BY ts DESC) = 1) t ORDER BY ts
//! ```
//!
//! The filter is what [`crate::latest_by`] answers without sorting.

use super::ast::{AstContext, call_args, is_aggregate};
use super::rewrite::{error_at, skip_ws, word_is};
use datafusion::common::{DataFusionError, Result, plan_datafusion_err};
use sqlparser::ast::{
    BinaryOperator, Distinct, Expr, GroupByExpr, OrderBy, OrderByExpr, OrderByKind,
    OrderByOptions, Query, Select, SelectItem, SetExpr, TableFactor, TableWithJoins,
    Visit, Visitor,
};
use sqlparser::dialect::GenericDialect;
use sqlparser::parser::Parser;
use sqlparser::tokenizer::{Token, TokenWithSpan, Whitespace};
use std::ops::ControlFlow;

/// Name of the marker call that carries a LATEST ON clause.
pub const LATEST_ON_MARKER: &str = "__tsjoin_latest_on";

/// Words that end the PARTITION BY list of a LATEST ON.
const LIST_END: [&str; 10] = [
    "ORDER",
    "GROUP",
    "HAVING",
    "LIMIT",
    "SAMPLE",
    "UNION",
    "EXCEPT",
    "INTERSECT",
    "WINDOW",
    "QUALIFY",
];

/// Words before which the marker goes (the end of the SELECT's clauses a
/// QUALIFY may follow).
const QUALIFY_BEFORE: [&str; 7] = [
    "ORDER",
    "LIMIT",
    "SAMPLE",
    "UNION",
    "EXCEPT",
    "INTERSECT",
    "WINDOW",
];

/// Whether the token at `i` ends a clause list at nesting depth 0.
fn ends(t: &Token, words: &[&str]) -> bool {
    matches!(t, Token::SemiColon | Token::EOF) || words.iter().any(|w| word_is(t, w))
}

/// The first position at or after `from` where, at the nesting depth of
/// `from`, `stop` holds or an enclosing parenthesis closes.
fn scan(tokens: &[TokenWithSpan], from: usize, stop: impl Fn(&Token) -> bool) -> usize {
    let mut depth = 0i32;
    let mut i = from;
    while i < tokens.len() {
        match &tokens[i].token {
            Token::LParen => depth += 1,
            Token::RParen if depth == 0 => return i,
            Token::RParen => depth -= 1,
            t if depth == 0 && stop(t) => return i,
            _ => {}
        }
        i += 1;
    }
    i
}

fn significant(tokens: &[TokenWithSpan]) -> bool {
    tokens
        .iter()
        .any(|t| !matches!(t.token, Token::Whitespace(_)))
}

/// Rewrites every `LATEST ON ts PARTITION BY k, …` into its QUALIFY marker
/// (see the module docs). `LATEST` right after `FROM`, `JOIN`, `AS` or a
/// comma is a relation name and stays.
pub fn rewrite_latest_on(mut tokens: Vec<TokenWithSpan>) -> Result<Vec<TokenWithSpan>> {
    let mut from = 0;
    while let Some(i) = (from..tokens.len()).find(|&i| is_clause(&tokens, i)) {
        let on = skip_ws(&tokens, i + 1);
        let span = tokens[i].span;
        let partition = scan(&tokens, on + 1, |t| {
            word_is(t, "PARTITION") || ends(t, &LIST_END)
        });
        if partition >= tokens.len() || !word_is(&tokens[partition].token, "PARTITION") {
            let at = tokens.get(partition).map_or(span, |t| t.span);
            return Err(error_at(at, "'partition' expected"));
        }
        if !significant(&tokens[on + 1..partition]) {
            return Err(error_at(tokens[on].span, "timestamp column expected"));
        }
        let by = skip_ws(&tokens, partition + 1);
        if by >= tokens.len() || !word_is(&tokens[by].token, "BY") {
            return Err(error_at(tokens[partition].span, "'by' expected"));
        }
        let keys_end = scan(&tokens, by + 1, |t| ends(t, &LIST_END));
        if !significant(&tokens[by + 1..keys_end]) {
            return Err(error_at(tokens[by].span, "partition column expected"));
        }
        let at = scan(&tokens, keys_end, |t| ends(t, &QUALIFY_BEFORE));
        let tok = |t: Token| TokenWithSpan::new(t, span);
        let mut marker = vec![
            tok(Token::Whitespace(Whitespace::Space)),
            tok(Token::make_keyword("QUALIFY")),
            tok(Token::Whitespace(Whitespace::Space)),
            tok(Token::make_word(LATEST_ON_MARKER, None)),
            tok(Token::LParen),
        ];
        marker.extend(tokens[on + 1..partition].iter().cloned());
        marker.push(tok(Token::Comma));
        marker.extend(tokens[by + 1..keys_end].iter().cloned());
        marker.extend([
            tok(Token::RParen),
            tok(Token::Eq),
            tok(Token::Number("1".into(), false)),
            tok(Token::Whitespace(Whitespace::Space)),
        ]);
        let mut out = Vec::with_capacity(tokens.len() + 8);
        out.extend(tokens[..i].iter().cloned());
        out.extend(tokens[keys_end..at].iter().cloned());
        out.extend(marker);
        // Again from the clause's place: the GROUP BY and HAVING moved in
        // front of the marker may hold a LATEST ON of their own.
        from = i;
        out.extend(tokens[at..].iter().cloned());
        tokens = out;
    }
    Ok(tokens)
}

/// Whether `LATEST ON` starts at `i` as a clause, not as a relation named
/// or aliased `latest` before a join's ON: right after `FROM`, `JOIN`,
/// `AS` or a comma, or when the nearest `FROM`, `JOIN`, `ON` or `WHERE`
/// before it at its nesting level is a `JOIN` (whose ON this is), it is a
/// relation.
fn is_clause(tokens: &[TokenWithSpan], i: usize) -> bool {
    if !word_is(&tokens[i].token, "LATEST") {
        return false;
    }
    let on = skip_ws(tokens, i + 1);
    if on >= tokens.len() || !word_is(&tokens[on].token, "ON") {
        return false;
    }
    let before = tokens[..i]
        .iter()
        .rev()
        .find(|t| !matches!(t.token, Token::Whitespace(_)));
    if before.is_some_and(|t| {
        matches!(t.token, Token::Comma)
            || ["FROM", "JOIN", "AS"].iter().any(|w| word_is(&t.token, w))
    }) {
        return false;
    }
    let mut depth = 0i32;
    for t in tokens[..i].iter().rev() {
        match &t.token {
            Token::RParen => depth += 1,
            Token::LParen if depth == 0 => break,
            Token::LParen => depth -= 1,
            t if depth == 0 && word_is(t, "JOIN") => return false,
            t if depth == 0 && ["FROM", "ON", "WHERE"].iter().any(|w| word_is(t, w)) => {
                return true;
            }
            _ => {}
        }
    }
    true
}

/// The timestamp and keys of a LATEST ON marker in `select`'s QUALIFY.
fn take_marker(select: &mut Select) -> Option<(Expr, Vec<Expr>)> {
    let Some(Expr::BinaryOp {
        left,
        op: BinaryOperator::Eq,
        ..
    }) = &select.qualify
    else {
        return None;
    };
    let Expr::Function(f) = left.as_ref() else {
        return None;
    };
    if !f.name.to_string().eq_ignore_ascii_case(LATEST_ON_MARKER) {
        return None;
    }
    let args = call_args(f);
    let (ts, keys) = args.split_first()?;
    let found = ((*ts).clone(), keys.iter().map(|k| (*k).clone()).collect());
    select.qualify = None;
    Some(found)
}

fn parse_err(e: sqlparser::parser::ParserError) -> DataFusionError {
    plan_datafusion_err!("LATEST ON: {e}")
}

/// `row_number() OVER (PARTITION BY keys ORDER BY ts DESC) = 1`.
fn newest_row(ts: &Expr, keys: &[Expr]) -> Result<Expr> {
    let keys = keys
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    let sql = format!("row_number() OVER (PARTITION BY {keys} ORDER BY {ts} DESC) = 1");
    Parser::new(&GenericDialect {})
        .try_with_sql(&sql)
        .and_then(|mut p| p.parse_expr())
        .map_err(parse_err)
}

/// Whether `select` aggregates (GROUP BY, an aggregate call, DISTINCT):
/// then it has no row order to give.
fn aggregates(select: &Select, ctx: &AstContext) -> bool {
    struct Calls<'a>(&'a AstContext);
    impl Visitor for Calls<'_> {
        type Break = ();
        fn pre_visit_expr(&mut self, e: &Expr) -> ControlFlow<()> {
            match e {
                Expr::Function(f) if is_aggregate(f, self.0) => ControlFlow::Break(()),
                _ => ControlFlow::Continue(()),
            }
        }
    }
    let grouped = match &select.group_by {
        GroupByExpr::All(_) => true,
        GroupByExpr::Expressions(e, _) => !e.is_empty(),
    };
    grouped
        || select.having.is_some()
        || matches!(select.distinct, Some(Distinct::Distinct | Distinct::On(_)))
        || select
            .projection
            .iter()
            .any(|p| p.visit(&mut Calls(ctx)).is_break())
}

/// Whether a SELECT-list alias takes the name of the unqualified `ts`: an
/// added `ORDER BY ts` would then order by the alias, so none is added.
fn renamed_to(select: &Select, ts: &Expr) -> bool {
    let Expr::Identifier(ts) = ts else {
        return false;
    };
    select.projection.iter().any(|p| {
        matches!(p, SelectItem::ExprWithAlias { alias, .. }
            if alias.value.eq_ignore_ascii_case(&ts.value))
    })
}

/// Applies the LATEST ON markers of `q`'s SELECT (and of the SELECTs of
/// its set operations): see the module docs.
pub(super) fn rewrite_query(q: &mut Query, ctx: &AstContext) -> Result<()> {
    let Query { body, order_by, .. } = q;
    match body.as_mut() {
        SetExpr::Select(select) => {
            if let Some(ts) = rewrite_select(select)?
                && order_by.is_none()
                && !aggregates(select, ctx)
                && !renamed_to(select, &ts)
            {
                *order_by = Some(OrderBy {
                    kind: OrderByKind::Expressions(vec![OrderByExpr {
                        expr: ts,
                        options: OrderByOptions {
                            asc: None,
                            nulls_first: None,
                        },
                        with_fill: None,
                    }]),
                    interpolate: None,
                });
            }
            Ok(())
        }
        SetExpr::SetOperation { left, right, .. } => {
            set_operand(left)?;
            set_operand(right)
        }
        _ => Ok(()),
    }
}

fn set_operand(e: &mut SetExpr) -> Result<()> {
    match e {
        SetExpr::Select(select) => rewrite_select(select).map(|_| ()),
        SetExpr::SetOperation { left, right, .. } => {
            set_operand(left)?;
            set_operand(right)
        }
        _ => Ok(()),
    }
}

/// Moves `select`'s FROM and WHERE under the newest-row filter; returns
/// the timestamp expression when there was a marker.
fn rewrite_select(select: &mut Select) -> Result<Option<Expr>> {
    let Some((ts, keys)) = take_marker(select) else {
        return Ok(None);
    };
    let filter = newest_row(&ts, &keys)?;
    // One relation keeps its name on the derived table; a join's columns
    // keep their own qualifiers through an unnamed one.
    let alias = match select.from.as_slice() {
        [twj] if twj.joins.is_empty() => match &twj.relation {
            TableFactor::Table { alias: Some(a), .. }
            | TableFactor::Derived { alias: Some(a), .. } => Some(a.name.clone()),
            TableFactor::Table { name, .. } => {
                name.0.last().and_then(|p| p.as_ident().cloned())
            }
            _ => None,
        },
        _ => None,
    };
    let mut inner = select.clone();
    inner.projection = vec![SelectItem::Wildcard(Default::default())];
    inner.distinct = None;
    inner.top = None;
    inner.into = None;
    inner.group_by = GroupByExpr::Expressions(vec![], vec![]);
    inner.having = None;
    inner.named_window = vec![];
    inner.sort_by = vec![];
    inner.cluster_by = vec![];
    inner.distribute_by = vec![];
    inner.qualify = Some(filter);
    let alias = alias.map_or_else(String::new, |a| format!(" AS {a}"));
    let sql = format!("({inner}){alias}");
    let derived = Parser::new(&GenericDialect {})
        .try_with_sql(&sql)
        .and_then(|mut p| p.parse_table_factor())
        .map_err(parse_err)?;
    select.from = vec![TableWithJoins {
        relation: derived,
        joins: vec![],
    }];
    select.selection = None;
    select.prewhere = None;
    Ok(Some(ts))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlparser::tokenizer::Tokenizer;

    fn rewritten(sql: &str) -> Result<String> {
        let tokens = Tokenizer::new(&GenericDialect {}, sql)
            .tokenize_with_location()
            .unwrap();
        // Significant tokens, one space apart.
        Ok(rewrite_latest_on(tokens)?
            .iter()
            .filter(|t| !matches!(t.token, Token::Whitespace(_)))
            .map(|t| t.token.to_string())
            .collect::<Vec<_>>()
            .join(" "))
    }

    #[test]
    fn the_clause_becomes_a_qualify_marker_after_group_by() {
        assert_eq!(
            rewritten("SELECT * FROM t WHERE x > 0 LATEST ON ts PARTITION BY a, b")
                .unwrap(),
            "SELECT * FROM t WHERE x > 0 QUALIFY __tsjoin_latest_on ( ts , a , b ) = 1"
        );
        assert_eq!(
            rewritten("SELECT a, count(*) FROM t LATEST ON ts PARTITION BY a GROUP BY a ORDER BY a LIMIT 2")
                .unwrap(),
            "SELECT a , count ( * ) FROM t GROUP BY a QUALIFY __tsjoin_latest_on ( ts , a ) = 1 ORDER BY a LIMIT 2"
        );
        assert_eq!(
            rewritten("SELECT * FROM (SELECT * FROM t LATEST ON (ts) PARTITION BY a) x")
                .unwrap(),
            "SELECT * FROM ( SELECT * FROM t QUALIFY __tsjoin_latest_on ( ( ts ) , a ) = 1 ) x"
        );
    }

    #[test]
    fn a_relation_named_latest_stays() {
        for sql in [
            "SELECT * FROM a JOIN latest ON a . x = latest . x",
            "SELECT * FROM a JOIN b latest ON a . x = latest . x",
            "SELECT * FROM a JOIN ( SELECT x FROM b ) latest ON a . x = latest . x",
        ] {
            assert_eq!(rewritten(sql).unwrap(), sql);
        }
        // After a join's ON, the clause.
        assert!(
            rewritten(
                "SELECT * FROM a JOIN b ON a . x = b . x LATEST ON ts PARTITION BY k"
            )
            .unwrap()
            .contains("QUALIFY __tsjoin_latest_on")
        );
    }

    #[test]
    fn a_clause_inside_moved_having_is_rewritten_too() {
        let got = rewritten(
            "SELECT k FROM t LATEST ON ts PARTITION BY k GROUP BY k HAVING count(*) > \
             (SELECT count(*) FROM u LATEST ON ts PARTITION BY k)",
        )
        .unwrap();
        assert_eq!(got.matches("__tsjoin_latest_on").count(), 2, "{got}");
        assert!(!got.contains("LATEST"), "{got}");
    }

    #[test]
    fn missing_parts_are_questdb_errors() {
        let e = rewritten("SELECT * FROM t LATEST ON ts").unwrap_err();
        assert!(e.to_string().contains("'partition' expected"), "{e}");
        let e = rewritten("SELECT * FROM t LATEST ON ts PARTITION sym").unwrap_err();
        assert!(e.to_string().contains("'by' expected"), "{e}");
        let e = rewritten("SELECT * FROM t LATEST ON ts PARTITION BY").unwrap_err();
        assert!(e.to_string().contains("partition column expected"), "{e}");
        let e = rewritten("SELECT * FROM t LATEST ON PARTITION BY a").unwrap_err();
        assert!(e.to_string().contains("timestamp column expected"), "{e}");
    }
}
