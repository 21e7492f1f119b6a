//! The read planner: a SELECT's restrictions turned into a `ReadPlan` (which
//! partitions, which clustering slices, which filters run after the read,
//! and the order), refused with Cassandra's messages where Shoal cannot serve
//! them exactly; and the filters' evaluation on a row.

use super::*;

/// Cassandra's refusal of a restriction that needs a filtering read.
pub(super) const FILTERING: &str = "Cannot execute this query as it might involve data filtering and thus may have unpredictable performance. If you want to execute this query despite the performance unpredictability, use ALLOW FILTERING";

/// A restriction on one column evaluated after the read (ALLOW FILTERING,
/// virtual tables).
#[derive(Debug)]
pub(super) struct Filter {
    /// `m[key] = value`: the map key (the value is `values[0]`).
    pub(super) map_key: Option<Vec<u8>>,
    pub(super) column: usize,
    pub(super) op: Operator,
    /// For IN: several values; otherwise one.
    pub(super) values: Vec<Vec<u8>>,
}

pub(super) enum PartitionPlan {
    /// Exactly these partition keys (components per key), in this order.
    Keys(Vec<Vec<Bytes>>),
    /// A token range, `(token, inclusive)` ends.
    Range { start: Option<(i64, bool)>, end: Option<(i64, bool)> },
    /// The partitions a secondary index finds for a value, within a token range.
    Index { index: uuid::Uuid, value: Vec<u8>, start: Option<(i64, bool)>, end: Option<(i64, bool)> },
}

pub(super) struct ReadPlan {
    pub(super) partitions: PartitionPlan,
    pub(super) ranges: Vec<(ClusteringBound, ClusteringBound)>,
    pub(super) clustering_restricted: bool,
    pub(super) filters: Vec<Filter>,
    pub(super) reversed: bool,
}

pub(super) fn bytes_of(b: Bound, col: &str) -> Result<Bytes, QueryError> {
    match b {
        Bound::Value(v) => Ok(v),
        Bound::Null => Err(QueryError::Invalid(format!("Invalid null value in condition for column {col}"))),
        Bound::Unset => Err(QueryError::Invalid(format!("Invalid unset value for column {col}"))),
    }
}

/// The candidate values of `col = x` or `col IN (...)`.
pub(super) fn relation_values(
    rel: &ast::Relation,
    name: &str,
    ty: &CqlType,
    ctx: &BindCtx<'_>,
) -> Result<Vec<Bytes>, QueryError> {
    let r = Receiver { name, ty };
    match rel.op {
        Operator::In => match &rel.rhs {
            Term::List(items) | Term::Tuple(items) => items.iter().map(|t| bytes_of(eval(t, &r, ctx)?, name)).collect(),
            Term::Bind(_) => {
                let list_ty = CqlType::List { elem: Box::new(ty.clone()), frozen: true };
                let lr = Receiver { name, ty: &list_ty };
                match eval_value(&rel.rhs, &lr, ctx)? {
                    Some(Value::List(items)) => Ok(items.into_iter().map(|v| Bytes::from(v.to_bytes())).collect()),
                    _ => Err(QueryError::Invalid(format!("Invalid null value for IN restriction on {name}"))),
                }
            }
            _ => Err(QueryError::Invalid(format!("Invalid IN restriction on {name}"))),
        },
        _ => Ok(vec![bytes_of(eval(&rel.rhs, &r, ctx)?, name)?]),
    }
}

pub(super) fn sort_dedup(ty: &CqlType, values: &mut Vec<Bytes>, desc: bool) {
    values.sort_by(|a, b| {
        let o = types::compare::compare_serialized(ty, a, b);
        if desc {
            o.reverse()
        } else {
            o
        }
    });
    values.dedup();
}

pub(super) fn token_value(rel: &ast::Relation, ctx: &BindCtx<'_>) -> Result<i64, QueryError> {
    let r = Receiver { name: "partition key token", ty: &CqlType::BigInt };
    match eval_value(&rel.rhs, &r, ctx)? {
        Some(Value::BigInt(t)) => Ok(t),
        _ => Err(QueryError::invalid("Invalid null value for the partition key token")),
    }
}

