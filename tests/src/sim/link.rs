//! The in-memory control stream of one connection: one reliable, ordered queue per direction,
//! with seeded latency and loss.
//!
//! The control channel is one QUIC stream (docs/protocol.md section 1), so a lost message is not
//! gone: it is retransmitted one retransmission timeout later (doubling at each further loss), and
//! every message sent after it waits behind it (head-of-line blocking). That is the whole model: a
//! message sent at `t` is delivered at `max(t + latency + jitter + retransmissions, the delivery
//! time of the message before it)`. Owns the queues and the draws; knows nothing of messages.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use rand::RngExt as _;
use rand::rngs::StdRng;

/// Retransmissions of one message at most by default, so even a loss rate of 1 delivers.
pub(crate) const MAX_RETRANSMISSIONS: u32 = 8;

/// The network conditions of one direction of a connection, named as game developers name them:
/// lag, jitter, packet loss (docs/testing.md, "A bad network").
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Conditions {
    /// One-way delay of every message.
    pub latency: Duration,
    /// Extra one-way delay, uniformly between zero and this, drawn per message.
    pub jitter: Duration,
    /// Probability that one transmission of a message is lost, 0 ..= 1.
    pub loss: f64,
    /// Retransmission timeout: a lost transmission is repeated this much later (doubled for
    /// each further loss of the same message).
    pub rto: Duration,
    /// How many transmissions of one message may be lost at most: the last one always
    /// arrives. With it, one message's delay is at most `latency + jitter + rto × (2^n − 1)`
    /// ([`Conditions::max_delay`]).
    pub max_retransmissions: u32,
}

impl Conditions {
    /// No delay and no loss: every message arrives in the instant it was sent.
    pub const INSTANT: Conditions = Conditions {
        latency: Duration::ZERO,
        jitter: Duration::ZERO,
        loss: 0.0,
        rto: Duration::ZERO,
        max_retransmissions: MAX_RETRANSMISSIONS,
    };

    /// A good connection: 20 ms one way, up to 10 ms of jitter, no loss.
    pub fn lan() -> Conditions {
        Conditions {
            latency: Duration::from_millis(20),
            jitter: Duration::from_millis(10),
            loss: 0.0,
            rto: Duration::from_millis(200),
            max_retransmissions: MAX_RETRANSMISSIONS,
        }
    }

    /// A poor connection: 60 ms one way, up to 40 ms of jitter, one transmission in ten lost,
    /// a 200 ms retransmission timeout.
    pub fn lossy() -> Conditions {
        Conditions {
            latency: Duration::from_millis(60),
            jitter: Duration::from_millis(40),
            loss: 0.1,
            rto: Duration::from_millis(200),
            max_retransmissions: MAX_RETRANSMISSIONS,
        }
    }

    /// The longest delay one message can be drawn: every retransmission lost, the whole jitter.
    /// On the ordered stream a message also waits for the one before it, which left earlier
    /// with at most this delay, so no message takes longer than this from send to delivery.
    pub fn max_delay(&self) -> Duration {
        let retransmissions = (1u32 << self.max_retransmissions.min(16)) - 1;
        self.latency + self.jitter + self.rto * retransmissions
    }

    /// Draws the delay of one message and how many of its transmissions were lost.
    pub(crate) fn draw(&self, rng: &mut StdRng) -> (Duration, u32) {
        let mut delay = self.latency;
        if !self.jitter.is_zero() {
            let most = u64::try_from(self.jitter.as_micros()).unwrap_or(u64::MAX);
            delay += Duration::from_micros(rng.random_range(0..=most));
        }
        // A rate outside 0 ..= 1 (or NaN) is a test's typo: treat it as the nearest bound.
        let loss = if self.loss.is_nan() { 0.0 } else { self.loss.clamp(0.0, 1.0) };
        let mut lost = 0;
        let mut rto = self.rto;
        while lost < self.max_retransmissions && loss > 0.0 && rng.random_bool(loss) {
            delay += rto;
            rto *= 2;
            lost += 1;
        }
        (delay, lost)
    }
}

/// One direction of one connection: messages in flight, oldest first, each with the instant it
/// is delivered.
#[derive(Debug)]
pub(crate) struct Link<T> {
    in_flight: VecDeque<(Instant, T)>,
    /// The delivery time of the last message sent: no later message is delivered before it.
    last: Option<Instant>,
}

impl<T> Default for Link<T> {
    fn default() -> Self {
        Link { in_flight: VecDeque::new(), last: None }
    }
}

impl<T> Link<T> {
    /// Sends `message` at `now` with `delay`; returns when it is delivered (never before the
    /// message sent before it: the stream is ordered).
    pub(crate) fn send(&mut self, now: Instant, delay: Duration, message: T) -> Instant {
        let at = self.last.map_or(now + delay, |last| last.max(now + delay));
        self.last = Some(at);
        self.in_flight.push_back((at, message));
        at
    }

    /// When the oldest message in flight is delivered.
    pub(crate) fn next_at(&self) -> Option<Instant> {
        self.in_flight.front().map(|(at, _)| *at)
    }

    /// The oldest message in flight, if it is due at `now`.
    pub(crate) fn pop_due(&mut self, now: Instant) -> Option<T> {
        if self.next_at()? <= now { self.in_flight.pop_front().map(|(_, m)| m) } else { None }
    }

    /// Drops everything in flight (the receiving end is gone); returns how many.
    pub(crate) fn clear(&mut self) -> usize {
        let dropped = self.in_flight.len();
        self.in_flight.clear();
        dropped
    }
}

/// What the links carried in one run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NetStats {
    /// Messages put on a link.
    pub messages: u64,
    /// Transmissions lost and repeated one retransmission timeout later.
    pub retransmissions: u64,
    /// Messages diverted by a hold.
    pub held: u64,
    /// Messages dropped because their receiving end had closed.
    pub dropped: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng as _;

    #[test]
    fn a_message_never_overtakes_the_one_sent_before_it() {
        let t0 = Instant::now();
        let mut link = Link::default();
        link.send(t0, Duration::from_millis(300), "lost once");
        let second = link.send(t0, Duration::from_millis(10), "fast");
        assert_eq!(second, t0 + Duration::from_millis(300), "head-of-line blocked");
        assert_eq!(link.pop_due(t0 + Duration::from_millis(299)), None);
        assert_eq!(link.pop_due(second), Some("lost once"));
        assert_eq!(link.pop_due(second), Some("fast"));
    }

    #[test]
    fn a_lost_transmission_arrives_one_retransmission_timeout_later() {
        let mut rng = StdRng::seed_from_u64(1);
        let always = Conditions { loss: 1.0, ..Conditions::lan() };
        let (delay, lost) = always.draw(&mut rng);
        assert_eq!(lost, MAX_RETRANSMISSIONS);
        assert!(delay >= Duration::from_millis(20) + Duration::from_millis(200) * 255);
        assert!(delay <= always.max_delay());
        let bounded = Conditions { max_retransmissions: 3, ..always };
        let (delay, lost) = bounded.draw(&mut rng);
        assert_eq!(lost, 3);
        assert!(delay <= bounded.max_delay() && delay >= Duration::from_millis(20 + 1400));
        let (delay, lost) = Conditions::INSTANT.draw(&mut rng);
        assert_eq!((delay, lost), (Duration::ZERO, 0));
    }
}
