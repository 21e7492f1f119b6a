//! The recursive-descent parser: token cursor, error helpers, identifier
//! rules, and the dispatch on a statement's first keywords.
//!
//! Each statement family lives in its own module (`select`, `dml`, `ddl`,
//! `describe`, and `roles` for roles and permissions); values, bind markers
//! and types are in `terms`. Parsing is one pass over a token vector with
//! constant lookahead; the only retries are the `(type) term` casts, which
//! re-read a bounded run of type tokens, so time stays linear in the input. Nesting is capped at [`MAX_DEPTH`].

mod ddl;
mod describe;
mod dml;
mod roles;
mod select;
mod terms;

use crate::ast::{QualifiedName, Statement};
use crate::lexer::{tokenize, Symbol, Token, TokenKind};
use crate::ParseError;

/// How deeply terms, selectors and types may nest before parsing stops
/// with an error (bounds recursion, hence stack use, on hostile input).
pub const MAX_DEPTH: usize = 64;

/// The sentinel returned when looking past the end of the token vector.
static EOF_TOKEN: Token = Token { kind: TokenKind::Eof, start: 0, end: 0, line: 1, col: 0 };

pub(crate) struct Parser<'a> {
    src: &'a str,
    tokens: Vec<Token>,
    pos: usize,
    depth: usize,
    next_marker: usize,
}

/// Words the grammar reserves: never usable as unquoted identifiers.
pub(crate) fn is_reserved(word: &str) -> bool {
    matches!(
        word,
        "add"
            | "allow"
            | "alter"
            | "and"
            | "apply"
            | "asc"
            | "authorize"
            | "batch"
            | "begin"
            | "by"
            | "columnfamily"
            | "create"
            | "delete"
            | "desc"
            | "describe"
            | "drop"
            | "entries"
            | "execute"
            | "from"
            | "full"
            | "grant"
            | "if"
            | "in"
            | "index"
            | "infinity"
            | "insert"
            | "into"
            | "is"
            | "keyspace"
            | "limit"
            | "materialized"
            | "modify"
            | "nan"
            | "norecursive"
            | "not"
            | "null"
            | "of"
            | "on"
            | "or"
            | "order"
            | "primary"
            | "rename"
            | "revoke"
            | "schema"
            | "select"
            | "set"
            | "table"
            | "to"
            | "token"
            | "truncate"
            | "unlogged"
            | "update"
            | "use"
            | "using"
            | "view"
            | "where"
            | "with"
    )
}

/// Unreserved keywords that may name columns but not functions or types.
fn is_non_function_keyword(word: &str) -> bool {
    matches!(word, "ttl" | "writetime" | "maxwritetime" | "key" | "cast" | "json" | "distinct")
}

/// ANTLR's name for a keyword token, as printed in "expecting …" messages.
fn keyword_token_name(keyword: &str) -> String {
    match keyword {
        "table" => "K_COLUMNFAMILY".to_string(),
        other => format!("K_{}", other.to_ascii_uppercase()),
    }
}

impl<'a> Parser<'a> {
    pub(crate) fn new(src: &'a str) -> Result<Self, ParseError> {
        let tokens = tokenize(src)?;
        debug_assert!(matches!(tokens.last().map(|t| &t.kind), Some(TokenKind::Eof)));
        Ok(Parser { src, tokens, pos: 0, depth: 0, next_marker: 0 })
    }

    /// One statement, optional trailing semicolons, then end of input.
    pub(crate) fn parse_single(&mut self) -> Result<Statement, ParseError> {
        let statement = self.statement()?;
        while self.eat_sym(Symbol::Semicolon) {}
        if !self.at_eof() {
            return Err(self.mismatch("EOF"));
        }
        Ok(statement)
    }

