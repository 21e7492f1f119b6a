//! Role statements: `CREATE/ALTER/DROP ROLE`, the legacy `CREATE/ALTER/DROP
//! USER` forms, `LIST ROLES` and `LIST USERS`.
//!
//! Invariants (Cassandra's grammar, `Parser.g`):
//! - A role name is an identifier (an unquoted one lower-cased), a quoted
//!   name or a string literal (both kept as written); a bind marker is an
//!   error.
//! - A user name is an unquoted identifier or a string literal and always
//!   keeps its case; a quoted name is an error.
//! - `CREATE USER` means `LOGIN = true` and, unless `SUPERUSER` is written,
//!   `SUPERUSER = false`.

use super::{is_reserved, Parser};
use crate::ast::{AlterRole, CreateRole, RoleOptions, Statement};
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
    fn string_literal(&mut self) -> Result<String, ParseError> {
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
