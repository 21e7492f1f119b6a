//! The query processor: parses, prepares and executes statements, keeps the
//! prepared-statement cache, and applies writes at a consistency level.
//!
//! Invariants:
//! - A prepared statement's id is MD5(keyspace + query text), as Cassandra
//!   computes it, so re-preparing the same text gives the same id.
//! - Writes are applied atomically per request (one storage batch) after the
//!   consistency level was checked against the live replicas.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use bytes::Bytes;
use cql::ast::Statement;
use cql_protocol::{
    Batch, BatchStatement, BoundValue, BoundValues, Event, Prepared, PreparedMetadata, QueryParams, Request,
    ResultBody, RowsMetadata,
};
use storage::Storage;
use types::mutation::Mutation;
use types::schema::KeyspaceDef;
use types::{Consistency, WriteType};

use crate::auth::{Auth, AuthConfig, AuthTables};
use crate::bind::BindCtx;
use crate::cas;
use crate::clock::Clock;
use crate::data::{DataPlane, WriteGroup};
use crate::ddl;
use crate::error::QueryError;
use crate::modify::{self, Planned, WriteOpts};
use crate::prepare;
use crate::schema::{Schema, SchemaService};
use crate::select::{self, Page};
use crate::system::NodeInfo;

/// A prepared statement as cached.
pub struct PreparedEntry {
    pub query: String,
    pub keyspace: Option<String>,
    pub statement: Statement,
    /// What its executions plan once and share (a SELECT's selection).
    pub plans: select::PlanCache,
}

impl PreparedEntry {
    pub fn new(query: String, keyspace: Option<String>, statement: Statement) -> PreparedEntry {
        PreparedEntry { query, keyspace, statement, plans: select::PlanCache::default() }
    }
}

pub struct Processor {
    pub schema: Arc<SchemaService>,
    pub storage: Arc<Storage>,
    pub node: NodeInfo,
    pub clock: Clock,
    prepared: RwLock<HashMap<Bytes, Arc<PreparedEntry>>>,
    pub events: tokio::sync::broadcast::Sender<Event>,
    /// Where reads and writes go (this node alone, or the cluster).
    pub data: Arc<dyn DataPlane>,
    pub batch_limits: BatchLimits,
    /// The authenticator and authorizer in force, over `system_auth`.
    pub auth: Arc<Auth>,
    /// The audit log, when `audit_logging_options` enables it.
    pub audit: Option<Arc<crate::audit::AuditLog>>,
    /// Request tracing (`TRACING ON`, the trace probability); None: requests
    /// are never traced (tests without a writer).
    pub tracer: Option<Arc<trace::Tracer>>,
    /// The open client connections (`system_views.clients`).
    pub clients: Arc<crate::views::Clients>,
    /// The configuration in force, by cassandra.yaml's names (`system_views.settings`).
    pub settings: Vec<(String, String)>,
}

/// The size checks of a batch, with cassandra.yaml's names and defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchLimits {
    /// `batch_size_warn_threshold` (5KiB): a batch over more than one
    /// partition writing more data than this is logged and the client warned.
    pub warn_bytes: u64,
    /// `batch_size_fail_threshold` (50KiB): such a batch is refused
    /// (InvalidRequest "Batch too large").
    pub fail_bytes: u64,
    /// `unlogged_batch_across_partitions_warn_threshold` (10): an unlogged
    /// batch over more partitions than this warns the client.
    pub unlogged_partitions_warn: u32,
}

impl Default for BatchLimits {
    fn default() -> BatchLimits {
        BatchLimits { warn_bytes: 5 << 10, fail_bytes: 50 << 10, unlogged_partitions_warn: 10 }
    }
}

/// Cassandra caps the prepared statement cache by memory; Shoal by count.
const MAX_PREPARED: usize = 100_000;

impl Processor {
    /// A processor whose reads and writes go through `data` (in a node, the
    /// cluster's data plane, also when the node is alone).
    pub fn new(
        schema: Arc<SchemaService>,
        storage: Arc<Storage>,
        node: NodeInfo,
        data: Arc<dyn DataPlane>,
    ) -> Processor {
        let seed = u64::from_be_bytes(node.host_id.as_bytes()[8..16].try_into().unwrap_or([0; 8]));
        let (events, _) = tokio::sync::broadcast::channel(1024);
        let auth = Arc::new(Auth::new(AuthConfig::default()));
        Processor {
            schema,
            storage,
            node,
            clock: Clock::new(seed),
            prepared: RwLock::new(HashMap::new()),
            events,
            data,
            batch_limits: BatchLimits::default(),
            auth,
            audit: None,
            tracer: None,
            clients: Arc::default(),
            settings: Vec::new(),
        }
    }

    /// Shows these settings (name, value) in `system_views.settings`.
    pub fn with_settings(mut self, settings: Vec<(String, String)>) -> Processor {
        self.settings = settings;
        self
    }

    /// Uses these auth settings (authenticator, authorizer, cache validity).
    pub fn with_auth(mut self, config: AuthConfig) -> Processor {
        self.auth = Arc::new(Auth::new(config));
        self
    }

    /// Logs every login and request to `audit`.
    pub fn with_audit(mut self, audit: Option<Arc<crate::audit::AuditLog>>) -> Processor {
        self.audit = audit;
        self
    }

