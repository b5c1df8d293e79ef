//! The Agones orchestrator (`agones` cargo feature; docs/operations.md): the [`Orchestrator`]
//! over the `agones` crate's [`Sdk`], a gRPC client of the SDK sidecar in the pod.
//!
//! One task owns the SDK; the game loop only hands it work through channels and never waits:
//! - Health: a channel of one slot (a ping already waiting is as good as two), forwarded onto
//!   the SDK's Health stream, which is opened again if the sidecar dropped it;
//! - Ready, the allocation and the players: a `watch` of what should be true (ready or not,
//!   allocated or released, who is connected); the task makes Agones agree with it (Ready
//!   once, then Allocate or Ready again for the latest allocation or release, then the
//!   `players` List: removals before additions, so a full list frees its room first) and tries
//!   again every second after a failed call. A release and an allocation in quick succession
//!   come down to the later one. Memory is bounded by the players connected, however slow the sidecar; a stay
//!   shorter than a round trip to the sidecar may never show in the list;
//! - Shutdown: a request the task answers once the list is brought up to date and Shutdown sent.
//!
//! Every SDK call is bounded by `fleet.sdk_timeout_ms`; a failure is logged, counted in
//! `gatehouse_fleet_sdk_errors_total{call}` (docs/operations.md, "Metrics") and never stops the
//! server.

use std::collections::BTreeSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use std::time::Duration;

use agones::Sdk;
use gatehouse_protocol::PlayerId;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;

use super::{FleetError, FleetMetrics, Orchestrator, SdkCall};
use crate::config::FleetConfig;

/// The Agones List holding the connected players' ids (the Fleet declares it, with capacity
/// `network.max_players`).
pub(crate) const PLAYERS_LIST: &str = "players";

/// The annotation key the certificate's fingerprint is published under; Agones prefixes it,
/// so the GameServer shows `agones.dev/sdk-gatehouse-certificate-sha256`.
pub(crate) const FINGERPRINT_ANNOTATION: &str = "gatehouse-certificate-sha256";

/// Delay before trying again after a failed Ready, Allocate or list call.
const RETRY: Duration = Duration::from_secs(1);

/// What Agones should know.
#[derive(Debug, Clone, Default, PartialEq)]
struct Wanted {
    ready: bool,
    /// The latest allocation or release; the count tells a release from the one before it.
    occupancy: Occupancy,
    players: BTreeSet<String>,
}

/// The latest allocation (`allocated`) or release (not), numbered: a Ready again after a
/// matchmaker's allocation is a change although the server never allocated itself.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Occupancy {
    changes: u64,
    allocated: bool,
}

/// The Agones orchestrator: channels to the task that owns the SDK.
#[derive(Debug)]
pub(crate) struct Agones {
    health: mpsc::Sender<()>,
    wanted: watch::Sender<Wanted>,
    /// Taken by the first `shutdown`.
    shutdown: Mutex<Option<oneshot::Sender<oneshot::Sender<()>>>>,
    /// Bounds the wait for the task's answer to Shutdown: the final list calls and Shutdown.
    shutdown_wait: Duration,
}

impl Agones {
    /// Connects to the SDK sidecar (`fleet.agones_sdk_port`, else `AGONES_SDK_GRPC_PORT`, else
    /// 9357, on localhost; the SDK retries for up to 30 s) and starts the task that owns it,
    /// which counts its failed calls in `metrics`.
    ///
    /// With `fleet.publish_certificate_fingerprint`, the certificate's `fingerprint` is set as
    /// the annotation [`FINGERPRINT_ANNOTATION`] before anything else, so a GameServer that
    /// can be allocated always shows it (docs/security.md, "Trust in a fleet").
    pub(crate) async fn connect(
        config: &FleetConfig,
        fingerprint: &str,
        metrics: FleetMetrics,
    ) -> Result<Agones, FleetError> {
        let port = match config.agones_sdk_port {
            Some(port) => port.to_string(),
            None => std::env::var("AGONES_SDK_GRPC_PORT").unwrap_or_else(|_| "9357".into()),
        };
        let failed = |why: String| FleetError::Agones { port: port.clone(), why };
        let mut sdk =
            Sdk::new(config.agones_sdk_port, None).await.map_err(|e| failed(describe(&e)))?;
        tracing::info!(%port, "connected to the Agones SDK sidecar");
        if config.publish_certificate_fingerprint {
            let annotate = sdk.set_annotation(FINGERPRINT_ANNOTATION, fingerprint);
            bounded(config.sdk_timeout, annotate).await.map_err(failed)?;
            tracing::info!(%fingerprint, "published the certificate's fingerprint");
        }
        let (health, health_rx) = mpsc::channel(1);
        let (wanted, wanted_rx) = watch::channel(Wanted::default());
        let (shutdown, shutdown_rx) = oneshot::channel();
        let task = SdkTask { sdk, timeout: config.sdk_timeout, told: Wanted::default(), metrics };
        tokio::spawn(task.run(health_rx, wanted_rx, shutdown_rx));
        Ok(Agones {
            health,
            wanted,
            shutdown: Mutex::new(Some(shutdown)),
            // The last list update and Shutdown, each bounded by one call's time.
            shutdown_wait: config.sdk_timeout * 3,
        })
    }
}

