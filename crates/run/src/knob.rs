//! Knobs: host settings plumb changes for a variant and always puts back.
//!
//! Every change follows one order: read the current value, append it to the
//! journal (fsync'd), set the new value, read it back and verify. The
//! journal is the undo log: [`Applied`] restores its own entries when it is
//! dropped (normal exit, Ctrl-C, error), and [`recover`] restores the
//! entries of a plumb process that died before it could, at the next start
//! or by `plumb restore`. Every knob of a variant is checked (readable,
//! value well-formed, supported by this host) before the first is changed.
//!
//! A knob is named `KIND:ARG[@NETNS]`:
//! `sysctl:net.core.rmem_max`, `rps:lo`, `mtu:veth0`, `offload:lo:gro`,
//! `gso_max_size:lo`, `gro_max_size:lo`, `qdisc:lo`; `@plumb-x` acts inside
//! network namespace plumb-x.

use plumb_sys::knob as raw;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::io::{self, BufRead, Seek, Write};
use std::path::{Path, PathBuf};
use std::str::FromStr;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct KnobError(pub String);

fn err(msg: impl Into<String>) -> KnobError {
    KnobError(msg.into())
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Sysctl(String),
    /// The RPS CPU mask of every receive queue of an interface.
    Rps(String),
    Mtu(String),
    /// An ethtool offload by its short name: interface, feature.
    Offload(String, String),
    GsoMaxSize(String),
    GroMaxSize(String),
    /// The root qdisc: fq [maxrate R], fq_codel, pfifo_fast, pfifo, bfifo, tbf, netem ..., default.
    Qdisc(String),
    /// A network namespace plumb created; its "old value" is its absence,
    /// so restoring deletes it. Journal-only: not a setting a user makes.
    Netns(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Knob {
    pub target: Target,
    pub netns: Option<String>,
}

pub const KNOB_FORMS: &str = "sysctl:NAME, rps:IFACE, mtu:IFACE, offload:IFACE:FEATURE, \
                              gso_max_size:IFACE, gro_max_size:IFACE or qdisc:IFACE, \
                              each optionally @NETNS (@client: the client's namespace \
                              under --topology veth)";

/// The `@NETNS` that names the client's own namespace under `--topology
/// veth`, made for the run and gone with it: a per-namespace setting
/// (`net.ipv4.tcp_ecn`) set on this host does not reach it.
pub const CLIENT_NS: &str = "client";

/// Takes the settings for the client's namespace (`KNOB@client`) out of
/// `settings`.
pub fn take_client(settings: &mut Vec<Setting>) -> Vec<Setting> {
    let (client, rest) = std::mem::take(settings)
        .into_iter()
        .partition(|s| s.knob.netns.as_deref() == Some(CLIENT_NS));
    *settings = rest;
    client
}

/// Where the server's knobs go: the embedded server on this host and
/// namespace is this host, so with no server `apart` from it (a far host,
/// the server's namespace under a veth topology) they join `knobs`;
/// otherwise they are the server end's, returned to be sent with the run.
pub fn server_knobs<T>(knobs: &mut Vec<T>, server: Vec<T>, apart: bool) -> Vec<T> {
    if apart {
        server
    } else {
        knobs.extend(server);
        Vec::new()
    }
}

impl FromStr for Knob {
    type Err = KnobError;
    fn from_str(s: &str) -> Result<Knob, KnobError> {
        let bad = || err(format!("'{s}' is not a knob; use {KNOB_FORMS}"));
        let (body, netns) = match s.rsplit_once('@') {
            Some((b, ns)) if !ns.is_empty() && !ns.contains('/') => (b, Some(ns.to_string())),
            Some(_) => return Err(bad()),
            None => (s, None),
        };
        let (kind, arg) = body.split_once(':').ok_or_else(bad)?;
        let iface = |a: &str| -> Result<String, KnobError> {
            raw::check_iface(a).map_err(|e| err(format!("knob '{s}': {e}")))?;
            Ok(a.to_string())
        };
        let target = match kind {
            "sysctl" => {
                raw::sysctl_path(arg).map_err(|e| err(format!("knob '{s}': {e}")))?;
                Target::Sysctl(arg.to_string())
            }
            "rps" => Target::Rps(iface(arg)?),
            "mtu" => Target::Mtu(iface(arg)?),
            "offload" => {
                let (i, f) = arg.split_once(':').ok_or_else(bad)?;
                if raw::feature_long_name(f).is_none() {
                    return Err(err(format!(
                        "knob '{s}': '{f}' is not an offload plumb knows; use rx, tx, sg, tso, \
                         gso, gro, lro, rx-gro-hw, rx-gro-list or rx-udp-gro-forwarding"
                    )));
                }
                Target::Offload(iface(i)?, f.to_string())
            }
            "gso_max_size" => Target::GsoMaxSize(iface(arg)?),
            "gro_max_size" => Target::GroMaxSize(iface(arg)?),
            "qdisc" => Target::Qdisc(iface(arg)?),
            "netns" if arg.starts_with("plumb-") && !arg.contains('/') => {
                Target::Netns(arg.to_string())
            }
            _ => return Err(bad()),
        };
        Ok(Knob { target, netns })
    }
}

impl fmt::Display for Knob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.target {
            Target::Sysctl(n) => write!(f, "sysctl:{n}")?,
            Target::Rps(i) => write!(f, "rps:{i}")?,
            Target::Mtu(i) => write!(f, "mtu:{i}")?,
            Target::Offload(i, x) => write!(f, "offload:{i}:{x}")?,
            Target::GsoMaxSize(i) => write!(f, "gso_max_size:{i}")?,
            Target::GroMaxSize(i) => write!(f, "gro_max_size:{i}")?,
            Target::Qdisc(i) => write!(f, "qdisc:{i}")?,
            Target::Netns(n) => write!(f, "netns:{n}")?,
        }
        if let Some(ns) = &self.netns {
            write!(f, "@{ns}")?;
        }
        Ok(())
    }
}

