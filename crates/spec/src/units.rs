//! Parsers for the values users type, one per unit, shared by every flag
//! and experiment key that takes that unit. The rule (docs/units.md):
//!
//! - sizes are bytes; K, M, G are powers of 1024 (8K = 8192, as netperf and
//!   iperf3 read them), with an optional B or iB: `256`, `8k`, `64KiB`,
//!   `128KB`, `1MB`;
//! - rates are bits per second; K, M, G, T are powers of 1000
//!   (10G = 10^10 bit/s), with an optional `bit`, `bit/s`, `bps` or `b/s`:
//!   `500M`, `10Gbps`, `100Mbit`. A capital B alone (`Bps`, `B/s`) would be
//!   bytes and is refused;
//! - times take ns, us (µs), ms, s (sec), m (min) and h;
//! - counts (transactions per second, flows) take K and M, powers of 1000.
//!
//! Letters are read case-insensitively everywhere, and a number may be
//! separated from its unit by spaces.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// A value that did not parse, with the accepted forms.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("'{value}' is not {what}; {accepted}")]
pub struct UnitError {
    pub value: String,
    pub what: &'static str,
    pub accepted: &'static str,
}

impl UnitError {
    fn new(value: &str, what: &'static str, accepted: &'static str) -> UnitError {
        UnitError {
            value: value.to_string(),
            what,
            accepted,
        }
    }
}

const SIZE_FORMS: &str = "use bytes like 256, or 8K, 64KiB, 128KB, 1M, 1G (powers of 1024)";
const RATE_FORMS: &str = "use bits per second like 500M, 10G, 2.5Gbps, 100Mbit (powers of 1000)";
const DURATION_FORMS: &str = "use 10s, 500ms, 2m, 1h (a bare number is seconds)";
const DELAY_FORMS: &str = "use a time like 10ms or 500us (a bare number is ms; at most 10s)";
const COUNT_FORMS: &str = "use a whole number like 500, 10k or 1M (powers of 1000)";

fn split_number(s: &str) -> (&str, &str) {
    let idx = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    (&s[..idx], s[idx..].trim())
}

/// The number and the lower-cased unit of `s`, or None without a number.
fn number_and_unit(s: &str) -> Option<(f64, String)> {
    let (num, unit) = split_number(s.trim());
    if num.is_empty() {
        return None;
    }
    Some((num.parse().ok()?, unit.to_ascii_lowercase()))
}

/// `256`, `8K`, `8k`, `64KiB`, `128KB`, `1M`, `1MiB`, `1G` → bytes (binary
/// multiples).
pub fn parse_size(s: &str) -> Result<u64, UnitError> {
    let err = || UnitError::new(s, "a size", SIZE_FORMS);
    let (v, unit) = number_and_unit(s).ok_or_else(err)?;
    let unit = unit.strip_suffix('b').unwrap_or(&unit);
    let unit = unit
        .strip_suffix('i')
        .filter(|u| !u.is_empty())
        .unwrap_or(unit);
    let mult: u64 = match unit {
        "" => 1,
        "k" => 1 << 10,
        "m" => 1 << 20,
        "g" => 1 << 30,
        _ => return Err(err()),
    };
    let bytes = v * mult as f64;
    if !bytes.is_finite() || bytes < 0.0 || bytes > u64::MAX as f64 || bytes.fract() != 0.0 {
        return Err(err());
    }
    Ok(bytes as u64)
}

/// `500M`, `10G`, `2.5G`, `100Mbit`, `10Gbps` → bits per second (decimal).
pub fn parse_rate(s: &str) -> Result<u64, UnitError> {
    let err = || UnitError::new(s, "a rate", RATE_FORMS);
    let (_, raw) = split_number(s.trim());
    // Bytes per second written the usual way: a bit rate of that number
    // would be eight times off.
    if ["B", "Bps", "B/s"].iter().any(|b| raw.ends_with(b)) {
        return Err(err());
    }
    let (v, unit) = number_and_unit(s).ok_or_else(err)?;
    let mut unit = unit.as_str();
    for tail in ["bit/s", "bits", "bps", "bit", "b/s"] {
        if let Some(rest) = unit.strip_suffix(tail) {
            unit = rest;
            break;
        }
    }
    let mult = match unit {
        "" => 1e0,
        "k" => 1e3,
        "m" => 1e6,
        "g" => 1e9,
        "t" => 1e12,
        _ => return Err(err()),
    };
    let bps = v * mult;
    if !bps.is_finite() || bps < 1.0 || bps > u64::MAX as f64 {
        return Err(err());
    }
    Ok(bps.round() as u64)
}