pub(super) fn plan_read(table: &TableDef, select: &ast::Select, ctx: &BindCtx<'_>) -> Result<ReadPlan, QueryError> {
    let pk_len = table.partition_key_len();
    let ck_cols: Vec<(usize, &types::schema::ColumnDef)> =
        table.columns.iter().enumerate().filter(|(_, c)| c.kind == ColumnKind::Clustering).collect();
    let mut pk_values: Vec<Option<Vec<Bytes>>> = vec![None; pk_len];
    let mut token_start: Option<(i64, bool)> = None;
    let mut token_end: Option<(i64, bool)> = None;
    let mut ck_eq: Vec<Option<Vec<Bytes>>> = vec![None; ck_cols.len()];
    let mut ck_slice: Vec<(ValueBound, ValueBound)> = vec![(None, None); ck_cols.len()];
    let mut multi: Option<(PrefixBound, PrefixBound)> = None;
    let mut multi_eq: Option<Vec<Vec<Bytes>>> = None;
    let mut filters = Vec::new();

    // Secondary indexes: the restrictions an index serves, and the one used
    // to find the partitions when the partition key is not fully restricted.
    let indexed = |rel: &ast::Relation| -> Option<&types::schema::IndexDef> {
        use crate::index::{serving, IndexedOp};
        match (&rel.lhs, rel.op) {
            (RelationLhs::Column(n), Operator::Eq) => serving(table, n, IndexedOp::Eq),
            (RelationLhs::Column(n), Operator::Contains) => serving(table, n, IndexedOp::Contains),
            (RelationLhs::Column(n), Operator::ContainsKey) => serving(table, n, IndexedOp::ContainsKey),
            (RelationLhs::MapElement { column, .. }, Operator::Eq) => serving(table, column, IndexedOp::MapEntry),
            _ => None,
        }
    };
    // The partition key columns restricted by = or IN, each once (a few: a list, not a set).
    let mut pk_eq: Vec<&str> = Vec::with_capacity(pk_len);
    for r in select.where_clause.iter().filter(|r| matches!(r.op, Operator::Eq | Operator::In)) {
        let RelationLhs::Column(n) = &r.lhs else { continue };
        if let Some(c) = table.column(n).filter(|c| c.kind == ColumnKind::PartitionKey) {
            if !pk_eq.contains(&c.name.as_str()) {
                pk_eq.push(c.name.as_str());
            }
        }
    }
    let pk_full = pk_eq.len() == pk_len;
    let on_pk = |r: &ast::Relation| match &r.lhs {
        RelationLhs::Column(n) => {
            table.column(n).is_some_and(|c| matches!(c.kind, ColumnKind::PartitionKey | ColumnKind::Clustering))
        }
        _ => false,
    };
    let index_rels = select.where_clause.iter().filter(|r| indexed(r).is_some() && !(pk_full && on_pk(r))).count();
    let chosen: Option<usize> =
        if pk_full { None } else { select.where_clause.iter().position(|r| indexed(r).is_some()) };
    let mut index_value: Option<(uuid::Uuid, Vec<u8>)> = None;

    // With the partition key fully restricted, one index restriction is served without ALLOW FILTERING.
    let served_in_partition = pk_full && index_rels == 1;
    // Storage-attached indexes also serve ranges (`v > x`) and combine with
    // each other: restrictions all served by them need no ALLOW FILTERING.
    // (Shoal serves an SAI range by filtering the scanned partitions.)
    let sai = |rel: &ast::Relation| match (&rel.lhs, rel.op) {
        (_, Operator::Eq | Operator::Contains | Operator::ContainsKey) => {
            indexed(rel).is_some_and(|i| i.class_name.is_some())
        }
        (RelationLhs::Column(n), Operator::Gt | Operator::Gte | Operator::Lt | Operator::Lte) => table
            .indexes
            .iter()
            .any(|i| &i.column == n && i.class_name.is_some() && i.target == types::schema::IndexTargetKind::Simple),
        _ => false,
    };
    let rest: Vec<&ast::Relation> = select
        .where_clause
        .iter()
        .filter(|r| !(matches!(r.lhs, RelationLhs::Token(_)) || (pk_full && on_pk(r))))
        .collect();
    let sai_only = !rest.is_empty() && rest.iter().all(|r| sai(r));
    let allow = |rel: &ast::Relation| {
        select.allow_filtering
            || (served_in_partition && indexed(rel).is_some() && !on_pk(rel))
            || (sai_only && sai(rel))
    };

    for (rel_no, rel) in select.where_clause.iter().enumerate() {
        if Some(rel_no) == chosen {
            let index = indexed(rel).ok_or_else(|| QueryError::Server("index choice".into()))?;
            let (filter, value) = index_filter(table, rel, ctx)?;
            index_value = Some((index.id, value));
            filters.push(filter);
            continue;
        }
        if let RelationLhs::MapElement { .. } = &rel.lhs {
            if !allow(rel) {
                return Err(QueryError::Invalid(FILTERING.into()));
            }
            filters.push(index_filter(table, rel, ctx)?.0);
            continue;
        }
        match &rel.lhs {
            RelationLhs::Column(name) => {
                let (i, c) = common::column(table, name)?;
                if let CqlType::Udt { frozen: false, .. } = c.ty {
                    return Err(QueryError::Invalid(format!(
                        "Non-frozen UDT column '{name}' ({}) cannot be restricted by any relation",
                        c.ty.to_cql()
                    )));
                }
                match (c.kind, rel.op) {
                    (ColumnKind::PartitionKey, Operator::Eq | Operator::In) => {
                        let vals = relation_values(rel, name, &c.ty, ctx)?;
                        pk_values[c.position as usize] = Some(vals);
                    }
                    (ColumnKind::PartitionKey, _) if !select.allow_filtering => {
                        return Err(QueryError::invalid(
                            "Only EQ and IN relation are supported on the partition key (unless you use the token() function or allow filtering)",
                        ))
                    }
                    (ColumnKind::Clustering, Operator::Eq | Operator::In) => {
                        ck_eq[c.position as usize] = Some(relation_values(rel, name, &c.ty, ctx)?);
                    }
                    (ColumnKind::Clustering, Operator::Gt | Operator::Gte | Operator::Lt | Operator::Lte) => {
                        let v = bytes_of(eval(&rel.rhs, &Receiver { name, ty: &c.ty }, ctx)?, name)?;
                        let slot = &mut ck_slice[c.position as usize];
                        match rel.op {
                            Operator::Gt => slot.0 = Some((v, false)),
                            Operator::Gte => slot.0 = Some((v, true)),
                            Operator::Lt => slot.1 = Some((v, false)),
                            _ => slot.1 = Some((v, true)),
                        }
                    }
                    (_, op) => {
                        if !allow(rel) && !system::is_virtual(&table.keyspace) {
                            return Err(QueryError::Invalid(FILTERING.into()));
                        }
                        let values = match op {
                            Operator::In => relation_values(rel, name, &c.ty, ctx)?.into_iter().map(|b| b.to_vec()).collect(),
                            Operator::Contains => {
                                let elem = match &c.ty {
                                    CqlType::List { elem, .. } | CqlType::Set { elem, .. } => (**elem).clone(),
                                    CqlType::Map { value, .. } => (**value).clone(),
                                    _ => return Err(QueryError::Invalid(format!("Cannot use CONTAINS on non-collection column {name}"))),
                                };
                                vec![bytes_of(eval(&rel.rhs, &Receiver { name, ty: &elem }, ctx)?, name)?.to_vec()]
                            }
                            Operator::ContainsKey => {
                                let CqlType::Map { key, .. } = &c.ty else {
                                    return Err(QueryError::Invalid(format!("Cannot use CONTAINS KEY on non-map column {name}")));
                                };
                                vec![bytes_of(eval(&rel.rhs, &Receiver { name, ty: key }, ctx)?, name)?.to_vec()]
                            }
                            Operator::Eq | Operator::Neq | Operator::Lt | Operator::Lte | Operator::Gt | Operator::Gte => {
                                vec![bytes_of(eval(&rel.rhs, &Receiver { name, ty: &c.ty }, ctx)?, name)?.to_vec()]
                            }
                            other => return Err(QueryError::Invalid(format!("Unsupported restriction {other:?} on column {name}"))),
                        };
                        filters.push(Filter { map_key: None, column: i, op, values });
                    }
                }
            }
            RelationLhs::Token(cols) => {
                let pk: Vec<&str> = table.partition_key().map(|c| c.name.as_str()).collect();
                if cols.iter().map(String::as_str).collect::<Vec<_>>() != pk {
                    return Err(QueryError::Invalid(format!(
                        "The token function arguments must be in the partition key order: {}",
                        pk.join(", ")
                    )));
                }
                let t = token_value(rel, ctx)?;
                match rel.op {
                    Operator::Gt => token_start = Some((t, false)),
                    Operator::Gte => token_start = Some((t, true)),
                    Operator::Lt => token_end = Some((t, false)),
                    Operator::Lte => token_end = Some((t, true)),
                    Operator::Eq => {
                        token_start = Some((t, true));
                        token_end = Some((t, true));
                    }
                    _ => return Err(QueryError::invalid("Only EQ and slice relations are supported on token()")),
                }
            }
            RelationLhs::MultiColumn(names) => {
                let cols: Vec<&types::schema::ColumnDef> =
                    names.iter().map(|n| common::column(table, n).map(|(_, c)| c)).collect::<Result<_, _>>()?;
                for (pos, c) in cols.iter().enumerate() {
                    if c.kind != ColumnKind::Clustering || c.position as usize != pos {
                        return Err(QueryError::Invalid(format!(
                            "Multi-column relations can only be applied to clustering columns in order, starting from the first; got {}",
                            names.join(", ")
                        )));
                    }
                }
                let tuple_values = |term: &Term| -> Result<Vec<Bytes>, QueryError> {
                    let items = match term {
                        Term::Tuple(items) => items,
                        _ => return Err(QueryError::invalid("Multi-column relations need a tuple of values")),
                    };
                    if items.len() != cols.len() {
                        return Err(QueryError::Invalid(format!(
                            "Expected {} elements in value tuple, but got {}",
                            cols.len(),
                            items.len()
                        )));
                    }
                    items
                        .iter()
                        .zip(&cols)
                        .map(|(t, c)| bytes_of(eval(t, &Receiver { name: &c.name, ty: &c.ty }, ctx)?, &c.name))
                        .collect()
                };
                match rel.op {
                    Operator::Eq => multi_eq = Some(vec![tuple_values(&rel.rhs)?]),
                    Operator::In => {
                        let Term::List(items) = &rel.rhs else {
                            return Err(QueryError::invalid(
                                "IN with a bind marker for a multi-column relation is not supported yet",
                            ));
                        };
                        multi_eq = Some(items.iter().map(tuple_values).collect::<Result<_, _>>()?);
                    }
                    Operator::Gt | Operator::Gte | Operator::Lt | Operator::Lte => {
                        let orders: Vec<ClusteringOrder> = cols.iter().map(|c| c.order).collect();
                        if orders.iter().any(|o| *o != orders[0]) {
                            return Err(QueryError::invalid(
                                "Multi-column slices over clustering columns of mixed ASC/DESC order are not supported yet",
                            ));
                        }
                        let v = tuple_values(&rel.rhs)?;
                        let m = multi.get_or_insert((None, None));
                        match rel.op {
                            Operator::Gt => m.0 = Some((v, false)),
                            Operator::Gte => m.0 = Some((v, true)),
                            Operator::Lt => m.1 = Some((v, false)),
                            _ => m.1 = Some((v, true)),
                        }
                    }
                    _ => return Err(QueryError::invalid("Unsupported operator in a multi-column relation")),
                }
            }
            RelationLhs::MapElement { .. } => {}
        }
    }

    // Partition: all key columns by = / IN, a token range, or a full scan.
    let restricted_pk = pk_values.iter().filter(|v| v.is_some()).count();
    if index_value.is_some() {
        // Any restriction but the index's and token() needs ALLOW FILTERING.
        let others = filters.len() > 1
            || restricted_pk > 0
            || ck_eq.iter().any(Option::is_some)
            || ck_slice.iter().any(|(a, b)| a.is_some() || b.is_some())
            || multi.is_some()
            || multi_eq.is_some();
        if others && !select.allow_filtering && !sai_only {
            return Err(QueryError::Invalid(FILTERING.into()));
        }
        if !select.order_by.is_empty() {
            return Err(QueryError::invalid("ORDER BY with 2ndary indexes is not supported, except for ANN queries."));
        }
        if select.distinct
            && filters
                .iter()
                .any(|f| !matches!(table.columns[f.column].kind, ColumnKind::PartitionKey | ColumnKind::Static))
        {
            return Err(QueryError::invalid(
                "SELECT DISTINCT with WHERE clause only supports restriction by partition key and/or static columns.",
            ));
        }
        push_pk_filters(table, &mut pk_values, &mut filters);
    } else if pk_full && index_rels > 0 && pk_values.iter().any(|v| v.as_ref().is_some_and(|v| v.len() > 1)) {
        return Err(QueryError::invalid(
            "Select on indexed columns and with IN clause for the PRIMARY KEY are not supported",
        ));
    }
    let partitions = if let Some((index, value)) = index_value.clone() {
        PartitionPlan::Index { index, value, start: token_start, end: token_end }
    } else if restricted_pk == pk_len {
        let mut lists = Vec::with_capacity(pk_len);
        for (i, vals) in pk_values.into_iter().enumerate() {
            let mut vals = vals.unwrap_or_default();
            // Cassandra answers an IN on the partition key in the key type's order, without repeats.
            let ty = &table.partition_key().nth(i).map(|c| c.ty.clone()).unwrap_or(CqlType::Blob);
            sort_dedup(ty, &mut vals, false);
            lists.push(vals);
        }
        PartitionPlan::Keys(common::cartesian(&lists.iter().collect::<Vec<_>>()))
    } else {
        if restricted_pk > 0 {
            if !select.allow_filtering {
                return Err(QueryError::Invalid(FILTERING.into()));
            }
            push_pk_filters(table, &mut pk_values, &mut filters);
        }
        PartitionPlan::Range { start: token_start, end: token_end }
    };

    // Clustering: = / IN on a prefix, then at most one slice.
    let mut ranges = Vec::new();
    let mut clustering_restricted = false;
    if let Some(eqs) = multi_eq {
        clustering_restricted = true;
        for tuple in eqs {
            let b = ClusteringBound { prefix: tuple, inclusive: true };
            ranges.push((b.clone(), b));
        }
        if ck_cols.first().map(|(_, c)| c.order == ClusteringOrder::Desc).unwrap_or(false) {
            ranges.reverse();
        }
    } else if let Some((start, end)) = multi {
        clustering_restricted = true;
        let desc = ck_cols.first().map(|(_, c)| c.order == ClusteringOrder::Desc).unwrap_or(false);
        let to_bound = |b: Option<(Vec<Bytes>, bool)>| match b {
            Some((p, incl)) => ClusteringBound { prefix: p, inclusive: incl },
            None => ClusteringBound::unbounded(),
        };
        let (s, e) = (to_bound(start), to_bound(end));
        ranges.push(if desc { (e, s) } else { (s, e) });
    } else {
        let mut prefixes: Vec<Vec<Bytes>> = vec![Vec::new()];
        let mut slice: Option<(usize, (ValueBound, ValueBound))> = None;
        let mut unrestricted_at: Option<usize> = None;
        for (pos, (_, c)) in ck_cols.iter().enumerate() {
            let has_eq = ck_eq[pos].is_some();
            let has_slice = ck_slice[pos].0.is_some() || ck_slice[pos].1.is_some();
            if !has_eq && !has_slice {
                unrestricted_at.get_or_insert(pos);
                continue;
            }
            if let Some(prev) = unrestricted_at {
                if !select.allow_filtering {
                    return Err(QueryError::Invalid(format!(
                        "PRIMARY KEY column \"{}\" cannot be restricted as preceding column \"{}\" is not restricted",
                        c.name, ck_cols[prev].1.name
                    )));
                }
                push_ck_filters(&mut filters, ck_cols[pos].0, ck_eq[pos].take(), ck_slice[pos].clone());
                continue;
            }
            if let Some((spos, _)) = slice {
                if !select.allow_filtering {
                    return Err(QueryError::Invalid(format!(
                        "Clustering column \"{}\" cannot be restricted (preceding column \"{}\" is restricted by a non-EQ relation)",
                        c.name, ck_cols[spos].1.name
                    )));
                }
                push_ck_filters(&mut filters, ck_cols[pos].0, ck_eq[pos].take(), ck_slice[pos].clone());
                continue;
            }
            clustering_restricted = true;
            if let Some(mut vals) = ck_eq[pos].take() {
                if has_slice {
                    return Err(QueryError::Invalid(format!(
                        "Column \"{}\" cannot be restricted by both an equality and an inequality relation",
                        c.name
                    )));
                }
                sort_dedup(&c.ty, &mut vals, c.order == ClusteringOrder::Desc);
                let mut next = Vec::with_capacity(prefixes.len() * vals.len());
                for p in &prefixes {
                    for v in &vals {
                        let mut p2 = p.clone();
                        p2.push(v.clone());
                        next.push(p2);
                    }
                }
                prefixes = next;
            } else {
                slice = Some((pos, ck_slice[pos].clone()));
            }
        }
        if clustering_restricted {
            for p in prefixes {
                match &slice {
                    None => {
                        let b = ClusteringBound { prefix: p.clone(), inclusive: true };
                        ranges.push((b.clone(), b));
                    }
                    Some((pos, (lo, hi))) => {
                        let desc = ck_cols[*pos].1.order == ClusteringOrder::Desc;
                        let make = |v: &Option<(Bytes, bool)>| match v {
                            Some((b, incl)) => {
                                let mut prefix = p.clone();
                                prefix.push(b.clone());
                                ClusteringBound { prefix, inclusive: *incl }
                            }
                            None => ClusteringBound { prefix: p.clone(), inclusive: true },
                        };
                        let (s, e) = (make(lo), make(hi));
                        ranges.push(if desc { (e, s) } else { (s, e) });
                    }
                }
            }
        }
    }

    // ORDER BY: the clustering order or its reverse.
    let mut reversed = false;
    if !select.order_by.is_empty() {
        if !matches!(partitions, PartitionPlan::Keys(_)) {
            return Err(QueryError::invalid(
                "ORDER BY is only supported when the partition key is restricted by an EQ or an IN.",
            ));
        }
        let mut direction: Option<bool> = None;
        for (i, o) in select.order_by.iter().enumerate() {
            let (_, c) = common::column(table, &o.column)?;
            if c.kind != ColumnKind::Clustering {
                return Err(QueryError::Invalid(format!(
                    "Order by is currently only supported on the clustered columns of the PRIMARY KEY, got {}",
                    c.name
                )));
            }
            if c.position as usize != i {
                return Err(QueryError::invalid("Order by currently only support the ordering of columns following their declared order in the PRIMARY KEY"));
            }
            let declared_desc = c.order == ClusteringOrder::Desc;
            let wanted_desc = o.order == ast::Order::Desc;
            let rev = declared_desc != wanted_desc;
            if direction.map(|d| d != rev).unwrap_or(false) {
                return Err(QueryError::invalid("Unsupported order by relation"));
            }
            direction = Some(rev);
        }
        reversed = direction.unwrap_or(false);
    }
    Ok(ReadPlan { partitions, ranges, clustering_restricted, filters, reversed })
}

