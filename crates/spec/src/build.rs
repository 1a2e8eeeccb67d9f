//! A spec from fields set to values as the user wrote them: the one path
//! by which both `plumb run` and experiment files make a spec, so both take
//! the same values, start from the same defaults and refuse the same
//! things in the same words.

use crate::field::{Field, Names};
use crate::units::{
    parse_count, parse_delay_us, parse_duration, parse_loss_ppm, parse_rate, parse_size,
    parse_switch,
};
use crate::{
    parse_writes, BufSize, Choice, Close, CpuList, Direction, Emulator, Family, Io, RxMode, Spec,
    Topology, Veth, Workload, ZeroCopy,
};

/// A field that could not be set, or a spec that cannot run. `at` is the
/// index of the setting at fault; None when the spec as a whole is (the
/// last setting made it so).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildError {
    pub at: Option<usize>,
    pub field: Field,
    pub message: String,
}

/// [`Spec::defaults`] of the workload named `workload`, in any case.
pub fn defaults(workload: &str) -> Option<Spec> {
    choice(workload, Workload::NAMES).ok().map(Spec::defaults)
}

/// Worker threads when not asked: one per flow, at most one per CPU.
pub fn default_threads(flows: u32) -> u32 {
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get() as u32)
        .unwrap_or(1);
    flows.min(cpus)
}

/// Sets a field of the veth path from its text.
fn path_value(field: Field, value: &str, v: &mut Veth) -> Result<(), String> {
    let text = |e: crate::UnitError| e.to_string();
    match field {
        Field::Mtu => size(value).map(|m| v.mtu = Some(m)),
        Field::Delay => parse_delay_us(value)
            .map(|d| v.delay_us = Some(d))
            .map_err(text),
        Field::LinkRate => parse_rate(value)
            .map(|r| v.link_rate_bps = Some(r))
            .map_err(text),
        Field::Queue => size(value).map(|q| v.queue_bytes = Some(q)),
        Field::Emulator => choice(value, Emulator::NAMES).map(|e| v.emulator = Some(e)),
        Field::PathCpus => cpu_list(value).map(|c| v.path_cpus = Some(c)),
        Field::Qdisc => crate::bottleneck::parse(value).map(|q| v.qdisc = Some(q)),
        Field::Loss => parse_loss_ppm(value)
            .map(|p| v.loss_ppm = Some(p))
            .map_err(text),
        // A field of the path that is not parsed here is a wiring mistake,
        // said out loud rather than read as another field.
        other => Err(format!("{} is not a setting of the path", other.key())),
    }
}

fn rr_only(workload: crate::Workload) -> String {
    format!("applies to rr, crr and udp-rr only, not to {workload}")
}

fn count<T: TryFrom<u64>>(v: &str) -> Result<T, String> {
    let n = parse_count(v).map_err(|e| e.to_string())?;
    T::try_from(n).map_err(|_| format!("'{v}' is too large"))
}

fn cpu_list(v: &str) -> Result<CpuList, String> {
    v.parse::<CpuList>()
        .map_err(|e| format!("'{v}' is not a CPU list ({e}); use a list like 0, 2-3 or 0-3,6"))
}

fn size<T: TryFrom<u64>>(v: &str) -> Result<T, String> {
    let n = parse_size(v).map_err(|e| e.to_string())?;
    T::try_from(n).map_err(|_| format!("'{v}' is too large"))
}

fn choice<T: Copy>(v: &str, options: &[(&str, T)]) -> Result<T, String> {
    let lower = v.to_ascii_lowercase();
    options
        .iter()
        .find(|(name, _)| *name == lower)
        .map(|(_, t)| *t)
        .ok_or_else(|| {
            let names: Vec<&str> = options.iter().map(|(n, _)| *n).collect();
            let (last, rest) = names.split_last().expect("a choice has options");
            format!("'{v}' is not {} or {last}", rest.join(", "))
        })
}