    /// Traces requests into `tracer` (whose records the node's trace writer,
    /// `traces::write_records`, drains).
    pub fn with_tracer(mut self, tracer: Arc<trace::Tracer>) -> Processor {
        self.tracer = Some(tracer);
        self
    }

    pub fn with_batch_limits(mut self, limits: BatchLimits) -> Processor {
        self.batch_limits = limits;
        self
    }

    /// QUERY: parse and run a statement with the session's keyspace, for the
    /// role `login` is logged in as (None: anonymous). Its
    /// writes join `group` (the caller answers after committing it and
    /// awaiting what it deferred); client warnings (Cassandra's `ClientWarn`)
    /// are added to `warnings`.
    #[allow(clippy::too_many_arguments)]
    pub fn query(
        &self,
        session: &mut Option<String>,
        login: Option<&str>,
        text: &str,
        params: &QueryParams,
        group: &mut WriteGroup,
        warnings: &mut Vec<String>,
    ) -> Result<ResultBody, QueryError> {
        trace::event(|| format!("Parsing {text}"));
        let statement = cql::parse(text).map_err(|e| QueryError::Syntax(e.to_string()))?;
        trace::event(|| "Preparing statement".to_string());
        let values = self.positional(&statement, session.as_deref(), &params.values)?;
        self.run(&statement, None, session, login, &values, params, group, warnings)
    }

    /// PREPARE: parse, check against the schema, cache, and describe the bind
    /// variables and the result.
    pub fn prepare(&self, session: Option<&str>, text: &str) -> Result<ResultBody, QueryError> {
        let statement = cql::parse(text).map_err(|e| QueryError::Syntax(e.to_string()))?;
        let schema = self.schema.snapshot();
        let info = prepare::analyze(&schema, session, &statement)?;
        let id = prepared_id(session, text);
        {
            let mut cache = self.prepared.write().unwrap_or_else(|p| p.into_inner());
            if cache.len() >= MAX_PREPARED && !cache.contains_key(&id) {
                cache.clear();
            }
            cache.insert(
                id.clone(),
                Arc::new(PreparedEntry::new(text.to_string(), session.map(str::to_string), statement)),
            );
        }
        Ok(ResultBody::Prepared(Box::new(Prepared::new(
            id,
            PreparedMetadata::new(info.pk_indexes, info.variables),
            RowsMetadata::new(info.result),
        ))))
    }

    /// The prepared statement `id` names, if this node knows it.
    pub fn prepared_entry(&self, id: &Bytes) -> Option<Arc<PreparedEntry>> {
        self.prepared.read().unwrap_or_else(|p| p.into_inner()).get(id).cloned()
    }

    fn lookup(&self, id: &Bytes) -> Result<Arc<PreparedEntry>, QueryError> {
        self.prepared
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(id)
            .cloned()
            .ok_or_else(|| QueryError::Unprepared(id.to_vec()))
    }

    /// Whether `request` only writes (INSERT, UPDATE, DELETE, BATCH), as far
    /// as can be told without running it: the server groups such requests
    /// so they share one commit. A scheduling hint; a wrong guess costs
    /// nothing but speed.
    pub fn is_write(&self, request: &Request) -> bool {
        match request {
            Request::Batch(_) => true,
            // A conditional write waits for Paxos rounds: not one to group.
            Request::Execute { id, .. } => self.lookup(id).is_ok_and(|e| match &e.statement {
                Statement::Insert(_) | Statement::Update(_) | Statement::Delete(_) => {
                    Modification::of(&e.statement).is_some_and(|m| m.clause().is_none())
                }
                Statement::Batch(_) => true,
                _ => false,
            }),
            // A conditional one (an ` IF ` in its text) neither: a connection's group runs one
            // request after another, and its LWTs must not wait for each other's Paxos rounds.
            Request::Query { query, .. } => {
                let word: String = query.trim_start().chars().take(6).collect::<String>().to_ascii_lowercase();
                ["insert", "update", "delete", "begin"].iter().any(|w| word.starts_with(w))
                    && !query.as_bytes().windows(4).any(|w| w.eq_ignore_ascii_case(b" if "))
            }
            _ => false,
        }
    }

    /// EXECUTE of a prepared statement.
    #[allow(clippy::too_many_arguments)]
    pub fn execute(
        &self,
        session: &mut Option<String>,
        login: Option<&str>,
        id: &Bytes,
        params: &QueryParams,
        group: &mut WriteGroup,
        warnings: &mut Vec<String>,
    ) -> Result<ResultBody, QueryError> {
        let entry = self.lookup(id)?;
        // A prepared statement runs in the keyspace it was prepared in.
        if let Some(modification) = Modification::of(&entry.statement) {
            let keyspace = entry.keyspace.as_deref().or(session.as_deref());
            self.auth.authorize(self, &entry.statement, login, keyspace)?;
            let values = self.positional(&entry.statement, keyspace, &params.values)?;
            return self.write_one(&modification, keyspace, &values, params, group, warnings);
        }
        let mut keyspace = entry.keyspace.clone().or_else(|| session.clone());
        let values = self.positional(&entry.statement, keyspace.as_deref(), &params.values)?;
        let result =
            self.run(&entry.statement, Some(&entry.plans), &mut keyspace, login, &values, params, group, warnings)?;
        if let ResultBody::SetKeyspace(k) = &result {
            *session = Some(k.clone());
        }
        Ok(result)
    }