/// A time in nanoseconds; a bare number is in `bare_ns` units.
fn parse_time_ns(s: &str, bare_ns: f64) -> Option<f64> {
    let (v, unit) = number_and_unit(s)?;
    let per: f64 = match unit.as_str() {
        "" => bare_ns,
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" | "sec" | "secs" => 1e9,
        "m" | "min" | "mins" => 60e9,
        "h" | "hr" | "hour" | "hours" => 3600e9,
        _ => return None,
    };
    Some(v * per).filter(|ns| ns.is_finite() && *ns >= 0.0)
}

/// `10s`, `500ms`, `250us`, `2m`, `1h`, `10` → milliseconds.
pub fn parse_duration(s: &str) -> Result<u64, UnitError> {
    parse_time_ns(s, 1e9)
        .map(|ns| ns / 1e6)
        .filter(|ms| *ms <= 1e15)
        .map(|ms| ms.round() as u64)
        .ok_or_else(|| UnitError::new(s, "a duration", DURATION_FORMS))
}

/// The longest netem delay plumb asks for, in microseconds.
pub const MAX_DELAY_US: u64 = 10_000_000;

/// A netem delay: `10ms`, `500us`, `0.2s`, `10` (ms) → microseconds (at
/// most 10 s).
pub fn parse_delay_us(s: &str) -> Result<u64, UnitError> {
    parse_time_ns(s, 1e6)
        .map(|ns| ns / 1e3)
        .filter(|us| *us <= MAX_DELAY_US as f64)
        .map(|us| us.round() as u64)
        .ok_or_else(|| UnitError::new(s, "a delay", DELAY_FORMS))
}

/// `true`, `on`, `yes` or `false`, `off`, `no`, in any case: a switch's
/// value in an experiment file or a `--set`.
pub fn parse_switch(s: &str) -> Result<bool, String> {
    match s.to_ascii_lowercase().as_str() {
        "true" | "on" | "yes" => Ok(true),
        "false" | "off" | "no" => Ok(false),
        _ => Err(format!("'{s}' is not true or false")),
    }
}

/// `50us`, `50`, `1ms` → microseconds (a bare number is in µs): what
/// busy-polling options take.
pub fn parse_micros(s: &str) -> Result<u64, UnitError> {
    parse_time_ns(s, 1e3)
        .map(|ns| ns / 1e3)
        .filter(|us| *us <= f64::from(u32::MAX))
        .map(|us| us.round() as u64)
        .ok_or_else(|| {
            UnitError::new(
                s,
                "a time in microseconds",
                "use a time like 50us or 1ms (a bare number is us)",
            )
        })
}

/// A loss: `1%`, `0.5%`, `0.01` (percent) → parts per million.
pub fn parse_loss_ppm(s: &str) -> Result<u32, UnitError> {
    s.trim()
        .trim_end_matches('%')
        .trim()
        .parse::<f64>()
        .ok()
        .filter(|p| p.is_finite() && (0.0..=100.0).contains(p))
        .map(|p| (p * 10_000.0).round() as u32)
        .ok_or_else(|| UnitError::new(s, "a loss", "use a percentage like 1% or 0.5%"))
}

/// `500`, `10k`, `1M`, `2.5k` → a whole count (decimal multiples).
pub fn parse_count(s: &str) -> Result<u64, UnitError> {
    let err = || UnitError::new(s, "a count", COUNT_FORMS);
    let (v, unit) = number_and_unit(s).ok_or_else(err)?;
    let mult = match unit.as_str() {
        "" => 1e0,
        "k" => 1e3,
        "m" => 1e6,
        _ => return Err(err()),
    };
    let n = v * mult;
    if !n.is_finite() || n > u64::MAX as f64 || n.fract() != 0.0 {
        return Err(err());
    }
    Ok(n as u64)
}

