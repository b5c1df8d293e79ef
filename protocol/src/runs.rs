//! Sets of pawn ids as runs of consecutive ids: how `PawnsTeleported` names the pawns it moves
//! (protocol 6).
//!
//! The server hands out pawn ids in order, so the pawns one spawn pass moves are mostly one run:
//! a transition that teleports 1,000 kept pawns costs each client 12 bytes, not 8,000. Decoding
//! refuses runs that are empty, out of order, touching or overlapping, that run past the last id,
//! or that name more than [`MAX_PAWNS_PER_SET`] pawns, so every decoded set is canonical and
//! cheap to walk.

use std::fmt;
use std::ops::RangeInclusive;

use serde::{Deserialize, Serialize};

use crate::ids::PawnId;

/// Most pawns one [`PawnIdRuns`] may name (so a hostile frame cannot make a client walk four
/// billion ids).
pub const MAX_PAWNS_PER_SET: u64 = 1 << 16;

/// Consecutive pawn ids: `first`, `first + 1`, … (`count` of them, at least 1). On the wire: the
/// `u64` first id, then the `u32` count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PawnIdRun {
    /// The lowest id of the run.
    pub first: PawnId,
    /// How many ids the run holds (at least 1).
    pub count: u32,
}

impl PawnIdRun {
    /// The id one past the run's last (as `u128`, so the run ending at `u64::MAX` has one).
    fn end(self) -> u128 {
        u128::from(self.first.0) + u128::from(self.count)
    }
}

/// Why a list of runs is not a [`PawnIdRuns`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RunsError {
    /// A run held no ids.
    #[error("pawn id run {index} is empty")]
    EmptyRun {
        /// Its position in the list.
        index: usize,
    },
    /// A run started at or before the end of the one before it (out of order, overlapping, or
    /// touching: touching runs are one run).
    #[error("pawn id run {index} (from {first}) does not start after the run before it ends")]
    NotAscending {
        /// Its position in the list.
        index: usize,
        /// Its first id.
        first: PawnId,
    },
    /// A run went past the largest pawn id.
    #[error("pawn id run {index} (from {first}) runs past the largest pawn id")]
    Overflow {
        /// Its position in the list.
        index: usize,
        /// Its first id.
        first: PawnId,
    },
    /// The runs named more than [`MAX_PAWNS_PER_SET`] pawns.
    #[error("the pawn id runs name {count} pawns, the most is {MAX_PAWNS_PER_SET}")]
    TooMany {
        /// How many they named (counted up to the first run past the limit).
        count: u64,
    },
}

/// A set of pawn ids as ascending, separated runs of consecutive ids (the teleports of
/// docs/spec/transitions.md T4, batched; protocol 6). On the wire: a list of [`PawnIdRun`]s.
/// Built with [`PawnIdRuns::from_ids`]; decoding checks the shape (see [`RunsError`]).
#[derive(Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(try_from = "Vec<PawnIdRun>", into = "Vec<PawnIdRun>")]
pub struct PawnIdRuns(Vec<PawnIdRun>);

impl PawnIdRuns {
    /// The set of `ids`, in any order, duplicates ignored.
    ///
    /// # Panics
    /// When the ids are more than [`MAX_PAWNS_PER_SET`]: the server never moves that many pawns
    /// at once (its configuration refuses a player cap above it).
    pub fn from_ids(ids: impl IntoIterator<Item = PawnId>) -> Self {
        let mut ids: Vec<u64> = ids.into_iter().map(|id| id.0).collect();
        ids.sort_unstable();
        ids.dedup();
        assert!(ids.len() as u64 <= MAX_PAWNS_PER_SET, "{} pawns in one set", ids.len());
        let mut runs: Vec<PawnIdRun> = Vec::new();
        for id in ids {
            match runs.last_mut() {
                Some(run) if run.end() == u128::from(id) => run.count += 1,
                _ => runs.push(PawnIdRun { first: PawnId(id), count: 1 }),
            }
        }
        PawnIdRuns(runs)
    }

