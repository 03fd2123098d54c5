//! QuestDB's ASOF JOIN and LT JOIN (and DuckDB's and Snowflake's ASOF
//! spellings) in tsjoin's SQL front end:
//!
//! 1. [`rewrite_asof_joins`] (tokens): `ASOF|LT JOIN r [ON ...] [TOLERANCE
//!    2s]` becomes `ASOF JOIN r MATCH_CONDITION(__tsjoin_asof('asof', 2,
//!    's')) [ON ...]`, which sqlparser accepts; Snowflake's `ASOF JOIN r
//!    MATCH_CONDITION(l.ts >= r.ts) ON ...` is left as written.
//! 2. [`prepare_asof`] (AST): expands `SELECT *` as QuestDB does (duplicated
//!    right names get a number: `ts1`), then nests every ASOF join with
//!    everything to its left so that the relation planner receives it.
//! 3. [`AsofJoinRelationPlanner`]: plans the nested join into an
//!    [`AsofJoinNode`].

use super::ast::{norm, placeholder_relation};
use super::relation::{WindowJoinRelationPlanner, string_arg};
use super::rewrite::{WINDOW_MARKER, error_at, skip_ws, word_is};
use crate::asof_join::{
    AsofDirection, AsofJoinClause, AsofJoinNode, AsofMatch, Tolerance, ToleranceUnit,
};
use crate::config::TimestampRegistry;
use crate::window_join::{Side, side_of, timestamp_unit};
use datafusion::common::{
    Column, DFSchema, JoinType, Result, plan_datafusion_err, plan_err,
};
use datafusion::execution::context::SessionContext;
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::planner::{
    PlannedRelation, RelationPlanner, RelationPlannerContext, RelationPlanning,
};
use datafusion::logical_expr::utils::{conjunction, split_conjunction};
use datafusion::logical_expr::{
    BinaryExpr, Expr, ExprSchemable, Extension, LogicalPlan, LogicalPlanBuilder, Operator,
};
use datafusion::sql::parser::Statement as DFStatement;
use sqlparser::ast::{
    self as ast, Ident, Join, JoinOperator, ObjectName, ObjectNamePart, Query, Select,
    SelectItem, SetExpr, Statement, TableFactor, TableWithJoins, Value, Visit, VisitMut,
    Visitor, VisitorMut,
};
use sqlparser::tokenizer::{Span, Token, TokenWithSpan, Whitespace};
use std::collections::{HashMap, HashSet};
use std::ops::ControlFlow;
use std::sync::Arc;

/// Name of the marker function that carries an ASOF/LT JOIN's parameters.
pub const ASOF_MARKER: &str = "__tsjoin_asof";

/// Words that end a join's relation or its ON clause.
const CLAUSE_END: &[&str] = &[
    "WHERE",
    "GROUP",
    "ORDER",
    "LIMIT",
    "HAVING",
    "QUALIFY",
    "UNION",
    "EXCEPT",
    "INTERSECT",
    "JOIN",
    "INNER",
    "LEFT",
    "RIGHT",
    "FULL",
    "CROSS",
    "NATURAL",
    "OUTER",
    "SAMPLE",
    "OFFSET",
    "FETCH",
    "WINDOW",
    "ASOF",
    "SPLICE",
    "HORIZON",
    "RANGE",
    "LIST",
];

fn is_join_word(tokens: &[TokenWithSpan], i: usize, word: &str) -> bool {
    word_is(&tokens[i].token, word) && {
        let n = skip_ws(tokens, i + 1);
        n < tokens.len() && word_is(&tokens[n].token, "JOIN")
    }
}

/// Index of the first token at or after `i`, at parenthesis depth 0, that
/// is one of `words`, a clause end, `)` closing an outer level, `;` or the
/// end; and whether it is one of `words`.
pub(super) fn find(tokens: &[TokenWithSpan], i: usize, words: &[&str]) -> (usize, bool) {
    let mut depth = 0i32;
    let mut j = i;
    while j < tokens.len() {
        let t = &tokens[j].token;
        match t {
            Token::LParen => depth += 1,
            Token::RParen => {
                depth -= 1;
                if depth < 0 {
                    return (j, false);
                }
            }
            Token::SemiColon if depth == 0 => return (j, false),
            _ if depth == 0 => {
                if words.iter().any(|w| word_is(t, w)) {
                    return (j, true);
                }
                if CLAUSE_END.iter().any(|w| word_is(t, w))
                    || is_join_word(tokens, j, "LT")
                {
                    return (j, false);
                }
            }
            _ => {}
        }
        j += 1;
    }
    (j, false)
}

/// The kind of temporal join that starts at token `i` (`asof`, DuckDB's
/// `asof_left`, `asof_right` and `asof_full` for `ASOF LEFT|RIGHT|FULL
/// [OUTER] JOIN`, or `lt`) and the index of its `JOIN`.
fn asof_join_at(
    tokens: &[TokenWithSpan],
    i: usize,
) -> Result<Option<(&'static str, usize)>> {
    let next = |j: usize| skip_ws(tokens, j + 1);
    let is = |j: usize, w: &str| j < tokens.len() && word_is(&tokens[j].token, w);
    if is_join_word(tokens, i, "LT") {
        return Ok(Some(("lt", next(i))));
    }
    if !is(i, "ASOF") {
        return Ok(None);
    }
    let n = next(i);
    if is(n, "JOIN") {
        return Ok(Some(("asof", n)));
    }
    for (side, kind) in [
        ("LEFT", "asof_left"),
        ("RIGHT", "asof_right"),
        ("FULL", "asof_full"),
    ] {
        if is(n, side) {
            let m = if is(next(n), "OUTER") {
                next(next(n))
            } else {
                next(n)
            };
            if is(m, "JOIN") {
                return Ok(Some((kind, m)));
            }
        }
    }
    Ok(None)
}

