//! Travel tickets (docs/spec/travel.md V8): HS256 tokens under the fleet's key naming one player,
//! one destination, one transition and one seat generation, for a few seconds.
//!
//! A ticket is a session token's compact form ([`crate::token`]) with the header
//! `{"alg":"HS256","typ":"gatehouse-ticket"}`, checked with that module's key type, checks and
//! order of defects. `Hello.token` holds either kind, told apart by the header's `typ`
//! ([`TokenKind::of`]); each check refuses the other kind as `MalformedToken`, so neither passes
//! for the other even under one key. Verification takes `now` as an argument and never reads a
//! clock. Whether the seat a ticket names is held, and the ticket not yet redeemed, is the
//! destination's core's to check (V9), not this module's.

use serde::{Deserialize, Serialize};

use crate::ids::{NodeId, PlayerId, ServerId, TransitionId};
use crate::token::{self, TICKET_TYP, TokenError, TokenKey, TokenKind, TokenLimits};

/// Longest ticket accepted, in bytes (docs/spec/travel.md V8). A minted ticket with every id at
/// its longest and every number at its largest takes under 700 bytes; a longer one is refused
/// as `MalformedToken` before its signature is looked at.
pub const MAX_TICKET_LEN: usize = 1024;

/// The shortest ticket lifetime a server may be configured with (`fleet.ticket_lifetime_s`,
/// [`TicketLimits::max_lifetime_s`]), seconds (docs/spec/travel.md V8): with
/// [`MAX_TICKET_LIFETIME_S`], the range `5..=120` a server config accepts.
pub const MIN_TICKET_LIFETIME_S: u64 = 5;

/// The longest ticket lifetime a server may be configured with (`fleet.ticket_lifetime_s`,
/// [`TicketLimits::max_lifetime_s`]), seconds (docs/spec/travel.md V8): with
/// [`MIN_TICKET_LIFETIME_S`], the range `5..=120` a server config accepts.
pub const MAX_TICKET_LIFETIME_S: u64 = 120;

/// What a ticket's times may be, beyond a valid signature (docs/spec/travel.md V8). A ticket
/// also dies with its seat, whatever its times (V9).
///
/// A type of its own, not [`TokenLimits`], so that a session token's day of life cannot be
/// handed to the ticket check by mistake.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TicketLimits {
    /// The longest life a ticket may claim, from its `iat` to its `exp`, seconds
    /// (`fleet.ticket_lifetime_s`; the server config keeps it within
    /// [`MIN_TICKET_LIFETIME_S`]`..=`[`MAX_TICKET_LIFETIME_S`], which this check does not
    /// enforce). A longer life is refused `TokenLifetime`.
    pub max_lifetime_s: u64,
    /// How far the minting server's clock may be from ours, seconds (`auth.clock_skew_s`, as
    /// for session tokens): a ticket is valid until `exp + clock_skew_s`, and may be issued up to
    /// `clock_skew_s` in our future.
    pub clock_skew_s: u64,
}

impl TicketLimits {
    /// The defaults (docs/spec/travel.md V8): a lifetime of 30 s, and a session token's default
    /// skew ([`TokenLimits::DEFAULT`], 60 s).
    pub const DEFAULT: TicketLimits =
        TicketLimits { max_lifetime_s: 30, clock_skew_s: TokenLimits::DEFAULT.clock_skew_s };

    /// The same bounds, in the form the checks shared with session tokens take.
    fn as_token_limits(self) -> TokenLimits {
        TokenLimits { max_lifetime_s: self.max_lifetime_s, clock_skew_s: self.clock_skew_s }
    }
}

