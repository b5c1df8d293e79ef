//! Player and session saves as the game core sees them: the relaunched player's saved preset
//! and kits arrive asynchronously, after possession may already have happened
//! (docs/spec/transitions.md T15), and the world's node is stale until the session save
//! restores it (T4).
//!
//! The core never touches the store: it asks for loads and saves with outputs and hears back
//! with inputs. A load that fails leaves the player playing the default preset, unsaved
//! (so the stored save is never overwritten with defaults), and never stuck.
//!
//! [`Session`] owns the session's node, where its save stands, and the player states of players
//! who left recently; a player's own save state is on its `Player` (`players.rs`). A settled load
//! only records its result and wakes the spawn queue: the advance pass retries what waited on
//! persistence (the travel's destination, spawns, the settle-hold).

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use gatehouse_protocol::{CharacterDef, NodeId, PlayerId, PlayerStateView, ServerId};
use gatehouse_tags::GameplayTag;

use super::ConnectionId;
use super::abilities::{ActiveEffect, EffectDuration};
use super::players::{KeptState, Persistence, ResolvedPreset};
use super::roster::Roster;
use super::streaming::WorldStreaming;
use crate::fields::Joined;
use crate::model::{LoadOutcome, PlayerSave, Preset, SessionSave};
use crate::world::WorldMap;

/// The session: the world's node and its save.
#[derive(Debug)]
pub(crate) struct Session {
    /// The session's current node: where the world is, or was told to be. Captured by spawn
    /// requests made before a travel resolves its destination (docs/spec/transitions.md T4).
    node: NodeId,
    save: SessionState,
    kept: KeptStates,
}

impl Session {
    /// A session on `start_node` whose save is loading.
    pub(crate) fn new(start_node: NodeId) -> Self {
        Session { node: start_node, save: SessionState::Loading, kept: KeptStates::default() }
    }

    /// The session's current node.
    pub(crate) fn node(&self) -> &NodeId {
        &self.node
    }

    /// The world moves to (or is restored to) `node`.
    pub(crate) fn set_node(&mut self, node: NodeId) {
        self.node = node;
    }

    /// Whether the session save is still loading.
    pub(crate) fn is_loading(&self) -> bool {
        self.save == SessionState::Loading
    }

    /// The session load settled: session saves carry `version`, or none are made (`None`).
    fn settle(&mut self, version: Option<u64>) {
        self.save = SessionState::Known { version };
    }

    /// The version session saves carry, if the session is saved at all.
    fn save_version(&self) -> Option<u64> {
        match self.save {
            SessionState::Known { version } => version,
            SessionState::Loading => None,
        }
    }

    /// Keeps the player state of a player who left, for a relaunch within `retention`.
    pub(crate) fn keep(&mut self, player: PlayerId, state: KeptState, retention: Duration) {
        if !retention.is_zero() {
            self.kept.keep(player, state, retention);
        }
    }

    /// Drops the player state `player` left, if one is kept: another server played it since
    /// (docs/spec/travel.md V17).
    pub(crate) fn forget_kept(&mut self, player: &PlayerId) {
        if self.kept.states.remove(player).is_some() {
            self.kept.order.retain(|p| p != player);
        }
    }

    /// The players whose state is kept, oldest first, and how many states are kept (as many).
    #[cfg(test)]
    pub(crate) fn kept(&self) -> (Vec<PlayerId>, usize) {
        (self.kept.order.iter().cloned().collect(), self.kept.states.len())
    }

    /// The player state a relaunching player left at most `retention` before `now`.
    pub(crate) fn take_kept(
        &mut self,
        player: &PlayerId,
        now: Instant,
        retention: Duration,
    ) -> Option<KeptState> {
        self.kept.take(player, now, retention)
    }
}

/// Where the session save stands.
#[derive(Debug, Clone, PartialEq, Eq)]
enum SessionState {
    /// The load is in flight: the world's node is the start node, possibly stale.
    Loading,
    /// Resolved. `version` is what the load found, and what every session save carries; `None`
    /// after a failed load, when the session is never saved (so the stored node is not
    /// overwritten blindly).
    Known {
        /// The version the next session save carries.
        version: Option<u64>,
    },
}

/// The player states of players who left recently, kept for a relaunch for the configured
/// retention (as engines keep inactive player states): death, effects, latches and team come
/// back with the player, and its class lets it spawn before its save reloads (a PlayPreset
/// relaunch: possession before the preset provider resolves).
#[derive(Debug, Default)]
struct KeptStates {
    /// Who left, oldest first (a player appears once: a second departure moves it last).
    order: VecDeque<PlayerId>,
    states: HashMap<PlayerId, KeptState>,
}

