//! The server certificate: the configured one as given, or a development certificate generated
//! once and kept in the data dir (`dev-cert.der`, with `dev-key.der` beside it).

use std::path::{Path, PathBuf};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use sha2::{Digest, Sha256};

use super::NetError;
use crate::config::TlsConfig;

/// File name of the development certificate in the data dir.
pub const DEV_CERT_FILE: &str = "dev-cert.der";
/// File name of the development certificate's private key in the data dir.
pub const DEV_KEY_FILE: &str = "dev-key.der";

/// A certificate chain and its private key.
#[derive(Debug)]
pub struct ServerIdentity {
    /// Leaf first.
    pub chain: Vec<CertificateDer<'static>>,
    /// The leaf's private key.
    pub key: PrivateKeyDer<'static>,
    /// The certificate file it came from, for errors.
    pub origin: PathBuf,
}

impl ServerIdentity {
    /// The SHA-256 fingerprint of the leaf certificate, as colon-separated hex.
    pub fn fingerprint(&self) -> String {
        let digest = Sha256::digest(self.chain.first().map_or(&[][..], |c| c.as_ref()));
        digest.iter().map(|b| format!("{b:02X}")).collect::<Vec<_>>().join(":")
    }
}

/// Loads the configured certificate, or the development certificate from `data_dir`,
/// generating it on first use.
///
/// # Errors
/// [`NetError::Certificate`] naming the file that could not be read, parsed or written.
pub fn load_identity(tls: &TlsConfig, data_dir: &Path) -> Result<ServerIdentity, NetError> {
    match (&tls.certificate, &tls.private_key) {
        (Some(cert), Some(key)) => {
            let identity = ServerIdentity {
                chain: read_chain(cert)?,
                key: read_key(key)?,
                origin: cert.clone(),
            };
            tracing::debug!(certificate = %cert.display(), "read the configured certificate");
            Ok(identity)
        }
        _ => development_identity(data_dir),
    }
}

fn development_identity(data_dir: &Path) -> Result<ServerIdentity, NetError> {
    let cert_path = data_dir.join(DEV_CERT_FILE);
    let key_path = data_dir.join(DEV_KEY_FILE);
    let identity = if cert_path.exists() && key_path.exists() {
        ServerIdentity {
            chain: read_chain(&cert_path)?,
            key: read_key(&key_path)?,
            origin: cert_path.clone(),
        }
    } else {
        let (cert, key) = generate_development()
            .map_err(|e| cert_error(&cert_path, format!("cannot generate: {e}")))?;
        std::fs::create_dir_all(data_dir).map_err(|e| cert_error(data_dir, e.to_string()))?;
        write_private(&key_path, &key)?;
        std::fs::write(&cert_path, &cert).map_err(|e| cert_error(&cert_path, e.to_string()))?;
        // Worth an operator's notice: clients that pinned the old one must be given this one.
        tracing::info!(certificate = %cert_path.display(), "generated a new development certificate");
        ServerIdentity {
            chain: vec![CertificateDer::from(cert)],
            key: PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key)),
            origin: cert_path.clone(),
        }
    };
    Ok(identity)
}

/// A new self-signed development certificate for `localhost`, `127.0.0.1` and `::1`, and its
/// private key, both DER (the key PKCS #8).
///
/// # Errors
/// rcgen's, when it cannot generate the key pair or sign the certificate.
pub(crate) fn generate_development() -> Result<(Vec<u8>, Vec<u8>), rcgen::Error> {
    let generated = rcgen::generate_simple_self_signed(vec![
        "localhost".into(),
        "127.0.0.1".into(),
        "::1".into(),
    ])?;
    Ok((generated.cert.der().to_vec(), generated.signing_key.serialize_der()))
}

fn cert_error(path: &Path, why: String) -> NetError {
    NetError::Certificate { path: PathBuf::from(path), why }
}

fn write_private(path: &Path, bytes: &[u8]) -> Result<(), NetError> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path).map_err(|e| cert_error(path, e.to_string()))?;
    file.write_all(bytes).map_err(|e| cert_error(path, e.to_string()))
}

fn is_pem(bytes: &[u8]) -> bool {
    bytes.starts_with(b"-----BEGIN")
}

/// Reads a certificate chain from a DER or PEM file.
pub fn read_chain(path: &Path) -> Result<Vec<CertificateDer<'static>>, NetError> {
    let bytes = std::fs::read(path).map_err(|e| cert_error(path, e.to_string()))?;
    if !is_pem(&bytes) {
        return Ok(vec![CertificateDer::from(bytes)]);
    }
    let chain: Vec<_> = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<_, _>>()
        .map_err(|e| cert_error(path, format!("not a PEM certificate chain: {e}")))?;
    if chain.is_empty() {
        return Err(cert_error(path, "holds no certificate".into()));
    }
    Ok(chain)
}

fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, NetError> {
    let bytes = std::fs::read(path).map_err(|e| cert_error(path, e.to_string()))?;
    if is_pem(&bytes) {
        PrivateKeyDer::from_pem_slice(&bytes)
            .map_err(|e| cert_error(path, format!("not a PEM private key: {e}")))
    } else {
        Ok(PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(bytes)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_development_certificate_is_generated_once_and_reused() {
        let dir = tempfile::tempdir().unwrap();
        let first = load_identity(&TlsConfig::default(), dir.path()).unwrap();
        assert!(dir.path().join(DEV_CERT_FILE).exists());
        assert!(dir.path().join(DEV_KEY_FILE).exists());
        let second = load_identity(&TlsConfig::default(), dir.path()).unwrap();
        assert_eq!(first.fingerprint(), second.fingerprint());
        assert_eq!(first.fingerprint().len(), 32 * 3 - 1);
    }

    #[test]
    fn a_missing_configured_certificate_is_named() {
        let tls = TlsConfig {
            certificate: Some("/nonexistent/cert.pem".into()),
            private_key: Some("/nonexistent/key.pem".into()),
        };
        let err = load_identity(&tls, Path::new("/tmp")).unwrap_err().to_string();
        assert!(err.contains("/nonexistent/cert.pem"), "{err}");
    }
}