/// The qdiscs a knob sets: pacing and fair queueing, FIFOs of a set depth
/// and a token bucket shaper (a bottleneck of a set rate and queue), and
/// netem's path.
const QDISCS: [&str; 8] = [
    "fq",
    "fq_codel",
    "pfifo_fast",
    "pfifo",
    "bfifo",
    "tbf",
    "netem",
    "default",
];

fn number(knob: &Knob, value: &str) -> Result<u64, KnobError> {
    value
        .trim()
        .parse::<u64>()
        .map_err(|_| err(format!("knob {knob}: '{value}' is not a number")))
}

impl Knob {
    fn ns(&self) -> Option<&str> {
        self.netns.as_deref()
    }

    fn unsupported(&self, e: impl fmt::Display) -> KnobError {
        err(format!("knob {self} is not supported here: {e}"))
    }

    /// The current value, in the form `set` takes back.
    pub fn read(&self) -> Result<String, KnobError> {
        let ns = self.ns();
        if let Some(n) = ns {
            if !raw::netns_exists(n) {
                return Err(self.unsupported(format!("no network namespace {n}")));
            }
        }
        let e = |e: io::Error| self.unsupported(e);
        match &self.target {
            Target::Sysctl(name) => raw::read_file(ns, &raw::sysctl_path(name).map_err(e)?)
                .map(|v| v.split_whitespace().collect::<Vec<_>>().join(" "))
                .map_err(e),
            Target::Rps(iface) => {
                let queues = raw::rx_queues(ns, iface).map_err(e)?;
                if queues.is_empty() {
                    return Err(self.unsupported(format!("{iface} has no receive queues")));
                }
                let mut parts = Vec::new();
                for q in queues {
                    let mask =
                        raw::read_file(ns, &format!("/sys/class/net/{iface}/queues/{q}/rps_cpus"))
                            .map_err(e)?;
                    parts.push(format!("{q}={mask}"));
                }
                Ok(parts.join(" "))
            }
            Target::Mtu(iface) => {
                let d = raw::link_details(ns, iface).map_err(e)?;
                raw::parse_link_value(&d, "mtu")
                    .map(|v| v.to_string())
                    .ok_or_else(|| self.unsupported("ip shows no mtu"))
            }
            Target::GsoMaxSize(iface) | Target::GroMaxSize(iface) => {
                let key = self.link_key();
                let d = raw::link_details(ns, iface).map_err(e)?;
                raw::parse_link_value(&d, key)
                    .map(|v| v.to_string())
                    .ok_or_else(|| {
                        self.unsupported(format!("this kernel or ip does not report {key}"))
                    })
            }
            Target::Offload(iface, f) => raw::read_feature(ns, iface, f)
                .map(|x| if x.on { "on" } else { "off" }.to_string())
                .map_err(e),
            Target::Qdisc(iface) => {
                let q = raw::read_root_qdisc(ns, iface).map_err(e)?;
                Ok(if q.is_default() {
                    "default".to_string()
                } else {
                    format!("{} {}", q.kind, q.params).trim().to_string()
                })
            }
            Target::Netns(n) => Ok(if raw::netns_exists(n) {
                "present"
            } else {
                "absent"
            }
            .to_string()),
        }
    }

