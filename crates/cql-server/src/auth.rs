//! Password authentication and roles (Cassandra's `PasswordAuthenticator`
//! and `CassandraRoleManager`): the SASL PLAIN token, bcrypt hashes, the
//! role store (`system_auth.roles`), the default superuser, and the role
//! statements (`CREATE/ALTER/DROP ROLE|USER`, `LIST ROLES|USERS`).
//!
//! Invariants:
//! - Passwords are kept only as bcrypt hashes (`$2a$`, cost 10, as jBCrypt
//!   writes them); a password is never logged nor kept after hashing.
//! - Roles are node-local in this slice: the store is one record of the data
//!   directory's manifest (written atomically), so roles survive restarts but
//!   are NOT replicated; each node of a cluster holds its own roles and its
//!   own default superuser (ARCHITECTURE.md, "Authentication").
//! - Role changes are serialized (`write` lock) and persisted before they are
//!   visible; a failed write leaves the visible roles unchanged.
//! - Only superusers create, drop or alter other roles (as Cassandra with
//!   `CassandraAuthorizer` and no grants); any role may change its own
//!   password. With `AllowAllAuthenticator` every session is anonymous and
//!   every role statement is refused, with Cassandra's messages.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, RwLock};

use cql::ast::{RoleOptions, Statement};
use cql_protocol::{ColumnSpec, ResultBody, RowsMetadata, RowsWriter};
use storage::Storage;
use types::schema::TableDef;
use types::{CqlType, Value};

use crate::error::QueryError;

/// The class name sent in AUTHENTICATE (what drivers expect from Cassandra).
pub const PASSWORD_AUTHENTICATOR: &str = "org.apache.cassandra.auth.PasswordAuthenticator";
/// The role manager named in "doesn't support" messages.
pub const ROLE_MANAGER: &str = "org.apache.cassandra.auth.CassandraRoleManager";
/// The default superuser's name and password.
pub const DEFAULT_SUPERUSER: &str = "cassandra";
/// bcrypt's cost (log2 rounds), Cassandra's default.
pub const BCRYPT_COST: u32 = 10;
/// The node-local metadata key holding the roles (JSON).
const ROLES_KEY: &str = "system_auth.roles";

const ANONYMOUS: &str = "You have to be logged in and not anonymous to perform this request";

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

/// The role a session logged in as; Unauthorized for an anonymous session.
fn logged_in(login: Option<&str>) -> Result<&str, QueryError> {
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

/// A row of `system_auth.roles`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Role {
    pub role: String,
    pub is_superuser: bool,
    pub can_login: bool,
    #[serde(default)]
    pub member_of: BTreeSet<String>,
    #[serde(default)]
    pub salted_hash: Option<String>,
}

/// The roles and the authenticator in force.
pub struct Auth {
    pub authenticator: Authenticator,
    storage: Arc<Storage>,
    roles: RwLock<BTreeMap<String, Role>>,
    /// Serializes role changes (read, change, persist, publish).
    write: Mutex<()>,
}

impl Auth {
    /// Loads the roles kept in `storage` (none on a fresh node).
    pub fn new(storage: Arc<Storage>, authenticator: Authenticator) -> Auth {
        let roles = match storage.local_get(ROLES_KEY) {
            Some(text) => serde_json::from_str::<Vec<Role>>(&text).unwrap_or_else(|e| {
                tracing::error!("cannot read the roles kept in this data directory ({e}); starting with none");
                Vec::new()
            }),
            None => Vec::new(),
        };
        Auth {
            authenticator,
            storage,
            roles: RwLock::new(roles.into_iter().map(|r| (r.role.clone(), r)).collect()),
            write: Mutex::new(()),
        }
    }

    /// One role, as stored now.
    pub fn role(&self, name: &str) -> Option<Role> {
        self.roles.read().unwrap_or_else(|p| p.into_inner()).get(name).cloned()
    }

    fn all(&self) -> Vec<Role> {
        self.roles.read().unwrap_or_else(|p| p.into_inner()).values().cloned().collect()
    }

    /// Applies `change` to a copy of the roles, persists the result, then
    /// makes it visible.
    fn update<T>(
        &self,
        change: impl FnOnce(&mut BTreeMap<String, Role>) -> Result<T, QueryError>,
    ) -> Result<T, QueryError> {
        let _guard = self.write.lock().unwrap_or_else(|p| p.into_inner());
        let mut roles = self.roles.read().unwrap_or_else(|p| p.into_inner()).clone();
        let out = change(&mut roles)?;
        let list: Vec<&Role> = roles.values().collect();
        let text = serde_json::to_string(&list).map_err(|e| QueryError::Server(format!("cannot encode roles: {e}")))?;
        self.storage
            .local_set(ROLES_KEY, &text)
            .map_err(|e| QueryError::Server(format!("cannot persist roles: {e}")))?;
        *self.roles.write().unwrap_or_else(|p| p.into_inner()) = roles;
        Ok(out)
    }

