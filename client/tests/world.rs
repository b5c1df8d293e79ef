//! The replicated world: a real session's events applied to a replica, each change visible
//! exactly when its notice is handed out, duplicates silent, and every notice on its declared
//! channel. Time is explicit.

// Test helpers build fixed, valid values; a failure is a broken test.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Instant;

use common::{me, node, sent, show};
use gatehouse_client::world::{
    self, Login, NetRole, Notice, PAWN_SPAWNED, PawnNotice, Replica, Replication, WorldId,
    WorldPhase,
};
use gatehouse_client::{Event, Load, Session, SessionConfig};
use gatehouse_messaging::{Channels, Listen, Match, Router, RouterConfig};
use gatehouse_protocol::{
    CharacterDef, PawnId, PawnView, PlayerId, PlayerStateView, ServerMessage, TeamId, TransitionId,
};
use gatehouse_tags::catalog::STATE_DEAD;

fn player(name: &str) -> PlayerId {
    PlayerId::new(name).unwrap()
}

fn welcome() -> ServerMessage {
    ServerMessage::Welcome {
        player_id: me(),
        current_node: Some(node("harbor")),
        max_frame_len: 65_536,
    }
}

fn spawned(pawn: u64, owner: PlayerId) -> ServerMessage {
    ServerMessage::PawnSpawned(PawnView {
        pawn_id: PawnId(pawn),
        owner,
        character_def: CharacterDef::new("Vanguard").unwrap(),
        node: node("harbor"),
        alive: true,
    })
}

fn player_state(who: PlayerId, team: u8) -> ServerMessage {
    ServerMessage::PlayerStateUpdated(PlayerStateView {
        player_id: who,
        team: Some(TeamId(team)),
        character_def: None,
    })
}

/// A session and the replica its events feed, as a game holds them.
struct Game {
    session: Session,
    replica: Replica,
    t0: Instant,
}

impl Game {
    fn new() -> Game {
        let t0 = Instant::now();
        Game { session: Session::new(t0, SessionConfig::new("a.b.c")), replica: Replica::new(), t0 }
    }

    /// Hands `message` to the session and every event it gives to the replica; returns the
    /// notices, in order.
    fn handle(&mut self, message: ServerMessage) -> Vec<Notice> {
        self.session.handle(self.t0, message);
        sent(&mut self.session);
        let events: Vec<Event> = std::iter::from_fn(|| self.session.poll_event()).collect();
        events.iter().flat_map(|event| self.replica.replicate(self.t0, event)).collect()
    }

    /// Transition `id` to `target` starts (freeze, then show); returns the show's notices.
    fn travel(&mut self, id: u64, target: &str) -> Vec<Notice> {
        self.handle(ServerMessage::FreezeCharacters { transition_id: TransitionId(id) });
        self.handle(show(id, target))
    }

    /// The game reports transition `id`'s levels streamed to the replica; returns the notices.
    fn streamed(&mut self, id: u64) -> Vec<Notice> {
        let mut replication = Replication::levels_streamed(Load::Transition(TransitionId(id)));
        std::iter::from_fn(|| replication.next(&mut self.replica, self.t0)).collect()
    }
}

/// A welcome logs in, then creates the world the client enters, then begins its play; each
/// change lands only once the notices before it are out.
#[test]
fn a_welcome_logs_in_then_creates_and_plays_the_world_one_change_per_notice() {
    let mut game = Game::new();
    game.session.handle(game.t0, welcome());
    let welcomed = std::iter::from_fn(|| game.session.poll_event())
        .find(|e| matches!(e, Event::Welcomed { .. }))
        .unwrap();
    let mut replication = Replication::of(&welcomed);
    let replica = &mut game.replica;

    assert_eq!(replication.next(replica, game.t0), Some(Notice::LoginSucceeded(me())));
    assert_eq!(replica.local_player(), Some(&me()));
    assert!(replica.world().is_none(), "the world is created by the next change");

    assert_eq!(replication.next(replica, game.t0), Some(Notice::WorldCreated(WorldId(1))));
    let world = replica.world().unwrap();
    assert_eq!((world.node(), world.phase()), (Some(&node("harbor")), WorldPhase::Loading));

    assert_eq!(replication.next(replica, game.t0), Some(Notice::WorldBeganPlay(WorldId(1))));
    assert!(replica.is_playing());
    assert_eq!(replication.next(replica, game.t0), None);
}

