//! Whether a spec can run: each numeric field within the bounds of the
//! field table, and the combinations a workload, an engine and a path
//! take. Every error names the field (and so the flag or key) at fault.

use crate::*;

/// A spec field whose value cannot be run, with the field that set it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {message}", field.flag())]
pub struct SpecError {
    pub field: Field,
    pub message: String,
}

impl SpecError {
    pub fn new(field: Field, message: impl Into<String>) -> Self {
        SpecError {
            field,
            message: message.into(),
        }
    }

    /// The flag of `plumb run` that sets the field: `--flows`.
    pub fn flag(&self) -> &'static str {
        self.field.flag()
    }
}

/// `field` holds `value`, or an error that names the field, its bounds
/// and the value, each shown by `show`.
fn within(field: Field, value: u64, show: impl Fn(u64) -> String) -> Result<(), SpecError> {
    match field.bounds() {
        Some((lo, hi)) if !(lo..=hi).contains(&value) => Err(SpecError::new(
            field,
            if hi == u64::MAX {
                format!("must be at least {}, got {}", show(lo), show(value))
            } else {
                format!(
                    "must be between {} and {}, got {}",
                    show(lo),
                    show(hi),
                    show(value)
                )
            },
        )),
        _ => Ok(()),
    }
}

fn show_bytes(n: u64) -> String {
    if n == 1 {
        "1 byte".into()
    } else {
        units::show_size(n)
    }
}

impl Spec {
    /// The send mode only the io_uring engine has. Every workload and mode
    /// runs on both engines; what a kernel's ring lacks its probe refuses.
    fn validate_io(&self) -> Result<(), SpecError> {
        if self.io == Io::Epoll && self.zerocopy == ZeroCopy::Uring {
            return Err(SpecError::new(
                Field::ZeroCopy,
                "uring sends through the io_uring engine; set io to uring or auto",
            ));
        }
        Ok(())
    }

    /// Checks ranges and consistency; names the field of the first bad one.
    pub fn validate(&self) -> Result<(), SpecError> {
        self.validate_direction()?;
        if self.workload.is_udp() {
            self.validate_udp()?;
        }
        // The rr sizes first: msg_size is derived from them, and the user
        // typed --req-size, not --msg-size.
        if let Some(rr) = &self.rr {
            self.validate_rr(rr)?;
        }
        self.validate_receive()?;
        self.validate_io()?;
        within(Field::Flows, self.flows.into(), |n| n.to_string())?;
        within(Field::Threads, self.threads.into(), |n| n.to_string())?;
        if self.threads > self.flows {
            return Err(SpecError::new(
                Field::Threads,
                format!(
                    "{} threads for {} flows would leave threads idle; use at most {}",
                    self.threads, self.flows, self.flows
                ),
            ));
        }
        within(Field::MsgSize, self.msg_size, show_bytes)?;
        self.validate_socket()?;
        within(Field::Duration, self.duration_ms, units::show_ms)?;
        within(Field::Warmup, self.warmup_ms, units::show_ms)?;
        if let Some(Topology::Veth(v)) = &self.topology {
            validate_path(v)?;
        }
        self.validate_parts()
    }

    /// A direction the workload runs in ([`Workload::directions`]).
    fn validate_direction(&self) -> Result<(), SpecError> {
        let w = self.workload;
        let message = match w.directions() {
            ways if ways.contains(&self.direction) => return Ok(()),
            [_] => format!(
                "{w}'s requests go from the client and its responses come back: it has no \
                 direction"
            ),
            ways => {
                let named: Vec<String> = ways.iter().map(|d| d.said()).collect();
                format!("{w} goes {}", named.join(" or "))
            }
        };
        Err(SpecError::new(Field::Direction, message))
    }