impl KeptStates {
    /// Kept states beyond this are dropped, oldest first, whatever the retention.
    const CAPACITY: usize = 4096;

    /// Keeps `state`, and drops the states kept longer than `retention` before its departure.
    fn keep(&mut self, player: PlayerId, state: KeptState, retention: Duration) {
        let now = state.left_at;
        if self.states.insert(player.clone(), state).is_some() {
            self.order.retain(|p| p != &player);
        }
        self.order.push_back(player);
        while let Some(oldest) = self.order.front() {
            let expired = self
                .states
                .get(oldest)
                .is_none_or(|s| now.saturating_duration_since(s.left_at) >= retention);
            if !expired && self.order.len() <= Self::CAPACITY {
                break;
            }
            if let Some(old) = self.order.pop_front() {
                self.states.remove(&old);
            }
        }
    }

    /// Takes the state `player` left at most `retention` before `now`.
    fn take(&mut self, player: &PlayerId, now: Instant, retention: Duration) -> Option<KeptState> {
        let state = self.states.remove(player)?;
        self.order.retain(|p| p != player);
        (now.saturating_duration_since(state.left_at) < retention).then_some(state)
    }
}

/// What a player's save load changed, for the game to replicate.
#[derive(Debug)]
pub(crate) enum PlayerLoad {
    /// Not the load the player waits for (it left, or relaunched since): nothing changed.
    Stale,
    /// The preset resolved (`failed`: from the default preset after a failed load).
    Applied {
        /// Whether the load failed (the player plays the default preset, unsaved).
        failed: bool,
        /// The server the loaded save names as its writer (docs/spec/travel.md V17).
        holder: Option<ServerId>,
        /// The player's connection.
        connection: ConnectionId,
        /// Its player state, if what clients were told changed.
        view: Option<PlayerStateView>,
        /// Its ability tags, if they changed.
        tags: Option<Vec<GameplayTag>>,
        /// Kits granted now (possession had already happened).
        granted: Vec<GameplayTag>,
    },
}

/// `OnLoadCompleted` for `id`'s load `ticket` in `world`: resolves the preset on its player
/// state in `roster` (a failed load plays the default one, unsaved) and grants the composed
/// kits if possession already happened. Returns what changed.
pub(crate) fn apply_player_load(
    world: &WorldMap,
    roster: &mut Roster,
    id: &PlayerId,
    ticket: u64,
    outcome: LoadOutcome<PlayerSave>,
) -> PlayerLoad {
    let Some(player) = roster.player(id) else { return PlayerLoad::Stale };
    if player.persistence != (Persistence::Loading { ticket }) {
        return PlayerLoad::Stale;
    }
    let failed = matches!(outcome, LoadOutcome::Failed(_));
    let holder = match &outcome {
        LoadOutcome::Found(save) => save.holder.clone(),
        LoadOutcome::NotFound | LoadOutcome::Failed(_) => None,
    };
    let (preset, persistence, inventory, equipment) = match outcome {
        LoadOutcome::Found(save) => {
            let version = save.version;
            (save.preset, Persistence::Loaded { version }, save.inventory, save.equipment)
        }
        LoadOutcome::NotFound => (
            new_player_preset(world, id),
            Persistence::Loaded { version: 0 },
            Vec::new(),
            Vec::new(),
        ),
        LoadOutcome::Failed(reason) => {
            tracing::warn!(player = %id, %reason,
                "save load failed: playing the default preset, and this session is not saved");
            let default = Preset::ReadOnly { name: world.default_preset.clone() };
            (default, Persistence::Disabled, Vec::new(), Vec::new())
        }
    };
    let (def, kits) = resolve_preset(world, id, &preset);
    let Some(mut player) = roster.player_mut(id) else { return PlayerLoad::Stale };
    // What clients were told already: only a change is replicated (admitting N players must
    // not cost more frames than the facts that changed).
    let (view_before, tags_before) = (player.view(), player.abilities.tags());
    player.persistence = persistence;
    player.inventory = inventory;
    for tag in &equipment {
        if !player.abilities.has_effect(*tag) {
            player.abilities.apply(ActiveEffect { tag: *tag, duration: EffectDuration::Infinite });
        }
    }
    player.equipment = equipment;
    match &player.character_def {
        None => player.character_def = Some(def),
        Some(current) if *current != def => {
            // A relaunch spawned with the remembered class; keep it for this session so the
            // pawn and its player state agree.
            tracing::info!(player = %id, remembered = %current, saved = %def,
                "saved character def differs from the remembered one; keeping the pawn's");
        }
        Some(_) => {}
    }
    player.preset = Some(ResolvedPreset { source: preset, kits: kits.clone() });
    // InitializeProvider: grants the composed kits if possession already happened.
    let granted = player.abilities.initialize_provider(&kits);
    let (connection, view, tags) = (player.connection, player.view(), player.abilities.tags());
    drop(player);
    tracing::debug!(player = %id, kits = %Joined(&kits), "preset resolved");
    PlayerLoad::Applied {
        failed,
        holder,
        connection,
        view: (view != view_before).then_some(view),
        tags: (tags != tags_before).then_some(tags),
        granted,
    }
}

