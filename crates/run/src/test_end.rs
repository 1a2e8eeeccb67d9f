//! The sequence every end of a test steps through, from its flows to its
//! figures: check and read back what the kernel granted, wait for the go,
//! start the traffic (and the profile), open the window when the warm-up
//! ends, tick once a second, close it, and stop. The client (`lib.rs`),
//! `plumb serve`'s sessions (`serve.rs`) and any other place an end runs
//! step this one sequence; what differs is where the moments come from
//! (the [`Cues`]): the client keeps time and tells its peer, a server
//! hears them from it.

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
}

/// Runs one end of a test through its window: its figures, and what
/// stopping it found beside them.
pub fn run_end<C: Cues>(
    plan: EndPlan<'_>,
    cues: &mut C,
    sink: &mut dyn SampleSink,
) -> Result<(EndResult, Stopped), C::Error> {
    let end = ReadyEnd::new(plan.spec, plan.role, plan.link, plan.sockets)
        .map_err(|e| cues.refused(e))?;
    cues.go()?;
    let mut end = end
        .start()
        .map_err(|e| cues.failed(Step::Engine, e.to_string()))?;
    if let Some(ask) = plan.observe.profile {
        end.profile(ask, plan.profile_peer)
            .map_err(|e| cues.failed(Step::Observe { flag: "--profile" }, e))?;
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
    // A failure from here on drops the end, which stops its engine.
    let mut figures = window(&mut end, cues, sink)?;
    cues.closed(&mut figures)?;
    let stopped = end
        .stop(&mut figures)
        .map_err(|e| cues.failed(Step::Engine, e.to_string()))?;
    Ok((figures, stopped))
}

/// The window of a started end, as the cues open, tick and close it; one
/// that the test stopped before it opened opens and closes at once.
fn window<C: Cues>(
    end: &mut RunningEnd,
    cues: &mut C,
    sink: &mut dyn SampleSink,
) -> Result<EndResult, C::Error> {
    if cues.warm_up()? == Cue::Open {
        end.open_window();
        while cues.next()? == Cue::Tick {
            end.tick(sink);
        }
    }
    // The peer tears its flows down as soon as it hears the window closed;
    // a reset seen from here on is that, not a failure of the run.
    end.mark_window_closed();
    cues.closing()?;
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
        mut cues: Script,
    ) -> (EndResult, Script) {
        for f in &flows {
            f.set_nonblocking(true).unwrap();
        }
        let link = Link {
            cookie: Cookie([7; 16]),
            peer,
        };
        let plan = EndPlan {
            spec,
            role,
            link: &link,
            sockets: Sockets {
                flows,
                ..Sockets::default()
            },
            observe: Observe::default(),
            profile_peer: None,
        };
        let (figures, _) = run_end(plan, &mut cues, &mut NoSink).unwrap();
        (figures, cues)
    }

    #[test]
    fn both_ends_step_one_sequence_and_the_cues_shape_the_window() {
        let mut spec = Spec::defaults(plumb_spec::Workload::Stream);
        spec.flows = 2;
        spec.threads = 1;
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let clients: Vec<TcpStream> = (0..2).map(|_| TcpStream::connect(addr).unwrap()).collect();
        let servers: Vec<TcpStream> = (0..2).map(|_| l.accept().unwrap().0).collect();
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
