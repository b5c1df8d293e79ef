//! Contract tests of the lifecycle gate registry (docs/spec/gates.md G1–G10), built as one test
//! binary.
//!
//! One module per part of the contract: `coverage` (the rules one by one), `checklist` (what
//! every new fact or gate is tested for), `failure_modes` (the debugging cases: G3, G6, G9),
//! `reentrancy` (G5), and `scopes` (scopes, generations and refusals). Every test names the
//! behaviour it pins and cites the rule it covers.

mod checklist;
mod common;
mod coverage;
mod failure_modes;
mod reentrancy;
mod scopes;
