use super::far::{family_of, far_peer, server_end, start_far_end, ServerEnd};
use crate::args::{CommonArgs, RunCommand, ServerArgs};
use crate::Failure;
use plumb_engine::SampleSink;
use plumb_run::RunOptions;
use plumb_samples::{format_bits_per_sec, IntervalSample, Peer, Role, ServerStart};
use plumb_spec::{Direction, Family, Field, Names, Spec};
use std::io::IsTerminal;

/// Per-second lines on stderr while a run goes, when a person is watching:
/// the main part's, and each other part's named.
struct Live<W> {
    direction: Direction,
    parts: Vec<(String, Direction)>,
    out: W,
}

impl<W: std::io::Write> Live<W> {
    fn of(spec: &Spec, out: W) -> Live<W> {
        Live {
            direction: spec.direction,
            parts: (spec.parts.iter())
                .map(|p| (p.name.clone(), p.spec.direction))
                .collect(),
            out,
        }
    }

    fn show(&mut self, line: Option<String>) {
        if let Some(line) = line {
            let _ = writeln!(self.out, "{line}");
        }
    }
}

impl<W: std::io::Write> SampleSink for Live<W> {
    fn interval(&mut self, role: Role, s: &IntervalSample) {
        self.show(live_line(self.direction, role, s, ""));
    }

    fn part_interval(&mut self, part: &str, role: Role, s: &IntervalSample) {
        let line = (self.parts.iter().find(|(name, _)| name == part))
            .and_then(|(_, direction)| live_line(*direction, role, s, &format!("part {part}  ")));
        self.show(line);
    }
}

/// One end's second as the live lines show it, after `who` (a part's
/// name, or nothing for the main part): its transactions, or what it
/// measures of the transfer, the rate it sent where it sends and the rate
/// it received where it receives (a sender's received is nothing it
/// measured).
fn live_line(direction: Direction, role: Role, s: &IntervalSample, who: &str) -> Option<String> {
    if s.dt_s <= 0.0 {
        return None;
    }
    if let Some(p99) = s.p99_us {
        return Some(format!(
            "  {:>6.2} s   {who}{:>10.0} tx/s   p99 {:>8.1} us",
            s.t_s,
            s.transactions as f64 / s.dt_s,
            p99
        ));
    }
    if s.transactions > 0 {
        // The server end of request/response: its rate is the client's.
        return None;
    }
    let rate = |bytes: u64| format_bits_per_sec(bytes as f64 * 8.0 / s.dt_s);
    let (sends, receives) = direction.activity(role == Role::Server);
    let mut line = format!("  {:>6.2} s   {who}{role:<6}", s.t_s);
    if sends {
        line += &format!("   sent {:>14}", rate(s.bytes_sent));
    }
    if receives {
        line += &format!("   received {:>14}", rate(s.bytes_received));
    }
    Some(line)
}

/// The spec a `plumb run` command line asks for, and its common arguments.
fn spec_of(cmd: RunCommand) -> Result<(Spec, CommonArgs), Failure> {
    let RunCommand {
        workload,
        settings,
        common,
    } = cmd;
    let spec = build_run(&run_fields(&workload, settings, common.ipv6))?;
    if spec.topology.is_some() && common.far.server.is_some() {
        return Err(Failure::usage(format!(
            "{} veth runs both ends on this host; it cannot be used with --server",
            Field::Topology.flag()
        )));
    }
    Ok((spec, common))
}

/// The fields a `plumb run` command line sets, in the order
/// plumb_spec::build takes them: the workload first, since it picks the
/// defaults the others change, then the flags as typed, and --ipv6.
pub(crate) fn run_fields(
    workload: &impl std::fmt::Display,
    settings: Vec<(Field, String)>,
    ipv6: bool,
) -> Vec<(Field, String)> {
    let mut fields = vec![(Field::Workload, workload.to_string())];
    fields.extend(settings);
    if ipv6 {
        fields.push((Field::Family, Family::V6.to_string()));
    }
    fields
}

/// The spec of [`run_fields`], an error naming the flag at fault.
pub(crate) fn build_run(fields: &[(Field, String)]) -> Result<Spec, Failure> {
    let pairs: Vec<(Field, &str)> = fields.iter().map(|(f, v)| (*f, v.as_str())).collect();
    plumb_spec::build(&pairs, Names::Flags)
        .map_err(|e| Failure::usage(format!("{}: {}", e.field.flag(), e.message)))
}

