//! Values the session's and the replicated world's tests both build.

use gatehouse_client::{LinkId, Output, Session};
use gatehouse_protocol::{ClientMessage, LevelName, NodeId, PlayerId, ServerMessage, TransitionId};

/// The node named `name`.
pub(crate) fn node(name: &str) -> NodeId {
    NodeId::new(name).unwrap()
}

/// The player these tests are welcomed as.
pub(crate) fn me() -> PlayerId {
    PlayerId::new("sim-0001").unwrap()
}

/// `ShowTransition` of transition `id` to `target`, with one level and no rooms.
pub(crate) fn show(id: u64, target: &str) -> ServerMessage {
    ServerMessage::ShowTransition {
        transition_id: TransitionId(id),
        target_node: node(target),
        levels: vec![LevelName::new(format!("{target}_docks")).unwrap()],
        rooms: Vec::new(),
    }
}

/// Every message the session has to send, drained, in order; each must be a message on the
/// first link (these tests follow no server change).
pub(crate) fn sent(s: &mut Session) -> Vec<ClientMessage> {
    std::iter::from_fn(|| s.poll_output())
        .map(|output| match output {
            Output::Send { link: LinkId::FIRST, message } => message,
            other => panic!("not a message on the first link: {other:?}"),
        })
        .collect()
}
