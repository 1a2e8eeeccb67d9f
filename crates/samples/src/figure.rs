//! What each kernel event source (a probe) puts in an end's record,
//! declared once: the parts of the record it writes, how two flow groups'
//! parts merge, and the figures in them with their units. The group merge,
//! the comparison's events and the summary's kernel lines go by these
//! declarations, so a new probe is its reader, its declaration here and one
//! line in [`Probe::ALL`].
//!
//! Parts and figures are named by their place in the end's JSON record: a
//! part by its key (`softnet`, or `process.sched` one level down), a figure
//! by a path inside its part where `[]` sums over an array's entries
//! (`[].dropped` is the packets every CPU's backlog dropped). Each key and
//! path is written through the record's types (`key!`, `field!`, `each!`), so the
//! compiler holds them to the fields they name; only a map's keys (the
//! kernel's own names of interrupts and tracepoints) are strings.

use crate::{
    EndResult, FlowEvents, NetDevCounters, NicQueue, PathQueue, ProcessCpu, QdiscStats, Sockstat,
    SoftnetCounts, Tracepoints,
};
use serde_json::Value;

/// `$field` of `$ty` as the record names it (serde keeps the fields'
/// names), or `$field."key"` into a map. Naming it through the type makes
/// a field renamed or taken away fail to compile, where a string would
/// leave a figure that reads nothing until a run shows it.
macro_rules! field {
    (@check $ty:ty, $field:ident) => {
        const _: fn(&$ty) = |x| {
            let _ = &x.$field;
        };
    };
    ($ty:ty, $field:ident) => {{
        field!(@check $ty, $field);
        stringify!($field)
    }};
    ($ty:ty, $field:ident . $key:literal) => {{
        field!(@check $ty, $field);
        concat!(stringify!($field), ".", $key)
    }};
}

/// A part's key: a field of the end's record, or `$field.$sub` one level
/// down where `$field` holds a `$inner`.
macro_rules! key {
    ($field:ident) => {
        field!(EndResult, $field)
    };
    ($field:ident : $inner:ty, $sub:ident) => {{
        field!(@check EndResult, $field);
        field!(@check $inner, $sub);
        concat!(stringify!($field), ".", stringify!($sub))
    }};
}

/// `$field` of every entry of a list of `$ty`, summed: `[].$field`.
macro_rules! each {
    ($ty:ty, $field:ident) => {{
        field!(@check $ty, $field);
        concat!("[].", stringify!($field))
    }};
}

/// A kernel event source read at the window's edges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Probe {
    /// /proc/stat per CPU, and how precisely the kernel accounts IRQ time.
    Cpu,
    /// /proc/softirqs: NET_RX and NET_TX per CPU.
    Softirqs,
    /// /proc/net/snmp and /proc/net/netstat.
    Snmp,
    /// /proc/net/softnet_stat.
    Softnet,
    /// /proc/net/dev, the devices' IRQs and their drivers' statistics.
    Interfaces,
    /// /proc/interrupts's named lines: timer interrupts and IPIs per host.
    Interrupts,
    /// The root queueing disciplines of the namespace (rtnetlink).
    Qdiscs,
    /// The path's bottleneck each way, on the router between the ends
    /// (`--qdisc`), sampled over the window by the client.
    PathQueues,
    /// The byte queue limits of the end's NICs' transmit queues
    /// (/sys/class/net), sampled over the window.
    NicQueues,
    /// The process's and its threads' CPU, context switches and the
    /// scheduler's accounting (getrusage, /proc/self/task).
    Process,
    /// TCP_INFO of every flow as the window closes, and TCP's accounting
    /// of what limited each sender, between the window's edges.
    TcpInfo,
    /// TCP_INFO of the flows sampled over the window (`tcp`).
    TcpSeries,
    /// /proc/net/sockstat: sockets and protocol memory in use.
    Sockstat,
    /// The kernel's TCP and drop tracepoints, counted on every CPU.
    Tracepoints,
    /// Every ACK of the end's own flows (`--tcp-probe`, tcp:tcp_probe).
    Acks,
    /// The end's CPU time by function (`--profile`, perf_event_open).
    Profile,
}

