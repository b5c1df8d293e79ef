//! Session tokens: HS256 JSON Web Tokens in the form Nakama issues.
//!
//! The token travels in `Hello`; its `uid` claim is the player id and its `exp` claim (Unix
//! seconds) bounds its life. Verification takes `now` as an argument, so it never reads a clock.
//! Only `alg: HS256` is accepted; `none` and every other algorithm are refused before the
//! signature is looked at. The signature is checked in constant time.
//!
//! `Hello.token` may instead hold a travel ticket ([`crate::ticket`], docs/spec/travel.md V8),
//! the same compact form under another key, told apart by its header's `typ`
//! ([`TokenKind::of`]). A token whose `typ` is a ticket's is refused here as
//! [`TokenError::Malformed`] (`MalformedToken`): it is not the kind of token this check takes,
//! whatever its signature. Nakama's `typ` (`"JWT"`), an absent `typ` and any other `typ` are
//! read as before. The checks both kinds share, and their order, are this module's.

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

/// What a token's times may be, beyond a valid signature (docs/protocol.md 4, "Session
/// tokens"): a leaked token is worth at most `max_lifetime_s`, whatever `exp` its issuer wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenLimits {
    /// The longest life a token may claim, seconds: from its `iat` to its `exp`, and from now
    /// (less the skew) to its `exp`.
    pub max_lifetime_s: u64,
    /// How far the issuer's clock may be from ours, seconds: a token is valid until
    /// `exp + clock_skew_s`, and may be issued up to `clock_skew_s` in our future.
    pub clock_skew_s: u64,
}

impl TokenLimits {
    /// The defaults: a day's lifetime (Nakama issues session tokens for a minute by default,
    /// and operators raise it to hours) and a minute of skew.
    pub const DEFAULT: TokenLimits = TokenLimits { max_lifetime_s: 86_400, clock_skew_s: 60 };
}

impl Default for TokenLimits {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// What a server checks a `Hello`'s token with: the issuer's key and the bounds on its times.
#[derive(Debug, Clone)]
pub struct TokenCheck {
    /// The issuer's key.
    pub key: TokenKey,
    /// The bounds on the token's times.
    pub limits: TokenLimits,
}

impl TokenCheck {
    /// [`verify`] with this key and these limits, at `now` (Unix seconds).
    ///
    /// # Errors
    /// As [`verify`].
    pub fn verify(&self, token: &str, now: u64) -> Result<SessionClaims, TokenError> {
        verify(&self.key, token, now, self.limits)
    }
}

/// An HS256 signing key. Its `Debug` output never shows the key.
#[derive(Clone)]
pub struct TokenKey(Vec<u8>);

impl TokenKey {
    /// Wraps raw key bytes (the UTF-8 bytes of the configured key string).
    pub fn new(bytes: impl Into<Vec<u8>>) -> Self {
        Self(bytes.into())
    }

    /// An HMAC-SHA256 keyed with this key: tokens, tickets and the peer link's proofs
    /// ([`crate::fleet::PeerProof`]).
    pub(crate) fn mac(&self) -> Hmac<Sha256> {
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

/// Why a token was refused: a session token ([`verify`]) or a travel ticket
/// ([`crate::ticket::verify_ticket`], docs/spec/travel.md V8). The text names no kind: the
/// caller knows which it checked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TokenError {
    /// The token was empty.
    #[error("token is missing")]
    Missing,
    /// The token is not a well-formed HS256 JWT of the expected kind with the claims gatehouse
    /// needs.
    #[error("token is malformed: {0}")]
    Malformed(String),
    /// The signature does not verify with the server's key.
    #[error("token signature does not verify")]
    BadSignature,
    /// The token expired.
    #[error("token expired at {exp} (Unix seconds), now is {now}")]
    Expired {
        /// The `exp` claim.
        exp: u64,
        /// The time it was checked at.
        now: u64,
    },
    /// The token was issued in the future, beyond the clock-skew allowance.
    #[error("token issued at {iat} (Unix seconds), in the future: now is {now}")]
    IssuedInTheFuture {
        /// The `iat` claim.
        iat: u64,
        /// The time it was checked at.
        now: u64,
    },
    /// The token claims a longer life than the server accepts.
    #[error("token lives {lifetime_s} s from {from}, the maximum is {max_s} s")]
    LivesTooLong {
        /// Its life in seconds, from its `iat` or from now.
        lifetime_s: u64,
        /// Where that life was counted from: `iat` or `now`.
        from: &'static str,
        /// The server's limit: `auth.max_token_lifetime_s`, or `fleet.ticket_lifetime_s` for a
        /// travel ticket.
        max_s: u64,
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
            TokenError::IssuedInTheFuture { .. } | TokenError::LivesTooLong { .. } => {
                RejectReason::TokenLifetime
            }
        }
    }
}

/// The header `typ` of a travel ticket (docs/spec/travel.md V8).
pub(crate) const TICKET_TYP: &str = "gatehouse-ticket";

/// The header `typ` [`mint`] writes, Nakama's.
const SESSION_TYP: &str = "JWT";

/// Which kind of token `Hello.token` holds, read from its header's `typ` without verifying
/// anything (docs/spec/travel.md V8): a server picks the key to check it with by its kind, and
/// each kind's check refuses the other, so neither passes for the other whatever the keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TokenKind {
    /// A session token ([`verify`], with `auth.token_key`): every token that is not a ticket,
    /// including one whose header does not decode (its check then says why it is refused).
    Session,
    /// A travel ticket ([`crate::ticket::verify_ticket`], with `fleet.ticket_key`): a header
    /// whose `typ` is exactly `"gatehouse-ticket"`.
    Ticket,
}

