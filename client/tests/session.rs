//! The session's duties and events, one behaviour per test, driven as a game drives it: handle
//! a server message, drain outputs and events, answer with inputs. Time is explicit.

// Test helpers build fixed, valid values; a failure is a broken test.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::{me, node, sent, show};
use gatehouse_client::session::JOIN_AFTER_END;
use gatehouse_client::{
    CloseReason, Event, InputError, Life, Load, Screen, Session, SessionConfig, TransitionStage,
    WorldChange,
};
use gatehouse_protocol::{
    CharacterDef, ClientMessage, JoinId, LevelName, PawnId, PawnView, PlayerId, ServerMessage,
    TransitionFailure, TransitionId,
};
use gatehouse_tags::catalog::STATE_DEAD;

/// A welcomed session on `harbor`, its `Hello` and `Welcome` drained.
fn welcomed(t0: Instant) -> Session {
    let mut s = Session::new(t0, SessionConfig::new("a.b.c"));
    s.handle(
        t0,
        ServerMessage::Welcome {
            player_id: me(),
            current_node: Some(node("harbor")),
            max_frame_len: 65_536,
        },
    );
    drain(&mut s);
    s
}

fn freeze(id: u64) -> ServerMessage {
    ServerMessage::FreezeCharacters { transition_id: TransitionId(id) }
}

fn end(id: u64) -> ServerMessage {
    ServerMessage::EndTransition { transition_id: TransitionId(id) }
}

fn show_join(id: u64, at: &str) -> ServerMessage {
    ServerMessage::ShowJoin {
        join_id: JoinId(id),
        node: node(at),
        levels: vec![LevelName::new(format!("{at}_docks")).unwrap()],
        rooms: vec![LevelName::new(format!("{at}_hall")).unwrap()],
    }
}

fn tags(player: PlayerId, dead: bool) -> ServerMessage {
    let tags = if dead { vec![STATE_DEAD] } else { Vec::new() };
    ServerMessage::AbilityTagsChanged { player_id: player, tags }
}

fn transition(id: u64) -> Load {
    Load::Transition(TransitionId(id))
}

/// Every output and every event, in order.
fn drain(s: &mut Session) -> (Vec<ClientMessage>, Vec<Event>) {
    let outputs = sent(s);
    let events = std::iter::from_fn(|| s.poll_event()).collect();
    (outputs, events)
}

fn outputs(s: &mut Session) -> Vec<ClientMessage> {
    drain(s).0
}

fn events(s: &mut Session) -> Vec<Event> {
    drain(s).1
}

fn shown(id: u64) -> ClientMessage {
    ClientMessage::TransitionShown { transition_id: TransitionId(id) }
}

fn ready(id: u64) -> ClientMessage {
    ClientMessage::TransitionReady { transition_id: TransitionId(id) }
}

#[test]
fn hello_is_the_first_output_with_the_protocol_version_and_the_token() {
    let mut s = Session::new(Instant::now(), SessionConfig::new("a.b.c"));
    let hello = ClientMessage::Hello {
        protocol_version: gatehouse_protocol::PROTOCOL_VERSION,
        token: "a.b.c".into(),
    };
    assert_eq!(drain(&mut s), (vec![hello], vec![]));
}

#[test]
fn welcome_tells_the_game_its_player_and_node() {
    let t0 = Instant::now();
    let mut s = Session::new(t0, SessionConfig::new("a.b.c"));
    drain(&mut s);
    let welcome =
        ServerMessage::Welcome { player_id: me(), current_node: None, max_frame_len: 8192 };
    s.handle(t0, welcome);
    let welcomed = Event::Welcomed { player: me(), node: None, max_frame_len: 8192 };
    assert_eq!(events(&mut s), [welcomed]);
    assert_eq!(s.player(), Some(&me()));
    assert_eq!(s.poll_timeout(), None, "the welcome deadline is disarmed");
}

#[test]
fn the_token_never_shows_in_the_configs_debug() {
    let config = SessionConfig::new("secret.token.value");
    let shown = format!("{config:?}");
    assert!(!shown.contains("secret"), "{shown}");
    assert!(shown.contains("welcome_timeout: 10s"), "the rest is shown: {shown}");
}