/// `IN` filters for the partition key columns restricted in `pk_values`
/// (taken from it), where the partitions are found another way (an index,
/// a filtered scan).
fn push_pk_filters(table: &TableDef, pk_values: &mut [Option<Vec<Bytes>>], filters: &mut Vec<Filter>) {
    for (pos, vals) in pk_values.iter_mut().enumerate() {
        if let Some(vals) = vals.take() {
            let col = table
                .columns
                .iter()
                .position(|c| c.kind == ColumnKind::PartitionKey && c.position as usize == pos)
                .unwrap_or(0);
            filters.push(Filter {
                map_key: None,
                column: col,
                op: Operator::In,
                values: vals.into_iter().map(|b| b.to_vec()).collect(),
            });
        }
    }
}

pub(super) fn push_ck_filters(
    filters: &mut Vec<Filter>,
    column: usize,
    eq: Option<Vec<Bytes>>,
    slice: (ValueBound, ValueBound),
) {
    if let Some(vals) = eq {
        filters.push(Filter {
            map_key: None,
            column,
            op: Operator::In,
            values: vals.into_iter().map(|b| b.to_vec()).collect(),
        });
    }
    if let Some((v, incl)) = slice.0 {
        filters.push(Filter {
            map_key: None,
            column,
            op: if incl { Operator::Gte } else { Operator::Gt },
            values: vec![v.to_vec()],
        });
    }
    if let Some((v, incl)) = slice.1 {
        filters.push(Filter {
            map_key: None,
            column,
            op: if incl { Operator::Lte } else { Operator::Lt },
            values: vec![v.to_vec()],
        });
    }
}

