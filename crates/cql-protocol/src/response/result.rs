//! RESULT (opcode 0x08): an `[int]` kind, then Void (1), Rows (2),
//! Set_keyspace (3), Prepared (4) or Schema_change (5).
//!
//! Rows are written without an intermediate `Vec<Vec<..>>`: executors stream
//! cells into a [`RowsWriter`], which produces the `<rows_content>` bytes that
//! [`Rows::content`] carries and the encoder copies once into the frame.
//!
//! Rows metadata: `<flags><columns_count>[<paging_state>][<global_table_spec>?<col_spec_1>...]`
//! with flags 0x0001 Global_tables_spec, 0x0002 Has_more_pages (then the
//! `[bytes]` paging state follows), 0x0004 No_metadata (then no table spec and
//! no column specs, only the count). Each column spec is
//! `(<ksname><tablename>)?<name><type>`, the table pair present only without a
//! global spec.
//!
//! v5 adds the result metadata id (`[short bytes]`, see [`result_metadata_id`]):
//! a Prepared result carries it after the statement id, and a Rows result
//! whose columns are not those the client's EXECUTE named (the schema changed
//! since PREPARE) sets flag 0x0008 Metadata_changed and carries the new id
//! after the paging state, with the full column specs.

use ::types::CqlType;
use bytes::{BufMut, Bytes, BytesMut};

use crate::error::ProtocolError;
use crate::response::event::SchemaChange;
use crate::types::{read_type, write_type};
use crate::wire::{self, Reader};

const KIND_VOID: i32 = 0x0001;
const KIND_ROWS: i32 = 0x0002;
const KIND_SET_KEYSPACE: i32 = 0x0003;
const KIND_PREPARED: i32 = 0x0004;
const KIND_SCHEMA_CHANGE: i32 = 0x0005;

const FLAG_GLOBAL_TABLES_SPEC: i32 = 0x0001;
const FLAG_HAS_MORE_PAGES: i32 = 0x0002;
const FLAG_NO_METADATA: i32 = 0x0004;
/// v5: the result metadata changed; the new id follows the paging state.
const FLAG_METADATA_CHANGED: i32 = 0x0008;

/// The result metadata id of these result columns (protocol v5): an MD5 over
/// each column's name and type, as Cassandra's
/// `ResultMetadata.computeResultMetadataId` (name, 0, type, 0, 0; the type here
/// in its `[option]` encoding, which names it as uniquely as Cassandra's text).
pub fn result_metadata_id(columns: &[ColumnSpec]) -> Bytes {
    use md5::{Digest, Md5};
    let mut h = Md5::new();
    let mut ty = BytesMut::new();
    for c in columns {
        h.update(c.name.as_bytes());
        h.update([0u8]);
        ty.clear();
        write_type(&mut ty, &c.ty);
        h.update(&ty);
        h.update([0u8, 0u8]);
    }
    Bytes::copy_from_slice(&h.finalize())
}

/// The body of a RESULT response.
#[derive(Clone, Debug, PartialEq)]
pub enum ResultBody {
    Void,
    Rows(Rows),
    /// The keyspace a `USE` switched to.
    SetKeyspace(String),
    /// Boxed: the largest body by far, and answered once per statement.
    Prepared(Box<Prepared>),
    SchemaChange(SchemaChange),
}

/// One column of a result set or one bind marker of a prepared statement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ColumnSpec {
    pub keyspace: String,
    pub table: String,
    /// Column name, alias or selection text; for bind markers the marker name
    /// or the column it binds.
    pub name: String,
    pub ty: CqlType,
}

