//! Noticing a peer whose host vanished. A killed peer process gets a FIN or
//! RST from its kernel and is noticed at once; a peer whose host crashed, or
//! whose link went down, says nothing, and an idle control connection would
//! wait for it until the window's grace timers ran out. Keepalive probes on
//! the idle connection and a user timeout on unacknowledged data turn that
//! silence into an error on the next read within [`NOTICE`].

use socket2::{SockRef, TcpKeepalive};
use std::net::TcpStream;
use std::time::Duration;

/// Probe after this long without traffic...
const IDLE: Duration = Duration::from_secs(1);
/// ... every this long ...
const INTERVAL: Duration = Duration::from_secs(1);
/// ... and give up after this many unanswered probes.
const PROBES: u32 = 3;
/// How long data may stay unacknowledged, and so about how long a vanished
/// peer goes unnoticed.
pub const NOTICE: Duration = Duration::from_secs(4);

/// The traffic class of the control connection's packets: CS6, network
/// control. A bottleneck plumb builds (`--qdisc`) passes it ahead of its
/// queue, so that the test's own loss and queueing never cost the session
/// its deadlines above.
pub const CONTROL_TOS: u32 = 0xc0;

/// Makes reads on `stream` fail within about [`NOTICE`] once the peer's
/// host stops answering, and marks its packets [`CONTROL_TOS`]. Best
/// effort: a kernel without one of the options keeps the deadlines of the
/// protocol.
pub fn watch_peer(stream: &TcpStream) {
    let s = SockRef::from(stream);
    match stream.local_addr() {
        Ok(a) if a.is_ipv6() => {
            let _ = s.set_tclass_v6(CONTROL_TOS);
        }
        _ => {
            let _ = s.set_tos_v4(CONTROL_TOS);
        }
    }
    let keepalive = TcpKeepalive::new()
        .with_time(IDLE)
        .with_interval(INTERVAL)
        .with_retries(PROBES);
    let _ = s.set_tcp_keepalive(&keepalive);
    let _ = s.set_tcp_user_timeout(Some(NOTICE));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_options_are_set_as_asked() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        watch_peer(&c);
        let s = SockRef::from(&c);
        assert!(s.keepalive().unwrap());
        assert_eq!(s.tcp_keepalive_time().unwrap(), IDLE);
        assert_eq!(s.tcp_keepalive_interval().unwrap(), INTERVAL);
        assert_eq!(s.tcp_keepalive_retries().unwrap(), PROBES);
        assert_eq!(s.tcp_user_timeout().unwrap(), Some(NOTICE));
    }
}