    fn link_key(&self) -> &'static str {
        match self.target {
            Target::GroMaxSize(_) => "gro_max_size",
            Target::Mtu(_) => "mtu",
            _ => "gso_max_size",
        }
    }

    /// Refuses a value this knob cannot take on this host, changing nothing.
    /// `current` is what `read` returned.
    fn check(&self, value: &str, current: &str) -> Result<(), KnobError> {
        match &self.target {
            Target::Sysctl(_) => {
                if value.trim().is_empty() {
                    return Err(err(format!("knob {self}: an empty value")));
                }
            }
            Target::Rps(_) => {
                if raw::parse_mask(value).is_none() {
                    return Err(err(format!(
                        "knob {self}: '{value}' is not a CPU mask; use hex like 0, 1, 3 or f"
                    )));
                }
            }
            Target::Mtu(_) => {
                let v = number(self, value)?;
                if !(68..=65536).contains(&v) {
                    return Err(err(format!("knob {self}: mtu {v} is not within 68..65536")));
                }
            }
            Target::GsoMaxSize(_) | Target::GroMaxSize(_) => {
                number(self, value)?;
            }
            Target::Offload(iface, f) => {
                if value != "on" && value != "off" {
                    return Err(err(format!("knob {self}: '{value}' is not on or off")));
                }
                let feat =
                    raw::read_feature(self.ns(), iface, f).map_err(|e| self.unsupported(e))?;
                if feat.fixed && value != current {
                    return Err(self.unsupported(format!("{f} is fixed {current} on {iface}")));
                }
            }
            Target::Qdisc(iface) => {
                let kind = value.split_whitespace().next().unwrap_or("");
                if !QDISCS.contains(&kind) {
                    return Err(err(format!(
                        "knob {self}: '{kind}' is not a qdisc plumb sets; use fq [maxrate RATE], \
                         fq_codel, pfifo_fast, pfifo [limit PACKETS], bfifo [limit BYTES], \
                         tbf rate RATE burst BYTES limit BYTES, netem [delay T] [loss P%] \
                         [rate R], or default"
                    )));
                }
                if kind != "default" {
                    // Tried first on the loopback of a throwaway namespace
                    // that dies with the command, so a kernel without the
                    // qdisc (or tc without its options) is found out before
                    // anything of the host is touched.
                    let mut args = vec!["-n", "tc", "qdisc", "replace", "dev", "lo", "root"];
                    args.extend(value.split_whitespace());
                    raw::command(None, "unshare", &args).map_err(|e| {
                        self.unsupported(format!("this kernel does not take '{value}': {e}"))
                    })?;
                }
                if kind == "netem" {
                    let d = raw::link_details(self.ns(), iface).map_err(|e| self.unsupported(e))?;
                    if !raw::is_veth(&d) {
                        return Err(err(format!(
                            "knob {self}: netem is set only on a veth, and {iface} is not one"
                        )));
                    }
                }
            }
            Target::Netns(_) => {
                return Err(err(format!(
                    "knob {self}: namespaces are made by --topology veth, not set as knobs"
                )))
            }
        }
        Ok(())
    }

    fn write(&self, value: &str) -> Result<(), KnobError> {
        let ns = self.ns();
        let e = |e: io::Error| err(format!("knob {self}: cannot set '{value}': {e}"));
        match &self.target {
            Target::Sysctl(name) => {
                raw::write_file(ns, &raw::sysctl_path(name).map_err(e)?, value).map_err(e)
            }
            Target::Rps(iface) => {
                // A value read back holds one mask per queue; a value given
                // by the user one mask for all.
                let per_queue: Vec<(&str, &str)> = value
                    .split_whitespace()
                    .filter_map(|p| p.split_once('='))
                    .collect();
                for q in raw::rx_queues(ns, iface).map_err(e)? {
                    let mask = if per_queue.is_empty() {
                        value
                    } else {
                        match per_queue.iter().find(|(n, _)| *n == q) {
                            Some((_, m)) => m,
                            None => continue,
                        }
                    };
                    raw::write_file(
                        ns,
                        &format!("/sys/class/net/{iface}/queues/{q}/rps_cpus"),
                        mask,
                    )
                    .map_err(e)?;
                }
                Ok(())
            }
            Target::Mtu(iface) | Target::GsoMaxSize(iface) | Target::GroMaxSize(iface) => {
                raw::set_link_value(ns, iface, self.link_key(), number(self, value)?).map_err(e)
            }
            Target::Offload(iface, f) => raw::write_feature(ns, iface, f, value == "on").map_err(e),
            Target::Qdisc(iface) => {
                if value == "default" {
                    let now = raw::read_root_qdisc(ns, iface).map_err(e)?;
                    if now.is_default() {
                        return Ok(());
                    }
                    return raw::delete_root_qdisc(ns, iface).map_err(e);
                }
                let words: Vec<&str> = value.split_whitespace().collect();
                match raw::replace_root_qdisc(ns, iface, &words) {
                    Ok(()) => Ok(()),
                    // A qdisc read back prints parameters tc does not take
                    // back as printed; its kind with defaults is the best
                    // restore there is.
                    Err(first) if words.len() > 1 => {
                        raw::replace_root_qdisc(ns, iface, &words[..1]).map_err(|_| e(first))
                    }
                    Err(first) => Err(e(first)),
                }
            }
            Target::Netns(name) => {
                if value == "absent" && raw::netns_exists(name) {
                    raw::command(None, "ip", &["netns", "del", name])
                        .map(|_| ())
                        .map_err(e)
                } else {
                    Ok(())
                }
            }
        }
    }

    /// Whether a value read back is the value set.
    fn same(&self, read: &str, wanted: &str) -> bool {
        match &self.target {
            Target::Rps(_) => {
                let masks = |v: &str| -> Vec<Option<u128>> {
                    v.split_whitespace()
                        .map(|p| raw::parse_mask(p.split_once('=').map_or(p, |(_, m)| m)))
                        .collect()
                };
                let got = masks(read);
                let want = masks(wanted);
                if want.len() == 1 && !wanted.contains('=') {
                    got.iter().all(|m| *m == want[0])
                } else {
                    got == want
                }
            }
            Target::Qdisc(_) => read.split_whitespace().next() == wanted.split_whitespace().next(),
            Target::Sysctl(_) => {
                read.split_whitespace().collect::<Vec<_>>()
                    == wanted.split_whitespace().collect::<Vec<_>>()
            }
            _ => read.trim() == wanted.trim(),
        }
    }

    /// Sets `value` and verifies it reads back.
    fn set_verified(&self, value: &str) -> Result<(), KnobError> {
        self.write(value)?;
        let back = self.read()?;
        if !self.same(&back, value) {
            return Err(err(format!(
                "knob {self}: set to '{value}' but it reads back '{back}'"
            )));
        }
        Ok(())
    }
}