/// `<metadata>` of a Rows result (also a Prepared result's result metadata).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RowsMetadata {
    /// When set, every column belongs to this (keyspace, table) and column
    /// specs are sent without their own table pair.
    pub global_table_spec: Option<(String, String)>,
    /// Column specs; empty after decoding a No_metadata result.
    pub columns: Vec<ColumnSpec>,
    /// The number of columns. Sent as is with `no_metadata`; otherwise the
    /// encoder sends `columns.len()`. Decoding always fills it.
    pub columns_count: usize,
    /// Has_more_pages: where the next page starts.
    pub paging_state: Option<Bytes>,
    /// Send only flags, count and paging state (the client asked to skip
    /// metadata, or this is the empty result metadata of a non-SELECT).
    pub no_metadata: bool,
    /// v5: the columns changed since the client's PREPARE; this is their new
    /// result metadata id (flag 0x0008). Not sent before v5.
    pub new_metadata_id: Option<Bytes>,
}

impl RowsMetadata {
    /// Metadata for these columns, with a global table spec when they all come
    /// from one table (as Cassandra does).
    pub fn new(columns: Vec<ColumnSpec>) -> RowsMetadata {
        let global_table_spec = common_table(&columns);
        RowsMetadata {
            global_table_spec,
            columns_count: columns.len(),
            columns,
            paging_state: None,
            no_metadata: false,
            new_metadata_id: None,
        }
    }

    /// The empty metadata (No_metadata, 0 columns) of statements that return
    /// no rows, used as a Prepared result's result metadata.
    pub fn empty() -> RowsMetadata {
        RowsMetadata {
            global_table_spec: None,
            columns: Vec::new(),
            columns_count: 0,
            paging_state: None,
            no_metadata: true,
            new_metadata_id: None,
        }
    }

    /// The same metadata in its No_metadata form: the column count and paging
    /// state are kept, the table spec and column specs dropped.
    pub fn without_column_specs(mut self) -> RowsMetadata {
        self.columns_count = self.column_count();
        self.no_metadata = true;
        self.global_table_spec = None;
        self.columns.clear();
        self
    }

    pub fn with_paging_state(mut self, paging_state: Option<Bytes>) -> RowsMetadata {
        self.paging_state = paging_state;
        self
    }

    /// The column count that is (or was) on the wire.
    pub fn column_count(&self) -> usize {
        if self.no_metadata {
            self.columns_count
        } else {
            self.columns.len()
        }
    }

    pub(crate) fn encode(&self, out: &mut BytesMut, version: u8) {
        let global = self.global_table_spec.as_ref().filter(|_| !self.no_metadata);
        let new_id = self.new_metadata_id.as_ref().filter(|_| version >= 5);
        let mut flags = 0;
        if global.is_some() {
            flags |= FLAG_GLOBAL_TABLES_SPEC;
        }
        if self.paging_state.is_some() {
            flags |= FLAG_HAS_MORE_PAGES;
        }
        if self.no_metadata {
            flags |= FLAG_NO_METADATA;
        }
        if new_id.is_some() {
            flags |= FLAG_METADATA_CHANGED;
        }
        wire::write_int(out, flags);
        wire::write_int(out, count_i32(self.column_count()));
        if let Some(state) = &self.paging_state {
            wire::write_bytes(out, Some(state));
        }
        if let Some(id) = new_id {
            wire::write_short_bytes(out, id);
        }
        if !self.no_metadata {
            encode_specs(out, global, &self.columns);
        }
    }

    pub(crate) fn decode(r: &mut Reader, version: u8) -> Result<RowsMetadata, ProtocolError> {
        let flags = r.read_int()?;
        let count = read_count(r, "a column count")?;
        let paging_state = if flags & FLAG_HAS_MORE_PAGES != 0 { r.read_bytes()? } else { None };
        let new_metadata_id =
            if version >= 5 && flags & FLAG_METADATA_CHANGED != 0 { Some(r.read_short_bytes()?) } else { None };
        let no_metadata = flags & FLAG_NO_METADATA != 0;
        let (global_table_spec, columns) = if no_metadata {
            (None, Vec::new())
        } else {
            decode_specs(r, flags & FLAG_GLOBAL_TABLES_SPEC != 0, count)?
        };
        Ok(RowsMetadata {
            global_table_spec,
            columns,
            columns_count: count,
            paging_state,
            no_metadata,
            new_metadata_id,
        })
    }
}

