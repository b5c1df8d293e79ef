//! Trusting a server by its certificate's SHA-256 fingerprint (docs/client.md, "Pinning the
//! server's certificate"; docs/security.md, "Trust in a fleet").
//!
//! Under Agones every game server publishes the fingerprint of the certificate it serves, and a
//! matchmaker hands it to the client with the address. [`CertificatePin`] is that fingerprint,
//! parsed; [`PinVerifier`] is the TLS verifier that accepts exactly the certificate it names.

use std::fmt;
use std::str::FromStr;
use std::sync::{Arc, Mutex, PoisonError};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, OtherError, SignatureScheme};
use sha2::{Digest as _, Sha256};

/// The SHA-256 fingerprint of a server's leaf certificate (over its DER), as the server logs it
/// at start (`certificate loaded ... fingerprint=...`) and, under Agones, publishes it as the
/// GameServer annotation `agones.dev/sdk-gatehouse-certificate-sha256` (docs/client.md,
/// "Pinning the server's certificate").
///
/// It prints (`Display`) in the canonical form: 32 upper-case hex pairs separated by colons,
/// `AB:CD:...`, 95 characters.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct CertificatePin([u8; 32]);

/// Why a text is not a [`CertificatePin`]. Positions count characters from 1 in the text as
/// given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PinError {
    /// Not 64 hex digits (32 bytes).
    #[error(
        "a certificate pin is 64 hex digits (32 bytes of SHA-256), in colon-separated pairs or \
         not; this one has {digits}"
    )]
    Length {
        /// How many hex digits it has.
        digits: usize,
    },
    /// A character that is neither a hex digit nor a colon.
    #[error(
        "a certificate pin holds hex digits and colons only: {found:?} at position {position} \
         is neither"
    )]
    Digit {
        /// Where (from 1).
        position: usize,
        /// The character.
        found: char,
    },
    /// A colon-separated pin whose colons do not separate pairs of hex digits (`AB:CD:...`).
    #[error(
        "a certificate pin's colons separate pairs of hex digits (AB:CD:...): position \
         {position} should hold {expected}"
    )]
    Colon {
        /// Where (from 1).
        position: usize,
        /// What belongs there: "a colon" or "a hex digit".
        expected: &'static str,
    },
}

impl CertificatePin {
    /// The pin of the certificate `der` (the SHA-256 of its DER encoding).
    pub fn of_certificate(der: &[u8]) -> CertificatePin {
        CertificatePin(Sha256::digest(der).into())
    }

    /// The pin from its 32 bytes.
    pub fn from_bytes(bytes: [u8; 32]) -> CertificatePin {
        CertificatePin(bytes)
    }

    /// Its 32 bytes.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// Parses a fingerprint: 32 colon-separated hex pairs (`AB:CD:...`, as the server prints
    /// it) or 64 hex digits without colons, either case; surrounding whitespace is ignored.
    ///
    /// # Errors
    /// [`PinError`] naming the problem: the number of digits, a character that is no hex digit
    /// (and where), or a misplaced colon (and where).
    pub fn parse(text: &str) -> Result<CertificatePin, PinError> {
        let start = text.len() - text.trim_start().len();
        // Positions are counted in the text as given, from 1.
        let offset = text[..start].chars().count() + 1;
        let trimmed = text.trim();
        let colons = trimmed.contains(':');
        let mut bytes = [0u8; 32];
        let mut digits = 0usize;
        for (i, c) in trimmed.chars().enumerate() {
            let position = offset + i;
            // In the colon form every third character is a colon: `AB:CD:...`.
            let colon_here = colons && i % 3 == 2;
            match (c.to_digit(16), c == ':') {
                (Some(_), _) if colon_here => {
                    return Err(PinError::Colon { position, expected: "a colon" });
                }
                (Some(value), _) => {
                    if let Some(byte) = bytes.get_mut(digits / 2) {
                        // A hex digit is below 16: it fits a nibble.
                        let nibble = value as u8;
                        *byte = if digits.is_multiple_of(2) { nibble << 4 } else { *byte | nibble };
                    }
                    digits += 1;
                }
                (None, true) if !colon_here => {
                    return Err(PinError::Colon { position, expected: "a hex digit" });
                }
                (None, true) => {}
                (None, false) => return Err(PinError::Digit { position, found: c }),
            }
        }
        if digits != 64 {
            return Err(PinError::Length { digits });
        }
        if trimmed.ends_with(':') {
            let position = offset + trimmed.chars().count() - 1;
            return Err(PinError::Colon { position, expected: "nothing (a pin ends in a digit)" });
        }
        Ok(CertificatePin(bytes))
    }
}

impl FromStr for CertificatePin {
    type Err = PinError;

    fn from_str(text: &str) -> Result<CertificatePin, PinError> {
        CertificatePin::parse(text)
    }
}

impl fmt::Display for CertificatePin {
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

impl fmt::Debug for CertificatePin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CertificatePin({self})")
    }
}

