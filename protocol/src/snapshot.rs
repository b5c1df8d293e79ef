//! The world as it stands, for a client that just logged in (`WorldSnapshot`, protocol 9;
//! docs/protocol.md 4.5).
//!
//! A newcomer used to get one `PlayerStateUpdated` per player and one `PawnSpawned` per pawn
//! already in: at 4,000 players, 6,000 frames and over 150 KiB each. A snapshot carries the same
//! facts in a few frames, laid out so an entry costs little: the character definitions and nodes
//! are named once in a dictionary and referred to by a `u16` index, a pawn names its owner by its
//! index in the same message, and tags and health are listed only for the players whose value is
//! not the default. With protocol 10's varints (docs/protocol.md 3), about 22 bytes per player
//! with a pawn, for an 8-byte player id (36 in version 9).
//!
//! Each message is whole on its own (its dictionaries and the owners of its pawns are in it):
//! [`SnapshotBuilder`] cuts the world into messages that fit the frame limit. Decoding checks
//! every index (see [`SnapshotError`]), so [`WorldSnapshot::messages`] never fails.

use gatehouse_tags::GameplayTag;
use serde::{Deserialize, Serialize};

use crate::codec;
use crate::ids::{CharacterDef, NodeId, PawnId, PlayerId, TeamId};
use crate::messages::{PawnView, PlayerStateView, ServerMessage};

/// One player state of a snapshot: [`PlayerStateView`] with its character definition as an
/// index into [`WorldSnapshot::classes`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotPlayer {
    /// Whose player state.
    pub player_id: PlayerId,
    /// The match team, once processed.
    pub team: Option<TeamId>,
    /// The character definition, once the preset resolved: an index into the classes.
    pub class: Option<u16>,
}

/// One pawn of a snapshot: [`PawnView`] with its owner, class and node as indices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotPawn {
    /// The pawn.
    pub pawn_id: PawnId,
    /// Its owner: an index into the same message's players.
    pub owner: u16,
    /// Its class: an index into the classes.
    pub class: u16,
    /// The node it stands on: an index into the nodes.
    pub node: u16,
    /// False once its owner died in it.
    pub alive: bool,
}

/// The ability-state tags of one player of a snapshot (listed only when it holds any).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotTags {
    /// The player: an index into the same message's players.
    pub player: u16,
    /// Every tag it holds.
    pub tags: Vec<GameplayTag>,
}

/// The health of one player of a snapshot (listed only when it is not the world's maximum).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotHealth {
    /// The player: an index into the same message's players.
    pub player: u16,
    /// Its health.
    pub health: u32,
}

/// Part of the world as it stands: player states with their tags and health, and their pawns
/// (docs/protocol.md 4.5). On the wire its six lists, in this order. Built with
/// [`SnapshotBuilder`]; decoding refuses an index that names nothing.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(try_from = "RawSnapshot", into = "RawSnapshot")]
pub struct WorldSnapshot(RawSnapshot);

/// The snapshot's fields as they are on the wire, before their indices are checked.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
struct RawSnapshot {
    classes: Vec<CharacterDef>,
    nodes: Vec<NodeId>,
    players: Vec<SnapshotPlayer>,
    pawns: Vec<SnapshotPawn>,
    tags: Vec<SnapshotTags>,
    health: Vec<SnapshotHealth>,
}

/// Why a decoded snapshot was refused: an index past the end of the list it points into, or a
/// `tags` or `health` entry not after the one before it (each lists players at most once, in
/// ascending order).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("world snapshot: {what} {index} {reason} (the list holds {len})")]
pub struct SnapshotError {
    /// Which index: `player class`, `pawn owner`, `pawn class`, `pawn node`, `tags player`,
    /// `health player`.
    pub what: &'static str,
    /// The index.
    pub index: u16,
    /// The length of the list it points into.
    pub len: usize,
    /// What is wrong with it: `names nothing` or `is not after the one before`.
    pub reason: &'static str,
}

impl TryFrom<RawSnapshot> for WorldSnapshot {
    type Error = SnapshotError;