/// A Rows result: metadata, then `rows_count` rows of already-encoded cells.
#[derive(Clone, Debug, PartialEq)]
pub struct Rows {
    pub metadata: RowsMetadata,
    pub rows_count: i32,
    /// `<rows_content>`: `rows_count * column_count` `[bytes]` cells.
    pub content: Bytes,
}

impl Rows {
    /// Client side: the rows, one `Vec` of cells each (`None` is null).
    pub fn iter(&self) -> RowsIter {
        RowsIter {
            reader: Reader::new(self.content.clone()),
            rows_left: self.rows_count.max(0) as usize,
            columns: self.metadata.column_count(),
        }
    }

    fn encode(&self, out: &mut BytesMut, version: u8) {
        self.metadata.encode(out, version);
        wire::write_int(out, self.rows_count);
        out.extend_from_slice(&self.content);
    }

    fn decode(r: &mut Reader, version: u8) -> Result<Rows, ProtocolError> {
        let metadata = RowsMetadata::decode(r, version)?;
        let rows_count = r.read_int()?;
        if rows_count < 0 {
            return Err(ProtocolError::NegativeLength { what: "a rows count", len: rows_count });
        }
        // Check that every cell is there (without copying anything), so that a
        // truncated result is an error here rather than while iterating.
        let columns = metadata.column_count();
        let mut scan = r.clone();
        if columns > 0 {
            for _ in 0..rows_count {
                for _ in 0..columns {
                    scan.read_bytes()?;
                }
            }
        }
        let content = r.take(r.remaining() - scan.remaining(), "rows content")?;
        Ok(Rows { metadata, rows_count, content })
    }
}

/// Iterator over the rows of a [`Rows`] result (client side).
#[derive(Clone, Debug)]
pub struct RowsIter {
    reader: Reader,
    rows_left: usize,
    columns: usize,
}

impl Iterator for RowsIter {
    type Item = Result<Vec<Option<Bytes>>, ProtocolError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rows_left == 0 {
            return None;
        }
        self.rows_left -= 1;
        let mut row = Vec::with_capacity(self.reader.bounded_capacity(self.columns, 4));
        for _ in 0..self.columns {
            match self.reader.read_bytes() {
                Ok(cell) => row.push(cell),
                Err(e) => {
                    self.rows_left = 0;
                    return Some(Err(e));
                }
            }
        }
        Some(Ok(row))
    }
}

/// Builds `<rows_content>` cell by cell.
///
/// Invariant: every row has exactly `columns` cells; breaking it is a
/// programmer error and panics (a short row would corrupt the frame).
#[derive(Debug)]
pub struct RowsWriter {
    buf: BytesMut,
    columns: usize,
    cells_in_row: usize,
    rows: i32,
}

impl RowsWriter {
    pub fn new(columns: usize) -> RowsWriter {
        RowsWriter::with_capacity(columns, 0)
    }

    /// With room for `bytes` bytes of cells.
    pub fn with_capacity(columns: usize, bytes: usize) -> RowsWriter {
        RowsWriter { buf: BytesMut::with_capacity(bytes), columns, cells_in_row: 0, rows: 0 }
    }

    /// Appends the next cell of the current row; `None` is null.
    pub fn push_cell(&mut self, cell: Option<&[u8]>) {
        self.next_cell();
        wire::write_bytes(&mut self.buf, cell);
    }

    /// Appends the next cell, serialized in place by `write` (no temporary
    /// buffer); the length prefix is patched afterwards.
    pub fn push_cell_with(&mut self, write: impl FnOnce(&mut BytesMut)) {
        self.next_cell();
        let at = self.buf.len();
        self.buf.put_i32(0);
        write(&mut self.buf);
        let len = count_i32(self.buf.len() - at - 4);
        wire::patch(&mut self.buf, at, len.to_be_bytes());
    }