    /// BATCH: every statement's mutations applied together.
    pub fn batch(
        &self,
        session: Option<&str>,
        login: Option<&str>,
        batch: &Batch,
        group: &mut WriteGroup,
        warnings: &mut Vec<String>,
    ) -> Result<ResultBody, QueryError> {
        let schema = self.schema.snapshot();
        let mut statements = Vec::with_capacity(batch.statements.len());
        for item in &batch.statements {
            let (statement, keyspace, values) = match item {
                BatchStatement::Query { query, values } => {
                    let st = cql::parse(query).map_err(|e| QueryError::Syntax(e.to_string()))?;
                    (
                        Arc::new(PreparedEntry::new(query.clone(), session.map(str::to_string), st)),
                        session.map(str::to_string),
                        values,
                    )
                }
                BatchStatement::Prepared { id, values } => {
                    let e = self.lookup(id)?;
                    let ks = e.keyspace.clone().or_else(|| session.map(str::to_string));
                    (e, ks, values)
                }
            };
            self.auth.authorize(self, &statement.statement, login, keyspace.as_deref())?;
            let values = self.positional(&statement.statement, keyspace.as_deref(), values)?.into_owned();
            if Modification::of(&statement.statement).is_none() {
                return Err(QueryError::invalid(
                    "Invalid statement in batch: only UPDATE, INSERT and DELETE statements are allowed.",
                ));
            }
            statements.push((statement, keyspace, values));
        }
        let conditional =
            statements.iter().any(|(st, _, _)| Modification::of(&st.statement).is_some_and(|m| m.clause().is_some()));
        // A conditional batch takes its ballot's time: the client's default timestamp is ignored, as in Cassandra.
        let opts = WriteOpts {
            default_timestamp: batch.default_timestamp,
            system: false,
            now_in_seconds: batch.now_in_seconds,
        };
        let mut planned = Vec::with_capacity(statements.len());
        let mut items = Vec::new();
        for (statement, keyspace, values) in &statements {
            let ctx = BindCtx { values, clock: &self.clock };
            let modification = Modification::of(&statement.statement)
                .ok_or_else(|| QueryError::Server("a batch statement that is not a modification".into()))?;
            if conditional {
                items.push(self.plan_cas(&modification, &schema, keyspace.as_deref(), &ctx)?);
            } else {
                planned.push(modification.plan(self, &schema, keyspace.as_deref(), &ctx, &opts)?);
            }
        }
        if conditional {
            return self.write_cas(items, batch.consistency, batch.serial_consistency, true);
        }
        let kind = match batch.kind {
            cql_protocol::BatchKind::Logged => cql::ast::BatchKind::Logged,
            cql_protocol::BatchKind::Unlogged => cql::ast::BatchKind::Unlogged,
            cql_protocol::BatchKind::Counter => cql::ast::BatchKind::Counter,
        };
        let write_type = batch_write_type(kind, &planned, batch.consistency, false)?;
        self.apply_batch(planned, batch.consistency, write_type, group, warnings)
    }

    /// One INSERT, UPDATE or DELETE: planned and handed to the data plane
    /// in one call (its mutations all belong to one keyspace).
    fn write_one(
        &self,
        modification: &Modification<'_>,
        session: Option<&str>,
        values: &[BoundValue],
        params: &QueryParams,
        group: &mut WriteGroup,
        warnings: &mut Vec<String>,
    ) -> Result<ResultBody, QueryError> {
        let schema = self.schema.snapshot();
        let ctx = BindCtx { values, clock: &self.clock };
        if modification.clause().is_some() {
            let item = self.plan_cas(modification, &schema, session, &ctx)?;
            return self.write_cas(vec![item], params.consistency, params.serial_consistency, false);
        }
        let opts = WriteOpts {
            default_timestamp: params.default_timestamp,
            system: false,
            now_in_seconds: params.now_in_seconds,
        };
        let planned = modification.plan(self, &schema, session, &ctx, &opts)?;
        let write_type = match counter_table(&planned) {
            Some(table) => {
                validate_counter_consistency(params.consistency, table)?;
                WriteType::Counter
            }
            None => WriteType::Simple,
        };
        self.warn_disk_usage(&planned.mutations, warnings);
        self.data.mutate(group, &planned.keyspace, planned.mutations, params.consistency, write_type)?;
        Ok(ResultBody::Void)
    }

    /// Plans one statement of a conditional write: its update at timestamp
    /// 0 (the ballot's time replaces it) and its checks.
    fn plan_cas(
        &self,
        modification: &Modification<'_>,
        schema: &Schema,
        session: Option<&str>,
        ctx: &BindCtx<'_>,
    ) -> Result<(Planned, Vec<cas::Check>), QueryError> {
        if modification.using().timestamp.is_some() {
            return Err(QueryError::invalid("Cannot provide custom timestamp for conditional updates"));
        }
        let opts = WriteOpts { default_timestamp: Some(0), system: false, now_in_seconds: None };
        let planned = modification.plan(self, schema, session, ctx, &opts)?;
        let [m] = planned.mutations.as_slice() else {
            return Err(QueryError::invalid("IN on the partition key is not supported with conditional updates"));
        };
        let table = planned
            .keyspace
            .tables
            .values()
            .find(|t| t.id == m.table)
            .ok_or_else(|| QueryError::Server("a conditional write to an unknown table".into()))?;
        let checks = match modification.clause() {
            Some(clause) => cas::checks(table, clause, m, ctx)?,
            None => Vec::new(),
        };
        Ok((planned, checks))
    }

