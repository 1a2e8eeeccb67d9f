//! `plumb run WORKLOAD`: the spec fields each workload takes as flags, in
//! one table. clap's arguments and the settings handed to
//! `plumb_spec::build` (the path an experiment file's fields take too) are
//! both made from it, so a field a workload gains is one row here.

use super::CommonArgs;
use clap::{Arg, ArgAction, ArgMatches, Args, Command, FromArgMatches};
use plumb_spec::sockopt::Value;
use plumb_spec::{
    Choice, Close, Emulator, Field, Io, Proto, RxMode, SockOpt, Spec, Workload, ZeroCopy,
};

/// A parsed `plumb run WORKLOAD`.
#[derive(Debug)]
pub struct RunCommand {
    pub workload: Workload,
    /// The fields the command line set, as typed, in table order.
    pub settings: Vec<(Field, String)>,
    pub common: CommonArgs,
}

/// How a flag takes its value.
#[derive(Clone, Copy)]
enum Takes {
    /// A value, shown in help under this name.
    Value(&'static str),
    /// No value: the flag sets the field to true.
    Switch,
    /// One of the names of a [`Choice`], shown in help under this name.
    Choice(&'static str, fn() -> Vec<&'static str>),
    /// A value, as often as wanted, each a setting of its own.
    Each(&'static str),
    /// `--direction`: one of the directions the workload runs in.
    Direction,
}

#[derive(Clone, Copy)]
struct Flag {
    field: Field,
    takes: Takes,
    help: &'static str,
}

const fn value(field: Field, name: &'static str, help: &'static str) -> Flag {
    Flag {
        field,
        takes: Takes::Value(name),
        help,
    }
}

const fn switch(field: Field, help: &'static str) -> Flag {
    Flag {
        field,
        takes: Takes::Switch,
        help,
    }
}

fn names<T: Choice>() -> Vec<&'static str> {
    T::shown().map(|(name, _)| name).collect()
}

const fn choice<T: Choice>(field: Field, name: &'static str, help: &'static str) -> Flag {
    Flag {
        field,
        takes: Takes::Choice(name, names::<T>),
        help,
    }
}

/// Its values and help come from the workload's row of directions
/// ([`Workload::directions`]).
const DIRECTION: Flag = Flag {
    field: Field::Direction,
    takes: Takes::Direction,
    help: "",
};
const THREADS: Flag = value(
    Field::Threads,
    "N",
    "Worker threads on each end [default: min(flows, CPUs)]",
);
const IO: Flag = Flag {
    field: Field::Io,
    takes: Takes::Choice("IO", || {
        let mut all = vec!["auto"];
        all.extend(names::<Io>());
        all
    }),
    help: "How the workers move data: epoll (readiness, a system call per read or write), \
           uring (io_uring: batched submissions, multishot receives into a provided buffer \
           ring), or auto, the better of the two for the workload, its flows, this host's \
           CPUs and the ends' pinning, as measured (README, \"The io_uring engine\") \
           [default: auto]",
};
const REQ_WRITES: Flag = value(
    Field::ReqWrites,
    "LIST",
    "Write each request in pieces: 8,rest is an 8-byte write, then the rest",
);
const RESP_WRITES: Flag = value(
    Field::RespWrites,
    "LIST",
    "Write each response in pieces: 8,rest is an 8-byte write, then the rest",
);

/// Socket options applied on both ends of every TCP flow.
const TCP_SOCKET: [Flag; 7] = [
    value(
        Field::Sndbuf,
        "SIZE|auto",
        "SO_SNDBUF on both ends: a size like 8K, or auto (kernel autotuning)",
    ),
    value(
        Field::Rcvbuf,
        "SIZE|auto",
        "SO_RCVBUF on both ends: a size like 8K, or auto (kernel autotuning)",
    ),
    switch(
        Field::Nodelay,
        "Set TCP_NODELAY (disable Nagle) on every flow",
    ),
    switch(Field::Cork, "Set TCP_CORK on every flow"),
    value(
        Field::Mss,
        "BYTES",
        "TCP_MAXSEG asked before connecting, in bytes",
    ),
    value(
        Field::Cc,
        "NAME",
        "Congestion control (TCP_CONGESTION), e.g. cubic or bbr",
    ),
    value(
        Field::PacingRate,
        "RATE",
        "Per-flow pacing with SO_MAX_PACING_RATE, in bits/s: 500M, 10G",
    ),
];

/// Socket options of the UDP workloads.
const UDP_SOCKET: [Flag; 2] = [
    value(
        Field::Sndbuf,
        "SIZE|auto",
        "SO_SNDBUF on both ends: a size like 256K, or auto (the kernel default)",
    ),
    value(
        Field::Rcvbuf,
        "SIZE|auto",
        "SO_RCVBUF on both ends: a size like 256K, or auto (the kernel default)",
    ),
];

const STREAM: &[Flag] = &[
    value(Field::Flows, "N", "Number of TCP connections"),
    THREADS,
    value(
        Field::MsgSize,
        "SIZE",
        "Bytes per message: each write sends one, each read takes at most the rest of one: \
         256, 8K, 128K, 1M, 1MiB",
    ),
    choice::<ZeroCopy>(
        Field::ZeroCopy,
        "ZEROCOPY",
        "How the sending end hands data to the kernel: none (write), msg (MSG_ZEROCOPY with \
         completions), sendfile or splice (from an in-memory file of --msg-size), uring \
         (IORING_OP_SEND_ZC, with --io uring)",
    ),
    choice::<RxMode>(
        Field::Rx,
        "RX",
        "How the receiving end takes data: copy (read), skip (MSG_TRUNC, not copied to user \
         space) or zerocopy (TCP_ZEROCOPY_RECEIVE)",
    ),
    value(
        Field::ReadSize,
        "SIZE",
        "The most bytes one read takes, up to --msg-size (netperf -M); with --io uring the \
         size of each receive buffer [default: --msg-size]",
    ),
    value(
        Field::SelfProbes,
        "PER_SEC",
        "Probes a second inside the flows, timed by the client from their planned time to \
         their answer on the same connection: a mark in the sender's next message, echoed on \
         the idle direction (or asked for on it, in a download)",
    ),
    IO,
];

const PIPELINE: Flag = value(
    Field::Pipeline,
    "N",
    "Requests outstanding per flow (netperf -b); 1 is a closed loop",
);

const RATE: Flag = value(
    Field::Rate,
    "PER_SEC",
    "Open loop: issue this many transactions per second over all flows on a fixed \
     schedule (10k, 1M); latency counts from the planned send time, so queueing is not \
     hidden. --pipeline caps what each flow may have outstanding",
);

const RR: &[Flag] = &[
    value(Field::Flows, "N", "Number of TCP connections"),
    THREADS,
    value(Field::ReqSize, "SIZE", "Bytes per request: 1, 64, 8K"),
    value(Field::RespSize, "SIZE", "Bytes per response"),
    PIPELINE,
    RATE,
    REQ_WRITES,
    RESP_WRITES,
    IO,
];

const CRR: &[Flag] = &[
    value(Field::Flows, "N", "Connections in progress at once"),
    THREADS,
    value(Field::ReqSize, "SIZE", "Bytes per request"),
    value(Field::RespSize, "SIZE", "Bytes per response"),
    choice::<Close>(
        Field::Close,
        "CLOSE",
        "How each connection ends: rst (the client resets it with SO_LINGER 0, leaving no \
         TIME_WAIT, as neper does), fin (the client closes first, keeping one TIME_WAIT \
         socket per transaction) or server-fin (the server closes right after its response \
         and the TIME_WAIT is its own, as netperf's TCP_CRR does)",
    ),
    value(
        Field::Rate,
        "PER_SEC",
        "Open loop: open this many connections per second over all flows on a fixed \
         schedule, each in a flow whose last exchange is over; a transaction counts from \
         its planned time, its connect included",
    ),
    REQ_WRITES,
    RESP_WRITES,
    IO,
];

const UDP_STREAM: &[Flag] = &[
    value(
        Field::Flows,
        "N",
        "Number of UDP flows (a connected socket each on the client)",
    ),
    THREADS,
    IO,
    value(
        Field::MsgSize,
        "SIZE",
        "Bytes per datagram, plumb's 16-byte header included (16 to 65507); 1472 fills a \
         1500-byte MTU over IPv4",
    ),
];

const UDP_RR: &[Flag] = &[
    value(Field::Flows, "N", "Number of UDP flows"),
    THREADS,
    IO,
    value(
        Field::ReqSize,
        "SIZE",
        "Bytes per request, plumb's 16-byte header included (16 to 65507)",
    ),
    value(Field::RespSize, "SIZE", "Bytes per response (16 to 65507)"),
    value(
        Field::Timeout,
        "TIME",
        "How long a request waits for its response before it counts as lost and is \
         forgotten (a closed loop sends the next one then)",
    ),
    PIPELINE,
    RATE,
];

/// The window, where the ends run and the path between them: every workload
/// takes these.
const EVERY: &[Flag] = &[
    value(
        Field::Duration,
        "TIME",
        "Length of the measurement window: 10s, 500ms, 2m",
    ),
    value(
        Field::Warmup,
        "TIME",
        "Traffic before the window opens, not measured",
    ),
    value(
        Field::ClientCpus,
        "LIST",
        "Pin the client's worker threads, one CPU each in turn: 0, 0-3,6",
    ),
    value(
        Field::ServerCpus,
        "LIST",
        "Pin the server's worker threads, one CPU each in turn: 1, 4-7",
    ),
    Flag {
        field: Field::Topology,
        takes: Takes::Choice("TOPOLOGY", || vec!["loopback", "veth"]),
        help: "Where the ends run: loopback (this host's), or veth (two network namespaces \
               joined by a veth pair, client in one, server in the other; needs root)",
    },
    value(
        Field::Mtu,
        "BYTES",
        "MTU of the veth pair (--topology veth)",
    ),
    value(
        Field::Delay,
        "TIME",
        "One-way delay each way of the path (--topology veth): 10ms, 500us",
    ),
    value(
        Field::Loss,
        "PERCENT",
        "Share of packets lost each way of the path: 1%, 0.1%",
    ),
    value(
        Field::LinkRate,
        "RATE",
        "The path's bottleneck each way, in bits/s: 100M, 1G",
    ),
    value(
        Field::Queue,
        "BYTES",
        "The bottleneck's buffer in bytes [default: one bandwidth-delay product, at least 64K]",
    ),
    choice::<Emulator>(
        Field::Emulator,
        "EMULATOR",
        "What emulates delay, loss and rate [default: netem where the kernel has it, else \
         plumb's own delay line]",
    ),
    value(
        Field::PathCpus,
        "LIST",
        "The CPUs plumb's delay line runs on: 3, 2-3",
    ),
    value(
        Field::Qdisc,
        "QDISC",
        "The qdisc at the bottleneck each way, on a router namespace between the ends \
         (--topology veth), under an HTB shaper at --link-rate with --queue as its limit: \
         pfifo, bfifo, fq_codel, fq, codel, sfq, pie, fq_pie or cake, with its own \
         parameters: 'fq_codel target 5ms'",
    ),
    Flag {
        field: Field::Part,
        takes: Takes::Each("NAME=WORKLOAD[:KEY=VALUE]..."),
        help: "Another workload in the run, beside this one, with its own flows and fields \
               (keys as in experiment files) and, with start= and stop=, when it starts and \
               stops, in whole seconds into the window: \
               load=stream:flows=4:direction=both:start=2s; as often as wanted",
    },
];

/// The flags of the socket option table that a socket of `proto` takes.
fn table_flags(proto: Proto) -> Vec<Flag> {
    SockOpt::ALL
        .iter()
        .filter(|o| o.taken_by(proto))
        .map(|&o| {
            let d = o.desc();
            match d.value {
                Value::Switch => switch(Field::Sock(o), d.help),
                _ => value(Field::Sock(o), d.metavar, d.help),
            }
        })
        .collect()
}

/// A workload's subcommand: what it is, and the flags it takes in `--help`
/// order.
fn table(w: Workload) -> (&'static str, Vec<Flag>) {
    let with = |own: &[Flag], proto| {
        let socket: &[Flag] = match proto {
            Proto::Tcp => &TCP_SOCKET,
            Proto::Any => &UDP_SOCKET,
        };
        // A workload that goes more than one way offers the ways its row
        // in the spec names, and takes no other.
        let direction: &[Flag] = match w.directions() {
            [_] => &[],
            _ => &[DIRECTION],
        };
        [direction, own, socket, &table_flags(proto), EVERY].concat()
    };
    match w {
        Workload::Stream => (
            "Bulk TCP transfer in --msg-size writes (netperf TCP_STREAM/TCP_MAERTS)",
            with(STREAM, Proto::Tcp),
        ),
        Workload::Rr => (
            "TCP request/response on long-lived flows (netperf TCP_RR): transactions per \
             second and latency percentiles",
            with(RR, Proto::Tcp),
        ),
        Workload::Crr => (
            "A new TCP connection per transaction: connect, request, response, close \
             (netperf TCP_CRR)",
            with(CRR, Proto::Tcp),
        ),
        Workload::UdpStream => (
            "UDP datagrams from one end to the other as fast as its sockets take them: sent \
             and received datagrams and bits on both ends, loss and reordering counted by the \
             receiver (netperf UDP_STREAM, iperf3 -u)",
            with(UDP_STREAM, Proto::Any),
        ),
        Workload::UdpRr => (
            "UDP request/response: a request whose response does not come within --timeout \
             is counted as lost and the flow goes on (netperf UDP_RR); with --rate, probes \
             on a fixed schedule that go on through loss",
            with(UDP_RR, Proto::Any),
        ),
    }
}

impl Flag {
    /// The flag as clap takes it, its id the field's key. Its help gives
    /// the default from `spec`, the spec the workload starts from, so the
    /// default is defined once.
    fn arg(&self, spec: &Spec) -> Arg {
        let own = self.help(spec.workload);
        let default = spec
            .value_of(self.field)
            .filter(|d| !(d.is_empty() || d == "none" || d == "false"))
            .filter(|_| !own.contains("[default"));
        let help = match default {
            Some(d) => format!("{own} [default: {d}]"),
            None => own,
        };
        let arg = Arg::new(self.field.key())
            .long(self.field.long())
            .help(help);
        match self.takes {
            Takes::Value(name) => arg.value_name(name),
            Takes::Switch => arg.action(ArgAction::SetTrue),
            Takes::Choice(name, names) => arg.value_name(name).value_parser(names()),
            Takes::Each(name) => arg.value_name(name).action(ArgAction::Append),
            Takes::Direction => arg.value_name("DIRECTION").value_parser(
                (spec.workload.directions().iter())
                    .map(|d| d.to_string())
                    .collect::<Vec<_>>(),
            ),
        }
    }

