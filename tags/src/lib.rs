//! Gameplay tags: the vocabulary every other gatehouse crate shares.
//!
//! A [`GameplayTag`] is a validated dotted name (`State.Dead`, `Lifecycle.Gate.Character.LocalReady`)
//! interned as an index into a catalog generated at build time from `config/tags.toml`. It is
//! `Copy`, compares as an integer, and knows its parent chain (`A.B` is the parent of `A.B.C`;
//! matching is on whole segments, so `A.B` is never a parent of `A.BC`).
//!
//! Each tag is declared once in the catalog; code refers to tags through the generated constants
//! in [`catalog`]. A name that is not in the catalog is refused where it enters (the wire, a config
//! file, a router registration) with [`TagError::Unknown`] naming it.
//!
//! This crate owns the catalog and nothing else: no registry, no game or network knowledge.

#![forbid(unsafe_code)]

use std::fmt;

include!(concat!(env!("OUT_DIR"), "/catalog.rs"));

/// A gameplay tag from the catalog in `config/tags.toml`.
///
/// Cheap to copy and compare (a 16-bit index). Serialises as its dotted name; deserialising an
/// unknown name fails with [`TagError::Unknown`].
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GameplayTag(u16);

const NO_PARENT: u16 = u16::MAX;

/// Why a tag name was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TagError {
    /// The name is not a well-formed dotted name.
    #[error("malformed gameplay tag {name:?}: {why}")]
    Malformed {
        /// The name as given.
        name: String,
        /// What rule it broke.
        why: &'static str,
    },
    /// The name is well formed but not declared in `config/tags.toml` (nor implied as a parent).
    #[error("unknown gameplay tag {0:?}: it is not declared in config/tags.toml")]
    Unknown(String),
}

impl GameplayTag {
    /// Looks up a tag by its dotted name.
    ///
    /// # Errors
    /// [`TagError::Malformed`] for an empty name, an empty segment or a character outside ASCII
    /// letters, digits and `_`; [`TagError::Unknown`] for a well-formed name not in the catalog.
    pub fn parse(name: &str) -> Result<Self, TagError> {
        check_name(name).map_err(|why| TagError::Malformed { name: name.to_owned(), why })?;
        NAMES
            .binary_search(&name)
            .map(|i| GameplayTag(i as u16))
            .map_err(|_| TagError::Unknown(name.to_owned()))
    }

    /// The dotted name, e.g. `"State.Dead"`.
    pub fn name(self) -> &'static str {
        NAMES[self.0 as usize]
    }

    /// The direct parent (`A.B` for `A.B.C`), or `None` for a root segment.
    pub fn parent(self) -> Option<GameplayTag> {
        match PARENTS[self.0 as usize] {
            NO_PARENT => None,
            p => Some(GameplayTag(p)),
        }
    }

    /// This tag and then each ancestor up to the root: `A.B.C`, `A.B`, `A`.
    pub fn self_and_ancestors(self) -> impl Iterator<Item = GameplayTag> {
        std::iter::successors(Some(self), |t| t.parent())
    }

    /// Whether `self` equals `other` or is one of its descendants (`A.B.C` matches `A.B`).
    pub fn matches(self, other: GameplayTag) -> bool {
        self.self_and_ancestors().any(|t| t == other)
    }

    /// Whether the tag is declared in the catalog rather than only implied as a parent.
    pub fn is_declared(self) -> bool {
        DECLARED[self.0 as usize]
    }

    /// Number of segments: 1 for `A`, 3 for `A.B.C`.
    pub fn depth(self) -> usize {
        self.self_and_ancestors().count()
    }

    /// Every tag in the catalog, declared and implied, in name order.
    pub fn all() -> impl Iterator<Item = GameplayTag> {
        (0..NAMES.len()).map(|i| GameplayTag(i as u16))
    }
}

fn check_name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() {
        return Err("empty name");
    }
    for segment in name.split('.') {
        if segment.is_empty() {
            return Err("empty segment");
        }
        if !segment.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_') {
            return Err("segments hold only ASCII letters, digits and '_'");
        }
    }
    Ok(())
}

impl fmt::Display for GameplayTag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl fmt::Debug for GameplayTag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "GameplayTag({})", self.name())
    }
}

impl std::str::FromStr for GameplayTag {
    type Err = TagError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        GameplayTag::parse(s)
    }
}

impl serde::Serialize for GameplayTag {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for GameplayTag {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = GameplayTag;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a gameplay tag name declared in config/tags.toml")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<GameplayTag, E> {
                GameplayTag::parse(v).map_err(E::custom)
            }
        }
        d.deserialize_str(Visitor)
    }
}

