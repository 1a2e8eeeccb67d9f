//! Socket options that take one integer, each declared once in the table at
//! the end: its setsockopt level and name, the protocols that take it, how
//! its value is typed, bounded and shown, its flag's help, and what the
//! kernel reads back while the option is unset. Parsing, validation, the
//! summary, the spec key, setting on both ends and read-back all follow
//! from the entry, so an option of this kind is one entry here.
//!
//! Options with a shape of their own (buffer sizes that may be `auto`, a
//! congestion control's name, a pacing rate in bit/s) stay fields of
//! [`crate::SocketOpts`].

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::BTreeMap;

/// Which protocols a field (a socket option of this table or another)
/// applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proto {
    Any,
    /// A TCP option: UDP workloads refuse it.
    Tcp,
}

/// setsockopt's level, as Linux numbers it (the engine checks the numbers
/// against the C library's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// SOL_SOCKET.
    Socket,
    /// IPPROTO_TCP.
    Tcp,
}

impl Level {
    pub const fn number(self) -> i32 {
        match self {
            Level::Socket => 1,
            Level::Tcp => 6,
        }
    }
}

/// How an option's value is typed, checked and shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Value {
    /// A size: `16K`, `128K`, shown as sizes are.
    Bytes,
    /// A time in microseconds: `50us`, `50` (a bare number is in µs).
    Micros,
    /// On or off: a flag without a value, stored as 1 while on.
    Switch,
}

/// Everything about one option.
#[derive(Debug)]
pub struct Descriptor {
    pub level: Level,
    /// The option's number at its level.
    pub name: i32,
    /// The option as the kernel's headers name it: `SO_RCVLOWAT`.
    pub c_name: &'static str,
    pub proto: Proto,
    pub value: Value,
    /// The smallest and largest value, in the value's unit.
    pub bounds: (u64, u64),
    /// The value's name in `--help`.
    pub metavar: &'static str,
    /// A value a user might give, as typed.
    pub example: &'static str,
    pub help: &'static str,
    /// The sysctl a socket follows while it holds no value of its own (and
    /// reads back 0).
    pub inherits: Option<&'static str>,
    /// What the kernel reads back for "no limit".
    pub unlimited: Option<u32>,
}

macro_rules! sock_opts {
    ($( $(#[doc = $doc:literal])* $name:ident = $key:literal, $long:literal, $label:literal
        => $desc:expr; )*) => {
        /// A socket option of the table.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum SockOpt {
            $( $(#[doc = $doc])* $name, )*
        }

        impl SockOpt {
            /// Every option, in the order `--help`, the summary and the
            /// read-back table list them. New ones go last: a spec's
            /// options are written in this order, which its key hashes.
            pub const ALL: &'static [SockOpt] = &[$(SockOpt::$name),*];

            pub const fn key(self) -> &'static str {
                match self { $(SockOpt::$name => $key),* }
            }
            pub const fn long(self) -> &'static str {
                match self { $(SockOpt::$name => $long),* }
            }
            pub const fn flag(self) -> &'static str {
                match self { $(SockOpt::$name => concat!("--", $long)),* }
            }
            pub const fn label(self) -> &'static str {
                match self { $(SockOpt::$name => $label),* }
            }
            pub const fn desc(self) -> &'static Descriptor {
                match self { $(SockOpt::$name => &$desc),* }
            }
        }
    };
}

impl SockOpt {
    /// Whether a socket of `proto` takes the option: a TCP socket takes
    /// every option, a UDP one those not TCP's own.
    pub fn taken_by(self, proto: Proto) -> bool {
        proto == Proto::Tcp || self.desc().proto == Proto::Any
    }

    pub fn from_key(key: &str) -> Option<SockOpt> {
        SockOpt::ALL.iter().copied().find(|o| o.key() == key)
    }

    /// A value as a user types it and as [`crate::Spec::value_of`] shows it.
    pub fn show(self, v: u32) -> String {
        match self.desc().value {
            Value::Bytes => crate::units::show_size(v.into()),
            Value::Micros => format!("{v}us"),
            Value::Switch => (v != 0).to_string(),
        }
    }

    /// A typed value; None turns the option off (`none`, or `false` for a
    /// switch), leaving the kernel's default.
    pub fn parse(self, v: &str) -> Result<Option<u32>, String> {
        if v.eq_ignore_ascii_case("none") {
            return Ok(None);
        }
        let n = match self.desc().value {
            Value::Bytes => crate::units::parse_size(v).map_err(|e| e.to_string())?,
            Value::Micros => crate::units::parse_micros(v).map_err(|e| e.to_string())?,
            Value::Switch => match crate::units::parse_switch(v)? {
                true => 1,
                false => return Ok(None),
            },
        };
        u32::try_from(n)
            .map(Some)
            .map_err(|_| format!("'{v}' is too large"))
    }
}

/// The options of the table a spec sets, with their values. Serialised
/// inline among the other socket options, in [`SockOpt::ALL`] order, and
/// only those set: a spec that sets none keeps the key it had before the
/// table existed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct SockOptValues(BTreeMap<SockOpt, u32>);

impl SockOptValues {
    pub fn get(&self, o: SockOpt) -> Option<u32> {
        self.0.get(&o).copied()
    }

    pub fn set(&mut self, o: SockOpt, v: Option<u32>) {
        match v {
            Some(v) => self.0.insert(o, v),
            None => self.0.remove(&o),
        };
    }

    /// Builder form of [`SockOptValues::set`].
    pub fn with(mut self, o: SockOpt, v: u32) -> SockOptValues {
        self.set(o, Some(v));
        self
    }

