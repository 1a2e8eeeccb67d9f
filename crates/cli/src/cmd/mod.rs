pub mod compare;
pub mod db;
pub mod doctor;
pub mod knob;
pub mod report;
pub mod run;
pub mod serve;
pub mod sweep;

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};

/// The repetition policy of `--iterations MIN..MAX --confidence LEVEL,WIDTH`.
pub fn repeat(iterations: (u32, u32), confidence: (f64, f64)) -> plumb_run::Repeat {
    plumb_run::Repeat {
        min: iterations.0,
        max: iterations.1,
        level: confidence.0,
        target: confidence.1,
    }
}

/// `127.0.0.1`, `127.0.0.1:5000`, `::1`, `[::1]:5000`, `localhost:5000`.
pub fn parse_addr(s: &str, default_port: u16, flag: &str) -> Result<SocketAddr, crate::Failure> {
    if let Ok(a) = s.parse::<SocketAddr>() {
        return Ok(a);
    }
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Ok(SocketAddr::new(ip, default_port));
    }
    if let Some(ip) = s.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
        if let Ok(ip) = ip.parse::<IpAddr>() {
            return Ok(SocketAddr::new(ip, default_port));
        }
    }
    let with_port = if s.contains(':') {
        s.to_string()
    } else {
        format!("{s}:{default_port}")
    };
    with_port
        .to_socket_addrs()
        .ok()
        .and_then(|mut it| it.next())
        .ok_or_else(|| {
            crate::Failure::usage(format!(
                "{flag}: '{s}' is not an address; use HOST, HOST:PORT, IP or [IPv6]:PORT"
            ))
        })
}
