//! Two-phase socket setup: data sockets are created, given their options, and
//! connected (or accepted) before any traffic starts, each announced by the
//! test's cookie and its flow index so that a stray connection can never be
//! counted as a flow.

use plumb_samples::{OptionRecord, OptionStatus};
use plumb_spec::sockopt::Value;
use plumb_spec::{BufSize, Field, Proto, SockOpt, SocketOpts};
use plumb_sys::{plain_io, Cookie};
use socket2::{Domain, Protocol, SockRef, Socket, Type};
use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

/// Bytes a data connection opens with: 16 of cookie, 4 of flow index (BE).
pub const ANNOUNCE_LEN: usize = 20;

/// Why flows could not be set up. `flag` names the user's option when the
/// kernel refused one.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct SetupError {
    pub flag: Option<&'static str>,
    pub message: String,
}

impl SetupError {
    pub(crate) fn io(what: impl std::fmt::Display, e: io::Error) -> SetupError {
        SetupError {
            flag: None,
            message: format!("{what}: {}", plain_io(&e)),
        }
    }
    fn option(flag: &'static str, message: String) -> SetupError {
        SetupError {
            flag: Some(flag),
            message: format!("{flag}: {message}"),
        }
    }
}

/// The error of a socket option the kernel refused, named by its field:
/// `--sndbuf: the kernel refused SO_SNDBUF 8192: ...`.
fn refused(field: Field, option: String) -> impl FnOnce(io::Error) -> SetupError {
    move |e| {
        SetupError::option(
            field.flag(),
            format!("the kernel refused {option}: {}", plain_io(&e)),
        )
    }
}

/// Options that must be in place before the handshake: buffer sizes decide the
/// window scale, MSS is negotiated in the SYN.
pub(crate) fn apply_before_connect(sock: &Socket, opts: &SocketOpts) -> Result<(), SetupError> {
    if let BufSize::Bytes(n) = opts.sndbuf {
        sock.set_send_buffer_size(n as usize)
            .map_err(refused(Field::Sndbuf, format!("SO_SNDBUF {n}")))?;
    }
    if let BufSize::Bytes(n) = opts.rcvbuf {
        sock.set_recv_buffer_size(n as usize)
            .map_err(refused(Field::Rcvbuf, format!("SO_RCVBUF {n}")))?;
    }
    if let Some(mss) = opts.mss {
        sock.set_tcp_mss(mss)
            .map_err(refused(Field::Mss, format!("TCP_MAXSEG {mss}")))?;
    }
    Ok(())
}

/// Options that apply to a connected socket (and are re-applied to accepted
/// ones, which do not reliably inherit them from the listener).
pub fn apply_connected(stream: &TcpStream, opts: &SocketOpts) -> Result<(), SetupError> {
    let s = SockRef::from(stream);
    if opts.nodelay {
        s.set_tcp_nodelay(true)
            .map_err(refused(Field::Nodelay, "TCP_NODELAY".into()))?;
    }
    if opts.cork {
        s.set_tcp_cork(true)
            .map_err(refused(Field::Cork, "TCP_CORK".into()))?;
    }
    if let Some(cc) = &opts.cc {
        plumb_sys::sock::set_congestion(stream, cc).map_err(|e| {
            let avail = match plumb_sys::sock::available_congestion_controls() {
                a if a.is_empty() => "unknown".to_string(),
                a => a,
            };
            SetupError::option(
                Field::Cc.flag(),
                format!(
                    "the kernel refused congestion control '{cc}' ({}); available here: {avail}",
                    plain_io(&e)
                ),
            )
        })?;
    }
    if let Some(bps) = opts.pacing_rate_bps {
        // SO_MAX_PACING_RATE is in bytes per second.
        plumb_sys::sock::set_max_pacing_rate(stream, bps / 8)
            .map_err(refused(Field::PacingRate, "SO_MAX_PACING_RATE".into()))?;
    }
    apply_table(stream, opts, Proto::Tcp)
}