    /// The runs, ascending.
    pub fn runs(&self) -> &[PawnIdRun] {
        &self.0
    }

    /// Every id of the set, ascending.
    pub fn iter(&self) -> impl Iterator<Item = PawnId> + '_ {
        // Checked on construction: no run passes `u64::MAX`, so `first + i` fits.
        self.0
            .iter()
            .flat_map(|run| (0..u64::from(run.count)).map(move |i| PawnId(run.first.0 + i)))
    }

    /// Each run's ids as an inclusive range, ascending: for a range query over a map keyed by
    /// pawn id (`BTreeMap::range`), which costs a lookup per run, not per id.
    pub fn ranges(&self) -> impl Iterator<Item = RangeInclusive<PawnId>> + '_ {
        // Checked on construction: every run holds an id and none passes `u64::MAX`.
        self.0.iter().map(|run| run.first..=PawnId(run.first.0 + u64::from(run.count - 1)))
    }

    /// How many pawns the set names.
    pub fn len(&self) -> usize {
        self.0.iter().map(|run| run.count as usize).sum()
    }

    /// Whether the set names no pawn.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether `pawn` is in the set (a binary search over the runs).
    pub fn contains(&self, pawn: PawnId) -> bool {
        let after = self.0.partition_point(|run| run.first.0 <= pawn.0);
        after > 0 && u128::from(pawn.0) < self.0[after - 1].end()
    }

    /// The set cut into sets of at most `max_runs` runs each, in order (for messages of a bounded
    /// size). `max_runs` 0 is taken as 1.
    pub fn chunks(&self, max_runs: usize) -> impl Iterator<Item = PawnIdRuns> + '_ {
        self.0.chunks(max_runs.max(1)).map(|runs| PawnIdRuns(runs.to_vec()))
    }
}

impl TryFrom<Vec<PawnIdRun>> for PawnIdRuns {
    type Error = RunsError;

    fn try_from(runs: Vec<PawnIdRun>) -> Result<Self, RunsError> {
        let mut count = 0u64;
        let mut end = 0u128;
        for (index, run) in runs.iter().enumerate() {
            if run.count == 0 {
                return Err(RunsError::EmptyRun { index });
            }
            if index > 0 && u128::from(run.first.0) <= end {
                return Err(RunsError::NotAscending { index, first: run.first });
            }
            if run.end() > u128::from(u64::MAX) + 1 {
                return Err(RunsError::Overflow { index, first: run.first });
            }
            count += u64::from(run.count);
            if count > MAX_PAWNS_PER_SET {
                return Err(RunsError::TooMany { count });
            }
            end = run.end();
        }
        Ok(PawnIdRuns(runs))
    }
}

impl From<PawnIdRuns> for Vec<PawnIdRun> {
    fn from(runs: PawnIdRuns) -> Self {
        runs.0
    }
}

