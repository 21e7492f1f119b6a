//! Permissions (Cassandra's `CassandraAuthorizer`): the resources
//! permissions are granted on, GRANT / REVOKE / LIST PERMISSIONS, the check
//! every statement passes before it runs, the grants a creator receives and
//! the grants removed with what they were on.
//!
//! Invariants:
//! - Grants live in `system_auth.role_permissions` (role, resource's
//!   internal name → set of permission names) with the reverse index
//!   `system_auth.resource_role_permissons_index` (sic, Cassandra's name),
//!   replicated like any keyspace and cached per role for
//!   `permissions_validity` (`auth.rs`).
//! - A permission is held on a resource when the role, or a role granted to
//!   it, holds it on the resource or on one of its parents
//!   (`<table ks.t>` → `<all tables in ks>` → `<keyspace ks>` →
//!   `<all keyspaces>`); superusers hold every applicable permission. For
//!   tables of system keyspaces the chain stops before `<all keyspaces>`, so
//!   `GRANT SELECT ON ALL KEYSPACES` does not open `system_auth`.
//! - The tables drivers read on connect (`system.local`, `system.peers*`,
//!   `system_schema.*`, `system_virtual_schema.*`) are readable by every
//!   logged-in role.
//! - With `AllowAllAuthorizer` nothing is checked and GRANT, REVOKE and
//!   LIST PERMISSIONS are refused with Cassandra's messages.

use std::collections::{BTreeMap, BTreeSet};

use cql::ast::{self, Permission, Permissions, Resource, Statement};
use cql_protocol::{ResultBody, RowsMetadata, RowsWriter};
use types::{Consistency, CqlType, Value};

use crate::auth::{cell_text, logged_in, spec, text_set, Auth, AuthTables, WRITE_CL};
use crate::error::QueryError;
use crate::schema::Schema;

/// A role's grants: resource internal name → permissions.
pub type Grants = BTreeMap<String, BTreeSet<Permission>>;

/// cassandra.yaml's `authorizer`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Authorizer {
    /// Everything allowed (the default).
    #[default]
    AllowAll,
    /// Permissions granted to roles, checked on every statement.
    Cassandra,
}

impl Authorizer {
    /// Parses a yaml value: a short or fully qualified class name.
    pub fn parse(name: &str) -> Option<Authorizer> {
        match name.strip_prefix("org.apache.cassandra.auth.").unwrap_or(name) {
            "AllowAllAuthorizer" => Some(Authorizer::AllowAll),
            "CassandraAuthorizer" => Some(Authorizer::Cassandra),
            _ => None,
        }
    }

    pub fn enabled(self) -> bool {
        self == Authorizer::Cassandra
    }
}

/// A resource with its keyspace resolved (Cassandra's `IResource`).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum AuthResource {
    AllKeyspaces,
    Keyspace(String),
    AllTablesIn(String),
    Table(String, String),
    AllRoles,
    Role(String),
    AllFunctions,
    AllFunctionsIn(String),
    Function { keyspace: String, name: String, args: Vec<String> },
    AllMbeans,
    Mbean(String),
}

use Permission as P;

const DATA: &[Permission] =
    &[P::Create, P::Alter, P::Drop, P::Select, P::Modify, P::Authorize, P::Unmask, P::SelectMasked];
const TABLE: &[Permission] = &[P::Alter, P::Drop, P::Select, P::Modify, P::Authorize, P::Unmask, P::SelectMasked];
const ALL_ROLES: &[Permission] = &[P::Create, P::Alter, P::Drop, P::Authorize, P::Describe];
const ROLE: &[Permission] = &[P::Alter, P::Drop, P::Authorize, P::Describe];
const FUNCTIONS: &[Permission] = &[P::Create, P::Alter, P::Drop, P::Authorize, P::Execute];
const FUNCTION: &[Permission] = &[P::Alter, P::Drop, P::Authorize, P::Execute];
const MBEANS: &[Permission] = &[P::Authorize, P::Describe, P::Execute, P::Modify, P::Select];

