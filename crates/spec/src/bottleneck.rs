//! The queueing discipline at a path's bottleneck (`--qdisc`): which
//! kinds plumb sets there and how each counts its queue's limit, so that
//! `--queue` means the same buffer whatever the kind.

/// How a kind's queue limit is given to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// `limit N`, in packets: the buffer in packets of the path's MTU.
    Packets,
    /// `limit BYTES`.
    Bytes,
    /// `memlimit BYTES` (cake, whose own shaper takes the rate as well).
    Memory,
}

/// The kinds `--qdisc` takes, with how each is limited and the module
/// that holds it where it may be one (the FIFOs are always built in).
pub const KINDS: &[(&str, Limit, Option<&str>)] = &[
    ("pfifo", Limit::Packets, None),
    ("bfifo", Limit::Bytes, None),
    ("fq_codel", Limit::Packets, Some("sch_fq_codel")),
    ("fq", Limit::Packets, Some("sch_fq")),
    ("codel", Limit::Packets, Some("sch_codel")),
    ("sfq", Limit::Packets, Some("sch_sfq")),
    ("pie", Limit::Packets, Some("sch_pie")),
    ("fq_pie", Limit::Packets, Some("sch_fq_pie")),
    ("cake", Limit::Memory, Some("sch_cake")),
];

/// The modules of what limits the rate above any kind but cake (which
/// shapes by itself): htb, and the u32 filter that sorts control packets
/// into a class of their own.
pub const SHAPER_MODULES: &[&str] = &["sch_htb", "cls_u32"];

/// The kind of a `--qdisc` value and how it is limited.
pub fn kind_of(qdisc: &str) -> Option<(&'static str, Limit)> {
    module_of(qdisc).map(|(k, l, _)| (k, l))
}

/// The kind of a `--qdisc` value, how it is limited and its module.
pub fn module_of(qdisc: &str) -> Option<(&'static str, Limit, Option<&'static str>)> {
    let word = qdisc.split_whitespace().next()?;
    KINDS.iter().copied().find(|(k, _, _)| *k == word)
}

/// A `--qdisc` value, its words as tc takes them after the kind: a known
/// kind, then its own parameters in pairs or flags, none naming the limit
/// that `--queue` sets.
pub fn parse(value: &str) -> Result<String, String> {
    let words: Vec<&str> = value.split_whitespace().collect();
    let Some(kind) = words.first() else {
        return Err("an empty qdisc; use one of ".to_string() + &names());
    };
    if kind_of(kind).is_none() {
        return Err(format!(
            "'{kind}' is not a qdisc plumb sets at a bottleneck; use one of {}",
            names()
        ));
    }
    for w in &words[1..] {
        if !w
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-:/".contains(&b))
        {
            return Err(format!("'{w}' is not a qdisc parameter"));
        }
        if *w == "limit" || *w == "memlimit" || *w == "bandwidth" {
            return Err(format!(
                "'{w}' is set by plumb: the buffer by --queue, the rate by --link-rate"
            ));
        }
    }
    Ok(words.join(" "))
}

fn names() -> String {
    KINDS
        .iter()
        .map(|(k, _, _)| *k)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The limit words `kind` takes for a buffer of `queue_bytes` on a path
/// whose packets are at most `mtu` bytes.
pub fn limit_words(limit: Limit, queue_bytes: u64, mtu: u32) -> [String; 2] {
    match limit {
        Limit::Packets => [
            "limit".into(),
            (queue_bytes / u64::from(mtu.max(1))).max(1).to_string(),
        ],
        Limit::Bytes => ["limit".into(), queue_bytes.to_string()],
        Limit::Memory => ["memlimit".into(), queue_bytes.to_string()],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_qdisc_is_a_known_kind_with_parameters_other_than_its_limit() {
        assert_eq!(
            parse("  fq_codel   target 5ms ").unwrap(),
            "fq_codel target 5ms"
        );
        assert_eq!(parse("pfifo").unwrap(), "pfifo");
        let e = parse("htb").unwrap_err();
        assert!(e.contains("'htb'") && e.contains("fq_codel"), "{e}");
        let e = parse("pfifo limit 10").unwrap_err();
        assert!(e.contains("--queue"), "{e}");
        assert!(parse("cake bandwidth 1G")
            .unwrap_err()
            .contains("--link-rate"));
        assert!(parse("fq_codel ;reboot").is_err());
        assert!(parse("").is_err());
    }

    #[test]
    fn the_buffer_is_given_in_each_kinds_own_unit() {
        assert_eq!(
            limit_words(Limit::Packets, 150_000, 1500),
            ["limit".to_string(), "100".into()]
        );
        // Never a limit of nothing.
        assert_eq!(limit_words(Limit::Packets, 100, 1500)[1], "1");
        assert_eq!(limit_words(Limit::Bytes, 150_000, 1500)[1], "150000");
        assert_eq!(limit_words(Limit::Memory, 150_000, 1500)[0], "memlimit");
    }
}
