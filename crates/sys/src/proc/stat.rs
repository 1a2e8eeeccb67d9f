use super::num;
use crate::ParseError;
use std::io;

const STAT: &str = "/proc/stat";

/// One CPU's line of /proc/stat, in clock ticks (see
/// [`clock_ticks_per_sec`](super::clock_ticks_per_sec)).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct StatCpu {
    pub cpu: u32,
    pub user: u64,
    pub nice: u64,
    pub system: u64,
    pub idle: u64,
    pub iowait: u64,
    pub irq: u64,
    pub softirq: u64,
    pub steal: u64,
}

// user nice system idle have been there since 2.4; iowait, irq, softirq and
// steal came later, so only the first four are required.
const REQUIRED_COLUMNS: usize = 4;

/// The per-CPU `cpuN` lines of /proc/stat (the aggregate `cpu` line is
/// skipped). Offline CPUs have no line, so the result has one row per online
/// CPU.
pub fn parse_stat(text: &str) -> Result<Vec<StatCpu>, ParseError> {
    let mut rows = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let lineno = i + 1;
        let mut fields = line.split_ascii_whitespace();
        let Some(label) = fields.next() else { continue };
        let Some(id) = label.strip_prefix("cpu") else {
            continue;
        };
        if id.is_empty() {
            continue;
        }
        let cpu = num(STAT, lineno, "CPU number", id)?;
        let mut ticks = [0u64; 8];
        let mut columns = 0;
        for (slot, field) in ticks.iter_mut().zip(&mut fields) {
            *slot = num(STAT, lineno, label, field)?;
            columns += 1;
        }
        if columns < REQUIRED_COLUMNS {
            return Err(ParseError::new(
                STAT,
                lineno,
                format!("{label} has {columns} columns, expected at least {REQUIRED_COLUMNS}"),
            ));
        }
        let [user, nice, system, idle, iowait, irq, softirq, steal] = ticks;
        rows.push(StatCpu {
            cpu,
            user,
            nice,
            system,
            idle,
            iowait,
            irq,
            softirq,
            steal,
        });
    }
    if rows.is_empty() {
        // A truncated read would otherwise look like a machine with no CPUs.
        return Err(ParseError::new(STAT, 1, "no cpuN lines"));
    }
    Ok(rows)
}

pub fn read_stat() -> io::Result<Vec<StatCpu>> {
    Ok(parse_stat(&std::fs::read_to_string(STAT)?)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "\
cpu  2255 34 2290 22625563 6290 127 456 0 0 0
cpu0 1132 34 1441 11311718 3675 127 438 0 0 0
cpu1 1123 0 849 11313845 2614 0 18 7 0 0
intr 114930548 113199788 3 0 5 263 0 4 [... 3 more]
ctxt 1990473
btime 1062191376
processes 2915
procs_running 1
procs_blocked 0
softirq 183433 0 21755 12 39 1137 231 21459 2263
";

    #[test]
    fn parses_per_cpu_lines_only() {
        let rows = parse_stat(SAMPLE).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(
            rows[1],
            StatCpu {
                cpu: 1,
                user: 1123,
                nice: 0,
                system: 849,
                idle: 11313845,
                iowait: 2614,
                irq: 0,
                softirq: 18,
                steal: 7,
            }
        );
    }

    #[test]
    fn tolerates_old_kernels_without_trailing_columns() {
        let rows = parse_stat("cpu 1 2 3 4\ncpu0 1 2 3 4\ncpu3 5 6 7 8 9\n").unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].idle, 4);
        assert_eq!(rows[0].steal, 0);
        assert_eq!(rows[1].cpu, 3);
        assert_eq!(rows[1].iowait, 9);
    }

    #[test]
    fn rejects_garbage() {
        let e = parse_stat("cpu 1 2 3 4\ncpu0 1 2 3 4\ncpu1 1 x 3 4\n").unwrap_err();
        assert_eq!(e.line, 3);
        assert!(e.to_string().starts_with("/proc/stat line 3: "), "{e}");
        assert!(parse_stat("cpu0 1 2 3\n").is_err());
        assert!(parse_stat("").is_err());
    }

    #[test]
    fn live_one_row_per_online_cpu() {
        let rows = read_stat().unwrap();
        let online = crate::proc::online_cpus().unwrap();
        assert_eq!(rows.len(), online.len());
        for row in &rows {
            assert!(online.contains(row.cpu), "cpu{} is not online", row.cpu);
        }
    }
}
