//! Progress (docs/protocol.md 4.2, "Progress") seen from both sides: once a transition waits
//! for its clients, a relaunch is an arrival, and the players it waits for only leave the set.
//!
//! A relaunch's login reaching the server on either side of each boundary: while the server
//! still loads (waited for again) or once it waits for its clients (an arrival); before the
//! last ready report opens the spawn window or after (an arrival either way). Then a property:
//! under any interleaving of logins, relaunches, disconnects, late reports and loss, with
//! clients that answer within a bounded time, every transition ends within the bound
//! [`answering_bound`] states.

use std::collections::BTreeSet;
use std::time::Duration;

use gatehouse_client_sim::session::SessionConfig;
use gatehouse_protocol::{ClientMessage, PlayerId, ServerMessage, TransitionId};
use gatehouse_server::game::Output;
use gatehouse_tests::sim::{ClientId, ClientOptions, Conditions, Event, HoldId, Sim, SimConfig};
use proptest::prelude::*;

use crate::common::*;

/// Options for a client that streams every level in exactly `stream`.
fn streaming_in(sim: &Sim, stream: Duration) -> ClientOptions {
    let mut options = sim.client_options();
    options.session = SessionConfig { stream_time: (stream, stream), ..options.session };
    options
}

/// A run with `ann` and `bob` (fast) placed on the harbor, then a travel to the forest during
/// which `cal` (slow: one second per level) logs in while the server loads, so the transition
/// waits for cal's report and spawns cal's first pawn; returns once the server reached `phase`.
fn travelling_until(phase: &str) -> (Sim, ClientId, ClientId, ClientId) {
    let mut sim = Sim::new(SimConfig::new(PLAIN, 37));
    let fast = streaming_in(&sim, ms(30));
    let ann = sim.connect_with("ann", fast);
    let fast = streaming_in(&sim, ms(30));
    let bob = sim.connect_with("bob", fast);
    sim.run_until("ann and bob placed on the harbor", secs(10), all_placed);
    sim.travel("forest");
    let slow = streaming_in(&sim, secs(1));
    let cal = sim.connect_with("cal", slow);
    let connection = sim.connection(cal);
    sim.run_until("cal logged in", secs(5), |s| {
        s.event_at(|e| matches!(e, Event::Login { connection: c } if *c == connection)).is_some()
    });
    assert_eq!(sim.game().snapshot().phase, "Loading", "cal logged in while the server loaded");
    let wanted = phase.to_owned();
    sim.run_until(phase, secs(5), move |s| s.game().snapshot().phase == wanted);
    (sim, ann, bob, cal)
}

/// Relaunches `bob` now as a client that streams for three seconds: its old connection
/// drops, and a new one logs in as the same player. Returns once the login reached the server.
fn relaunch_slowly(sim: &mut Sim, bob: ClientId) -> ClientId {
    sim.disconnect(bob);
    let slow = streaming_in(sim, secs(3));
    let again = sim.connect_with("bob", slow);
    let connection = sim.connection(again);
    sim.run_until("the relaunch logged in", secs(5), |s| {
        s.event_at(|e| matches!(e, Event::Login { connection: c } if *c == connection)).is_some()
    });
    again
}

/// When the relaunch's login reached the server, and when the transition `id` ended there.
fn login_and_end(sim: &Sim, relaunch: ClientId, id: TransitionId) -> (Duration, Duration) {
    let connection = sim.connection(relaunch);
    let login = sim.event_at(|e| matches!(e, Event::Login { connection: c } if *c == connection));
    let end = sim.output_at(is_end_output(id));
    (login.expect("the relaunch logged in"), end.expect("the transition ended"))
}

/// The first pawn `client` was possessed, and whether a join was shown to it before.
fn placed_by_join(sim: &Sim, client: ClientId) -> bool {
    let received = sim.received(client);
    let join = received.iter().position(|m| matches!(m, ServerMessage::ShowJoin { .. }));
    let possessed = received.iter().position(|m| is_possessed(m));
    matches!((join, possessed), (Some(j), Some(p)) if j < p)
}

/// The relaunch reaches the server while it still loads the forest: the transition waits for
/// its new report (its readiness belongs to the new connection) and spawns it in the window.
#[test]
fn a_relaunch_that_logs_in_while_the_server_loads_is_waited_for() {
    let (mut sim, ann, bob, cal) = travelling_until("Loading");
    let id = current_transition(&sim);
    let again = relaunch_slowly(&mut sim, bob);
    assert_eq!(sim.game().snapshot().phase, "Loading", "it logged in while the server loaded");
    sim.run_until("everyone placed on the forest", secs(10), all_placed);
    let (_, end) = login_and_end(&sim, again, id);
    let ready = sim.arrived_at_server(again, is_ready_for(id)).expect("the relaunch reported");
    assert!(end > ready, "the transition waited for the relaunch's report");
    assert!(!placed_by_join(&sim, again), "spawned in the transition's window, not by a join");
    for client in [ann, cal, again] {
        assert_clean(&sim, client);
    }
}

