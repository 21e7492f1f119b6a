//! The audit log (cassandra.yaml's `audit_logging_options`, Cassandra's
//! `FileAuditLogger`): one line per login, statement, prepare and failure,
//! in Cassandra's format (`user:…|host:…|source:…|port:…|timestamp:…|
//! type:…|category:…|ks:…|scope:…|operation:…`), filtered by keyspace,
//! category and user, written by a thread of its own to rolling files.
//!
//! Invariants:
//! - A password never reaches the log: the string literal after `PASSWORD`
//!   (and `HASHED PASSWORD`) is replaced by `*******`; where the text after
//!   `PASSWORD` is not a plain literal, everything after the keyword is.
//!   Bound values are never logged.
//! - Requests never wait on the disk: lines go through a bounded queue
//!   (`max_queue_weight` bytes) to the writer thread. When it is full, a
//!   request waits for room with `block: true` (Cassandra's default: no
//!   audit line is lost) and the line is dropped and counted otherwise.
//! - Files roll with `roll_cycle` (`audit-YYYYMMDD-HHMM.log` names sort by
//!   time); the oldest are deleted while the directory holds more than
//!   `max_log_size` bytes.

use std::collections::BTreeSet;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use cql::ast::Statement;

use crate::error::QueryError;

/// Cassandra's `AuditLogEntryCategory`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Category {
    Query,
    Dml,
    Ddl,
    Dcl,
    Other,
    Auth,
    Error,
    Prepare,
}

impl Category {
    pub fn name(self) -> &'static str {
        match self {
            Category::Query => "QUERY",
            Category::Dml => "DML",
            Category::Ddl => "DDL",
            Category::Dcl => "DCL",
            Category::Other => "OTHER",
            Category::Auth => "AUTH",
            Category::Error => "ERROR",
            Category::Prepare => "PREPARE",
        }
    }

    pub fn parse(name: &str) -> Option<Category> {
        [
            Category::Query,
            Category::Dml,
            Category::Ddl,
            Category::Dcl,
            Category::Other,
            Category::Auth,
            Category::Error,
            Category::Prepare,
        ]
        .into_iter()
        .find(|c| c.name().eq_ignore_ascii_case(name.trim()))
    }
}

/// How often a new file is started (Chronicle's roll cycles, the common ones).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RollCycle {
    Minutely,
    #[default]
    Hourly,
    Daily,
}

impl RollCycle {
    pub fn parse(name: &str) -> Option<RollCycle> {
        match name.trim().to_ascii_uppercase().as_str() {
            "MINUTELY" => Some(RollCycle::Minutely),
            "HOURLY" => Some(RollCycle::Hourly),
            "DAILY" => Some(RollCycle::Daily),
            _ => None,
        }
    }

    fn seconds(self) -> u64 {
        match self {
            RollCycle::Minutely => 60,
            RollCycle::Hourly => 3600,
            RollCycle::Daily => 86_400,
        }
    }
}

/// `audit_logging_options`, as the node read them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuditOptions {
    pub enabled: bool,
    pub dir: PathBuf,
    pub included_keyspaces: BTreeSet<String>,
    pub excluded_keyspaces: BTreeSet<String>,
    pub included_categories: BTreeSet<Category>,
    pub excluded_categories: BTreeSet<Category>,
    pub included_users: BTreeSet<String>,
    pub excluded_users: BTreeSet<String>,
    pub roll_cycle: RollCycle,
    pub block: bool,
    pub max_queue_weight: u64,
    pub max_log_size: u64,
}

impl AuditOptions {
    /// Cassandra's defaults, logging to `dir`.
    pub fn new(dir: PathBuf) -> AuditOptions {
        AuditOptions {
            enabled: false,
            dir,
            included_keyspaces: BTreeSet::new(),
            excluded_keyspaces: ["system", "system_schema", "system_virtual_schema"].map(String::from).into(),
            included_categories: BTreeSet::new(),
            excluded_categories: BTreeSet::new(),
            included_users: BTreeSet::new(),
            excluded_users: BTreeSet::new(),
            roll_cycle: RollCycle::Hourly,
            block: true,
            max_queue_weight: 256 << 20,
            max_log_size: 16 << 30,
        }
    }