#[cfg(test)]
mod tests {
    use super::catalog::*;
    use super::*;

    #[test]
    fn declared_tags_round_trip_through_their_names() {
        for tag in catalog::ALL_DECLARED {
            assert_eq!(GameplayTag::parse(tag.name()), Ok(tag));
            assert!(tag.is_declared());
        }
    }

    #[test]
    fn implied_parents_are_known_but_not_declared() {
        let parent = GameplayTag::parse("Lifecycle.Gate").unwrap();
        assert!(!parent.is_declared());
        assert_eq!(
            LIFECYCLE_GATE_CHARACTER_LOCAL_READY.parent().unwrap().name(),
            "Lifecycle.Gate.Character"
        );
    }

    #[test]
    fn matching_is_on_whole_segments() {
        let gate = GameplayTag::parse("Lifecycle.Gate").unwrap();
        assert!(LIFECYCLE_GATE_CHARACTER_LOCAL_READY.matches(gate));
        assert!(!gate.matches(LIFECYCLE_GATE_CHARACTER_LOCAL_READY));
        // `State` is a parent of `State.Dead`, but no prefix without a dot boundary ever is.
        assert!(GameplayTag::parse("Stat").is_err());
        assert_eq!(STATE_DEAD.parent().unwrap().name(), "State");
    }

    /// Matching is on whole segments. Checked for every pair of catalog tags against
    /// the string rule, including `Message.Test.Ping` and `Message.Test.PingReply`, whose names
    /// share a prefix without a dot boundary.
    #[test]
    fn matching_agrees_with_the_whole_segment_rule_for_every_pair() {
        for a in GameplayTag::all() {
            for b in GameplayTag::all() {
                let by_name = a.name() == b.name()
                    || (a.name().starts_with(b.name())
                        && a.name().as_bytes().get(b.name().len()) == Some(&b'.'));
                assert_eq!(a.matches(b), by_name, "{a} against {b}");
            }
        }
        let ping = MESSAGE_TEST_PING;
        let reply = MESSAGE_TEST_PING_REPLY;
        assert!(reply.name().starts_with(ping.name()));
        assert!(!reply.matches(ping));
        assert!(!ping.matches(reply));
    }

    #[test]
    fn every_declared_tag_has_its_whole_parent_chain_in_the_catalog() {
        for tag in catalog::ALL_DECLARED {
            let chain: Vec<&str> = tag.self_and_ancestors().map(GameplayTag::name).collect();
            assert_eq!(chain.len(), tag.depth());
            assert_eq!(chain.len(), tag.name().split('.').count());
            for (child, parent) in chain.iter().zip(chain.iter().skip(1)) {
                assert_eq!(child.rsplit_once('.').map(|(p, _)| p), Some(*parent));
            }
        }
    }

    #[test]
    fn unknown_and_malformed_names_are_refused_with_the_name() {
        let err = GameplayTag::parse("State.Undead").unwrap_err();
        assert_eq!(err, TagError::Unknown("State.Undead".into()));
        assert!(err.to_string().contains("State.Undead"));
        for bad in ["", ".", "State.", ".State", "State..Dead", "State.De ad", "État"] {
            assert!(matches!(GameplayTag::parse(bad), Err(TagError::Malformed { .. })), "{bad:?}");
        }
    }

    #[test]
    fn serde_uses_the_name_and_refuses_unknown_names() {
        let json = serde_json::to_string(&STATE_DEAD).unwrap();
        assert_eq!(json, "\"State.Dead\"");
        assert_eq!(serde_json::from_str::<GameplayTag>(&json).unwrap(), STATE_DEAD);
        let err = serde_json::from_str::<GameplayTag>("\"State.Undead\"").unwrap_err();
        assert!(err.to_string().contains("State.Undead"));
    }

    #[test]
    fn generated_constant_names_follow_the_dotted_names() {
        assert_eq!(
            LIFECYCLE_FACT_UI_WIDGET_CONTROLLER_READY.name(),
            "Lifecycle.Fact.UI.WidgetControllerReady"
        );
        assert_eq!(EFFECT_DAMAGE_OVER_TIME_POISON.name(), "Effect.DamageOverTime.Poison");
    }

    proptest::proptest! {
        #[test]
        fn parse_never_panics_and_accepts_only_catalog_names(s in ".{0,40}") {
            if let Ok(tag) = GameplayTag::parse(&s) {
                proptest::prop_assert_eq!(tag.name(), s.as_str());
            }
        }
    }
}