    /// Closes the current row.
    pub fn end_row(&mut self) {
        assert_eq!(self.cells_in_row, self.columns, "row ended with the wrong number of cells");
        self.cells_in_row = 0;
        self.rows = self.rows.checked_add(1).expect("more than i32::MAX rows in one result");
    }

    pub fn rows_count(&self) -> i32 {
        self.rows
    }

    /// Bytes of cells written so far (to cut pages by size).
    pub fn content_len(&self) -> usize {
        self.buf.len()
    }

    /// The finished Rows result.
    pub fn finish(self, metadata: RowsMetadata) -> Rows {
        assert_eq!(self.cells_in_row, 0, "RowsWriter finished in the middle of a row");
        assert_eq!(metadata.column_count(), self.columns, "metadata and rows disagree on the column count");
        Rows { metadata, rows_count: self.rows, content: self.buf.freeze() }
    }

    fn next_cell(&mut self) {
        assert!(self.cells_in_row < self.columns, "more cells than columns in a row");
        self.cells_in_row += 1;
    }
}

/// `<metadata>` of a Prepared result: the bind markers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PreparedMetadata {
    /// For each partition key column, in partition key order, the index of the
    /// bind marker that gives it; empty when some partition key column has no
    /// plain marker (drivers then cannot route by token).
    pub pk_indexes: Vec<u16>,
    pub global_table_spec: Option<(String, String)>,
    /// One spec per bind marker.
    pub columns: Vec<ColumnSpec>,
}

impl PreparedMetadata {
    /// With a global table spec when all markers bind columns of one table.
    pub fn new(pk_indexes: Vec<u16>, columns: Vec<ColumnSpec>) -> PreparedMetadata {
        PreparedMetadata { pk_indexes, global_table_spec: common_table(&columns), columns }
    }

    fn encode(&self, out: &mut BytesMut) {
        let global = self.global_table_spec.as_ref();
        wire::write_int(out, if global.is_some() { FLAG_GLOBAL_TABLES_SPEC } else { 0 });
        wire::write_int(out, count_i32(self.columns.len()));
        wire::write_int(out, count_i32(self.pk_indexes.len()));
        for &i in &self.pk_indexes {
            wire::write_short(out, i);
        }
        encode_specs(out, global, &self.columns);
    }

    fn decode(r: &mut Reader) -> Result<PreparedMetadata, ProtocolError> {
        let flags = r.read_int()?;
        let count = read_count(r, "a bind marker count")?;
        let pk_count = read_count(r, "a partition key count")?;
        let mut pk_indexes = Vec::with_capacity(r.bounded_capacity(pk_count, 2));
        for _ in 0..pk_count {
            pk_indexes.push(r.read_short()?);
        }
        let (global_table_spec, columns) = decode_specs(r, flags & FLAG_GLOBAL_TABLES_SPEC != 0, count)?;
        Ok(PreparedMetadata { pk_indexes, global_table_spec, columns })
    }
}

/// A Prepared result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Prepared {
    /// The statement id (Cassandra: the MD5 of keyspace and query text).
    pub id: Bytes,
    pub metadata: PreparedMetadata,
    /// What executing it returns; [`RowsMetadata::empty`] for non-SELECTs.
    pub result_metadata: RowsMetadata,
    /// v5: [`result_metadata_id`] of `result_metadata`'s columns (sent after
    /// `id`; not sent before v5, and empty when decoded from v4).
    pub result_metadata_id: Bytes,
}

impl Prepared {
    /// A Prepared result, with the result metadata id of `result_metadata`.
    pub fn new(id: Bytes, metadata: PreparedMetadata, result_metadata: RowsMetadata) -> Prepared {
        let result_metadata_id = result_metadata_id(&result_metadata.columns);
        Prepared { id, metadata, result_metadata, result_metadata_id }
    }
}

