//! One simulated client's run: its lives (a connection each, relaunched or reconnected as the
//! configuration and the network say), and how each life connects, runs its session and ends.
//!
//! [`run_client`] strings the lives together and folds each one's outcome into the client's;
//! [`run_life`] dials, sends the session's `Hello`, drives the session until the life's end (the
//! turn itself is [`super::stream`]'s, the links a move opens [`super::links`]'), and then closes
//! the way the life ended: lost, silent, leaving or vanishing for a relaunch.
//!
//! A life dials the server the client last played on (a game reconnects where it was, so a
//! relaunch in the middle of a move finds its seat there: docs/spec/travel.md V9, V10), and the
//! swarm's own server when that one cannot be reached or at the first life.

use std::time::Duration;

use gatehouse_client::LinkId;
use gatehouse_protocol::{CloseCode, FrameDecoder};
use rand::rngs::SmallRng;
use rand::{RngExt as _, SeedableRng as _};
use tokio::time::Instant;

use super::links::{Dialer, Ended, LinkEvent, Links, Wire};
use super::progress::{Reported, count_errors};
use super::stream::{Inbound, LinkAction, Read, sleep_until, take_actions, wake_turn};
use super::{
    LEAVE_TIMEOUT, RECONNECT_PAUSE, RELAUNCH_PAUSE, RELAUNCH_QUIET, SwarmConfig, Target,
    mint_token, player_id,
};
use crate::figures::{Admission, MarkKind, SessionStats, WireFigures};
use crate::misbehaviour::Misbehaviour;
use crate::report::ClientOutcome;
use crate::session::{ClientSession, SessionConfig};

