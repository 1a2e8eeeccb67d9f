use crate::ParseError;
use plumb_samples::Sockstat;
use std::io;

const SOCKSTAT: &str = "/proc/net/sockstat";

/// /proc/net/sockstat: a line per protocol, `NAME: key value key value
/// ...` (net/ipv4/proc.c). Protocols and keys plumb does not keep are
/// skipped; a value that is not a number is an error naming it.
pub fn parse_sockstat(text: &str) -> Result<Sockstat, ParseError> {
    let mut s = Sockstat::default();
    for (i, line) in text.lines().enumerate() {
        let Some((proto, rest)) = line.split_once(':') else {
            continue;
        };
        let words: Vec<&str> = rest.split_ascii_whitespace().collect();
        for pair in words.chunks(2) {
            let [key, value] = pair else {
                return Err(ParseError::new(
                    SOCKSTAT,
                    i + 1,
                    format!("{proto}: '{}' has no value", pair[0]),
                ));
            };
            let slot = match (proto, *key) {
                ("sockets", "used") => &mut s.sockets_used,
                ("TCP", "inuse") => &mut s.tcp_inuse,
                ("TCP", "orphan") => &mut s.tcp_orphan,
                ("TCP", "tw") => &mut s.tcp_tw,
                ("TCP", "alloc") => &mut s.tcp_alloc,
                ("TCP", "mem") => &mut s.tcp_mem_pages,
                ("UDP", "inuse") => &mut s.udp_inuse,
                ("UDP", "mem") => &mut s.udp_mem_pages,
                _ => continue,
            };
            *slot = super::num(SOCKSTAT, i + 1, &format!("{proto} {key}"), value)?;
        }
    }
    Ok(s)
}

pub fn read_sockstat() -> io::Result<Sockstat> {
    Ok(parse_sockstat(&std::fs::read_to_string(SOCKSTAT)?)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_levels_of_a_current_kernel() {
        let text = "sockets: used 172\n\
                    TCP: inuse 6 orphan 1 tw 3 alloc 8 mem 209\n\
                    UDP: inuse 3 mem 2\n\
                    UDPLITE: inuse 0\n\
                    RAW: inuse 0\n\
                    FRAG: inuse 0 memory 0\n";
        assert_eq!(
            parse_sockstat(text).unwrap(),
            Sockstat {
                sockets_used: 172,
                tcp_inuse: 6,
                tcp_orphan: 1,
                tcp_tw: 3,
                tcp_alloc: 8,
                tcp_mem_pages: 209,
                udp_inuse: 3,
                udp_mem_pages: 2,
            }
        );
    }

    #[test]
    fn a_value_that_is_not_a_number_is_named() {
        let e = parse_sockstat("sockets: used 1\nTCP: inuse x\n").unwrap_err();
        assert!(e.to_string().contains("TCP inuse"), "{e}");
        assert!(
            e.to_string().contains("line 2") || e.to_string().contains(":2"),
            "{e}"
        );
        let e = parse_sockstat("TCP: inuse\n").unwrap_err();
        assert!(e.to_string().contains("'inuse' has no value"), "{e}");
    }
}
