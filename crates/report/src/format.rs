//! The output formats, named once for every command: each command accepts
//! the ones its renderings have (`--format`), and the names, the help and
//! the errors come from here.

use std::fmt;

/// A way to write what a command shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// Aligned text for a terminal (the default where there is one).
    Terminal,
    /// Tables and lists for an issue or a pull request.
    Markdown,
    /// Fixed-width plain text for a mailing list.
    Mail,
    /// One JSON document.
    Json,
    /// One line per row, for a spreadsheet.
    Csv,
    /// Gauges for Prometheus' textfile collector or a pushgateway.
    Openmetrics,
}

impl Format {
    pub const ALL: &'static [Format] = &[
        Format::Terminal,
        Format::Markdown,
        Format::Mail,
        Format::Json,
        Format::Csv,
        Format::Openmetrics,
    ];

    /// Its name on the command line: `markdown`.
    pub const fn name(self) -> &'static str {
        match self {
            Format::Terminal => "terminal",
            Format::Markdown => "markdown",
            Format::Mail => "mail",
            Format::Json => "json",
            Format::Csv => "csv",
            Format::Openmetrics => "openmetrics",
        }
    }

    /// The format a name means, in any case.
    pub fn from_name(name: &str) -> Option<Format> {
        Format::ALL
            .iter()
            .copied()
            .find(|f| f.name().eq_ignore_ascii_case(name))
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The formats each command writes.
pub mod of {
    use super::Format::{self, *};
    /// `compare`, `check` and `sweep`'s comparisons.
    pub const COMPARISON: &[Format] = &[Terminal, Markdown, Mail, Json, Csv];
    /// `history`.
    pub const HISTORY: &[Format] = &[Terminal, Markdown, Json, Mail];
    /// `report`.
    pub const REPORT: &[Format] = &[Terminal, Markdown];
    /// `list`, beside its table.
    pub const LIST: &[Format] = &[Json, Csv];
    /// `export`.
    pub const EXPORT: &[Format] = &[Json, Csv, Openmetrics];
}

/// `value` as one pretty JSON document with its final newline.
pub fn json<T: serde::Serialize + ?Sized>(value: &T, what: &'static str) -> Result<String, String> {
    serde_json::to_string_pretty(value)
        .map(|s| s + "\n")
        .map_err(|e| format!("cannot encode the {what}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_format_has_one_name_and_every_command_names_known_ones() {
        for f in Format::ALL {
            assert_eq!(Format::from_name(f.name()), Some(*f));
            assert_eq!(Format::from_name(&f.name().to_uppercase()), Some(*f));
        }
        assert_eq!(Format::from_name("yaml"), None);
        for set in [
            of::COMPARISON,
            of::HISTORY,
            of::REPORT,
            of::LIST,
            of::EXPORT,
        ] {
            assert!(!set.is_empty());
        }
    }
}