/// One client from connect to leave, relaunching (disconnect, reconnect with the same player
/// id) as often as the configuration says. The future is not `Send` (a session's game side is
/// single-threaded): run it as a local task, as [`super::run_swarm_outcomes`] does.
pub async fn run_client(
    endpoint: &quinn::Endpoint,
    client_config: quinn::ClientConfig,
    config: &SwarmConfig,
    index: usize,
    until: Instant,
) -> ClientOutcome {
    let mut outcome = not_yet_run(config, index);
    let seed = config.session.seed ^ (index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let mut relaunches = Relaunches::new(config, seed, until);
    // Whether the previous life ended dead: the server keeps the player state, so the next one
    // starts dead too, and that death was already counted.
    let mut dead = false;
    // The loss this client is reconnecting after, if any.
    let mut lost: Option<String> = None;
    // Where the next life dials (module docs).
    let home = Target::home(config);
    let mut target = home.clone();
    for life in 0u64.. {
        let end = relaunches.next_end();
        let session = SessionConfig { seed: seed.wrapping_add(life), ..config.session.clone() };
        let dial = Dial { endpoint, client_config: client_config.clone(), config, index };
        let mut life = run_life(&dial, &target, session, end, dead).await;
        target = match life.last.take() {
            Some(last) if !life.unreachable => last,
            _ => home.clone(),
        };
        dead = life.ended_dead;
        outcome.server_close = life.server_close.or(outcome.server_close);
        // Once welcomed, a client keeps trying while the server is unreachable (restarting, or
        // the network cut) until the run ends.
        if life.unreachable && outcome.connected {
            if Instant::now() + RECONNECT_PAUSE < until {
                tokio::time::sleep(RECONNECT_PAUSE).await;
                continue;
            }
            if let Some(why) = lost.take() {
                life.errors.push(format!("{why}; no reconnect before the end of the run"));
                life.stats.marks.push((Instant::now().into_std(), MarkKind::Error));
            }
        }
        if let Some(why) = life.lost.take() {
            if Instant::now() < until {
                tracing::warn!(player = %player_id(index), reason = %why, "connection lost; reconnecting");
                // As at a relaunch, the session ended at an arbitrary moment: its pending waits are
                // counted only. A death it was respawning from stays with the player state the
                // server keeps, so the next life continues it (`dead`).
                life.stats.gates.set_aside_pending_waits();
                life.stats.marks.push((Instant::now().into_std(), MarkKind::Reconnect));
                absorb(&mut outcome, life, config);
                lost = Some(why);
                tokio::time::sleep(RELAUNCH_PAUSE).await;
                continue;
            }
            life.errors.push(why);
        }
        if life.connected {
            lost = None;
        }
        let relaunched = !life.failed && matches!(end, LifeEnd::Relaunch(_));
        if relaunched {
            // A relaunch ends the session at an arbitrary moment, mid-travel as often as not:
            // its pending waits are counted, and only the final session's are listed.
            life.stats.gates.set_aside_pending_waits();
        }
        if !life.errors.is_empty() {
            life.stats.marks.push((Instant::now().into_std(), MarkKind::Error));
        }
        let (placed, own_pawns) = (life.placed, life.own_pawns);
        absorb(&mut outcome, life, config);
        if !relaunched {
            outcome.placed = placed;
            outcome.own_pawns = own_pawns;
            break;
        }
        outcome.stats.relaunches += 1;
        outcome.stats.marks.push((Instant::now().into_std(), MarkKind::Relaunch));
        tokio::time::sleep(RELAUNCH_PAUSE).await;
    }
    outcome
}

/// The outcome of client `index` before its first life.
fn not_yet_run(config: &SwarmConfig, index: usize) -> ClientOutcome {
    ClientOutcome {
        index,
        full: config.session.full,
        connected: false,
        placed: false,
        own_pawns: 0,
        stats: Default::default(),
        errors: Vec::new(),
        misbehaviour: config.session.misbehaviour,
        server_close: None,
        admission: Admission::default(),
    }
}

/// Folds one life into its client's outcome: connected once is connected, figures and errors
/// add up (and the errors reach the progress line).
fn absorb(outcome: &mut ClientOutcome, life: Life, config: &SwarmConfig) {
    outcome.connected |= life.connected;
    outcome.admission.absorb(life.admission);
    outcome.stats.absorb(life.stats);
    count_errors(config.progress.as_deref(), life.errors.len());
    outcome.errors.extend(life.errors);
}

/// When each life of a client ends: a relaunch at a random moment about every
/// [`SwarmConfig::relaunch_every`], none in the run's last [`RELAUNCH_QUIET`], and the leave at
/// the end of the run.
struct Relaunches {
    every: Option<Duration>,
    rng: SmallRng,
    /// No relaunch in the last stretch of the run, so every client can settle before leaving.
    cutoff: Instant,
    until: Instant,
}

impl Relaunches {
    fn new(config: &SwarmConfig, seed: u64, until: Instant) -> Relaunches {
        Relaunches {
            every: config.relaunch_every,
            rng: SmallRng::seed_from_u64(seed),
            cutoff: until.checked_sub(RELAUNCH_QUIET).unwrap_or(until),
            until,
        }
    }

    /// How the life starting now ends.
    fn next_end(&mut self) -> LifeEnd {
        let relaunch_at = self.every.and_then(|every| {
            let ms = u64::try_from(every.as_millis()).unwrap_or(u64::MAX).max(2);
            let after = Duration::from_millis(self.rng.random_range(ms / 2..=ms + ms / 2));
            let at = Instant::now() + after;
            (at < self.cutoff).then_some(at)
        });
        match relaunch_at {
            Some(at) => LifeEnd::Relaunch(at),
            None => LifeEnd::Leave(self.until),
        }
    }
}

/// How one connection of a client ends.
#[derive(Debug, Clone, Copy)]
enum LifeEnd {
    /// Drop the connection abruptly at this instant and relaunch.
    Relaunch(Instant),
    /// The run is over at this instant: settle (bounded), then `Leave`.
    Leave(Instant),
}

/// What one connection saw.
struct Life {
    connected: bool,
    placed: bool,
    own_pawns: usize,
    failed: bool,
    /// The session ended dead or waiting for its respawn.
    ended_dead: bool,
    stats: SessionStats,
    errors: Vec<String>,
    /// No connection could be made: connecting failed or timed out.
    unreachable: bool,
    /// The connection was lost in a way a game client recovers from (see [`is_recoverable`]).
    lost: Option<String>,
    /// The server closed the connection with this code of ours.
    server_close: Option<CloseCode>,
    /// When it dialled, and when its session was first welcomed and first placed.
    admission: Admission,
    /// The server its session last played on, if it connected.
    last: Option<Target>,
}

impl Life {
    /// A life that has not connected yet: failed until it ends well.
    fn new(dead: bool) -> Life {
        Life {
            connected: false,
            placed: false,
            own_pawns: 0,
            failed: true,
            ended_dead: dead,
            stats: SessionStats::default(),
            errors: Vec::new(),
            unreachable: false,
            lost: None,
            server_close: None,
            admission: Admission::default(),
            last: None,
        }
    }
}

/// Where and as whom a life dials.
struct Dial<'a> {
    endpoint: &'a quinn::Endpoint,
    /// How the swarm trusts its server: a target with no pin is trusted so.
    client_config: quinn::ClientConfig,
    config: &'a SwarmConfig,
    index: usize,
}

