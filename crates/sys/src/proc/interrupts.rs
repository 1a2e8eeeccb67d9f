//! /proc/interrupts, and which of its lines belong to a network interface's
//! device: the interrupts a NIC raises land on CPUs that the reader wants
//! named ("the NIC's interrupts landed on the application's CPU").

use super::num;
use crate::ParseError;
use std::io;
use std::path::Path;

const INTERRUPTS: &str = "/proc/interrupts";

/// One numbered IRQ: its count on each CPU of the header, and the rest of
/// its line (controller, hardware number, trigger, the handlers' names).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IrqLine {
    pub irq: u32,
    pub counts: Vec<u64>,
    pub desc: String,
}

/// One of the architecture's own lines, named rather than numbered (on
/// x86 `LOC` the local timer, `RES` and `CAL` the rescheduling and
/// function-call IPIs, `TLB` the shootdowns; on arm64 `IPI0`...): its
/// count on each CPU of the header and its description. A line with one
/// count for the whole host (x86's `ERR`, `MIS`) has it as the first CPU's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NamedLine {
    pub name: String,
    pub counts: Vec<u64>,
    pub desc: String,
}

/// The CPUs of the header (every possible CPU), the numbered IRQs, and
/// the architecture's own lines apart.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Interrupts {
    pub cpus: Vec<u32>,
    pub lines: Vec<IrqLine>,
    pub named: Vec<NamedLine>,
}

pub fn parse_interrupts(text: &str) -> Result<Interrupts, ParseError> {
    let mut lines = text.lines().enumerate();
    let Some((_, header)) = lines.next() else {
        return Err(ParseError::new(INTERRUPTS, 1, "empty file"));
    };
    let cpus = header
        .split_ascii_whitespace()
        .map(|c| {
            let id = c.strip_prefix("CPU").ok_or_else(|| {
                ParseError::new(INTERRUPTS, 1, format!("header column '{c}' is not CPUn"))
            })?;
            num(INTERRUPTS, 1, "header", id)
        })
        .collect::<Result<Vec<u32>, _>>()?;
    let (mut out, mut named) = (Vec::new(), Vec::new());
    for (i, line) in lines {
        let Some((label, rest)) = line.split_once(':') else {
            continue;
        };
        let label = label.trim();
        let mut rest = rest.trim_start();
        let mut counts = Vec::with_capacity(cpus.len());
        while counts.len() < cpus.len() {
            let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
            let Ok(n) = rest[..end].parse::<u64>() else {
                break;
            };
            counts.push(n);
            rest = rest[end..].trim_start();
        }
        let Ok(irq) = label.parse::<u32>() else {
            // An architecture's line without counts says nothing: left out.
            if !counts.is_empty() && !label.is_empty() {
                counts.resize(cpus.len(), 0);
                named.push(NamedLine {
                    name: label.to_string(),
                    counts,
                    desc: rest.trim_end().to_string(),
                });
            }
            continue;
        };
        if counts.is_empty() {
            return Err(ParseError::new(
                INTERRUPTS,
                i + 1,
                format!("IRQ {irq}: no counts"),
            ));
        }
        // A line may stop short of the header's CPUs (counts of CPUs that
        // were never online are sometimes left out): those took none.
        counts.resize(cpus.len(), 0);
        out.push(IrqLine {
            irq,
            counts,
            desc: rest.trim_end().to_string(),
        });
    }
    Ok(Interrupts {
        cpus,
        lines: out,
        named,
    })
}

