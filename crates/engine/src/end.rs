//! One end of a test, the same sequence on the client and in `plumb serve`:
//! once its flows are up, the receive mode is checked and the options the
//! kernel granted are read back ([`ReadyEnd`]); the engine starts with
//! everything it needs from the other end given up front (the cookie's tag,
//! the peer); the measurement window opens, ticks and closes
//! ([`RunningEnd`]); and stopping adds the zero-copy accounting and the
//! flows that failed inside the window to the end's figures. How the two
//! ends agree on the moments (the control protocol) is not this module's.

use crate::meter::{Meter, SampleSink};
use crate::probe::{self, Probe};
use crate::profile::{PeerEnd, Profiler};
use crate::setup::{check_io, check_rx_mode, read_back_flows, read_back_udp, SetupError};
use crate::{Engine, EngineConfig, EngineError, Link, Workload};
use plumb_samples::{EndResult, OptionRecord, ProfileAsk, Role};
use plumb_spec::Spec;
use std::net::{TcpListener, TcpStream, UdpSocket};

/// The sockets an end set up before any traffic.
#[derive(Default)]
pub struct Sockets {
    /// The TCP flows, connected or accepted, each announced by the cookie;
    /// for crr and UDP the one flow that carried it.
    pub flows: Vec<TcpStream>,
    /// UDP: the client's sockets, one per flow, or the server's, one per
    /// worker.
    pub udp: Vec<UdpSocket>,
    /// A crr server's data listener: each transaction is a new connection.
    pub listener: Option<TcpListener>,
}

/// An end whose flows are up and whose options are read back, not started.
pub struct ReadyEnd {
    config: EngineConfig,
    sockets: Sockets,
    options: Vec<OptionRecord>,
}

impl ReadyEnd {
    /// Checks what can only be checked on the flows themselves and records
    /// what the kernel granted.
    pub fn new(
        spec: &Spec,
        role: Role,
        link: &Link,
        sockets: Sockets,
    ) -> Result<ReadyEnd, SetupError> {
        check_rx_mode(&sockets.flows, spec.rx)?;
        // The client checked before it started anything (`plumb_run::run`);
        // a server checks its own kernel, which may be another.
        if role == Role::Server {
            check_io(spec)?;
        }
        let options = match sockets.udp.first() {
            Some(u) => read_back_udp(u, &spec.socket),
            None => read_back_flows(&sockets.flows, &spec.socket),
        };
        Ok(ReadyEnd {
            config: EngineConfig::for_spec(spec, role, link),
            sockets,
            options,
        })
    }

    /// Starts the traffic, to be measured by every default probe.
    pub fn start(self) -> Result<RunningEnd, EngineError> {
        self.start_with(probe::defaults)
    }

    /// Starts the traffic of a part beside the run's main one, measured by
    /// the probes of its own flows alone.
    pub fn start_part(self) -> Result<RunningEnd, EngineError> {
        self.start_with(probe::of_flows)
    }

    fn start_with(
        self,
        probes: fn(&Engine) -> Vec<Box<dyn Probe>>,
    ) -> Result<RunningEnd, EngineError> {
        let Sockets {
            flows,
            udp,
            listener,
        } = self.sockets;
        let started = std::time::Instant::now();
        let engine = if udp.is_empty() {
            Engine::start_with_listener(self.config, flows, listener)?
        } else {
            Engine::start_udp(self.config, flows, udp)?
        };
        let probes = probes(&engine);
        Ok(RunningEnd {
            started,
            engine,
            options: self.options,
            meter: None,
            probes,
        })
    }
}

/// An end whose traffic runs.
pub struct RunningEnd {
    /// When its traffic started.
    started: std::time::Instant,
    engine: Engine,
    options: Vec<OptionRecord>,
    meter: Option<Meter>,
    /// What the window reads at its edges beside the flows' counts.
    probes: Vec<Box<dyn Probe>>,
}