/// How a life's session loop stopped.
enum Stopped {
    /// Its end came (and it settled, or the grace ran out).
    AtEnd,
    /// The server closed the stream or the connection, or sent a frame that does not decode, and
    /// the session had nowhere left to play: the link whose end ended it, if one did.
    ByServer(Option<Ended>),
    /// A silent misbehaviour kept the connection without a word until its end.
    Silent,
}

/// One life of a client: dial `target`, `Hello`, the session until `end` (on the links its moves
/// open), then the close that fits how it stopped.
async fn run_life(
    dial: &Dial<'_>,
    target: &Target,
    session: SessionConfig,
    end: LifeEnd,
    dead: bool,
) -> Life {
    let mut life = Life::new(dead);
    let config = dial.config;
    let dialled = Instant::now();
    life.admission.dialled = Some(dialled.into_std());
    let (connection, mut send, recv) = match connect(dial, target).await {
        Ok(parts) => parts,
        Err(why) => {
            life.errors.push(why);
            life.unreachable = true;
            return life;
        }
    };
    // The session starts once the connection is up, as a game's would: the connect timeout
    // bounds the dial, and the session's `Welcome` timeout only the server's answer (a dial
    // slower than that through a lossy path must not close the session before it begins).
    let token = mint_token(&config.token_key, player_id(dial.index));
    let connected = Instant::now();
    let mut session = ClientSession::new(connected.into_std(), SessionConfig { token, ..session });
    session.record_connect_to_handshake(connected - dialled);
    session.continue_dead(dead);
    // The session's first output is its `Hello`.
    let mut hello = Vec::new();
    take_actions(&mut session, config.max_frame_len, &mut hello);
    let sent = match hello.as_slice() {
        [LinkAction::Write { link: LinkId::FIRST, chunk }] => send.write_all(chunk).await.is_ok(),
        _ => false,
    };
    if !sent {
        life.errors.push("could not send Hello".into());
        return life;
    }
    let mut reported = Reported::new(dial.index);
    let inbound =
        Inbound::new(LinkId::FIRST, recv, FrameDecoder::new(config.max_frame_len), dialled, true);
    let first = Wire { id: LinkId::FIRST, target: target.clone(), connection, send, inbound };
    let dialer = Dialer {
        endpoint: dial.endpoint.clone(),
        trust: dial.client_config.clone(),
        connect_timeout: config.connect_timeout,
        max_frame_len: config.max_frame_len,
    };
    let mut links = Links::new(first, dialer);
    let admission = &mut life.admission;
    let turns = Turns { config, end, reported: &mut reported, admission };
    let stopped = turns.run(&mut session, &mut links, &mut life.errors).await;
    // A turn the loop left early did not run its game side's share, nor report.
    session.run_game_side();
    let progress = config.progress.as_deref();
    reported.update(progress, &session);
    reported.end(progress);
    life.connected = session.player().is_some();
    life.placed = session.is_placed();
    life.own_pawns = session.player().map_or(0, |me| session.pawns_owned_by(me));
    life.last = match &stopped {
        Stopped::ByServer(Some(ended)) if ended.id == session.link() => Some(ended.target.clone()),
        _ => links.wire(session.link()).map(|wire| wire.target.clone()),
    };
    let wire = close(&mut life, &mut session, stopped, end, links, config.max_frame_len).await;
    life.ended_dead = session.is_dead_or_respawning();
    life.stats = session.finish(Instant::now().into_std());
    life.stats.wire = wire;
    life
}

