//! The gates' contract (docs/spec/gates.md) at the adapter and gate level: a [`ClientSession`]
//! driven with scripted server messages on an explicit clock, observed through its router and its
//! registry.
//!
//! - `coverage`: the rules that live at this level, one test (or more) each.
//! - `checklist`: what every new fact or gate is tested for (G13).
//! - `failure_modes`: the debugging cases about adapters and gates.
//! - `live_checks`: the runtime expectations every simulated client checks, and a scripted run.
//! - `rep_notifies`: remote Blueprint RepNotifies deferred until the remote gate releases.
//! - `pawn_team`: the pawn team presentation.
//! - `latent_gaps`: latent gaps in the contract, each in the arrival order that reaches it.
//!
//! [`ClientSession`]: gatehouse_client_sim::session::ClientSession

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests unwrap freely

mod checklist;
mod common;
mod coverage;
mod failure_modes;
mod latent_gaps;
mod live_checks;
mod pawn_team;
mod rep_notifies;
