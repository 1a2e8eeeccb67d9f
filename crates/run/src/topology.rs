//! `--topology veth`: two network namespaces, `plumb-PID-client` and
//! `plumb-PID-server`, joined by a veth pair and addressed inside
//! 198.18.0.0/15 and 2001:2::/48, with the path's MTU, delay, loss and
//! link rate emulated by netem, or by plumb's own delay line between a TUN
//! device in each namespace (in place of the veth pair) where the kernel
//! has no netem. Each namespace is journaled before it is made, so it is removed
//! when the run ends, fails or is interrupted, and at the next start of
//! plumb if the process died; `plumb topology down` removes leftovers.
//!
//! With `--qdisc` a third namespace, `plumb-PID-router`, forwards between
//! two veth pairs, and the bottleneck is its egress each way: an HTB shaper
//! at the link rate over the asked qdisc, limited to `--queue`. A qdisc on
//! a sender's own interface would hold packets still charged to its
//! socket, which TCP small queues keeps from ever filling; a router's
//! holds what the path holds. The ends keep their addresses, reached
//! through the router over a link of their own.

use crate::delayline::{DelayLine, PathLaw};
use crate::knob::{self, Applied, Journal, Knob, Setting, Target};
use crate::RunError;
use plumb_engine::probe::{PathSource, PathWay};
use plumb_samples::PathResult;
use plumb_spec::{bottleneck, Emulator, Family, Field, Spec, Topology, Veth};
use plumb_sys::knob as raw;
use plumb_sys::tun::{Offload, Tun};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

pub const CLIENT_V4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
pub const SERVER_V4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
pub const CLIENT_V6: Ipv6Addr = Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 1);
pub const SERVER_V6: Ipv6Addr = Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 2);
/// The interface names inside each namespace.
pub const CLIENT_IF: &str = "plumb-c";
pub const SERVER_IF: &str = "plumb-s";
/// The router's interfaces: toward the client, toward the server.
pub const ROUTER_CLIENT_IF: &str = "plumb-rc";
pub const ROUTER_SERVER_IF: &str = "plumb-rs";

/// The router's egress each way, where the bottleneck's queue is.
fn router_ways() -> Vec<PathWay> {
    vec![
        PathWay {
            interface: ROUTER_SERVER_IF.into(),
            toward: "to_server",
        },
        PathWay {
            interface: ROUTER_CLIENT_IF.into(),
            toward: "to_client",
        },
    ]
}

/// A link between an end and the router: the end's address on it and the
/// router's (a /30 and a /64).
struct RouterLink {
    end_v4: Ipv4Addr,
    router_v4: Ipv4Addr,
    end_v6: Ipv6Addr,
    router_v6: Ipv6Addr,
}

const CLIENT_LINK: RouterLink = RouterLink {
    end_v4: Ipv4Addr::new(198, 18, 1, 1),
    router_v4: Ipv4Addr::new(198, 18, 1, 2),
    end_v6: Ipv6Addr::new(0x2001, 2, 0, 1, 0, 0, 0, 1),
    router_v6: Ipv6Addr::new(0x2001, 2, 0, 1, 0, 0, 0, 2),
};
const SERVER_LINK: RouterLink = RouterLink {
    end_v4: Ipv4Addr::new(198, 18, 1, 6),
    router_v4: Ipv4Addr::new(198, 18, 1, 5),
    end_v6: Ipv6Addr::new(0x2001, 2, 0, 2, 0, 0, 0, 2),
    router_v6: Ipv6Addr::new(0x2001, 2, 0, 2, 0, 0, 0, 1),
};

fn setup(message: impl Into<String>) -> RunError {
    RunError::Setup {
        flag: Some(Field::Topology.flag()),
        message: message.into(),
    }
}

/// A live veth topology; dropping it removes it (netem first, then the
/// namespaces, which take the veth pair with them).
pub struct VethPair {
    pub client_ns: String,
    pub server_ns: String,
    /// The router between the ends, under `--qdisc`.
    pub router_ns: Option<String>,
    /// What each server knob did in the server's namespace.
    pub server_knobs: Vec<String>,
    /// Restored first: they live in the namespaces.
    knobs: Option<Applied>,
    netem: Option<Applied>,
    /// What emulates the path, when anything does.
    pub emulator: Option<Emulator>,
    /// plumb's delay line between the namespaces' TUN devices, under
    /// `Emulator::Plumb`; stopped before the namespaces go.
    delay_line: Option<DelayLine>,
    namespaces: Applied,
}

