//! [`GhEvent`]: a `gatehouse_client::Event` as one plain C struct, and the storage that keeps
//! its strings and arrays alive until the next poll.

use std::ffi::{CString, c_char};
use std::ptr;

use gatehouse_client::{AbandonReason, CloseReason, Event, Load, WorldChange};
use gatehouse_protocol::{NodeId, PlayerId};

use crate::{GH_ABANDON_CLOSED, GH_ABANDON_REFUSED, GH_ABANDON_TIMED_OUT, GH_ABANDON_UNREACHABLE};

/// What happened (docs/client.md, "Events"); which [`GhEvent`] fields are set depends on it.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GhEventKind {
    /// The zero value; never given by `gh_client_poll_event`.
    GhEventNone = 0,
    /// Accepted: `player`, `node` (NULL before the server streamed one), `value` = the frame
    /// limit in bytes.
    GhEventWelcomed = 1,
    /// Login refused: `code` = the reason's wire index, `text` = the server's detail. Closed
    /// follows.
    GhEventRejected = 2,
    /// Raise the loading screen.
    GhEventShowLoadingScreen = 3,
    /// A transition started: freeze the characters. `transition`, `superseded` (0 if none).
    GhEventTransitionStarted = 4,
    /// Stream `names` (the levels), then `rooms`, of `node`; then call
    /// `gh_client_levels_streamed` with `load`.
    GhEventStreamLevels = 5,
    /// Stop streaming for `load`.
    GhEventCancelStreaming = 6,
    /// The transition failed: `transition`, `code` = the reason's wire index, `text` = detail.
    /// The screen stays up.
    GhEventTransitionFailed = 7,
    /// You control `pawn` now: bind the camera and input to it.
    GhEventPossessed = 8,
    /// You no longer control `pawn`.
    GhEventUnpossessed = 9,
    /// Drop the loading screen of `load`, enable input.
    GhEventHideLoadingScreen = 10,
    /// Your player died: call `gh_client_request_restart` to play on.
    GhEventDied = 11,
    /// Your player is alive again; `flag`: after your restart.
    GhEventRevived = 12,
    /// Kits granted to your player: `names`.
    GhEventKitsGranted = 13,
    /// The server refused a message: `code` = the error's wire index, `text` = detail.
    GhEventRefused = 14,
    /// A player state appeared or changed: `player`, `own`, `value` = team (0: none), `text` =
    /// its character definition (NULL: none yet).
    GhEventPlayerStateUpdated = 15,
    /// That `player` left the world (`own`: yours).
    GhEventPlayerLeft = 16,
    /// A pawn exists: `pawn`, `player` = its owner, `own` (yours), `node`, `text` = character
    /// definition, `flag` = alive.
    GhEventPawnSpawned = 17,
    /// `pawns` moved to `node`.
    GhEventPawnsTeleported = 18,
    /// The owner of `pawn` died.
    GhEventPawnDied = 19,
    /// `pawn` is gone.
    GhEventPawnDestroyed = 20,
    /// Every tag `player` holds now: `names`; `own`: yours.
    GhEventTagsChanged = 21,
    /// `player`'s health is `value`; `own`: yours.
    GhEventHealthChanged = 22,
    /// The session is over: `close`, and for a server close `code` (docs/protocol.md 6) and
    /// `text` (its reason); for a lost connection `text` says why.
    GhEventClosed = 23,
    /// The transition on the screen ended (`transition`): unfreeze the characters. The screen
    /// drops with `GH_EVENT_HIDE_LOADING_SCREEN`, unless you control no pawn: then it stays up
    /// for the join of your own that follows.
    GhEventTransitionEnded = 24,
    /// The transition on screen (`transition`) goes to `node`, which another server hosts:
    /// keep the loading screen up; the client logs in there by itself. `text` = that server's
    /// address (`host:port`). Nothing to call (docs/spec/travel.md V3).
    GhEventTravelling = 25,
    /// The client plays on another server from now (the destination of a move welcomed it, or
    /// a move that failed there brought it back): drop every player state, pawn and object of
    /// the world you knew; a new world begins on `node` (NULL: none streamed yet), `player`
    /// (`own`), `value` = that server's frame limit. The loading screen stays up.
    GhEventServerChanged = 26,
    /// The client gave up the move of `transition`: `code` = why (`GH_ABANDON_*`), `value` =
    /// the reject reason (`GH_REJECT_*`) or the close code (`GH_CLOSE_CODE_*`) when there is
    /// one, `text` = the detail. The screen stays up; the server it was leaving sends it back.
    GhEventTravelAbandoned = 27,
}

