//! Role statements: `CREATE/ALTER/DROP ROLE`, the legacy `CREATE/ALTER/DROP
//! USER` forms, `LIST ROLES` and `LIST USERS`; and the statements that
//! hand out roles and permissions: `GRANT`, `REVOKE` and `LIST <permissions>`.
//!
//! Invariants (Cassandra's grammar, `Parser.g`):
//! - A role name is an identifier (an unquoted one lower-cased), a quoted
//!   name or a string literal (both kept as written); a bind marker is an
//!   error.
//! - A user name is an unquoted identifier or a string literal and always
//!   keeps its case; a quoted name is an error.
//! - `CREATE USER` means `LOGIN = true` and, unless `SUPERUSER` is written,
//!   `SUPERUSER = false`.
//! - `GRANT r1 TO r2` / `REVOKE r1 FROM r2` grant or revoke a role; it is
//!   that form exactly when the word after `GRANT`/`REVOKE` is not reserved
//!   and is followed by `TO`/`FROM` (so `GRANT ALL TO r` grants the role
//!   `all`). Everything else is the permission form, which needs
//!   `ON resource`.
//! - Permissions are `ALL [PERMISSIONS]` or a comma list of permission words
//!   (any case), each optionally followed by `PERMISSION`; a repeated
//!   permission is kept once, at its first place.
//! - A resource's leading word (`ALL`, `ROLE`, `FUNCTION`, `MBEAN`,
//!   `MBEANS`) is unreserved: followed by `.`, by what ends a resource
//!   (`TO`, `FROM`, `OF`, `NORECURSIVE`, `;`) or by the end of input, it is
//!   a table name instead. `KEYSPACE` and `TABLE` are reserved, so never
//!   table names.
//! - A function resource needs its parenthesised argument type list (empty
//!   for a function of no arguments); each type is kept as its CQL text.
//!   MBean names are kept as written (not checked or canonicalised).

use super::{is_reserved, Parser};
use crate::ast::{
    AlterRole, CreateRole, ListPermissions, Permission, PermissionChange, Permissions, Resource, RoleOptions, Statement,
};
use crate::lexer::{Symbol, TokenKind};
use crate::ParseError;