/// Dials `target` and opens the control stream, within the connect timeout: pinned when the
/// target names a pin (a server a move reached), else trusted as the swarm trusts its server.
///
/// # Errors
/// What failed (connecting, the handshake, the stream), or that it timed out.
async fn connect(
    dial: &Dial<'_>,
    target: &Target,
) -> Result<(quinn::Connection, quinn::SendStream, quinn::RecvStream), String> {
    let config = dial.config;
    let client_config = match target.pin {
        Some(pin) => gatehouse_client::net::quic_config_pinned(
            pin,
            Duration::from_secs(3),
            Duration::from_secs(10),
        )
        .map_err(|e| format!("connect failed: {e}"))?,
        None => dial.client_config.clone(),
    };
    let connected = tokio::time::timeout(config.connect_timeout, async {
        let connection = dial
            .endpoint
            .connect_with(client_config, target.server, &target.server_name)
            .map_err(|e| e.to_string())?
            .await
            .map_err(|e| e.to_string())?;
        let (send, recv) = connection.open_bi().await.map_err(|e| e.to_string())?;
        Ok::<_, String>((connection, send, recv))
    })
    .await;
    match connected {
        Ok(Ok(parts)) => Ok(parts),
        Ok(Err(e)) => Err(format!("connect failed: {e}")),
        Err(_) => Err("connect timed out".into()),
    }
}

/// The turns of one life's session: each waits for a message on any of its links, a dial's
/// end, a deadline of the session or the life's end, then carries out what the session asks of
/// its links (each link's messages as one chunk), times the replies and runs the game side's
/// share.
struct Turns<'a> {
    config: &'a SwarmConfig,
    end: LifeEnd,
    reported: &'a mut Reported,
    admission: &'a mut Admission,
}

