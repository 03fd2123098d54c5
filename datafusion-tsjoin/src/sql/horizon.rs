//! QuestDB's HORIZON JOIN in tsjoin's SQL front end:
//!
//! 1. [`rewrite_horizon_joins`] (tokens): `HORIZON JOIN r [ON ...]
//!    [HORIZON JOIN r2 [ON ...]] RANGE FROM 0s TO 60s STEP 1s AS h` becomes
//!    `ASOF JOIN r MATCH_CONDITION(__tsjoin_horizon()) [ON ...] ASOF JOIN r2
//!    MATCH_CONDITION(__tsjoin_horizon('h', 'range', '0', '60000000000',
//!    '1000000000')) [ON ...]` (offsets in nanoseconds, checked here:
//!    units, FROM <= TO, STEP > 0, a strictly increasing LIST, the cap).
//! 2. [`prepare_horizon`] (AST): rejects other joins at the same level,
//!    adds the implicit GROUP BY (the non-aggregate SELECT expressions) or
//!    checks an explicit one under QuestDB's rules, moves WHERE (left-only)
//!    into the left relation so that it filters left rows before the
//!    expansion, and nests the joins with the left relation so that the
//!    relation planner receives them.
//! 3. [`HorizonJoinRelationPlanner`]: plans the nested joins into one
//!    [`HorizonJoinNode`].

use super::asof::{
    check_keys_not_designated, emit_marked_join, find, split_one_side_conditions,
};
use super::ast::{call_args, norm, placeholder_relation};
use super::relation::{WindowJoinRelationPlanner, string_arg};
use super::rewrite::{error_at, skip_ws, word_is};
use crate::asof_join::ToleranceUnit;
use crate::config::TimestampRegistry;
use crate::horizon_join::{
    HorizonJoinClause, HorizonJoinNode, HorizonOffsets, HorizonRight,
};
use datafusion::common::{DataFusionError, Result, plan_datafusion_err, plan_err};
use datafusion::execution::context::SessionContext;
use datafusion::logical_expr::planner::{
    PlannedRelation, RelationPlanner, RelationPlannerContext, RelationPlanning,
};
use datafusion::logical_expr::utils::{conjunction, split_conjunction};
use datafusion::logical_expr::{Extension, LogicalPlan, LogicalPlanBuilder};
use sqlparser::ast::{
    self as ast, GroupByExpr, Join, JoinOperator, Query, Select, SelectItem, SetExpr,
    Statement, TableFactor, TableWithJoins, Value, Visit, VisitMut, Visitor, VisitorMut,
};
use sqlparser::dialect::GenericDialect;
use sqlparser::parser::Parser;
use sqlparser::tokenizer::{Span, Token, TokenWithSpan};
use std::collections::HashSet;
use std::ops::ControlFlow;
use std::sync::Arc;

/// Name of the marker function that carries a HORIZON JOIN's parameters.
pub const HORIZON_MARKER: &str = "__tsjoin_horizon";

fn is_horizon_word(tokens: &[TokenWithSpan], i: usize) -> bool {
    word_is(&tokens[i].token, "HORIZON") && {
        let n = skip_ws(tokens, i + 1);
        n < tokens.len() && word_is(&tokens[n].token, "JOIN")
    }
}

/// Rewrites every chain of HORIZON JOINs (see the module docs).
pub fn rewrite_horizon_joins(tokens: Vec<TokenWithSpan>) -> Result<Vec<TokenWithSpan>> {
    let mut out = Vec::with_capacity(tokens.len() + 16);
    let mut i = 0;
    while i < tokens.len() {
        if is_horizon_word(&tokens, i) {
            i = rewrite_one(&tokens, i, &mut out)?;
        } else {
            out.push(tokens[i].clone());
            i += 1;
        }
    }
    Ok(out)
}

