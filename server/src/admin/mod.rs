//! The admin HTTP endpoint, bound to loopback by default: probes, state, metrics, travel.
//!
//! | route | answer |
//! |---|---|
//! | `GET /health` | liveness: `200 ok` while the game loop answers a ping within [`HEALTH_BOUND`]; `200 draining` once shutdown began (an orderly drain is not a failure); otherwise `503` naming why (`game loop stalled`, `game stopped`) |
//! | `GET /ready` | readiness: `200 ready` once the endpoint listens, the store is open, the boot transition ended, and shutdown has not begun; otherwise `503` with one line naming what is missing (`not ready: …`), or `draining` from the start of shutdown until the process exits |
//! | `GET /state` | (needs the admin token when one is configured: it lists every player) the game snapshot as JSON, built at most once a second (a request within a second of the last build gets that one, unless a `POST /travel` came between): phase, transition, pending spawns with kind and node, players with pawn / placed / dead, unplaced players, in-flight loads, counters, and `recent_transition_timings`: the last 256 transitions that ended, each with `transition_id`, `players`, `started_to_all_ready_us`, `all_ready_to_ended_us`, `whole_us`, `settle_timed_out` |
//! | `GET /metrics` | every metric family of [`crate::metrics`] in the Prometheus text format 0.0.4, each with `HELP` (docs/operations.md, "Metrics"): transition, phase, client-ready, spawn-wait, store, game-loop lag and QUIC round-trip histograms; transitions, closes, refused logins, saves, spawn refusals and orchestrator SDK errors by label; QUIC packets sent and lost; players, placed players, pending connections and spawns, loads in flight, the transition phase now, the world node; the core's decision counters; build info with the revision; process CPU, memory, start time and file descriptors |
//! | `POST /travel/{node}` | starts a travel to `node`: `202`, or `404` naming an unknown node; `401` without the admin token when one is configured; without one, `403` unless the request's `Host` is a loopback name |
//!
//! `/health`, `/ready` and `/metrics` are open. `/state` and a route that changes the game need
//! `Authorization: Bearer TOKEN` whenever an [`AdminToken`] is configured, and one must be
//! whenever the endpoint binds beyond loopback ([`bind`] refuses otherwise): on a shared
//! network, anyone who can reach the port could otherwise list or move every player. On
//! loopback without a token, `POST /travel` still needs a `Host` of `localhost`, `127.0.0.1` or
//! `[::1]`, so a web page cannot reach it through DNS rebinding. The connections themselves
//! are bounded in number and time ([`serve`](self::serve), docs/security.md).
//!
//! It only reads snapshots and sends travel requests to the game task; it holds no game state.
//! It keeps answering through the whole shutdown drain and stops last, so an orchestrator sees
//! `/ready` fail as soon as the drain starts and stops routing to it, without restarting it
//! (`/health` stays 200).

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use gatehouse_protocol::NodeId;
use tokio_util::sync::CancellationToken;

use crate::GameHandle;
use crate::config::AdminConfig;
use crate::metrics::{self, Metrics};

#[cfg(feature = "fuzzing")]
pub mod fuzzing;
mod serve;

pub use crate::config::{AdminToken, ConnectionLimits};
pub use crate::probes::Probes;
pub use serve::LOOPBACK_RESERVE;
pub(crate) use serve::raise_open_files_limit;

/// How long `/health` waits for the game loop to answer before calling it stalled.
pub const HEALTH_BOUND: Duration = Duration::from_secs(2);

/// How long `/metrics` waits for the game loop's sample before serving the last one.
const SAMPLE_BOUND: Duration = Duration::from_secs(2);

/// How long a `/state` snapshot is served again before the game task builds another: one
/// snapshot costs the game task O(players), and a client polling in a loop must not make it
/// build one per request.
const STATE_REUSE: Duration = Duration::from_secs(1);

/// A bound admin endpoint, with the token its guarded routes require and the bounds on its
/// connections.
#[derive(Debug)]
pub struct AdminListener {
    listener: tokio::net::TcpListener,
    token: Option<AdminToken>,
    limits: ConnectionLimits,
}

impl AdminListener {
    /// The bound address (useful with port 0).
    ///
    /// # Errors
    /// The OS error if the socket address cannot be read.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }
}

