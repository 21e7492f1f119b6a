//! The syntax tree of a CQL statement, shaped for the executor.
//!
//! Names are already normalised: unquoted identifiers are lower-cased,
//! quoted ones keep their case. Literals keep their raw text, because only
//! the receiving column's type says what `1` or `'abc'` means. Nothing here
//! is checked against a schema; that is the binder's work. Every bind marker
//! carries its index, numbered 0.. in textual order across the statement.

use std::fmt;

use types::CqlType;

/// One parsed CQL statement.
#[derive(Debug, Clone, PartialEq)]
pub enum Statement {
    /// `SELECT …`
    Select(Box<Select>),
    /// `INSERT INTO …`
    Insert(Box<Insert>),
    /// `UPDATE …`
    Update(Box<Update>),
    /// `DELETE … FROM …`
    Delete(Box<Delete>),
    /// `BEGIN [UNLOGGED | COUNTER] BATCH … APPLY BATCH`
    Batch(Box<Batch>),
    /// `USE ks`
    Use { keyspace: String },
    /// `TRUNCATE [TABLE] [ks.]t`
    Truncate { table: QualifiedName },
    /// `CREATE KEYSPACE …`
    CreateKeyspace(CreateKeyspace),
    /// `ALTER KEYSPACE …`
    AlterKeyspace(AlterKeyspace),
    /// `DROP KEYSPACE [IF EXISTS] ks`
    DropKeyspace { keyspace: String, if_exists: bool },
    /// `CREATE TABLE …`
    CreateTable(Box<CreateTable>),
    /// `ALTER TABLE …`
    AlterTable(Box<AlterTable>),
    /// `DROP TABLE [IF EXISTS] [ks.]t`
    DropTable { table: QualifiedName, if_exists: bool },
    /// `CREATE TYPE …`
    CreateType(CreateType),
    /// `ALTER TYPE …`
    AlterType(AlterType),
    /// `DROP TYPE [IF EXISTS] [ks.]t`
    DropType { name: QualifiedName, if_exists: bool },
    /// `DESCRIBE …` / `DESC …` (server-side describe).
    Describe(Describe),
    /// `CREATE ROLE …` / `CREATE USER …`
    CreateRole(CreateRole),
    /// `ALTER ROLE …` / `ALTER USER …`
    AlterRole(AlterRole),
    /// `DROP ROLE [IF EXISTS] r` / `DROP USER [IF EXISTS] u`
    DropRole { name: String, if_exists: bool },
    /// `LIST ROLES [OF r] [NORECURSIVE]`
    ListRoles { of: Option<String>, recursive: bool },
    /// `LIST USERS`
    ListUsers,
    /// `GRANT role TO grantee`
    GrantRole { role: String, grantee: String },
    /// `REVOKE role FROM revokee`
    RevokeRole { role: String, revokee: String },
    /// `GRANT permissions ON resource TO grantee`
    GrantPermissions(PermissionChange),
    /// `REVOKE permissions ON resource FROM grantee` (`grantee` is the revokee)
    RevokePermissions(PermissionChange),
    /// `LIST permissions [ON resource] [OF role] [NORECURSIVE]`
    ListPermissions(ListPermissions),
    /// `CREATE [CUSTOM] INDEX …`
    CreateIndex(Box<CreateIndex>),
    /// `DROP INDEX [IF EXISTS] [ks.]name`
    DropIndex { name: QualifiedName, if_exists: bool },
    /// A statement Cassandra knows but Shoal does not execute (
    /// views, functions, triggers, `LIST SUPERUSERS`, identities). `kind` names it in
    /// upper case, e.g. `CREATE INDEX`; the rest of the text is skipped.
    Unsupported { kind: String },
}

/// `CREATE [CUSTOM] INDEX [IF NOT EXISTS] [name] ON [ks.]t (target) [USING 'class' [WITH OPTIONS = {…}]]`.
#[derive(Debug, Clone, PartialEq)]
pub struct CreateIndex {
    pub name: Option<String>,
    pub table: QualifiedName,
    pub if_not_exists: bool,
    /// The indexed column.
    pub column: String,
    /// `keys`, `values`, `entries` or `full` when written as `f(column)`.
    pub function: Option<String>,
    /// `CUSTOM`: the `USING` class.
    pub using: Option<String>,
    /// `WITH OPTIONS = {…}` (accepted, not acted on).
    pub options: Vec<(String, OptionValue)>,
}

/// A possibly keyspace-qualified name of a table, type, index or function.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct QualifiedName {
    /// The keyspace, when written (`ks.t`).
    pub keyspace: Option<String>,
    /// The object's own name.
    pub name: String,
}

