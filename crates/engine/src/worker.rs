//! One worker thread: the event loop every workload runs in. It waits on
//! epoll (or, for a single socket, on the socket itself), wakes on the
//! engine's eventfd, hands each ready socket to the workload's [`Handler`]
//! and the timed latencies to the engine, until the flows end or the engine
//! stops it. The hot path takes no lock and allocates nothing: per-flow
//! counters are plain loads and stores to atomics that only this thread
//! writes, and the loop is monomorphised per workload.

use crate::flow::{FlowError, Handler, Loop, Next, Shared, WAKE};
use rustix::buffer::spare_capacity;
use rustix::event::epoll;
use std::io;
use std::os::fd::OwnedFd;
use std::sync::atomic::Ordering::Relaxed;

/// The event loop, the same for every workload.
pub(crate) fn drive<H: Handler>(sh: Shared, mut h: H) -> io::Result<Vec<FlowError>> {
    let mut lp = Loop::new(sh)?;
    h.start(&mut lp)?;
    let mut events: Vec<epoll::Event> = Vec::with_capacity(256);
    while lp.live > 0 && !lp.sh.stop.load(Relaxed) {
        let timeout_ns = h.on_timer(&mut lp)?;
        match lp.blocking {
            // The socket's own timeouts bound the wait.
            Some(id) => {
                hand_over(&mut h, &mut lp);
                dispatch(
                    &mut h,
                    &mut lp,
                    id,
                    epoll::EventFlags::IN | epoll::EventFlags::OUT,
                )?
            }
            None => {
                if !wait(lp.epoll()?, &mut events, timeout_ns)? {
                    continue;
                }
                // Before the batch: what it moves belongs after a hand-over
                // the wake-up in it asks for.
                hand_over(&mut h, &mut lp);
                for ev in &events {
                    let id = ev.data.u64();
                    if id == WAKE {
                        lp.drain_wake();
                        continue;
                    }
                    dispatch(&mut h, &mut lp, id, ev.flags)?;
                }
            }
        }
    }
    h.finish(&mut lp);
    lp.hand_over_final();
    Ok(lp.errors)
}

/// Hands the counts (and latencies) over when the engine has asked, after
/// the handler has taken in what was waiting.
#[inline(always)]
fn hand_over<H: Handler>(h: &mut H, lp: &mut Loop) {
    if let Some(epoch) = lp.owed_hand_over() {
        let settled = h.settle(lp);
        lp.hand_over(epoch, settled);
    }
}

/// One ready socket: read first (a read may end the flow or owe a write),
/// then write.
#[inline(always)]
fn dispatch<H: Handler>(
    h: &mut H,
    lp: &mut Loop,
    id: u64,
    flags: epoll::EventFlags,
) -> io::Result<()> {
    let next = if flags
        .intersects(epoll::EventFlags::IN | epoll::EventFlags::HUP | epoll::EventFlags::ERR)
    {
        h.on_readable(lp, id, flags)?
    } else {
        Next::Wait
    };
    let writable = flags.intersects(epoll::EventFlags::OUT | epoll::EventFlags::ERR);
    if next == Next::Write || (next == Next::Wait && writable) {
        h.on_writable(lp, id, flags)?;
    }
    Ok(())
}