    /// Statements separated by semicolons; empty statements are skipped.
    pub(crate) fn parse_script(&mut self) -> Result<Vec<Statement>, ParseError> {
        let mut statements = Vec::new();
        loop {
            while self.eat_sym(Symbol::Semicolon) {}
            if self.at_eof() {
                return Ok(statements);
            }
            statements.push(self.statement()?);
            if !self.at_eof() && !self.is_sym(Symbol::Semicolon) {
                return Err(self.mismatch("';'"));
            }
        }
    }

    fn statement(&mut self) -> Result<Statement, ParseError> {
        self.next_marker = 0;
        self.depth = 0;
        let statement = self.statement_inner()?;
        debug_assert_eq!(
            statement.bind_markers().len(),
            self.next_marker,
            "every allocated bind marker is in the tree"
        );
        debug_assert!(
            statement.bind_markers().iter().enumerate().all(|(i, m)| m.index == i),
            "marker indices are 0..n"
        );
        debug_assert_eq!(self.depth, 0, "nesting depth is balanced");
        Ok(statement)
    }

    fn statement_inner(&mut self) -> Result<Statement, ParseError> {
        let Some(word) = self.word_at(0) else {
            return Err(self.no_viable());
        };
        match word {
            "select" => Ok(Statement::Select(Box::new(self.select()?))),
            "insert" => Ok(Statement::Insert(Box::new(self.insert()?))),
            "update" => Ok(Statement::Update(Box::new(self.update()?))),
            "delete" => Ok(Statement::Delete(Box::new(self.delete()?))),
            "begin" => Ok(Statement::Batch(Box::new(self.batch()?))),
            "use" => {
                self.bump();
                let keyspace = self.keyspace_name()?;
                Ok(Statement::Use { keyspace })
            }
            "truncate" => {
                self.bump();
                if self.is_kw("columnfamily") || self.is_kw("table") {
                    self.bump();
                }
                let table = self.table_name()?;
                Ok(Statement::Truncate { table })
            }
            "create" => self.create(),
            "alter" => self.alter(),
            "drop" => self.drop_statement(),
            "describe" | "desc" => self.describe(),
            "grant" => self.grant(),
            "revoke" => self.revoke(),
            "list" => self.list_statement(),
            "add" if self.is_kw_at(1, "identity") => Ok(self.unsupported("ADD IDENTITY")),
            _ => Err(self.no_viable()),
        }
    }

    /// `LIST ROLES | USERS` and `LIST <permissions>` (`roles`); `LIST SUPERUSERS`: unsupported.
    fn list_statement(&mut self) -> Result<Statement, ParseError> {
        match self.word_at(1) {
            Some("roles" | "users") => {
                self.bump();
                self.list_roles()
            }
            Some("superusers") => Ok(self.unsupported("LIST SUPERUSERS")),
            _ => {
                self.bump();
                self.list_permissions()
            }
        }
    }

    /// Recognises a statement Shoal does not execute: skips to the end of it
    /// (the next `;` or the end of input) and names it.
    fn unsupported(&mut self, kind: &str) -> Statement {
        while !self.at_eof() && !self.is_sym(Symbol::Semicolon) {
            self.bump();
        }
        Statement::Unsupported { kind: kind.to_string() }
    }

    // -- token cursor ------------------------------------------------------

    fn peek(&self) -> &Token {
        self.peek_at(0)
    }

    fn peek_at(&self, n: usize) -> &Token {
        let index = self.pos.saturating_add(n);
        self.tokens.get(index).or_else(|| self.tokens.last()).unwrap_or(&EOF_TOKEN)
    }

    /// Moves to the next token (never past `Eof`).
    fn bump(&mut self) {
        if !self.at_eof() {
            self.pos += 1;
        }
    }

    fn at_eof(&self) -> bool {
        matches!(self.peek().kind, TokenKind::Eof)
    }

    /// The lower-cased word `n` tokens ahead, if that token is a word.
    fn word_at(&self, n: usize) -> Option<&str> {
        match &self.peek_at(n).kind {
            TokenKind::Word(word) => Some(word.as_str()),
            _ => None,
        }
    }

