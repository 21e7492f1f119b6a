//! GROUP BY: validation of the clause (a prefix of the primary key, as
//! Cassandra's `SelectStatement` checks it) and the grouped execution: rows
//! are read in order and folded into groups (the partition plus the first
//! `prefix` clustering values); each group gives one result row, its
//! aggregates over the group's rows and other selectors from its first row.
//!
//! Invariants:
//! - LIMIT, PER PARTITION LIMIT and the page size count groups.
//! - A page ends after a whole group; its paging state resumes right after
//!   that group's last row, `remaining` holding the groups LIMIT still allows
//!   and `in_partition` the groups already returned from that partition.

use super::*;

/// Rows asked of the reader at a time while grouping a paged query.
const CHUNK: usize = 1024;

/// The number of clustering columns in a group key, or `None` without GROUP BY.
pub(super) fn group_by_prefix(table: &TableDef, select: &ast::Select) -> Result<Option<usize>, QueryError> {
    if select.group_by.is_empty() {
        return Ok(None);
    }
    let restricted_by_eq = |name: &str| {
        select.where_clause.iter().any(|r| {
            r.op == Operator::Eq
                && match &r.lhs {
                    RelationLhs::Column(c) => c == name,
                    RelationLhs::MultiColumn(cs) => cs.iter().any(|c| c == name),
                    _ => false,
                }
        })
    };
    let out_of_order = || {
        QueryError::invalid(
            "Group by currently only support groups of columns following their declared order in the PRIMARY KEY",
        )
    };
    let mut pk: Vec<&types::schema::ColumnDef> = table.partition_key().collect();
    pk.sort_by_key(|c| c.position);
    let mut ck: Vec<&types::schema::ColumnDef> = table.clustering().collect();
    ck.sort_by_key(|c| c.position);
    let mut key_columns = pk.into_iter().chain(ck);
    let mut prefix = 0;
    let mut after_function = false;
    for expr in &select.group_by {
        let name = match expr {
            SelectorExpr::Column(name) => name,
            // A time bucketing function of a clustering column, last.
            SelectorExpr::FunctionCall { args, .. } => {
                group_by_function(table, expr)?;
                match args.first() {
                    Some(SelectorExpr::Column(name)) => name,
                    _ => return Err(QueryError::invalid("Only columns of the PRIMARY KEY are supported in GROUP BY")),
                }
            }
            _ => return Err(QueryError::invalid("Only columns of the PRIMARY KEY are supported in GROUP BY")),
        };
        let (_, def) = common::column(table, name)?;
        if !matches!(def.kind, ColumnKind::PartitionKey | ColumnKind::Clustering) {
            return Err(QueryError::Invalid(format!(
                "Group by is currently only supported on the columns of the PRIMARY KEY, got {}",
                def.name
            )));
        }
        if after_function {
            return Err(QueryError::invalid("Functions are only supported on the last element of the GROUP BY clause"));
        }
        after_function = matches!(expr, SelectorExpr::FunctionCall { .. });
        loop {
            let column = key_columns.next().ok_or_else(out_of_order)?;
            if column.kind == ColumnKind::Clustering {
                prefix += 1;
            }
            if column.name == def.name {
                break;
            }
            if !restricted_by_eq(&column.name) {
                return Err(out_of_order());
            }
        }
    }
    if key_columns.next().is_some_and(|c| c.kind == ColumnKind::PartitionKey) {
        return Err(QueryError::invalid("Group by is not supported on only a part of the partition key"));
    }
    if prefix > 0 && select.distinct {
        return Err(QueryError::invalid("Grouping on clustering columns is not allowed for SELECT DISTINCT queries"));
    }
    Ok(Some(prefix))
}

/// The selector a GROUP BY function (`floor(c, 1h)`, on a clustering
/// column) computes the last group key value with, if the clause ends in one.
pub(super) fn group_by_function(table: &TableDef, expr: &SelectorExpr) -> Result<Sel, QueryError> {
    let SelectorExpr::FunctionCall { function, args } = expr else {
        return Err(QueryError::invalid("Only columns of the PRIMARY KEY are supported in GROUP BY"));
    };
    let Some(SelectorExpr::Column(name)) = args.first() else {
        return Err(QueryError::invalid("Only columns of the PRIMARY KEY are supported in GROUP BY"));
    };
    let (_, def) = common::column(table, name)?;
    if def.kind != ColumnKind::Clustering {
        return Err(QueryError::Invalid(format!(
            "Group by functions are only supported on clustering columns, got {}",
            def.name
        )));
    }
    if !function.name.eq_ignore_ascii_case("floor") {
        return Err(QueryError::Invalid(format!(
            "Only monotonic functions are supported in the GROUP BY clause, got: system.{}",
            function.name.to_ascii_lowercase()
        )));
    }
    let (sel, _, _) = plan_selector(table, expr)?;
    Ok(sel)
}