    /// Whether an entry passes the filters (Cassandra's `AuditLogFilter`:
    /// an excluded item wins; a non-empty include list admits only its items).
    fn admits(&self, category: Category, keyspace: Option<&str>, user: Option<&str>) -> bool {
        let passes = |included: &BTreeSet<String>, excluded: &BTreeSet<String>, item: Option<&str>| match item {
            Some(item) => !excluded.contains(item) && (included.is_empty() || included.contains(item)),
            None => true,
        };
        let category_ok = !self.excluded_categories.contains(&category)
            && (self.included_categories.is_empty() || self.included_categories.contains(&category));
        category_ok
            && passes(&self.included_keyspaces, &self.excluded_keyspaces, keyspace)
            && passes(&self.included_users, &self.excluded_users, user)
    }
}

/// What one line says.
pub struct Entry<'a> {
    pub user: Option<&'a str>,
    pub source: SocketAddr,
    pub kind: &'static str,
    pub category: Category,
    pub keyspace: Option<&'a str>,
    pub scope: Option<&'a str>,
    /// The statement text (passwords already redacted) or an error's message.
    pub operation: Option<&'a str>,
}

/// The queue between requests and the writer thread.
struct Queue {
    lines: Mutex<(std::collections::VecDeque<String>, u64, bool)>,
    ready: Condvar,
    room: Condvar,
}

/// A running audit log.
pub struct AuditLog {
    options: AuditOptions,
    /// This node, as `host:` shows it (`address:storage_port`).
    host: String,
    queue: Arc<Queue>,
    dropped: AtomicU64,
    writer: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl AuditLog {
    /// Starts the writer thread; None when auditing is off.
    pub fn start(options: AuditOptions, host: String) -> std::io::Result<Option<Arc<AuditLog>>> {
        if !options.enabled {
            return Ok(None);
        }
        std::fs::create_dir_all(&options.dir)?;
        let queue = Arc::new(Queue {
            lines: Mutex::new((std::collections::VecDeque::new(), 0, false)),
            ready: Condvar::new(),
            room: Condvar::new(),
        });
        let writer = {
            let (queue, options) = (Arc::clone(&queue), options.clone());
            std::thread::Builder::new().name("audit-log".into()).spawn(move || write_loop(&queue, &options))?
        };
        tracing::info!(dir = %options.dir.display(), "audit logging enabled");
        Ok(Some(Arc::new(AuditLog {
            options,
            host,
            queue,
            dropped: AtomicU64::new(0),
            writer: Mutex::new(Some(writer)),
        })))
    }

    /// Lines dropped because the queue was full (`block: false`).
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Logs one entry if the filters admit it. Its operation is written as
    /// given: statement text must have been through `redact_passwords`.
    pub fn log(&self, entry: &Entry<'_>) {
        if !self.options.admits(entry.category, entry.keyspace, entry.user) {
            return;
        }
        let timestamp = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis()).unwrap_or(0);
        let mut line = format!(
            "user:{}|host:{}|source:/{}|port:{}|timestamp:{timestamp}|type:{}|category:{}",
            entry.user.unwrap_or("anonymous"),
            self.host,
            entry.source.ip(),
            entry.source.port(),
            entry.kind,
            entry.category.name(),
        );
        if let Some(ks) = entry.keyspace {
            line.push_str(&format!("|ks:{ks}"));
        }
        if let Some(scope) = entry.scope {
            line.push_str(&format!("|scope:{scope}"));
        }
        if let Some(operation) = entry.operation {
            // One line per entry: line breaks in statements become spaces.
            line.push_str(&format!("|operation:{}", operation.replace(['\n', '\r'], " ")));
        }
        line.push('\n');
        self.enqueue(line);
    }

    fn enqueue(&self, line: String) {
        let weight = line.len() as u64;
        let mut q = self.queue.lines.lock().unwrap_or_else(|p| p.into_inner());
        while q.1 + weight > self.options.max_queue_weight && !q.0.is_empty() {
            if !self.options.block {
                self.dropped.fetch_add(1, Ordering::Relaxed);
                return;
            }
            q = self.queue.room.wait(q).unwrap_or_else(|p| p.into_inner());
        }
        q.1 += weight;
        q.0.push_back(line);
        self.queue.ready.notify_one();
    }

