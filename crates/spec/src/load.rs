//! `plumb run load`: latency under load as a run of parts. The run's own
//! workload is the probe, paced transactions on a connection of their own
//! (an open-loop rr: each one's latency counts from its planned send time,
//! so a probe that waits behind a queue is not hidden), beside a UDP probe
//! at the same rate (an open-loop udp-rr, whose lost requests are counted
//! rather than retransmitted, and whose series goes on through loss) and
//! probes on new connections (an open-loop crr: a handshake and a small
//! exchange, the responsiveness method's "foreign" probes), and
//! bulk flows run as parts in phases, as flent's RRUL loads a path: idle
//! (probes only), download, upload, both, idle again. The bulk flows carry
//! self probes (the method's "self": a mark in the loaded direction, its
//! answer on the idle one, timed by the client). What is stored is the
//! run of parts this expands to, so a run of `load` and the same parts
//! written out are one test point.

use crate::Field;

/// The phases in turn, with the parts that load each; the parts of one
/// phase start and stop together.
pub const PHASES: &[(&str, &[Load])] = &[
    ("idle", &[]),
    ("download", &[Load::Down("download")]),
    ("upload", &[Load::Up("upload")]),
    ("both", &[Load::Down("both-down"), Load::Up("both-up")]),
    ("idle", &[]),
];

