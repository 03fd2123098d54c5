//! Token-level rewrite of QuestDB's WINDOW JOIN clause into syntax sqlparser
//! already accepts, keeping every original token (and its span) so that
//! later errors still point into the user's SQL:
//!
//! ```text
//! WINDOW JOIN prices p ON p.sym = t.sym
//!   RANGE BETWEEN 1 second PRECEDING AND 2 seconds FOLLOWING EXCLUDE PREVAILING
//! ⇒
//! ASOF JOIN prices p MATCH_CONDITION(__tsjoin_window(0, 1, 'second', 'preceding',
//!   2, 'second', 'following', 'exclude')) ON p.sym = t.sym
//! ```
//!
//! The marker call carries the bounds; `ast.rs` later appends the aggregates.

use crate::window_join::{BoundUnit, Direction};
use datafusion::common::{
    DataFusionError, Diagnostic, Result, Span as DfSpan, plan_datafusion_err,
};
use sqlparser::dialect::Dialect;
use sqlparser::parser::Parser;
use sqlparser::tokenizer::{Span, Token, TokenWithSpan};

/// Name of the marker function that carries a WINDOW JOIN's parameters.
pub const WINDOW_MARKER: &str = "__tsjoin_window";

/// A syntax error at a token, rendered like sqlparser's own errors and
/// carrying a DataFusion [`Diagnostic`] with the token's span, so tools that
/// render diagnostics can point at it.
pub(crate) fn error_at(span: Span, msg: impl AsRef<str>) -> DataFusionError {
    let msg = msg.as_ref();
    let error = if span.start.line == 0 {
        plan_datafusion_err!("{msg}")
    } else {
        plan_datafusion_err!(
            "{msg} at Line {}, Column {}",
            span.start.line,
            span.start.column
        )
    };
    let span = DfSpan::try_from_sqlparser_span(span);
    error.with_diagnostic(Diagnostic::new_error(msg, span))
}

pub(crate) fn word_is(t: &Token, kw: &str) -> bool {
    matches!(t, Token::Word(w) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case(kw))
}

/// Index of the next non-whitespace token at or after `i`.
pub(crate) fn skip_ws(tokens: &[TokenWithSpan], mut i: usize) -> usize {
    while i < tokens.len() && matches!(tokens[i].token, Token::Whitespace(_)) {
        i += 1;
    }
    i
}

/// A parsed `value [unit] PRECEDING|FOLLOWING` (or `CURRENT ROW`).
struct Bound {
    value: Vec<TokenWithSpan>,
    unit: BoundUnit,
    direction: Direction,
}

/// Rewrites every `WINDOW JOIN … RANGE BETWEEN … [INCLUDE|EXCLUDE PREVAILING]`.
/// Each one gets a statement-wide number, used to name its aggregate columns.
pub fn rewrite_window_joins(
    tokens: Vec<TokenWithSpan>,
    dialect: &dyn Dialect,
) -> Result<Vec<TokenWithSpan>> {
    let tokens = merge_digit_groups(tokens);
    let mut out = Vec::with_capacity(tokens.len() + 32);
    let mut i = 0;
    let mut count = 0usize;
    while i < tokens.len() {
        let next = skip_ws(&tokens, i + 1);
        if word_is(&tokens[i].token, "WINDOW")
            && next < tokens.len()
            && word_is(&tokens[next].token, "JOIN")
        {
            i = rewrite_one(&tokens, i, next + 1, count, dialect, &mut out)?;
            count += 1;
        } else {
            out.push(tokens[i].clone());
            i += 1;
        }
    }
    Ok(out)
}

