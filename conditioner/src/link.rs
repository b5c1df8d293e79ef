//! One direction of one flow, sans-IO: datagrams are offered with `now`, held,
//! and polled out at their exact release instants; it never reads the clock or touches a socket.
//!
//! Every datagram draws the same five numbers from the link's generator whatever happens to it,
//! so the n-th datagram's fate (dropped, its delay, held back, duplicated) depends only on the
//! seed and n: the same seed drops the same datagrams.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use rand::rngs::SmallRng;
use rand::{RngExt as _, SeedableRng as _};
use serde::Serialize;

use crate::Impairment;

/// What one direction did, counted in datagrams (the report says what the conditioner did).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct LinkStats {
    /// Datagrams offered to the link.
    pub offered: u64,
    /// Datagrams released (copies of duplicated ones included).
    pub released: u64,
    /// Dropped by `loss`.
    pub dropped: u64,
    /// Dropped while the flow was cut.
    pub cut: u64,
    /// Dropped because the rate cap's queue was full.
    pub queue_dropped: u64,
    /// Held for some time before release (lag, jitter, reordering or the rate cap).
    pub delayed: u64,
    /// Held back so that later datagrams overtook them.
    pub reordered: u64,
    /// Delivered twice.
    pub duplicated: u64,
    /// Bytes offered.
    pub bytes_offered: u64,
}

impl LinkStats {
    /// Adds another link's counts.
    pub fn absorb(&mut self, other: &LinkStats) {
        self.offered += other.offered;
        self.released += other.released;
        self.dropped += other.dropped;
        self.cut += other.cut;
        self.queue_dropped += other.queue_dropped;
        self.delayed += other.delayed;
        self.reordered += other.reordered;
        self.duplicated += other.duplicated;
        self.bytes_offered += other.bytes_offered;
    }
}

/// A datagram waiting for its release instant; `seq` keeps equal instants in offer order.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Held {
    at: Instant,
    seq: u64,
    datagram: Bytes,
}

/// One direction of one flow: the impairment, its generator and what it holds.
#[derive(Debug)]
pub struct Link {
    impairment: Impairment,
    rng: SmallRng,
    held: BinaryHeap<Reverse<Held>>,
    seq: u64,
    /// Release instant of the last datagram not reordered: jitter never lets a later one pass it.
    last_in_order: Option<Instant>,
    /// When the rate-capped line is free again.
    line_free_at: Option<Instant>,
    cut: bool,
    stats: LinkStats,
}

impl Link {
    /// A link applying `impairment`, its decisions drawn from `seed`.
    pub fn new(impairment: Impairment, seed: u64) -> Link {
        Link {
            impairment,
            rng: SmallRng::seed_from_u64(seed),
            held: BinaryHeap::new(),
            seq: 0,
            last_in_order: None,
            line_free_at: None,
            cut: false,
            stats: LinkStats::default(),
        }
    }

    /// Cuts the link (every datagram dropped, as 100 % loss) or heals it. Datagrams already held
    /// are still released: they were on the wire before the cut.
    pub fn set_cut(&mut self, cut: bool) {
        self.cut = cut;
    }

    /// What the link has done so far.
    pub fn stats(&self) -> LinkStats {
        self.stats
    }

