//! TLS to a PostgreSQL server, per the URL's `sslmode` as libpq reads it:
//! `disable`; `prefer`, the default (TLS where the server offers it, its
//! certificate unchecked); `require` (TLS or no connection, the certificate
//! checked against a CA where one is at hand, as libpq does); `verify-ca`
//! (the certificate signed by the CA); `verify-full` (and naming the URL's
//! host). The CA comes from `sslrootcert=FILE`, else ~/.postgresql/root.crt;
//! PGSSLMODE and PGSSLROOTCERT stand in for a URL without them.
//! rustls with ring: the static binary carries no OpenSSL.

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::{ring, verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, Error, RootCertStore, SignatureScheme,
};
use std::path::{Path, PathBuf};
use std::sync::Arc;
pub(crate) use tokio_postgres_rustls::MakeRustlsConnect;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SslMode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl SslMode {
    /// `v` as given by `from` (the URL's sslmode, or PGSSLMODE).
    pub(crate) fn parse(v: &str, from: &str) -> Result<SslMode, String> {
        Ok(match v {
            "disable" => SslMode::Disable,
            // libpq's allow tries the clear first; TLS first is no weaker.
            "allow" | "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            other => {
                return Err(format!(
                    "{from}={other} is not a mode; use disable, prefer, require, verify-ca \
                     or verify-full"
                ))
            }
        })
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }

    /// What the connection does before the handshake: ask for TLS or not,
    /// and go on in the clear when the server declines, or not.
    pub(crate) fn wire(self) -> ::postgres::config::SslMode {
        match self {
            SslMode::Disable => ::postgres::config::SslMode::Disable,
            SslMode::Prefer => ::postgres::config::SslMode::Prefer,
            _ => ::postgres::config::SslMode::Require,
        }
    }
}

/// libpq's default CA file.
fn default_root() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(|h| Path::new(&h).join(".postgresql/root.crt"))
}

fn load_roots(path: &Path) -> Result<RootCertStore, String> {
    let shown = path.display();
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| format!("sslrootcert {shown}: {e}"))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("sslrootcert {shown}: {e}"))?;
    let mut roots = RootCertStore::empty();
    let (added, _) = roots.add_parsable_certificates(certs);
    if added == 0 {
        return Err(format!(
            "sslrootcert {shown}: no certificate in it (a PEM file of the CA that signed the \
             server's certificate is needed)"
        ));
    }
    Ok(roots)
}

/// The TLS side of a connection in `mode`, the CA read from `rootcert`
/// (the URL's sslrootcert) or libpq's default file.
pub(crate) fn connector(
    mode: SslMode,
    rootcert: Option<&str>,
) -> Result<MakeRustlsConnect, String> {
    let provider = Arc::new(ring::default_provider());
    // disable and prefer check nothing, so they read no CA either.
    let checks = matches!(
        mode,
        SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull
    );
    let roots = match rootcert.map(PathBuf::from) {
        Some(p) if checks => Some(load_roots(&p)?),
        None if checks => match default_root().filter(|p| p.exists()) {
            Some(p) => Some(load_roots(&p)?),
            None => None,
        },
        _ => None,
    };
    let chain = match (mode, roots) {
        (SslMode::Disable | SslMode::Prefer, _) | (SslMode::Require, None) => None,
        (SslMode::VerifyCa | SslMode::VerifyFull, None) => {
            return Err(format!(
                "sslmode={} checks the server's certificate against a CA: give the CA's PEM \
                 file as sslrootcert=FILE in the URL (or PGSSLROOTCERT), or put it in \
                 ~/.postgresql/root.crt",
                mode.name()
            ))
        }
        (_, Some(r)) => Some(
            WebPkiServerVerifier::builder_with_provider(Arc::new(r), provider.clone())
                .build()
                .map_err(|e| format!("sslrootcert: {e}"))?,
        ),
    };
    let verifier = Arc::new(Checks {
        chain,
        name: mode == SslMode::VerifyFull,
        provider: provider.clone(),
    });
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    Ok(MakeRustlsConnect::new(config))
}

/// What is checked of the server's certificate. Without a chain, any
/// certificate (libpq's prefer, and require with no CA): encryption
/// without authentication, though the handshake still proves the server
/// holds the certificate's key.
#[derive(Debug)]
struct Checks {
    /// Signed by the CA.
    chain: Option<Arc<WebPkiServerVerifier>>,
    /// And naming the host (verify-full).
    name: bool,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for Checks {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        let Some(chain) = &self.chain else {
            return Ok(ServerCertVerified::assertion());
        };
        // The name is checked last, once the chain holds.
        match chain.verify_server_cert(end_entity, intermediates, server_name, ocsp, now) {
            Err(Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) if !self.name => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_read_as_libpq_names_them() {
        assert_eq!(
            SslMode::parse("verify-full", "sslmode"),
            Ok(SslMode::VerifyFull)
        );
        assert_eq!(SslMode::parse("allow", "sslmode"), Ok(SslMode::Prefer));
        let e = SslMode::parse("verify", "PGSSLMODE").unwrap_err();
        assert!(
            e.contains("PGSSLMODE=verify is not") && e.contains("verify-full"),
            "{e}"
        );
    }

    #[test]
    fn verifying_without_a_ca_says_where_to_put_it() {
        // A named file that is not there is an error, never a fallback.
        let e = connector(SslMode::Require, Some("/nonexistent/ca.pem"))
            .err()
            .unwrap();
        assert!(e.contains("/nonexistent/ca.pem"), "{e}");
        let dir = std::env::temp_dir().join(format!("plumb-pgtls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let empty = dir.join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let e = connector(SslMode::VerifyCa, empty.to_str()).err().unwrap();
        assert!(e.contains("no certificate"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