impl fmt::Debug for PawnIdRuns {
    /// `[12..=14, 20]`: each run as its first and last id, a lone id alone.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, run) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            match run.count {
                1 => write!(f, "{}", run.first.0)?,
                // `first + (n - 1)`: a run may end at `u64::MAX`.
                n => write!(f, "{}..={}", run.first.0, run.first.0 + (u64::from(n) - 1))?,
            }
        }
        f.write_str("]")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(list: &[u64]) -> Vec<PawnId> {
        list.iter().map(|&id| PawnId(id)).collect()
    }

    fn run(first: u64, count: u32) -> PawnIdRun {
        PawnIdRun { first: PawnId(first), count }
    }

    #[test]
    fn consecutive_ids_in_any_order_make_one_run() {
        let set = PawnIdRuns::from_ids(ids(&[5, 3, 4, 6, 4]));
        assert_eq!(set.runs(), &[run(3, 4)]);
        assert_eq!(set.iter().collect::<Vec<_>>(), ids(&[3, 4, 5, 6]));
        assert_eq!(set.len(), 4);
        assert!(!set.is_empty());
        assert!(PawnIdRuns::default().is_empty());
        assert!(PawnIdRuns::from_ids([]).is_empty());
    }

    #[test]
    fn gaps_split_runs_and_membership_follows_them() {
        let set = PawnIdRuns::from_ids(ids(&[1, 2, 9, 11, 12]));
        assert_eq!(set.runs(), &[run(1, 2), run(9, 1), run(11, 2)]);
        let ranges: Vec<_> = set.ranges().collect();
        assert_eq!(ranges, [PawnId(1)..=PawnId(2), PawnId(9)..=PawnId(9), PawnId(11)..=PawnId(12)]);
        assert_eq!(format!("{set:?}"), "[1..=2, 9, 11..=12]");
        for (id, inside) in [(0, false), (1, true), (2, true), (3, false), (8, false)] {
            assert_eq!(set.contains(PawnId(id)), inside, "id {id}");
        }
        for (id, inside) in [(9, true), (10, false), (11, true), (12, true), (13, false)] {
            assert_eq!(set.contains(PawnId(id)), inside, "id {id}");
        }
        assert!(!PawnIdRuns::default().contains(PawnId(0)));
    }

    #[test]
    fn a_run_ending_at_the_last_id_is_whole() {
        let set = PawnIdRuns::from_ids(ids(&[u64::MAX - 1, u64::MAX]));
        assert_eq!(set.runs(), &[run(u64::MAX - 1, 2)]);
        assert!(set.contains(PawnId(u64::MAX)));
        assert_eq!(set.iter().count(), 2);
        assert_eq!(format!("{set:?}"), format!("[{}..={}]", u64::MAX - 1, u64::MAX));
        assert_eq!(PawnIdRuns::try_from(vec![run(u64::MAX, 1)]).map(|s| s.len()), Ok(1));
    }

    #[test]
    fn chunks_keep_every_run_once_in_order() {
        let set = PawnIdRuns::from_ids(ids(&[1, 3, 5, 7, 9]));
        let chunks: Vec<PawnIdRuns> = set.chunks(2).collect();
        assert_eq!(chunks.iter().map(|c| c.runs().len()).collect::<Vec<_>>(), vec![2, 2, 1]);
        let back: Vec<PawnId> = chunks.iter().flat_map(|c| c.iter().collect::<Vec<_>>()).collect();
        assert_eq!(back, ids(&[1, 3, 5, 7, 9]));
    }

    #[test]
    fn malformed_runs_are_refused_with_what_is_wrong() {
        let refused = |runs: Vec<PawnIdRun>| PawnIdRuns::try_from(runs).err();
        assert_eq!(refused(vec![run(1, 1), run(4, 0)]), Some(RunsError::EmptyRun { index: 1 }));
        let overlap = Some(RunsError::NotAscending { index: 1, first: PawnId(2) });
        assert_eq!(refused(vec![run(1, 2), run(2, 1)]), overlap);
        let touching = Some(RunsError::NotAscending { index: 1, first: PawnId(3) });
        assert_eq!(refused(vec![run(1, 2), run(3, 1)]), touching);
        let descending = Some(RunsError::NotAscending { index: 1, first: PawnId(1) });
        assert_eq!(refused(vec![run(5, 1), run(1, 1)]), descending);
        let past = Some(RunsError::Overflow { index: 0, first: PawnId(u64::MAX) });
        assert_eq!(refused(vec![run(u64::MAX, 2)]), past);
        let too_many = vec![run(0, u32::MAX), run(u64::from(u32::MAX) + 1, 1)];
        assert!(matches!(refused(too_many), Some(RunsError::TooMany { .. })));
        let at_the_limit = vec![run(0, (MAX_PAWNS_PER_SET - 1) as u32), run(1 << 20, 1)];
        assert_eq!(
            PawnIdRuns::try_from(at_the_limit).map(|s| s.len() as u64),
            Ok(MAX_PAWNS_PER_SET)
        );
        let over = vec![run(0, MAX_PAWNS_PER_SET as u32), run(1 << 20, 1)];
        assert_eq!(refused(over), Some(RunsError::TooMany { count: MAX_PAWNS_PER_SET + 1 }));
    }
}