/// Rewrites the HORIZON JOIN at `at` (and, recursively through the caller's
/// loop, the ones after it); returns the index after what it consumed.
fn rewrite_one(
    tokens: &[TokenWithSpan],
    at: usize,
    out: &mut Vec<TokenWithSpan>,
) -> Result<usize> {
    let span = tokens[at].span;
    let rel = skip_ws(tokens, at + 1) + 1; // after JOIN
    let (rel_end, on_found) = find(tokens, rel, &["ON"]);
    if skip_ws(tokens, rel) >= rel_end {
        return Err(error_at(span, "table expected after HORIZON JOIN"));
    }
    let (on, end) = if on_found {
        let (end, _) = find(tokens, rel_end + 1, &[]);
        (Some(&tokens[rel_end + 1..end]), end)
    } else {
        (None, rel_end)
    };
    let next = skip_ws(tokens, end);
    let (args, after) = if next < tokens.len() && is_horizon_word(tokens, next) {
        // Not the last join of the chain: no offsets.
        (vec![], next)
    } else {
        let (args, after) = parse_offsets(tokens, next, span)?;
        let n = skip_ws(tokens, after);
        if n < tokens.len() && is_horizon_word(tokens, n) {
            return Err(error_at(
                tokens[n].span,
                "only the last HORIZON JOIN takes RANGE or LIST and the alias",
            ));
        }
        (args, after)
    };
    let tok = |t: Token| TokenWithSpan::new(t, span);
    let mut marker_args = vec![];
    for (k, a) in args.iter().enumerate() {
        if k > 0 {
            marker_args.push(tok(Token::Comma));
        }
        marker_args.push(tok(Token::SingleQuotedString(a.clone())));
    }
    emit_marked_join(
        out,
        &tokens[rel..rel_end],
        HORIZON_MARKER,
        marker_args,
        on,
        span,
    );
    Ok(after)
}

/// Parses `RANGE FROM a TO b STEP c AS h` or `LIST (a, ...) AS h` at `at`;
/// returns the marker arguments and the index after.
fn parse_offsets(
    tokens: &[TokenWithSpan],
    at: usize,
    join_span: Span,
) -> Result<(Vec<String>, usize)> {
    let span_at = |i: usize| tokens.get(i).map_or(join_span, |t| t.span);
    let expect = |i: usize, word: &str| -> Result<usize> {
        let i = skip_ws(tokens, i);
        if i < tokens.len() && word_is(&tokens[i].token, word) {
            Ok(i + 1)
        } else {
            Err(error_at(
                span_at(i),
                format!("'{}' expected", word.to_lowercase()),
            ))
        }
    };
    let (offsets, mut i) = if at < tokens.len() && word_is(&tokens[at].token, "RANGE") {
        let i = expect(at + 1, "FROM")?;
        let (from, i) = parse_offset(tokens, i, join_span)?;
        let i = expect(i, "TO")?;
        let (to, i) = parse_offset(tokens, i, join_span)?;
        let i = expect(i, "STEP")?;
        let (step, i) = parse_offset(tokens, i, join_span)?;
        (HorizonOffsets::Range { from, to, step }, i)
    } else if at < tokens.len() && word_is(&tokens[at].token, "LIST") {
        let mut i = skip_ws(tokens, at + 1);
        if !matches!(tokens.get(i).map(|t| &t.token), Some(Token::LParen)) {
            return Err(error_at(span_at(i), "'(' expected"));
        }
        let mut v = vec![];
        i = skip_ws(tokens, i + 1);
        if matches!(tokens.get(i).map(|t| &t.token), Some(Token::RParen)) {
            return Err(error_at(
                span_at(i),
                "at least one offset expression expected",
            ));
        }
        loop {
            let (o, n) = parse_offset(tokens, i, join_span)?;
            v.push(o);
            let n = skip_ws(tokens, n);
            match tokens.get(n).map(|t| &t.token) {
                Some(Token::Comma) => i = n + 1,
                Some(Token::RParen) => {
                    i = n + 1;
                    break;
                }
                _ => return Err(error_at(span_at(n), "',' or ')' expected")),
            }
        }
        (HorizonOffsets::List(v), i)
    } else {
        return Err(error_at(span_at(at), "'range' or 'list' expected"));
    };
    offsets
        .nanos()
        .map_err(|e| error_at(span_at(at), strip(&e)))?;
    // `AS h` (AS optional).
    i = skip_ws(tokens, i);
    if i < tokens.len() && word_is(&tokens[i].token, "AS") {
        i = skip_ws(tokens, i + 1);
    }
    let alias = match tokens.get(i).map(|t| &t.token) {
        Some(Token::Word(w))
            if w.keyword == sqlparser::keywords::Keyword::NoKeyword
                || w.quote_style.is_some()
                || w.value.len() <= 2 =>
        {
            if w.quote_style.is_some() {
                w.value.clone()
            } else {
                w.value.to_lowercase()
            }
        }
        _ => {
            return Err(error_at(
                span_at(i),
                "HORIZON JOIN: alias expected after RANGE/LIST, such as AS h",
            ));
        }
    };
    let mut args = vec![alias];
    match &offsets {
        HorizonOffsets::Range { from, to, step } => {
            args.push("range".into());
            args.extend([from, to, step].map(|v| v.to_string()));
        }
        HorizonOffsets::List(v) => {
            args.push("list".into());
            args.extend(v.iter().map(|v| v.to_string()));
        }
    }
    Ok((args, i + 1))
}

