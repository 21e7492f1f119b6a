//! INSERT, UPDATE, DELETE and BATCH, with their USING, SET and IF clauses.

use super::Parser;
use crate::ast::{
    Assignment, AssignmentOp, Batch, BatchKind, BatchStatement, Condition, ConditionLhs, Delete, DeleteTarget,
    IfClause, Insert, InsertValues, Literal, Operator, Term, Update, Using,
};
use crate::lexer::{Symbol, TokenKind};
use crate::ParseError;

impl Parser<'_> {
    pub(super) fn insert(&mut self) -> Result<Insert, ParseError> {
        self.expect_kw("insert")?;
        self.expect_kw("into")?;
        let table = self.table_name()?;
        let values = if self.eat_kw("json") {
            let value = match &self.peek().kind {
                TokenKind::Str(doc) => {
                    let doc = doc.clone();
                    self.bump();
                    Term::Literal(Literal::String(doc))
                }
                _ => match self.marker()? {
                    Some(marker) => Term::Bind(marker),
                    None => return Err(self.no_viable()),
                },
            };
            let mut default_unset = false;
            if self.eat_kw("default") {
                if self.eat_kw("unset") {
                    default_unset = true;
                } else if !self.eat_kw("null") {
                    return Err(self.no_viable());
                }
            }
            InsertValues::Json { value, default_unset }
        } else {
            self.expect_sym(Symbol::LParen)?;
            let mut columns = vec![self.cident()?];
            while self.eat_sym(Symbol::Comma) {
                columns.push(self.cident()?);
            }
            self.expect_sym(Symbol::RParen)?;
            self.expect_kw("values")?;
            self.expect_sym(Symbol::LParen)?;
            let mut values = vec![self.term()?];
            while self.eat_sym(Symbol::Comma) {
                values.push(self.term()?);
            }
            self.expect_sym(Symbol::RParen)?;
            InsertValues::Columns { columns, values }
        };
        // Cassandra wants IF NOT EXISTS before USING; either order is taken.
        let mut if_not_exists = self.if_not_exists()?;
        let mut using = Using::default();
        if self.is_kw("using") {
            self.using_clause(&mut using)?;
            if !if_not_exists {
                if_not_exists = self.if_not_exists()?;
            }
        }
        Ok(Insert { table, values, if_not_exists, using })
    }

    /// `USING TTL x AND TIMESTAMP y` (either, in any order).
    fn using_clause(&mut self, using: &mut Using) -> Result<(), ParseError> {
        self.expect_kw("using")?;
        loop {
            if self.eat_kw("ttl") {
                using.ttl = Some(self.int_value()?);
            } else if self.eat_kw("timestamp") {
                using.timestamp = Some(self.int_value()?);
            } else {
                return Err(self.no_viable());
            }
            if !self.eat_kw("and") {
                return Ok(());
            }
        }
    }

    pub(super) fn update(&mut self) -> Result<Update, ParseError> {
        self.expect_kw("update")?;
        let table = self.table_name()?;
        let mut using = Using::default();
        if self.is_kw("using") {
            self.using_clause(&mut using)?;
        }
        self.expect_kw("set")?;
        let mut assignments = vec![self.assignment()?];
        while self.eat_sym(Symbol::Comma) {
            assignments.push(self.assignment()?);
        }
        self.expect_kw("where")?;
        let where_clause = self.where_clause()?;
        let if_clause = self.if_clause()?;
        Ok(Update { table, using, assignments, where_clause, if_clause })
    }

    fn assignment(&mut self) -> Result<Assignment, ParseError> {
        let column = self.cident()?;
        let op = match self.peek().kind {
            TokenKind::Symbol(Symbol::Eq) => {
                self.bump();
                self.assignment_value(&column)?
            }
            TokenKind::Symbol(Symbol::PlusEq) => {
                self.bump();
                AssignmentOp::Add(self.term()?)
            }
            TokenKind::Symbol(Symbol::MinusEq) => {
                self.bump();
                AssignmentOp::Subtract(self.term()?)
            }
            TokenKind::Symbol(Symbol::LBracket) => {
                self.bump();
                let key = self.term()?;
                self.expect_sym(Symbol::RBracket)?;
                self.expect_sym(Symbol::Eq)?;
                AssignmentOp::SetElement { key, value: self.term()? }
            }
            TokenKind::Symbol(Symbol::Dot) => {
                self.bump();
                let field = self.ident()?;
                self.expect_sym(Symbol::Eq)?;
                AssignmentOp::SetField { field, value: self.term()? }
            }
            _ => return Err(self.no_viable()),
        };
        Ok(Assignment { column, op })
    }

    /// What follows `c =`: `term`, `c + term`, `c - term` or `term + c`.
    fn assignment_value(&mut self, column: &str) -> Result<AssignmentOp, ParseError> {
        // A bare identifier is never a term, so one here is the column itself.
        if (self.is_ident_at(0) && !self.can_start_simple_term(0)) || self.is_empty_quoted_name() {
            let other_token = self.peek().clone();
            let other = self.cident()?;
            let op = if self.eat_sym(Symbol::Plus) {
                AssignmentOp::Add(self.term()?)
            } else if self.eat_sym(Symbol::Minus) {
                AssignmentOp::Subtract(self.term()?)
            } else if let Some(positive) = self.negative_number_as_positive() {
                // `c = c -1` lexes as `c`, `=`, `c`, `-1`.
                self.bump();
                AssignmentOp::Subtract(self.term_addition_from(Term::Literal(positive))?)
            } else {
                return Err(self.no_viable());
            };
            if other != column {
                let sign = if matches!(op, AssignmentOp::Add(_)) { '+' } else { '-' };
                return Err(self.error_at(
                    &other_token,
                    format!("Only expressions of the form X = X {sign}<value> are supported."),
                ));
            }
            return Ok(op);
        }
        let value = self.term()?;
        if self.is_sym(Symbol::Plus) && (self.is_ident_at(1) || self.is_empty_quoted_name_at(1)) {
            self.bump();
            let other_token = self.peek().clone();
            let other = self.cident()?;
            if other != column {
                return Err(self.error_at(
                    &other_token,
                    "Only expressions of the form X = <value> + X are supported.".to_string(),
                ));
            }
            return Ok(AssignmentOp::Prepend(value));
        }
        Ok(AssignmentOp::Set(value))
    }

    fn is_empty_quoted_name(&self) -> bool {
        self.is_empty_quoted_name_at(0)
    }

    fn is_empty_quoted_name_at(&self, n: usize) -> bool {
        matches!(&self.peek_at(n).kind, TokenKind::QuotedName(name) if name.is_empty())
    }

    /// `IF EXISTS` or `IF condition (AND condition)*`, if present.
    fn if_clause(&mut self) -> Result<Option<IfClause>, ParseError> {
        if !self.eat_kw("if") {
            return Ok(None);
        }
        // `exists` is also a valid column name: `IF exists = true`.
        if self.is_kw("exists") && !self.condition_continues_at(1) {
            self.bump();
            return Ok(Some(IfClause::Exists));
        }
        let mut conditions = vec![self.condition()?];
        while self.eat_kw("and") {
            conditions.push(self.condition()?);
        }
        Ok(Some(IfClause::Conditions(conditions)))
    }

    /// True when the token `n` ahead continues a condition after its column.
    fn condition_continues_at(&self, n: usize) -> bool {
        match &self.peek_at(n).kind {
            TokenKind::Symbol(
                Symbol::Eq
                | Symbol::Lt
                | Symbol::Lte
                | Symbol::Gt
                | Symbol::Gte
                | Symbol::Neq
                | Symbol::LBracket
                | Symbol::Dot,
            ) => true,
            TokenKind::Word(word) => matches!(word.as_str(), "in" | "contains" | "not"),
            _ => false,
        }
    }

    fn condition(&mut self) -> Result<Condition, ParseError> {
        let column = self.cident()?;
        let lhs = if self.eat_sym(Symbol::LBracket) {
            let key = self.term()?;
            self.expect_sym(Symbol::RBracket)?;
            ConditionLhs::Element { column, key }
        } else if self.eat_sym(Symbol::Dot) {
            let field = self.ident()?;
            ConditionLhs::Field { column, field }
        } else {
            ConditionLhs::Column(column)
        };
        if let Some(op) = self.eat_relation_operator() {
            return Ok(Condition { lhs, op, rhs: self.term()? });
        }
        if self.eat_kw("in") {
            return Ok(Condition { lhs, op: Operator::In, rhs: self.single_column_in_values()? });
        }
        if matches!(lhs, ConditionLhs::Column(_)) {
            if self.eat_kw("contains") {
                let op = if self.eat_kw("key") { Operator::ContainsKey } else { Operator::Contains };
                return Ok(Condition { lhs, op, rhs: self.term()? });
            }
            if self.is_kw("not") && self.is_kw_at(1, "in") {
                self.bump();
                self.bump();
                return Ok(Condition { lhs, op: Operator::NotIn, rhs: self.single_column_in_values()? });
            }
        }
        Err(self.no_viable())
    }

    pub(super) fn delete(&mut self) -> Result<Delete, ParseError> {
        self.expect_kw("delete")?;
        let mut targets = Vec::new();
        if !self.is_kw("from") {
            loop {
                targets.push(self.delete_target()?);
                if !self.eat_sym(Symbol::Comma) {
                    break;
                }
            }
        }
        self.expect_kw("from")?;
        let table = self.table_name()?;
        let mut using = Using::default();
        if self.eat_kw("using") {
            self.expect_kw("timestamp")?;
            using.timestamp = Some(self.int_value()?);
        }
        self.expect_kw("where")?;
        let where_clause = self.where_clause()?;
        let if_clause = self.if_clause()?;
        Ok(Delete { table, targets, using, where_clause, if_clause })
    }

    fn delete_target(&mut self) -> Result<DeleteTarget, ParseError> {
        let column = self.cident()?;
        if self.eat_sym(Symbol::LBracket) {
            let key = self.term()?;
            self.expect_sym(Symbol::RBracket)?;
            return Ok(DeleteTarget::Element { column, key });
        }
        if self.eat_sym(Symbol::Dot) {
            let field = self.ident()?;
            return Ok(DeleteTarget::Field { column, field });
        }
        Ok(DeleteTarget::Column(column))
    }

    pub(super) fn batch(&mut self) -> Result<Batch, ParseError> {
        self.expect_kw("begin")?;
        let kind = if self.eat_kw("unlogged") {
            BatchKind::Unlogged
        } else if self.eat_kw("counter") {
            BatchKind::Counter
        } else {
            BatchKind::Logged
        };
        self.expect_kw("batch")?;
        let mut using = Using::default();
        if self.is_kw("using") {
            self.using_clause(&mut using)?;
        }
        let mut statements = Vec::new();
        loop {
            let statement = match self.word_at(0) {
                Some("insert") => BatchStatement::Insert(self.insert()?),
                Some("update") => BatchStatement::Update(self.update()?),
                Some("delete") => BatchStatement::Delete(self.delete()?),
                _ => break,
            };
            statements.push(statement);
            self.eat_sym(Symbol::Semicolon);
        }
        self.expect_kw("apply")?;
        self.expect_kw("batch")?;
        Ok(Batch { kind, using, statements })
    }
}