/// A knob and the value a variant wants: `KNOB=VALUE`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setting {
    pub knob: Knob,
    pub value: String,
}

impl FromStr for Setting {
    type Err = KnobError;
    fn from_str(s: &str) -> Result<Setting, KnobError> {
        let (k, v) = s
            .split_once('=')
            .ok_or_else(|| err(format!("'{s}' is not a knob setting; use KNOB=VALUE")))?;
        Setting::new(k.trim(), v.trim())
    }
}

impl Setting {
    pub fn new(knob: &str, value: &str) -> Result<Setting, KnobError> {
        let knob: Knob = knob.parse()?;
        if let Target::Netns(_) = knob.target {
            return Err(err(format!(
                "'{knob}' is not a knob a variant sets; use {KNOB_FORMS}"
            )));
        }
        Ok(Setting {
            knob,
            value: value.to_string(),
        })
    }
}

impl fmt::Display for Setting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}", self.knob, self.value)
    }
}

/// One change in the journal: what to write back, and whose it is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub id: u64,
    pub pid: u32,
    /// The process's start time, so a later process with the same pid is
    /// not taken for the owner.
    #[serde(default)]
    pub start: Option<u64>,
    pub knob: String,
    pub old: String,
    pub new: String,
    pub at: String,
}

impl Entry {
    fn owner_alive(&self) -> bool {
        match raw::process_start(self.pid) {
            Some(s) => self.start.is_none_or(|mine| mine == s),
            None => false,
        }
    }
}