/// A plan error's message without DataFusion's "Error during planning: ".
fn strip(e: &DataFusionError) -> String {
    match e {
        DataFusionError::Plan(m) => m.clone(),
        other => other.to_string(),
    }
}

/// Parses one offset: `[-]<n><unit>` or a bare `0`; nanoseconds.
fn parse_offset(
    tokens: &[TokenWithSpan],
    at: usize,
    join_span: Span,
) -> Result<(i64, usize)> {
    let mut i = skip_ws(tokens, at);
    let span = tokens.get(i).map_or(join_span, |t| t.span);
    let negative = matches!(tokens.get(i).map(|t| &t.token), Some(Token::Minus));
    if negative {
        i = skip_ws(tokens, i + 1);
    }
    let Some(Token::Number(n, _)) = tokens.get(i).map(|t| &t.token) else {
        return Err(error_at(span, "HORIZON JOIN offset expected, such as 5s"));
    };
    let digits: String = n.chars().take_while(|c| c.is_ascii_digit()).collect();
    let mut unit = n[digits.len()..].to_string();
    i += 1;
    // `5s` tokenises as the number 5 and the word s (adjacent).
    if unit.is_empty()
        && let Some(Token::Word(w)) = tokens.get(i).map(|t| &t.token)
        && w.quote_style.is_none()
    {
        unit = w.value.clone();
        i += 1;
    }
    let value: i64 = digits
        .parse()
        .map_err(|_| error_at(span, "HORIZON JOIN offset expected, such as 5s"))?;
    if unit.is_empty() {
        if value == 0 {
            return Ok((0, i));
        }
        return Err(error_at(
            span,
            "HORIZON JOIN offsets need a unit (n, U, T, s, m, h, d or w), such as 5s; only 0 may go without",
        ));
    }
    let u = ToleranceUnit::parse(&unit).ok_or_else(|| {
        error_at(
            span,
            format!("unsupported HORIZON JOIN offset unit [unit={unit}]"),
        )
    })?;
    let nanos = value
        .checked_mul(u.nanos())
        .ok_or_else(|| error_at(span, "HORIZON JOIN offset out of range"))?;
    Ok((if negative { -nanos } else { nanos }, i))
}

/// The marker call of a HORIZON JOIN, if `join` is one.
fn horizon_marker(join: &Join) -> Option<&ast::Function> {
    match &join.join_operator {
        JoinOperator::AsOf {
            match_condition: ast::Expr::Function(f),
            ..
        } if f.name.to_string().eq_ignore_ascii_case(HORIZON_MARKER) => Some(f),
        _ => None,
    }
}