impl fmt::Display for QualifiedName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.keyspace {
            Some(keyspace) => write!(f, "{keyspace}.{}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

// ---------------------------------------------------------------------------
// Terms
// ---------------------------------------------------------------------------

/// A value expression: what may appear where CQL expects a value.
#[derive(Debug, Clone, PartialEq)]
pub enum Term {
    /// A constant or `null`.
    Literal(Literal),
    /// `?` or `:name`.
    Bind(BindMarker),
    /// `[a, b]`; also the candidate list of `IN (…)` relations and conditions.
    List(Vec<Term>),
    /// `{a, b}` (non-empty).
    Set(Vec<Term>),
    /// `{k: v, …}` (non-empty) with term keys.
    Map(Vec<(Term, Term)>),
    /// `{}`: an empty map or set, decided by the receiver's type.
    EmptyMapOrSet,
    /// `(a, b)`: a tuple literal (also the right side of multi-column relations).
    Tuple(Vec<Term>),
    /// `{field: term, …}`: a user-defined type literal (field names are identifiers).
    Udt(Vec<(String, Term)>),
    /// `[ks.]name(args)`, including `now()`, `token(…)`, `toTimestamp(…)`.
    FunctionCall { function: QualifiedName, args: Vec<Term> },
    /// `CAST(term AS type)` with a native target type.
    Cast { term: Box<Term>, ty: CqlType },
    /// `(type) term`: a type hint, e.g. `(int) ?`.
    TypeHint { ty: TypeExpr, term: Box<Term> },
    /// `lhs op rhs` arithmetic.
    BinaryOp { op: ArithmeticOp, lhs: Box<Term>, rhs: Box<Term> },
    /// `- term`.
    Negate(Box<Term>),
}

/// A literal constant, kept as written where the target type decides its meaning.
#[derive(Debug, Clone, PartialEq)]
pub enum Literal {
    /// `'text'` or `$$text$$`, unescaped.
    String(String),
    /// An integer as written, sign included.
    Integer(String),
    /// A float as written, or `NaN`, `Infinity`, `-Infinity`.
    Float(String),
    /// `true` / `false`.
    Boolean(bool),
    /// An unquoted UUID.
    Uuid(uuid::Uuid),
    /// `0x…` blob bytes.
    Hex(Vec<u8>),
    /// A duration as written (`1h30m`, `P1Y`, …).
    Duration(String),
    /// `null`.
    Null,
}

impl Literal {
    /// The literal's text as Cassandra's `getRawText()` gives it: strings
    /// unquoted, everything else as written (normalised for UUIDs and blobs).
    pub fn raw_text(&self) -> String {
        match self {
            Literal::String(s) | Literal::Integer(s) | Literal::Float(s) | Literal::Duration(s) => s.clone(),
            Literal::Boolean(b) => b.to_string(),
            Literal::Uuid(u) => u.to_string(),
            Literal::Hex(bytes) => {
                let mut text = String::with_capacity(2 + bytes.len() * 2);
                text.push_str("0x");
                for byte in bytes {
                    text.push_str(&format!("{byte:02x}"));
                }
                text
            }
            Literal::Null => "null".to_string(),
        }
    }
}

/// A bind marker: `?` (no name) or `:name`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BindMarker {
    /// Position among the statement's markers, 0-based, in textual order.
    pub index: usize,
    /// The name of a `:name` marker.
    pub name: Option<String>,
}

/// Arithmetic operators in terms and selectors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArithmeticOp {
    Add,
    Subtract,
    Multiply,
    Divide,
    Modulo,
}

// ---------------------------------------------------------------------------
// Types
// ---------------------------------------------------------------------------

/// A type as written in a statement; user-defined types are only named
/// here and resolved against the schema by [`TypeExpr::resolve`].
#[derive(Debug, Clone, PartialEq)]
pub enum TypeExpr {
    /// A native type (`int`, `text`, `timestamp`, …).
    Native(CqlType),
    /// `list<T>`
    List(Box<TypeExpr>),
    /// `set<T>`
    Set(Box<TypeExpr>),
    /// `map<K, V>`
    Map(Box<TypeExpr>, Box<TypeExpr>),
    /// `tuple<T, …>` (always frozen).
    Tuple(Vec<TypeExpr>),
    /// `frozen<T>`
    Frozen(Box<TypeExpr>),
    /// A user-defined type by name, `[ks.]name`.
    Udt { keyspace: Option<String>, name: String },
    /// `vector<T, n>` (Cassandra 5); parsed, not resolvable yet.
    Vector { elem: Box<TypeExpr>, dimension: u32 },
    /// `'class.Name'`, a custom type; parsed, not resolvable.
    Custom(String),
}

/// Why a [`TypeExpr`] could not become a [`CqlType`]. Messages follow Cassandra's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TypeError(pub String);

impl TypeExpr {
    /// The concrete type, with user-defined types looked up through `lookup`
    /// (`keyspace` as written, `name`) which returns the UDT as a non-frozen
    /// `CqlType::Udt` or an error message (e.g. `Unknown type ks.t`).
    ///
    /// Freezing follows Cassandra: `frozen<…>` and tuples freeze everything
    /// inside them; a non-frozen collection may not hold non-frozen
    /// collections or UDTs, and counters never go inside collections.
    pub fn resolve<F>(&self, lookup: &mut F) -> Result<CqlType, TypeError>
    where
        F: FnMut(Option<&str>, &str) -> Result<CqlType, String>,
    {
        self.resolve_inner(lookup, false)
    }

