//! The host environment a run was made in, as a flat map of named facts
//! ("kernel.release", "sysctl.net.ipv4.tcp_rmem", "if.lo.mtu", ...).
//!
//! A flat map keeps capture, storage and diff trivial: two environments differ
//! exactly where a key is missing on one side or holds another value. The hash
//! identifies an environment so the store keeps each one once.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Environment {
    /// Fact name to value. Names are dotted paths, grouped by their first part:
    /// kernel, cpu, mem, sysctl, if, plumb.
    pub facts: BTreeMap<String, String>,
}

/// One fact that differs between two environments.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvChange {
    /// The end whose fact it is, `client` or `server`, when either side
    /// recorded the server end's environment apart; absent when both ends
    /// were one host (or for records made before ends were told apart).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub end: Option<String>,
    /// The fact's name on its end: `sysctl.net.ipv4.tcp_rmem`.
    pub key: String,
    /// None: the fact is absent on that side.
    pub a: Option<String>,
    pub b: Option<String>,
}

impl std::fmt::Display for EnvChange {
    /// `server: sysctl.net.core.rmem_max: 212992 -> 4194304`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(end) = &self.end {
            write!(f, "{end}: ")?;
        }
        write!(
            f,
            "{}: {} -> {}",
            self.key,
            self.a.as_deref().unwrap_or("(absent)"),
            self.b.as_deref().unwrap_or("(absent)")
        )
    }
}

/// The server end's facts are kept under this prefix in the environment of
/// a run whose server ran on another host or in a namespace of its own
/// ("server.sysctl.net.ipv4.tcp_rmem"), so that one map, hashed and stored
/// once as before, holds both ends and a diff names the end of each change.
/// The client's facts keep their plain names. What the server could not
/// read is under "unknown.server.".
pub const SERVER: &str = "server.";

/// Facts a capture could not read are recorded under this prefix, keyed by
/// the prefix of the facts they stand for ("unknown.if.lo.offload"), with the
/// reason as the value ("ethtool not installed"). A fact that is absent on
/// one side because it was unknown there is not a difference: the host may
/// well have had the same setting.
pub const UNKNOWN: &str = "unknown.";

impl Environment {
    /// Records that the facts under `prefix` could not be read, and why.
    pub fn set_unknown(&mut self, prefix: &str, reason: impl Into<String>) {
        self.set(format!("{UNKNOWN}{prefix}"), reason);
    }

    /// The facts that could not be read: (prefix, reason).
    pub fn unknowns(&self) -> impl Iterator<Item = (&str, &str)> {
        self.facts
            .range(UNKNOWN.to_string()..)
            .take_while(|(k, _)| k.starts_with(UNKNOWN))
            .map(|(k, v)| (&k[UNKNOWN.len()..], v.as_str()))
    }

    /// Why `key` could not be read, when it is covered by an unknown prefix.
    pub fn unknown_reason(&self, key: &str) -> Option<&str> {
        self.unknowns().find_map(|(prefix, why)| {
            (key == prefix || key.strip_prefix(prefix)?.starts_with('.')).then_some(why)
        })
    }

    /// The facts this capture could not read, as one line for a reader:
    /// "if.lo.offload.* (ethtool not installed)"; None when it read all.
    pub fn unknown_line(&self) -> Option<String> {
        let parts: Vec<String> = self
            .unknowns()
            .map(|(prefix, why)| format!("{prefix}.* ({why})"))
            .collect();
        (!parts.is_empty()).then(|| parts.join(", "))
    }

    /// What one side or the other of a diff could not read, once per side,
    /// so that a reader knows the diff is silent there: "not captured on B:
    /// if.lo.offload.* (ethtool not installed)".
    pub fn unknown_notes(&self, other: &Environment) -> Vec<String> {
        let mut notes: Vec<String> = [("A", self), ("B", other)]
            .into_iter()
            .filter_map(|(side, e)| Some(format!("not captured on {side}: {}", e.unknown_line()?)))
            .collect();
        if self.has_server_end() != other.has_server_end() {
            let side = if self.has_server_end() { "B" } else { "A" };
            notes.push(format!(
                "not recorded on {side}: the server end apart (one host for both ends, \
                 or a run made before plumb captured each end); server facts are not compared"
            ));
        }
        notes
    }

    /// Adds the facts of the server end, captured on its own host or
    /// namespace, under [`SERVER`].
    pub fn add_server_end(&mut self, server: &Environment) {
        for (k, v) in &server.facts {
            let key = match k.strip_prefix(UNKNOWN) {
                Some(prefix) => format!("{UNKNOWN}{SERVER}{prefix}"),
                None => format!("{SERVER}{k}"),
            };
            self.facts.insert(key, v.clone());
        }
    }