/// One logical result row before selection: every column's value by index.
pub(super) struct RowData {
    pub(super) token: i64,
    pub(super) clustering: Vec<Vec<u8>>,
    pub(super) cells: Vec<Option<CellOut>>,
}

pub(super) fn passes(table: &TableDef, filters: &[Filter], row: &RowData) -> bool {
    filters.iter().all(|f| {
        let ty = &table.columns[f.column].ty;
        let Some(cell) = &row.cells[f.column] else { return false };
        let v = cell.value.as_slice();
        if let Some(key) = &f.map_key {
            return map_entry_is(ty, v, key, &f.values[0]);
        }
        let cmp = |x: &[u8]| types::compare::compare_serialized(ty, v, x);
        match f.op {
            Operator::Eq => cmp(&f.values[0]) == CmpOrdering::Equal,
            Operator::Neq => cmp(&f.values[0]) != CmpOrdering::Equal,
            Operator::In => f.values.iter().any(|x| cmp(x) == CmpOrdering::Equal),
            Operator::Lt => cmp(&f.values[0]) == CmpOrdering::Less,
            Operator::Lte => cmp(&f.values[0]) != CmpOrdering::Greater,
            Operator::Gt => cmp(&f.values[0]) == CmpOrdering::Greater,
            Operator::Gte => cmp(&f.values[0]) != CmpOrdering::Less,
            Operator::Contains | Operator::ContainsKey => contains(ty, v, &f.values[0], f.op == Operator::ContainsKey),
            _ => false,
        }
    })
}