    fn resolve_inner<F>(&self, lookup: &mut F, frozen: bool) -> Result<CqlType, TypeError>
    where
        F: FnMut(Option<&str>, &str) -> Result<CqlType, String>,
    {
        let resolved = match self {
            TypeExpr::Native(ty) => ty.clone(),
            TypeExpr::Frozen(inner) => {
                if !inner.supports_freezing() {
                    return Err(TypeError(format!(
                        "frozen<> is only allowed on collections, tuples, and user-defined types (got {inner})"
                    )));
                }
                // Cassandra names the frozen type in this one.
                let counters_in = format!("Counters are not allowed inside collections: {inner}");
                inner.resolve_inner(lookup, true).map_err(|e| {
                    if e.0 == counters_in {
                        TypeError(format!("Counters are not allowed inside collections: {self}"))
                    } else {
                        e
                    }
                })?
            }
            TypeExpr::List(elem) => {
                let elem = self.resolve_element(elem, lookup, frozen)?;
                CqlType::List { elem: Box::new(elem), frozen }
            }
            TypeExpr::Set(elem) => {
                let elem = self.resolve_element(elem, lookup, frozen)?;
                if elem == CqlType::Duration {
                    return Err(TypeError(format!("Durations are not allowed inside sets: {self}")));
                }
                CqlType::Set { elem: Box::new(elem), frozen }
            }
            TypeExpr::Map(key, value) => {
                let key_type = self.resolve_element(key, lookup, frozen)?;
                if key_type == CqlType::Duration {
                    return Err(TypeError(format!("Durations are not allowed as map keys: {self}")));
                }
                let value_type = self.resolve_element(value, lookup, frozen)?;
                CqlType::Map { key: Box::new(key_type), value: Box::new(value_type), frozen }
            }
            TypeExpr::Tuple(elems) => {
                let mut resolved = Vec::with_capacity(elems.len());
                for elem in elems {
                    let ty = elem.resolve_inner(lookup, true)?;
                    if ty == CqlType::Counter {
                        return Err(TypeError("Counters are not allowed inside tuples".to_string()));
                    }
                    resolved.push(ty);
                }
                CqlType::Tuple(resolved)
            }
            TypeExpr::Udt { keyspace, name } => {
                let ty = lookup(keyspace.as_deref(), name).map_err(TypeError)?;
                if frozen {
                    ty.frozen()
                } else {
                    ty
                }
            }
            TypeExpr::Vector { .. } => return Err(TypeError(format!("Type {self} is not supported"))),
            TypeExpr::Custom(class) => return Err(TypeError(format!("Custom type '{class}' is not supported"))),
        };
        Ok(resolved)
    }

    /// Resolves an element of the collection `self`.
    fn resolve_element<F>(&self, elem: &TypeExpr, lookup: &mut F, frozen: bool) -> Result<CqlType, TypeError>
    where
        F: FnMut(Option<&str>, &str) -> Result<CqlType, String>,
    {
        let ty = elem.resolve_inner(lookup, frozen)?;
        if ty == CqlType::Counter {
            return Err(TypeError(format!("Counters are not allowed inside collections: {self}")));
        }
        if !frozen && ty.is_multi_cell() {
            let what = if matches!(ty, CqlType::Udt { .. }) { "UDTs" } else { "collections" };
            return Err(TypeError(format!("Non-frozen {what} are not allowed inside collections: {self}")));
        }
        Ok(ty)
    }

    fn supports_freezing(&self) -> bool {
        matches!(
            self,
            TypeExpr::List(_)
                | TypeExpr::Set(_)
                | TypeExpr::Map(..)
                | TypeExpr::Tuple(_)
                | TypeExpr::Frozen(_)
                | TypeExpr::Udt { .. }
        )
    }
}

impl fmt::Display for TypeExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TypeExpr::Native(ty) => write!(f, "{ty}"),
            TypeExpr::List(elem) => write!(f, "list<{elem}>"),
            TypeExpr::Set(elem) => write!(f, "set<{elem}>"),
            TypeExpr::Map(key, value) => write!(f, "map<{key}, {value}>"),
            TypeExpr::Tuple(elems) => {
                f.write_str("tuple<")?;
                for (i, elem) in elems.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{elem}")?;
                }
                f.write_str(">")
            }
            TypeExpr::Frozen(inner) => write!(f, "frozen<{inner}>"),
            TypeExpr::Udt { keyspace: Some(keyspace), name } => write!(f, "{keyspace}.{name}"),
            TypeExpr::Udt { keyspace: None, name } => f.write_str(name),
            TypeExpr::Vector { elem, dimension } => write!(f, "vector<{elem}, {dimension}>"),
            TypeExpr::Custom(class) => write!(f, "'{class}'"),
        }
    }
}

// ---------------------------------------------------------------------------
// SELECT
// ---------------------------------------------------------------------------

/// `SELECT [JSON] [DISTINCT] selection FROM table [WHERE …] [GROUP BY …]
/// [ORDER BY …] [PER PARTITION LIMIT n] [LIMIT n] [ALLOW FILTERING]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Select {
    /// The table read from.
    pub table: QualifiedName,
    /// `SELECT JSON`.
    pub json: bool,
    /// `SELECT DISTINCT`.
    pub distinct: bool,
    /// What to return.
    pub selection: Selection,
    /// The `WHERE` relations, joined by `AND`.
    pub where_clause: Vec<Relation>,
    /// `GROUP BY` expressions (columns, or functions of them).
    pub group_by: Vec<SelectorExpr>,
    /// `ORDER BY` columns.
    pub order_by: Vec<Ordering>,
    /// `PER PARTITION LIMIT` (integer literal or bind marker).
    pub per_partition_limit: Option<Term>,
    /// `LIMIT` (integer literal or bind marker).
    pub limit: Option<Term>,
    /// `ALLOW FILTERING`.
    pub allow_filtering: bool,
}

/// The select list.
#[derive(Debug, Clone, PartialEq)]
pub enum Selection {
    /// `*`
    Wildcard,
    /// An explicit list of selectors.
    Selectors(Vec<Selector>),
}

/// One entry of the select list with its optional `AS alias`.
#[derive(Debug, Clone, PartialEq)]
pub struct Selector {
    /// What is computed.
    pub expr: SelectorExpr,
    /// `AS alias`.
    pub alias: Option<String>,
}

