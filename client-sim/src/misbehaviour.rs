//! Misbehaving clients among well-behaved ones (docs/testing.md, "Misbehaving clients"): which
//! clients of a swarm misbehave, how, and what the protocol answers each kind with.
//!
//! A misbehaving client still logs in with a valid token; then it breaks the protocol in one way,
//! drawn from its place in the swarm. The session ([`crate::session`]) carries out the kinds that
//! are wrong messages (restart spam, stale and unknown ids, never acknowledging); the swarm
//! ([`crate::swarm`]) the kinds that are wrong bytes or no bytes (garbage and oversized frames,
//! going silent). The report keeps their outcomes apart from the well-behaved clients', whose
//! checks must stay clean. This module decides nothing at run time and imports nothing of the
//! crate.

use std::fmt;

use gatehouse_protocol::CloseCode;

/// One way a client misbehaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Misbehaviour {
    /// Sends `RestartRequest` every [`RESTART_SPAM_EVERY`] from its `Welcome` on, dead or
    /// alive, far above the refusal rate limit: while alive each is refused (`RestartRejected`,
    /// then `RateLimited`), and it is closed with [`CloseCode::Abuse`].
    RestartSpam,
    /// Does its duties, and beside each one sends a wrong id: a ready report for the previous
    /// (stale) transition and one for a transition never started, an acknowledgement of another
    /// player's pawn and one of a pawn never issued, a join report for a join never started.
    /// Stale ones are ignored, unknown ones refused (`UnknownTransition`, `UnknownPawn`,
    /// `UnknownJoin`, then `RateLimited`); it stays connected.
    StaleIds,
    /// Once placed, writes a frame whose body does not decode: closed with
    /// [`CloseCode::ProtocolViolation`].
    GarbageFrame,
    /// Once placed, writes a frame header announcing a body far above the maximum frame length:
    /// closed with [`CloseCode::ProtocolViolation`].
    OversizedFrame,
    /// Never acknowledges a possession: the transition it is in waits for it until the settle
    /// timeout, then it is kicked ([`CloseCode::ReadyTimeout`], `kick` policy).
    NeverAcknowledge,
    /// Once placed, stops reading and writing but keeps its connection (QUIC keeps it alive):
    /// the next transition waits for its ready report until the client-ready timeout, then it
    /// is kicked ([`CloseCode::ReadyTimeout`]); a send queue that overflows first closes it as
    /// [`CloseCode::SlowConsumer`].
    Silent,
}

/// How often a [`Misbehaviour::RestartSpam`] client sends `RestartRequest`: 50 per second. The
/// server answers 5 refusals per 10 s and closes at 50, so it is closed within about a second.
pub const RESTART_SPAM_EVERY: std::time::Duration = std::time::Duration::from_millis(20);

/// A transport misbehaviour ([`Misbehaviour::GarbageFrame`], [`Misbehaviour::OversizedFrame`],
/// [`Misbehaviour::Silent`]) starts once the client is placed, or this long after `Welcome` if it
/// is not placed by then.
pub const TRANSPORT_MISBEHAVIOUR_AFTER: std::time::Duration = std::time::Duration::from_secs(3);

impl Misbehaviour {
    /// Every kind, in the order clients are given them.
    pub const ALL: [Misbehaviour; 6] = [
        Misbehaviour::RestartSpam,
        Misbehaviour::StaleIds,
        Misbehaviour::GarbageFrame,
        Misbehaviour::OversizedFrame,
        Misbehaviour::NeverAcknowledge,
        Misbehaviour::Silent,
    ];

