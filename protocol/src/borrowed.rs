//! A replicated change read in place, for a receiver that keeps only some of a `Replicated`
//! message's changes (a load generator's thin client keeps those about itself): its player ids
//! borrowed from the frame, its class and node the indices they are on the wire, nothing
//! allocated but a change's lists, and the changes kept decoded in full afterwards
//! ([`crate::codec::decode_replicated_kept`]).

use serde::Deserialize;

/// A [`crate::ReplicatedChange`] as its bytes lie, names unchecked and borrowed, classes and
/// nodes as the indices into its message's lists that they are on the wire. The variants and
/// their fields are in the wire order of `ReplicatedChange` (docs/protocol.md 5; a test checks
/// every change of the samples reads the same bytes both ways).
#[derive(Debug, Deserialize)]
#[allow(missing_docs)] // Each field is the field of the same name of the same change.
pub enum ChangeRef<'a> {
    /// As `ReplicatedChange::PlayerStateUpdated`.
    PlayerStateUpdated { player_id: &'a str, team: Option<u8>, class: Option<u16> },
    /// As `ReplicatedChange::PlayerLeft`.
    PlayerLeft { player_id: &'a str },
    /// As `ReplicatedChange::PawnSpawned`.
    PawnSpawned { pawn_id: u64, owner: &'a str, class: u16, node: u16, alive: bool },
    /// As `ReplicatedChange::PawnDestroyed`.
    PawnDestroyed { pawn_id: u64 },
    /// As `ReplicatedChange::AbilityTagsChanged`.
    AbilityTagsChanged { player_id: &'a str, tags: Vec<&'a str> },
    /// As `ReplicatedChange::HealthChanged`.
    HealthChanged { player_id: &'a str, health: u32 },
    /// As `ReplicatedChange::PawnDied`.
    PawnDied { pawn_id: u64 },
    /// As `ReplicatedChange::PawnsTeleported`.
    PawnsTeleported { node: u16, pawn_ids: Vec<(u64, u32)> },
}

impl<'a> ChangeRef<'a> {
    /// The class and the node it names, as indices into its message's lists.
    pub fn indices(&self) -> (Option<u16>, Option<u16>) {
        match self {
            ChangeRef::PlayerStateUpdated { class, .. } => (*class, None),
            ChangeRef::PawnSpawned { class, node, .. } => (Some(*class), Some(*node)),
            ChangeRef::PawnsTeleported { node, .. } => (None, Some(*node)),
            _ => (None, None),
        }
    }

    /// The player the change is about: the one whose state, tags or health changed, who left,
    /// or who owns the spawned pawn; `None` for a change that names pawns only.
    pub fn player(&self) -> Option<&'a str> {
        match self {
            ChangeRef::PlayerStateUpdated { player_id, .. }
            | ChangeRef::PlayerLeft { player_id }
            | ChangeRef::AbilityTagsChanged { player_id, .. }
            | ChangeRef::HealthChanged { player_id, .. } => Some(player_id),
            ChangeRef::PawnSpawned { owner, .. } => Some(owner),
            ChangeRef::PawnDestroyed { .. }
            | ChangeRef::PawnDied { .. }
            | ChangeRef::PawnsTeleported { .. } => None,
        }
    }
}
