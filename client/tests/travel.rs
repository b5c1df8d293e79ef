//! A move to another server behind one loading screen (docs/spec/travel.md V3), driven as a
//! shell drives a session: each server message handed in with the link it came on, every
//! output (a message on a link, a link to open, a link to close) drained and checked. Time is
//! explicit; there are no sockets.

// Test helpers build fixed, valid values; a failure is a broken test.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::{me, node, sent, show};
use gatehouse_client::session::SOURCE_RELEASE;
use gatehouse_client::{
    AbandonReason, CertificatePin, CloseReason, Dial, Event, LinkId, Load, Output, Screen, Session,
    SessionConfig, TransitionStage, WorldChange,
};
use gatehouse_protocol::messages::TravelTo;
use gatehouse_protocol::{
    CertificateSha256, CharacterDef, ClientMessage, CloseCode, JoinId, LevelName, PROTOCOL_VERSION,
    PawnId, PawnIdRuns, PawnView, PlayerId, PlayerStateView, RejectReason, ServerMessage,
    TransitionFailure, TransitionId,
};

/// The source: the link the session started on.
const SOURCE: LinkId = LinkId::FIRST;
/// The destination: the link the first move opens.
const DESTINATION: LinkId = LinkId(1);
/// The move's transition, the source's id. The destination's ids are its own, and smaller.
const MOVE: u64 = 7;
/// The ticket the move's `Hello` carries.
const TICKET: &str = "ticket.for.crypt";

/// A session welcomed by the source on `harbor`, holding its pawn 12 there, placed; its
/// outputs and events drained.
fn placed_at_source(t0: Instant) -> Session {
    let mut s = Session::new(t0, SessionConfig::new("a.b.c"));
    let welcome = ServerMessage::Welcome {
        player_id: me(),
        current_node: Some(node("harbor")),
        max_frame_len: 65_536,
    };
    s.handle_on(t0, SOURCE, welcome);
    s.handle_on(t0, SOURCE, ServerMessage::PawnSpawned(pawn(12, me(), "harbor")));
    s.handle_on(t0, SOURCE, ServerMessage::Possessed { pawn_id: PawnId(12) });
    let ack = ClientMessage::PossessionAcknowledged { pawn_id: PawnId(12) };
    assert_eq!(sent(&mut s).last(), Some(&ack));
    drain(&mut s);
    assert!(s.is_placed());
    s
}

/// A session that was sent the move and dialled the destination (module constants), held
/// `valid_ms`; its outputs and events drained.
fn dialling(t0: Instant) -> Session {
    let mut s = placed_at_source(t0);
    s.handle_on(t0, SOURCE, ServerMessage::FreezeCharacters { transition_id: TransitionId(MOVE) });
    s.handle_on(t0, SOURCE, travel_to(MOVE, 10_000));
    drain(&mut s);
    s
}

/// A session that arrived at the destination: welcomed there, its join streaming.
fn arrived(t0: Instant) -> Session {
    let mut s = dialling(t0);
    s.handle_on(t0, DESTINATION, welcome_at_destination());
    s.handle_on(t0, DESTINATION, show_join(3));
    drain(&mut s);
    s
}

fn travel_to(id: u64, valid_ms: u32) -> ServerMessage {
    ServerMessage::TravelTo(Box::new(TravelTo {
        transition_id: TransitionId(id),
        node: node("crypt"),
        address: "crypt-1.example:7777".into(),
        server_name: "crypt-1.example".into(),
        certificate_sha256: Some(CertificateSha256([0xab; 32])),
        ticket: TICKET.into(),
        valid_ms,
    }))
}

fn welcome_at_destination() -> ServerMessage {
    ServerMessage::Welcome {
        player_id: me(),
        current_node: Some(node("crypt")),
        max_frame_len: 32_768,
    }
}

fn show_join(id: u64) -> ServerMessage {
    ServerMessage::ShowJoin {
        join_id: JoinId(id),
        node: node("crypt"),
        levels: vec![LevelName::new("crypt_nave").unwrap()],
        rooms: Vec::new(),
    }
}

