//! Kernel symbols from /proc/kallsyms, modules included, to name the kernel
//! addresses of profile samples. The kernel shows the addresses only to
//! whom kernel.kptr_restrict (and, for perf, perf_event_paranoid) allows;
//! to everyone else they read as zeros.

use std::sync::OnceLock;

/// The text symbols of the running kernel, sorted by address.
pub struct KernelSymbols {
    /// Start address and name (`name [module]` for a module's).
    entries: Vec<(u64, String)>,
}

impl KernelSymbols {
    /// Parses the text of /proc/kallsyms: `address type name [module]`.
    pub fn parse(text: &str) -> KernelSymbols {
        let mut entries: Vec<(u64, String)> = text
            .lines()
            .filter_map(|l| {
                let mut f = l.split_whitespace();
                let addr = u64::from_str_radix(f.next()?, 16).ok()?;
                let kind = f.next()?;
                let name = f.next()?;
                // Text symbols only: an address in a sample is code.
                if addr == 0 || !matches!(kind, "t" | "T" | "w" | "W") {
                    return None;
                }
                Some(match f.next() {
                    Some(m) => (addr, format!("{name} {m}")),
                    None => (addr, name.to_string()),
                })
            })
            .collect();
        entries.sort_by_key(|e| e.0);
        KernelSymbols { entries }
    }

    /// The symbols of this host's kernel, read once per process.
    pub fn host() -> &'static KernelSymbols {
        static HOST: OnceLock<KernelSymbols> = OnceLock::new();
        HOST.get_or_init(|| {
            KernelSymbols::parse(&std::fs::read_to_string("/proc/kallsyms").unwrap_or_default())
        })
    }

    /// The function at `addr`: the last symbol starting at or below it.
    pub fn lookup(&self, addr: u64) -> Option<&str> {
        let i = self.entries.partition_point(|e| e.0 <= addr);
        (i > 0).then(|| self.entries[i - 1].1.as_str())
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// Whether /proc/kallsyms shows this process real addresses.
pub fn addresses_visible() -> bool {
    use std::io::BufRead;
    // The first lines tell: reading the whole file, megabytes, would not.
    std::fs::File::open("/proc/kallsyms")
        .map(|f| {
            std::io::BufReader::new(f)
                .lines()
                .take(100)
                .map_while(Result::ok)
                .any(|l| {
                    l.split_whitespace()
                        .next()
                        .is_some_and(|a| !a.trim_start_matches('0').is_empty())
                })
        })
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_takes_the_symbol_it_follows() {
        let k = KernelSymbols::parse(
            "ffffffff81000100 T tcp_sendmsg\n\
             ffffffff81000000 t net_rx_action\n\
             ffffffff81000200 D some_data\n\
             ffffffffc0001000 t veth_xmit\t[veth]\n\
             0000000000000000 T hidden\n",
        );
        assert_eq!(k.len(), 3);
        assert_eq!(k.lookup(0xffff_ffff_8100_0050), Some("net_rx_action"));
        assert_eq!(k.lookup(0xffff_ffff_8100_0100), Some("tcp_sendmsg"));
        // Data symbols do not end a function's range.
        assert_eq!(k.lookup(0xffff_ffff_8100_0250), Some("tcp_sendmsg"));
        assert_eq!(k.lookup(0xffff_ffff_c000_1010), Some("veth_xmit [veth]"));
        assert_eq!(k.lookup(0x1000), None);
    }
}