    /// The facts of the client end alone: those not under [`SERVER`].
    pub fn client_end(&self) -> Environment {
        let server_unknown = format!("{UNKNOWN}{SERVER}");
        Environment {
            facts: self
                .facts
                .iter()
                .filter(|(k, _)| !k.starts_with(SERVER) && !k.starts_with(&server_unknown))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        }
    }

    /// Whether the server end's facts are recorded apart.
    pub fn has_server_end(&self) -> bool {
        let first = |p: String| {
            self.facts
                .range(p.clone()..)
                .next()
                .is_some_and(|(k, _)| k.starts_with(&p))
        };
        first(SERVER.to_string()) || first(format!("{UNKNOWN}{SERVER}"))
    }

    /// The server end's facts under their plain names; None when they were
    /// not recorded apart.
    pub fn server_end(&self) -> Option<Environment> {
        if !self.has_server_end() {
            return None;
        }
        let mut e = Environment::default();
        for (k, v) in &self.facts {
            if let Some(rest) = k.strip_prefix(SERVER) {
                e.set(rest, v.clone());
            } else if let Some(rest) = k.strip_prefix(UNKNOWN).and_then(|r| r.strip_prefix(SERVER))
            {
                e.set_unknown(rest, v.clone());
            }
        }
        Some(e)
    }

    /// The kernel release of each end as a reader wants it in a header:
    /// `client 6.6.0, server 6.7.0`, or the one release when the ends were
    /// one host (or the server's was not recorded).
    pub fn kernels(&self) -> String {
        let release = |k: &str| self.get(k).unwrap_or("unknown").to_string();
        if self.has_server_end() {
            format!(
                "client {}, server {}",
                release("kernel.release"),
                release(&format!("{SERVER}kernel.release"))
            )
        } else {
            release("kernel.release")
        }
    }

    pub fn set(&mut self, key: impl Into<String>, value: impl Into<String>) {
        self.facts.insert(key.into(), value.into());
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.facts.get(key).map(String::as_str)
    }