/// The AST pass for HORIZON JOINs (see the module docs).
pub async fn prepare_horizon(ctx: &SessionContext, stmt: &mut Statement) -> Result<()> {
    let state = ctx.state();
    let mut aggregates: HashSet<String> = HashSet::new();
    for (name, f) in state.aggregate_functions() {
        aggregates.insert(name.to_lowercase());
        aggregates.extend(f.aliases().iter().map(|a| a.to_lowercase()));
    }
    struct Pass<'a>(&'a HashSet<String>);
    impl VisitorMut for Pass<'_> {
        type Break = DataFusionError;
        fn pre_visit_query(&mut self, q: &mut Query) -> ControlFlow<DataFusionError> {
            match visit_set_expr(&mut q.body, self.0) {
                Ok(()) => ControlFlow::Continue(()),
                Err(e) => ControlFlow::Break(e),
            }
        }
    }
    match stmt.visit(&mut Pass(&aggregates)) {
        ControlFlow::Break(e) => Err(e),
        ControlFlow::Continue(()) => Ok(()),
    }
}

fn visit_set_expr(body: &mut SetExpr, aggregates: &HashSet<String>) -> Result<()> {
    match body {
        SetExpr::Select(s)
            if s.from
                .iter()
                .any(|t| t.joins.iter().any(|j| horizon_marker(j).is_some())) =>
        {
            prepare_select(s, aggregates)
        }
        SetExpr::SetOperation { left, right, .. } => {
            visit_set_expr(left, aggregates)?;
            visit_set_expr(right, aggregates)
        }
        _ => Ok(()),
    }
}

/// Whether `e` calls an aggregate (outside a window function); errors on a
/// window function.
fn has_aggregate(e: &ast::Expr, aggregates: &HashSet<String>) -> Result<bool> {
    struct Find<'a>(&'a HashSet<String>, bool);
    impl Visitor for Find<'_> {
        type Break = DataFusionError;
        fn pre_visit_expr(&mut self, e: &ast::Expr) -> ControlFlow<DataFusionError> {
            if let ast::Expr::Function(f) = e {
                if f.over.is_some() {
                    return ControlFlow::Break(plan_datafusion_err!(
                        "HORIZON JOIN cannot be combined with window functions"
                    ));
                }
                if self.0.contains(&f.name.to_string().to_lowercase()) {
                    self.1 = true;
                }
            }
            ControlFlow::Continue(())
        }
    }
    let mut f = Find(aggregates, false);
    match e.visit(&mut f) {
        ControlFlow::Break(e) => Err(e),
        ControlFlow::Continue(()) => Ok(f.1),
    }
}

/// Qualifiers (first identifier of `a.b`) that `e` uses.
fn qualifiers(e: &ast::Expr) -> Vec<String> {
    struct Q(Vec<String>);
    impl Visitor for Q {
        type Break = ();
        fn pre_visit_expr(&mut self, e: &ast::Expr) -> ControlFlow<()> {
            if let ast::Expr::CompoundIdentifier(p) = e
                && p.len() > 1
            {
                self.0.push(norm(&p[p.len() - 2]));
            }
            ControlFlow::Continue(())
        }
    }
    let mut q = Q(vec![]);
    let _ = e.visit(&mut q);
    q.0
}

/// The name a relation's columns are qualified with.
fn relation_name(r: &TableFactor) -> Option<String> {
    match r {
        TableFactor::Table { alias: Some(a), .. }
        | TableFactor::Derived { alias: Some(a), .. } => Some(norm(&a.name)),
        TableFactor::Table { name, .. } => name.0.last().and_then(|p| match p {
            ast::ObjectNamePart::Identifier(i) => Some(norm(i)),
            _ => None,
        }),
        _ => None,
    }
}

