//! The reads of a SELECT: partition by partition through the data plane (or
//! the virtual tables), resuming at a `Position`, applying the plan's
//! clustering slices, filters, LIMIT and PER PARTITION LIMIT.

use super::*;

pub(super) struct Reader<'a> {
    pub(super) proc: &'a Processor,
    pub(super) schema: &'a Schema,
    pub(super) keyspace: &'a types::schema::KeyspaceDef,
    pub(super) consistency: types::Consistency,
    pub(super) table: &'a TableDef,
    pub(super) plan: &'a ReadPlan,
    pub(super) per_partition: Option<u32>,
    pub(super) distinct: bool,
    pub(super) now: i32,
}

impl Reader<'_> {
    /// Reads up to `max_rows` result rows from `pos`; returns them and the
    /// position to resume from when more may follow.
    pub(super) fn read(
        &self,
        pos: &mut Position,
        max_rows: usize,
    ) -> Result<(Vec<RowData>, Option<Position>), QueryError> {
        if system::is_virtual(&self.table.keyspace) {
            return self.read_virtual(pos, max_rows);
        }
        let mut out = Vec::new();
        let want = |out: &Vec<RowData>, pos: &Position| max_rows.saturating_sub(out.len()).min(pos.remaining as usize);
        match &self.plan.partitions {
            PartitionPlan::Keys(keys) => {
                while (pos.index as usize) < keys.len() {
                    if want(&out, pos) == 0 {
                        return Ok((out, Some(pos.clone())));
                    }
                    let key = common::compose_partition_key(&keys[pos.index as usize])?;
                    if pos.partition_key != key.as_ref() {
                        pos.enter(ring::token_of(&key), key.to_vec());
                    }
                    let done = self.read_partition(pos, &mut out, max_rows)?;
                    if !done {
                        return Ok((out, Some(pos.clone())));
                    }
                    pos.index += 1;
                    pos.partition_key.clear();
                }
                Ok((out, None))
            }
            PartitionPlan::Range { start, end } | PartitionPlan::Index { start, end, .. } => {
                // Finish the partition the previous page stopped inside.
                if !pos.partition_key.is_empty() && !pos.done {
                    if !self.read_partition(pos, &mut out, max_rows)? {
                        return Ok((out, Some(pos.clone())));
                    }
                    pos.done = true;
                }
                let Some((mut start_token, end_token)) = token_bounds(start, end) else { return Ok((out, None)) };
                // Resume strictly after the last partition of the previous page.
                let mut after_key = None;
                if !pos.partition_key.is_empty() {
                    debug_assert!(pos.done, "a Range position resumes only after a finished partition");
                    start_token = pos.token;
                    after_key = Some(pos.partition_key.clone());
                }
                if start_token > end_token {
                    return Ok((out, None));
                }
                loop {
                    if want(&out, pos) == 0 {
                        return Ok((out, Some(pos.clone())));
                    }
                    let scan = ScanRange {
                        table: self.table.id,
                        start_token,
                        after_key: after_key.clone(),
                        end_token,
                        partition_limit: SCAN_BATCH,
                        per_partition: self.partition_read(pos, 0, 0),
                        row_limit: usize::MAX,
                    };
                    let partitions = match &self.plan.partitions {
                        PartitionPlan::Index { index, value, .. } => {
                            let lookup = storage::IndexScan {
                                index: *index,
                                value: value.clone(),
                                start_token,
                                after_key: after_key.clone(),
                                end_token,
                                partition_limit: SCAN_BATCH,
                                now: self.now,
                            };
                            self.proc.data.index_keys(self.keyspace, &lookup, self.consistency)?
                        }
                        _ => self.proc.data.scan_keys(self.keyspace, &scan, self.consistency)?,
                    };
                    if partitions.is_empty() {
                        return Ok((out, None));
                    }
                    for (token, key) in partitions {
                        if want(&out, pos) == 0 {
                            return Ok((out, Some(pos.clone())));
                        }
                        pos.enter(token, key);
                        if !self.read_partition(pos, &mut out, max_rows)? {
                            return Ok((out, Some(pos.clone())));
                        }
                        pos.done = true;
                        start_token = token;
                        after_key = Some(pos.partition_key.clone());
                    }
                }
            }
        }
    }

    pub(super) fn partition_read(&self, pos: &Position, token: i64, limit: usize) -> PartitionRead {
        let mut ranges = self.plan.ranges.clone();
        if pos.after.is_some() && self.table.clustering().next().is_none() {
            // A partition without clustering columns holds one row: nothing follows it.
            ranges.clear();
        } else if let Some(after) = &pos.after {
            // Resume strictly after the last returned row, in iteration order.
            let resume =
                ClusteringBound { prefix: after.iter().map(|v| Bytes::from(v.clone())).collect(), inclusive: false };
            ranges = if ranges.is_empty() {
                vec![(ClusteringBound::unbounded(), ClusteringBound::unbounded())]
            } else {
                ranges
            };
            let layout: Vec<(CqlType, bool)> =
                self.table.clustering().map(|c| (c.ty.clone(), c.order == ClusteringOrder::Desc)).collect();
            let cmp = |a: &[Bytes], b: &[Bytes]| compare_prefix(&layout, a, b);
            let mut adjusted = Vec::new();
            for (s, e) in ranges {
                if self.plan.reversed {
                    // Keep rows before `after`.
                    if !s.prefix.is_empty() && cmp(&s.prefix, &resume.prefix) == CmpOrdering::Greater {
                        continue;
                    }
                    let end = if e.prefix.is_empty() || cmp(&e.prefix, &resume.prefix) != CmpOrdering::Less {
                        resume.clone()
                    } else {
                        e
                    };
                    adjusted.push((s, end));
                } else {
                    if !e.prefix.is_empty() && cmp(&e.prefix, &resume.prefix) == CmpOrdering::Less {
                        continue;
                    }
                    let start = if s.prefix.is_empty() || cmp(&s.prefix, &resume.prefix) != CmpOrdering::Greater {
                        resume.clone()
                    } else {
                        s
                    };
                    adjusted.push((start, e));
                }
            }
            ranges = adjusted;
        }
        PartitionRead {
            table: self.table.id,
            token,
            partition_key: pos.partition_key.clone(),
            ranges,
            reversed: self.plan.reversed,
            include_static: self.table.has_static(),
            row_limit: limit,
            now: self.now,
        }
    }

    /// Reads rows of the partition at `pos` into `out`. Returns whether the
    /// partition is finished (false: stopped because `out` is full).
    pub(super) fn read_partition(
        &self,
        pos: &mut Position,
        out: &mut Vec<RowData>,
        max_rows: usize,
    ) -> Result<bool, QueryError> {
        let per_partition_left = self.per_partition.map(|p| p.saturating_sub(pos.in_partition)).unwrap_or(u32::MAX);
        let room = max_rows.saturating_sub(out.len()).min(pos.remaining as usize).min(per_partition_left as usize);
        if per_partition_left == 0 {
            return Ok(true);
        }
        if room == 0 {
            return Ok(false);
        }
        if self.plan.ranges.is_empty() && self.plan.clustering_restricted {
            return Ok(true);
        }
        let filtering = !self.plan.filters.is_empty();
        // Read one extra row to know whether the partition continues.
        let fetch = if self.distinct {
            1
        } else if filtering {
            room.saturating_add(1).max(128)
        } else {
            room.saturating_add(1)
        };
        let read = self.partition_read(pos, pos.token, fetch);
        if read.ranges.is_empty() && pos.after.is_some() {
            return Ok(true);
        }
        let Some(partition) = self.proc.data.read(self.keyspace, read, self.consistency)? else { return Ok(true) };
        let pk_parts = common::decompose_partition_key(&partition.key, self.table.partition_key_len());
        let static_row = partition.static_row.as_ref();
        if self.distinct || (partition.rows.is_empty() && !self.plan.clustering_restricted) {
            if pos.started || pos.after.is_some() {
                return Ok(true);
            }
            // A partition with only static data shows as one row (Cassandra's rule).
            if static_row.is_some() || self.distinct {
                let row = self.row_data(&partition.key, partition.token, &pk_parts, static_row, None);
                pos.started = true;
                if passes(self.table, &self.plan.filters, &row) {
                    out.push(row);
                    pos.in_partition += 1;
                    pos.remaining = pos.remaining.saturating_sub(1);
                }
            }
            return Ok(true);
        }
        let fetched = partition.rows.len();
        let mut taken = 0usize;
        for r in &partition.rows {
            let row = self.row_data(&partition.key, partition.token, &pk_parts, static_row, Some(r));
            pos.after = Some(r.clustering.clone());
            pos.started = true;
            taken += 1;
            if !passes(self.table, &self.plan.filters, &row) {
                continue;
            }
            out.push(row);
            pos.in_partition += 1;
            pos.remaining = pos.remaining.saturating_sub(1);
            let left = self.per_partition.map(|p| p.saturating_sub(pos.in_partition)).unwrap_or(u32::MAX);
            if left == 0 {
                return Ok(true);
            }
            if out.len() >= max_rows || pos.remaining == 0 {
                return Ok(taken == fetched && fetched < fetch);
            }
        }
        if fetched >= fetch {
            // More rows may remain (filtered reads go on from `after`).
            return self.read_partition(pos, out, max_rows);
        }
        Ok(true)
    }

    pub(super) fn row_data(
        &self,
        key: &[u8],
        token: i64,
        pk_parts: &[Vec<u8>],
        static_row: Option<&Row>,
        row: Option<&Row>,
    ) -> RowData {
        let mut cells = Vec::with_capacity(self.table.columns.len());
        for c in &self.table.columns {
            let cell = match c.kind {
                ColumnKind::PartitionKey => pk_parts.get(c.position as usize).map(|v| CellOut::plain(v.clone())),
                ColumnKind::Clustering => {
                    row.and_then(|r| r.clustering.get(c.position as usize)).map(|v| CellOut::plain(v.clone()))
                }
                ColumnKind::Static => static_row.and_then(|s| common::stored_column(c, s, self.now)),
                ColumnKind::Regular => row.and_then(|r| common::stored_column(c, r, self.now)),
            };
            cells.push(cell);
        }
        let _ = key;
        RowData { token, clustering: row.map(|r| r.clustering.clone()).unwrap_or_default(), cells }
    }

    pub(super) fn read_virtual(
        &self,
        pos: &mut Position,
        max_rows: usize,
    ) -> Result<(Vec<RowData>, Option<Position>), QueryError> {
        let all = if self.table.keyspace == "system_views" {
            crate::views::rows(self.table, self.proc)
        } else {
            system::rows(self.table, self.schema, &self.proc.node, &self.proc.data.peers())
        };
        let mut filters: Vec<Filter> = Vec::new();
        // Restrictions on a virtual table are evaluated over its generated rows.
        if let PartitionPlan::Keys(keys) = &self.plan.partitions {
            let pk_cols: Vec<usize> = (0..self.table.columns.len())
                .filter(|i| self.table.columns[*i].kind == ColumnKind::PartitionKey)
                .collect();
            for (n, col) in pk_cols.iter().enumerate() {
                filters.push(Filter {
                    map_key: None,
                    column: *col,
                    op: Operator::In,
                    values: keys.iter().filter_map(|k| k.get(n).map(|b| b.to_vec())).collect(),
                });
            }
        }
        let ck_cols: Vec<usize> =
            (0..self.table.columns.len()).filter(|i| self.table.columns[*i].kind == ColumnKind::Clustering).collect();
        let mut out = Vec::new();
        let rows: Vec<RowData> = all
            .into_iter()
            .map(|values| RowData {
                token: 0,
                clustering: ck_cols.iter().map(|i| values[*i].clone().unwrap_or_default()).collect(),
                cells: values.into_iter().map(|v| v.map(CellOut::plain)).collect(),
            })
            .filter(|r| passes(self.table, &filters, r) && passes(self.table, &self.plan.filters, r))
            .filter(|r| {
                self.plan.ranges.is_empty()
                    || self.plan.ranges.iter().any(|(s, e)| in_range(self.table, &r.clustering, s, e))
            })
            .collect();
        let first = pos.index as usize;
        for (index, row) in rows.into_iter().enumerate().skip(first) {
            if out.len() >= max_rows || pos.remaining == 0 {
                pos.index = index as u32;
                return Ok((out, Some(pos.clone())));
            }
            out.push(row);
            pos.remaining = pos.remaining.saturating_sub(1);
        }
        Ok((out, None))
    }
}

