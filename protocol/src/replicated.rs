//! How a `Replicated` message lies on the wire (docs/protocol.md 4.4; version 12).
//!
//! While players log in, most of what every client is sent is newcomers: each one's player
//! state and pawn. Spelled out, its class is written twice and its node once, 25 of the 52
//! bytes a newcomer costs every other client. So a `Replicated` message names the character
//! definitions and nodes its changes use once, in two lists before the changes, and each change
//! refers to them by a `u16` index, as a snapshot does (docs/protocol.md 4.5): a newcomer then
//! costs every other client 30 bytes.
//!
//! [`crate::ServerMessage::Replicated`] holds its changes whole ([`ReplicatedChange`]); this
//! module turns them into the wire's form ([`WireChange`], with [`Names`]) and back, checking
//! every index on the way in. The codec's `ReplicationBatch` builds the same form one change at
//! a time.

use gatehouse_tags::GameplayTag;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::ids::{CharacterDef, NodeId, PawnId, PlayerId, TeamId};
use crate::messages::{PawnView, PlayerStateView, ReplicatedChange};
use crate::runs::PawnIdRuns;

/// The names a `Replicated` message's changes refer to by index: its two lists, each name once,
/// in the order the changes first use them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Names {
    /// The character definitions.
    pub(crate) classes: Vec<CharacterDef>,
    /// The nodes.
    pub(crate) nodes: Vec<NodeId>,
}

/// A list of [`Names`] holds the most names its `u16` indices can tell apart, and a change
/// named one more.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a Replicated message names at most 65,536 {0}")]
pub(crate) struct TooManyNames(&'static str);

impl Names {
    /// How many classes and nodes it holds.
    pub(crate) fn lens(&self) -> (usize, usize) {
        (self.classes.len(), self.nodes.len())
    }

    /// Forgets the names past the first `classes` and `nodes` (to undo a change's).
    pub(crate) fn truncate(&mut self, (classes, nodes): (usize, usize)) {
        self.classes.truncate(classes);
        self.nodes.truncate(nodes);
    }

    /// Forgets every name.
    pub(crate) fn clear(&mut self) {
        self.truncate((0, 0));
    }

    /// The class and the node `change` names that the lists do not hold yet.
    pub(crate) fn unknown<'a>(&self, change: &'a ReplicatedChange) -> [Option<&'a str>; 2] {
        let (class, node) = match change {
            ReplicatedChange::PlayerStateUpdated(view) => (view.character_def.as_ref(), None),
            ReplicatedChange::PawnSpawned(view) => (Some(&view.character_def), Some(&view.node)),
            ReplicatedChange::PawnsTeleported { node, .. } => (None, Some(node)),
            _ => (None, None),
        };
        [
            class.filter(|c| !self.classes.contains(c)).map(CharacterDef::as_str),
            node.filter(|n| !self.nodes.contains(n)).map(NodeId::as_str),
        ]
    }

    fn class(&mut self, class: &CharacterDef) -> Result<u16, TooManyNames> {
        index_of(&mut self.classes, class, "classes")
    }

    fn node(&mut self, node: &NodeId) -> Result<u16, TooManyNames> {
        index_of(&mut self.nodes, node, "nodes")
    }
}

/// The index of `name` in `list`, added at its end if it is not there yet. A linear search: a
/// message names the few classes and nodes of one world.
fn index_of<T: PartialEq + Clone>(
    list: &mut Vec<T>,
    name: &T,
    what: &'static str,
) -> Result<u16, TooManyNames> {
    if let Some(index) = list.iter().position(|known| known == name) {
        // Every index in the list fits: none is added past u16::MAX.
        return u16::try_from(index).map_err(|_| TooManyNames(what));
    }
    let index = u16::try_from(list.len()).map_err(|_| TooManyNames(what))?;
    list.push(name.clone());
    Ok(index)
}

/// A [`ReplicatedChange`] as it lies on the wire: the same variants in the same order, each
/// class and node an index into its message's [`Names`] (docs/protocol.md 5).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[allow(missing_docs)] // Each field is the field of the same name of the same change.
pub(crate) enum WireChange {
    PlayerStateUpdated { player_id: PlayerId, team: Option<TeamId>, class: Option<u16> },
    PlayerLeft { player_id: PlayerId },
    PawnSpawned { pawn_id: PawnId, owner: PlayerId, class: u16, node: u16, alive: bool },
    PawnDestroyed { pawn_id: PawnId },
    AbilityTagsChanged { player_id: PlayerId, tags: Vec<GameplayTag> },
    HealthChanged { player_id: PlayerId, health: u32 },
    PawnDied { pawn_id: PawnId },
    PawnsTeleported { node: u16, pawn_ids: PawnIdRuns },
}