    /// A conditional write (one statement, or a batch on one partition):
    /// Paxos through the data plane, then the `[applied]` result.
    fn write_cas(
        &self,
        items: Vec<(Planned, Vec<cas::Check>)>,
        cl: Consistency,
        serial: Option<Consistency>,
        batch: bool,
    ) -> Result<ResultBody, QueryError> {
        let serial = serial.unwrap_or(Consistency::Serial);
        if !matches!(serial, Consistency::Serial | Consistency::LocalSerial) {
            return Err(QueryError::Invalid(format!(
                "Invalid consistency for conditional update. Must be one of SERIAL or LOCAL_SERIAL (got {})",
                serial.name()
            )));
        }
        if matches!(cl, Consistency::Serial | Consistency::LocalSerial) {
            return Err(QueryError::Invalid(format!(
                "{} is not supported as conditional update commit consistency. Use ANY if you mean \"make sure it is accepted but I don't care how many replicas commit it for non-SERIAL reads\"",
                cl.name()
            )));
        }
        let mut mutations: Vec<Mutation> = Vec::new();
        let mut checks = Vec::new();
        let mut keyspace = None;
        for (planned, c) in items {
            keyspace.get_or_insert_with(|| Arc::clone(&planned.keyspace));
            mutations.extend(planned.mutations);
            checks.extend(c);
        }
        let (Some(ks), Some(first)) = (keyspace, mutations.first()) else {
            return Err(QueryError::Server("a conditional write without mutations".into()));
        };
        if mutations.iter().any(|m| m.table != first.table) {
            return Err(QueryError::invalid("Batch with conditions cannot span multiple tables"));
        }
        if mutations.iter().any(|m| m.partition_key != first.partition_key) {
            return Err(QueryError::invalid("Batch with conditions cannot span multiple partitions"));
        }
        let table = ks
            .tables
            .values()
            .find(|t| t.id == first.table)
            .ok_or_else(|| QueryError::Server("a conditional write to an unknown table".into()))?;
        let now = self.clock.now_seconds();
        let read = storage::PartitionRead {
            table: first.table,
            token: first.token,
            partition_key: first.partition_key.to_vec(),
            ranges: cas::read_ranges(table, &checks),
            reversed: false,
            include_static: true,
            row_limit: if cas::static_only(&checks) { 1 } else { usize::MAX },
            now,
        };
        let key = first.partition_key.clone();
        let request = crate::data::CasRequest { read, serial, commit: cl };
        let mut decide =
            |current: Option<&storage::Partition>| Ok(cas::holds(&checks, current, now).then(|| mutations.clone()));
        let (applied, current) = self.data.cas(&ks, request, &mut decide)?;
        let rows = if applied {
            cas::applied(table)
        } else {
            cas::not_applied(table, &key, &checks, current.as_ref(), batch, now)
        };
        Ok(ResultBody::Rows(rows))
    }

    /// Applies a batch's mutations at `cl`, one data-plane call per keyspace
    /// (each atomic on every replica), after Cassandra's checks of its size
    /// (`BatchStatement.verifyBatchSize` / `verifyBatchType`): a batch over
    /// more than one partition that writes more than `batch_size_fail_threshold`
    /// is refused, over `batch_size_warn_threshold` it warns, and an unlogged
    /// one over more than `unlogged_batch_across_partitions_warn_threshold`
    /// partitions warns. Whatever is accepted is applied whole: the data plane
    /// splits it into as many internode messages and hints as it needs.
    fn apply_batch(
        &self,
        planned: Vec<Planned>,
        cl: Consistency,
        write_type: WriteType,
        group: &mut WriteGroup,
        warnings: &mut Vec<String>,
    ) -> Result<ResultBody, QueryError> {
        let mut by_keyspace: Vec<(Arc<KeyspaceDef>, Vec<Mutation>)> = Vec::new();
        for p in planned {
            match by_keyspace.iter_mut().find(|(k, _)| k.name == p.keyspace.name) {
                Some((_, m)) => m.extend(p.mutations),
                None => by_keyspace.push((p.keyspace, p.mutations)),
            }
        }
        self.check_batch(&by_keyspace, write_type == WriteType::UnloggedBatch, warnings)?;
        for (_, mutations) in &by_keyspace {
            self.warn_disk_usage(mutations, warnings);
        }
        for (ks, mutations) in by_keyspace {
            self.data.mutate(group, &ks, mutations, cl, write_type)?;
        }
        Ok(ResultBody::Void)
    }

