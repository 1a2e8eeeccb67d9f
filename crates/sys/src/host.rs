//! Host facts that /proc and /sys do not show: an interface's GSO/GRO/TSO
//! limits, which the kernel reports only over rtnetlink (IFLA_GSO_MAX_SIZE
//! and friends; `ip -d link` prints them from the same place).

use crate::netlink::{self, align4, u16_at, u32_at, NLMSG_ERROR, NLMSG_HDR, NLM_F_REQUEST};
use rustix::net::{recv, RecvFlags};
use std::io;

const IFINFOMSG: usize = std::mem::size_of::<libc::ifinfomsg>();
use libc::{IFLA_IFNAME, RTM_GETLINK, RTM_NEWLINK};

/// The u32 link attributes reported, by the name /sys would give them.
const LIMITS: [(u16, &str); 7] = [
    (40, "gso_max_segs"),
    (41, "gso_max_size"),
    (58, "gro_max_size"),
    (59, "tso_max_size"),
    (60, "tso_max_segs"),
    (63, "gso_ipv4_max_size"),
    (64, "gro_ipv4_max_size"),
];

/// The segmentation limits of interface `name` (gso_max_size, gso_max_segs,
/// gro_max_size, tso_max_size, tso_max_segs, gso_ipv4_max_size,
/// gro_ipv4_max_size): those this kernel reports, in the order it sent them.
pub fn link_limits(name: &str) -> io::Result<Vec<(&'static str, u32)>> {
    if name.is_empty() || name.len() > 15 || name.contains(['/', '\0']) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "bad interface name",
        ));
    }
    let fd = netlink::ask(&getlink_request(name))?;
    let mut buf = vec![0u8; 64 * 1024];
    let (_, n) = recv(&fd, &mut buf[..], RecvFlags::empty())?;
    parse_link_limits(&buf[..n.min(buf.len())])
}

/// RTM_GETLINK for one interface, by name.
fn getlink_request(name: &str) -> Vec<u8> {
    let attr_len = 4 + name.len() + 1;
    let mut body = vec![0u8; IFINFOMSG]; // any family, index 0: by name
    body.extend_from_slice(&(attr_len as u16).to_ne_bytes());
    body.extend_from_slice(&IFLA_IFNAME.to_ne_bytes());
    body.extend_from_slice(name.as_bytes());
    body.resize(IFINFOMSG + align4(attr_len), 0);
    netlink::request(RTM_GETLINK, NLM_F_REQUEST, &body)
}

/// The limits in one RTM_NEWLINK reply (or the error an NLMSG_ERROR carries).
pub fn parse_link_limits(msg: &[u8]) -> io::Result<Vec<(&'static str, u32)>> {
    let bad = || io::Error::new(io::ErrorKind::InvalidData, "malformed rtnetlink reply");
    let len = u32_at(msg, 0).ok_or_else(bad)? as usize;
    let kind = u16_at(msg, 4).ok_or_else(bad)?;
    if len < NLMSG_HDR || len > msg.len() {
        return Err(bad());
    }
    if kind == NLMSG_ERROR {
        return Err(netlink::error_of(msg).unwrap_or_else(bad));
    }
    if kind != RTM_NEWLINK {
        return Err(bad());
    }
    let attrs = msg.get(NLMSG_HDR + IFINFOMSG..len).ok_or_else(bad)?;
    Ok(netlink::attributes(attrs)
        .filter_map(|(kind, payload)| {
            let (_, name) = LIMITS.iter().find(|(t, _)| *t == kind)?;
            Some((*name, u32_at(payload, 0).filter(|_| payload.len() == 4)?))
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attr(t: u16, v: u32) -> Vec<u8> {
        let mut a = 8u16.to_ne_bytes().to_vec();
        a.extend_from_slice(&t.to_ne_bytes());
        a.extend_from_slice(&v.to_ne_bytes());
        a
    }

    #[test]
    fn parses_limits_and_errors() {
        let mut body = vec![0u8; IFINFOMSG];
        // IFLA_IFNAME "lo": 7 bytes, padded to 8.
        body.extend_from_slice(&7u16.to_ne_bytes());
        body.extend_from_slice(&IFLA_IFNAME.to_ne_bytes());
        body.extend_from_slice(b"lo\0\0");
        body.extend(attr(41, 65536));
        body.extend(attr(40, 65535));
        body.extend(attr(4, 1500)); // IFLA_MTU: not one of ours
        let mut msg = ((NLMSG_HDR + body.len()) as u32).to_ne_bytes().to_vec();
        msg.extend_from_slice(&RTM_NEWLINK.to_ne_bytes());
        msg.extend_from_slice(&[0u8; 10]);
        msg.extend(body);
        assert_eq!(
            parse_link_limits(&msg).unwrap(),
            [("gso_max_size", 65536), ("gso_max_segs", 65535)]
        );

        let mut err = 20u32.to_ne_bytes().to_vec();
        err.extend_from_slice(&NLMSG_ERROR.to_ne_bytes());
        err.extend_from_slice(&[0u8; 10]);
        err.extend_from_slice(&(-19i32).to_ne_bytes());
        assert_eq!(
            parse_link_limits(&err).unwrap_err().raw_os_error(),
            Some(19)
        );
        assert!(parse_link_limits(&[1, 2]).is_err());
    }

    #[test]
    fn loopback_has_gso_limits() {
        let limits = link_limits("lo").unwrap();
        assert!(limits.iter().any(|(n, v)| *n == "gso_max_size" && *v > 0));
        assert!(link_limits("no-such-if0").is_err());
        assert!(link_limits("../x").is_err());
    }
}
