//! The sequence every end of a test steps through, from its flows to its
//! figures: check and read back what the kernel granted, wait for the go,
//! start the traffic (and the profile), open the window when the warm-up
//! ends, tick once a second, close it, and stop. The client (`lib.rs`),
//! `plumb serve`'s sessions (`serve.rs`) and any other place an end runs
//! step this one sequence; what differs is where the moments come from
//! (the [`Cues`]): the client keeps time and tells its peer, a server
//! hears them from it.

use plumb_engine::meter::PartSink;
use plumb_engine::{Link, ReadyEnd, RunningEnd, SampleSink, SetupError, Sockets, Stopped};
use plumb_samples::{EndResult, Observe, Role};
use plumb_spec::Spec;

/// What an end waits for at each step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cue {
    /// The warm-up is over: the window opens.
    Open,
    /// A second of the window has passed.
    Tick,
    /// The window closes (its time is up, or the test stops early).
    Close,
}

/// Where failures of the end's own steps go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Starting the traffic.
    Engine,
    /// Opening what the end was asked to read beyond the defaults (the
    /// profile's samplers, tcp:tcp_probe), by the flag that asked.
    Observe { flag: &'static str },
}

/// Where an end's moments come from, and how its failures are told.
pub trait Cues {
    type Error;

    /// Waits for the go (or gives it) once the flows are up.
    fn go(&mut self) -> Result<(), Self::Error>;
    /// The traffic runs.
    fn started(&mut self) -> Result<(), Self::Error>;
    /// Waits for the end of the warm-up: [`Cue::Open`], or [`Cue::Close`]
    /// where the test stopped before.
    fn warm_up(&mut self) -> Result<Cue, Self::Error>;
    /// Waits for the next moment of the window: [`Cue::Tick`] or
    /// [`Cue::Close`].
    fn next(&mut self) -> Result<Cue, Self::Error>;
    /// The window is closing; the counts are taken next.
    fn closing(&mut self) -> Result<(), Self::Error>;
    /// The window closed with `figures`; the traffic stops next.
    fn closed(&mut self, figures: &mut EndResult) -> Result<(), Self::Error>;
    /// The error of a flow set-up the kernel refused.
    fn refused(&mut self, e: SetupError) -> Self::Error;
    /// The error of a step of the end's own that failed.
    fn failed(&mut self, step: Step, message: String) -> Self::Error;
}

/// An end's flows and what it needs to measure over them.
pub struct EndPlan<'a> {
    pub spec: &'a Spec,
    pub role: Role,
    pub link: &'a Link,
    pub sockets: Sockets,
    pub observe: Observe,
    /// The other end, where this end's `--profile` samples for it too.
    pub profile_peer: Option<plumb_engine::profile::PeerEnd>,
    /// A run of parts: each other part's flows at this end, in the spec's
    /// order.
    pub parts: Vec<PartPlan>,
    /// The path's bottleneck, which the client samples each way: the
    /// router's qdiscs (`--qdisc`) or the delay line's own queues.
    pub path: Option<(
        plumb_engine::probe::PathSource,
        Vec<plumb_engine::probe::PathWay>,
    )>,
}

/// A part of a run beside the main one, at one end.
pub struct PartPlan {
    pub name: String,
    /// The part as it runs (`Spec::part_spec`).
    pub spec: Spec,
    /// Its traffic starts this long after the window opens; 0 starts it
    /// with the main part.
    pub start_ms: u64,
    /// Its traffic stops this long after the window opens, before it closes.
    pub stop_ms: Option<u64>,
    pub link: Link,
    pub sockets: Sockets,
}

/// What an end measured: the main part's figures (with the host's and
/// the process's), each other part's in the spec's order, and what
/// stopping the main part found.
pub struct EndFigures {
    pub main: EndResult,
    pub parts: Vec<EndResult>,
    pub stopped: Stopped,
}

/// A part at one end: waiting for its start, then running, then measured
/// (and, where it stopped before the window closed, halted).
struct PartEnd {
    name: String,
    start_ms: u64,
    stop_ms: Option<u64>,
    halted: bool,
    role: Role,
    threads: u32,
    ready: Option<ReadyEnd>,
    running: Option<RunningEnd>,
    figures: Option<EndResult>,
}

