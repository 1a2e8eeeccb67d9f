//! What a `plumb serve` lets its clients ask for: limits on a spec, checked
//! before anything starts, and the networks allowed to connect.

use plumb_samples::format_bits_per_sec;
use plumb_spec::units::{show_ms, show_size};
use plumb_spec::{BufSize, Field, Spec, Workload};
use std::net::IpAddr;

/// Bounds on a client's spec; None is no bound.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Limits {
    pub max_flows: Option<u32>,
    /// Bounds the window and the warm-up, each.
    pub max_duration_ms: Option<u64>,
    /// Bounds socket buffers and message, request and response sizes.
    pub max_buffer: Option<u64>,
    /// Bounds the total rate a test asks for, in bits/s, over all flows.
    pub max_rate_bps: Option<u64>,
}

impl Limits {
    /// The first limit `spec` is beyond, named with its allowed value.
    pub fn check(&self, spec: &Spec) -> Result<(), String> {
        let over = |flag: &str, asked: String, limit: &str, allowed: String| {
            Err(format!(
                "{flag} {asked} is over this server's limit {limit} {allowed}"
            ))
        };
        if let Some(max) = self.max_flows {
            if spec.all_flows() > max as u64 {
                return over(
                    Field::Flows.flag(),
                    match spec.parts.is_empty() {
                        true => spec.flows.to_string(),
                        false => format!("{} over the run's parts", spec.all_flows()),
                    },
                    "--max-flows",
                    max.to_string(),
                );
            }
        }
        for p in &spec.parts {
            self.check(&spec.part_spec(p))
                .map_err(|m| format!("part {}: {m}", p.name))?;
        }
        if let Some(max) = self.max_duration_ms {
            for (flag, ms) in [
                (Field::Duration.flag(), spec.duration_ms),
                (Field::Warmup.flag(), spec.warmup_ms),
            ] {
                if ms > max {
                    return over(flag, show_ms(ms), "--max-duration", show_ms(max));
                }
            }
        }
        if let Some(max) = self.max_buffer {
            let mut sizes: Vec<(&str, u64)> = Vec::new();
            for (flag, b) in [
                (Field::Sndbuf.flag(), spec.socket.sndbuf),
                (Field::Rcvbuf.flag(), spec.socket.rcvbuf),
            ] {
                if let BufSize::Bytes(n) = b {
                    sizes.push((flag, n));
                }
            }
            match &spec.rr {
                Some(rr) => {
                    sizes.push((Field::ReqSize.flag(), rr.req_size));
                    sizes.push((Field::RespSize.flag(), rr.resp_size));
                }
                None => sizes.push((Field::MsgSize.flag(), spec.msg_size)),
            }
            for (flag, n) in sizes {
                if n > max {
                    return over(flag, show_size(n), "--max-buffer", show_size(max));
                }
            }
        }
        if let Some(max) = self.max_rate_bps {
            let show = |b: u64| format_bits_per_sec(b as f64);
            let flows = spec.flows as u64;
            match offered(spec) {
                Offered::Unpaced(Workload::UdpStream) => {
                    return Err(format!(
                        "udp-stream sends unpaced, which is over this server's limit --max-rate {}",
                        show(max)
                    ));
                }
                Offered::Unpaced(_) => {
                    return Err(format!(
                        "an unpaced stream is over this server's limit --max-rate {}: \
                         ask for {} of at most {} per flow",
                        show(max),
                        Field::PacingRate.flag(),
                        show((max / flows.max(1)).max(8))
                    ));
                }
                Offered::At { field, per, total } if total > max => {
                    let asked = match field {
                        Field::PacingRate => {
                            format!("{} x {flows} flows = {}", show(per), show(total))
                        }
                        _ => format!("{per}/s ({})", show(total)),
                    };
                    return over(field.flag(), asked, "--max-rate", show(max));
                }
                _ => {}
            }
            // Each part keeps the limit (below); together they must too.
            let together: u64 = std::iter::once(spec.clone())
                .chain(spec.parts.iter().map(|p| spec.part_spec(p)))
                .map(|s| match offered(&s) {
                    Offered::At { total, .. } => total,
                    _ => 0,
                })
                .fold(0, u64::saturating_add);
            if together > max {
                return over(
                    Field::Part.flag(),
                    format!("{} over the run's parts", show(together)),
                    "--max-rate",
                    show(max),
                );
            }
        }
        Ok(())
    }
}

/// What a spec asks of the path, for the rate limit.
enum Offered {
    /// As fast as it goes: a stream without pacing, or udp-stream.
    Unpaced(Workload),
    /// At most `per` (a flow's pacing rate, or transactions per second)
    /// by `field`, `total` bits per second in all.
    At { field: Field, per: u64, total: u64 },
    /// Closed-loop transactions: as fast as the answers come.
    ClosedLoop,
}

fn offered(spec: &Spec) -> Offered {
    // Every workload is named, so that a new one is given its limit on
    // purpose.
    match (spec.workload, &spec.rr) {
        (Workload::Stream, _) => match spec.socket.pacing_rate_bps {
            None => Offered::Unpaced(Workload::Stream),
            Some(pacing) => Offered::At {
                field: Field::PacingRate,
                per: pacing,
                total: pacing.saturating_mul(spec.flows as u64),
            },
        },
        (Workload::UdpStream, _) => Offered::Unpaced(Workload::UdpStream),
        (Workload::Rr | Workload::Crr | Workload::UdpRr, Some(rr)) => match rr.rate {
            Some(tps) => Offered::At {
                field: Field::Rate,
                per: tps,
                total: tps
                    .saturating_mul(rr.req_size.saturating_add(rr.resp_size))
                    .saturating_mul(8),
            },
            None => Offered::ClosedLoop,
        },
        // Validation gives these their sizes; without them there is no
        // rate to check.
        (Workload::Rr | Workload::Crr | Workload::UdpRr, None) => Offered::ClosedLoop,
    }
}

