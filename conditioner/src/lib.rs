//! gatehouse-conditioner: a seeded network conditioner between clients and the server: loss, lag,
//! jitter, reordering, duplication and a bandwidth cap, each per direction, in user space
//! (kernel netem is not available where these run).
//!
//! - [`Impairment`]: what one direction does to datagrams, parsed from a spec such as
//!   `loss=5%,lag=100ms,jitter=20ms,reorder=1%,dup=1%`.
//! - [`link`]: the sans-IO core, one direction of one flow: datagrams in with `now`, datagrams
//!   out at exact release instants, every decision drawn from a seeded generator.
//! - [`proxy`]: the UDP shell, a relay between any QUIC client and the server, one flow per
//!   client address; `gatehouse-sim proxy` runs it alone and `gatehouse-sim --impair` runs it
//!   in process in front of the swarm.
//!
//! The knobs are named as the conditioners game developers already use name them:
//!
//! | knob | meaning | Valve GameNetworkingSockets | Unreal |
//! |---|---|---|---|
//! | `loss` | share of datagrams dropped | `FakePacketLoss_Send/Recv` | `PktLoss` |
//! | `lag` | delay added to every datagram | `FakePacketLag_Send/Recv` | `PktLag` |
//! | `jitter` | each delay varied uniformly by up to ± this | — | `PktLagVariance` |
//! | `reorder` | share of datagrams held back so later ones overtake them | `FakePacketReorder_Send/Recv` | `PktOrder` |
//! | `reorder_time` | how long such a datagram is held back (default 15 ms) | `FakePacketReorder_Time` | — |
//! | `dup` | share of datagrams delivered twice | `FakePacketDup_Send/Recv` | `PktDup` |
//! | `dup_time` | the copy follows within up to this (default 10 ms) | `FakePacketDup_TimeMax` | — |
//! | `rate` | bandwidth cap, bytes per second (`k`, `M` suffixes: ×1000) | `FakeRateLimit_Send/Recv_Rate` | — |
//! | `queue` | under a cap, the longest a datagram may wait for the line before it is dropped (default 1 s) | — | — |

#![forbid(unsafe_code)]

pub mod cli;
pub mod link;
pub mod proxy;

use std::fmt;
use std::time::Duration;

use serde::Serialize;

/// What a conditioner does to the datagrams of one direction (docs/testing.md, "A bad
/// network"). Shares are fractions in `0.0..=1.0` (a spec writes them as percentages); the
/// default passes every datagram untouched at once.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Impairment {
    /// Share of datagrams dropped.
    pub loss: f64,
    /// Delay added to every datagram.
    pub lag: Duration,
    /// Each delay is varied uniformly within ± this (order kept: jitter alone never reorders).
    pub jitter: Duration,
    /// Share of datagrams held back by `reorder_time` so that later ones overtake them.
    pub reorder: f64,
    /// How long a reordered datagram is held back beyond its delay.
    pub reorder_time: Duration,
    /// Share of datagrams delivered twice.
    pub duplicate: f64,
    /// The copy of a duplicated datagram follows it within up to this.
    pub duplicate_time: Duration,
    /// Bandwidth cap in bytes per second; `None` is uncapped.
    pub rate: Option<u64>,
    /// Under a cap, the longest a datagram may wait for the line; one that would wait longer
    /// is dropped (a full queue).
    pub queue: Duration,
}

impl Default for Impairment {
    fn default() -> Self {
        Impairment {
            loss: 0.0,
            lag: Duration::ZERO,
            jitter: Duration::ZERO,
            reorder: 0.0,
            reorder_time: Duration::from_millis(15),
            duplicate: 0.0,
            duplicate_time: Duration::from_millis(10),
            rate: None,
            queue: Duration::from_secs(1),
        }
    }
}

/// A spec [`Impairment::parse`] refused: which knob, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("impairment {spec:?}: {why}")]
pub struct ImpairmentError {
    /// The whole spec as given.
    pub spec: String,
    /// What was wrong, naming the knob.
    pub why: String,
}