impl VethPair {
    /// Builds the pair and sets `client_knobs` inside the client's
    /// namespace and `server_knobs` inside the server's (a knob naming
    /// another namespace is refused).
    pub fn up(
        v: &Veth,
        journal: &Journal,
        client_knobs: &[Setting],
        server_knobs: &[Setting],
    ) -> Result<VethPair, RunError> {
        if !plumb_sys::process::is_root() {
            return Err(setup(
                "--topology veth: needs root (it creates two network namespaces and a veth pair); \
                 run plumb as root or use --topology loopback",
            ));
        }
        let pid = std::process::id();
        let mut pair = VethPair {
            client_ns: format!("plumb-{pid}-client"),
            server_ns: format!("plumb-{pid}-server"),
            router_ns: v.qdisc.as_ref().map(|_| format!("plumb-{pid}-router")),
            server_knobs: Vec::new(),
            knobs: None,
            netem: None,
            emulator: None,
            delay_line: None,
            namespaces: Applied::empty(journal),
        };
        let made = [&pair.client_ns, &pair.server_ns]
            .into_iter()
            .chain(&pair.router_ns)
            .cloned()
            .collect::<Vec<_>>();
        for ns in made {
            let knob = Knob {
                target: Target::Netns(ns.clone()),
                netns: None,
            };
            pair.namespaces
                .change(&knob, "absent", "present")
                .map_err(|e| setup(e.0))?;
            ip(None, &["netns", "add", &ns])?;
        }
        let (c, s) = (pair.client_ns.as_str(), pair.server_ns.as_str());
        // Something to emulate, and no emulator asked: netem where this
        // kernel has it, else plumb's delay line.
        pair.emulator = match (v.emulator, v.emulated()) {
            (Some(e), _) => Some(e),
            (None, true) if netem_works(c) => Some(Emulator::Netem),
            (None, true) if pair.router_ns.is_some() => {
                return Err(RunError::Setup {
                    flag: Some(Field::Qdisc.flag()),
                    message: format!(
                        "{}: the delay and loss of a path through a router are netem's, and \
                         this kernel has no netem (plumb's delay line joins two ends without \
                         a router); --kernel boots a kernel that has it",
                        Field::Qdisc.flag()
                    ),
                })
            }
            (None, true) => Some(Emulator::Plumb),
            (None, false) => None,
        };
        if v.path_cpus.is_some() && pair.emulator != Some(Emulator::Plumb) {
            return Err(RunError::Setup {
                flag: Some(Field::PathCpus.flag()),
                message: format!(
                    "{}: places plumb's delay line, and this path has none \
                     (add {} plumb)",
                    Field::PathCpus.flag(),
                    Field::Emulator.flag()
                ),
            });
        }
        // The delay line starts once both devices are up: what the first
        // sends meanwhile waits in its device's queue.
        let mut tuns = None;
        if let Some(r) = &pair.router_ns {
            router(v, c, r, s)?;
        } else if pair.emulator == Some(Emulator::Plumb) {
            tuns = Some(tun_pair(v, c, s)?);
        } else {
            ip(
                None,
                &[
                    "link", "add", CLIENT_IF, "netns", c, "type", "veth", "peer", "name",
                    SERVER_IF, "netns", s,
                ],
            )?;
        }
        for (ns, ifname, v4, v6, link) in [
            (c, CLIENT_IF, CLIENT_V4, CLIENT_V6, &CLIENT_LINK),
            (s, SERVER_IF, SERVER_V4, SERVER_V6, &SERVER_LINK),
        ] {
            ip(Some(ns), &["link", "set", "lo", "up"])?;
            if let Some(mtu) = v.mtu {
                ip(Some(ns), &["link", "set", ifname, "mtu", &mtu.to_string()])
                    .map_err(|e| setup(format!("{} {mtu}: {e}", Field::Mtu.flag())))?;
            }
            // Through a router an end's address is its own, and its link's
            // leads to the router.
            let (len4, len6) = if pair.router_ns.is_some() {
                (32, 128)
            } else {
                (30, 64)
            };
            addresses(ns, ifname, (v4, len4), (v6, len6))?;
            if pair.router_ns.is_some() {
                addresses(ns, ifname, (link.end_v4, 30), (link.end_v6, 64))?;
            }
            ip(Some(ns), &["link", "set", ifname, "up"])?;
        }
        if let Some(r) = &pair.router_ns {
            // Routes through the router once the ends' links are up.
            for (far4, far6, end_link) in [
                (SERVER_V4, SERVER_V6, &SERVER_LINK),
                (CLIENT_V4, CLIENT_V6, &CLIENT_LINK),
            ] {
                route(r, far4.into(), end_link.end_v4.into(), None)?;
                route(r, far6.into(), end_link.end_v6.into(), None)?;
            }
            for (ns, from4, from6, far4, far6, link) in [
                (c, CLIENT_V4, CLIENT_V6, SERVER_V4, SERVER_V6, &CLIENT_LINK),
                (s, SERVER_V4, SERVER_V6, CLIENT_V4, CLIENT_V6, &SERVER_LINK),
            ] {
                route(ns, far4.into(), link.router_v4.into(), Some(from4.into()))?;
                route(ns, far6.into(), link.router_v6.into(), Some(from6.into()))?;
            }
        }
        if let Some((client, server)) = tuns {
            pair.delay_line = Some(delay_line(v, client, server)?);
        }
        if pair.emulator == Some(Emulator::Netem) && v.emulated() {
            let netem = netem_of(v);
            let settings = [
                Setting::new(&format!("qdisc:{CLIENT_IF}@{c}"), &netem),
                Setting::new(&format!("qdisc:{SERVER_IF}@{s}"), &netem),
            ]
            .into_iter()
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| setup(e.0))?;
            let (applied, _) = knob::apply(journal, &settings).map_err(|e| {
                setup(format!(
                    "{}/{}/{}: {}",
                    Field::Delay.flag(),
                    Field::Loss.flag(),
                    Field::LinkRate.flag(),
                    e.0
                ))
            })?;
            pair.netem = Some(applied);
        }
        // Each end's knobs in its own namespace, all or none: the client's
        // named by `@client`, the server's by `--server-knob`.
        let mut settings = Vec::new();
        for (flag, ns, own, named) in [
            ("--knob", c, client_knobs, Some(knob::CLIENT_NS)),
            ("--server-knob", s, server_knobs, None),
        ] {
            for st in own {
                let mut st = st.clone();
                if st.knob.netns.as_deref() != named {
                    return Err(setup(format!(
                        "{flag} {st}: an end's knob acts in that end's namespace; \
                         leave out @NETNS"
                    )));
                }
                st.knob.netns = Some(ns.to_string());
                settings.push(st);
            }
        }
        if !settings.is_empty() {
            let (applied, changes) = knob::apply(journal, &settings)
                .map_err(|e| setup(format!("--knob/--server-knob: {}", e.0)))?;
            pair.server_knobs = changes[client_knobs.len()..]
                .iter()
                .map(knob::Change::line)
                .collect();
            pair.knobs = Some(applied);
        }
        Ok(pair)
    }

    /// The path's bottleneck each way, to sample: the router's root
    /// qdiscs, or the delay line's queues where it has a link rate (each
    /// named by the device it writes to); None where nothing queues.
    pub fn path_watch(&self) -> Option<(PathSource, Vec<PathWay>)> {
        if let Some(ns) = &self.router_ns {
            return Some((PathSource::Router(ns.clone()), router_ways()));
        }
        let reader = self.delay_line.as_ref()?.queue_reader()?;
        let ways = [(SERVER_IF, "to_server"), (CLIENT_IF, "to_client")]
            .into_iter()
            .map(|(interface, toward)| PathWay {
                interface: interface.into(),
                toward,
            })
            .collect();
        Some((PathSource::Own(reader), ways))
    }

    /// `spec` as this path runs it: with the emulator that was chosen.
    pub fn resolve(&self, spec: &Spec) -> Spec {
        let mut spec = spec.clone();
        if let Some(Topology::Veth(v)) = &mut spec.topology {
            v.emulator = self.emulator;
        }
        spec
    }

    /// What emulated the path and, for the delay line, what it did; its
    /// thread ends here.
    pub fn finish_path(&mut self) -> Option<PathResult> {
        match self.delay_line.take() {
            Some(line) => Some(line.stop().unwrap_or_else(|e| {
                eprintln!("plumb: warning: {e}");
                PathResult {
                    emulator: Emulator::Plumb.to_string(),
                    ..Default::default()
                }
            })),
            None => self.emulator.map(|e| PathResult {
                emulator: e.to_string(),
                ..Default::default()
            }),
        }
    }

    pub fn server_ip(family: Family) -> IpAddr {
        match family {
            Family::V4 => IpAddr::V4(SERVER_V4),
            Family::V6 => IpAddr::V6(SERVER_V6),
        }
    }
}