/// Why a decoded `Replicated` message was refused: a change's index past the end of the list
/// it points into.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Replicated: change {change}'s {what} {index} names nothing (the list holds {len})")]
pub(crate) struct IndexError {
    /// Which change, counted from 0.
    change: usize,
    /// Which index: `class` or `node`.
    what: &'static str,
    /// The index.
    index: u16,
    /// The length of the list it points into.
    len: usize,
}

impl IndexError {
    /// `index`, the `what` of change `change`, if it names an entry of a list of `len`.
    ///
    /// # Errors
    /// The error naming them when it does not.
    pub(crate) fn check(
        change: usize,
        what: &'static str,
        index: u16,
        len: usize,
    ) -> Result<(), IndexError> {
        if usize::from(index) < len { Ok(()) } else { Err(IndexError { change, what, index, len }) }
    }
}

impl WireChange {
    /// `change` in the wire's form, its names looked up in `names` (and added to it when new).
    ///
    /// # Errors
    /// [`TooManyNames`] when a list is full; `names` may then hold the change's other name.
    pub(crate) fn new(change: &ReplicatedChange, names: &mut Names) -> Result<Self, TooManyNames> {
        Ok(match change {
            ReplicatedChange::PlayerStateUpdated(view) => WireChange::PlayerStateUpdated {
                player_id: view.player_id.clone(),
                team: view.team,
                class: view.character_def.as_ref().map(|def| names.class(def)).transpose()?,
            },
            ReplicatedChange::PlayerLeft { player_id } => {
                WireChange::PlayerLeft { player_id: player_id.clone() }
            }
            ReplicatedChange::PawnSpawned(view) => WireChange::PawnSpawned {
                pawn_id: view.pawn_id,
                owner: view.owner.clone(),
                class: names.class(&view.character_def)?,
                node: names.node(&view.node)?,
                alive: view.alive,
            },
            ReplicatedChange::PawnDestroyed { pawn_id } => {
                WireChange::PawnDestroyed { pawn_id: *pawn_id }
            }
            ReplicatedChange::AbilityTagsChanged { player_id, tags } => {
                WireChange::AbilityTagsChanged { player_id: player_id.clone(), tags: tags.clone() }
            }
            ReplicatedChange::HealthChanged { player_id, health } => {
                WireChange::HealthChanged { player_id: player_id.clone(), health: *health }
            }
            ReplicatedChange::PawnDied { pawn_id } => WireChange::PawnDied { pawn_id: *pawn_id },
            ReplicatedChange::PawnsTeleported { node, pawn_ids } => {
                WireChange::PawnsTeleported { node: names.node(node)?, pawn_ids: pawn_ids.clone() }
            }
        })
    }

    /// The change it stands for, its indices resolved in `names`; `change` is its place in
    /// its message, for the error.
    ///
    /// # Errors
    /// [`IndexError`] when an index names nothing.
    pub(crate) fn resolve(
        self,
        names: &Names,
        change: usize,
    ) -> Result<ReplicatedChange, IndexError> {
        let class = |index| entry(&names.classes, change, "class", index);
        let node = |index| entry(&names.nodes, change, "node", index);
        Ok(match self {
            WireChange::PlayerStateUpdated { player_id, team, class: index } => {
                let character_def = index.map(class).transpose()?;
                ReplicatedChange::PlayerStateUpdated(PlayerStateView {
                    player_id,
                    team,
                    character_def,
                })
            }
            WireChange::PlayerLeft { player_id } => ReplicatedChange::PlayerLeft { player_id },
            WireChange::PawnSpawned { pawn_id, owner, class: c, node: n, alive } => {
                ReplicatedChange::PawnSpawned(PawnView {
                    pawn_id,
                    owner,
                    character_def: class(c)?,
                    node: node(n)?,
                    alive,
                })
            }
            WireChange::PawnDestroyed { pawn_id } => ReplicatedChange::PawnDestroyed { pawn_id },
            WireChange::AbilityTagsChanged { player_id, tags } => {
                ReplicatedChange::AbilityTagsChanged { player_id, tags }
            }
            WireChange::HealthChanged { player_id, health } => {
                ReplicatedChange::HealthChanged { player_id, health }
            }
            WireChange::PawnDied { pawn_id } => ReplicatedChange::PawnDied { pawn_id },
            WireChange::PawnsTeleported { node: n, pawn_ids } => {
                ReplicatedChange::PawnsTeleported { node: node(n)?, pawn_ids }
            }
        })
    }
}