/// Whether map `m` holds `value` at `key` (serialized).
fn map_entry_is(ty: &CqlType, m: &[u8], key: &[u8], value: &[u8]) -> bool {
    let CqlType::Map { key: kt, value: vt, .. } = ty else { return false };
    let (Ok(Value::Map(pairs)), Ok(k), Ok(v)) =
        (Value::deserialize(ty, m), Value::deserialize(kt, key), Value::deserialize(vt, value))
    else {
        return false;
    };
    pairs.iter().any(|(pk, pv)| *pk == k && *pv == v)
}

/// The filter of an index-servable restriction (it checks each base row,
/// dropping stale index entries) and the value the index looks up.
fn index_filter(table: &TableDef, rel: &ast::Relation, ctx: &BindCtx<'_>) -> Result<(Filter, Vec<u8>), QueryError> {
    let (name, map_key) = match &rel.lhs {
        RelationLhs::Column(n) => (n, None),
        RelationLhs::MapElement { column, key } => (column, Some(key)),
        _ => return Err(QueryError::invalid("Unsupported restriction for an index")),
    };
    let (i, c) = common::column(table, name)?;
    let (elem, key_ty) = match &c.ty {
        CqlType::List { elem, .. } | CqlType::Set { elem, .. } => ((**elem).clone(), None),
        CqlType::Map { key, value, .. } => ((**value).clone(), Some((**key).clone())),
        other => (other.clone(), None),
    };
    let value_of = |ty: &CqlType| -> Result<Vec<u8>, QueryError> {
        match eval(&rel.rhs, &Receiver { name, ty }, ctx)? {
            Bound::Value(v) => Ok(v.to_vec()),
            Bound::Null => Err(QueryError::Invalid(format!("Unsupported null value for column {name}"))),
            Bound::Unset => Err(QueryError::Invalid(format!("Unsupported unset value for column {name}"))),
        }
    };
    if let Some(key_term) = map_key {
        let Some(kt) = key_ty else {
            return Err(QueryError::Invalid(format!("Column {name} is not a map")));
        };
        let key = match eval(key_term, &Receiver { name, ty: &kt }, ctx)? {
            Bound::Value(v) => v.to_vec(),
            _ => return Err(QueryError::Invalid(format!("Unsupported null map key for column {name}"))),
        };
        let value = value_of(&elem)?;
        let entry = storage::index_entry_value(&key, &value);
        return Ok((Filter { map_key: Some(key), column: i, op: Operator::Eq, values: vec![value] }, entry));
    }
    let v = match rel.op {
        Operator::Contains => value_of(&elem)?,
        Operator::ContainsKey => {
            let Some(kt) = key_ty else {
                return Err(QueryError::Invalid(format!("Cannot use CONTAINS KEY on non-map column {name}")));
            };
            value_of(&kt)?
        }
        _ => value_of(&c.ty)?,
    };
    Ok((Filter { map_key: None, column: i, op: rel.op, values: vec![v.clone()] }, v))
}