/// QuestDB writes `60_000_000`; most dialects tokenise that as the number
/// `60` followed by the word `_000_000`. Joins such pairs back into one number.
fn merge_digit_groups(tokens: Vec<TokenWithSpan>) -> Vec<TokenWithSpan> {
    let mut out: Vec<TokenWithSpan> = Vec::with_capacity(tokens.len());
    for t in tokens {
        if let (Some(prev), Token::Word(w)) = (out.last_mut(), &t.token)
            && let Token::Number(n, long) = &prev.token
            && w.quote_style.is_none()
            && w.value.starts_with('_')
            && w.value.chars().all(|c| c == '_' || c.is_ascii_digit())
            && !n.contains(['.', 'e', 'E'])
        {
            let merged = format!("{n}{}", w.value.replace('_', ""));
            prev.token = Token::Number(merged, *long);
            continue;
        }
        out.push(t);
    }
    out
}

/// Rewrites the WINDOW JOIN whose `WINDOW` token is at `at` and whose
/// relation starts at `rel`; returns the index after the clause.
fn rewrite_one(
    tokens: &[TokenWithSpan],
    at: usize,
    rel: usize,
    number: usize,
    dialect: &dyn Dialect,
    out: &mut Vec<TokenWithSpan>,
) -> Result<usize> {
    let span = tokens[at].span;
    // Relation: up to ON or RANGE at depth 0.
    let stop = |i: usize, words: &[&str]| -> Option<usize> {
        let mut depth = 0i32;
        let mut j = i;
        while j < tokens.len() {
            match &tokens[j].token {
                Token::LParen => depth += 1,
                Token::RParen => {
                    depth -= 1;
                    if depth < 0 {
                        return None;
                    }
                }
                Token::SemiColon if depth == 0 => return None,
                t if depth == 0 && words.iter().any(|w| word_is(t, w)) => return Some(j),
                _ => {}
            }
            j += 1;
        }
        None
    };
    let missing_range =
        || error_at(span, "WINDOW JOIN needs RANGE BETWEEN <bound> AND <bound>");
    let rel_end = stop(rel, &["ON", "RANGE"]).ok_or_else(missing_range)?;
    if skip_ws(tokens, rel) >= rel_end {
        return Err(error_at(span, "table expected after WINDOW JOIN"));
    }
    let (on, range_at) = if word_is(&tokens[rel_end].token, "ON") {
        let r = stop(rel_end + 1, &["RANGE"]).ok_or_else(missing_range)?;
        (Some(&tokens[rel_end + 1..r]), r)
    } else {
        (None, rel_end)
    };
    let between = skip_ws(tokens, range_at + 1);
    if between >= tokens.len() || !word_is(&tokens[between].token, "BETWEEN") {
        return Err(error_at(
            tokens[range_at].span,
            "BETWEEN expected after RANGE",
        ));
    }

    let mut pos = between + 1;
    let lo = parse_bound(tokens, &mut pos, dialect)?;
    pos = skip_ws(tokens, pos);
    if pos >= tokens.len() || !word_is(&tokens[pos].token, "AND") {
        let s = tokens.get(pos).map_or(span, |t| t.span);
        return Err(error_at(s, "AND expected between the two RANGE bounds"));
    }
    pos += 1;
    let hi = parse_bound(tokens, &mut pos, dialect)?;
    let mut prevailing = "include";
    let p = skip_ws(tokens, pos);
    if p < tokens.len()
        && (word_is(&tokens[p].token, "INCLUDE") || word_is(&tokens[p].token, "EXCLUDE"))
    {
        prevailing = if word_is(&tokens[p].token, "INCLUDE") {
            "include"
        } else {
            "exclude"
        };
        let q = skip_ws(tokens, p + 1);
        if q >= tokens.len() || !word_is(&tokens[q].token, "PREVAILING") {
            let s = tokens.get(q).map_or(tokens[p].span, |t| t.span);
            return Err(error_at(s, "'prevailing' expected"));
        }
        pos = q + 1;
    }

    // Emit the replacement.
    let tok = |t: Token| TokenWithSpan::new(t, span);
    let ws = || tok(Token::Whitespace(sqlparser::tokenizer::Whitespace::Space));
    let s = |v: &str| tok(Token::SingleQuotedString(v.to_string()));
    out.extend([
        tok(Token::make_keyword("ASOF")),
        ws(),
        tok(Token::make_keyword("JOIN")),
        ws(),
    ]);
    out.extend_from_slice(&tokens[rel..rel_end]);
    out.extend([
        ws(),
        tok(Token::make_keyword("MATCH_CONDITION")),
        tok(Token::LParen),
        tok(Token::make_word(WINDOW_MARKER, None)),
        tok(Token::LParen),
        tok(Token::Number(number.to_string(), false)),
    ]);
    for b in [&lo, &hi] {
        out.push(tok(Token::Comma));
        out.push(tok(Token::LParen));
        out.extend_from_slice(&b.value);
        out.push(tok(Token::RParen));
        out.extend([
            tok(Token::Comma),
            s(b.unit.as_str()),
            tok(Token::Comma),
            s(b.direction.as_str()),
        ]);
    }
    out.extend([
        tok(Token::Comma),
        s(prevailing),
        tok(Token::RParen),
        tok(Token::RParen),
        ws(),
    ]);
    if let Some(on) = on {
        out.push(tok(Token::make_keyword("ON")));
        out.extend_from_slice(on);
        out.push(ws());
    }
    Ok(pos)
}