/// A grouped SELECT.
pub(super) struct Grouped<'a> {
    pub(super) table: &'a TableDef,
    pub(super) selection: &'a SelectionPlan,
    pub(super) plan: &'a ReadPlan,
    /// Clustering columns in a group key.
    pub(super) prefix: usize,
    /// The GROUP BY function giving the last key value (in place of the
    /// prefix's last clustering value).
    pub(super) function: Option<Sel>,
    pub(super) per_partition: Option<u32>,
    pub(super) limit: Option<u32>,
    /// The execution's bound values (markers in the selection).
    pub(super) values: &'a [cql_protocol::BoundValue],
}

/// The group being built.
struct Current {
    partition: Vec<u8>,
    clustering: Vec<Vec<u8>>,
    /// Index of the partition in a Keys plan's list.
    index: u32,
    rows: Vec<RowData>,
    /// Past PER PARTITION LIMIT: read through, not returned.
    skip: bool,
}

enum Flow {
    Go,
    /// The page is full (resume there) or LIMIT is used up (`None`).
    Stop(Option<Position>),
}

/// Folds rows, in read order, into groups written to `out`.
struct Groups<'g, 's> {
    g: &'g Grouped<'g>,
    out: Out<'s>,
    pk_columns: Vec<usize>,
    /// Composed keys of a Keys plan, to name a partition's index.
    keys: Vec<Bytes>,
    page_groups: usize,
    emitted: usize,
    groups_left: u32,
    /// The partition `part_groups` counts the returned groups of.
    partition: Vec<u8>,
    part_groups: u32,
    key_index: u32,
    current: Option<Current>,
    /// ORDER BY with IN: complete groups kept to be sorted, not written.
    sorted: Option<Vec<Vec<RowData>>>,
}

impl Groups<'_, '_> {
    fn partition_of(&self, row: &RowData) -> Result<Vec<u8>, QueryError> {
        let parts: Vec<Bytes> = self
            .pk_columns
            .iter()
            .map(|i| row.cells[*i].as_ref().map(|c| Bytes::from(c.value.clone())).unwrap_or_default())
            .collect();
        Ok(common::compose_partition_key(&parts)?.to_vec())
    }

    fn push(&mut self, row: RowData) -> Result<Flow, QueryError> {
        let partition = self.partition_of(&row)?;
        let mut clustering = row.clustering[..self.g.prefix.min(row.clustering.len())].to_vec();
        if let Some(function) = &self.g.function {
            let env = Env { clock: self.out.clock, values: self.out.values };
            let bucket = row_cell(function, &row, &env)?.map(|c| c.into_owned()).unwrap_or_default();
            if let Some(last) = clustering.last_mut() {
                *last = bucket;
            }
        }
        if let Some(cur) = &mut self.current {
            if cur.partition == partition && cur.clustering == clustering {
                if !cur.skip {
                    cur.rows.push(row);
                }
                return Ok(Flow::Go);
            }
        }
        // A new group starts: the current one is complete.
        if let Flow::Stop(next) = self.close() {
            return Ok(Flow::Stop(next));
        }
        if partition != self.partition {
            self.partition = partition.clone();
            self.part_groups = 0;
            while (self.key_index as usize) < self.keys.len()
                && self.keys[self.key_index as usize].as_ref() != partition.as_slice()
            {
                self.key_index += 1;
            }
        }
        let skip = self.g.per_partition.is_some_and(|p| self.part_groups >= p);
        let rows = if skip { Vec::new() } else { vec![row] };
        self.current = Some(Current { partition, clustering, index: self.key_index, rows, skip });
        Ok(Flow::Go)
    }