/// A file of plumb's state on this host: `$VAR` where set, else
/// `$XDG_STATE_HOME/plumb/NAME`, else `~/.local/state/plumb/NAME`, else
/// `plumb-NAME` here.
pub fn state_file(var: &str, name: &str) -> PathBuf {
    let set = |n: &str| std::env::var_os(n).filter(|p| !p.is_empty());
    if let Some(p) = set(var) {
        return PathBuf::from(p);
    }
    let state = set("XDG_STATE_HOME")
        .map(PathBuf::from)
        .or_else(|| set("HOME").map(|h| PathBuf::from(h).join(".local/state")));
    match state {
        Some(d) => d.join("plumb").join(name),
        None => PathBuf::from(format!("plumb-{name}")),
    }
}

/// The undo log of knob changes: JSON lines, one per change, under an
/// exclusive lock while read or rewritten.
#[derive(Debug, Clone)]
pub struct Journal {
    pub path: PathBuf,
}

impl Journal {
    /// $PLUMB_JOURNAL, else $XDG_STATE_HOME/plumb/journal, else
    /// ~/.local/state/plumb/journal.
    pub fn default_path() -> PathBuf {
        state_file("PLUMB_JOURNAL", "journal")
    }

    pub fn open_default() -> Journal {
        Journal::at(Journal::default_path())
    }

    pub fn at(path: impl AsRef<Path>) -> Journal {
        Journal {
            path: path.as_ref().to_path_buf(),
        }
    }