/// What every run of one command shares, built once from its flags and
/// handed to each run: the server end and the key of its sessions, how the
/// records name a server started over ssh, and what each run asks of the
/// host.
pub(crate) struct RunContext {
    /// The server end, unless the embedded one.
    pub server: Option<std::net::SocketAddr>,
    /// The key of the sessions: a `--psk-file`'s, or the one handed to a
    /// server started over ssh.
    pub psk: Option<Vec<u8>>,
    /// The server of `--server ssh://`, as the records name it.
    pub far: Option<Peer>,
    /// --exclusive.
    pub exclusive: bool,
    /// --profile, --tcp-probe.
    pub observe: plumb_samples::Observe,
    /// --server-knob, for a server end other than this host's.
    pub server_knobs: Vec<plumb_run::knob::Setting>,
    /// --knob KNOB@client, for the client's namespace under --topology veth.
    pub client_knobs: Vec<plumb_run::knob::Setting>,
    /// --kernel: the guest every run is made in.
    pub guest: Option<Guest>,
}

/// A kernel the runs of a command boot and run in (`--kernel`).
pub(crate) struct Guest {
    pub kernel: std::path::PathBuf,
    pub vm: plumb_run::vm::VmOptions,
    /// The run's knobs, set inside the guest (the server's too, but for
    /// those of a veth topology's server namespace, which the run's
    /// options carry).
    pub knobs: Vec<String>,
    /// The runs' label, where given; else the guest's kernel release.
    pub label: Option<String>,
}

impl RunContext {
    /// The options of one run under `label`.
    pub(crate) fn options(&self, label: &str) -> Result<RunOptions, Failure> {
        Ok(RunOptions {
            server: self.server,
            label: label.to_string(),
            interrupted: crate::interrupt_flag(),
            server_exe: std::env::current_exe()
                .map_err(|e| Failure::usage(format!("cannot find the plumb executable: {e}")))?,
            psk: self.psk.clone(),
            exclusive: self.exclusive,
            server_knobs: self.server_knobs.clone(),
            client_knobs: self.client_knobs.clone(),
            observe: self.observe,
        })
    }

    /// The server end a record of `spec` names: the one started over ssh, a
    /// manual one (its host as the user named it, the address it was
    /// reached at, and the build its figures came with), or the embedded
    /// one (this same executable).
    pub(crate) fn peer(&self, spec: &Spec, build: Option<String>) -> Peer {
        if let Some(p) = &self.far {
            return p.clone();
        }
        match self.server {
            Some(a) => Peer {
                started: ServerStart::Manual,
                server: spec.server_host.clone(),
                address: Some(a.to_string()),
                build,
                build_id: None,
                same_host: false,
            },
            None => embedded_peer(spec),
        }
    }
}

/// A guest's failure: interrupted (130), or one line to say (2).
pub(crate) fn guest_failure(e: plumb_run::vm::VmError) -> Failure {
    match e.fault {
        plumb_run::vm::Fault::Interrupted => Failure {
            code: crate::exit::INTERRUPTED,
            message: e.message,
        },
        _ => Failure::usage(e.message),
    }
}

/// The embedded server end, as a record of `spec` names it: this same
/// executable, on the same host unless a topology of its own or a guest of
/// its own (`--vm-link`) set it apart.
pub(crate) fn embedded_peer(spec: &Spec) -> Peer {
    let own_guest = spec.machine.as_ref().is_some_and(|m| m.link.is_some());
    Peer {
        started: ServerStart::Embedded,
        server: None,
        address: None,
        build: Some(env!("PLUMB_BUILD").to_string()),
        build_id: None,
        same_host: spec.topology.is_none() && !own_guest,
    }
}