/// Rewrites every QuestDB-style `ASOF JOIN` / `LT JOIN` (see the module docs).
pub fn rewrite_asof_joins(tokens: Vec<TokenWithSpan>) -> Result<Vec<TokenWithSpan>> {
    let mut out = Vec::with_capacity(tokens.len() + 16);
    let mut i = 0;
    while i < tokens.len() {
        if is_join_word(&tokens, i, "SPLICE") {
            return Err(error_at(
                tokens[i].span,
                "SPLICE JOIN is not supported; use ASOF JOIN (or a FULL JOIN of two ASOF JOINs)",
            ));
        }
        let Some((kind, join)) = asof_join_at(&tokens, i)? else {
            out.push(tokens[i].clone());
            i += 1;
            continue;
        };
        i = rewrite_one(&tokens, (i, join), kind, &mut out)?;
    }
    Ok(out)
}

/// The index after the parenthesised list that starts at or after `i`
/// (DuckDB's `USING (k, ts)`), if there is one.
fn after_parens(tokens: &[TokenWithSpan], i: usize) -> Option<usize> {
    let open = skip_ws(tokens, i);
    if !matches!(tokens.get(open)?.token, Token::LParen) {
        return None;
    }
    let mut depth = 0;
    for (j, t) in tokens.iter().enumerate().skip(open) {
        match t.token {
            Token::LParen => depth += 1,
            Token::RParen => {
                depth -= 1;
                if depth == 0 {
                    return Some(j + 1);
                }
            }
            _ => {}
        }
    }
    None
}

fn rewrite_one(
    tokens: &[TokenWithSpan],
    (at, join): (usize, usize),
    kind: &str,
    out: &mut Vec<TokenWithSpan>,
) -> Result<usize> {
    let span = tokens[at].span;
    let rel = join + 1;
    let (rel_end, found) = find(
        tokens,
        rel,
        &["ON", "TOLERANCE", "MATCH_CONDITION", "USING"],
    );
    if skip_ws(tokens, rel) >= rel_end {
        return Err(error_at(
            span,
            format!("table expected after {} JOIN", kind.to_uppercase()),
        ));
    }
    // The relation may be a sub-query with temporal joins of its own.
    let relation = rewrite_asof_joins(tokens[rel..rel_end].to_vec())?;
    if found && word_is(&tokens[rel_end].token, "MATCH_CONDITION") {
        if matches!(kind, "asof_right" | "asof_full") {
            return Err(error_at(
                span,
                "ASOF RIGHT and FULL JOIN take the time in ON or USING, not MATCH_CONDITION",
            ));
        }
        if kind == "lt" {
            return Err(error_at(
                span,
                "LT JOIN takes no MATCH_CONDITION; use ASOF JOIN",
            ));
        }
        // Snowflake's form: sqlparser parses it as it is (without
        // DuckDB's LEFT: Snowflake's ASOF JOIN keeps every left row).
        let tok = |t: Token| TokenWithSpan::new(t, span);
        out.extend([
            tok(Token::make_keyword("ASOF")),
            tok(Token::Whitespace(Whitespace::Space)),
            tok(Token::make_keyword("JOIN")),
        ]);
        out.extend(relation);
        return Ok(rel_end);
    }
    if found && word_is(&tokens[rel_end].token, "USING") {
        // DuckDB's `USING (k, ..., ts)`: keys, then the time (`>=`).
        let end = after_parens(tokens, rel_end + 1).ok_or_else(|| {
            error_at(tokens[rel_end].span, "USING (column, ...) expected")
        })?;
        let tok = |t: Token| TokenWithSpan::new(t, span);
        let s = |v: &str| tok(Token::SingleQuotedString(v.to_string()));
        let null = || tok(Token::make_keyword("NULL"));
        let args = vec![
            s(kind),
            tok(Token::Comma),
            null(),
            tok(Token::Comma),
            null(),
        ];
        emit_marked_join(out, &relation, ASOF_MARKER, args, None, span);
        out.extend_from_slice(&tokens[rel_end..end]);
        out.push(tok(Token::Whitespace(Whitespace::Space)));
        return Ok(end);
    }
    let (on, tol_at) = if found && word_is(&tokens[rel_end].token, "ON") {
        let (end, found) = find(tokens, rel_end + 1, &["TOLERANCE"]);
        (Some(&tokens[rel_end + 1..end]), found.then_some(end))
    } else if found {
        (None, Some(rel_end))
    } else {
        (None, None)
    };
    let (tolerance, next) = match tol_at {
        Some(t) => {
            let (tol, next) = parse_tolerance(tokens, t)?;
            (Some(tol), next)
        }
        None => (None, on.map_or(rel_end, |o| rel_end + 1 + o.len())),
    };
    let tok = |t: Token| TokenWithSpan::new(t, span);
    let s = |v: &str| tok(Token::SingleQuotedString(v.to_string()));
    let mut args = vec![s(kind), tok(Token::Comma)];
    match tolerance {
        Some(t) => args.extend([
            tok(Token::Number(t.value.to_string(), false)),
            tok(Token::Comma),
            s(t.unit.as_str()),
        ]),
        None => args.extend([
            tok(Token::make_keyword("NULL")),
            tok(Token::Comma),
            tok(Token::make_keyword("NULL")),
        ]),
    }
    emit_marked_join(out, &relation, ASOF_MARKER, args, on, span);
    Ok(next)
}

