//! The save model: what is persisted per player and per session. The relaunched player's saved
//! node, preset and kits arrive asynchronously, after possession (docs/spec/transitions.md T4,
//! T15).
//!
//! Pure data shared by the game core (which decides what to load and save) and the store
//! (which reads and writes it), so neither imports the other. Nothing here does I/O.
//!
//! A travel's handoff save (docs/spec/travel.md V2) also carries a [`HandoffState`]: the part of
//! a player state that otherwise lives only in the core's memory.

use std::collections::BTreeSet;
use std::fmt;

use gatehouse_protocol::{CharacterDef, NodeId, PlayerId, ServerId, TeamId};
use gatehouse_tags::GameplayTag;
use gatehouse_tags::catalog::STATE_DEAD;
use serde::{Deserialize, Serialize};

/// Everything saved for one player (keyed by the token's player id).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlayerSave {
    /// Whose save.
    pub player: PlayerId,
    /// The world-map node the player was last placed on. A server runs one world whose node is
    /// the session's, so this records where the player stood (for operators, and for another
    /// process sharing the store); it does not steer travel.
    pub node: Option<NodeId>,
    /// The character the player plays.
    pub preset: Preset,
    /// Inventory: belongs to the player (its controller, not the pawn); survives pawn swaps.
    pub inventory: Vec<InventoryItem>,
    /// Equipment: belongs to the player state; each entry is an infinite-duration effect
    /// (e.g. `Effect.Equipment.Armor`) that survives respawn.
    pub equipment: Vec<GameplayTag>,
    /// Bumped by every save; 0 for a player never saved. A save carrying a version other than
    /// the stored one is a conflict (another process saved meanwhile).
    pub version: u64,
    /// The rest of the player state, in a travel's handoff save only (docs/spec/travel.md V2,
    /// V4): `None` in every other save, and a save without one stores none (store schema 2,
    /// column `players.handoff`). Boxed: most saves have none, and every save (and every core
    /// input or output carrying one) stays the size it was.
    pub handoff: Option<Box<HandoffState>>,
    /// The server that wrote it: its `fleet.server_id` (store schema 3, column
    /// `players.held_by`; docs/spec/travel.md V17). Every save of a server in a fleet names it
    /// (a claim the destination, a recall the source); `None` for a server in no fleet, and for
    /// a row written before schema 3. A session-token login that loads a save another server
    /// holds takes the player.
    pub holder: Option<ServerId>,
}

/// What a handoff save carries beyond a plain save (docs/spec/travel.md V2): the player state
/// the core otherwise keeps only in memory (docs/spec/sessions.md S9 keeps the same for a
/// relaunch), so the destination places the player as it left the source (V4).
///
/// Mirrors the core's `Player::team` and its `AbilityState` (`game/src/players.rs`,
/// `game/src/abilities.rs`), with every finite effect paused: times are what is left, in
/// milliseconds, never a clock reading, so the destination resumes them on its own clock.
/// Not carried: the maximum health (the world's `max_health`, the same for every player of a
/// world: the destination's applies), the pawns (ids of the source's process), and the class
/// (the save's preset names it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HandoffState {
    /// The player's team (`Player::team`); never team 0, which means "no team".
    pub team: TeamId,
    /// Health points (`AbilityState::health`); 0 for a dead player.
    pub health: u32,
    /// The state tags held (`AbilityState`'s own tags, not its effects'), in catalog order.
    /// Death is `State.Dead` among them, as the core keeps it ([`HandoffState::is_dead`]): a
    /// dead player arrives dead (docs/spec/sessions.md S11) with the effect that killed it.
    pub tags: BTreeSet<GameplayTag>,
    /// The active effects (`AbilityState`'s), in the order the core applied them: equipment
    /// modifiers (infinite, also listed in [`PlayerSave::equipment`]) and damage over time
    /// with the time it has left.
    pub effects: Vec<HandoffEffect>,
    /// The kit-grant latches (docs/spec/transitions.md T15, T16): a traveller is told its
    /// kits once and granted none again.
    pub kits: KitLatches,
}

/// One active effect in a handoff save (the core's `ActiveEffect`, paused).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HandoffEffect {
    /// The effect's tag, e.g. `Effect.Equipment.Armor` or `Effect.DamageOverTime.Poison`.
    pub tag: GameplayTag,
    /// How long it lasts from the handoff on.
    pub duration: HandoffDuration,
}

/// How long a handed-off effect lasts (the core's `EffectDuration`, paused: each `Instant`
/// becomes the milliseconds left until it from the moment the effects were paused).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum HandoffDuration {
    /// Equipment modifiers, kit passives, auras: they belong to the character, not the life.
    Infinite,
    /// Damage over time: `damage` every `tick_ms` until it expires.
    Finite {
        /// Milliseconds left until it expires.
        left_ms: u64,
        /// Milliseconds left until its next tick (may exceed `left_ms`: no tick is due then).
        next_tick_ms: u64,
        /// Milliseconds between ticks; at least 1.
        tick_ms: u64,
        /// Health points each tick takes.
        damage: u32,
    },
}