/// An expression in the select list.
#[derive(Debug, Clone, PartialEq)]
pub enum SelectorExpr {
    /// A column.
    Column(String),
    /// A constant, `null` or a bind marker.
    Term(Term),
    /// `COUNT(*)` (also `count(*)`); `count(1)` stays a function call.
    CountRows,
    /// `WRITETIME(c)`, `MAXWRITETIME(c)` or `TTL(c)`; the target is a column,
    /// possibly with field or element selection.
    CellMetadata { kind: CellMetadataKind, target: Box<SelectorExpr> },
    /// `[ks.]f(args)`, including `token(a, b)` and `count(c)`.
    FunctionCall { function: QualifiedName, args: Vec<SelectorExpr> },
    /// `CAST(expr AS type)` with a native target type.
    Cast { expr: Box<SelectorExpr>, ty: CqlType },
    /// `(type) expr`
    TypeHint { ty: TypeExpr, expr: Box<SelectorExpr> },
    /// `expr.field` (UDT field).
    Field { expr: Box<SelectorExpr>, field: String },
    /// `expr[key]` (collection element).
    Element { expr: Box<SelectorExpr>, key: Term },
    /// `expr[from..to]` with either bound optional (collection slice).
    Slice { expr: Box<SelectorExpr>, from: Option<Term>, to: Option<Term> },
    /// `lhs op rhs` arithmetic.
    BinaryOp { op: ArithmeticOp, lhs: Box<SelectorExpr>, rhs: Box<SelectorExpr> },
    /// `- expr`
    Negate(Box<SelectorExpr>),
    /// `(a, b)`; a single element in parentheses is just that element.
    Tuple(Vec<SelectorExpr>),
    /// `[a, b]`
    List(Vec<SelectorExpr>),
    /// `{a, b}`; `{}` is an empty set.
    Set(Vec<SelectorExpr>),
    /// `{k: v, …}`: a map, or a UDT literal when keys are field names.
    MapOrUdt(Vec<(SelectorExpr, SelectorExpr)>),
}

/// Which cell metadata function a selector calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CellMetadataKind {
    WriteTime,
    MaxWriteTime,
    Ttl,
}

/// One `ORDER BY` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ordering {
    /// The clustering column.
    pub column: String,
    /// The direction (ASC when not written).
    pub order: Order,
}

/// Sort direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    Asc,
    Desc,
}

// ---------------------------------------------------------------------------
// WHERE and IF
// ---------------------------------------------------------------------------

/// One `WHERE` restriction.
#[derive(Debug, Clone, PartialEq)]
pub struct Relation {
    /// What is restricted.
    pub lhs: RelationLhs,
    /// How.
    pub op: Operator,
    /// The value: a single term; for `IN` a [`Term::List`] of candidates or
    /// one bind marker for the whole list; for multi-column relations a
    /// [`Term::Tuple`] (or a list of them for `IN`); [`Literal::Null`] for
    /// `IS NOT NULL`.
    pub rhs: Term,
}

/// The left side of a relation.
#[derive(Debug, Clone, PartialEq)]
pub enum RelationLhs {
    /// `col`
    Column(String),
    /// `col[key]` (map element).
    MapElement { column: String, key: Term },
    /// `token(a, b)`
    Token(Vec<String>),
    /// `(a, b)`
    MultiColumn(Vec<String>),
}

/// Relation and condition operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operator {
    Eq,
    Lt,
    Lte,
    Gt,
    Gte,
    Neq,
    In,
    NotIn,
    Contains,
    ContainsKey,
    NotContains,
    NotContainsKey,
    Like,
    /// `IS NOT` (only `IS NOT NULL` is valid).
    IsNot,
}

/// One `IF` condition of a lightweight transaction.
#[derive(Debug, Clone, PartialEq)]
pub struct Condition {
    /// What is tested.
    pub lhs: ConditionLhs,
    /// How.
    pub op: Operator,
    /// The value; for `IN` a [`Term::List`] or one bind marker.
    pub rhs: Term,
}

/// The left side of a condition.
#[derive(Debug, Clone, PartialEq)]
pub enum ConditionLhs {
    /// `col`
    Column(String),
    /// `col[key]`
    Element { column: String, key: Term },
    /// `col.field`
    Field { column: String, field: String },
}

/// The `IF` clause of UPDATE and DELETE.
#[derive(Debug, Clone, PartialEq)]
pub enum IfClause {
    /// `IF EXISTS`
    Exists,
    /// `IF cond AND cond …`
    Conditions(Vec<Condition>),
}

// ---------------------------------------------------------------------------
// INSERT, UPDATE, DELETE, BATCH
// ---------------------------------------------------------------------------

/// `USING TTL x AND TIMESTAMP y` (each an integer literal or bind marker).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Using {
    /// `TTL`
    pub ttl: Option<Term>,
    /// `TIMESTAMP`
    pub timestamp: Option<Term>,
}

/// `INSERT INTO table …`
#[derive(Debug, Clone, PartialEq)]
pub struct Insert {
    /// The table written.
    pub table: QualifiedName,
    /// The values, by column list or as JSON.
    pub values: InsertValues,
    /// `IF NOT EXISTS`
    pub if_not_exists: bool,
    /// `USING …`
    pub using: Using,
}

/// The two forms of INSERT.
#[derive(Debug, Clone, PartialEq)]
pub enum InsertValues {
    /// `(c1, c2) VALUES (v1, v2)`; the lengths may differ (the binder rejects that).
    Columns { columns: Vec<String>, values: Vec<Term> },
    /// `JSON 'doc'` or `JSON ?`, with `DEFAULT UNSET` (true) or `DEFAULT NULL`.
    Json { value: Term, default_unset: bool },
}

/// `UPDATE table [USING …] SET … WHERE … [IF …]`
#[derive(Debug, Clone, PartialEq)]
pub struct Update {
    /// The table written.
    pub table: QualifiedName,
    /// `USING …`
    pub using: Using,
    /// The `SET` assignments in order.
    pub assignments: Vec<Assignment>,
    /// The `WHERE` relations.
    pub where_clause: Vec<Relation>,
    /// `IF EXISTS` or conditions.
    pub if_clause: Option<IfClause>,
}