/// Writes `ASOF JOIN <relation> MATCH_CONDITION(<marker>(<args>)) [ON
/// <on>]`: the form sqlparser parses, in which the relation planners of
/// ASOF and HORIZON JOIN find their clause (`marker`'s arguments) again.
pub(super) fn emit_marked_join(
    out: &mut Vec<TokenWithSpan>,
    relation: &[TokenWithSpan],
    marker: &str,
    args: Vec<TokenWithSpan>,
    on: Option<&[TokenWithSpan]>,
    span: Span,
) {
    let tok = |t: Token| TokenWithSpan::new(t, span);
    let ws = || tok(Token::Whitespace(Whitespace::Space));
    out.extend([
        tok(Token::make_keyword("ASOF")),
        ws(),
        tok(Token::make_keyword("JOIN")),
        ws(),
    ]);
    out.extend_from_slice(relation);
    out.extend([
        ws(),
        tok(Token::make_keyword("MATCH_CONDITION")),
        tok(Token::LParen),
        tok(Token::make_word(marker, None)),
        tok(Token::LParen),
    ]);
    out.extend(args);
    out.extend([tok(Token::RParen), tok(Token::RParen), ws()]);
    if let Some(on) = on {
        out.push(tok(Token::make_keyword("ON")));
        out.extend_from_slice(on);
        out.push(ws());
    }
}

/// Parses `TOLERANCE <n><unit>` at `at`; returns it and the index after.
fn parse_tolerance(tokens: &[TokenWithSpan], at: usize) -> Result<(Tolerance, usize)> {
    let mut i = skip_ws(tokens, at + 1);
    let Some(first) = tokens.get(i) else {
        return Err(error_at(tokens[at].span, "TOLERANCE value expected"));
    };
    let negative = matches!(first.token, Token::Minus);
    if negative {
        i = skip_ws(tokens, i + 1);
    }
    let (digits, mut unit, span) = match tokens.get(i).map(|t| (&t.token, t.span)) {
        Some((Token::Number(n, _), span)) => {
            let d: String = n.chars().take_while(|c| c.is_ascii_digit()).collect();
            (d.clone(), n[d.len()..].to_string(), span)
        }
        Some((Token::SingleQuotedString(v), span)) => {
            let d: String = v.chars().take_while(|c| c.is_ascii_digit()).collect();
            (d.clone(), v[d.len()..].to_string(), span)
        }
        _ => {
            return Err(error_at(
                tokens.get(i).map_or(tokens[at].span, |t| t.span),
                "TOLERANCE value expected, such as TOLERANCE 2s",
            ));
        }
    };
    i += 1;
    // `2s` tokenises as the number 2 and the word s.
    if unit.is_empty()
        && let Some(Token::Word(w)) = tokens.get(i).map(|t| &t.token)
        && w.quote_style.is_none()
        && !CLAUSE_END.iter().any(|k| w.value.eq_ignore_ascii_case(k))
    {
        unit = w.value.clone();
        i += 1;
    }
    let value: i64 = digits
        .parse()
        .map_err(|_| error_at(span, "TOLERANCE value expected, such as TOLERANCE 2s"))?;
    if negative && value != 0 {
        return Err(error_at(span, "ASOF JOIN TOLERANCE must be positive"));
    }
    if value == 0 {
        return Err(error_at(span, "zero is not a valid tolerance value"));
    }
    let unit = ToleranceUnit::parse(&unit).ok_or_else(|| {
        error_at(span, format!("unsupported TOLERANCE unit [unit={unit}]"))
    })?;
    Ok((Tolerance { value, unit }, i))
}

/// True for an ASOF join of any spelling (not a rewritten WINDOW JOIN).
fn is_asof(join: &Join) -> bool {
    match &join.join_operator {
        JoinOperator::AsOf {
            match_condition, ..
        } => !matches!(match_condition, ast::Expr::Function(f)
            if f.name.to_string().eq_ignore_ascii_case(WINDOW_MARKER)
                || f.name.to_string().eq_ignore_ascii_case(super::horizon::HORIZON_MARKER)),
        _ => false,
    }
}

fn table_key(name: &ObjectName) -> String {
    name.0
        .iter()
        .map(|p| match p {
            ObjectNamePart::Identifier(i) => norm(i),
            other => other.to_string(),
        })
        .collect::<Vec<_>>()
        .join(".")
}