/// A load part: bulk flows from the server (down) or to it (up), by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Load {
    Down(&'static str),
    Up(&'static str),
}

/// Probes a second, unless `--rate` says otherwise: a hundred in a
/// five-second phase, within the responsiveness method's budget of at
/// most 100 a second.
pub const PROBE_RATE: u64 = 20;
/// Self probes a second inside each load part (`--self-probes`): with
/// both loads running, two parts' and the three probes' are 100 a second,
/// the responsiveness method's budget.
pub const SELF_PROBE_RATE: u64 = 20;
/// Probes each flow may have outstanding: a probe rate's worth of 1.6 s,
/// so that the schedule holds through a deep queue.
pub const PROBE_PIPELINE: u32 = 32;
/// The UDP probe's part, for the whole run. Its answers have room for the
/// server's stamp, so that where the ends share a clock each probe's
/// latency splits into its two ways.
pub const UDP_PROBE: &str = "udp";
/// The part of probes on new connections (the responsiveness method's
/// "foreign" probes: a TCP connect and a small exchange), for the whole
/// run: an open-loop crr.
pub const CONNECT_PROBE: &str = "connect";
/// Connections the connect probes may have in progress at once: at the
/// probe rate, 0.8 s of them, so that a deep queue's wait (a handshake and
/// an exchange each cross it twice) does not hold the schedule back.
pub const CONNECT_SLOTS: u32 = 16;
/// How long a UDP probe waits for its answer before it counts as lost: a
/// probe behind a bloated queue is late, not lost, up to a second; the
/// pipeline's 1.6 s of probes keeps the schedule going meanwhile.
pub const UDP_PROBE_TIMEOUT: &str = "1s";
/// Each phase's length when not asked.
pub const PHASE_S: u64 = 5;
/// Bulk flows each way when not asked, as RRUL's.
pub const LOAD_FLOWS: u32 = 4;

/// What an experiment file's `workload` says for a load run (`plumb run
/// load`): it stands for an rr probe with this module's preset.
pub const WORKLOAD: &str = "load";

/// The settings of a load run beside the spec's fields: each phase's
/// length (`--phase`, `phase` in an experiment file) and the bulk flows
/// each way (`--load-flows`, `load_flows`).
pub const PHASE_KEY: &str = "phase";
pub const LOAD_FLOWS_KEY: &str = "load_flows";

/// A phase's length: whole seconds, at least one.
pub fn parse_phase(v: &str) -> Result<u64, String> {
    let ms = crate::units::parse_duration(v).map_err(|e| e.to_string())?;
    if ms == 0 || ms % 1000 != 0 {
        return Err("a phase is whole seconds, at least 1s".into());
    }
    Ok(ms / 1000)
}

/// Bulk flows each way: 1 to 1024.
pub fn parse_load_flows(v: &str) -> Result<u32, String> {
    v.parse::<u32>()
        .ok()
        .filter(|n| (1..=1024).contains(n))
        .ok_or_else(|| "flows each way are 1 to 1024".to_string())
}

/// A load run's settings: the preset's for `phase_s` and `flows`, then the
/// user's `own` fields (which win where they set the same field; the
/// loads take their congestion control). The window is the phases': a
/// `duration` among them is refused.
pub fn expand(
    phase_s: u64,
    flows: u32,
    own: Vec<(Field, String)>,
) -> Result<Vec<(Field, String)>, (Field, String)> {
    if own.iter().any(|(f, _)| *f == Field::Duration) {
        return Err((
            Field::Duration,
            format!("a load run lasts its five phases: set {PHASE_KEY} instead"),
        ));
    }
    let part_keys: String = own
        .iter()
        .filter(|(f, _)| to_loads(*f))
        .map(|(f, v)| format!(":{}={v}", f.key()))
        .collect();
    let mut out = settings(phase_s, flows, &part_keys);
    out.extend(
        own.into_iter()
            .filter(|(f, _)| !matches!(f, Field::Workload | Field::SelfProbes)),
    );
    Ok(out)
}

/// Whether the user's setting of a load run goes to its loads: how their
/// sockets are set (congestion control, TCP_NOTSENT_LOWAT and the other
/// options, pacing, buffers), which is what a load run compares; and the
/// self probes' rate, which only the loads have. Each also applies to the
/// probes, but for the self probes.
fn to_loads(f: Field) -> bool {
    matches!(
        f,
        Field::Cc
            | Field::Sock(_)
            | Field::PacingRate
            | Field::Sndbuf
            | Field::Rcvbuf
            | Field::SelfProbes
    )
}

/// The settings `plumb run load` adds to the user's (which come after and
/// win where they set the same field): the probe's, the window of every
/// phase, and one part per load, each with its self probes and the
/// `part_keys` given (see [`to_loads`]).
pub fn settings(phase_s: u64, flows: u32, part_keys: &str) -> Vec<(Field, String)> {
    let mut out = vec![
        (Field::Workload, crate::Workload::Rr.to_string()),
        (Field::Rate, PROBE_RATE.to_string()),
        (Field::Pipeline, PROBE_PIPELINE.to_string()),
        (Field::Nodelay, "true".to_string()),
        (
            Field::Duration,
            format!("{}s", phase_s * PHASES.len() as u64),
        ),
        (
            Field::Part,
            format!(
                "{UDP_PROBE}=udp-rr:rate={PROBE_RATE}:pipeline={PROBE_PIPELINE}:timeout={UDP_PROBE_TIMEOUT}:resp_size={}",
                crate::UDP_STAMPED
            ),
        ),
        (
            Field::Part,
            format!("{CONNECT_PROBE}=crr:rate={PROBE_RATE}:flows={CONNECT_SLOTS}"),
        ),
    ];
    for (i, (_, loads)) in PHASES.iter().enumerate() {
        let (start, stop) = (i as u64 * phase_s, (i as u64 + 1) * phase_s);
        for load in *loads {
            let (name, direction) = match load {
                Load::Down(n) => (n, "recv"),
                Load::Up(n) => (n, "send"),
            };
            out.push((
                Field::Part,
                format!(
                    "{name}=stream:direction={direction}:flows={flows}:start={start}s:stop={stop}s:self_probes={SELF_PROBE_RATE}{part_keys}"
                ),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{build, Names, Workload};

    #[test]
    fn load_is_a_paced_probe_with_a_part_per_load_in_its_phase() {
        let mut settings = vec![(Field::Workload, "rr".to_string())];
        settings.extend(self::settings(2, 3, ":cc=cubic"));
        let fields: Vec<(Field, &str)> = settings.iter().map(|(f, v)| (*f, v.as_str())).collect();
        let spec = build(&fields, Names::Flags).unwrap();
        assert_eq!(spec.workload, Workload::Rr);
        assert_eq!(spec.duration_ms, 10_000);
        let rr = spec.rr.as_ref().unwrap();
        assert_eq!((rr.rate, rr.pipeline), (Some(PROBE_RATE), PROBE_PIPELINE));
        assert!(spec.socket.nodelay);
        let parts: Vec<(&str, u64, Option<u64>, u32)> = spec
            .parts
            .iter()
            .map(|p| (p.name.as_str(), p.start_ms, p.stop_ms, p.spec.flows))
            .collect();
        assert_eq!(
            parts,
            vec![
                (UDP_PROBE, 0, None, 1),
                (CONNECT_PROBE, 0, None, CONNECT_SLOTS),
                ("download", 2000, Some(4000), 3),
                ("upload", 4000, Some(6000), 3),
                ("both-down", 6000, Some(8000), 3),
                ("both-up", 6000, Some(8000), 3),
            ]
        );
        let (udp, rest) = spec.parts.split_first().unwrap();
        let (connect, loads) = rest.split_first().unwrap();
        assert_eq!(connect.spec.workload, Workload::Crr);
        assert_eq!(connect.spec.rr.as_ref().unwrap().rate, Some(PROBE_RATE));
        assert!(loads
            .iter()
            .all(|p| p.spec.socket.cc.as_deref() == Some("cubic")));
        assert!(loads
            .iter()
            .all(|p| p.spec.self_probes == Some(SELF_PROBE_RATE as u32)));
        assert_eq!(udp.spec.workload, Workload::UdpRr);
        let rr = udp.spec.rr.as_ref().unwrap();
        assert_eq!(
            (rr.rate, rr.pipeline, rr.timeout_ms, rr.resp_size),
            (
                Some(PROBE_RATE),
                PROBE_PIPELINE,
                Some(1000),
                crate::UDP_STAMPED
            )
        );
    }

    #[test]
    fn the_loads_take_the_users_socket_settings_and_self_probe_rate() {
        let lowat = Field::from_key("notsent_lowat").unwrap();
        let own = vec![
            (Field::Cc, "cubic".to_string()),
            (lowat, "16K".to_string()),
            (Field::SelfProbes, "5".to_string()),
        ];
        let settings = expand(2, 2, own).unwrap();
        let fields: Vec<(Field, &str)> = settings.iter().map(|(f, v)| (*f, v.as_str())).collect();
        let spec = build(&fields, Names::Flags).unwrap();
        assert!(spec.validate().is_ok(), "{:?}", spec.validate());
        assert_eq!(spec.self_probes, None, "the run's own probe has none");
        let Field::Sock(lowat) = lowat else {
            panic!("notsent_lowat is a socket option")
        };
        assert_eq!(spec.socket.table.get(lowat), Some(16 << 10));
        let loads: Vec<&crate::Part> = spec.parts.iter().skip(2).collect();
        assert_eq!(loads.len(), 4);
        for p in loads {
            assert_eq!(p.spec.socket.cc.as_deref(), Some("cubic"), "{}", p.name);
            assert_eq!(p.spec.socket.table.get(lowat), Some(16 << 10), "{}", p.name);
            assert_eq!(p.spec.self_probes, Some(5), "{}", p.name);
        }
    }
}