/// What stopping an end found beside its figures.
pub struct Stopped {
    /// Connections or datagrams from elsewhere that the end ignored.
    pub strays: u64,
}

impl RunningEnd {
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Profiles this end over the measurement window: the samplers open
    /// now, before the window, so that opening them costs it nothing. With
    /// `peer`, the same samples make the other end's profile.
    pub fn profile(&mut self, ask: ProfileAsk, peer: Option<PeerEnd>) -> Result<(), String> {
        let p = Profiler::open(ask, self.engine.config().cpus.clone(), peer)?;
        self.probes.push(probe::profiler(p));
        Ok(())
    }

    /// Samples the path's bottleneck each way over the window, from
    /// `source`: the router's qdiscs (`--qdisc`) or a path's own queues.
    pub fn watch_path(&mut self, source: probe::PathSource, ways: Vec<probe::PathWay>) {
        self.probes.push(probe::path_queues(source, ways));
    }

    /// Reads every ACK of this end's flows over the window
    /// (`--tcp-probe`): the event opens now, before the window.
    pub fn sample_acks(&mut self) -> Result<(), String> {
        let opened = crate::acks::open(&self.engine)?;
        self.probes.push(crate::acks::probe(opened));
        Ok(())
    }

    /// Opens the measurement window now; what the warm-up timed is dropped.
    pub fn open_window(&mut self) {
        let probes = std::mem::take(&mut self.probes);
        self.meter = Some(Meter::open(&self.engine, probes));
    }

    /// Opens the measurement window at the moment the traffic started: for
    /// a part that starts inside the run's window, all of whose traffic is
    /// inside its own.
    pub fn open_window_from_start(&mut self) {
        let probes = std::mem::take(&mut self.probes);
        self.meter = Some(Meter::open_from_start(&self.engine, probes, self.started));
    }

    /// Closes the current interval of the window and starts the next.
    pub fn tick(&mut self, sink: &mut dyn SampleSink) {
        if let Some(m) = self.meter.as_mut() {
            m.tick(&self.engine, sink);
        }
    }

    /// From now on a failing flow is the peer tearing down, not a problem;
    /// the probes read what that teardown would change.
    pub fn mark_window_closed(&mut self) {
        self.engine.mark_window_closed();
        if let Some(m) = self.meter.as_mut() {
            m.closing(&self.engine);
        }
    }

    /// Closes the window now and returns what this end measured; a window
    /// that never opened (a stop during the warm-up) opens and closes at once.
    pub fn close_window(&mut self, sink: &mut dyn SampleSink) -> EndResult {
        let meter = match self.meter.take() {
            Some(m) => m,
            None => Meter::open(&self.engine, std::mem::take(&mut self.probes)),
        };
        meter.close(&self.engine, sink, std::mem::take(&mut self.options))
    }

    /// Stops the traffic and adds to `end` the zero-copy accounting, the
    /// datagrams a udp-stream sender marked, the connections a crr server
    /// refused, and the flows that failed inside the window.
    pub fn stop(mut self, end: &mut EndResult) -> Result<Stopped, EngineError> {
        self.halt(end)
    }