#[test]
fn show_transition_is_answered_at_once_before_streaming() {
    let t0 = Instant::now();
    let mut s = welcomed(t0);
    s.handle(t0, freeze(3));
    let (sent, seen) = drain(&mut s);
    assert_eq!(sent, [], "FreezeCharacters is not answered");
    let started = Event::TransitionStarted { transition: TransitionId(3), superseded: None };
    assert_eq!(seen, [Event::ShowLoadingScreen, started]);
    s.handle(t0, show(3, "crypt"));
    let (sent, seen) = drain(&mut s);
    assert_eq!(sent, [shown(3)]);
    assert!(matches!(&seen[..], [Event::StreamLevels { load, .. }] if *load == transition(3)));
    s.handle(t0, show(3, "crypt"));
    assert_eq!(drain(&mut s), (vec![], vec![]), "a repeated show is answered once");
}

#[test]
fn ready_is_reported_only_once_the_game_streamed_the_load() {
    let t0 = Instant::now();
    let mut s = welcomed(t0);
    s.handle(t0, show(3, "crypt"));
    assert_eq!(outputs(&mut s), [shown(3)]);
    assert_eq!(sent(&mut s), [], "no report before the game streamed");
    s.levels_streamed(transition(3)).unwrap();
    assert_eq!(outputs(&mut s), [ready(3)]);
    assert_eq!(s.streamed_node(), Some(&node("crypt")));
    assert!(matches!(
        s.screen(),
        Screen::Transition(screen) if matches!(screen.stage(), TransitionStage::Ready { .. })
    ));
    let again = s.levels_streamed(transition(3));
    assert_eq!(again, Err(InputError::NotStreaming { load: transition(3) }), "reported once");
    let message = again.unwrap_err().to_string();
    assert!(message.starts_with("transition 3 is not being streamed"), "{message}");
    assert_eq!(sent(&mut s), []);
}

#[test]
fn a_newer_transition_supersedes_keeping_the_screen_and_cancelling_the_old_streaming() {
    let t0 = Instant::now();
    let mut s = welcomed(t0);
    s.handle(t0, show(3, "crypt"));
    drain(&mut s);
    s.handle(t0 + Duration::from_secs(1), freeze(4));
    let started =
        Event::TransitionStarted { transition: TransitionId(4), superseded: Some(TransitionId(3)) };
    assert_eq!(events(&mut s), [Event::CancelStreaming { load: transition(3) }, started]);
    assert_eq!(s.screen().raised_at(), Some(t0), "one screen from the first freeze");
    assert_eq!(
        s.levels_streamed(transition(3)),
        Err(InputError::NotStreaming { load: transition(3) })
    );
    s.handle(t0, show(4, "harbor"));
    s.levels_streamed(transition(4)).unwrap();
    assert_eq!(outputs(&mut s), [shown(4), ready(4)], "only the newer transition is reported");
}

#[test]
fn an_older_transition_after_a_newer_one_changes_nothing() {
    let t0 = Instant::now();
    let mut s = welcomed(t0);
    s.handle(t0, show(4, "harbor"));
    drain(&mut s);
    s.handle(t0, freeze(3));
    s.handle(t0, show(3, "crypt"));
    assert_eq!(drain(&mut s), (vec![], vec![]));
    assert_eq!(s.screen().load(), Some(transition(4)));
}

#[test]
fn a_stale_end_never_drops_a_newer_screen() {
    let t0 = Instant::now();
    let mut s = welcomed(t0);
    s.handle(t0, show(3, "crypt"));
    s.handle(t0, show(4, "harbor"));
    drain(&mut s);
    s.handle(t0, end(3));
    assert_eq!(events(&mut s), []);
    assert!(s.screen().is_up());
    s.levels_streamed(transition(4)).unwrap();
    s.handle(t0, ServerMessage::Possessed { pawn_id: PawnId(1) });
    drain(&mut s);
    s.handle(t0, end(4));
    let ended = Event::TransitionEnded { transition: TransitionId(4) };
    assert_eq!(events(&mut s), [ended, Event::HideLoadingScreen { load: transition(4) }]);
    assert!(!s.screen().is_up());
    assert_eq!(s.destination(), Some(&node("harbor")), "the world is on the destination now");
}

/// An arrival the transition did not wait for (docs/protocol.md 4.2): the end comes while the
/// game still streams and before any pawn. The streaming is cancelled, the characters
/// unfreeze, and the screen stays up for the join of its own that follows: the player never
/// sees the world without a pawn.
#[test]
fn a_transition_that_ends_without_placing_the_client_holds_the_screen_for_its_join() {
    let t0 = Instant::now();
    let mut s = welcomed(t0);
    s.handle(t0, show(3, "crypt"));
    drain(&mut s);
    s.handle(t0, end(3));
    let load = transition(3);
    let ended = Event::TransitionEnded { transition: TransitionId(3) };
    assert_eq!(events(&mut s), [Event::CancelStreaming { load }, ended]);
    assert!(s.screen().is_up(), "held for the join");
    assert_eq!(s.levels_streamed(load), Err(InputError::NotStreaming { load }));
    s.handle(t0, end(3));
    assert_eq!(events(&mut s), [], "an end is handled once");
    s.handle(t0 + Duration::from_millis(5), show_join(7, "crypt"));
    let (_, seen) = drain(&mut s);
    assert!(
        matches!(&seen[..], [Event::StreamLevels { load: Load::Join(JoinId(7)), .. }]),
        "the join comes on the same screen, not a new one: {seen:?}"
    );
    assert_eq!(s.screen().raised_at(), Some(t0));
    assert_eq!(s.poll_timeout(), None, "the hold's deadline is disarmed");
}