impl Session {
    /// `OnLoadCompleted` for the session in `world`: the world's node is known now. Returns
    /// whether the load failed (the session is then never saved); `None` if no session load
    /// was awaited.
    pub(crate) fn apply_load(
        &mut self,
        world: &WorldMap,
        outcome: LoadOutcome<SessionSave>,
    ) -> Option<bool> {
        if !self.is_loading() {
            return None;
        }
        let version = match outcome {
            LoadOutcome::Found(save) => {
                if world.node(&save.node).is_some() {
                    tracing::info!(node = %save.node, "session save restores the world's node");
                    self.set_node(save.node);
                } else {
                    tracing::warn!(node = %save.node, "session save names a node this world lacks; starting at the start node");
                }
                Some(save.version)
            }
            LoadOutcome::NotFound => {
                tracing::info!("no session save; starting at the start node");
                Some(0)
            }
            LoadOutcome::Failed(reason) => {
                tracing::warn!(%reason, "session load failed; starting at the start node, and the session is not saved");
                None
            }
        };
        self.settle(version);
        Some(version.is_none())
    }

    /// Whether the session save and every save of a player in `roster` have settled: no load
    /// in flight, for the operators' snapshot.
    pub(crate) fn settled(&self, roster: &Roster) -> bool {
        !self.is_loading()
            && roster.players().all(|p| !matches!(p.persistence, Persistence::Loading { .. }))
    }

    /// Every load in flight, described for operators: `streaming`'s, the session save, the
    /// saves of players in `roster`.
    pub(crate) fn loads_in_flight(
        &self,
        roster: &Roster,
        streaming: &WorldStreaming,
    ) -> Vec<String> {
        let mut out = streaming.loads_in_flight();
        if self.is_loading() {
            out.push("session save".into());
        }
        for p in roster.players() {
            if let Persistence::Loading { ticket } = p.persistence {
                out.push(format!("save of {} (ticket {ticket})", p.id));
            }
        }
        out
    }

    /// The saves of every player in `roster` at `node` (those whose save loaded), written by
    /// `holder`, and the session's node and version if the session is saved at all.
    pub(crate) fn saves_at(
        &self,
        roster: &Roster,
        node: &NodeId,
        holder: Option<&ServerId>,
    ) -> (Vec<PlayerSave>, Option<u64>) {
        let saves = roster
            .ids()
            .filter_map(|id| player_save(roster, id, Some(node.clone()), holder))
            .collect();
        (saves, self.save_version())
    }
}

/// Whether a load the transition in flight waits for is in flight: progress that extends its
/// settle-hold (docs/protocol.md 4.2, "Progress"). Those are its node's `streaming` (the
/// levels, a dungeon's rooms) and the save of a player in `roster` whose placement it waits for
/// (one neither placed nor excused: a first login's pawn class comes with its save). A save an
/// arrival asked for is not one: the transition does not wait for arrivals, so a login or
/// relaunch once it waits for its clients can never push its deadline. The saves in flight when
/// it started settled before it resolved its destination. Scans the roster: asked only at a
/// settle deadline.
pub(crate) fn transition_load_in_flight(roster: &Roster, streaming: &WorldStreaming) -> bool {
    streaming.is_load_in_flight()
        || roster.players().any(|p| {
            !p.is_placed_or_excused() && matches!(p.persistence, Persistence::Loading { .. })
        })
}