    fn try_from(raw: RawSnapshot) -> Result<Self, SnapshotError> {
        let check = |what, index: u16, len: usize| {
            if usize::from(index) < len {
                Ok(())
            } else {
                Err(SnapshotError { what, index, len, reason: "names nothing" })
            }
        };
        let (classes, nodes, players) = (raw.classes.len(), raw.nodes.len(), raw.players.len());
        for player in &raw.players {
            if let Some(class) = player.class {
                check("player class", class, classes)?;
            }
        }
        for pawn in &raw.pawns {
            check("pawn owner", pawn.owner, players)?;
            check("pawn class", pawn.class, classes)?;
            check("pawn node", pawn.node, nodes)?;
        }
        ascending("tags player", raw.tags.iter().map(|t| t.player), players)?;
        ascending("health player", raw.health.iter().map(|h| h.player), players)?;
        Ok(WorldSnapshot(raw))
    }
}

/// Checks that `indices` name players of a list of `len`, each at most once and in ascending
/// order (so a receiver walks them beside the players, never searches them).
fn ascending(
    what: &'static str,
    indices: impl Iterator<Item = u16>,
    len: usize,
) -> Result<(), SnapshotError> {
    let mut next = 0usize;
    for index in indices {
        if usize::from(index) >= len {
            return Err(SnapshotError { what, index, len, reason: "names nothing" });
        }
        if usize::from(index) < next {
            return Err(SnapshotError { what, index, len, reason: "is not after the one before" });
        }
        next = usize::from(index) + 1;
    }
    Ok(())
}

impl From<WorldSnapshot> for RawSnapshot {
    fn from(snapshot: WorldSnapshot) -> RawSnapshot {
        snapshot.0
    }
}

impl WorldSnapshot {
    /// How many player states it holds.
    pub fn player_count(&self) -> usize {
        self.0.players.len()
    }

    /// How many pawns it holds.
    pub fn pawn_count(&self) -> usize {
        self.0.pawns.len()
    }

    /// The messages it stands for, in the order a client applies them: for each player its
    /// `PlayerStateUpdated`, then its `AbilityTagsChanged` and `HealthChanged` where listed; then
    /// for each pawn its `PawnSpawned`, and `PawnDied` after it when it is dead
    /// (docs/protocol.md 4.5).
    pub fn messages(&self) -> impl Iterator<Item = ServerMessage> + '_ {
        let raw = &self.0;
        // Both lists ascend by player (checked on decode): walked beside the players.
        let mut tags = raw.tags.iter().peekable();
        let mut health = raw.health.iter().peekable();
        let players = raw.players.iter().enumerate().flat_map(move |(index, player)| {
            let view = PlayerStateView {
                player_id: player.player_id.clone(),
                team: player.team,
                character_def: player.class.map(|class| raw.classes[usize::from(class)].clone()),
            };
            let of = |entry: u16| usize::from(entry) == index;
            let tags = tags.next_if(|t| of(t.player)).map(|t| {
                let player_id = player.player_id.clone();
                ServerMessage::AbilityTagsChanged { player_id, tags: t.tags.clone() }
            });
            let health = health.next_if(|h| of(h.player)).map(|h| {
                let player_id = player.player_id.clone();
                ServerMessage::HealthChanged { player_id, health: h.health }
            });
            std::iter::once(ServerMessage::PlayerStateUpdated(view)).chain(tags).chain(health)
        });
        let pawns = raw.pawns.iter().flat_map(move |pawn| {
            let view = PawnView {
                pawn_id: pawn.pawn_id,
                owner: raw.players[usize::from(pawn.owner)].player_id.clone(),
                character_def: raw.classes[usize::from(pawn.class)].clone(),
                node: raw.nodes[usize::from(pawn.node)].clone(),
                alive: pawn.alive,
            };
            let died = (!pawn.alive).then_some(ServerMessage::PawnDied { pawn_id: pawn.pawn_id });
            std::iter::once(ServerMessage::PawnSpawned(view)).chain(died)
        });
        players.chain(pawns)
    }
}

