//! Consistency levels with their native-protocol codes.

/// A CQL consistency level. The discriminants are the native protocol codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u16)]
pub enum Consistency {
    Any = 0x0000,
    One = 0x0001,
    Two = 0x0002,
    Three = 0x0003,
    Quorum = 0x0004,
    All = 0x0005,
    LocalQuorum = 0x0006,
    EachQuorum = 0x0007,
    Serial = 0x0008,
    LocalSerial = 0x0009,
    LocalOne = 0x000A,
}

impl Consistency {
    pub fn from_code(code: u16) -> Option<Consistency> {
        use Consistency::*;
        Some(match code {
            0x0000 => Any,
            0x0001 => One,
            0x0002 => Two,
            0x0003 => Three,
            0x0004 => Quorum,
            0x0005 => All,
            0x0006 => LocalQuorum,
            0x0007 => EachQuorum,
            0x0008 => Serial,
            0x0009 => LocalSerial,
            0x000A => LocalOne,
            _ => return None,
        })
    }

    pub fn code(self) -> u16 {
        self as u16
    }

    /// Cassandra's upper-case name, as used in error messages ("Cannot achieve consistency level QUORUM").
    pub fn name(self) -> &'static str {
        use Consistency::*;
        match self {
            Any => "ANY",
            One => "ONE",
            Two => "TWO",
            Three => "THREE",
            Quorum => "QUORUM",
            All => "ALL",
            LocalQuorum => "LOCAL_QUORUM",
            EachQuorum => "EACH_QUORUM",
            Serial => "SERIAL",
            LocalSerial => "LOCAL_SERIAL",
            LocalOne => "LOCAL_ONE",
        }
    }

    pub fn from_name(name: &str) -> Option<Consistency> {
        use Consistency::*;
        Some(match name.to_ascii_uppercase().as_str() {
            "ANY" => Any,
            "ONE" => One,
            "TWO" => Two,
            "THREE" => Three,
            "QUORUM" => Quorum,
            "ALL" => All,
            "LOCAL_QUORUM" => LocalQuorum,
            "EACH_QUORUM" => EachQuorum,
            "SERIAL" => Serial,
            "LOCAL_SERIAL" => LocalSerial,
            "LOCAL_ONE" => LocalOne,
            _ => return None,
        })
    }
}

/// What kind of write timed out or failed (the `write_type` of WriteTimeout and
/// WriteFailure), by Cassandra's names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WriteType {
    Simple,
    Batch,
    UnloggedBatch,
    Counter,
    BatchLog,
    Cas,
    View,
    Cdc,
}

impl WriteType {
    pub fn name(self) -> &'static str {
        match self {
            WriteType::Simple => "SIMPLE",
            WriteType::Batch => "BATCH",
            WriteType::UnloggedBatch => "UNLOGGED_BATCH",
            WriteType::Counter => "COUNTER",
            WriteType::BatchLog => "BATCH_LOG",
            WriteType::Cas => "CAS",
            WriteType::View => "VIEW",
            WriteType::Cdc => "CDC",
        }
    }

    pub fn from_name(name: &str) -> Option<WriteType> {
        Some(match name {
            "SIMPLE" => WriteType::Simple,
            "BATCH" => WriteType::Batch,
            "UNLOGGED_BATCH" => WriteType::UnloggedBatch,
            "COUNTER" => WriteType::Counter,
            "BATCH_LOG" => WriteType::BatchLog,
            "CAS" => WriteType::Cas,
            "VIEW" => WriteType::View,
            "CDC" => WriteType::Cdc,
            _ => return None,
        })
    }
}