fn pawn(id: u64, owner: PlayerId, at: &str) -> PawnView {
    PawnView {
        pawn_id: PawnId(id),
        owner,
        character_def: CharacterDef::new("Vanguard").unwrap(),
        node: node(at),
        alive: true,
    }
}

fn other() -> PlayerId {
    PlayerId::new("sim-0002").unwrap()
}

fn failed(id: u64) -> ServerMessage {
    ServerMessage::TransitionFailed {
        transition_id: TransitionId(id),
        reason: TransitionFailure::DestinationLost,
        detail: "the destination went silent".into(),
    }
}

fn closing(code: CloseCode) -> ServerMessage {
    ServerMessage::Closing { code: code.code(), reason: "bye".into() }
}

/// Every output and every event, in order.
fn drain(s: &mut Session) -> (Vec<Output>, Vec<Event>) {
    let outputs = std::iter::from_fn(|| s.poll_output()).collect();
    let events = std::iter::from_fn(|| s.poll_event()).collect();
    (outputs, events)
}

fn send(link: LinkId, message: ClientMessage) -> Output {
    Output::Send { link, message }
}

fn abandoned() -> Output {
    send(SOURCE, ClientMessage::TravelAbandoned { transition_id: TransitionId(MOVE) })
}

/// The loading screen's shows and hides among `events`.
fn screen_edges(events: &[Event]) -> Vec<&Event> {
    events
        .iter()
        .filter(|e| matches!(e, Event::ShowLoadingScreen | Event::HideLoadingScreen { .. }))
        .collect()
}

/// The source's screen of the move, come back to it: up since `raised_at`, waiting there.
fn waiting_on_source(s: &Session) -> bool {
    matches!(
        s.screen(),
        Screen::Transition(screen)
            if screen.transition() == TransitionId(MOVE)
                && *screen.stage() == TransitionStage::AwaitingDestination
    )
}

/// How the destination ends a move's screen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DestinationEnd {
    /// Its join of the traveller ends (`EndJoin`).
    Join,
    /// A world transition there supersedes the join; its `EndTransition` ends the screen.
    TransitionOverJoin,
    /// A world transition already ran there when the traveller came in: it follows that one
    /// (docs/protocol.md 4.2), no join.
    TransitionInFlight,
}