    /// The disk usage guardrail's warning (storage `disk_usage`): while this
    /// node's disk is over `data_disk_usage_percentage_warn_threshold`, a
    /// write that adds data warns the client in Cassandra's words (its
    /// `replica_disk_usage` guardrail), and as Cassandra does (its
    /// `cassandra.disk_usage.notify_interval_ms`) at most one write every
    /// 30 minutes. Over the fail threshold storage refuses the write. (Shoal
    /// does not gossip disk states: the warning speaks for this node's disk,
    /// Cassandra's for the write's replicas.)
    fn warn_disk_usage(&self, mutations: &[Mutation], warnings: &mut Vec<String>) {
        use std::sync::atomic::{AtomicU64, Ordering};
        const WARNING: &str = "Guardrail replica_disk_usage violated: Replica disk usage exceeds warning threshold";
        const INTERVAL_SECS: u64 = 30 * 60;
        static WARNED_AT: AtomicU64 = AtomicU64::new(0);
        if self.storage.disk_usage() != storage::DiskUsageState::Stuffed || !mutations.iter().any(storage::adds_data) {
            return;
        }
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let last = WARNED_AT.load(Ordering::Relaxed);
        if (last == 0 || now >= last.saturating_add(INTERVAL_SECS))
            && WARNED_AT.compare_exchange(last, now.max(1), Ordering::Relaxed, Ordering::Relaxed).is_ok()
        {
            tracing::warn!("{WARNING}");
            warnings.push(WARNING.to_string());
        }
    }

    fn check_batch(
        &self,
        by_keyspace: &[(Arc<KeyspaceDef>, Vec<Mutation>)],
        unlogged: bool,
        warnings: &mut Vec<String>,
    ) -> Result<(), QueryError> {
        use std::collections::{BTreeSet, HashSet};
        let partitions: HashSet<(&str, &[u8])> = by_keyspace
            .iter()
            .flat_map(|(ks, mutations)| mutations.iter().map(move |m| (ks.name.as_str(), m.partition_key.as_ref())))
            .collect();
        // Cassandra checks sizes only for batches over several partitions (CASSANDRA-10876).
        if partitions.len() <= 1 {
            return Ok(());
        }
        let size: u64 = by_keyspace.iter().flat_map(|(_, mutations)| mutations).map(Mutation::data_size).sum();
        let limits = &self.batch_limits;
        let unlogged_warning = unlogged && partitions.len() > limits.unlogged_partitions_warn as usize;
        if size <= limits.warn_bytes.min(limits.fail_bytes) && !unlogged_warning {
            return Ok(());
        }
        // Only a batch that is warned about or refused needs its tables' names.
        let mut tables: BTreeSet<String> = BTreeSet::new();
        for (ks, mutations) in by_keyspace {
            let ids: HashSet<_> = mutations.iter().map(|m| m.table).collect();
            tables
                .extend(ks.tables.values().filter(|t| ids.contains(&t.id)).map(|t| format!("{}.{}", ks.name, t.name)));
        }
        let names = format!("[{}]", tables.iter().cloned().collect::<Vec<_>>().join(", "));
        if size > limits.fail_bytes {
            tracing::error!(
                "Batch for {names} is of size {size}, exceeding specified threshold of {} by {}. (see batch_size_fail_threshold)",
                limits.fail_bytes,
                size - limits.fail_bytes
            );
            return Err(QueryError::invalid("Batch too large"));
        }
        if size > limits.warn_bytes {
            let message = format!(
                "Batch for {names} is of size {size}, exceeding specified threshold of {} by {}.",
                limits.warn_bytes,
                size - limits.warn_bytes
            );
            tracing::warn!("{message}");
            warnings.push(message);
        }
        if unlogged_warning {
            warnings.push(format!(
                "Unlogged batch covering {} partitions detected against table{} {names}. You should use a logged batch for atomicity, or asynchronous writes for performance.",
                partitions.len(),
                if tables.len() == 1 { "" } else { "s" }
            ));
        }
        Ok(())
    }