    /// Logs a request's statement: its type and category as Cassandra
    /// names them, or REQUEST_FAILURE / UNAUTHORIZED_ATTEMPT when it failed.
    #[allow(clippy::too_many_arguments)]
    pub fn statement(
        &self,
        user: Option<&str>,
        source: SocketAddr,
        statement: Option<&Statement>,
        session: Option<&str>,
        text: &str,
        prepare: bool,
        outcome: Result<(), &QueryError>,
    ) {
        let (kind, category, keyspace, scope) = match statement {
            Some(st) => classify(st, session),
            None => ("REQUEST_FAILURE", Category::Error, session.map(str::to_string), None),
        };
        let (kind, category) = if prepare { ("PREPARE_STATEMENT", Category::Prepare) } else { (kind, category) };
        let text = redact_passwords(text);
        let failure;
        let (kind, category, operation) = match outcome {
            Ok(()) => (kind, category, text.as_str()),
            Err(QueryError::Unauthorized(message)) => {
                failure = format!("{text}; {message}");
                ("UNAUTHORIZED_ATTEMPT", Category::Auth, failure.as_str())
            }
            Err(e) => {
                failure = format!("{text}; {e}");
                ("REQUEST_FAILURE", Category::Error, failure.as_str())
            }
        };
        self.log(&Entry {
            user,
            source,
            kind,
            category,
            keyspace: keyspace.as_deref(),
            scope: scope.as_deref(),
            operation: Some(operation),
        });
    }

    /// Logs a login: LOGIN_SUCCESS or LOGIN_ERROR (category AUTH).
    pub fn login(&self, user: &str, source: SocketAddr, outcome: Result<(), &str>) {
        let (kind, operation) = match outcome {
            Ok(()) => ("LOGIN_SUCCESS", None),
            Err(message) => ("LOGIN_ERROR", Some(message)),
        };
        self.log(&Entry {
            user: Some(user),
            source,
            kind,
            category: Category::Auth,
            keyspace: None,
            scope: None,
            operation,
        });
    }

    /// Writes what is queued and stops the writer (the node is stopping).
    pub fn close(&self) {
        {
            let mut q = self.queue.lines.lock().unwrap_or_else(|p| p.into_inner());
            q.2 = true;
            self.queue.ready.notify_all();
        }
        if let Some(writer) = self.writer.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = writer.join();
        }
    }
}

impl Drop for AuditLog {
    fn drop(&mut self) {
        self.close();
    }
}

/// The type, category, keyspace and scope (table, type or role) Cassandra's
/// audit log gives a statement.
pub fn classify(st: &Statement, session: Option<&str>) -> (&'static str, Category, Option<String>, Option<String>) {
    use Statement as S;
    let ks_of = |q: &cql::ast::QualifiedName| q.keyspace.clone().or_else(|| session.map(str::to_string));
    let table = |kind, category, q: &cql::ast::QualifiedName| (kind, category, ks_of(q), Some(q.name.clone()));
    let keyspace = |kind, category, ks: &str| (kind, category, Some(ks.to_string()), None);
    let role = |kind, name: &str| (kind, Category::Dcl, None, Some(name.to_string()));
    match st {
        S::Select(s) => table("SELECT", Category::Query, &s.table),
        S::Insert(i) => table("UPDATE", Category::Dml, &i.table),
        S::Update(u) => table("UPDATE", Category::Dml, &u.table),
        S::Delete(d) => table("DELETE", Category::Dml, &d.table),
        S::Batch(_) => ("BATCH", Category::Dml, session.map(str::to_string), None),
        S::Use { keyspace: ks } => keyspace("USE_KEYSPACE", Category::Other, ks),
        S::Truncate { table: q } => table("TRUNCATE", Category::Ddl, q),
        S::CreateKeyspace(c) => keyspace("CREATE_KEYSPACE", Category::Ddl, &c.keyspace),
        S::AlterKeyspace(a) => keyspace("ALTER_KEYSPACE", Category::Ddl, &a.keyspace),
        S::DropKeyspace { keyspace: ks, .. } => keyspace("DROP_KEYSPACE", Category::Ddl, ks),
        S::CreateTable(c) => table("CREATE_TABLE", Category::Ddl, &c.table),
        S::AlterTable(a) => table("ALTER_TABLE", Category::Ddl, &a.table),
        S::DropTable { table: q, .. } => table("DROP_TABLE", Category::Ddl, q),
        S::CreateIndex(c) => table("CREATE_INDEX", Category::Ddl, &c.table),
        S::DropIndex { name, .. } => table("DROP_INDEX", Category::Ddl, name),
        S::CreateType(c) => table("CREATE_TYPE", Category::Ddl, &c.name),
        S::AlterType(a) => table("ALTER_TYPE", Category::Ddl, &a.name),
        S::DropType { name, .. } => table("DROP_TYPE", Category::Ddl, name),
        S::Describe(_) => ("DESCRIBE", Category::Other, session.map(str::to_string), None),
        S::CreateRole(c) => role("CREATE_ROLE", &c.name),
        S::AlterRole(a) => role("ALTER_ROLE", &a.name),
        S::DropRole { name, .. } => role("DROP_ROLE", name),
        S::ListRoles { .. } => ("LIST_ROLES", Category::Dcl, None, None),
        S::ListUsers => ("LIST_USERS", Category::Dcl, None, None),
        S::GrantRole { grantee, .. } => role("GRANT", grantee),
        S::RevokeRole { revokee, .. } => role("REVOKE", revokee),
        S::GrantPermissions(c) => role("GRANT", &c.grantee),
        S::RevokePermissions(c) => role("REVOKE", &c.grantee),
        S::ListPermissions(_) => ("LIST_PERMISSIONS", Category::Dcl, None, None),
        S::Unsupported { .. } => ("REQUEST_FAILURE", Category::Error, session.map(str::to_string), None),
    }
}

