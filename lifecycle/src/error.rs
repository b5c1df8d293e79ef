//! Why the registry refused an operation.
//!
//! This module owns the crate's one error enum. Every refusal is reported, never swallowed:
//! a stale token is the registry doing its job (old asynchronous work, a consumer that kept a
//! previous generation), and the caller decides whether that is expected.

use std::fmt;

use gatehouse_tags::GameplayTag;

use crate::id::{Generation, ObjectId, RequestName, ScopeToken};

/// An operation the registry refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LifecycleError {
    /// `set_ready` was given a token whose scope has been reset: stale asynchronous work must
    /// not open (or close) readiness for a replacement relationship.
    #[error(
        "set_ready of {fact} refused: expected the current scope of {}, which is {}, got {token}",
        token.object(), Current(*current)
    )]
    StalePublisher {
        /// The token that was presented.
        token: ScopeToken,
        /// The fact it tried to set.
        fact: GameplayTag,
        /// The object's current generation, if it has a scope at all.
        current: Option<Generation>,
    },

    /// A wait was registered with an owner token that is not current.
    #[error(
        "wait {request} refused: expected the current scope of owner {}, which is {}, got {token}",
        token.object(), Current(*current)
    )]
    StaleOwner {
        /// The request name of the refused wait.
        request: RequestName,
        /// The owner token that was presented.
        token: ScopeToken,
        /// The owner's current generation, if it has a scope at all.
        current: Option<Generation>,
    },

    /// A wait was registered with a requirement whose token is not current.
    #[error(
        "wait {request} refused: requirement {fact} expected the current scope of {}, which is {}, got {token}",
        token.object(), Current(*current)
    )]
    StaleRequirement {
        /// The request name of the refused wait.
        request: RequestName,
        /// The fact of the stale requirement.
        fact: GameplayTag,
        /// The requirement token that was presented.
        token: ScopeToken,
        /// The object's current generation, if it has a scope at all.
        current: Option<Generation>,
    },

    /// A guarded wait was registered with a guard token that is not current: the listener is
    /// already gone, so the callback could never be delivered.
    #[error(
        "wait {request} refused: expected the current scope of guard {}, which is {}, got {token}",
        token.object(), Current(*current)
    )]
    StaleGuard {
        /// The request name of the refused wait.
        request: RequestName,
        /// The guard token that was presented.
        token: ScopeToken,
        /// The guard's current generation, if it has a scope at all.
        current: Option<Generation>,
    },

    /// A wait was registered with no requirements. An empty AND-gate would open at once; the
    /// registry refuses it so that a requirement list computed as empty (a process with no
    /// local viewers, say) cannot open a gate by accident.
    #[error("wait {request} of {owner} refused: expected at least one requirement, got none")]
    NoRequirements {
        /// The request name of the refused wait.
        request: RequestName,
        /// The owner object of the refused wait.
        owner: ObjectId,
    },
}

/// Describes an object's current scope in an error message.
struct Current(Option<Generation>);

impl fmt::Display for Current {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(generation) => write!(f, "{generation}"),
            None => f.write_str("no scope at all"),
        }
    }
}