    /// Turns named values into positional ones by the statement's marker names.
    /// Positional values are borrowed as they are (no copy per execution).
    fn positional<'v>(
        &self,
        statement: &Statement,
        session: Option<&str>,
        values: &'v BoundValues,
    ) -> Result<Cow<'v, [BoundValue]>, QueryError> {
        match values {
            BoundValues::Positional(v) => {
                let expected = statement.bind_marker_count();
                if v.len() != expected {
                    return Err(QueryError::Invalid(format!(
                        "There were {expected} markers(?) in CQL but {} bound variables",
                        v.len()
                    )));
                }
                Ok(Cow::Borrowed(v))
            }
            BoundValues::Named(named) => {
                let schema = self.schema.snapshot();
                let info = prepare::analyze(&schema, session, statement)?;
                let mut out = Vec::with_capacity(info.variables.len());
                for spec in &info.variables {
                    let found = named.iter().find(|(n, _)| n.eq_ignore_ascii_case(&spec.name));
                    match found {
                        Some((_, v)) => out.push(v.clone()),
                        None => {
                            return Err(QueryError::Invalid(format!("Missing value for bind variable {}", spec.name)))
                        }
                    }
                }
                Ok(Cow::Owned(out))
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn run(
        &self,
        statement: &Statement,
        plans: Option<&select::PlanCache>,
        session: &mut Option<String>,
        login: Option<&str>,
        values: &[BoundValue],
        params: &QueryParams,
        group: &mut WriteGroup,
        warnings: &mut Vec<String>,
    ) -> Result<ResultBody, QueryError> {
        let schema = self.schema.snapshot();
        let ctx = BindCtx { values, clock: &self.clock };
        let opts = WriteOpts {
            default_timestamp: params.default_timestamp,
            system: false,
            now_in_seconds: params.now_in_seconds,
        };
        self.auth.authorize(self, statement, login, session.as_deref())?;
        match statement {
            Statement::Select(s) => {
                validate_read_consistency(params.consistency)?;
                let keyspace = s.table.keyspace.as_deref().or(session.as_deref());
                if keyspace == Some("system_auth") && !self.auth.may_read_auth_tables(self, login)? {
                    return Err(QueryError::Unauthorized(format!(
                        "User {} has no SELECT permission on <table system_auth.{}> or any of its parents",
                        login.unwrap_or("anonymous"),
                        s.table.name
                    )));
                }
                let page = Page {
                    consistency: params.consistency,
                    page_size: params.page_size.and_then(|p| usize::try_from(p).ok()),
                    paging_state: params.paging_state.as_deref(),
                    skip_metadata: params.skip_metadata,
                    now_in_seconds: params.now_in_seconds,
                };
                select::execute(self, &schema, session.as_deref(), s, plans, &ctx, &page)
            }
            Statement::Insert(_) | Statement::Update(_) | Statement::Delete(_) => {
                let modification =
                    Modification::of(statement).ok_or_else(|| QueryError::Server("not a modification".into()))?;
                self.write_one(&modification, session.as_deref(), values, params, group, warnings)
            }
            Statement::Batch(b) => {
                let opts = match &b.using.timestamp {
                    Some(t) => {
                        let ts = crate::bind::eval_value(
                            t,
                            &crate::bind::Receiver { name: "[timestamp]", ty: &types::CqlType::BigInt },
                            &ctx,
                        )?;
                        match ts {
                            Some(types::Value::BigInt(ts)) => WriteOpts {
                                default_timestamp: Some(ts),
                                system: false,
                                now_in_seconds: params.now_in_seconds,
                            },
                            _ => return Err(QueryError::invalid("Invalid null value of timestamp")),
                        }
                    }
                    None => opts,
                };
                let mut planned = Vec::with_capacity(b.statements.len());
                let conditional = b.statements.iter().any(|st| Modification::of_batch(st).clause().is_some());
                if conditional {
                    if b.using.timestamp.is_some() {
                        return Err(QueryError::invalid("Cannot provide custom timestamp for conditional BATCH"));
                    }
                    let items = b
                        .statements
                        .iter()
                        .map(|st| self.plan_cas(&Modification::of_batch(st), &schema, session.as_deref(), &ctx))
                        .collect::<Result<Vec<_>, _>>()?;
                    return self.write_cas(items, params.consistency, params.serial_consistency, true);
                }
                for st in &b.statements {
                    let modification = Modification::of_batch(st);
                    if b.using.timestamp.is_some() && modification.using().timestamp.is_some() {
                        return Err(QueryError::invalid(
                            "Timestamp must be set either on BATCH or individual statements",
                        ));
                    }
                    planned.push(modification.plan(self, &schema, session.as_deref(), &ctx, &opts)?);
                }
                let write_type = batch_write_type(b.kind, &planned, params.consistency, b.using.timestamp.is_some())?;
                self.apply_batch(planned, params.consistency, write_type, group, warnings)
            }
            Statement::Use { keyspace } => {
                if schema.keyspace(keyspace).is_none() {
                    return Err(QueryError::Invalid(format!("Keyspace '{keyspace}' does not exist")));
                }
                *session = Some(keyspace.clone());
                Ok(ResultBody::SetKeyspace(keyspace.clone()))
            }
            Statement::Truncate { table } => {
                let (ks, t) = crate::common::resolve_table(&schema, table, session.as_deref())?;
                if crate::schema::Schema::is_system(&ks.name) {
                    return Err(QueryError::Unauthorized(format!(
                        "Cannot TRUNCATE table {} in system keyspace {}",
                        t.name, ks.name
                    )));
                }
                self.data.truncate(ks, &t.id)?;
                Ok(ResultBody::Void)
            }
            Statement::Describe(d) => crate::describe::execute(&schema, session.as_deref(), d, &self.node),
            Statement::CreateRole(_)
            | Statement::AlterRole(_)
            | Statement::DropRole { .. }
            | Statement::ListRoles { .. }
            | Statement::ListUsers
            | Statement::GrantRole { .. }
            | Statement::RevokeRole { .. }
            | Statement::GrantPermissions(_)
            | Statement::RevokePermissions(_)
            | Statement::ListPermissions(_) => {
                crate::auth::off_the_workers(|| self.auth.execute(self, statement, login, &schema, session.as_deref()))
            }
            Statement::Unsupported { kind } => {
                Err(QueryError::Invalid(format!("{kind} is not supported by Shoal yet")))
            }
            ddl_statement => {
                let outcome = ddl::execute(&self.schema, session.as_deref(), ddl_statement, self.clock.now_micros())?;
                if outcome.is_some() && self.auth.authorizer.enabled() {
                    self.grants_follow_schema(ddl_statement, &schema, session.as_deref(), login);
                }
                match outcome {
                    Some(change) => {
                        self.data.schema_changed();
                        let _ = self.events.send(Event::SchemaChange(change.clone()));
                        Ok(ResultBody::SchemaChange(change))
                    }
                    None => Ok(ResultBody::Void),
                }
            }
        }
    }
}

impl Processor {
    /// After a CREATE, the creator holds every permission on what it
    /// created; after a DROP, no grant on what was dropped remains
    /// (Cassandra's auto-grant and `AuthSchemaChangeListener`). `before` is
    /// the schema the statement ran against. Failures are logged: the schema
    /// change itself is done.
    fn grants_follow_schema(&self, statement: &Statement, before: &Schema, session: Option<&str>, login: Option<&str>) {
        use crate::permissions::AuthResource as R;
        let table_of = |q: &cql::ast::QualifiedName| {
            crate::common::keyspace_name(q, session).ok().map(|k| R::Table(k.to_string(), q.name.clone()))
        };
        let (created, dropped): (Vec<R>, Vec<R>) = match statement {
            Statement::CreateKeyspace(c) => {
                (vec![R::Keyspace(c.keyspace.clone()), R::AllFunctionsIn(c.keyspace.clone())], Vec::new())
            }
            Statement::CreateTable(c) => (table_of(&c.table).into_iter().collect(), Vec::new()),
            Statement::DropKeyspace { keyspace, .. } => {
                let mut gone = vec![
                    R::Keyspace(keyspace.clone()),
                    R::AllTablesIn(keyspace.clone()),
                    R::AllFunctionsIn(keyspace.clone()),
                ];
                if let Some(ks) = before.keyspace(keyspace) {
                    gone.extend(ks.tables.keys().map(|t| R::Table(keyspace.clone(), t.clone())));
                }
                (Vec::new(), gone)
            }
            Statement::DropTable { table, .. } => (Vec::new(), table_of(table).into_iter().collect()),
            _ => (Vec::new(), Vec::new()),
        };
        crate::auth::off_the_workers(|| {
            if let Some(user) = login {
                for resource in &created {
                    self.auth.grant_all_on(self, user, resource);
                }
            }
            for resource in &dropped {
                if let Err(e) = self.auth.revoke_all_on(self, resource) {
                    tracing::warn!("cannot remove the grants on dropped {}: {e}", resource.display());
                }
            }
        });
    }

    /// Parses one of this node's own statements on `system_auth`.
    fn internal_statement(text: &str) -> Result<Statement, QueryError> {
        cql::parse(text).map_err(|e| QueryError::Server(format!("internal statement {text:?}: {e}")))
    }
}

/// Waits for `fut` on the current thread (which may block: auth runs off
/// the runtime's workers, or on a blocking thread).
fn wait<T>(fut: impl std::future::Future<Output = T>) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(move || handle.block_on(fut))
        }
        _ => match tokio::runtime::Builder::new_current_thread().enable_all().build() {
            Ok(runtime) => runtime.block_on(fut),
            Err(e) => panic!("cannot start a runtime to wait on: {e}"),
        },
    }
}