/// `text` with every password literal replaced by `*******`: the quoted
/// string after the keyword PASSWORD (optionally `=`); where none follows,
/// everything after the keyword (Cassandra 4.0's `PasswordObfuscator`).
pub fn redact_passwords(text: &str) -> String {
    const TOKEN: &str = "*******";
    let lower = text.to_ascii_lowercase();
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    while let Some(found) = lower.get(at..).and_then(|rest| rest.find("password")).map(|i| at + i) {
        let after_keyword = found + "password".len();
        out.push_str(text.get(at..after_keyword).unwrap_or_default());
        let rest = text.get(after_keyword..).unwrap_or_default();
        let trimmed = rest.trim_start_matches(|c: char| c.is_whitespace() || c == '=');
        let skipped = rest.len() - trimmed.len();
        let literal_end = if let Some(body) = trimmed.strip_prefix('\'') {
            // A '…' literal, '' escaping a quote.
            let bytes = body.as_bytes();
            let mut i = 0;
            loop {
                match bytes.get(i) {
                    Some(b'\'') if bytes.get(i + 1) == Some(&b'\'') => i += 2,
                    Some(b'\'') => break Some(1 + i + 1),
                    Some(_) => i += 1,
                    None => break None,
                }
            }
        } else if let Some(body) = trimmed.strip_prefix("$$") {
            body.find("$$").map(|end| 2 + end + 2)
        } else {
            None
        };
        match literal_end {
            Some(len) => {
                out.push_str(rest.get(..skipped).unwrap_or_default());
                out.push('\'');
                out.push_str(TOKEN);
                out.push('\'');
                at = after_keyword + skipped + len;
            }
            None => {
                out.push(' ');
                out.push_str(TOKEN);
                return out;
            }
        }
    }
    out.push_str(text.get(at..).unwrap_or_default());
    out
}

fn write_loop(queue: &Queue, options: &AuditOptions) {
    let mut current: Option<(u64, std::io::BufWriter<std::fs::File>)> = None;
    loop {
        let batch: Vec<String> = {
            let mut q = queue.lines.lock().unwrap_or_else(|p| p.into_inner());
            while q.0.is_empty() && !q.2 {
                q = queue.ready.wait_timeout(q, Duration::from_secs(1)).unwrap_or_else(|p| p.into_inner()).0;
            }
            if q.0.is_empty() && q.2 {
                break;
            }
            let lines: Vec<String> = q.0.drain(..).collect();
            q.1 = 0;
            queue.room.notify_all();
            lines
        };
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
        let cycle = now / options.roll_cycle.seconds();
        if current.as_ref().is_none_or(|(c, _)| *c != cycle) {
            if let Some((_, mut w)) = current.take() {
                let _ = w.flush();
            }
            let path = options.dir.join(file_name(cycle * options.roll_cycle.seconds()));
            match std::fs::OpenOptions::new().create(true).append(true).open(&path) {
                Ok(file) => current = Some((cycle, std::io::BufWriter::new(file))),
                Err(e) => {
                    tracing::error!(path = %path.display(), "cannot open the audit log: {e}; {} lines lost", batch.len());
                    continue;
                }
            }
            trim(options);
        }
        if let Some((_, w)) = current.as_mut() {
            let written = batch.iter().try_for_each(|line| w.write_all(line.as_bytes())).and_then(|()| w.flush());
            if let Err(e) = written {
                tracing::error!("cannot write the audit log: {e}");
            }
        }
    }
    if let Some((_, mut w)) = current {
        let _ = w.flush();
    }
}