impl TokenKind {
    /// The kind of `token`, from its header (the part before the first `.`) alone: the
    /// signature, the claims and the length are not looked at. Never fails: a header that is
    /// not base64url JSON is a [`TokenKind::Session`]'s, which its check refuses.
    pub fn of(token: &str) -> TokenKind {
        let header_b64 = token.split('.').next().unwrap_or_default();
        decode_json_part::<Header>("header", header_b64).map_or(TokenKind::Session, |h| h.kind())
    }
}

/// A token's header: the one part read before its signature is checked.
#[derive(Serialize, Deserialize)]
struct Header {
    alg: String,
    #[serde(default)]
    typ: Option<String>,
}

impl Header {
    /// The one rule telling a ticket from a session token.
    fn kind(&self) -> TokenKind {
        if self.typ.as_deref() == Some(TICKET_TYP) { TokenKind::Ticket } else { TokenKind::Session }
    }
}

/// Signs `claims` into a compact JWT (`header.payload.signature`, base64url without padding).
pub fn mint(key: &TokenKey, claims: &SessionClaims) -> String {
    sign(key, SESSION_TYP, claims)
}

/// Signs `claims` under an `HS256` header with this `typ`: [`mint`] and
/// [`crate::ticket::mint_ticket`].
pub(crate) fn sign<C: Serialize>(key: &TokenKey, typ: &str, claims: &C) -> String {
    let header = Header { alg: "HS256".into(), typ: Some(typ.into()) };
    // Serialising these plain structs to JSON cannot fail.
    let header = serde_json::to_vec(&header).unwrap_or_default();
    let payload = serde_json::to_vec(claims).unwrap_or_default();
    sign_raw(key, &header, &payload)
}

/// A compact token of these header and payload bytes (taken as they are), signed with `key`.
pub(crate) fn sign_raw(key: &TokenKey, header: &[u8], payload: &[u8]) -> String {
    let signing_input =
        format!("{}.{}", URL_SAFE_NO_PAD.encode(header), URL_SAFE_NO_PAD.encode(payload));
    let mut mac = key.mac();
    mac.update(signing_input.as_bytes());
    let signature = mac.finalize().into_bytes();
    format!("{signing_input}.{}", URL_SAFE_NO_PAD.encode(signature))
}

/// Verifies a compact JWT and returns its claims.
///
/// `now` is Unix seconds. A token is valid while `now < exp + clock_skew_s`, if its `iat` (when
/// it has one) is at most `now + clock_skew_s`, and if it lives at most `max_lifetime_s` from its
/// `iat` and from `now - clock_skew_s` (docs/protocol.md 4, "Session tokens").
///
/// # Errors
/// [`TokenError::Missing`] for an empty token; [`TokenError::Malformed`] for anything that is not
/// three base64url parts with an `HS256` header and JSON claims holding a valid `uid` and `exp`,
/// and for a travel ticket (a header `typ` of `"gatehouse-ticket"`, docs/spec/travel.md V8);
/// [`TokenError::BadSignature`]; [`TokenError::Expired`]; [`TokenError::IssuedInTheFuture`];
/// [`TokenError::LivesTooLong`].
pub fn verify(
    key: &TokenKey,
    token: &str,
    now: u64,
    limits: TokenLimits,
) -> Result<SessionClaims, TokenError> {
    let claims: SessionClaims = verify_signed(key, token, MAX_TOKEN_LEN, TokenKind::Session)?;
    check_times(claims.exp, claims.iat, now, limits)?;
    Ok(claims)
}