/// What one player brings to a snapshot: its player state, its tags and health, its pawns.
#[derive(Debug, Clone, Copy)]
pub struct SnapshotEntry<'a> {
    /// Its player state.
    pub player: &'a PlayerStateView,
    /// Every tag its ability state holds (empty: listed nowhere).
    pub tags: &'a [GameplayTag],
    /// Its health, when it is not the world's maximum.
    pub health: Option<u32>,
    /// The pawns it owns (a dead one lingers beside its replacement).
    pub pawns: &'a [PawnView],
}

/// Cuts the world into [`WorldSnapshot`]s whose frames fit a frame limit: add each player with
/// [`SnapshotBuilder::add`], then take the messages with [`SnapshotBuilder::finish`].
///
/// The size of every message is counted exactly as it is added (the bincode layout of
/// docs/protocol.md 3, varints and all), so no frame is encoded twice to find it too long. A player whose own
/// entry could not fit an empty message (thousands of tags) still gets one message of its own,
/// which will not encode; no real player comes near it (a player id is at most 64 bytes, and
/// the smallest limit a server accepts is 8 KiB).
#[derive(Debug)]
pub struct SnapshotBuilder {
    /// The largest frame body, bytes.
    max_len: usize,
    done: Vec<WorldSnapshot>,
    current: RawSnapshot,
    /// The encoded body length of `current` as a `ServerMessage::WorldSnapshot`, bytes.
    len: usize,
}

/// The body length of a `WorldSnapshot` message with six empty lists, bytes: the variant index
/// and six list lengths.
fn empty_snapshot_len() -> usize {
    codec::encoded_len(&ServerMessage::WorldSnapshot(Box::default()))
}

/// Most players, classes or nodes one message holds: their indices are `u16`.
const MAX_INDEXED: usize = u16::MAX as usize + 1;

impl SnapshotBuilder {
    /// A builder of messages whose bodies are at most `max_frame_len` bytes (the server's
    /// `network.max_frame_len`, docs/protocol.md 2).
    pub fn new(max_frame_len: usize) -> Self {
        SnapshotBuilder {
            max_len: max_frame_len.min(codec::HARD_MAX_FRAME_LEN),
            done: Vec::new(),
            current: RawSnapshot::default(),
            len: empty_snapshot_len(),
        }
    }

    /// Adds one player with its tags, health and pawns, in a new message if it would not fit
    /// the current one.
    pub fn add(&mut self, entry: SnapshotEntry<'_>) {
        let grow = self.growth(&self.current, entry);
        // Indices are u16: a message holds at most 65,536 players, classes and nodes.
        let names = 1 + entry.pawns.len();
        let full = self.current.players.len() >= MAX_INDEXED
            || self.current.classes.len() + names > MAX_INDEXED
            || self.current.nodes.len() + names > MAX_INDEXED;
        if (self.len + grow > self.max_len || full) && !self.current.players.is_empty() {
            self.done.push(WorldSnapshot(std::mem::take(&mut self.current)));
            self.len = empty_snapshot_len();
        }
        self.len += self.growth(&self.current, entry);
        self.push(entry);
    }

    /// The messages, in order; none if no player was added.
    pub fn finish(mut self) -> Vec<WorldSnapshot> {
        if !self.current.players.is_empty() {
            self.done.push(WorldSnapshot(self.current));
        }
        self.done
    }