/// What a load on the loading screen is for.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GhLoadKind {
    /// No load.
    GhLoadNone = 0,
    /// A transition; `id` is its transition id.
    GhLoadTransition = 1,
    /// The client's own join; `id` is its join id.
    GhLoadJoin = 2,
}

/// A load, as `GH_EVENT_STREAM_LEVELS` names it and `gh_client_levels_streamed` takes it back.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GhLoad {
    /// Transition or join.
    pub kind: GhLoadKind,
    /// Its id.
    pub id: u64,
}

/// Why a session ended (`GH_EVENT_CLOSED`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GhCloseKind {
    /// Not closed.
    GhCloseNone = 0,
    /// The server closed with `code` and `text`.
    GhCloseServer = 1,
    /// The client left and the connection ended.
    GhCloseLeft = 2,
    /// No `Welcome` came in time.
    GhCloseNoWelcome = 3,
    /// The connection was lost; `text` says why.
    GhCloseLost = 4,
}

/// One event as plain C data. Pointers are NULL when unset; every string is NUL-terminated
/// UTF-8, and every pointer stays valid until the next `gh_client_poll_event` or
/// `gh_client_free` on the same client (the other calls leave them alone). Ids start at 1: an
/// id of 0 means none. docs/client.md, "Events in C", says which fields each kind sets.
#[repr(C)]
#[derive(Debug)]
pub struct GhEvent {
    /// What happened.
    pub kind: GhEventKind,
    /// The load (stream, cancel, hide).
    pub load: GhLoad,
    /// A transition id (started, ended, failed).
    pub transition: u64,
    /// The transition a started one replaced on the screen; 0 if none.
    pub superseded: u64,
    /// A pawn id.
    pub pawn: u64,
    /// A player id.
    pub player: *const c_char,
    /// A node id.
    pub node: *const c_char,
    /// Names: the levels to stream, kits granted, or tags held.
    pub names: *const *const c_char,
    /// How many `names`.
    pub names_len: usize,
    /// The rooms to stream after the levels.
    pub rooms: *const *const c_char,
    /// How many `rooms`.
    pub rooms_len: usize,
    /// Pawn ids (teleported).
    pub pawns: *const u64,
    /// How many `pawns`.
    pub pawns_len: usize,
    /// A code: a wire index (reject reason, error code, failure reason) or a close code.
    pub code: u32,
    /// A number: health points, a team (0: none), or the frame limit in bytes.
    pub value: u32,
    /// A flag: restarted (revived), alive (pawn spawned).
    pub flag: bool,
    /// Whether `player` (or the owner of `pawn`) is your own player.
    pub own: bool,
    /// A text: the server's detail or reason, or a character definition.
    pub text: *const c_char,
    /// Why the session closed (`GH_EVENT_CLOSED`).
    pub close: GhCloseKind,
}

impl GhEvent {
    /// An event of `kind` with nothing else set.
    pub(crate) fn empty(kind: GhEventKind) -> GhEvent {
        GhEvent {
            kind,
            load: GhLoad { kind: GhLoadKind::GhLoadNone, id: 0 },
            transition: 0,
            superseded: 0,
            pawn: 0,
            player: ptr::null(),
            node: ptr::null(),
            names: ptr::null(),
            names_len: 0,
            rooms: ptr::null(),
            rooms_len: 0,
            pawns: ptr::null(),
            pawns_len: 0,
            code: 0,
            value: 0,
            flag: false,
            own: false,
            text: ptr::null(),
            close: GhCloseKind::GhCloseNone,
        }
    }
}

/// The strings and arrays of the last event given out: kept until the next poll.
#[derive(Debug, Default)]
pub(crate) struct Storage {
    /// The player `Welcome` named: what `own` compares with.
    me: Option<String>,
    strings: Vec<CString>,
    lists: Vec<Vec<*const c_char>>,
    pawns: Vec<u64>,
}