impl Turns<'_> {
    /// Runs turns until the life's end (settled, or its grace ran out), the session has no link
    /// left to play on, or a silent misbehaviour ends it. Errors of the streams go to `errors`.
    async fn run(
        mut self,
        session: &mut ClientSession,
        links: &mut Links,
        errors: &mut Vec<String>,
    ) -> Stopped {
        let (stop_at, settle) = match self.end {
            LifeEnd::Relaunch(at) => (at, false),
            LifeEnd::Leave(at) => (at, true),
        };
        let give_up = stop_at + self.config.settle_grace;
        // The link whose end the session carried on after (a move's source lost while dialling).
        let mut last_ended: Option<Ended> = None;
        loop {
            let now = Instant::now();
            // Every death gets its respawn before the client goes: a leaving client also waits
            // until it is placed (bounded by the grace). A misbehaving client is not waited
            // for: it may never be placed.
            let settled = !session.is_dead_or_respawning()
                && (!settle || session.is_placed() || session.misbehaviour().is_some());
            if now >= stop_at && (settled || now >= give_up) {
                return Stopped::AtEnd;
            }
            let wake = session.poll_timeout().map(Instant::from_std);
            let tick = if now >= stop_at { give_up } else { stop_at };
            // What this turn's replies answer: a message, from when it was readable, or a
            // deadline.
            let mut cause: Option<std::time::Instant> = None;
            tokio::select! {
                _ = tokio::time::sleep_until(tick) => {}
                _ = sleep_until(wake) => {
                    cause = wake.map(Instant::into_std);
                    session.handle_timeout(Instant::now().into_std());
                }
                event = links.next() => match event {
                    LinkEvent::Read { index, chunk } => match links.feed(session, index, chunk) {
                        Ok(Read::Messages { since }) => cause = Some(since),
                        Ok(Read::Closed(_)) => {}
                        Err(ended) => {
                            errors.extend(ended.error.clone());
                            let here = ended.id == session.link();
                            let why = "the server ended the control stream";
                            session.link_lost(Instant::now().into_std(), ended.id, why);
                            // The link played on ended, and no move carries the session on.
                            if here && (session.is_closed() || links.is_empty()) {
                                return Stopped::ByServer(Some(*ended));
                            }
                            last_ended = Some(*ended);
                        }
                    },
                    LinkEvent::Dialled(opened) => links.opened(session, opened).await,
                },
            }
            self.write(session, links, cause).await;
            if links.is_empty() {
                return Stopped::ByServer(last_ended);
            }
            if let Some(kind) = session.take_transport_misbehaviour(Instant::now().into_std())
                && let Some(wire) = links.wire(session.link())
            {
                match misbehave(kind, &wire.connection, &mut wire.send, stop_at).await {
                    Misbehaved::Wrote => {}
                    Misbehaved::Closed => return Stopped::ByServer(links.end(session.link())),
                    Misbehaved::StayedSilent => return Stopped::Silent,
                }
            }
        }
    }

    /// The rest of a turn: carries out what the session asks of its links, times the replies
    /// among its messages from `cause`, reports, and runs the game side's share.
    async fn write(
        &mut self,
        session: &mut ClientSession,
        links: &mut Links,
        cause: Option<std::time::Instant>,
    ) {
        let turn = wake_turn(session, Instant::now().into_std(), self.config.max_frame_len);
        links.carry(session, turn.actions).await;
        // A dial refused at once made the session give the move up: its answer goes out now.
        let mut more = Vec::new();
        take_actions(session, self.config.max_frame_len, &mut more);
        links.carry(session, more).await;
        let progress = self.config.progress.as_deref();
        // The replies are out: timed now, before the game side's share of this turn runs.
        if turn.answers
            && let Some(cause) = turn.due.into_iter().chain(cause).min()
        {
            let delay = std::time::Instant::now().saturating_duration_since(cause);
            session.record_reply_delay(delay);
            if let Some(progress) = progress {
                progress.interval().reply(delay);
            }
        }
        self.reported.update(progress, session);
        note_admission(self.admission, session);
        session.run_game_side();
    }
}

/// Notes the session's first welcome and first placement, until it has been placed.
fn note_admission(admission: &mut Admission, session: &ClientSession) {
    if admission.placed.is_none() {
        let now = std::time::Instant::now();
        admission.note(now, session.player().is_some(), session.is_placed());
    }
}

/// Ends a life's links the way it stopped, and returns what all its connections carried: a
/// server's close is a loss (recoverable or an error, with its reason); a silent client
/// vanishes; a leaving client says `Leave` (framed within `max` bytes) and waits (bounded) for
/// the server it plays on to close; a relaunch vanishes without a word.
async fn close(
    life: &mut Life,
    session: &mut ClientSession,
    stopped: Stopped,
    end: LifeEnd,
    mut links: Links,
    max: usize,
) -> WireFigures {
    let why: &'static [u8] = match (stopped, end) {
        (Stopped::ByServer(ended), _) => {
            // Why: from the `Closing` the server sent last on the stream, or else from the
            // close frame, given time to arrive.
            let (why, recoverable, code) = match (session.closing(), &ended) {
                (Some((code, reason)), _) => {
                    let number = u64::from(code);
                    let code = CloseCode::from_code(number).ok_or(number);
                    (describe_code(code, reason), code.is_ok_and(reconnects_after), code.ok())
                }
                (None, Some(ended)) => {
                    let connection = &ended.connection;
                    let _ = tokio::time::timeout(LEAVE_TIMEOUT, connection.closed()).await;
                    let code = server_close_code(connection);
                    (describe_close(connection), is_recoverable(connection), code)
                }
                (None, None) => ("the session closed every link".to_owned(), false, None),
            };
            life.server_close = code;
            match recoverable {
                true => life.lost = Some(why),
                false => life.errors.push(why),
            }
            return links.finish(b"lost");
        }
        // Its run ended while it kept the connection without a word: it vanishes.
        (Stopped::Silent, _) => b"silent",
        (Stopped::AtEnd, LifeEnd::Leave(_)) => {
            let now = Instant::now().into_std();
            session.leave(now);
            let mut leave = Vec::new();
            take_actions(session, max, &mut leave);
            links.carry(session, leave).await;
            if let Some(mut wire) = links.take(session.link()) {
                let _ = wire.send.finish();
                let _ = tokio::time::timeout(LEAVE_TIMEOUT, wire.connection.closed()).await;
                links.count(&wire.connection);
                wire.connection.close(quinn::VarInt::from_u32(CloseCode::Leave.code()), b"leave");
            }
            b"leave"
        }
        // A relaunch: the client vanishes without a word, as a crashed game would.
        (Stopped::AtEnd, LifeEnd::Relaunch(_)) => b"relaunch",
    };
    life.failed = false;
    links.finish(why)
}

