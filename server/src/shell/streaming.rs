//! The engine's level streamer, simulated (DESIGN §1): a streaming request from the core
//! becomes a sleeping task that reports completion, then spawn-point registration, back to the
//! game task's own queue as inputs.

use std::time::Duration;

use rand::RngExt as _;
use tokio::sync::mpsc;

use super::ShellEvent;
use crate::game::{Input, StreamRequest};

/// Plays the level streamer for one request: [`Input::Streamed`] after its duration plus up
/// to its jitter (uniformly at random), then [`Input::SpawnPointsRegistered`] if it asks.
pub(super) fn simulate_streaming(request: StreamRequest, events: mpsc::Sender<ShellEvent>) {
    let jitter_ms = request.jitter.as_millis() as u64;
    let extra = if jitter_ms > 0 { rand::rng().random_range(0..=jitter_ms) } else { 0 };
    let duration = request.duration + Duration::from_millis(extra);
    tracing::debug!(load = %request.load, what = %request.what, duration_ms = crate::fields::millis(duration), "streaming");
    tokio::spawn(async move {
        tokio::time::sleep(duration).await;
        if events.send(ShellEvent::Core(Input::Streamed { load: request.load })).await.is_err() {
            return;
        }
        if let Some(after) = request.spawn_points_after {
            tokio::time::sleep(after).await;
            let _ = events
                .send(ShellEvent::Core(Input::SpawnPointsRegistered { load: request.load }))
                .await;
        }
    });
}
