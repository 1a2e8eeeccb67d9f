use crate::ParseError;
use std::collections::BTreeMap;
use std::io;

/// Counters of /proc/net/snmp (or, same format, /proc/net/netstat) keyed
/// `Group.Name`, e.g. `Tcp.RetransSegs`. Errors name /proc/net/snmp.
pub fn parse_snmp(text: &str) -> Result<BTreeMap<String, i64>, ParseError> {
    let mut out = BTreeMap::new();
    parse_into(text, "/proc/net/snmp", &mut out)?;
    Ok(out)
}

/// Both files read as a pair of lines per group, the names then the values:
/// `Tcp: RtoAlgorithm RtoMin ...` / `Tcp: 1 200 ...`.
fn parse_into(
    text: &str,
    file: &'static str,
    out: &mut BTreeMap<String, i64>,
) -> Result<(), ParseError> {
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    while let Some((i, names)) = lines.next() {
        let (group, names) = split_group(file, i + 1, names)?;
        let Some((j, values)) = lines.next() else {
            return Err(ParseError::new(
                file,
                i + 1,
                format!("{group}: header without a line of values"),
            ));
        };
        let (vgroup, values) = split_group(file, j + 1, values)?;
        if vgroup != group {
            return Err(ParseError::new(
                file,
                j + 1,
                format!("expected values for {group}, found {vgroup}"),
            ));
        }
        let names: Vec<&str> = names.split_ascii_whitespace().collect();
        let values: Vec<&str> = values.split_ascii_whitespace().collect();
        if names.len() != values.len() {
            return Err(ParseError::new(
                file,
                j + 1,
                format!("{group}: {} names but {} values", names.len(), values.len()),
            ));
        }
        for (name, value) in names.into_iter().zip(values) {
            // Counters are unsigned longs in the kernel but a few are signed
            // (Tcp.MaxConn is -1): i128 holds both, i64 is what we store.
            let v: i128 = value.parse().map_err(|_| {
                ParseError::new(
                    file,
                    j + 1,
                    format!("{group}.{name}: '{value}' is not a number"),
                )
            })?;
            let v = v.clamp(i64::MIN.into(), i64::MAX.into()) as i64;
            out.insert(format!("{group}.{name}"), v);
        }
    }
    Ok(())
}

fn split_group<'a>(
    file: &'static str,
    line: usize,
    text: &'a str,
) -> Result<(&'a str, &'a str), ParseError> {
    match text.split_once(':') {
        Some((group, rest)) if !group.is_empty() && !group.contains(' ') => Ok((group, rest)),
        _ => Err(ParseError::new(
            file,
            line,
            "line does not start with 'Group:'",
        )),
    }
}

/// /proc/net/snmp and /proc/net/netstat merged, of the network namespace of
/// the calling thread.
pub fn read_net_counters() -> io::Result<BTreeMap<String, i64>> {
    let mut out = BTreeMap::new();
    for (thread_path, fallback) in [
        ("/proc/thread-self/net/snmp", "/proc/net/snmp"),
        ("/proc/thread-self/net/netstat", "/proc/net/netstat"),
    ] {
        // /proc/net is /proc/self/net: the namespace of the main thread. A
        // worker that entered another namespace with setns() must read its
        // own, which only thread-self (Linux 3.17+) gives.
        let (path, text) = match std::fs::read_to_string(thread_path) {
            Ok(text) => (thread_path, text),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                (fallback, std::fs::read_to_string(fallback)?)
            }
            Err(e) => return Err(e),
        };
        parse_into(&text, path, &mut out)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SNMP: &str = "\
Ip: Forwarding DefaultTTL InReceives InHdrErrors InAddrErrors ForwDatagrams InUnknownProtos InDiscards InDelivers OutRequests OutDiscards OutNoRoutes ReasmTimeout ReasmReqds ReasmOKs ReasmFails FragOKs FragFails FragCreates OutTransmits
Ip: 1 64 8810373 0 0 0 0 0 8810371 8283641 0 40 0 0 0 0 0 0 0 8283641
Icmp: InMsgs InErrors InCsumErrors InDestUnreachs InTimeExcds InParmProbs InSrcQuenchs InRedirects InEchos InEchoReps InTimestamps InTimestampReps InAddrMasks InAddrMaskReps OutMsgs OutErrors OutRateLimitGlobal OutRateLimitHost OutDestUnreachs OutTimeExcds OutParmProbs OutSrcQuenchs OutRedirects OutEchos OutEchoReps OutTimestamps OutTimestampReps OutAddrMasks OutAddrMaskReps
Icmp: 45 0 0 45 0 0 0 0 0 0 0 0 0 0 45 0 0 0 45 0 0 0 0 0 0 0 0 0 0
IcmpMsg: InType3 OutType3
IcmpMsg: 45 45
Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens AttemptFails EstabResets CurrEstab InSegs OutSegs RetransSegs InErrs OutRsts InCsumErrors
Tcp: 1 200 120000 -1 23458 23011 463 120 14 8756193 9203817 1337 0 1190 0
Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors
Udp: 53741 45 0 53798 0 0 0 0 0
UdpLite: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors
UdpLite: 0 0 0 0 0 0 0 0 0
";

    const NETSTAT: &str = "\
TcpExt: SyncookiesSent SyncookiesRecv DelayedACKs DelayedACKLocked
TcpExt: 0 0 40211 3
IpExt: InNoRoutes InOctets OutOctets
IpExt: 0 18446744073709551615 -170141183460469231731687303715884105728
";

    #[test]
    fn parses_snmp_with_negative_maxconn() {
        let m = parse_snmp(SNMP).unwrap();
        assert_eq!(m["Tcp.MaxConn"], -1);
        assert_eq!(m["Tcp.RetransSegs"], 1337);
        assert_eq!(m["Ip.OutTransmits"], 8283641);
        assert_eq!(m["IcmpMsg.OutType3"], 45);
        assert_eq!(m["UdpLite.MemErrors"], 0);
    }

    #[test]
    fn parses_netstat_and_saturates() {
        let m = parse_snmp(NETSTAT).unwrap();
        assert_eq!(m["TcpExt.DelayedACKs"], 40211);
        assert_eq!(m["IpExt.InOctets"], i64::MAX);
        assert_eq!(m["IpExt.OutOctets"], i64::MIN);
    }

    #[test]
    fn count_mismatch_is_an_error() {
        let e = parse_snmp("Tcp: A B C\nTcp: 1 2\n").unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.to_string().contains("3 names but 2 values"), "{e}");
        assert!(parse_snmp("Tcp: A B\n").is_err());
        assert!(parse_snmp("Tcp: A B\nUdp: 1 2\n").is_err());
        assert!(parse_snmp("Tcp: A B\nTcp: 1 x\n").is_err());
        assert!(parse_snmp("no group here\n1 2\n").is_err());
    }

    #[test]
    fn live_counters_include_tcp_and_tcpext() {
        let m = read_net_counters().unwrap();
        assert!(m.contains_key("Tcp.RetransSegs"));
        assert!(m.contains_key("TcpExt.DelayedACKs"));
        assert_eq!(m["Tcp.MaxConn"], -1);
    }
}
