//! Human renderings of the units plumb reports in. Sizes are binary
//! (8K = 8192 bytes, as netperf and iperf3 read them); rates are decimal bits
//! per second (10G = 10^10 bit/s), as network engineers quote them.

/// `9.41 Gbit/s`, `512 Mbit/s`, `0 bit/s`.
pub fn format_bits_per_sec(bps: f64) -> String {
    let (v, unit) = scale_decimal(bps);
    format!("{} {unit}bit/s", sig3(v))
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
    fn bytes_scale() {
        assert_eq!(format_bytes(256), "256 B");
        assert_eq!(format_bytes(8192), "8.00 KiB");
        assert_eq!(format_bytes(3 * 1024 * 1024 * 1024 / 2), "1.50 GiB");
    }
}