/// A transition that starts while an ended one holds the screen replaces nothing: the held
/// one is over.
#[test]
fn a_transition_after_a_held_end_supersedes_nothing() {
    let t0 = Instant::now();
    let mut s = welcomed(t0);
    s.handle(t0, show(3, "crypt"));
    s.handle(t0, end(3));
    drain(&mut s);
    s.handle(t0, freeze(4));
    let started = Event::TransitionStarted { transition: TransitionId(4), superseded: None };
    assert_eq!(events(&mut s), [started]);
    assert_eq!(s.poll_timeout(), None, "the hold's deadline is disarmed");
}

/// The same join shown again changes nothing; a newer join replaces it on the same screen.
#[test]
fn a_repeated_join_is_ignored_and_a_newer_one_replaces_it() {
    let t0 = Instant::now();
    let mut s = welcomed(t0);
    s.handle(t0, show_join(4, "crypt"));
    drain(&mut s);
    s.handle(t0, show_join(4, "crypt"));
    assert_eq!(drain(&mut s), (vec![], vec![]));
    s.handle(t0, show_join(5, "harbor"));
    let (_, seen) = drain(&mut s);
    let cancelled = Event::CancelStreaming { load: Load::Join(JoinId(4)) };
    assert_eq!(seen.first(), Some(&cancelled), "{seen:?}");
    assert!(matches!(&seen[1..], [Event::StreamLevels { load: Load::Join(JoinId(5)), .. }]));
    assert_eq!(s.screen().load(), Some(Load::Join(JoinId(5))));
}

/// The hold is bounded: a join that never comes drops the screen after [`JOIN_AFTER_END`].
#[test]
fn a_held_screen_drops_if_no_join_comes() {
    let t0 = Instant::now();
    let mut s = welcomed(t0);
    s.handle(t0, show(3, "crypt"));
    s.handle(t0, end(3));
    drain(&mut s);
    assert_eq!(s.poll_timeout(), Some(t0 + JOIN_AFTER_END));
    s.handle_timeout(t0 + JOIN_AFTER_END - Duration::from_millis(1));
    assert!(s.screen().is_up());
    s.handle_timeout(t0 + JOIN_AFTER_END);
    assert_eq!(events(&mut s), [Event::HideLoadingScreen { load: transition(3) }]);
    assert_eq!(s.destination(), Some(&node("crypt")));
}

/// Whether the screen is held at a transition's end depends on a pawn alone: one that
/// controls a pawn (possessed in the transition, or kept from before and left where it stands
/// or moved) is placed; one with none is owed a join.
#[test]
fn only_a_client_with_no_pawn_is_held_at_the_end() {
    let t0 = Instant::now();
    let dropped_with = |pawn: bool| {
        let mut s = welcomed(t0);
        if pawn {
            s.handle(t0, ServerMessage::Possessed { pawn_id: PawnId(9) });
        }
        s.handle(t0, show(3, "crypt"));
        s.handle(t0, end(3));
        !s.screen().is_up()
    };
    assert!(dropped_with(true), "a kept pawn, even one no message moved, is placed");
    assert!(!dropped_with(false));
}

