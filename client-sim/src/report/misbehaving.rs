//! The report's `misbehaving` section (docs/simulator.md, "Misbehaving clients"): what the
//! misbehaving clients got, kept apart from the well-behaved clients' figures. They are expected to
//! be refused, closed or kicked; what is judged is only that each ended as the protocol answers its
//! kind ([`crate::misbehaviour::Misbehaviour::allows`]) and that the server broke no invariant even
//! for them.

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;

use super::ClientOutcome;
use crate::figures::{Check, SessionStats};

/// Samples of unexpected ends kept verbatim.
const SAMPLES: usize = 20;

/// What the misbehaving clients got, summed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct MisbehavingSection {
    /// Misbehaving clients started.
    pub clients: usize,
    /// Per kind (by its name, e.g. `restart-spam`).
    pub kinds: BTreeMap<String, KindSection>,
    /// Misbehaving clients whose end their kind does not allow (closed with another code, or
    /// not closed when the protocol closes it).
    pub unexpected_ends: usize,
    /// The first of them, described.
    pub unexpected_samples: Vec<String>,
    /// Broken invariants the misbehaving clients saw: every session figure that must be 0
    /// except `ended_before_placed` (a client that never acknowledges is not placed when the
    /// settle timeout ends its transition), summed. The server owes them the same invariants.
    pub invariant_violations: u64,
}

/// What the misbehaving clients of one kind got.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct KindSection {
    /// Clients of this kind.
    pub clients: usize,
    /// Of them, welcomed by the server.
    pub connected: usize,
    /// How they ended: the server's close code by name (`Abuse`, `ProtocolViolation`,
    /// `ReadyTimeout`, …), or `none` when the server did not close them.
    pub closes: BTreeMap<String, usize>,
    /// The server's `Error` messages to them by code (`RestartRejected`, `UnknownPawn`,
    /// `RateLimited`, …).
    pub server_errors: BTreeMap<String, u64>,
}

impl MisbehavingSection {
    /// The section for the misbehaving clients among `outcomes` (the others are skipped).
    pub fn of(outcomes: &[ClientOutcome]) -> MisbehavingSection {
        let mut section = MisbehavingSection::default();
        for o in outcomes {
            let Some(kind) = o.misbehaviour else { continue };
            section.clients += 1;
            let entry = section.kinds.entry(kind.name().to_owned()).or_default();
            entry.clients += 1;
            entry.connected += usize::from(o.connected);
            let close = o.server_close.map_or_else(|| "none".to_owned(), |c| format!("{c:?}"));
            *entry.closes.entry(close.clone()).or_default() += 1;
            for (code, n) in &o.stats.server_errors {
                *entry.server_errors.entry(code.clone()).or_default() += n;
            }
            if o.connected && !kind.allows(o.server_close) {
                section.unexpected_ends += 1;
                if section.unexpected_samples.len() < SAMPLES {
                    section.unexpected_samples.push(format!(
                        "client {} ({kind}): ended with close {close}, errors {:?}",
                        o.index, o.errors
                    ));
                }
            }
            section.invariant_violations += invariant_violations(&o.stats);
        }
        section
    }

    /// What `--check` refuses of the misbehaving clients, described: an unexpected end, a
    /// broken invariant.
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.unexpected_ends > 0 {
            out.push(format!(
                "{} misbehaving clients ended otherwise than the protocol answers their kind",
                self.unexpected_ends
            ));
        }
        if self.invariant_violations > 0 {
            out.push(format!(
                "{} invariant violations seen by misbehaving clients",
                self.invariant_violations
            ));
        }
        out
    }
}

/// The session figures that must be 0, summed, except `ended_before_placed`.
fn invariant_violations(stats: &SessionStats) -> u64 {
    stats
        .figures()
        .filter(|(figure, _)| figure.check == Check::Zero && figure.name != "ended_before_placed")
        .map(|(_, value)| value)
        .sum()
}

/// `a 1, b 2`, or `-` when empty.
fn counts<V: fmt::Display>(map: &BTreeMap<String, V>) -> String {
    if map.is_empty() {
        return "-".into();
    }
    let parts: Vec<String> = map.iter().map(|(k, v)| format!("{k} {v}")).collect();
    parts.join(", ")
}

impl fmt::Display for MisbehavingSection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "  misbehaving clients {} (not in the figures above)", self.clients)?;
        for (kind, k) in &self.kinds {
            writeln!(
                f,
                "    {kind:<18} {} clients, {} connected; closed: {}; server errors: {}",
                k.clients,
                k.connected,
                counts(&k.closes),
                counts(&k.server_errors)
            )?;
        }
        writeln!(f, "    unexpected ends          {}", self.unexpected_ends)?;
        for sample in &self.unexpected_samples {
            writeln!(f, "      {sample}")?;
        }
        writeln!(f, "    invariant violations     {}", self.invariant_violations)
    }
}

#[cfg(test)]
mod tests {
    use gatehouse_protocol::CloseCode;

    use super::*;
    use crate::misbehaviour::Misbehaviour;

    fn misbehaving(index: usize, kind: Misbehaviour, close: Option<CloseCode>) -> ClientOutcome {
        ClientOutcome {
            index,
            full: false,
            connected: true,
            placed: false,
            own_pawns: 0,
            stats: SessionStats::default(),
            errors: vec!["closed".into()],
            misbehaviour: Some(kind),
            server_close: close,
            admission: Default::default(),
        }
    }

    /// Closes are counted per kind by code; an end the kind does not allow and an invariant a
    /// misbehaving client saw broken are problems; `ended_before_placed` is not.
    #[test]
    fn misbehaving_clients_are_judged_by_what_their_kind_allows() {
        let mut spam = misbehaving(3, Misbehaviour::RestartSpam, Some(CloseCode::Abuse));
        spam.stats.server_errors.insert("RestartRejected".into(), 5);
        let mut never = misbehaving(4, Misbehaviour::NeverAcknowledge, None);
        never.stats.ended_before_placed = 2;
        let clean = [spam.clone(), never.clone()];
        let section = MisbehavingSection::of(&clean);
        assert_eq!(section.clients, 2);
        assert_eq!(section.kinds["restart-spam"].closes["Abuse"], 1);
        assert_eq!(section.kinds["restart-spam"].server_errors["RestartRejected"], 5);
        assert_eq!(section.kinds["never-acknowledge"].closes["none"], 1);
        assert_eq!(section.problems(), Vec::<String>::new());

        let garbage = misbehaving(5, Misbehaviour::GarbageFrame, Some(CloseCode::ReadyTimeout));
        let mut stale = misbehaving(6, Misbehaviour::StaleIds, None);
        stale.stats.double_pawns = 1;
        let section = MisbehavingSection::of(&[spam, never, garbage, stale]);
        assert_eq!(section.unexpected_ends, 1);
        assert!(section.unexpected_samples[0].contains("client 5 (garbage-frame)"));
        assert_eq!(section.invariant_violations, 1);
        assert_eq!(section.problems().len(), 2, "{:?}", section.problems());
        assert!(section.to_string().contains("ReadyTimeout 1"), "{section}");
    }
}
