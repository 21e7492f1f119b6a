//! Schema statements: keyspaces, tables and types (CREATE / ALTER / DROP),
//! their `WITH` options, and the schema statements Shoal only recognises.

use super::Parser;
use crate::ast::{
    AlterKeyspace, AlterTable, AlterTableAction, AlterType, AlterTypeAction, ColumnDef, CreateIndex, CreateKeyspace,
    CreateTable, CreateType, Literal, OptionValue, Order, PrimaryKey, Statement, Term,
};
use crate::lexer::{Symbol, TokenKind};
use crate::ParseError;

impl Parser<'_> {
    /// `CREATE …`
    pub(super) fn create(&mut self) -> Result<Statement, ParseError> {
        self.expect_kw("create")?;
        let kind = match self.word_at(0) {
            Some("keyspace" | "schema") => {
                self.bump();
                let if_not_exists = self.if_not_exists()?;
                let keyspace = self.keyspace_name()?;
                self.expect_kw("with")?;
                let options = self.properties()?;
                return Ok(Statement::CreateKeyspace(CreateKeyspace { keyspace, if_not_exists, options }));
            }
            Some("table" | "columnfamily") => {
                self.bump();
                return Ok(Statement::CreateTable(Box::new(self.create_table()?)));
            }
            Some("type") => {
                self.bump();
                return Ok(Statement::CreateType(self.create_type()?));
            }
            Some("index" | "custom") => return self.create_index(),
            Some("materialized") => "CREATE MATERIALIZED VIEW",
            Some("function") => "CREATE FUNCTION",
            Some("aggregate") => "CREATE AGGREGATE",
            Some("or") => match self.word_at(2) {
                Some("function") if self.is_kw_at(1, "replace") => "CREATE FUNCTION",
                Some("aggregate") if self.is_kw_at(1, "replace") => "CREATE AGGREGATE",
                _ => return Err(self.no_viable()),
            },
            Some("role" | "user") => return self.create_role(),
            Some("trigger") => "CREATE TRIGGER",
            _ => return Err(self.no_viable()),
        };
        Ok(self.unsupported(kind))
    }

    /// `ALTER …`
    pub(super) fn alter(&mut self) -> Result<Statement, ParseError> {
        self.expect_kw("alter")?;
        let kind = match self.word_at(0) {
            Some("keyspace" | "schema") => {
                self.bump();
                let if_exists = self.if_exists()?;
                let keyspace = self.keyspace_name()?;
                self.expect_kw("with")?;
                let options = self.properties()?;
                return Ok(Statement::AlterKeyspace(AlterKeyspace { keyspace, if_exists, options }));
            }
            Some("table" | "columnfamily") => {
                self.bump();
                return Ok(Statement::AlterTable(Box::new(self.alter_table()?)));
            }
            Some("type") => {
                self.bump();
                return Ok(Statement::AlterType(self.alter_type()?));
            }
            Some("materialized") => "ALTER MATERIALIZED VIEW",
            Some("role" | "user") => return self.alter_role(),
            _ => return Err(self.no_viable()),
        };
        Ok(self.unsupported(kind))
    }

    /// `DROP …`
    pub(super) fn drop_statement(&mut self) -> Result<Statement, ParseError> {
        self.expect_kw("drop")?;
        let kind = match self.word_at(0) {
            Some("keyspace" | "schema") => {
                self.bump();
                let if_exists = self.if_exists()?;
                let keyspace = self.keyspace_name()?;
                return Ok(Statement::DropKeyspace { keyspace, if_exists });
            }
            Some("table" | "columnfamily") => {
                self.bump();
                let if_exists = self.if_exists()?;
                let table = self.table_name()?;
                return Ok(Statement::DropTable { table, if_exists });
            }
            Some("type") => {
                self.bump();
                let if_exists = self.if_exists()?;
                let name = self.user_type()?;
                return Ok(Statement::DropType { name, if_exists });
            }
            Some("index") => {
                self.bump();
                let if_exists = self.if_exists()?;
                let name = self.qualified_name("index")?;
                return Ok(Statement::DropIndex { name, if_exists });
            }
            Some("materialized") => "DROP MATERIALIZED VIEW",
            Some("function") => "DROP FUNCTION",
            Some("aggregate") => "DROP AGGREGATE",
            Some("role" | "user") => return self.drop_role(),
            Some("trigger") => "DROP TRIGGER",
            Some("identity") => "DROP IDENTITY",
            _ => return Err(self.no_viable()),
        };
        Ok(self.unsupported(kind))
    }

    /// `[CUSTOM] INDEX [IF NOT EXISTS] [name] ON [ks.]t (target) [USING 'class' [WITH OPTIONS = {…}]]`
    fn create_index(&mut self) -> Result<Statement, ParseError> {
        let custom = self.eat_kw("custom");
        self.expect_kw("index")?;
        let if_not_exists = self.if_not_exists()?;
        let name = if self.is_kw("on") && !self.is_kw_at(1, "on") { None } else { Some(self.object_name("index")?) };
        self.expect_kw("on")?;
        let table = self.table_name()?;
        self.expect_sym(Symbol::LParen)?;
        let function = match self.word_at(0) {
            Some(f @ ("keys" | "values" | "entries" | "full")) if self.is_sym_at(1, Symbol::LParen) => {
                let f = f.to_string();
                self.bump();
                self.bump();
                Some(f)
            }
            _ => None,
        };
        let column = self.cident()?;
        if function.is_some() {
            self.expect_sym(Symbol::RParen)?;
        }
        self.expect_sym(Symbol::RParen)?;
        let mut using = None;
        let mut options = Vec::new();
        if custom || self.is_kw("using") {
            self.expect_kw("using")?;
            using = Some(self.string_literal()?);
            if self.eat_kw("with") {
                options = self.properties()?;
            }
        }
        Ok(Statement::CreateIndex(Box::new(CreateIndex {
            name,
            table,
            if_not_exists,
            column,
            function,
            using,
            options,
        })))
    }

    // -- options -------------------------------------------------------------

    /// `name = value (AND name = value)*`; a repeated name is an error.
    fn properties(&mut self) -> Result<Vec<(String, OptionValue)>, ParseError> {
        let mut options = Vec::new();
        loop {
            self.property(&mut options)?;
            if !self.eat_kw("and") {
                return Ok(options);
            }
        }
    }

    fn property(&mut self, options: &mut Vec<(String, OptionValue)>) -> Result<(), ParseError> {
        let name_token = self.peek().clone();
        let name = self.ident()?;
        self.expect_sym(Symbol::Eq)?;
        let value = self.option_value()?;
        if options.iter().any(|(existing, _)| *existing == name) {
            return Err(self.error_at(&name_token, format!("Multiple definition for property '{name}'")));
        }
        options.push((name, value));
        Ok(())
    }

    /// A constant, a bare word, or a `{…}` map of constants.
    fn option_value(&mut self) -> Result<OptionValue, ParseError> {
        if self.is_sym(Symbol::LBrace) {
            return self.option_map();
        }
        if let Some(literal) = self.constant()? {
            return Ok(OptionValue::Constant(literal));
        }
        if let TokenKind::Word(_) = &self.peek().kind {
            if self.is_ident_at(0) {
                let token = self.peek();
                let text = self.src.get(token.start..token.end).unwrap_or_default().to_string();
                self.bump();
                return Ok(OptionValue::Identifier(text));
            }
        }
        Err(self.no_viable())
    }

    /// `{k: v, …}` whose keys and values must be constants, kept as raw text.
    fn option_map(&mut self) -> Result<OptionValue, ParseError> {
        self.expect_sym(Symbol::LBrace)?;
        let mut entries: Vec<(String, String)> = Vec::new();
        if self.eat_sym(Symbol::RBrace) {
            return Ok(OptionValue::Map(entries));
        }
        loop {
            let key_token = self.peek().clone();
            let key = self.term()?;
            self.expect_sym(Symbol::Colon)?;
            let value_token = self.peek().clone();
            let value = self.term()?;
            let Some(key_text) = constant_text(&key) else {
                return Err(self.error_at(
                    &key_token,
                    format!("Invalid property name: {}{}", self.token_display(&key_token), bind_note(&key)),
                ));
            };
            let Some(value_text) = constant_text(&value) else {
                return Err(self.error_at(
                    &value_token,
                    format!(
                        "Invalid property value: {} for property: {key_text}{}",
                        self.token_display(&value_token),
                        bind_note(&value)
                    ),
                ));
            };
            if entries.iter().any(|(existing, _)| *existing == key_text) {
                return Err(self.error_at(&key_token, format!("Multiple definition for property {key_text}")));
            }
            entries.push((key_text, value_text));
            if !self.eat_sym(Symbol::Comma) {
                break;
            }
        }
        self.expect_sym(Symbol::RBrace)?;
        Ok(OptionValue::Map(entries))
    }

    // -- tables --------------------------------------------------------------

    fn create_table(&mut self) -> Result<CreateTable, ParseError> {
        let if_not_exists = self.if_not_exists()?;
        let table = self.table_name()?;
        let mut definition = CreateTable {
            table,
            if_not_exists,
            columns: Vec::new(),
            primary_keys: Vec::new(),
            clustering_order: Vec::new(),
            compact_storage: false,
            options: Vec::new(),
        };
        self.expect_sym(Symbol::LParen)?;
        self.table_element(&mut definition)?;
        // Cassandra tolerates empty elements: `(a int, , b int,)`.
        while self.eat_sym(Symbol::Comma) {
            if !self.is_sym(Symbol::Comma) && !self.is_sym(Symbol::RParen) {
                self.table_element(&mut definition)?;
            }
        }
        self.expect_sym(Symbol::RParen)?;
        if self.eat_kw("with") {
            loop {
                self.table_property(&mut definition)?;
                if !self.eat_kw("and") {
                    break;
                }
            }
        }
        Ok(definition)
    }

    /// A column definition or a `PRIMARY KEY (…)` clause.
    fn table_element(&mut self, definition: &mut CreateTable) -> Result<(), ParseError> {
        if self.eat_kw("primary") {
            self.expect_kw("key")?;
            self.expect_sym(Symbol::LParen)?;
            let partition_key = if self.eat_sym(Symbol::LParen) {
                let mut columns = vec![self.ident()?];
                while self.eat_sym(Symbol::Comma) {
                    columns.push(self.ident()?);
                }
                self.expect_sym(Symbol::RParen)?;
                columns
            } else {
                vec![self.ident()?]
            };
            let mut clustering = Vec::new();
            while self.eat_sym(Symbol::Comma) {
                clustering.push(self.ident()?);
            }
            self.expect_sym(Symbol::RParen)?;
            definition.primary_keys.push(PrimaryKey { partition_key, clustering });
            return Ok(());
        }
        let column = self.column_def()?;
        if self.eat_kw("primary") {
            self.expect_kw("key")?;
            definition
                .primary_keys
                .push(PrimaryKey { partition_key: vec![column.name.clone()], clustering: Vec::new() });
        }
        definition.columns.push(column);
        Ok(())
    }

    /// `name type [STATIC]`
    fn column_def(&mut self) -> Result<ColumnDef, ParseError> {
        let name = self.ident()?;
        let ty = self.type_expr()?;
        let is_static = self.eat_kw("static");
        Ok(ColumnDef { name, ty, is_static })
    }

    fn table_property(&mut self, definition: &mut CreateTable) -> Result<(), ParseError> {
        if self.is_kw("compact") && self.is_kw_at(1, "storage") {
            self.bump();
            self.bump();
            definition.compact_storage = true;
            return Ok(());
        }
        if self.is_kw("clustering") && self.is_kw_at(1, "order") {
            self.bump();
            self.bump();
            self.expect_kw("by")?;
            self.expect_sym(Symbol::LParen)?;
            loop {
                let column = self.ident()?;
                let order = if self.eat_kw("asc") {
                    Order::Asc
                } else if self.eat_kw("desc") {
                    Order::Desc
                } else {
                    return Err(self.no_viable());
                };
                definition.clustering_order.push((column, order));
                if !self.eat_sym(Symbol::Comma) {
                    break;
                }
            }
            self.expect_sym(Symbol::RParen)?;
            return Ok(());
        }
        self.property(&mut definition.options)
    }

    fn alter_table(&mut self) -> Result<AlterTable, ParseError> {
        let if_exists = self.if_exists()?;
        let table = self.table_name()?;
        let action = match self.word_at(0) {
            Some("alter") => {
                self.bump();
                let column = self.cident()?;
                self.expect_kw("type")?;
                AlterTableAction::AlterColumnType { column, ty: self.type_expr()? }
            }
            Some("add") => {
                self.bump();
                let if_not_exists = self.if_not_exists()?;
                let mut columns = Vec::new();
                if self.eat_sym(Symbol::LParen) {
                    columns.push(self.column_def()?);
                    while self.eat_sym(Symbol::Comma) {
                        columns.push(self.column_def()?);
                    }
                    self.expect_sym(Symbol::RParen)?;
                } else {
                    columns.push(self.column_def()?);
                }
                AlterTableAction::Add { if_not_exists, columns }
            }
            Some("drop") if self.is_kw_at(1, "compact") && self.is_kw_at(2, "storage") => {
                self.bump();
                self.bump();
                self.bump();
                AlterTableAction::DropCompactStorage
            }
            Some("drop") => {
                self.bump();
                let if_exists = self.if_exists()?;
                let mut columns = Vec::new();
                if self.eat_sym(Symbol::LParen) {
                    columns.push(self.ident()?);
                    while self.eat_sym(Symbol::Comma) {
                        columns.push(self.ident()?);
                    }
                    self.expect_sym(Symbol::RParen)?;
                } else {
                    columns.push(self.ident()?);
                }
                let mut timestamp = None;
                if self.eat_kw("using") {
                    self.expect_kw("timestamp")?;
                    let value = match &self.peek().kind {
                        TokenKind::Integer(digits) => digits.parse::<i64>().ok(),
                        _ => return Err(self.mismatch("INTEGER")),
                    };
                    let Some(value) = value else {
                        return Err(self.error_here(format!("Invalid timestamp {}", self.token_display(self.peek()))));
                    };
                    self.bump();
                    timestamp = Some(value);
                }
                AlterTableAction::Drop { if_exists, columns, timestamp }
            }
            Some("rename") => {
                self.bump();
                let if_exists = self.if_exists()?;
                AlterTableAction::Rename { if_exists, renames: self.renames()? }
            }
            Some("with") => {
                self.bump();
                AlterTableAction::Options(self.properties()?)
            }
            _ => return Err(self.no_viable()),
        };
        Ok(AlterTable { table, if_exists, action })
    }

    /// `a TO b (AND c TO d)*`
    fn renames(&mut self) -> Result<Vec<(String, String)>, ParseError> {
        let mut renames = Vec::new();
        loop {
            let from = self.ident()?;
            self.expect_kw("to")?;
            let to = self.ident()?;
            renames.push((from, to));
            if !self.eat_kw("and") {
                return Ok(renames);
            }
        }
    }

    // -- types ---------------------------------------------------------------

    fn create_type(&mut self) -> Result<CreateType, ParseError> {
        let if_not_exists = self.if_not_exists()?;
        let name = self.user_type()?;
        self.expect_sym(Symbol::LParen)?;
        let mut fields = vec![self.type_field()?];
        while self.eat_sym(Symbol::Comma) {
            if !self.is_sym(Symbol::Comma) && !self.is_sym(Symbol::RParen) {
                fields.push(self.type_field()?);
            }
        }
        self.expect_sym(Symbol::RParen)?;
        Ok(CreateType { name, if_not_exists, fields })
    }

    fn type_field(&mut self) -> Result<(String, crate::ast::TypeExpr), ParseError> {
        let field = self.ident()?;
        let ty = self.type_expr()?;
        Ok((field, ty))
    }

    fn alter_type(&mut self) -> Result<AlterType, ParseError> {
        let if_exists = self.if_exists()?;
        let name = self.user_type()?;
        let action = match self.word_at(0) {
            Some("alter") => {
                self.bump();
                let field = self.ident()?;
                self.expect_kw("type")?;
                AlterTypeAction::AlterFieldType { field, ty: self.type_expr()? }
            }
            Some("add") => {
                self.bump();
                let if_not_exists = self.if_not_exists()?;
                let (field, ty) = self.type_field()?;
                AlterTypeAction::Add { if_not_exists, field, ty }
            }
            Some("rename") => {
                self.bump();
                let if_exists = self.if_exists()?;
                AlterTypeAction::Rename { if_exists, renames: self.renames()? }
            }
            _ => return Err(self.no_viable()),
        };
        Ok(AlterType { name, if_exists, action })
    }
}

/// The raw text of a constant term, as Cassandra's `getRawText()`.
fn constant_text(term: &Term) -> Option<String> {
    match term {
        Term::Literal(Literal::Null) => None,
        Term::Literal(literal) => Some(literal.raw_text()),
        _ => None,
    }
}

fn bind_note(term: &Term) -> &'static str {
    if matches!(term, Term::Bind(_)) {
        " (bind variables are not supported in DDL queries)"
    } else {
        ""
    }
}