impl Storage {
    /// Forgets the last event's data.
    pub(crate) fn clear(&mut self) {
        self.strings.clear();
        self.lists.clear();
        self.pawns.clear();
    }

    fn is_me(&self, player: &str) -> bool {
        self.me.as_deref() == Some(player)
    }

    /// Keeps `text` as a C string and points at it. A NUL inside (peer text may hold one)
    /// becomes U+FFFD, so the string is never cut short silently.
    fn string(&mut self, text: &str) -> *const c_char {
        let text = CString::new(text.replace('\0', "\u{FFFD}")).unwrap_or_default();
        // The CString's heap buffer does not move when the CString itself moves into the Vec.
        let pointer = text.as_ptr();
        self.strings.push(text);
        pointer
    }

    /// Keeps each of `texts` and a list of pointers to them; returns the list and its length.
    fn list<'a>(&mut self, texts: impl Iterator<Item = &'a str>) -> (*const *const c_char, usize) {
        let list: Vec<*const c_char> = texts.map(|text| self.string(text)).collect();
        let (pointer, len) = (list.as_ptr(), list.len());
        self.lists.push(list);
        (pointer, len)
    }

    /// `event` as C data, its strings kept here.
    pub(crate) fn event(&mut self, event: Event) -> GhEvent {
        use GhEventKind::*;
        match event {
            Event::Welcomed { player, node, max_frame_len } => {
                self.entered(GhEventWelcomed, &player, node.as_ref(), max_frame_len)
            }
            Event::Rejected { reason, detail } => GhEvent {
                code: reason as u32,
                text: self.string(&detail),
                ..GhEvent::empty(GhEventRejected)
            },
            Event::ShowLoadingScreen => GhEvent::empty(GhEventShowLoadingScreen),
            Event::TransitionStarted { transition, superseded } => GhEvent {
                transition: transition.0,
                superseded: superseded.map_or(0, |id| id.0),
                ..GhEvent::empty(GhEventTransitionStarted)
            },
            Event::StreamLevels { load, node, levels, rooms } => {
                let (names, names_len) = self.list(levels.iter().map(|l| l.as_str()));
                let (rooms, rooms_len) = self.list(rooms.iter().map(|r| r.as_str()));
                GhEvent {
                    load: gh_load(load),
                    node: self.string(node.as_str()),
                    names,
                    names_len,
                    rooms,
                    rooms_len,
                    ..GhEvent::empty(GhEventStreamLevels)
                }
            }
            Event::CancelStreaming { load } => {
                GhEvent { load: gh_load(load), ..GhEvent::empty(GhEventCancelStreaming) }
            }
            Event::TransitionFailed { transition, reason, detail } => GhEvent {
                transition: transition.0,
                code: reason as u32,
                text: self.string(&detail),
                ..GhEvent::empty(GhEventTransitionFailed)
            },
            Event::Possessed { pawn } => {
                GhEvent { pawn: pawn.0, ..GhEvent::empty(GhEventPossessed) }
            }
            Event::Unpossessed { pawn } => {
                GhEvent { pawn: pawn.0, ..GhEvent::empty(GhEventUnpossessed) }
            }
            Event::TransitionEnded { transition } => {
                GhEvent { transition: transition.0, ..GhEvent::empty(GhEventTransitionEnded) }
            }
            Event::HideLoadingScreen { load } => {
                GhEvent { load: gh_load(load), ..GhEvent::empty(GhEventHideLoadingScreen) }
            }
            Event::Died => GhEvent::empty(GhEventDied),
            Event::Revived { restarted } => {
                GhEvent { flag: restarted, ..GhEvent::empty(GhEventRevived) }
            }
            Event::KitsGranted { kits } => {
                let (names, names_len) = self.list(kits.iter().map(|k| k.name()));
                GhEvent { names, names_len, ..GhEvent::empty(GhEventKitsGranted) }
            }
            Event::Refused { code, detail } => GhEvent {
                code: code as u32,
                text: self.string(&detail),
                ..GhEvent::empty(GhEventRefused)
            },
            Event::World(change) => self.world(change),
            Event::Travelling { transition, node, address, .. } => GhEvent {
                transition: transition.0,
                node: self.string(node.as_str()),
                text: self.string(&address),
                ..GhEvent::empty(GhEventTravelling)
            },
            Event::ServerChanged { player, node, max_frame_len } => {
                self.entered(GhEventServerChanged, &player, node.as_ref(), max_frame_len)
            }
            Event::TravelAbandoned { transition, reason } => {
                GhEvent { transition: transition.0, ..self.abandoned(reason) }
            }
            Event::Closed { reason } => self.closed(reason),
        }
    }

    fn world(&mut self, change: WorldChange) -> GhEvent {
        use GhEventKind::*;
        match change {
            WorldChange::PlayerStateUpdated(view) => GhEvent {
                own: self.is_me(view.player_id.as_str()),
                player: self.string(view.player_id.as_str()),
                value: view.team.map_or(0, |team| u32::from(team.0)),
                text: view.character_def.map_or(ptr::null(), |def| self.string(def.as_str())),
                ..GhEvent::empty(GhEventPlayerStateUpdated)
            },
            WorldChange::PlayerLeft { player } => GhEvent {
                own: self.is_me(player.as_str()),
                player: self.string(player.as_str()),
                ..GhEvent::empty(GhEventPlayerLeft)
            },
            WorldChange::PawnSpawned(view) => GhEvent {
                own: self.is_me(view.owner.as_str()),
                pawn: view.pawn_id.0,
                player: self.string(view.owner.as_str()),
                node: self.string(view.node.as_str()),
                text: self.string(view.character_def.as_str()),
                flag: view.alive,
                ..GhEvent::empty(GhEventPawnSpawned)
            },
            WorldChange::PawnsTeleported { node, pawns } => {
                self.pawns = pawns.iter().map(|pawn| pawn.0).collect();
                GhEvent {
                    node: self.string(node.as_str()),
                    pawns: self.pawns.as_ptr(),
                    pawns_len: self.pawns.len(),
                    ..GhEvent::empty(GhEventPawnsTeleported)
                }
            }
            WorldChange::PawnDied { pawn } => {
                GhEvent { pawn: pawn.0, ..GhEvent::empty(GhEventPawnDied) }
            }
            WorldChange::PawnDestroyed { pawn } => {
                GhEvent { pawn: pawn.0, ..GhEvent::empty(GhEventPawnDestroyed) }
            }
            WorldChange::TagsChanged { player, tags } => {
                let (names, names_len) = self.list(tags.iter().map(|t| t.name()));
                GhEvent {
                    own: self.is_me(player.as_str()),
                    player: self.string(player.as_str()),
                    names,
                    names_len,
                    ..GhEvent::empty(GhEventTagsChanged)
                }
            }
            WorldChange::HealthChanged { player, health } => GhEvent {
                own: self.is_me(player.as_str()),
                player: self.string(player.as_str()),
                value: health,
                ..GhEvent::empty(GhEventHealthChanged)
            },
        }
    }

    /// A `kind` event of a server letting the client in as `player` (welcomed, or another
    /// server's): `player` becomes the one `own` compares with.
    fn entered(
        &mut self,
        kind: GhEventKind,
        player: &PlayerId,
        node: Option<&NodeId>,
        max_frame_len: u32,
    ) -> GhEvent {
        self.me = Some(player.as_str().to_owned());
        GhEvent {
            player: self.string(player.as_str()),
            own: true,
            node: node.map_or(ptr::null(), |node| self.string(node.as_str())),
            value: max_frame_len,
            ..GhEvent::empty(kind)
        }
    }

    /// A `GH_EVENT_TRAVEL_ABANDONED` of `reason`, its transition not set.
    fn abandoned(&mut self, reason: AbandonReason) -> GhEvent {
        let abandoned = GhEvent::empty(GhEventKind::GhEventTravelAbandoned);
        match reason {
            AbandonReason::Unreachable { why } => {
                GhEvent { code: GH_ABANDON_UNREACHABLE, text: self.string(&why), ..abandoned }
            }
            AbandonReason::Refused { reason, detail } => GhEvent {
                code: GH_ABANDON_REFUSED,
                value: reason as u32,
                text: self.string(&detail),
                ..abandoned
            },
            AbandonReason::Closed { code, reason } => GhEvent {
                code: GH_ABANDON_CLOSED,
                value: code,
                text: self.string(&reason),
                ..abandoned
            },
            AbandonReason::TimedOut => GhEvent { code: GH_ABANDON_TIMED_OUT, ..abandoned },
            // A reason this library version does not know yet: told as unreachable.
            _ => GhEvent { code: GH_ABANDON_UNREACHABLE, ..abandoned },
        }
    }

    fn closed(&mut self, reason: CloseReason) -> GhEvent {
        let closed = GhEvent::empty(GhEventKind::GhEventClosed);
        match reason {
            CloseReason::Server { code, reason } => GhEvent {
                close: GhCloseKind::GhCloseServer,
                code,
                text: self.string(&reason),
                ..closed
            },
            CloseReason::Left => GhEvent { close: GhCloseKind::GhCloseLeft, ..closed },
            CloseReason::NoWelcome => GhEvent { close: GhCloseKind::GhCloseNoWelcome, ..closed },
            CloseReason::Lost { why } => {
                GhEvent { close: GhCloseKind::GhCloseLost, text: self.string(&why), ..closed }
            }
        }
    }
}