impl Interrupts {
    /// Each named line's count over every CPU, since `before` (a line or a
    /// CPU `before` lacks counts from zero), for the lines that moved.
    pub fn named_since(&self, before: &Interrupts) -> std::collections::BTreeMap<String, u64> {
        self.named
            .iter()
            .filter_map(|l| {
                let was = before.named.iter().find(|b| b.name == l.name);
                let n: u64 = self
                    .cpus
                    .iter()
                    .zip(&l.counts)
                    .map(|(cpu, &n)| {
                        let k = before.cpus.iter().position(|c| c == cpu);
                        let b = was.zip(k).and_then(|(w, k)| w.counts.get(k)).copied();
                        n.saturating_sub(b.unwrap_or(0))
                    })
                    // Counts near u64::MAX are no kernel's, but a line of
                    // them must not panic the probe.
                    .fold(0u64, u64::saturating_add);
                (n > 0).then(|| (l.name.clone(), n))
            })
            .collect()
    }
}

pub fn read_interrupts() -> io::Result<Interrupts> {
    Ok(parse_interrupts(&std::fs::read_to_string(INTERRUPTS)?)?)
}

/// What sysfs says of the device behind a network interface: the names of
/// the device and of its parent (e.g. `virtio2` and `0000:00:03.0`, or the
/// PCI function alone) and the MSI vectors the kernel gave it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetDevice {
    pub names: Vec<String>,
    pub msi_irqs: Vec<u32>,
}

/// The device behind interface `name`, or None for a virtual interface (lo,
/// veth, a bridge, a TUN device): one with no device of its own, so with no
/// IRQs of its own either.
pub fn net_device(name: &str) -> Option<NetDevice> {
    let dev = std::fs::canonicalize(format!("/sys/class/net/{name}/device")).ok()?;
    let mut out = NetDevice::default();
    for d in [Some(dev.as_path()), dev.parent()].into_iter().flatten() {
        if let Some(n) = d.file_name().and_then(|n| n.to_str()) {
            out.names.push(n.to_string());
        }
        out.msi_irqs.extend(msi_irqs(d));
    }
    out.msi_irqs.sort_unstable();
    out.msi_irqs.dedup();
    Some(out)
}

