//! AST pass over statements that contain WINDOW JOIN markers (see
//! `rewrite.rs`). For each SELECT with WINDOW JOINs it:
//!
//! 1. rejects what QuestDB rejects at that level (GROUP BY, HAVING, window
//!    functions, bare right-table columns in SELECT, right columns in WHERE);
//! 2. moves every aggregate of the SELECT list and ORDER BY into the marker
//!    of the WINDOW JOIN it belongs to, leaving behind a reference to the
//!    column the join outputs for it, named by the aggregate's text
//!    ([`agg_column`]);
//! 3. expands `*` to the left relations' columns;
//! 4. nests each WINDOW JOIN with everything to its left into a
//!    `TableFactor::NestedJoin`, so that the relation planner receives it.

use super::rewrite::WINDOW_MARKER;
use datafusion::common::{DataFusionError, Result, plan_err};
use sqlparser::ast::{
    Expr, Function, FunctionArg, FunctionArgExpr, FunctionArguments, GroupByExpr, Ident,
    Join, JoinOperator, ObjectName, ObjectNamePart, Query, Select, SelectItem,
    SelectItemQualifiedWildcardKind, SetExpr, Statement, TableFactor, TableWithJoins,
    Value, Visit, VisitMut, Visitor, VisitorMut,
};
use std::collections::{HashMap, HashSet};
use std::ops::ControlFlow;

/// Name of the column a WINDOW JOIN outputs for aggregate `agg`: its SQL
/// text as written (`avg(p.bid)`), the name errors, EXPLAIN and unaliased
/// result columns then show. The AST pass references it and the relation
/// planner names it, both from the same expression. (Aggregates with the
/// same text share one column; equal texts always belong to the same join.)
pub fn agg_column(agg: &Expr) -> String {
    agg.to_string()
}

/// Identifier as DataFusion normalises it (unquoted → lower case).
pub(crate) fn norm(id: &Ident) -> String {
    if id.quote_style.is_some() {
        id.value.clone()
    } else {
        id.value.to_lowercase()
    }
}

fn object_name_norm(name: &ObjectName) -> String {
    name.0
        .iter()
        .map(|p| match p {
            ObjectNamePart::Identifier(i) => norm(i),
            other => other.to_string(),
        })
        .collect::<Vec<_>>()
        .join(".")
}

/// The marker call of a WINDOW JOIN, if `join` is one.
pub(crate) fn marker(join: &Join) -> Option<&Function> {
    match &join.join_operator {
        JoinOperator::AsOf {
            match_condition: Expr::Function(f),
            ..
        } if f.name.to_string().eq_ignore_ascii_case(WINDOW_MARKER) => Some(f),
        _ => None,
    }
}

fn marker_mut(join: &mut Join) -> Option<&mut Function> {
    match &mut join.join_operator {
        JoinOperator::AsOf {
            match_condition: Expr::Function(f),
            ..
        } if f.name.to_string().eq_ignore_ascii_case(WINDOW_MARKER) => Some(f),
        _ => None,
    }
}

/// The unnamed argument expressions of a function call.
pub(crate) fn call_args(f: &Function) -> Vec<&Expr> {
    match &f.args {
        FunctionArguments::List(l) => l
            .args
            .iter()
            .filter_map(|a| match a {
                FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => Some(e),
                _ => None,
            })
            .collect(),
        _ => vec![],
    }
}

/// Statement-wide number of a WINDOW JOIN marker (its first argument).
pub(crate) fn marker_number(f: &Function) -> Option<usize> {
    match call_args(f).first() {
        Some(Expr::Value(v)) => match &v.value {
            Value::Number(n, _) => n.parse().ok(),
            _ => None,
        },
        _ => None,
    }
}