/// The AST pass for ASOF joins (see the module docs), run before the
/// WINDOW JOIN pass.
pub async fn prepare_asof(ctx: &SessionContext, stmt: &mut Statement) -> Result<()> {
    // Column names of the tables and sub-queries `SELECT *` may need.
    struct Tables(Vec<ObjectName>, Vec<Query>);
    impl Visitor for Tables {
        type Break = ();
        fn pre_visit_select(&mut self, select: &Select) -> ControlFlow<()> {
            let wildcard = select
                .projection
                .iter()
                .any(|i| matches!(i, SelectItem::Wildcard(_)));
            for twj in &select.from {
                if wildcard && twj.joins.iter().any(is_asof) {
                    let rels = std::iter::once(&twj.relation)
                        .chain(twj.joins.iter().map(|j| &j.relation));
                    for r in rels {
                        match r {
                            TableFactor::Table { name, .. } => self.0.push(name.clone()),
                            TableFactor::Derived { subquery, .. } => {
                                self.1.push(subquery.as_ref().clone())
                            }
                            _ => {}
                        }
                    }
                }
            }
            ControlFlow::Continue(())
        }
    }
    let mut tables = Tables(vec![], vec![]);
    let _ = Visit::visit(&*stmt, &mut tables);
    let mut columns = Known::default();
    for name in tables.0 {
        let key = table_key(&name);
        if let Ok(p) = ctx.table_provider(key.as_str()).await {
            columns.tables.insert(
                key,
                p.schema()
                    .fields()
                    .iter()
                    .map(|f| f.name().clone())
                    .collect(),
            );
        }
    }
    // A sub-query's columns are its plan's (`SELECT *` inside included); a
    // sub-query that does not plan on its own (tsjoin's joins inside it
    // need this pass first) keeps the AST's reading.
    for query in tables.1 {
        let key = query.to_string();
        let st = DFStatement::Statement(Box::new(Statement::Query(Box::new(query))));
        if let Ok(plan) = ctx.state().statement_to_plan(st).await {
            let names = plan.schema().fields().iter().map(|f| f.name().clone());
            columns.derived.insert(key, names.collect());
        }
    }
    struct Pass<'a>(&'a Known);
    impl VisitorMut for Pass<'_> {
        type Break = ();
        // Inner queries first: an outer `SELECT *` then reads a sub-query's
        // expanded projection.
        fn post_visit_query(&mut self, q: &mut Query) -> ControlFlow<()> {
            visit_set_expr(&mut q.body, self.0);
            ControlFlow::Continue(())
        }
    }
    let _ = stmt.visit(&mut Pass(&columns));
    Ok(())
}

/// Column names known before planning: of catalog tables (by
/// [`table_key`]) and of FROM sub-queries (by their SQL text).
#[derive(Debug, Default)]
struct Known {
    tables: HashMap<String, Vec<String>>,
    derived: HashMap<String, Vec<String>>,
}

fn visit_set_expr(body: &mut SetExpr, columns: &Known) {
    match body {
        SetExpr::Select(s) if s.from.iter().any(|t| t.joins.iter().any(is_asof)) => {
            expand_wildcard(s, columns);
            for twj in s.from.iter_mut() {
                nest_asof_joins(twj);
            }
        }
        SetExpr::SetOperation { left, right, .. } => {
            visit_set_expr(left, columns);
            visit_set_expr(right, columns);
        }
        _ => {}
    }
}

/// Output column names of a relation, when they can be told from the AST
/// and `columns`, with the name that qualifies them.
fn relation_columns(r: &TableFactor, columns: &Known) -> Option<(Ident, Vec<String>)> {
    match r {
        TableFactor::Table { name, alias, .. } => {
            let cols = columns.tables.get(&table_key(name))?.clone();
            let q = match alias {
                Some(a) => a.name.clone(),
                None => match name.0.last()? {
                    ObjectNamePart::Identifier(i) => i.clone(),
                    _ => return None,
                },
            };
            Some((q, cols))
        }
        TableFactor::Derived {
            subquery,
            alias: Some(a),
            ..
        } => Some((a.name.clone(), derived_columns(subquery, columns)?)),
        _ => None,
    }
}

/// A FROM sub-query's output column names: from its plan, or else (a
/// sub-query with tsjoin's joins, already expanded by this pass: the pass
/// runs inner queries first) from its projection when every item is named.
fn derived_columns(subquery: &Query, columns: &Known) -> Option<Vec<String>> {
    if let Some(cols) = columns.derived.get(&subquery.to_string()) {
        return Some(cols.clone());
    }
    let SetExpr::Select(s) = subquery.body.as_ref() else {
        return None;
    };
    s.projection
        .iter()
        .map(|i| match i {
            SelectItem::UnnamedExpr(ast::Expr::Identifier(id)) => Some(norm(id)),
            SelectItem::UnnamedExpr(ast::Expr::CompoundIdentifier(p)) => {
                p.last().map(norm)
            }
            SelectItem::ExprWithAlias { alias, .. } => Some(norm(alias)),
            _ => None,
        })
        .collect()
}

/// The columns an ASOF join's `USING (...)` names (normalised), if any.
fn using_columns(join: &Join) -> Vec<String> {
    match &join.join_operator {
        JoinOperator::AsOf {
            constraint: ast::JoinConstraint::Using(names),
            ..
        } if is_asof(join) => names
            .iter()
            .filter_map(|n| n.0.last().and_then(|p| p.as_ident()).map(norm))
            .collect(),
        _ => vec![],
    }
}