fn gh_load(load: Load) -> GhLoad {
    match load {
        Load::Transition(id) => GhLoad { kind: GhLoadKind::GhLoadTransition, id: id.0 },
        Load::Join(id) => GhLoad { kind: GhLoadKind::GhLoadJoin, id: id.0 },
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::ffi::CStr;

    use gatehouse_client::{AbandonReason, Event};
    use gatehouse_protocol::{RejectReason, TransitionId};

    use super::*;

    /// The text `pointer` points at.
    fn text(pointer: *const c_char) -> &'static str {
        assert!(!pointer.is_null());
        // SAFETY: every pointer an event carries points at a NUL-terminated string that the
        // test's `Storage` keeps (leaked below, so it outlives the test's reads).
        unsafe { CStr::from_ptr(pointer) }.to_str().unwrap()
    }

    /// A server change's events reach C with their fields, and the new server's player becomes
    /// the one `own` compares with; no ticket is among them.
    #[test]
    fn a_server_changes_events_reach_c_with_their_fields() {
        let storage = Box::leak(Box::new(Storage::default()));
        let node = NodeId::new("crypt").unwrap();
        let travelling = storage.event(Event::Travelling {
            transition: TransitionId(7),
            node: node.clone(),
            address: "crypt-1.example:7777".into(),
            server_name: "crypt-1.example".into(),
        });
        assert_eq!((travelling.kind, travelling.transition), (GhEventKind::GhEventTravelling, 7));
        assert_eq!(
            (text(travelling.node), text(travelling.text)),
            ("crypt", "crypt-1.example:7777")
        );
        let player = PlayerId::new("sim-0007").unwrap();
        let changed = storage.event(Event::ServerChanged {
            player: player.clone(),
            node: Some(node),
            max_frame_len: 4096,
        });
        assert_eq!(
            (changed.kind, changed.own, changed.value),
            (GhEventKind::GhEventServerChanged, true, 4096)
        );
        assert_eq!((text(changed.player), text(changed.node)), ("sim-0007", "crypt"));
        assert!(storage.is_me("sim-0007"));
        let refused =
            AbandonReason::Refused { reason: RejectReason::TicketStale, detail: "stale".into() };
        let abandoned =
            storage.event(Event::TravelAbandoned { transition: TransitionId(7), reason: refused });
        assert_eq!(abandoned.kind, GhEventKind::GhEventTravelAbandoned);
        assert_eq!(
            (abandoned.transition, abandoned.code, abandoned.value),
            (7, GH_ABANDON_REFUSED, 11)
        );
        assert_eq!(text(abandoned.text), "stale");
        let closed = AbandonReason::Closed { code: 12, reason: "recalled".into() };
        let abandoned =
            storage.event(Event::TravelAbandoned { transition: TransitionId(7), reason: closed });
        assert_eq!((abandoned.code, abandoned.value), (GH_ABANDON_CLOSED, 12));
        let timed_out = storage.event(Event::TravelAbandoned {
            transition: TransitionId(7),
            reason: AbandonReason::TimedOut,
        });
        assert_eq!((timed_out.code, timed_out.text), (GH_ABANDON_TIMED_OUT, ptr::null()));
    }
}
