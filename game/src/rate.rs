//! A rate: `burst` events in a row, then one per `interval` (a token bucket). A [`Bucket`] keeps
//! it as one instant, when it is full again (the generic cell rate algorithm): an event at
//! `now` moves that instant to `max(full_at, now) + interval`, and is refused when that would
//! be more than `burst` intervals past `now`. A refusal changes nothing. Used for one player's
//! logins (docs/protocol.md 4, "Session tokens") and one connection's messages
//! (docs/security.md).

use std::collections::HashMap;
use std::hash::Hash;
use std::time::{Duration, Instant};

/// Keys kept before the first sweep of full buckets; later sweeps run at twice what the last
/// one kept.
pub const FIRST_SWEEP_AT: usize = 1024;

/// `burst` events in a row, then one per `interval`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    /// Events allowed at once from a full bucket (at least 1 is used).
    pub burst: u32,
    /// Past the burst, one event per this long.
    pub interval: Duration,
}

/// One bucket of a [`Rate`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bucket {
    /// When the bucket is full again.
    full_at: Instant,
}

impl Bucket {
    /// A full bucket at `now`.
    pub fn full(now: Instant) -> Self {
        Self { full_at: now }
    }

    /// One event at `now`: `Ok` counts it; `Err` holds how long until one more would be
    /// allowed, and counts nothing.
    pub fn take(&mut self, now: Instant, rate: Rate) -> Result<(), Duration> {
        let next = self.full_at.max(now) + rate.interval;
        let limit = now + rate.interval * rate.burst.max(1);
        if next > limit {
            return Err(next - limit);
        }
        self.full_at = next;
        Ok(())
    }

    /// Whether it is full at `now`: it holds nothing worth keeping.
    pub fn is_full(&self, now: Instant) -> bool {
        self.full_at <= now
    }
}

/// A [`Rate`] per key (a player id, an address group). What is kept is bounded: a key whose
/// bucket is full again holds nothing worth keeping (a missing key is a full bucket) and is
/// forgotten at the next sweep, which runs once the map doubled since the last one; so the map
/// holds at most the keys seen within the last `burst` intervals, amortised O(1) a call.
#[derive(Debug)]
pub struct Rates<K> {
    rate: Rate,
    buckets: HashMap<K, Bucket>,
    sweep_at: usize,
}

impl<K: Hash + Eq + Clone> Rates<K> {
    /// Every key held to `rate`.
    pub fn new(rate: Rate) -> Self {
        Self { rate, buckets: HashMap::new(), sweep_at: FIRST_SWEEP_AT }
    }

    /// One event of `key` at `now`: `Ok` counts it; `Err` holds how long until one more would
    /// be allowed, and counts nothing.
    pub fn take(&mut self, key: &K, now: Instant) -> Result<(), Duration> {
        let mut bucket = self.buckets.get(key).copied().unwrap_or(Bucket::full(now));
        bucket.take(now, self.rate)?;
        if self.buckets.len() >= self.sweep_at {
            self.buckets.retain(|_, b| !b.is_full(now));
            self.sweep_at = (self.buckets.len() * 2).max(FIRST_SWEEP_AT);
        }
        self.buckets.insert(key.clone(), bucket);
        Ok(())
    }

    /// How many keys are kept (what a flood of keys can make the limiter hold).
    pub fn kept(&self) -> usize {
        self.buckets.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_allows_its_burst_then_one_per_interval() {
        let start = Instant::now();
        let rate = Rate { burst: 3, interval: Duration::from_secs(2) };
        let mut bucket = Bucket::full(start);
        for _ in 0..3 {
            assert_eq!(bucket.take(start, rate), Ok(()));
        }
        assert!(!bucket.is_full(start));
        assert_eq!(bucket.take(start, rate), Err(Duration::from_secs(2)));
        assert_eq!(bucket.take(start + Duration::from_secs(1), rate), Err(Duration::from_secs(1)));
        assert_eq!(bucket.take(start + Duration::from_secs(2), rate), Ok(()));
        assert!(
            bucket.take(start + Duration::from_secs(2), rate).is_err(),
            "refusals count nothing"
        );
        let later = start + Duration::from_secs(100);
        assert!(bucket.is_full(later));
        for _ in 0..3 {
            assert_eq!(bucket.take(later, rate), Ok(()));
        }
        assert!(bucket.take(later, rate).is_err());
    }
}