impl Drop for VethPair {
    fn drop(&mut self) {
        self.knobs.take();
        self.netem.take();
        self.delay_line.take();
        for f in self.namespaces.restore() {
            eprintln!("plumb: warning: {f}");
        }
    }
}

/// The router namespace `r` between the ends' namespaces: a veth pair to
/// each, forwarding on, the offloads off so that its qdiscs see the
/// wire's packets, and the bottleneck on its egress each way.
fn router(v: &Veth, c: &str, r: &str, s: &str) -> Result<(), RunError> {
    for (end_ns, end_if, router_if) in [
        (c, CLIENT_IF, ROUTER_CLIENT_IF),
        (s, SERVER_IF, ROUTER_SERVER_IF),
    ] {
        ip(
            None,
            &[
                "link", "add", end_if, "netns", end_ns, "type", "veth", "peer", "name", router_if,
                "netns", r,
            ],
        )?;
    }
    ip(Some(r), &["link", "set", "lo", "up"])?;
    for key in ["net/ipv4/ip_forward", "net/ipv6/conf/all/forwarding"] {
        raw::write_file(Some(r), &format!("/proc/sys/{key}"), "1")
            .map_err(|e| setup(format!("--qdisc: the router's {key}: {e}")))?;
    }
    for (ns, ifname) in [
        (c, CLIENT_IF),
        (s, SERVER_IF),
        (r, ROUTER_CLIENT_IF),
        (r, ROUTER_SERVER_IF),
    ] {
        // Whole segments would pass a packet-counted queue as one packet.
        for feature in ["tso", "gso", "gro"] {
            raw::write_feature(Some(ns), ifname, feature, false).map_err(|e| {
                setup(format!(
                    "--qdisc: {feature} off on {ifname}: {e} (is ethtool installed?)"
                ))
            })?;
        }
    }
    for (ifname, link) in [
        (ROUTER_CLIENT_IF, &CLIENT_LINK),
        (ROUTER_SERVER_IF, &SERVER_LINK),
    ] {
        if let Some(mtu) = v.mtu {
            ip(Some(r), &["link", "set", ifname, "mtu", &mtu.to_string()])
                .map_err(|e| setup(format!("{} {mtu}: {e}", Field::Mtu.flag())))?;
        }
        addresses(r, ifname, (link.router_v4, 30), (link.router_v6, 64))?;
        ip(Some(r), &["link", "set", ifname, "up"])?;
        bottleneck(v, r, ifname)?;
    }
    Ok(())
}