/// One process of a flow group: its spec comes on stdin, its iteration goes
/// to stdout as JSON (see `plumb_run::group`).
pub fn flow_group_member() -> Result<i32, Failure> {
    let opts = RunOptions {
        server: None,
        label: String::new(),
        interrupted: crate::interrupt_flag(),
        server_exe: std::env::current_exe()
            .map_err(|e| Failure::usage(format!("cannot find the plumb executable: {e}")))?,
        psk: None,
        exclusive: false,
        server_knobs: Vec::new(),
        client_knobs: Vec::new(),
        observe: Default::default(),
    };
    let it = plumb_run::group::member(&opts).map_err(|e| Failure::usage(e.to_string()))?;
    crate::outln!(
        "{}",
        serde_json::to_string(&it).map_err(|e| Failure::usage(e.to_string()))?
    );
    Ok(0)
}

/// Runs `spec` under `label` in the command's context, prints progress on
/// a terminal, captures the environment and keeps the record in `store`
/// when one is given (only a complete run: an interrupted one is printed,
/// never stored).
pub(crate) fn run_and_store(
    spec: &Spec,
    label: &str,
    ctx: &RunContext,
    repeat: &plumb_run::Repeat,
    store: Option<&mut plumb_store::Store>,
    json: bool,
) -> Result<(plumb_samples::RunRecord, plumb_samples::Environment), Failure> {
    let opts = ctx.options(label)?;
    let live = !json && std::io::stderr().is_terminal();
    let mut sink: Box<dyn SampleSink> = if live {
        Box::new(Live::of(spec, std::io::stderr()))
    } else {
        Box::new(plumb_engine::meter::NoSink)
    };
    let mut progress = |it: &plumb_samples::Iteration, c: &plumb_samples::Confidence| {
        if live && repeat.max > 1 {
            let line = super::guest::iteration_line(
                spec,
                it.index,
                it.derived.metric(),
                c.mean,
                c.relative_half_width,
            );
            eprintln!("{line}");
        }
    };
    let mut record = match &ctx.guest {
        Some(g) => plumb_run::vm::run(
            spec,
            &opts,
            repeat,
            &g.knobs,
            &g.kernel,
            g.label.clone(),
            &g.vm,
        )
        .map_err(guest_failure)?,
        None => plumb_run::run(spec, &opts, repeat, sink.as_mut(), &mut progress)
            .map_err(|e| Failure::run(&e))?,
    };
    record.build = Some(env!("PLUMB_BUILD").to_string());
    let server_build = record
        .iterations
        .iter()
        .find_map(|i| i.server.build.clone());
    record.peer = Some(ctx.peer(&record.spec, server_build));
    for w in record.iterations.iter().flat_map(|i| &i.client.warnings) {
        if w.starts_with("server lost") {
            eprintln!("plumb: {w}; the partial results are marked incomplete");
        } else if w.starts_with("the embedded server said") {
            eprintln!("plumb: {w}");
        }
    }
    for line in &record.server_knobs {
        eprintln!("server {line}");
    }
    for it in &record.iterations {
        if let Some(w) = plumb_run::derive::starved(spec, it) {
            eprintln!("plumb: warning: iteration {}: {w}", it.index + 1);
        }
    }
    let env = record.environment.take().unwrap_or_default();
    if let Some(line) = env.unknown_line() {
        eprintln!("environment: not captured: {line}");
    }
    if let Some(store) = store {
        if record.complete {
            let id = store
                .insert_run(&record, Some(&env))
                .map_err(|e| Failure::store(format!("the run was measured but not stored: {e}")))?;
            eprintln!("stored as run {} (label {})", id.0, record.label);
        } else {
            eprintln!("not stored: the run is incomplete");
        }
    }
    Ok((record, env))
}

/// The server end of a command that runs many specs (`sweep`, `check`),
/// reached: its address (None for the embedded server), the host the specs
/// name, and the server started over ssh, which ends when this is dropped.
pub(crate) struct Reached {
    pub addr: Option<std::net::SocketAddr>,
    host: Option<String>,
    psk: Option<Vec<u8>>,
    far: Option<Peer>,
    _far: Option<plumb_run::ssh::SshServer>,
}

impl Reached {
    /// The context of runs against this server end, which ask `exclusive`
    /// of the host and `observe` of the ends (and set no knob of the
    /// server's).
    pub fn context(&self, exclusive: bool, observe: plumb_samples::Observe) -> RunContext {
        RunContext {
            server: self.addr,
            psk: self.psk.clone(),
            far: self.far.clone(),
            exclusive,
            observe,
            server_knobs: Vec::new(),
            client_knobs: Vec::new(),
            guest: None,
        }
    }