/// The options of the socket option table that `opts` sets and a socket of
/// `proto` takes: a TCP flow's once connected or accepted (with the rest of
/// [`apply_connected`]), a UDP socket's as it is made.
fn apply_table(fd: impl AsFd, opts: &SocketOpts, proto: Proto) -> Result<(), SetupError> {
    for (o, v) in opts.table.iter() {
        let d = o.desc();
        if o.taken_by(proto) {
            plumb_sys::sock::set_int_option(&fd, d.level.number(), d.name, v).map_err(refused(
                Field::Sock(o),
                match d.value {
                    Value::Switch => d.c_name.to_string(),
                    _ => format!("{} {}", d.c_name, o.show(v)),
                },
            ))?;
        }
    }
    Ok(())
}

/// Local ports one source address has towards one server port: the size of
/// net.ipv4.ip_local_port_range (which IPv6 shares).
pub fn local_port_count() -> u32 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|t| {
            let mut it = t.split_whitespace().map(|x| x.parse::<u32>().ok());
            let (lo, hi) = (it.next()??, it.next()??);
            (hi >= lo).then(|| hi - lo + 1)
        })
        .unwrap_or(28232)
}

/// Source addresses for `flows` connections to `peer`, used in turn. Every
/// connection to one server port needs its own local port, so one source
/// address runs out after the local port range. On IPv4 loopback every
/// 127.0.0.0/8 address is this host's, and flows beyond what one address
/// holds spread over 127.0.0.1, 127.0.0.2, ... Elsewhere, and when one
/// address is enough, the list is empty and the kernel picks.
///
/// `churn` is for flows that connect again and again (crr): the kernel finds
/// a free local port at each connect by probing from a hashed offset, and
/// once most of one address's range is taken the probes run through long
/// stretches of used ports (at 19900 crr flows on one address each connect
/// cost the client over ten times the CPU of the whole transaction at 10000).
/// Such flows fill at most a quarter of each source's range.
pub fn sources_for(peer: SocketAddr, flows: u32, churn: bool) -> Vec<IpAddr> {
    // Room for the connections other programs hold meanwhile.
    let range = local_port_count();
    let per_source = if churn { range / 4 } else { range * 7 / 8 }.max(1);
    match peer.ip() {
        IpAddr::V4(v4) if v4.is_loopback() && flows > per_source => {
            let k = flows.div_ceil(per_source).min(250);
            (0..k)
                .map(|j| IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1 + j as u8)))
                .collect()
        }
        _ => Vec::new(),
    }
}

/// Binds `sock` to the i-th of `sources` (port chosen by the kernel).
pub(crate) fn bind_source(sock: &Socket, sources: &[IpAddr], i: usize) -> io::Result<()> {
    if sources.is_empty() {
        return Ok(());
    }
    let ip = sources[i % sources.len()];
    if sock.r#type()? == Type::STREAM {
        plumb_sys::sock::set_bind_address_no_port(sock)?;
    }
    sock.bind(&SocketAddr::new(ip, 0).into())
}

fn new_socket(addr: &SocketAddr) -> io::Result<Socket> {
    Socket::new(
        Domain::for_address(*addr),
        Type::STREAM.cloexec(),
        Some(Protocol::TCP),
    )
}

/// Connects `count` flows to the server's data port, each announced by the
/// cookie and its index; returns them non-blocking.
pub fn connect_flows(
    addr: SocketAddr,
    count: u32,
    opts: &SocketOpts,
    cookie: &Cookie,
    timeout: Duration,
) -> Result<Vec<TcpStream>, SetupError> {
    let mut flows = Vec::with_capacity(count as usize);
    let sources = sources_for(addr, count, false);
    for i in 0..count {
        let sock = new_socket(&addr).map_err(|e| resource_error("create a data socket", i, e))?;
        apply_before_connect(&sock, opts)?;
        bind_source(&sock, &sources, i as usize)
            .map_err(|e| resource_error(format!("bind flow {i} to a loopback source"), i, e))?;
        sock.connect_timeout(&addr.into(), timeout)
            .map_err(|e| resource_error(format!("connect flow {i} to {addr}"), i, e))?;
        let stream: TcpStream = sock.into();
        apply_connected(&stream, opts)?;
        let mut hello = [0u8; ANNOUNCE_LEN];
        hello[..16].copy_from_slice(&cookie.0);
        hello[16..].copy_from_slice(&i.to_be_bytes());
        (&stream)
            .write_all(&hello)
            .map_err(|e| SetupError::io(format!("announce flow {i}"), e))?;
        stream
            .set_nonblocking(true)
            .map_err(|e| SetupError::io("set a flow non-blocking", e))?;
        flows.push(stream);
    }
    Ok(flows)
}