/// The relaunch reaches the server once it waits for its clients: an arrival. The transition
/// ends on the others' reports without waiting for its slow one, and a join places it.
#[test]
fn a_relaunch_that_logs_in_once_clients_are_awaited_is_an_arrival() {
    let (mut sim, ann, bob, cal) = travelling_until("WaitingForClients");
    let id = current_transition(&sim);
    let again = relaunch_slowly(&mut sim, bob);
    assert_eq!(sim.game().snapshot().phase, "WaitingForClients");
    sim.run_until("everyone placed on the forest", secs(10), all_placed);
    let (_, end) = login_and_end(&sim, again, id);
    let ready = sim.arrived_at_server(again, is_ready_for(id));
    assert!(ready.is_none_or(|at| at > end), "the transition did not wait for its report");
    assert!(placed_by_join(&sim, again), "a join of its own placed it after EndTransition");
    for client in [ann, cal, again] {
        assert_clean(&sim, client);
    }
}

/// Around the spawn window: the relaunch's login and the last ready report (cal's) reach the
/// server in either order. Before: the relaunch logs in during WaitingForClients; after: in
/// Completing. Either way it is an arrival, and the transition ends on cal's acknowledgement.
fn relaunch_around_the_window(login_first: bool) {
    let (mut sim, ann, bob, cal) = travelling_until("WaitingForClients");
    let id = current_transition(&sim);
    let cal_ready = sim.hold_to_server(cal, is_ready_for(id));
    sim.run_until("cal's report is held", secs(5), |s| s.held_count(cal_ready) == 1);
    let again = if login_first {
        let again = relaunch_slowly(&mut sim, bob);
        assert_eq!(sim.game().snapshot().phase, "WaitingForClients");
        sim.release(cal_ready);
        again
    } else {
        sim.release(cal_ready);
        sim.run_until("the spawn window", secs(5), |s| s.game().snapshot().phase == "Completing");
        let cal_ack = sim.hold_to_server(cal, is_ack);
        let again = relaunch_slowly(&mut sim, bob);
        assert_eq!(sim.game().snapshot().phase, "Completing", "cal's acknowledgement is held");
        sim.release(cal_ack);
        again
    };
    sim.run_until("everyone placed on the forest", secs(10), all_placed);
    let (login, end) = login_and_end(&sim, again, id);
    let window = sim.arrived_at_server(cal, is_ready_for(id)).expect("cal reported");
    assert_eq!(login < window, login_first, "the order under test");
    let ready = sim.arrived_at_server(again, is_ready_for(id));
    assert!(ready.is_none_or(|at| at > end), "the transition did not wait for its report");
    assert!(placed_by_join(&sim, again), "a join of its own placed it after EndTransition");
    for client in [ann, cal, again] {
        assert_clean(&sim, client);
    }
}

/// A relaunch logging in just before the last ready report opens the spawn window.
#[test]
fn a_relaunch_that_logs_in_before_the_spawn_window_is_an_arrival() {
    relaunch_around_the_window(true);
}

/// A relaunch logging in just after the last ready report opened the spawn window.
#[test]
fn a_relaunch_that_logs_in_in_the_spawn_window_is_an_arrival() {
    relaunch_around_the_window(false);
}

// --- The property ------------------------------------------------------------------------------

/// Players of the property's runs.
const PLAYERS: [&str; 5] = ["p0", "p1", "p2", "p3", "p4"];

/// How long a client's stream of one level takes at most in the property's runs.
const CLIENT_STREAM: Duration = Duration::from_millis(400);

/// How long a late ready report is held back at most before it leaves.
const LATE_REPORT: Duration = Duration::from_millis(300);

/// How long the churn goes on, then how long the world is left to settle.
const CHURN: Duration = Duration::from_secs(20);
const SETTLE: Duration = Duration::from_secs(15);

/// The plain world with a burn that kills on the start node, travelling between its two nodes
/// every two seconds: clients die there, and restart (deaths rest while characters are frozen).
fn route_world() -> String {
    format!("{HAZARDOUS}\n[travel]\nroute = [\"forest\", \"harbor\"]\ninterval_ms = 2000\n")
}