impl Default for TicketLimits {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// What a destination checks a ticket with (docs/spec/travel.md V8): the fleet's key
/// (`fleet.ticket_key`, never `auth.token_key`) and the bounds on the ticket's times.
#[derive(Debug, Clone)]
pub struct TicketCheck {
    /// The fleet's key.
    pub key: TokenKey,
    /// The bounds on the ticket's times.
    pub limits: TicketLimits,
}

impl TicketCheck {
    /// [`verify_ticket`] with this key and these limits, at `now` (Unix seconds).
    ///
    /// # Errors
    /// As [`verify_ticket`].
    pub fn verify(&self, token: &str, now: u64) -> Result<TicketClaims, TokenError> {
        verify_ticket(&self.key, token, now, self.limits)
    }
}

/// The claims of a travel ticket, all required (docs/spec/travel.md V8): a ticket missing one,
/// or holding one of another type, is refused `MalformedToken`. Claims beyond these are
/// ignored, as in a session token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TicketClaims {
    /// The moving player.
    pub uid: PlayerId,
    /// Issue time, Unix seconds.
    pub iat: u64,
    /// Expiry, Unix seconds.
    pub exp: u64,
    /// The source: the server that minted the ticket.
    pub src: ServerId,
    /// The destination: the one server the ticket is good at (V9).
    pub dst: ServerId,
    /// The source's transition (the travel) the seat was granted for; an id of the source's,
    /// a JSON number.
    pub trn: TransitionId,
    /// The node the player travels to.
    pub node: NodeId,
    /// The version `v` of the player's handoff save, which the destination loads (V2, V4).
    pub ver: u64,
    /// The seat's generation, the claim `gen`: a newer one voids this ticket (V9). (`gen` is a
    /// reserved word in Rust 2024, hence the longer field name.)
    #[serde(rename = "gen")]
    pub generation: u32,
}

/// Signs `claims` into a ticket: `header.payload.signature`, base64url without padding, the
/// header exactly `{"alg":"HS256","typ":"gatehouse-ticket"}` (docs/spec/travel.md V8). `key` is
/// the fleet's (`fleet.ticket_key`). Never fails; a ticket of valid claims is at most
/// [`MAX_TICKET_LEN`] bytes.
pub fn mint_ticket(key: &TokenKey, claims: &TicketClaims) -> String {
    token::sign(key, TICKET_TYP, claims)
}

/// Verifies a ticket and returns its claims (docs/spec/travel.md V8).
///
/// `now` is Unix seconds. The checks and their order are a session token's
/// ([`token::verify`]), with the ticket's kind, length and claims: a ticket is valid while
/// `now < exp + clock_skew_s`, if its `iat` is at most `now + clock_skew_s` and if it lives at
/// most `max_lifetime_s` from its `iat`. Each error's [`TokenError::reject_reason`] is the
/// `Rejected` reason to send; its text is for people.
///
/// # Errors
/// In this order: [`TokenError::Missing`] (`MissingToken`) for an empty token;
/// [`TokenError::Malformed`] (`MalformedToken`) for one longer than [`MAX_TICKET_LEN`], not
/// three base64url parts, with an `alg` other than `HS256` or a `typ` other than
/// `"gatehouse-ticket"` (a session token); [`TokenError::BadSignature`] (`BadSignature`) when the
/// signature does not verify with `key`; [`TokenError::Malformed`] for claims that are not
/// JSON, miss a claim of [`TicketClaims`] or hold one of another type or breaking its id rule;
/// [`TokenError::Expired`] (`Expired`); [`TokenError::IssuedInTheFuture`] and
/// [`TokenError::LivesTooLong`] (`TokenLifetime`).
pub fn verify_ticket(
    key: &TokenKey,
    token: &str,
    now: u64,
    limits: TicketLimits,
) -> Result<TicketClaims, TokenError> {
    let claims: TicketClaims = token::verify_signed(key, token, MAX_TICKET_LEN, TokenKind::Ticket)?;
    token::check_times(claims.exp, Some(claims.iat), now, limits.as_token_limits())?;
    Ok(claims)
}

#[cfg(test)]
mod tests {
    use base64::Engine as _;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use serde_json::{Value, json};

    use super::*;
    use crate::ids::MAX_NAME_LEN;
    use crate::messages::RejectReason;
    use crate::token::{SessionClaims, sign_raw};

    const NOW: u64 = 1_000_000;
    /// A 30 s life and a minute of skew, the defaults spelt out.
    const LIMITS: TicketLimits = TicketLimits { max_lifetime_s: 30, clock_skew_s: 60 };
    const TICKET_HEADER: &[u8] = br#"{"alg":"HS256","typ":"gatehouse-ticket"}"#;

    fn key() -> TokenKey {
        TokenKey::new("fleet key, shared by both kinds in these tests")
    }

    fn claims() -> TicketClaims {
        TicketClaims {
            uid: PlayerId::new("p1").unwrap(),
            iat: NOW,
            exp: NOW + 30,
            src: ServerId::new("server-a").unwrap(),
            dst: ServerId::new("server-b").unwrap(),
            trn: TransitionId(7),
            node: NodeId::new("forest").unwrap(),
            ver: 12,
            generation: 3,
        }
    }

