//! Session tokens: HS256 JSON Web Tokens in the form Nakama issues.
//!
//! The token travels in `Hello`; its `uid` claim is the player id and its `exp` claim (Unix
//! seconds) bounds its life. Verification takes `now` as an argument, so it never reads a clock.
//! Only `alg: HS256` is accepted; `none` and every other algorithm are refused before the
//! signature is looked at. The signature is checked in constant time.

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::digest::KeyInit;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

use crate::ids::PlayerId;
use crate::messages::RejectReason;

/// The development token key shipped in `config/server.toml`. Anyone can mint tokens with it;
/// the server warns at start while it is in use, and `gatehouse-sim` uses it when no config
/// names another.
pub const DEV_TOKEN_KEY: &str = "gatehouse-development-key-do-not-use-in-production";

/// Longest token accepted, in bytes: far above any real session token, far below a frame.
pub const MAX_TOKEN_LEN: usize = 4096;

/// An HS256 signing key. Its `Debug` output never shows the key.
#[derive(Clone)]
pub struct TokenKey(Vec<u8>);

impl TokenKey {
    /// Wraps raw key bytes (the UTF-8 bytes of the configured key string).
    pub fn new(bytes: impl Into<Vec<u8>>) -> Self {
        Self(bytes.into())
    }

    fn mac(&self) -> Hmac<Sha256> {
        // HMAC accepts keys of any length (long keys are hashed, short ones padded), so this
        // cannot fail.
        #[allow(clippy::expect_used)]
        <Hmac<Sha256> as KeyInit>::new_from_slice(&self.0).expect("HMAC takes keys of any length")
    }
}

impl fmt::Debug for TokenKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TokenKey({} bytes, redacted)", self.0.len())
    }
}

/// The claims gatehouse reads from a session token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionClaims {
    /// The player id.
    pub uid: PlayerId,
    /// Expiry, Unix seconds.
    pub exp: u64,
    /// Issue time, Unix seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iat: Option<u64>,
    /// Display name, if the issuer gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usn: Option<String>,
}

/// Why a token was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TokenError {
    /// The token was empty.
    #[error("session token is missing")]
    Missing,
    /// The token is not a well-formed HS256 JWT with the claims gatehouse needs.
    #[error("session token is malformed: {0}")]
    Malformed(String),
    /// The signature does not verify with the server's key.
    #[error("session token signature does not verify")]
    BadSignature,
    /// The token expired.
    #[error("session token expired at {exp} (Unix seconds), now is {now}")]
    Expired {
        /// The `exp` claim.
        exp: u64,
        /// The time it was checked at.
        now: u64,
    },
}

impl TokenError {
    /// The `Rejected` reason sent to the client for this error.
    pub fn reject_reason(&self) -> RejectReason {
        match self {
            TokenError::Missing => RejectReason::MissingToken,
            TokenError::Malformed(_) => RejectReason::MalformedToken,
            TokenError::BadSignature => RejectReason::BadSignature,
            TokenError::Expired { .. } => RejectReason::Expired,
        }
    }
}

#[derive(Serialize, Deserialize)]
struct Header {
    alg: String,
    #[serde(default)]
    typ: Option<String>,
}

/// Signs `claims` into a compact JWT (`header.payload.signature`, base64url without padding).
pub fn mint(key: &TokenKey, claims: &SessionClaims) -> String {
    let header = Header { alg: "HS256".into(), typ: Some("JWT".into()) };
    // Serialising these plain structs to JSON cannot fail.
    let header = serde_json::to_vec(&header).unwrap_or_default();
    let payload = serde_json::to_vec(claims).unwrap_or_default();
    let signing_input =
        format!("{}.{}", URL_SAFE_NO_PAD.encode(header), URL_SAFE_NO_PAD.encode(payload));
    let mut mac = key.mac();
    mac.update(signing_input.as_bytes());
    let signature = mac.finalize().into_bytes();
    format!("{signing_input}.{}", URL_SAFE_NO_PAD.encode(signature))
}