/// What the handlers share.
#[derive(Debug, Clone)]
struct AdminState {
    game: GameHandle,
    nodes: Arc<BTreeSet<NodeId>>,
    token: Option<Arc<AdminToken>>,
    metrics: Metrics,
    probes: Arc<Probes>,
    /// Cancelled when shutdown begins: `/ready` fails from then on.
    draining: CancellationToken,
    /// One scrape at a time, so a slower scrape never reports an older sample after a newer.
    scrape: Arc<tokio::sync::Mutex<()>>,
    /// The last `/state` answer and when it was built: one build at a time, reused for
    /// [`STATE_REUSE`].
    state: Arc<tokio::sync::Mutex<Option<(tokio::time::Instant, bytes::Bytes)>>>,
}

/// What [`serve`] needs besides its listener.
#[derive(Debug, Clone)]
pub struct AdminContext {
    /// The game task.
    pub game: GameHandle,
    /// The world's nodes, for `POST /travel`.
    pub nodes: BTreeSet<NodeId>,
    /// The server's metrics.
    pub metrics: Metrics,
    /// What `/ready` reads.
    pub probes: Arc<Probes>,
    /// Cancelled when shutdown begins.
    pub draining: CancellationToken,
}

/// Binds the admin endpoint at `config.bind`.
///
/// # Errors
/// `PermissionDenied`, naming `admin.token`, if the address is beyond loopback and no token is
/// configured (see [`AdminConfig::check_exposure`]); the OS error if it cannot be bound.
pub async fn bind(config: &AdminConfig) -> std::io::Result<AdminListener> {
    config
        .check_exposure()
        .map_err(|why| std::io::Error::new(std::io::ErrorKind::PermissionDenied, why))?;
    let listener = tokio::net::TcpListener::bind(config.bind).await?;
    Ok(AdminListener { listener, token: config.token.clone(), limits: config.limits() })
}

/// Serves the admin endpoint on `listener` until `stop` (which the server cancels last, after
/// the drain: `context.draining` only turns `/ready` to 503).
pub async fn serve(listener: AdminListener, context: AdminContext, stop: CancellationToken) {
    let AdminListener { listener, token, limits } = listener;
    let app = router(context, token);
    if let Ok(addr) = listener.local_addr() {
        tracing::info!(%addr, max_connections = limits.max_connections,
            "admin endpoint listening");
    }
    serve::serve(listener, app, limits, stop).await;
}

/// The routes of the module documentation.
fn router(context: AdminContext, token: Option<AdminToken>) -> Router {
    let AdminContext { game, nodes, metrics, probes, draining } = context;
    let state = AdminState {
        game,
        nodes: Arc::new(nodes),
        token: token.map(Arc::new),
        metrics,
        probes,
        draining,
        scrape: Arc::default(),
        state: Arc::default(),
    };
    Router::new()
        .route("/health", get(health))
        .route("/ready", get(ready))
        .route("/state", get(state_json))
        .route("/metrics", get(metrics_text))
        .route("/travel/{node}", post(travel))
        .with_state(state)
}

/// Liveness: the game loop answers within [`HEALTH_BOUND`] (a stalled loop is not alive); a
/// draining server is alive.
async fn health(State(s): State<AdminState>) -> Response {
    if s.draining.is_cancelled() {
        return (StatusCode::OK, "draining\n").into_response();
    }
    match tokio::time::timeout(HEALTH_BOUND, s.game.ping()).await {
        Ok(true) => (StatusCode::OK, "ok\n").into_response(),
        Ok(false) => (StatusCode::SERVICE_UNAVAILABLE, "game stopped\n").into_response(),
        Err(_) => {
            let body =
                format!("game loop stalled: no answer within {} ms\n", HEALTH_BOUND.as_millis());
            (StatusCode::SERVICE_UNAVAILABLE, body).into_response()
        }
    }
}

/// Readiness: listening, store open, boot transition done, not draining.
async fn ready(State(s): State<AdminState>) -> Response {
    if s.draining.is_cancelled() {
        return (StatusCode::SERVICE_UNAVAILABLE, "draining\n").into_response();
    }
    let missing = s.probes.missing();
    if missing.is_empty() {
        (StatusCode::OK, "ready\n").into_response()
    } else {
        let body = format!("not ready: {}\n", missing.join(", "));
        (StatusCode::SERVICE_UNAVAILABLE, body).into_response()
    }
}