    /// The bytes `entry` adds to `current`: its entries with the indices `push` gives them, the
    /// dictionary names it is the first to use, and the lists' lengths where they grow a byte
    /// (docs/protocol.md 3: every index and length is a varint).
    fn growth(&self, current: &RawSnapshot, entry: SnapshotEntry<'_>) -> usize {
        let player = current.players.len();
        let mut grow =
            codec::encoded_len(&entry.player.player_id) + codec::encoded_len(&entry.player.team);
        let (mut classes, mut nodes) = (Vec::new(), Vec::new());
        let class =
            entry.player.character_def.as_ref().map(|class| {
                varint_len(index_in(&current.classes, &mut classes, class, &mut grow))
            });
        // An option's tag byte, then the index.
        grow += 1 + class.unwrap_or(0);
        for pawn in entry.pawns {
            let class = index_in(&current.classes, &mut classes, &pawn.character_def, &mut grow);
            let node = index_in(&current.nodes, &mut nodes, &pawn.node, &mut grow);
            grow += codec::encoded_len(&pawn.pawn_id)
                + varint_len(player)
                + varint_len(class)
                + varint_len(node)
                + codec::encoded_len(&pawn.alive);
        }
        let has_tags = !entry.tags.is_empty();
        if has_tags {
            grow += varint_len(player) + codec::encoded_len(entry.tags);
        }
        if let Some(health) = entry.health {
            grow += varint_len(player) + codec::encoded_len(&health);
        }
        let lists = [
            (current.classes.len(), classes.len()),
            (current.nodes.len(), nodes.len()),
            (current.players.len(), 1),
            (current.pawns.len(), entry.pawns.len()),
            (current.tags.len(), usize::from(has_tags)),
            (current.health.len(), usize::from(entry.health.is_some())),
        ];
        for (len, added) in lists {
            grow += varint_len(len + added) - varint_len(len);
        }
        grow
    }

    /// Adds `entry` to the current message.
    fn push(&mut self, entry: SnapshotEntry<'_>) {
        let raw = &mut self.current;
        // Fits: `add` cuts a message before its players, classes or nodes pass MAX_INDEXED.
        let player = raw.players.len() as u16;
        let class = entry.player.character_def.as_ref().map(|c| index_of(&mut raw.classes, c));
        raw.players.push(SnapshotPlayer {
            player_id: entry.player.player_id.clone(),
            team: entry.player.team,
            class,
        });
        for pawn in entry.pawns {
            let class = index_of(&mut raw.classes, &pawn.character_def);
            let node = index_of(&mut raw.nodes, &pawn.node);
            raw.pawns.push(SnapshotPawn {
                pawn_id: pawn.pawn_id,
                owner: player,
                class,
                node,
                alive: pawn.alive,
            });
        }
        if !entry.tags.is_empty() {
            raw.tags.push(SnapshotTags { player, tags: entry.tags.to_vec() });
        }
        if let Some(health) = entry.health {
            raw.health.push(SnapshotHealth { player, health });
        }
    }
}

/// The index `name` will have in a dictionary holding `names` and then the `added` ones: where
/// it is, or after them, added (and its bytes counted in `grow`) when it is new.
fn index_in<'n, T: PartialEq + Serialize>(
    names: &[T],
    added: &mut Vec<&'n T>,
    name: &'n T,
    grow: &mut usize,
) -> usize {
    if let Some(index) = names.iter().position(|n| n == name) {
        return index;
    }
    if let Some(index) = added.iter().position(|n| *n == name) {
        return names.len() + index;
    }
    added.push(name);
    *grow += codec::encoded_len(name);
    names.len() + added.len() - 1
}

/// The bytes `value` takes as a varint (an index, a list's length; docs/protocol.md 3).
fn varint_len(value: usize) -> usize {
    codec::encoded_len(&(value as u64))
}

/// The index of `name` in `names`, appended if it is not there yet.
fn index_of<T: PartialEq + Clone>(names: &mut Vec<T>, name: &T) -> u16 {
    let index = names.iter().position(|n| n == name).unwrap_or_else(|| {
        names.push(name.clone());
        names.len() - 1
    });
    // Fits: `add` cuts a message before a list passes MAX_INDEXED.
    index as u16
}

#[cfg(test)]
mod tests {
    // Test code: a failed expectation is a failed test.
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use gatehouse_tags::catalog;

    use super::*;
    use crate::codec::{decode_body, encode_frame};
    use crate::samples;

    fn player(index: usize) -> PlayerStateView {
        PlayerStateView {
            player_id: PlayerId::new(format!("sim-{index:04}")).unwrap(),
            team: Some(TeamId((index % 2) as u8)),
            character_def: Some(CharacterDef::new(["Vanguard", "Ranger"][index % 2]).unwrap()),
        }
    }

    fn pawn_of(player: &PlayerStateView, id: u64) -> PawnView {
        PawnView {
            pawn_id: PawnId(id),
            owner: player.player_id.clone(),
            character_def: player.character_def.clone().unwrap(),
            node: NodeId::new("harbor").unwrap(),
            alive: !id.is_multiple_of(7),
        }
    }

