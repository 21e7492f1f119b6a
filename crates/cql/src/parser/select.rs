//! SELECT: selectors, and the WHERE relations that DML statements share.

use super::Parser;
use crate::ast::{
    ArithmeticOp, CellMetadataKind, Literal, Operator, Order, Ordering, Relation, RelationLhs, Select, Selection,
    Selector, SelectorExpr, Term,
};
use crate::lexer::{Symbol, TokenKind};
use crate::ParseError;

impl Parser<'_> {
    pub(super) fn select(&mut self) -> Result<Select, ParseError> {
        self.expect_kw("select")?;
        // `json` and `distinct` are also valid column names.
        let json = self.is_kw("json") && self.select_modifier_applies();
        if json {
            self.bump();
        }
        let distinct = self.is_kw("distinct") && self.select_modifier_applies();
        if distinct {
            self.bump();
        }
        let selection =
            if self.eat_sym(Symbol::Star) { Selection::Wildcard } else { Selection::Selectors(self.selectors()?) };
        self.expect_kw("from")?;
        let table = self.table_name()?;
        let where_clause = if self.eat_kw("where") { self.where_clause()? } else { Vec::new() };
        let mut group_by = Vec::new();
        if self.is_kw("group") && self.is_kw_at(1, "by") {
            self.bump();
            self.bump();
            loop {
                group_by.push(self.selector_expr()?);
                if !self.eat_sym(Symbol::Comma) {
                    break;
                }
            }
        }
        let mut order_by = Vec::new();
        if self.eat_kw("order") {
            self.expect_kw("by")?;
            loop {
                let column = self.cident()?;
                let order = if self.eat_kw("desc") {
                    Order::Desc
                } else {
                    self.eat_kw("asc");
                    Order::Asc
                };
                order_by.push(Ordering { column, order });
                if !self.eat_sym(Symbol::Comma) {
                    break;
                }
            }
        }
        let mut per_partition_limit = None;
        if self.is_kw("per") && self.is_kw_at(1, "partition") {
            self.bump();
            self.bump();
            self.expect_kw("limit")?;
            per_partition_limit = Some(self.int_value()?);
        }
        let limit = if self.eat_kw("limit") { Some(self.int_value()?) } else { None };
        let allow_filtering = if self.eat_kw("allow") {
            self.expect_kw("filtering")?;
            true
        } else {
            false
        };
        Ok(Select {
            table,
            json,
            distinct,
            selection,
            where_clause,
            group_by,
            order_by,
            per_partition_limit,
            limit,
            allow_filtering,
        })
    }

    /// At `JSON` or `DISTINCT` after SELECT: true when it is the modifier,
    /// false when it is a column of that name (`SELECT json FROM t`).
    fn select_modifier_applies(&self) -> bool {
        match &self.peek_at(1).kind {
            TokenKind::Eof => false,
            TokenKind::Symbol(
                Symbol::Comma | Symbol::Dot | Symbol::LBracket | Symbol::Plus | Symbol::Slash | Symbol::Percent,
            ) => false,
            TokenKind::Word(word) if word == "from" => false,
            // `SELECT json AS j FROM t`
            TokenKind::Word(word) if word == "as" => {
                !(self.is_ident_at(2) && (self.is_sym_at(3, Symbol::Comma) || self.is_kw_at(3, "from")))
            }
            _ => true,
        }
    }

    fn selectors(&mut self) -> Result<Vec<Selector>, ParseError> {
        let mut selectors = Vec::new();
        loop {
            let expr = self.selector_expr()?;
            let alias = if self.eat_kw("as") { Some(self.ident()?) } else { None };
            selectors.push(Selector { expr, alias });
            if !self.eat_sym(Symbol::Comma) {
                return Ok(selectors);
            }
        }
    }

    /// A selector expression without alias (`unaliasedSelector`).
    pub(super) fn selector_expr(&mut self) -> Result<SelectorExpr, ParseError> {
        self.enter()?;
        let expr = self.selector_addition()?;
        self.leave();
        Ok(expr)
    }

    fn selector_addition(&mut self) -> Result<SelectorExpr, ParseError> {
        let mut lhs = self.selector_multiplication()?;
        loop {
            let op = if self.eat_sym(Symbol::Plus) {
                ArithmeticOp::Add
            } else if self.eat_sym(Symbol::Minus) {
                ArithmeticOp::Subtract
            } else if let Some(positive) = self.negative_number_as_positive() {
                // `a -1` lexes as `a`, `-1`: read it as a subtraction.
                self.bump();
                let first = SelectorExpr::Term(Term::Literal(positive));
                let first = self.selector_modifiers(first)?;
                let rhs = self.selector_multiplication_from(first)?;
                lhs = SelectorExpr::BinaryOp { op: ArithmeticOp::Subtract, lhs: Box::new(lhs), rhs: Box::new(rhs) };
                continue;
            } else {
                return Ok(lhs);
            };
            let rhs = self.selector_multiplication()?;
            lhs = SelectorExpr::BinaryOp { op, lhs: Box::new(lhs), rhs: Box::new(rhs) };
        }
    }

    fn selector_multiplication(&mut self) -> Result<SelectorExpr, ParseError> {
        let first = self.selector_group()?;
        self.selector_multiplication_from(first)
    }

    fn selector_multiplication_from(&mut self, first: SelectorExpr) -> Result<SelectorExpr, ParseError> {
        let mut lhs = first;
        loop {
            let op = if self.eat_sym(Symbol::Star) {
                ArithmeticOp::Multiply
            } else if self.eat_sym(Symbol::Slash) {
                ArithmeticOp::Divide
            } else if self.eat_sym(Symbol::Percent) {
                ArithmeticOp::Modulo
            } else {
                return Ok(lhs);
            };
            let rhs = self.selector_group()?;
            lhs = SelectorExpr::BinaryOp { op, lhs: Box::new(lhs), rhs: Box::new(rhs) };
        }
    }

    /// `- group`, or a selector with its `.field` / `[…]` modifiers.
    fn selector_group(&mut self) -> Result<SelectorExpr, ParseError> {
        if self.eat_sym(Symbol::Minus) {
            self.enter()?;
            let inner = self.selector_group()?;
            self.leave();
            return Ok(SelectorExpr::Negate(Box::new(inner)));
        }
        let base = self.selector_without_modifiers()?;
        self.selector_modifiers(base)
    }

    /// Applies `.field`, `[key]` and `[from..to]` selections, left to right.
    fn selector_modifiers(&mut self, mut expr: SelectorExpr) -> Result<SelectorExpr, ParseError> {
        loop {
            if self.is_sym(Symbol::Dot) {
                self.bump();
                let field = self.ident()?;
                expr = SelectorExpr::Field { expr: Box::new(expr), field };
            } else if self.eat_sym(Symbol::LBracket) {
                if self.eat_sym(Symbol::Range) {
                    let to = self.term()?;
                    expr = SelectorExpr::Slice { expr: Box::new(expr), from: None, to: Some(to) };
                } else {
                    let key = self.term()?;
                    if self.eat_sym(Symbol::Range) {
                        let to = if self.is_sym(Symbol::RBracket) { None } else { Some(self.term()?) };
                        expr = SelectorExpr::Slice { expr: Box::new(expr), from: Some(key), to };
                    } else {
                        expr = SelectorExpr::Element { expr: Box::new(expr), key };
                    }
                }
                self.expect_sym(Symbol::RBracket)?;
            } else {
                return Ok(expr);
            }
        }
    }

    fn selector_without_modifiers(&mut self) -> Result<SelectorExpr, ParseError> {
        if let Some(literal) = self.constant()? {
            return Ok(SelectorExpr::Term(Term::Literal(literal)));
        }
        if let Some(marker) = self.marker()? {
            return Ok(SelectorExpr::Term(Term::Bind(marker)));
        }
        match &self.peek().kind {
            TokenKind::Word(word) if word == "null" => {
                self.bump();
                Ok(SelectorExpr::Term(Term::Literal(Literal::Null)))
            }
            TokenKind::Symbol(Symbol::LParen) => {
                let hint =
                    self.try_parenthesized_type(|parser| parser.can_start_selector(0) && !parser.alias_ahead(0))?;
                if let Some(ty) = hint {
                    self.enter()?;
                    let expr = self.selector_without_modifiers()?;
                    self.leave();
                    return Ok(SelectorExpr::TypeHint { ty, expr: Box::new(expr) });
                }
                self.bump();
                let mut items = vec![self.selector_expr()?];
                while self.eat_sym(Symbol::Comma) {
                    items.push(self.selector_expr()?);
                }
                self.expect_sym(Symbol::RParen)?;
                if items.len() == 1 {
                    if let Some(single) = items.pop() {
                        return Ok(single);
                    }
                }
                Ok(SelectorExpr::Tuple(items))
            }
            TokenKind::Symbol(Symbol::LBracket) => {
                self.bump();
                let mut items = Vec::new();
                if !self.is_sym(Symbol::RBracket) {
                    loop {
                        items.push(self.selector_expr()?);
                        if !self.eat_sym(Symbol::Comma) {
                            break;
                        }
                    }
                }
                self.expect_sym(Symbol::RBracket)?;
                Ok(SelectorExpr::List(items))
            }
            TokenKind::Symbol(Symbol::LBrace) => {
                self.bump();
                if self.eat_sym(Symbol::RBrace) {
                    return Ok(SelectorExpr::Set(Vec::new()));
                }
                let first = self.selector_expr()?;
                if self.eat_sym(Symbol::Colon) {
                    let mut entries = vec![(first, self.selector_expr()?)];
                    while self.eat_sym(Symbol::Comma) {
                        let key = self.selector_expr()?;
                        self.expect_sym(Symbol::Colon)?;
                        entries.push((key, self.selector_expr()?));
                    }
                    self.expect_sym(Symbol::RBrace)?;
                    return Ok(SelectorExpr::MapOrUdt(entries));
                }
                let mut items = vec![first];
                while self.eat_sym(Symbol::Comma) {
                    items.push(self.selector_expr()?);
                }
                self.expect_sym(Symbol::RBrace)?;
                Ok(SelectorExpr::Set(items))
            }
            TokenKind::Word(word) if self.is_sym_at(1, Symbol::LParen) && self.special_selector_function(word) => {
                self.special_selector()
            }
            _ if self.function_call_ahead(0) => {
                let function = self.function_name()?;
                self.expect_sym(Symbol::LParen)?;
                let mut args = Vec::new();
                if !self.is_sym(Symbol::RParen) {
                    loop {
                        args.push(self.selector_expr()?);
                        if !self.eat_sym(Symbol::Comma) {
                            break;
                        }
                    }
                }
                self.expect_sym(Symbol::RParen)?;
                Ok(SelectorExpr::FunctionCall { function, args })
            }
            _ => Ok(SelectorExpr::Column(self.cident()?)),
        }
    }

    /// True for the selector forms with their own syntax: `COUNT(*)`,
    /// `WRITETIME(…)`, `MAXWRITETIME(…)`, `TTL(…)`, `CAST(…)`.
    fn special_selector_function(&self, word: &str) -> bool {
        match word {
            "count" => self.is_sym_at(2, Symbol::Star) && self.is_sym_at(3, Symbol::RParen),
            "writetime" | "maxwritetime" | "ttl" | "cast" => true,
            _ => false,
        }
    }

    /// Parses one of the forms [`Parser::special_selector_function`] accepts.
    fn special_selector(&mut self) -> Result<SelectorExpr, ParseError> {
        let word = self.word_at(0).unwrap_or_default().to_string();
        self.bump();
        self.expect_sym(Symbol::LParen)?;
        let expr = match word.as_str() {
            "count" => {
                self.expect_sym(Symbol::Star)?;
                SelectorExpr::CountRows
            }
            "cast" => {
                let expr = self.selector_expr()?;
                self.expect_kw("as")?;
                let ty = self.native_type()?;
                SelectorExpr::Cast { expr: Box::new(expr), ty }
            }
            _ => {
                let kind = match word.as_str() {
                    "writetime" => CellMetadataKind::WriteTime,
                    "maxwritetime" => CellMetadataKind::MaxWriteTime,
                    _ => CellMetadataKind::Ttl,
                };
                let column = SelectorExpr::Column(self.cident()?);
                let target = self.selector_modifiers(column)?;
                SelectorExpr::CellMetadata { kind, target: Box::new(target) }
            }
        };
        self.expect_sym(Symbol::RParen)?;
        Ok(expr)
    }

    /// True when a selector can start `n` tokens ahead.
    fn can_start_selector(&self, n: usize) -> bool {
        self.can_start_simple_term(n) || self.is_ident_at(n) || self.is_sym_at(n, Symbol::Minus)
    }

    /// True when `AS alias` follows `n` tokens ahead (so `as` is not a column).
    fn alias_ahead(&self, n: usize) -> bool {
        self.is_kw_at(n, "as") && self.is_ident_at(n + 1)
    }

    // -- WHERE ---------------------------------------------------------------

    /// `relation (AND relation)*`
    pub(super) fn where_clause(&mut self) -> Result<Vec<Relation>, ParseError> {
        let mut relations = vec![self.relation()?];
        while self.eat_kw("and") {
            relations.push(self.relation()?);
        }
        Ok(relations)
    }

    fn relation(&mut self) -> Result<Relation, ParseError> {
        if self.is_kw("token") && self.is_sym_at(1, Symbol::LParen) {
            self.bump();
            let columns = self.tuple_of_identifiers()?;
            let op = self.relation_operator()?;
            let rhs = self.term()?;
            return Ok(Relation { lhs: RelationLhs::Token(columns), op, rhs });
        }
        if self.is_sym(Symbol::LParen) {
            let columns = self.tuple_of_identifiers()?;
            let lhs = RelationLhs::MultiColumn(columns);
            if self.eat_kw("in") {
                return Ok(Relation { lhs, op: Operator::In, rhs: self.multi_column_in_values()? });
            }
            if self.is_kw("not") && self.is_kw_at(1, "in") {
                self.bump();
                self.bump();
                return Ok(Relation { lhs, op: Operator::NotIn, rhs: self.multi_column_in_values()? });
            }
            let op = self.relation_operator()?;
            let rhs = self.multi_column_value()?;
            return Ok(Relation { lhs, op, rhs });
        }
        let column = self.cident()?;
        if self.eat_sym(Symbol::LBracket) {
            let key = self.term()?;
            self.expect_sym(Symbol::RBracket)?;
            let op = self.relation_operator()?;
            let rhs = self.term()?;
            return Ok(Relation { lhs: RelationLhs::MapElement { column, key }, op, rhs });
        }
        let lhs = RelationLhs::Column(column);
        if let Some(op) = self.eat_relation_operator() {
            return Ok(Relation { lhs, op, rhs: self.term()? });
        }
        let (op, rhs) = match self.word_at(0) {
            Some("in") => {
                self.bump();
                (Operator::In, self.single_column_in_values()?)
            }
            Some("contains") => {
                self.bump();
                let op = if self.eat_kw("key") { Operator::ContainsKey } else { Operator::Contains };
                (op, self.term()?)
            }
            Some("like") => {
                self.bump();
                (Operator::Like, self.term()?)
            }
            Some("is") => {
                self.bump();
                self.expect_kw("not")?;
                self.expect_kw("null")?;
                (Operator::IsNot, Term::Literal(Literal::Null))
            }
            Some("not") => {
                self.bump();
                if self.eat_kw("in") {
                    (Operator::NotIn, self.single_column_in_values()?)
                } else if self.eat_kw("contains") {
                    let op = if self.eat_kw("key") { Operator::NotContainsKey } else { Operator::NotContains };
                    (op, self.term()?)
                } else {
                    return Err(self.no_viable());
                }
            }
            _ => return Err(self.no_viable()),
        };
        Ok(Relation { lhs, op, rhs })
    }

    /// `= < <= > >= !=`, consumed if present.
    pub(super) fn eat_relation_operator(&mut self) -> Option<Operator> {
        let op = match self.peek().kind {
            TokenKind::Symbol(Symbol::Eq) => Operator::Eq,
            TokenKind::Symbol(Symbol::Lt) => Operator::Lt,
            TokenKind::Symbol(Symbol::Lte) => Operator::Lte,
            TokenKind::Symbol(Symbol::Gt) => Operator::Gt,
            TokenKind::Symbol(Symbol::Gte) => Operator::Gte,
            TokenKind::Symbol(Symbol::Neq) => Operator::Neq,
            _ => return None,
        };
        self.bump();
        Some(op)
    }

    pub(super) fn relation_operator(&mut self) -> Result<Operator, ParseError> {
        self.eat_relation_operator().ok_or_else(|| self.no_viable())
    }

    /// `(a, b, …)`
    fn tuple_of_identifiers(&mut self) -> Result<Vec<String>, ParseError> {
        self.expect_sym(Symbol::LParen)?;
        let mut columns = vec![self.cident()?];
        while self.eat_sym(Symbol::Comma) {
            columns.push(self.cident()?);
        }
        self.expect_sym(Symbol::RParen)?;
        Ok(columns)
    }

    /// `IN (t1, t2, …)` as a list, or `IN ?` as one marker.
    pub(super) fn single_column_in_values(&mut self) -> Result<Term, ParseError> {
        if let Some(marker) = self.marker()? {
            return Ok(Term::Bind(marker));
        }
        if !self.is_sym(Symbol::LParen) {
            return Err(self.no_viable());
        }
        Ok(Term::List(self.parenthesized_terms()?))
    }

    /// `(a, b) IN ((1, 2), (3, 4))`, `IN (?, ?)`, `IN ()` or `IN ?`.
    fn multi_column_in_values(&mut self) -> Result<Term, ParseError> {
        if let Some(marker) = self.marker()? {
            return Ok(Term::Bind(marker));
        }
        self.expect_sym(Symbol::LParen)?;
        let mut items = Vec::new();
        if self.eat_sym(Symbol::RParen) {
            return Ok(Term::List(items));
        }
        loop {
            items.push(self.multi_column_value()?);
            if !self.eat_sym(Symbol::Comma) {
                break;
            }
        }
        self.expect_sym(Symbol::RParen)?;
        Ok(Term::List(items))
    }

    /// A tuple literal or a marker, for multi-column relations.
    fn multi_column_value(&mut self) -> Result<Term, ParseError> {
        if let Some(marker) = self.marker()? {
            return Ok(Term::Bind(marker));
        }
        if !self.is_sym(Symbol::LParen) {
            return Err(self.no_viable());
        }
        self.tuple_literal()
    }
}