    /// The flag's help for workload `w`.
    fn help(&self, w: Workload) -> String {
        if !matches!(self.takes, Takes::Direction) {
            return self.help.to_string();
        }
        let ways: Vec<String> = (w.directions().iter())
            .map(|&d| match w.direction_as(d) {
                Some(peer) => format!("{}, {peer})", d.said().trim_end_matches(')')),
                None => d.said(),
            })
            .collect();
        let (last, rest) = ways.split_last().expect("a workload goes at least one way");
        format!(
            "Which way the data goes, seen from the client: {} or {last}",
            rest.join(", ")
        )
    }

    /// The flag's values as typed, each time it was given.
    fn settings(&self, m: &ArgMatches) -> Vec<String> {
        match self.takes {
            Takes::Switch => m
                .get_flag(self.field.key())
                .then(|| "true".to_string())
                .into_iter()
                .collect(),
            _ => m
                .get_many::<String>(self.field.key())
                .into_iter()
                .flatten()
                .cloned()
                .collect(),
        }
    }
}

/// The workload of the subcommand `name`.
fn workload_named(name: &str) -> Option<Workload> {
    Workload::shown().find(|(n, _)| *n == name).map(|(_, w)| w)
}

/// `plumb run load`: latency under load, an rr of paced probes with bulk
/// flows as parts in phases (`plumb_spec::load`).
const LOAD: &str = plumb_spec::load::WORKLOAD;
const PHASE: &str = "phase";
const LOAD_FLOWS: &str = "load-flows";

/// rr's flags less the window's length, which the phases make.
fn load_flags() -> Vec<Flag> {
    table(Workload::Rr)
        .1
        .into_iter()
        .filter(|f| f.field != Field::Duration)
        .collect()
}

fn load_command() -> Command {
    let fields =
        plumb_spec::load::settings(plumb_spec::load::PHASE_S, plumb_spec::load::LOAD_FLOWS, "");
    let fields: Vec<(Field, &str)> = fields.iter().map(|(f, v)| (*f, v.as_str())).collect();
    let spec = plumb_spec::build(&fields, plumb_spec::Names::Flags).expect("load's own settings");
    let sub = load_flags()
        .iter()
        .fold(Command::new(LOAD), |c, f| c.arg(f.arg(&spec)))
        .arg(Arg::new(PHASE).long(PHASE).value_name("TIME").help(format!(
            "Length of each phase, in whole seconds: idle, download, upload, both, \
                     idle [default: {}s]",
            plumb_spec::load::PHASE_S
        )))
        .arg(
            Arg::new(LOAD_FLOWS)
                .long(LOAD_FLOWS)
                .value_name("N")
                .help(format!(
                    "Bulk TCP flows each way while loaded [default: {}]",
                    plumb_spec::load::LOAD_FLOWS
                )),
        );
    CommonArgs::augment_args(sub)
        .about(
            "Latency under load: paced probes (an open-loop rr of --rate a second on a \
             connection of their own) while bulk flows load the path in phases, as flent's \
             RRUL does; each phase's latency and its rise over idle, each load's goodput \
             and fairness. The congestion control (--cc) is the bulk flows' too",
        )
        .long_about(None)
        .next_line_help(true)
}

/// The settings of `plumb run load`: the preset's, then the user's.
fn load_settings(m: &ArgMatches) -> Result<Vec<(Field, String)>, clap::Error> {
    let bad = |flag: &str, v: &str, why: &str| {
        clap::Error::raw(
            clap::error::ErrorKind::InvalidValue,
            format!("--{flag} {v}: {why}\n"),
        )
    };
    let phase_s = match m.get_one::<String>(PHASE) {
        None => plumb_spec::load::PHASE_S,
        Some(v) => plumb_spec::load::parse_phase(v).map_err(|e| bad(PHASE, v, &e))?,
    };
    let flows = match m.get_one::<String>(LOAD_FLOWS) {
        None => plumb_spec::load::LOAD_FLOWS,
        Some(v) => plumb_spec::load::parse_load_flows(v).map_err(|e| bad(LOAD_FLOWS, v, &e))?,
    };
    let own: Vec<(Field, String)> = load_flags()
        .iter()
        .flat_map(|f| f.settings(m).into_iter().map(|v| (f.field, v)))
        .collect();
    // load's flags have no --duration, so nothing here is refused.
    plumb_spec::load::expand(phase_s, flows, own)
        .map_err(|(field, why)| bad(field.long(), "", &why))
}

impl clap::Subcommand for RunCommand {
    fn augment_subcommands(cmd: Command) -> Command {
        Workload::shown()
            .fold(cmd, |cmd, (name, w)| {
                let (about, flags) = table(w);
                let spec = Spec::defaults(w);
                let sub = flags
                    .iter()
                    .fold(Command::new(name), |c, f| c.arg(f.arg(&spec)));
                // After the common flags, whose own doc would stand as about.
                let sub = CommonArgs::augment_args(sub)
                    .about(about)
                    .long_about(None)
                    .next_line_help(true)
                    .after_help(
                        "Sizes are bytes (K, M, G = 1024), rates bit/s (K, M, G = 1000), times ns \
                     to h, letters in any case; see docs/units.md.",
                    );
                cmd.subcommand(sub)
            })
            .subcommand(load_command())
    }

