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
    pub key: String,
    /// None: the fact is absent on that side.
    pub a: Option<String>,
    pub b: Option<String>,
}

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
        [("A", self), ("B", other)]
            .into_iter()
            .filter_map(|(side, e)| Some(format!("not captured on {side}: {}", e.unknown_line()?)))
            .collect()
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
    pub fn diff(&self, other: &Environment) -> Vec<EnvChange> {
        let mut keys: Vec<&String> = self.facts.keys().chain(other.facts.keys()).collect();
        keys.sort();
        keys.dedup();
        keys.into_iter()
            .filter(|k| !k.starts_with(UNKNOWN))
            .filter_map(|k| {
                let a = self.facts.get(k);
                let b = other.facts.get(k);
                let unknown = (a.is_none() && self.unknown_reason(k).is_some())
                    || (b.is_none() && other.unknown_reason(k).is_some());
                (a != b && !unknown).then(|| EnvChange {
                    key: k.clone(),
                    a: a.cloned(),
                    b: b.cloned(),
                })
            })
            .collect()
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
}
