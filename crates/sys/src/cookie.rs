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

/// A random (version 4) UUID, `xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx`: a
/// run's id that no other host will give.
pub fn new_uuid() -> io::Result<String> {
    let mut b = Cookie::random()?.0;
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    Ok(format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    ))
}

#[cfg(test)]
mod uuid_tests {
    #[test]
    fn uuids_are_version_4_and_differ() {
        let a = super::new_uuid().unwrap();
        let b = super::new_uuid().unwrap();
        assert_ne!(a, b);
        assert_eq!(a.len(), 36);
        assert_eq!(&a[14..15], "4");
        assert!("89ab".contains(&a[19..20]), "{a}");
        assert_eq!(a.matches('-').count(), 4);
    }
}
