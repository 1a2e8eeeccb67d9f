//! Connect-request-response-close (netperf TCP_CRR): every transaction is a
//! new TCP connection. The client keeps `slots` connections in progress, each
//! cycling connect, request, response, close; the server accepts on a
//! listener all its workers share (EPOLLEXCLUSIVE, so one wakes per
//! connection) and answers each connection once.
//!
//! Closing with RST (SO_LINGER 0, as neper does) leaves no TIME_WAIT behind;
//! closing with FIN is what applications do and costs a TIME_WAIT socket per
//! transaction on the side that closes first (the client), which is how a
//! machine runs out of local ports. Both outcomes are reported by name.

use crate::latency::new_histogram;
use crate::setup::{apply_before_connect, apply_connected, bind_source, plain_io};
use crate::worker::{wait, FlowError, WorkerPlan, WAKE};
use plumb_spec::SocketOpts;
use rustix::event::epoll;
use socket2::{Domain, Protocol, Socket, Type};
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::Ordering::{Acquire, Relaxed};
use std::sync::Arc;

#[derive(Debug, Clone)]
pub struct CrrPlan {
    pub client: bool,
    /// Connections kept in progress by the client (its --flows).
    pub slots: usize,
    /// The writes an outgoing message is made of, and the size of an
    /// incoming one.
    pub out_writes: Vec<usize>,
    pub in_size: usize,
    /// Close with RST (SO_LINGER 0) instead of FIN.
    pub rst: bool,
    /// Where the client connects.
    pub peer: Option<SocketAddr>,
    /// Server: the only address connections are served from (the client's,
    /// as its authenticated control connection came in). A crr connection
    /// carries no cookie, since announcing each one would add a message to
    /// every transaction; others are closed unread and counted as strays.
    pub accept_from: Option<IpAddr>,
    pub opts: SocketOpts,
}

/// Whether a crr server serves a connection from `from`. A loopback client
/// spreads its connections over 127.0.0.x sources, all of them this host.
fn accepts(client: Option<IpAddr>, from: IpAddr) -> bool {
    let (from, client) = match client {
        None => return true,
        Some(c) => (from.to_canonical(), c.to_canonical()),
    };
    from == client || (client.is_loopback() && from.is_loopback())
}

const LISTENER: u64 = u64::MAX - 1;

/// Why a connection could not be made, in the words a user acts on.
fn connect_error(e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(99) | Some(98) => format!(
            "{}: out of local ports (net.ipv4.ip_local_port_range, TIME_WAIT sockets); --close rst avoids TIME_WAIT",
            plain_io(e)
        ),
        Some(23) | Some(24) => format!("{}: out of file descriptors (ulimit -n)", plain_io(e)),
        _ => plain_io(e),
    }
}

struct Conn {
    stream: TcpStream,
    connecting: bool,
    part: usize,
    off: usize,
    /// Incoming bytes of the current message.
    got: usize,
    /// The outgoing message has been written completely.
    written: bool,
    armed_out: bool,
    t0: u64,
}

pub(crate) fn run(plan: WorkerPlan) -> io::Result<Vec<FlowError>> {
    let crr = plan.crr.clone().expect("a crr worker has a crr plan");
    if let Some(cpu) = plan.cpu {
        plumb_sys::affinity::pin_current_thread(cpu)?;
    }
    if crr.client {
        client(plan, crr)
    } else {
        server(plan, crr)
    }
}