/// Names of the tables on the right of a WINDOW JOIN anywhere in `stmt`.
pub fn right_table_names(stmt: &Statement) -> Vec<ObjectName> {
    struct Collect(Vec<ObjectName>);
    impl Visitor for Collect {
        type Break = ();
        fn pre_visit_select(&mut self, select: &Select) -> ControlFlow<()> {
            for twj in &select.from {
                for j in &twj.joins {
                    if let (Some(_), TableFactor::Table { name, .. }) =
                        (marker(j), &j.relation)
                    {
                        self.0.push(name.clone());
                    }
                }
            }
            ControlFlow::Continue(())
        }
    }
    let mut c = Collect(vec![]);
    let _ = stmt.visit(&mut c);
    c.0
}

/// Context of the pass: which functions are aggregates, and the column names
/// of right tables (normalised table name → normalised column names), used
/// to tell which WINDOW JOIN an aggregate over unqualified columns belongs to.
pub struct AstContext {
    /// Lower-case names (and aliases) of every aggregate function.
    pub aggregates: HashSet<String>,
    /// Right-table columns by normalised table name.
    pub right_columns: HashMap<String, HashSet<String>>,
}

/// Rewrites every SELECT with WINDOW JOINs in `stmt`.
pub fn rewrite_statement(stmt: &mut Statement, ctx: &AstContext) -> Result<()> {
    struct Pass<'a>(&'a AstContext);
    impl VisitorMut for Pass<'_> {
        type Break = DataFusionError;
        fn pre_visit_query(&mut self, q: &mut Query) -> ControlFlow<DataFusionError> {
            if let Err(e) = super::latest_on::rewrite_query(q, self.0) {
                return ControlFlow::Break(e);
            }
            let Query { body, order_by, .. } = q;
            match rewrite_set_expr(body, order_by.as_mut(), self.0) {
                Ok(()) => ControlFlow::Continue(()),
                Err(e) => ControlFlow::Break(e),
            }
        }
    }
    match stmt.visit(&mut Pass(ctx)) {
        ControlFlow::Break(e) => Err(e),
        ControlFlow::Continue(()) => Ok(()),
    }
}

fn rewrite_set_expr(
    body: &mut SetExpr,
    order_by: Option<&mut sqlparser::ast::OrderBy>,
    ctx: &AstContext,
) -> Result<()> {
    match body {
        SetExpr::Select(s) => rewrite_select(s, order_by, ctx),
        SetExpr::SetOperation { left, right, .. } => {
            rewrite_set_expr(left, None, ctx)?;
            rewrite_set_expr(right, None, ctx)
        }
        _ => Ok(()),
    }
}

/// One WINDOW JOIN of a SELECT.
struct WindowJoinRef {
    /// Normalised alias (or table name) of the right relation.
    qualifier: Option<String>,
    /// Normalised table name when the right relation is a table.
    table: Option<String>,
    /// Position: (from index, join index).
    at: (usize, usize),
    /// Aggregates moved into this join, by their SQL text.
    aggs: Vec<(String, Expr)>,
}

fn relation_qualifier(t: &TableFactor) -> Option<String> {
    match t {
        TableFactor::Table { alias: Some(a), .. }
        | TableFactor::Derived { alias: Some(a), .. } => Some(norm(&a.name)),
        TableFactor::Table { name, .. } => name.0.last().map(|p| match p {
            ObjectNamePart::Identifier(i) => norm(i),
            other => other.to_string(),
        }),
        TableFactor::NestedJoin { alias: Some(a), .. } => Some(norm(&a.name)),
        _ => None,
    }
}

pub(super) fn is_aggregate(f: &Function, ctx: &AstContext) -> bool {
    f.over.is_none()
        && f.name.0.last().is_some_and(|p| match p {
            ObjectNamePart::Identifier(i) => {
                ctx.aggregates.contains(&i.value.to_lowercase())
            }
            _ => false,
        })
}

