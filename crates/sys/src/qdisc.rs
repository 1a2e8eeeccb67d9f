//! The root queueing disciplines of the calling thread's network namespace
//! and what each has counted, as `tc -s qdisc show` prints them: one
//! RTM_GETQDISC dump over rtnetlink, each reply's kind (TCA_KIND) and
//! statistics (TCA_STATS2's basic and queue blocks, or the older TCA_STATS
//! where a kernel gives only that). A root's figures cover its children's;
//! its ECN marks, which an AQM keeps in its own statistics (TCA_STATS_APP),
//! are its own and its children's, summed here.

use crate::netlink::{self, u32_at, u64_at, NLMSG_DONE, NLMSG_ERROR, NLMSG_HDR};
use plumb_samples::QdiscStats;
use rustix::net::{recv, RecvFlags};
use std::io;

const TCMSG: usize = 20;
/// The parent of a root qdisc (TC_H_ROOT).
const TC_H_ROOT: u32 = 0xffff_ffff;
/// The parent of an ingress or clsact qdisc (TC_H_INGRESS): not under the
/// root of the egress.
const TC_H_INGRESS: u32 = 0xffff_fff1;

/// The attributes nested in TCA_STATS2 (linux/gen_stats.h), which libc
/// does not name.
mod tca_stats {
    pub const BASIC: u16 = 1;
    pub const QUEUE: u16 = 3;
    pub const APP: u16 = 4;
    pub const PKT64: u16 = 8;
}

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
    let fd = netlink::ask(&netlink::request(libc::RTM_GETQDISC, flags, &body))?;
    let mut all = Vec::new();
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
                libc::RTM_NEWQDISC => all.extend(parse(msg)),
                _ => {}
            }
        }
    }
    let rows = roots_of(all);
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

/// The roots among a dump's qdiscs (each with its parent), each with the
/// ECN marks of the qdiscs under it on its interface added to its own.
fn roots_of(all: Vec<(u32, QdiscRow)>) -> Vec<QdiscRow> {
    let (roots, children): (Vec<_>, Vec<_>) = all
        .into_iter()
        .partition(|(parent, _)| *parent == TC_H_ROOT);
    let mut roots: Vec<QdiscRow> = roots.into_iter().map(|(_, r)| r).collect();
    for (_, child) in children.iter().filter(|(p, _)| *p != TC_H_INGRESS) {
        if let Some(root) = roots.iter_mut().find(|r| r.ifindex == child.ifindex) {
            root.stats.ecn_marks += child.stats.ecn_marks;
        }
    }
    roots
}