/// An IPv4 and an IPv6 address with their prefix lengths on `ifname` in
/// `ns` (the IPv6 one without duplicate address detection, usable at once).
fn addresses(
    ns: &str,
    ifname: &str,
    (v4, len4): (Ipv4Addr, u8),
    (v6, len6): (Ipv6Addr, u8),
) -> Result<(), RunError> {
    ip(
        Some(ns),
        &["addr", "add", &format!("{v4}/{len4}"), "dev", ifname],
    )?;
    ip(
        Some(ns),
        &[
            "addr",
            "add",
            &format!("{v6}/{len6}"),
            "dev",
            ifname,
            "nodad",
        ],
    )
}

/// A host route in `ns` to `to` through `via`, from `from` where given.
fn route(ns: &str, to: IpAddr, via: IpAddr, from: Option<IpAddr>) -> Result<(), RunError> {
    let host = if to.is_ipv4() { 32 } else { 128 };
    let (to, via) = (format!("{to}/{host}"), via.to_string());
    let from = from.map(|f| f.to_string());
    let mut args = vec!["route", "add", to.as_str(), "via", via.as_str()];
    if let Some(f) = &from {
        args.extend(["src", f.as_str()]);
    }
    ip(Some(ns), &args)
}

/// The bottleneck on the router's egress `ifname`: the asked qdisc limited
/// to the path's buffer, under an HTB class at the link rate where there
/// is one (cake shapes by itself).
fn bottleneck(v: &Veth, r: &str, ifname: &str) -> Result<(), RunError> {
    let Some(qdisc) = &v.qdisc else {
        return Ok(());
    };
    let Some((kind, limit)) = bottleneck::kind_of(qdisc) else {
        return Err(setup(format!("--qdisc {qdisc}: not a qdisc plumb sets")));
    };
    let limit = bottleneck::limit_words(limit, v.queue_or_default(), v.mtu.unwrap_or(1500));
    let own: Vec<&str> = qdisc.split_whitespace().skip(1).collect();
    let rate = v.link_rate_bps.map(|r| format!("{r}bit"));
    let tc = |args: &[&str]| -> Result<(), RunError> {
        raw::command(Some(r), "tc", args)
            .map(|_| ())
            .map_err(|e| RunError::Setup {
                flag: Some(Field::Qdisc.flag()),
                message: format!(
                    "{} {qdisc}: {e}; a kernel without {kind} refuses it, and --kernel boots \
                     one that has it",
                    Field::Qdisc.flag()
                ),
            })
    };
    let mut leaf: Vec<&str> = vec!["qdisc", "add", "dev", ifname];
    match (&rate, kind) {
        (Some(rate), "cake") => leaf.extend(["root", "cake", "bandwidth", rate.as_str()]),
        (None, "cake") => leaf.extend(["root", "cake", "unlimited"]),
        (Some(rate), _) => {
            tc(&[
                "qdisc", "add", "dev", ifname, "root", "handle", "1:", "htb", "default", "1",
            ])?;
            // The test's class: its quantum only has to hold a packet.
            tc(&[
                "class", "add", "dev", ifname, "parent", "1:", "classid", "1:1", "htb", "rate",
                rate, "ceil", rate, "quantum", "1514",
            ])?;
            // plumb's control connection (CS6) passes ahead of the test's
            // queue: a session whose messages the bottleneck dropped again
            // and again would be lost to its peer's deadlines.
            tc(&[
                "class", "add", "dev", ifname, "parent", "1:", "classid", "1:2", "htb", "rate",
                "1mbit", "ceil", rate, "prio", "0", "quantum", "1514",
            ])?;
            let tos = format!("{:#x}", plumb_ctl::liveness::CONTROL_TOS);
            // A filter's priority holds one protocol.
            for (proto, prio, m, field) in
                [("ip", "1", "ip", "tos"), ("ipv6", "2", "ip6", "priority")]
            {
                tc(&[
                    "filter", "add", "dev", ifname, "parent", "1:", "protocol", proto, "prio",
                    prio, "u32", "match", m, field, &tos, "0xfc", "flowid", "1:2",
                ])?;
            }
            leaf.extend(["parent", "1:1", "handle", "10:", kind]);
        }
        (None, _) => leaf.extend(["root", kind]),
    }
    leaf.extend(limit.iter().map(String::as_str));
    leaf.extend(own);
    tc(&leaf)
}

