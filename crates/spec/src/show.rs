//! A spec as users read it: each field's value as it would be typed, and
//! the one-line summary that runs print and reports head their points with.

use crate::*;

impl Spec {
    /// A field's value as [`build`] reads it (`8K`, `auto`, `10G`, `10s`,
    /// `true`; `none` where unset), or None where the field has no value of
    /// its own in this spec (request fields of a stream, the path of
    /// loopback, fields that only set others).
    pub fn value_of(&self, field: Field) -> Option<String> {
        let or_none = |v: Option<String>| Some(v.unwrap_or_else(|| "none".into()));
        let rr = self.rr.as_ref();
        let veth = self.topology.as_ref().map(|Topology::Veth(v)| v);
        let writes = |w: &[u64]| {
            let parts: Vec<String> = w.iter().map(|n| n.to_string()).collect();
            parts.join(",")
        };
        match field {
            Field::Workload => Some(self.workload.to_string()),
            Field::Direction => Some(self.direction.to_string()),
            Field::Flows => Some(self.flows.to_string()),
            Field::Threads => Some(self.threads.to_string()),
            Field::MsgSize => rr.is_none().then(|| units::show_size(self.msg_size)),
            Field::ReqSize => rr.map(|r| units::show_size(r.req_size)),
            Field::RespSize => rr.map(|r| units::show_size(r.resp_size)),
            Field::Pipeline => rr.map(|r| r.pipeline.to_string()),
            Field::Rate => rr.and_then(|r| or_none(r.rate.map(|n| n.to_string()))),
            Field::ReqWrites => rr.map(|r| writes(&r.req_writes)),
            Field::RespWrites => rr.map(|r| writes(&r.resp_writes)),
            Field::Close => rr.and_then(|r| r.close.map(|c| c.to_string())),
            Field::Timeout => rr.and_then(|r| r.timeout_ms).map(units::show_ms),
            Field::ReqHeader
            | Field::ReqPayload
            | Field::RespHeader
            | Field::RespPayload
            | Field::Buffers => None,
            Field::Sndbuf => Some(self.socket.sndbuf.to_string()),
            Field::Rcvbuf => Some(self.socket.rcvbuf.to_string()),
            Field::Nodelay => Some(self.socket.nodelay.to_string()),
            Field::Cork => Some(self.socket.cork.to_string()),
            Field::Mss => or_none(self.socket.mss.map(|m| m.to_string())),
            Field::Cc => or_none(self.socket.cc.clone()),
            Field::PacingRate => or_none(self.socket.pacing_rate_bps.map(units::show_rate)),
            Field::Sock(o) => match (self.socket.table.get(o), o.desc().value) {
                (v, sockopt::Value::Switch) => Some(o.show(v.unwrap_or(0))),
                (v, _) => or_none(v.map(|n| o.show(n))),
            },
            Field::ZeroCopy => Some(self.zerocopy.to_string()),
            Field::Rx => Some(self.rx.to_string()),
            Field::ReadSize => or_none(self.read_size.map(units::show_size)),
            Field::SelfProbes => or_none(self.self_probes.map(|n| format!("{n}/s"))),
            Field::Io => Some(self.io.to_string()),
            Field::Family => Some(self.family.to_string()),
            Field::Duration => Some(units::show_ms(self.duration_ms)),
            Field::Warmup => Some(units::show_ms(self.warmup_ms)),
            Field::ClientCpus => or_none(self.client_cpus.as_ref().map(|c| c.to_string())),
            Field::ServerCpus => or_none(self.server_cpus.as_ref().map(|c| c.to_string())),
            Field::Topology => Some(if veth.is_some() { "veth" } else { "loopback" }.into()),
            Field::Mtu => veth.and_then(|v| or_none(v.mtu.map(|m| m.to_string()))),
            Field::Delay => veth.and_then(|v| or_none(v.delay_us.map(|d| format!("{d}us")))),
            Field::Loss => {
                veth.and_then(|v| or_none(v.loss_ppm.map(|p| format!("{}%", p as f64 / 10_000.0))))
            }
            Field::LinkRate => veth.and_then(|v| or_none(v.link_rate_bps.map(units::show_rate))),
            Field::Queue => veth.and_then(|v| or_none(v.queue_bytes.map(units::show_size))),
            Field::Emulator => veth.and_then(|v| or_none(v.emulator.map(|e| e.to_string()))),
            Field::PathCpus => {
                veth.and_then(|v| or_none(v.path_cpus.as_ref().map(|c| c.to_string())))
            }
            Field::Qdisc => veth.and_then(|v| or_none(v.qdisc.clone())),
            // Each part is a setting of its own; the summary lists them.
            Field::Part => None,
        }
    }