    /// A transaction's sizes, writes, pipeline and open loop.
    fn validate_rr(&self, rr: &RrSpec) -> Result<(), SpecError> {
        within(Field::ReqSize, rr.req_size, show_bytes)?;
        within(Field::RespSize, rr.resp_size, show_bytes)?;
        if self.workload == Workload::Crr && rr.pipeline != 1 {
            return Err(SpecError::new(
                Field::Pipeline,
                "crr makes one transaction per connection; it has no pipeline (--flows keeps \
                 that many connections in progress)",
            ));
        }
        if let Some(r) = rr.rate {
            within(Field::Rate, r, |n| {
                if n >= 1_000_000 && n.is_multiple_of(1_000_000) {
                    format!("{}M", n / 1_000_000)
                } else {
                    n.to_string()
                }
            })
            .map_err(|e| SpecError {
                message: format!("{} transactions per second", e.message),
                ..e
            })?;
        }
        within(Field::Pipeline, rr.pipeline.into(), |n| n.to_string())?;
        for (field, writes, size) in [
            (Field::ReqWrites, &rr.req_writes, rr.req_size),
            (Field::RespWrites, &rr.resp_writes, rr.resp_size),
        ] {
            let sum = writes.iter().try_fold(0u64, |a, w| a.checked_add(*w));
            if !writes.is_empty() && (writes.contains(&0) || sum != Some(size)) {
                return Err(SpecError::new(
                    field,
                    format!("the writes must be non-empty and add up to {size} bytes"),
                ));
            }
        }
        Ok(())
    }

    /// The send and receive modes and the read size, which only a stream
    /// has.
    fn validate_receive(&self) -> Result<(), SpecError> {
        if self.workload != Workload::Stream {
            if !self.zerocopy.is_none() {
                return Err(SpecError::new(
                    Field::ZeroCopy,
                    "only the stream workload has zero-copy send modes",
                ));
            }
            if !self.rx.is_copy() {
                return Err(SpecError::new(
                    Field::Rx,
                    "only the stream workload has receive modes",
                ));
            }
            if self.self_probes.is_some() {
                return Err(SpecError::new(
                    Field::SelfProbes,
                    "self probes ride inside a stream's flows; a transaction is a probe already",
                ));
            }
            if self.read_size.is_some() {
                return Err(SpecError::new(
                    Field::ReadSize,
                    "only the stream workload has a read size; a transaction reads the rest of its message",
                ));
            }
        }
        if let Some(n) = self.self_probes {
            self.validate_self_probes(n)?;
        }
        if let Some(r) = self.read_size {
            within(Field::ReadSize, r, show_bytes)?;
            if r > self.msg_size {
                return Err(SpecError::new(
                    Field::ReadSize,
                    format!(
                        "a read never runs into the next message: at most the message size, {}",
                        show_bytes(self.msg_size)
                    ),
                ));
            }
            if self.rx == RxMode::Zerocopy {
                return Err(SpecError::new(
                    Field::ReadSize,
                    "TCP_ZEROCOPY_RECEIVE maps what is queued; a read size is for rx copy and skip",
                ));
            }
        }
        Ok(())
    }

    /// Self probes: a mark at a message's start that the receiver reads,
    /// answered on the direction the stream leaves idle.
    fn validate_self_probes(&self, n: u32) -> Result<(), SpecError> {
        within(Field::SelfProbes, n.into(), |n| format!("{n}/s"))?;
        let why = if self.direction == Direction::Both {
            "a self probe is answered on the direction a stream leaves idle; a stream both ways has none"
        } else if !self.zerocopy.is_none() {
            "a self probe's mark is written into a message; zero-copy sends send the message as it is"
        } else if !self.rx.is_copy() {
            "a self probe's mark is read out of a message; rx skip and zerocopy leave it unread"
        } else if self.msg_size < 16 {
            "a self probe's mark takes a message's first 16 bytes; use --msg-size 16 or more"
        } else {
            return Ok(());
        };
        Err(SpecError::new(Field::SelfProbes, why))
    }