/// Waits for events on `ep` into `events` (emptied first), for at most
/// `timeout_ns` when given; false when a signal cut the wait short.
fn wait(ep: &OwnedFd, events: &mut Vec<epoll::Event>, timeout_ns: Option<u64>) -> io::Result<bool> {
    events.clear();
    let timeout = timeout_ns.map(|ns| rustix::time::Timespec {
        tv_sec: (ns / 1_000_000_000) as i64,
        tv_nsec: (ns % 1_000_000_000) as i64,
    });
    match epoll::wait(ep, spare_capacity(events), timeout.as_ref()) {
        Ok(_) => Ok(true),
        Err(rustix::io::Errno::INTR) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::{test_flows, test_shared, FlowCounters};
    use crate::ring::ring_here;
    use crate::rr::RrPlan;
    use crate::stream::StreamPlan;
    use crate::udp::UdpPlan;
    use crate::workload::{run, WorkerPlan, Workload};
    use plumb_spec::Io;
    use std::net::{TcpListener, TcpStream};
    use std::sync::atomic::Ordering::Relaxed;
    use std::sync::Arc;

    /// What each workload's plan tells the engine, from its spec: it makes
    /// transactions where the spec says so and times them on the client
    /// alone, runs on a schedule only with a rate (or a stream's self
    /// probes) and only on the client, and a udp-stream's receiver, either
    /// end, hands its counts over.
    #[test]
    fn every_workload_tells_the_engine_what_its_spec_says() {
        use plumb_spec::{Direction, Spec, Workload as W};
        let link = crate::Link {
            cookie: plumb_sys::Cookie([0; 16]),
            peer: "127.0.0.1:1".parse().unwrap(),
            same_clock: true,
        };
        let plan = |spec: &Spec, client: bool| {
            let role = [plumb_samples::Role::Server, plumb_samples::Role::Client][client as usize];
            crate::EngineConfig::for_spec(spec, role, &link).workload
        };
        for w in [W::Stream, W::Rr, W::Crr, W::UdpStream, W::UdpRr] {
            for scheduled in [false, true] {
                let mut spec = Spec::defaults(w);
                if scheduled {
                    match spec.rr.as_mut() {
                        Some(rr) => rr.rate = Some(1000),
                        None if w == W::Stream => spec.self_probes = Some(1000),
                        None => continue,
                    }
                }
                for client in [false, true] {
                    let p = plan(&spec, client);
                    let what = format!("{w:?} client {client} scheduled {scheduled}");
                    assert_eq!(p.transactional(), spec.is_transactional(), "{what}");
                    assert_eq!(
                        p.timed(),
                        client && (scheduled || spec.is_transactional()),
                        "{what}"
                    );
                    assert_eq!(
                        p.schedule(),
                        (client && scheduled).then_some(1000.0),
                        "{what}"
                    );
                    let receives_datagrams = w == W::UdpStream && !client;
                    assert_eq!(p.hands_over(), p.timed() || receives_datagrams, "{what}");
                }
            }
        }
        let mut spec = Spec::defaults(W::UdpStream);
        spec.direction = Direction::Recv;
        assert!(plan(&spec, true).hands_over());
        assert!(!plan(&spec, false).hands_over());
    }

    fn rr_plan(client: bool) -> RrPlan {
        RrPlan {
            client,
            out_writes: vec![3, 97],
            in_size: 100,
            initial: if client { 2 } else { 0 },
            depth: 2,
            rate: None,
        }
    }

    /// Both ends of `flows` loopback flows, each end one worker running
    /// `workload(client)` for at least 300 ms and until `moved` holds for
    /// every flow's (client, server) counters (at most 20 s: on a loaded
    /// machine a worker may wait that long for a CPU), both then stopped:
    /// each end's flow failures and counters, client first.
    fn run_ends(
        flows: usize,
        timed: bool,
        io: Io,
        workload: impl Fn(bool) -> Workload,
        moved: impl Fn(&FlowCounters, &FlowCounters) -> bool,
    ) -> Vec<(Vec<FlowError>, Arc<Vec<FlowCounters>>)> {
        let (clients, servers) = test_flows(flows);
        let ends = [(clients, true), (servers, false)].map(|(socks, client)| {
            let sh = test_shared(socks, Vec::new(), flows, timed && client);
            let handles = (
                [sh.window_closed.clone(), sh.stop.clone()],
                sh.nudge.clone(),
                sh.counters.clone(),
            );
            let plan = WorkerPlan {
                shared: sh,
                workload: workload(client),
                cpu: None,
                io,
            };
            (std::thread::spawn(move || run(plan)), handles)
        });
        let start = std::time::Instant::now();
        std::thread::sleep(std::time::Duration::from_millis(300));
        let (client, server) = (&ends[0].1 .2, &ends[1].1 .2);
        while !client.iter().zip(server.iter()).all(|(c, s)| moved(c, s))
            && start.elapsed() < std::time::Duration::from_secs(20)
        {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        // Both ends close their window before either stops, as the
        // engine's ends do: an end that returns closes its flows, and the
        // other is then to take the reset that follows for the end of the
        // test, not for a failure.
        for flag in [0, 1] {
            for (_, (flags, _, _)) in &ends {
                flags[flag].store(true, Relaxed);
            }
        }
        for (worker, (_, nudge, _)) in &ends {
            nudge.nudge(worker);
        }
        ends.into_iter()
            .map(|(worker, (_, _, counters))| (worker.join().unwrap().unwrap(), counters))
            .collect()
    }

    /// What every flow is to have moved before a test's ends stop: bytes a
    /// stream's receiver read, transactions an rr client completed.
    const STREAM_MOVED: u64 = 1 << 20;
    const RR_MOVED: u64 = 10;

    /// Transactions of each flow of `flows` rr flows: the client's, the
    /// server's.
    fn run_rr(flows: usize, io: Io) -> (Vec<u64>, Vec<u64>) {
        let mut out = Vec::new();
        let workload = |client| Workload::Rr(rr_plan(client));
        let moved = |c: &FlowCounters, _: &FlowCounters| c.transactions.load(Relaxed) > RR_MOVED;
        for (errors, counters) in run_ends(flows, true, io, workload, moved) {
            // The end that stops first may close under the other.
            assert!(errors.iter().all(|e| e.after_window), "{errors:?}");
            out.push(
                counters
                    .iter()
                    .map(|c| c.transactions.load(Relaxed))
                    .collect(),
            );
        }
        let server = out.pop().unwrap();
        let client = out.pop().unwrap();
        (client, server)
    }

    /// One end of a stream of 128K messages: the sender, or the receiver.
    fn stream_end(sends: bool, zerocopy: plumb_spec::ZeroCopy) -> Workload {
        Workload::Stream(StreamPlan {
            client: sends,
            sends,
            receives: !sends,
            msg_size: 128 << 10,
            zerocopy,
            rx: plumb_spec::RxMode::Copy,
            read_size: None,
            self_probes: None,
        })
    }

    /// What each flow of `flows` stream flows wrote on the client and read
    /// on the server.
    fn run_stream(flows: usize, io: Io, zerocopy: plumb_spec::ZeroCopy) -> Vec<(u64, u64)> {
        let moved = |_: &FlowCounters, s: &FlowCounters| s.received.load(Relaxed) > STREAM_MOVED;
        let ends = run_ends(
            flows,
            false,
            io,
            |client| stream_end(client, zerocopy),
            moved,
        );
        let (sent, received) = (&ends[0].1, &ends[1].1);
        sent.iter()
            .zip(received.iter())
            .map(|(s, r)| (s.sent.load(Relaxed), r.received.load(Relaxed)))
            .collect()
    }

    #[test]
    fn one_loop_drives_stream_flows_blocking_and_multiplexed() {
        // One sending flow sleeps in its write; three wait in epoll.
        for flows in [1, 3] {
            for (sent, received) in run_stream(flows, Io::Epoll, plumb_spec::ZeroCopy::None) {
                assert!(
                    received > STREAM_MOVED,
                    "flows {flows}: read {received} of {sent}"
                );
                assert!(received <= sent, "flows {flows}: {sent} {received}");
            }
        }
    }

    #[test]
    fn a_sender_stopped_against_a_full_socket_counts_every_byte_its_peer_reads() {
        // The peer reads nothing while the sender runs, so the stop finds
        // a send cut partway: what it moved is sent all the same.
        use plumb_spec::ZeroCopy;
        let mut cases = vec![(Io::Epoll, ZeroCopy::None)];
        if ring_here() {
            // A zero-copy sender also waits, for a while, for the
            // notifications of pages the peer has not read.
            cases.extend([(Io::Uring, ZeroCopy::None), (Io::Uring, ZeroCopy::Uring)]);
        }
        for (io, zerocopy) in cases {
            let (clients, mut servers) = test_flows(1);
            let sh = test_shared(clients, Vec::new(), 1, false);
            let (stop, nudge) = (sh.stop.clone(), sh.nudge.clone());
            let (flows, counters) = (sh.flows.clone(), sh.counters.clone());
            let plan = WorkerPlan {
                shared: sh,
                workload: stream_end(true, zerocopy),
                cpu: None,
                io,
            };
            let worker = std::thread::spawn(move || run(plan));
            std::thread::sleep(std::time::Duration::from_millis(200));
            stop.store(true, Relaxed);
            let within = std::time::Duration::from_secs(5);
            let what = format!("{io:?} {zerocopy}");
            assert!(
                nudge.until(&worker, within, || worker.is_finished()),
                "{what}"
            );
            assert!(worker.join().unwrap().unwrap().is_empty(), "{what}");
            flows[0].shutdown(std::net::Shutdown::Write).unwrap();
            let mut peer = servers.pop().unwrap();
            peer.set_nonblocking(false).unwrap();
            peer.set_read_timeout(Some(within)).unwrap();
            let mut read = Vec::new();
            std::io::Read::read_to_end(&mut peer, &mut read).unwrap();
            assert!(read.len() > 128 << 10, "{what}: read {}", read.len());
            assert_eq!(read.len() as u64, counters[0].sent.load(Relaxed), "{what}");
        }
    }

    #[test]
    fn one_loop_drives_rr_flows_blocking_and_multiplexed() {
        for flows in [1, 3] {
            let (client, server) = run_rr(flows, Io::Epoll);
            for (c, s) in client.iter().zip(&server) {
                assert!(*c > RR_MOVED, "flows {flows}: {client:?}");
                // The server answered every request the client saw answered,
                // and at most the pipeline more.
                assert!(*s >= *c && *s <= *c + 2, "{client:?} {server:?}");
            }
        }
    }

    #[test]
    fn a_blocked_worker_on_a_silent_peer_hands_over_and_stops_when_nudged_without_socket_timeouts()
    {
        // An rr client whose server never answers, blocked in its read; a
        // udp-stream receiver no datagram comes to, blocked in its recv.
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (_silent, _) = l.accept().unwrap();
        client.set_nonblocking(true).unwrap();
        let rr = test_shared(vec![client], Vec::new(), 1, true);
        let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut udp = test_shared(Vec::new(), vec![sock], 1, false);
        udp.latency = Some(Arc::new(crate::latency::LatencySlot::new()));
        let receiver = UdpPlan {
            client: false,
            sends: false,
            rr: false,
            tag: 1,
            out_size: 64,
            in_size: 64,
            flows: 1,
            timeout_ns: 0,
            depth: 1,
            rate: None,
            same_clock: false,
        };
        for (sh, workload) in [
            (rr, Workload::Rr(rr_plan(true))),
            (udp, Workload::Udp(receiver)),
        ] {
            let what = format!("{workload:?}");
            let (stop, epoch, nudge) = (sh.stop.clone(), sh.epoch.clone(), sh.nudge.clone());
            let slot = sh.latency.clone().unwrap();
            let (tcp, udp) = (sh.flows.clone(), sh.udp_socks.clone());
            let plan = WorkerPlan {
                shared: sh,
                workload,
                cpu: None,
                io: Io::Epoll,
            };
            let worker = std::thread::spawn(move || run(plan));
            // Well inside the interrupter's own period: the nudge did it.
            let within = crate::flow::BOUND / 2;
            std::thread::sleep(std::time::Duration::from_millis(100));
            // The kernel arms no timer at each of its sleeps.
            let timeouts = match (tcp.first(), udp.first()) {
                (Some(t), _) => (t.read_timeout().unwrap(), t.write_timeout().unwrap()),
                (_, Some(u)) => (u.read_timeout().unwrap(), u.write_timeout().unwrap()),
                _ => unreachable!(),
            };
            assert_eq!(timeouts, (None, None), "{what}");
            assert!(!worker.is_finished(), "{what}");
            // Nothing arrives, yet when nudged it hands over and then stops.
            epoch.fetch_add(1, Relaxed);
            let handed = || crate::latency::caught_up(&slot, 1);
            assert!(nudge.until(&worker, within, handed), "{what}");
            stop.store(true, Relaxed);
            assert!(
                nudge.until(&worker, within, || worker.is_finished()),
                "{what}"
            );
            worker.join().unwrap().unwrap();
        }
    }

    /// Every receive mode on either engine counts each byte once: a copy,
    /// a discard in the kernel (MSG_TRUNC, whose bytes the ring's
    /// completion does not hold), and TCP_ZEROCOPY_RECEIVE, which has no
    /// ring operation and over lo, whose pages cannot be mapped, reads
    /// every byte the ordinary way beside the mapping.
    #[test]
    fn both_engines_receive_in_every_mode_and_count_each_byte_once() {
        use plumb_spec::RxMode;
        for rx in [RxMode::Copy, RxMode::Skip, RxMode::Zerocopy] {
            for io in [Io::Epoll, Io::Uring] {
                if io == Io::Uring && !ring_here() {
                    return;
                }
                let moved =
                    |_: &FlowCounters, s: &FlowCounters| s.received.load(Relaxed) > STREAM_MOVED;
                let workload = |client: bool| {
                    let Workload::Stream(mut plan) = stream_end(client, plumb_spec::ZeroCopy::None)
                    else {
                        unreachable!()
                    };
                    plan.rx = rx;
                    Workload::Stream(plan)
                };
                let ends = run_ends(2, false, io, workload, moved);
                for (s, r) in ends[0].1.iter().zip(ends[1].1.iter()) {
                    let (sent, received) = (s.sent.load(Relaxed), r.received.load(Relaxed));
                    let what = format!("{rx} on {io:?}: read {received} of {sent}");
                    assert!(received > STREAM_MOVED && received <= sent, "{what}");
                    let (mapped, copied) = (r.rx_mapped.load(Relaxed), r.rx_copied.load(Relaxed));
                    let want = if rx == RxMode::Zerocopy { received } else { 0 };
                    assert_eq!((mapped, copied), (0, want), "{what}");
                }
            }
        }
    }

    #[test]
    fn the_ring_drives_stream_flows_with_plain_and_zero_copy_sends() {
        if !ring_here() {
            return;
        }
        for zerocopy in [plumb_spec::ZeroCopy::None, plumb_spec::ZeroCopy::Uring] {
            for flows in [1, 3] {
                for (sent, received) in run_stream(flows, Io::Uring, zerocopy) {
                    assert!(
                        received > STREAM_MOVED,
                        "{zerocopy} flows {flows}: read {received} of {sent}"
                    );
                    assert!(
                        received <= sent,
                        "{zerocopy} flows {flows}: {sent} {received}"
                    );
                }
            }
        }
    }

    #[test]
    fn the_ring_drives_rr_flows_through_the_same_state_machine() {
        if !ring_here() {
            return;
        }
        for flows in [1, 3] {
            let (client, server) = run_rr(flows, Io::Uring);
            for (c, s) in client.iter().zip(&server) {
                assert!(*c > RR_MOVED, "flows {flows}: {client:?}");
                assert!(*s >= *c && *s <= *c + 2, "{client:?} {server:?}");
            }
        }
    }
}