pub(super) fn contains(ty: &CqlType, collection: &[u8], needle: &[u8], key: bool) -> bool {
    let Ok(value) = Value::deserialize(ty, collection) else { return false };
    let elem_ty = match ty {
        CqlType::List { elem, .. } | CqlType::Set { elem, .. } => (**elem).clone(),
        CqlType::Map { key: k, value: v, .. } => {
            if key {
                (**k).clone()
            } else {
                (**v).clone()
            }
        }
        _ => return false,
    };
    let Ok(needle) = Value::deserialize(&elem_ty, needle) else { return false };
    match value {
        Value::List(items) | Value::Set(items) => items.contains(&needle),
        Value::Map(pairs) => pairs.iter().any(|(k, v)| if key { *k == needle } else { *v == needle }),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::Clock;

    /// `t (k int, c int, v int, PRIMARY KEY (k, c))`.
    fn table() -> TableDef {
        use ColumnKind::*;
        crate::select::test_support::table(&[
            ("k", CqlType::Int, PartitionKey),
            ("c", CqlType::Int, Clustering),
            ("v", CqlType::Int, Regular),
        ])
    }

    fn plan(cql: &str) -> Result<ReadPlan, QueryError> {
        let Ok(cql::ast::Statement::Select(select)) = cql::parse(cql) else { panic!("not a SELECT: {cql}") };
        let clock = Clock::new(0);
        plan_read(&table(), &select, &BindCtx { values: &[], clock: &clock })
    }

    fn int(v: i32) -> Bytes {
        Bytes::copy_from_slice(&v.to_be_bytes())
    }

    fn keys(p: &ReadPlan) -> Vec<Vec<Bytes>> {
        match &p.partitions {
            PartitionPlan::Keys(k) => k.clone(),
            PartitionPlan::Range { .. } | PartitionPlan::Index { .. } => panic!("a range plan"),
        }
    }

    #[test]
    fn partition_key_equality_and_in() {
        let p = plan("SELECT * FROM t WHERE k = 1").unwrap();
        assert_eq!(keys(&p), vec![vec![int(1)]]);
        assert!(p.ranges.is_empty() && p.filters.is_empty() && !p.reversed && !p.clustering_restricted);
        // IN is answered in the key type's order, without repeats (as Cassandra 5.0 does).
        let p = plan("SELECT * FROM t WHERE k IN (3, 1, 3)").unwrap();
        assert_eq!(keys(&p), vec![vec![int(1)], vec![int(3)]]);
        let p = plan("SELECT * FROM t WHERE k IN (100, -5, 2)").unwrap();
        assert_eq!(keys(&p), vec![vec![int(-5)], vec![int(2)], vec![int(100)]]);
    }

    #[test]
    fn clustering_slice_and_order() {
        let p = plan("SELECT * FROM t WHERE k = 1 AND c > 2 AND c <= 5").unwrap();
        assert!(p.clustering_restricted);
        assert_eq!(p.ranges.len(), 1);
        let (start, end) = &p.ranges[0];
        assert_eq!((start.prefix.clone(), start.inclusive), (vec![int(2)], false));
        assert_eq!((end.prefix.clone(), end.inclusive), (vec![int(5)], true));
        assert!(plan("SELECT * FROM t WHERE k = 1 ORDER BY c DESC").unwrap().reversed);
        assert!(!plan("SELECT * FROM t WHERE k = 1 ORDER BY c ASC").unwrap().reversed);
    }

    #[test]
    fn token_ranges_and_full_scans() {
        let p = plan("SELECT * FROM t WHERE token(k) > 10 AND token(k) <= 20").unwrap();
        assert!(matches!(p.partitions, PartitionPlan::Range { start: Some((10, false)), end: Some((20, true)) }));
        let p = plan("SELECT * FROM t").unwrap();
        assert!(matches!(p.partitions, PartitionPlan::Range { start: None, end: None }));
    }

    #[test]
    fn filtering_needs_allow_filtering() {
        let Err(QueryError::Invalid(msg)) = plan("SELECT * FROM t WHERE v = 3") else {
            panic!("planned without ALLOW FILTERING")
        };
        assert_eq!(msg, FILTERING);
        let p = plan("SELECT * FROM t WHERE v = 3 ALLOW FILTERING").unwrap();
        assert_eq!(p.filters.len(), 1);
        assert_eq!((p.filters[0].column, p.filters[0].values.clone()), (2, vec![int(3).to_vec()]));
        assert!(matches!(p.partitions, PartitionPlan::Range { start: None, end: None }));
    }

    /// `table()` with an index on `v`.
    fn indexed() -> TableDef {
        let mut t = table();
        t.indexes.push(types::schema::IndexDef {
            name: "t_v_idx".into(),
            id: uuid::Uuid::from_u128(7),
            column: "v".into(),
            target: types::schema::IndexTargetKind::Simple,
            class_name: None,
        });
        t
    }

    fn plan_indexed(cql: &str) -> Result<ReadPlan, QueryError> {
        let Ok(cql::ast::Statement::Select(select)) = cql::parse(cql) else { panic!("not a SELECT: {cql}") };
        let clock = Clock::new(0);
        plan_read(&indexed(), &select, &BindCtx { values: &[], clock: &clock })
    }

    #[test]
    fn an_indexed_equality_looks_the_value_up_and_filters_stale_rows() {
        let p = plan_indexed("SELECT * FROM t WHERE v = 3").unwrap();
        let PartitionPlan::Index { index, value, start: None, end: None } = &p.partitions else {
            panic!("not an index plan")
        };
        assert_eq!((*index, value.clone()), (uuid::Uuid::from_u128(7), int(3).to_vec()));
        // The base row is checked again: an entry whose value was overwritten (stale) does not pass.
        let row = |v: i32| RowData {
            token: 0,
            clustering: vec![int(1).to_vec()],
            cells: vec![
                Some(CellOut::plain(int(1).to_vec())),
                Some(CellOut::plain(int(1).to_vec())),
                Some(CellOut::plain(int(v).to_vec())),
            ],
        };
        assert!(passes(&indexed(), &p.filters, &row(3)));
        assert!(!passes(&indexed(), &p.filters, &row(4)));
        let deleted = RowData { cells: vec![Some(CellOut::plain(int(1).to_vec())), None, None], ..row(3) };
        assert!(!passes(&indexed(), &p.filters, &deleted));
    }

    #[test]
    fn indexed_queries_follow_cassandras_filtering_rules() {
        // One index restriction alone, with token() or within a partition: no ALLOW FILTERING.
        assert!(plan_indexed("SELECT * FROM t WHERE v = 3 AND token(k) > 5").is_ok());
        assert!(matches!(
            plan_indexed("SELECT * FROM t WHERE k = 1 AND v = 3").unwrap().partitions,
            PartitionPlan::Keys(_)
        ));
        // Anything else with it needs ALLOW FILTERING.
        for cql in ["SELECT * FROM t WHERE v = 3 AND c = 1", "SELECT * FROM t WHERE v = 3 AND c > 1"] {
            let Err(QueryError::Invalid(msg)) = plan_indexed(cql) else { panic!("planned: {cql}") };
            assert_eq!(msg, FILTERING);
            assert!(plan_indexed(&format!("{cql} ALLOW FILTERING")).is_ok());
        }
        let Err(QueryError::Invalid(msg)) = plan_indexed("SELECT * FROM t WHERE k IN (1, 2) AND v = 3") else {
            panic!("planned")
        };
        assert_eq!(msg, "Select on indexed columns and with IN clause for the PRIMARY KEY are not supported");
    }
}
