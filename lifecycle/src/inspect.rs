//! Read-only views of the registry for debugging, reports and leak checks: the pending waits
//! with what blocks them, and running counters.
//!
//! Nothing here changes the registry or runs a callback.

use std::fmt;

use crate::id::{RequestName, Requirement, ScopeToken};

/// A wait that has not been delivered yet, as listed by
/// [`Registry::pending_waits`](crate::Registry::pending_waits).
///
/// Its display names the owner, the request and every requirement still missing, which is the
/// first thing to look at when a callback never fires.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PendingWait<'a> {
    /// The owner scope of the wait.
    pub owner: ScopeToken,
    /// The request name, unique per owner.
    pub request: &'a RequestName,
    /// The guard scope of a guarded wait.
    pub guard: Option<ScopeToken>,
    /// Every requirement of the wait, in the order registered (duplicates removed).
    pub requirements: &'a [Requirement],
    /// The requirements not ready now, in the same order.
    pub blocking: Vec<Requirement>,
}

impl fmt::Display for PendingWait<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "wait {} of {}", self.request, self.owner)?;
        if let Some(guard) = self.guard {
            write!(f, " guarded by {guard}")?;
        }
        if self.blocking.is_empty() {
            return f.write_str(" is ready and queued for delivery");
        }
        f.write_str(" blocked on ")?;
        for (i, requirement) in self.blocking.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{requirement}")?;
        }
        Ok(())
    }
}

/// Running totals since the registry was created, from
/// [`Registry::counters`](crate::Registry::counters).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Counters {
    /// Callbacks delivered.
    pub delivered: u64,
    /// Pending waits replaced by a registration of the same owner and request name.
    pub replaced: u64,
    /// Pending waits removed by `cancel`.
    pub cancelled: u64,
    /// Pending waits retired because a scope they owned, referenced or were guarded by was reset.
    pub retired: u64,
    /// Operations refused because a token was stale.
    pub stale_rejections: u64,
    /// Waits examined because a fact they reference was published. Grows with the waits that
    /// reference the published fact, never with unrelated waits.
    pub examined: u64,
}