/// One `SET` assignment.
#[derive(Debug, Clone, PartialEq)]
pub struct Assignment {
    /// The column assigned.
    pub column: String,
    /// What is done to it.
    pub op: AssignmentOp,
}

/// The forms of assignment.
#[derive(Debug, Clone, PartialEq)]
pub enum AssignmentOp {
    /// `c = v`
    Set(Term),
    /// `c = c + v` or `c += v` (counter increment, collection append/union).
    Add(Term),
    /// `c = c - v` or `c -= v` (counter decrement, collection removal).
    Subtract(Term),
    /// `c = v + c` (list prepend).
    Prepend(Term),
    /// `c[key] = v`
    SetElement { key: Term, value: Term },
    /// `c.field = v`
    SetField { field: String, value: Term },
}

/// `DELETE [targets] FROM table [USING TIMESTAMP t] WHERE … [IF …]`
#[derive(Debug, Clone, PartialEq)]
pub struct Delete {
    /// The table written.
    pub table: QualifiedName,
    /// What to delete; empty means whole rows.
    pub targets: Vec<DeleteTarget>,
    /// `USING TIMESTAMP` (a TTL is never set here).
    pub using: Using,
    /// The `WHERE` relations.
    pub where_clause: Vec<Relation>,
    /// `IF EXISTS` or conditions.
    pub if_clause: Option<IfClause>,
}

/// One thing named between DELETE and FROM.
#[derive(Debug, Clone, PartialEq)]
pub enum DeleteTarget {
    /// A whole column.
    Column(String),
    /// `c[key]`: a collection element.
    Element { column: String, key: Term },
    /// `c.field`: a UDT field.
    Field { column: String, field: String },
}

/// `BEGIN [kind] BATCH [USING …] statements APPLY BATCH`
#[derive(Debug, Clone, PartialEq)]
pub struct Batch {
    /// LOGGED (default), UNLOGGED or COUNTER.
    pub kind: BatchKind,
    /// `USING TIMESTAMP` of the batch (TTL parses but Cassandra rejects it).
    pub using: Using,
    /// The statements, in order.
    pub statements: Vec<BatchStatement>,
}

/// The kind of batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchKind {
    Logged,
    Unlogged,
    Counter,
}

/// A statement inside a batch.
#[derive(Debug, Clone, PartialEq)]
pub enum BatchStatement {
    Insert(Insert),
    Update(Update),
    Delete(Delete),
}

// ---------------------------------------------------------------------------
// DDL
// ---------------------------------------------------------------------------

/// The value of a `WITH name = value` option.
#[derive(Debug, Clone, PartialEq)]
pub enum OptionValue {
    /// A constant: string, number, boolean, …
    Constant(Literal),
    /// A bare word, as written.
    Identifier(String),
    /// `{'k': v, …}` with keys and values as raw text (Cassandra's `getRawText`).
    Map(Vec<(String, String)>),
}

/// `CREATE KEYSPACE [IF NOT EXISTS] ks WITH …`
#[derive(Debug, Clone, PartialEq)]
pub struct CreateKeyspace {
    /// The keyspace.
    pub keyspace: String,
    /// `IF NOT EXISTS`
    pub if_not_exists: bool,
    /// `replication = {…}`, `durable_writes = …`, in order.
    pub options: Vec<(String, OptionValue)>,
}

/// `ALTER KEYSPACE [IF EXISTS] ks WITH …`
#[derive(Debug, Clone, PartialEq)]
pub struct AlterKeyspace {
    /// The keyspace.
    pub keyspace: String,
    /// `IF EXISTS`
    pub if_exists: bool,
    /// The new options, in order.
    pub options: Vec<(String, OptionValue)>,
}

/// `CREATE ROLE [IF NOT EXISTS] r [WITH …]`, or `CREATE USER` (then
/// `LOGIN` is always true and `SUPERUSER` defaults to false).
#[derive(Debug, Clone, PartialEq)]
pub struct CreateRole {
    /// The role: an unquoted role name lower-cased, a quoted one or a user
    /// name as written.
    pub name: String,
    /// `IF NOT EXISTS`
    pub if_not_exists: bool,
    /// The options given.
    pub options: RoleOptions,
}

/// `ALTER ROLE [IF EXISTS] r WITH …` or `ALTER USER`.
#[derive(Debug, Clone, PartialEq)]
pub struct AlterRole {
    /// The role.
    pub name: String,
    /// `IF EXISTS`
    pub if_exists: bool,
    /// The options given.
    pub options: RoleOptions,
}

/// The options of CREATE/ALTER ROLE/USER; `None` where not given.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RoleOptions {
    /// `PASSWORD = '…'` (never logged).
    pub password: Option<String>,
    /// `HASHED PASSWORD = '…'`: a bcrypt hash stored as given.
    pub hashed_password: Option<String>,
    /// `LOGIN = true|false`
    pub login: Option<bool>,
    /// `SUPERUSER = true|false` (`SUPERUSER` / `NOSUPERUSER` for a user).
    pub superuser: Option<bool>,
    /// Options Cassandra knows that Shoal's role manager does not support
    /// (`OPTIONS`, `ACCESS TO …`, `ACCESS FROM …`), by Cassandra's option name.
    pub unsupported: Vec<String>,
}

impl RoleOptions {
    /// Whether no option was given.
    pub fn is_empty(&self) -> bool {
        self == &RoleOptions::default()
    }
}

/// A permission of Cassandra's `Permission` enum, in its order (which is
/// the order LIST PERMISSIONS sorts by).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Permission {
    Create,
    Alter,
    Drop,
    Select,
    Modify,
    Authorize,
    Describe,
    Execute,
    Unmask,
    SelectMasked,
}

