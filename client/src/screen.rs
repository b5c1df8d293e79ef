//! The loading screen, as phases: none, a transition's, or the client's own join's
//! (docs/protocol.md 4.1 and 5).
//!
//! The screen goes up at `FreezeCharacters` (or `ShowTransition`, or `ShowJoin`) and comes down
//! only at the `EndTransition` or `EndJoin` of the load on it. A newer transition replaces what
//! is on it (a join, or an older transition) without taking it down: the player sees one
//! loading screen from the first freeze to the last end, never the world in between. A move to
//! another server is one screen across both: the source's transition, `Travelling`, is replaced
//! by the destination's join (or transition) on the same screen (docs/spec/travel.md V3).

use std::fmt;
use std::time::Instant;

use gatehouse_protocol::{JoinId, NodeId, TransitionId};

/// What one loading screen streams for: a transition or a join. The game names it back in
/// [`crate::Session::levels_streamed`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Load {
    /// The transition with this id (docs/protocol.md 5, `ShowTransition`).
    Transition(TransitionId),
    /// The client's own join with this id (docs/protocol.md 4.1).
    Join(JoinId),
}

/// `transition 3`, `join 4`: how errors and logs name a load.
impl fmt::Display for Load {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Load::Transition(id) => write!(f, "transition {}", id.0),
            Load::Join(id) => write!(f, "join {}", id.0),
        }
    }
}

/// The loading screen now.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Screen {
    /// No loading screen: the player sees the world (or nothing yet, before its first join).
    #[default]
    None,
    /// Up for a transition.
    Transition(TransitionScreen),
    /// Up for the client's own join.
    Join(JoinScreen),
}

/// A transition's loading screen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransitionScreen {
    pub(crate) transition: TransitionId,
    pub(crate) raised_at: Instant,
    pub(crate) stage: TransitionStage,
}

/// Where a transition's loading screen stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TransitionStage {
    /// Characters are frozen and the destination is not known yet (after `FreezeCharacters`,
    /// or after `TransitionFailed` until the recovery travel shows its own).
    AwaitingDestination,
    /// The game streams `target`'s levels and rooms; `TransitionShown` was sent.
    Streaming {
        /// The destination node.
        target: NodeId,
    },
    /// The game streamed `target` and `TransitionReady` was sent.
    Ready {
        /// The destination node.
        target: NodeId,
    },
    /// The transition goes to a node another server hosts (`TravelTo`): `TransitionShown` was
    /// sent and the session moves to that server, behind this same screen, which the
    /// destination's join (or a transition of its own) continues and ends
    /// (docs/spec/travel.md V3).
    Travelling {
        /// The destination node, on the other server.
        target: NodeId,
    },
    /// The transition ended while this client controlled no pawn (it logged in while the
    /// transition waited for its players): the join of its own that the server sends next
    /// comes on this same screen (docs/protocol.md 4.2), so the player never sees the world
    /// without a pawn in between.
    Ended {
        /// The destination node, if it was known.
        target: Option<NodeId>,
    },
}

/// The loading screen of the client's own join.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinScreen {
    pub(crate) join: JoinId,
    pub(crate) node: NodeId,
    pub(crate) raised_at: Instant,
    pub(crate) stage: JoinStage,
}

/// Where a join's loading screen stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JoinStage {
    /// The game streams the join's levels and rooms.
    Streaming,
    /// The game streamed them and `JoinReady` was sent.
    Ready,
}

impl Screen {
    /// Whether a loading screen is up.
    pub fn is_up(&self) -> bool {
        !matches!(self, Screen::None)
    }

    /// When the screen now up went up (kept when a newer load replaced the first on it).
    pub fn raised_at(&self) -> Option<Instant> {
        match self {
            Screen::None => None,
            Screen::Transition(screen) => Some(screen.raised_at),
            Screen::Join(screen) => Some(screen.raised_at),
        }
    }

    /// The load on the screen, if one is.
    pub fn load(&self) -> Option<Load> {
        match self {
            Screen::None => None,
            Screen::Transition(screen) => Some(Load::Transition(screen.transition)),
            Screen::Join(screen) => Some(Load::Join(screen.join)),
        }
    }

    /// The load the game is streaming for now, if it is (not yet reported ready).
    pub fn streaming(&self) -> Option<Load> {
        match self {
            Screen::Transition(s) if matches!(s.stage, TransitionStage::Streaming { .. }) => {
                Some(Load::Transition(s.transition))
            }
            Screen::Join(s) if s.stage == JoinStage::Streaming => Some(Load::Join(s.join)),
            _ => None,
        }
    }

    /// The node the load on screen brings the player to, once known.
    pub fn destination(&self) -> Option<&NodeId> {
        match self {
            Screen::None => None,
            Screen::Transition(screen) => screen.stage.target(),
            Screen::Join(screen) => Some(&screen.node),
        }
    }
}

impl TransitionScreen {
    /// The transition on screen: the newest shown.
    pub fn transition(&self) -> TransitionId {
        self.transition
    }

    /// When the screen went up (kept across supersedes).
    pub fn raised_at(&self) -> Instant {
        self.raised_at
    }

    /// Where it stands.
    pub fn stage(&self) -> &TransitionStage {
        &self.stage
    }

    /// Whether the transition ended and the screen waits for the client's own join.
    pub fn has_ended(&self) -> bool {
        matches!(self.stage, TransitionStage::Ended { .. })
    }

    /// Whether the transition moves the player to another server
    /// ([`TransitionStage::Travelling`]).
    pub fn is_travelling(&self) -> bool {
        matches!(self.stage, TransitionStage::Travelling { .. })
    }
}

impl TransitionStage {
    /// The destination node, once known.
    pub fn target(&self) -> Option<&NodeId> {
        match self {
            TransitionStage::AwaitingDestination => None,
            TransitionStage::Streaming { target }
            | TransitionStage::Ready { target }
            | TransitionStage::Travelling { target } => Some(target),
            TransitionStage::Ended { target } => target.as_ref(),
        }
    }
}

impl JoinScreen {
    /// The join on screen.
    pub fn join(&self) -> JoinId {
        self.join
    }

    /// The node it streams.
    pub fn node(&self) -> &NodeId {
        &self.node
    }

    /// When the screen went up.
    pub fn raised_at(&self) -> Instant {
        self.raised_at
    }

    /// Where it stands.
    pub fn stage(&self) -> JoinStage {
        self.stage
    }
}