    /// One line that says what runs: `stream send 1 flow x 128K, ipv4, 10s`,
    /// then every other field that differs from the workload's default
    /// (`, sndbuf 64K, cc bbr, pacing 1G`).
    ///
    /// A run of parts names each of them after it (`; + part load: stream
    /// flows=4`).
    pub fn summary(&self) -> String {
        let mut line = self.own_summary();
        for p in &self.parts {
            line += &format!("; + {}", p.summary());
        }
        line
    }

    /// [`Spec::summary`] of the run's own workload, without its parts.
    pub fn own_summary(&self) -> String {
        let mut line = match (&self.topology, &self.server_host) {
            (Some(t), _) => format!("{}, {t}", self.summary_on_loopback()),
            (None, Some(host)) => format!("{}, to {host}", self.summary_on_loopback()),
            (None, None) => self.summary_on_loopback(),
        };
        if let Some(m) = &self.machine {
            line.push_str(&format!(", {m}"));
        }
        let defaults = Spec::defaults(self.workload);
        for &field in Field::ALL {
            if self.in_headline(field) {
                continue;
            }
            let (Some(v), d) = (self.value_of(field), defaults.value_of(field)) else {
                continue;
            };
            if Some(&v) == d.as_ref() {
                continue;
            }
            match v.as_str() {
                "true" => line += &format!(", {}", field.label()),
                "false" => line += &format!(", no {}", field.label()),
                _ => line += &format!(", {} {v}", field.label()),
            }
        }
        line
    }

    /// Fields the first part of the summary shows already, those that only
    /// set others, and the warm-up (the field table's `Shown` column).
    fn in_headline(&self, field: Field) -> bool {
        match field.shown() {
            Shown::Headline => true,
            Shown::Listed => false,
            Shown::HeadlineOfRr => self.rr.is_some(),
        }
    }