impl PartEnd {
    fn start(&mut self) -> Result<(), String> {
        if let Some(ready) = self.ready.take() {
            self.running = Some(ready.start_part().map_err(|e| e.to_string())?);
        }
        Ok(())
    }

    /// Starts it when the window has run `elapsed_ms` and it is due, and
    /// opens its window from there.
    fn start_if_due(&mut self, elapsed_ms: u64) -> Result<(), String> {
        if self.ready.is_some() && elapsed_ms >= self.start_ms {
            self.start()?;
            if let Some(r) = self.running.as_mut() {
                r.open_window_from_start();
            }
        }
        Ok(())
    }

    fn open_window(&mut self) {
        if let Some(r) = self.running.as_mut() {
            r.open_window();
        }
    }

    fn tick(&mut self, sink: &mut dyn SampleSink) {
        if let Some(r) = self.running.as_mut().filter(|_| self.figures.is_none()) {
            r.tick(&mut Self::sink(&self.name, self.start_ms, sink));
        }
    }

    /// Where its seconds go: on to `sink`, named and placed on the run's
    /// window.
    fn sink<'a>(name: &'a str, start_ms: u64, sink: &'a mut dyn SampleSink) -> PartSink<'a> {
        PartSink {
            part: name,
            offset_s: start_ms as f64 / 1000.0,
            inner: sink,
        }
    }

    /// Closes its window when the window has run `elapsed_ms` and its stop
    /// is due, and halts its traffic: the client at once, the server a
    /// second later, once its client has surely halted, so that no client
    /// waits in its window for an answer or a connection the server has
    /// stopped giving. The flows stay open to the run's end, so that
    /// neither end reads the other's halt as a failure.
    fn stop_if_due(&mut self, elapsed_ms: u64, sink: &mut dyn SampleSink) -> Result<(), String> {
        let Some(stop) = self.stop_ms else {
            return Ok(());
        };
        if elapsed_ms < stop {
            return Ok(());
        }
        self.mark_window_closed();
        self.close_window(sink);
        let halt_at = match self.role {
            Role::Client => stop,
            Role::Server => stop + 1000,
        };
        if elapsed_ms < halt_at || self.halted {
            return Ok(());
        }
        if let (Some(r), Some(figures)) = (self.running.as_mut(), self.figures.as_mut()) {
            r.halt(figures).map_err(|e| e.to_string())?;
            self.halted = true;
        }
        Ok(())
    }

    fn mark_window_closed(&mut self) {
        if let Some(r) = self.running.as_mut().filter(|_| self.figures.is_none()) {
            r.mark_window_closed();
        }
    }

    fn close_window(&mut self, sink: &mut dyn SampleSink) {
        if self.figures.is_some() {
            return;
        }
        self.figures = Some(match self.running.as_mut() {
            Some(r) => r.close_window(&mut Self::sink(&self.name, self.start_ms, sink)),
            None => EndResult {
                warnings: vec![format!(
                    "part {} never started: the window closed before its start at {} s",
                    self.name,
                    self.start_ms / 1000
                )],
                ..EndResult::empty(self.role, self.threads)
            },
        });
    }

    /// Stops its traffic: its figures, with what stopping found.
    fn stop(self) -> Result<EndResult, String> {
        let mut figures = self
            .figures
            .unwrap_or_else(|| EndResult::empty(self.role, 0));
        match self.running {
            Some(r) if !self.halted => {
                r.stop(&mut figures).map_err(|e| e.to_string())?;
            }
            _ => {}
        }
        Ok(figures)
    }
}

