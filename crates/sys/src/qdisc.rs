//! The root queueing disciplines of the calling thread's network namespace
//! and what each has counted, as `tc -s qdisc show` prints them: one
//! RTM_GETQDISC dump over rtnetlink, each reply's kind (TCA_KIND) and
//! statistics (TCA_STATS2's basic and queue blocks, or the older TCA_STATS
//! where a kernel gives only that). A root's figures cover its children's.

use crate::netlink::{self, u32_at, u64_at, NLMSG_DONE, NLMSG_ERROR, NLMSG_HDR};
use plumb_samples::QdiscStats;
use rustix::net::{recv, RecvFlags};
use std::io;

const TCMSG: usize = 20;
const RTM_GETQDISC: u16 = libc::RTM_GETQDISC;
const RTM_NEWQDISC: u16 = libc::RTM_NEWQDISC;
/// The parent of a root qdisc (TC_H_ROOT).
const TC_H_ROOT: u32 = 0xffff_ffff;
const TCA_KIND: u16 = 1;
const TCA_STATS: u16 = 3;
const TCA_STATS2: u16 = 7;
const TCA_STATS_BASIC: u16 = 1;
const TCA_STATS_QUEUE: u16 = 3;
const TCA_STATS_PKT64: u16 = 8;

/// One root qdisc as the kernel reports it: counters since it was made,
/// and what it holds now.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QdiscRow {
    pub ifindex: u32,
    /// Its handle's major number (`8001:` is 0x8001).
    pub major: u32,
    pub kind: String,
    pub stats: QdiscStats,
}

impl QdiscRow {
    /// What it counted since `open`, its reading as a window opened, and
    /// what it holds now: a root made anew meanwhile (another handle or
    /// kind, or none then) counts from zero.
    pub fn since(&self, open: Option<&QdiscRow>) -> QdiscStats {
        let before = open
            .filter(|o| o.major == self.major && o.kind == self.kind)
            .map(|o| o.stats)
            .unwrap_or_default();
        self.stats.since(&before)
    }
}

/// The root qdiscs of every interface of the calling thread's namespace,
/// each with its interface's name (one whose interface went meanwhile is
/// left out).
pub fn read_roots() -> io::Result<Vec<(String, QdiscRow)>> {
    let body = [0u8; TCMSG]; // any family, every interface
    let flags = netlink::NLM_F_REQUEST | netlink::NLM_F_DUMP;
    let fd = netlink::ask(&netlink::request(RTM_GETQDISC, flags, &body))?;
    let mut rows = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    'dump: loop {
        let (_, n) = recv(&fd, &mut buf[..], RecvFlags::empty())?;
        if n == 0 {
            break;
        }
        for (kind, msg) in netlink::messages(&buf[..n.min(buf.len())]) {
            match kind {
                NLMSG_DONE => break 'dump,
                NLMSG_ERROR => {
                    if let Some(e) = netlink::error_of(msg) {
                        return Err(e);
                    }
                }
                RTM_NEWQDISC => rows.extend(parse_root(msg)),
                _ => {}
            }
        }
    }
    // One socket names them all: an index means an interface of the
    // socket's namespace.
    let sock = rustix::net::socket(
        rustix::net::AddressFamily::INET,
        rustix::net::SocketType::DGRAM,
        None,
    )?;
    Ok(rows
        .into_iter()
        .filter_map(|r| {
            Some((
                rustix::net::netdevice::index_to_name(&sock, r.ifindex).ok()?,
                r,
            ))
        })
        .collect())
}

