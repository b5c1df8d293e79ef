//! workspace-hack: one feature set per third-party dependency, whichever packages are built.
//!
//! Cargo unifies a dependency's features over the packages being built, so `cargo build -p
//! gatehouse-server`, then `-p gatehouse-client-sim`, then `--workspace` would each compile
//! their own copy of tokio, quinn, serde, … with a different feature set. Every workspace crate
//! depends on this one, whose `Cargo.toml` names each shared dependency with the union of the
//! features any workspace crate uses, so every selection resolves to the same builds.
//!
//! The dependency list is generated, never edited by hand: after changing any dependency, run
//! `cargo hakari generate` (crates.io `cargo-hakari`; configured in `.config/hakari.toml`).
//! `.ci/one-build` checks in CI that the selections still agree. The list includes features
//! that only tests use (tokio's `test-util`, for the store worker's paused-time tests): they
//! add functions and change nothing unless called.
//!
//! This crate has no code.

#![forbid(unsafe_code)]