/// (qualifiers, unqualified names) of the column references in `e`.
fn references(e: &Expr) -> (HashSet<String>, HashSet<String>) {
    struct Refs(HashSet<String>, HashSet<String>);
    impl Visitor for Refs {
        type Break = ();
        fn pre_visit_expr(&mut self, e: &Expr) -> ControlFlow<()> {
            match e {
                Expr::Identifier(i) => {
                    self.1.insert(norm(i));
                }
                Expr::CompoundIdentifier(parts) if parts.len() >= 2 => {
                    self.0.insert(norm(&parts[parts.len() - 2]));
                }
                _ => {}
            }
            ControlFlow::Continue(())
        }
    }
    let mut r = Refs(HashSet::new(), HashSet::new());
    let _ = e.visit(&mut r);
    (r.0, r.1)
}

fn rewrite_select(
    select: &mut Select,
    order_by: Option<&mut sqlparser::ast::OrderBy>,
    ctx: &AstContext,
) -> Result<()> {
    let mut joins: Vec<WindowJoinRef> = vec![];
    for (ti, twj) in select.from.iter().enumerate() {
        for (ji, j) in twj.joins.iter().enumerate() {
            if marker(j).and_then(marker_number).is_some() {
                let table = match &j.relation {
                    TableFactor::Table { name, .. } => Some(object_name_norm(name)),
                    _ => None,
                };
                joins.push(WindowJoinRef {
                    qualifier: relation_qualifier(&j.relation),
                    table,
                    at: (ti, ji),
                    aggs: vec![],
                });
            }
        }
    }
    if joins.is_empty() {
        return Ok(());
    }
    let has_group_by = match &select.group_by {
        GroupByExpr::All(_) => true,
        GroupByExpr::Expressions(v, _) => !v.is_empty(),
    };
    if has_group_by || select.having.is_some() {
        return plan_err!(
            "GROUP BY cannot be used with WINDOW JOIN; group in an outer query over a sub-query or CTE"
        );
    }

    let right_quals: HashSet<String> =
        joins.iter().filter_map(|j| j.qualifier.clone()).collect();

    // `*` means the left relations' columns.
    expand_wildcards(select, &joins)?;

    // Move aggregates out of the SELECT list and ORDER BY.
    let mut moved = Mover {
        ctx,
        joins: &mut joins,
        depth: 0,
        error: None,
    };
    for item in select.projection.iter_mut() {
        match item {
            SelectItem::UnnamedExpr(e) => {
                let original = e.to_string();
                let before = e.clone();
                moved.rewrite(e)?;
                if *e != before {
                    let expr = std::mem::replace(e, Expr::value(Value::Null));
                    *item = SelectItem::ExprWithAlias {
                        expr,
                        alias: Ident::with_quote('"', original),
                    };
                }
            }
            SelectItem::ExprWithAlias { expr, .. } => moved.rewrite(expr)?,
            _ => {}
        }
    }
    if let Some(ob) = order_by
        && let sqlparser::ast::OrderByKind::Expressions(exprs) = &mut ob.kind
    {
        for o in exprs.iter_mut() {
            moved.rewrite(&mut o.expr)?;
        }
    }

    // What is left may not read right-table columns.
    for item in &select.projection {
        if let SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } =
            item
        {
            if let Some(col) = right_column(e, &right_quals) {
                return plan_err!(
                    "WINDOW join cannot reference right table non-aggregate column: {col}"
                );
            }
            if has_window_function(e) {
                return plan_err!(
                    "WINDOW functions are not allowed in WINDOW JOIN queries"
                );
            }
        }
    }
    if let Some(w) = &select.selection
        && let Some(col) = right_column(w, &right_quals)
    {
        return plan_err!(
            "Invalid column: {col}; WHERE in a WINDOW JOIN query filters left rows only"
        );
    }

    // Hand the aggregates to their markers.
    for j in &joins {
        let join = &mut select.from[j.at.0].joins[j.at.1];
        let f = marker_mut(join).expect("marker");
        if let FunctionArguments::List(list) = &mut f.args {
            list.args.extend(
                j.aggs
                    .iter()
                    .map(|(_, e)| FunctionArg::Unnamed(FunctionArgExpr::Expr(e.clone()))),
            );
        }
    }

    for twj in select.from.iter_mut() {
        nest_window_joins(twj);
    }
    Ok(())
}

