use super::num;
use crate::ParseError;
use std::io;

const SOFTIRQS: &str = "/proc/softirqs";

/// Network softirq counts of one CPU since boot.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SoftirqRow {
    pub cpu: u32,
    pub net_rx: u64,
    pub net_tx: u64,
}

/// The NET_RX and NET_TX rows of /proc/softirqs, one entry per column of the
/// header (the kernel lists every possible CPU, online or not).
pub fn parse_softirqs(text: &str) -> Result<Vec<SoftirqRow>, ParseError> {
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    let Some((_, header)) = lines.next() else {
        return Err(ParseError::new(SOFTIRQS, 1, "empty file"));
    };
    let mut rows = header
        .split_ascii_whitespace()
        .map(|col| {
            let id = col.strip_prefix("CPU").ok_or_else(|| {
                ParseError::new(SOFTIRQS, 1, format!("header column '{col}' is not CPUn"))
            })?;
            Ok(SoftirqRow {
                cpu: num(SOFTIRQS, 1, "header", id)?,
                ..SoftirqRow::default()
            })
        })
        .collect::<Result<Vec<_>, ParseError>>()?;
    let (mut saw_rx, mut saw_tx) = (false, false);
    for (i, line) in lines {
        let lineno = i + 1;
        let mut fields = line.split_ascii_whitespace();
        let label = fields.next().unwrap_or_default();
        let is_rx = match label {
            "NET_RX:" => true,
            "NET_TX:" => false,
            _ => continue,
        };
        let values: Vec<&str> = fields.collect();
        if values.len() != rows.len() {
            return Err(ParseError::new(
                SOFTIRQS,
                lineno,
                format!(
                    "{label} has {} values for {} CPUs",
                    values.len(),
                    rows.len()
                ),
            ));
        }
        for (row, value) in rows.iter_mut().zip(values) {
            let count = num(SOFTIRQS, lineno, label, value)?;
            if is_rx {
                row.net_rx = count;
            } else {
                row.net_tx = count;
            }
        }
        saw_rx |= is_rx;
        saw_tx |= !is_rx;
    }
    if !(saw_rx && saw_tx) {
        return Err(ParseError::new(SOFTIRQS, 1, "no NET_RX or no NET_TX row"));
    }
    Ok(rows)
}

pub fn read_softirqs() -> io::Result<Vec<SoftirqRow>> {
    Ok(parse_softirqs(&std::fs::read_to_string(SOFTIRQS)?)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "                    CPU0       CPU1       CPU2       CPU3       
          HI:          1          0          0          2
       TIMER:    3528466    2879564    2886312    2990153
      NET_TX:        561        119        204         96
      NET_RX:    1298331     145602     150188     140055
       BLOCK:      76431      56230      63508      54627
    IRQ_POLL:          0          0          0          0
     TASKLET:       1283         26         10         47
       SCHED:    3197004    2693011    2669386    2728457
     HRTIMER:         10          0          2          0
         RCU:    2040231    1898532    1918126    1898416
";

    #[test]
    fn parses_four_cpus() {
        let rows = parse_softirqs(SAMPLE).unwrap();
        assert_eq!(rows.len(), 4);
        assert_eq!(
            rows[0],
            SoftirqRow {
                cpu: 0,
                net_rx: 1298331,
                net_tx: 561
            }
        );
        assert_eq!(
            rows[3],
            SoftirqRow {
                cpu: 3,
                net_rx: 140055,
                net_tx: 96
            }
        );
    }

    #[test]
    fn rejects_short_rows_and_missing_rows() {
        let short = SAMPLE.replace("140055", "");
        let e = parse_softirqs(&short).unwrap_err();
        assert_eq!(e.line, 5);
        let no_rx: String = SAMPLE
            .lines()
            .filter(|l| !l.contains("NET_RX"))
            .map(|l| format!("{l}\n"))
            .collect();
        assert!(parse_softirqs(&no_rx).is_err());
        assert!(parse_softirqs("").is_err());
    }

    #[test]
    fn live_has_a_row_per_online_cpu() {
        let rows = read_softirqs().unwrap();
        let online = crate::proc::online_cpus().unwrap();
        for cpu in online.cpus() {
            assert!(rows.iter().any(|r| r.cpu == *cpu), "no row for cpu{cpu}");
        }
    }
}