/// A transition freezes every character, shows its destination and travels there (the old
/// world torn down, the destination's created loading); the game's report that it streamed
/// begins the destination's play; the end unfreezes.
#[test]
fn a_transition_freezes_travels_and_plays_its_destination_once_streamed() {
    let mut game = Game::new();
    game.handle(welcome());
    game.handle(spawned(1, me()));
    game.handle(ServerMessage::Possessed { pawn_id: PawnId(1) });
    let frozen = game.handle(ServerMessage::FreezeCharacters { transition_id: TransitionId(2) });
    assert_eq!(frozen, [Notice::CharactersFrozen(TransitionId(2))]);
    let own = game.replica.characters().get(PawnId(1)).unwrap();
    assert_eq!((own.gravity_scale(), own.is_input_enabled()), (0.0, false));

    let shown = game.handle(show(2, "marsh"));
    assert_eq!(
        shown,
        [
            Notice::TransitionShown(TransitionId(2)),
            Notice::WorldTornDown(WorldId(1)),
            Notice::WorldCreated(WorldId(2)),
        ]
    );
    assert!(!game.replica.is_playing(), "the destination loads");
    assert!(!game.replica.characters().get(PawnId(1)).unwrap().has_begun_play());

    game.session.levels_streamed(Load::Transition(TransitionId(2))).unwrap();
    assert_eq!(game.streamed(2), [Notice::WorldBeganPlay(WorldId(2))]);
    assert!(game.replica.characters().get(PawnId(1)).unwrap().has_begun_play());

    let ended = game.handle(ServerMessage::EndTransition { transition_id: TransitionId(2) });
    assert_eq!(
        ended,
        [Notice::CharactersUnfrozen(TransitionId(2)), Notice::TransitionEnded(TransitionId(2))],
        "the world plays already: no second begin-play"
    );
    let own = game.replica.characters().get(PawnId(1)).unwrap();
    assert_eq!((own.gravity_scale(), own.is_input_enabled()), (1.0, true));
}

/// The server may end a transition before this client streamed (it joined during it): the
/// client is in the destination world all the same, which begins play at the end.
#[test]
fn a_transition_ended_before_the_client_streamed_begins_the_destinations_play() {
    let mut game = Game::new();
    game.handle(welcome());
    game.travel(3, "marsh");
    let ended = game.handle(ServerMessage::EndTransition { transition_id: TransitionId(3) });
    assert_eq!(ended.last(), Some(&Notice::WorldBeganPlay(WorldId(2))), "{ended:?}");
    assert!(game.replica.is_playing());
}

/// A streamed report for a transition whose world is no longer current (a newer transition
/// replaced it) begins no play; the current destination's own report does.
#[test]
fn a_streamed_report_for_a_replaced_transition_begins_no_play() {
    let mut game = Game::new();
    game.handle(welcome());
    game.travel(6, "marsh");
    game.travel(7, "forest");
    assert!(game.streamed(6).is_empty());
    assert!(!game.replica.is_playing());
    assert_eq!(game.streamed(7), [Notice::WorldBeganPlay(WorldId(3))]);
}

/// A stale end (of a transition no longer on screen) unfreezes nothing.
#[test]
fn a_stale_end_unfreezes_nothing() {
    let mut game = Game::new();
    game.handle(welcome());
    game.handle(ServerMessage::FreezeCharacters { transition_id: TransitionId(4) });
    game.handle(ServerMessage::FreezeCharacters { transition_id: TransitionId(5) });
    let stale = game.handle(ServerMessage::EndTransition { transition_id: TransitionId(4) });
    assert!(stale.is_empty(), "{stale:?}");
    assert!(game.replica.characters().are_frozen());
}

