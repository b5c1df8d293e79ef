//! The swarm report: what every simulated client saw, summed, as readable text and JSON.

use std::collections::BTreeSet;
use std::fmt;

use serde::Serialize;

use crate::session::SessionStats;

/// What one client ended with.
#[derive(Debug, Clone)]
pub struct ClientOutcome {
    /// The client's index in the swarm.
    pub index: usize,
    /// Whether it was welcomed.
    pub connected: bool,
    /// Whether at the end it had a pawn whose possession it acknowledged and no loading screen.
    pub placed: bool,
    /// Pawns it saw owned by itself at the end (1 when all is well).
    pub own_pawns: usize,
    /// What its session saw.
    pub stats: SessionStats,
    /// Connection-level errors (refused, closed by the server, unreachable).
    pub errors: Vec<String>,
}

/// Min, median, p99 and max of a set of durations, in ms.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Percentiles {
    /// How many samples.
    pub count: usize,
    /// Smallest, ms.
    pub min: u64,
    /// Median, ms.
    pub median: u64,
    /// 99th percentile (nearest rank), ms.
    pub p99: u64,
    /// Largest, ms.
    pub max: u64,
}

impl Percentiles {
    /// Percentiles of `samples` (nearest-rank); all zero when empty.
    pub fn of(mut samples: Vec<u64>) -> Self {
        if samples.is_empty() {
            return Self::default();
        }
        samples.sort_unstable();
        let rank = |p: f64| {
            let i = ((p * samples.len() as f64).ceil() as usize).clamp(1, samples.len());
            samples[i - 1]
        };
        Percentiles {
            count: samples.len(),
            min: samples[0],
            median: rank(0.5),
            p99: rank(0.99),
            max: samples[samples.len() - 1],
        }
    }
}

/// The whole run's report.
#[derive(Debug, Clone, Serialize)]
pub struct SwarmReport {
    /// Clients started.
    pub clients: usize,
    /// Clients the server welcomed.
    pub clients_connected: usize,
    /// Clients placed at the end.
    pub clients_placed: usize,
    /// Distinct transitions that clients saw end.
    pub transitions_completed: usize,
    /// Transitions superseded while a client's screen was up (summed over clients).
    pub transitions_superseded: u64,
    /// Times a transition ended before a client had acknowledged its pawn (must be 0).
    pub ended_before_placed: u64,
    /// Errors over all clients.
    pub errors: usize,
    /// The first few errors, for reading.
    pub error_samples: Vec<String>,
    /// From a client first seeing a transition to its end, over all clients, ms.
    pub transition_ms: Percentiles,
    /// Longest time any client spent under the loading screen, ms.
    pub longest_loading_screen_ms: u64,
}

/// Errors kept verbatim in the report.
const ERROR_SAMPLES: usize = 20;

impl SwarmReport {
    /// Sums client outcomes.
    pub fn from_outcomes(outcomes: &[ClientOutcome]) -> Self {
        let mut ended = BTreeSet::new();
        let mut samples = Vec::new();
        let mut errors = Vec::new();
        for o in outcomes {
            ended.extend(o.stats.transitions_ended.iter().copied());
            samples.extend(o.stats.transition_ms.iter().copied());
            for e in o.errors.iter().chain(&o.stats.errors) {
                errors.push(format!("client {}: {e}", o.index));
            }
        }
        SwarmReport {
            clients: outcomes.len(),
            clients_connected: outcomes.iter().filter(|o| o.connected).count(),
            clients_placed: outcomes.iter().filter(|o| o.placed).count(),
            transitions_completed: ended.len(),
            transitions_superseded: outcomes
                .iter()
                .map(|o| o.stats.transitions_superseded)
                .sum(),
            ended_before_placed: outcomes.iter().map(|o| o.stats.ended_before_placed).sum(),
            errors: errors.len(),
            error_samples: errors.into_iter().take(ERROR_SAMPLES).collect(),
            transition_ms: Percentiles::of(samples),
            longest_loading_screen_ms: outcomes
                .iter()
                .map(|o| o.stats.longest_screen_ms)
                .max()
                .unwrap_or(0),
        }
    }
}

impl fmt::Display for SwarmReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = &self.transition_ms;
        writeln!(f, "gatehouse-sim report")?;
        writeln!(
            f,
            "  clients connected     {}/{}",
            self.clients_connected, self.clients
        )?;
        writeln!(
            f,
            "  clients placed        {}/{}",
            self.clients_placed, self.clients
        )?;
        writeln!(f, "  transitions completed {}", self.transitions_completed)?;
        writeln!(
            f,
            "  transitions superseded {}",
            self.transitions_superseded
        )?;
        writeln!(
            f,
            "  shown -> ended (ms)   min {} / median {} / p99 {} / max {} over {}",
            t.min, t.median, t.p99, t.max, t.count
        )?;
        writeln!(
            f,
            "  longest loading screen {} ms",
            self.longest_loading_screen_ms
        )?;
        writeln!(f, "  ended before placed   {}", self.ended_before_placed)?;
        writeln!(f, "  errors                {}", self.errors)?;
        for e in &self.error_samples {
            writeln!(f, "    {e}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_use_nearest_rank() {
        let p = Percentiles::of((1..=100).collect());
        assert_eq!(
            (p.min, p.median, p.p99, p.max, p.count),
            (1, 50, 99, 100, 100)
        );
        assert_eq!(Percentiles::of(vec![]), Percentiles::default());
        assert_eq!(Percentiles::of(vec![7]).p99, 7);
    }
}