/// Builds a spec from `settings` in order (a later setting of a field wins);
/// `workload` is applied first, since it picks the defaults the others
/// change. Errors name fields as `names` does.
pub fn build(settings: &[(Field, &str)], names: Names) -> Result<Spec, BuildError> {
    let fail = |at: usize, message: String| BuildError {
        at: Some(at),
        field: settings[at].0,
        message,
    };
    let mut spec = Spec::stream();
    if let Some(at) = settings.iter().rposition(|(f, _)| *f == Field::Workload) {
        spec = defaults(settings[at].1).ok_or_else(|| {
            fail(
                at,
                format!(
                    "'{}' is not a workload; use stream, rr, crr, udp-stream or udp-rr",
                    settings[at].1
                ),
            )
        })?;
    }
    let mut threads = None;
    let mut io = None;
    let mut req_writes = None;
    let mut resp_writes = None;
    let mut veth: Option<Veth> = None;
    let mut veth_fields = Vec::new();
    // A message written as a header then a payload: the size is their sum,
    // and the writes are the two.
    let mut split_fields: Vec<usize> = Vec::new();
    let mut parts: Vec<usize> = Vec::new();
    for (at, &(field, v)) in settings.iter().enumerate() {
        let r: Result<(), String> = (|| {
            match field {
                Field::Workload => {}
                // Parsed once the run's own fields are all set.
                Field::Part => parts.push(at),
                Field::Direction => spec.direction = choice(v, Direction::NAMES)?,
                Field::Flows => spec.flows = count(v)?,
                Field::Threads => threads = Some(count::<u32>(v)?),
                Field::MsgSize => spec.msg_size = size(v)?,
                Field::ReqSize
                | Field::RespSize
                | Field::Pipeline
                | Field::Rate
                | Field::Close
                | Field::Timeout => {
                    let workload = spec.workload;
                    let rr = spec.rr.as_mut().ok_or_else(|| rr_only(workload))?;
                    match field {
                        Field::ReqSize => rr.req_size = size(v)?,
                        Field::RespSize => rr.resp_size = size(v)?,
                        Field::Pipeline => rr.pipeline = count(v)?,
                        Field::Rate => rr.rate = Some(count(v)?),
                        Field::Close => rr.close = Some(choice(v, Close::NAMES)?),
                        _ => rr.timeout_ms = Some(parse_duration(v).map_err(|e| e.to_string())?),
                    }
                }
                Field::ReqHeader | Field::ReqPayload | Field::RespHeader | Field::RespPayload => {
                    size::<u64>(v)?;
                    split_fields.push(at);
                }
                Field::ReqWrites => req_writes = Some(at),
                Field::RespWrites => resp_writes = Some(at),
                Field::Sndbuf | Field::Rcvbuf | Field::Buffers => {
                    let b = v.parse::<BufSize>().map_err(|e| e.to_string())?;
                    if field != Field::Rcvbuf {
                        spec.socket.sndbuf = b;
                    }
                    if field != Field::Sndbuf {
                        spec.socket.rcvbuf = b;
                    }
                }
                Field::Nodelay => spec.socket.nodelay = parse_switch(v)?,
                Field::Cork => spec.socket.cork = parse_switch(v)?,
                Field::Mss => spec.socket.mss = Some(size(v)?),
                Field::Sock(o) => spec.socket.table.set(o, o.parse(v)?),
                Field::Cc => spec.socket.cc = Some(v.to_string()),
                Field::PacingRate if v.eq_ignore_ascii_case("none") => {
                    spec.socket.pacing_rate_bps = None
                }
                Field::PacingRate => {
                    spec.socket.pacing_rate_bps = Some(parse_rate(v).map_err(|e| e.to_string())?)
                }
                Field::ZeroCopy => spec.zerocopy = choice(v, ZeroCopy::NAMES)?,
                Field::Rx => spec.rx = choice(v, RxMode::NAMES)?,
                Field::ReadSize if v.eq_ignore_ascii_case("none") => spec.read_size = None,
                Field::ReadSize => spec.read_size = Some(size(v)?),
                Field::SelfProbes if v.eq_ignore_ascii_case("none") => spec.self_probes = None,
                Field::SelfProbes => {
                    spec.self_probes = Some(
                        v.parse()
                            .map_err(|_| format!("{v:?} is not a number of probes a second"))?,
                    )
                }
                Field::Io if v.eq_ignore_ascii_case("auto") => io = None,
                Field::Io => io = Some(choice(v, Io::NAMES).map_err(|e| format!("{e}, or auto"))?),
                Field::Family => spec.family = choice(v, Family::NAMES)?,
                Field::Duration => {
                    spec.duration_ms = parse_duration(v).map_err(|e| e.to_string())?
                }
                Field::Warmup => spec.warmup_ms = parse_duration(v).map_err(|e| e.to_string())?,
                Field::ClientCpus | Field::ServerCpus => {
                    let c = if v.eq_ignore_ascii_case("none") {
                        None
                    } else {
                        Some(cpu_list(v)?)
                    };
                    if field == Field::ClientCpus {
                        spec.client_cpus = c
                    } else {
                        spec.server_cpus = c
                    }
                }
                Field::Topology => {
                    let loopback = choice(v, &[("loopback", true), ("veth", false)])?;
                    veth = if loopback {
                        None
                    } else {
                        Some(veth.take().unwrap_or_default())
                    };
                }
                Field::Mtu
                | Field::Delay
                | Field::Loss
                | Field::LinkRate
                | Field::Queue
                | Field::Emulator
                | Field::PathCpus
                | Field::Qdisc => {
                    // A malformed value is named before where it applies.
                    if !v.eq_ignore_ascii_case("none") {
                        path_value(field, v, &mut Veth::default())?;
                    }
                    veth_fields.push(at)
                }
            }
            Ok(())
        })();
        r.map_err(|m| fail(at, m))?;
    }
    for at in veth_fields {
        let (field, value) = settings[at];
        // "none" leaves the path as it is, on any topology.
        if value.eq_ignore_ascii_case("none") {
            continue;
        }
        let v = veth.as_mut().ok_or_else(|| {
            fail(
                at,
                format!(
                    "applies to the veth pair; add {} veth",
                    names.of(Field::Topology)
                ),
            )
        })?;
        path_value(field, value, v).map_err(|m| fail(at, m))?;
    }
    spec.topology = veth.map(Topology::Veth);
    split_messages(settings, &split_fields, &mut spec, names, fail)?;
    if let Some(rr) = spec.rr.as_mut() {
        for at in [req_writes, resp_writes].into_iter().flatten() {
            let (field, text) = settings[at];
            let size = if field == Field::ReqWrites {
                rr.req_size
            } else {
                rr.resp_size
            };
            let parsed = parse_writes(field, text, size).map_err(|e| fail(at, e.message))?;
            if field == Field::ReqWrites {
                rr.req_writes = parsed;
            } else {
                rr.resp_writes = parsed;
            }
        }
        spec.msg_size = rr.req_size.max(rr.resp_size);
    } else if let Some(at) = req_writes.or(resp_writes) {
        return Err(fail(at, rr_only(spec.workload)));
    }
    spec.threads = threads.unwrap_or_else(|| default_threads(spec.flows));
    for at in parts {
        let part = crate::Part::parse(settings[at].1).map_err(|m| fail(at, m))?;
        spec.parts.push(part);
    }
    match io {
        Some(io) => (spec.io, spec.io_auto) = (io, false),
        None => {
            spec.io_auto = true;
            crate::auto::resolve(&mut spec, crate::auto::host_cpus(), true);
        }
    }
    spec.validate().map_err(|e| BuildError {
        at: None,
        field: e.field,
        message: e.message,
    })?;
    Ok(spec)
}