/// Runs one end of a test through its window: its figures, and what
/// stopping it found beside them.
pub fn run_end<C: Cues>(
    plan: EndPlan<'_>,
    cues: &mut C,
    sink: &mut dyn SampleSink,
) -> Result<EndFigures, C::Error> {
    let end = ReadyEnd::new(plan.spec, plan.role, plan.link, plan.sockets)
        .map_err(|e| cues.refused(e))?;
    let mut parts = Vec::with_capacity(plan.parts.len());
    for p in plan.parts {
        let ready =
            ReadyEnd::new(&p.spec, plan.role, &p.link, p.sockets).map_err(|e| cues.refused(e))?;
        parts.push(PartEnd {
            name: p.name,
            start_ms: p.start_ms,
            stop_ms: p.stop_ms,
            halted: false,
            role: plan.role,
            threads: p.spec.threads,
            ready: Some(ready),
            running: None,
            figures: None,
        });
    }
    cues.go()?;
    let mut end = end
        .start()
        .map_err(|e| cues.failed(Step::Engine, e.to_string()))?;
    // A part that starts with the main one runs through its warm-up too.
    for p in parts.iter_mut().filter(|p| p.start_ms == 0) {
        p.start().map_err(|e| cues.failed(Step::Engine, e))?;
    }
    if let Some(ask) = plan.observe.profile {
        end.profile(ask, plan.profile_peer)
            .map_err(|e| cues.failed(Step::Observe { flag: "--profile" }, e))?;
    }
    if let Some((source, ways)) = plan.path {
        end.watch_path(source, ways);
    }
    if plan.observe.tcp_probe {
        end.sample_acks().map_err(|e| {
            cues.failed(
                Step::Observe {
                    flag: "--tcp-probe",
                },
                e,
            )
        })?;
    }
    cues.started()?;
    // A failure from here on drops the ends, which stops their engines.
    let mut figures = window(&mut end, &mut parts, cues, sink)?;
    cues.closed(&mut figures)?;
    let stopped = end
        .stop(&mut figures)
        .map_err(|e| cues.failed(Step::Engine, e.to_string()))?;
    let mut part_figures = Vec::with_capacity(parts.len());
    for p in parts {
        part_figures.push(p.stop().map_err(|e| cues.failed(Step::Engine, e))?);
    }
    Ok(EndFigures {
        main: figures,
        parts: part_figures,
        stopped,
    })
}

/// The window of a started end, as the cues open, tick and close it; one
/// that the test stopped before it opened opens and closes at once. A part
/// that starts later starts on the window's second at or after its start,
/// and one that stops before the window closes stops on the second at or
/// after its stop.
fn window<C: Cues>(
    end: &mut RunningEnd,
    parts: &mut [PartEnd],
    cues: &mut C,
    sink: &mut dyn SampleSink,
) -> Result<EndResult, C::Error> {
    if cues.warm_up()? == Cue::Open {
        // The parts' first: their probes are few, and the main part's
        // would otherwise shorten their windows by the time they take.
        parts.iter_mut().for_each(PartEnd::open_window);
        end.open_window();
        let mut seconds = 0;
        while cues.next()? == Cue::Tick {
            end.tick(sink);
            seconds += 1;
            for p in parts.iter_mut() {
                p.tick(sink);
                p.stop_if_due(seconds * 1000, sink)
                    .and_then(|_| p.start_if_due(seconds * 1000))
                    .map_err(|e| cues.failed(Step::Engine, e))?;
            }
        }
    }
    // The peer tears its flows down as soon as it hears the window closed;
    // a reset seen from here on is that, not a failure of the run.
    end.mark_window_closed();
    parts.iter_mut().for_each(PartEnd::mark_window_closed);
    cues.closing()?;
    for p in parts.iter_mut() {
        p.close_window(sink);
    }
    Ok(end.close_window(sink))
}

#[cfg(test)]
mod tests {
    use super::*;
    use plumb_engine::meter::NoSink;
    use plumb_sys::Cookie;
    use std::net::{TcpListener, TcpStream};
    use std::sync::mpsc;
    use std::time::{Duration, Instant};

    /// Cues that follow a script of (wait, cue) and note every call, as a
    /// third kind of end would.
    struct Script {
        steps: Vec<(Duration, Cue)>,
        calls: Vec<&'static str>,
        /// The other end's go, so that both start together.
        go: Option<(mpsc::Sender<()>, mpsc::Receiver<()>)>,
    }

    impl Script {
        fn step(&mut self, call: &'static str) -> Cue {
            self.calls.push(call);
            let (wait, cue) = self.steps.remove(0);
            std::thread::sleep(wait);
            cue
        }
    }