/// How two flow groups' values of a part become one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Merge {
    /// Counted by each process of its own: the numbers add up.
    Sum,
    /// The host's: every group read the same, so it is taken once.
    OncePerHost,
    /// The network namespace's (interfaces, protocol counters): taken once.
    OncePerNamespace,
    /// The end's own, but read the same by each of its groups (events
    /// filtered by the server's port, which every group's flows share):
    /// taken once, and each end its own.
    OncePerEnd,
    /// One entry per thread or other item of a process: the lists join.
    PerGroup,
    /// One entry per flow: the lists join and the flows are numbered on
    /// across the groups, as the flows themselves are.
    PerFlow,
    /// A distribution over the flows (`flows` and, per figure, min,
    /// median, p99, max): minima of the minima, the flow-weighted mean of
    /// the medians, maxima of the rest; counts add up.
    Distribution,
}

/// What a figure is, which decides where it is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Events counted over the window, compared per unit of work in a
    /// comparison's budget under this name.
    Event(&'static str),
    /// Events counted over the window, shown on the part's line of the run
    /// summary and compared per unit of work under this name.
    Counted(&'static str),
    /// A level at the window's close, shown on the part's line of the run
    /// summary under this name (followed by the unit unless the name ends
    /// with it).
    Level(&'static str),
    /// Kept in the record, shown by the sections made for it.
    Detail,
}

/// One figure of a part.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Figure {
    /// Its path inside the part (`""` for the part itself).
    pub path: &'static str,
    pub unit: &'static str,
    pub kind: Kind,
}

/// A part of an end's record that one probe writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Part {
    /// Its key in the end's record (one level down after a `.`).
    pub key: &'static str,
    pub merge: Merge,
    pub figures: &'static [Figure],
}

const fn detail(unit: &'static str) -> Figure {
    Figure {
        path: "",
        unit,
        kind: Kind::Detail,
    }
}

const fn part(key: &'static str, merge: Merge, figures: &'static [Figure]) -> Part {
    Part {
        key,
        merge,
        figures,
    }
}

impl Probe {
    /// Whether it reads an end's own flows rather than its host or
    /// process: in a run of parts each part runs these over its flows, and
    /// the others run once, with the main part.
    pub const fn reads_flows(self) -> bool {
        matches!(self, Probe::TcpInfo | Probe::TcpSeries)
    }

    /// Every probe, in the order an end reads them at each edge: the
    /// interfaces' bytes first, nearest the flows' own counts, which a slow
    /// guest would otherwise let drift apart by what passes meanwhile.
    pub const ALL: [Probe; 16] = [
        Probe::Interfaces,
        Probe::Qdiscs,
        Probe::PathQueues,
        Probe::NicQueues,
        Probe::Process,
        Probe::Cpu,
        Probe::Interrupts,
        Probe::Softirqs,
        Probe::Snmp,
        Probe::Softnet,
        Probe::Sockstat,
        Probe::Tracepoints,
        Probe::TcpInfo,
        Probe::TcpSeries,
        Probe::Acks,
        Probe::Profile,
    ];