/// The netem qdisc of each end for the path `v` asks for.
fn netem_of(v: &Veth) -> String {
    let mut netem = "netem".to_string();
    if let Some(d) = v.delay_us {
        netem.push_str(&format!(" delay {d}us"));
    }
    if let Some(l) = v.loss_ppm {
        netem.push_str(&format!(" loss {}%", l as f64 / 10_000.0));
    }
    if let Some(r) = v.link_rate_bps.filter(|_| v.qdisc.is_none()) {
        // netem's limit counts packets: the queue in packets of the MTU.
        let mtu = u64::from(v.mtu.unwrap_or(1500));
        let limit = (v.queue_or_default() / mtu).max(1);
        netem.push_str(&format!(" rate {r}bit limit {limit}"));
    }
    netem
}

/// Whether this kernel has netem: tried on the loopback of namespace `ns`
/// (this run's own) and taken off again.
fn netem_works(ns: &str) -> bool {
    let tc = |args: &[&str]| {
        let all: Vec<&str> = ["-n", ns].iter().chain(args).copied().collect();
        raw::command(None, "tc", &all).is_ok()
    };
    let works = tc(&["qdisc", "add", "dev", "lo", "root", "netem"]);
    if works {
        tc(&["qdisc", "del", "dev", "lo", "root"]);
    }
    works
}

