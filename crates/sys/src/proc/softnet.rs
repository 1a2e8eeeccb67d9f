use crate::ParseError;
use plumb_samples::SoftnetCounts;
use std::io;

const SOFTNET: &str = "/proc/net/softnet_stat";

// Columns are hexadecimal, one row per online CPU, at the index the
// kernel prints them (net/core/net-procfs.c): 0 processed, 1 dropped,
// 2 time_squeeze, 3-8 zeros kept for old readers, 9 received_rps,
// 10 flow_limit_count, 11 backlog length and, since Linux 5.10, 12 the CPU's
// number; before that, rows are online CPUs in order and the row's index
// stands in for it.
const COL_CPU: usize = 12;

pub fn parse_softnet(text: &str) -> Result<Vec<SoftnetCounts>, ParseError> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .enumerate()
        .map(|(i, line)| {
            let cols: Vec<&str> = line.split_ascii_whitespace().collect();
            let hex = |c: usize, what: &str| -> Result<u64, ParseError> {
                let v = cols.get(c).ok_or_else(|| {
                    ParseError::new(
                        SOFTNET,
                        i + 1,
                        format!("{what}: only {} columns", cols.len()),
                    )
                })?;
                u64::from_str_radix(v, 16).map_err(|_| {
                    ParseError::new(SOFTNET, i + 1, format!("{what}: '{v}' is not hexadecimal"))
                })
            };
            Ok(SoftnetCounts {
                cpu: match cols.len() > COL_CPU {
                    true => hex(COL_CPU, "cpu")? as u32,
                    false => i as u32,
                },
                processed: hex(0, "processed")?,
                dropped: hex(1, "dropped")?,
                time_squeeze: hex(2, "time_squeeze")?,
                received_rps: hex(9, "received_rps")?,
                flow_limit_count: hex(10, "flow_limit_count")?,
            })
        })
        .collect()
}

pub fn read_softnet() -> io::Result<Vec<SoftnetCounts>> {
    Ok(parse_softnet(&std::fs::read_to_string(SOFTNET)?)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_of_a_current_and_an_old_kernel() {
        let now = "09cba966 00000000 00000069 00000000 00000000 00000000 00000000 00000000 00000000 00045064 00000000 00000000 00000000 00000000 00000000\n\
                   06c3c76a 00000002 0000005c 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000007 00000000 00000003 00000000 00000000\n";
        let rows = parse_softnet(now).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(
            rows[0],
            SoftnetCounts {
                cpu: 0,
                processed: 0x09cb_a966,
                dropped: 0,
                time_squeeze: 0x69,
                received_rps: 0x45064,
                flow_limit_count: 0,
            }
        );
        // The CPU column, not the row: CPUs 1 and 2 are offline.
        assert_eq!(
            (rows[1].cpu, rows[1].dropped, rows[1].flow_limit_count),
            (3, 2, 7)
        );
        // Linux 4.x: 11 columns, rows in CPU order.
        let old = "0000a000 00000000 00000001 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000\n\
                   0000b000 00000000 00000002 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000\n";
        let rows = parse_softnet(old).unwrap();
        assert_eq!(
            (rows[1].cpu, rows[1].processed, rows[1].time_squeeze),
            (1, 0xb000, 2)
        );
        assert!(parse_softnet("0000a000 00000000\n").is_err());
        assert!(parse_softnet("0000a00g 0 0 0 0 0 0 0 0 0 0\n").is_err());
    }

    #[test]
    fn the_live_file_has_a_row_per_online_cpu() {
        let rows = read_softnet().unwrap();
        let online = crate::proc::online_cpus().unwrap();
        assert_eq!(rows.len(), online.len());
        assert!(rows.iter().any(|r| r.processed > 0), "{rows:?}");
    }
}