    /// Offers one datagram at `now`: it is dropped, or held until its release instant (which
    /// may be `now`), perhaps with a copy.
    pub fn offer(&mut self, now: Instant, datagram: Bytes) {
        let i = self.impairment;
        // The same five draws for every datagram, whatever its fate (see the module comment).
        let lose = self.rng.random::<f64>() < i.loss;
        let jitter_draw = self.rng.random::<f64>();
        let reorder = self.rng.random::<f64>() < i.reorder;
        let duplicate = self.rng.random::<f64>() < i.duplicate;
        let duplicate_draw = self.rng.random::<f64>();
        self.stats.offered += 1;
        self.stats.bytes_offered += datagram.len() as u64;
        if self.cut {
            self.stats.cut += 1;
            return;
        }
        if lose {
            self.stats.dropped += 1;
            return;
        }
        // The rate cap: the datagram waits for the line, then takes len / rate to cross it.
        let mut leaves = now;
        if let Some(rate) = i.rate {
            let start = self.line_free_at.map_or(now, |free| free.max(now));
            if start.saturating_duration_since(now) > i.queue {
                self.stats.queue_dropped += 1;
                return;
            }
            let crossing = Duration::from_secs_f64(datagram.len() as f64 / rate as f64);
            leaves = start + crossing;
            self.line_free_at = Some(leaves);
        }
        // Lag ± jitter (jitter ≤ lag, so the delay is never negative).
        let swing = i.jitter.mul_f64(2.0 * jitter_draw);
        let mut at = (leaves + i.lag + swing).checked_sub(i.jitter).unwrap_or(leaves).max(now);
        if reorder {
            at += i.reorder_time;
            self.stats.reordered += 1;
        } else {
            at = self.last_in_order.map_or(at, |last| at.max(last));
            self.last_in_order = Some(at);
        }
        if at > now {
            self.stats.delayed += 1;
        }
        if duplicate {
            self.stats.duplicated += 1;
            let copy_at = at + i.duplicate_time.mul_f64(duplicate_draw);
            self.hold(copy_at, datagram.clone());
        }
        self.hold(at, datagram);
    }

    fn hold(&mut self, at: Instant, datagram: Bytes) {
        self.seq += 1;
        self.held.push(Reverse(Held { at, seq: self.seq, datagram }));
    }

    /// The next datagram due at `now`, in release order.
    pub fn poll_release(&mut self, now: Instant) -> Option<Bytes> {
        if self.held.peek().is_some_and(|Reverse(h)| h.at <= now) {
            let Reverse(held) = self.held.pop()?;
            self.stats.released += 1;
            return Some(held.datagram);
        }
        None
    }