impl AuthResource {
    /// The resource a statement names, resolved against the session's keyspace.
    pub fn resolve(resource: &Resource, session: Option<&str>) -> Result<AuthResource, QueryError> {
        Ok(match resource {
            Resource::AllKeyspaces => AuthResource::AllKeyspaces,
            Resource::Keyspace(k) => AuthResource::Keyspace(k.clone()),
            Resource::AllTablesIn(k) => AuthResource::AllTablesIn(k.clone()),
            Resource::Table(q) => {
                AuthResource::Table(crate::common::keyspace_name(q, session)?.to_string(), q.name.clone())
            }
            Resource::AllRoles => AuthResource::AllRoles,
            Resource::Role(r) => AuthResource::Role(r.clone()),
            Resource::AllFunctions => AuthResource::AllFunctions,
            Resource::AllFunctionsIn(k) => AuthResource::AllFunctionsIn(k.clone()),
            Resource::Function { name, args } => AuthResource::Function {
                keyspace: crate::common::keyspace_name(name, session)?.to_string(),
                name: name.name.clone(),
                args: args.clone(),
            },
            Resource::AllMbeans => AuthResource::AllMbeans,
            Resource::Mbean(m) | Resource::Mbeans(m) => AuthResource::Mbean(m.clone()),
        })
    }

    /// The name stored in `role_permissions.resource` (`data/ks/t`).
    pub fn name(&self) -> String {
        match self {
            AuthResource::AllKeyspaces => "data".into(),
            AuthResource::Keyspace(k) => format!("data/{k}"),
            AuthResource::AllTablesIn(k) => format!("data/{k}/*"),
            AuthResource::Table(k, t) => format!("data/{k}/{t}"),
            AuthResource::AllRoles => "roles".into(),
            AuthResource::Role(r) => format!("roles/{r}"),
            AuthResource::AllFunctions => "functions".into(),
            AuthResource::AllFunctionsIn(k) => format!("functions/{k}"),
            AuthResource::Function { keyspace, name, args } => {
                format!("functions/{keyspace}/{name}[{}]", args.join("^"))
            }
            AuthResource::AllMbeans => "mbean".into(),
            AuthResource::Mbean(m) => format!("mbean/{m}"),
        }
    }

    /// The resource a stored name stands for.
    pub fn from_name(name: &str) -> Option<AuthResource> {
        let parts: Vec<&str> = name.splitn(3, '/').collect();
        Some(match parts.as_slice() {
            ["data"] => AuthResource::AllKeyspaces,
            ["data", k] => AuthResource::Keyspace(k.to_string()),
            ["data", k, "*"] => AuthResource::AllTablesIn(k.to_string()),
            ["data", k, t] => AuthResource::Table(k.to_string(), t.to_string()),
            ["roles"] => AuthResource::AllRoles,
            ["roles", ..] => AuthResource::Role(name.strip_prefix("roles/")?.to_string()),
            ["functions"] => AuthResource::AllFunctions,
            ["functions", k] => AuthResource::AllFunctionsIn(k.to_string()),
            ["functions", k, f] => {
                let (fname, args) = f.strip_suffix(']')?.split_once('[')?;
                let args = if args.is_empty() { Vec::new() } else { args.split('^').map(str::to_string).collect() };
                AuthResource::Function { keyspace: k.to_string(), name: fname.to_string(), args }
            }
            ["mbean"] => AuthResource::AllMbeans,
            ["mbean", ..] => AuthResource::Mbean(name.strip_prefix("mbean/")?.to_string()),
            _ => return None,
        })
    }

