//! The swarm's figures over one interval of a run (a minute, say), for a long run's report
//! line by line (`gatehouse-sim --interval-json`, `deploy/scale-soak.sh`): the loading screens
//! that came down in it, the longest screen it saw (down, cut short by a relaunch, or still up
//! at its end), and the client-side reply delay.
//!
//! The clients record into one [`IntervalFigures`] as they go; whoever reports takes it with
//! [`IntervalFigures::take`] at the end of each interval, which starts the next one. Time is
//! passed in; nothing here reads a clock.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::figures::{Micros, ScreenKind, TimingSummary};

/// What the clients recorded since the interval began.
#[derive(Debug, Default)]
pub struct IntervalFigures {
    /// Transition screens that came down: from shown to `EndTransition`.
    shown_to_ended: Micros,
    /// Screens that came down (transitions and joins) in the interval.
    screens_down: u64,
    /// The longest screen that came down or was cut short in the interval, µs.
    longest_us: u64,
    /// The screens up now, by client index: when each went up.
    up: BTreeMap<usize, Instant>,
    /// Replies of the clients: from when their cause was readable (a message) or due (a
    /// deadline) to the answer leaving the client.
    reply_delay: Micros,
}

/// One interval's figures, as a JSON line of `gatehouse-sim --interval-json`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct IntervalReport {
    /// Where the interval ended, whole seconds since the run started.
    pub at_s: u64,
    /// Screens (transitions and joins) that came down in it.
    pub screens_down: u64,
    /// Shown → ended of the transition screens that came down in it, µs.
    pub shown_to_ended: TimingSummary,
    /// The longest loading screen of the interval, ms: one that came down or was cut short in
    /// it, or one still up at its end (counted from when it went up).
    pub longest_loading_screen_ms: u64,
    /// How many screens are up at its end.
    pub screens_up: u64,
    /// The clients' reply delays in it, µs.
    pub reply_delay: TimingSummary,
}

impl IntervalFigures {
    /// Client `index` raised a loading screen at `at`.
    pub fn screen_up(&mut self, index: usize, at: Instant) {
        self.up.insert(index, at);
    }

    /// The screen of client `index` (of `kind`, raised at `raised`) came down at `now`, or was
    /// cut short if `cut` (the client's session ended with it up): it counts toward the longest,
    /// and a transition screen that came down toward shown → ended.
    pub fn screen_down(
        &mut self,
        index: usize,
        kind: ScreenKind,
        raised: Instant,
        now: Instant,
        cut: bool,
    ) {
        if self.up.get(&index) == Some(&raised) {
            self.up.remove(&index);
        }
        let up = now.saturating_duration_since(raised);
        self.longest_us = self.longest_us.max(micros(up));
        if !cut {
            self.screens_down += 1;
            if kind == ScreenKind::Transition {
                self.shown_to_ended.record(up);
            }
        }
    }

    /// A reply left a client `delay` after its cause.
    pub fn reply(&mut self, delay: Duration) {
        self.reply_delay.record(delay);
    }

    /// The interval ending at `now`, `at_s` seconds into the run; the next one starts empty,
    /// but for the screens still up.
    pub fn take(&mut self, now: Instant, at_s: u64) -> IntervalReport {
        let oldest_up = self.up.values().min().map(|&at| micros(now.saturating_duration_since(at)));
        let report = IntervalReport {
            at_s,
            screens_down: self.screens_down,
            shown_to_ended: self.shown_to_ended.summary(),
            longest_loading_screen_ms: self.longest_us.max(oldest_up.unwrap_or(0)) / 1000,
            screens_up: self.up.len() as u64,
            reply_delay: self.reply_delay.summary(),
        };
        let up = std::mem::take(&mut self.up);
        *self = IntervalFigures { up, ..IntervalFigures::default() };
        report
    }
}

/// `d` in whole µs, saturating.
fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An interval counts the screens that came down in it, its longest screen (down, cut or
    /// still up) and the replies; the next one keeps only the screens still up.
    #[test]
    fn an_interval_counts_its_screens_and_replies_and_the_next_keeps_what_is_up() {
        let t0 = Instant::now();
        let s = Duration::from_secs(1);
        let mut figures = IntervalFigures::default();
        figures.screen_up(1, t0);
        figures.screen_up(2, t0 + s);
        figures.screen_up(3, t0);
        figures.screen_down(1, ScreenKind::Transition, t0, t0 + s * 2, false);
        figures.screen_down(3, ScreenKind::Join, t0, t0 + s * 3, true);
        figures.reply(Duration::from_millis(4));
        let first = figures.take(t0 + s * 4, 4);
        assert_eq!(first.screens_down, 1, "the cut screen did not come down");
        assert_eq!(first.shown_to_ended.count, 1);
        assert_eq!(first.longest_loading_screen_ms, 3_000, "the cut screen, up for 3 s");
        assert_eq!(first.screens_up, 1);
        assert_eq!(first.reply_delay.count, 1);
        let second = figures.take(t0 + s * 10, 10);
        assert_eq!(second.longest_loading_screen_ms, 9_000, "client 2's screen, up since 1 s");
        assert_eq!((second.screens_down, second.reply_delay.count), (0, 0));
        figures.screen_down(2, ScreenKind::Transition, t0 + s, t0 + s * 11, false);
        let third = figures.take(t0 + s * 12, 12);
        assert_eq!((third.screens_up, third.longest_loading_screen_ms), (0, 10_000));
    }
}