/// `audit-YYYYMMDD-HHMM.log` for the cycle starting at `unix_s` (UTC).
fn file_name(unix_s: u64) -> String {
    let days = (unix_s / 86_400) as i64;
    let (y, m, d) = civil_from_days(days);
    let secs = unix_s % 86_400;
    format!("audit-{y:04}{m:02}{d:02}-{:02}{:02}.log", secs / 3600, (secs % 3600) / 60)
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (Howard
/// Hinnant's well-known algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// Deletes the oldest audit files while the directory holds more than `max_log_size`.
fn trim(options: &AuditOptions) {
    let Ok(entries) = std::fs::read_dir(&options.dir) else { return };
    let mut files: Vec<(String, u64)> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let len = e.metadata().ok()?.len();
            (name.starts_with("audit-") && name.ends_with(".log")).then_some((name, len))
        })
        .collect();
    files.sort();
    let mut total: u64 = files.iter().map(|(_, len)| len).sum();
    // Never the newest (the one being written).
    for (name, len) in files.iter().take(files.len().saturating_sub(1)) {
        if total <= options.max_log_size {
            break;
        }
        if std::fs::remove_file(options.dir.join(name)).is_ok() {
            total -= len;
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(
            redact_passwords("CREATE ROLE a WITH PASSWORD = 'sec''ret' AND LOGIN = true"),
            "CREATE ROLE a WITH PASSWORD = '*******' AND LOGIN = true"
        );
        assert_eq!(redact_passwords("CREATE USER b WITH password 'x'"), "CREATE USER b WITH password '*******'");
        assert_eq!(
            redact_passwords("ALTER ROLE c WITH HASHED PASSWORD = '$2a$10$abc' AND PASSWORD=$$p$$"),
            "ALTER ROLE c WITH HASHED PASSWORD = '*******' AND PASSWORD='*******'"
        );
        // Not a literal: everything after the keyword goes.
        assert_eq!(redact_passwords("CREATE ROLE d WITH PASSWORD = ? AND x"), "CREATE ROLE d WITH PASSWORD *******");
        assert_eq!(
            redact_passwords("CREATE ROLE e WITH PASSWORD = 'unterminated"),
            "CREATE ROLE e WITH PASSWORD *******"
        );
        assert_eq!(redact_passwords("SELECT * FROM ks.t"), "SELECT * FROM ks.t");
    }

    #[test]
    fn filters_follow_cassandras_rules() {
        let mut o = AuditOptions::new(PathBuf::from("/nonexistent"));
        assert!(o.admits(Category::Dml, Some("ks"), Some("alice")));
        assert!(!o.admits(Category::Query, Some("system"), Some("alice")), "system is excluded by default");
        o.included_categories = [Category::Ddl, Category::Dcl].into();
        assert!(!o.admits(Category::Dml, Some("ks"), None));
        o.excluded_users = ["bob".to_string()].into();
        assert!(o.admits(Category::Ddl, Some("ks"), Some("alice")));
        assert!(!o.admits(Category::Ddl, Some("ks"), Some("bob")));
    }

    #[test]
    fn file_names_sort_by_time() {
        assert_eq!(file_name(0), "audit-19700101-0000.log");
        assert_eq!(file_name(1_795_000_000), "audit-20261118-1106.log");
        assert_eq!(civil_from_days(19_782), (2024, 2, 29));
    }

    #[test]
    fn lines_reach_the_file_in_cassandras_format() {
        let dir = tempfile::tempdir().unwrap();
        let mut options = AuditOptions::new(dir.path().to_path_buf());
        options.enabled = true;
        let log = AuditLog::start(options, "127.0.0.1:7000".into()).unwrap().unwrap();
        let source: SocketAddr = "127.0.0.2:50000".parse().unwrap();
        let st = cql::parse("CREATE ROLE x WITH PASSWORD = 'hunter2'").unwrap();
        log.statement(Some("admin"), source, Some(&st), None, "CREATE ROLE x WITH PASSWORD = 'hunter2'", false, Ok(()));
        log.login("admin", source, Err("Provided username admin and/or password are incorrect"));
        log.close();
        let text: String = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
            .collect();
        assert!(!text.contains("hunter2"), "{text}");
        let first = text.lines().next().unwrap();
        assert!(first.starts_with("user:admin|host:127.0.0.1:7000|source:/127.0.0.2|port:50000|timestamp:"), "{first}");
        assert!(
            first.ends_with("|type:CREATE_ROLE|category:DCL|scope:x|operation:CREATE ROLE x WITH PASSWORD = '*******'"),
            "{first}"
        );
        assert!(text.contains("|type:LOGIN_ERROR|category:AUTH|operation:Provided username admin"), "{text}");
    }
}