fn write_out(conn: &mut Conn, writes: &[usize], buf: &[u8]) -> io::Result<(u64, bool)> {
    let mut sent = 0u64;
    while !conn.written {
        let want = writes[conn.part] - conn.off;
        match (&conn.stream).write(&buf[..want]) {
            Ok(n) => {
                sent += n as u64;
                conn.off += n;
                if conn.off == writes[conn.part] {
                    conn.off = 0;
                    conn.part += 1;
                    if conn.part == writes.len() {
                        conn.part = 0;
                        conn.written = true;
                    }
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok((sent, true)),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok((sent, false))
}

fn client(plan: WorkerPlan, crr: CrrPlan) -> io::Result<Vec<FlowError>> {
    let peer = crr.peer.expect("the client knows where to connect");
    let sources = crate::setup::sources_for(peer, crr.slots as u32, true);
    let ep = plan.epoll_with_wake()?;
    let base = plan.range.start;
    let n = plan.range.len();
    let largest = crr.out_writes.iter().copied().max().unwrap_or(1);
    let send_buf: Vec<u8> = (0..largest).map(|i| (i % 251) as u8).collect();
    let mut recv_buf = vec![0u8; crr.in_size.clamp(4096, 256 * 1024)];
    let mut conns: Vec<Option<Conn>> = (0..n).map(|_| None).collect();
    let mut local = new_histogram();
    let mut epoch_seen = plan.epoch.load(Acquire);
    let clock = plan.clock;
    let mut errors = Vec::new();
    let mut live = n;
    let mut events: Vec<epoll::Event> = Vec::with_capacity(256);

    let open = |k: usize| -> io::Result<Conn> {
        let sock = Socket::new(
            Domain::for_address(peer),
            Type::STREAM.nonblocking().cloexec(),
            Some(Protocol::TCP),
        )?;
        let _ = apply_before_connect(&sock, &crr.opts);
        bind_source(&sock, &sources, base + k)?;
        if crr.rst {
            sock.set_linger(Some(std::time::Duration::ZERO))?;
        }
        if crr.opts.nodelay {
            sock.set_tcp_nodelay(true)?;
        }
        let t0 = clock.elapsed().as_nanos() as u64;
        match sock.connect(&peer.into()) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(115) => {} // EINPROGRESS
            Err(e) => return Err(e),
        }
        let stream: TcpStream = sock.into();
        epoll::add(
            &ep,
            &stream,
            epoll::EventData::new_u64((base + k) as u64),
            epoll::EventFlags::OUT | epoll::EventFlags::IN,
        )?;
        Ok(Conn {
            stream,
            connecting: true,
            part: 0,
            off: 0,
            got: 0,
            written: false,
            armed_out: true,
            t0,
        })
    };

    let mut fail = |k: usize, e: String, conns: &mut Vec<Option<Conn>>, live: &mut usize| {
        conns[k] = None;
        *live -= 1;
        errors.push(plan.flow_error(base + k, e));
    };

    for k in 0..n {
        match open(k) {
            Ok(c) => conns[k] = Some(c),
            Err(e) => fail(k, connect_error(&e), &mut conns, &mut live),
        }
    }

    while live > 0 && !plan.stop.load(Relaxed) {
        if !wait(&ep, &mut events, None)? {
            continue;
        }
        for ev in &events {
            let id = ev.data.u64();
            if id == WAKE {
                plan.drain_wake();
                continue;
            }
            let i = id as usize;
            let k = i - base;
            let flags = ev.flags;
            let c = &plan.counters[i];
            let Some(conn) = conns[k].as_mut() else {
                continue;
            };
            if conn.connecting {
                if let Some(e) = conn.stream.take_error()? {
                    fail(k, connect_error(&e), &mut conns, &mut live);
                    continue;
                }
                if !flags.intersects(epoll::EventFlags::OUT) {
                    continue;
                }
                conn.connecting = false;
                let _ = apply_connected(&conn.stream, &crr.opts);
            }
            let mut outcome: Result<bool, String> = Ok(false);
            if !conn.written {
                match write_out(conn, &crr.out_writes, &send_buf) {
                    Ok((sent, blocked)) => {
                        c.add_sent(sent);
                        if blocked != conn.armed_out {
                            let fl = if blocked {
                                epoll::EventFlags::IN | epoll::EventFlags::OUT
                            } else {
                                epoll::EventFlags::IN
                            };
                            epoll::modify(
                                &ep,
                                &conn.stream,
                                epoll::EventData::new_u64(i as u64),
                                fl,
                            )?;
                            conn.armed_out = blocked;
                        }
                    }
                    Err(e) => outcome = Err(plain_io(&e)),
                }
            }
            if outcome.is_ok()
                && flags.intersects(
                    epoll::EventFlags::IN | epoll::EventFlags::HUP | epoll::EventFlags::ERR,
                )
            {
                loop {
                    match (&conn.stream).read(&mut recv_buf) {
                        Ok(0) => {
                            outcome = Err("the server closed before its response".into());
                            break;
                        }
                        Ok(got) => {
                            c.add_received(got as u64);
                            conn.got += got;
                            if conn.got >= crr.in_size {
                                outcome = Ok(true);
                                break;
                            }
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => {
                            outcome = Err(plain_io(&e));
                            break;
                        }
                    }
                }
            }
            match outcome {
                Ok(false) => {}
                Ok(true) => {
                    let now = clock.elapsed().as_nanos() as u64;
                    local.saturating_record(now.saturating_sub(conn.t0).max(1));
                    c.add_transaction();
                    // Dropping the stream closes it: RST with linger 0, else FIN.
                    conns[k] = None;
                    match open(k) {
                        Ok(nc) => conns[k] = Some(nc),
                        Err(e) => fail(k, connect_error(&e), &mut conns, &mut live),
                    }
                }
                Err(e) => fail(k, e, &mut conns, &mut live),
            }
        }
        plan.hand_over_latency(&mut local, &mut epoch_seen);
    }
    Ok(errors)
}

fn server(plan: WorkerPlan, crr: CrrPlan) -> io::Result<Vec<FlowError>> {
    let listener: Arc<TcpListener> = plan
        .listener
        .clone()
        .expect("the crr server has a listener");
    let ep = plan.epoll_with_wake()?;
    epoll::add(
        &ep,
        &*listener,
        epoll::EventData::new_u64(LISTENER),
        epoll::EventFlags::IN | epoll::EventFlags::EXCLUSIVE,
    )?;
    let largest = crr.out_writes.iter().copied().max().unwrap_or(1);
    let send_buf: Vec<u8> = (0..largest).map(|i| (i % 251) as u8).collect();
    let mut recv_buf = vec![0u8; crr.in_size.clamp(4096, 256 * 1024)];
    let mut conns: Vec<Option<Conn>> = Vec::new();
    let mut free: Vec<usize> = Vec::new();
    // Totals go to this worker's first counter: per-connection counters
    // would mean nothing when connections last one transaction.
    let c = &plan.counters[plan.range.start];
    let mut errors = Vec::new();
    let mut events: Vec<epoll::Event> = Vec::with_capacity(256);

    while !plan.stop.load(Relaxed) {
        if !wait(&ep, &mut events, None)? {
            continue;
        }
        for ev in &events {
            let id = ev.data.u64();
            if id == WAKE {
                plan.drain_wake();
                continue;
            }
            if id == LISTENER {
                for _ in 0..64 {
                    match listener.accept() {
                        Ok((_, from)) if !accepts(crr.accept_from, from.ip()) => {
                            // Dropped here: closed without a byte read.
                            plan.strays.fetch_add(1, Relaxed);
                        }
                        Ok((stream, _)) => {
                            stream.set_nonblocking(true)?;
                            if crr.opts.nodelay {
                                let _ = stream.set_nodelay(true);
                            }
                            let slot = free.pop().unwrap_or_else(|| {
                                conns.push(None);
                                conns.len() - 1
                            });
                            epoll::add(
                                &ep,
                                &stream,
                                epoll::EventData::new_u64(slot as u64),
                                epoll::EventFlags::IN,
                            )?;
                            conns[slot] = Some(Conn {
                                stream,
                                connecting: false,
                                part: 0,
                                off: 0,
                                got: 0,
                                written: false,
                                armed_out: false,
                                t0: 0,
                            });
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) if matches!(e.raw_os_error(), Some(23) | Some(24)) => {
                            if errors.is_empty() {
                                errors.push(FlowError {
                                    flow: plan.range.start as u32,
                                    error: connect_error(&e),
                                    after_window: plan.window_closed.load(Relaxed),
                                });
                            }
                            break;
                        }
                        // A connection reset before it was accepted.
                        Err(_) => break,
                    }
                }
                continue;
            }
            let slot = id as usize;
            let Some(conn) = conns.get_mut(slot).and_then(|c| c.as_mut()) else {
                continue;
            };
            let mut close = false;
            loop {
                match (&conn.stream).read(&mut recv_buf) {
                    Ok(0) => {
                        close = true;
                        break;
                    }
                    Ok(got) => {
                        c.add_received(got as u64);
                        conn.got += got;
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    // RST from a client closing with linger 0: the normal end.
                    Err(_) => {
                        close = true;
                        break;
                    }
                }
            }
            if !close && conn.got >= crr.in_size && !conn.written {
                match write_out(conn, &crr.out_writes, &send_buf) {
                    Ok((sent, blocked)) => {
                        c.add_sent(sent);
                        if conn.written {
                            c.add_transaction();
                        }
                        if blocked != conn.armed_out {
                            let fl = if blocked {
                                epoll::EventFlags::IN | epoll::EventFlags::OUT
                            } else {
                                epoll::EventFlags::IN
                            };
                            epoll::modify(
                                &ep,
                                &conn.stream,
                                epoll::EventData::new_u64(slot as u64),
                                fl,
                            )?;
                            conn.armed_out = blocked;
                        }
                    }
                    Err(_) => close = true,
                }
            }
            if close {
                conns[slot] = None;
                free.push(slot);
            }
        }
    }
    Ok(errors)
}

#[cfg(test)]
mod tests {
    use super::accepts;
    use crate::{Engine, EngineConfig};
    use plumb_samples::Role;
    use plumb_spec::{Close, RrSpec, Spec};
    use std::io::{Read, Write};
    use std::net::{IpAddr, TcpListener, TcpStream};
    use std::time::Duration;

    fn crr_server(accept_from: &str) -> (Engine, u16) {
        let mut spec = Spec::crr();
        spec.flows = 1;
        spec.threads = 1;
        spec.duration_ms = 1000;
        spec.warmup_ms = 0;
        spec.rr = Some(RrSpec {
            close: Some(Close::Rst),
            ..RrSpec::default()
        });
        let mut config = EngineConfig::for_spec(&spec, Role::Server);
        config.crr.as_mut().unwrap().accept_from = Some(accept_from.parse().unwrap());
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let engine = Engine::start_with_listener(config, Vec::new(), Some(listener)).unwrap();
        (engine, port)
    }

    /// One transaction: a byte out, and what came back (None: closed).
    fn transact(port: u16) -> Option<u8> {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let _ = s.write_all(&[7]);
        let mut b = [0u8; 1];
        match s.read(&mut b) {
            Ok(1) => Some(b[0]),
            Ok(_) => None,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => None,
            Err(e) => panic!("neither served nor closed: {e}"),
        }
    }

    #[test]
    fn a_crr_server_serves_only_its_clients_address() {
        let (engine, port) = crr_server("127.0.0.1");
        assert!(
            transact(port).is_some(),
            "the client's own connection is served"
        );
        assert_eq!(engine.strays(), 0);
        engine.stop().unwrap();

        // A connection from elsewhere is closed unread.
        let (engine, port) = crr_server("198.18.0.1");
        assert_eq!(transact(port), None);
        let t0 = std::time::Instant::now();
        while engine.strays() == 0 && t0.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(engine.strays(), 1);
        assert_eq!(engine.counts().transactions(), 0);
        engine.stop().unwrap();
    }

    #[test]
    fn loopback_clients_may_use_any_loopback_source() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert!(accepts(None, ip("198.18.0.9")));
        assert!(accepts(Some(ip("127.0.0.1")), ip("127.0.0.7")));
        assert!(accepts(Some(ip("::ffff:198.18.0.1")), ip("198.18.0.1")));
        assert!(!accepts(Some(ip("198.18.0.1")), ip("198.18.0.2")));
        assert!(!accepts(Some(ip("198.18.0.1")), ip("127.0.0.1")));
    }
}
