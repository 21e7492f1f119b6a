//! Password authentication and roles (Cassandra's `PasswordAuthenticator`
//! and `CassandraRoleManager`): the SASL PLAIN token, bcrypt hashes, the
//! roles kept in the `system_auth` tables, the default superuser, the role
//! statements (`CREATE/ALTER/DROP ROLE|USER`, `GRANT/REVOKE` role,
//! `LIST ROLES|USERS`), and the caches in front of the tables. Permissions
//! are `permissions.rs`'s.
//!
//! Invariants:
//! - Passwords are kept only as bcrypt hashes (`$2a$`, cost 10, as jBCrypt
//!   writes them); a password is never logged nor kept after hashing.
//! - Roles live in `system_auth.roles` and `system_auth.role_members`, a
//!   replicated keyspace (RF 1 by default, alterable), read and written
//!   through the data plane as the system ([`AuthTables`]) at
//!   `LOCAL_QUORUM` / `QUORUM` (`QUORUM` for the default superuser), so
//!   every node sees every role.
//! - What a node read is cached for `roles_validity`; a change made through
//!   this node drops the entries it touched at once, other nodes see it
//!   when their entries expire (Cassandra's caches behave the same).
//! - Only roles with the needed permission (superusers: all) create, alter,
//!   drop or grant roles; any role may change its own password. With
//!   `AllowAllAuthenticator` every session is anonymous and every role
//!   statement is refused, with Cassandra's messages.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use bytes::Bytes;
use cql::ast::{Permission, RoleOptions, Statement};
use cql_protocol::{ColumnSpec, ResultBody, RowsMetadata, RowsWriter};
use types::{Consistency, CqlType, Value};

use crate::error::QueryError;
use crate::permissions::{AuthResource, Authorizer, Grants};

/// The class name sent in AUTHENTICATE (what drivers expect from Cassandra).
pub const PASSWORD_AUTHENTICATOR: &str = "org.apache.cassandra.auth.PasswordAuthenticator";
/// The role manager named in "doesn't support" messages.
pub const ROLE_MANAGER: &str = "org.apache.cassandra.auth.CassandraRoleManager";
/// The default superuser's name and password.
pub const DEFAULT_SUPERUSER: &str = "cassandra";
/// bcrypt's cost (log2 rounds), Cassandra's default.
pub const BCRYPT_COST: u32 = 10;
/// Where the previous Shoal kept roles per node (now ignored, warned about).
const LEGACY_ROLES_KEY: &str = "system_auth.roles";
/// Cassandra's default `roles_validity` / `permissions_validity`.
pub const DEFAULT_VALIDITY: Duration = Duration::from_secs(2);

pub(crate) const ANONYMOUS: &str = "You have to be logged in and not anonymous to perform this request";

const ROLE_COLUMNS: &str = "role, can_login, is_superuser, member_of, salted_hash";

/// cassandra.yaml's `authenticator`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Authenticator {
    /// No login; every session is anonymous (the default).
    #[default]
    AllowAll,
    /// Username and password (SASL PLAIN) checked against `system_auth.roles`.
    Password,
}

impl Authenticator {
    /// Parses a yaml value: a short or fully qualified class name.
    pub fn parse(name: &str) -> Option<Authenticator> {
        match name.strip_prefix("org.apache.cassandra.auth.").unwrap_or(name) {
            "AllowAllAuthenticator" => Some(Authenticator::AllowAll),
            "PasswordAuthenticator" => Some(Authenticator::Password),
            _ => None,
        }
    }

    /// Whether a connection must log in before it runs requests.
    pub fn requires_login(self) -> bool {
        self == Authenticator::Password
    }
}

/// How auth reaches its tables: statements on `system_auth` run as the
/// system (no permission checks), through the data plane. The processor
/// implements it.
pub trait AuthTables {
    /// Runs a SELECT and returns every row's cells (null: `None`).
    fn select(&self, cql: &str, values: &[Value], cl: Consistency) -> Result<Vec<Vec<Option<Bytes>>>, QueryError>;
    /// Applies INSERT/UPDATE/DELETE statements together at `cl`.
    fn modify(&self, statements: &[(&str, Vec<Value>)], cl: Consistency) -> Result<(), QueryError>;
}

/// The role a session logged in as; Unauthorized for an anonymous session.
pub(crate) fn logged_in(login: Option<&str>) -> Result<&str, QueryError> {
    login.ok_or_else(|| QueryError::Unauthorized(ANONYMOUS.into()))
}

/// The credentials of a SASL PLAIN token.
#[derive(Debug, PartialEq, Eq)]
pub struct Credentials {
    pub username: String,
    pub password: String,
}