impl Permission {
    /// Every permission, in enum order.
    pub const ALL: [Permission; 10] = [
        Permission::Create,
        Permission::Alter,
        Permission::Drop,
        Permission::Select,
        Permission::Modify,
        Permission::Authorize,
        Permission::Describe,
        Permission::Execute,
        Permission::Unmask,
        Permission::SelectMasked,
    ];

    /// The name Cassandra prints and stores (`SELECT`, `SELECT_MASKED`).
    pub fn name(self) -> &'static str {
        match self {
            Permission::Create => "CREATE",
            Permission::Alter => "ALTER",
            Permission::Drop => "DROP",
            Permission::Select => "SELECT",
            Permission::Modify => "MODIFY",
            Permission::Authorize => "AUTHORIZE",
            Permission::Describe => "DESCRIBE",
            Permission::Execute => "EXECUTE",
            Permission::Unmask => "UNMASK",
            Permission::SelectMasked => "SELECT_MASKED",
        }
    }

    /// The permission named `name` (upper case, as stored).
    pub fn from_name(name: &str) -> Option<Permission> {
        Permission::ALL.into_iter().find(|p| p.name() == name)
    }
}

/// The permissions a GRANT, REVOKE or LIST names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Permissions {
    /// `ALL [PERMISSIONS]`
    All,
    /// `p [PERMISSION] (, p [PERMISSION])*`, in the order written.
    Some(Vec<Permission>),
}

/// What a permission is granted on (Cassandra's `IResource`s), as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resource {
    /// `ALL KEYSPACES`
    AllKeyspaces,
    /// `KEYSPACE ks`
    Keyspace(String),
    /// `ALL TABLES IN KEYSPACE ks`
    AllTablesIn(String),
    /// `[TABLE] [ks.]t` (without a keyspace: the session's)
    Table(QualifiedName),
    /// `ALL ROLES`
    AllRoles,
    /// `ROLE r`
    Role(String),
    /// `ALL FUNCTIONS`
    AllFunctions,
    /// `ALL FUNCTIONS IN KEYSPACE ks`
    AllFunctionsIn(String),
    /// `FUNCTION [ks.]f(type, …)`: the argument types as written (CQL type text).
    Function { name: QualifiedName, args: Vec<String> },
    /// `ALL MBEANS`
    AllMbeans,
    /// `MBEAN 'name'`
    Mbean(String),
    /// `MBEANS 'pattern'`
    Mbeans(String),
}

/// `GRANT perms ON resource TO role` / `REVOKE perms ON resource FROM role`.
#[derive(Debug, Clone, PartialEq)]
pub struct PermissionChange {
    pub permissions: Permissions,
    pub resource: Resource,
    /// The role granted to or revoked from.
    pub grantee: String,
}

/// `LIST perms [ON resource] [OF role] [NORECURSIVE]`.
#[derive(Debug, Clone, PartialEq)]
pub struct ListPermissions {
    pub permissions: Permissions,
    pub resource: Option<Resource>,
    pub of: Option<String>,
    /// False with `NORECURSIVE` (only the resource itself, not its parents).
    pub recursive: bool,
}

/// `CREATE TABLE [IF NOT EXISTS] [ks.]t (…) [WITH …]`
#[derive(Debug, Clone, PartialEq)]
pub struct CreateTable {
    /// The table.
    pub table: QualifiedName,
    /// `IF NOT EXISTS`
    pub if_not_exists: bool,
    /// Column definitions in order.
    pub columns: Vec<ColumnDef>,
    /// Every PRIMARY KEY declaration in order, column-level ones included
    /// (the executor requires exactly one).
    pub primary_keys: Vec<PrimaryKey>,
    /// `CLUSTERING ORDER BY (c DESC, …)`
    pub clustering_order: Vec<(String, Order)>,
    /// `COMPACT STORAGE`
    pub compact_storage: bool,
    /// Other `WITH` options, in order.
    pub options: Vec<(String, OptionValue)>,
}

/// A column in CREATE TABLE or ALTER TABLE ADD.
#[derive(Debug, Clone, PartialEq)]
pub struct ColumnDef {
    /// The column name.
    pub name: String,
    /// Its type.
    pub ty: TypeExpr,
    /// `STATIC`
    pub is_static: bool,
}

/// A primary key: partition key columns, then clustering columns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrimaryKey {
    /// Partition key columns (`(a, b)` or `a`).
    pub partition_key: Vec<String>,
    /// Clustering columns.
    pub clustering: Vec<String>,
}

/// `ALTER TABLE [IF EXISTS] [ks.]t action`
#[derive(Debug, Clone, PartialEq)]
pub struct AlterTable {
    /// The table.
    pub table: QualifiedName,
    /// `IF EXISTS`
    pub if_exists: bool,
    /// What changes.
    pub action: AlterTableAction,
}

/// The forms of ALTER TABLE.
#[derive(Debug, Clone, PartialEq)]
pub enum AlterTableAction {
    /// `ALTER c TYPE t` (Cassandra rejects it since 3.x; parsed for the message).
    AlterColumnType { column: String, ty: TypeExpr },
    /// `ADD [IF NOT EXISTS] c t [STATIC]` or `ADD (c1 t1, c2 t2)`.
    Add { if_not_exists: bool, columns: Vec<ColumnDef> },
    /// `DROP [IF EXISTS] c` or `DROP (c1, c2)` `[USING TIMESTAMP n]`.
    Drop { if_exists: bool, columns: Vec<String>, timestamp: Option<i64> },
    /// `RENAME [IF EXISTS] a TO b [AND c TO d]`.
    Rename { if_exists: bool, renames: Vec<(String, String)> },
    /// `DROP COMPACT STORAGE`.
    DropCompactStorage,
    /// `WITH option = value AND …`.
    Options(Vec<(String, OptionValue)>),
}

