//! The router's fixed plan, computed once from its [`Channels`]: every listen point (a declared
//! channel or an ancestor of one) with its slot, and for every channel the lists a broadcast on it
//! walks. Lookups are binary searches over tags; nothing here changes after construction.

use std::collections::BTreeSet;

use gatehouse_tags::GameplayTag;

use crate::channel::Match;
use crate::declare::{ChannelDecl, Channels, TypeTable};
use crate::table::ListRef;

/// A declared channel and the lists its messages reach: its own exact and hierarchical lists,
/// then the hierarchical list of each ancestor.
pub(crate) struct ChannelPlan {
    pub(crate) decl: ChannelDecl,
    /// The declared payload type's index in [`Layout::types`].
    pub(crate) ty: u32,
    pub(crate) walk: Box<[ListRef]>,
}

/// A tag where listeners may register.
pub(crate) struct Point {
    pub(crate) slot: u32,
    /// The channel declared at this tag, if any (exact listeners need one).
    pub(crate) channel: Option<usize>,
    /// Every channel at or below this tag (what a hierarchical listener here hears).
    pub(crate) subtree: Box<[usize]>,
}

/// The plan.
pub(crate) struct Layout {
    pub(crate) channels: Vec<ChannelPlan>,
    point_tags: Vec<GameplayTag>,
    points: Vec<Point>,
    pub(crate) types: TypeTable,
}

impl Layout {
    /// Plans the declared channels.
    pub(crate) fn new(declared: Channels) -> Layout {
        let Channels { mut channels, mut types } = declared;
        types.close();
        channels.sort_by_key(|c| c.tag);
        let point_tags: Vec<GameplayTag> = channels
            .iter()
            .flat_map(|c| c.tag.self_and_ancestors())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let slot_of = |tag: GameplayTag| point_tags.binary_search(&tag).ok();
        let points = point_tags
            .iter()
            .enumerate()
            .map(|(slot, &tag)| Point {
                slot: slot as u32,
                channel: channels.binary_search_by_key(&tag, |c| c.tag).ok(),
                subtree: (0..channels.len()).filter(|&i| channels[i].tag.matches(tag)).collect(),
            })
            .collect();
        let channels = channels
            .into_iter()
            .map(|decl| {
                let mut walk = Vec::new();
                for (level, tag) in decl.tag.self_and_ancestors().enumerate() {
                    // Every ancestor of a channel is a point by construction.
                    let Some(slot) = slot_of(tag) else { continue };
                    let slot = slot as u32;
                    if level == 0 {
                        walk.push(ListRef { slot, matching: Match::Exact });
                    }
                    walk.push(ListRef { slot, matching: Match::Hierarchical });
                }
                // A channel's type is declared with it.
                let ty = types.index_of(decl.ty.id).unwrap_or_default();
                ChannelPlan { decl, ty, walk: walk.into_boxed_slice() }
            })
            .collect();
        Layout { channels, point_tags, points, types }
    }

    /// Number of listen points.
    pub(crate) fn slot_count(&self) -> usize {
        self.points.len()
    }

    /// The index of the channel declared at `tag`.
    #[inline]
    pub(crate) fn channel_index(&self, tag: GameplayTag) -> Option<usize> {
        self.channels.binary_search_by_key(&tag, |c| c.decl.tag).ok()
    }

    /// The listen point at `tag`.
    pub(crate) fn point(&self, tag: GameplayTag) -> Option<&Point> {
        self.point_tags.binary_search(&tag).ok().and_then(|at| self.points.get(at))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Channel, Payload};
    use gatehouse_tags::catalog::*;

    struct P;
    impl Payload for P {
        const NAME: &'static str = "P";
    }

    #[test]
    fn a_broadcast_walks_its_own_lists_then_each_ancestor_hierarchical_list() {
        let mut channels = Channels::new();
        channels
            .declare(Channel::<P>::new(MESSAGE_TEST_DEPTH1_DEPTH2_DEPTH3_DEPTH4))
            .unwrap()
            .declare(Channel::<P>::new(MESSAGE_TEST_DEPTH1_DEPTH2))
            .unwrap();
        let layout = Layout::new(channels);
        // Message, Message.Test, Depth1, Depth1.Depth2, Depth3, Depth4.
        assert_eq!(layout.slot_count(), 6);
        let deep = &layout.channels
            [layout.channel_index(MESSAGE_TEST_DEPTH1_DEPTH2_DEPTH3_DEPTH4).unwrap()];
        assert_eq!(deep.walk.len(), 7);
        assert_eq!(deep.walk[0].matching, Match::Exact);
        assert!(deep.walk[1..].iter().all(|l| l.matching == Match::Hierarchical));
        let mid = layout.point(MESSAGE_TEST_DEPTH1_DEPTH2).unwrap();
        assert!(mid.channel.is_some());
        assert_eq!(mid.subtree.len(), 2);
        let implied = GameplayTag::parse("Message.Test.Depth1").unwrap();
        assert!(layout.point(implied).unwrap().channel.is_none());
        assert!(layout.point(MESSAGE_TEST_PING).is_none());
    }
}