/// Replaces aggregate calls (outside sub-queries) with column references.
struct Mover<'a> {
    ctx: &'a AstContext,
    joins: &'a mut Vec<WindowJoinRef>,
    depth: usize,
    error: Option<DataFusionError>,
}

impl Mover<'_> {
    fn rewrite(&mut self, e: &mut Expr) -> Result<()> {
        self.depth = 0;
        let _ = e.visit(self);
        match self.error.take() {
            Some(err) => Err(err),
            None => Ok(()),
        }
    }

    /// Index in `joins` of the WINDOW JOIN whose right side `agg` reads.
    fn owner(&self, agg: &Expr) -> Result<usize> {
        let (quals, names) = references(agg);
        let mut owners: HashSet<usize> = HashSet::new();
        for (k, j) in self.joins.iter().enumerate() {
            if j.qualifier.as_ref().is_some_and(|q| quals.contains(q)) {
                owners.insert(k);
            }
            if let Some(cols) =
                j.table.as_ref().and_then(|t| self.ctx.right_columns.get(t))
                && names.iter().any(|n| cols.contains(n))
            {
                owners.insert(k);
            }
        }
        match owners.len() {
            0 => Ok(0), // count(*), left-only or constant: the first WINDOW JOIN
            1 => Ok(owners.into_iter().next().unwrap()),
            _ => plan_err!(
                "WINDOW join aggregate function cannot reference columns from multiple models: {agg}"
            ),
        }
    }
}

impl VisitorMut for Mover<'_> {
    type Break = ();

    fn pre_visit_query(&mut self, _q: &mut Query) -> ControlFlow<()> {
        self.depth += 1;
        ControlFlow::Continue(())
    }

    fn post_visit_query(&mut self, _q: &mut Query) -> ControlFlow<()> {
        self.depth -= 1;
        ControlFlow::Continue(())
    }

    fn post_visit_expr(&mut self, e: &mut Expr) -> ControlFlow<()> {
        if self.depth > 0 {
            return ControlFlow::Continue(());
        }
        let Expr::Function(f) = e else {
            return ControlFlow::Continue(());
        };
        if !is_aggregate(f, self.ctx) {
            return ControlFlow::Continue(());
        }
        let k = match self.owner(e) {
            Ok(k) => k,
            Err(err) => {
                self.error = Some(err);
                return ControlFlow::Break(());
            }
        };
        let text = agg_column(e);
        let j = &mut self.joins[k];
        if !j.aggs.iter().any(|(t, _)| *t == text) {
            j.aggs.push((text.clone(), e.clone()));
        }
        // Quoted: the name is the text as written, not normalised.
        *e = Expr::Identifier(Ident::with_quote('"', text));
        ControlFlow::Continue(())
    }
}

/// The first `q.col` in `e` whose qualifier is a right relation.
fn right_column(e: &Expr, right: &HashSet<String>) -> Option<String> {
    struct Find<'a>(&'a HashSet<String>, Option<String>);
    impl Visitor for Find<'_> {
        type Break = ();
        fn pre_visit_expr(&mut self, e: &Expr) -> ControlFlow<()> {
            if let Expr::CompoundIdentifier(parts) = e
                && parts.len() >= 2
                && self.0.contains(&norm(&parts[parts.len() - 2]))
            {
                self.1 = Some(e.to_string());
                return ControlFlow::Break(());
            }
            ControlFlow::Continue(())
        }
    }
    let mut f = Find(right, None);
    let _ = e.visit(&mut f);
    f.1
}