/// Connects one UDP socket per flow to the server's data port, with the
/// buffer sizes asked. Each gets its own local port, so the server's
/// SO_REUSEPORT group spreads the flows over its workers.
pub fn udp_client_sockets(
    addr: SocketAddr,
    count: u32,
    opts: &SocketOpts,
) -> Result<Vec<UdpSocket>, SetupError> {
    let mut socks = Vec::with_capacity(count as usize);
    let sources = sources_for(addr, count, false);
    for i in 0..count {
        let sock = udp_socket(addr, opts, |e| resource_error("create a UDP socket", i, e))?;
        bind_source(&sock, &sources, i as usize)
            .map_err(|e| resource_error(format!("bind UDP flow {i} to a loopback source"), i, e))?;
        sock.connect(&addr.into()).map_err(|e| {
            // A UDP socket that cannot bind a local port says EAGAIN.
            let e = if e.raw_os_error() == Some(11) {
                io::Error::from_raw_os_error(99)
            } else {
                e
            };
            resource_error(format!("connect UDP flow {i} to {addr}"), i, e)
        })?;
        socks.push(sock.into());
    }
    Ok(socks)
}

/// A UDP socket of `addr`'s family with the options of `opts` set;
/// `failed` says why one could not be made.
pub(crate) fn udp_socket(
    addr: SocketAddr,
    opts: &SocketOpts,
    failed: impl FnOnce(io::Error) -> SetupError,
) -> Result<Socket, SetupError> {
    let sock = Socket::new(
        Domain::for_address(addr),
        Type::DGRAM.cloexec(),
        Some(Protocol::UDP),
    )
    .map_err(failed)?;
    apply_before_connect(&sock, opts)?;
    apply_table(&sock, opts, Proto::Any)?;
    Ok(sock)
}

/// The server's UDP sockets: `count` of them bound to the same port with
/// SO_REUSEPORT, one per worker.
pub fn udp_server_sockets(
    ip: IpAddr,
    port: u16,
    count: u32,
    opts: &SocketOpts,
) -> Result<Vec<UdpSocket>, SetupError> {
    let addr = SocketAddr::new(ip, port);
    let mut socks = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let sock = udp_socket(addr, opts, |e| SetupError::io("create a UDP socket", e))?;
        // A lone socket joins no group: the kernel would hash every
        // datagram's 4-tuple to pick it from a group of one.
        if count > 1 {
            sock.set_reuse_port(true)
                .map_err(|e| SetupError::io("set SO_REUSEPORT", e))?;
        }
        sock.bind(&addr.into())
            .map_err(|e| SetupError::io(format!("cannot receive UDP on {addr}"), e))?;
        socks.push(sock.into());
    }
    Ok(socks)
}

/// One option as asked and as the kernel granted it (or why it could not
/// be read back).
fn option_record(
    field: Field,
    asked: String,
    granted: io::Result<String>,
    set: bool,
    note: Option<String>,
) -> OptionRecord {
    let (granted, status) = match granted {
        Ok(g) => (
            g,
            if set {
                OptionStatus::Applied
            } else {
                OptionStatus::Default
            },
        ),
        Err(e) => (
            format!("unreadable: {}", plain_io(&e)),
            OptionStatus::Unsupported,
        ),
    };
    OptionRecord {
        name: field.key().to_string(),
        asked,
        granted,
        status,
        note,
        at_close: None,
    }
}

/// Buffer sizes granted to a UDP socket, as [`read_back`] does for TCP.
pub fn read_back_udp(sock: &UdpSocket, opts: &SocketOpts) -> Vec<OptionRecord> {
    let s = SockRef::from(sock);
    let auto = "the kernel default (net.core.wmem_default / rmem_default)";
    [
        buffer_record(Field::Sndbuf, opts.sndbuf, s.send_buffer_size(), auto),
        buffer_record(Field::Rcvbuf, opts.rcvbuf, s.recv_buffer_size(), auto),
    ]
    .into_iter()
    .chain(table_records(sock, opts, Proto::Any))
    .collect()
}