    fn augment_subcommands_for_update(cmd: Command) -> Command {
        Self::augment_subcommands(cmd)
    }

    fn has_subcommand(name: &str) -> bool {
        name == LOAD || workload_named(name).is_some()
    }
}

impl FromArgMatches for RunCommand {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        let missing = || clap::Error::new(clap::error::ErrorKind::MissingSubcommand);
        let (name, m) = m.subcommand().ok_or_else(missing)?;
        if name == LOAD {
            return Ok(RunCommand {
                workload: Workload::Rr,
                settings: load_settings(m)?,
                common: CommonArgs::from_arg_matches(m)?,
            });
        }
        let workload = workload_named(name).ok_or_else(missing)?;
        let settings = table(workload)
            .1
            .iter()
            .flat_map(|f| f.settings(m).into_iter().map(|v| (f.field, v)))
            .collect();
        Ok(RunCommand {
            workload,
            settings,
            common: CommonArgs::from_arg_matches(m)?,
        })
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        *self = RunCommand::from_arg_matches(m)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use plumb_spec::Direction;

    #[test]
    fn each_workload_takes_each_field_once_and_only_those_its_spec_has() {
        for (name, w) in Workload::shown() {
            let flags = table(w).1;
            for (i, f) in flags.iter().enumerate() {
                assert!(
                    !flags[..i].iter().any(|g| g.field == f.field),
                    "{name}: {} twice",
                    f.field.flag()
                );
                // The path's fields need the path.
                let settable = plumb_spec::build(
                    &[
                        (Field::Workload, name),
                        (Field::Topology, "veth"),
                        (f.field, &example(f)),
                    ],
                    plumb_spec::Names::Flags,
                );
                assert!(settable.is_ok(), "{name} {}: {settable:?}", f.field.flag());
            }
        }
    }