    fn body_len(snapshot: &WorldSnapshot) -> usize {
        let message = ServerMessage::WorldSnapshot(Box::new(snapshot.clone()));
        encode_frame(&message, codec::HARD_MAX_FRAME_LEN).unwrap().len() - LENGTH_PREFIX
    }

    const LENGTH_PREFIX: usize = codec::LENGTH_PREFIX_LEN;

    /// Past 250 players, pawns and tags, their indices and the lists' lengths take 3 bytes.
    #[test]
    fn the_builder_counts_each_message_to_the_byte() {
        let mut builder = SnapshotBuilder::new(codec::HARD_MAX_FRAME_LEN);
        for index in 0..1_300 {
            let view = player(index);
            let pawns: Vec<_> =
                (0..index % 3).map(|k| pawn_of(&view, (index * 3 + k) as u64)).collect();
            let tags = if index % 5 == 0 { vec![catalog::STATE_DEAD] } else { Vec::new() };
            let health = (index % 4 == 0).then_some(index as u32);
            builder.add(SnapshotEntry { player: &view, tags: &tags, health, pawns: &pawns });
            let current = WorldSnapshot(builder.current.clone());
            assert_eq!(builder.len, body_len(&current), "after player {index}");
        }
    }

    #[test]
    fn a_world_too_big_for_one_frame_is_cut_into_messages_that_each_fit() {
        let max = 1024;
        let mut builder = SnapshotBuilder::new(max);
        let views: Vec<_> = (0..200).map(player).collect();
        for (index, view) in views.iter().enumerate() {
            let pawns = [pawn_of(view, index as u64 + 1)];
            builder.add(SnapshotEntry { player: view, tags: &[], health: None, pawns: &pawns });
        }
        let messages = builder.finish();
        assert!(messages.len() > 1, "200 players do not fit 1 KiB");
        for message in &messages {
            assert!(body_len(message) <= max, "{} bytes", body_len(message));
        }
        // Every player once, in order, each message whole: its pawns' owners are in it.
        let spawned: Vec<_> = messages
            .iter()
            .flat_map(WorldSnapshot::messages)
            .filter_map(|m| match m {
                ServerMessage::PawnSpawned(pawn) => Some(pawn.owner),
                _ => None,
            })
            .collect();
        let expected: Vec<_> = views.iter().map(|v| v.player_id.clone()).collect();
        assert_eq!(spawned, expected);
        // Tight: each message but the last would not have taken the next one's first player.
        for pair in messages.windows(2) {
            let first = &pair[1].0.players[0];
            let grow = codec::encoded_len(first) + codec::encoded_len(&pair[1].0.pawns[0]);
            assert!(body_len(&pair[0]) + grow > max);
        }
    }

    /// Past 250 classes, a class's index takes 3 bytes: the builder counts the index each class
    /// gets, the player's own and its pawns' new classes, and a class its pawns share.
    #[test]
    fn the_builder_counts_class_indices_past_250_to_the_byte() {
        let mut builder = SnapshotBuilder::new(codec::HARD_MAX_FRAME_LEN);
        let class = |name: String| CharacterDef::new(name).unwrap();
        for index in 0..140 {
            let mut view = player(index);
            view.character_def = Some(class(format!("Own{index}")));
            // Two pawns of one new class: the second finds it among the entry's new names.
            let shared = class(format!("Kept{index}"));
            let pawns: Vec<_> = (0..2u64)
                .map(|k| PawnView {
                    character_def: shared.clone(),
                    ..pawn_of(&view, index as u64 * 2 + k)
                })
                .collect();
            builder.add(SnapshotEntry { player: &view, tags: &[], health: None, pawns: &pawns });
            let current = WorldSnapshot(builder.current.clone());
            assert_eq!(builder.len, body_len(&current), "after player {index}");
        }
        assert_eq!(builder.current.classes.len(), 280);
    }