/// A TUN device in each namespace, for plumb's delay line.
fn tun_pair(v: &Veth, client_ns: &str, server_ns: &str) -> Result<(Tun, Tun), RunError> {
    if let Some(c) = &v.path_cpus {
        crate::cpus_here(c, Field::PathCpus, "this host")?;
    }
    // Whole offloaded segments pass fastest; a loss or a bottleneck must
    // see each packet of the wire.
    let offload = if v.loss_ppm.is_none() && v.link_rate_bps.is_none() {
        Offload::Segments
    } else {
        Offload::None
    };
    let tun_in = |ns: &str, name: &str| {
        let _inside = raw::enter_netns(ns)?;
        Tun::create(name, offload)
    };
    let client = tun_in(client_ns, CLIENT_IF).map_err(line_failed)?;
    let server = tun_in(server_ns, SERVER_IF).map_err(line_failed)?;
    Ok((client, server))
}

fn line_failed(e: std::io::Error) -> RunError {
    setup(format!("{} plumb: {e}", Field::Emulator.flag()))
}

/// plumb's delay line between the two devices, under the path `v` asks for.
fn delay_line(v: &Veth, client: Tun, server: Tun) -> Result<DelayLine, RunError> {
    let law = PathLaw {
        delay_ns: v.delay_us.unwrap_or(0) * 1000,
        loss_ppm: v.loss_ppm.unwrap_or(0),
        rate_bps: v.link_rate_bps,
        queue_bytes: v.queue_or_default(),
        seed: seed(),
    };
    let cpus = v.path_cpus.as_ref().map(|c| c.cpus().to_vec());
    DelayLine::start(client, server, law, cpus).map_err(line_failed)
}

/// A seed for the delay line's losses, different at every run; the record
/// keeps it.
fn seed() -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    t.as_nanos() as u64 ^ (u64::from(std::process::id()) << 32)
}

fn ip(ns: Option<&str>, args: &[&str]) -> Result<(), RunError> {
    let mut all: Vec<&str> = Vec::new();
    if let Some(n) = ns {
        all.extend(["-n", n]);
    }
    all.extend_from_slice(args);
    raw::command(None, "ip", &all)
        .map(|_| ())
        .map_err(|e| setup(format!("--topology veth: {e}")))
}

/// The namespaces `--topology veth` made whose plumb process is gone (or all
/// of them with `all`), and whose owner, by the pid in the name.
pub fn leftovers(all: bool) -> Vec<String> {
    let Ok(dir) = std::fs::read_dir("/run/netns") else {
        return Vec::new();
    };
    let mut out: Vec<String> = dir
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| {
            let Some(rest) = n.strip_prefix("plumb-") else {
                return false;
            };
            let Some((pid, end)) = rest.split_once('-') else {
                return false;
            };
            let Ok(pid) = pid.parse::<u32>() else {
                return false;
            };
            (end == "client" || end == "server" || end == "router")
                && (all || (pid != std::process::id() && raw::process_start(pid).is_none()))
        })
        .collect();
    out.sort();
    out
}

/// Removes the namespaces `leftovers` names; returns those removed and the
/// errors.
pub fn down(all: bool) -> (Vec<String>, Vec<String>) {
    let mut removed = Vec::new();
    let mut failed = Vec::new();
    for ns in leftovers(all) {
        match raw::command(None, "ip", &["netns", "del", &ns]) {
            Ok(_) => removed.push(ns),
            Err(e) => failed.push(format!("{ns}: {e}")),
        }
    }
    (removed, failed)
}