/// The snapshot as JSON, built by the game task at most once per [`STATE_REUSE`] (a travel
/// started here drops the answer kept) and one at a time; it lists every player, so it needs
/// the token when one is configured.
async fn state_json(State(s): State<AdminState>, headers: HeaderMap) -> Response {
    if let Some(refusal) = refuse_unauthorized(&s, &headers) {
        return refusal;
    }
    let mut last = s.state.lock().await;
    let now = tokio::time::Instant::now();
    let body = match last.as_ref() {
        Some((built, body)) if now.duration_since(*built) < STATE_REUSE => body.clone(),
        _ => {
            let Some(snapshot) = s.game.snapshot().await else {
                return (StatusCode::SERVICE_UNAVAILABLE, "game stopped\n").into_response();
            };
            let body = match serde_json::to_vec(&snapshot) {
                Ok(json) => bytes::Bytes::from(json),
                Err(e) => {
                    tracing::error!(error = %e, "the snapshot does not encode");
                    let body = "the snapshot does not encode\n";
                    return (StatusCode::INTERNAL_SERVER_ERROR, body).into_response();
                }
            };
            *last = Some((now, body.clone()));
            body
        }
    };
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// Whether the request's `Host` names loopback (`localhost`, `127.0.0.1`, `[::1]`, any port):
/// a browser tricked by DNS rebinding sends the attacker's name instead.
fn host_is_loopback(headers: &HeaderMap) -> bool {
    let Some(host) = headers.get(header::HOST).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split_once(']').map_or(rest, |(name, _)| name),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    name.eq_ignore_ascii_case("localhost")
        || name.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Every family, with the core's gauges and counters sampled now (or, if the game loop does
/// not answer within [`SAMPLE_BOUND`] or has stopped, as last sampled).
async fn metrics_text(State(s): State<AdminState>) -> Response {
    let _one_at_a_time = s.scrape.lock().await;
    if let Ok(Some(sample)) = tokio::time::timeout(SAMPLE_BOUND, s.game.sample()).await {
        s.metrics.set_core_sample(sample);
    }
    match s.metrics.encode() {
        Ok(text) => ([(header::CONTENT_TYPE, metrics::CONTENT_TYPE)], text).into_response(),
        Err(e) => {
            tracing::error!(error = %e, "metrics do not encode");
            (StatusCode::INTERNAL_SERVER_ERROR, "metrics do not encode\n").into_response()
        }
    }
}

/// `None` if the request may change the game: no token is configured, or it carries
/// `Authorization: Bearer TOKEN`; otherwise the `401` to answer.
fn refuse_unauthorized(s: &AdminState, headers: &HeaderMap) -> Option<Response> {
    let token = s.token.as_ref()?;
    let presented = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.as_bytes().strip_prefix(b"Bearer "))
        .unwrap_or_default();
    if token.accepts(presented) {
        return None;
    }
    Some(
        (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
            "this route needs the admin token: Authorization: Bearer TOKEN\n",
        )
            .into_response(),
    )
}

async fn travel(
    State(s): State<AdminState>,
    headers: HeaderMap,
    Path(node): Path<String>,
) -> Response {
    // Before looking at the node, so an unauthenticated caller learns nothing about the world.
    if let Some(refusal) = refuse_unauthorized(&s, &headers) {
        return refusal;
    }
    if s.token.is_none() && !host_is_loopback(&headers) {
        let body = "without an admin token, POST /travel needs a Host of localhost, 127.0.0.1 \
                    or [::1]\n";
        return (StatusCode::FORBIDDEN, body).into_response();
    }
    let node = match NodeId::new(node) {
        Ok(node) if s.nodes.contains(&node) => node,
        Ok(node) => {
            return (StatusCode::NOT_FOUND, format!("no node {node} in this world\n"))
                .into_response();
        }
        Err(e) => return (StatusCode::BAD_REQUEST, format!("{e}\n")).into_response(),
    };
    if s.game.travel(node.clone()).await {
        // The operator who moved the world reads the move at once, not the reused answer.
        *s.state.lock().await = None;
        (StatusCode::ACCEPTED, format!("travelling to {node}\n")).into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "game stopped\n").into_response()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use super::*;
    use crate::shell::ShellEvent;
    use tokio::sync::mpsc;

    /// Handler state around `game`, with the probes given, draining or not.
    fn state(game: GameHandle, probes: Probes, draining: bool) -> AdminState {
        let token = CancellationToken::new();
        if draining {
            token.cancel();
        }
        AdminState {
            game,
            nodes: Arc::default(),
            token: None,
            metrics: Metrics::new(),
            probes: Arc::new(probes),
            draining: token,
            scrape: Arc::default(),
            state: Arc::default(),
        }
    }

    /// A game handle whose game task answers pings, and the task.
    fn answering_game() -> (GameHandle, tokio::task::JoinHandle<()>) {
        let (events, mut rx) = mpsc::channel(8);
        let task = tokio::spawn(async move {
            while let Some(event) = rx.recv().await {
                if let ShellEvent::Ping(reply) = event {
                    let _ = reply.send(());
                }
            }
        });
        (GameHandle { events }, task)
    }

    /// A game task that answers snapshots with a real game's, counting them.
    fn snapshotting_game() -> (GameHandle, Arc<std::sync::atomic::AtomicUsize>) {
        let world = include_str!("../../../tests/worlds/quick.toml");
        let world = crate::config::parse_world(std::path::Path::new("w.toml"), world).unwrap();
        let rules = crate::config::game_rules(
            &crate::config::GameConfig::default(),
            &crate::config::AuthConfig::default(),
            &crate::config::NetworkConfig { max_players: 8, ..Default::default() },
            &crate::config::FleetConfig::default(),
        );
        let game = crate::game::Game::new(rules, Arc::new(world), std::time::Instant::now());
        let built = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = built.clone();
        let (events, mut rx) = mpsc::channel(8);
        tokio::spawn(async move {
            while let Some(event) = rx.recv().await {
                if let ShellEvent::Snapshot(reply) = event {
                    counted.fetch_add(1, Ordering::SeqCst);
                    let _ = reply.send(game.snapshot());
                }
            }
        });
        (GameHandle { events }, built)
    }

    /// `/state` is built by the game task at most once per [`STATE_REUSE`]: a client polling it
    /// in a loop gets the same answer meanwhile; once that has passed, a new one.
    #[tokio::test(start_paused = true)]
    async fn state_is_built_at_most_once_a_second_however_often_it_is_asked() {
        let (game, built) = snapshotting_game();
        let s = state(game, ready_probes(), false);
        for _ in 0..50 {
            let (status, body) = answer(state_json(State(s.clone()), HeaderMap::new()).await).await;
            assert_eq!(status, StatusCode::OK);
            assert!(body.contains("\"phase\""), "{body}");
        }
        assert_eq!(built.load(Ordering::SeqCst), 1);
        tokio::time::advance(STATE_REUSE).await;
        let _ = state_json(State(s.clone()), HeaderMap::new()).await;
        assert_eq!(built.load(Ordering::SeqCst), 2);
    }

    /// With a token configured, `/state` (which lists every player) needs it.
    #[tokio::test]
    async fn state_needs_the_admin_token_once_one_is_configured() {
        let (game, _built) = snapshotting_game();
        let mut s = state(game, ready_probes(), false);
        s.token = Some(Arc::new(AdminToken::parse("0123456789abcdef-soak").unwrap()));
        let (status, _) = answer(state_json(State(s.clone()), HeaderMap::new()).await).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        let mut headers = HeaderMap::new();
        headers.insert(header::AUTHORIZATION, "Bearer 0123456789abcdef-soak".parse().unwrap());
        let (status, _) = answer(state_json(State(s), headers).await).await;
        assert_eq!(status, StatusCode::OK);
    }

    fn ready_probes() -> Probes {
        let probes = Probes::default();
        probes.mark_listening();
        probes.set_store_open(true);
        probes.mark_booted();
        probes
    }

    async fn answer(response: Response) -> (StatusCode, String) {
        let status = response.status();
        let body = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
        (status, String::from_utf8(body.to_vec()).unwrap())
    }

    /// Not ready names every missing condition, in one line.
    #[tokio::test]
    async fn ready_names_what_is_missing_until_listening_store_and_boot() {
        let (game, _task) = answering_game();
        let s = state(game.clone(), Probes::default(), false);
        let (status, body) = answer(ready(State(s)).await).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(body, "not ready: not listening, store not open, boot transition not done\n");

        let probes = ready_probes();
        probes.set_store_open(false);
        let (status, body) = answer(ready(State(state(game.clone(), probes, false))).await).await;
        assert_eq!(
            (status, body.as_str()),
            (StatusCode::SERVICE_UNAVAILABLE, "not ready: store not open\n")
        );

        let (status, body) = answer(ready(State(state(game, ready_probes(), false))).await).await;
        assert_eq!((status, body.as_str()), (StatusCode::OK, "ready\n"));
    }

    /// Once shutdown begins, `/ready` is 503 whatever the probes say.
    #[tokio::test]
    async fn ready_is_503_once_shutdown_begins() {
        let (game, _task) = answering_game();
        let (status, body) = answer(ready(State(state(game, ready_probes(), true))).await).await;
        assert_eq!((status, body.as_str()), (StatusCode::SERVICE_UNAVAILABLE, "draining\n"));
    }

    /// An orderly drain is not a liveness failure, even once the game task
    /// has ended.
    #[tokio::test]
    async fn health_says_draining_rather_than_failing_during_a_drain() {
        let (events, rx) = mpsc::channel(8);
        drop(rx);
        let s = state(GameHandle { events }, ready_probes(), true);
        let (status, body) = answer(health(State(s)).await).await;
        assert_eq!((status, body.as_str()), (StatusCode::OK, "draining\n"));
    }

    /// Live while the game loop answers; 503 once it stopped.
    #[tokio::test]
    async fn health_is_ok_while_the_game_loop_answers_and_503_once_it_stopped() {
        let (game, task) = answering_game();
        let (status, body) =
            answer(health(State(state(game.clone(), ready_probes(), false))).await).await;
        assert_eq!((status, body.as_str()), (StatusCode::OK, "ok\n"));
        task.abort();
        let _ = task.await;
        let (status, body) = answer(health(State(state(game, ready_probes(), false))).await).await;
        assert_eq!((status, body.as_str()), (StatusCode::SERVICE_UNAVAILABLE, "game stopped\n"));
    }

    /// A game loop that takes pings but never answers is stalled: `/health` fails after
    /// [`HEALTH_BOUND`] instead of hanging.
    #[tokio::test(start_paused = true)]
    async fn health_is_503_when_the_game_loop_stalls() {
        let (events, _held_never_read) = mpsc::channel(8);
        let s = state(GameHandle { events }, ready_probes(), false);
        let (status, body) = answer(health(State(s)).await).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(body.starts_with("game loop stalled"), "{body}");
    }

    #[test]
    fn only_loopback_host_names_are_loopback() {
        let with_host = |host: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::HOST, host.parse().unwrap());
            host_is_loopback(&headers)
        };
        for host in ["localhost", "LOCALHOST:7778", "127.0.0.1", "127.0.0.1:7778", "[::1]:7778"] {
            assert!(with_host(host), "{host}");
        }
        for host in ["gatehouse", "evil.example:7778", "10.0.0.1:7778", "[2001:db8::1]:80"] {
            assert!(!with_host(host), "{host}");
        }
        assert!(!host_is_loopback(&HeaderMap::new()), "no Host at all");
    }

    #[test]
    fn a_token_accepts_only_itself() {
        let token = AdminToken::parse("0123456789abcdef-soak").unwrap();
        assert!(token.accepts(b"0123456789abcdef-soak"));
        assert!(!token.accepts(b"0123456789abcdef-soaK"));
        assert!(!token.accepts(b""));
    }

    #[test]
    fn a_short_or_spaced_token_is_refused_without_quoting_it() {
        let short = AdminToken::parse("hunter2").unwrap_err();
        assert!(short.contains("at least 16") && !short.contains("hunter2"), "{short}");
        let spaced = AdminToken::parse("correct horse battery staple").unwrap_err();
        assert!(spaced.contains("without spaces") && !spaced.contains("horse"), "{spaced}");
    }

    #[test]
    fn the_debug_output_never_shows_the_token() {
        let token = AdminToken::parse("0123456789abcdef-soak").unwrap();
        assert!(!format!("{token:?}").contains("0123"));
    }
}