/// The bound every transition of the property's runs ends within, from its start: the saves in
/// flight when it started (the store answers within 20 ms), the server's streaming of the
/// destination (400 ms at most in the plain world, jitter included) and its spawn points
/// (50 ms), the slowest client's streaming and its late report, and four one-way delays: the
/// `ShowTransition` out and the ready report back, the `Possessed` out and its acknowledgement
/// back. Every player it waits for logged in before it waited for its clients, so each of
/// those round trips starts by then; churn adds nothing.
fn answering_bound(net: Conditions) -> Duration {
    ms(20) + ms(400) + ms(50) + CLIENT_STREAM + LATE_REPORT + net.max_delay() * 4
}

/// One change the script makes to the clients.
#[derive(Debug, Clone)]
enum Churn {
    /// The client drops its connection and relaunches at once: a new connection logs in as
    /// the same player.
    Relaunch(usize),
    /// The client drops its connection and comes back this many ms later.
    Disconnect(usize, u64),
    /// The client's next ready report is held back this many ms before it leaves.
    LateReport(usize, u64),
}

fn churn() -> impl Strategy<Value = Churn> {
    let late = u64::try_from(LATE_REPORT.as_millis()).unwrap_or(u64::MAX);
    prop_oneof![
        3 => (0..PLAYERS.len()).prop_map(Churn::Relaunch),
        1 => ((0..PLAYERS.len()), 0..3_000u64).prop_map(|(i, back)| Churn::Disconnect(i, back)),
        2 => ((0..PLAYERS.len()), 0..=late).prop_map(|(i, ms)| Churn::LateReport(i, ms)),
    ]
}

/// What the script does next, at a simulated time.
#[derive(Debug)]
enum Action {
    Churn(Churn),
    /// A player that disconnected logs in again.
    Return(usize),
    /// A held ready report leaves.
    Release(HoldId),
}

/// Watches, after every step, whom each transition waits for: the ready reports once it waits
/// for its clients, the placements once its spawn window is open. Neither set may grow then.
/// Keeps what broke the rule.
#[derive(Default)]
struct AwaitedWatch {
    /// The transition last seen waiting for its clients, and whose reports it awaited then.
    reports: Option<(TransitionId, BTreeSet<PlayerId>)>,
    /// The transition last seen in its spawn window, and whose placements it awaited then.
    placements: Option<(TransitionId, BTreeSet<PlayerId>)>,
    /// Each time a set grew: which, the transition, the time, who came back in.
    grew: Vec<String>,
}

impl AwaitedWatch {
    fn observe(&mut self, sim: &Sim) {
        let snapshot = sim.game().snapshot();
        let id = snapshot.transition_id;
        let waiting = matches!(snapshot.phase, "WaitingForClients" | "Completing");
        let window = snapshot.phase == "Completing";
        let at = sim.elapsed();
        let reports = snapshot.awaited_reports.into_iter().collect();
        Self::shrinks(
            &mut self.reports,
            id.filter(|_| waiting),
            reports,
            "reports",
            at,
            &mut self.grew,
        );
        let placements = snapshot.awaited_placements.into_iter().collect();
        Self::shrinks(
            &mut self.placements,
            id.filter(|_| window),
            placements,
            "placements",
            at,
            &mut self.grew,
        );
    }

    /// Checks that `now`, the set transition `id` awaits (`None`: not in the phase watched),
    /// is within what `seen` last held for it, and keeps it.
    fn shrinks(
        seen: &mut Option<(TransitionId, BTreeSet<PlayerId>)>,
        id: Option<TransitionId>,
        now: BTreeSet<PlayerId>,
        what: &str,
        at: Duration,
        grew: &mut Vec<String>,
    ) {
        let Some(id) = id else {
            *seen = None;
            return;
        };
        if let Some((last, before)) = seen.as_ref()
            && *last == id
            && !now.is_subset(before)
        {
            let back: Vec<&PlayerId> = now.difference(before).collect();
            grew.push(format!("{what} of transition {id} at {at:?}: {back:?}"));
        }
        *seen = Some((id, now));
    }
}