pub(super) fn in_range(
    table: &TableDef,
    clustering: &[Vec<u8>],
    start: &ClusteringBound,
    end: &ClusteringBound,
) -> bool {
    let layout: Vec<(CqlType, bool)> =
        table.clustering().map(|c| (c.ty.clone(), c.order == ClusteringOrder::Desc)).collect();
    let row: Vec<Bytes> = clustering.iter().map(|v| Bytes::from(v.clone())).collect();
    let cmp_start = compare_prefix(&layout, &row[..start.prefix.len().min(row.len())], &start.prefix);
    let cmp_end = compare_prefix(&layout, &row[..end.prefix.len().min(row.len())], &end.prefix);
    let after_start = start.prefix.is_empty()
        || cmp_start == CmpOrdering::Greater
        || (cmp_start == CmpOrdering::Equal && start.inclusive);
    let before_end =
        end.prefix.is_empty() || cmp_end == CmpOrdering::Less || (cmp_end == CmpOrdering::Equal && end.inclusive);
    after_start && before_end
}

/// Compares clustering prefixes in storage order (DESC columns reversed),
/// a shorter equal prefix comparing equal.
pub(super) fn compare_prefix(layout: &[(CqlType, bool)], a: &[Bytes], b: &[Bytes]) -> CmpOrdering {
    for ((x, y), (ty, desc)) in a.iter().zip(b).zip(layout) {
        let o = types::compare::compare_serialized(ty, x, y);
        let o = if *desc { o.reverse() } else { o };
        if o != CmpOrdering::Equal {
            return o;
        }
    }
    CmpOrdering::Equal
}