    /// How the probe is named in docs and errors.
    pub fn name(self) -> &'static str {
        match self {
            Probe::Cpu => "cpu",
            Probe::Softirqs => "softirqs",
            Probe::Snmp => "snmp",
            Probe::Softnet => "softnet",
            Probe::Interfaces => "interfaces",
            Probe::Qdiscs => "qdiscs",
            Probe::PathQueues => "path_queues",
            Probe::NicQueues => "nic_queues",
            Probe::Interrupts => "interrupts",
            Probe::Process => "process",
            Probe::TcpInfo => "tcp_info",
            Probe::TcpSeries => "tcp_series",
            Probe::Sockstat => "sockstat",
            Probe::Tracepoints => "tracepoints",
            Probe::Acks => "tcp_probe",
            Probe::Profile => "profile",
        }
    }

    /// The parts of an end's record this probe writes.
    pub fn parts(self) -> &'static [Part] {
        use Merge::*;
        match self {
            Probe::Cpu => {
                const PARTS: &[Part] = &[
                    part(key!(cpus), OncePerHost, &[detail("s")]),
                    part(key!(irq_time_accounting), OncePerHost, &[detail("")]),
                ];
                PARTS
            }
            Probe::Softirqs => {
                const PARTS: &[Part] = &[part(key!(softirqs), OncePerHost, &[detail("softirqs")])];
                PARTS
            }
            Probe::Snmp => {
                const PARTS: &[Part] =
                    &[part(key!(counters), OncePerNamespace, &[detail("events")])];
                PARTS
            }
            Probe::Softnet => {
                const PARTS: &[Part] = &[part(
                    key!(softnet),
                    OncePerHost,
                    &[
                        Figure {
                            path: each!(SoftnetCounts, dropped),
                            unit: "packets",
                            kind: Kind::Event("softnet dropped"),
                        },
                        Figure {
                            path: each!(SoftnetCounts, time_squeeze),
                            unit: "rounds",
                            kind: Kind::Event("time_squeeze"),
                        },
                    ],
                )];
                PARTS
            }
            Probe::Interfaces => {
                const PARTS: &[Part] = &[part(
                    key!(interfaces),
                    OncePerNamespace,
                    &[
                        Figure {
                            path: each!(NetDevCounters, rx_dropped),
                            unit: "packets",
                            kind: Kind::Event("interface drops"),
                        },
                        Figure {
                            path: each!(NetDevCounters, tx_dropped),
                            unit: "packets",
                            kind: Kind::Event("interface drops"),
                        },
                    ],
                )];
                PARTS
            }
            // The summary shows each qdisc on its interface's line.
            Probe::Qdiscs => {
                const PARTS: &[Part] = &[part(
                    key!(qdiscs),
                    OncePerNamespace,
                    &[
                        Figure {
                            path: each!(QdiscStats, packets),
                            unit: "packets",
                            kind: Kind::Detail,
                        },
                        Figure {
                            path: each!(QdiscStats, drops),
                            unit: "packets",
                            kind: Kind::Event("qdisc drops"),
                        },
                        Figure {
                            path: each!(QdiscStats, overlimits),
                            unit: "times",
                            kind: Kind::Event("qdisc over limit"),
                        },
                        Figure {
                            path: each!(QdiscStats, requeues),
                            unit: "packets",
                            kind: Kind::Event("qdisc requeues"),
                        },
                        Figure {
                            path: each!(QdiscStats, ecn_marks),
                            unit: "packets",
                            kind: Kind::Event("qdisc ECN marks"),
                        },
                        Figure {
                            path: each!(QdiscStats, backlog_bytes),
                            unit: "bytes",
                            kind: Kind::Detail,
                        },
                    ],
                )];
                PARTS
            }
            // The path's, read once for the run by the client.
            Probe::PathQueues => {
                const PARTS: &[Part] = &[part(
                    key!(path_queues),
                    OncePerHost,
                    &[
                        Figure {
                            path: each!(QdiscStats, drops),
                            unit: "packets",
                            kind: Kind::Event("bottleneck drops"),
                        },
                        Figure {
                            path: each!(QdiscStats, ecn_marks),
                            unit: "packets",
                            kind: Kind::Event("bottleneck ECN marks"),
                        },
                        Figure {
                            path: each!(PathQueue, peak_backlog_bytes),
                            unit: "bytes",
                            kind: Kind::Detail,
                        },
                    ],
                )];
                PARTS
            }
            Probe::NicQueues => {
                const PARTS: &[Part] = &[part(
                    key!(nic_queues),
                    OncePerNamespace,
                    &[Figure {
                        path: each!(NicQueue, peak_inflight_bytes),
                        unit: "bytes",
                        kind: Kind::Detail,
                    }],
                )];
                PARTS
            }
            // x86's names; another architecture's lines are kept under
            // their own (arm64's IPI0, IPI1, ...) with no figure of these.
            Probe::Interrupts => {
                const PARTS: &[Part] = &[part(
                    key!(interrupts),
                    OncePerHost,
                    &[
                        Figure {
                            path: "LOC",
                            unit: "interrupts",
                            kind: Kind::Counted("timer interrupts"),
                        },
                        Figure {
                            path: "CAL",
                            unit: "IPIs",
                            kind: Kind::Counted("function-call IPIs"),
                        },
                        Figure {
                            path: "RES",
                            unit: "IPIs",
                            kind: Kind::Counted("rescheduling IPIs"),
                        },
                        Figure {
                            path: "TLB",
                            unit: "shootdowns",
                            kind: Kind::Counted("TLB shootdowns"),
                        },
                    ],
                )];
                PARTS
            }
            Probe::Process => {
                const PARTS: &[Part] = &[
                    part(key!(process: ProcessCpu, pid), OncePerHost, &[detail("")]),
                    part(key!(process: ProcessCpu, user_s), Sum, &[detail("s")]),
                    part(key!(process: ProcessCpu, system_s), Sum, &[detail("s")]),
                    part(
                        key!(process: ProcessCpu, voluntary_csw),
                        Sum,
                        &[detail("switches")],
                    ),
                    part(
                        key!(process: ProcessCpu, involuntary_csw),
                        Sum,
                        &[detail("switches")],
                    ),
                    part(
                        key!(process: ProcessCpu, rss_bytes),
                        Sum,
                        &[detail("bytes")],
                    ),
                    part(key!(process: ProcessCpu, threads), PerGroup, &[detail("")]),
                    part(
                        key!(process: ProcessCpu, sched),
                        Sum,
                        &[Figure {
                            path: field!(crate::SchedTimes, migrations),
                            unit: "migrations",
                            kind: Kind::Event("migrations"),
                        }],
                    ),
                    // plumb's delay line runs in one process of the client's.
                    part(key!(path_cpu_s), OncePerHost, &[detail("s")]),
                ];
                PARTS
            }
            Probe::TcpInfo => {
                const PARTS: &[Part] = &[
                    part(key!(tcp_info), PerFlow, &[detail("")]),
                    part(key!(tcp_info_summary), Distribution, &[detail("")]),
                    part(key!(limited), Sum, &[detail("s")]),
                    part(key!(window_retransmits), Sum, &[detail("segments")]),
                ];
                PARTS
            }
            // Each group samples its own flows on its own clock: the
            // sample times are the first group's, and the sums over all
            // flows add up sample by sample.
            Probe::TcpSeries => {
                const PARTS: &[Part] = &[
                    part(
                        key!(tcp_series: crate::TcpSeries, period_ms),
                        OncePerHost,
                        &[detail("ms")],
                    ),
                    part(
                        key!(tcp_series: crate::TcpSeries, t_ms),
                        OncePerHost,
                        &[detail("ms")],
                    ),
                    part(
                        key!(tcp_series: crate::TcpSeries, flows),
                        Sum,
                        &[detail("flows")],
                    ),
                    part(
                        key!(tcp_series: crate::TcpSeries, sampled),
                        PerFlow,
                        &[detail("")],
                    ),
                    part(key!(tcp_series: crate::TcpSeries, all), Sum, &[detail("")]),
                    part(
                        key!(tcp_series: crate::TcpSeries, sampler_cpu_s),
                        Sum,
                        &[detail("s")],
                    ),
                ];
                PARTS
            }
            Probe::Sockstat => {
                const PARTS: &[Part] = &[part(
                    key!(sockstat),
                    OncePerNamespace,
                    &[
                        Figure {
                            path: field!(Sockstat, sockets_used),
                            unit: "sockets",
                            kind: Kind::Level("sockets"),
                        },
                        Figure {
                            path: field!(Sockstat, tcp_inuse),
                            unit: "sockets",
                            kind: Kind::Level("tcp sockets"),
                        },
                        Figure {
                            path: field!(Sockstat, tcp_mem_pages),
                            unit: "pages",
                            kind: Kind::Level("tcp memory"),
                        },
                        Figure {
                            path: field!(Sockstat, udp_inuse),
                            unit: "sockets",
                            kind: Kind::Level("udp sockets"),
                        },
                        Figure {
                            path: field!(Sockstat, udp_mem_pages),
                            unit: "pages",
                            kind: Kind::Level("udp memory"),
                        },
                    ],
                )];
                PARTS
            }
            Probe::Tracepoints => {
                const PARTS: &[Part] = &[
                    part(
                        key!(tracepoints),
                        OncePerHost,
                        &[
                            Figure {
                                path: field!(Tracepoints, counts."tcp:tcp_retransmit_skb"),
                                unit: "skbs",
                                kind: Kind::Counted("retransmitted"),
                            },
                            Figure {
                                path: field!(Tracepoints, counts."skb:kfree_skb"),
                                unit: "packets",
                                kind: Kind::Counted("dropped"),
                            },
                            Figure {
                                path: field!(Tracepoints, counts."tcp:tcp_send_reset"),
                                unit: "resets",
                                kind: Kind::Counted("resets sent"),
                            },
                            Figure {
                                path: field!(Tracepoints, counts."tcp:tcp_receive_reset"),
                                unit: "resets",
                                kind: Kind::Counted("resets received"),
                            },
                        ],
                    ),
                    // Each end's own flows: the ends' filters split the host's
                    // events between them, and an end's groups share the port.
                    part(
                        key!(flow_events),
                        OncePerEnd,
                        &[
                            Figure {
                                path: field!(FlowEvents, counts."tcp:tcp_retransmit_skb"),
                                unit: "skbs",
                                kind: Kind::Counted("retransmitted"),
                            },
                            Figure {
                                path: field!(FlowEvents, counts."tcp:tcp_receive_reset"),
                                unit: "resets",
                                kind: Kind::Counted("resets received"),
                            },
                            Figure {
                                path: field!(FlowEvents, counts."tcp:tcp_rcvbuf_grow"),
                                unit: "times",
                                // The summary's rcvbuf line says it with the
                                // buffer it was tuned to.
                                kind: Kind::Event("receive buffer tuned"),
                            },
                        ],
                    ),
                ];
                PARTS
            }
            // Every group's filter keeps every ACK of the end's flows.
            Probe::Acks => {
                const PARTS: &[Part] = &[part(key!(acks), OncePerEnd, &[detail("")])];
                PARTS
            }
            // A group's profile is of its own process; the first one's is
            // kept, as the groups share their CPUs.
            Probe::Profile => {
                const PARTS: &[Part] = &[part(key!(profile), OncePerHost, &[detail("")])];
                PARTS
            }
        }
    }
}