impl Impairment {
    /// Parses a spec: comma-separated `knob=value` pairs (the knobs of the module's table),
    /// shares as percentages (`5%`) or fractions (`0.05`), times as `100ms` or `1s`, the rate
    /// as bytes per second (`64k`, `2M`). `none` or an empty spec is the clean default.
    ///
    /// # Errors
    /// [`ImpairmentError`] naming the knob: an unknown knob, a missing `=`, a value that does
    /// not parse, a share outside 0–100 %, jitter above lag, a zero rate.
    pub fn parse(spec: &str) -> Result<Impairment, ImpairmentError> {
        let fail = |why: String| ImpairmentError { spec: spec.to_owned(), why };
        let mut out = Impairment::default();
        let trimmed = spec.trim();
        if trimmed.is_empty() || trimmed == "none" {
            return Ok(out);
        }
        for pair in trimmed.split(',').map(str::trim) {
            let (knob, value) =
                pair.split_once('=').ok_or_else(|| fail(format!("{pair:?} is not knob=value")))?;
            let (knob, value) = (knob.trim(), value.trim());
            let bad = |why: String| fail(format!("{knob}={value}: {why}"));
            match knob {
                "loss" => out.loss = share(value).map_err(bad)?,
                "reorder" => out.reorder = share(value).map_err(bad)?,
                "dup" | "duplicate" => out.duplicate = share(value).map_err(bad)?,
                "lag" => out.lag = time(value).map_err(bad)?,
                "jitter" => out.jitter = time(value).map_err(bad)?,
                "reorder_time" => out.reorder_time = time(value).map_err(bad)?,
                "dup_time" | "duplicate_time" => out.duplicate_time = time(value).map_err(bad)?,
                "queue" => out.queue = time(value).map_err(bad)?,
                "rate" => out.rate = Some(rate(value).map_err(bad)?),
                _ => {
                    return Err(fail(format!(
                        "unknown knob {knob:?} (known: loss, lag, jitter, reorder, \
                         reorder_time, dup, dup_time, rate, queue)"
                    )));
                }
            }
        }
        if out.jitter > out.lag {
            return Err(fail(format!(
                "jitter {} is above lag {}: a delay cannot go below zero",
                humantime::format_duration(out.jitter),
                humantime::format_duration(out.lag)
            )));
        }
        Ok(out)
    }
}

/// A share: `5%` or `0.05`, within 0–100 %.
fn share(value: &str) -> Result<f64, String> {
    let fraction = match value.strip_suffix('%') {
        Some(percent) => {
            percent.trim().parse::<f64>().map_err(|e| format!("not a percentage ({e})"))? / 100.0
        }
        None => value.parse::<f64>().map_err(|e| format!("not a share ({e})"))?,
    };
    if !(0.0..=1.0).contains(&fraction) {
        return Err("a share must be within 0% and 100%".into());
    }
    Ok(fraction)
}

/// A time: `100ms`, `1s` (humantime).
fn time(value: &str) -> Result<Duration, String> {
    humantime::parse_duration(value).map_err(|e| format!("not a time such as 100ms ({e})"))
}

/// Bytes per second: `64000`, `64k`, `2M` (decimal multiples), above zero.
fn rate(value: &str) -> Result<u64, String> {
    let (digits, multiple) = match value.char_indices().last() {
        Some((i, 'k' | 'K')) => (&value[..i], 1_000),
        Some((i, 'M')) => (&value[..i], 1_000_000),
        _ => (value, 1),
    };
    let n: u64 = digits.trim().parse().map_err(|e| format!("not bytes per second ({e})"))?;
    match n.checked_mul(multiple) {
        Some(0) => Err("a rate of 0 passes nothing: leave it out for no cap".into()),
        Some(bytes) => Ok(bytes),
        None => Err("too large".into()),
    }
}