/// Messages written as a header then a payload (`req_header` with
/// `req_payload`, `resp_header` with `resp_payload`): each message's size
/// is the sum of its two, and its writes are the two.
fn split_messages(
    settings: &[(Field, &str)],
    split_fields: &[usize],
    spec: &mut Spec,
    names: Names,
    fail: impl Fn(usize, String) -> BuildError,
) -> Result<(), BuildError> {
    let Some(&first) = split_fields.first() else {
        return Ok(());
    };
    let Some(rr) = spec.rr.as_mut() else {
        return Err(fail(first, rr_only(spec.workload)));
    };
    for (header, payload, writes) in [
        (Field::ReqHeader, Field::ReqPayload, Field::ReqWrites),
        (Field::RespHeader, Field::RespPayload, Field::RespWrites),
    ] {
        let get = |f: Field| {
            split_fields
                .iter()
                .rev()
                .find(|&&at| settings[at].0 == f)
                .copied()
        };
        match (get(header), get(payload)) {
            (None, None) => {}
            (Some(h), Some(p)) => {
                let (h, p) = (
                    parse_size(settings[h].1).unwrap_or(0),
                    parse_size(settings[p].1).unwrap_or(0),
                );
                let size = h.saturating_add(p);
                let parsed =
                    parse_writes(writes, &format!("{h},{p}"), size).map_err(|e| BuildError {
                        at: Some(first),
                        field: writes,
                        message: e.message,
                    })?;
                if writes == Field::ReqWrites {
                    rr.req_size = size;
                    rr.req_writes = parsed;
                } else {
                    rr.resp_size = size;
                    rr.resp_writes = parsed;
                }
            }
            (Some(at), None) | (None, Some(at)) => {
                return Err(fail(
                    at,
                    format!("{} and {} go together", names.of(header), names.of(payload)),
                ))
            }
        }
    }
    Ok(())
}