/// Decodes a SASL PLAIN token (`authzid NUL authcid NUL password`) as
/// Cassandra does: from the end, the last part is the password, the one
/// before it the username; an authzid before them is ignored, a third NUL is
/// an error. The error is the message of an AUTHENTICATION error (0x0100).
pub fn decode_plain(token: &[u8]) -> Result<Credentials, String> {
    let mut password: Option<&[u8]> = None;
    let mut username: Option<&[u8]> = None;
    let mut end = token.len();
    for (i, byte) in token.iter().enumerate().rev() {
        if *byte != 0 {
            continue;
        }
        let part = token.get(i + 1..end).unwrap_or_default();
        if password.is_none() {
            password = Some(part);
        } else if username.is_none() {
            username = Some(part);
        } else {
            return Err(
                "Credential format error: username or password is empty or contains NUL(\\0) character".to_string()
            );
        }
        end = i;
    }
    let password = password.filter(|p| !p.is_empty()).ok_or("Password must not be null")?;
    let username = username.filter(|u| !u.is_empty()).ok_or("Authentication ID must not be null")?;
    Ok(Credentials {
        username: String::from_utf8_lossy(username).into_owned(),
        password: String::from_utf8_lossy(password).into_owned(),
    })
}

/// A bcrypt hash of `password` in jBCrypt's format (`$2a$10$…`, 60 chars).
pub fn hash_password(password: &str) -> Result<String, QueryError> {
    bcrypt::hash_with_result(password, BCRYPT_COST)
        .map(|parts| parts.format_for_version(bcrypt::Version::TwoA))
        .map_err(|e| QueryError::Invalid(format!("Cannot hash the password: {e}")))
}

/// Whether `password` matches `hash`; None when `hash` is not a bcrypt hash.
pub fn verify_password(password: &str, hash: &str) -> Option<bool> {
    bcrypt::verify(password, hash).ok()
}

/// Runs `work` (bcrypt: slow on purpose) handing the runtime worker's other
/// tasks over first when called on a multi-thread runtime's worker.
pub fn off_the_workers<T>(work: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => tokio::task::block_in_place(work),
        _ => work(),
    }
}

/// Failed logins tolerated from one address before its attempts are slowed.
pub const FREE_FAILURES: u32 = 5;
/// The wait before an attempt after the first slowed failure; it doubles
/// with each further failure, up to `MAX_LOGIN_DELAY`.
pub const FIRST_LOGIN_DELAY: Duration = Duration::from_millis(100);
pub const MAX_LOGIN_DELAY: Duration = Duration::from_secs(2);
/// An address whose last failure is this old starts afresh.
const FORGET_FAILURES: Duration = Duration::from_secs(60);
/// Addresses remembered at most (the oldest are forgotten first).
const MAX_ADDRESSES: usize = 10_000;

/// Slows down repeated failed logins from one address (Cassandra has no
/// such guard): after `FREE_FAILURES` failures, every attempt from that
/// address waits, `FIRST_LOGIN_DELAY` doubling per failure up to
/// `MAX_LOGIN_DELAY`, counted from its last failure. A success does not
/// reset it (an attacker behind the same address as a real user would
/// otherwise be reset by that user); a minute without failures does.
#[derive(Default)]
pub struct LoginThrottle {
    failures: Mutex<HashMap<std::net::IpAddr, (u32, Instant)>>,
}

impl LoginThrottle {
    fn delay(failures: u32) -> Duration {
        match failures.checked_sub(FREE_FAILURES) {
            None => Duration::ZERO,
            Some(over) => FIRST_LOGIN_DELAY.saturating_mul(1u32 << over.min(16)).min(MAX_LOGIN_DELAY),
        }
    }

    /// How long an attempt from `ip` must wait before it is checked.
    pub fn wait(&self, ip: std::net::IpAddr) -> Duration {
        let failures = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        match failures.get(&ip) {
            Some((n, last)) if last.elapsed() < FORGET_FAILURES => {
                LoginThrottle::delay(*n).saturating_sub(last.elapsed())
            }
            _ => Duration::ZERO,
        }
    }

    /// Counts a failed login from `ip`; returns its count of failures.
    pub fn failed(&self, ip: std::net::IpAddr) -> u32 {
        let mut failures = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        if failures.len() >= MAX_ADDRESSES {
            failures.retain(|_, (_, last)| last.elapsed() < FORGET_FAILURES);
            if failures.len() >= MAX_ADDRESSES {
                if let Some(oldest) = failures.iter().min_by_key(|(_, (_, last))| *last).map(|(ip, _)| *ip) {
                    failures.remove(&oldest);
                }
            }
        }
        let entry = failures.entry(ip).or_insert((0, Instant::now()));
        if entry.1.elapsed() >= FORGET_FAILURES {
            entry.0 = 0;
        }
        entry.0 += 1;
        entry.1 = Instant::now();
        entry.0
    }
}

/// A row of `system_auth.roles`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Role {
    pub role: String,
    pub is_superuser: bool,
    pub can_login: bool,
    pub member_of: BTreeSet<String>,
    pub salted_hash: Option<String>,
}

impl Role {
    /// A row of `SELECT role, can_login, is_superuser, member_of, salted_hash`.
    fn from_row(row: &[Option<Bytes>]) -> Option<Role> {
        Some(Role {
            role: cell_text(row.first()?)?,
            can_login: cell_bool(row.get(1)?),
            is_superuser: cell_bool(row.get(2)?),
            member_of: cell_text_set(row.get(3)?),
            salted_hash: row.get(4).and_then(cell_text),
        })
    }
}