/// A socket buffer as asked and granted; `auto` says what the kernel does
/// when no size is asked.
fn buffer_record(
    field: Field,
    asked: BufSize,
    granted: io::Result<usize>,
    auto: &str,
) -> OptionRecord {
    let set = matches!(asked, BufSize::Bytes(_));
    let note = match set {
        true => "the kernel doubles the value asked for its own bookkeeping",
        false => auto,
    };
    option_record(
        field,
        asked.to_string(),
        granted.map(|g| g.to_string()),
        set,
        Some(note.to_string()),
    )
}

fn resource_error(what: impl std::fmt::Display, made: u32, e: io::Error) -> SetupError {
    let hint = match e.raw_os_error() {
        Some(libc_emfile) if libc_emfile == 24 || libc_emfile == 23 => {
            format!(" after {made} flows: out of file descriptors (raise `ulimit -n`)")
        }
        // EADDRNOTAVAIL from connect, EADDRINUSE from a bind to port 0.
        Some(99) | Some(98) => {
            format!(" after {made} flows: out of local ports (net.ipv4.ip_local_port_range)")
        }
        _ => String::new(),
    };
    SetupError {
        flag: None,
        message: format!("cannot {what}: {}{hint}", plain_io(&e)),
    }
}

/// The server's listening socket for data connections.
pub struct DataListener {
    listener: TcpListener,
}

impl DataListener {
    /// Binds on `ip` (the address the control connection came in on) and the
    /// given port (0 = any), with the buffer sizes set before listen() so that
    /// accepted sockets inherit them and the window scale matches.
    pub fn bind(
        ip: IpAddr,
        port: u16,
        opts: &SocketOpts,
        backlog: i32,
    ) -> Result<DataListener, SetupError> {
        let addr = SocketAddr::new(ip, port);
        let sock = new_socket(&addr).map_err(|e| SetupError::io("create the data listener", e))?;
        sock.set_reuse_address(true)
            .map_err(|e| SetupError::io("set SO_REUSEADDR", e))?;
        apply_before_connect(&sock, opts)?;
        sock.bind(&addr.into())
            .map_err(|e| SetupError::io(format!("cannot listen for data on {addr}"), e))?;
        sock.listen(backlog)
            .map_err(|e| SetupError::io("listen for data", e))?;
        Ok(DataListener {
            listener: sock.into(),
        })
    }

    /// The listening socket itself, for a crr server's workers.
    pub fn into_inner(self) -> TcpListener {
        self.listener
    }

    pub fn port(&self) -> u16 {
        self.listener.local_addr().map(|a| a.port()).unwrap_or(0)
    }

    /// Accepts connections until `count` flows with the right cookie have
    /// announced themselves, ordered by flow index. Connections with a wrong
    /// cookie, a bad index or a duplicate are closed and counted.
    pub fn accept_flows(
        &self,
        count: u32,
        cookie: &Cookie,
        opts: &SocketOpts,
        deadline: Instant,
    ) -> Result<(Vec<TcpStream>, u32), SetupError> {
        self.accept_flows_while(count, cookie, opts, deadline, &mut || Ok(()))
    }