impl AuthTables for Processor {
    fn select(
        &self,
        text: &str,
        values: &[types::Value],
        cl: Consistency,
    ) -> Result<Vec<Vec<Option<Bytes>>>, QueryError> {
        let statement = Processor::internal_statement(text)?;
        let Statement::Select(select) = &statement else {
            return Err(QueryError::Server(format!("internal statement {text:?} is not a SELECT")));
        };
        let bound: Vec<BoundValue> = values.iter().map(|v| BoundValue::Set(Bytes::from(v.to_bytes()))).collect();
        let schema = self.schema.snapshot();
        let ctx = BindCtx { values: &bound, clock: &self.clock };
        let page =
            Page { consistency: cl, page_size: None, paging_state: None, skip_metadata: false, now_in_seconds: None };
        match select::execute(self, &schema, None, select, None, &ctx, &page)? {
            ResultBody::Rows(rows) => {
                rows.iter().collect::<Result<Vec<_>, _>>().map_err(|e| QueryError::Server(e.to_string()))
            }
            _ => Ok(Vec::new()),
        }
    }

    fn modify(&self, statements: &[(&str, Vec<types::Value>)], cl: Consistency) -> Result<(), QueryError> {
        let schema = self.schema.snapshot();
        let opts = WriteOpts { default_timestamp: None, system: true, now_in_seconds: None };
        let mut group = WriteGroup::new();
        for (text, values) in statements {
            let statement = Processor::internal_statement(text)?;
            let modification = Modification::of(&statement)
                .ok_or_else(|| QueryError::Server(format!("internal statement {text:?} is not a write")))?;
            let bound: Vec<BoundValue> = values.iter().map(|v| BoundValue::Set(Bytes::from(v.to_bytes()))).collect();
            let ctx = BindCtx { values: &bound, clock: &self.clock };
            let planned = modification.plan(self, &schema, None, &ctx, &opts)?;
            self.data.mutate(&mut group, &planned.keyspace, planned.mutations, cl, WriteType::Simple)?;
        }
        let (batch, deferred) = group.into_parts();
        self.storage.commit(std::slice::from_ref(&batch))?;
        for write in deferred {
            wait(write)?;
        }
        Ok(())
    }
}

