//! What a label may hold. A label names runs on the command line, in file
//! names (reports, pages), in URLs and in shell scripts that loop over
//! labels, so it keeps to characters none of those quote or split.

use std::fmt;

/// The longest label, in bytes.
pub const LABEL_MAX: usize = 128;

/// The punctuation a label may hold besides ASCII letters and digits: what a
/// kernel release (`6.12.57+deb13-cloud-amd64`) and plumb's own labels
/// (`RELEASE@abcdef12`) use, and nothing a shell, a path or a URL treats
/// specially.
pub const LABEL_PUNCTUATION: &str = "._+-@:~";

/// The rule, as every refusal states it.
pub const LABEL_RULE: &str =
    "a label is 1 to 128 ASCII letters, digits and the characters . _ + - @ : ~";

/// Why a label was refused: the rule and what broke it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelError(pub String);

impl fmt::Display for LabelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for LabelError {}

/// Whether `c` may be part of a label.
pub fn label_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || LABEL_PUNCTUATION.contains(c)
}

/// Refuses a label that breaks the rule, naming the first offending
/// character (and where it is) or the length.
pub fn check_label(label: &str) -> Result<(), LabelError> {
    if label.is_empty() {
        return Err(LabelError(format!(
            "an empty label is not valid; {LABEL_RULE}"
        )));
    }
    if let Some((at, c)) = label.char_indices().find(|&(_, c)| !label_char(c)) {
        return Err(LabelError(format!(
            "'{}' holds {} at byte {at}; {LABEL_RULE}",
            label.escape_debug(),
            shown(c)
        )));
    }
    if label.len() > LABEL_MAX {
        return Err(LabelError(format!(
            "'{label}' is {} bytes long; {LABEL_RULE}",
            label.len()
        )));
    }
    Ok(())
}

/// A character as a reader can see it, even when it is blank or unprintable.
fn shown(c: char) -> String {
    match c {
        ' ' => "a space".into(),
        '\t' => "a tab".into(),
        '\n' => "a newline".into(),
        c if c.is_control() || c.is_whitespace() => format!("U+{:04X}", c as u32),
        c => format!("'{c}'"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_releases_and_plumbs_own_labels_pass() {
        for ok in [
            "6.18.44-fc-v657",
            "6.12.57+deb13-cloud-amd64",
            "6.1.0-41-cloud-amd64@1a2b3c4d",
            "RELEASE@abcdef12",
            "v6.6~rc1",
            "host:eth0",
            "a_b",
            &"x".repeat(LABEL_MAX),
        ] {
            assert_eq!(check_label(ok), Ok(()), "{ok}");
        }
    }

    #[test]
    fn a_refusal_names_the_rule_and_the_character() {
        let e = check_label("my run").unwrap_err().0;
        assert!(e.contains("a space at byte 2"), "{e}");
        assert!(e.contains(LABEL_RULE), "{e}");
        let e = check_label("a/b").unwrap_err().0;
        assert!(e.contains("'/' at byte 1"), "{e}");
        let e = check_label("a\tb").unwrap_err().0;
        assert!(e.contains("a tab"), "{e}");
        assert!(!e.contains('\t'), "the tab itself is escaped: {e}");
        for bad in [
            "a?b", "a#b", "a%b", "a&b", "a=b", "a'b", "a\"b", "a*b", "6.6é", "a$b",
        ] {
            let e = check_label(bad).unwrap_err().0;
            assert!(e.contains(LABEL_RULE), "{bad}: {e}");
        }
    }

    #[test]
    fn the_rule_as_stated_is_the_rule_as_checked() {
        assert!(LABEL_RULE.contains(&format!("1 to {LABEL_MAX} ")));
        for c in LABEL_PUNCTUATION.chars() {
            assert!(LABEL_RULE.contains(&format!(" {c}")), "{c}");
        }
    }

    #[test]
    fn empty_and_overlong_labels_are_refused() {
        assert!(check_label("").unwrap_err().0.contains("empty"));
        let long = "x".repeat(LABEL_MAX + 1);
        let e = check_label(&long).unwrap_err().0;
        assert!(e.contains("129 bytes"), "{e}");
    }
}