/// The screen stays up from the source's `FreezeCharacters` to the end of the player's join at
/// the destination, and nothing between drops it or raises it again: the source is answered
/// `TransitionShown` at once, the destination dialled (pinned) and logged in with the ticket,
/// its world given to the game as a new one, its join streamed and reported on its own link.
/// The same holds when a world transition at the destination (ids of its own, below the
/// source's) supersedes the join or is in flight when the traveller comes in: the screen drops
/// at that transition's end (docs/spec/travel.md V3).
#[test]
fn the_screen_stays_up_across_the_server_change() {
    use DestinationEnd::*;
    for how in [Join, TransitionOverJoin, TransitionInFlight] {
        let t0 = Instant::now();
        let mut s = placed_at_source(t0);
        let mut seen = Vec::new();
        let mut step = |s: &mut Session, link: LinkId, message: ServerMessage| {
            s.handle_on(t0, link, message);
            let (outputs, events) = drain(s);
            seen.extend(events.clone());
            (outputs, events)
        };
        step(&mut s, SOURCE, ServerMessage::FreezeCharacters { transition_id: TransitionId(MOVE) });
        let (outputs, events) = step(&mut s, SOURCE, travel_to(MOVE, 10_000));
        let dial = Dial {
            address: "crypt-1.example:7777".into(),
            server_name: "crypt-1.example".into(),
            pin: Some(CertificatePin::from_bytes([0xab; 32])),
            node: node("crypt"),
        };
        let hello =
            ClientMessage::Hello { protocol_version: PROTOCOL_VERSION, token: TICKET.into() };
        assert_eq!(
            outputs,
            [
                send(SOURCE, ClientMessage::TransitionShown { transition_id: TransitionId(MOVE) }),
                Output::Dial { link: DESTINATION, dial },
                send(DESTINATION, hello),
            ]
        );
        let travelling = Event::Travelling {
            transition: TransitionId(MOVE),
            node: node("crypt"),
            address: "crypt-1.example:7777".into(),
            server_name: "crypt-1.example".into(),
        };
        assert_eq!(events, [travelling]);
        assert!(s.screen().is_up() && s.is_moving());
        // The source's end of the move's transition is no end here: the destination ends it.
        step(&mut s, SOURCE, ServerMessage::EndTransition { transition_id: TransitionId(MOVE) });
        assert!(s.screen().is_up(), "the source's end does not drop the move's screen");
        let (_, events) = step(&mut s, DESTINATION, welcome_at_destination());
        let changed =
            Event::ServerChanged { player: me(), node: Some(node("crypt")), max_frame_len: 32_768 };
        assert_eq!(events, [changed]);
        assert_eq!((s.link(), s.pawn(), s.player()), (DESTINATION, None, Some(&me())));
        // The destination's world, then its join, on the move's screen.
        let someone = PlayerStateView { player_id: other(), team: None, character_def: None };
        step(&mut s, DESTINATION, ServerMessage::PlayerStateUpdated(someone));
        if how != TransitionInFlight {
            let (_, events) = step(&mut s, DESTINATION, show_join(3));
            assert!(
                matches!(&events[..], [Event::StreamLevels { load: Load::Join(JoinId(3)), .. }]),
                "{events:?}"
            );
            assert!(matches!(s.screen(), Screen::Join(join) if join.join() == JoinId(3)));
        }
        let (load, ready) = if how == Join {
            let ready = ClientMessage::JoinReady { join_id: JoinId(3) };
            (Load::Join(JoinId(3)), ready)
        } else {
            // A world transition at the destination, id 2 (below the move's 7).
            let freeze = ServerMessage::FreezeCharacters { transition_id: TransitionId(2) };
            step(&mut s, DESTINATION, freeze);
            let (outputs, _) = step(&mut s, DESTINATION, show(2, "crypt"));
            let shown = ClientMessage::TransitionShown { transition_id: TransitionId(2) };
            assert_eq!(outputs, [send(DESTINATION, shown)], "{how:?}");
            let ready = ClientMessage::TransitionReady { transition_id: TransitionId(2) };
            (Load::Transition(TransitionId(2)), ready)
        };
        s.levels_streamed(load).unwrap();
        let (outputs, _) = drain(&mut s);
        assert_eq!(outputs, [send(DESTINATION, ready)]);
        step(&mut s, DESTINATION, ServerMessage::PawnSpawned(pawn(4, me(), "crypt")));
        let (outputs, _) =
            step(&mut s, DESTINATION, ServerMessage::Possessed { pawn_id: PawnId(4) });
        assert_eq!(
            outputs,
            [send(DESTINATION, ClientMessage::PossessionAcknowledged { pawn_id: PawnId(4) })]
        );
        assert!(s.screen().is_up(), "possessed, the screen waits for the end");
        let end = match load {
            Load::Join(join_id) => ServerMessage::EndJoin { join_id },
            Load::Transition(transition_id) => ServerMessage::EndTransition { transition_id },
        };
        let (_, events) = step(&mut s, DESTINATION, end);
        assert_eq!(events.last(), Some(&Event::HideLoadingScreen { load }));
        assert_eq!(
            screen_edges(&seen),
            [&Event::ShowLoadingScreen, &Event::HideLoadingScreen { load }],
            "one screen, raised once and dropped once ({how:?})"
        );
        assert!(s.is_placed());
        assert_eq!(s.pawn(), Some(PawnId(4)));
    }
}