/// An address block for --allow: `10.0.0.0/8`, `2001:db8::/32`, or one
/// address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    pub net: IpAddr,
    pub prefix: u8,
}

impl Cidr {
    pub fn parse(s: &str) -> Result<Cidr, String> {
        let bad = || {
            format!("'{s}' is not an address block; use 10.0.0.0/8, 2001:db8::/32 or one address")
        };
        let (ip, prefix) = match s.split_once('/') {
            Some((ip, p)) => (ip, Some(p)),
            None => (s, None),
        };
        let net: IpAddr = ip.trim().parse().map_err(|_| bad())?;
        let max = if net.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            Some(p) => p
                .trim()
                .parse::<u8>()
                .ok()
                .filter(|p| *p <= max)
                .ok_or_else(bad)?,
            None => max,
        };
        // ::ffff:a.b.c.d/104 is a.b.c.d/8: peers are compared as IPv4.
        let c = match net {
            IpAddr::V6(_) if net.to_canonical().is_ipv4() && prefix >= 96 => Cidr {
                net: net.to_canonical(),
                prefix: prefix - 96,
            },
            _ => Cidr { net, prefix },
        };
        if c.mask_of(c.net) != c.bits(c.net) {
            return Err(format!(
                "'{s}' has host bits set; did you mean {}/{}?",
                c.network(),
                c.prefix
            ));
        }
        Ok(c)
    }

    fn bits(&self, ip: IpAddr) -> u128 {
        match ip {
            IpAddr::V4(a) => u32::from(a) as u128,
            IpAddr::V6(a) => u128::from(a),
        }
    }

    fn mask_of(&self, ip: IpAddr) -> u128 {
        let width = if ip.is_ipv4() { 32 } else { 128 };
        let host = width - self.prefix as u32;
        let all = if width == 32 {
            u32::MAX as u128
        } else {
            u128::MAX
        };
        let mask = if host >= 128 {
            0
        } else {
            (all >> host) << host
        };
        self.bits(ip) & mask
    }

    fn network(&self) -> IpAddr {
        match self.net {
            IpAddr::V4(_) => IpAddr::V4((self.mask_of(self.net) as u32).into()),
            IpAddr::V6(_) => IpAddr::V6(self.mask_of(self.net).into()),
        }
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        ip.is_ipv4() == self.net.is_ipv4() && self.mask_of(ip) == self.bits(self.net)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_contain_what_they_should() {
        let c = Cidr::parse("198.18.0.0/15").unwrap();
        assert!(c.contains("198.19.255.1".parse().unwrap()));
        assert!(c.contains("::ffff:198.18.0.9".parse().unwrap()));
        assert!(!c.contains("198.20.0.1".parse().unwrap()));
        assert!(!c.contains("2001:2::1".parse().unwrap()));
        let c = Cidr::parse("2001:2::/48").unwrap();
        assert!(c.contains("2001:2:0:ffff::1".parse().unwrap()));
        assert!(!c.contains("2001:3::1".parse().unwrap()));
        let one = Cidr::parse("127.0.0.1").unwrap();
        assert!(one.contains("127.0.0.1".parse().unwrap()));
        assert!(!one.contains("127.0.0.2".parse().unwrap()));
        assert!(Cidr::parse("0.0.0.0/0")
            .unwrap()
            .contains("127.0.0.9".parse().unwrap()));
        assert!(Cidr::parse("::/0")
            .unwrap()
            .contains("::1".parse().unwrap()));
    }

    #[test]
    fn bad_blocks_are_named() {
        for s in ["10.0.0.0/33", "banana", "10.0.0.1/8", "::1/129", ""] {
            assert!(Cidr::parse(s).is_err(), "{s}");
        }
        assert!(Cidr::parse("10.0.0.1/8")
            .unwrap_err()
            .contains("10.0.0.0/8"));
    }

    #[test]
    fn each_limit_names_itself_and_its_value() {
        let mut s = Spec::stream();
        s.flows = 8;
        s.threads = 1;
        let l = Limits {
            max_flows: Some(4),
            ..Limits::default()
        };
        assert_eq!(
            l.check(&s).unwrap_err(),
            "--flows 8 is over this server's limit --max-flows 4"
        );
        let l = Limits {
            max_duration_ms: Some(5000),
            ..Limits::default()
        };
        s.duration_ms = 6000;
        assert!(l
            .check(&s)
            .unwrap_err()
            .contains("--duration 6s is over this server's limit --max-duration 5s"));
        let l = Limits {
            max_buffer: Some(64 << 10),
            ..Limits::default()
        };
        assert!(l
            .check(&s)
            .unwrap_err()
            .contains("--msg-size 128K is over this server's limit --max-buffer 64K"));
        let l = Limits {
            max_rate_bps: Some(1_000_000_000),
            ..Limits::default()
        };
        assert!(l.check(&s).unwrap_err().contains("--max-rate"));
        s.socket.pacing_rate_bps = Some(100_000_000);
        assert!(l.check(&s).is_ok());
        s.socket.pacing_rate_bps = Some(200_000_000);
        assert!(l.check(&s).unwrap_err().contains("--pacing-rate"));
        assert!(Limits::default().check(&s).is_ok());
    }
}