    /// The kind's name on the command line and in the report, e.g. `restart-spam`.
    pub fn name(self) -> &'static str {
        match self {
            Misbehaviour::RestartSpam => "restart-spam",
            Misbehaviour::StaleIds => "stale-ids",
            Misbehaviour::GarbageFrame => "garbage-frame",
            Misbehaviour::OversizedFrame => "oversized-frame",
            Misbehaviour::NeverAcknowledge => "never-acknowledge",
            Misbehaviour::Silent => "silent",
        }
    }

    /// Whether the kind is carried out by the swarm on the connection (wrong bytes or none)
    /// rather than by the session (wrong messages).
    pub fn is_transport(self) -> bool {
        matches!(
            self,
            Misbehaviour::GarbageFrame | Misbehaviour::OversizedFrame | Misbehaviour::Silent
        )
    }

    /// Whether a client of this kind may end its run this way, as the protocol says: closed by
    /// the server with `close`, or (`None`) still connected when its run ended. Kinds the server
    /// answers only at a transition (never acknowledging, going silent) may also end unclosed
    /// when no transition came in time.
    pub fn allows(self, close: Option<CloseCode>) -> bool {
        match self {
            Misbehaviour::RestartSpam => close == Some(CloseCode::Abuse),
            Misbehaviour::StaleIds => close.is_none(),
            Misbehaviour::GarbageFrame | Misbehaviour::OversizedFrame => {
                close == Some(CloseCode::ProtocolViolation)
            }
            Misbehaviour::NeverAcknowledge => {
                matches!(close, None | Some(CloseCode::ReadyTimeout))
            }
            Misbehaviour::Silent => {
                matches!(close, None | Some(CloseCode::ReadyTimeout | CloseCode::SlowConsumer))
            }
        }
    }
}

impl fmt::Display for Misbehaviour {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Parses a list of kinds for a command line: names separated by commas, e.g.
/// `restart-spam,silent`, or `all`.
///
/// # Errors
/// A message naming the unknown kind and listing the known ones.
pub fn parse_misbehaviours(s: &str) -> Result<Vec<Misbehaviour>, String> {
    if s.trim() == "all" {
        return Ok(Misbehaviour::ALL.to_vec());
    }
    let mut kinds = Vec::new();
    for name in s.split(',').map(str::trim) {
        let kind = Misbehaviour::ALL.into_iter().find(|k| k.name() == name).ok_or_else(|| {
            let known: Vec<&str> = Misbehaviour::ALL.iter().map(|k| k.name()).collect();
            format!("unknown misbehaviour {name:?}; expected `all` or some of {}", known.join(", "))
        })?;
        if !kinds.contains(&kind) {
            kinds.push(kind);
        }
    }
    Ok(kinds)
}

/// How many clients of a swarm misbehave: a count, or a share of the clients.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum MisbehavingShare {
    /// Exactly this many (at most every client).
    Count(usize),
    /// This percentage of the clients, rounded to the nearest client.
    Percent(f64),
}

impl MisbehavingShare {
    /// The number of misbehaving clients among `clients`.
    pub fn of(self, clients: usize) -> usize {
        match self {
            MisbehavingShare::Count(k) => k.min(clients),
            MisbehavingShare::Percent(p) => {
                ((clients as f64 * p / 100.0).round() as usize).min(clients)
            }
        }
    }
}

/// Parses `--misbehaving`: a count (`40`) or a percentage of the clients (`20%`).
///
/// # Errors
/// A message naming the value when it is neither, or a percentage outside 0..=100.
pub fn parse_misbehaving(s: &str) -> Result<MisbehavingShare, String> {
    let s = s.trim();
    if let Some(percent) = s.strip_suffix('%') {
        let p: f64 = percent.trim().parse().map_err(|e| format!("{s:?}: {e}"))?;
        if !(0.0..=100.0).contains(&p) {
            return Err(format!("{s:?}: expected a percentage between 0% and 100%"));
        }
        return Ok(MisbehavingShare::Percent(p));
    }
    let k: usize = s
        .parse()
        .map_err(|e| format!("{s:?}: expected a count or a percentage such as 20%: {e}"))?;
    Ok(MisbehavingShare::Count(k))
}