fn msi_irqs(dev: &Path) -> Vec<u32> {
    std::fs::read_dir(dev.join("msi_irqs"))
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// The IRQs of `table` that belong to interface `name` on `device`: an MSI
/// vector of the device, or a line whose handler is named after the
/// interface (`eth0`, `eth0-TxRx-3`), after the device (`virtio2-input.0`)
/// or that names the device's bus address (`mlx5_comp3@pci:0000:81:00.0`,
/// `PCI-MSIX-0000:00:03.0`).
pub fn irqs_of(name: &str, device: &NetDevice, table: &Interrupts) -> Vec<u32> {
    let ours = |token: &str| {
        let token = token.trim_end_matches(',');
        let named = |n: &str| {
            token == n
                || token
                    .strip_prefix(n)
                    .is_some_and(|r| r.starts_with('-') || r.starts_with('@'))
        };
        named(name)
            || device.names.iter().any(|d| {
                named(d)
                    || token.ends_with(&format!("@pci:{d}"))
                    || token.ends_with(&format!("-{d}"))
            })
    };
    table
        .lines
        .iter()
        .filter(|l| {
            device.msi_irqs.binary_search(&l.irq).is_ok()
                || l.desc.split_ascii_whitespace().any(ours)
        })
        .map(|l| l.irq)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An Intel 82599 (ixgbe) with four queue pairs on an 8-CPU host.
    const IXGBE: &str = "            CPU0       CPU1       CPU2       CPU3       CPU4       CPU5       CPU6       CPU7       
   0:         44          0          0          0          0          0          0          0   IO-APIC   2-edge      timer
 120:     991032          0          0          0          0          0          0          0   PCI-MSI 1048576-edge      eth2-TxRx-0
 121:          0     870110          0          0          0          0          0          0   PCI-MSI 1048577-edge      eth2-TxRx-1
 122:          0          0     912345          0          0          0          0          0   PCI-MSI 1048578-edge      eth2-TxRx-2
 123:          0          0          0     899999          0          0          0          0   PCI-MSI 1048579-edge      eth2-TxRx-3
 124:          3          0          0          0          0          0          0          0   PCI-MSI 1048580-edge      eth2
 125:          0          0          0          0     500000          0          0          0   PCI-MSI 1050624-edge      eth20-TxRx-0
 NMI:         12         11         10          9          8          7          6          5   Non-maskable interrupts
 LOC:    1234567    1234566    1234565    1234564    1234563    1234562    1234561    1234560   Local timer interrupts
";

    /// A ConnectX-5 (mlx5): completion vectors named after the PCI function.
    const MLX5: &str = "            CPU0       CPU1       CPU2       CPU3
  98:          0          0          0          0  IR-PCI-MSIX-0000:81:00.0    0-edge      mlx5_async0@pci:0000:81:00.0
  99:      77777          0          0          0  IR-PCI-MSIX-0000:81:00.0    1-edge      mlx5_comp0@pci:0000:81:00.0
 100:          0      66666          0          0  IR-PCI-MSIX-0000:81:00.0    2-edge      mlx5_comp1@pci:0000:81:00.0
 101:          0          0          0          5  IR-PCI-MSIX-0000:81:00.1    1-edge      mlx5_comp0@pci:0000:81:00.1
";

    #[test]
    fn ixgbe_queues_and_not_a_longer_name() {
        let t = parse_interrupts(IXGBE).unwrap();
        assert_eq!(t.cpus, (0..8).collect::<Vec<_>>());
        assert_eq!(t.lines.len(), 7, "NMI and LOC are not numbered IRQs");
        assert_eq!(t.named.len(), 2);
        assert_eq!(t.named[1].name, "LOC");
        assert_eq!(t.named[1].desc, "Local timer interrupts");
        assert_eq!(t.named[1].counts[7], 1234560);
        assert_eq!(t.lines[2].counts[1], 870110);
        let dev = NetDevice {
            names: vec!["0000:02:00.0".into(), "0000:00:03.0".into()],
            msi_irqs: Vec::new(),
        };
        assert_eq!(irqs_of("eth2", &dev, &t), vec![120, 121, 122, 123, 124]);
        assert_eq!(irqs_of("eth20", &dev, &t), vec![125]);
    }

    /// A 2-CPU x86 guest's own lines, read twice: a one-count line, one
    /// without counts, and a CPU the first reading lacks.
    #[test]
    fn named_lines_sum_over_the_cpus_and_keep_those_that_moved() {
        let a = parse_interrupts(
            "           CPU0       CPU1
 LOC:    1000    2000   Local timer interrupts
 RES:      10      20   Rescheduling interrupts
 CAL:       5       5   Function call interrupts
 ERR:          0
 PIN:  Posted-interrupt notification event
",
        )
        .unwrap();
        let names: Vec<&str> = a.named.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names, ["LOC", "RES", "CAL", "ERR"], "PIN has no counts");
        assert_eq!(a.named[3].counts, [0, 0]);
        let b = parse_interrupts(
            "           CPU0       CPU1       CPU2
 LOC:    1250    2100     7   Local timer interrupts
 RES:      10      20     0   Rescheduling interrupts
 CAL:    4005       5     0   Function call interrupts
 TLB:       3       0     0   TLB shootdowns
 ERR:          0
",
        )
        .unwrap();
        let moved = b.named_since(&a);
        let got: Vec<(&str, u64)> = moved.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        assert_eq!(got, [("CAL", 4000), ("LOC", 357), ("TLB", 3)]);
        // A counter that went back (a CPU's line reset) counts as none.
        assert!(a.named_since(&b).is_empty());
        // Counts whose sum passes u64::MAX (the fuzzer made one) saturate.
        let huge = parse_interrupts(
            "           CPU0       CPU1
 CAL: 18446744073709551615 9443335234764   Function call interrupts
",
        )
        .unwrap();
        assert_eq!(huge.named_since(&Default::default())["CAL"], u64::MAX);
    }

    #[test]
    fn mlx5_by_pci_function_and_msi_vectors() {
        let t = parse_interrupts(MLX5).unwrap();
        let port0 = NetDevice {
            names: vec!["0000:81:00.0".into(), "0000:80:01.0".into()],
            msi_irqs: Vec::new(),
        };
        assert_eq!(irqs_of("enp129s0f0np0", &port0, &t), vec![98, 99, 100]);
        // By MSI vector alone, whatever the lines are called.
        let by_msi = NetDevice {
            names: vec!["nothing-alike".into()],
            msi_irqs: vec![101],
        };
        assert_eq!(irqs_of("enp129s0f1np1", &by_msi, &t), vec![101]);
    }

    #[test]
    fn virtio_net_by_its_virtio_device() {
        let text = "           CPU0       CPU1       
 37:          0          0 PCI-MSIX-0000:00:03.0   0-edge      virtio2-config
 38:          0       7409 PCI-MSIX-0000:00:03.0   1-edge      virtio2-input.0
 39:       5164          0 PCI-MSIX-0000:00:03.0   2-edge      virtio2-output.0
 41:       6574          0 PCI-MSIX-0000:00:04.0   1-edge      virtio3-rx
";
        let t = parse_interrupts(text).unwrap();
        let dev = NetDevice {
            names: vec!["virtio2".into(), "0000:00:03.0".into()],
            msi_irqs: Vec::new(),
        };
        assert_eq!(irqs_of("eth0", &dev, &t), vec![37, 38, 39]);
        assert_eq!(
            t.lines[1].desc,
            "PCI-MSIX-0000:00:03.0   1-edge      virtio2-input.0"
        );
    }

    #[test]
    fn bad_text_is_an_error_and_short_lines_are_padded() {
        assert!(parse_interrupts("").is_err());
        assert!(parse_interrupts("  CPUx\n").is_err());
        assert!(parse_interrupts("  CPU0 CPU1\n 5: x y  chip\n").is_err());
        let t = parse_interrupts("  CPU0 CPU1\n 5: 7  chip 1-edge  dev\n").unwrap();
        assert_eq!(t.lines[0].counts, vec![7, 0]);
    }

    #[test]
    fn the_live_nics_lines_name_their_device() {
        // Read only: this host's own interfaces and /proc/interrupts.
        let t = read_interrupts().unwrap();
        assert!(!t.cpus.is_empty());
        for e in std::fs::read_dir("/sys/class/net").unwrap() {
            let name = e.unwrap().file_name().to_string_lossy().to_string();
            let Some(dev) = net_device(&name) else {
                // Virtual: no device, and no line of /proc/interrupts named
                // after it.
                let named = t.lines.iter().any(|l| {
                    l.desc
                        .split_ascii_whitespace()
                        .any(|w| w == name || w.starts_with(&format!("{name}-")))
                });
                assert!(!named, "{name} has no device but IRQs named after it");
                continue;
            };
            let found = irqs_of(&name, &dev, &t);
            // Every line naming the device's bus address or the interface
            // is found (a PCI NIC's, or virtio's controller column).
            for l in &t.lines {
                let words: Vec<&str> = l.desc.split_ascii_whitespace().collect();
                let names_it = words.iter().any(|w| {
                    w.starts_with(&format!("{name}-"))
                        || *w == name
                        || dev.names.iter().any(|d| w.ends_with(&format!("-{d}")))
                });
                assert!(
                    !names_it || found.contains(&l.irq),
                    "{name}: IRQ {} '{}' missed",
                    l.irq,
                    l.desc
                );
            }
            for irq in found {
                let line = t.lines.iter().find(|l| l.irq == irq).unwrap();
                assert!(
                    dev.msi_irqs.contains(&irq)
                        || line.desc.contains(&name)
                        || dev.names.iter().any(|d| line.desc.contains(d.as_str())),
                    "{name}: IRQ {irq} '{}' names neither it nor {:?}",
                    line.desc,
                    dev.names
                );
            }
        }
    }
}