impl Orchestrator for Agones {
    fn ready(&self) {
        self.wanted.send_modify(|w| w.ready = true);
    }

    fn health(&self) {
        // Full: a ping is already waiting. Closed: the task ended (logged there).
        let _ = self.health.try_send(());
    }

    fn player_connected(&self, player: &PlayerId) {
        self.wanted.send_modify(|w| {
            w.players.insert(player.as_str().to_owned());
        });
    }

    fn player_disconnected(&self, player: &PlayerId) {
        self.wanted.send_modify(|w| {
            w.players.remove(player.as_str());
        });
    }

    fn allocate(&self) {
        self.wanted.send_modify(|w| w.occupancy.change(true));
    }

    fn release(&self) {
        self.wanted.send_modify(|w| w.occupancy.change(false));
    }

    fn shutdown(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        // A poisoned lock only means another caller panicked; the sender is still good.
        let sender = self.shutdown.lock().unwrap_or_else(|p| p.into_inner()).take();
        Box::pin(async move {
            let Some(sender) = sender else { return };
            let (done, answered) = oneshot::channel();
            if sender.send(done).is_err() {
                tracing::warn!("the Agones SDK task has ended: Shutdown not sent");
                return;
            }
            if tokio::time::timeout(self.shutdown_wait, answered).await.is_err() {
                tracing::warn!("the Agones SDK did not finish Shutdown in time");
            }
        })
    }
}

impl Occupancy {
    fn change(&mut self, allocated: bool) {
        self.changes += 1;
        self.allocated = allocated;
    }
}

/// The task that owns the SDK.
struct SdkTask {
    sdk: Sdk,
    timeout: Duration,
    /// What Agones was told and acknowledged.
    told: Wanted,
    /// Where failed calls are counted.
    metrics: FleetMetrics,
}

impl SdkTask {
    /// Serves the channels until Shutdown:
    /// 1. a ping goes onto the Health stream (reopened if the sidecar closed it);
    /// 2. a change of what is wanted, or the retry timer after a failure, brings Agones up to
    ///    date;
    /// 3. a Shutdown request brings Agones up to date, stops the pings, sends Shutdown and
    ///    answers; the [`Agones`] dropped without one ends the task, sending nothing.
    async fn run(
        mut self,
        mut health: mpsc::Receiver<()>,
        mut wanted: watch::Receiver<Wanted>,
        mut shutdown: oneshot::Receiver<oneshot::Sender<()>>,
    ) {
        let mut pings = Some(self.sdk.health_check());
        let mut retry_at: Option<Instant> = None;
        let mut wanted_open = true;
        loop {
            tokio::select! {
                biased;
                request = &mut shutdown => {
                    // The orchestrator was dropped without a drain (a failed start): Agones
                    // restarts or replaces the pod; nothing more to say.
                    let Ok(done) = request else { return };
                    // The leavers of the drain, within one call's time in all, so that
                    // Shutdown is still sent however slow the sidecar is.
                    let want = wanted.borrow().clone();
                    if tokio::time::timeout(self.timeout, self.update(&want)).await.is_err() {
                        tracing::warn!("Agones: the `players` list not brought up to date before Shutdown");
                    }
                    // Ends the Health stream: no ping after Shutdown.
                    drop(pings.take());
                    match bounded(self.timeout, self.sdk.shutdown()).await {
                        Ok(()) => tracing::info!("told Agones: Shutdown"),
                        Err(why) => {
                            self.metrics.count_error(SdkCall::Shutdown);
                            tracing::warn!(%why, "Agones Shutdown failed");
                        }
                    }
                    let _ = done.send(());
                    return;
                }
                Some(()) = health.recv() => self.ping(&mut pings),
                changed = wanted.changed(), if wanted_open => {
                    wanted_open = changed.is_ok();
                    let want = wanted.borrow_and_update().clone();
                    retry_at = self.update(&want).await.then(|| Instant::now() + RETRY);
                }
                () = sleep_until(retry_at) => {
                    let want = wanted.borrow().clone();
                    retry_at = self.update(&want).await.then(|| Instant::now() + RETRY);
                }
            }
        }
    }