    /// [`accept_flows`](Self::accept_flows) that also gives up as soon as
    /// `go_on` says why (the client that asked for the flows went away).
    pub fn accept_flows_while(
        &self,
        count: u32,
        cookie: &Cookie,
        opts: &SocketOpts,
        deadline: Instant,
        go_on: &mut dyn FnMut() -> Result<(), String>,
    ) -> Result<(Vec<TcpStream>, u32), SetupError> {
        let mut slots: Vec<Option<TcpStream>> = (0..count).map(|_| None).collect();
        let mut got = 0u32;
        let mut rejected = 0u32;
        self.listener
            .set_nonblocking(true)
            .map_err(|e| SetupError::io("set the data listener non-blocking", e))?;
        while got < count {
            let now = Instant::now();
            if now >= deadline {
                return Err(SetupError {
                    flag: None,
                    message: format!("only {got} of {count} flows connected before the deadline"),
                });
            }
            let stream = match self.listener.accept() {
                Ok((s, _)) => s,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    go_on().map_err(|message| SetupError {
                        flag: None,
                        message,
                    })?;
                    std::thread::sleep(Duration::from_millis(1));
                    continue;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(resource_error("accept a data connection", got, e)),
            };
            let left = deadline
                .saturating_duration_since(Instant::now())
                .max(Duration::from_millis(10));
            match read_announce(&stream, left.min(Duration::from_secs(5))) {
                Some((c, idx)) if c == *cookie && idx < count && slots[idx as usize].is_none() => {
                    apply_connected(&stream, opts)?;
                    stream
                        .set_nonblocking(true)
                        .map_err(|e| SetupError::io("set a flow non-blocking", e))?;
                    slots[idx as usize] = Some(stream);
                    got += 1;
                }
                _ => rejected += 1,
            }
        }
        Ok((
            slots
                .into_iter()
                .map(|s| s.expect("every slot filled"))
                .collect(),
            rejected,
        ))
    }
}

fn read_announce(stream: &TcpStream, timeout: Duration) -> Option<(Cookie, u32)> {
    stream.set_nonblocking(false).ok()?;
    stream.set_read_timeout(Some(timeout)).ok()?;
    let mut buf = [0u8; ANNOUNCE_LEN];
    (&*stream).read_exact(&mut buf).ok()?;
    stream.set_read_timeout(None).ok()?;
    let mut c = [0u8; 16];
    c.copy_from_slice(&buf[..16]);
    let idx = u32::from_be_bytes([buf[16], buf[17], buf[18], buf[19]]);
    Some((Cookie(c), idx))
}

fn on_off(b: bool) -> String {
    if b { "on" } else { "off" }.to_string()
}

/// Refuses `--rx zerocopy` on a path whose device cannot hand over whole
/// payload pages, which TCP_ZEROCOPY_RECEIVE needs: it would map nothing
/// and copy everything, measuring only its own overhead.
pub fn check_rx_mode(flows: &[TcpStream], rx: plumb_spec::RxMode) -> Result<(), SetupError> {
    if rx != plumb_spec::RxMode::Zerocopy {
        return Ok(());
    }
    let Some(local) = flows.first().and_then(|f| f.local_addr().ok()) else {
        return Ok(());
    };
    match plumb_sys::sock::rxzc::rx_zerocopy_obstacle(local.ip()) {
        Some(dev) => Err(SetupError::option(
            Field::Rx.flag(),
            format!(
                "cannot use zerocopy here: TCP_ZEROCOPY_RECEIVE maps only whole, unshared payload pages, \
                 which a NIC that splits headers from payloads delivers; this path runs over \
                 {dev}, whose data sits in shared page fragments, so every byte would be \
                 copied. Use --rx skip to avoid the copy to user space here"
            ),
        )),
        None => Ok(()),
    }
}

/// Whether this kernel's ring has what the ring loop needs.
pub fn ring_works() -> bool {
    plumb_sys::uring::missing(plumb_sys::uring::Needs { send_zc: false }).is_none()
}

/// Refuses `--io uring` where this kernel lacks what the ring loop needs,
/// and `--zerocopy uring` where it lacks IORING_OP_SEND_ZC's reports, in
/// one line that names the missing feature; both ends check before any
/// traffic.
pub fn check_io(spec: &plumb_spec::Spec) -> Result<(), SetupError> {
    use plumb_sys::uring::{missing, Needs};
    if spec.io != plumb_spec::Io::Uring {
        return Ok(());
    }
    if let Some(why) = missing(Needs { send_zc: false }) {
        return Err(SetupError::option(
            Field::Io.flag(),
            format!(
                "cannot use uring: {why}; leave out {} to run on epoll",
                Field::Io.flag()
            ),
        ));
    }
    if spec.zerocopy == plumb_spec::ZeroCopy::Uring {
        if let Some(why) = missing(Needs { send_zc: true }) {
            return Err(SetupError::option(
                Field::ZeroCopy.flag(),
                format!("cannot use uring: {why}"),
            ));
        }
    }
    Ok(())
}