/// Iterations of a test point: `N`, or `MIN..MAX` (1 to 1000 each).
pub fn parse_iterations(s: &str) -> Result<(u32, u32), String> {
    let bad =
        || format!("'{s}' is not an iteration count; use N or MIN..MAX like 3..10 (1 to 1000)");
    let num = |t: &str| {
        t.trim()
            .parse::<u32>()
            .ok()
            .filter(|n| (1..=1000).contains(n))
    };
    let (min, max) = match s.split_once("..") {
        Some((a, b)) => (num(a).ok_or_else(bad)?, num(b).ok_or_else(bad)?),
        None => {
            let n = num(s).ok_or_else(bad)?;
            (n, n)
        }
    };
    if min > max {
        return Err(format!(
            "'{s}': MIN is larger than MAX; use MIN..MAX like 3..10"
        ));
    }
    Ok((min, max))
}

/// `8K` for 8192, `1M` for 1 MiB, `1000` for 1000.
pub fn show_size(bytes: u64) -> String {
    for (shift, unit) in [(30, "G"), (20, "M"), (10, "K")] {
        if bytes >= 1 << shift && bytes.is_multiple_of(1 << shift) {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    bytes.to_string()
}

/// `10G` for 10^10 bit/s, `2500K` for 2.5 Mbit/s, `999` for 999: the
/// shortest form [`parse_rate`] reads back to the same rate.
pub fn show_rate(bps: u64) -> String {
    for (div, unit) in [
        (1_000_000_000_000, "T"),
        (1_000_000_000, "G"),
        (1_000_000, "M"),
        (1000, "K"),
    ] {
        if bps >= div && bps.is_multiple_of(div) {
            return format!("{}{unit}", bps / div);
        }
    }
    bps.to_string()
}

/// `10s`, `1h`, `2m`, `500ms`: a time in milliseconds as [`parse_duration`]
/// reads it.
pub fn show_ms(ms: u64) -> String {
    for (div, unit) in [(3_600_000, "h"), (60_000, "m"), (1000, "s")] {
        if ms >= div && ms.is_multiple_of(div) {
            return format!("{}{unit}", ms / div);
        }
    }
    format!("{ms}ms")
}

/// A socket buffer size: a fixed number of bytes, or left to the kernel's
/// autotuning.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(try_from = "String", into = "String")]
#[schemars(extend("pattern" = "^(auto|[0-9]+[KMG]?)$"))]
pub enum BufSize {
    #[default]
    Auto,
    Bytes(u64),
}

impl FromStr for BufSize {
    type Err = UnitError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.trim().eq_ignore_ascii_case("auto") {
            return Ok(BufSize::Auto);
        }
        parse_size(s).map(BufSize::Bytes).map_err(|e| UnitError {
            accepted: "use 'auto' or bytes like 8K, 64K, 4M",
            what: "a buffer size",
            ..e
        })
    }
}

impl fmt::Display for BufSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BufSize::Auto => f.write_str("auto"),
            BufSize::Bytes(n) => f.write_str(&show_size(*n)),
        }
    }
}