    /// The socket options' bounds and the rules between them and the
    /// workload.
    fn validate_socket(&self) -> Result<(), SpecError> {
        for (field, b) in [
            (Field::Sndbuf, self.socket.sndbuf),
            (Field::Rcvbuf, self.socket.rcvbuf),
        ] {
            if let BufSize::Bytes(n) = b {
                within(field, n, show_bytes).map_err(|e| SpecError {
                    message: format!(
                        "must be 'auto' or {}",
                        e.message.trim_start_matches("must be ")
                    ),
                    ..e
                })?;
            }
        }
        if let Some(m) = self.socket.mss {
            within(Field::Mss, m.into(), |n| format!("{n} bytes"))?;
        }
        for (o, n) in self.socket.table.iter() {
            let show = |n: u64| match o.desc().value {
                sockopt::Value::Bytes => show_bytes(n),
                _ => o.show(n as u32),
            };
            within(Field::Sock(o), n.into(), show)?;
        }
        if let Some(n) = self.socket.table.get(SockOpt::RcvLowat) {
            // A transaction's reader waits for its one message and nothing
            // follows until it answers: a mark above the message is never
            // reached, and the flow would stall.
            if let Some(rr) = &self.rr {
                let least = rr.req_size.min(rr.resp_size);
                if u64::from(n) > least {
                    return Err(SpecError::new(
                        Field::Sock(SockOpt::RcvLowat),
                        format!(
                            "a transaction's reader would wait for more than its message: \
                             at most {}, the smaller of request and response",
                            show_bytes(least)
                        ),
                    ));
                }
            }
        }
        if let Some(cc) = &self.socket.cc {
            if cc.is_empty()
                || cc.len() > 15
                || !cc.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
            {
                return Err(SpecError::new(
                    Field::Cc,
                    format!("'{cc}' is not a congestion control name (like cubic or bbr)"),
                ));
            }
        }
        if let Some(r) = self.socket.pacing_rate_bps {
            within(Field::PacingRate, r, |n| format!("{n} bit/s")).map_err(|e| SpecError {
                message: format!("{} (the kernel paces in bytes per second)", e.message),
                ..e
            })?;
        }
        Ok(())
    }

    fn validate_udp(&self) -> Result<(), SpecError> {
        let sizes: Vec<(Field, u64)> = match &self.rr {
            Some(rr) => vec![
                (Field::ReqSize, rr.req_size),
                (Field::RespSize, rr.resp_size),
            ],
            None => vec![(Field::MsgSize, self.msg_size)],
        };
        for (field, size) in sizes {
            if !(UDP_HEADER..=UDP_MAX).contains(&size) {
                return Err(SpecError::new(
                    field,
                    format!(
                        "a datagram must be between {UDP_HEADER} bytes (plumb's header: tag, flow, \
                         sequence) and {UDP_MAX} bytes, got {size}"
                    ),
                ));
            }
        }
        let defaults = Spec::defaults(self.workload);
        let set = |f: &&Field| self.value_of(**f) != defaults.value_of(**f);
        let mut tcp_only = Field::ALL.iter().filter(|f| f.proto() == Proto::Tcp);
        if let Some(field) = tcp_only.find(set) {
            return Err(SpecError::new(
                *field,
                "a TCP option; UDP workloads do not take it",
            ));
        }
        match (self.workload, &self.rr) {
            (Workload::UdpRr, Some(rr)) => {
                if !rr.req_writes.is_empty() || !rr.resp_writes.is_empty() {
                    return Err(SpecError::new(
                        Field::ReqWrites,
                        "a datagram is always one write",
                    ));
                }
                within(Field::Timeout, rr.timeout_ms.unwrap_or(0), |ms| {
                    if ms > 0 && ms.is_multiple_of(1000) {
                        format!("{}s", ms / 1000)
                    } else {
                        format!("{ms}ms")
                    }
                })?;
            }
            (Workload::UdpStream, None) => {}
            _ => {
                return Err(SpecError::new(
                    Field::Workload,
                    "udp-rr needs request/response sizes and udp-stream none",
                ))
            }
        }
        Ok(())
    }
}