/// Verifies a compact JWT and returns its claims.
///
/// `now` is Unix seconds. A token is valid while `now < exp`.
///
/// # Errors
/// [`TokenError::Missing`] for an empty token; [`TokenError::Malformed`] for anything that is not
/// three base64url parts with an `HS256` header and JSON claims holding a valid `uid` and `exp`;
/// [`TokenError::BadSignature`]; [`TokenError::Expired`].
pub fn verify(key: &TokenKey, token: &str, now: u64) -> Result<SessionClaims, TokenError> {
    if token.is_empty() {
        return Err(TokenError::Missing);
    }
    if token.len() > MAX_TOKEN_LEN {
        return Err(TokenError::Malformed(format!(
            "{} bytes long, the maximum is {MAX_TOKEN_LEN}",
            token.len()
        )));
    }
    let mut parts = token.split('.');
    let (Some(header_b64), Some(payload_b64), Some(signature_b64), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(TokenError::Malformed("expected three dot-separated parts".into()));
    };
    let header: Header = decode_json_part("header", header_b64)?;
    if header.alg != "HS256" {
        return Err(TokenError::Malformed(format!(
            "algorithm {:?}, expected \"HS256\"",
            header.alg
        )));
    }
    let signature = URL_SAFE_NO_PAD
        .decode(signature_b64)
        .map_err(|e| TokenError::Malformed(format!("signature is not base64url: {e}")))?;
    let mut mac = key.mac();
    mac.update(&token.as_bytes()[..header_b64.len() + 1 + payload_b64.len()]);
    mac.verify_slice(&signature).map_err(|_| TokenError::BadSignature)?;
    let claims: SessionClaims = decode_json_part("claims", payload_b64)?;
    if now >= claims.exp {
        return Err(TokenError::Expired { exp: claims.exp, now });
    }
    Ok(claims)
}

fn decode_json_part<T: serde::de::DeserializeOwned>(
    what: &str,
    part: &str,
) -> Result<T, TokenError> {
    let bytes = URL_SAFE_NO_PAD
        .decode(part)
        .map_err(|e| TokenError::Malformed(format!("{what} is not base64url: {e}")))?;
    serde_json::from_slice(&bytes)
        .map_err(|e| TokenError::Malformed(format!("{what} is not the expected JSON: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims(uid: &str, exp: u64) -> SessionClaims {
        SessionClaims { uid: PlayerId::new(uid).unwrap(), exp, iat: Some(1), usn: None }
    }

    #[test]
    fn a_minted_token_verifies_with_the_same_key() {
        let key = TokenKey::new("k");
        let token = mint(&key, &claims("p1", 100));
        assert_eq!(verify(&key, &token, 50).unwrap().uid.as_str(), "p1");
    }

    #[test]
    fn a_token_signed_with_another_key_is_refused() {
        let token = mint(&TokenKey::new("other"), &claims("p1", 100));
        assert_eq!(verify(&TokenKey::new("k"), &token, 50), Err(TokenError::BadSignature));
    }

    #[test]
    fn an_expired_token_is_refused() {
        let key = TokenKey::new("k");
        let token = mint(&key, &claims("p1", 100));
        assert_eq!(verify(&key, &token, 100), Err(TokenError::Expired { exp: 100, now: 100 }));
    }

    #[test]
    fn alg_none_and_other_algorithms_are_refused() {
        let key = TokenKey::new("k");
        let token = mint(&key, &claims("p1", 100));
        let rest = token.split_once('.').unwrap().1;
        for alg in ["none", "HS512", "RS256"] {
            let header = URL_SAFE_NO_PAD.encode(format!("{{\"alg\":\"{alg}\"}}"));
            let forged = format!("{header}.{rest}");
            assert!(
                matches!(verify(&key, &forged, 50), Err(TokenError::Malformed(m)) if m.contains(alg))
            );
        }
    }

    #[test]
    fn tampered_claims_are_refused() {
        let key = TokenKey::new("k");
        let token = mint(&key, &claims("p1", 100));
        let parts: Vec<&str> = token.split('.').collect();
        let evil = URL_SAFE_NO_PAD.encode(br#"{"uid":"admin","exp":100}"#);
        let forged = format!("{}.{evil}.{}", parts[0], parts[2]);
        assert_eq!(verify(&key, &forged, 50), Err(TokenError::BadSignature));
    }

    #[test]
    fn malformed_tokens_are_refused_with_a_reason() {
        let key = TokenKey::new("k");
        assert_eq!(verify(&key, "", 0), Err(TokenError::Missing));
        for bad in ["a", "a.b", "a.b.c.d", "!!.??.**", &"x".repeat(MAX_TOKEN_LEN + 1)] {
            assert!(matches!(verify(&key, bad, 0), Err(TokenError::Malformed(_))), "{bad}");
        }
        // A valid signature over claims without a valid uid.
        let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"HS256"}"#);
        let payload = URL_SAFE_NO_PAD.encode(br#"{"uid":"has space","exp":100}"#);
        let mut mac = key.mac();
        mac.update(format!("{header}.{payload}").as_bytes());
        let sig = URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes());
        let token = format!("{header}.{payload}.{sig}");
        assert!(
            matches!(verify(&key, &token, 0), Err(TokenError::Malformed(m)) if m.contains("has space"))
        );
    }

    proptest::proptest! {
        #[test]
        fn verify_never_panics(s in ".{0,300}") {
            let _ = verify(&TokenKey::new("k"), &s, 0);
        }
    }
}