/// Entry `index` of `list`, which change `change` names as its `what`.
///
/// # Errors
/// [`IndexError`] when the list holds no such entry.
fn entry<T: Clone>(
    list: &[T],
    change: usize,
    what: &'static str,
    index: u16,
) -> Result<T, IndexError> {
    let len = list.len();
    list.get(usize::from(index)).cloned().ok_or(IndexError { change, what, index, len })
}

/// A `Replicated` message's body after its variant index, as it lies on the wire.
#[derive(Debug, Serialize, Deserialize)]
struct RawReplicated {
    classes: Vec<CharacterDef>,
    nodes: Vec<NodeId>,
    changes: Vec<WireChange>,
}

/// Writes `changes` in the wire's form (`#[serde(with)]` of `ServerMessage::Replicated`).
///
/// # Errors
/// The serializer's, and one naming the list when a message would name more than 65,536
/// classes or nodes.
pub(crate) fn serialize<S: Serializer>(
    changes: &[ReplicatedChange],
    serializer: S,
) -> Result<S::Ok, S::Error> {
    let mut names = Names::default();
    let wire = changes
        .iter()
        .map(|change| WireChange::new(change, &mut names))
        .collect::<Result<Vec<_>, _>>()
        .map_err(serde::ser::Error::custom)?;
    RawReplicated { classes: names.classes, nodes: names.nodes, changes: wire }
        .serialize(serializer)
}

/// Reads changes in the wire's form (`#[serde(with)]` of `ServerMessage::Replicated`).
///
/// # Errors
/// The deserializer's, and one naming the change and its index when an index names nothing.
pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Vec<ReplicatedChange>, D::Error> {
    let raw = RawReplicated::deserialize(deserializer)?;
    let names = Names { classes: raw.classes, nodes: raw.nodes };
    raw.changes
        .into_iter()
        .enumerate()
        .map(|(at, change)| change.resolve(&names, at))
        .collect::<Result<_, _>>()
        .map_err(serde::de::Error::custom)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::samples;

    #[test]
    fn every_change_resolves_to_itself_through_the_wire_form() {
        let mut names = Names::default();
        for (at, change) in samples::replicated_changes().into_iter().enumerate() {
            let wire = WireChange::new(&change, &mut names).unwrap();
            assert_eq!(wire.resolve(&names, at).unwrap(), change);
        }
        // "Vanguard" once; "harbor" and "forest", each once, in the order first used.
        assert_eq!(names.classes.len(), 1);
        let nodes: Vec<_> = names.nodes.iter().map(NodeId::as_str).collect();
        assert_eq!(nodes, ["harbor", "forest"]);
    }

    #[test]
    fn a_name_used_again_gets_the_index_it_first_got() {
        let mut names = Names::default();
        let [a, b] = ["a", "b"].map(|n| NodeId::new(n).unwrap());
        assert_eq!([&a, &b, &a, &b].map(|n| names.node(n).unwrap()), [0, 1, 0, 1]);
        assert_eq!(names.lens(), (0, 2));
    }

    #[test]
    fn a_list_holds_65536_names_and_refuses_the_next() {
        let nodes = (0..=u32::from(u16::MAX)).map(|i| NodeId::new(format!("n{i}")).unwrap());
        let mut names = Names { classes: Vec::new(), nodes: nodes.collect() };
        assert_eq!(names.node(&NodeId::new(format!("n{}", u16::MAX)).unwrap()), Ok(u16::MAX));
        let next = NodeId::new("one-more").unwrap();
        assert_eq!(names.node(&next), Err(TooManyNames("nodes")));
        assert_eq!(names.lens(), (0, 65_536));
    }

    #[test]
    fn an_index_past_its_list_names_the_change_and_the_list() {
        let names = Names { classes: vec![CharacterDef::new("Vanguard").unwrap()], nodes: vec![] };
        let spawned = WireChange::PawnSpawned {
            pawn_id: PawnId(1),
            owner: PlayerId::new("p").unwrap(),
            class: 0,
            node: 0,
            alive: true,
        };
        let error = spawned.resolve(&names, 3).unwrap_err();
        assert_eq!(
            error.to_string(),
            "Replicated: change 3's node 0 names nothing (the list holds 0)"
        );
        let state = WireChange::PlayerStateUpdated {
            player_id: PlayerId::new("p").unwrap(),
            team: None,
            class: Some(1),
        };
        let error = state.resolve(&names, 0).unwrap_err();
        assert_eq!((error.what, error.index, error.len), ("class", 1, 1));
        let teleported = WireChange::PawnsTeleported { node: 0, pawn_ids: PawnIdRuns::default() };
        assert_eq!(teleported.resolve(&names, 0).unwrap_err().what, "node");
    }
}