fn prepare_select(select: &mut Select, aggregates: &HashSet<String>) -> Result<()> {
    let combined = || plan_err!("horizon join cannot be combined with other joins");
    if select.from.len() != 1 {
        return combined();
    }
    let twj = &mut select.from[0];
    if twj.joins.iter().any(|j| horizon_marker(j).is_none()) {
        return combined();
    }
    let alias = twj
        .joins
        .last()
        .and_then(horizon_marker)
        .and_then(|f| call_args(f).first().and_then(|a| string_arg(a)))
        .ok_or_else(|| plan_datafusion_err!("malformed HORIZON JOIN marker"))?;

    // The implicit GROUP BY, or QuestDB's checks of an explicit one.
    // Non-aggregate items: expression, alias, 1-based position.
    let mut keys: Vec<(ast::Expr, Option<String>, usize)> = vec![];
    let mut any_aggregate = false;
    for (pos, item) in select.projection.iter().enumerate() {
        let (e, name) = match item {
            SelectItem::UnnamedExpr(e) => (e, None),
            SelectItem::ExprWithAlias { expr, alias } => (expr, Some(norm(alias))),
            _ => {
                return plan_err!(
                    "HORIZON JOIN: SELECT * is not supported; list the keys and aggregates"
                );
            }
        };
        if has_aggregate(e, aggregates)? {
            any_aggregate = true;
        } else {
            keys.push((e.clone(), name, pos + 1));
        }
    }
    match &mut select.group_by {
        GroupByExpr::Expressions(exprs, modifiers) if exprs.is_empty() => {
            if !modifiers.is_empty() {
                return plan_err!("HORIZON JOIN: GROUP BY modifiers are not supported");
            }
            if !keys.is_empty() || !any_aggregate {
                *exprs = keys.iter().map(|(e, _, _)| e.clone()).collect();
            }
        }
        GroupByExpr::Expressions(exprs, _) => {
            // A GROUP BY key names a non-aggregate item by expression,
            // alias or position.
            let names =
                |g: &ast::Expr, (e, name, pos): &(ast::Expr, Option<String>, usize)| {
                    match g {
                        _ if g == e => true,
                        ast::Expr::Identifier(id) => name.as_deref() == Some(&norm(id)),
                        ast::Expr::Value(v) => {
                            matches!(&v.value, Value::Number(n, _) if n.parse::<usize>().ok() == Some(*pos))
                        }
                        _ => false,
                    }
                };
            for g in exprs.iter() {
                if !keys.iter().any(|k| names(g, k)) {
                    return plan_err!(
                        "HORIZON JOIN: GROUP BY key {g} must be a non-aggregate SELECT expression"
                    );
                }
            }
            for k in &keys {
                if !exprs.iter().any(|g| names(g, k)) {
                    return plan_err!(
                        "HORIZON JOIN: non-aggregate SELECT expression {} must appear in GROUP BY",
                        k.0
                    );
                }
            }
        }
        GroupByExpr::All(_) => {}
    }

    // WHERE is left-only: it moves into the left relation.
    let right_names: HashSet<String> = twj
        .joins
        .iter()
        .filter_map(|j| relation_name(&j.relation))
        .collect();
    if let Some(cond) = select.selection.take() {
        for q in qualifiers(&cond) {
            if q == alias || right_names.contains(&q) {
                return plan_err!(
                    "HORIZON JOIN: WHERE may use the left table's columns only, not {q}.*"
                );
            }
        }
        match relation_name(&twj.relation) {
            Some(name) => {
                let sql = format!(
                    "SELECT * FROM (SELECT * FROM {} WHERE {cond}) AS \"{name}\"",
                    twj.relation
                );
                let parsed = Parser::new(&GenericDialect {})
                    .try_with_sql(&sql)
                    .and_then(|mut p| p.parse_query())
                    .map_err(|e| plan_datafusion_err!("HORIZON JOIN WHERE: {e}"))?;
                let SetExpr::Select(s) = *parsed.body else {
                    return plan_err!("HORIZON JOIN WHERE: unexpected rewrite");
                };
                let Some(f) = s.from.into_iter().next() else {
                    return plan_err!("HORIZON JOIN WHERE: unexpected rewrite");
                };
                twj.relation = f.relation;
            }
            // A relation without a name: the filter stays above the join
            // (it reads left columns only, so the result is the same).
            None => select.selection = Some(cond),
        }
    }

    // Nest the joins with the left relation for the relation planner.
    let relation = std::mem::replace(&mut twj.relation, placeholder_relation());
    let joins = std::mem::take(&mut twj.joins);
    twj.relation = TableFactor::NestedJoin {
        table_with_joins: Box::new(TableWithJoins { relation, joins }),
        alias: None,
    };
    Ok(())
}

/// Plans `NestedJoin(left HORIZON JOIN r1 [HORIZON JOIN r2 ...])` into a
/// [`HorizonJoinNode`]; leaves every other relation to the next planner.
#[derive(Debug)]
pub struct HorizonJoinRelationPlanner {
    inner: WindowJoinRelationPlanner,
}