/// `CREATE TYPE [IF NOT EXISTS] [ks.]t (f type, …)`
#[derive(Debug, Clone, PartialEq)]
pub struct CreateType {
    /// The type.
    pub name: QualifiedName,
    /// `IF NOT EXISTS`
    pub if_not_exists: bool,
    /// Fields in order.
    pub fields: Vec<(String, TypeExpr)>,
}

/// `ALTER TYPE [IF EXISTS] [ks.]t action`
#[derive(Debug, Clone, PartialEq)]
pub struct AlterType {
    /// The type.
    pub name: QualifiedName,
    /// `IF EXISTS`
    pub if_exists: bool,
    /// What changes.
    pub action: AlterTypeAction,
}

/// The forms of ALTER TYPE.
#[derive(Debug, Clone, PartialEq)]
pub enum AlterTypeAction {
    /// `ADD [IF NOT EXISTS] f type`
    Add { if_not_exists: bool, field: String, ty: TypeExpr },
    /// `RENAME [IF EXISTS] f TO g [AND …]`
    Rename { if_exists: bool, renames: Vec<(String, String)> },
    /// `ALTER f TYPE t` (rejected by Cassandra; parsed for the message).
    AlterFieldType { field: String, ty: TypeExpr },
}

// ---------------------------------------------------------------------------
// DESCRIBE
// ---------------------------------------------------------------------------

/// `DESCRIBE …` / `DESC …`
#[derive(Debug, Clone, PartialEq)]
pub struct Describe {
    /// What is described.
    pub target: DescribeTarget,
    /// `WITH INTERNALS`
    pub with_internals: bool,
}

/// The objects DESCRIBE can describe.
#[derive(Debug, Clone, PartialEq)]
pub enum DescribeTarget {
    /// `DESCRIBE CLUSTER`
    Cluster,
    /// `DESCRIBE [FULL] SCHEMA`
    Schema { full: bool },
    /// `DESCRIBE KEYSPACES`
    Keyspaces,
    /// `DESCRIBE [ONLY] KEYSPACE [ks]` (the current keyspace when omitted).
    Keyspace { keyspace: Option<String>, only: bool },
    /// `DESCRIBE TABLES`
    Tables,
    /// `DESCRIBE TABLE [ks.]t`
    Table(QualifiedName),
    /// `DESCRIBE INDEX [ks.]i`
    Index(QualifiedName),
    /// `DESCRIBE MATERIALIZED VIEW [ks.]v`
    MaterializedView(QualifiedName),
    /// `DESCRIBE TYPES`
    Types,
    /// `DESCRIBE TYPE [ks.]t`
    Type(QualifiedName),
    /// `DESCRIBE FUNCTIONS`
    Functions,
    /// `DESCRIBE FUNCTION [ks.]f`
    Function(QualifiedName),
    /// `DESCRIBE AGGREGATES`
    Aggregates,
    /// `DESCRIBE AGGREGATE [ks.]a`
    Aggregate(QualifiedName),
    /// `DESCRIBE [ks.]name`: a keyspace, table, view, index, type, … by name.
    Generic(QualifiedName),
}

// ---------------------------------------------------------------------------
// Walking
// ---------------------------------------------------------------------------

impl Term {
    /// Calls `f` on this term and then on every term nested in it, in textual order.
    pub fn walk<'t>(&'t self, f: &mut dyn FnMut(&'t Term)) {
        f(self);
        match self {
            Term::Literal(_) | Term::Bind(_) | Term::EmptyMapOrSet => {}
            Term::List(items) | Term::Set(items) | Term::Tuple(items) => items.iter().for_each(|t| t.walk(f)),
            Term::Map(entries) => {
                for (key, value) in entries {
                    key.walk(f);
                    value.walk(f);
                }
            }
            Term::Udt(fields) => fields.iter().for_each(|(_, t)| t.walk(f)),
            Term::FunctionCall { args, .. } => args.iter().for_each(|t| t.walk(f)),
            Term::Cast { term, .. } | Term::TypeHint { term, .. } | Term::Negate(term) => term.walk(f),
            Term::BinaryOp { lhs, rhs, .. } => {
                lhs.walk(f);
                rhs.walk(f);
            }
        }
    }
}

impl SelectorExpr {
    /// Calls `f` on every top-level term inside this selector, in textual order.
    pub fn walk_terms<'t>(&'t self, f: &mut dyn FnMut(&'t Term)) {
        match self {
            SelectorExpr::Column(_) | SelectorExpr::CountRows => {}
            SelectorExpr::Term(term) => f(term),
            SelectorExpr::CellMetadata { target: expr, .. }
            | SelectorExpr::Cast { expr, .. }
            | SelectorExpr::TypeHint { expr, .. }
            | SelectorExpr::Field { expr, .. }
            | SelectorExpr::Negate(expr) => expr.walk_terms(f),
            SelectorExpr::Element { expr, key } => {
                expr.walk_terms(f);
                f(key);
            }
            SelectorExpr::Slice { expr, from, to } => {
                expr.walk_terms(f);
                for bound in from.iter().chain(to.iter()) {
                    f(bound);
                }
            }
            SelectorExpr::FunctionCall { args: items, .. }
            | SelectorExpr::Tuple(items)
            | SelectorExpr::List(items)
            | SelectorExpr::Set(items) => items.iter().for_each(|s| s.walk_terms(f)),
            SelectorExpr::BinaryOp { lhs, rhs, .. } => {
                lhs.walk_terms(f);
                rhs.walk_terms(f);
            }
            SelectorExpr::MapOrUdt(entries) => {
                for (key, value) in entries {
                    key.walk_terms(f);
                    value.walk_terms(f);
                }
            }
        }
    }
}