    /// The claims of [`claims`] as JSON, with `changes` applied: a `null` removes the claim.
    fn payload(changes: &[(&str, Value)]) -> Value {
        let mut payload = serde_json::to_value(claims()).unwrap();
        let object = payload.as_object_mut().unwrap();
        for (claim, value) in changes {
            if value.is_null() {
                assert!(object.remove(*claim).is_some(), "{claim} is a claim");
            } else {
                object.insert((*claim).to_owned(), value.clone());
            }
        }
        payload
    }

    /// A token of this header and payload, signed with `key`.
    fn signed(key: &TokenKey, header: &[u8], payload: &Value) -> String {
        sign_raw(key, header, &serde_json::to_vec(payload).unwrap())
    }

    fn reason(token: &str) -> Option<RejectReason> {
        verify_ticket(&key(), token, NOW, LIMITS).err().map(|e| e.reject_reason())
    }

    #[test]
    fn a_minted_ticket_verifies_back_to_its_claims() {
        let ticket = mint_ticket(&key(), &claims());
        assert_eq!(verify_ticket(&key(), &ticket, NOW, LIMITS), Ok(claims()));
        let check = TicketCheck { key: key(), limits: TicketLimits::default() };
        assert_eq!(check.verify(&ticket, NOW + 29), Ok(claims()));
    }

    #[test]
    fn a_ticket_header_is_exactly_hs256_and_the_ticket_typ() {
        let ticket = mint_ticket(&key(), &claims());
        let header = URL_SAFE_NO_PAD.decode(ticket.split('.').next().unwrap()).unwrap();
        assert_eq!(header, TICKET_HEADER, "{}", String::from_utf8_lossy(&header));
        assert_eq!(TokenKind::of(&ticket), TokenKind::Ticket);
    }