pub(crate) fn cell_text(cell: &Option<Bytes>) -> Option<String> {
    cell.as_ref().map(|b| String::from_utf8_lossy(b).into_owned())
}

fn cell_bool(cell: &Option<Bytes>) -> bool {
    matches!(cell.as_ref().map(|b| Value::deserialize(&CqlType::Boolean, b)), Some(Ok(Value::Boolean(true))))
}

pub(crate) fn cell_text_set(cell: &Option<Bytes>) -> BTreeSet<String> {
    let ty = CqlType::Set { elem: Box::new(CqlType::Text), frozen: false };
    match cell.as_ref().map(|b| Value::deserialize(&ty, b)) {
        Some(Ok(Value::Set(items))) => items
            .into_iter()
            .filter_map(|v| match v {
                Value::Text(t) => Some(t),
                _ => None,
            })
            .collect(),
        _ => BTreeSet::new(),
    }
}

pub(crate) fn text_set(items: impl IntoIterator<Item = String>) -> Value {
    Value::Set(items.into_iter().map(Value::Text).collect())
}

/// cassandra.yaml's auth settings, as the node read them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AuthConfig {
    pub authenticator: Authenticator,
    pub authorizer: Authorizer,
    /// `roles_validity`: how long a role read from the tables is trusted.
    pub roles_validity: Duration,
    /// `permissions_validity`: how long a role's permissions are trusted.
    pub permissions_validity: Duration,
}

impl Default for AuthConfig {
    fn default() -> AuthConfig {
        AuthConfig {
            authenticator: Authenticator::AllowAll,
            authorizer: Authorizer::AllowAll,
            roles_validity: DEFAULT_VALIDITY,
            permissions_validity: DEFAULT_VALIDITY,
        }
    }
}

/// An entry of a cache: what was read and when.
struct Cached<T> {
    at: Instant,
    value: T,
}

#[derive(Default)]
struct Caches {
    roles: HashMap<String, Cached<Option<Role>>>,
    grants: HashMap<String, Cached<std::sync::Arc<Grants>>>,
}

/// The auth settings in force and the caches over `system_auth`.
pub struct Auth {
    pub authenticator: Authenticator,
    pub authorizer: Authorizer,
    /// Slows repeated failed logins per client address.
    pub throttle: LoginThrottle,
    config: AuthConfig,
    caches: Mutex<Caches>,
}

/// The consistency of reads of `role`'s rows (Cassandra 5: QUORUM for the
/// default superuser, `auth_read_consistency_level` otherwise).
fn read_cl(role: &str) -> Consistency {
    if role == DEFAULT_SUPERUSER {
        Consistency::Quorum
    } else {
        Consistency::LocalQuorum
    }
}

/// The consistency of auth writes.
pub(crate) const WRITE_CL: Consistency = Consistency::Quorum;

impl Auth {
    pub fn new(config: AuthConfig) -> Auth {
        Auth {
            authenticator: config.authenticator,
            authorizer: config.authorizer,
            throttle: LoginThrottle::default(),
            config,
            caches: Mutex::new(Caches::default()),
        }
    }