    /// --direction is offered where the workload has a choice of
    /// directions: its help names each, the command line takes each and
    /// no other.
    #[test]
    fn a_workload_offers_direction_where_it_takes_more_than_one() {
        let all = [Direction::Send, Direction::Recv, Direction::Both];
        for (name, w) in Workload::shown() {
            let flags = table(w).1;
            let direction = flags.iter().find(|f| f.field == Field::Direction);
            assert_eq!(direction.is_some(), w.directions().len() > 1, "{name}");
            let Some(direction) = direction else { continue };
            let help = direction.help(w);
            for d in all {
                let parsed = crate::args::command().try_get_matches_from([
                    "plumb",
                    "run",
                    name,
                    "--direction",
                    &d.to_string(),
                ]);
                let offered = w.directions().contains(&d);
                assert_eq!(parsed.is_ok(), offered, "{name} --direction {d}");
                assert_eq!(
                    help.contains(&format!("{d} (")),
                    offered,
                    "{name}: {d} in {help}"
                );
            }
        }
    }

    #[test]
    fn udp_workloads_refuse_every_tcp_option_by_its_name() {
        let stream = table(Workload::Stream).1;
        let tcp: Vec<&Flag> = stream
            .iter()
            .filter(|f| f.field.proto() == plumb_spec::Proto::Tcp)
            .collect();
        assert!(tcp.len() >= 5, "the table's TCP options");
        for udp in ["udp-stream", "udp-rr"] {
            for f in &tcp {
                let e = plumb_spec::build(
                    &[(Field::Workload, udp), (f.field, &example(f))],
                    plumb_spec::Names::Keys,
                )
                .expect_err(f.field.key());
                assert!(
                    e.field == f.field && e.message.contains("a TCP option"),
                    "{udp} {}: {e:?}",
                    f.field.key()
                );
            }
        }
    }