/// A destination that refuses the ticket is given up: its link closed, `TravelAbandoned` sent
/// on the source, the screen kept up; the source's `TransitionFailed` and its follow-up
/// transition end the screen there as usual (docs/spec/travel.md V3, V7).
#[test]
fn a_destination_refusal_abandons_the_move_and_the_sources_follow_up_ends_the_screen() {
    let t0 = Instant::now();
    let mut s = dialling(t0);
    let refused =
        ServerMessage::Rejected { reason: RejectReason::TicketStale, detail: "stale".into() };
    s.handle_on(t0, DESTINATION, refused);
    let (outputs, events) = drain(&mut s);
    assert_eq!(outputs, [Output::Close { link: DESTINATION }, abandoned()]);
    let reason =
        AbandonReason::Refused { reason: RejectReason::TicketStale, detail: "stale".into() };
    assert_eq!(events, [Event::TravelAbandoned { transition: TransitionId(MOVE), reason }]);
    assert!(waiting_on_source(&s) && !s.is_moving() && !s.is_closed());
    // The refusal's `Closing` on the closed link changes nothing.
    s.handle_on(t0, DESTINATION, closing(CloseCode::Rejected));
    assert_eq!(drain(&mut s), (vec![], vec![]));
    s.handle_on(t0, SOURCE, failed(MOVE));
    let (_, events) = drain(&mut s);
    assert!(matches!(&events[..], [Event::TransitionFailed { .. }]), "{events:?}");
    assert!(waiting_on_source(&s));
    s.handle_on(t0, SOURCE, ServerMessage::FreezeCharacters { transition_id: TransitionId(8) });
    s.handle_on(t0, SOURCE, show(8, "harbor"));
    let (outputs, _) = drain(&mut s);
    assert_eq!(
        outputs,
        [send(SOURCE, ClientMessage::TransitionShown { transition_id: TransitionId(8) })]
    );
    s.levels_streamed(Load::Transition(TransitionId(8))).unwrap();
    let teleported = ServerMessage::PawnsTeleported {
        node: node("harbor"),
        pawn_ids: PawnIdRuns::from_ids([PawnId(12)]),
    };
    s.handle_on(t0, SOURCE, teleported);
    s.handle_on(t0, SOURCE, ServerMessage::EndTransition { transition_id: TransitionId(8) });
    let (_, events) = drain(&mut s);
    assert_eq!(
        events.last(),
        Some(&Event::HideLoadingScreen { load: Load::Transition(TransitionId(8)) })
    );
    assert!(s.is_placed() && s.pawn() == Some(PawnId(12)));
}

/// A destination that closes the link before the move's end (`Recalled`, the source took the
/// player back) brings the player back to the source, whose world the game gets again as it
/// stands (changes made there meanwhile included) with the pawn it controls there, and the
/// source is told `TravelAbandoned`.
#[test]
fn a_destination_that_recalls_the_player_gives_it_back_to_the_source() {
    let t0 = Instant::now();
    let mut s = arrived(t0);
    // The source's world goes on meanwhile, unseen.
    s.handle_on(t0, SOURCE, ServerMessage::HealthChanged { player_id: me(), health: 40 });
    assert_eq!(
        drain(&mut s),
        (vec![], vec![]),
        "nothing of the source reaches the game while away"
    );
    s.handle_on(t0, DESTINATION, closing(CloseCode::Recalled));
    let (outputs, events) = drain(&mut s);
    assert_eq!(outputs, [Output::Close { link: DESTINATION }, abandoned()]);
    assert_eq!(
        events,
        [
            Event::CancelStreaming { load: Load::Join(JoinId(3)) },
            Event::ServerChanged {
                player: me(),
                node: Some(node("harbor")),
                max_frame_len: 65_536
            },
            Event::World(WorldChange::HealthChanged { player: me(), health: 40 }),
            Event::World(WorldChange::PawnSpawned(pawn(12, me(), "harbor"))),
            // The game's new world is told which pawn it controls, as after a `Possessed`.
            Event::Possessed { pawn: PawnId(12) },
            Event::TravelAbandoned {
                transition: TransitionId(MOVE),
                reason: AbandonReason::Closed {
                    code: CloseCode::Recalled.code(),
                    reason: "bye".into()
                },
            },
        ]
    );
    assert!(waiting_on_source(&s) && !s.is_closed());
    assert_eq!(
        (s.link(), s.pawn()),
        (SOURCE, Some(PawnId(12))),
        "the source's pawn is the client's again"
    );
    // The destination's link is closed: what still arrives on it is dropped.
    s.handle_on(t0, DESTINATION, ServerMessage::EndJoin { join_id: JoinId(3) });
    assert_eq!(drain(&mut s), (vec![], vec![]));
}