    /// Under one key, a ticket (whose claims hold a session token's `uid`, `exp` and `iat`) is
    /// refused by the session token check for its `typ` alone: the same claims under Nakama's
    /// header pass it.
    #[test]
    fn a_ticket_never_verifies_as_a_session_token() {
        let ticket = mint_ticket(&key(), &claims());
        let refused = token::verify(&key(), &ticket, NOW, TokenLimits::DEFAULT);
        assert!(
            matches!(&refused, Err(TokenError::Malformed(m)) if m.contains(TICKET_TYP)),
            "{refused:?}"
        );
        assert_eq!(refused.unwrap_err().reject_reason(), RejectReason::MalformedToken);

        let as_jwt = signed(&key(), br#"{"alg":"HS256","typ":"JWT"}"#, &payload(&[]));
        let session = token::verify(&key(), &as_jwt, NOW, TokenLimits::DEFAULT).unwrap();
        assert_eq!(session.uid.as_str(), "p1");
    }

    /// Under one key, a token holding every ticket claim is refused by the ticket check unless
    /// its `typ` is a ticket's: Nakama's `"JWT"`, none, or another.
    #[test]
    fn a_session_token_never_verifies_as_a_ticket() {
        let claims_of_a_ticket = payload(&[]);
        for header in [
            &br#"{"alg":"HS256","typ":"JWT"}"#[..],
            br#"{"alg":"HS256"}"#,
            br#"{"alg":"HS256","typ":null}"#,
            br#"{"alg":"HS256","typ":"Gatehouse-Ticket"}"#,
        ] {
            let token = signed(&key(), header, &claims_of_a_ticket);
            assert_eq!(TokenKind::of(&token), TokenKind::Session);
            let refused = verify_ticket(&key(), &token, NOW, LIMITS);
            assert!(
                matches!(&refused, Err(TokenError::Malformed(m)) if m.contains("not a travel ticket")),
                "{}: {refused:?}",
                String::from_utf8_lossy(header)
            );
        }
        assert_eq!(
            verify_ticket(&key(), &signed(&key(), TICKET_HEADER, &claims_of_a_ticket), NOW, LIMITS),
            Ok(claims())
        );
        let session = SessionClaims { uid: claims().uid, exp: NOW + 30, iat: Some(NOW), usn: None };
        assert_eq!(reason(&token::mint(&key(), &session)), Some(RejectReason::MalformedToken));
    }

    /// Every ticket defect gets a session token's `Rejected` reason (docs/spec/travel.md V8),
    /// a life above the limit `TokenLifetime`; each claim is required.
    #[test]
    fn each_ticket_defect_gets_its_reject_reason() {
        let other = TokenKey::new("the issuer's key, not the fleet's");
        let ticket = |changes: &[(&str, Value)]| signed(&key(), TICKET_HEADER, &payload(changes));
        let times = |iat: u64, exp: u64| ticket(&[("iat", json!(iat)), ("exp", json!(exp))]);
        let rest = ticket(&[]).split_once('.').unwrap().1.to_owned();
        let with_alg = |alg: &str| {
            let header = format!(r#"{{"alg":"{alg}","typ":"gatehouse-ticket"}}"#);
            format!("{}.{rest}", URL_SAFE_NO_PAD.encode(header))
        };
        let mut cases: Vec<(String, String, Option<RejectReason>)> = vec![
            ("valid".into(), ticket(&[]), None),
            ("an extra claim".into(), ticket(&[("usn", json!("name"))]), None),
            ("empty".into(), String::new(), Some(RejectReason::MissingToken)),
            (
                "too long, else valid".into(),
                ticket(&[("pad", json!("x".repeat(MAX_TICKET_LEN)))]),
                Some(RejectReason::MalformedToken),
            ),
            ("two parts".into(), "a.b".into(), Some(RejectReason::MalformedToken)),
            ("alg none".into(), with_alg("none"), Some(RejectReason::MalformedToken)),
            ("alg HS512".into(), with_alg("HS512"), Some(RejectReason::MalformedToken)),
            (
                "typ JWT".into(),
                signed(&key(), br#"{"alg":"HS256","typ":"JWT"}"#, &payload(&[])),
                Some(RejectReason::MalformedToken),
            ),
            (
                "no typ".into(),
                signed(&key(), br#"{"alg":"HS256"}"#, &payload(&[])),
                Some(RejectReason::MalformedToken),
            ),
            (
                "another key".into(),
                signed(&other, TICKET_HEADER, &payload(&[])),
                Some(RejectReason::BadSignature),
            ),
            (
                "claims not JSON".into(),
                sign_raw(&key(), TICKET_HEADER, b"uid=p1"),
                Some(RejectReason::MalformedToken),
            ),
            (
                "gen too large".into(),
                ticket(&[("gen", json!(1u64 << 32))]),
                Some(RejectReason::MalformedToken),
            ),
            (
                "gen a string".into(),
                ticket(&[("gen", json!("3"))]),
                Some(RejectReason::MalformedToken),
            ),
            (
                "trn negative".into(),
                ticket(&[("trn", json!(-1))]),
                Some(RejectReason::MalformedToken),
            ),
            (
                "ver a float".into(),
                ticket(&[("ver", json!(1.5))]),
                Some(RejectReason::MalformedToken),
            ),
            (
                "uid breaks the id rule".into(),
                ticket(&[("uid", json!("p 1"))]),
                Some(RejectReason::MalformedToken),
            ),
            ("src empty".into(), ticket(&[("src", json!(""))]), Some(RejectReason::MalformedToken)),
            (
                "dst a number".into(),
                ticket(&[("dst", json!(2))]),
                Some(RejectReason::MalformedToken),
            ),
            (
                "node breaks the id rule".into(),
                ticket(&[("node", json!("a/b"))]),
                Some(RejectReason::MalformedToken),
            ),
            (
                "expired past the skew".into(),
                times(NOW - 80, NOW - 60),
                Some(RejectReason::Expired),
            ),
            ("expired within the skew".into(), times(NOW - 80, NOW - 59), None),
            (
                "issued past the skew".into(),
                times(NOW + 61, NOW + 91),
                Some(RejectReason::TokenLifetime),
            ),
            ("issued within the skew".into(), times(NOW + 60, NOW + 90), None),
            (
                "lives above the limit".into(),
                times(NOW, NOW + 31),
                Some(RejectReason::TokenLifetime),
            ),
            ("lives the limit".into(), times(NOW, NOW + 30), None),
        ];
        for claim in ["uid", "iat", "exp", "src", "dst", "trn", "node", "ver", "gen"] {
            let missing = ticket(&[(claim, Value::Null)]);
            cases.push((format!("no {claim}"), missing, Some(RejectReason::MalformedToken)));
        }
        for (what, token, expected) in &cases {
            assert_eq!(&reason(token), expected, "{what}");
        }
    }

    /// Where two defects meet, the first in a session token's order decides: the form, the
    /// algorithm and the kind before the signature, the signature before the claims, the claims
    /// before the times, expiry before the lifetime.
    #[test]
    fn the_first_defect_in_order_decides() {
        let other = TokenKey::new("the issuer's key, not the fleet's");
        let by_other =
            |header: &[u8], changes: &[(&str, Value)]| signed(&other, header, &payload(changes));
        let by_key = |changes: &[(&str, Value)]| signed(&key(), TICKET_HEADER, &payload(changes));
        let cases: &[(&str, String, RejectReason)] = &[
            (
                "too long, another key",
                by_other(TICKET_HEADER, &[("pad", json!("x".repeat(MAX_TICKET_LEN)))]),
                RejectReason::MalformedToken,
            ),
            (
                "alg none, another key",
                by_other(br#"{"alg":"none","typ":"gatehouse-ticket"}"#, &[]),
                RejectReason::MalformedToken,
            ),
            (
                "a session token's typ, another key",
                by_other(br#"{"alg":"HS256","typ":"JWT"}"#, &[]),
                RejectReason::MalformedToken,
            ),
            (
                "another key, no gen",
                by_other(TICKET_HEADER, &[("gen", Value::Null)]),
                RejectReason::BadSignature,
            ),
            (
                "no gen, expired",
                by_key(&[
                    ("gen", Value::Null),
                    ("iat", json!(NOW - 100)),
                    ("exp", json!(NOW - 90)),
                ]),
                RejectReason::MalformedToken,
            ),
            (
                "expired, lives above the limit",
                by_key(&[("iat", json!(NOW - 200)), ("exp", json!(NOW - 100))]),
                RejectReason::Expired,
            ),
        ];
        for (what, token, expected) in cases {
            assert_eq!(reason(token), Some(*expected), "{what}");
        }
    }

    /// A ticket with every id at its longest and every number at its largest fits
    /// [`MAX_TICKET_LEN`] and verifies: minting never makes a ticket its check refuses as long.
    #[test]
    fn the_longest_ticket_fits_its_limit() {
        let longest = |c: char| c.to_string().repeat(MAX_NAME_LEN);
        let claims = TicketClaims {
            uid: PlayerId::new(longest('u')).unwrap(),
            iat: u64::MAX - 30,
            exp: u64::MAX,
            src: ServerId::new(longest('s')).unwrap(),
            dst: ServerId::new(longest('d')).unwrap(),
            trn: TransitionId(u64::MAX),
            node: NodeId::new(longest('n')).unwrap(),
            ver: u64::MAX,
            generation: u32::MAX,
        };
        let ticket = mint_ticket(&key(), &claims);
        assert!(ticket.len() <= MAX_TICKET_LEN, "{} bytes", ticket.len());
        assert_eq!(verify_ticket(&key(), &ticket, u64::MAX - 30, LIMITS), Ok(claims));
    }

    /// The kind is read from the header alone: no key, no valid signature or claims needed,
    /// and anything whose header does not say "ticket" goes to the session token check.
    #[test]
    fn token_kind_reads_the_typ_of_the_header_alone() {
        let ticket_header = URL_SAFE_NO_PAD.encode(TICKET_HEADER);
        assert_eq!(TokenKind::of(&format!("{ticket_header}.x.y")), TokenKind::Ticket);
        assert_eq!(TokenKind::of(&format!("{ticket_header}.")), TokenKind::Ticket);
        for other in ["", "a.b.c", "!!.??.**", ".x.y"] {
            assert_eq!(TokenKind::of(other), TokenKind::Session, "{other}");
        }
        let session = token::mint(
            &key(),
            &SessionClaims { uid: claims().uid, exp: NOW, iat: None, usn: None },
        );
        assert_eq!(TokenKind::of(&session), TokenKind::Session);
    }

    #[test]
    fn the_default_lifetime_is_within_the_configurable_range() {
        let range = MIN_TICKET_LIFETIME_S..=MAX_TICKET_LIFETIME_S;
        assert_eq!(range, 5..=120);
        assert!(range.contains(&TicketLimits::default().max_lifetime_s));
        assert_eq!(TicketLimits::DEFAULT.max_lifetime_s, 30);
        assert_eq!(TicketLimits::DEFAULT.clock_skew_s, TokenLimits::DEFAULT.clock_skew_s);
    }

    proptest::proptest! {
        #[test]
        fn verify_ticket_and_token_kind_never_panic(s in ".{0,1100}") {
            let _ = verify_ticket(&key(), &s, NOW, LIMITS);
            let _ = TokenKind::of(&s);
        }
    }
}