/// As [`read_back`] from the first flow, with the congestion control read
/// back from every flow: flows that run another algorithm than asked are
/// named in the record's note.
pub fn read_back_flows(flows: &[TcpStream], opts: &SocketOpts) -> Vec<OptionRecord> {
    let Some(first) = flows.first() else {
        return Vec::new();
    };
    let mut out = read_back(first, opts);
    if let Some(rec) = out.iter_mut().find(|r| r.name == Field::Cc.key()) {
        let mut odd = Vec::new();
        for (i, f) in flows.iter().enumerate() {
            let got = plumb_sys::sock::congestion(f).unwrap_or_else(|e| plain_io(&e));
            let want = opts.cc.as_deref().unwrap_or(&rec.granted);
            if got != want && odd.len() < 8 {
                odd.push(format!("flow {i} runs {got}"));
            }
        }
        rec.note = Some(if odd.is_empty() {
            format!("read back from each of the {} flows", flows.len())
        } else {
            format!("not on every flow: {}", odd.join(", "))
        });
    }
    out
}

/// What the kernel granted for each option, read back from one flow.
pub fn read_back(stream: &TcpStream, opts: &SocketOpts) -> Vec<OptionRecord> {
    let s = SockRef::from(stream);
    let autotuned = "autotuned by the kernel; initial value";
    let flag = |field, asked: bool, granted: io::Result<bool>| {
        option_record(field, on_off(asked), granted.map(on_off), asked, None)
    };
    let pacing = |r: u64| match r {
        // No limit reads back as all ones, in whichever width the kernel keeps.
        u64::MAX | 0xffff_ffff => "unlimited".to_string(),
        r => format!("{} bit/s", r.saturating_mul(8)),
    };
    [
        buffer_record(Field::Sndbuf, opts.sndbuf, s.send_buffer_size(), autotuned),
        buffer_record(Field::Rcvbuf, opts.rcvbuf, s.recv_buffer_size(), autotuned),
        flag(Field::Nodelay, opts.nodelay, s.tcp_nodelay()),
        flag(Field::Cork, opts.cork, s.tcp_cork()),
        option_record(
            Field::Mss,
            opts.mss.map_or_else(|| "auto".into(), |m| m.to_string()),
            s.tcp_mss().map(|v| v.to_string()),
            opts.mss.is_some(),
            None,
        ),
        option_record(
            Field::Cc,
            opts.cc.clone().unwrap_or_else(|| "default".into()),
            plumb_sys::sock::congestion(stream),
            opts.cc.is_some(),
            None,
        ),
        option_record(
            Field::PacingRate,
            opts.pacing_rate_bps
                .map_or_else(|| "none".into(), |r| format!("{r} bit/s")),
            plumb_sys::sock::max_pacing_rate(stream).map(pacing),
            opts.pacing_rate_bps.is_some(),
            None,
        ),
    ]
    .into_iter()
    .chain(table_records(stream, opts, Proto::Tcp))
    .collect()
}

/// What the kernel granted for each option of the socket option table
/// that a socket of `proto` takes, asked or not.
fn table_records(fd: impl AsFd, opts: &SocketOpts, proto: Proto) -> Vec<OptionRecord> {
    SockOpt::ALL
        .iter()
        .filter(|o| o.taken_by(proto))
        .map(|&o| {
            let d = o.desc();
            let asked = opts.table.get(o);
            let granted = plumb_sys::sock::int_option(&fd, d.level.number(), d.name)
                .and_then(|n| match (n, d.inherits) {
                    (0, Some(sysctl)) => plumb_sys::knob::sysctl_number(sysctl)
                        .map(|n| u32::try_from(n).unwrap_or(u32::MAX)),
                    _ => Ok(n),
                })
                .map(|n| match (d.value, d.unlimited) {
                    (_, Some(u)) if n == u => "unlimited".to_string(),
                    (Value::Switch, _) => on_off(n != 0),
                    _ => n.to_string(),
                });
            let shown = match d.value {
                Value::Switch => on_off(asked.is_some()),
                _ => asked.map_or_else(|| "none".into(), |n| n.to_string()),
            };
            option_record(Field::Sock(o), shown, granted, asked.is_some(), None)
        })
        .collect()
}