    /// When the next held datagram is due, if any.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.held.peek().map(|Reverse(h)| h.at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn datagram(n: u32) -> Bytes {
        Bytes::copy_from_slice(&n.to_be_bytes())
    }

    fn number(d: &Bytes) -> u32 {
        u32::from_be_bytes([d[0], d[1], d[2], d[3]])
    }

    /// Offers `count` datagrams one every `gap`, releasing on time; returns (release instant
    /// offset in ms, datagram number) in release order.
    fn run(link: &mut Link, count: u32, gap: Duration) -> Vec<(u128, u32)> {
        let start = Instant::now();
        let mut out = Vec::new();
        let drain = |link: &mut Link, now: Instant, out: &mut Vec<(u128, u32)>| {
            while let Some(d) = link.poll_release(now) {
                out.push(((now - start).as_millis(), number(&d)));
            }
        };
        for n in 0..count {
            let now = start + gap * n;
            // Release everything due before this offer, at its own instant.
            while let Some(at) = link.poll_timeout().filter(|at| *at < now) {
                drain(link, at, &mut out);
            }
            link.offer(now, datagram(n));
            drain(link, now, &mut out);
        }
        while let Some(at) = link.poll_timeout() {
            drain(link, at, &mut out);
        }
        out
    }

    fn impairment(spec: &str) -> Impairment {
        Impairment::parse(spec).unwrap()
    }

    #[test]
    fn a_clean_link_passes_every_datagram_at_once_in_order() {
        let mut link = Link::new(Impairment::default(), 7);
        let out = run(&mut link, 100, ms(1));
        assert_eq!(out, (0..100).map(|n| (u128::from(n), n)).collect::<Vec<_>>());
        assert_eq!(link.stats().delayed, 0);
    }

    #[test]
    fn loss_drops_its_share_and_the_same_seed_drops_the_same_datagrams() {
        let spec = impairment("loss=5%");
        let kept = |seed| run(&mut Link::new(spec, seed), 10_000, ms(1));
        let (a, b, c) = (kept(1), kept(1), kept(2));
        assert_eq!(a, b, "the same seed keeps the same datagrams");
        assert_ne!(a, c, "another seed drops others");
        let dropped = 10_000 - a.len();
        assert!((400..600).contains(&dropped), "5 % of 10,000 dropped, not {dropped}");
        let mut link = Link::new(spec, 1);
        run(&mut link, 10_000, ms(1));
        let stats = link.stats();
        assert_eq!((stats.offered, stats.bytes_offered), (10_000, 40_000));
        assert_eq!((stats.dropped, stats.released), (dropped as u64, a.len() as u64));
    }

    #[test]
    fn the_fate_of_a_datagram_does_not_depend_on_the_knobs_of_the_others() {
        // Loss decided from the first draw of each datagram, whatever lag or duplication do.
        let lossy = run(&mut Link::new(impairment("loss=10%"), 3), 2_000, ms(1));
        let busy = run(&mut Link::new(impairment("loss=10%,lag=50ms,dup=5%"), 3), 2_000, ms(1));
        let numbers = |out: &[(u128, u32)]| {
            let mut n: Vec<u32> = out.iter().map(|(_, n)| *n).collect();
            n.dedup();
            n.sort_unstable();
            n.dedup();
            n
        };
        assert_eq!(numbers(&lossy), numbers(&busy));
    }

    #[test]
    fn lag_delays_every_datagram_and_jitter_never_reorders() {
        // Close together (1 ms apart), jitter could reorder: order is kept.
        let mut link = Link::new(impairment("lag=100ms,jitter=20ms"), 9);
        let out = run(&mut link, 1_000, ms(1));
        assert_eq!(out.len(), 1_000);
        for (i, (at, n)) in out.iter().enumerate() {
            assert_eq!(*n as usize, i, "order kept");
            assert!(
                *at >= u128::from(*n) + 80,
                "datagram {n} released at {at} ms, before lag - jitter"
            );
        }
        assert_eq!(link.stats().delayed, 1_000);
        // Far apart (50 ms), each delay is lag ± jitter, both ways.
        let mut link = Link::new(impairment("lag=100ms,jitter=20ms"), 9);
        let out = run(&mut link, 200, ms(50));
        let delays: Vec<u128> = out.iter().map(|(at, n)| at - u128::from(*n) * 50).collect();
        assert!(delays.iter().all(|d| (80..=120).contains(d)), "{delays:?}");
        assert!(delays.iter().any(|d| *d < 90) && delays.iter().any(|d| *d > 110), "{delays:?}");
    }

    #[test]
    fn reordered_datagrams_are_overtaken_by_later_ones() {
        let mut link = Link::new(impairment("reorder=10%,reorder_time=15ms"), 4);
        let out = run(&mut link, 1_000, ms(1));
        assert_eq!(out.len(), 1_000, "reordering loses nothing");
        let overtaken = out.windows(2).filter(|w| w[0].1 > w[1].1).count();
        assert!(overtaken > 0, "some datagram was overtaken");
        let reordered = link.stats().reordered;
        assert!((50..150).contains(&reordered), "10 % of 1,000 held back, not {reordered}");
    }

    #[test]
    fn duplicated_datagrams_arrive_twice_the_copy_within_dup_time_after() {
        let mut link = Link::new(impairment("dup=2%,dup_time=10ms"), 5);
        let out = run(&mut link, 5_000, ms(1));
        let duplicated = link.stats().duplicated as usize;
        assert_eq!(out.len(), 5_000 + duplicated);
        assert!((50..150).contains(&duplicated), "2 % of 5,000 duplicated, not {duplicated}");
        assert_eq!(link.stats().released as usize, out.len());
        // Each copy follows its original (released at once: no lag) by 0 to 10 ms.
        let mut gaps = Vec::new();
        for n in 0..5_000u32 {
            let at: Vec<u128> = out.iter().filter(|(_, m)| *m == n).map(|(at, _)| *at).collect();
            if let [first, second] = at[..] {
                assert_eq!(first, u128::from(n), "the original is not held");
                gaps.push(second - first);
            }
        }
        assert_eq!(gaps.len(), duplicated);
        assert!(gaps.iter().all(|g| *g <= 10), "{gaps:?}");
        let later = gaps.iter().filter(|g| **g >= 1).count();
        assert!(later * 2 > gaps.len(), "copies come after their originals: {gaps:?}");
    }

    #[test]
    fn datagrams_due_at_the_same_instant_leave_in_offer_order() {
        let mut link = Link::new(impairment("lag=50ms"), 2);
        let now = Instant::now();
        for n in [3, 2, 1] {
            link.offer(now, datagram(n));
        }
        let out: Vec<u32> =
            std::iter::from_fn(|| link.poll_release(now + ms(50))).map(|d| number(&d)).collect();
        assert_eq!(out, [3, 2, 1]);
    }

    #[test]
    fn a_rate_cap_spaces_datagrams_and_drops_when_its_queue_is_full() {
        // 4-byte datagrams every 1 ms (4,000 B/s offered) over a 3,000 B/s line: each takes
        // 1⅓ ms to cross, so the queue grows by ⅓ ms per datagram until it holds 100 ms (after
        // about 300), and from then on a quarter are dropped.
        let mut link = Link::new(impairment("rate=3000,queue=100ms"), 6);
        let out = run(&mut link, 1_000, ms(1));
        for w in out.windows(2) {
            assert!((1..=3).contains(&(w[1].0 - w[0].0)), "released 1⅓ ms apart: {w:?}");
        }
        // The first few hundred find room in the queue: none dropped, none waiting longer than
        // the queue's 100 ms (and 1⅓ ms to cross).
        let first: Vec<u32> = out.iter().take(250).map(|(_, n)| *n).collect();
        assert_eq!(first, (0..250).collect::<Vec<_>>());
        assert!(out.iter().all(|(at, n)| at - u128::from(*n) <= 102), "{out:?}");
        let stats = link.stats();
        assert!((140..210).contains(&stats.queue_dropped), "{stats:?}");
        assert_eq!(stats.released + stats.queue_dropped, 1_000);
    }

    #[test]
    fn a_cut_link_drops_everything_until_healed() {
        let mut link = Link::new(Impairment::default(), 8);
        let now = Instant::now();
        link.set_cut(true);
        link.offer(now, datagram(1));
        assert_eq!(link.poll_release(now), None);
        link.set_cut(false);
        link.offer(now, datagram(2));
        assert_eq!(link.poll_release(now).as_ref().map(number), Some(2));
        assert_eq!(link.stats().cut, 1);
    }

    #[test]
    fn stats_of_two_links_add_up_field_by_field() {
        let one = LinkStats {
            offered: 1,
            released: 2,
            dropped: 3,
            cut: 4,
            queue_dropped: 5,
            delayed: 6,
            reordered: 7,
            duplicated: 8,
            bytes_offered: 9,
        };
        let mut sum = one;
        sum.absorb(&one);
        sum.absorb(&one);
        let tripled = LinkStats {
            offered: 3,
            released: 6,
            dropped: 9,
            cut: 12,
            queue_dropped: 15,
            delayed: 18,
            reordered: 21,
            duplicated: 24,
            bytes_offered: 27,
        };
        assert_eq!(sum, tripled);
    }

    #[test]
    fn a_held_datagram_is_released_at_its_instant_not_before() {
        let mut link = Link::new(impairment("lag=50ms"), 1);
        let now = Instant::now();
        link.offer(now, datagram(1));
        assert_eq!(link.poll_timeout(), Some(now + ms(50)));
        assert_eq!(link.poll_release(now + ms(49)), None);
        assert_eq!(link.poll_release(now + ms(50)).as_ref().map(number), Some(1));
        assert_eq!(link.poll_timeout(), None);
    }
}
