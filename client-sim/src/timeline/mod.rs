//! A picture of a run: what each client's loading screens, deaths, respawns, relaunches and
//! errors looked like over time (docs/simulator.md, "The timeline").
//!
//! The session records its screens and marks as they happen ([`ClientTimeline`], times in µs
//! from the swarm's start); the swarm collects them; [`svg::render`] draws one row per client
//! (a sample plus the slowest for large runs), each loading screen a bar coloured by phase, and
//! below it the histogram of shown → ended.

pub mod svg;

use std::time::Instant;

use serde::Serialize;

use crate::figures::SessionStats;

pub use crate::figures::{MarkKind, ScreenKind};

/// One loading screen as the client saw it, each instant in µs from the run's start. A phase
/// that never happened (the client left first, or it was superseded) is `None`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ScreenBar {
    /// Transition or join.
    pub kind: ScreenKind,
    /// The screen went up (`FreezeCharacters`, `ShowTransition` or `ShowJoin`), µs.
    pub shown_us: u64,
    /// The client reported its levels streamed (`TransitionReady` or `JoinReady`), µs.
    pub ready_sent_us: Option<u64>,
    /// Its pawn was possessed, µs.
    pub possessed_us: Option<u64>,
    /// The screen came down (`EndTransition` or `EndJoin`), µs; `None`: still up at the end.
    pub ended_us: Option<u64>,
}

/// A mark on a client's row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Mark {
    /// When, µs from the run's start.
    pub at_us: u64,
    /// What.
    pub kind: MarkKind,
}

/// One client's row: every screen and mark over all its relaunches, in time order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ClientTimeline {
    /// The client's index in the swarm (player `sim-{index:04}`).
    pub index: usize,
    /// Whether it ran the full client lifecycle (gates, router, checks) or was thin.
    pub full: bool,
    /// Its loading screens.
    pub screens: Vec<ScreenBar>,
    /// Its deaths, respawns, relaunches, reconnects and errors.
    pub marks: Vec<Mark>,
}

impl ClientTimeline {
    /// The longest shown → ended of its screens that ended, µs (0 if none ended): what "the
    /// slowest clients" are ranked by.
    pub fn slowest_screen_us(&self) -> u64 {
        self.screens
            .iter()
            .filter_map(|s| s.ended_us.map(|end| end.saturating_sub(s.shown_us)))
            .max()
            .unwrap_or(0)
    }
}

impl ClientTimeline {
    /// Client `index`'s row from what its sessions recorded, each instant as µs from `origin`
    /// (the swarm's start; an instant before it counts as 0).
    pub fn of(index: usize, full: bool, stats: &SessionStats, origin: Instant) -> ClientTimeline {
        let us = |at: Instant| {
            u64::try_from(at.saturating_duration_since(origin).as_micros()).unwrap_or(u64::MAX)
        };
        let screens = stats
            .screens
            .iter()
            .map(|s| ScreenBar {
                kind: s.kind,
                shown_us: us(s.shown),
                ready_sent_us: s.ready_sent.map(us),
                possessed_us: s.possessed.map(us),
                ended_us: s.ended.map(us),
            })
            .collect();
        let mut marks: Vec<Mark> =
            stats.marks.iter().map(|&(at, kind)| Mark { at_us: us(at), kind }).collect();
        marks.sort_by_key(|m| m.at_us);
        ClientTimeline { index, full, screens, marks }
    }
}