    /// How Cassandra prints it (`<table ks.t>`).
    pub fn display(&self) -> String {
        match self {
            AuthResource::AllKeyspaces => "<all keyspaces>".into(),
            AuthResource::Keyspace(k) => format!("<keyspace {k}>"),
            AuthResource::AllTablesIn(k) => format!("<all tables in {k}>"),
            AuthResource::Table(k, t) => format!("<table {k}.{t}>"),
            AuthResource::AllRoles => "<all roles>".into(),
            AuthResource::Role(r) => format!("<role {r}>"),
            AuthResource::AllFunctions => "<all functions>".into(),
            AuthResource::AllFunctionsIn(k) => format!("<all functions in {k}>"),
            AuthResource::Function { keyspace, name, args } => {
                format!("<function {keyspace}.{name}({})>", args.join(","))
            }
            AuthResource::AllMbeans => "<all mbeans>".into(),
            AuthResource::Mbean(m) => format!("<mbean {m}>"),
        }
    }

    /// The resource one level up, if any.
    pub fn parent(&self) -> Option<AuthResource> {
        match self {
            AuthResource::Keyspace(_) => Some(AuthResource::AllKeyspaces),
            AuthResource::AllTablesIn(k) => Some(AuthResource::Keyspace(k.clone())),
            AuthResource::Table(k, _) => Some(AuthResource::AllTablesIn(k.clone())),
            AuthResource::Role(_) => Some(AuthResource::AllRoles),
            AuthResource::AllFunctionsIn(_) => Some(AuthResource::AllFunctions),
            AuthResource::Function { keyspace, .. } => Some(AuthResource::AllFunctionsIn(keyspace.clone())),
            AuthResource::Mbean(_) => Some(AuthResource::AllMbeans),
            AuthResource::AllKeyspaces
            | AuthResource::AllRoles
            | AuthResource::AllFunctions
            | AuthResource::AllMbeans => None,
        }
    }

    /// The resource and its parents, leaf first.
    pub fn chain(&self) -> Vec<AuthResource> {
        let mut out = vec![self.clone()];
        while let Some(p) = out.last().and_then(AuthResource::parent) {
            out.push(p);
        }
        out
    }

    /// The keyspace of a data resource below `<all keyspaces>`.
    fn keyspace(&self) -> Option<&str> {
        match self {
            AuthResource::Keyspace(k) | AuthResource::AllTablesIn(k) | AuthResource::Table(k, _) => Some(k),
            _ => None,
        }
    }

    /// The permissions that mean something on it.
    pub fn applicable(&self) -> &'static [Permission] {
        match self {
            AuthResource::AllKeyspaces | AuthResource::Keyspace(_) | AuthResource::AllTablesIn(_) => DATA,
            AuthResource::Table(..) => TABLE,
            AuthResource::AllRoles => ALL_ROLES,
            AuthResource::Role(_) => ROLE,
            AuthResource::AllFunctions | AuthResource::AllFunctionsIn(_) => FUNCTIONS,
            AuthResource::Function { .. } => FUNCTION,
            AuthResource::AllMbeans | AuthResource::Mbean(_) => MBEANS,
        }
    }

    /// Cassandra's class name for it (in "does not support" errors).
    fn kind(&self) -> &'static str {
        match self {
            AuthResource::AllKeyspaces
            | AuthResource::Keyspace(_)
            | AuthResource::AllTablesIn(_)
            | AuthResource::Table(..) => "DataResource",
            AuthResource::AllRoles | AuthResource::Role(_) => "RoleResource",
            AuthResource::AllFunctions | AuthResource::AllFunctionsIn(_) | AuthResource::Function { .. } => {
                "FunctionResource"
            }
            AuthResource::AllMbeans | AuthResource::Mbean(_) => "JMXResource",
        }
    }
}

/// The requested permissions that apply to `resource`, in enum order; a
/// syntax error (as Cassandra's grammar raises it) when none does.
fn applicable(permissions: &Permissions, resource: &AuthResource) -> Result<BTreeSet<Permission>, QueryError> {
    let wanted: BTreeSet<Permission> = match permissions {
        Permissions::All => resource.applicable().iter().copied().collect(),
        Permissions::Some(list) => list.iter().copied().filter(|p| resource.applicable().contains(p)).collect(),
    };
    if wanted.is_empty() {
        return Err(QueryError::Syntax(format!(
            "Resource type {} does not support any of the requested permissions",
            resource.kind()
        )));
    }
    Ok(wanted)
}