    /// With `PasswordAuthenticator`, creates the default superuser
    /// `cassandra`/`cassandra` when no role exists (Cassandra's
    /// `CassandraRoleManager` setup), and warns while it still has its
    /// default password.
    pub fn setup(&self) -> Result<(), QueryError> {
        if !self.authenticator.requires_login() {
            return Ok(());
        }
        let created = self.update(|roles| {
            if !roles.is_empty() {
                return Ok(false);
            }
            let hash = hash_password(DEFAULT_SUPERUSER)?;
            roles.insert(
                DEFAULT_SUPERUSER.to_string(),
                Role {
                    role: DEFAULT_SUPERUSER.to_string(),
                    is_superuser: true,
                    can_login: true,
                    member_of: BTreeSet::new(),
                    salted_hash: Some(hash),
                },
            );
            Ok(true)
        })?;
        if created {
            tracing::info!("Created default superuser role '{DEFAULT_SUPERUSER}'");
        }
        let default_password = self
            .role(DEFAULT_SUPERUSER)
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
    pub fn login(&self, credentials: &Credentials) -> Result<String, String> {
        let username = &credentials.username;
        let incorrect = || format!("Provided username {username} and/or password are incorrect");
        let role = self.role(username).ok_or_else(incorrect)?;
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

    /// Whether `name` has superuser status, its own or through the roles
    /// granted to it.
    fn is_super(&self, name: &str) -> bool {
        let roles = self.roles.read().unwrap_or_else(|p| p.into_inner());
        closure(&roles, name).iter().any(|r| roles.get(r).is_some_and(|r| r.is_superuser))
    }

    /// Whether `login` (None: anonymous) may read `system_auth` tables.
    pub fn may_read_auth_tables(&self, login: Option<&str>) -> bool {
        match login {
            Some(user) => self.is_super(user),
            None => !self.authenticator.requires_login(),
        }
    }

    /// Runs a role statement for `login` (None: an anonymous session).
    pub fn execute(&self, statement: &Statement, login: Option<&str>) -> Result<ResultBody, QueryError> {
        match statement {
            Statement::CreateRole(c) => self.create(&c.name, c.if_not_exists, &c.options, login),
            Statement::AlterRole(a) => self.alter(&a.name, a.if_exists, &a.options, login),
            Statement::DropRole { name, if_exists } => self.drop_role(name, *if_exists, login),
            Statement::ListRoles { of, recursive } => self.list_roles(of.as_deref(), *recursive, login),
            Statement::ListUsers => self.list_users(login),
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

    /// The logged-in role of `login` if it is a superuser; Unauthorized
    /// otherwise (anonymous, or without superuser status).
    fn superuser<'a>(&self, login: Option<&'a str>) -> Result<&'a str, QueryError> {
        let user = logged_in(login)?;
        if !self.is_super(user) {
            return Err(Auth::insufficient(user));
        }
        Ok(user)
    }

    fn insufficient(user: &str) -> QueryError {
        QueryError::Unauthorized(format!(
            "User {user} does not have sufficient privileges to perform the requested operation"
        ))
    }

    fn create(
        &self,
        name: &str,
        if_not_exists: bool,
        options: &RoleOptions,
        login: Option<&str>,
    ) -> Result<ResultBody, QueryError> {
        self.validate_options(options)?;
        if name.is_empty() {
            return Err(QueryError::invalid("Role name can't be an empty string"));
        }
        self.superuser(login)?;
        if self.role(name).is_some() {
            return if if_not_exists {
                Ok(ResultBody::Void)
            } else {
                Err(QueryError::Invalid(format!("{name} already exists")))
            };
        }
        let salted_hash = Auth::new_hash(options)?;
        self.update(|roles| {
            if roles.contains_key(name) {
                return if if_not_exists { Ok(()) } else { Err(QueryError::Invalid(format!("{name} already exists"))) };
            }
            roles.insert(
                name.to_string(),
                Role {
                    role: name.to_string(),
                    is_superuser: options.superuser.unwrap_or(false),
                    can_login: options.login.unwrap_or(false),
                    member_of: BTreeSet::new(),
                    salted_hash,
                },
            );
            Ok(())
        })?;
        Ok(ResultBody::Void)
    }

    fn alter(
        &self,
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
        if self.role(name).is_none() {
            return if if_exists {
                Ok(ResultBody::Void)
            } else {
                Err(QueryError::Invalid(format!("Role {name} doesn't exist")))
            };
        }
        let caller_is_super = self.is_super(user);
        let own = {
            let roles = self.roles.read().unwrap_or_else(|p| p.into_inner());
            closure(&roles, user).contains(name)
        };
        if options.superuser.is_some() {
            if own {
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
                return Err(Auth::insufficient(user));
            }
        }
        let salted_hash = Auth::new_hash(options)?;
        self.update(|roles| {
            let Some(role) = roles.get_mut(name) else {
                return if if_exists { Ok(()) } else { Err(QueryError::Invalid(format!("Role {name} doesn't exist"))) };
            };
            if let Some(hash) = salted_hash {
                role.salted_hash = Some(hash);
            }
            if let Some(login) = options.login {
                role.can_login = login;
            }
            if let Some(superuser) = options.superuser {
                role.is_superuser = superuser;
            }
            Ok(())
        })?;
        Ok(ResultBody::Void)
    }

    fn drop_role(&self, name: &str, if_exists: bool, login: Option<&str>) -> Result<ResultBody, QueryError> {
        let user = self.superuser(login)?;
        if self.role(name).is_none() {
            return if if_exists {
                Ok(ResultBody::Void)
            } else {
                Err(QueryError::Invalid(format!("{name} doesn't exist")))
            };
        }
        if name == user {
            return Err(QueryError::invalid("Cannot DROP primary role for current login"));
        }
        self.update(|roles| {
            if roles.remove(name).is_none() && !if_exists {
                return Err(QueryError::Invalid(format!("{name} doesn't exist")));
            }
            for role in roles.values_mut() {
                role.member_of.remove(name);
            }
            Ok(())
        })?;
        Ok(ResultBody::Void)
    }

    /// The roles a LIST shows `user`: every role for a superuser, else its
    /// own and those granted to it.
    fn visible(&self, user: &str, of: Option<&str>, recursive: bool) -> Result<Vec<Role>, QueryError> {
        let roles = self.roles.read().unwrap_or_else(|p| p.into_inner());
        let is_super = closure(&roles, user).iter().any(|r| roles.get(r).is_some_and(|r| r.is_superuser));
        let names: BTreeSet<String> = match of {
            None if is_super => roles.keys().cloned().collect(),
            None => granted(&roles, user, recursive),
            Some(of) => {
                if !roles.contains_key(of) {
                    return Err(QueryError::Invalid(format!("<role {of}> doesn't exist")));
                }
                if !is_super && !closure(&roles, user).contains(of) {
                    return Err(QueryError::Unauthorized(format!(
                        "You are not authorized to view roles granted to {of}"
                    )));
                }
                granted(&roles, of, recursive)
            }
        };
        Ok(names.iter().filter_map(|n| roles.get(n).cloned()).collect())
    }

    fn list_roles(&self, of: Option<&str>, recursive: bool, login: Option<&str>) -> Result<ResultBody, QueryError> {
        let user = logged_in(login)?;
        let roles = self.visible(user, of, recursive)?;
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

    fn list_users(&self, login: Option<&str>) -> Result<ResultBody, QueryError> {
        let user = logged_in(login)?;
        let roles: Vec<Role> = self.visible(user, None, false)?.into_iter().filter(|r| r.can_login).collect();
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
            writer.push_cell(Some(&Value::Boolean(self.is_super(&role.role)).to_bytes()));
            writer.push_cell(Some(b"ALL"));
            writer.end_row();
        }
        Ok(ResultBody::Rows(writer.finish(RowsMetadata::new(columns))))
    }

    /// The rows of the virtual `system_auth.roles`, in `table`'s column order.
    pub fn table_rows(&self, table: &TableDef) -> Vec<Vec<Option<Vec<u8>>>> {
        self.all()
            .into_iter()
            .map(|r| {
                table
                    .columns
                    .iter()
                    .map(|c| match c.name.as_str() {
                        "role" => Some(r.role.as_bytes().to_vec()),
                        "is_superuser" => Some(Value::Boolean(r.is_superuser).to_bytes()),
                        "can_login" => Some(Value::Boolean(r.can_login).to_bytes()),
                        "member_of" if !r.member_of.is_empty() => {
                            Some(Value::Set(r.member_of.iter().cloned().map(Value::Text).collect()).to_bytes())
                        }
                        "salted_hash" => r.salted_hash.as_ref().map(|h| h.as_bytes().to_vec()),
                        _ => None,
                    })
                    .collect()
            })
            .collect()
    }
}

fn spec(table: &str, name: &str, ty: CqlType) -> ColumnSpec {
    ColumnSpec { keyspace: "system_auth".into(), table: table.into(), name: name.into(), ty }
}

/// `name` and every role granted to it, transitively.
fn closure(roles: &BTreeMap<String, Role>, name: &str) -> BTreeSet<String> {
    granted(roles, name, true)
}

/// `name` and the roles granted to it (directly, or transitively when `recursive`).
fn granted(roles: &BTreeMap<String, Role>, name: &str, recursive: bool) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut todo = vec![name.to_string()];
    let mut first = true;
    while let Some(next) = todo.pop() {
        if !out.insert(next.clone()) {
            continue;
        }
        if first || recursive {
            if let Some(role) = roles.get(&next) {
                todo.extend(role.member_of.iter().cloned());
            }
        }
        first = false;
    }
    out
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

    fn auth(dir: &std::path::Path) -> Auth {
        open(dir, Authenticator::Password)
    }

    fn open(dir: &std::path::Path, authenticator: Authenticator) -> Auth {
        let config = storage::StorageConfig {
            data_dir: dir.to_path_buf(),
            commitlog_sync: storage::CommitlogSync::Batch,
            cache_bytes: 8 << 20,
            memtable_bytes: 8 << 20,
            memtable_space: 64 << 20,
            tombstone_horizon: 0,
        };
        let (storage, _) = Storage::open(config).unwrap();
        Auth::new(Arc::new(storage), authenticator)
    }

    fn run(auth: &Auth, cql: &str, login: Option<&str>) -> Result<ResultBody, QueryError> {
        auth.execute(&cql::parse(cql).unwrap(), login)
    }

    #[test]
    fn roles_are_created_checked_and_kept_across_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        {
            let a = auth(dir.path());
            a.setup().unwrap();
            let creds = |u: &str, p: &str| Credentials { username: u.into(), password: p.into() };
            assert_eq!(a.login(&creds("cassandra", "cassandra")), Ok("cassandra".into()));
            assert_eq!(
                a.login(&creds("cassandra", "nope")),
                Err("Provided username cassandra and/or password are incorrect".into())
            );
            run(&a, "CREATE ROLE alice WITH PASSWORD = 'p' AND LOGIN = true", Some("cassandra")).unwrap();
            run(&a, "CREATE ROLE bob WITH PASSWORD = 'b'", Some("cassandra")).unwrap();
            assert_eq!(a.login(&creds("bob", "b")), Err("bob is not permitted to log in".into()));
            assert_eq!(
                run(&a, "CREATE ROLE carol", Some("alice")),
                Err(QueryError::Unauthorized(
                    "User alice does not have sufficient privileges to perform the requested operation".into()
                ))
            );
            run(&a, "ALTER ROLE alice WITH PASSWORD = 'q'", Some("alice")).unwrap();
            assert_eq!(
                run(&a, "ALTER ROLE alice WITH SUPERUSER = true", Some("alice")),
                Err(QueryError::Unauthorized(
                    "You aren't allowed to alter your own superuser status or that of a role granted to you".into()
                ))
            );
            assert_eq!(
                run(&a, "DROP ROLE cassandra", Some("cassandra")),
                Err(QueryError::Invalid("Cannot DROP primary role for current login".into()))
            );
            assert_eq!(
                run(&a, "DROP ROLE nobody", Some("cassandra")),
                Err(QueryError::Invalid("nobody doesn't exist".into()))
            );
            assert_eq!(
                run(&a, "CREATE ROLE alice", Some("cassandra")),
                Err(QueryError::Invalid("alice already exists".into()))
            );
            assert_eq!(run(&a, "CREATE ROLE IF NOT EXISTS alice", Some("cassandra")), Ok(ResultBody::Void));
        }
        let a = auth(dir.path());
        a.setup().unwrap();
        let creds = Credentials { username: "alice".into(), password: "q".into() };
        assert_eq!(a.login(&creds), Ok("alice".into()));
        assert_eq!(a.all().len(), 3);
        match run(&a, "LIST ROLES", Some("alice")).unwrap() {
            ResultBody::Rows(rows) => assert_eq!(rows.rows_count, 1),
            other => panic!("{other:?}"),
        }
        // Nothing to list (a session whose role was dropped meanwhile): VOID, not zero rows.
        assert_eq!(run(&a, "LIST ROLES", Some("ghost")), Ok(ResultBody::Void));
        assert_eq!(run(&a, "LIST USERS", Some("ghost")), Ok(ResultBody::Void));
    }

    #[test]
    fn anonymous_sessions_may_not_manage_roles() {
        let dir = tempfile::tempdir().unwrap();
        let a = open(dir.path(), Authenticator::AllowAll);
        a.setup().unwrap();
        assert_eq!(
            run(&a, "CREATE ROLE r WITH PASSWORD = 'x'", None),
            Err(QueryError::Invalid(format!("{ROLE_MANAGER} doesn't support PASSWORD")))
        );
        assert_eq!(run(&a, "LIST ROLES", None), Err(QueryError::Unauthorized(ANONYMOUS.into())));
        assert_eq!(
            run(&a, "CREATE ROLE r WITH OPTIONS = {'a': 'b'}", None),
            Err(QueryError::Invalid(format!("{ROLE_MANAGER} doesn't support OPTIONS")))
        );
    }
}