    impl Cues for Script {
        type Error = String;
        fn go(&mut self) -> Result<(), String> {
            self.calls.push("go");
            if let Some((tx, rx)) = &self.go {
                tx.send(()).map_err(|e| e.to_string())?;
                rx.recv().map_err(|e| e.to_string())?;
            }
            Ok(())
        }
        fn started(&mut self) -> Result<(), String> {
            self.calls.push("started");
            Ok(())
        }
        fn warm_up(&mut self) -> Result<Cue, String> {
            Ok(self.step("warm_up"))
        }
        fn next(&mut self) -> Result<Cue, String> {
            Ok(self.step("next"))
        }
        fn closing(&mut self) -> Result<(), String> {
            self.calls.push("closing");
            Ok(())
        }
        fn closed(&mut self, _: &mut EndResult) -> Result<(), String> {
            self.calls.push("closed");
            Ok(())
        }
        fn refused(&mut self, e: SetupError) -> String {
            e.message
        }
        fn failed(&mut self, _: Step, message: String) -> String {
            message
        }
    }

    fn end_over(
        spec: &Spec,
        role: Role,
        flows: Vec<TcpStream>,
        peer: std::net::SocketAddr,
        cues: Script,
    ) -> (EndResult, Script) {
        let (figures, cues) = end_with_parts(spec, role, flows, Vec::new(), peer, cues);
        (figures.main, cues)
    }

    /// A part's spec as it runs, its start and stop, and its flows.
    type PartFlows = (Spec, u64, Option<u64>, Vec<TcpStream>);

    fn sockets(flows: Vec<TcpStream>) -> Sockets {
        for f in &flows {
            f.set_nonblocking(true).unwrap();
        }
        Sockets {
            flows,
            ..Sockets::default()
        }
    }

    fn end_with_parts(
        spec: &Spec,
        role: Role,
        flows: Vec<TcpStream>,
        parts: Vec<PartFlows>,
        peer: std::net::SocketAddr,
        mut cues: Script,
    ) -> (EndFigures, Script) {
        let link = Link {
            cookie: Cookie([7; 16]),
            peer,
            same_clock: true,
        };
        let plan = EndPlan {
            spec,
            role,
            link: &link,
            sockets: sockets(flows),
            observe: Observe::default(),
            profile_peer: None,
            parts: parts
                .into_iter()
                .enumerate()
                .map(|(i, (spec, start_ms, stop_ms, flows))| PartPlan {
                    name: format!("p{i}"),
                    spec,
                    start_ms,
                    stop_ms,
                    link,
                    sockets: sockets(flows),
                })
                .collect(),
            path: None,
        };
        let figures = run_end(plan, &mut cues, &mut NoSink).unwrap();
        (figures, cues)
    }