/// Parses one bound starting at `*pos`, leaving `*pos` after it.
fn parse_bound(
    tokens: &[TokenWithSpan],
    pos: &mut usize,
    dialect: &dyn Dialect,
) -> Result<Bound> {
    let start = skip_ws(tokens, *pos);
    let Some(first) = tokens.get(start) else {
        return Err(error_at(
            Span::empty(),
            "window bound expected after RANGE BETWEEN",
        ));
    };
    if word_is(&first.token, "UNBOUNDED") {
        return Err(error_at(
            first.span,
            "unbounded preceding/following is not supported in WINDOW joins",
        ));
    }
    if word_is(&first.token, "CURRENT") {
        let row = skip_ws(tokens, start + 1);
        if row >= tokens.len() || !word_is(&tokens[row].token, "ROW") {
            return Err(error_at(first.span, "ROW expected after CURRENT"));
        }
        *pos = row + 1;
        return Ok(Bound {
            value: vec![TokenWithSpan::new(
                Token::Number("0".into(), false),
                first.span,
            )],
            unit: BoundUnit::Raw,
            direction: Direction::Following,
        });
    }
    // The value is any expression; sqlparser stops before the unit word.
    let mut parser =
        Parser::new(dialect).with_tokens_with_locations(tokens[start..].to_vec());
    parser
        .parse_expr()
        .map_err(|e| error_at(first.span, format!("invalid window bound: {e}")))?;
    let end = start + parser.index();
    let value = tokens[start..end].to_vec();
    let w = skip_ws(tokens, end);
    let Some(word) = tokens.get(w) else {
        return Err(error_at(
            first.span,
            "PRECEDING or FOLLOWING expected after the window bound",
        ));
    };
    let text = match &word.token {
        Token::Word(x) if x.quote_style.is_none() => x.value.clone(),
        _ => String::new(),
    };
    if let Some(direction) = Direction::parse(&text) {
        *pos = w + 1;
        return Ok(Bound {
            value,
            unit: BoundUnit::Raw,
            direction,
        });
    }
    let Some(unit) = BoundUnit::parse(&text) else {
        return Err(error_at(
            word.span,
            format!(
                "invalid WINDOW JOIN time unit '{}': expected nanoseconds, microseconds, milliseconds, seconds, minutes, hours or days, then PRECEDING or FOLLOWING",
                word.token
            ),
        ));
    };
    let d = skip_ws(tokens, w + 1);
    let dir = tokens.get(d).and_then(|t| match &t.token {
        Token::Word(x) => Direction::parse(&x.value),
        _ => None,
    });
    let Some(direction) = dir else {
        let s = tokens.get(d).map_or(word.span, |t| t.span);
        return Err(error_at(s, "PRECEDING or FOLLOWING expected"));
    };
    *pos = d + 1;
    Ok(Bound {
        value,
        unit,
        direction,
    })
}