fn has_window_function(e: &Expr) -> bool {
    struct Find(bool);
    impl Visitor for Find {
        type Break = ();
        fn pre_visit_expr(&mut self, e: &Expr) -> ControlFlow<()> {
            if let Expr::Function(f) = e
                && f.over.is_some()
            {
                self.0 = true;
                return ControlFlow::Break(());
            }
            ControlFlow::Continue(())
        }
    }
    let mut f = Find(false);
    let _ = e.visit(&mut f);
    f.0
}

/// Replaces `*` by `q.*` for every relation that is not a WINDOW JOIN's right side.
fn expand_wildcards(select: &mut Select, joins: &[WindowJoinRef]) -> Result<()> {
    if !select
        .projection
        .iter()
        .any(|i| matches!(i, SelectItem::Wildcard(_)))
    {
        return Ok(());
    }
    let is_right: HashSet<(usize, usize)> = joins.iter().map(|j| j.at).collect();
    let mut quals: Vec<Ident> = vec![];
    for (ti, twj) in select.from.iter().enumerate() {
        let mut rels = vec![&twj.relation];
        rels.extend(
            twj.joins
                .iter()
                .enumerate()
                .filter(|(ji, _)| !is_right.contains(&(ti, *ji)))
                .map(|(_, j)| &j.relation),
        );
        for r in rels {
            let q = match r {
                TableFactor::Table { alias: Some(a), .. }
                | TableFactor::Derived { alias: Some(a), .. } => a.name.clone(),
                TableFactor::Table { name, .. } => match name.0.last() {
                    Some(ObjectNamePart::Identifier(i)) => i.clone(),
                    _ => {
                        return plan_err!(
                            "SELECT * over a WINDOW JOIN: cannot name relation {r}"
                        );
                    }
                },
                _ => {
                    return plan_err!(
                        "SELECT * over a WINDOW JOIN needs an alias on {r}; or list the left columns (t.*)"
                    );
                }
            };
            quals.push(q);
        }
    }
    let mut out = vec![];
    for item in select.projection.drain(..) {
        match item {
            SelectItem::Wildcard(opts) => {
                for q in &quals {
                    out.push(SelectItem::QualifiedWildcard(
                        SelectItemQualifiedWildcardKind::ObjectName(ObjectName::from(
                            vec![q.clone()],
                        )),
                        opts.clone(),
                    ));
                }
            }
            other => out.push(other),
        }
    }
    select.projection = out;
    Ok(())
}

/// `a JOIN b WINDOW JOIN p WINDOW JOIN q` becomes
/// `((((a JOIN b)) WINDOW JOIN p) WINDOW JOIN q)`: each WINDOW JOIN is the only
/// join of a `NestedJoin` whose relation is everything to its left.
fn nest_window_joins(twj: &mut TableWithJoins) {
    if !twj.joins.iter().any(|j| marker(j).is_some()) {
        return;
    }
    let placeholder = placeholder_relation();
    let mut current = std::mem::replace(&mut twj.relation, placeholder);
    let mut pending: Vec<Join> = vec![];
    for j in twj.joins.drain(..) {
        if marker(&j).is_some() {
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

fn nested(relation: TableFactor, joins: Vec<Join>) -> TableFactor {
    TableFactor::NestedJoin {
        table_with_joins: Box::new(TableWithJoins { relation, joins }),
        alias: None,
    }
}

/// A stand-in relation, swapped in while a `FROM` clause's joins are nested
/// (WINDOW and ASOF JOIN both give each temporal join its own `NestedJoin`).
pub(super) fn placeholder_relation() -> TableFactor {
    TableFactor::Table {
        name: ObjectName::from(vec![Ident::new("__tsjoin_placeholder")]),
        alias: None,
        args: None,
        with_hints: vec![],
        version: None,
        with_ordinality: false,
        partitions: vec![],
        json_path: None,
        sample: None,
        index_hints: vec![],
    }
}