    fn example(f: &Flag) -> String {
        match f.takes {
            Takes::Switch => "true".into(),
            Takes::Choice(_, names) => names()[0].into(),
            Takes::Direction => "send".into(),
            Takes::Each(_) => "load=stream".into(),
            Takes::Value(_) => match f.field {
                Field::Cc => "cubic".into(),
                Field::ReqWrites | Field::RespWrites => "rest".into(),
                Field::Timeout | Field::Duration | Field::Warmup | Field::Delay => "100ms".into(),
                Field::Loss => "1%".into(),
                Field::LinkRate => "1G".into(),
                Field::Queue => "64K".into(),
                Field::ClientCpus | Field::ServerCpus | Field::PathCpus => "0".into(),
                Field::Mtu => "1500".into(),
                Field::Qdisc => "pfifo".into(),
                Field::Sndbuf | Field::Rcvbuf => "auto".into(),
                Field::ReqSize | Field::RespSize | Field::MsgSize => "64".into(),
                Field::PacingRate => "1G".into(),
                Field::Mss => "1000".into(),
                // At most a 1-byte transaction's message.
                Field::Sock(SockOpt::RcvLowat) => "1".into(),
                Field::Sock(o) => o.desc().example.into(),
                Field::Threads => "1".into(),
                _ => "2".into(),
            },
        }
    }
}