/// Every part of every probe.
pub fn parts() -> impl Iterator<Item = (Probe, &'static Part)> {
    Probe::ALL
        .into_iter()
        .flat_map(|p| p.parts().iter().map(move |part| (p, part)))
}

/// The figures of every probe that count events, with their part and the
/// name they are compared under.
pub fn events() -> impl Iterator<Item = (&'static Part, &'static Figure, &'static str)> {
    parts().flat_map(|(_, p)| {
        p.figures.iter().filter_map(move |f| match f.kind {
            Kind::Event(name) | Kind::Counted(name) => Some((p, f, name)),
            Kind::Level(_) | Kind::Detail => None,
        })
    })
}

/// The value of a part in an end's JSON record.
pub fn part_of<'a>(end: &'a Value, key: &str) -> Option<&'a Value> {
    key.split('.').try_fold(end, |v, k| v.get(k))
}

fn part_of_mut<'a>(end: &'a mut Value, key: &str) -> Option<&'a mut Value> {
    key.split('.').try_fold(end, |v, k| v.get_mut(k))
}

/// The sum of the numbers a figure's path reaches in a part's value: `[]`
/// goes through every entry of an array (none, or none kept, sum to 0);
/// None where the path reaches no number (a figure the kernel does not
/// keep).
pub fn figure_value(part: &Value, path: &str) -> Option<f64> {
    fn walk(v: &Value, steps: &[&str]) -> Option<f64> {
        match steps.split_first() {
            None => v.as_f64(),
            // A list left out of the record is an empty one.
            Some((&"[]", _)) if v.is_null() => Some(0.0),
            Some((&"[]", rest)) => Some(v.as_array()?.iter().filter_map(|e| walk(e, rest)).sum()),
            Some((k, rest)) => walk(v.get(*k)?, rest),
        }
    }
    walk(part, &steps(path))
}

