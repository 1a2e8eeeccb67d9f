pub mod bisect;
pub mod compare;
pub mod db;
pub mod docs;
pub mod doctor;
mod dry;
mod far;
pub(crate) mod guest;
pub mod history;
pub mod knob;
pub mod lab;
pub mod report;
pub mod run;
pub mod serve;
pub mod sweep;
pub mod watch;

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};

/// `127.0.0.1`, `127.0.0.1:5000`, `::1`, `[::1]:5000`, `localhost:5000`.
pub fn parse_addr(s: &str, default_port: u16, flag: &str) -> Result<SocketAddr, crate::Failure> {
    parse_addr_of(s, default_port, flag, None)
}

/// As [`parse_addr`], of family `want` when given: a name with addresses of
/// both families gives the one asked for, and a literal of the other family
/// is refused rather than silently used.
pub fn parse_addr_of(
    s: &str,
    default_port: u16,
    flag: &str,
    want: Option<plumb_spec::Family>,
) -> Result<SocketAddr, crate::Failure> {
    let fits = |a: &SocketAddr| match want {
        Some(plumb_spec::Family::V4) => a.is_ipv4(),
        Some(plumb_spec::Family::V6) => a.is_ipv6(),
        None => true,
    };
    let any = parse_any_addr(s, default_port, flag, &fits)?;
    if !fits(&any) {
        return Err(crate::Failure::usage(format!(
            "{flag}: '{s}' is not an {} address; leave out -4/-6 or name the server by an address of that family",
            want.map(|f| f.to_string()).unwrap_or_default()
        )));
    }
    Ok(any)
}

fn parse_any_addr(
    s: &str,
    default_port: u16,
    flag: &str,
    fits: &dyn Fn(&SocketAddr) -> bool,
) -> Result<SocketAddr, crate::Failure> {
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
    let all: Vec<SocketAddr> = with_port
        .to_socket_addrs()
        .map(|it| it.collect())
        .unwrap_or_default();
    all.iter()
        .find(|a| fits(a))
        .or(all.first())
        .copied()
        .ok_or_else(|| {
            crate::Failure::usage(format!(
                "{flag}: '{s}' is not an address; use HOST, HOST:PORT, IP or [IPv6]:PORT"
            ))
        })
}