    /// Points `spec` at this server end, as `plumb run --server` does.
    pub fn aim(&self, spec: &mut Spec) {
        if let (Some(addr), Some(host)) = (self.addr, &self.host) {
            spec.server_host = Some(host.clone());
            spec.family = family_of(&addr);
        }
    }
}

/// Reads `--server` and its companions and starts the server over ssh when
/// it names one; `family` is the one the specs prefer.
pub(crate) fn reach(f: &ServerArgs, family: Family) -> Result<Reached, Failure> {
    Ok(match server_end(f, None)? {
        ServerEnd::Embedded => Reached {
            addr: None,
            host: None,
            psk: None,
            far: None,
            _far: None,
        },
        ServerEnd::Manual(addr, host, psk) => Reached {
            addr: Some(addr),
            host: Some(host),
            psk,
            far: None,
            _far: None,
        },
        ServerEnd::Ssh(t) => {
            let far = start_far_end(&t, f, family)?;
            Reached {
                addr: Some(far.addr),
                host: Some(t.host.clone()),
                psk: Some(far.key.clone()),
                far: Some(far_peer(&t, &far)),
                _far: Some(far),
            }
        }
    })
}

pub fn exec(cmd: RunCommand) -> Result<i32, Failure> {
    let (mut spec, a) = spec_of(cmd)?;
    let observe = a.profile.observe().map_err(Failure::usage)?;
    let asked = match (a.ipv4, a.ipv6) {
        (true, _) => Some(Family::V4),
        (_, true) => Some(Family::V6),
        _ => None,
    };
    let end = server_end(&a.far, asked)?;
    end.aim(&mut spec);
    let (mut server, psk) = match &end {
        ServerEnd::Manual(addr, _, psk) => (Some(*addr), psk.clone()),
        ServerEnd::Ssh(_) | ServerEnd::Embedded => (None, None),
    };
    let ssh = match end {
        ServerEnd::Ssh(t) => Some(t),
        _ => None,
    };
    let label = crate::args::label_or_kernel(a.label.as_deref());
    let repeat = a.repeat.repeat();
    let vm = a.vm.options().map_err(Failure::usage)?;
    let kernels = a.vm.kernels();
    if kernels.len() > 1 {
        return Err(Failure::usage(
            "--kernel: run boots one kernel; sweep runs its points under several",
        ));
    }
    let guest = vm.zip(kernels.into_iter().next());
    if let (Some((vm, _)), Some(_)) = (&guest, &spec.topology) {
        if vm.link {
            return Err(Failure::usage(format!(
                "--vm-link joins two guests by their own link; it cannot be used with {} veth",
                Field::Topology.flag()
            )));
        }
    }
    if guest.is_some() && (server.is_some() || ssh.is_some()) {
        return Err(Failure::usage(
            "--kernel runs both ends inside the guest; it cannot be used with --server",
        ));
    }
    if a.dry_run {
        let planned = vec![super::dry::Planned { point: None, spec }];
        if let Some((vm, (kernel_label, kernel))) = &guest {
            let label = kernel_label.clone().or_else(|| a.label.clone());
            return super::dry::show_in_guest(planned, kernel, label, vm, &repeat, a.json);
        }
        return super::dry::show(planned, &a.far, &label, &repeat, a.json);
    }
    // Ctrl-C from here on ends the run and reports it: the handler goes in
    // before any knob does, or a Ctrl-C just after the knobs went in would
    // kill plumb with them still set (restored only at its next start).
    let _ = crate::interrupt_flag();
    let mut knobs = a.knobs.clone();
    let apart = server.is_some() || ssh.is_some() || spec.topology.is_some();
    let server_knobs = plumb_run::knob::server_knobs(&mut knobs, a.server_knobs.clone(), apart);
    // Under --kernel every knob is the guest's: the host is left as it is
    // (a veth topology's server knobs go to the server's namespace there).
    let guest = guest.map(|(vm, (label, kernel))| Guest {
        kernel,
        label: label.or_else(|| a.label.clone()),
        vm,
        knobs: knobs.drain(..).map(|k| k.to_string()).collect(),
    });
    // Set in the client's namespace once the run has made it.
    let client_knobs = plumb_run::knob::take_client(&mut knobs);
    // Restored when this goes out of scope: after the run, on its error, or
    // after an interrupted run has been reported.
    let _knobs = super::knob::apply(&knobs)?;
    // Opened before the run so a bad --db fails in a second, not after it.
    let mut store = if a.no_store {
        None
    } else {
        Some(super::db::open(&a.db)?)
    };
    // Ends the far end's server when this returns, however it returns.
    let mut far = match &ssh {
        Some(t) => Some(start_far_end(t, &a.far, spec.family)?),
        None => None,
    };
    if let Some(f) = &far {
        server = Some(f.addr);
        spec.family = family_of(&f.addr);
    }
    let ctx = RunContext {
        server,
        psk: far.as_ref().map(|f| f.key.clone()).or(psk),
        far: ssh.as_ref().zip(far.as_ref()).map(|(t, f)| far_peer(t, f)),
        exclusive: a.exclusive,
        observe,
        server_knobs,
        client_knobs,
        guest,
    };
    let (record, _env) = match run_and_store(&spec, &label, &ctx, &repeat, store.as_mut(), a.json) {
        Ok(r) => r,
        // A dropped ssh connection is the reason, not what it broke.
        Err(e) => {
            return Err(far
                .as_mut()
                .and_then(|f| f.gone())
                .map_or(e, Failure::usage))
        }
    };
    if !record.complete {
        // A server lost mid-run: when ssh went with it, ssh says why.
        if let Some(why) = far.as_mut().and_then(|f| f.gone()) {
            eprintln!("plumb: {why}");
        }
    }
    if a.json {
        let text = serde_json::to_string_pretty(&record)
            .map_err(|e| Failure::usage(format!("cannot encode the record: {e}")))?;
        crate::outln!("{text}");
    } else {
        crate::out!("{}", plumb_report::run_summary(&record));
    }
    Ok(if record.complete {
        0
    } else {
        crate::exit::INTERRUPTED
    })
}

