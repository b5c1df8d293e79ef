//! Contract tests of the lifecycle gate registry (seed 000), built as one test binary.
//!
//! One module per part of the seed: the "Verification coverage" list, the "Adding a fact or
//! gate" checklist, the "Failure modes and debugging" table, the reentrancy rules of the
//! "Registry contract", and scopes, generations and refusals. Every test names the behaviour it
//! pins and cites the seed section it covers.

mod checklist;
mod common;
mod coverage;
mod failure_modes;
mod reentrancy;
mod scopes;