/// A figure's path as the steps it takes: keys, and `[]` for every entry
/// of a list.
pub(crate) fn steps(path: &str) -> Vec<&str> {
    path.split('.')
        .flat_map(|s| match s.strip_prefix("[]") {
            Some(rest) => vec!["[]", rest],
            None => vec![s],
        })
        .filter(|s| !s.is_empty())
        .collect()
}

/// Merges the probes' parts of several flow groups' records of one end
/// into `out` (the first group's record to begin with), each by its rule.
/// `flow_offsets` numbers each group's first flow.
pub fn merge_parts(out: &mut Value, groups: &[Value], flow_offsets: &[u64]) {
    for (_, p) in parts() {
        let values: Vec<&Value> = groups
            .iter()
            .filter_map(|g| part_of(g, p.key))
            .filter(|v| !v.is_null())
            .collect();
        let merged = match p.merge {
            Merge::OncePerHost | Merge::OncePerNamespace | Merge::OncePerEnd => continue,
            Merge::Sum => values.iter().fold(Value::Null, |a, b| sum(&a, b)),
            Merge::PerGroup => Value::Array(
                values
                    .iter()
                    .flat_map(|v| v.as_array().cloned().unwrap_or_default())
                    .collect(),
            ),
            Merge::PerFlow => Value::Array(
                groups
                    .iter()
                    .zip(flow_offsets)
                    .flat_map(|(g, off)| {
                        let list = part_of(g, p.key).and_then(Value::as_array);
                        list.cloned()
                            .unwrap_or_default()
                            .into_iter()
                            .map(move |mut e| {
                                if let Some(n) = e.get("flow").and_then(Value::as_u64) {
                                    e["flow"] = Value::from(n + off);
                                }
                                e
                            })
                    })
                    .collect(),
            ),
            Merge::Distribution => distribution(&values),
        };
        if let Some(slot) = part_of_mut(out, p.key) {
            *slot = merged;
        } else if let (Some((parent, key)), false) = (p.key.rsplit_once('.'), merged.is_null()) {
            if let Some(Value::Object(m)) = part_of_mut(out, parent) {
                m.insert(key.to_string(), merged);
            }
        } else if let (Value::Object(m), false) = (&mut *out, merged.is_null()) {
            m.insert(p.key.to_string(), merged);
        }
    }
}

