//! DESCRIBE / DESC, as cqlsh 6.x sends it to Cassandra 4+ servers.
//!
//! The list forms (`KEYSPACES`, `TABLES`, `TYPES`, …) win over a generic
//! name, as in Cassandra's grammar; `TYPE`, `FUNCTION` and `AGGREGATE` are
//! unreserved, so they only introduce a name when one follows them.

use super::Parser;
use crate::ast::{Describe, DescribeTarget, QualifiedName, Statement};
use crate::lexer::Symbol;
use crate::ParseError;

impl Parser<'_> {
    pub(super) fn describe(&mut self) -> Result<Statement, ParseError> {
        // The caller saw DESCRIBE or DESC.
        self.bump();
        let target = match self.word_at(0) {
            Some("cluster") => {
                self.bump();
                DescribeTarget::Cluster
            }
            Some("full") => {
                self.bump();
                self.expect_kw("schema")?;
                DescribeTarget::Schema { full: true }
            }
            Some("schema") => {
                self.bump();
                DescribeTarget::Schema { full: false }
            }
            Some("keyspaces") => {
                self.bump();
                DescribeTarget::Keyspaces
            }
            Some("only") if self.is_kw_at(1, "keyspace") => {
                self.bump();
                self.bump();
                DescribeTarget::Keyspace { keyspace: self.optional_keyspace()?, only: true }
            }
            Some("keyspace") => {
                self.bump();
                DescribeTarget::Keyspace { keyspace: self.optional_keyspace()?, only: false }
            }
            Some("tables") => {
                self.bump();
                DescribeTarget::Tables
            }
            Some("table" | "columnfamily") => {
                self.bump();
                DescribeTarget::Table(self.table_name()?)
            }
            Some("index") => {
                self.bump();
                DescribeTarget::Index(self.qualified_name("index")?)
            }
            Some("materialized") => {
                self.bump();
                self.expect_kw("view")?;
                DescribeTarget::MaterializedView(self.table_name()?)
            }
            Some("types") => {
                self.bump();
                DescribeTarget::Types
            }
            Some("type") if self.is_ident_at(1) => {
                self.bump();
                DescribeTarget::Type(self.user_type()?)
            }
            Some("functions") => {
                self.bump();
                DescribeTarget::Functions
            }
            Some("function") if self.is_ident_at(1) => {
                self.bump();
                DescribeTarget::Function(self.qualified_name("function")?)
            }
            Some("aggregates") => {
                self.bump();
                DescribeTarget::Aggregates
            }
            Some("aggregate") if self.is_ident_at(1) => {
                self.bump();
                DescribeTarget::Aggregate(self.qualified_name("aggregate")?)
            }
            _ => DescribeTarget::Generic(self.generic_name()?),
        };
        let with_internals = if self.eat_kw("with") {
            self.expect_kw("internals")?;
            true
        } else {
            false
        };
        Ok(Statement::Describe(Describe { target, with_internals }))
    }

    /// The keyspace after `DESCRIBE [ONLY] KEYSPACE`, when one is written.
    fn optional_keyspace(&mut self) -> Result<Option<String>, ParseError> {
        if self.is_ident_at(0) {
            return Ok(Some(self.keyspace_name()?));
        }
        Ok(None)
    }

    /// `[ks.]name` of any schema object.
    fn generic_name(&mut self) -> Result<QualifiedName, ParseError> {
        let first = self.ident()?;
        if self.eat_sym(Symbol::Dot) {
            let name = self.ident()?;
            return Ok(QualifiedName { keyspace: Some(first), name });
        }
        Ok(QualifiedName { keyspace: None, name: first })
    }
}
