//! The client's shared state: what every router listener and every registry callback works on.
//!
//! [`ClientCore`] is the router's state (`Router<ClientCore>`): it holds the lifecycle registry
//! next to [`ClientState`], which is the registry's caller state (`Registry<ClientState>`). A
//! router listener therefore reaches the domain, the registry and the adapters' bookkeeping; a
//! registry callback reaches the domain and the bookkeeping, and leaves what needs the router in
//! the outbox for the gates' pump. It lives with the adapters, the lowest layer that listens:
//! it holds the domain, the adapters' bookkeeping, the outbox and the figures every layer counts
//! into, and nothing of a layer above (the live checks keep their own account). This module
//! owns the layout of that state and the naming of objects for logs; the behaviour lives in the
//! adapters.

use std::collections::VecDeque;
use std::time::Instant;

use gatehouse_client::gates::Subscriptions;
use gatehouse_lifecycle::{ObjectId, Registry, ScopeToken};
use gatehouse_messaging::Lifetime;
use gatehouse_protocol::PlayerId;

use crate::domain::Domain;
use crate::figures::GateStats;
use crate::ids::{self, ObjectKind, PlayerStateIds, WorldId};

use super::character::CharacterRecords;
use super::local_player::LocalPlayerGate;
use super::outbox::Dispatch;
use super::pawn_team::PawnTeamRequests;
use super::rep_notify::RepNotifies;

/// The router's state: the lifecycle registry and everything its callbacks touch.
#[derive(Debug)]
pub struct ClientCore {
    pub(crate) registry: Registry<ClientState>,
    pub(crate) state: ClientState,
    /// The public gate subscriptions made so far (they name each one's wait).
    pub(crate) subscriptions: Subscriptions,
}

/// The scopes of the current world that every adapter needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WorldScopes {
    /// The world's serial.
    pub(crate) id: WorldId,
    /// The world's own scope (its lifetime is itself).
    pub(crate) world: ScopeToken,
    /// The local player's scope in this world: the one local viewer.
    pub(crate) local_player: Option<ScopeToken>,
}

/// The registry's caller state: the domain objects, the adapters' bookkeeping, the outbox of
/// dispatches waiting for the router, and the figures.
#[derive(Debug)]
pub struct ClientState {
    /// The time of the call being handled.
    pub(crate) now: Instant,
    pub(crate) domain: Domain,
    pub(crate) player_state_ids: PlayerStateIds,
    /// The current world's scopes, while a world is attached.
    pub(crate) world: Option<WorldScopes>,
    /// The character adapter's record of each scoped pawn generation.
    pub(crate) characters: CharacterRecords,
    /// The character adapter's deferred RepNotifies of remote generations.
    pub(crate) rep_notifies: RepNotifies,
    /// The pawn team presentation's requests.
    pub(crate) pawn_team: PawnTeamRequests,
    /// The widget/team gate's readiness period.
    pub(crate) local_player_gate: LocalPlayerGate,
    /// Work that needs the router, in the order it arose.
    pub(crate) outbox: VecDeque<Dispatch>,
    /// The outbox is being pumped: a nested pump returns at once.
    pub(crate) pumping: bool,
    /// What every layer counted so far, and every violation recorded.
    pub(crate) stats: GateStats,
    /// The listeners the adapters hold for the current world; retired at its teardown.
    pub(crate) world_listeners: Option<Lifetime>,
    /// The validated player whose login the login scope's current generation stands for.
    pub(crate) login_session: Option<PlayerId>,
}

impl ClientCore {
    pub(crate) fn new(domain: Domain, now: Instant) -> ClientCore {
        ClientCore {
            registry: Registry::new(),
            subscriptions: Subscriptions::default(),
            state: ClientState {
                now,
                domain,
                player_state_ids: PlayerStateIds::default(),
                world: None,
                characters: CharacterRecords::default(),
                rep_notifies: RepNotifies::default(),
                pawn_team: PawnTeamRequests::default(),
                local_player_gate: LocalPlayerGate::default(),
                outbox: VecDeque::new(),
                pumping: false,
                stats: GateStats::default(),
                world_listeners: None,
                login_session: None,
            },
        }
    }

    /// The lifecycle registry.
    pub fn registry(&self) -> &Registry<ClientState> {
        &self.registry
    }

    /// The registry's caller state.
    pub fn state(&self) -> &ClientState {
        &self.state
    }

    /// `IsCharacterInitGateOpen`: whether `pawn`'s current generation has opened its character
    /// gate. It reads true from the moment the gate is latched and revalidated, before any
    /// external callback runs (docs/spec/gates.md G14: the adapter latches before it broadcasts
    /// `OnLocalCharacterInitGateOpened`), so a delegate listener already sees it open; the
    /// `InitGateOpened` fact follows once the dispatch path completes.
    pub fn is_character_init_gate_open(&self, pawn: gatehouse_protocol::PawnId) -> bool {
        self.state.characters.is_open(pawn)
    }
}

impl ClientState {
    /// The domain objects.
    pub fn domain(&self) -> &Domain {
        &self.domain
    }

    /// The current player-state object of `player`, if one was ever scoped.
    pub fn player_state_object(&self, player: &PlayerId) -> Option<ObjectId> {
        self.player_state_ids.get(player)
    }

    /// A readable name for an object: `pawn 12`, `player state sim-0003`, `world#2`.
    pub fn describe(&self, object: ObjectId) -> String {
        match ObjectKind::of(object) {
            Some(ObjectKind::Pawn) => {
                ids::pawn_of(object).map_or_else(|| object.to_string(), |p| format!("pawn {p}"))
            }
            Some(ObjectKind::PlayerState) => self
                .player_state_ids
                .player_of(object)
                .map_or_else(|| object.to_string(), |p| format!("player state {p}")),
            Some(ObjectKind::World) => format!("world#{}", ids::number_of(object)),
            Some(ObjectKind::LocalPlayer) => "local player".to_owned(),
            Some(ObjectKind::Login) => "login".to_owned(),
            Some(ObjectKind::GameInstance) => "game instance".to_owned(),
            Some(ObjectKind::Listener) => {
                format!("listener #{}", ids::number_of(object))
            }
            _ => object.to_string(),
        }
    }

    /// What the client counted so far: gate events, deferrals, violations.
    pub fn stats(&self) -> &GateStats {
        &self.stats
    }
}