    /// Writes the current group, if any; says whether the page is over.
    fn close(&mut self) -> Flow {
        let Some(cur) = self.current.take() else { return Flow::Go };
        if cur.skip {
            return Flow::Go;
        }
        self.emitted += 1;
        self.part_groups += 1;
        if let Some(kept) = &mut self.sorted {
            kept.push(cur.rows);
            return Flow::Go;
        }
        write_aggregate(self.g.selection, &cur.rows, &mut self.out);
        self.groups_left = self.groups_left.saturating_sub(1);
        if self.groups_left == 0 {
            return Flow::Stop(None);
        }
        if self.emitted < self.page_groups {
            return Flow::Go;
        }
        let Some(last) = cur.rows.last() else { return Flow::Go };
        let has_clustering = self.g.table.clustering().next().is_some();
        // A static-only row (no clustering in a table that has some) has no position inside its partition.
        let after = (!has_clustering || !last.clustering.is_empty()).then(|| last.clustering.clone());
        Flow::Stop(Some(Position {
            index: cur.index,
            token: last.token,
            partition_key: cur.partition,
            after,
            in_partition: self.part_groups,
            remaining: self.groups_left,
            started: true,
            done: false,
        }))
    }
}

impl Grouped<'_> {
    pub(super) fn execute(
        &self,
        reader: &Reader<'_>,
        page: &Page<'_>,
        sort_in_memory: bool,
    ) -> Result<ResultBody, QueryError> {
        let state = match page.paging_state {
            Some(state) => Position::decode(state)
                .ok_or_else(|| QueryError::Protocol("Invalid value for the paging state".into()))?,
            None => Position { remaining: self.limit.unwrap_or(u32::MAX), ..Position::default() },
        };
        // Virtual tables and ORDER BY with IN are read (and sorted) whole, in one page.
        let whole = sort_in_memory || system::is_virtual(&self.table.keyspace);
        let page_groups = if whole { usize::MAX } else { page.page_size.filter(|&p| p > 0).unwrap_or(usize::MAX) };
        let mut pk_columns: Vec<usize> =
            (0..self.table.columns.len()).filter(|i| self.table.columns[*i].kind == ColumnKind::PartitionKey).collect();
        pk_columns.sort_by_key(|i| self.table.columns[*i].position);
        let keys = match &self.plan.partitions {
            PartitionPlan::Keys(keys) => {
                keys.iter().map(|k| common::compose_partition_key(k)).collect::<Result<Vec<_>, _>>()?
            }
            PartitionPlan::Range { .. } | PartitionPlan::Index { .. } => Vec::new(),
        };
        let mut groups = Groups {
            g: self,
            out: Out::new(self.selection, &reader.proc.clock, self.values),
            pk_columns,
            keys,
            page_groups,
            emitted: 0,
            // Sorted groups take LIMIT after sorting.
            groups_left: if sort_in_memory { u32::MAX } else { state.remaining },
            partition: state.partition_key.clone(),
            part_groups: state.in_partition,
            key_index: state.index,
            current: None,
            sorted: sort_in_memory.then(Vec::new),
        };
        let mut pos = Position { remaining: u32::MAX, in_partition: 0, ..state };
        let mut next_state = None;
        let mut stopped = false;
        if whole {
            let (rows, _) = reader.read(&mut pos, usize::MAX)?;
            for row in rows {
                if let Flow::Stop(next) = groups.push(row)? {
                    (next_state, stopped) = (next, true);
                    break;
                }
            }
        } else {
            'read: loop {
                let (rows, next) = reader.read(&mut pos, CHUNK.min(page_groups.saturating_mul(16)).max(64))?;
                for row in rows {
                    if let Flow::Stop(next) = groups.push(row)? {
                        (next_state, stopped) = (next, true);
                        break 'read;
                    }
                }
                match next {
                    Some(next) => pos = next,
                    None => break,
                }
            }
        }
        if !stopped {
            groups.close();
        }
        if let Some(mut kept) = groups.sorted.take() {
            // Cassandra groups each partition's rows as read, then orders the
            // groups (by their first rows) and applies LIMIT.
            let first = |g: &Vec<RowData>| g.first().map(|r| r.clustering.clone()).unwrap_or_default();
            kept.sort_by(|a, b| compare_clustering(self.table, self.plan.reversed, &first(a), &first(b)));
            kept.truncate(self.limit.map_or(usize::MAX, |l| l as usize));
            for rows in &kept {
                write_aggregate(self.selection, rows, &mut groups.out);
            }
        }
        let mut metadata = self.selection.result_metadata(page.skip_metadata);
        if let Some(next) = next_state {
            metadata = metadata.with_paging_state(Some(next.encode()));
        }
        Ok(ResultBody::Rows(groups.out.finish()?.finish(metadata)))
    }
}