impl fmt::Display for Impairment {
    /// The spec that parses back to this impairment (its non-default knobs), or `none`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let defaults = Impairment::default();
        let mut parts = Vec::new();
        let ms = |d: Duration| format!("{}ms", d.as_millis());
        let percent = |x: f64| format!("{}%", x * 100.0);
        if self.loss != 0.0 {
            parts.push(format!("loss={}", percent(self.loss)));
        }
        if !self.lag.is_zero() {
            parts.push(format!("lag={}", ms(self.lag)));
        }
        if !self.jitter.is_zero() {
            parts.push(format!("jitter={}", ms(self.jitter)));
        }
        if self.reorder != 0.0 {
            parts.push(format!("reorder={}", percent(self.reorder)));
        }
        if self.reorder_time != defaults.reorder_time {
            parts.push(format!("reorder_time={}", ms(self.reorder_time)));
        }
        if self.duplicate != 0.0 {
            parts.push(format!("dup={}", percent(self.duplicate)));
        }
        if self.duplicate_time != defaults.duplicate_time {
            parts.push(format!("dup_time={}", ms(self.duplicate_time)));
        }
        if let Some(rate) = self.rate {
            parts.push(format!("rate={rate}"));
        }
        if self.queue != defaults.queue {
            parts.push(format!("queue={}", ms(self.queue)));
        }
        if parts.is_empty() { f.write_str("none") } else { f.write_str(&parts.join(",")) }
    }
}

/// Both directions of a flow: `up` is client → server, `down` server → client.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Conditions {
    /// Client → server.
    pub up: Impairment,
    /// Server → client.
    pub down: Impairment,
}

impl Conditions {
    /// The same impairment both ways.
    pub fn both(impairment: Impairment) -> Conditions {
        Conditions { up: impairment, down: impairment }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_names_each_knob_as_the_conditioners_do() {
        let spec = "loss=5%,lag=100ms,jitter=20ms,reorder=1%,dup=1%,rate=64k,queue=500ms";
        let i = Impairment::parse(spec).unwrap();
        assert_eq!(i.loss, 0.05);
        assert_eq!(i.lag, Duration::from_millis(100));
        assert_eq!(i.jitter, Duration::from_millis(20));
        assert_eq!(i.reorder, 0.01);
        assert_eq!(i.duplicate, 0.01);
        assert_eq!(i.rate, Some(64_000));
        assert_eq!(i.queue, Duration::from_millis(500));
        assert_ne!(i, Impairment::default());
        assert_eq!(Impairment::parse("rate=2M").unwrap().rate, Some(2_000_000));
        assert_eq!(Impairment::parse("rate=1500").unwrap().rate, Some(1_500));
        assert_eq!(Impairment::parse(&i.to_string()).unwrap(), i);
    }

    #[test]
    fn an_empty_or_none_spec_is_clean() {
        assert_eq!(Impairment::parse("").unwrap(), Impairment::default());
        assert_eq!(Impairment::parse("none").unwrap(), Impairment::default());
        assert_eq!(Impairment::default().to_string(), "none");
        assert_eq!(Impairment::parse("loss=0.0").unwrap(), Impairment::default());
    }

    #[test]
    fn a_bad_spec_names_the_knob_and_why() {
        let cases = [
            ("loss=105%", "loss=105%: a share must be within 0% and 100%"),
            ("lag=fast", "lag=fast: not a time"),
            ("jitter=30ms,lag=10ms", "jitter 30ms is above lag 10ms"),
            ("rate=0", "rate=0: a rate of 0 passes nothing"),
            ("drop=5%", "unknown knob \"drop\""),
            ("loss", "\"loss\" is not knob=value"),
        ];
        for (spec, expected) in cases {
            let e = Impairment::parse(spec).unwrap_err();
            assert_eq!(e.spec, spec);
            assert!(e.to_string().contains(expected), "{spec}: {e}");
        }
    }
}