/// What a transport misbehaviour came to.
enum Misbehaved {
    /// The bad bytes were written; the session goes on until the server closes.
    Wrote,
    /// The server closed the connection meanwhile.
    Closed,
    /// The client kept the connection without reading or writing until its run ended.
    StayedSilent,
}

/// Carries out a transport misbehaviour (a hostile client's) on the control stream: a frame whose
/// body does not decode, a header announcing a body far above any maximum frame length, or
/// silence (no read, no write; QUIC keeps the connection alive) until the server closes the
/// connection or `until` passes.
async fn misbehave(
    kind: Misbehaviour,
    connection: &quinn::Connection,
    send: &mut quinn::SendStream,
    until: Instant,
) -> Misbehaved {
    let bytes: Vec<u8> = match kind {
        // A frame of 4 bytes that is no message.
        Misbehaviour::GarbageFrame => vec![4, 0, 0, 0, 0xff, 0xff, 0xff, 0xff],
        // A header announcing 16 MiB, and the first KiB of it.
        Misbehaviour::OversizedFrame => {
            let mut bytes = (16u32 << 20).to_le_bytes().to_vec();
            bytes.resize(4 + 1024, 0xab);
            bytes
        }
        Misbehaviour::Silent => {
            return tokio::select! {
                _ = connection.closed() => Misbehaved::Closed,
                _ = tokio::time::sleep_until(until) => Misbehaved::StayedSilent,
            };
        }
        // The session carries out the others.
        _ => return Misbehaved::Wrote,
    };
    match send.write_all(&bytes).await {
        Ok(()) => Misbehaved::Wrote,
        Err(_) => Misbehaved::Closed,
    }
}

/// The close code of ours the server closed `connection` with, if it did.
fn server_close_code(connection: &quinn::Connection) -> Option<CloseCode> {
    match connection.close_reason() {
        Some(quinn::ConnectionError::ApplicationClosed(close)) => {
            CloseCode::from_code(close.error_code.into_inner())
        }
        _ => None,
    }
}

/// What a connection carried, from quinn's own statistics.
pub(super) fn wire_figures(stats: &quinn::ConnectionStats) -> WireFigures {
    WireFigures {
        bytes_sent: stats.udp_tx.bytes,
        bytes_received: stats.udp_rx.bytes,
        datagrams_sent: stats.udp_tx.datagrams,
        datagrams_received: stats.udp_rx.datagrams,
        lost_packets: stats.path.lost_packets,
        lost_bytes: stats.path.lost_bytes,
        congestion_events: stats.path.congestion_events,
    }
}

/// Whether a closed connection is one a game client reconnects after: it timed out or was reset
/// (the network went away, the server was killed), or the server closed it with a code a client
/// reconnects after ([`reconnects_after`]).
fn is_recoverable(connection: &quinn::Connection) -> bool {
    is_recoverable_reason(connection.close_reason().as_ref())
}