/// The preset a player without a save starts with: a saved character or a read-only preset
/// from `world`'s catalog, chosen by the player id so runs are reproducible.
fn new_player_preset(world: &WorldMap, id: &PlayerId) -> Preset {
    let hash = id.as_str().bytes().fold(0u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b)));
    let presets = &world.presets;
    let Some(spec) = presets.get(hash as usize % presets.len().max(1)) else {
        return Preset::ReadOnly { name: world.default_preset.clone() };
    };
    if hash % 2 == 0 {
        Preset::Character { character_def: spec.character_def.clone(), kits: spec.kits.clone() }
    } else {
        Preset::ReadOnly { name: spec.name.clone() }
    }
}

/// The character def and kits a preset stands for in `world`. An unknown read-only preset
/// falls back to the default one, loudly.
fn resolve_preset(
    world: &WorldMap,
    id: &PlayerId,
    preset: &Preset,
) -> (CharacterDef, Vec<GameplayTag>) {
    match preset {
        Preset::Character { character_def, kits } => (character_def.clone(), kits.clone()),
        Preset::ReadOnly { name } => {
            let spec = world.preset(name).or_else(|| {
                tracing::warn!(player = %id, preset = %name, "unknown read-only preset; using the default");
                world.default_preset()
            });
            match spec {
                Some(spec) => (spec.character_def.clone(), spec.kits.clone()),
                // The world's default preset is checked to exist when the world loads.
                None => (world.presets[0].character_def.clone(), Vec::new()),
            }
        }
    }
}

/// A player's save at `node`, written by `holder` (this server's fleet id, docs/spec/travel.md
/// V17), if its save loaded (a failed load is never saved over).
///
/// Every save of a session carries the version its load found: the store worker, which applies
/// one player's saves in order, bases each on the newest version it wrote itself, so a save it
/// gave up on never makes the next one conflict, while a version another process wrote still
/// does.
pub(crate) fn player_save(
    roster: &Roster,
    id: &PlayerId,
    node: Option<NodeId>,
    holder: Option<&ServerId>,
) -> Option<PlayerSave> {
    let player = roster.player(id)?;
    let Persistence::Loaded { version } = &player.persistence else { return None };
    let preset = player.preset.as_ref()?;
    Some(PlayerSave {
        player: id.clone(),
        node,
        preset: preset.source.clone(),
        inventory: player.inventory.clone(),
        equipment: player.equipment.clone(),
        version: *version,
        handoff: None,
        holder: holder.cloned(),
    })
}

#[cfg(test)]
mod tests {
    use gatehouse_protocol::TeamId;

    use super::*;
    use crate::abilities::AbilityState;

    fn left_at(at: Instant) -> KeptState {
        KeptState {
            left_at: at,
            team: TeamId(1),
            character_def: None,
            abilities: AbilityState::new(100),
            possessed: Default::default(),
        }
    }

    fn id(s: &str) -> PlayerId {
        PlayerId::new(s).unwrap()
    }

    fn order(kept: &KeptStates) -> Vec<&str> {
        kept.order.iter().map(PlayerId::as_str).collect()
    }

    /// A player appears once in the departure order: a second departure moves it last.
    #[test]
    fn a_second_departure_moves_the_player_last_and_keeps_the_others() {
        let (t0, retention) = (Instant::now(), Duration::from_secs(60));
        let mut kept = KeptStates::default();
        kept.keep(id("a"), left_at(t0), retention);
        kept.keep(id("b"), left_at(t0), retention);
        kept.keep(id("a"), left_at(t0), retention);
        assert_eq!(order(&kept), ["b", "a"]);
        assert_eq!(kept.states.len(), 2);
    }

    /// A departure drops the states kept longer than the retention before it (so expired
    /// states do not wait for the capacity to go).
    #[test]
    fn a_departure_drops_the_states_kept_past_the_retention() {
        let (t0, retention) = (Instant::now(), Duration::from_secs(60));
        let mut kept = KeptStates::default();
        kept.keep(id("a"), left_at(t0), retention);
        kept.keep(id("b"), left_at(t0 + Duration::from_secs(30)), retention);
        kept.keep(id("c"), left_at(t0 + retention), retention);
        assert_eq!(order(&kept), ["b", "c"]);
        assert!(!kept.states.contains_key(&id("a")));
    }

    /// Taking a player's state leaves the others in the departure order.
    #[test]
    fn taking_a_state_leaves_the_others_in_order() {
        let (t0, retention) = (Instant::now(), Duration::from_secs(60));
        let mut kept = KeptStates::default();
        for p in ["a", "b", "c"] {
            kept.keep(id(p), left_at(t0), retention);
        }
        assert!(kept.take(&id("b"), t0, retention).is_some());
        assert_eq!(order(&kept), ["a", "c"]);
    }
}