/// One RTM_NEWQDISC message's qdisc and its parent's handle (public for
/// the netlink fuzz target, which feeds it every kind of qdisc).
pub fn parse(msg: &[u8]) -> Option<(u32, QdiscRow)> {
    let ifindex = u32_at(msg, NLMSG_HDR + 4)?;
    let handle = u32_at(msg, NLMSG_HDR + 8)?;
    let parent = u32_at(msg, NLMSG_HDR + 12)?;
    let mut app: Option<&[u8]> = None;
    let mut row = QdiscRow {
        ifindex,
        major: handle >> 16,
        ..QdiscRow::default()
    };
    let mut stats2 = false;
    for (kind, payload) in netlink::attributes(msg.get(NLMSG_HDR + TCMSG..)?) {
        match kind {
            libc::TCA_KIND => {
                let name = payload.split(|b| *b == 0).next().unwrap_or_default();
                row.kind = String::from_utf8_lossy(name).into_owned();
            }
            libc::TCA_STATS2 => {
                stats2 = true;
                for (kind, s) in netlink::attributes(payload) {
                    match kind {
                        // struct gnet_stats_basic: bytes, packets (u32).
                        tca_stats::BASIC => {
                            row.stats.bytes = u64_at(s, 0)?;
                            row.stats.packets = row.stats.packets.max(u32_at(s, 8)? as u64);
                        }
                        tca_stats::PKT64 => row.stats.packets = u64_at(s, 0)?,
                        // struct gnet_stats_queue: qlen, backlog, drops,
                        // requeues, overlimits.
                        tca_stats::QUEUE => {
                            row.stats.qlen = u32_at(s, 0)? as u64;
                            row.stats.backlog_bytes = u32_at(s, 4)? as u64;
                            row.stats.drops = u32_at(s, 8)? as u64;
                            row.stats.requeues = u32_at(s, 12)? as u64;
                            row.stats.overlimits = u32_at(s, 16)? as u64;
                        }
                        tca_stats::APP => app = Some(s),
                        _ => {}
                    }
                }
            }
            // struct tc_stats: bytes, packets, drops, overlimits, bps, pps,
            // qlen, backlog.
            libc::TCA_STATS if !stats2 => {
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
    row.stats.ecn_marks = app.map_or(0, |a| ecn_marks(&row.kind, a));
    Some((parent, row))
}

/// The packets a qdisc of `kind` marked Congestion Experienced, from its
/// own statistics (its `tc_*_xstats`, or cake's nested attributes): AQM
/// marks and, where it has a `ce_threshold`, those over it. A kind that
/// does not mark, or a block too short, gives 0.
pub fn ecn_marks(kind: &str, app: &[u8]) -> u64 {
    let at = |offsets: &[usize]| -> u64 {
        offsets
            .iter()
            .filter_map(|o| u32_at(app, *o))
            .map(u64::from)
            .sum()
    };
    match kind {
        // struct tc_fq_codel_xstats: a type (0, the qdisc's), then
        // tc_fq_codel_qd_stats' ecn_mark and ce_mark.
        "fq_codel" if u32_at(app, 0) == Some(0) => at(&[12, 28]),
        // struct tc_codel_xstats: ecn_mark, ce_mark.
        "codel" => at(&[24, 32]),
        // struct tc_red_xstats and tc_choke_xstats: marked.
        "red" | "choke" => at(&[12]),
        // struct tc_sfb_xstats: marked.
        "sfb" => at(&[20]),
        // struct tc_pie_xstats ends with ecn_mark; its prob grew from
        // 32 to 64 bits (Linux 5.7).
        "pie" if app.len() >= 40 => at(&[36]),
        "pie" => at(&[32]),
        // struct tc_fq_pie_xstats: ecn_mark.
        "fq_pie" => at(&[16]),
        // struct tc_fq_qd_stats: ce_mark, 64 bits.
        "fq" => u64_at(app, 80).unwrap_or(0),
        // TCA_CAKE_STATS_TIN_STATS (10), a nest per tin, each with its
        // TCA_CAKE_TIN_STATS_ECN_MARKED_PACKETS (8).
        "cake" => netlink::attributes(app)
            .filter(|(k, _)| *k == 10)
            .flat_map(|(_, tins)| netlink::attributes(tins))
            .flat_map(|(_, tin)| netlink::attributes(tin))
            .filter(|(k, _)| *k == 8)
            .filter_map(|(_, v)| u32_at(v, 0))
            .map(u64::from)
            .sum(),
        _ => 0,
    }
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
        m.extend_from_slice(&libc::RTM_NEWQDISC.to_ne_bytes());
        m.extend_from_slice(&[0u8; 10]);
        m.extend(tc);
        m
    }

    #[test]
    fn a_root_qdiscs_kind_and_counters_are_read_from_stats2() {
        let mut basic = 123_456_789u64.to_ne_bytes().to_vec();
        basic.extend(words(&[4321, 0]));
        let queue = words(&[3, 4500, 17, 2, 99]);
        let mut stats = attr(tca_stats::BASIC, &basic);
        stats.extend(attr(tca_stats::QUEUE, &queue));
        let mut attrs = attr(libc::TCA_KIND, b"tbf\0");
        attrs.extend(attr(libc::TCA_STATS2 | 0x8000, &stats));
        let (parent, row) = parse(&message(TC_H_ROOT, &attrs)).unwrap();
        assert_eq!(parent, TC_H_ROOT);
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
                ecn_marks: 0,
            },
        };
        assert_eq!(row, want);
        // A child is not a root: its root's figures hold its own.
        let child = parse(&message(0x0001_0001, &attrs)).unwrap();
        assert_eq!(roots_of(vec![child]), vec![]);
        // A kernel that sends only the old block.
        let mut old = 1000u64.to_ne_bytes().to_vec();
        old.extend(words(&[10, 1, 2, 0, 0, 5, 600]));
        let mut attrs = attr(libc::TCA_KIND, b"pfifo\0");
        attrs.extend(attr(libc::TCA_STATS, &old));
        let row = parse(&message(TC_H_ROOT, &attrs)).unwrap().1.stats;
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
    fn an_aqms_ecn_marks_are_read_by_its_kind_and_count_in_its_root() {
        // fq_codel under htb: its type word, then maxpacket,
        // drop_overlimit, ecn_mark, new_flow_count, new_flows_len,
        // old_flows_len, ce_mark.
        let fq_codel = words(&[0, 1514, 0, 40, 9, 1, 2, 2, 0, 0]);
        let mut stats = attr(tca_stats::APP, &fq_codel);
        stats.extend(attr(tca_stats::QUEUE, &words(&[0, 0, 3, 0, 0])));
        let mut attrs = attr(libc::TCA_KIND, b"fq_codel\0");
        attrs.extend(attr(libc::TCA_STATS2 | 0x8000, &stats));
        let (parent, leaf) = parse(&message(0x0001_0001, &attrs)).unwrap();
        assert_eq!(
            (parent, leaf.stats.ecn_marks, leaf.stats.drops),
            (0x0001_0001, 42, 3)
        );
        // A class's statistics (type 1) are no qdisc's marks.
        assert_eq!(ecn_marks("fq_codel", &words(&[1, 0, 0, 40, 0, 0, 0, 2])), 0);
        let mut htb = attr(libc::TCA_KIND, b"htb\0");
        htb.extend(attr(
            libc::TCA_STATS2,
            &attr(tca_stats::QUEUE, &words(&[0; 5])),
        ));
        let root = parse(&message(TC_H_ROOT, &htb)).unwrap();
        assert_eq!(root.1.stats.ecn_marks, 0);
        // An ingress qdisc's are not the egress root's; another
        // interface's are its own.
        let mut other = leaf.clone();
        other.ifindex = 8;
        let roots = roots_of(vec![
            root,
            (parent, leaf.clone()),
            (TC_H_INGRESS, leaf),
            (0x10000, other),
        ]);
        assert_eq!(roots.len(), 1);
        assert_eq!(
            (roots[0].kind.as_str(), roots[0].stats.ecn_marks),
            ("htb", 42)
        );
        // Each kind's own block.
        assert_eq!(ecn_marks("codel", &words(&[0, 0, 0, 0, 0, 0, 5, 0, 1])), 6);
        assert_eq!(ecn_marks("red", &words(&[1, 2, 3, 4])), 4);
        assert_eq!(ecn_marks("fq_pie", &words(&[0, 0, 0, 0, 7, 0, 0, 0, 0])), 7);
        let mut pie = 0u64.to_ne_bytes().to_vec();
        pie.extend(words(&[0, 0, 0, 0, 0, 0, 0, 11]));
        assert_eq!(ecn_marks("pie", &pie), 11);
        assert_eq!(
            ecn_marks("pie", &words(&[0, 0, 0, 0, 0, 0, 0, 0, 12])[..36]),
            12
        );
        let mut fq = vec![0u8; 80];
        fq.extend(13u64.to_ne_bytes());
        fq.extend([0u8; 16]);
        assert_eq!(ecn_marks("fq", &fq), 13);
        // cake: two tins, each its marks.
        let tin = |n: u32| attr(8, &words(&[n]));
        let mut tins = attr(1, &tin(3));
        tins.extend(attr(2, &tin(4)));
        let mut cake = attr(2, &0u64.to_ne_bytes());
        cake.extend(attr(10, &tins));
        assert_eq!(ecn_marks("cake", &cake), 7);
        // Short blocks and kinds that do not mark.
        assert_eq!(ecn_marks("fq_codel", &words(&[0, 1])), 0);
        assert_eq!(ecn_marks("pfifo", &words(&[9; 10])), 0);
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