    fn caches(&self) -> std::sync::MutexGuard<'_, Caches> {
        self.caches.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Forgets what the caches hold about `roles` (after a change made here).
    pub(crate) fn invalidate<'a>(&self, roles: impl IntoIterator<Item = &'a str>) {
        let mut caches = self.caches();
        for role in roles {
            caches.roles.remove(role);
            caches.grants.remove(role);
        }
    }

    /// One role, from the cache while it is valid, else from the tables.
    pub fn role(&self, t: &dyn AuthTables, name: &str) -> Result<Option<Role>, QueryError> {
        if let Some(c) = self.caches().roles.get(name) {
            if c.at.elapsed() < self.config.roles_validity {
                return Ok(c.value.clone());
            }
        }
        let at = Instant::now();
        let rows = t.select(
            &format!("SELECT {ROLE_COLUMNS} FROM system_auth.roles WHERE role = ?"),
            &[Value::Text(name.to_string())],
            read_cl(name),
        )?;
        let role = rows.first().and_then(|r| Role::from_row(r));
        self.caches().roles.insert(name.to_string(), Cached { at, value: role.clone() });
        Ok(role)
    }

    /// A role's permissions (resource name → permissions), cached for
    /// `permissions_validity`.
    pub(crate) fn grants(&self, t: &dyn AuthTables, role: &str) -> Result<std::sync::Arc<Grants>, QueryError> {
        if let Some(c) = self.caches().grants.get(role) {
            if c.at.elapsed() < self.config.permissions_validity {
                return Ok(std::sync::Arc::clone(&c.value));
            }
        }
        let at = Instant::now();
        let rows = t.select(
            "SELECT resource, permissions FROM system_auth.role_permissions WHERE role = ?",
            &[Value::Text(role.to_string())],
            read_cl(role),
        )?;
        let grants: Grants = rows
            .iter()
            .filter_map(|r| {
                let resource = cell_text(r.first()?)?;
                let perms = cell_text_set(r.get(1)?).iter().filter_map(|p| Permission::from_name(p)).collect();
                Some((resource, perms))
            })
            .collect();
        let grants = std::sync::Arc::new(grants);
        self.caches().grants.insert(role.to_string(), Cached { at, value: std::sync::Arc::clone(&grants) });
        Ok(grants)
    }

    /// Every role, read from the tables (LIST ROLES of a superuser).
    fn all_roles(&self, t: &dyn AuthTables) -> Result<Vec<Role>, QueryError> {
        let rows = t.select(&format!("SELECT {ROLE_COLUMNS} FROM system_auth.roles"), &[], Consistency::LocalQuorum)?;
        let mut roles: Vec<Role> = rows.iter().filter_map(|r| Role::from_row(r)).collect();
        roles.sort_by(|a, b| a.role.cmp(&b.role));
        Ok(roles)
    }

    /// `name` and every role granted to it, transitively (or only directly
    /// when not `recursive`); roles that no longer exist are skipped.
    pub(crate) fn granted(
        &self,
        t: &dyn AuthTables,
        name: &str,
        recursive: bool,
    ) -> Result<BTreeMap<String, Role>, QueryError> {
        let mut out = BTreeMap::new();
        let mut todo = vec![(name.to_string(), true)];
        while let Some((next, expand)) = todo.pop() {
            if out.contains_key(&next) {
                continue;
            }
            let Some(role) = self.role(t, &next)? else { continue };
            if expand {
                todo.extend(role.member_of.iter().map(|r| (r.clone(), recursive)));
            }
            out.insert(next, role);
        }
        Ok(out)
    }

    /// Whether `name` has superuser status, its own or through the roles
    /// granted to it.
    pub fn is_super(&self, t: &dyn AuthTables, name: &str) -> Result<bool, QueryError> {
        Ok(self.granted(t, name, true)?.values().any(|r| r.is_superuser))
    }

    /// Whether `login` (None: anonymous) may read `system_auth` tables when
    /// no authorizer decides: superusers only (anonymous sessions where no
    /// login exists). With CassandraAuthorizer its grants decide.
    pub fn may_read_auth_tables(&self, t: &dyn AuthTables, login: Option<&str>) -> Result<bool, QueryError> {
        if self.authorizer.enabled() {
            return Ok(true);
        }
        match login {
            Some(user) => self.is_super(t, user),
            None => Ok(!self.authenticator.requires_login()),
        }
    }

    /// With `PasswordAuthenticator`, creates the default superuser
    /// `cassandra`/`cassandra` when no role exists (Cassandra's
    /// `CassandraRoleManager` setup: read at QUORUM, written at QUORUM with
    /// timestamp 0, so nodes that do it at once agree and any later change
    /// wins), and warns while it still has its default password. An error
    /// means the cluster could not answer yet: the caller tries again.
    pub fn setup(&self, t: &dyn AuthTables, legacy: Option<&storage::Storage>) -> Result<(), QueryError> {
        if !self.authenticator.requires_login() {
            return Ok(());
        }
        if legacy.and_then(|s| s.local_get(LEGACY_ROLES_KEY)).is_some() {
            tracing::warn!(
                "this data directory holds roles an earlier Shoal kept per node; they are ignored: roles now live \
                 in the replicated system_auth tables"
            );
        }
        let any = t.select("SELECT role FROM system_auth.roles LIMIT 1", &[], Consistency::Quorum)?;
        if any.is_empty() {
            let hash = hash_password(DEFAULT_SUPERUSER)?;
            t.modify(
                &[(
                    "INSERT INTO system_auth.roles (role, is_superuser, can_login, salted_hash) VALUES (?, true, true, ?) \
                     USING TIMESTAMP 0",
                    vec![Value::Text(DEFAULT_SUPERUSER.into()), Value::Text(hash)],
                )],
                Consistency::Quorum,
            )?;
            self.invalidate([DEFAULT_SUPERUSER]);
            tracing::info!("Created default superuser role '{DEFAULT_SUPERUSER}'");
        }
        let default_password = self
            .role(t, DEFAULT_SUPERUSER)?
            .and_then(|r| r.salted_hash)
            .and_then(|h| verify_password(DEFAULT_SUPERUSER, &h))
            .unwrap_or(false);
        if default_password {
            tracing::warn!(
                "The default superuser '{DEFAULT_SUPERUSER}' exists with its default password: create another \
                 superuser, then drop '{DEFAULT_SUPERUSER}' or change its password"
            );
        }
        Ok(())
    }

    /// Checks a login (the caller runs it off the runtime's workers: bcrypt
    /// is slow on purpose). Ok: the role now logged in; Err: the message of
    /// an AUTHENTICATION error.
    pub fn login(&self, t: &dyn AuthTables, credentials: &Credentials) -> Result<String, String> {
        let username = &credentials.username;
        let incorrect = || format!("Provided username {username} and/or password are incorrect");
        let role = self
            .role(t, username)
            .map_err(|e| format!("Unable to perform authentication: {e}"))?
            .ok_or_else(incorrect)?;
        let hash = role.salted_hash.as_deref().ok_or_else(incorrect)?;
        match verify_password(&credentials.password, hash) {
            Some(true) => {}
            Some(false) => return Err(incorrect()),
            None => {
                tracing::error!("Error: invalid password hash encountered, rejecting user");
                return Err(incorrect());
            }
        }
        if !role.can_login {
            return Err(format!("{username} is not permitted to log in"));
        }
        Ok(role.role)
    }

    /// Runs a role or permission statement for `login` (None: an anonymous session).
    pub fn execute(
        &self,
        t: &dyn AuthTables,
        statement: &Statement,
        login: Option<&str>,
        schema: &crate::schema::Schema,
        session: Option<&str>,
    ) -> Result<ResultBody, QueryError> {
        match statement {
            Statement::CreateRole(c) => self.create(t, &c.name, c.if_not_exists, &c.options, login),
            Statement::AlterRole(a) => self.alter(t, &a.name, a.if_exists, &a.options, login),
            Statement::DropRole { name, if_exists } => self.drop_role(t, name, *if_exists, login),
            Statement::ListRoles { of, recursive } => self.list_roles(t, of.as_deref(), *recursive, login),
            Statement::ListUsers => self.list_users(t, login),
            Statement::GrantRole { role, grantee } => self.grant_role(t, role, grantee, login),
            Statement::RevokeRole { role, revokee } => self.revoke_role(t, role, revokee, login),
            Statement::GrantPermissions(change) => self.grant_permissions(t, change, true, login, schema, session),
            Statement::RevokePermissions(change) => self.grant_permissions(t, change, false, login, schema, session),
            Statement::ListPermissions(list) => self.list_permissions(t, list, login, schema, session),
            _ => Err(QueryError::Server("not a role statement".into())),
        }
    }

    /// Cassandra's `RoleOptions.validate` against the role manager's
    /// supported options (PASSWORD only with PasswordAuthenticator).
    fn validate_options(&self, options: &RoleOptions) -> Result<(), QueryError> {
        if let Some(option) = options.unsupported.first() {
            // CassandraRoleManager supports no custom OPTIONS; data center and CIDR access are
            // the network and CIDR authorizers' (not in Shoal yet).
            if option == "OPTIONS" {
                return Err(QueryError::Invalid(format!("{ROLE_MANAGER} doesn't support OPTIONS")));
            }
            return Err(QueryError::Invalid(format!("{option} is not supported by Shoal yet")));
        }
        if !self.authenticator.requires_login() {
            if options.password.is_some() {
                return Err(QueryError::Invalid(format!("{ROLE_MANAGER} doesn't support PASSWORD")));
            }
            if options.hashed_password.is_some() {
                return Err(QueryError::Invalid(format!("{ROLE_MANAGER} doesn't support HASHED_PASSWORD")));
            }
        }
        if let Some(hash) = &options.hashed_password {
            if verify_password("dummy", hash).is_none() {
                return Err(QueryError::invalid("Invalid hashed password value. Please use jBcrypt."));
            }
        }
        Ok(())
    }

    /// The new hash the options ask for, if any.
    fn new_hash(options: &RoleOptions) -> Result<Option<String>, QueryError> {
        match (&options.password, &options.hashed_password) {
            (Some(password), _) => hash_password(password).map(Some),
            (None, Some(hash)) => Ok(Some(hash.clone())),
            (None, None) => Ok(None),
        }
    }

    /// Cassandra's check of a role statement: `user` needs `permission` on
    /// `resource`; any failure reads "does not have sufficient privileges".
    fn check_role_permission(
        &self,
        t: &dyn AuthTables,
        user: &str,
        permission: Permission,
        resource: &AuthResource,
    ) -> Result<(), QueryError> {
        if self.has_permission(t, user, permission, resource)? {
            Ok(())
        } else {
            Err(Auth::insufficient(user))
        }
    }

    fn insufficient(user: &str) -> QueryError {
        QueryError::Unauthorized(format!(
            "User {user} does not have sufficient privileges to perform the requested operation"
        ))
    }

    fn create(
        &self,
        t: &dyn AuthTables,
        name: &str,
        if_not_exists: bool,
        options: &RoleOptions,
        login: Option<&str>,
    ) -> Result<ResultBody, QueryError> {
        self.validate_options(options)?;
        if name.is_empty() {
            return Err(QueryError::invalid("Role name can't be an empty string"));
        }
        let user = logged_in(login)?;
        self.check_role_permission(t, user, Permission::Create, &AuthResource::AllRoles)?;
        if options.superuser == Some(true) && !self.is_super(t, user)? {
            return Err(QueryError::Unauthorized("Only superusers can create a role with superuser status".into()));
        }
        if self.role(t, name)?.is_some() {
            return if if_not_exists {
                Ok(ResultBody::Void)
            } else {
                Err(QueryError::Invalid(format!("{name} already exists")))
            };
        }
        let salted_hash = Auth::new_hash(options)?;
        let mut values = vec![
            Value::Text(name.to_string()),
            Value::Boolean(options.superuser.unwrap_or(false)),
            Value::Boolean(options.login.unwrap_or(false)),
        ];
        let cql = match salted_hash {
            Some(hash) => {
                values.push(Value::Text(hash));
                "INSERT INTO system_auth.roles (role, is_superuser, can_login, salted_hash) VALUES (?, ?, ?, ?)"
            }
            None => "INSERT INTO system_auth.roles (role, is_superuser, can_login) VALUES (?, ?, ?)",
        };
        t.modify(&[(cql, values)], WRITE_CL)?;
        self.invalidate([name]);
        // The creator may manage what it created (Cassandra's auto-grant).
        if self.authorizer.enabled() {
            self.grant_all_on(t, user, &AuthResource::Role(name.to_string()));
        }
        Ok(ResultBody::Void)
    }

    fn alter(
        &self,
        t: &dyn AuthTables,
        name: &str,
        if_exists: bool,
        options: &RoleOptions,
        login: Option<&str>,
    ) -> Result<ResultBody, QueryError> {
        if options.is_empty() {
            return Err(QueryError::invalid("ALTER [ROLE|USER] can't be empty"));
        }
        self.validate_options(options)?;
        let user = logged_in(login)?;
        if self.role(t, name)?.is_none() {
            return if if_exists {
                Ok(ResultBody::Void)
            } else {
                Err(QueryError::Invalid(format!("Role {name} doesn't exist")))
            };
        }
        let caller_is_super = self.is_super(t, user)?;
        if options.superuser.is_some() {
            if self.granted(t, user, true)?.contains_key(name) {
                return Err(QueryError::Unauthorized(
                    "You aren't allowed to alter your own superuser status or that of a role granted to you".into(),
                ));
            }
            if !caller_is_super {
                return Err(QueryError::Unauthorized("Only superusers are allowed to alter superuser status".into()));
            }
        }
        if !caller_is_super {
            if name == user {
                if options.login.is_some() {
                    return Err(QueryError::Unauthorized("You aren't allowed to alter LOGIN".into()));
                }
            } else {
                self.check_role_permission(t, user, Permission::Alter, &AuthResource::Role(name.to_string()))?;
            }
        }
        let mut sets = Vec::new();
        let mut values = Vec::new();
        if let Some(hash) = Auth::new_hash(options)? {
            sets.push("salted_hash = ?");
            values.push(Value::Text(hash));
        }
        if let Some(login) = options.login {
            sets.push("can_login = ?");
            values.push(Value::Boolean(login));
        }
        if let Some(superuser) = options.superuser {
            sets.push("is_superuser = ?");
            values.push(Value::Boolean(superuser));
        }
        values.push(Value::Text(name.to_string()));
        let cql = format!("UPDATE system_auth.roles SET {} WHERE role = ?", sets.join(", "));
        t.modify(&[(&cql, values)], WRITE_CL)?;
        self.invalidate([name]);
        Ok(ResultBody::Void)
    }

    fn drop_role(
        &self,
        t: &dyn AuthTables,
        name: &str,
        if_exists: bool,
        login: Option<&str>,
    ) -> Result<ResultBody, QueryError> {
        let user = logged_in(login)?;
        let Some(role) = self.role(t, name)? else {
            return if if_exists {
                Ok(ResultBody::Void)
            } else {
                Err(QueryError::Invalid(format!("{name} doesn't exist")))
            };
        };
        if name == user {
            return Err(QueryError::invalid("Cannot DROP primary role for current login"));
        }
        self.check_role_permission(t, user, Permission::Drop, &AuthResource::Role(name.to_string()))?;
        if self.is_super(t, name)? && !self.is_super(t, user)? {
            return Err(QueryError::Unauthorized("Only superusers can drop a role with superuser status".into()));
        }
        let text = |s: &str| Value::Text(s.to_string());
        // The roles it was granted to lose it; it loses the roles granted to it.
        let members = t.select(
            "SELECT member FROM system_auth.role_members WHERE role = ?",
            &[text(name)],
            Consistency::LocalQuorum,
        )?;
        let members: Vec<String> = members.iter().filter_map(|r| r.first().and_then(cell_text)).collect();
        let mut writes: Vec<(&str, Vec<Value>)> = Vec::new();
        for member in &members {
            writes.push((
                "UPDATE system_auth.roles SET member_of = member_of - ? WHERE role = ?",
                vec![text_set([name.to_string()]), text(member)],
            ));
        }
        writes.push(("DELETE FROM system_auth.role_members WHERE role = ?", vec![text(name)]));
        for granted in &role.member_of {
            writes.push((
                "DELETE FROM system_auth.role_members WHERE role = ? AND member = ?",
                vec![text(granted), text(name)],
            ));
        }
        writes.push(("DELETE FROM system_auth.roles WHERE role = ?", vec![text(name)]));
        t.modify(&writes, WRITE_CL)?;
        self.invalidate(members.iter().map(String::as_str).chain([name]));
        if self.authorizer.enabled() {
            self.revoke_all_from(t, name)?;
            self.revoke_all_on(t, &AuthResource::Role(name.to_string()))?;
        }
        Ok(ResultBody::Void)
    }

    /// GRANT role TO grantee: AUTHORIZE on the granted role; no cycles.
    fn grant_role(
        &self,
        t: &dyn AuthTables,
        role: &str,
        grantee: &str,
        login: Option<&str>,
    ) -> Result<ResultBody, QueryError> {
        let user = logged_in(login)?;
        for r in [role, grantee] {
            if self.role(t, r)?.is_none() {
                return Err(QueryError::Invalid(format!("{r} doesn't exist")));
            }
        }
        self.check_role_permission(t, user, Permission::Authorize, &AuthResource::Role(role.to_string()))?;
        // A grantee that holds the role already, or a role that holds the grantee (a cycle).
        if self.granted(t, grantee, true)?.contains_key(role) {
            return Err(QueryError::Invalid(format!("{grantee} is a member of {role}")));
        }
        if self.granted(t, role, true)?.contains_key(grantee) {
            return Err(QueryError::Invalid(format!("{role} is a member of {grantee}")));
        }
        let text = |s: &str| Value::Text(s.to_string());
        t.modify(
            &[
                (
                    "UPDATE system_auth.roles SET member_of = member_of + ? WHERE role = ?",
                    vec![text_set([role.to_string()]), text(grantee)],
                ),
                ("INSERT INTO system_auth.role_members (role, member) VALUES (?, ?)", vec![text(role), text(grantee)]),
            ],
            WRITE_CL,
        )?;
        self.invalidate([grantee]);
        Ok(ResultBody::Void)
    }

    /// REVOKE role FROM revokee.
    fn revoke_role(
        &self,
        t: &dyn AuthTables,
        role: &str,
        revokee: &str,
        login: Option<&str>,
    ) -> Result<ResultBody, QueryError> {
        let user = logged_in(login)?;
        for r in [role, revokee] {
            if self.role(t, r)?.is_none() {
                return Err(QueryError::Invalid(format!("{r} doesn't exist")));
            }
        }
        self.check_role_permission(t, user, Permission::Authorize, &AuthResource::Role(role.to_string()))?;
        if !self.role(t, revokee)?.is_some_and(|r| r.member_of.contains(role)) {
            return Err(QueryError::Invalid(format!("{revokee} is not a member of {role}")));
        }
        let text = |s: &str| Value::Text(s.to_string());
        t.modify(
            &[
                (
                    "UPDATE system_auth.roles SET member_of = member_of - ? WHERE role = ?",
                    vec![text_set([role.to_string()]), text(revokee)],
                ),
                ("DELETE FROM system_auth.role_members WHERE role = ? AND member = ?", vec![text(role), text(revokee)]),
            ],
            WRITE_CL,
        )?;
        self.invalidate([revokee]);
        Ok(ResultBody::Void)
    }

    /// The roles a LIST shows `user`: every role for a role with DESCRIBE on
    /// ALL ROLES (superusers), else its own and those granted to it.
    fn visible(
        &self,
        t: &dyn AuthTables,
        user: &str,
        of: Option<&str>,
        recursive: bool,
    ) -> Result<Vec<Role>, QueryError> {
        let describe_all = self.has_permission(t, user, Permission::Describe, &AuthResource::AllRoles)?;
        let roles: BTreeMap<String, Role> = match of {
            None if describe_all => return self.all_roles(t),
            None => self.granted(t, user, recursive)?,
            Some(of) => {
                if self.role(t, of)?.is_none() {
                    return Err(QueryError::Invalid(format!("<role {of}> doesn't exist")));
                }
                if !describe_all && !self.granted(t, user, true)?.contains_key(of) {
                    return Err(QueryError::Unauthorized(format!(
                        "You are not authorized to view roles granted to {of}"
                    )));
                }
                self.granted(t, of, recursive)?
            }
        };
        Ok(roles.into_values().collect())
    }

    fn list_roles(
        &self,
        t: &dyn AuthTables,
        of: Option<&str>,
        recursive: bool,
        login: Option<&str>,
    ) -> Result<ResultBody, QueryError> {
        let user = logged_in(login)?;
        let roles = self.visible(t, user, of, recursive)?;
        if roles.is_empty() {
            return Ok(ResultBody::Void);
        }
        let columns = vec![
            spec("roles", "role", CqlType::Text),
            spec("roles", "super", CqlType::Boolean),
            spec("roles", "login", CqlType::Boolean),
            spec(
                "roles",
                "options",
                CqlType::Map { key: Box::new(CqlType::Text), value: Box::new(CqlType::Text), frozen: false },
            ),
            spec("roles", "datacenters", CqlType::Text),
        ];
        let mut writer = RowsWriter::new(columns.len());
        for role in roles {
            writer.push_cell(Some(role.role.as_bytes()));
            writer.push_cell(Some(&Value::Boolean(role.is_superuser).to_bytes()));
            writer.push_cell(Some(&Value::Boolean(role.can_login).to_bytes()));
            writer.push_cell(Some(&Value::Map(Vec::new()).to_bytes()));
            writer.push_cell(Some(b"ALL"));
            writer.end_row();
        }
        Ok(ResultBody::Rows(writer.finish(RowsMetadata::new(columns))))
    }

    fn list_users(&self, t: &dyn AuthTables, login: Option<&str>) -> Result<ResultBody, QueryError> {
        let user = logged_in(login)?;
        let roles: Vec<Role> = self.visible(t, user, None, false)?.into_iter().filter(|r| r.can_login).collect();
        if roles.is_empty() {
            return Ok(ResultBody::Void);
        }
        let columns = vec![
            spec("users", "name", CqlType::Text),
            spec("users", "super", CqlType::Boolean),
            spec("users", "datacenters", CqlType::Text),
        ];
        let mut writer = RowsWriter::new(columns.len());
        for role in roles {
            writer.push_cell(Some(role.role.as_bytes()));
            writer.push_cell(Some(&Value::Boolean(self.is_super(t, &role.role)?).to_bytes()));
            writer.push_cell(Some(b"ALL"));
            writer.end_row();
        }
        Ok(ResultBody::Rows(writer.finish(RowsMetadata::new(columns))))
    }
}