/// Own pawns are autonomous proxies, others simulated; possession is acknowledged in the
/// replica and unpossession ends it.
#[test]
fn own_pawns_are_autonomous_and_possession_follows_the_session() {
    let mut game = Game::new();
    game.handle(welcome());
    assert_eq!(game.handle(spawned(1, me())), [Notice::PawnSpawned(PawnId(1))]);
    game.handle(spawned(2, player("sim-0002")));
    let characters = game.replica.characters();
    assert_eq!(characters.get(PawnId(1)).unwrap().role(), NetRole::AutonomousProxy);
    assert_eq!(characters.get(PawnId(2)).unwrap().role(), NetRole::SimulatedProxy);
    assert!(characters.get(PawnId(2)).unwrap().has_begun_play(), "the world plays");

    let possessed = game.handle(ServerMessage::Possessed { pawn_id: PawnId(1) });
    assert_eq!(possessed, [Notice::Possessed(PawnId(1))]);
    assert!(game.replica.characters().get(PawnId(1)).unwrap().is_possession_acknowledged());
    let unpossessed = game.handle(ServerMessage::Unpossessed { pawn_id: PawnId(1) });
    assert_eq!(unpossessed, [Notice::Unpossessed(PawnId(1))]);
    assert_eq!(game.replica.characters().get(PawnId(1)).unwrap().role(), NetRole::None);
}

/// A replicated message that changes nothing (the same player state, tags, health, pawn, a
/// death already known) makes no notice; one that changes something makes exactly one.
#[test]
fn duplicates_make_no_notice() {
    let mut game = Game::new();
    game.handle(welcome());
    let you = player("sim-0002");
    let state = game.handle(player_state(you.clone(), 1));
    assert!(matches!(&state[..], [Notice::PlayerStateChanged(p, c)] if *p == you && c.appeared));
    let first =
        game.handle(ServerMessage::AbilityTagsChanged { player_id: you.clone(), tags: Vec::new() });
    assert_eq!(
        first,
        [Notice::AbilityTagsChanged(you.clone())],
        "the first tags are news, even none"
    );
    assert!(game.handle(player_state(you.clone(), 1)).is_empty());
    let tags =
        || ServerMessage::AbilityTagsChanged { player_id: you.clone(), tags: vec![STATE_DEAD] };
    assert_eq!(game.handle(tags()), [Notice::AbilityTagsChanged(you.clone())]);
    assert!(game.handle(tags()).is_empty());
    assert_eq!(game.replica.player_states().get(&you).unwrap().tags(), Some(&[STATE_DEAD][..]));
    let none = ServerMessage::AbilityTagsChanged { player_id: you.clone(), tags: Vec::new() };
    assert_eq!(game.handle(none), [Notice::AbilityTagsChanged(you.clone())]);
    let health = || ServerMessage::HealthChanged { player_id: you.clone(), health: 40 };
    assert_eq!(game.handle(health()), [Notice::HealthChanged(you.clone())]);
    assert!(game.handle(health()).is_empty());
    game.handle(spawned(7, you.clone()));
    assert!(game.handle(spawned(7, you.clone())).is_empty());
    assert_eq!(
        game.handle(ServerMessage::PawnDied { pawn_id: PawnId(7) }),
        [Notice::PawnDied(PawnId(7))]
    );
    assert!(game.handle(ServerMessage::PawnDied { pawn_id: PawnId(7) }).is_empty());
    let left = game.handle(ServerMessage::PlayerLeft { player_id: you.clone() });
    assert_eq!(left, [Notice::PlayerStateRemoved(you.clone())]);
    assert!(game.replica.player_states().get(&you).is_none());
}

/// The replica says who logged in and which player state is theirs; world serials read as
/// `world#N`.
#[test]
fn the_login_and_the_local_player_state_follow_the_session() {
    let mut game = Game::new();
    assert_eq!(game.replica.login(), &Login::Pending);
    game.handle(welcome());
    assert_eq!(game.replica.login(), &Login::Succeeded { player: me() });
    assert!(game.replica.local_player_state().is_none(), "not replicated yet");
    game.handle(player_state(player("sim-0002"), 2));
    assert!(game.replica.local_player_state().is_none(), "another player's");
    game.handle(player_state(me(), 1));
    assert_eq!(game.replica.local_player_state().unwrap().player(), &me());
    assert_eq!(WorldId(3).to_string(), "world#3");
}

/// A session the game dropped without `Closed` ends the login when told, once.
#[test]
fn a_dropped_session_ends_the_login_once() {
    let mut game = Game::new();
    game.handle(welcome());
    let mut ended = Replication::session_ended();
    assert_eq!(ended.next(&mut game.replica, game.t0), Some(Notice::LoginEnded(me())));
    assert_eq!(ended.next(&mut game.replica, game.t0), None);
    assert_eq!(game.replica.login(), &Login::Ended);
    let mut again = Replication::session_ended();
    assert_eq!(again.next(&mut game.replica, game.t0), None, "ended once");
}