    fn is_kw(&self, keyword: &str) -> bool {
        self.is_kw_at(0, keyword)
    }

    fn is_kw_at(&self, n: usize, keyword: &str) -> bool {
        self.word_at(n) == Some(keyword)
    }

    fn eat_kw(&mut self, keyword: &str) -> bool {
        let found = self.is_kw(keyword);
        if found {
            self.bump();
        }
        found
    }

    fn expect_kw(&mut self, keyword: &str) -> Result<(), ParseError> {
        if self.eat_kw(keyword) {
            Ok(())
        } else {
            Err(self.mismatch(&keyword_token_name(keyword)))
        }
    }

    fn is_sym(&self, symbol: Symbol) -> bool {
        self.is_sym_at(0, symbol)
    }

    fn is_sym_at(&self, n: usize, symbol: Symbol) -> bool {
        self.peek_at(n).kind == TokenKind::Symbol(symbol)
    }

    fn eat_sym(&mut self, symbol: Symbol) -> bool {
        let found = self.is_sym(symbol);
        if found {
            self.bump();
        }
        found
    }

    fn expect_sym(&mut self, symbol: Symbol) -> Result<(), ParseError> {
        if self.eat_sym(symbol) {
            Ok(())
        } else {
            Err(self.mismatch(&format!("'{}'", symbol.text())))
        }
    }

    /// Parses `IF NOT EXISTS` if present.
    fn if_not_exists(&mut self) -> Result<bool, ParseError> {
        if self.eat_kw("if") {
            self.expect_kw("not")?;
            self.expect_kw("exists")?;
            return Ok(true);
        }
        Ok(false)
    }

    /// Parses `IF EXISTS` if present.
    fn if_exists(&mut self) -> Result<bool, ParseError> {
        if self.eat_kw("if") {
            self.expect_kw("exists")?;
            return Ok(true);
        }
        Ok(false)
    }

    /// Increments the nesting depth, failing past [`MAX_DEPTH`]. Callers
    /// pair it with [`Parser::leave`] on success; an error ends the parse.
    fn enter(&mut self) -> Result<(), ParseError> {
        if self.depth >= MAX_DEPTH {
            return Err(self.error_here(format!("maximum nesting depth of {MAX_DEPTH} exceeded")));
        }
        self.depth += 1;
        Ok(())
    }

    fn leave(&mut self) {
        debug_assert!(self.depth > 0);
        self.depth = self.depth.saturating_sub(1);
    }

    // -- errors ------------------------------------------------------------

    /// The token's text as ANTLR displays it in messages.
    fn token_display(&self, token: &Token) -> String {
        if matches!(token.kind, TokenKind::Eof) {
            return "<EOF>".to_string();
        }
        let text = self.src.get(token.start..token.end).unwrap_or_default();
        text.replace('\n', "\\n").replace('\r', "\\r").replace('\t', "\\t")
    }

    fn error_at(&self, token: &Token, message: String) -> ParseError {
        ParseError { line: token.line, col: token.col, message }
    }

    fn error_here(&self, message: String) -> ParseError {
        self.error_at(self.peek(), message)
    }

    /// `mismatched input 'x' expecting Y` at the current token.
    fn mismatch(&self, expecting: &str) -> ParseError {
        let found = self.token_display(self.peek());
        self.error_here(format!("mismatched input '{found}' expecting {expecting}"))
    }

    /// `no viable alternative at input 'x'` at the current token.
    fn no_viable(&self) -> ParseError {
        let found = self.token_display(self.peek());
        self.error_here(format!("no viable alternative at input '{found}'"))
    }

    // -- identifiers -------------------------------------------------------