    fn locked<T>(&self, f: impl FnOnce(&mut Vec<Entry>) -> T) -> io::Result<T> {
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&self.path)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", self.path.display())))?;
        raw::lock_exclusive(&file)?;
        let mut entries = Vec::new();
        for line in io::BufReader::new(&file).lines() {
            let line = line?;
            if line.trim().is_empty() {
                continue;
            }
            match serde_json::from_str::<Entry>(&line) {
                Ok(e) => entries.push(e),
                // A line torn by a crash mid-write names no change that
                // was made: the change follows its entry.
                Err(_) => continue,
            }
        }
        let before = entries.clone();
        let out = f(&mut entries);
        if entries != before {
            let mut text = String::new();
            for e in &entries {
                text.push_str(&serde_json::to_string(e).map_err(io::Error::other)?);
                text.push('\n');
            }
            file.set_len(0)?;
            file.seek(io::SeekFrom::Start(0))?;
            file.write_all(text.as_bytes())?;
            file.sync_all()?;
        }
        Ok(out)
    }

    pub fn entries(&self) -> io::Result<Vec<Entry>> {
        if !self.path.exists() {
            return Ok(Vec::new());
        }
        self.locked(|e| e.clone())
    }

    fn append(&self, entry: Entry) -> io::Result<()> {
        self.locked(|e| e.push(entry))
    }

    fn remove(&self, id: u64) -> io::Result<()> {
        if !self.path.exists() {
            return Ok(());
        }
        self.locked(|e| e.retain(|x| x.id != id))
    }
}

fn next_id() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    (nanos ^ ((std::process::id() as u64) << 40)).wrapping_add(SEQ.fetch_add(1, Ordering::Relaxed))
}

/// Knob changes made by this process, undone in reverse order by
/// [`Applied::restore`] or on drop.
#[derive(Debug)]
pub struct Applied {
    journal: Journal,
    done: Vec<(Knob, String, u64)>,
}

/// What a knob was and what it was set to, for the record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub knob: String,
    pub old: String,
    pub new: String,
}

impl Change {
    /// What the knob did, as a run says it: `knob sysctl:x: a -> b`.
    pub fn line(&self) -> String {
        if self.old == self.new {
            format!("knob {} is already {}", self.knob, self.new)
        } else {
            format!("knob {}: {} -> {}", self.knob, self.old, self.new)
        }
    }
}

impl Applied {
    pub fn empty(journal: &Journal) -> Applied {
        Applied {
            journal: journal.clone(),
            done: Vec::new(),
        }
    }

    /// Journals and makes one change (used for knobs and for namespaces).
    pub fn change(&mut self, knob: &Knob, old: &str, value: &str) -> Result<(), KnobError> {
        let id = next_id();
        let me = std::process::id();
        self.journal
            .append(Entry {
                id,
                pid: me,
                start: raw::process_start(me),
                knob: knob.to_string(),
                old: old.to_string(),
                new: value.to_string(),
                at: jiff::Timestamp::now().to_string(),
            })
            .map_err(|e| {
                err(format!(
                    "knob {knob} not changed: cannot write the journal {}: {e}",
                    self.journal.path.display()
                ))
            })?;
        self.done.push((knob.clone(), old.to_string(), id));
        if let Target::Netns(_) = knob.target {
            return Ok(());
        }
        knob.set_verified(value)
    }

    /// Undoes every change, newest first; returns what could not be undone.
    pub fn restore(&mut self) -> Vec<String> {
        let mut failed = Vec::new();
        while let Some((knob, old, id)) = self.done.pop() {
            match restore_one(&knob, &old) {
                Ok(()) => {
                    let _ = self.journal.remove(id);
                }
                Err(e) => failed.push(format!(
                    "{e}; it stays in {} for `plumb restore`",
                    self.journal.path.display()
                )),
            }
        }
        failed
    }

    pub fn is_empty(&self) -> bool {
        self.done.is_empty()
    }
}

impl Drop for Applied {
    fn drop(&mut self) {
        for f in self.restore() {
            eprintln!("plumb: warning: {f}");
        }
    }
}

fn restore_one(knob: &Knob, old: &str) -> Result<(), KnobError> {
    if let Some(ns) = &knob.netns {
        // The namespace went, and its settings with it.
        if !raw::netns_exists(ns) {
            return Ok(());
        }
    }
    if let Target::Netns(_) = knob.target {
        return knob.write("absent");
    }
    knob.set_verified(old)
}

