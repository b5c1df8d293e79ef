//! The dialler's trust in a destination's certificate (docs/spec/travel.md V14).
//!
//! With a pin (the directory's `certificate_sha256`), exactly the certificate it names, as the
//! client library trusts a pinned server (`client/src/pin.rs`; docs/client.md, "Pinning the
//! server's certificate"). Without one, any certificate whose key signs the TLS 1.3 handshake:
//! a source knows no trust anchor of its destination's (under Agones the allocator gives an
//! address and no fingerprint, V13), and the link does not rest on the certificate. Each side's
//! proof signs the connection's TLS exporter value under the fleet key, so whoever answers
//! without the key is refused, and a man in the middle, holding two TLS connections with two
//! exporter values, can relay neither side's proof. The `Welcome`'s certificate, proven with it,
//! is checked against the one the handshake presented (`rules::check_welcome`) and is what
//! clients pin.
//!
//! The client library's verifier is not shared: the server and the client never depend on each
//! other (docs/architecture.md).

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, OtherError, SignatureScheme};
use sha2::{Digest as _, Sha256};

/// The TLS verifier of a dialled peer link: the pinned certificate, or any, its handshake
/// signature checked either way.
#[derive(Debug)]
pub(super) struct PeerVerifier {
    pin: Option<[u8; 32]>,
    provider: Arc<CryptoProvider>,
    /// The certificate it refused for not being the pinned one, kept for the dialler's log:
    /// rustls carries the refusal only as its `Debug` text.
    refused: Mutex<Option<PinMismatch>>,
}

impl PeerVerifier {
    /// A verifier accepting the certificate whose SHA-256 is `pin` (any, with none), checking
    /// signatures with `provider`'s algorithms.
    pub(super) fn new(pin: Option<[u8; 32]>, provider: Arc<CryptoProvider>) -> Self {
        PeerVerifier { pin, provider, refused: Mutex::new(None) }
    }

    /// The last certificate refused for not being the pinned one, if any.
    pub(super) fn mismatch(&self) -> Option<PinMismatch> {
        *self.refused.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The SHA-256 of a certificate's DER.
pub(super) fn sha256(der: &[u8]) -> [u8; 32] {
    Sha256::digest(der).into()
}

/// Hex, colon-separated, as the server logs its own fingerprint.
pub(super) struct Hex<'a>(pub(super) &'a [u8; 32]);

impl fmt::Display for Hex<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, byte) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(":")?;
            }
            write!(f, "{byte:02X}")?;
        }
        Ok(())
    }
}

/// A presented certificate that is not the pinned one.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) struct PinMismatch {
    /// The SHA-256 the directory pins.
    pub(super) pinned: [u8; 32],
    /// The SHA-256 of the certificate the handshake presented.
    pub(super) presented: [u8; 32],
}

impl fmt::Display for PinMismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "its certificate's SHA-256 is {}, not the directory's {}",
            Hex(&self.presented),
            Hex(&self.pinned)
        )
    }
}

// rustls prints an `Other` certificate error with `Debug`: the sentence itself.
impl fmt::Debug for PinMismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl std::error::Error for PinMismatch {}

impl ServerCertVerifier for PeerVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Some(pinned) = self.pin else { return Ok(ServerCertVerified::assertion()) };
        let presented = sha256(end_entity.as_ref());
        if presented == pinned {
            Ok(ServerCertVerified::assertion())
        } else {
            let mismatch = PinMismatch { pinned, presented };
            *self.refused.lock().unwrap_or_else(PoisonError::into_inner) = Some(mismatch);
            Err(CertificateError::Other(OtherError(Arc::new(mismatch))).into())
        }
    }

    fn verify_tls12_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        // The link speaks TLS 1.3 only: never reached.
        Err(rustls::Error::General("TLS 1.2 is not offered on a peer link".into()))
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// V14: a pin accepts exactly its certificate, naming both fingerprints when it refuses;
    /// with none, any certificate passes this step (its handshake signature is still checked).
    #[test]
    fn a_pin_accepts_exactly_its_certificate_and_no_pin_any() {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let pinned = CertificateDer::from(b"the pinned certificate".to_vec());
        let other = CertificateDer::from(b"another certificate".to_vec());
        let name = ServerName::try_from("localhost").unwrap();
        let now = UnixTime::now();
        let verifier = PeerVerifier::new(Some(sha256(&pinned)), Arc::clone(&provider));
        assert!(verifier.verify_server_cert(&pinned, &[], &name, &[], now).is_ok());
        let error = verifier.verify_server_cert(&other, &[], &name, &[], now).unwrap_err();
        let text = error.to_string();
        assert!(text.contains(&Hex(&sha256(&other)).to_string()), "{text}");
        assert!(text.contains(&Hex(&sha256(&pinned)).to_string()), "{text}");
        let any = PeerVerifier::new(None, provider);
        assert!(any.verify_server_cert(&other, &[], &name, &[], now).is_ok());
        assert!(!any.supported_verify_schemes().is_empty());
    }

    /// V14: a certificate refused for its pin is kept with both fingerprints, which the
    /// dialler logs as plain hex fields (rustls carries the refusal only as `Debug` text); none
    /// is kept while the pin holds.
    #[test]
    fn a_pin_mismatch_is_kept_for_the_log_with_both_fingerprints() {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let pinned = CertificateDer::from(b"the pinned certificate".to_vec());
        let other = CertificateDer::from(b"another certificate".to_vec());
        let name = ServerName::try_from("localhost").unwrap();
        let verifier = PeerVerifier::new(Some(sha256(&pinned)), provider);
        assert!(verifier.verify_server_cert(&pinned, &[], &name, &[], UnixTime::now()).is_ok());
        assert!(verifier.mismatch().is_none(), "the pin held");
        let refused = verifier.verify_server_cert(&other, &[], &name, &[], UnixTime::now());
        assert!(refused.is_err());
        let kept = verifier.mismatch().expect("the mismatch kept");
        assert_eq!(Hex(&kept.pinned).to_string(), Hex(&sha256(&pinned)).to_string());
        assert_eq!(Hex(&kept.presented).to_string(), Hex(&sha256(&other)).to_string());
        assert!(!Hex(&kept.pinned).to_string().contains('['), "hex, not a Debug array");
    }
}
