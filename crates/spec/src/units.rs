//! Parsers for the values users type. Sizes are binary (8K = 8192, as netperf
//! and iperf3 read them); rates are decimal bits per second (10G = 10^10 bit/s);
//! durations take s, ms, us, m and h.

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

const SIZE_FORMS: &str = "use bytes like 256, or 8K, 64KiB, 1M, 1MiB, 1G";
const RATE_FORMS: &str = "use bits per second like 500M, 10G, 2.5G, 100Mbit";
const DURATION_FORMS: &str = "use 10s, 500ms, 2m, 1h (a bare number is seconds)";

fn split_number(s: &str) -> (&str, &str) {
    let idx = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    (&s[..idx], s[idx..].trim())
}

/// `256`, `8K`, `8k`, `64KiB`, `1M`, `1MiB`, `1G` → bytes (binary multiples).
pub fn parse_size(s: &str) -> Result<u64, UnitError> {
    let err = || UnitError {
        value: s.to_string(),
        what: "a size",
        accepted: SIZE_FORMS,
    };
    let t = s.trim();
    let (num, suffix) = split_number(t);
    if num.is_empty() {
        return Err(err());
    }
    let mult: u64 = match suffix {
        "" | "B" | "b" => 1,
        "K" | "k" | "KiB" | "Ki" | "KB" | "kB" => 1 << 10,
        "M" | "m" | "MiB" | "Mi" | "MB" => 1 << 20,
        "G" | "g" | "GiB" | "Gi" | "GB" => 1 << 30,
        _ => return Err(err()),
    };
    let v: f64 = num.parse().map_err(|_| err())?;
    let bytes = v * mult as f64;
    if !bytes.is_finite() || bytes < 0.0 || bytes > u64::MAX as f64 || bytes.fract() != 0.0 {
        return Err(err());
    }
    Ok(bytes as u64)
}

/// `500M`, `10G`, `2.5G`, `100Mbit`, `1e9` → bits per second (decimal).
pub fn parse_rate(s: &str) -> Result<u64, UnitError> {
    let err = || UnitError {
        value: s.to_string(),
        what: "a rate",
        accepted: RATE_FORMS,
    };
    let t = s.trim();
    let (num, mut suffix) = split_number(t);
    if num.is_empty() {
        return Err(err());
    }
    for tail in ["bit/s", "bps", "bit", "b/s"] {
        if let Some(rest) = suffix.strip_suffix(tail) {
            suffix = rest;
            break;
        }
    }
    let mult = match suffix {
        "" => 1e0,
        "K" | "k" => 1e3,
        "M" | "m" => 1e6,
        "G" | "g" => 1e9,
        "T" | "t" => 1e12,
        _ => return Err(err()),
    };
    let v: f64 = num.parse().map_err(|_| err())?;
    let bps = v * mult;
    if !bps.is_finite() || bps < 1.0 || bps > u64::MAX as f64 {
        return Err(err());
    }
    Ok(bps.round() as u64)
}

/// `10s`, `500ms`, `250us`, `2m`, `1h`, `10` → milliseconds.
pub fn parse_duration(s: &str) -> Result<u64, UnitError> {
    let err = || UnitError {
        value: s.to_string(),
        what: "a duration",
        accepted: DURATION_FORMS,
    };
    let t = s.trim();
    let (num, suffix) = split_number(t);
    if num.is_empty() {
        return Err(err());
    }
    let ms_per: f64 = match suffix {
        "" | "s" | "sec" => 1000.0,
        "ms" => 1.0,
        "us" | "µs" => 0.001,
        "m" | "min" => 60_000.0,
        "h" => 3_600_000.0,
        _ => return Err(err()),
    };
    let v: f64 = num.parse().map_err(|_| err())?;
    let ms = v * ms_per;
    if !ms.is_finite() || !(0.0..=1e15).contains(&ms) {
        return Err(err());
    }
    Ok(ms.round() as u64)
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

/// A socket buffer size: a fixed number of bytes, or left to the kernel's
/// autotuning.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
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

    #[test]
    fn sizes() {
        assert_eq!(parse_size("256").unwrap(), 256);
        assert_eq!(parse_size("8K").unwrap(), 8192);
        assert_eq!(parse_size("8k").unwrap(), 8192);
        assert_eq!(parse_size("128K").unwrap(), 131072);
        assert_eq!(parse_size("1M").unwrap(), 1 << 20);
        assert_eq!(parse_size("1MiB").unwrap(), 1 << 20);
        assert_eq!(parse_size("1.5K").unwrap(), 1536);
        assert!(parse_size("").is_err());
        assert!(parse_size("K").is_err());
        assert!(parse_size("8X").is_err());
        assert!(parse_size("-1").is_err());
        assert!(parse_size("0.3").is_err());
        let e = parse_size("8Q").unwrap_err().to_string();
        assert!(e.contains("'8Q'") && e.contains("8K"), "{e}");
    }

    #[test]
    fn rates() {
        assert_eq!(parse_rate("500M").unwrap(), 500_000_000);
        assert_eq!(parse_rate("10G").unwrap(), 10_000_000_000);
        assert_eq!(parse_rate("2.5G").unwrap(), 2_500_000_000);
        assert_eq!(parse_rate("100Mbit").unwrap(), 100_000_000);
        assert_eq!(parse_rate("1000").unwrap(), 1000);
        assert!(parse_rate("fast").is_err());
        assert!(parse_rate("0").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10s").unwrap(), 10_000);
        assert_eq!(parse_duration("10").unwrap(), 10_000);
        assert_eq!(parse_duration("500ms").unwrap(), 500);
        assert_eq!(parse_duration("2m").unwrap(), 120_000);
        assert_eq!(parse_duration("0").unwrap(), 0);
        assert!(parse_duration("10 parsecs").is_err());
    }

    #[test]
    fn buf_sizes() {
        assert_eq!("auto".parse::<BufSize>().unwrap(), BufSize::Auto);
        assert_eq!("8K".parse::<BufSize>().unwrap(), BufSize::Bytes(8192));
        assert_eq!(BufSize::Bytes(8192).to_string(), "8K");
        assert!("big".parse::<BufSize>().is_err());
    }
}