/// Numbers add up, objects key by key, arrays entry by entry (the longer
/// one's tail kept); anything else is the first's.
fn sum(a: &Value, b: &Value) -> Value {
    match (a, b) {
        (Value::Array(x), Value::Array(y)) => Value::Array(
            (0..x.len().max(y.len()))
                .map(|i| {
                    sum(
                        x.get(i).unwrap_or(&Value::Null),
                        y.get(i).unwrap_or(&Value::Null),
                    )
                })
                .collect(),
        ),
        (Value::Null, b) => b.clone(),
        (a, Value::Null) => a.clone(),
        (Value::Number(x), Value::Number(y)) => match (x.as_u64(), y.as_u64()) {
            (Some(x), Some(y)) => Value::from(x + y),
            _ => Value::from(x.as_f64().unwrap_or(0.0) + y.as_f64().unwrap_or(0.0)),
        },
        (Value::Object(x), Value::Object(y)) => {
            let mut m = x.clone();
            for (k, v) in y {
                let s = sum(m.get(k).unwrap_or(&Value::Null), v);
                m.insert(k.clone(), s);
            }
            Value::Object(m)
        }
        (a, _) => a.clone(),
    }
}

/// Distributions over flows: see [`Merge::Distribution`].
fn distribution(values: &[&Value]) -> Value {
    let Some(first) = values.first().and_then(|v| v.as_object()) else {
        return Value::Null;
    };
    let weight = |v: &Value| v.get("flows").and_then(Value::as_f64).unwrap_or(0.0);
    let total: f64 = values.iter().map(|v| weight(v)).sum();
    let mut out = serde_json::Map::new();
    for key in first.keys() {
        let at = |v: &Value| v.get(key).cloned().unwrap_or(Value::Null);
        let merged = match first[key] {
            Value::Array(ref q) if q.len() == 4 => {
                let col = |i: usize| -> Vec<(f64, f64)> {
                    values
                        .iter()
                        .filter_map(|v| Some((v.get(key)?.get(i)?.as_f64()?, weight(v))))
                        .collect()
                };
                let min = col(0).iter().map(|c| c.0).fold(f64::INFINITY, f64::min);
                let median = match total > 0.0 {
                    true => col(1).iter().map(|(m, w)| m * w).sum::<f64>() / total,
                    false => col(1).first().map_or(0.0, |c| c.0),
                };
                let max = |i: usize| col(i).iter().map(|c| c.0).fold(f64::NEG_INFINITY, f64::max);
                serde_json::json!([min, median, max(2), max(3)])
            }
            _ => values.iter().fold(Value::Null, |a, v| sum(&a, &at(v))),
        };
        out.insert(key.clone(), merged);
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_figure_sums_over_an_array_and_is_absent_where_no_number_is() {
        let softnet = json!([{"cpu": 0, "dropped": 2}, {"cpu": 1, "dropped": 5}, {"cpu": 2}]);
        assert_eq!(figure_value(&softnet, "[].dropped"), Some(7.0));
        assert_eq!(figure_value(&json!([]), "[].dropped"), Some(0.0));
        assert_eq!(figure_value(&Value::Null, "[].dropped"), Some(0.0));
        assert_eq!(
            figure_value(&json!({"migrations": 4}), "migrations"),
            Some(4.0)
        );
        assert_eq!(figure_value(&json!({}), "migrations"), None);
        assert_eq!(figure_value(&json!(3.5), ""), Some(3.5));
    }

    #[test]
    fn every_part_is_declared_once_and_every_event_reaches_a_number() {
        let mut keys: Vec<&str> = parts().map(|(_, p)| p.key).collect();
        let n = keys.len();
        keys.sort();
        keys.dedup();
        assert_eq!(keys.len(), n, "a part is declared by two probes");
        for (p, f, _) in events() {
            assert!(
                !f.path.is_empty() && !f.unit.is_empty(),
                "{}: an event needs a path to a number and a unit",
                p.key
            );
        }
    }

    #[test]
    fn distributions_keep_the_extremes_and_weigh_the_medians_by_flows() {
        let a = json!({"flows": 1, "rtt_us": [10.0, 10.0, 10.0, 10.0], "retrans_sum": 2});
        let b = json!({"flows": 3, "rtt_us": [20.0, 30.0, 40.0, 50.0], "retrans_sum": 5});
        let m = distribution(&[&a, &b]);
        assert_eq!(m["flows"], json!(4));
        assert_eq!(m["retrans_sum"], json!(7));
        assert_eq!(m["rtt_us"], json!([10.0, 25.0, 40.0, 50.0]));
    }
}