    /// Sends one ping, reopening the Health stream if the sidecar ended it.
    fn ping(&self, pings: &mut Option<mpsc::Sender<()>>) {
        let Some(stream) = pings else { return };
        match stream.try_send(()) {
            Ok(()) | Err(mpsc::error::TrySendError::Full(())) => {}
            Err(mpsc::error::TrySendError::Closed(())) => {
                self.metrics.count_error(SdkCall::Health);
                tracing::warn!("the Agones Health stream ended; opening it again");
                let stream = pings.insert(self.sdk.health_check());
                let _ = stream.try_send(());
            }
        }
    }

    /// Makes Agones agree with `want`: Ready first, then the latest allocation or release,
    /// then the removals, then the additions. Nothing is allocated or released before Ready.
    /// Returns whether a call failed (and should be tried again).
    async fn update(&mut self, want: &Wanted) -> bool {
        let mut failed = false;
        let timeout = self.timeout;
        if want.ready && !self.told.ready {
            match bounded(timeout, self.sdk.ready()).await {
                Ok(()) => {
                    self.told.ready = true;
                    tracing::info!("told Agones: Ready");
                }
                Err(why) => {
                    self.metrics.count_error(SdkCall::Ready);
                    tracing::warn!(%why, "Agones Ready failed; trying again");
                    return true;
                }
            }
        }
        if self.told.ready && want.occupancy != self.told.occupancy {
            let (call, name, counted) = if want.occupancy.allocated {
                (bounded(timeout, self.sdk.allocate()).await, "Allocate", SdkCall::Allocate)
            } else {
                (bounded(timeout, self.sdk.ready()).await, "Ready (released)", SdkCall::Ready)
            };
            match call {
                Ok(()) => {
                    self.told.occupancy = want.occupancy;
                    tracing::info!(call = name, "told Agones");
                }
                Err(why) => {
                    tracing::warn!(call = name, %why, "Agones call failed; trying again");
                    self.metrics.count_error(counted);
                    failed = true;
                }
            }
        }
        let gone: Vec<String> = self.told.players.difference(&want.players).cloned().collect();
        let new: Vec<String> = want.players.difference(&self.told.players).cloned().collect();
        let mut beta = self.sdk.beta().clone();
        for player in gone {
            match bounded(timeout, beta.delete_list_value(PLAYERS_LIST, &player)).await {
                Ok(()) => {
                    self.told.players.remove(&player);
                }
                Err(why) => {
                    self.metrics.count_error(SdkCall::List);
                    tracing::warn!(%player, %why, "Agones: cannot remove the player from the `players` list");
                    failed = true;
                }
            }
        }
        for player in new {
            match bounded(timeout, beta.append_list_value(PLAYERS_LIST, &player)).await {
                Ok(()) => {
                    self.told.players.insert(player);
                }
                Err(why) => {
                    self.metrics.count_error(SdkCall::List);
                    tracing::warn!(%player, %why, "Agones: cannot add the player to the `players` list");
                    failed = true;
                }
            }
        }
        failed
    }
}

/// Runs one SDK call within `limit`; the error as text.
async fn bounded(
    limit: Duration,
    call: impl Future<Output = agones::errors::Result<()>>,
) -> Result<(), String> {
    match tokio::time::timeout(limit, call).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(describe(&e)),
        Err(_) => Err(format!("no answer within {} ms", limit.as_millis())),
    }
}

/// An SDK error with its causes (its own message is often just "rpc failure").
fn describe(e: &agones::errors::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
