//! Shoal's CQL front end: a hand-written lexer and recursive-descent parser
//! for CQL 3 as Cassandra 4/5 speaks it, producing the AST in [`ast`].
//!
//! The parser knows the language, not the schema: it resolves no names and
//! checks no types (the binder does, with [`ast::TypeExpr::resolve`] for
//! types). Roles and permissions (`CREATE ROLE`, `GRANT`, `REVOKE`, `LIST`)
//! parse into their own statements. Statements Shoal does not execute
//! (indexes, views, functions, triggers, `LIST SUPERUSERS`) still parse, as
//! [`Statement::Unsupported`], so the executor can answer "not supported"
//! rather than a syntax error.
//!
//! Invariants:
//! - No input panics the parser, and parsing time is linear in the input:
//!   one token vector, constant lookahead, and only bounded retries (casts).
//! - Nesting of terms, selectors and types is limited to
//!   [`parser::MAX_DEPTH`] levels; deeper input is a clean [`ParseError`].
//! - Bind markers (`?`, `:name`) are numbered 0.. in textual order per
//!   statement (across all statements of a BATCH), and
//!   [`Statement::bind_markers`] returns exactly the markers the parser
//!   numbered, in that order.
//! - Unquoted identifiers are lower-cased; quoted ones keep their case.
//! - Error messages keep the shape of Cassandra's SyntaxException text:
//!   `line L:C mismatched input 'x' expecting Y` or
//!   `line L:C no viable alternative at input 'x'` (line 1-based, column
//!   0-based); at the end of input the position is the end of the text
//!   (Cassandra prints `line 0:-1` there).

pub mod ast;
pub mod lexer;
pub mod parser;

#[cfg(test)]
mod tests;

pub use ast::{BindMarker, Statement};

/// A syntax error, positioned at the offending token (or character, for
/// errors found by the lexer).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}:{col} {message}")]
pub struct ParseError {
    /// 1-based line.
    pub line: u32,
    /// 0-based column, in characters.
    pub col: u32,
    /// What went wrong, in Cassandra's wording.
    pub message: String,
}

/// Parses exactly one statement, optionally followed by semicolons.
pub fn parse(text: &str) -> Result<Statement, ParseError> {
    parser::Parser::new(text)?.parse_single()
}

/// Parses a script of `;`-separated statements (empty ones are skipped).
/// Each statement numbers its bind markers from 0.
pub fn parse_script(text: &str) -> Result<Vec<Statement>, ParseError> {
    parser::Parser::new(text)?.parse_script()
}
