//! Human renderings of the units plumb reports in. Sizes are binary
//! (8K = 8192 bytes, as netperf and iperf3 read them); rates are decimal bits
//! per second (10G = 10^10 bit/s), as network engineers quote them. Every
//! rendering (run summary, comparison, sweep report, listings) formats its
//! numbers here, so a unit reads the same wherever it is printed.

use plumb_spec::Spec;
use serde::{Deserialize, Serialize};

/// The headline metric of a test point: bulk workloads are measured in bits
/// per second, request/response ones in transactions per second. A
/// comparison may judge a point on a figure of its probes instead (`check
/// --decide-on`): a latency in ms, or the responsiveness in round trips a
/// minute; their costs stay per transaction, the probes' unit of work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Metric {
    Throughput,
    Tps,
    Latency,
    Rpm,
}

impl Metric {
    pub fn of(spec: &Spec) -> Metric {
        if spec.is_transactional() {
            Metric::Tps
        } else {
            Metric::Throughput
        }
    }

    /// Its name in JSON and CSV: `throughput`, `tps`.
    pub fn name(self) -> &'static str {
        match self {
            Metric::Throughput => "throughput",
            Metric::Tps => "tps",
            Metric::Latency => "latency",
            Metric::Rpm => "rpm",
        }
    }

    /// `bit/s`, `tx/s`.
    pub fn unit(self) -> &'static str {
        match self {
            Metric::Throughput => "bit/s",
            Metric::Tps => "tx/s",
            Metric::Latency => "ms",
            Metric::Rpm => "RPM",
        }
    }

    /// Its name over a table or plot: `throughput`, `transactions/s`.
    pub fn title(self) -> &'static str {
        match self {
            Metric::Throughput => "throughput",
            Metric::Tps => "transactions/s",
            Metric::Latency => "latency",
            Metric::Rpm => "responsiveness",
        }
    }

    /// A value in its unit: `9.41 Gbit/s`, `52.1 k tx/s`.
    pub fn format(self, v: f64) -> String {
        match self {
            Metric::Throughput => format_bits_per_sec(v),
            Metric::Tps => format_tx_rate(v),
            Metric::Latency => format!("{} ms", sig3(v)),
            Metric::Rpm => format!("{} RPM", sig3(v)),
        }
    }

    /// A round value in its unit, as an axis tick is labelled: `5 Gbit/s`
    /// rather than the `5.00 Gbit/s` three significant digits would make of
    /// it, `2.5 Gbit/s`, `20 k tx/s`.
    pub fn format_round(self, v: f64) -> String {
        match self {
            Metric::Throughput => format_bits_per_sec_exact(v),
            Metric::Tps => format!("{} tx/s", scale_with(v, " ", trimmed)),
            Metric::Latency => format!("{} ms", trimmed(v)),
            Metric::Rpm => format!("{} RPM", trimmed(v)),
        }
    }

    /// Whether more of it is better: less latency is.
    pub fn higher_is_better(self) -> bool {
        self != Metric::Latency
    }

    /// What a CPU cost of this metric counts.
    pub fn cost_unit(self) -> &'static str {
        match self {
            Metric::Throughput => "CPU seconds per GB",
            Metric::Tps | Metric::Latency | Metric::Rpm => "CPU microseconds per transaction",
        }
    }

    /// The unit of a function's time in a profile, per unit of work, and
    /// what CPU-seconds per unit of work (per byte-GB or per transaction)
    /// are multiplied by to be in it.
    pub fn profile_unit(self) -> (&'static str, f64) {
        match self {
            Metric::Throughput => ("ms/GB", 1e3),
            Metric::Tps | Metric::Latency | Metric::Rpm => ("µs/tx", 1e6),
        }
    }

    /// The work of an iteration this metric divides costs by: GB received,
    /// or transactions.
    pub fn work(self, it: &crate::Iteration) -> f64 {
        match self {
            Metric::Throughput => it.transfer.received_bytes as f64 / 1e9,
            Metric::Tps | Metric::Latency | Metric::Rpm => it.client.transactions as f64,
        }
    }

    /// What a count of events (migrations, drops) per unit of work counts.
    pub fn events_unit(self) -> &'static str {
        match self {
            Metric::Throughput => "events per GB",
            Metric::Tps | Metric::Latency | Metric::Rpm => "events per million transactions",
        }
    }
}

impl std::fmt::Display for Metric {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.name())
    }
}

/// `9.41 Gbit/s`, `512 Mbit/s`, `0 bit/s`.
pub fn format_bits_per_sec(bps: f64) -> String {
    let (v, unit) = scale_decimal(bps);
    format!("{} {unit}bit/s", sig3(v))
}

/// A rate that is a setting or a round figure rather than a measurement,
/// without rounding it to three digits or padding it with zeros:
/// `15 Gbit/s`, `2.5 Mbit/s`, `1.234 Gbit/s`, `0 bit/s`.
pub fn format_bits_per_sec_exact(bps: f64) -> String {
    let (v, unit) = scale_decimal(bps);
    format!("{} {unit}bit/s", trimmed(v))
}