#[test]
fn every_possession_is_acknowledged_and_placement_waits_for_the_end() {
    let t0 = Instant::now();
    let mut s = welcomed(t0);
    s.handle(t0, show(3, "crypt"));
    s.levels_streamed(transition(3)).unwrap();
    drain(&mut s);
    let view = PawnView {
        pawn_id: PawnId(9),
        owner: me(),
        character_def: CharacterDef::new("Vanguard").unwrap(),
        node: node("crypt"),
        alive: true,
    };
    s.handle(t0, ServerMessage::PawnSpawned(view.clone()));
    s.handle(t0, ServerMessage::Possessed { pawn_id: PawnId(9) });
    let (sent, seen) = drain(&mut s);
    assert_eq!(sent, [ClientMessage::PossessionAcknowledged { pawn_id: PawnId(9) }]);
    let spawned = Event::World(WorldChange::PawnSpawned(view));
    assert_eq!(seen, [spawned, Event::Possessed { pawn: PawnId(9) }]);
    assert_eq!(s.pawn(), Some(PawnId(9)));
    s.handle(t0, ServerMessage::Unpossessed { pawn_id: PawnId(8) });
    assert_eq!(s.pawn(), Some(PawnId(9)), "another pawn's unpossession changes nothing");
    assert!(!s.is_placed(), "the screen is still up");
    s.handle(t0, end(3));
    assert!(s.is_placed());
    s.handle(t0, ServerMessage::Unpossessed { pawn_id: PawnId(9) });
    assert_eq!(s.pawn(), None, "an unpossessed pawn is no longer controlled");
    s.handle(t0, ServerMessage::Possessed { pawn_id: PawnId(9) });
    s.handle(t0, ServerMessage::PawnDestroyed { pawn_id: PawnId(9) });
    assert_eq!(s.pawn(), None, "a destroyed pawn is no longer controlled");
}

#[test]
fn a_join_raises_the_screen_streams_reports_and_its_end_drops_it() {
    let t0 = Instant::now();
    let mut s = welcomed(t0);
    s.handle(t0, show_join(4, "crypt"));
    let (sent, seen) = drain(&mut s);
    assert_eq!(sent, [], "a join is answered once streamed");
    let load = Load::Join(JoinId(4));
    assert!(
        matches!(&seen[..], [Event::ShowLoadingScreen, Event::StreamLevels { load: l, rooms, .. }]
        if *l == load && rooms.len() == 1)
    );
    s.levels_streamed(load).unwrap();
    assert_eq!(outputs(&mut s), [ClientMessage::JoinReady { join_id: JoinId(4) }]);
    s.handle(t0, ServerMessage::EndJoin { join_id: JoinId(3) });
    assert!(s.screen().is_up(), "an end of another join is stale");
    s.handle(t0, ServerMessage::EndJoin { join_id: JoinId(4) });
    assert_eq!(events(&mut s), [Event::HideLoadingScreen { load }]);
    assert_eq!(s.destination(), Some(&node("crypt")));
}

/// docs/protocol.md 4.1: a transition starting during a join supersedes it: the join's
/// streaming is cancelled, the screen stays up, and no report goes for the join.
#[test]
fn a_transition_supersedes_a_join_keeping_the_screen() {
    let t0 = Instant::now();
    let mut s = welcomed(t0);
    s.handle(t0, show_join(4, "crypt"));
    drain(&mut s);
    s.handle(t0 + Duration::from_secs(1), freeze(5));
    let load = Load::Join(JoinId(4));
    let started = Event::TransitionStarted { transition: TransitionId(5), superseded: None };
    assert_eq!(events(&mut s), [Event::CancelStreaming { load }, started]);
    assert_eq!(s.screen().raised_at(), Some(t0));
    assert_eq!(s.levels_streamed(load), Err(InputError::NotStreaming { load }));
    s.handle(t0, show_join(6, "harbor"));
    assert_eq!(drain(&mut s), (vec![], vec![]), "a join never replaces a transition");
}

#[test]
fn a_failed_transition_cancels_its_streaming_and_keeps_the_screen_for_the_recovery() {
    let t0 = Instant::now();
    let mut s = welcomed(t0);
    s.handle(t0, show(3, "crypt"));
    drain(&mut s);
    let failure = TransitionFailure::TimedOut;
    let detail = String::from("stuck");
    let failed = ServerMessage::TransitionFailed {
        transition_id: TransitionId(3),
        reason: failure,
        detail: detail.clone(),
    };
    s.handle(t0, failed);
    let told = Event::TransitionFailed { transition: TransitionId(3), reason: failure, detail };
    assert_eq!(events(&mut s), [Event::CancelStreaming { load: transition(3) }, told]);
    assert!(s.screen().is_up());
    assert_eq!(s.destination(), None, "the recovery's destination is not known yet");
    s.handle(t0, show(4, "harbor"));
    assert_eq!(outputs(&mut s), [shown(4)]);
}