/// How client `offset` (0-based within the swarm) of `clients` misbehaves, when `misbehaving`
/// of them do: they are spread evenly over the indices from the last one backwards (so they
/// overlap the full clients, spread from the first, as little as possible), and the `j`-th of
/// them from the end gets `kinds[j % kinds.len()]`, so every kind is given as evenly as the
/// count allows. `None`: a well-behaved client (also when `kinds` is empty).
pub fn misbehaviour_of(
    offset: usize,
    clients: usize,
    misbehaving: usize,
    kinds: &[Misbehaviour],
) -> Option<Misbehaviour> {
    let k = misbehaving.min(clients);
    if k == 0 || offset >= clients || kinds.is_empty() {
        return None;
    }
    let from_end = clients - 1 - offset;
    if (from_end * k) % clients >= k {
        return None;
    }
    let rank = from_end * k / clients;
    Some(kinds[rank % kinds.len()])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// K of N clients misbehave, spread over the indices, each kind given as evenly as K allows; K
    /// above N makes every client misbehave, 0 none.
    #[test]
    fn k_misbehaving_clients_are_spread_with_every_kind() {
        let kinds = Misbehaviour::ALL;
        let picked: Vec<(usize, Misbehaviour)> = (0..200)
            .filter_map(|i| misbehaviour_of(i, 200, 40, &kinds).map(|kind| (i, kind)))
            .collect();
        assert_eq!(picked.len(), 40);
        assert_eq!(picked.last().map(|p| p.0), Some(199), "the last index misbehaves");
        assert!(picked.windows(2).all(|w| w[1].0 - w[0].0 == 5), "spread: {picked:?}");
        for kind in kinds {
            let n = picked.iter().filter(|p| p.1 == kind).count();
            assert!((6..=7).contains(&n), "{kind}: {n}");
        }
        assert_eq!((0..8).filter(|&i| misbehaviour_of(i, 8, 20, &kinds).is_some()).count(), 8);
        assert_eq!((0..8).filter(|&i| misbehaviour_of(i, 8, 0, &kinds).is_some()).count(), 0);
        assert_eq!((0..8).filter(|&i| misbehaviour_of(i, 8, 3, &[]).is_some()).count(), 0);
        let only = [Misbehaviour::Silent];
        assert!((0..40).filter_map(|i| misbehaviour_of(i, 40, 8, &only)).all(|k| k == only[0]));
    }

    /// `--misbehaving` takes a count or a percentage, and names anything else.
    #[test]
    fn a_misbehaving_share_is_a_count_or_a_percentage() {
        assert_eq!(parse_misbehaving("40").map(|s| s.of(200)), Ok(40));
        assert_eq!(parse_misbehaving(" 20% ").map(|s| s.of(200)), Ok(40));
        assert_eq!(parse_misbehaving("20%").map(|s| s.of(41)), Ok(8));
        assert_eq!(parse_misbehaving("500").map(|s| s.of(10)), Ok(10));
        for bad in ["-1", "abc", "120%", "x%"] {
            let error = parse_misbehaving(bad).unwrap_err();
            assert!(error.contains(bad), "{bad}: {error}");
        }
    }

    /// `--misbehaviours` takes names or `all`, and an unknown name is refused with the list.
    #[test]
    fn kinds_are_parsed_by_name() {
        assert_eq!(parse_misbehaviours("all"), Ok(Misbehaviour::ALL.to_vec()));
        assert_eq!(
            parse_misbehaviours("silent, restart-spam,silent"),
            Ok(vec![Misbehaviour::Silent, Misbehaviour::RestartSpam])
        );
        let error = parse_misbehaviours("silent,shouting").unwrap_err();
        assert!(error.contains("\"shouting\"") && error.contains("never-acknowledge"), "{error}");
    }

    /// What each kind may end with follows the protocol: spam is closed as abuse, bad frames as
    /// a protocol violation, stale ids are never closed for, and the kinds answered at a
    /// transition may end unclosed.
    #[test]
    fn each_kind_allows_only_the_protocols_answer() {
        use CloseCode::*;
        let allowed = |kind: Misbehaviour| -> Vec<Option<CloseCode>> {
            let all = [None, Some(Abuse), Some(ProtocolViolation), Some(ReadyTimeout)];
            all.into_iter().chain([Some(SlowConsumer)]).filter(|c| kind.allows(*c)).collect()
        };
        assert_eq!(allowed(Misbehaviour::RestartSpam), [Some(Abuse)]);
        assert_eq!(allowed(Misbehaviour::StaleIds), [None]);
        assert_eq!(allowed(Misbehaviour::GarbageFrame), [Some(ProtocolViolation)]);
        assert_eq!(allowed(Misbehaviour::OversizedFrame), [Some(ProtocolViolation)]);
        assert_eq!(allowed(Misbehaviour::NeverAcknowledge), [None, Some(ReadyTimeout)]);
        assert_eq!(allowed(Misbehaviour::Silent), [None, Some(ReadyTimeout), Some(SlowConsumer)]);
        let transport: Vec<Misbehaviour> =
            Misbehaviour::ALL.into_iter().filter(|k| k.is_transport()).collect();
        use Misbehaviour::{GarbageFrame, OversizedFrame, Silent};
        assert_eq!(transport, [GarbageFrame, OversizedFrame, Silent]);
    }
}