/// The checks every kind of token shares, in their order: the form (not empty, at most
/// `max_len` bytes, three parts, a JSON header), the algorithm (`HS256`), the kind (the header's
/// `typ`), the signature (in constant time), then the claims, decoded as `C`. The times are the
/// caller's to check, after these.
pub(crate) fn verify_signed<C: serde::de::DeserializeOwned>(
    key: &TokenKey,
    token: &str,
    max_len: usize,
    kind: TokenKind,
) -> Result<C, TokenError> {
    if token.is_empty() {
        return Err(TokenError::Missing);
    }
    if token.len() > max_len {
        return Err(TokenError::Malformed(format!(
            "{} bytes long, the maximum is {max_len}",
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
    if header.kind() != kind {
        return Err(TokenError::Malformed(match kind {
            TokenKind::Session => {
                format!("typ {TICKET_TYP:?}: a travel ticket, not a session token")
            }
            TokenKind::Ticket => {
                format!("typ {:?}, expected {TICKET_TYP:?}: not a travel ticket", header.typ)
            }
        }));
    }
    let signature = URL_SAFE_NO_PAD
        .decode(signature_b64)
        .map_err(|e| TokenError::Malformed(format!("signature is not base64url: {e}")))?;
    let mut mac = key.mac();
    mac.update(&token.as_bytes()[..header_b64.len() + 1 + payload_b64.len()]);
    mac.verify_slice(&signature).map_err(|_| TokenError::BadSignature)?;
    decode_json_part("claims", payload_b64)
}

/// The time checks of every kind of token, on claims whose signature holds: `exp`, and `iat`
/// when the token has one, Unix seconds, against `now`.
pub(crate) fn check_times(
    exp: u64,
    iat: Option<u64>,
    now: u64,
    limits: TokenLimits,
) -> Result<(), TokenError> {
    let skew = limits.clock_skew_s;
    // Sums in u128: near u64::MAX a saturating sum would move the bounds.
    if u128::from(now) >= u128::from(exp) + u128::from(skew) {
        return Err(TokenError::Expired { exp, now });
    }
    let (lifetime_s, from) = match iat {
        Some(iat) if u128::from(iat) > u128::from(now) + u128::from(skew) => {
            return Err(TokenError::IssuedInTheFuture { iat, now });
        }
        Some(iat) => (exp.saturating_sub(iat), "iat"),
        // Without an `iat`, what is left of its life counts, as if issued as early as the skew
        // allows.
        None => (exp.saturating_sub(now.saturating_sub(skew)), "now"),
    };
    if lifetime_s > limits.max_lifetime_s {
        return Err(TokenError::LivesTooLong { lifetime_s, from, max_s: limits.max_lifetime_s });
    }
    Ok(())
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

    /// No skew, a long lifetime: the tests of the signature and the form.
    const STRICT: TokenLimits = TokenLimits { max_lifetime_s: 1_000_000, clock_skew_s: 0 };

    fn verify(key: &TokenKey, token: &str, now: u64) -> Result<SessionClaims, TokenError> {
        super::verify(key, token, now, STRICT)
    }

    fn claims(uid: &str, exp: u64) -> SessionClaims {
        SessionClaims { uid: PlayerId::new(uid).unwrap(), exp, iat: Some(1), usn: None }
    }

    #[test]
    fn a_token_of_exactly_the_longest_length_is_read_and_one_byte_more_is_not() {
        let key = TokenKey::new("k");
        let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"HS256","typ":"JWT"}"#);
        let signature = "A".repeat(43);
        let payload = "A".repeat(MAX_TOKEN_LEN - header.len() - signature.len() - 2);
        let token = format!("{header}.{payload}.{signature}");
        assert_eq!(token.len(), MAX_TOKEN_LEN);
        assert_eq!(verify(&key, &token, 0), Err(TokenError::BadSignature), "read to its signature");
        let longer = format!("{header}.{payload}A.{signature}");
        let err = verify(&key, &longer, 0).unwrap_err();
        assert!(matches!(&err, TokenError::Malformed(why) if why.contains("bytes long")), "{err}");
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

    fn timed(iat: Option<u64>, exp: u64) -> String {
        let claims = SessionClaims { uid: PlayerId::new("p1").unwrap(), exp, iat, usn: None };
        mint(&TokenKey::new("k"), &claims)
    }

    fn check(token: &str, now: u64) -> Result<SessionClaims, TokenError> {
        let limits = TokenLimits { max_lifetime_s: 3_600, clock_skew_s: 60 };
        super::verify(&TokenKey::new("k"), token, now, limits)
    }

    #[test]
    fn a_token_expired_within_the_clock_skew_is_still_accepted() {
        let now = 1_000_000;
        assert!(check(&timed(Some(now - 100), now - 59), now).is_ok());
        assert_eq!(
            check(&timed(Some(now - 100), now - 60), now),
            Err(TokenError::Expired { exp: now - 60, now })
        );
    }

    #[test]
    fn a_token_issued_in_the_future_beyond_the_skew_is_refused() {
        let now = 1_000_000;
        assert!(check(&timed(Some(now + 60), now + 600), now).is_ok());
        let refused = check(&timed(Some(now + 61), now + 600), now);
        assert_eq!(refused, Err(TokenError::IssuedInTheFuture { iat: now + 61, now }));
        assert_eq!(refused.unwrap_err().reject_reason(), RejectReason::TokenLifetime);
    }

    #[test]
    fn a_token_living_longer_than_the_maximum_is_refused() {
        let now = 1_000_000;
        // From its iat.
        assert!(check(&timed(Some(now - 10), now - 10 + 3_600), now).is_ok());
        assert!(matches!(
            check(&timed(Some(now - 10), now - 10 + 3_601), now),
            Err(TokenError::LivesTooLong { lifetime_s: 3_601, from: "iat", max_s: 3_600 })
        ));
        // Without an iat, from now less the skew; exp = u64::MAX is no longer forever.
        assert!(check(&timed(None, now - 60 + 3_600), now).is_ok());
        assert!(matches!(
            check(&timed(None, now - 60 + 3_601), now),
            Err(TokenError::LivesTooLong { from: "now", .. })
        ));
        assert!(matches!(
            check(&timed(None, u64::MAX), now),
            Err(TokenError::LivesTooLong { from: "now", .. })
        ));
        // An iat as far in our future as the skew allows, with the longest life.
        assert!(check(&timed(Some(now + 60), now + 60 + 3_600), now).is_ok());
        assert!(matches!(
            check(&timed(Some(now - 3_000), u64::MAX), now),
            Err(TokenError::LivesTooLong { from: "iat", .. })
        ));
    }

    #[test]
    fn the_default_limits_accept_a_nakama_session_token() {
        // Nakama's default: issued now, expiring in 60 s; operators raise it to hours.
        let now = 1_765_000_000;
        for life in [60, 7_200, 86_400] {
            let token = timed(Some(now), now + life);
            assert!(
                super::verify(&TokenKey::new("k"), &token, now, TokenLimits::default()).is_ok()
            );
        }
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

    /// A token over `payload` (raw JSON) with `alg` in its header, signed with `key`.
    fn signed(key: &TokenKey, alg: &str, payload: &str) -> String {
        let header = URL_SAFE_NO_PAD.encode(format!("{{\"alg\":\"{alg}\",\"typ\":\"JWT\"}}"));
        let payload = URL_SAFE_NO_PAD.encode(payload);
        let mut mac = key.mac();
        mac.update(format!("{header}.{payload}").as_bytes());
        let sig = URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes());
        format!("{header}.{payload}.{sig}")
    }

    /// Every token defect gets the `Rejected` reason docs/protocol.md 4 ("Session tokens")
    /// gives it: the form, the algorithm and the kind before the signature, the signature before
    /// the claims, the claims before the times; `iat` and `typ` are optional, and a travel
    /// ticket's `typ` is refused (docs/spec/travel.md V8).
    #[test]
    fn each_token_defect_gets_its_documented_reject_reason() {
        let key = TokenKey::new("k");
        let other = TokenKey::new("not k");
        let now = 1_000;
        let limits = TokenLimits { max_lifetime_s: 86_400, clock_skew_s: 60 };
        let cases: &[(&str, String, Option<RejectReason>)] = &[
            (
                "valid, with iat",
                signed(&key, "HS256", r#"{"uid":"p1","exp":2000,"iat":1000}"#),
                None,
            ),
            ("valid, without iat", signed(&key, "HS256", r#"{"uid":"p1","exp":2000}"#), None),
            (
                "valid, without typ",
                sign_raw(&key, br#"{"alg":"HS256"}"#, br#"{"uid":"p1","exp":2000}"#),
                None,
            ),
            (
                "valid, another typ",
                sign_raw(&key, br#"{"alg":"HS256","typ":"at+jwt"}"#, br#"{"uid":"p1","exp":2000}"#),
                None,
            ),
            (
                "typ of a travel ticket",
                sign_raw(
                    &key,
                    br#"{"alg":"HS256","typ":"gatehouse-ticket"}"#,
                    br#"{"uid":"p1","exp":2000}"#,
                ),
                Some(RejectReason::MalformedToken),
            ),
            (
                "typ of a travel ticket, another key",
                sign_raw(
                    &other,
                    br#"{"alg":"HS256","typ":"gatehouse-ticket"}"#,
                    br#"{"uid":"p1","exp":2000}"#,
                ),
                Some(RejectReason::MalformedToken),
            ),
            ("empty", String::new(), Some(RejectReason::MissingToken)),
            ("too long", "a".repeat(MAX_TOKEN_LEN + 1), Some(RejectReason::MalformedToken)),
            ("two parts", "a.b".into(), Some(RejectReason::MalformedToken)),
            (
                "alg none",
                signed(&key, "none", r#"{"uid":"p1","exp":2000}"#),
                Some(RejectReason::MalformedToken),
            ),
            (
                "alg HS512",
                signed(&key, "HS512", r#"{"uid":"p1","exp":2000}"#),
                Some(RejectReason::MalformedToken),
            ),
            (
                "another key",
                signed(&other, "HS256", r#"{"uid":"p1","exp":2000}"#),
                Some(RejectReason::BadSignature),
            ),
            (
                "bad claims, another key",
                signed(&other, "HS256", r#"{"exp":2000}"#),
                Some(RejectReason::BadSignature),
            ),
            (
                "no uid",
                signed(&key, "HS256", r#"{"exp":2000}"#),
                Some(RejectReason::MalformedToken),
            ),
            (
                "no exp",
                signed(&key, "HS256", r#"{"uid":"p1"}"#),
                Some(RejectReason::MalformedToken),
            ),
            (
                "exp not a number",
                signed(&key, "HS256", r#"{"uid":"p1","exp":"soon"}"#),
                Some(RejectReason::MalformedToken),
            ),
            (
                "uid breaks the id rules",
                signed(&key, "HS256", r#"{"uid":"p 1","exp":2000}"#),
                Some(RejectReason::MalformedToken),
            ),
            (
                "uid empty",
                signed(&key, "HS256", r#"{"uid":"","exp":2000}"#),
                Some(RejectReason::MalformedToken),
            ),
            (
                "expired past the skew",
                signed(&key, "HS256", r#"{"uid":"p1","exp":940}"#),
                Some(RejectReason::Expired),
            ),
            ("expired within the skew", signed(&key, "HS256", r#"{"uid":"p1","exp":941}"#), None),
            (
                "iat past the skew",
                signed(&key, "HS256", r#"{"uid":"p1","exp":2000,"iat":1061}"#),
                Some(RejectReason::TokenLifetime),
            ),
            (
                "lives too long",
                signed(&key, "HS256", r#"{"uid":"p1","exp":90000,"iat":1000}"#),
                Some(RejectReason::TokenLifetime),
            ),
            (
                "lives too long, no iat",
                signed(&key, "HS256", r#"{"uid":"p1","exp":88000}"#),
                Some(RejectReason::TokenLifetime),
            ),
        ];
        for (what, token, expected) in cases {
            let got = super::verify(&key, token, now, limits).err().map(|e| e.reject_reason());
            assert_eq!(&got, expected, "{what}");
        }
    }

    proptest::proptest! {
        #[test]
        fn verify_never_panics(s in ".{0,300}") {
            let _ = super::verify(&TokenKey::new("k"), &s, 0, TokenLimits::DEFAULT);
        }
    }
}