#[test]
fn a_restart_is_sent_only_while_dead_and_once() {
    let t0 = Instant::now();
    let mut s = welcomed(t0);
    assert_eq!(s.request_restart(), Err(InputError::NotDead));
    s.handle(t0, tags(PlayerId::new("other").unwrap(), true));
    assert_eq!(s.life(), Life::Alive, "another player's death is not ours");
    s.handle(t0, tags(me(), true));
    assert!(events(&mut s).contains(&Event::Died));
    assert_eq!(s.life(), Life::Dead);
    s.request_restart().unwrap();
    assert_eq!(s.life(), Life::Restarting);
    assert_eq!(s.request_restart(), Err(InputError::RestartPending));
    assert_eq!(outputs(&mut s), [ClientMessage::RestartRequest]);
    s.handle(t0, tags(me(), false));
    assert!(events(&mut s).contains(&Event::Revived { restarted: true }));
    assert_eq!(s.life(), Life::Alive);
}

/// A relaunch starts dead (docs/protocol.md 4.3) and the server may forget the death: alive
/// again with no restart of ours is told apart.
#[test]
fn a_revival_without_a_restart_says_so() {
    let t0 = Instant::now();
    let mut s = welcomed(t0);
    s.handle(t0, tags(me(), true));
    s.handle(t0, tags(me(), false));
    assert!(events(&mut s).contains(&Event::Revived { restarted: false }));
}

#[test]
fn no_welcome_within_the_timeout_closes_the_session() {
    let t0 = Instant::now();
    let mut s = Session::new(t0, SessionConfig::new("a.b.c"));
    drain(&mut s);
    let due = s.poll_timeout().unwrap();
    assert_eq!(due, t0 + Duration::from_secs(10));
    s.handle_timeout(due - Duration::from_millis(1));
    assert!(!s.is_closed(), "not before its deadline");
    s.handle_timeout(due);
    assert_eq!(events(&mut s), [Event::Closed { reason: CloseReason::NoWelcome }]);
    assert!(s.is_closed());
    assert_eq!(s.poll_timeout(), None);
}

#[test]
fn leave_sends_leave_once_and_closes_at_the_servers_close() {
    let t0 = Instant::now();
    let mut s = welcomed(t0);
    s.leave(t0);
    s.leave(t0);
    assert_eq!(outputs(&mut s), [ClientMessage::Leave], "sent once");
    assert_eq!(s.request_restart(), Err(InputError::NotOpen));
    s.handle(t0, ServerMessage::Closing { code: 0, reason: "leave".into() });
    let closed = CloseReason::Server { code: 0, reason: "leave".into() };
    assert_eq!(events(&mut s), [Event::Closed { reason: closed }]);
}

#[test]
fn leave_closes_at_its_linger_if_the_server_never_closes() {
    let t0 = Instant::now();
    let mut s = welcomed(t0);
    s.leave(t0);
    drain(&mut s);
    assert_eq!(s.poll_timeout(), Some(t0 + Duration::from_secs(2)));
    s.handle_timeout(t0 + Duration::from_secs(2));
    assert_eq!(events(&mut s), [Event::Closed { reason: CloseReason::Left }]);
}

#[test]
fn the_servers_closing_ends_the_session_with_its_code_and_nothing_after_is_handled() {
    let t0 = Instant::now();
    let mut s = welcomed(t0);
    // A held screen arms a deadline; the close disarms every one.
    s.handle(t0, show(3, "crypt"));
    s.handle(t0, end(3));
    drain(&mut s);
    let closing = ServerMessage::Closing { code: 6, reason: "client ready timeout".into() };
    s.handle(t0, closing);
    assert_eq!(s.poll_timeout(), None, "nothing is due after the close");
    let (_, seen) = drain(&mut s);
    let [Event::Closed { reason }] = &seen[..] else { panic!("{seen:?}") };
    assert_eq!(reason.close_code(), Some(gatehouse_protocol::CloseCode::ReadyTimeout));
    s.handle(t0, show(3, "crypt"));
    s.connection_lost("gone");
    assert_eq!(drain(&mut s), (vec![], vec![]), "closed: nothing more");
}

#[test]
fn a_lost_connection_closes_once_with_what_the_transport_said() {
    let t0 = Instant::now();
    let mut s = welcomed(t0);
    s.connection_lost("timed out");
    s.connection_lost("again");
    let lost = Event::Closed { reason: CloseReason::Lost { why: "timed out".into() } };
    assert_eq!(events(&mut s), [lost]);
}

#[test]
fn inputs_before_welcome_are_refused() {
    let t0 = Instant::now();
    let mut s = Session::new(t0, SessionConfig::new("a.b.c"));
    assert_eq!(s.levels_streamed(transition(1)), Err(InputError::NotOpen));
    assert_eq!(s.request_restart(), Err(InputError::NotOpen));
    s.leave(t0);
    assert_eq!(events(&mut s), [Event::Closed { reason: CloseReason::Left }]);
}