/// Tables every logged-in role may read (what drivers read on connect).
fn always_readable(keyspace: &str, table: &str) -> bool {
    matches!(keyspace, "system_schema" | "system_virtual_schema")
        || (keyspace == "system"
            && matches!(table, "local" | "peers" | "peers_v2" | "size_estimates" | "table_estimates"))
        || (keyspace == "system_traces" && matches!(table, "events" | "sessions"))
}

impl Auth {
    /// Whether `user` holds `permission` on `resource` (superusers hold
    /// every applicable permission).
    pub fn has_permission(
        &self,
        t: &dyn AuthTables,
        user: &str,
        permission: Permission,
        resource: &AuthResource,
    ) -> Result<bool, QueryError> {
        let roles = self.granted(t, user, true)?;
        if roles.values().any(|r| r.is_superuser) {
            return Ok(resource.applicable().contains(&permission));
        }
        if !self.authorizer.enabled() {
            // AllowAllAuthorizer: every logged-in role holds everything (Cassandra's too).
            return Ok(resource.applicable().contains(&permission));
        }
        let mut chain = resource.chain();
        if resource.keyspace().is_some_and(Schema::is_system) {
            chain.retain(|r| *r != AuthResource::AllKeyspaces);
        }
        for role in roles.keys() {
            let grants = self.grants(t, role)?;
            if chain.iter().any(|r| grants.get(&r.name()).is_some_and(|p| p.contains(&permission))) {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Unauthorized unless `user` holds `permission` on `resource`.
    fn ensure(
        &self,
        t: &dyn AuthTables,
        user: &str,
        permission: Permission,
        resource: &AuthResource,
    ) -> Result<(), QueryError> {
        if self.has_permission(t, user, permission, resource)? {
            return Ok(());
        }
        Err(QueryError::Unauthorized(format!(
            "User {user} has no {} permission on {} or any of its parents",
            permission.name(),
            resource.display()
        )))
    }

    /// The check a statement passes before it runs (CassandraAuthorizer):
    /// SELECT needs SELECT on the table, writes MODIFY, schema changes
    /// CREATE / ALTER / DROP on what they change. Statements whose target
    /// cannot be resolved are let through to fail with their own error.
    pub fn authorize(
        &self,
        t: &dyn AuthTables,
        statement: &Statement,
        login: Option<&str>,
        session: Option<&str>,
    ) -> Result<(), QueryError> {
        if !self.authorizer.enabled() {
            return Ok(());
        }
        let Some(user) = login else {
            return Err(QueryError::Unauthorized("You have not logged in".into()));
        };
        let table = |q: &ast::QualifiedName| {
            crate::common::keyspace_name(q, session).ok().map(|k| AuthResource::Table(k.to_string(), q.name.clone()))
        };
        let in_keyspace = |q: &ast::QualifiedName| {
            crate::common::keyspace_name(q, session).ok().map(|k| AuthResource::AllTablesIn(k.to_string()))
        };
        let mut needs: Vec<(Permission, Option<AuthResource>)> = Vec::new();
        match statement {
            Statement::Select(s) => {
                let readable =
                    crate::common::keyspace_name(&s.table, session).is_ok_and(|k| always_readable(k, &s.table.name));
                if !readable {
                    needs.push((P::Select, table(&s.table)));
                }
            }
            Statement::Insert(i) => needs.push((P::Modify, table(&i.table))),
            Statement::Update(u) => needs.push((P::Modify, table(&u.table))),
            Statement::Delete(d) => needs.push((P::Modify, table(&d.table))),
            Statement::Batch(b) => {
                for st in &b.statements {
                    let q = match st {
                        ast::BatchStatement::Insert(i) => &i.table,
                        ast::BatchStatement::Update(u) => &u.table,
                        ast::BatchStatement::Delete(d) => &d.table,
                    };
                    needs.push((P::Modify, table(q)));
                }
            }
            Statement::Truncate { table: q } => needs.push((P::Modify, table(q))),
            Statement::CreateKeyspace(_) => needs.push((P::Create, Some(AuthResource::AllKeyspaces))),
            Statement::AlterKeyspace(a) => needs.push((P::Alter, Some(AuthResource::Keyspace(a.keyspace.clone())))),
            Statement::DropKeyspace { keyspace, .. } => {
                needs.push((P::Drop, Some(AuthResource::Keyspace(keyspace.clone()))))
            }
            Statement::CreateTable(c) => needs.push((P::Create, in_keyspace(&c.table))),
            Statement::AlterTable(a) => needs.push((P::Alter, table(&a.table))),
            Statement::DropTable { table: q, .. } => needs.push((P::Drop, table(q))),
            Statement::CreateIndex(c) => needs.push((P::Alter, table(&c.table))),
            Statement::DropIndex { name, .. } => needs.push((P::Alter, in_keyspace(name))),
            Statement::CreateType(c) => needs.push((P::Create, in_keyspace(&c.name))),
            Statement::AlterType(a) => needs.push((P::Alter, in_keyspace(&a.name))),
            Statement::DropType { name, .. } => needs.push((P::Drop, in_keyspace(name))),
            _ => {}
        }
        for (permission, resource) in needs {
            if let Some(resource) = resource {
                self.ensure(t, user, permission, &resource)?;
            }
        }
        Ok(())
    }

    /// Whether `resource` exists (GRANT/REVOKE/LIST refuse those that do not).
    fn exists(&self, t: &dyn AuthTables, schema: &Schema, resource: &AuthResource) -> Result<bool, QueryError> {
        Ok(match resource {
            AuthResource::AllKeyspaces | AuthResource::AllRoles | AuthResource::AllFunctions => true,
            AuthResource::AllMbeans | AuthResource::Mbean(_) => true,
            AuthResource::Keyspace(k) | AuthResource::AllTablesIn(k) | AuthResource::AllFunctionsIn(k) => {
                schema.keyspace(k).is_some()
            }
            AuthResource::Table(k, t) => schema.keyspace(k).is_some_and(|ks| ks.tables.contains_key(t)),
            AuthResource::Role(r) => self.role(t, r)?.is_some(),
            // Shoal has no user-defined functions yet.
            AuthResource::Function { .. } => false,
        })
    }

    /// GRANT (`grant`) or REVOKE permissions.
    pub(crate) fn grant_permissions(
        &self,
        t: &dyn AuthTables,
        change: &ast::PermissionChange,
        grant: bool,
        login: Option<&str>,
        schema: &Schema,
        session: Option<&str>,
    ) -> Result<ResultBody, QueryError> {
        let verb = if grant { "GRANT" } else { "REVOKE" };
        if !self.authorizer.enabled() {
            return Err(QueryError::Invalid(format!("{verb} operation is not supported by AllowAllAuthorizer")));
        }
        let resource = AuthResource::resolve(&change.resource, session)?;
        let permissions = applicable(&change.permissions, &resource)?;
        let user = logged_in(login)?;
        if self.role(t, &change.grantee)?.is_none() {
            return Err(QueryError::Invalid(format!("Role {} doesn't exist", change.grantee)));
        }
        if !self.exists(t, schema, &resource)? {
            return Err(QueryError::Invalid(format!("Resource {} doesn't exist", resource.display())));
        }
        let limited = |p: &Permission| !matches!(p, P::Select | P::Describe | P::Alter);
        if grant && resource.keyspace().is_some_and(Schema::is_system) && permissions.iter().any(limited) {
            return Err(QueryError::Unauthorized(
                "Granting permissions on system keyspaces is strictly limited, this operation is not permitted".into(),
            ));
        }
        self.ensure(t, user, P::Authorize, &resource)?;
        for p in &permissions {
            self.ensure(t, user, *p, &resource)?;
        }
        let names = text_set(permissions.iter().map(|p| p.name().to_string()));
        let (role, name) = (Value::Text(change.grantee.clone()), Value::Text(resource.name()));
        if grant {
            t.modify(
                &[
                    (
                        "UPDATE system_auth.role_permissions SET permissions = permissions + ? WHERE role = ? AND resource = ?",
                        vec![names, role.clone(), name.clone()],
                    ),
                    (
                        "INSERT INTO system_auth.resource_role_permissons_index (resource, role) VALUES (?, ?)",
                        vec![name, role],
                    ),
                ],
                WRITE_CL,
            )?;
        } else {
            t.modify(
                &[(
                    "UPDATE system_auth.role_permissions SET permissions = permissions - ? WHERE role = ? AND resource = ?",
                    vec![names, role.clone(), name.clone()],
                )],
                WRITE_CL,
            )?;
            self.invalidate([change.grantee.as_str()]);
            // Nothing left on the resource: the index entry goes too.
            if self.grants(t, &change.grantee)?.get(&resource.name()).is_none_or(BTreeSet::is_empty) {
                t.modify(
                    &[(
                        "DELETE FROM system_auth.resource_role_permissons_index WHERE resource = ? AND role = ?",
                        vec![name, role],
                    )],
                    WRITE_CL,
                )?;
            }
        }
        self.invalidate([change.grantee.as_str()]);
        Ok(ResultBody::Void)
    }

    /// Every applicable permission on `resource` to `role` (what the creator
    /// of a keyspace, table or role receives). A failure is logged: the
    /// creation itself succeeded.
    pub(crate) fn grant_all_on(&self, t: &dyn AuthTables, role: &str, resource: &AuthResource) {
        let names = text_set(resource.applicable().iter().map(|p| p.name().to_string()));
        let (r, name) = (Value::Text(role.to_string()), Value::Text(resource.name()));
        let outcome = t.modify(
            &[
                (
                    "UPDATE system_auth.role_permissions SET permissions = permissions + ? WHERE role = ? AND resource = ?",
                    vec![names, r.clone(), name.clone()],
                ),
                ("INSERT INTO system_auth.resource_role_permissons_index (resource, role) VALUES (?, ?)", vec![name, r]),
            ],
            WRITE_CL,
        );
        if let Err(e) = outcome {
            tracing::warn!("cannot grant {role} the permissions on {} it created: {e}", resource.display());
        }
        self.invalidate([role]);
    }

    /// Removes every grant on `resource` (it was dropped).
    pub(crate) fn revoke_all_on(&self, t: &dyn AuthTables, resource: &AuthResource) -> Result<(), QueryError> {
        let name = Value::Text(resource.name());
        let rows = t.select(
            "SELECT role FROM system_auth.resource_role_permissons_index WHERE resource = ?",
            std::slice::from_ref(&name),
            Consistency::LocalQuorum,
        )?;
        let roles: Vec<String> = rows.iter().filter_map(|r| r.first().and_then(cell_text)).collect();
        let mut writes: Vec<(&str, Vec<Value>)> = roles
            .iter()
            .map(|r| {
                (
                    "DELETE FROM system_auth.role_permissions WHERE role = ? AND resource = ?",
                    vec![Value::Text(r.clone()), name.clone()],
                )
            })
            .collect();
        writes.push(("DELETE FROM system_auth.resource_role_permissons_index WHERE resource = ?", vec![name]));
        t.modify(&writes, WRITE_CL)?;
        self.invalidate(roles.iter().map(String::as_str));
        Ok(())
    }

    /// Removes every grant to `role` (it was dropped).
    pub(crate) fn revoke_all_from(&self, t: &dyn AuthTables, role: &str) -> Result<(), QueryError> {
        let r = Value::Text(role.to_string());
        let rows = t.select(
            "SELECT resource FROM system_auth.role_permissions WHERE role = ?",
            std::slice::from_ref(&r),
            Consistency::LocalQuorum,
        )?;
        let mut writes: Vec<(&str, Vec<Value>)> = rows
            .iter()
            .filter_map(|row| row.first().and_then(cell_text))
            .map(|resource| {
                (
                    "DELETE FROM system_auth.resource_role_permissons_index WHERE resource = ? AND role = ?",
                    vec![Value::Text(resource), r.clone()],
                )
            })
            .collect();
        writes.push(("DELETE FROM system_auth.role_permissions WHERE role = ?", vec![r]));
        t.modify(&writes, WRITE_CL)?;
        self.invalidate([role]);
        Ok(())
    }

    /// LIST PERMISSIONS.
    pub(crate) fn list_permissions(
        &self,
        t: &dyn AuthTables,
        list: &ast::ListPermissions,
        login: Option<&str>,
        schema: &Schema,
        session: Option<&str>,
    ) -> Result<ResultBody, QueryError> {
        if !self.authorizer.enabled() {
            return Err(QueryError::invalid("LIST PERMISSIONS operation is not supported by AllowAllAuthorizer"));
        }
        let user = logged_in(login)?;
        let resource = list.resource.as_ref().map(|r| AuthResource::resolve(r, session)).transpose()?;
        if let Some(of) = &list.of {
            if self.role(t, of)?.is_none() {
                return Err(QueryError::Invalid(format!("<role {of}> doesn't exist")));
            }
        }
        if let Some(r) = &resource {
            if !self.exists(t, schema, r)? {
                return Err(QueryError::Invalid(format!("{} doesn't exist", r.display())));
            }
        }
        let own = match &list.of {
            Some(of) => self.granted(t, user, true)?.contains_key(of),
            None => false,
        };
        let may =
            own || self.has_permission(t, user, P::Describe, &AuthResource::AllRoles)?
                || list.of.as_ref().map_or(Ok(false), |of| {
                    self.has_permission(t, user, P::Describe, &AuthResource::Role(of.clone()))
                })?;
        if !may {
            return Err(QueryError::Unauthorized(format!(
                "You are not authorized to view {}'s permissions",
                list.of.as_deref().unwrap_or("everyone")
            )));
        }
        let wanted: BTreeSet<Permission> = match &list.permissions {
            Permissions::All => Permission::ALL.into_iter().collect(),
            Permissions::Some(p) => p.iter().copied().collect(),
        };
        let resources: Option<BTreeSet<String>> = resource.map(|r| {
            if list.recursive {
                r.chain().iter().map(AuthResource::name).collect()
            } else {
                [r.name()].into_iter().collect()
            }
        });
        // (grantee, resource name, permission), sorted as Cassandra sorts them.
        let mut rows: BTreeSet<(String, String, Permission)> = BTreeSet::new();
        let grantees: Vec<(String, Grants)> = match &list.of {
            Some(of) => self
                .granted(t, of, true)?
                .into_keys()
                .map(|r| self.grants(t, &r).map(|g| (r, (*g).clone())))
                .collect::<Result<_, _>>()?,
            None => {
                let all = t.select(
                    "SELECT role, resource, permissions FROM system_auth.role_permissions",
                    &[],
                    Consistency::LocalQuorum,
                )?;
                let mut by_role: BTreeMap<String, Grants> = BTreeMap::new();
                for row in &all {
                    let (Some(role), Some(res)) = (row.first().and_then(cell_text), row.get(1).and_then(cell_text))
                    else {
                        continue;
                    };
                    let perms = row.get(2).map(crate::auth::cell_text_set).unwrap_or_default();
                    by_role
                        .entry(role)
                        .or_default()
                        .insert(res, perms.iter().filter_map(|p| Permission::from_name(p)).collect());
                }
                by_role.into_iter().collect()
            }
        };
        for (role, grants) in grantees {
            for (res, perms) in grants {
                if resources.as_ref().is_some_and(|want| !want.contains(&res)) {
                    continue;
                }
                for p in perms.intersection(&wanted) {
                    rows.insert((role.clone(), res.clone(), *p));
                }
            }
        }
        if rows.is_empty() {
            return Ok(ResultBody::Void);
        }
        let columns = vec![
            spec("permissions", "role", CqlType::Text),
            spec("permissions", "username", CqlType::Text),
            spec("permissions", "resource", CqlType::Text),
            spec("permissions", "permission", CqlType::Text),
        ];
        let mut writer = RowsWriter::new(columns.len());
        for (role, res, p) in rows {
            let shown = AuthResource::from_name(&res).map(|r| r.display()).unwrap_or(res);
            writer.push_cell(Some(role.as_bytes()));
            writer.push_cell(Some(role.as_bytes()));
            writer.push_cell(Some(shown.as_bytes()));
            writer.push_cell(Some(p.name().as_bytes()));
            writer.end_row();
        }
        Ok(ResultBody::Rows(writer.finish(RowsMetadata::new(columns))))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn resource_names_round_trip_and_print_as_cassandra() {
        let cases = [
            (AuthResource::AllKeyspaces, "data", "<all keyspaces>"),
            (AuthResource::Keyspace("ks".into()), "data/ks", "<keyspace ks>"),
            (AuthResource::AllTablesIn("ks".into()), "data/ks/*", "<all tables in ks>"),
            (AuthResource::Table("ks".into(), "t".into()), "data/ks/t", "<table ks.t>"),
            (AuthResource::AllRoles, "roles", "<all roles>"),
            (AuthResource::Role("bob".into()), "roles/bob", "<role bob>"),
            (AuthResource::AllFunctions, "functions", "<all functions>"),
            (AuthResource::AllFunctionsIn("ks".into()), "functions/ks", "<all functions in ks>"),
            (
                AuthResource::Function {
                    keyspace: "ks".into(),
                    name: "f".into(),
                    args: vec!["int".into(), "text".into()],
                },
                "functions/ks/f[int^text]",
                "<function ks.f(int,text)>",
            ),
            (AuthResource::AllMbeans, "mbean", "<all mbeans>"),
        ];
        for (resource, name, shown) in cases {
            assert_eq!(resource.name(), name);
            assert_eq!(resource.display(), shown);
            assert_eq!(AuthResource::from_name(name), Some(resource));
        }
        // A role name holding '/' survives.
        assert_eq!(AuthResource::from_name("roles/a/b"), Some(AuthResource::Role("a/b".into())));
    }

    #[test]
    fn a_table_chain_climbs_to_all_keyspaces() {
        let chain: Vec<String> =
            AuthResource::Table("ks".into(), "t".into()).chain().iter().map(|r| r.name()).collect();
        assert_eq!(chain, ["data/ks/t", "data/ks/*", "data/ks", "data"]);
    }

    #[test]
    fn requested_permissions_are_cut_to_those_that_apply() {
        let table = AuthResource::Table("ks".into(), "t".into());
        let all = applicable(&Permissions::All, &table).unwrap();
        assert!(!all.contains(&P::Create) && all.contains(&P::Select));
        let some = applicable(&Permissions::Some(vec![P::Create, P::Select]), &table).unwrap();
        assert_eq!(some.into_iter().collect::<Vec<_>>(), [P::Select]);
        assert_eq!(
            applicable(&Permissions::Some(vec![P::Execute]), &table),
            Err(QueryError::Syntax(
                "Resource type DataResource does not support any of the requested permissions".into()
            ))
        );
    }

    #[test]
    fn authorizer_names() {
        assert_eq!(Authorizer::parse("CassandraAuthorizer"), Some(Authorizer::Cassandra));
        assert_eq!(Authorizer::parse("org.apache.cassandra.auth.AllowAllAuthorizer"), Some(Authorizer::AllowAll));
        assert_eq!(Authorizer::parse("Ldap"), None);
    }
}
