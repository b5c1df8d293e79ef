//! End-to-end tests: a real server on 127.0.0.1 (ephemeral port), real QUIC, simulated and raw
//! clients. One test binary, one module per subject.

mod admin;
mod library;
mod malformed;
mod misbehave;
mod network;
mod peer_link;
mod scale;
mod scale_soak;
mod session;
mod soak;
mod travel;
mod wait;