/// An INSERT, UPDATE or DELETE, from a statement or from a BATCH.
enum Modification<'a> {
    Insert(&'a cql::ast::Insert),
    Update(&'a cql::ast::Update),
    Delete(&'a cql::ast::Delete),
}

impl<'a> Modification<'a> {
    fn of(statement: &'a Statement) -> Option<Modification<'a>> {
        match statement {
            Statement::Insert(s) => Some(Modification::Insert(s)),
            Statement::Update(s) => Some(Modification::Update(s)),
            Statement::Delete(s) => Some(Modification::Delete(s)),
            _ => None,
        }
    }

    fn of_batch(statement: &'a cql::ast::BatchStatement) -> Modification<'a> {
        match statement {
            cql::ast::BatchStatement::Insert(s) => Modification::Insert(s),
            cql::ast::BatchStatement::Update(s) => Modification::Update(s),
            cql::ast::BatchStatement::Delete(s) => Modification::Delete(s),
        }
    }

    /// The statement's `IF` (a lightweight transaction), if any.
    fn clause(&self) -> Option<cas::Clause<'a>> {
        match self {
            Modification::Insert(s) => cas::Clause::of(s.if_not_exists, None),
            Modification::Update(s) => cas::Clause::of(false, s.if_clause.as_ref()),
            Modification::Delete(s) => cas::Clause::of(false, s.if_clause.as_ref()),
        }
    }

    fn using(&self) -> &cql::ast::Using {
        match self {
            Modification::Insert(s) => &s.using,
            Modification::Update(s) => &s.using,
            Modification::Delete(s) => &s.using,
        }
    }

    fn plan(
        &self,
        proc: &Processor,
        schema: &Schema,
        session: Option<&str>,
        ctx: &BindCtx<'_>,
        opts: &WriteOpts,
    ) -> Result<Planned, QueryError> {
        match self {
            Modification::Insert(s) => modify::insert(proc, schema, session, s, ctx, opts),
            Modification::Update(s) => modify::update(proc, schema, session, s, ctx, opts),
            Modification::Delete(s) => modify::delete(proc, schema, session, s, ctx, opts),
        }
    }
}

fn prepared_id(keyspace: Option<&str>, query: &str) -> Bytes {
    use md5::{Digest, Md5};
    let mut h = Md5::new();
    if let Some(k) = keyspace {
        h.update(k.as_bytes());
    }
    h.update(query.as_bytes());
    Bytes::copy_from_slice(&h.finalize())
}

/// The counter table a statement's mutations write, if it writes one.
fn counter_table(planned: &Planned) -> Option<&types::schema::TableDef> {
    let table = planned.mutations.first()?.table;
    planned.keyspace.tables.values().find(|t| t.id == table && t.is_counter())
}

/// The levels a counter write may not use, in Cassandra's words.
fn validate_counter_consistency(cl: Consistency, table: &types::schema::TableDef) -> Result<(), QueryError> {
    match cl {
        Consistency::Any => Err(QueryError::Invalid(format!(
            "Consistency level ANY is not yet supported for counter table {}",
            table.name
        ))),
        Consistency::Serial | Consistency::LocalSerial => {
            Err(QueryError::invalid("Counter operations are inherently non-serializable"))
        }
        _ => Ok(()),
    }
}

/// A batch's write type after Cassandra's checks of counter and regular
/// statements in it (`BatchStatement`): never both, counters never in a
/// logged batch, regular statements never in a counter batch, and no
/// batch-wide USING TIMESTAMP with counters.
fn batch_write_type(
    kind: cql::ast::BatchKind,
    planned: &[Planned],
    cl: Consistency,
    batch_timestamp: bool,
) -> Result<WriteType, QueryError> {
    use cql::ast::BatchKind;
    let counters: Vec<Option<&types::schema::TableDef>> =
        planned.iter().filter(|p| !p.mutations.is_empty()).map(|p| counter_table(p)).collect();
    let has_counter = counters.iter().any(Option::is_some);
    let has_regular = counters.iter().any(Option::is_none);
    if kind == BatchKind::Counter && has_regular {
        return Err(QueryError::invalid("Cannot include non-counter statement in a counter batch"));
    }
    if has_counter && has_regular {
        return Err(QueryError::invalid("Counter and non-counter mutations cannot exist in the same batch"));
    }
    if has_counter && kind == BatchKind::Logged {
        return Err(QueryError::invalid("Cannot include a counter statement in a logged batch"));
    }
    if batch_timestamp && kind == BatchKind::Counter {
        return Err(QueryError::invalid("Cannot provide custom timestamp for counter BATCH"));
    }
    if batch_timestamp && has_counter {
        return Err(QueryError::invalid("Cannot provide custom timestamp for a BATCH containing counters"));
    }
    if let Some(table) = counters.into_iter().flatten().next() {
        validate_counter_consistency(cl, table)?;
        return Ok(WriteType::Counter);
    }
    Ok(if kind == BatchKind::Logged { WriteType::Batch } else { WriteType::UnloggedBatch })
}

/// The levels no read may use, whatever the replication.
fn validate_read_consistency(cl: Consistency) -> Result<(), QueryError> {
    if cl == Consistency::Any {
        return Err(QueryError::invalid("ANY ConsistencyLevel is only supported for writes"));
    }
    Ok(())
}