/// The source's `TransitionFailed` while the client is at the destination takes it back: the
/// destination is left (`Leave`, then its link closed) and the session follows the source
/// again, its world given back; the screen stays up for the source's follow-up. Before the
/// arrival, the destination's link is closed the same way and nothing else changes. The
/// source's newer transition recalls the player the same way (docs/spec/travel.md V7, V11).
#[test]
fn a_transition_failed_while_at_the_destination_leaves_it_and_follows_the_source() {
    let t0 = Instant::now();
    let mut s = arrived(t0);
    s.handle_on(t0, SOURCE, failed(MOVE));
    let (outputs, events) = drain(&mut s);
    assert_eq!(
        outputs,
        [send(DESTINATION, ClientMessage::Leave), Output::Close { link: DESTINATION }]
    );
    assert_eq!(events[0], Event::CancelStreaming { load: Load::Join(JoinId(3)) });
    assert!(matches!(events[1], Event::ServerChanged { .. }));
    assert!(matches!(
        events.last(),
        Some(Event::TransitionFailed { transition: TransitionId(MOVE), .. })
    ));
    assert!(screen_edges(&events).is_empty(), "the screen stays up");
    assert!(waiting_on_source(&s) && !s.is_moving());
    assert_eq!(
        s.levels_streamed(Load::Join(JoinId(3))).unwrap_err().to_string(),
        "join 3 is not being streamed (the loading screen moved on, or it was reported)"
    );

    // Before the arrival: only the dial is given up.
    let mut s = dialling(t0);
    s.handle_on(t0, SOURCE, failed(MOVE));
    let (outputs, events) = drain(&mut s);
    assert_eq!(outputs, [Output::Close { link: DESTINATION }]);
    assert!(matches!(&events[..], [Event::TransitionFailed { .. }]), "{events:?}");
    assert!(waiting_on_source(&s) && !s.is_moving());
    s.handle_on(t0, DESTINATION, welcome_at_destination());
    assert_eq!(drain(&mut s), (vec![], vec![]), "a late welcome of the given-up destination");

    // A newer transition of the source supersedes the move.
    let mut s = arrived(t0);
    s.handle_on(
        t0,
        SOURCE,
        ServerMessage::FreezeCharacters { transition_id: TransitionId(MOVE + 1) },
    );
    let (outputs, events) = drain(&mut s);
    assert_eq!(
        outputs,
        [send(DESTINATION, ClientMessage::Leave), Output::Close { link: DESTINATION }]
    );
    let started = Event::TransitionStarted {
        transition: TransitionId(MOVE + 1),
        superseded: Some(TransitionId(MOVE)),
    };
    assert_eq!(events.last(), Some(&started));
    assert_eq!(s.link(), SOURCE);
}

/// The source closing its link with `Travelled` once the destination placed the player is the
/// move's expected end: the link is closed, the session goes on at the destination, nothing is
/// reported as an error, before the destination's end or after it. A source that never says so
/// is let go after [`SOURCE_RELEASE`] (docs/spec/travel.md V6, V16).
#[test]
fn the_travelled_close_of_the_source_is_not_an_error() {
    let t0 = Instant::now();
    // Before the destination's end: the claim committed and both messages raced.
    let mut s = arrived(t0);
    s.handle_on(t0, SOURCE, closing(CloseCode::Travelled));
    assert_eq!(drain(&mut s), (vec![Output::Close { link: SOURCE }], vec![]));
    s.link_lost(SOURCE, "closed by the peer: 11");
    assert_eq!(drain(&mut s), (vec![], vec![]));
    assert!(!s.is_closed() && !s.is_moving() && s.screen().is_up());

    // After it: the source has SOURCE_RELEASE to say so.
    let mut s = arrived(t0);
    s.levels_streamed(Load::Join(JoinId(3))).unwrap();
    s.handle_on(t0, DESTINATION, ServerMessage::Possessed { pawn_id: PawnId(4) });
    s.handle_on(t0, DESTINATION, ServerMessage::EndJoin { join_id: JoinId(3) });
    drain(&mut s);
    assert!(s.is_placed() && s.is_moving());
    assert_eq!(s.poll_timeout(), Some(t0 + SOURCE_RELEASE));
    // A recall after the destination's end is too late: the destination placed the player.
    s.handle_on(t0, SOURCE, failed(MOVE));
    assert_eq!(drain(&mut s), (vec![], vec![]));
    s.handle_on(t0, SOURCE, closing(CloseCode::Travelled));
    assert_eq!(drain(&mut s), (vec![Output::Close { link: SOURCE }], vec![]));
    assert!(!s.is_moving() && s.is_placed() && !s.is_closed());
    assert_eq!(s.poll_timeout(), None);

    let mut s = arrived(t0);
    s.levels_streamed(Load::Join(JoinId(3))).unwrap();
    s.handle_on(t0, DESTINATION, ServerMessage::Possessed { pawn_id: PawnId(4) });
    s.handle_on(t0, DESTINATION, ServerMessage::EndJoin { join_id: JoinId(3) });
    drain(&mut s);
    s.handle_timeout(t0 + SOURCE_RELEASE - Duration::from_millis(1));
    assert!(s.is_moving());
    s.handle_timeout(t0 + SOURCE_RELEASE);
    assert_eq!(drain(&mut s), (vec![Output::Close { link: SOURCE }], vec![]));
    assert!(!s.is_moving() && s.is_placed());
}

