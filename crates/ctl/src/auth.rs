//! Pre-shared-key authentication of a control session. Each side proves it
//! holds the key with HMAC-SHA256 over the server's nonce and the client's
//! nonce, under a label of its own so that one side's proof can never be
//! replayed as the other's. Only the proofs cross the wire, never the key.

use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::path::Path;

type HmacSha256 = Hmac<Sha256>;

pub const CLIENT_LABEL: &str = "plumb client proof v1";
pub const SERVER_LABEL: &str = "plumb server proof v1";
/// Shorter keys are guessable; the file's bytes are the key.
pub const MIN_KEY_LEN: usize = 16;
/// Hex digits of a nonce: 16 random bytes.
pub const NONCE_LEN: usize = 32;

fn mac(key: &[u8], label: &str, server_nonce: &str, client_nonce: &str) -> HmacSha256 {
    let mut m = HmacSha256::new_from_slice(key).expect("HMAC takes keys of any length");
    // The zero bytes keep the fields apart: no shifting of characters from
    // one nonce to the other gives the same input.
    for part in [label, server_nonce, client_nonce] {
        m.update(part.as_bytes());
        m.update(&[0]);
    }
    m
}

/// The proof of `label`'s side, in hex.
pub fn proof(key: &[u8], label: &str, server_nonce: &str, client_nonce: &str) -> String {
    mac(key, label, server_nonce, client_nonce)
        .finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Checks a proof in constant time.
pub fn verify(key: &[u8], label: &str, server_nonce: &str, client_nonce: &str, hex: &str) -> bool {
    let Some(bytes) = from_hex(hex) else {
        return false;
    };
    mac(key, label, server_nonce, client_nonce)
        .verify_slice(&bytes)
        .is_ok()
}

fn from_hex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) || s.len() > 128 || !s.is_ascii() {
        return None;
    }
    s.as_bytes()
        .chunks(2)
        .map(|c| u8::from_str_radix(std::str::from_utf8(c).ok()?, 16).ok())
        .collect()
}

/// A nonce as the protocol carries it: 32 lowercase hex digits.
pub fn is_nonce(s: &str) -> bool {
    s.len() == NONCE_LEN
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Reads a key file: its bytes without trailing whitespace. A file others
/// may read is refused, as is a key too short to resist guessing.
pub fn load_key(path: &Path, flag: &str) -> Result<Vec<u8>, String> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(path).map_err(|e| {
        format!(
            "{flag}: cannot read {}: {}",
            path.display(),
            plumb_sys::plain_io(&e)
        )
    })?;
    if meta.permissions().mode() & 0o007 != 0 {
        return Err(format!(
            "{flag}: {} may be read by any user; chmod o-rwx it (0600 or 0640)",
            path.display()
        ));
    }
    let mut key = std::fs::read(path).map_err(|e| {
        format!(
            "{flag}: cannot read {}: {}",
            path.display(),
            plumb_sys::plain_io(&e)
        )
    })?;
    while key.last().is_some_and(|b| b.is_ascii_whitespace()) {
        key.pop();
    }
    if key.len() < MIN_KEY_LEN {
        return Err(format!(
            "{flag}: the key in {} is {} bytes; use at least {MIN_KEY_LEN} (e.g. `head -c 32 /dev/urandom | base64 > FILE`)",
            path.display(),
            key.len()
        ));
    }
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proofs_check_and_depend_on_everything() {
        let (k, sn, cn) = (
            b"0123456789abcdef".as_slice(),
            "a".repeat(32),
            "b".repeat(32),
        );
        let p = proof(k, CLIENT_LABEL, &sn, &cn);
        assert_eq!(p.len(), 64);
        assert!(verify(k, CLIENT_LABEL, &sn, &cn, &p));
        assert!(
            !verify(k, SERVER_LABEL, &sn, &cn, &p),
            "labels keep sides apart"
        );
        assert!(!verify(b"0123456789abcdeX", CLIENT_LABEL, &sn, &cn, &p));
        assert!(!verify(k, CLIENT_LABEL, &cn, &sn, &p), "nonces are ordered");
        assert!(!verify(k, CLIENT_LABEL, &sn, &cn, &p[..62]));
        assert!(!verify(k, CLIENT_LABEL, &sn, &cn, "zz"));
        assert!(!verify(k, CLIENT_LABEL, &sn, &cn, ""));
    }

    #[test]
    fn nonces_are_hex_of_one_length() {
        assert!(is_nonce(&"0f".repeat(16)));
        assert!(!is_nonce(&"0F".repeat(16)));
        assert!(!is_nonce("00"));
        assert!(!is_nonce(&"g0".repeat(16)));
    }
}
