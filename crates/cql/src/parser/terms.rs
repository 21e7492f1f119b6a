//! Terms (values), literals, bind markers and type expressions.
//!
//! A term is what CQL accepts where a value goes: constants, `null`,
//! collection / tuple / UDT literals, function calls, casts, type hints,
//! bind markers, and `+ - * / %` arithmetic. A bare identifier is never a
//! term; that is what tells `c = c + 1` from `c = [1] + c` apart.

use types::CqlType;

use super::{is_reserved, Parser};
use crate::ast::{ArithmeticOp, BindMarker, Literal, QualifiedName, Term, TypeExpr};
use crate::lexer::{Symbol, TokenKind};
use crate::ParseError;

/// Names Cassandra refuses for user-defined types.
const RESERVED_TYPE_NAMES: &[&str] = &["byte", "complex", "enum", "date", "interval", "macaddr", "bitstring"];

impl Parser<'_> {
    /// A term, with arithmetic (`+ -` over `* / %`).
    pub(super) fn term(&mut self) -> Result<Term, ParseError> {
        let first = self.term_group()?;
        self.term_addition_from(first)
    }

    /// Continues a term whose first operand was already read.
    pub(super) fn term_addition_from(&mut self, first: Term) -> Result<Term, ParseError> {
        let mut lhs = self.term_multiplication_from(first)?;
        loop {
            let op = if self.is_sym(Symbol::Plus) {
                ArithmeticOp::Add
            } else if self.is_sym(Symbol::Minus) {
                ArithmeticOp::Subtract
            } else if let Some(positive) = self.negative_number_as_positive() {
                // `a -1` lexes as `a`, `-1`: read it as a subtraction.
                self.bump();
                let rhs = self.term_multiplication_from(Term::Literal(positive))?;
                lhs = Term::BinaryOp { op: ArithmeticOp::Subtract, lhs: Box::new(lhs), rhs: Box::new(rhs) };
                continue;
            } else {
                return Ok(lhs);
            };
            // `[1] + c` in an UPDATE: the column after `+` is not a term.
            if !self.can_start_term_group(1) {
                return Ok(lhs);
            }
            self.bump();
            let rhs = self.term_multiplication()?;
            lhs = Term::BinaryOp { op, lhs: Box::new(lhs), rhs: Box::new(rhs) };
        }
    }

    fn term_multiplication(&mut self) -> Result<Term, ParseError> {
        let first = self.term_group()?;
        self.term_multiplication_from(first)
    }

    fn term_multiplication_from(&mut self, first: Term) -> Result<Term, ParseError> {
        let mut lhs = first;
        loop {
            let op = if self.is_sym(Symbol::Star) {
                ArithmeticOp::Multiply
            } else if self.is_sym(Symbol::Slash) {
                ArithmeticOp::Divide
            } else if self.is_sym(Symbol::Percent) {
                ArithmeticOp::Modulo
            } else {
                return Ok(lhs);
            };
            self.bump();
            let rhs = self.term_group()?;
            lhs = Term::BinaryOp { op, lhs: Box::new(lhs), rhs: Box::new(rhs) };
        }
    }

    fn term_group(&mut self) -> Result<Term, ParseError> {
        if self.is_sym(Symbol::Minus) && self.can_start_simple_term(1) {
            self.bump();
            let inner = self.simple_term()?;
            return Ok(Term::Negate(Box::new(inner)));
        }
        self.simple_term()
    }

    /// When the current token is a number written with a leading `-`, the
    /// same number without it (for reading `x -1` as `x - 1`).
    pub(super) fn negative_number_as_positive(&self) -> Option<Literal> {
        let token = self.peek();
        let text = self.src.get(token.start..token.end)?;
        let unsigned = text.strip_prefix('-')?;
        match &token.kind {
            TokenKind::Integer(_) => Some(Literal::Integer(unsigned.to_string())),
            TokenKind::Float(value) if value == "NaN" => Some(Literal::Float("NaN".to_string())),
            TokenKind::Float(value) if value == "-Infinity" => Some(Literal::Float("Infinity".to_string())),
            TokenKind::Float(_) => Some(Literal::Float(unsigned.to_string())),
            TokenKind::Duration(_) => Some(Literal::Duration(unsigned.to_string())),
            _ => None,
        }
    }

    /// True when a term group (`-`? simple term) can start `n` tokens ahead.
    pub(super) fn can_start_term_group(&self, n: usize) -> bool {
        self.can_start_simple_term(n) || (self.is_sym_at(n, Symbol::Minus) && self.can_start_simple_term(n + 1))
    }

    /// True when a simple term can start `n` tokens ahead.
    pub(super) fn can_start_simple_term(&self, n: usize) -> bool {
        match &self.peek_at(n).kind {
            TokenKind::Str(_)
            | TokenKind::Integer(_)
            | TokenKind::Float(_)
            | TokenKind::Duration(_)
            | TokenKind::Uuid(_)
            | TokenKind::Hex(_)
            | TokenKind::Boolean(_)
            | TokenKind::QMark => true,
            TokenKind::Symbol(Symbol::LBracket | Symbol::LBrace | Symbol::LParen) => true,
            // `:name`; a lone `:` separates map keys from values.
            TokenKind::Symbol(Symbol::Colon) => self.is_ident_at(n + 1),
            TokenKind::Word(word) if matches!(word.as_str(), "null" | "nan" | "infinity") => true,
            TokenKind::Word(word) if word == "cast" && self.is_sym_at(n + 1, Symbol::LParen) => true,
            _ => self.function_call_ahead(n),
        }
    }

    /// A term without arithmetic: value, function call, cast or type hint.
    pub(super) fn simple_term(&mut self) -> Result<Term, ParseError> {
        self.enter()?;
        let term = self.simple_term_inner()?;
        self.leave();
        Ok(term)
    }

    fn simple_term_inner(&mut self) -> Result<Term, ParseError> {
        if let Some(literal) = self.constant()? {
            return Ok(Term::Literal(literal));
        }
        if let Some(marker) = self.marker()? {
            return Ok(Term::Bind(marker));
        }
        match &self.peek().kind {
            TokenKind::Word(word) if word == "null" => {
                self.bump();
                Ok(Term::Literal(Literal::Null))
            }
            TokenKind::Symbol(Symbol::LBracket) => self.list_literal(),
            TokenKind::Symbol(Symbol::LBrace) => self.brace_literal(),
            TokenKind::Symbol(Symbol::LParen) => {
                if let Some(hinted) = self.try_type_hint()? {
                    return Ok(hinted);
                }
                self.tuple_literal()
            }
            TokenKind::Word(word) if word == "cast" && self.is_sym_at(1, Symbol::LParen) => {
                self.bump();
                self.bump();
                let term = self.simple_term()?;
                self.expect_kw("as")?;
                let ty = self.native_type()?;
                self.expect_sym(Symbol::RParen)?;
                Ok(Term::Cast { term: Box::new(term), ty })
            }
            _ if self.function_call_ahead(0) => {
                let function = self.function_name()?;
                let args = self.parenthesized_terms()?;
                Ok(Term::FunctionCall { function, args })
            }
            _ => Err(self.no_viable()),
        }
    }

    /// A constant literal (not `null`), consumed if present.
    pub(super) fn constant(&mut self) -> Result<Option<Literal>, ParseError> {
        let literal = match &self.peek().kind {
            TokenKind::Str(s) => Literal::String(s.clone()),
            TokenKind::Integer(s) => Literal::Integer(s.clone()),
            TokenKind::Float(s) => Literal::Float(s.clone()),
            TokenKind::Duration(s) => Literal::Duration(s.clone()),
            TokenKind::Boolean(b) => Literal::Boolean(*b),
            TokenKind::Uuid(s) => match uuid::Uuid::parse_str(s) {
                Ok(uuid) => Literal::Uuid(uuid),
                Err(_) => return Err(self.no_viable()),
            },
            TokenKind::Hex(digits) => match decode_hex(digits) {
                Some(bytes) => Literal::Hex(bytes),
                None => {
                    return Err(self.error_here("An hex string representing bytes must have an even length".to_string()))
                }
            },
            TokenKind::Word(word) if word == "nan" => Literal::Float("NaN".to_string()),
            TokenKind::Word(word) if word == "infinity" => Literal::Float("Infinity".to_string()),
            _ => return Ok(None),
        };
        self.bump();
        Ok(Some(literal))
    }

    /// A bind marker `?` or `:name`, consumed and numbered if present.
    pub(super) fn marker(&mut self) -> Result<Option<BindMarker>, ParseError> {
        let name = if matches!(self.peek().kind, TokenKind::QMark) {
            self.bump();
            None
        } else if self.is_sym(Symbol::Colon) {
            self.bump();
            Some(self.ident()?)
        } else {
            return Ok(None);
        };
        let marker = BindMarker { index: self.next_marker, name };
        self.next_marker += 1;
        Ok(Some(marker))
    }

    /// An integer literal or bind marker (LIMIT, TTL, TIMESTAMP values).
    pub(super) fn int_value(&mut self) -> Result<Term, ParseError> {
        if let TokenKind::Integer(text) = &self.peek().kind {
            let literal = Literal::Integer(text.clone());
            self.bump();
            return Ok(Term::Literal(literal));
        }
        match self.marker()? {
            Some(marker) => Ok(Term::Bind(marker)),
            None => Err(self.no_viable()),
        }
    }

    /// `( term, … )`, possibly empty.
    pub(super) fn parenthesized_terms(&mut self) -> Result<Vec<Term>, ParseError> {
        self.expect_sym(Symbol::LParen)?;
        let mut terms = Vec::new();
        if self.eat_sym(Symbol::RParen) {
            return Ok(terms);
        }
        loop {
            terms.push(self.term()?);
            if !self.eat_sym(Symbol::Comma) {
                break;
            }
        }
        self.expect_sym(Symbol::RParen)?;
        Ok(terms)
    }

    fn list_literal(&mut self) -> Result<Term, ParseError> {
        self.expect_sym(Symbol::LBracket)?;
        let mut items = Vec::new();
        if !self.is_sym(Symbol::RBracket) {
            loop {
                items.push(self.term()?);
                if !self.eat_sym(Symbol::Comma) {
                    break;
                }
            }
        }
        self.expect_sym(Symbol::RBracket)?;
        Ok(Term::List(items))
    }

    /// `{}`, `{a, b}`, `{k: v}` or `{field: v}`.
    fn brace_literal(&mut self) -> Result<Term, ParseError> {
        self.expect_sym(Symbol::LBrace)?;
        if self.eat_sym(Symbol::RBrace) {
            return Ok(Term::EmptyMapOrSet);
        }
        // A bare identifier is never a term, so `{name:` starts a UDT literal.
        if self.is_ident_at(0) && self.is_sym_at(1, Symbol::Colon) {
            let mut fields = Vec::new();
            loop {
                let field = self.ident()?;
                self.expect_sym(Symbol::Colon)?;
                fields.push((field, self.term()?));
                if !self.eat_sym(Symbol::Comma) {
                    break;
                }
            }
            self.expect_sym(Symbol::RBrace)?;
            return Ok(Term::Udt(fields));
        }
        let first = self.term()?;
        if self.eat_sym(Symbol::Colon) {
            let mut entries = vec![(first, self.term()?)];
            while self.eat_sym(Symbol::Comma) {
                let key = self.term()?;
                self.expect_sym(Symbol::Colon)?;
                entries.push((key, self.term()?));
            }
            self.expect_sym(Symbol::RBrace)?;
            return Ok(Term::Map(entries));
        }
        let mut items = vec![first];
        while self.eat_sym(Symbol::Comma) {
            items.push(self.term()?);
        }
        self.expect_sym(Symbol::RBrace)?;
        Ok(Term::Set(items))
    }

    /// `(term, …)`: a tuple literal (one element or more).
    pub(super) fn tuple_literal(&mut self) -> Result<Term, ParseError> {
        self.expect_sym(Symbol::LParen)?;
        let mut items = Vec::new();
        loop {
            items.push(self.term()?);
            if !self.eat_sym(Symbol::Comma) {
                break;
            }
        }
        self.expect_sym(Symbol::RParen)?;
        Ok(Term::Tuple(items))
    }

    /// At `(`: if `(type)` followed by a term is there, the type-hinted term;
    /// otherwise nothing is consumed. The retry reads only type tokens.
    fn try_type_hint(&mut self) -> Result<Option<Term>, ParseError> {
        let Some(ty) = self.try_parenthesized_type(|parser| parser.can_start_simple_term(0))? else {
            return Ok(None);
        };
        let term = self.simple_term()?;
        Ok(Some(Term::TypeHint { ty, term: Box::new(term) }))
    }

    /// At `(`: parses `( type )` when it is there and `follows` holds for
    /// the token after `)`; otherwise restores the position and returns None.
    pub(super) fn try_parenthesized_type(
        &mut self,
        follows: impl Fn(&Self) -> bool,
    ) -> Result<Option<TypeExpr>, ParseError> {
        if !self.is_sym(Symbol::LParen) || !self.can_start_type(1) {
            return Ok(None);
        }
        let (saved_pos, saved_depth) = (self.pos, self.depth);
        self.bump();
        if let Ok(ty) = self.type_expr() {
            if self.eat_sym(Symbol::RParen) && follows(self) {
                return Ok(Some(ty));
            }
        }
        self.pos = saved_pos;
        self.depth = saved_depth;
        Ok(None)
    }

    // -- types ---------------------------------------------------------------

    /// True when a type expression can start `n` tokens ahead.
    pub(super) fn can_start_type(&self, n: usize) -> bool {
        match &self.peek_at(n).kind {
            TokenKind::Str(_) => true,
            TokenKind::QuotedName(name) => !name.is_empty(),
            TokenKind::Word(word) => CqlType::from_simple_name(word).is_some() || word == "set" || !is_reserved(word),
            _ => false,
        }
    }

    /// A type: native, collection, tuple, vector, frozen, custom or UDT name.
    pub(super) fn type_expr(&mut self) -> Result<TypeExpr, ParseError> {
        self.enter()?;
        let ty = self.type_expr_inner()?;
        self.leave();
        Ok(ty)
    }

    fn type_expr_inner(&mut self) -> Result<TypeExpr, ParseError> {
        let word = match &self.peek().kind {
            TokenKind::Str(class) => {
                let class = class.clone();
                self.bump();
                return Ok(TypeExpr::Custom(class));
            }
            TokenKind::Word(word) => word.clone(),
            TokenKind::QuotedName(_) => {
                return self.user_type().map(|name| TypeExpr::Udt { keyspace: name.keyspace, name: name.name })
            }
            _ => return Err(self.no_viable()),
        };
        if self.is_sym_at(1, Symbol::Lt) {
            let parameterized = matches!(word.as_str(), "frozen" | "list" | "set" | "map" | "tuple" | "vector");
            if parameterized {
                self.bump();
                self.bump();
                let ty = match word.as_str() {
                    "frozen" => TypeExpr::Frozen(Box::new(self.type_expr()?)),
                    "list" => TypeExpr::List(Box::new(self.type_expr()?)),
                    "set" => TypeExpr::Set(Box::new(self.type_expr()?)),
                    "map" => {
                        let key = self.type_expr()?;
                        self.expect_sym(Symbol::Comma)?;
                        TypeExpr::Map(Box::new(key), Box::new(self.type_expr()?))
                    }
                    "tuple" => {
                        let mut elems = vec![self.type_expr()?];
                        while self.eat_sym(Symbol::Comma) {
                            elems.push(self.type_expr()?);
                        }
                        TypeExpr::Tuple(elems)
                    }
                    _ => {
                        let elem = self.type_expr()?;
                        self.expect_sym(Symbol::Comma)?;
                        let dimension = match &self.peek().kind {
                            TokenKind::Integer(digits) => digits.parse::<u32>().ok(),
                            _ => None,
                        };
                        let Some(dimension) = dimension else {
                            return Err(self.mismatch("INTEGER"));
                        };
                        self.bump();
                        TypeExpr::Vector { elem: Box::new(elem), dimension }
                    }
                };
                self.expect_sym(Symbol::Gt)?;
                return Ok(ty);
            }
        }
        if let Some(native) = CqlType::from_simple_name(&word) {
            if !self.is_sym_at(1, Symbol::Dot) {
                self.bump();
                return Ok(TypeExpr::Native(native));
            }
        }
        let name = self.user_type()?;
        Ok(TypeExpr::Udt { keyspace: name.keyspace, name: name.name })
    }

    /// A native type name, for `CAST(… AS type)`.
    pub(super) fn native_type(&mut self) -> Result<CqlType, ParseError> {
        let native = self.word_at(0).and_then(CqlType::from_simple_name);
        match native {
            Some(ty) => {
                self.bump();
                Ok(ty)
            }
            None => Err(self.no_viable()),
        }
    }

    /// `[ks.]name` of a user-defined type. The name may not be a native type
    /// or a selector keyword, and Cassandra reserves a few more names.
    pub(super) fn user_type(&mut self) -> Result<QualifiedName, ParseError> {
        let keyspace = if self.is_sym_at(1, Symbol::Dot) {
            let keyspace = self.keyspace_name()?;
            self.bump();
            Some(keyspace)
        } else {
            None
        };
        let name = match &self.peek().kind {
            TokenKind::Word(word) => {
                let excluded = is_reserved(word)
                    || CqlType::from_simple_name(word).is_some()
                    || matches!(
                        word.as_str(),
                        "ttl" | "count" | "writetime" | "maxwritetime" | "cast" | "json" | "distinct"
                    );
                if excluded {
                    return Err(self.no_viable());
                }
                if RESERVED_TYPE_NAMES.contains(&word.as_str()) {
                    return Err(self.error_here(format!("Invalid (reserved) user type name {word}")));
                }
                word.clone()
            }
            TokenKind::QuotedName(name) if !name.is_empty() => name.clone(),
            TokenKind::QMark => return Err(self.error_here("Bind variables cannot be used for type names".to_string())),
            _ => return Err(self.no_viable()),
        };
        self.bump();
        Ok(QualifiedName { keyspace, name })
    }
}

/// Decodes hex digits into bytes; None for an odd count.
fn decode_hex(digits: &str) -> Option<Vec<u8>> {
    if digits.len() % 2 == 1 {
        return None;
    }
    let value = |b: u8| char::from(b).to_digit(16).and_then(|d| u8::try_from(d).ok());
    digits
        .as_bytes()
        .chunks(2)
        .map(|pair| match pair {
            [high, low] => Some(value(*high)? << 4 | value(*low)?),
            _ => None,
        })
        .collect()
}