    /// A message exactly at the frame limit is whole: the limit is the largest body allowed.
    #[test]
    fn players_that_fit_the_limit_to_the_byte_share_one_message() {
        let views: Vec<_> = (0..2).map(player).collect();
        let build = |max| {
            let mut builder = SnapshotBuilder::new(max);
            for view in &views {
                builder.add(SnapshotEntry { player: view, tags: &[], health: None, pawns: &[] });
            }
            builder.finish()
        };
        let exact = body_len(&build(codec::HARD_MAX_FRAME_LEN)[0]);
        assert_eq!(build(exact).len(), 1, "{exact} bytes fit {exact}");
        assert_eq!(build(exact - 1).len(), 2, "one byte less does not");
    }

    #[test]
    fn a_snapshot_costs_at_most_40_bytes_per_player_with_a_pawn() {
        let players = 4_000;
        let mut builder = SnapshotBuilder::new(codec::HARD_MAX_FRAME_LEN);
        for index in 0..players {
            let view = player(index);
            let pawns = [pawn_of(&view, index as u64 + 1)];
            builder.add(SnapshotEntry { player: &view, tags: &[], health: None, pawns: &pawns });
        }
        let messages = builder.finish();
        let bytes: usize = messages.iter().map(|m| body_len(m) + LENGTH_PREFIX).sum();
        let per_player = bytes as f64 / players as f64;
        println!("{per_player:.1} bytes per player with a pawn, at {players} players");
        assert!(per_player <= 40.0, "{per_player:.1} bytes per player");
    }

    #[test]
    fn a_snapshot_stands_for_the_messages_a_newcomer_used_to_get() {
        let snapshot = samples::world_snapshot();
        let messages: Vec<_> = snapshot.messages().collect();
        let names: Vec<_> = messages.iter().map(ServerMessage::name).collect();
        assert_eq!(
            names,
            [
                "PlayerStateUpdated",
                "AbilityTagsChanged",
                "HealthChanged",
                "PlayerStateUpdated",
                "PawnSpawned",
                "PawnDied"
            ]
        );
        let ServerMessage::PawnSpawned(pawn) = &messages[4] else { unreachable!() };
        assert_eq!(pawn.owner.as_str(), "sim-0001");
        assert_eq!(pawn.node.as_str(), "harbor");
        assert!(!pawn.alive);
        let ServerMessage::PlayerStateUpdated(second) = &messages[3] else { unreachable!() };
        assert_eq!((second.team, second.character_def.as_ref()), (Some(TeamId(1)), None));
    }

    #[test]
    fn decoding_refuses_an_index_that_names_nothing() {
        let good = samples::world_snapshot().0;
        type Break = fn(&mut RawSnapshot);
        let breaks: [(&str, Break); 8] = [
            ("player class", |raw| raw.players[1].class = Some(5)),
            ("pawn owner", |raw| raw.pawns[0].owner = 2),
            ("pawn class", |raw| raw.pawns[0].class = 1),
            ("pawn node", |raw| raw.pawns[0].node = 1),
            ("tags player", |raw| raw.tags[0].player = 9),
            ("health player", |raw| raw.health[0].player = 2),
            ("tags player 0 is not after", |raw| raw.tags.push(raw.tags[0].clone())),
            ("health player 0 is not after", |raw| raw.health.push(raw.health[0])),
        ];
        for (what, break_it) in breaks {
            let mut raw = good.clone();
            break_it(&mut raw);
            // The body of a WorldSnapshot message holding `raw` as it is.
            let message = ServerMessage::WorldSnapshot(Box::new(WorldSnapshot(raw)));
            let frame = encode_frame(&message, codec::HARD_MAX_FRAME_LEN).unwrap();
            let err = decode_body::<ServerMessage>(&frame[LENGTH_PREFIX..]).unwrap_err();
            assert!(err.to_string().contains(what), "{what}: {err}");
        }
        let message = ServerMessage::WorldSnapshot(Box::new(WorldSnapshot(good)));
        let frame = encode_frame(&message, codec::HARD_MAX_FRAME_LEN).unwrap();
        assert_eq!(decode_body::<ServerMessage>(&frame[LENGTH_PREFIX..]).unwrap(), message);
    }
}