/// Checks settings without changing anything: each knob exists on this
/// host, its value is well-formed and the kernel takes it, and plumb may
/// write it (root).
pub fn check(settings: &[Setting]) -> Result<(), KnobError> {
    if !settings.is_empty() && !plumb_sys::process::is_root() {
        return Err(err(format!(
            "knob {}: setting host knobs needs root",
            settings[0].knob
        )));
    }
    for s in settings {
        let current = s.knob.read()?;
        s.knob.check(&s.value, &current)?;
    }
    Ok(())
}

/// Settings as `KNOB=VALUE` texts give them, each as it came (a named
/// namespace kept).
pub fn parse_all(knobs: &[String]) -> Result<Vec<Setting>, String> {
    knobs
        .iter()
        .map(|k| k.parse().map_err(|e: KnobError| e.0))
        .collect()
}

/// The knobs a client asks of `plumb serve` (`KNOB=VALUE` each), set in
/// the server's own namespace through the default journal, all or none;
/// one line per knob saying what it did, and what puts them back when
/// dropped.
pub fn apply_server(knobs: &[String]) -> Result<(Vec<String>, Applied), String> {
    apply_here(parse_all(knobs)?)
}

/// `settings` set in this process's own namespace, as [`apply_server`]
/// sets them (one naming another namespace is refused).
pub fn apply_here(mut settings: Vec<Setting>) -> Result<(Vec<String>, Applied), String> {
    let here = raw::own_netns_name();
    for s in &mut settings {
        if let Some(ns) = &s.knob.netns {
            return Err(format!(
                "'{s}' names namespace {ns}: a server knob acts in the server's own \
                 namespace; leave out @{ns}"
            ));
        }
        s.knob.netns = here.clone();
    }
    let (applied, changes) = apply(&Journal::open_default(), &settings).map_err(|e| e.0)?;
    Ok((changes.iter().map(Change::line).collect(), applied))
}

/// Checks every setting, then makes them one by one. Nothing is changed
/// when a check fails; when a change fails, those already made are undone.
pub fn apply(journal: &Journal, settings: &[Setting]) -> Result<(Applied, Vec<Change>), KnobError> {
    check(settings)?;
    let mut plan = Vec::new();
    for s in settings {
        let current = s.knob.read()?;
        s.knob.check(&s.value, &current)?;
        plan.push((s, current));
    }
    let mut applied = Applied::empty(journal);
    let mut changes = Vec::new();
    for (s, current) in plan {
        changes.push(Change {
            knob: s.knob.to_string(),
            old: current.clone(),
            new: s.value.clone(),
        });
        if s.knob.same(&current, &s.value) {
            continue;
        }
        if let Err(e) = applied.change(&s.knob, &current, &s.value) {
            let failed = applied.restore();
            let mut msg = e.0;
            for f in failed {
                msg.push_str("; ");
                msg.push_str(&f);
            }
            return Err(KnobError(msg));
        }
    }
    Ok((applied, changes))
}

