//! CQL data types, as Cassandra names and nests them.

use std::fmt;

/// A CQL data type. Collections carry whether they are frozen: a frozen
/// collection is one cell, a non-frozen one is a cell per element.
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum CqlType {
    Ascii,
    Text,
    Blob,
    Boolean,
    TinyInt,
    SmallInt,
    Int,
    BigInt,
    Counter,
    Varint,
    Float,
    Double,
    Decimal,
    Uuid,
    TimeUuid,
    Timestamp,
    Date,
    Time,
    Duration,
    Inet,
    List {
        elem: Box<CqlType>,
        frozen: bool,
    },
    Set {
        elem: Box<CqlType>,
        frozen: bool,
    },
    Map {
        key: Box<CqlType>,
        value: Box<CqlType>,
        frozen: bool,
    },
    /// Tuples are always frozen.
    Tuple(Vec<CqlType>),
    /// A user-defined type, with its fields resolved from the keyspace's types.
    Udt {
        keyspace: String,
        name: String,
        fields: Vec<(String, CqlType)>,
        frozen: bool,
    },
}

impl CqlType {
    /// The type for a simple (non-parameterized) CQL type name, as written in CQL.
    /// Names are case-insensitive; `varchar` is an alias of `text`.
    pub fn from_simple_name(name: &str) -> Option<CqlType> {
        let ty = match name.to_ascii_lowercase().as_str() {
            "ascii" => CqlType::Ascii,
            "text" | "varchar" => CqlType::Text,
            "blob" => CqlType::Blob,
            "boolean" => CqlType::Boolean,
            "tinyint" => CqlType::TinyInt,
            "smallint" => CqlType::SmallInt,
            "int" => CqlType::Int,
            "bigint" => CqlType::BigInt,
            "counter" => CqlType::Counter,
            "varint" => CqlType::Varint,
            "float" => CqlType::Float,
            "double" => CqlType::Double,
            "decimal" => CqlType::Decimal,
            "uuid" => CqlType::Uuid,
            "timeuuid" => CqlType::TimeUuid,
            "timestamp" => CqlType::Timestamp,
            "date" => CqlType::Date,
            "time" => CqlType::Time,
            "duration" => CqlType::Duration,
            "inet" => CqlType::Inet,
            _ => return None,
        };
        Some(ty)
    }

    /// True for list/set/map/UDT that are not frozen: stored as one cell per element.
    pub fn is_multi_cell(&self) -> bool {
        match self {
            CqlType::List { frozen, .. } | CqlType::Set { frozen, .. } | CqlType::Map { frozen, .. } => !frozen,
            CqlType::Udt { frozen, .. } => !frozen,
            _ => false,
        }
    }

    pub fn is_collection(&self) -> bool {
        matches!(self, CqlType::List { .. } | CqlType::Set { .. } | CqlType::Map { .. })
    }

    /// The same type with the outermost level frozen.
    pub fn frozen(self) -> CqlType {
        match self {
            CqlType::List { elem, .. } => CqlType::List { elem, frozen: true },
            CqlType::Set { elem, .. } => CqlType::Set { elem, frozen: true },
            CqlType::Map { key, value, .. } => CqlType::Map { key, value, frozen: true },
            CqlType::Udt { keyspace, name, fields, .. } => CqlType::Udt { keyspace, name, fields, frozen: true },
            other => other,
        }
    }

    /// Cassandra's spelling of the type, as in `system_schema.columns.type`.
    pub fn to_cql(&self) -> String {
        self.to_string()
    }

    /// Types whose values Cassandra accepts in place of each other when
    /// validating a literal or bound value of this type (e.g. text/ascii).
    pub fn is_compatible_value_of(&self, other: &CqlType) -> bool {
        self == other || matches!((self, other), (CqlType::Text, CqlType::Ascii) | (CqlType::Uuid, CqlType::TimeUuid))
    }
}

impl fmt::Display for CqlType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let simple = match self {
            CqlType::Ascii => "ascii",
            CqlType::Text => "text",
            CqlType::Blob => "blob",
            CqlType::Boolean => "boolean",
            CqlType::TinyInt => "tinyint",
            CqlType::SmallInt => "smallint",
            CqlType::Int => "int",
            CqlType::BigInt => "bigint",
            CqlType::Counter => "counter",
            CqlType::Varint => "varint",
            CqlType::Float => "float",
            CqlType::Double => "double",
            CqlType::Decimal => "decimal",
            CqlType::Uuid => "uuid",
            CqlType::TimeUuid => "timeuuid",
            CqlType::Timestamp => "timestamp",
            CqlType::Date => "date",
            CqlType::Time => "time",
            CqlType::Duration => "duration",
            CqlType::Inet => "inet",
            CqlType::List { elem, frozen } => return wrap(f, *frozen, &format!("list<{elem}>")),
            CqlType::Set { elem, frozen } => return wrap(f, *frozen, &format!("set<{elem}>")),
            CqlType::Map { key, value, frozen } => return wrap(f, *frozen, &format!("map<{key}, {value}>")),
            CqlType::Tuple(elems) => {
                let inner: Vec<String> = elems.iter().map(|e| e.to_string()).collect();
                return write!(f, "frozen<tuple<{}>>", inner.join(", "));
            }
            CqlType::Udt { name, frozen, .. } => return wrap(f, *frozen, name),
        };
        f.write_str(simple)
    }
}

fn wrap(f: &mut fmt::Formatter<'_>, frozen: bool, inner: &str) -> fmt::Result {
    if frozen {
        write!(f, "frozen<{inner}>")
    } else {
        f.write_str(inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_like_cassandra() {
        let t = CqlType::Map { key: Box::new(CqlType::Text), value: Box::new(CqlType::Int), frozen: false };
        assert_eq!(t.to_cql(), "map<text, int>");
        let t = CqlType::List { elem: Box::new(CqlType::Int), frozen: true };
        assert_eq!(t.to_cql(), "frozen<list<int>>");
        assert_eq!(CqlType::from_simple_name("VARCHAR"), Some(CqlType::Text));
    }
}
