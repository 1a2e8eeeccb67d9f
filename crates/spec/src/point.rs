//! The identity of a test point within its experiment.

use std::fmt;

/// Where a point sits in its experiment: its value on each axis (in the
/// file's axis order) and its variant. Stored with each of its runs as text,
/// `sndbuf=8K,flows=1,variant=rps` (`base` when it has neither), and read
/// back from that, so a resumed sweep finds its points and a report places
/// its runs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct PointId {
    pub coords: Vec<(String, String)>,
    pub variant: Option<String>,
}

impl PointId {
    /// The same place in the matrix under no variant: how points match
    /// across the variants of one experiment.
    pub fn without_variant(&self) -> PointId {
        PointId {
            coords: self.coords.clone(),
            variant: None,
        }
    }

    /// Reads the stored text back. A piece without `=` belongs to the value
    /// before it (a CPU list such as `0,2-3`).
    pub fn parse(text: &str) -> PointId {
        let mut id = PointId::default();
        if text == "base" {
            return id;
        }
        for piece in text.split(',') {
            match piece.split_once('=') {
                Some(("variant", v)) => id.variant = Some(v.to_string()),
                Some((k, v)) => id.coords.push((k.to_string(), v.to_string())),
                None => {
                    if let Some((_, v)) = id.coords.last_mut() {
                        v.push(',');
                        v.push_str(piece);
                    }
                }
            }
        }
        id
    }
}

impl fmt::Display for PointId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts: Vec<String> = self
            .coords
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        if let Some(v) = &self.variant {
            parts.push(format!("variant={v}"));
        }
        if parts.is_empty() {
            f.write_str("base")
        } else {
            f.write_str(&parts.join(","))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_back_what_it_writes() {
        let id = PointId {
            coords: vec![
                ("client_cpus".into(), "0,2-3".into()),
                ("sndbuf".into(), "8K".into()),
            ],
            variant: Some("rps".into()),
        };
        let text = id.to_string();
        assert_eq!(text, "client_cpus=0,2-3,sndbuf=8K,variant=rps");
        assert_eq!(PointId::parse(&text), id);
        assert_eq!(
            id.without_variant().to_string(),
            "client_cpus=0,2-3,sndbuf=8K"
        );
        assert_eq!(PointId::parse("base"), PointId::default());
        assert_eq!(PointId::default().to_string(), "base");
    }
}