pub(crate) fn spec(table: &str, name: &str, ty: CqlType) -> ColumnSpec {
    ColumnSpec { keyspace: "system_auth".into(), table: table.into(), name: name.into(), ty }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_plain_token_decodes_from_the_end() {
        let c = decode_plain(b"\0cassandra\0secret").unwrap();
        assert_eq!(c, Credentials { username: "cassandra".into(), password: "secret".into() });
        // A non-empty authzid is ignored.
        let c = decode_plain(b"admin\0alice\0p").unwrap();
        assert_eq!((c.username.as_str(), c.password.as_str()), ("alice", "p"));
    }

    #[test]
    fn a_bad_plain_token_gets_cassandras_messages() {
        assert_eq!(decode_plain(b"\0alice\0").unwrap_err(), "Password must not be null");
        assert_eq!(decode_plain(b"").unwrap_err(), "Password must not be null");
        assert_eq!(decode_plain(b"alice\0p").unwrap_err(), "Authentication ID must not be null");
        assert_eq!(decode_plain(b"\0\0p").unwrap_err(), "Authentication ID must not be null");
        assert_eq!(
            decode_plain(b"\0a\0b\0c").unwrap_err(),
            "Credential format error: username or password is empty or contains NUL(\\0) character"
        );
    }

    #[test]
    fn hashes_are_jbcrypt_2a_cost_10_and_verify() {
        let hash = hash_password("p4ss").unwrap();
        assert!(hash.starts_with("$2a$10$"), "{hash}");
        assert_eq!(hash.len(), 60);
        assert_eq!(verify_password("p4ss", &hash), Some(true));
        assert_eq!(verify_password("wrong", &hash), Some(false));
        assert_eq!(verify_password("p4ss", "not a hash"), None);
    }

    #[test]
    fn a_hash_written_by_jbcrypt_verifies() {
        // jBCrypt's published test vector: hashpw("", "$2a$06$DCq7YPn5Rq63x1Lad4cll.").
        let hash = "$2a$06$DCq7YPn5Rq63x1Lad4cll.TV4S6ytwfsfvkgY8jIucDrjc8deX1s.";
        assert_eq!(verify_password("", hash), Some(true));
        assert_eq!(verify_password("x", hash), Some(false));
        // The `$2a$10$` example from Cassandra's documentation parses (its password is not given).
        assert!(verify_password("x", "$2a$10$JSJEMFm6GeaW9XxT5JIheuEtPvat6i7uKbnTcxX3c1wshIIsGyUtG").is_some());
    }

    #[test]
    fn authenticator_names() {
        assert_eq!(Authenticator::parse("PasswordAuthenticator"), Some(Authenticator::Password));
        assert_eq!(
            Authenticator::parse("org.apache.cassandra.auth.PasswordAuthenticator"),
            Some(Authenticator::Password)
        );
        assert_eq!(Authenticator::parse("AllowAllAuthenticator"), Some(Authenticator::AllowAll));
        assert_eq!(Authenticator::parse("LdapAuthenticator"), None);
    }

    #[test]
    fn failed_logins_are_slowed_after_the_free_ones() {
        assert_eq!(LoginThrottle::delay(FREE_FAILURES), FIRST_LOGIN_DELAY);
        assert_eq!(LoginThrottle::delay(FREE_FAILURES + 1), FIRST_LOGIN_DELAY * 2);
        assert_eq!(LoginThrottle::delay(FREE_FAILURES + 40), MAX_LOGIN_DELAY);
        let throttle = LoginThrottle::default();
        let (a, b): (std::net::IpAddr, std::net::IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        for _ in 1..FREE_FAILURES {
            throttle.failed(a);
            assert_eq!(throttle.wait(a), Duration::ZERO);
        }
        assert_eq!(throttle.failed(a), FREE_FAILURES);
        assert!(throttle.wait(a) > Duration::ZERO && throttle.wait(a) <= FIRST_LOGIN_DELAY);
        // Another address is not slowed.
        assert_eq!(throttle.wait(b), Duration::ZERO);
    }
}