fn walk_relations<'t>(relations: &'t [Relation], f: &mut dyn FnMut(&'t Term)) {
    for relation in relations {
        if let RelationLhs::MapElement { key, .. } = &relation.lhs {
            f(key);
        }
        f(&relation.rhs);
    }
}

fn walk_using<'t>(using: &'t Using, f: &mut dyn FnMut(&'t Term)) {
    for value in using.ttl.iter().chain(using.timestamp.iter()) {
        f(value);
    }
}

fn walk_if<'t>(if_clause: &'t Option<IfClause>, f: &mut dyn FnMut(&'t Term)) {
    if let Some(IfClause::Conditions(conditions)) = if_clause {
        for condition in conditions {
            if let ConditionLhs::Element { key, .. } = &condition.lhs {
                f(key);
            }
            f(&condition.rhs);
        }
    }
}

impl Insert {
    fn walk_terms<'t>(&'t self, f: &mut dyn FnMut(&'t Term)) {
        match &self.values {
            InsertValues::Columns { values, .. } => {
                for value in values {
                    f(value);
                }
            }
            InsertValues::Json { value, .. } => f(value),
        }
        walk_using(&self.using, f);
    }
}

impl Update {
    fn walk_terms<'t>(&'t self, f: &mut dyn FnMut(&'t Term)) {
        walk_using(&self.using, f);
        for assignment in &self.assignments {
            match &assignment.op {
                AssignmentOp::Set(t) | AssignmentOp::Add(t) | AssignmentOp::Subtract(t) | AssignmentOp::Prepend(t) => {
                    f(t)
                }
                AssignmentOp::SetElement { key, value } => {
                    f(key);
                    f(value);
                }
                AssignmentOp::SetField { value, .. } => f(value),
            }
        }
        walk_relations(&self.where_clause, f);
        walk_if(&self.if_clause, f);
    }
}

impl Delete {
    fn walk_terms<'t>(&'t self, f: &mut dyn FnMut(&'t Term)) {
        for target in &self.targets {
            if let DeleteTarget::Element { key, .. } = target {
                f(key);
            }
        }
        walk_using(&self.using, f);
        walk_relations(&self.where_clause, f);
        walk_if(&self.if_clause, f);
    }
}

impl Statement {
    /// Calls `f` on every top-level term of the statement (values, keys,
    /// relation sides, limits, USING values), roughly in textual order.
    /// Use [`Term::walk`] to reach nested terms.
    pub fn walk_terms<'t>(&'t self, f: &mut dyn FnMut(&'t Term)) {
        match self {
            Statement::Select(select) => {
                if let Selection::Selectors(selectors) = &select.selection {
                    selectors.iter().for_each(|s| s.expr.walk_terms(f));
                }
                walk_relations(&select.where_clause, f);
                select.group_by.iter().for_each(|s| s.walk_terms(f));
                for limit in select.per_partition_limit.iter().chain(select.limit.iter()) {
                    f(limit);
                }
            }
            Statement::Insert(insert) => insert.walk_terms(f),
            Statement::Update(update) => update.walk_terms(f),
            Statement::Delete(delete) => delete.walk_terms(f),
            Statement::Batch(batch) => {
                walk_using(&batch.using, f);
                for statement in &batch.statements {
                    match statement {
                        BatchStatement::Insert(insert) => insert.walk_terms(f),
                        BatchStatement::Update(update) => update.walk_terms(f),
                        BatchStatement::Delete(delete) => delete.walk_terms(f),
                    }
                }
            }
            Statement::Use { .. }
            | Statement::Truncate { .. }
            | Statement::CreateKeyspace(_)
            | Statement::AlterKeyspace(_)
            | Statement::DropKeyspace { .. }
            | Statement::CreateTable(_)
            | Statement::AlterTable(_)
            | Statement::DropTable { .. }
            | Statement::CreateType(_)
            | Statement::AlterType(_)
            | Statement::DropType { .. }
            | Statement::Describe(_)
            | Statement::CreateRole(_)
            | Statement::AlterRole(_)
            | Statement::DropRole { .. }
            | Statement::ListRoles { .. }
            | Statement::ListUsers
            | Statement::GrantRole { .. }
            | Statement::RevokeRole { .. }
            | Statement::GrantPermissions(_)
            | Statement::RevokePermissions(_)
            | Statement::ListPermissions(_)
            | Statement::CreateIndex(_)
            | Statement::DropIndex { .. }
            | Statement::Unsupported { .. } => {}
        }
    }

    /// How many bind markers the statement has: `bind_markers().len()`
    /// without collecting them (EXECUTE checks it on every execution).
    pub fn bind_marker_count(&self) -> usize {
        let mut count = 0;
        self.walk_terms(&mut |term| {
            term.walk(&mut |inner| {
                if let Term::Bind(_) = inner {
                    count += 1;
                }
            });
        });
        count
    }

    /// The statement's bind markers ordered by index (0, 1, …), which is
    /// their textual order; in a BATCH they are numbered across all inner
    /// statements.
    pub fn bind_markers(&self) -> Vec<BindMarker> {
        let mut markers = Vec::new();
        self.walk_terms(&mut |term| {
            term.walk(&mut |inner| {
                if let Term::Bind(marker) = inner {
                    markers.push(marker.clone());
                }
            });
        });
        markers.sort_by_key(|m| m.index);
        markers
    }
}