/// Restores the journal entries of plumb processes that are no longer
/// running, newest first, and says what it did. Entries of running
/// processes are left to them. An entry that cannot be restored stays.
pub fn recover(journal: &Journal) -> io::Result<Vec<String>> {
    if !journal.path.exists() {
        return Ok(Vec::new());
    }
    journal.locked(|entries| {
        let mut said = Vec::new();
        let mut keep = vec![true; entries.len()];
        for (i, e) in entries.iter().enumerate().rev() {
            if e.owner_alive() {
                continue;
            }
            let knob = match e.knob.parse::<Knob>() {
                Ok(k) => k,
                Err(_) => {
                    said.push(format!("dropped an entry naming no knob: '{}'", e.knob));
                    keep[i] = false;
                    continue;
                }
            };
            match restore_one(&knob, &e.old) {
                Ok(()) => {
                    keep[i] = false;
                    said.push(match knob.target {
                        Target::Netns(n) => format!(
                            "removed network namespace {n} left by plumb process {}",
                            e.pid
                        ),
                        _ => format!(
                            "restored {} to '{}' (plumb process {} had set '{}')",
                            e.knob, e.old, e.pid, e.new
                        ),
                    });
                }
                Err(x) => said.push(format!("could not restore {}: {x}", e.knob)),
            }
        }
        let mut i = 0;
        entries.retain(|_| {
            i += 1;
            keep[i - 1]
        });
        said
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn knob_names_round_trip() {
        for s in [
            "sysctl:net.core.rmem_max",
            "rps:lo",
            "mtu:veth0@plumb-x",
            "offload:lo:gro",
            "gso_max_size:lo",
            "gro_max_size:eth0",
            "qdisc:lo",
            "netns:plumb-1-a",
        ] {
            assert_eq!(s.parse::<Knob>().unwrap().to_string(), s);
        }
        for bad in [
            "rmem_max",
            "sysctl:../x",
            "offload:lo:warp",
            "mtu:a/b",
            "fan:lo",
            "netns:other",
            "rps:lo@",
        ] {
            assert!(bad.parse::<Knob>().is_err(), "{bad}");
        }
        let s: Setting = "sysctl:net.ipv4.tcp_wmem=4096 16384 4194304"
            .parse()
            .unwrap();
        assert_eq!(s.value, "4096 16384 4194304");
        assert!("netns:plumb-1=absent".parse::<Setting>().is_err());
        assert!("rps:lo".parse::<Setting>().is_err());
    }

    #[test]
    fn values_compare_as_the_kernel_prints_them() {
        let rps: Knob = "rps:eth0".parse().unwrap();
        assert!(rps.same("rx-0=00000003 rx-1=3", "3"));
        assert!(!rps.same("rx-0=00000003 rx-1=1", "3"));
        assert!(rps.same("rx-0=0 rx-1=1", "rx-0=00000000 rx-1=00000001"));
        let sysctl: Knob = "sysctl:net.ipv4.tcp_wmem".parse().unwrap();
        assert!(sysctl.same("4096 16384 4194304", "4096\t16384  4194304"));
        let q: Knob = "qdisc:lo".parse().unwrap();
        assert!(q.same("fq limit 10000p maxrate 1Gbit", "fq maxrate 1gbit"));
        assert!(!q.same("fq_codel limit 10240p", "fq"));
    }

    #[test]
    fn journal_keeps_entries_of_live_processes_only_until_recovered() {
        let path = std::env::temp_dir().join(format!("plumb-journal-unit-{}", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let j = Journal::at(&path);
        assert!(recover(&j).unwrap().is_empty());
        let me = std::process::id();
        j.append(Entry {
            id: 1,
            pid: me,
            start: raw::process_start(me),
            knob: "netns:plumb-unit-never-made".into(),
            old: "absent".into(),
            new: "present".into(),
            at: "now".into(),
        })
        .unwrap();
        // A dead owner: pid 0 is never a process in /proc.
        j.append(Entry {
            id: 2,
            pid: 0,
            start: None,
            knob: "netns:plumb-unit-never-made-2".into(),
            old: "absent".into(),
            new: "present".into(),
            at: "now".into(),
        })
        .unwrap();
        // A torn line from a crash is ignored.
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(b"{\"id\":3,\"pi")
            .unwrap();
        let said = recover(&j).unwrap();
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(said[0].contains("plumb-unit-never-made-2"));
        let left = j.entries().unwrap();
        assert_eq!(left.len(), 1);
        assert_eq!(left[0].id, 1);
        j.remove(1).unwrap();
        assert!(j.entries().unwrap().is_empty());
        let _ = std::fs::remove_file(&path);
    }
}