/// [`is_recoverable`] on the reason a connection closed. Besides a timeout, a reset and the
/// codes of [`reconnects_after`]: the server gave up on a handshake it never saw finish (on a
/// lossy path the client's last handshake flight can be lost until the server's handshake
/// timeout), which reaches the client as QUIC's `APPLICATION_ERROR` during the handshake.
fn is_recoverable_reason(reason: Option<&quinn::ConnectionError>) -> bool {
    match reason {
        Some(quinn::ConnectionError::TimedOut | quinn::ConnectionError::Reset) => true,
        Some(quinn::ConnectionError::ApplicationClosed(close)) => {
            CloseCode::from_code(close.error_code.into_inner()).is_some_and(reconnects_after)
        }
        Some(quinn::ConnectionError::ConnectionClosed(close)) => {
            close.error_code == quinn::TransportErrorCode::APPLICATION_ERROR
        }
        _ => false,
    }
}

/// Whether a game client logs in again after the server closed its connection with `code`:
/// the server is shutting down (a restart), or it did not get the client's `Hello` in time (on
/// a bad network, lost on the way: the login failed, not the client). Every other close says
/// something about the client, and ends it.
fn reconnects_after(code: CloseCode) -> bool {
    matches!(code, CloseCode::ShuttingDown | CloseCode::HelloTimeout)
}

/// "closed by the server (ReadyTimeout): client ready timeout": a code of ours by name, an
/// unknown one by number.
fn describe_code(code: Result<CloseCode, u64>, reason: &str) -> String {
    let code = code.map_or_else(|n| n.to_string(), |c| format!("{c:?}"));
    format!("closed by the server ({code}): {reason}")
}

fn describe_close(connection: &quinn::Connection) -> String {
    match connection.close_reason() {
        Some(quinn::ConnectionError::ApplicationClosed(close)) => {
            let number = close.error_code.into_inner();
            let code = CloseCode::from_code(number).ok_or(number);
            describe_code(code, &String::from_utf8_lossy(&close.reason))
        }
        Some(other) => format!("connection lost: {other}"),
        None => "stream ended while the connection stayed open".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client logs in again after a restart's close or a login whose `Hello` did not reach
    /// the server in time; any other close of the server ends it.
    #[test]
    fn a_client_reconnects_after_a_restart_or_a_login_lost_on_the_way() {
        assert!(reconnects_after(CloseCode::ShuttingDown));
        assert!(reconnects_after(CloseCode::HelloTimeout));
        for code in [CloseCode::ReadyTimeout, CloseCode::Abuse, CloseCode::Replaced] {
            assert!(!reconnects_after(code), "{code:?}");
        }
    }

    /// A handshake the server gave up on (QUIC's `APPLICATION_ERROR` before the handshake
    /// ended, as quinn reports it) is recovered from like a timeout; another transport error,
    /// or a close for a cause the client made, is not.
    #[test]
    fn a_client_reconnects_after_the_server_gave_up_on_its_handshake() {
        let transport = |code| {
            quinn::ConnectionError::ConnectionClosed(quinn_proto::ConnectionClose {
                error_code: code,
                frame_type: None,
                reason: bytes::Bytes::new(),
            })
        };
        let gave_up = transport(quinn::TransportErrorCode::APPLICATION_ERROR);
        assert!(is_recoverable_reason(Some(&gave_up)));
        assert!(is_recoverable_reason(Some(&quinn::ConnectionError::TimedOut)));
        let violation = transport(quinn::TransportErrorCode::PROTOCOL_VIOLATION);
        assert!(!is_recoverable_reason(Some(&violation)));
        let abuse = quinn::ConnectionError::ApplicationClosed(quinn_proto::ApplicationClose {
            error_code: quinn::VarInt::from_u32(CloseCode::Abuse.code()),
            reason: bytes::Bytes::new(),
        });
        assert!(!is_recoverable_reason(Some(&abuse)));
        assert!(!is_recoverable_reason(None));
    }
}