/// A destination that does not welcome the client within the connect timeout (counted from
/// the `TravelTo`, dialling included) is given up as a refusal is; a seat held for less than
/// that bounds the wait to its hold instead (docs/spec/travel.md V3, V16).
#[test]
fn the_connect_timeout_bounds_the_destinations_admission() {
    let t0 = Instant::now();
    let connect_timeout = SessionConfig::new("t").connect_timeout;
    assert_eq!(connect_timeout, Duration::from_secs(10));
    let mut s = placed_at_source(t0);
    s.handle_on(t0, SOURCE, travel_to(MOVE, 60_000));
    drain(&mut s);
    assert_eq!(s.poll_timeout(), Some(t0 + connect_timeout));
    s.handle_timeout(t0 + connect_timeout - Duration::from_millis(1));
    assert_eq!(drain(&mut s), (vec![], vec![]));
    s.handle_timeout(t0 + connect_timeout);
    let (outputs, events) = drain(&mut s);
    assert_eq!(outputs, [Output::Close { link: DESTINATION }, abandoned()]);
    let timed_out =
        Event::TravelAbandoned { transition: TransitionId(MOVE), reason: AbandonReason::TimedOut };
    assert_eq!(events, [timed_out]);
    assert!(waiting_on_source(&s));
    s.handle_on(t0 + connect_timeout, DESTINATION, welcome_at_destination());
    assert_eq!(drain(&mut s), (vec![], vec![]), "too late: the destination was given up");

    let mut s = placed_at_source(t0);
    s.handle_on(t0, SOURCE, travel_to(MOVE, 3_000));
    assert_eq!(s.poll_timeout(), Some(t0 + Duration::from_secs(3)), "the seat's hold is shorter");
}

/// A destination that cannot be reached (the shell's dial failed) is given up at once; a
/// destination lost after its welcome, before its end, brings the player back to the source.
#[test]
fn an_unreachable_destination_is_given_up_on_the_source() {
    let t0 = Instant::now();
    let mut s = dialling(t0);
    s.link_lost(DESTINATION, "no route to host");
    let (outputs, events) = drain(&mut s);
    assert_eq!(outputs, [Output::Close { link: DESTINATION }, abandoned()]);
    let reason = AbandonReason::Unreachable { why: "no route to host".into() };
    assert_eq!(events, [Event::TravelAbandoned { transition: TransitionId(MOVE), reason }]);

    let mut s = arrived(t0);
    s.link_lost(DESTINATION, "timed out");
    let (outputs, events) = drain(&mut s);
    assert_eq!(outputs, [Output::Close { link: DESTINATION }, abandoned()]);
    assert!(matches!(
        events.last(),
        Some(Event::TravelAbandoned { reason: AbandonReason::Unreachable { .. }, .. })
    ));
    assert!(waiting_on_source(&s) && !s.is_closed());
}