    fn summary_on_loopback(&self) -> String {
        let io = if self.io.is_epoll() {
            String::new()
        } else {
            format!(", io {}", self.io)
        };
        if let (Workload::UdpRr, Some(rr)) = (self.workload, &self.rr) {
            return format!(
                "udp-rr {} flow{} {}/{}{}, timeout {} ms, {} thread{}{}, {}, {}s",
                self.flows,
                if self.flows == 1 { "" } else { "s" },
                units::show_size(rr.req_size),
                units::show_size(rr.resp_size),
                outstanding(rr),
                rr.timeout_ms.unwrap_or(UDP_RR_TIMEOUT_MS),
                self.threads,
                if self.threads == 1 { "" } else { "s" },
                io,
                self.family,
                self.duration_ms as f64 / 1000.0
            );
        }
        if let Some(rr) = &self.rr {
            let writes = |w: &[u64]| {
                if w.len() > 1 {
                    let parts: Vec<String> = w.iter().map(|n| n.to_string()).collect();
                    format!(" in writes {}", parts.join("+"))
                } else {
                    String::new()
                }
            };
            return format!(
                "{} {} flow{} {}{}/{}{}{}{}, {} thread{}{}, {}, {}s",
                self.workload,
                self.flows,
                if self.flows == 1 { "" } else { "s" },
                units::show_size(rr.req_size),
                writes(&rr.req_writes),
                units::show_size(rr.resp_size),
                writes(&rr.resp_writes),
                rr.close.map_or(String::new(), |c| format!(", close {c}")) + &outstanding(rr),
                if self.socket.nodelay { ", nodelay" } else { "" },
                self.threads,
                if self.threads == 1 { "" } else { "s" },
                io,
                self.family,
                self.duration_ms as f64 / 1000.0
            );
        }
        let flows = if self.flows == 1 {
            "1 flow".to_string()
        } else {
            format!("{} flows", self.flows)
        };
        format!(
            "{} {} {} x {}{}{}, {} thread{}{}, {}, {}s",
            self.workload,
            self.direction,
            flows,
            units::show_size(self.msg_size),
            if self.zerocopy.is_none() {
                String::new()
            } else {
                format!(", zerocopy {}", self.zerocopy)
            },
            if self.rx.is_copy() {
                String::new()
            } else {
                format!(", rx {}", self.rx)
            },
            self.threads,
            if self.threads == 1 { "" } else { "s" },
            io,
            self.family,
            self.duration_ms as f64 / 1000.0
        )
    }
}

/// How many requests a flow keeps outstanding, or the open loop's rate: as
/// the headline shows it, empty for a closed loop of one.
fn outstanding(rr: &crate::RrSpec) -> String {
    match (rr.rate, rr.pipeline) {
        (Some(r), p) => format!(", open loop {r}/s (at most {p} outstanding per flow)"),
        (None, 1) => String::new(),
        (None, p) => format!(", pipeline {p}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_names_every_field_off_its_default() {
        let base = Spec::stream();
        assert_eq!(
            base.summary(),
            "stream send 1 flow x 128K, 1 thread, ipv4, 10s"
        );
        let mut paced = Spec::stream();
        paced.socket.pacing_rate_bps = Some(1_000_000_000);
        paced.socket.cc = Some("bbr".into());
        paced.socket.sndbuf = BufSize::Bytes(64 << 10);
        paced.socket.nodelay = true;
        assert_eq!(
            paced.summary(),
            "stream send 1 flow x 128K, 1 thread, ipv4, 10s, sndbuf 64K, nodelay, cc bbr, \
             pacing 1G"
        );
        let mut rr = Spec::rr();
        rr.socket.nodelay = true;
        assert_eq!(rr.summary(), "rr 1 flow 1/1, nodelay, 1 thread, ipv4, 10s");
    }

    #[test]
    fn values_shown_build_the_same_spec() {
        let mut s = Spec::crr();
        s.flows = 4;
        s.threads = 2;
        s.socket.pacing_rate_bps = Some(2_500_000);
        s.socket.sndbuf = BufSize::Bytes(8192);
        s.client_cpus = Some("0-1".parse().unwrap());
        s.topology = Some(Topology::Veth(Veth {
            mtu: Some(1500),
            delay_us: Some(2500),
            loss_ppm: Some(5000),
            link_rate_bps: Some(100_000_000),
            queue_bytes: Some(256 << 10),
            // A router's qdisc is netem's company, not the delay line's.
            emulator: Some(Emulator::Netem),
            path_cpus: Some("1".parse().unwrap()),
            qdisc: Some("fq_codel target 5ms".into()),
        }));
        let shown: Vec<(Field, String)> = Field::ALL
            .iter()
            .filter_map(|f| s.value_of(*f).map(|v| (*f, v)))
            .filter(|(_, v)| v != "none" && !v.is_empty())
            .collect();
        let settings: Vec<(Field, &str)> = shown.iter().map(|(f, v)| (*f, v.as_str())).collect();
        assert_eq!(build(&settings, Names::Keys).unwrap(), s);
    }
}
