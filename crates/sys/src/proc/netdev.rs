use super::num;
use crate::ParseError;
use plumb_samples::NetDevCounters;
use std::io;

const NET_DEV: &str = "/proc/net/dev";

/// One interface of the reader's network namespace, with its counters
/// since it came up.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetDevRow {
    pub name: String,
    pub counters: NetDevCounters,
}

pub fn parse_net_dev(text: &str) -> Result<Vec<NetDevRow>, ParseError> {
    // Two header lines, then "name: 16 numbers" (a long name may touch
    // its first number).
    text.lines()
        .enumerate()
        .skip(2)
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, line)| {
            let lineno = i + 1;
            let (name, rest) = line
                .split_once(':')
                .ok_or_else(|| ParseError::new(NET_DEV, lineno, "no ':' after the name"))?;
            let v: Vec<&str> = rest.split_ascii_whitespace().collect();
            if v.len() < 16 {
                return Err(ParseError::new(
                    NET_DEV,
                    lineno,
                    format!("{} values, 16 expected", v.len()),
                ));
            }
            let n = |c: usize, what: &str| num(NET_DEV, lineno, what, v[c]);
            Ok(NetDevRow {
                name: name.trim().to_string(),
                counters: NetDevCounters {
                    rx_bytes: n(0, "rx bytes")?,
                    rx_packets: n(1, "rx packets")?,
                    rx_errors: n(2, "rx errs")?,
                    rx_dropped: n(3, "rx drop")?,
                    rx_fifo: n(4, "rx fifo")?,
                    tx_bytes: n(8, "tx bytes")?,
                    tx_packets: n(9, "tx packets")?,
                    tx_errors: n(10, "tx errs")?,
                    tx_dropped: n(11, "tx drop")?,
                    tx_fifo: n(12, "tx fifo")?,
                },
            })
        })
        .collect()
}

pub fn read_net_dev() -> io::Result<Vec<NetDevRow>> {
    Ok(parse_net_dev(&std::fs::read_to_string(NET_DEV)?)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interfaces_and_their_counters() {
        let text = "Inter-|   Receive                                                |  Transmit\n \
                    face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n    \
                    lo: 1899537011821 257923331    0    0    0     0          0         0 1899537011821 257923331    0    0    0     0       0          0\n  \
                    eth0: 339720991   14402    1    2    3     0          0         0   774777    8471    4    5    6     0       0          0\n\
                    enp129s0f0np0:12 1 0 0 0 0 0 0 13 2 0 0 0 0 0 0\n";
        let rows = parse_net_dev(text).unwrap();
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[0].name, "lo");
        assert_eq!(rows[0].counters.rx_bytes, 1_899_537_011_821);
        assert_eq!(rows[0].counters.tx_packets, 257_923_331);
        assert_eq!(
            (
                rows[1].counters.rx_errors,
                rows[1].counters.rx_dropped,
                rows[1].counters.rx_fifo
            ),
            (1, 2, 3)
        );
        assert_eq!(
            (
                rows[1].counters.tx_errors,
                rows[1].counters.tx_dropped,
                rows[1].counters.tx_fifo
            ),
            (4, 5, 6)
        );
        assert_eq!(
            (
                rows[2].name.as_str(),
                rows[2].counters.rx_bytes,
                rows[2].counters.tx_bytes
            ),
            ("enp129s0f0np0", 12, 13)
        );
        assert!(parse_net_dev("h\nh\n  lo: 1 2 3\n").is_err());
        assert!(parse_net_dev("h\nh\n  lo 1 2 3\n").is_err());
    }

    #[test]
    fn the_live_file_has_loopback() {
        let rows = read_net_dev().unwrap();
        assert!(rows.iter().any(|r| r.name == "lo"), "{rows:?}");
    }
}