/// The kit-grant latches of one player state (docs/spec/transitions.md T15, T16; the core's
/// `AbilityState` latches).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KitLatches {
    /// The startup kits were granted (set at the first possession, `InitAbilityActorInfo`).
    pub startup_granted: bool,
    /// The composed kits were granted (the self-latch of `GiveComposedKits`), even if none.
    pub composed_granted: bool,
    /// Every kit granted so far, in catalog order.
    pub granted: BTreeSet<GameplayTag>,
}

/// Why a [`HandoffState`] cannot be what the core handed off.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum HandoffDefect {
    /// Its team is team 0, which the core never assigns (it means "no team").
    NoTeam,
    /// A finite effect ticks every 0 ms (the core would tick it for ever).
    ZeroTick {
        /// The effect's index in [`HandoffState::effects`].
        effect: usize,
        /// The effect's tag.
        tag: GameplayTag,
    },
}

impl fmt::Display for HandoffDefect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HandoffDefect::NoTeam => {
                write!(f, "expected a team of 1 or more, found team 0 (no team)")
            }
            HandoffDefect::ZeroTick { effect, tag } => write!(
                f,
                "expected effects[{effect}] ({tag}) to tick every 1 ms or more, found tick_ms 0"
            ),
        }
    }
}

impl std::error::Error for HandoffDefect {}

impl HandoffState {
    /// A sample with every field set, for tests, benchmarks and fuzz seeds: a dead player on
    /// team 2 whose poison (the effect that killed it) has 1,250 ms left, wearing armour, its
    /// startup and composed kits granted.
    pub fn sample() -> HandoffState {
        let tag = |name: &str| GameplayTag::parse(name);
        // The names below are the catalog's; a failure here is a bug in this function.
        #[allow(clippy::expect_used)]
        let tag = |name: &str| tag(name).expect("sample tags are in the catalog");
        HandoffState {
            team: TeamId(2),
            health: 0,
            tags: [tag("State.Dead")].into(),
            effects: vec![
                HandoffEffect {
                    tag: tag("Effect.Equipment.Armor"),
                    duration: HandoffDuration::Infinite,
                },
                HandoffEffect {
                    tag: tag("Effect.DamageOverTime.Poison"),
                    duration: HandoffDuration::Finite {
                        left_ms: 1_250,
                        next_tick_ms: 150,
                        tick_ms: 250,
                        damage: 30,
                    },
                },
            ],
            kits: KitLatches {
                startup_granted: true,
                composed_granted: true,
                granted: [tag("Kit.Startup.Movement"), tag("Kit.Composed.Vanguard")].into(),
            },
        }
    }

    /// Whether the player was dead when handed off: `State.Dead` is among its tags, as in the
    /// core's `AbilityState::is_dead`.
    pub fn is_dead(&self) -> bool {
        self.tags.contains(&STATE_DEAD)
    }

    /// Checks what the types alone do not: a team, and a tick of 1 ms or more on every finite
    /// effect.
    ///
    /// # Errors
    /// The first [`HandoffDefect`] found: [`HandoffDefect::NoTeam`], then
    /// [`HandoffDefect::ZeroTick`] naming the effect.
    pub fn check(&self) -> Result<(), HandoffDefect> {
        if self.team == TeamId(0) {
            return Err(HandoffDefect::NoTeam);
        }
        for (index, effect) in self.effects.iter().enumerate() {
            if let HandoffDuration::Finite { tick_ms: 0, .. } = effect.duration {
                return Err(HandoffDefect::ZeroTick { effect: index, tag: effect.tag });
            }
        }
        Ok(())
    }
}

/// The character a player plays: a saved character, or a read-only preset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Preset {
    /// A saved character: its definition and composed kits are written back with the save.
    Character {
        /// The pawn class.
        character_def: CharacterDef,
        /// The composed ability kits (`Kit.Composed.*`).
        kits: Vec<GameplayTag>,
    },
    /// A read-only preset from the world's preset catalog, referenced by name. Saving a player
    /// who uses one never writes the preset itself.
    ReadOnly {
        /// The preset's name in the catalog.
        name: String,
    },
}

/// One inventory entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InventoryItem {
    /// Item name.
    pub item: String,
    /// How many.
    pub count: u32,
}

/// What is saved for the session (the world one server process runs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionSave {
    /// The session's name (config `store.session`); one row per server world.
    pub session: String,
    /// The world's current node, restored before the boot travel.
    pub node: NodeId,
    /// Bumped by every save.
    pub version: u64,
}

/// How a load ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoadOutcome<T> {
    /// The save exists.
    Found(T),
    /// Nothing was ever saved under this key.
    NotFound,
    /// The store failed, or did not answer within `load_timeout`; the reason, for logs.
    Failed(String),
}