impl TryFrom<String> for BufSize {
    type Error = UnitError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<BufSize> for String {
    fn from(b: BufSize) -> String {
        b.to_string()
    }
}

/// A confidence target `LEVEL:WIDTH` in percent (`95:2.5`: the 95 % interval
/// of the mean within ±2.5 %) → (level, half-width) as fractions.
pub fn parse_confidence(s: &str) -> Result<(f64, f64), String> {
    let bad = || {
        format!("'{s}' is not a confidence target; use LEVEL:WIDTH in percent like 95:2.5 (level 50-99.9, width above 0)")
    };
    let (l, w) = s.split_once(':').ok_or_else(bad)?;
    let level: f64 = l.trim().trim_end_matches('%').parse().map_err(|_| bad())?;
    let width: f64 = w.trim().trim_end_matches('%').parse().map_err(|_| bad())?;
    if !((50.0..=99.9).contains(&level) && width > 0.0 && width <= 100.0) {
        return Err(bad());
    }
    Ok((level / 100.0, width / 100.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each of `good` reads as its value and each of `bad` is refused.
    #[track_caller]
    fn reads<T: PartialEq + std::fmt::Debug, E>(
        parse: impl Fn(&str) -> Result<T, E>,
        good: &[(&str, T)],
        bad: &[&str],
    ) {
        for (text, want) in good {
            assert_eq!(parse(text).ok().as_ref(), Some(want), "{text}");
        }
        for text in bad {
            assert!(parse(text).is_err(), "{text} was read");
        }
    }

    #[test]
    fn sizes() {
        reads(
            parse_size,
            &[
                ("256", 256),
                ("8K", 8192),
                ("8k", 8192),
                ("128K", 131072),
                ("1M", 1 << 20),
                ("1MiB", 1 << 20),
                ("1.5K", 1536),
                ("64kb", 64 << 10),
                ("128KB", 128 << 10),
                ("1MB", 1 << 20),
                ("1mib", 1 << 20),
                ("2 G", 2 << 30),
                ("100b", 100),
            ],
            &["", "K", "8X", "-1", "0.3", "-5", "8i"],
        );
        let e = parse_size("8Q").unwrap_err().to_string();
        assert!(e.contains("'8Q'") && e.contains("8K"), "{e}");
    }

    #[test]
    fn rates() {
        reads(
            parse_rate,
            &[
                ("500M", 500_000_000),
                ("10G", 10_000_000_000),
                ("2.5G", 2_500_000_000),
                ("100Mbit", 100_000_000),
                ("1000", 1000),
                ("10Gbps", 10_000_000_000),
                ("10gbit/s", 10_000_000_000),
                ("1K", 1000),
                ("100 MBIT", 100_000_000),
            ],
            // Bytes per second are refused rather than guessed at.
            &["fast", "0", "-1G", "10GB", "10GB/s", "1MBps"],
        );
    }

    #[test]
    fn durations() {
        reads(
            parse_duration,
            &[
                ("10s", 10_000),
                ("10", 10_000),
                ("500ms", 500),
                ("2m", 120_000),
                ("0", 0),
                ("1sec", 1000),
                ("1S", 1000),
                ("10MS", 10),
                ("2min", 120_000),
                ("1500000ns", 2),
            ],
            &["10 parsecs", "-1s"],
        );
    }

    #[test]
    fn delays_losses_counts_and_iterations() {
        reads(
            parse_delay_us,
            &[
                ("10ms", 10_000),
                ("10", 10_000),
                ("500us", 500),
                ("0.2s", 200_000),
            ],
            &["11s"],
        );
        reads(parse_loss_ppm, &[("0.5%", 5000)], &["101%"]);
        reads(
            parse_count,
            &[("10k", 10_000), ("1M", 1_000_000), ("2.5K", 2500)],
            &["1.5", "-1"],
        );
        reads(
            parse_iterations,
            &[("3..10", (3, 10)), ("4", (4, 4))],
            &["10..3", "0"],
        );
    }

    #[test]
    fn shown_values_read_back() {
        for bps in [1, 999, 1000, 2_500_000, 10_000_000_000, 8_000_000_000_000] {
            assert_eq!(parse_rate(&show_rate(bps)).unwrap(), bps);
        }
        for ms in [0, 1, 200, 1000, 90_000, 120_000, 3_600_000] {
            assert_eq!(parse_duration(&show_ms(ms)).unwrap(), ms);
        }
        assert_eq!(show_ms(10_000), "10s");
        assert_eq!(show_rate(10_000_000_000), "10G");
    }

    #[test]
    fn buf_sizes() {
        assert_eq!("auto".parse::<BufSize>().unwrap(), BufSize::Auto);
        assert_eq!("8K".parse::<BufSize>().unwrap(), BufSize::Bytes(8192));
        assert_eq!(BufSize::Bytes(8192).to_string(), "8K");
        assert!("big".parse::<BufSize>().is_err());
    }
}