/// The source going while the client dials the destination leaves the move to the
/// destination: a welcome there carries on, with nothing to come back to; a destination that
/// then fails too ends the session with the source's reason (docs/spec/travel.md V10).
#[test]
fn a_source_lost_while_dialling_leaves_the_move_to_the_destination() {
    let t0 = Instant::now();
    let mut s = dialling(t0);
    s.handle_on(t0, SOURCE, closing(CloseCode::ShuttingDown));
    s.link_lost(SOURCE, "closed");
    assert_eq!(drain(&mut s), (vec![], vec![]));
    assert!(!s.is_closed() && s.screen().is_up());
    s.handle_on(t0, DESTINATION, welcome_at_destination());
    let (outputs, events) = drain(&mut s);
    assert_eq!(outputs, [Output::Close { link: SOURCE }]);
    assert!(matches!(&events[..], [Event::ServerChanged { .. }]));
    assert!(!s.is_moving(), "nothing to come back to");

    let mut s = dialling(t0);
    s.link_lost(SOURCE, "reset");
    s.handle_on(
        t0,
        DESTINATION,
        ServerMessage::Rejected { reason: RejectReason::TicketUsed, detail: String::new() },
    );
    let (outputs, events) = drain(&mut s);
    assert_eq!(outputs, [], "closed: the shell closes every link it holds");
    assert_eq!(events, [Event::Closed { reason: CloseReason::Lost { why: "reset".into() } }]);
    assert!(s.is_closed());
}

/// Leaving during a move leaves both servers: the other link is closed (the source told
/// `Leave` too once the client arrived), and the session waits for its own server's close.
#[test]
fn leaving_during_a_move_closes_the_other_link() {
    let t0 = Instant::now();
    let mut s = dialling(t0);
    s.leave(t0);
    let (outputs, _) = drain(&mut s);
    assert_eq!(outputs, [Output::Close { link: DESTINATION }, send(SOURCE, ClientMessage::Leave)]);

    let mut s = arrived(t0);
    s.leave(t0);
    let (outputs, _) = drain(&mut s);
    assert_eq!(
        outputs,
        [
            send(SOURCE, ClientMessage::Leave),
            Output::Close { link: SOURCE },
            send(DESTINATION, ClientMessage::Leave)
        ]
    );
    assert!(!s.is_moving());
}

/// The ticket is a credential: it shows in no `Debug` of the session, its outputs or its events.
#[test]
fn the_ticket_never_shows_in_a_debug() {
    let t0 = Instant::now();
    let mut s = placed_at_source(t0);
    s.handle_on(t0, SOURCE, travel_to(MOVE, 10_000));
    assert!(!format!("{s:?}").contains(TICKET), "the session");
    let (outputs, events) = drain(&mut s);
    assert!(outputs.iter().any(|o| matches!(o, Output::Send { message: ClientMessage::Hello { token, .. }, .. } if token == TICKET)));
    assert!(!format!("{outputs:?}{events:?}").contains(TICKET), "its outputs and events");
}

/// While the destination is dialled the source is sent nothing but the move's answers: a
/// restart is refused (`Moving`, nothing sent) and taken once the destination let the client in
/// (docs/spec/travel.md V3).
#[test]
fn a_restart_waits_for_the_destination() {
    let t0 = Instant::now();
    let mut s = dialling(t0);
    let dead = vec![gatehouse_tags::catalog::STATE_DEAD];
    s.handle_on(
        t0,
        SOURCE,
        ServerMessage::AbilityTagsChanged { player_id: me(), tags: dead.clone() },
    );
    drain(&mut s);
    assert_eq!(s.request_restart(), Err(gatehouse_client::InputError::Moving));
    assert_eq!(drain(&mut s).0, []);
    s.handle_on(t0, DESTINATION, welcome_at_destination());
    s.handle_on(t0, DESTINATION, ServerMessage::AbilityTagsChanged { player_id: me(), tags: dead });
    drain(&mut s);
    s.request_restart().unwrap();
    assert_eq!(drain(&mut s).0, [send(DESTINATION, ClientMessage::RestartRequest)]);
}