/// The emulated path's bounds.
fn validate_path(v: &Veth) -> Result<(), SpecError> {
    if let Some(m) = v.mtu {
        within(Field::Mtu, m.into(), |n| n.to_string())?;
    }
    if let Some(d) = v.delay_us {
        within(Field::Delay, d, |us| format!("{}ms", us as f64 / 1000.0))?;
    }
    if let Some(r) = v.link_rate_bps {
        within(Field::LinkRate, r, units::show_rate)?;
    }
    if let Some(q) = v.queue_bytes {
        within(Field::Queue, q, |n| n.to_string())?;
    }
    if let Some(q) = &v.qdisc {
        crate::bottleneck::parse(q).map_err(|m| SpecError::new(Field::Qdisc, m))?;
        if v.emulator == Some(crate::Emulator::Plumb) {
            return Err(SpecError::new(
                Field::Qdisc,
                "sets the qdisc of a router between two veth pairs, and plumb's delay line \
                 joins the ends without one; leave out --emulator plumb",
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_names_the_flag() {
        let mut s = Spec::stream();
        s.flows = 0;
        assert_eq!(s.validate().unwrap_err().flag(), "--flows");
        let mut s = Spec::stream();
        s.threads = 4;
        assert_eq!(s.validate().unwrap_err().flag(), "--threads");
        let mut s = Spec::stream();
        s.socket.cc = Some("no such".into());
        assert_eq!(s.validate().unwrap_err().flag(), "--cc");
        let mut s = Spec::stream();
        s.socket.mss = Some(10);
        assert_eq!(s.validate().unwrap_err().flag(), "--mss");
        assert!(Spec::stream().validate().is_ok());
    }

    #[test]
    fn udp_specs_check_sizes_and_tcp_options() {
        assert!(Spec::udp_stream().validate().is_ok());
        assert!(Spec::udp_rr().validate().is_ok());
        assert_eq!(Spec::udp_stream().setup_flows(), 1);
        let mut s = Spec::udp_stream();
        s.msg_size = 8;
        assert_eq!(s.validate().unwrap_err().flag(), "--msg-size");
        s.msg_size = 70_000;
        assert_eq!(s.validate().unwrap_err().flag(), "--msg-size");
        let mut s = Spec::udp_stream();
        s.socket.nodelay = true;
        assert_eq!(s.validate().unwrap_err().flag(), "--nodelay");
        let mut s = Spec::udp_rr();
        s.rr.as_mut().unwrap().resp_size = 1;
        assert_eq!(s.validate().unwrap_err().flag(), "--resp-size");
        let mut s = Spec::udp_rr();
        s.rr.as_mut().unwrap().timeout_ms = Some(0);
        assert_eq!(s.validate().unwrap_err().flag(), "--timeout");
        let json = serde_json::to_string(&Spec::udp_rr()).unwrap();
        assert!(json.contains("\"udp-rr\""), "{json}");
        assert!(Spec::udp_rr().summary().starts_with("udp-rr 1 flow 16/16"));
    }

    /// Request/response has no direction to take: one given is refused, not
    /// stored under a key of its own for the same measurement.
    #[test]
    fn each_workload_takes_its_directions_and_no_other() {
        for w in [
            Workload::Stream,
            Workload::Rr,
            Workload::Crr,
            Workload::UdpStream,
            Workload::UdpRr,
        ] {
            assert_eq!(w.directions()[0], Spec::defaults(w).direction, "{w}");
            for d in [Direction::Send, Direction::Recv, Direction::Both] {
                let mut s = Spec::defaults(w);
                s.direction = d;
                match s.validate() {
                    Ok(()) => assert!(w.directions().contains(&d), "{w} {d}"),
                    Err(e) => {
                        assert!(!w.directions().contains(&d), "{w} {d}: {}", e.message);
                        assert_eq!(e.flag(), "--direction");
                    }
                }
            }
        }
        let mut s = Spec::rr();
        s.direction = Direction::Recv;
        assert_eq!(
            s.validate().unwrap_err().message,
            "rr's requests go from the client and its responses come back: it has no direction"
        );
    }

    #[test]
    fn a_udp_stream_goes_one_way_either_way_and_udp_rr_has_no_direction() {
        let mut s = Spec::udp_stream();
        s.direction = Direction::Recv;
        assert!(s.validate().is_ok());
        assert!(s.udp_from_server());
        s.direction = Direction::Both;
        let e = s.validate().unwrap_err();
        assert_eq!(e.flag(), "--direction");
        assert_eq!(
            e.message,
            "udp-stream goes send (client to server) or recv (server to client)"
        );
        let mut s = Spec::udp_rr();
        s.direction = Direction::Recv;
        assert_eq!(s.validate().unwrap_err().flag(), "--direction");
        assert!(!s.udp_from_server());
    }
}