    /// As [`RunningEnd::stop`], but the flows stay open until the end is
    /// dropped ([`Engine::halt`]): for a part of a run that stops before
    /// the run's window closes.
    pub fn halt(&mut self, end: &mut EndResult) -> Result<Stopped, EngineError> {
        let finals = self.engine.final_counts();
        let strays = self.engine.strays();
        let role = self.engine.config().role;
        let crr = matches!(self.engine.config().workload, Workload::Crr(_));
        let errors = self.engine.halt()?;
        finals.fill(end);
        if crr && role == Role::Server && strays > 0 {
            end.warnings.push(format!(
                "the server closed {strays} connections that came from another address than the client's"
            ));
        }
        let who = match role {
            Role::Client => "client",
            Role::Server => "server",
        };
        end.warnings.extend(
            errors
                .into_iter()
                .filter(|e| !e.after_window)
                .map(|e| format!("{who} flow {}: {}", e.flow, e.error)),
        );
        Ok(Stopped { strays })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meter::NoSink;
    use plumb_sys::Cookie;
    use std::net::SocketAddr;

    /// Both ends of `spec` over loopback, started.
    fn ends(spec: &Spec) -> (RunningEnd, RunningEnd) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let clients: Vec<TcpStream> = (0..spec.flows)
            .map(|_| TcpStream::connect(addr).unwrap())
            .collect();
        let servers: Vec<TcpStream> = (0..spec.flows).map(|_| l.accept().unwrap().0).collect();
        let server = start(spec, Role::Server, addr, servers);
        (start(spec, Role::Client, addr, clients), server)
    }

    /// One end of `spec` over these connected flows, started.
    fn start(spec: &Spec, role: Role, peer: SocketAddr, flows: Vec<TcpStream>) -> RunningEnd {
        for f in &flows {
            f.set_nonblocking(true).unwrap();
        }
        let link = Link {
            cookie: Cookie([7; 16]),
            peer,
            same_clock: true,
        };
        let sockets = Sockets {
            flows,
            ..Sockets::default()
        };
        ReadyEnd::new(spec, role, &link, sockets)
            .unwrap()
            .start()
            .unwrap()
    }

    #[test]
    fn the_window_times_exactly_the_transactions_it_counts() {
        for flows in [1, 4] {
            let mut spec = Spec::rr();
            spec.flows = flows;
            spec.threads = 2;
            spec.socket.nodelay = true;
            let (mut client, server) = ends(&spec);
            std::thread::sleep(std::time::Duration::from_millis(100));
            client.open_window();
            std::thread::sleep(std::time::Duration::from_millis(300));
            client.tick(&mut NoSink);
            std::thread::sleep(std::time::Duration::from_millis(200));
            client.mark_window_closed();
            let mut end = client.close_window(&mut NoSink);
            client.stop(&mut end).unwrap();
            drop(server);
            assert!(end.transactions > 100, "{}", end.transactions);
            let timed = end.latency.as_ref().map_or(0, |l| l.count);
            assert_eq!(timed, end.transactions, "flows {flows}");
            let per_flow: u64 = end.flows.iter().filter_map(|f| f.transactions).sum();
            assert_eq!(per_flow, end.transactions, "flows {flows}");
        }
    }

    #[test]
    fn a_flow_without_transactions_counts_zero_in_the_record() {
        let mut spec = Spec::rr();
        spec.flows = 2;
        spec.threads = 1;
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let clients: Vec<TcpStream> = (0..2).map(|_| TcpStream::connect(addr).unwrap()).collect();
        let mut servers: Vec<TcpStream> = (0..2).map(|_| l.accept().unwrap().0).collect();
        // Flow 1's server end is held, never answered.
        let _silent = servers.pop().unwrap();
        let mut one = spec.clone();
        one.flows = 1;
        let server = start(&one, Role::Server, addr, servers);
        let mut client = start(&spec, Role::Client, addr, clients);
        client.open_window();
        std::thread::sleep(std::time::Duration::from_millis(200));
        let mut end = client.close_window(&mut NoSink);
        client.stop(&mut end).unwrap();
        drop(server);
        let json = serde_json::to_value(&end).unwrap();
        let flows = json["flows"].as_array().unwrap();
        assert!(
            flows[0]["transactions"].as_u64().unwrap() > 0,
            "{}",
            flows[0]
        );
        assert_eq!(flows[1]["transactions"], 0, "{}", flows[1]);
        // A stream flow has no transactions at all, not zero of them.
        assert!(
            serde_json::to_value(plumb_samples::FlowTotals::default()).unwrap()["transactions"]
                .is_null()
        );
    }
}