/// One RTM_NEWQDISC message's qdisc, where it is a root.
pub fn parse_root(msg: &[u8]) -> Option<QdiscRow> {
    let ifindex = u32_at(msg, NLMSG_HDR + 4)?;
    let handle = u32_at(msg, NLMSG_HDR + 8)?;
    if u32_at(msg, NLMSG_HDR + 12)? != TC_H_ROOT {
        return None;
    }
    let mut row = QdiscRow {
        ifindex,
        major: handle >> 16,
        ..QdiscRow::default()
    };
    let mut stats2 = false;
    for (kind, payload) in netlink::attributes(msg.get(NLMSG_HDR + TCMSG..)?) {
        match kind {
            TCA_KIND => {
                let name = payload.split(|b| *b == 0).next().unwrap_or_default();
                row.kind = String::from_utf8_lossy(name).into_owned();
            }
            TCA_STATS2 => {
                stats2 = true;
                for (kind, s) in netlink::attributes(payload) {
                    match kind {
                        // struct gnet_stats_basic: bytes, packets (u32).
                        TCA_STATS_BASIC => {
                            row.stats.bytes = u64_at(s, 0)?;
                            row.stats.packets = row.stats.packets.max(u32_at(s, 8)? as u64);
                        }
                        TCA_STATS_PKT64 => row.stats.packets = u64_at(s, 0)?,
                        // struct gnet_stats_queue: qlen, backlog, drops,
                        // requeues, overlimits.
                        TCA_STATS_QUEUE => {
                            row.stats.qlen = u32_at(s, 0)? as u64;
                            row.stats.backlog_bytes = u32_at(s, 4)? as u64;
                            row.stats.drops = u32_at(s, 8)? as u64;
                            row.stats.requeues = u32_at(s, 12)? as u64;
                            row.stats.overlimits = u32_at(s, 16)? as u64;
                        }
                        _ => {}
                    }
                }
            }
            // struct tc_stats: bytes, packets, drops, overlimits, bps, pps,
            // qlen, backlog.
            TCA_STATS if !stats2 => {
                row.stats.bytes = u64_at(payload, 0)?;
                row.stats.packets = u32_at(payload, 8)? as u64;
                row.stats.drops = u32_at(payload, 12)? as u64;
                row.stats.overlimits = u32_at(payload, 16)? as u64;
                row.stats.qlen = u32_at(payload, 28)? as u64;
                row.stats.backlog_bytes = u32_at(payload, 32)? as u64;
            }
            _ => {}
        }
    }
    Some(row)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attr(kind: u16, payload: &[u8]) -> Vec<u8> {
        let mut a = ((4 + payload.len()) as u16).to_ne_bytes().to_vec();
        a.extend_from_slice(&kind.to_ne_bytes());
        a.extend_from_slice(payload);
        a.resize(netlink::align4(a.len()), 0);
        a
    }

    fn words(w: &[u32]) -> Vec<u8> {
        w.iter().flat_map(|x| x.to_ne_bytes()).collect()
    }

    fn message(parent: u32, attrs: &[u8]) -> Vec<u8> {
        let mut tc = vec![0u8; 4];
        tc.extend(words(&[7, 0x8001_0000, parent, 1]));
        tc.extend_from_slice(attrs);
        let mut m = ((NLMSG_HDR + tc.len()) as u32).to_ne_bytes().to_vec();
        m.extend_from_slice(&RTM_NEWQDISC.to_ne_bytes());
        m.extend_from_slice(&[0u8; 10]);
        m.extend(tc);
        m
    }

    #[test]
    fn a_root_qdiscs_kind_and_counters_are_read_from_stats2() {
        let mut basic = 123_456_789u64.to_ne_bytes().to_vec();
        basic.extend(words(&[4321, 0]));
        let queue = words(&[3, 4500, 17, 2, 99]);
        let mut stats = attr(TCA_STATS_BASIC, &basic);
        stats.extend(attr(TCA_STATS_QUEUE, &queue));
        let mut attrs = attr(TCA_KIND, b"tbf\0");
        attrs.extend(attr(TCA_STATS2 | 0x8000, &stats));
        let row = parse_root(&message(TC_H_ROOT, &attrs)).unwrap();
        let want = QdiscRow {
            ifindex: 7,
            major: 0x8001,
            kind: "tbf".into(),
            stats: QdiscStats {
                bytes: 123_456_789,
                packets: 4321,
                drops: 17,
                overlimits: 99,
                requeues: 2,
                qlen: 3,
                backlog_bytes: 4500,
            },
        };
        assert_eq!(row, want);
        // A child is not a root: its root's figures hold its own.
        assert_eq!(parse_root(&message(0x0001_0001, &attrs)), None);
        // A kernel that sends only the old block.
        let mut old = 1000u64.to_ne_bytes().to_vec();
        old.extend(words(&[10, 1, 2, 0, 0, 5, 600]));
        let mut attrs = attr(TCA_KIND, b"pfifo\0");
        attrs.extend(attr(TCA_STATS, &old));
        let row = parse_root(&message(TC_H_ROOT, &attrs)).unwrap().stats;
        assert_eq!(
            (
                row.bytes,
                row.packets,
                row.drops,
                row.overlimits,
                row.qlen,
                row.backlog_bytes
            ),
            (1000, 10, 1, 2, 5, 600)
        );
    }

    #[test]
    fn the_namespaces_root_qdiscs_are_dumped_with_their_interfaces() {
        // Every interface has a root qdisc, lo's noqueue included.
        let rows = read_roots().unwrap();
        let (_, lo) = rows
            .iter()
            .find(|(name, _)| name == "lo")
            .unwrap_or_else(|| panic!("no root qdisc on lo in {rows:?}"));
        assert!(!lo.kind.is_empty(), "{lo:?}");
    }
}
