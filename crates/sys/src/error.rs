use std::io;

/// A /proc or /sys file whose text did not have the expected shape.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file} line {line}: {message}")]
pub struct ParseError {
    pub file: &'static str,
    /// 1-based.
    pub line: usize,
    pub message: String,
}

impl ParseError {
    pub(crate) fn new(file: &'static str, line: usize, message: impl Into<String>) -> Self {
        ParseError {
            file,
            line,
            message: message.into(),
        }
    }
}

// The readers return io::Result so callers handle one error type; a file the
// kernel wrote in an unexpected shape is "invalid data" from their view.
impl From<ParseError> for io::Error {
    fn from(e: ParseError) -> Self {
        io::Error::new(io::ErrorKind::InvalidData, e)
    }
}

/// An io::Error as a person reads it: "connection refused", not
/// "Connection refused (os error 111)".
pub fn plain_io(e: &io::Error) -> String {
    let s = e.to_string();
    let s = match s.find(" (os error") {
        Some(i) => s[..i].to_string(),
        None => s,
    };
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_lowercase().collect::<String>() + c.as_str(),
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_file_and_line() {
        let e = ParseError::new("/proc/stat", 3, "bad number 'x'");
        assert_eq!(e.to_string(), "/proc/stat line 3: bad number 'x'");
        let io: io::Error = e.into();
        assert_eq!(io.kind(), io::ErrorKind::InvalidData);
    }
}