/// `941 tx/s`, `52.1 k tx/s`, `1.23 M tx/s`.
pub fn format_tx_rate(v: f64) -> String {
    format!("{} tx/s", scaled(v, " "))
}

/// 941, 52.1k, 1.23M (with `sep` between the digits and the prefix).
pub fn scaled(v: f64, sep: &str) -> String {
    scale_with(v, sep, sig3)
}

fn scale_with(v: f64, sep: &str, digits: fn(f64) -> String) -> String {
    if v.abs() >= 1e6 {
        format!("{}{sep}M", digits(v / 1e6))
    } else if v.abs() >= 1e3 {
        format!("{}{sep}k", digits(v / 1e3))
    } else {
        digits(v)
    }
}

/// `0.42 s`, `12.3 s`, `123 s`.
pub fn format_seconds(s: f64) -> String {
    if s >= 100.0 {
        format!("{s:.0} s")
    } else if s >= 10.0 {
        format!("{s:.1} s")
    } else {
        format!("{s:.2} s")
    }
}

/// `41.2 us`.
pub fn format_micros(seconds: f64) -> String {
    format!("{} us", sig3(seconds * 1e6))
}

/// A latency in microseconds as the latency tables show it: `41.2`.
pub fn format_latency_us(us: f64) -> String {
    format!("{us:.1}")
}

/// CPU-seconds per second of a window (a load of one CPU is 1): `0.125`.
pub fn format_cpu_load(v: f64) -> String {
    format!("{v:.3}")
}

/// A share of a whole: 0.123 -> `12.3%`.
pub fn format_share(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

/// The relative half-width of an interval: 0.012 -> `±1.2 %`.
pub fn format_half_width(w: f64) -> String {
    format!("±{:.1} %", w * 100.0)
}

/// A relative change: 0.123 -> `+12.3%`.
pub fn format_change(x: f64) -> String {
    format!("{:+.1}%", x * 100.0)
}

/// CPU seconds per GB or microseconds per transaction. User time on
/// loopback is often a few milliseconds per GB, and "0.00 -> 0.00, +41 %"
/// would read as noise: small costs keep four decimals.
pub fn format_cpu_cost(v: f64) -> String {
    if v != 0.0 && v.abs() < 0.01 {
        format!("{v:.4}")
    } else {
        sig3(v)
    }
}

/// `1.50 GiB`, `8 KiB`, `256 B`.
pub fn format_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut i = 0;
    while v >= 1024.0 && i + 1 < UNITS.len() {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{bytes} B")
    } else {
        format!("{} {}", sig3(v), UNITS[i])
    }
}

fn scale_decimal(v: f64) -> (f64, &'static str) {
    let a = v.abs();
    if a >= 1e12 {
        (v / 1e12, "T")
    } else if a >= 1e9 {
        (v / 1e9, "G")
    } else if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e3 {
        (v / 1e3, "K")
    } else {
        (v, "")
    }
}

/// Up to three decimals, without trailing zeros: 5, 2.5, 0.125.
pub fn trimmed(v: f64) -> String {
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".into()
    } else {
        s.into()
    }
}

/// Three significant digits without scientific notation: 9.41, 94.1, 941.
pub fn sig3(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0".to_string()
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_scale() {
        assert_eq!(format_bits_per_sec(9.41e9), "9.41 Gbit/s");
        assert_eq!(format_bits_per_sec(512e6), "512 Mbit/s");
        assert_eq!(format_bits_per_sec(0.0), "0 bit/s");
    }

    #[test]
    fn transaction_rates_scale() {
        assert_eq!(format_tx_rate(941.0), "941 tx/s");
        assert_eq!(format_tx_rate(52_100.0), "52.1 k tx/s");
        assert_eq!(Metric::Tps.format(1.234e6), "1.23 M tx/s");
        assert_eq!(Metric::Throughput.format(9.41e9), "9.41 Gbit/s");
    }

    #[test]
    fn round_figures_lose_the_zeros_of_three_digits() {
        assert_eq!(format_bits_per_sec_exact(15e9), "15 Gbit/s");
        assert_eq!(format_bits_per_sec_exact(2.5e6), "2.5 Mbit/s");
        assert_eq!(format_bits_per_sec_exact(0.0), "0 bit/s");
        assert_eq!(Metric::Throughput.format_round(5e9), "5 Gbit/s");
        assert_eq!(Metric::Tps.format_round(20_000.0), "20 k tx/s");
        assert_eq!(Metric::Tps.format_round(0.0), "0 tx/s");
        assert_eq!(trimmed(0.125), "0.125");
        assert_eq!(trimmed(-0.0001), "0");
    }

    #[test]
    fn bytes_scale() {
        assert_eq!(format_bytes(256), "256 B");
        assert_eq!(format_bytes(8192), "8.00 KiB");
        assert_eq!(format_bytes(3 * 1024 * 1024 * 1024 / 2), "1.50 GiB");
    }
}
