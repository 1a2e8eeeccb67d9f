//! The per-test secret a server hands out over the control connection:
//! every data connection must open with it, UDP datagrams carry part of it,
//! and the control protocol's nonces are made the same way.

use std::io::{self, Read};

/// 16 random bytes from the kernel's CSPRNG.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cookie(pub [u8; 16]);

impl Cookie {
    /// A fresh random cookie.
    pub fn random() -> io::Result<Cookie> {
        let mut b = [0u8; 16];
        std::fs::File::open("/dev/urandom")?.read_exact(&mut b)?;
        Ok(Cookie(b))
    }

    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    pub fn from_hex(s: &str) -> Option<Cookie> {
        if s.len() != 32 || !s.is_ascii() {
            return None;
        }
        let mut b = [0u8; 16];
        for (i, chunk) in s.as_bytes().chunks(2).enumerate() {
            let hex = std::str::from_utf8(chunk).ok()?;
            b[i] = u8::from_str_radix(hex, 16).ok()?;
        }
        Some(Cookie(b))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookie_hex_round_trip() {
        let c = Cookie::random().unwrap();
        assert_eq!(Cookie::from_hex(&c.to_hex()), Some(c));
        assert_eq!(Cookie::from_hex("zz"), None);
        assert_eq!(Cookie::from_hex(&"g".repeat(32)), None);
    }
}