impl ResultBody {
    /// Writes the body in the layout of protocol `version` (4 or 5).
    pub(crate) fn encode(&self, out: &mut BytesMut, version: u8) {
        match self {
            ResultBody::Void => wire::write_int(out, KIND_VOID),
            ResultBody::Rows(rows) => {
                wire::write_int(out, KIND_ROWS);
                rows.encode(out, version);
            }
            ResultBody::SetKeyspace(ks) => {
                wire::write_int(out, KIND_SET_KEYSPACE);
                wire::write_string(out, ks);
            }
            ResultBody::Prepared(p) => {
                wire::write_int(out, KIND_PREPARED);
                wire::write_short_bytes(out, &p.id);
                if version >= 5 {
                    wire::write_short_bytes(out, &p.result_metadata_id);
                }
                p.metadata.encode(out);
                p.result_metadata.encode(out, version);
            }
            ResultBody::SchemaChange(sc) => {
                wire::write_int(out, KIND_SCHEMA_CHANGE);
                sc.encode(out);
            }
        }
    }

    pub(crate) fn decode(r: &mut Reader, version: u8) -> Result<ResultBody, ProtocolError> {
        Ok(match r.read_int()? {
            KIND_VOID => ResultBody::Void,
            KIND_ROWS => ResultBody::Rows(Rows::decode(r, version)?),
            KIND_SET_KEYSPACE => ResultBody::SetKeyspace(r.read_string()?),
            KIND_PREPARED => {
                let id = r.read_short_bytes()?;
                let result_metadata_id = if version >= 5 { r.read_short_bytes()? } else { Bytes::new() };
                let metadata = PreparedMetadata::decode(r)?;
                let result_metadata = RowsMetadata::decode(r, version)?;
                ResultBody::Prepared(Box::new(Prepared { id, metadata, result_metadata, result_metadata_id }))
            }
            KIND_SCHEMA_CHANGE => ResultBody::SchemaChange(SchemaChange::decode(r)?),
            other => return Err(ProtocolError::UnknownResultKind(other)),
        })
    }
}

fn common_table(columns: &[ColumnSpec]) -> Option<(String, String)> {
    let first = columns.first()?;
    columns
        .iter()
        .all(|c| c.keyspace == first.keyspace && c.table == first.table)
        .then(|| (first.keyspace.clone(), first.table.clone()))
}

fn count_i32(n: usize) -> i32 {
    i32::try_from(n).expect("count does not fit an [int]")
}

fn read_count(r: &mut Reader, what: &'static str) -> Result<usize, ProtocolError> {
    let n = r.read_int()?;
    usize::try_from(n).map_err(|_| ProtocolError::NegativeLength { what, len: n })
}

fn encode_specs(out: &mut BytesMut, global: Option<&(String, String)>, columns: &[ColumnSpec]) {
    if let Some((ks, table)) = global {
        wire::write_string(out, ks);
        wire::write_string(out, table);
    }
    for c in columns {
        if global.is_none() {
            wire::write_string(out, &c.keyspace);
            wire::write_string(out, &c.table);
        }
        wire::write_string(out, &c.name);
        write_type(out, &c.ty);
    }
}

type Specs = (Option<(String, String)>, Vec<ColumnSpec>);

fn decode_specs(r: &mut Reader, global: bool, count: usize) -> Result<Specs, ProtocolError> {
    let global_table_spec = if global { Some((r.read_string()?, r.read_string()?)) } else { None };
    // A spec takes at least a 2-byte name length and a 2-byte type id.
    let mut columns = Vec::with_capacity(r.bounded_capacity(count, 4));
    for _ in 0..count {
        let (keyspace, table) = match &global_table_spec {
            Some((ks, t)) => (ks.clone(), t.clone()),
            None => (r.read_string()?, r.read_string()?),
        };
        let name = r.read_string()?;
        let ty = read_type(r)?;
        columns.push(ColumnSpec { keyspace, table, name, ty });
    }
    Ok((global_table_spec, columns))
}