    pub fn iter(&self) -> impl Iterator<Item = (SockOpt, u32)> + '_ {
        self.0.iter().map(|(o, v)| (*o, *v))
    }
}

impl Serialize for SockOpt {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.key())
    }
}

impl<'de> Deserialize<'de> for SockOpt {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<SockOpt, D::Error> {
        let key = String::deserialize(d)?;
        SockOpt::from_key(&key)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown socket option '{key}'")))
    }
}

impl Serialize for SockOptValues {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl<'de> Deserialize<'de> for SockOptValues {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<SockOptValues, D::Error> {
        BTreeMap::deserialize(d).map(SockOptValues)
    }
}

/// The record's schema of the options a spec sets: each option of the
/// table by its key, within its bounds (a switch is stored only while on),
/// and no other key.
impl schemars::JsonSchema for SockOptValues {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "SockOptValues".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let properties: serde_json::Map<String, serde_json::Value> = SockOpt::ALL
            .iter()
            .map(|o| {
                let d = o.desc();
                let (low, high) = d.bounds;
                let mut value = match d.value {
                    Value::Switch => serde_json::json!({ "const": 1 }),
                    _ => serde_json::json!({ "type": "integer", "minimum": low, "maximum": high }),
                };
                value["description"] = d.help.into();
                (o.key().to_string(), value)
            })
            .collect();
        schemars::json_schema!({
            "type": "object",
            "properties": properties,
            "additionalProperties": false,
        })
    }
}

const BYTES: (u64, u64) = (1, 1 << 30);

sock_opts! {
    /// TCP_NOTSENT_LOWAT: unsent bytes a sender's socket may hold.
    NotsentLowat = "notsent_lowat", "notsent-lowat", "notsent lowat" => Descriptor {
        level: Level::Tcp,
        name: 25,
        c_name: "TCP_NOTSENT_LOWAT",
        proto: Proto::Tcp,
        value: Value::Bytes,
        bounds: BYTES,
        metavar: "SIZE",
        example: "16K",
        help: "TCP_NOTSENT_LOWAT: a sending socket is writable only while fewer bytes than \
               this wait unsent, e.g. 16K [default: net.ipv4.tcp_notsent_lowat]",
        inherits: Some("net.ipv4.tcp_notsent_lowat"),
        unlimited: Some(u32::MAX),
    };
    /// SO_RCVLOWAT: bytes queued before a receiving socket reads as readable.
    RcvLowat = "rcvlowat", "rcvlowat", "rcvlowat" => Descriptor {
        level: Level::Socket,
        name: 18,
        c_name: "SO_RCVLOWAT",
        proto: Proto::Tcp,
        value: Value::Bytes,
        bounds: BYTES,
        metavar: "SIZE",
        example: "128K",
        help: "SO_RCVLOWAT: a receiving socket is readable only once this many bytes are \
               queued (or the stream has ended), e.g. 128K [default: 1]",
        inherits: None,
        unlimited: None,
    };
    /// SO_BUSY_POLL: how long a blocking read or poll busy-polls the
    /// device's queue before it sleeps.
    BusyPoll = "busy_poll", "busy-poll", "busy poll" => Descriptor {
        level: Level::Socket,
        name: 46,
        c_name: "SO_BUSY_POLL",
        proto: Proto::Any,
        value: Value::Micros,
        bounds: (0, 1_000_000),
        metavar: "TIME",
        example: "50us",
        help: "SO_BUSY_POLL on every flow of both ends: a read that finds nothing busy-polls \
               the device's receive queue this long before it sleeps, e.g. 50us \
               [default: net.core.busy_read]",
        inherits: None,
        unlimited: None,
    };
    /// SO_PREFER_BUSY_POLL (5.11): busy-polling takes the device's queue
    /// from its interrupts instead of sharing it.
    PreferBusyPoll = "prefer_busy_poll", "prefer-busy-poll", "prefer busy poll" => Descriptor {
        level: Level::Socket,
        name: 69,
        c_name: "SO_PREFER_BUSY_POLL",
        proto: Proto::Any,
        value: Value::Switch,
        bounds: (0, 1),
        metavar: "",
        example: "true",
        help: "Set SO_PREFER_BUSY_POLL on every flow of both ends: with --busy-poll, the \
               device's interrupts stay off while the application busy-polls (Linux 5.11; needs \
               CAP_NET_ADMIN)",
        inherits: None,
        unlimited: None,
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_serialise_inline_in_table_order_and_only_when_set() {
        let none = SockOptValues::default();
        assert_eq!(serde_json::to_string(&none).unwrap(), "{}");
        let both = SockOptValues::default()
            .with(SockOpt::RcvLowat, 7)
            .with(SockOpt::NotsentLowat, 9);
        let text = serde_json::to_string(&both).unwrap();
        assert_eq!(text, r#"{"notsent_lowat":9,"rcvlowat":7}"#);
        assert_eq!(serde_json::from_str::<SockOptValues>(&text).unwrap(), both);
        let e = serde_json::from_str::<SockOptValues>(r#"{"rcvlowat2":1}"#).unwrap_err();
        assert!(
            e.to_string().contains("unknown socket option 'rcvlowat2'"),
            "{e}"
        );
    }

    #[test]
    fn a_value_typed_reads_back_as_shown() {
        for o in SockOpt::ALL {
            let v = o.parse(o.desc().example).unwrap().unwrap();
            assert_eq!(o.parse(&o.show(v)).unwrap(), Some(v), "{o:?}");
            assert_eq!(o.parse("none").unwrap(), None);
            assert!(o.parse("lots").is_err(), "{o:?}");
            assert_eq!(o.flag(), format!("--{}", o.long()));
            assert_eq!(o.key().replace('_', "-"), o.long());
        }
    }
}