impl Parser<'_> {
    /// After `CREATE`: `ROLE …` or `USER …`.
    pub(super) fn create_role(&mut self) -> Result<Statement, ParseError> {
        let user = self.is_kw("user");
        self.bump();
        let if_not_exists = self.if_not_exists()?;
        if user {
            let name = self.user_name()?;
            let mut options = self.user_options()?;
            options.login = Some(true);
            options.superuser = options.superuser.or(Some(false));
            return Ok(Statement::CreateRole(CreateRole { name, if_not_exists, options }));
        }
        let name = self.role_name()?;
        let options = if self.eat_kw("with") { self.role_options()? } else { RoleOptions::default() };
        Ok(Statement::CreateRole(CreateRole { name, if_not_exists, options }))
    }

    /// After `ALTER`: `ROLE …` or `USER …`.
    pub(super) fn alter_role(&mut self) -> Result<Statement, ParseError> {
        let user = self.is_kw("user");
        self.bump();
        let if_exists = self.if_exists()?;
        if user {
            let name = self.user_name()?;
            let options = self.user_options()?;
            return Ok(Statement::AlterRole(AlterRole { name, if_exists, options }));
        }
        let name = self.role_name()?;
        let options = if self.eat_kw("with") { self.role_options()? } else { RoleOptions::default() };
        Ok(Statement::AlterRole(AlterRole { name, if_exists, options }))
    }

    /// After `DROP`: `ROLE [IF EXISTS] r` or `USER [IF EXISTS] u`.
    pub(super) fn drop_role(&mut self) -> Result<Statement, ParseError> {
        let user = self.is_kw("user");
        self.bump();
        let if_exists = self.if_exists()?;
        let name = if user { self.user_name()? } else { self.role_name()? };
        Ok(Statement::DropRole { name, if_exists })
    }

    /// After `LIST`: `ROLES [OF r] [NORECURSIVE]` or `USERS`.
    pub(super) fn list_roles(&mut self) -> Result<Statement, ParseError> {
        if self.eat_kw("users") {
            return Ok(Statement::ListUsers);
        }
        self.expect_kw("roles")?;
        let of = if self.eat_kw("of") { Some(self.role_name()?) } else { None };
        let recursive = !self.eat_kw("norecursive");
        Ok(Statement::ListRoles { of, recursive })
    }

    /// At `GRANT`: `GRANT role TO grantee` or `GRANT permissions ON resource TO grantee`.
    pub(super) fn grant(&mut self) -> Result<Statement, ParseError> {
        self.bump();
        if self.role_change_ahead("to") {
            let role = self.role_name()?;
            self.expect_kw("to")?;
            let grantee = self.role_name()?;
            return Ok(Statement::GrantRole { role, grantee });
        }
        let (permissions, resource) = self.permissions_on_resource()?;
        self.expect_kw("to")?;
        let grantee = self.role_name()?;
        Ok(Statement::GrantPermissions(PermissionChange { permissions, resource, grantee }))
    }

    /// At `REVOKE`: `REVOKE role FROM revokee` or `REVOKE permissions ON resource FROM revokee`.
    pub(super) fn revoke(&mut self) -> Result<Statement, ParseError> {
        self.bump();
        if self.role_change_ahead("from") {
            let role = self.role_name()?;
            self.expect_kw("from")?;
            let revokee = self.role_name()?;
            return Ok(Statement::RevokeRole { role, revokee });
        }
        let (permissions, resource) = self.permissions_on_resource()?;
        self.expect_kw("from")?;
        let grantee = self.role_name()?;
        Ok(Statement::RevokePermissions(PermissionChange { permissions, resource, grantee }))
    }

    /// After `LIST`: `permissions [ON resource] [OF role] [NORECURSIVE]`.
    pub(super) fn list_permissions(&mut self) -> Result<Statement, ParseError> {
        let permissions = self.permissions()?;
        let resource = if self.eat_kw("on") { Some(self.resource()?) } else { None };
        let of = if self.eat_kw("of") { Some(self.role_name()?) } else { None };
        let recursive = !self.eat_kw("norecursive");
        Ok(Statement::ListPermissions(ListPermissions { permissions, resource, of, recursive }))
    }

    /// True when the role form `role TO|FROM …` is ahead: a token that is
    /// not a reserved word, then `keyword`. (A reserved first word, such as
    /// `SELECT`, goes to the permission form for its "expecting K_ON".)
    fn role_change_ahead(&self, keyword: &str) -> bool {
        let reserved = matches!(&self.peek().kind, TokenKind::Word(word) if is_reserved(word));
        !reserved && self.is_kw_at(1, keyword)
    }

    /// `permissions ON resource`.
    fn permissions_on_resource(&mut self) -> Result<(Permissions, Resource), ParseError> {
        let permissions = self.permissions()?;
        self.expect_kw("on")?;
        let resource = self.resource()?;
        Ok((permissions, resource))
    }

    /// `ALL [PERMISSIONS] | p [PERMISSION] (, p [PERMISSION])*`.
    fn permissions(&mut self) -> Result<Permissions, ParseError> {
        if self.eat_kw("all") {
            self.eat_kw("permissions");
            return Ok(Permissions::All);
        }
        let mut list = Vec::new();
        loop {
            let permission = self.word_at(0).and_then(|word| Permission::from_name(&word.to_ascii_uppercase()));
            let Some(permission) = permission else { return Err(self.no_viable()) };
            self.bump();
            self.eat_kw("permission");
            if !list.contains(&permission) {
                list.push(permission);
            }
            if !self.eat_sym(Symbol::Comma) {
                return Ok(Permissions::Some(list));
            }
        }
    }

    /// True when the token `n` ahead ends a resource (or continues a table
    /// name with `.`), so that an unreserved leading word there is a name.
    fn resource_ends_at(&self, n: usize) -> bool {
        match &self.peek_at(n).kind {
            TokenKind::Eof | TokenKind::Symbol(Symbol::Dot | Symbol::Semicolon) => true,
            TokenKind::Word(word) => matches!(word.as_str(), "to" | "from" | "of" | "norecursive"),
            _ => false,
        }
    }

    /// A data, role, function or MBean resource.
    fn resource(&mut self) -> Result<Resource, ParseError> {
        let leading_keyword = !self.resource_ends_at(1);
        let Some(word) = self.word_at(0).map(str::to_string) else {
            return Ok(Resource::Table(self.table_name()?));
        };
        let resource = match word.as_str() {
            "keyspace" => {
                self.bump();
                Resource::Keyspace(self.keyspace_name()?)
            }
            "table" | "columnfamily" => {
                self.bump();
                Resource::Table(self.table_name()?)
            }
            "all" if leading_keyword => {
                self.bump();
                self.all_resource()?
            }
            "role" if leading_keyword => {
                self.bump();
                Resource::Role(self.role_name()?)
            }
            "function" if leading_keyword => {
                self.bump();
                self.function_resource()?
            }
            "mbean" if leading_keyword => {
                self.bump();
                Resource::Mbean(self.string_literal()?)
            }
            "mbeans" if leading_keyword => {
                self.bump();
                Resource::Mbeans(self.string_literal()?)
            }
            _ => Resource::Table(self.table_name()?),
        };
        Ok(resource)
    }

    /// After `ALL`: `KEYSPACES`, `TABLES IN KEYSPACE ks`, `ROLES`,
    /// `FUNCTIONS [IN KEYSPACE ks]` or `MBEANS`.
    fn all_resource(&mut self) -> Result<Resource, ParseError> {
        let Some(word) = self.word_at(0).map(str::to_string) else { return Err(self.no_viable()) };
        let resource = match word.as_str() {
            "keyspaces" => Resource::AllKeyspaces,
            "roles" => Resource::AllRoles,
            "mbeans" => Resource::AllMbeans,
            "tables" => {
                self.bump();
                self.expect_kw("in")?;
                self.expect_kw("keyspace")?;
                return Ok(Resource::AllTablesIn(self.keyspace_name()?));
            }
            "functions" => {
                self.bump();
                if !self.eat_kw("in") {
                    return Ok(Resource::AllFunctions);
                }
                self.expect_kw("keyspace")?;
                return Ok(Resource::AllFunctionsIn(self.keyspace_name()?));
            }
            _ => return Err(self.no_viable()),
        };
        self.bump();
        Ok(resource)
    }

    /// After `FUNCTION`: `[ks.]f ( [type (, type)*] )`.
    fn function_resource(&mut self) -> Result<Resource, ParseError> {
        let name = self.function_name()?;
        self.expect_sym(Symbol::LParen)?;
        let mut args = Vec::new();
        if !self.eat_sym(Symbol::RParen) {
            loop {
                args.push(self.type_expr()?.to_string());
                if !self.eat_sym(Symbol::Comma) {
                    self.expect_sym(Symbol::RParen)?;
                    break;
                }
            }
        }
        Ok(Resource::Function { name, args })
    }

    /// `roleName`: an identifier (lower-cased unless quoted) or a string.
    fn role_name(&mut self) -> Result<String, ParseError> {
        let name = match &self.peek().kind {
            TokenKind::Word(word) if !is_reserved(word) => word.clone(),
            TokenKind::QuotedName(name) | TokenKind::Str(name) => name.clone(),
            TokenKind::QMark => return Err(self.error_here("Bind variables cannot be used for role names".into())),
            _ => return Err(self.no_viable()),
        };
        self.bump();
        Ok(name)
    }

    /// `username`: an identifier or a string, case kept either way.
    fn user_name(&mut self) -> Result<String, ParseError> {
        let token = self.peek().clone();
        let name = match &token.kind {
            TokenKind::Word(word) if !is_reserved(word) => {
                self.src.get(token.start..token.end).unwrap_or(word.as_str()).to_string()
            }
            TokenKind::Str(name) => name.clone(),
            TokenKind::QuotedName(_) => {
                return Err(self.error_here(
                    "Quoted strings are are not supported for user names and USER is deprecated, please use ROLE"
                        .into(),
                ))
            }
            _ => return Err(self.no_viable()),
        };
        self.bump();
        Ok(name)
    }

    /// A string literal (a password).
    pub(super) fn string_literal(&mut self) -> Result<String, ParseError> {
        match &self.peek().kind {
            TokenKind::Str(s) => {
                let s = s.clone();
                self.bump();
                Ok(s)
            }
            _ => Err(self.mismatch("STRING_LITERAL")),
        }
    }

    fn boolean(&mut self) -> Result<bool, ParseError> {
        match self.peek().kind {
            TokenKind::Boolean(b) => {
                self.bump();
                Ok(b)
            }
            _ => Err(self.mismatch("BOOLEAN")),
        }
    }

    /// `opt (AND opt)*` after `WITH` in CREATE/ALTER ROLE.
    fn role_options(&mut self) -> Result<RoleOptions, ParseError> {
        let mut options = RoleOptions::default();
        loop {
            let Some(word) = self.word_at(0).map(str::to_string) else { return Err(self.no_viable()) };
            match word.as_str() {
                "password" => {
                    self.bump();
                    self.expect_sym(Symbol::Eq)?;
                    let password = self.string_literal()?;
                    self.set_password(&mut options, password, false)?;
                }
                "hashed" => {
                    self.bump();
                    self.expect_kw("password")?;
                    self.expect_sym(Symbol::Eq)?;
                    let hash = self.string_literal()?;
                    self.set_password(&mut options, hash, true)?;
                }
                "login" => {
                    self.bump();
                    self.expect_sym(Symbol::Eq)?;
                    let login = self.boolean()?;
                    self.set_flag(&mut options.login, login, "LOGIN")?;
                }
                "superuser" => {
                    self.bump();
                    self.expect_sym(Symbol::Eq)?;
                    let superuser = self.boolean()?;
                    self.set_flag(&mut options.superuser, superuser, "SUPERUSER")?;
                }
                "options" => {
                    self.bump();
                    self.expect_sym(Symbol::Eq)?;
                    self.term()?;
                    options.unsupported.push("OPTIONS".into());
                }
                "access" => {
                    self.bump();
                    let (direction, what) = if self.eat_kw("to") { ("TO", "datacenters") } else { ("FROM", "cidrs") };
                    if direction == "FROM" {
                        self.expect_kw("from")?;
                    }
                    if !self.eat_kw("all") {
                        self.expect_kw(what)?;
                        self.term()?;
                    } else {
                        self.expect_kw(what)?;
                    }
                    options.unsupported.push(format!("ACCESS {direction} {}", what.to_ascii_uppercase()));
                }
                _ => return Err(self.no_viable()),
            }
            if !self.eat_kw("and") {
                return Ok(options);
            }
        }
    }

    /// `[WITH [HASHED] PASSWORD 'p'] [SUPERUSER | NOSUPERUSER]` of the USER forms.
    fn user_options(&mut self) -> Result<RoleOptions, ParseError> {
        let mut options = RoleOptions::default();
        if self.eat_kw("with") {
            let hashed = self.eat_kw("hashed");
            self.expect_kw("password")?;
            let password = self.string_literal()?;
            self.set_password(&mut options, password, hashed)?;
        }
        if self.eat_kw("superuser") {
            options.superuser = Some(true);
        } else if self.eat_kw("nosuperuser") {
            options.superuser = Some(false);
        }
        Ok(options)
    }

    fn set_password(&self, options: &mut RoleOptions, value: String, hashed: bool) -> Result<(), ParseError> {
        if (hashed && options.password.is_some()) || (!hashed && options.hashed_password.is_some()) {
            return Err(self.error_here("Options 'password' and 'hashed password' are mutually exclusive".into()));
        }
        let (slot, name) = if hashed {
            (&mut options.hashed_password, "HASHED_PASSWORD")
        } else {
            (&mut options.password, "PASSWORD")
        };
        if slot.is_some() {
            return Err(self.error_here(format!("Multiple definition for property {name}")));
        }
        *slot = Some(value);
        Ok(())
    }

    fn set_flag(&self, slot: &mut Option<bool>, value: bool, name: &str) -> Result<(), ParseError> {
        if slot.is_some() {
            return Err(self.error_here(format!("Multiple definition for property {name}")));
        }
        *slot = Some(value);
        Ok(())
    }
}