/// A refused login and a closed session end the login once.
#[test]
fn a_closed_session_ends_the_login_once() {
    let mut game = Game::new();
    game.handle(welcome());
    let closed = game.handle(ServerMessage::Closing { code: 1, reason: "shutting down".into() });
    assert_eq!(closed, [Notice::LoginEnded(me())]);
    assert!(game.replica.local_player().is_none());
    let mut again = Replication::session_ended();
    assert_eq!(again.next(&mut game.replica, game.t0), None, "ended once");
}

/// Each notice is broadcast on its declared channel with its payload; a router without the
/// channels refuses, and says which error.
#[test]
fn notices_are_broadcast_on_their_declared_channels() {
    let mut channels = Channels::new();
    world::declare_channels(&mut channels).unwrap();
    let router: Router<Vec<PawnId>> = Router::new(RouterConfig::default(), channels);
    let mut heard: Vec<PawnId> = Vec::new();
    let _listener = router
        .listen(&mut heard, Listen::channel(PAWN_SPAWNED, Match::Exact), |d, n: &PawnNotice| {
            d.state().push(n.pawn)
        })
        .unwrap();
    Notice::PawnSpawned(PawnId(9)).broadcast(&router, &mut heard).unwrap();
    Notice::PawnDied(PawnId(9)).broadcast(&router, &mut heard).unwrap();
    assert_eq!(heard, [PawnId(9)], "only the spawn's channel was listened to");

    let bare: Router<()> = Router::new(RouterConfig::default(), Channels::new());
    assert!(Notice::PawnSpawned(PawnId(9)).broadcast(&bare, &mut ()).is_err());
}

/// A server change ends the world of the server left: every character destroyed and every
/// player state removed, one change per notice (each listener sees the replica after its own),
/// the freeze of the move's transition lifted; then the new server's world is created and
/// plays, its own pawns spawning unfrozen (docs/spec/travel.md V3, docs/spec/gates.md G7).
#[test]
fn a_server_change_ends_every_object_of_the_world_left_and_starts_the_new_servers() {
    let mut game = Game::new();
    game.handle(welcome());
    game.handle(player_state(me(), 1));
    game.handle(player_state(player("sim-0002"), 2));
    game.handle(spawned(1, me()));
    game.handle(spawned(2, player("sim-0002")));
    game.handle(ServerMessage::Possessed { pawn_id: PawnId(1) });
    game.handle(ServerMessage::FreezeCharacters { transition_id: TransitionId(7) });
    assert!(game.replica.characters().are_frozen());
    let changed =
        Event::ServerChanged { player: me(), node: Some(node("crypt")), max_frame_len: 1 };
    let mut replication = Replication::of(&changed);
    let replica = &mut game.replica;
    let mut next = || replication.next(replica, game.t0);
    assert_eq!(next(), Some(Notice::PawnDestroyed(PawnId(1))));
    assert_eq!(next(), Some(Notice::PawnDestroyed(PawnId(2))));
    assert_eq!(next(), Some(Notice::PlayerStateRemoved(me())));
    assert_eq!(next(), Some(Notice::PlayerStateRemoved(player("sim-0002"))));
    assert_eq!(next(), Some(Notice::WorldTornDown(WorldId(1))));
    assert_eq!(next(), Some(Notice::WorldCreated(WorldId(2))));
    assert_eq!(next(), Some(Notice::WorldBeganPlay(WorldId(2))));
    assert_eq!(next(), None);
    let replica = &game.replica;
    assert!(replica.characters().is_empty() && replica.player_states().is_empty());
    assert_eq!(replica.world().unwrap().node(), Some(&node("crypt")));
    assert_eq!(replica.local_player(), Some(&me()), "the login goes on");
    assert!(!replica.characters().are_frozen(), "the new server froze nothing");
    game.handle(spawned(4, me()));
    let own = game.replica.characters().get(PawnId(4)).unwrap();
    assert_eq!((own.gravity_scale(), own.has_begun_play()), (1.0, true));
}