/// `SELECT *` over ASOF joins lists every relation's columns, naming a
/// column whose name an earlier relation already used `name1` (`name2`,
/// ... if that is taken too), as QuestDB does. Left as `*` when some
/// relation's columns are not known from the AST and catalog.
fn expand_wildcard(select: &mut Select, columns: &Known) {
    if !select
        .projection
        .iter()
        .any(|i| matches!(i, SelectItem::Wildcard(_)))
    {
        return;
    }
    // A sub-query without an alias gets one, so its columns can be named
    // (its output names do not change: a qualifier is not part of them).
    for (n, twj) in select.from.iter_mut().enumerate() {
        let joined = twj.joins.iter_mut().map(|j| &mut j.relation);
        for (m, r) in std::iter::once(&mut twj.relation).chain(joined).enumerate() {
            if let TableFactor::Derived {
                subquery,
                alias: alias @ None,
                ..
            } = r
                && derived_columns(subquery, columns).is_some()
            {
                *alias = Some(ast::TableAlias {
                    explicit: true,
                    name: Ident::new(format!("__tsjoin_subquery_{n}_{m}")),
                    columns: vec![],
                    at: None,
                });
            }
        }
    }
    let mut rels: Vec<(Ident, Vec<String>)> = vec![];
    for twj in &select.from {
        let joined = twj.joins.iter().map(|j| (&j.relation, using_columns(j)));
        for (r, using) in std::iter::once((&twj.relation, vec![])).chain(joined) {
            match relation_columns(r, columns) {
                // DuckDB's USING shows its columns once, from the left.
                Some((q, cols)) => {
                    let kept: Vec<String> =
                        cols.into_iter().filter(|c| !using.contains(c)).collect();
                    rels.push((q, kept));
                }
                None => return,
            }
        }
    }
    let mut used: HashSet<String> = HashSet::new();
    let mut items = vec![];
    for (q, cols) in rels {
        for c in cols {
            let expr = ast::Expr::CompoundIdentifier(vec![
                q.clone(),
                Ident::with_quote('"', &c),
            ]);
            if used.insert(c.clone()) {
                items.push(SelectItem::UnnamedExpr(expr));
            } else {
                let mut k = 1;
                while used.contains(&format!("{c}{k}")) {
                    k += 1;
                }
                let alias = format!("{c}{k}");
                used.insert(alias.clone());
                items.push(SelectItem::ExprWithAlias {
                    expr,
                    alias: Ident::with_quote('"', alias),
                });
            }
        }
    }
    let mut out = vec![];
    for item in select.projection.drain(..) {
        match item {
            SelectItem::Wildcard(_) => out.extend(items.iter().cloned()),
            other => out.push(other),
        }
    }
    select.projection = out;
}

/// `a JOIN b ASOF JOIN p ASOF JOIN q` becomes `(((a JOIN b) ASOF JOIN p)
/// ASOF JOIN q)`: each ASOF join is the only join of a `NestedJoin`.
fn nest_asof_joins(twj: &mut TableWithJoins) {
    if !twj.joins.iter().any(is_asof) {
        return;
    }
    let placeholder = placeholder_relation();
    let nested = |relation, joins| TableFactor::NestedJoin {
        table_with_joins: Box::new(TableWithJoins { relation, joins }),
        alias: None,
    };
    let mut current = std::mem::replace(&mut twj.relation, placeholder);
    let mut pending: Vec<Join> = vec![];
    for j in twj.joins.drain(..) {
        if is_asof(&j) {
            if !pending.is_empty() {
                current = nested(current, std::mem::take(&mut pending));
            }
            current = nested(current, vec![j]);
        } else {
            pending.push(j);
        }
    }
    twj.relation = current;
    twj.joins = pending;
}

/// Plans `NestedJoin(left ASOF JOIN right)` table factors into
/// [`AsofJoinNode`]s; leaves every other relation to the next planner.
#[derive(Debug)]
pub struct AsofJoinRelationPlanner {
    inner: WindowJoinRelationPlanner,
}

impl AsofJoinRelationPlanner {
    /// A planner that finds designated timestamps in `timestamps`.
    pub fn new(timestamps: Arc<TimestampRegistry>) -> Self {
        Self {
            inner: WindowJoinRelationPlanner::new(timestamps),
        }
    }
}

impl RelationPlanner for AsofJoinRelationPlanner {
    fn plan_relation(
        &self,
        relation: TableFactor,
        ctx: &mut dyn RelationPlannerContext,
    ) -> Result<RelationPlanning> {
        let ours = matches!(&relation, TableFactor::NestedJoin { table_with_joins, .. }
            if table_with_joins.joins.len() == 1 && is_asof(&table_with_joins.joins[0]));
        if !ours {
            return Ok(RelationPlanning::Original(Box::new(relation)));
        }
        let TableFactor::NestedJoin {
            table_with_joins,
            alias,
        } = relation
        else {
            unreachable!()
        };
        let twj = *table_with_joins;
        let join = twj.joins.into_iter().next().unwrap();
        let JoinOperator::AsOf {
            match_condition,
            constraint,
        } = join.join_operator
        else {
            unreachable!()
        };
        let left = ctx.plan(twj.relation)?;
        let right = ctx.plan(join.relation)?;
        let node = self.plan_asof(ctx, left, right, match_condition, constraint)?;
        let plan = LogicalPlan::Extension(Extension {
            node: Arc::new(node),
        });
        Ok(RelationPlanning::Planned(Box::new(PlannedRelation::new(
            plan, alias,
        ))))
    }
}

