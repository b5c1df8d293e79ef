//! Fuzz target: the session-token verifier, `token::verify`, on the token a
//! peer sends in `Hello` and on any configured key.
//!
//! Checked:
//! - `verify` never panics on an arbitrary token, key, time and limits, and never accepts a
//!   token outside its limits (expired past the skew, issued in the future past it, or living
//!   longer than the maximum);
//! - a token minted with a key verifies with that key exactly while its times are within the
//!   limits, and never with a key HMAC tells apart from it;
//! - a minted token with one character changed never verifies.

#![no_main]
#![forbid(unsafe_code)]

use arbitrary::Arbitrary;
use gatehouse_protocol::PlayerId;
use gatehouse_protocol::token::{
    MAX_TOKEN_LEN, SessionClaims, TokenError, TokenKey, TokenLimits, mint, verify,
};
use libfuzzer_sys::fuzz_target;
use sha2::{Digest, Sha256};

#[derive(Debug, Arbitrary)]
struct Case {
    /// A token as a peer would send it.
    token: String,
    key: Vec<u8>,
    other_key: Vec<u8>,
    now: u64,
    max_lifetime_s: u64,
    clock_skew_s: u64,
    /// Claims to mint.
    uid: String,
    exp: u64,
    iat: Option<u64>,
    usn: Option<String>,
    /// Where to change the minted token, and to what.
    tamper_at: u16,
    tamper_with: char,
}

/// The key HMAC-SHA256 actually uses: a key longer than the 64-byte block is hashed first, and
/// every key is padded with zero bytes to the block. Two keys with the same block are one key
/// (RFC 2104), so neither can tell the other's tokens apart: "k" and "k\0" sign alike.
fn hmac_block(key: &[u8]) -> [u8; 64] {
    let mut block = [0u8; 64];
    if key.len() > 64 {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    block
}

/// Whether `claims`' times are within `limits` at `now`: the oracle, written apart from the
/// verifier (docs/protocol.md 4, "Session tokens").
fn within(claims: &SessionClaims, now: u64, limits: TokenLimits) -> bool {
    let (now, skew, max) =
        (u128::from(now), u128::from(limits.clock_skew_s), u128::from(limits.max_lifetime_s));
    let exp = u128::from(claims.exp);
    let issued = match claims.iat {
        Some(iat) => u128::from(iat),
        None => now.saturating_sub(skew),
    };
    now < exp + skew && issued <= now + skew && exp.saturating_sub(issued) <= max
}

fuzz_target!(|case: Case| {
    let key = TokenKey::new(case.key.clone());
    let limits =
        TokenLimits { max_lifetime_s: case.max_lifetime_s, clock_skew_s: case.clock_skew_s };
    if let Ok(claims) = verify(&key, &case.token, case.now, limits) {
        assert!(within(&claims, case.now, limits), "accepted a token outside {limits:?}");
    }

    let Ok(uid) = PlayerId::new(case.uid) else { return };
    let claims = SessionClaims { uid, exp: case.exp, iat: case.iat, usn: case.usn };
    let token = mint(&key, &claims);
    if token.len() > MAX_TOKEN_LEN {
        // A display name can make a token longer than any server accepts.
        let verdict = verify(&key, &token, case.now, limits);
        assert!(matches!(verdict, Err(TokenError::Malformed(_))), "{verdict:?}");
        return;
    }
    let verdict = verify(&key, &token, case.now, limits);
    if within(&claims, case.now, limits) {
        assert_eq!(verdict, Ok(claims.clone()), "a minted token under its own key");
    } else {
        assert!(
            matches!(
                verdict,
                Err(TokenError::Expired { .. }
                    | TokenError::IssuedInTheFuture { .. }
                    | TokenError::LivesTooLong { .. })
            ),
            "a minted token outside {limits:?}: {verdict:?}"
        );
    }

    if hmac_block(&case.other_key) != hmac_block(&case.key) {
        let other = TokenKey::new(case.other_key);
        assert_eq!(
            verify(&other, &token, case.now, limits),
            Err(TokenError::BadSignature),
            "a token verified with another key"
        );
    }

    let mut chars: Vec<char> = token.chars().collect();
    let at = usize::from(case.tamper_at) % chars.len();
    if chars[at] != case.tamper_with {
        chars[at] = case.tamper_with;
        let tampered: String = chars.into_iter().collect();
        let verdict = verify(&key, &tampered, case.now, limits);
        assert!(verdict.is_err(), "a tampered token verified: {tampered:?} gave {verdict:?}");
    }
});