/// The TLS verifier of a pinned client: it accepts exactly the server certificate whose leaf
/// DER hashes to the pin, and checks the handshake's signature with the provider's algorithms.
///
/// Why this holds without a chain or a name check: the pin names one certificate, so one
/// public key; the TLS 1.3 `CertificateVerify` signature, checked here against that key, proves
/// the server holds its private key. Who presents the pinned certificate is therefore who holds
/// that key, which is what a CA chain and a name would establish for a certificate the client
/// could not name beforehand. The pin's own channel (the matchmaker's) must be trusted
/// (docs/security.md, "Trust in a fleet"). Expiry is not checked: the pin, not a validity
/// period, says which certificate is the server's.
#[derive(Debug)]
pub(crate) struct PinVerifier {
    pin: CertificatePin,
    provider: Arc<CryptoProvider>,
    /// The fingerprint of the last certificate refused, for a typed connect error.
    refused: Mutex<Option<CertificatePin>>,
}

impl PinVerifier {
    /// A verifier accepting the certificate `pin` names, verifying signatures with `provider`.
    pub(crate) fn new(pin: CertificatePin, provider: Arc<CryptoProvider>) -> PinVerifier {
        PinVerifier { pin, provider, refused: Mutex::new(None) }
    }

    /// The fingerprint of the last certificate it refused, if it refused one.
    pub(crate) fn refused(&self) -> Option<CertificatePin> {
        *self.refused.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A presented certificate that is not the pinned one.
struct PinMismatch {
    pinned: CertificatePin,
    presented: CertificatePin,
}

impl fmt::Display for PinMismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the server's certificate does not match the pin: its SHA-256 is {}, the pin is {}",
            self.presented, self.pinned
        )
    }
}

// rustls prints a certificate error of its `Other` kind with `Debug`: the message itself, so
// the connect error reads as a sentence.
impl fmt::Debug for PinMismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl std::error::Error for PinMismatch {}