/// `left op right` as a time match (`left` a left-only expression, `right`
/// right-only), if `e` is one.
fn time_match(e: &Expr, ls: &DFSchema, rs: &DFSchema) -> Option<(Expr, Expr, AsofMatch)> {
    let Expr::BinaryExpr(BinaryExpr { left, op, right }) = e else {
        return None;
    };
    let flip = match (side_of(left, ls, rs), side_of(right, ls, rs)) {
        (Side::Left, Side::Right) => false,
        (Side::Right, Side::Left) => true,
        _ => return None,
    };
    // Normalised to `left op right`.
    let op = if flip { op.swap()? } else { *op };
    let (l, r) = if flip {
        ((**right).clone(), (**left).clone())
    } else {
        ((**left).clone(), (**right).clone())
    };
    let (direction, strict) = match op {
        Operator::GtEq => (AsofDirection::Backward, false),
        Operator::Gt => (AsofDirection::Backward, true),
        Operator::LtEq => (AsofDirection::Forward, false),
        Operator::Lt => (AsofDirection::Forward, true),
        _ => return None,
    };
    Some((l, r, AsofMatch { direction, strict }))
}

/// Whether ON condition `c` is DuckDB's time match: an inequality between
/// a left and a right time (or date, or number) of one order class.
fn is_time_match(c: &Expr, ls: &DFSchema, rs: &DFSchema) -> bool {
    time_match(c, ls, rs).is_some_and(|(l, r, _)| {
        matches!(
            (order_class(&l, ls), order_class(&r, rs)),
            (Some(a), Some(b)) if a == b
        )
    })
}

/// What an ASOF time of DuckDB's spelling orders by: 0 for timestamps and
/// dates, 1 for integers and floating point (both sides must agree);
/// `None` for any other type (strings and decimals are not supported).
fn order_class(e: &Expr, s: &DFSchema) -> Option<u8> {
    use datafusion::arrow::datatypes::DataType as T;
    match e.get_type(s).ok()? {
        T::Timestamp(..) | T::Date32 | T::Date64 => Some(0),
        T::Int8
        | T::Int16
        | T::Int32
        | T::Int64
        | T::UInt8
        | T::UInt16
        | T::UInt32
        | T::Float16
        | T::Float32
        | T::Float64 => Some(1),
        _ => None,
    }
}

/// DuckDB's ASOF times `l` and `r` as timestamps the engine orders by:
/// dates become midnight timestamps (milliseconds), integers timestamps of
/// the same number of nanoseconds, doubles their order key's (only the
/// order matters).
fn duckdb_times(
    l: Expr,
    r: Expr,
    ls: &DFSchema,
    rs: &DFSchema,
    m: AsofMatch,
) -> Result<(Expr, Expr, AsofMatch)> {
    use datafusion::arrow::datatypes::{DataType as T, TimeUnit};
    let (lc, rc) = (order_class(&l, ls), order_class(&r, rs));
    if lc.is_none() || lc != rc {
        return plan_err!(
            "ASOF JOIN compares times, dates or numbers: {l} is {} and {r} is {}",
            l.get_type(ls).map_or("?".to_string(), |t| t.to_string()),
            r.get_type(rs).map_or("?".to_string(), |t| t.to_string())
        );
    }
    // Numbers compare as doubles when either side is one (as in DuckDB),
    // through their order key (`functions/order_key.rs`).
    let float = |e: &Expr, s: &DFSchema| e.get_type(s).is_ok_and(|t| t.is_floating());
    let doubles = float(&l, ls) || float(&r, rs);
    let time = |e: Expr, s: &DFSchema| -> Result<Expr> {
        let ns = T::Timestamp(TimeUnit::Nanosecond, None);
        Ok(match e.get_type(s)? {
            T::Timestamp(..) => e,
            T::Date32 | T::Date64 => {
                e.cast_to(&T::Timestamp(TimeUnit::Millisecond, None), s)?
            }
            _ if doubles => {
                let key = Expr::ScalarFunction(ScalarFunction::new_udf(
                    Arc::new(crate::functions::order_key_udf()),
                    vec![e.cast_to(&T::Float64, s)?],
                ));
                key.cast_to(&ns, s)?
            }
            _ => e.cast_to(&T::Int64, s)?.cast_to(&ns, s)?,
        })
    };
    Ok((time(l, ls)?, time(r, rs)?, m))
}

/// The column an expression names, through casts.
fn column_of(e: &Expr) -> Option<&datafusion::common::Column> {
    match e {
        Expr::Column(c) => Some(c),
        Expr::Cast(c) => column_of(&c.expr),
        Expr::TryCast(c) => column_of(&c.expr),
        _ => None,
    }
}

/// QuestDB's rule for ASOF-like joins (`join`: "ASOF/LT JOIN", "HORIZON
/// JOIN"): no equality key may be a side's designated timestamp (the time
/// match already uses it).
pub(super) fn check_keys_not_designated(
    join: &str,
    keys: &[(Expr, Expr)],
    left_ts: &Expr,
    right_ts: &Expr,
) -> Result<()> {
    let same = |k: &Expr, ts: &Expr| matches!((column_of(k), column_of(ts)), (Some(a), Some(b)) if a == b);
    for (l, r) in keys {
        if same(l, left_ts) || same(r, right_ts) {
            return plan_err!("{join} cannot use designated timestamp as a join key");
        }
    }
    Ok(())
}

