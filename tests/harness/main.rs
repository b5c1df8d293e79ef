//! Cross-side contract tests: the real game core and real simulated clients connected in
//! memory on simulated time ([`gatehouse_tests::sim`]). Fixed seeds, no sleeps, no sockets: each
//! test runs in milliseconds and gives the same run every time. One module per subject; each test's
//! `///` line names the rule of docs/spec/ it covers.

// Tests: a failed expectation is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod edges;
mod network;
mod orders;
mod placement;
mod progress;
mod respawn;
mod transitions;
mod travel;