    /// sha256 of the sorted `key=value` lines, 16 lowercase hex digits.
    pub fn hash(&self) -> String {
        let mut h = Sha256::new();
        for (k, v) in &self.facts {
            h.update(k.as_bytes());
            h.update(b"=");
            h.update(v.as_bytes());
            h.update(b"\n");
        }
        h.finalize()[..8]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    /// What differs from `self` (side a) to `other` (side b), sorted by key.
    /// Facts that one side could not read are not differences (see
    /// [`UNKNOWN`]); [`Environment::unknowns`] says which those were.
    /// When either side recorded the server end apart, each change names
    /// its end, client changes first; the server's facts are compared only
    /// when both sides recorded them (see [`Environment::unknown_notes`]).
    pub fn diff(&self, other: &Environment) -> Vec<EnvChange> {
        let two_ends = self.has_server_end() || other.has_server_end();
        let both_ends = self.has_server_end() && other.has_server_end();
        let mut keys: Vec<&String> = self.facts.keys().chain(other.facts.keys()).collect();
        keys.sort();
        keys.dedup();
        let mut changes: Vec<EnvChange> = keys
            .into_iter()
            .filter(|k| !k.starts_with(UNKNOWN))
            .filter_map(|k| {
                let a = self.facts.get(k);
                let b = other.facts.get(k);
                let unknown = (a.is_none() && self.unknown_reason(k).is_some())
                    || (b.is_none() && other.unknown_reason(k).is_some());
                if a == b || unknown || (!both_ends && k.starts_with(SERVER)) {
                    return None;
                }
                let (end, key) = match k.strip_prefix(SERVER) {
                    Some(rest) => (Some("server"), rest),
                    None => (two_ends.then_some("client"), k.as_str()),
                };
                Some(EnvChange {
                    end: end.map(str::to_string),
                    key: key.to_string(),
                    a: a.cloned(),
                    b: b.cloned(),
                })
            })
            .collect();
        // Stable: each end's changes stay sorted by name.
        changes.sort_by_key(|c| c.end.as_deref() == Some("server"));
        changes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diff_names_changed_added_and_removed_facts() {
        let mut a = Environment::default();
        a.set("kernel.release", "6.5.0");
        a.set("sysctl.net.core.rps_sock_flow_entries", "0");
        a.set("if.eth0.mtu", "1500");
        let mut b = a.clone();
        b.set("kernel.release", "6.6.0");
        b.facts.remove("if.eth0.mtu");
        b.set("if.eth0.rx-0.rps_cpus", "f");
        let d = a.diff(&b);
        let keys: Vec<&str> = d.iter().map(|c| c.key.as_str()).collect();
        assert_eq!(
            keys,
            ["if.eth0.mtu", "if.eth0.rx-0.rps_cpus", "kernel.release"]
        );
        assert_eq!(d[0].b, None);
        assert_eq!(d[1].a, None);
        assert_eq!(d[2].a.as_deref(), Some("6.5.0"));
        assert!(a.diff(&a).is_empty());
        assert_ne!(a.hash(), b.hash());
        assert_eq!(a.hash(), a.clone().hash());
        assert_eq!(a.hash().len(), 16);
    }

    #[test]
    fn facts_one_side_could_not_read_are_not_differences() {
        let mut a = Environment::default();
        a.set("kernel.release", "6.6.0");
        a.set_unknown("if.lo.offload", "ethtool not installed");
        let mut b = a.clone();
        b.facts.remove("unknown.if.lo.offload");
        b.set("if.lo.offload.tso", "on");
        b.set("if.lo.offloaded", "x");
        b.set("if.lo.mtu", "65536");
        let keys: Vec<String> = a.diff(&b).into_iter().map(|c| c.key).collect();
        // The unknown marker and what it covers are not differences; a key
        // that merely starts with the same letters is.
        assert_eq!(keys, ["if.lo.mtu", "if.lo.offloaded"]);
        assert_eq!(
            keys,
            b.diff(&a).into_iter().map(|c| c.key).collect::<Vec<_>>()
        );
        assert_eq!(
            a.unknowns().collect::<Vec<_>>(),
            [("if.lo.offload", "ethtool not installed")]
        );
        assert_eq!(
            a.unknown_reason("if.lo.offload.tso"),
            Some("ethtool not installed")
        );
        assert_eq!(a.unknown_reason("if.lo.offloaded"), None);
        assert_eq!(
            a.unknown_notes(&b),
            ["not captured on A: if.lo.offload.* (ethtool not installed)"]
        );
        assert!(b.unknown_notes(&b).is_empty());
        // A value read on both sides still differs even when one side also
        // lost others under the prefix.
        a.set("if.lo.offload.gso", "off");
        b.set("if.lo.offload.gso", "on");
        assert!(a.diff(&b).iter().any(|c| c.key == "if.lo.offload.gso"));
    }

    #[test]
    fn a_server_end_is_kept_apart_and_each_change_names_its_end() {
        let mut client = Environment::default();
        client.set("kernel.release", "6.6.0");
        client.set("sysctl.net.ipv4.tcp_rmem", "4096 131072 6291456");
        let mut server = client.clone();
        server.set_unknown("if.eth0.offload", "ethtool not installed");
        let mut a = client.clone();
        a.add_server_end(&server);
        assert!(a.has_server_end() && !client.has_server_end());
        assert_eq!(a.server_end(), Some(server.clone()));
        assert_eq!(client.server_end(), None);
        assert_eq!(a.kernels(), "client 6.6.0, server 6.6.0");
        assert_eq!(client.kernels(), "6.6.0");

        let mut changed = server.clone();
        changed.set("sysctl.net.ipv4.tcp_rmem", "4096 87380 6291456");
        let mut b = client.clone();
        b.add_server_end(&changed);
        let d: Vec<String> = a.diff(&b).iter().map(|c| c.to_string()).collect();
        assert_eq!(
            d,
            ["server: sysctl.net.ipv4.tcp_rmem: 4096 131072 6291456 -> 4096 87380 6291456"]
        );
        b.set("kernel.release", "6.7.0");
        let d: Vec<String> = a.diff(&b).iter().map(|c| c.to_string()).collect();
        assert_eq!(d[0], "client: kernel.release: 6.6.0 -> 6.7.0");
        assert_eq!(d.len(), 2);
        // One side without a server end: the server's facts are not
        // compared (a note says so), and the client's changes are still
        // named as the client's.
        let d = client.diff(&b);
        assert!(
            d.iter().all(|c| c.end.as_deref() == Some("client")),
            "{d:?}"
        );
        assert_eq!(d.len(), 1);
        assert!(client
            .unknown_notes(&b)
            .iter()
            .any(|n| n.starts_with("not recorded on A: the server end")));
        // What the server could not read covers its own facts only.
        assert_eq!(
            a.unknown_reason("server.if.eth0.offload.tso"),
            Some("ethtool not installed")
        );
        assert_eq!(a.unknown_reason("if.eth0.offload.tso"), None);
        // Ends without a server apart read as before: no end named.
        let mut c2 = client.clone();
        c2.set("kernel.release", "6.7.0");
        assert_eq!(client.diff(&c2)[0].end, None);
    }
}
