//! Present so that cargo honours this crate's `[build-dependencies]`, which unify the features
//! of what build scripts and proc macros use (see `src/lib.rs`).

fn main() {}