impl HorizonJoinRelationPlanner {
    /// A planner that finds designated timestamps in `timestamps`.
    pub fn new(timestamps: Arc<TimestampRegistry>) -> Self {
        Self {
            inner: WindowJoinRelationPlanner::new(timestamps),
        }
    }
}

/// The offsets and alias in the last join's marker.
fn marker_offsets(f: &ast::Function) -> Result<(String, HorizonOffsets)> {
    let bad = || plan_datafusion_err!("malformed HORIZON JOIN marker");
    let args: Vec<String> = call_args(f)
        .iter()
        .map(|a| string_arg(a).ok_or_else(bad))
        .collect::<Result<_>>()?;
    let [alias, kind, values @ ..] = args.as_slice() else {
        return Err(bad());
    };
    let values: Vec<i64> = values
        .iter()
        .map(|v| v.parse().map_err(|_| bad()))
        .collect::<Result<_>>()?;
    let offsets = match (kind.as_str(), values.as_slice()) {
        ("range", [from, to, step]) => HorizonOffsets::Range {
            from: *from,
            to: *to,
            step: *step,
        },
        ("list", v) => HorizonOffsets::List(v.to_vec()),
        _ => return Err(bad()),
    };
    Ok((alias.clone(), offsets))
}

impl RelationPlanner for HorizonJoinRelationPlanner {
    fn plan_relation(
        &self,
        relation: TableFactor,
        ctx: &mut dyn RelationPlannerContext,
    ) -> Result<RelationPlanning> {
        let ours = matches!(&relation, TableFactor::NestedJoin { table_with_joins, .. }
            if !table_with_joins.joins.is_empty()
                && table_with_joins.joins.iter().all(|j| horizon_marker(j).is_some()));
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
        let (h, offsets) = marker_offsets(
            twj.joins
                .last()
                .and_then(horizon_marker)
                .ok_or_else(|| plan_datafusion_err!("malformed HORIZON JOIN marker"))?,
        )?;
        let left = ctx.plan(twj.relation)?;
        let ls = Arc::clone(left.schema());
        let left_ts = self.inner.designated_timestamp(&left, "left")?;
        let mut rights = vec![];
        let mut clauses = vec![];
        for join in twj.joins {
            let JoinOperator::AsOf { constraint, .. } = join.join_operator else {
                unreachable!()
            };
            let mut right = ctx.plan(join.relation)?;
            let rs = Arc::clone(right.schema());
            let joined = ls.join(&rs)?;
            let (keys, rest) = self
                .inner
                .plan_on(ctx, constraint, &ls, &rs, &joined)
                .map_err(|e| {
                    if e.to_string().contains("Cannot infer common argument type") {
                        plan_datafusion_err!("join column type mismatch: {e}")
                    } else {
                        e
                    }
                })?;
            let right_ts = self.inner.designated_timestamp(&right, "right")?;
            check_keys_not_designated("HORIZON JOIN", &keys, &left_ts, &right_ts)?;
            let (left_only, right_only) = split_one_side_conditions(
                "HORIZON JOIN ON supports equality keys",
                rest.map_or(vec![], |r| {
                    split_conjunction(&r).into_iter().cloned().collect()
                }),
                &ls,
                &rs,
            )?;
            if let Some(f) = conjunction(right_only) {
                right = LogicalPlanBuilder::from(right).filter(f)?.build()?;
            }
            rights.push(Arc::new(right));
            clauses.push(HorizonRight {
                on: keys,
                filter: conjunction(left_only),
                right_ts,
            });
        }
        let node = HorizonJoinNode::try_new(
            Arc::new(left),
            rights,
            HorizonJoinClause {
                left_ts,
                rights: clauses,
                offsets,
                alias: h,
            },
        )?;
        let plan = LogicalPlan::Extension(Extension {
            node: Arc::new(node),
        });
        Ok(RelationPlanning::Planned(Box::new(PlannedRelation::new(
            plan, alias,
        ))))
    }
}