/// The socket buffers left to the kernel, read back again from `stream`
/// (the flow [`read_back`] read) as the window closes: autotuning grows
/// them over a run, from the initial value `granted` holds to what
/// `at_close` then holds. A buffer of a size asked for is locked at it.
pub fn read_back_at_close(stream: &TcpStream, options: &mut [OptionRecord]) {
    let s = SockRef::from(stream);
    for r in options
        .iter_mut()
        .filter(|r| r.status == OptionStatus::Default)
    {
        let now = match r.name.as_str() {
            n if n == Field::Sndbuf.key() => s.send_buffer_size(),
            n if n == Field::Rcvbuf.key() => s.recv_buffer_size(),
            _ => continue,
        };
        if let Ok(now) = now.map(|n| n.to_string()) {
            r.at_close = (now != r.granted).then_some(now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reconnecting_flows_spread_over_more_loopback_sources() {
        let peer: SocketAddr = "127.0.0.1:5001".parse().unwrap();
        let range = local_port_count();
        // Half the range fits one source for long-lived flows, not for crr.
        assert!(sources_for(peer, range / 2, false).is_empty());
        let churn = sources_for(peer, range / 2, true);
        assert_eq!(churn.len(), 2, "{churn:?}");
        assert_eq!(churn[1], "127.0.0.2".parse::<IpAddr>().unwrap());
        // Nothing to spread over off loopback or on IPv6.
        let v6: SocketAddr = "[::1]:5001".parse().unwrap();
        assert!(sources_for(v6, range * 2, true).is_empty());
    }

    #[test]
    fn the_option_table_names_what_the_c_library_names() {
        use plumb_spec::sockopt::Level;
        for o in SockOpt::ALL {
            let d = o.desc();
            let (level, name) = match d.c_name {
                "TCP_NOTSENT_LOWAT" => (libc::IPPROTO_TCP, libc::TCP_NOTSENT_LOWAT),
                "SO_RCVLOWAT" => (libc::SOL_SOCKET, libc::SO_RCVLOWAT),
                "SO_BUSY_POLL" => (libc::SOL_SOCKET, libc::SO_BUSY_POLL),
                "SO_PREFER_BUSY_POLL" => (libc::SOL_SOCKET, libc::SO_PREFER_BUSY_POLL),
                other => panic!("{other}: add it to this test"),
            };
            assert_eq!((d.level.number(), d.name), (level, name), "{}", d.c_name);
        }
        assert_eq!(Level::Socket.number(), libc::SOL_SOCKET);
    }

    #[test]
    fn table_options_are_set_and_read_back_on_tcp_and_udp() {
        let opts = SocketOpts {
            table: plumb_spec::SockOptValues::default()
                .with(SockOpt::NotsentLowat, 16384)
                .with(SockOpt::RcvLowat, 4096)
                .with(SockOpt::BusyPoll, 0),
            ..Default::default()
        };
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        apply_connected(&c, &opts).unwrap();
        let got = read_back(&c, &opts);
        let of = |name: &str| {
            let r = got.iter().find(|r| r.name == name).expect(name);
            (r.asked.as_str(), r.granted.as_str(), r.status)
        };
        assert_eq!(
            of("notsent_lowat"),
            ("16384", "16384", OptionStatus::Applied)
        );
        assert_eq!(of("rcvlowat"), ("4096", "4096", OptionStatus::Applied));
        assert_eq!(of("busy_poll"), ("0", "0", OptionStatus::Applied));
        assert_eq!(
            of("prefer_busy_poll"),
            ("off", "off", OptionStatus::Default)
        );
        // UDP takes only the options of any protocol.
        let u = UdpSocket::bind("127.0.0.1:0").unwrap();
        apply_table(&u, &opts, Proto::Any).unwrap();
        let names: Vec<String> = read_back_udp(&u, &opts)
            .into_iter()
            .map(|r| r.name)
            .collect();
        assert_eq!(names, ["sndbuf", "rcvbuf", "busy_poll", "prefer_busy_poll"]);
    }

    #[test]
    fn flows_connect_with_cookie_and_options() {
        let opts = SocketOpts {
            sndbuf: BufSize::Bytes(8192),
            rcvbuf: BufSize::Bytes(8192),
            nodelay: true,
            ..Default::default()
        };
        let cookie = Cookie::random().unwrap();
        let l = DataListener::bind("127.0.0.1".parse().unwrap(), 0, &opts, 128).unwrap();
        let addr = SocketAddr::new("127.0.0.1".parse().unwrap(), l.port());
        // A stranger with the wrong cookie is rejected, not counted.
        let mut stranger = TcpStream::connect(addr).unwrap();
        stranger.write_all(&[0u8; ANNOUNCE_LEN]).unwrap();
        let client_opts = opts.clone();
        let t = std::thread::spawn(move || {
            connect_flows(addr, 3, &client_opts, &cookie, Duration::from_secs(2))
        });
        let (accepted, rejected) = l
            .accept_flows(3, &cookie, &opts, Instant::now() + Duration::from_secs(5))
            .unwrap();
        let connected = t.join().unwrap().unwrap();
        assert_eq!(accepted.len(), 3);
        assert_eq!(connected.len(), 3);
        assert_eq!(rejected, 1);
        // Flow i on the server is flow i on the client.
        for (a, c) in accepted.iter().zip(&connected) {
            assert_eq!(a.peer_addr().unwrap(), c.local_addr().unwrap());
        }
        let granted = read_back(&connected[0], &opts);
        let sndbuf = granted.iter().find(|r| r.name == "sndbuf").unwrap();
        assert_eq!(sndbuf.asked, "8K");
        assert_eq!(sndbuf.granted, "16384");
        assert_eq!(sndbuf.status, OptionStatus::Applied);
        let nodelay = granted.iter().find(|r| r.name == "nodelay").unwrap();
        assert_eq!(nodelay.granted, "on");
    }

    /// A receive buffer left to the kernel grows as a bulk transfer goes;
    /// the read-back at the close says to what, and leaves the one asked
    /// for alone.
    #[test]
    fn an_autotuned_buffer_is_read_back_again_at_the_close() {
        let tuned = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_moderate_rcvbuf")
            .map(|v| v.trim() == "1")
            .unwrap_or(false);
        if !tuned {
            assert!(
                std::env::var_os("CI").is_none(),
                "net.ipv4.tcp_moderate_rcvbuf is off"
            );
            eprintln!("skipped: an_autotuned_buffer_is_read_back_again_at_the_close: net.ipv4.tcp_moderate_rcvbuf is off");
            return;
        }
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let sender = std::thread::spawn(move || {
            let mut s = TcpStream::connect(addr).unwrap();
            let chunk = vec![0u8; 1 << 20];
            for _ in 0..256 {
                s.write_all(&chunk).unwrap();
            }
        });
        let (receiver, _) = l.accept().unwrap();
        let auto = SocketOpts::default();
        let mut options = read_back(&receiver, &auto);
        let initial = options.iter().find(|r| r.name == "rcvbuf").unwrap().clone();
        assert_eq!(initial.status, OptionStatus::Default);
        let mut buf = vec![0u8; 1 << 16];
        let mut r = &receiver;
        while r.read(&mut buf).unwrap() > 0 {}
        sender.join().unwrap();
        read_back_at_close(&receiver, &mut options);
        let rcvbuf = options.iter().find(|r| r.name == "rcvbuf").unwrap();
        assert_eq!(rcvbuf.granted, initial.granted, "the initial value stays");
        let grown: u64 = rcvbuf
            .at_close
            .as_deref()
            .unwrap_or_else(|| panic!("no read-back at the close: {rcvbuf:?}"))
            .parse()
            .unwrap();
        assert!(grown > initial.granted.parse().unwrap(), "{rcvbuf:?}");
        assert!(
            options
                .iter()
                .all(|r| r.at_close.is_none() || r.name.ends_with("buf")),
            "{options:?}"
        );

        // A size asked for is locked: nothing to read again.
        let asked = SocketOpts {
            rcvbuf: BufSize::Bytes(65536),
            ..Default::default()
        };
        let mut options = read_back(&receiver, &asked);
        read_back_at_close(&receiver, &mut options);
        let rcvbuf = options.iter().find(|r| r.name == "rcvbuf").unwrap();
        assert_eq!(rcvbuf.at_close, None, "{rcvbuf:?}");
    }
}