    /// `n` connected pairs over loopback: the clients' ends, the servers'.
    fn pairs(n: usize) -> (Vec<TcpStream>, Vec<TcpStream>, std::net::SocketAddr) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let clients: Vec<TcpStream> = (0..n).map(|_| TcpStream::connect(addr).unwrap()).collect();
        let servers: Vec<TcpStream> = (0..n).map(|_| l.accept().unwrap().0).collect();
        (clients, servers, addr)
    }

    #[test]
    fn parts_start_and_stop_on_the_seconds_the_cues_give_and_count_only_their_own() {
        let main = Spec::defaults(plumb_spec::Workload::Rr);
        let mut bulk = Spec::defaults(plumb_spec::Workload::Stream);
        bulk.threads = 1;
        let (main_c, main_s, addr) = pairs(1);
        let (bc, bs, _) = pairs(1);
        let (lc, ls, _) = pairs(1);
        // Open, three ticked seconds, then half of one: the bulk part runs
        // from the first tick to the second, the late one would start at
        // the fourth.
        fn script(go: (mpsc::Sender<()>, mpsc::Receiver<()>)) -> Script {
            let ms = Duration::from_millis;
            Script {
                steps: vec![
                    (ms(50), Cue::Open),
                    (ms(300), Cue::Tick),
                    (ms(300), Cue::Tick),
                    (ms(300), Cue::Tick),
                    (ms(150), Cue::Close),
                ],
                calls: Vec::new(),
                go: Some(go),
            }
        }
        let (to_server, from_client) = mpsc::channel();
        let (to_client, from_server) = mpsc::channel();
        let parts = |b: Vec<TcpStream>, l: Vec<TcpStream>| -> Vec<PartFlows> {
            vec![
                (bulk.clone(), 1000, Some(2000), b),
                (bulk.clone(), 4000, None, l),
            ]
        };
        let (server_main, server_parts) = (main.clone(), parts(bs, ls));
        let server = std::thread::spawn(move || {
            let cues = script((to_client, from_client));
            end_with_parts(&server_main, Role::Server, main_s, server_parts, addr, cues).0
        });
        let cues = script((to_server, from_server));
        let (client, _) = end_with_parts(&main, Role::Client, main_c, parts(bc, lc), addr, cues);
        let server = server.join().unwrap();
        for end in [&client, &server] {
            // The main part: all four intervals of its window.
            assert_eq!(end.main.intervals.len(), 4);
            assert!(end.main.transactions > 0);
            let (b, late) = (&end.parts[0], &end.parts[1]);
            // The bulk part: one ticked second (300 ms here), alone.
            assert!((0.2..0.6).contains(&b.window_s), "{}", b.window_s);
            assert!(b.bytes_sent + b.bytes_received > 0);
            assert_eq!(b.transactions, 0);
            assert!(b.cpus.is_empty(), "the host's figures are the main part's");
            assert!(b.warnings.is_empty(), "{:?}", b.warnings);
            // The late part never started, and says so.
            assert_eq!(late.bytes_sent + late.bytes_received, 0);
            assert!(
                late.warnings[0].contains("never started"),
                "{:?}",
                late.warnings
            );
        }
        assert!(client.parts[0].bytes_sent >= server.parts[0].bytes_received / 2);
    }

    #[test]
    fn both_ends_step_one_sequence_and_the_cues_shape_the_window() {
        let mut spec = Spec::defaults(plumb_spec::Workload::Stream);
        spec.flows = 2;
        spec.threads = 1;
        let (clients, servers, addr) = pairs(2);
        // A warm-up, one tick, then the rest of the window.
        fn script(go: (mpsc::Sender<()>, mpsc::Receiver<()>)) -> Script {
            let ms = Duration::from_millis;
            Script {
                steps: vec![
                    (ms(100), Cue::Open),
                    (ms(300), Cue::Tick),
                    (ms(200), Cue::Close),
                ],
                calls: Vec::new(),
                go: Some(go),
            }
        }
        let (to_server, from_client) = mpsc::channel();
        let (to_client, from_server) = mpsc::channel();
        let server_spec = spec.clone();
        let server = std::thread::spawn(move || {
            end_over(
                &server_spec,
                Role::Server,
                servers,
                addr,
                script((to_client, from_client)),
            )
        });
        let t = Instant::now();
        let (client, cues) = end_over(
            &spec,
            Role::Client,
            clients,
            addr,
            script((to_server, from_server)),
        );
        let (server, _) = server.join().unwrap();
        let took = t.elapsed();

        assert_eq!(
            cues.calls,
            ["go", "started", "warm_up", "next", "next", "closing", "closed"]
        );
        for end in [&client, &server] {
            // The window is what the cues made it: 300 + 200 ms, in one
            // ticked interval and the tail.
            assert!(
                (0.45..2.0).contains(&end.window_s),
                "{}: window {} s of a run of {took:?}",
                end.role,
                end.window_s
            );
            assert_eq!(end.intervals.len(), 2, "{}", end.role);
            // The probes read both edges.
            assert!(
                !end.cpus.is_empty() && end.sockstat.is_some(),
                "{}",
                end.role
            );
        }
        assert!(client.bytes_sent > 0 && server.bytes_received > 0);
        assert!(server.bytes_received <= client.bytes_sent + (64 << 20));
    }

    #[test]
    fn a_test_stopped_in_its_warm_up_closes_a_window_that_never_ticked() {
        let mut spec = Spec::defaults(plumb_spec::Workload::Stream);
        spec.flows = 1;
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let client = TcpStream::connect(addr).unwrap();
        let _server = l.accept().unwrap().0;
        let cues = Script {
            steps: vec![(Duration::from_millis(50), Cue::Close)],
            calls: Vec::new(),
            go: None,
        };
        let (end, cues) = end_over(&spec, Role::Client, vec![client], addr, cues);
        assert_eq!(
            cues.calls,
            ["go", "started", "warm_up", "closing", "closed"]
        );
        assert!(end.window_s < 0.05, "{}", end.window_s);
        assert_eq!(end.intervals.len(), 1);
    }
}