impl ServerCertVerifier for PinVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let presented = CertificatePin::of_certificate(end_entity.as_ref());
        if presented == self.pin {
            Ok(ServerCertVerified::assertion())
        } else {
            *self.refused.lock().unwrap_or_else(PoisonError::into_inner) = Some(presented);
            let mismatch = PinMismatch { pinned: self.pin, presented };
            Err(CertificateError::Other(OtherError(Arc::new(mismatch))).into())
        }
    }

    fn verify_tls12_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        // The client speaks TLS 1.3 only (docs/protocol.md 1): never reached.
        Err(rustls::Error::General("TLS 1.2 is not offered by a pinned client".into()))
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
    #![allow(clippy::unwrap_used)]

    use super::*;

    const CANONICAL: &str = "00:01:02:03:04:05:06:07:08:09:0A:0B:0C:0D:0E:0F:\
                             A0:B1:C2:D3:E4:F5:06:17:28:39:4A:5B:6C:7D:8E:FF";

    #[test]
    fn a_pin_parses_colon_hex_and_plain_hex_and_prints_canonically() {
        let pin = CertificatePin::parse(CANONICAL).unwrap();
        assert_eq!(pin.as_bytes()[..3], [0x00, 0x01, 0x02]);
        assert_eq!(pin.as_bytes()[31], 0xFF);
        assert_eq!(pin.to_string(), CANONICAL);
        assert_eq!(pin.to_string().len(), 95);
        assert_eq!(format!("{pin:?}"), format!("CertificatePin({CANONICAL})"));
        let lower = CANONICAL.to_lowercase();
        assert_eq!(CertificatePin::parse(&lower).unwrap(), pin);
        let plain = CANONICAL.replace(':', "");
        assert_eq!(plain.len(), 64);
        assert_eq!(CertificatePin::parse(&plain).unwrap(), pin);
        assert_eq!(CertificatePin::parse(&plain.to_lowercase()).unwrap(), pin);
        assert_eq!(format!(" {CANONICAL}\n").parse::<CertificatePin>().unwrap(), pin);
        let of = CertificatePin::of_certificate(b"a certificate");
        assert_eq!(CertificatePin::parse(&of.to_string()).unwrap(), of);
    }

    #[test]
    fn a_malformed_pin_is_refused_naming_the_problem() {
        let refused = |text: &str| CertificatePin::parse(text).unwrap_err();
        assert_eq!(refused(""), PinError::Length { digits: 0 });
        assert_eq!(refused(&CANONICAL[..92]), PinError::Length { digits: 62 });
        assert_eq!(refused(&"ab".repeat(33)), PinError::Length { digits: 66 });
        let wrong = format!("{}G{}", &CANONICAL[..4], &CANONICAL[5..]);
        let error = refused(&wrong);
        assert_eq!(error, PinError::Digit { position: 5, found: 'G' });
        assert!(error.to_string().contains("'G' at position 5"), "{error}");
        let plain = format!("{}z", &CANONICAL.replace(':', "")[..63]);
        assert_eq!(refused(&plain), PinError::Digit { position: 64, found: 'z' });
        let shifted = format!("0{}", &CANONICAL[..94]);
        let error = refused(&shifted);
        assert_eq!(error, PinError::Colon { position: 3, expected: "a colon" });
        assert!(error.to_string().contains("position 3"), "{error}");
        assert_eq!(refused("AB::CD"), PinError::Colon { position: 4, expected: "a hex digit" });
        let trailing = format!("{CANONICAL}:");
        assert!(matches!(refused(&trailing), PinError::Colon { position: 96, .. }));
        let error = refused(&CANONICAL[..50]);
        assert!(error.to_string().contains("64 hex digits"), "{error}");
        assert!(error.to_string().contains("has 34"), "{error}");
    }

    #[test]
    fn the_verifier_refuses_a_certificate_that_is_not_the_pinned_one() {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let pinned = CertificateDer::from(b"the pinned certificate".to_vec());
        let other = CertificateDer::from(b"another certificate".to_vec());
        let verifier = PinVerifier::new(CertificatePin::of_certificate(&pinned), provider);
        let name = ServerName::try_from("localhost").unwrap();
        let now = UnixTime::now();
        assert!(verifier.verify_server_cert(&pinned, &[], &name, &[], now).is_ok());
        assert_eq!(verifier.refused(), None);
        let error = verifier.verify_server_cert(&other, &[], &name, &[], now).unwrap_err();
        assert!(error.to_string().contains("does not match the pin"), "{error}");
        assert_eq!(verifier.refused(), Some(CertificatePin::of_certificate(&other)));
        assert!(!verifier.supported_verify_schemes().is_empty());
    }

    /// A server that presents `cert` and signs the handshake with `key` (PKCS#8 DER), whether
    /// or not they belong together.
    #[derive(Debug)]
    struct Presenting(Arc<rustls::sign::CertifiedKey>);

    impl rustls::server::ResolvesServerCert for Presenting {
        fn resolve(
            &self,
            _hello: rustls::server::ClientHello<'_>,
        ) -> Option<Arc<rustls::sign::CertifiedKey>> {
            Some(Arc::clone(&self.0))
        }
    }

    /// A TLS 1.3 handshake in memory between a client pinned to `pin` and a server presenting
    /// `cert` signed with `key`: the client's error, if any.
    fn handshake(pin: CertificatePin, cert: &[u8], key: &[u8]) -> Result<(), rustls::Error> {
        use rustls::pki_types::PrivateKeyDer;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let key = PrivateKeyDer::try_from(key.to_vec()).unwrap();
        let signing = provider.key_provider.load_private_key(key).unwrap();
        // Unchecked on purpose: the key may not be the certificate's.
        let certified =
            rustls::sign::CertifiedKey::new(vec![CertificateDer::from(cert.to_vec())], signing);
        let server = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
            .with_protocol_versions(&[&rustls::version::TLS13])
            .unwrap()
            .with_no_client_auth()
            .with_cert_resolver(Arc::new(Presenting(Arc::new(certified))));
        let verifier = Arc::new(PinVerifier::new(pin, Arc::clone(&provider)));
        let client = rustls::ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13])
            .unwrap()
            .dangerous()
            .with_custom_certificate_verifier(verifier)
            .with_no_client_auth();
        let name = ServerName::try_from("localhost").unwrap();
        let mut client = rustls::ClientConnection::new(Arc::new(client), name).unwrap();
        let mut server = rustls::ServerConnection::new(Arc::new(server)).unwrap();
        // Bounded: a TLS 1.3 handshake takes a few flights.
        for _ in 0..10 {
            let mut flight = Vec::new();
            while client.wants_write() {
                client.write_tls(&mut flight).unwrap();
            }
            let mut read = &flight[..];
            while !read.is_empty() {
                server.read_tls(&mut read).unwrap();
            }
            // The server's own errors (the client's alert) are not what is asked.
            if server.process_new_packets().is_err() {
                break;
            }
            let mut flight = Vec::new();
            while server.wants_write() {
                server.write_tls(&mut flight).unwrap();
            }
            let mut read = &flight[..];
            while !read.is_empty() {
                client.read_tls(&mut read).unwrap();
            }
            client.process_new_packets()?;
            if !client.is_handshaking() {
                return Ok(());
            }
        }
        panic!("the handshake neither completed nor failed");
    }

    #[test]
    fn the_verifier_checks_the_handshake_signature_with_the_pinned_certificates_key() {
        let pinned = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        let other = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        let cert = pinned.cert.der().to_vec();
        let pin = CertificatePin::of_certificate(&cert);
        // The pinned certificate with its own key: accepted.
        handshake(pin, &cert, &pinned.signing_key.serialize_der()).unwrap();
        // The pinned certificate (public, sent to every client) with another key: the
        // signature does not verify.
        let error = handshake(pin, &cert, &other.signing_key.serialize_der()).unwrap_err();
        assert!(
            matches!(error, rustls::Error::InvalidCertificate(CertificateError::BadSignature)),
            "{error:?}"
        );
        // Another certificate with its own key: refused by the pin.
        let another = other.cert.der().to_vec();
        let error = handshake(pin, &another, &other.signing_key.serialize_der()).unwrap_err();
        assert!(error.to_string().contains("does not match the pin"), "{error}");
    }
}