    /// True when the token `n` ahead can be an identifier (`ident` in the
    /// grammar): an unreserved word or a non-empty quoted name.
    fn is_ident_at(&self, n: usize) -> bool {
        match &self.peek_at(n).kind {
            TokenKind::Word(word) => !is_reserved(word),
            TokenKind::QuotedName(name) => !name.is_empty(),
            _ => false,
        }
    }

    /// An identifier (column, field, keyspace, alias or option name).
    fn ident(&mut self) -> Result<String, ParseError> {
        if !self.is_ident_at(0) {
            return Err(self.no_viable());
        }
        let name = match &self.peek().kind {
            TokenKind::Word(word) | TokenKind::QuotedName(word) => word.clone(),
            _ => return Err(self.no_viable()),
        };
        self.bump();
        Ok(name)
    }

    /// A column reference: an identifier, or `""` (the legacy empty name).
    fn cident(&mut self) -> Result<String, ParseError> {
        if matches!(&self.peek().kind, TokenKind::QuotedName(name) if name.is_empty()) {
            self.bump();
            return Ok(String::new());
        }
        self.ident()
    }

    /// A keyspace name; a bind marker there gets Cassandra's message.
    fn keyspace_name(&mut self) -> Result<String, ParseError> {
        if matches!(self.peek().kind, TokenKind::QMark) {
            return Err(self.error_here("Bind variables cannot be used for keyspace names".to_string()));
        }
        self.ident()
    }

    /// `[ks.]name` for tables (and views, indexes).
    fn table_name(&mut self) -> Result<QualifiedName, ParseError> {
        self.qualified_name("table")
    }

    /// `[ks.]name`; `what` names the object in the bind-marker message.
    fn qualified_name(&mut self, what: &str) -> Result<QualifiedName, ParseError> {
        if self.is_sym_at(1, Symbol::Dot) {
            let keyspace = self.keyspace_name()?;
            self.bump();
            let name = self.object_name(what)?;
            return Ok(QualifiedName { keyspace: Some(keyspace), name });
        }
        let name = self.object_name(what)?;
        Ok(QualifiedName { keyspace: None, name })
    }

    fn object_name(&mut self, what: &str) -> Result<String, ParseError> {
        if matches!(self.peek().kind, TokenKind::QMark) {
            return Err(self.error_here(format!("Bind variables cannot be used for {what} names")));
        }
        self.ident()
    }

    /// True when the token `n` ahead can name a function: an identifier that
    /// is not one of the selector keywords, or `token` / `count`.
    fn is_function_name_at(&self, n: usize) -> bool {
        match &self.peek_at(n).kind {
            TokenKind::Word(word) => {
                word == "token" || word == "count" || (!is_reserved(word) && !is_non_function_keyword(word))
            }
            TokenKind::QuotedName(name) => !name.is_empty(),
            _ => false,
        }
    }

    /// True when a function call `[ks.]name(` starts `n` tokens ahead.
    fn function_call_ahead(&self, n: usize) -> bool {
        if self.is_function_name_at(n) && self.is_sym_at(n + 1, Symbol::LParen) {
            return true;
        }
        self.is_ident_at(n)
            && self.is_sym_at(n + 1, Symbol::Dot)
            && self.is_function_name_at(n + 2)
            && self.is_sym_at(n + 3, Symbol::LParen)
    }

    /// `[ks.]name` of a function; the caller checked [`Parser::function_call_ahead`].
    fn function_name(&mut self) -> Result<QualifiedName, ParseError> {
        let keyspace = if self.is_sym_at(1, Symbol::Dot) {
            let keyspace = self.keyspace_name()?;
            self.bump();
            Some(keyspace)
        } else {
            None
        };
        if !self.is_function_name_at(0) {
            return Err(self.no_viable());
        }
        let name = match &self.peek().kind {
            TokenKind::Word(word) | TokenKind::QuotedName(word) => word.clone(),
            _ => return Err(self.no_viable()),
        };
        self.bump();
        Ok(QualifiedName { keyspace, name })
    }
}