/// Splits the ON conditions other than keys and time into `(left only,
/// right only)`; constants count as left. A condition reading both sides
/// is an error: "`{supports}` and conditions on one side; `{c}` reads both
/// sides".
pub(super) fn split_one_side_conditions(
    supports: &str,
    conditions: Vec<Expr>,
    ls: &DFSchema,
    rs: &DFSchema,
) -> Result<(Vec<Expr>, Vec<Expr>)> {
    let (mut left_only, mut right_only) = (vec![], vec![]);
    for c in conditions {
        match side_of(&c, ls, rs) {
            Side::None | Side::Left => left_only.push(c),
            Side::Right => right_only.push(c),
            Side::Both => {
                return plan_err!(
                    "{supports} and conditions on one side; {c} reads both sides"
                );
            }
        }
    }
    Ok((left_only, right_only))
}

impl AsofJoinRelationPlanner {
    fn plan_asof(
        &self,
        ctx: &mut dyn RelationPlannerContext,
        left: LogicalPlan,
        mut right: LogicalPlan,
        match_condition: ast::Expr,
        constraint: ast::JoinConstraint,
    ) -> Result<AsofJoinNode> {
        let (ls, rs) = (Arc::clone(left.schema()), Arc::clone(right.schema()));
        let joined = ls.join(&rs)?;
        // QuestDB's spelling carries a marker; Snowflake's a condition.
        let (kind, tolerance, condition) = match &match_condition {
            ast::Expr::Function(f)
                if f.name.to_string().eq_ignore_ascii_case(ASOF_MARKER) =>
            {
                let args = super::ast::call_args(f);
                let kind = args.first().and_then(|a| string_arg(a));
                let tolerance =
                    match (args.get(1), args.get(2).and_then(|a| string_arg(a))) {
                        (Some(ast::Expr::Value(v)), Some(unit)) => match &v.value {
                            Value::Number(n, _) => Some(Tolerance {
                                value: n.parse().map_err(|_| {
                                    plan_datafusion_err!("malformed ASOF JOIN marker")
                                })?,
                                unit: ToleranceUnit::parse(&unit).ok_or_else(|| {
                                    plan_datafusion_err!("malformed ASOF JOIN marker")
                                })?,
                            }),
                            _ => None,
                        },
                        _ => None,
                    };
                (
                    kind.ok_or_else(|| {
                        plan_datafusion_err!("malformed ASOF JOIN marker")
                    })?,
                    tolerance,
                    None,
                )
            }
            other => (
                "match_condition".to_string(),
                None,
                Some(ctx.sql_to_expr(other.clone(), &joined)?),
            ),
        };
        // DuckDB's `ASOF LEFT|RIGHT|FULL JOIN` are outer joins; its `ASOF
        // JOIN` (with the match in ON or USING) is an inner join.
        let (kind, outer) = match kind.as_str() {
            "asof_left" => ("asof".to_string(), Some(JoinType::Left)),
            "asof_right" => ("asof".to_string(), Some(JoinType::Right)),
            "asof_full" => ("asof".to_string(), Some(JoinType::Full)),
            _ => (kind, None),
        };
        // DuckDB's USING: the last column is the time (`>=`).
        let mut using_time = None;
        let constraint = match constraint {
            ast::JoinConstraint::Using(mut names)
                if kind == "asof" && condition.is_none() =>
            {
                let last = names
                    .pop()
                    .and_then(|n| n.0.last().and_then(|p| p.as_ident().cloned()))
                    .ok_or_else(|| {
                        plan_datafusion_err!("ASOF JOIN USING needs a column")
                    })?;
                let name = ctx.normalize_ident(last);
                let col = |s: &DFSchema, side: &str| {
                    s.iter()
                        .find(|(_, f)| *f.name() == name)
                        .map(|(q, f)| Expr::Column(Column::new(q.cloned(), f.name())))
                        .ok_or_else(|| {
                            plan_datafusion_err!(
                                "ASOF JOIN USING ({name}): the {side} side has no column {name}"
                            )
                        })
                };
                using_time = Some((col(&ls, "left")?, col(&rs, "right")?));
                ast::JoinConstraint::Using(names)
            }
            c => c,
        };
        // The ON condition as written, to tell SQL's `=` keys (NULL matches
        // nothing) from `IS NOT DISTINCT FROM` ones in DuckDB's spelling.
        let on_written = match &constraint {
            ast::JoinConstraint::On(e) => Some(e.clone()),
            _ => None,
        };
        let (keys, rest) = self
            .inner
            .plan_on(ctx, constraint, &ls, &rs, &joined)
            .map_err(|e| {
                // QuestDB's wording for keys that cannot be compared.
                if e.to_string().contains("Cannot infer common argument type") {
                    plan_datafusion_err!("join column type mismatch: {e}")
                } else {
                    e
                }
            })?;
        let mut rest: Vec<Expr> = rest.map_or(vec![], |r| {
            split_conjunction(&r).into_iter().cloned().collect()
        });

        // The time match: MATCH_CONDITION, else one inequality in ON or
        // USING's last column (DuckDB), else the designated timestamps.
        let mut explicit = None;
        let mut duckdb = false;
        // DuckDB's: the ON condition that is the time match.
        let mut time_condition = None;
        if let Some((l, r)) = using_time {
            duckdb = true;
            explicit = Some(duckdb_times(l, r, &ls, &rs, AsofMatch::ASOF)?);
        } else if let Some(c) = &condition {
            explicit = Some(time_match(c, &ls, &rs).ok_or_else(|| {
                plan_datafusion_err!(
                    "MATCH_CONDITION must compare a left and a right time with >=, >, <= or <: {c}"
                )
            })?);
        } else if kind == "asof" {
            let found: Vec<usize> = rest
                .iter()
                .enumerate()
                .filter(|(_, c)| is_time_match(c, &ls, &rs))
                .map(|(i, _)| i)
                .collect();
            // Several: the first between times (or dates) is the match, else
            // the first; the others stay conditions on both sides.
            let is_time = |i: &usize| {
                time_match(&rest[*i], &ls, &rs)
                    .is_some_and(|(l, _, _)| order_class(&l, &ls) == Some(0))
            };
            let chosen = found
                .iter()
                .copied()
                .find(is_time)
                .or(found.first().copied());
            if let Some(i) = chosen {
                let c = rest.remove(i);
                let (l, r, m) = time_match(&c, &ls, &rs).expect("found as a time match");
                time_condition = Some(c);
                duckdb = true;
                explicit = Some(duckdb_times(l, r, &ls, &rs, m)?);
            }
        }
        // DuckDB's conditions are SQL's: a NULL key in an `=` matches
        // nothing, and its other conditions keep three-valued logic (not
        // QuestDB's NULL-as-value, which `plan_on` applied). A left row with
        // a NULL in such a key does not look (`l.k IS NOT NULL` joins the
        // left-only ON conditions); the right rows with a NULL there could
        // only match such a row, so they need no filter (one would also
        // reorder the right side's ties).
        if duckdb {
            match on_written {
                Some(e) => {
                    let mut sql_rest = vec![];
                    for c in split_conjunction(&ctx.sql_to_expr(e, &joined)?) {
                        let sides = |a: &Expr, b: &Expr| match (
                            side_of(a, &ls, &rs),
                            side_of(b, &ls, &rs),
                        ) {
                            (Side::Left, Side::Right) => Some(a.clone()),
                            (Side::Right, Side::Left) => Some(b.clone()),
                            _ => None,
                        };
                        match c {
                            Expr::BinaryExpr(BinaryExpr { left, op, right })
                                if matches!(
                                    op,
                                    Operator::Eq | Operator::IsNotDistinctFrom
                                ) && sides(left, right).is_some() =>
                            {
                                if *op == Operator::Eq {
                                    sql_rest.extend(
                                        sides(left, right).map(|l| l.is_not_null()),
                                    );
                                }
                            }
                            c if Some(c) == time_condition.as_ref() => {
                                // Only the first such conjunct is the match.
                                time_condition = None;
                            }
                            c => sql_rest.push(c.clone()),
                        }
                    }
                    rest = sql_rest;
                }
                // USING: every key is an `=`.
                None => rest.extend(keys.iter().map(|(l, _)| l.clone().is_not_null())),
            }
        }
        let (left_ts, right_ts, matching) = match explicit {
            Some((l, r, m)) => {
                for (e, s) in [(&l, &ls), (&r, &rs)] {
                    timestamp_unit(&e.to_string(), &e.get_type(s)?).map_err(|_| {
                        plan_datafusion_err!(
                            "ASOF JOIN compares times: {e} is {}, not a timestamp",
                            e.get_type(s).map_or("?".to_string(), |t| t.to_string())
                        )
                    })?;
                }
                (l, r, m)
            }
            None => {
                let matching = if kind == "lt" {
                    AsofMatch::LT
                } else {
                    AsofMatch::ASOF
                };
                (
                    self.inner.designated_timestamp(&left, "left")?,
                    self.inner.designated_timestamp(&right, "right")?,
                    matching,
                )
            }
        };
        check_keys_not_designated("ASOF/LT JOIN", &keys, &left_ts, &right_ts)?;
        // Conditions reading both sides pick among the candidates: the
        // match is the latest (forward: earliest) right row that also
        // satisfies them (DuckDB's rule).
        let (pair, rest): (Vec<Expr>, Vec<Expr>) = rest
            .into_iter()
            .partition(|c| side_of(c, &ls, &rs) == Side::Both);
        let (left_only, right_only) = split_one_side_conditions(
            "ASOF JOIN ON supports equality keys, one time inequality",
            rest,
            &ls,
            &rs,
        )?;
        // QuestDB's spelling keeps every left row; DuckDB's is inner unless
        // LEFT, RIGHT or FULL.
        let join_type = match (duckdb, outer) {
            (_, Some(t)) => t,
            (false, None) => JoinType::Left,
            (true, None) => JoinType::Inner,
        };
        if crate::asof_join::emits_unmatched_right(join_type) && !right_only.is_empty() {
            return plan_err!(
                "ASOF {} JOIN does not support ON conditions on the right side only",
                join_type.to_string().to_uppercase()
            );
        }
        // Right-only conditions choose which right rows exist at all.
        if let Some(f) = conjunction(right_only) {
            right = LogicalPlanBuilder::from(right).filter(f)?.build()?;
        }
        AsofJoinNode::try_new(
            Arc::new(left),
            Arc::new(right),
            AsofJoinClause {
                join_type,
                pair_filter: conjunction(pair),
                on: keys,
                filter: conjunction(left_only),
                left_ts,
                right_ts,
                matching,
                tolerance,
            },
        )
    }
}
