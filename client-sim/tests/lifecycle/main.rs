//! Seed 000 at the adapter and gate level: a [`ClientSession`] driven with scripted server
//! messages on an explicit clock, observed through its router and its registry.
//!
//! - `coverage`: the seed's "Verification coverage" list.
//! - `checklist`: the "Adding a fact or gate" automation checklist.
//! - `failure_modes`: the rows of "Failure modes and debugging" about adapters and gates.
//! - `live_checks`: the runtime expectations every simulated client checks, and a scripted run.
//! - `rep_notifies`: remote Blueprint RepNotifies deferred until the remote gate releases.
//! - `pawn_team`: the pawn team presentation.
//! - `latent_gaps`: the contract gaps of issue 16, each in the arrival order that reaches it.
//!
//! [`ClientSession`]: gatehouse_client_sim::session::ClientSession

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests unwrap freely (STYLE 7)

mod checklist;
mod common;
mod coverage;
mod failure_modes;
mod latent_gaps;
mod live_checks;
mod pawn_team;
mod rep_notifies;