/// Plays `events` (ms into the run, what happens) on a run seeded `seed` with `loss`, then
/// leaves the world to settle; returns the run and each time a transition's awaited set grew
/// once it waited for its clients.
fn play(seed: u64, loss: f64, events: &[(u64, Churn)]) -> (Sim, Vec<String>) {
    let net = lossy(loss);
    let mut config = SimConfig::new(&route_world(), seed);
    config.net = net;
    config.session.stream_time = (ms(50), CLIENT_STREAM);
    config.session.restart_after_death = Some(ms(200));
    let mut sim = Sim::new(config);
    let mut clients: Vec<Option<ClientId>> =
        PLAYERS.iter().map(|name| Some(sim.connect(name))).collect();
    let (mut schedule, mut next) = script(events, Action::Churn);
    let mut watch = AwaitedWatch::default();
    while let Some(((at, _), action)) = schedule.pop_first() {
        sim.run_for_observing(at.saturating_sub(sim.elapsed()), |s| watch.observe(s));
        let now = sim.elapsed();
        match action {
            Action::Churn(Churn::Relaunch(i)) => {
                if let Some(client) = clients[i] {
                    sim.disconnect(client);
                    clients[i] = Some(sim.connect(PLAYERS[i]));
                }
            }
            Action::Churn(Churn::Disconnect(i, back)) => {
                if let Some(client) = clients[i].take() {
                    sim.disconnect(client);
                    schedule.insert((now + ms(back), next), Action::Return(i));
                    next += 1;
                }
            }
            Action::Churn(Churn::LateReport(i, late)) => {
                if let Some(client) = clients[i] {
                    let hold = sim.hold_to_server(client, |m| {
                        matches!(m, ClientMessage::TransitionReady { .. })
                    });
                    schedule.insert((now + ms(late), next), Action::Release(hold));
                    next += 1;
                }
            }
            Action::Return(i) => clients[i] = Some(sim.connect(PLAYERS[i])),
            Action::Release(hold) => {
                sim.release(hold);
            }
        }
    }
    let rest = CHURN.saturating_sub(sim.elapsed()) + SETTLE;
    sim.run_for_observing(rest, |s| watch.observe(s));
    (sim, watch.grew)
}

/// How a transition of the run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    /// `EndTransition`.
    Ended,
    /// `TransitionFailed`.
    Failed,
}

/// One transition of the run: its id, when it started (its `FreezeCharacters`), and when and
/// how it ended, if it did.
struct Seen {
    id: TransitionId,
    started: Duration,
    end: Option<(Duration, Ending)>,
}

/// Every transition of the run, in the order they started.
fn transitions(sim: &Sim) -> Vec<Seen> {
    let mut out: Vec<Seen> = Vec::new();
    for e in sim.trace() {
        let Event::Output(Output::Broadcast { message }) = &e.event else { continue };
        let (id, ending) = match message {
            ServerMessage::FreezeCharacters { transition_id } => {
                out.push(Seen { id: *transition_id, started: e.at, end: None });
                continue;
            }
            ServerMessage::EndTransition { transition_id } => (transition_id, Ending::Ended),
            ServerMessage::TransitionFailed { transition_id, .. } => {
                (transition_id, Ending::Failed)
            }
            _ => continue,
        };
        if let Some(seen) = out.iter_mut().find(|t| t.id == *id) {
            seen.end = Some((e.at, ending));
        }
    }
    out
}

proptest! {
    #![proptest_config(property_config(48))]

    /// Progress (docs/protocol.md 4.2): under any interleaving of relaunches, disconnects and
    /// returns, late ready reports and loss, with clients that answer within a bounded time,
    /// the players a transition awaits only leave once it waits for its clients, every
    /// transition ends (never fails, never times out) within [`answering_bound`] of its start,
    /// and every client is placed once the churn stops.
    #[test]
    fn every_transition_ends_within_its_bound_under_churn_and_loss(
        seed in any::<u64>(),
        loss in 0.0..0.1f64,
        events in proptest::collection::vec(
            (0..CHURN.as_millis() as u64, churn()), 0..60),
    ) {
        let (mut sim, grew) = play(seed, loss, &events);
        prop_assert!(grew.is_empty(), "the awaited set grew once clients were awaited: {:?}", grew);
        sim.run_until("every client placed once the churn stopped", SETTLE, all_placed);
        let bound = answering_bound(lossy(loss));
        let end_of_run = sim.elapsed();
        // The route travels on: the last transitions may not have had their bound yet.
        let all: Vec<Seen> = transitions(&sim)
            .into_iter()
            .filter(|t| t.started + bound <= end_of_run)
            .collect();
        prop_assert!(all.len() >= 8, "the route travelled: {} transitions", all.len());
        for t in &all {
            let Some((at, ending)) = t.end else {
                prop_assert!(false, "transition {} (started at {:?}) never ended", t.id, t.started);
                continue;
            };
            prop_assert_eq!(ending, Ending::Ended, "transition {} failed", t.id);
            prop_assert!(
                at - t.started <= bound,
                "transition {} took {:?}, over its bound {:?}; the trace ends:\n{}",
                t.id, at - t.started, bound, sim.trace_text(80)
            );
        }
        let counters = sim.game().counters();
        prop_assert_eq!(counters.settle_timeouts, 0);
        prop_assert_eq!(counters.transitions_failed, 0);
        for client in sim.clients().filter(|&c| sim.is_open(c)) {
            let session = sim.session(client);
            let mut problems = session.stats().problems();
            problems.extend(session.client().gate_stats().problems());
            prop_assert!(problems.is_empty(), "{}: {:?}", sim.player(client), problems);
        }
    }
}