#[cfg(test)]
mod live_tests {
    use super::live_line;
    use plumb_samples::{IntervalSample, Role};
    use plumb_spec::Direction;

    fn second(sent: u64, received: u64) -> IntervalSample {
        IntervalSample {
            t_s: 1.0,
            dt_s: 1.0,
            bytes_sent: sent,
            bytes_received: received,
            ..Default::default()
        }
    }

    #[test]
    fn a_sending_end_shows_what_it_sent_not_a_received_nothing() {
        let line = live_line(Direction::Send, Role::Client, &second(1_250_000_000, 0), "").unwrap();
        assert!(line.contains("client") && line.contains("sent"), "{line}");
        assert!(line.contains("10.0 Gbit/s"), "{line}");
        assert!(!line.contains("received"), "{line}");
        // The client of --direction recv receives.
        let line = live_line(Direction::Recv, Role::Client, &second(0, 125_000_000), "").unwrap();
        assert!(
            line.contains("received") && !line.contains("sent"),
            "{line}"
        );
        // Both ways: both.
        let line = live_line(Direction::Both, Role::Client, &second(1000, 1000), "").unwrap();
        assert!(line.contains("sent") && line.contains("received"), "{line}");
        // A sender that sent nothing in a second says so.
        let line = live_line(Direction::Send, Role::Client, &second(0, 0), "").unwrap();
        assert!(line.contains("sent") && line.contains(" 0 bit/s"), "{line}");
    }

    #[test]
    fn a_parts_second_is_named_and_placed_on_the_runs_window() {
        use plumb_engine::meter::PartSink;
        use plumb_engine::SampleSink;
        let mut live = super::Live {
            direction: Direction::Send,
            parts: vec![("load".to_string(), Direction::Recv)],
            out: Vec::new(),
        };
        live.interval(Role::Client, &second(125_000_000, 0));
        for part in ["load", "absent"] {
            let mut sink = PartSink {
                part,
                offset_s: 2.0,
                inner: &mut live,
            };
            sink.interval(Role::Client, &second(0, 125_000_000));
        }
        let text = String::from_utf8(live.out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(lines[0].starts_with("    1.00 s   client   sent"), "{text}");
        // The part that started 2 s into the window: its first second ends
        // at 3 s, and it receives, as its own direction says.
        assert!(
            lines[1].starts_with("    3.00 s   part load  client   received"),
            "{text}"
        );
    }
}
