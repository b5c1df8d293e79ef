//! Listener records: one list per (listen point, [`Match`]), each kept in registration order.
//!
//! Serials are process-wide and increase with every registration, so each list is sorted by
//! serial and "registration order" is "serial order" across all lists. Removal shifts the list
//! (never swap-with-last), so it keeps that order (MB-11). This module stores and finds; it never
//! calls a callback, and its callers never hold a borrow of it while one runs.

use std::any::Any;
use std::rc::Rc;

use crate::channel::Match;
use crate::delivery::Delivery;
use crate::payload::PayloadType;

/// Which list a listener lives in: its listen point's slot and its match kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct ListRef {
    pub(crate) slot: u32,
    pub(crate) matching: Match,
}

/// Which API registered a listener (for logs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Api {
    Typed,
    Dynamic,
}

impl Api {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Api::Typed => "typed",
            Api::Dynamic => "dynamic",
        }
    }
}

/// A listener's callback, erased over the API: it receives the payload already seen as the
/// listener's expected type.
pub(crate) struct Callback<C>(Rc<dyn ErasedFn<C>>);

/// The erased callback signature, named once.
pub(crate) trait ErasedFn<C>: Fn(&mut Delivery<'_, C>, &dyn Any) {}

impl<C, F: Fn(&mut Delivery<'_, C>, &dyn Any)> ErasedFn<C> for F {}

impl<C> Callback<C> {
    pub(crate) fn new<F>(f: F) -> Callback<C>
    where
        F: Fn(&mut Delivery<'_, C>, &dyn Any) + 'static,
    {
        Callback(Rc::new(f))
    }

    pub(crate) fn call(&self, delivery: &mut Delivery<'_, C>, payload: &dyn Any) {
        (self.0)(delivery, payload)
    }
}

impl<C> Clone for Callback<C> {
    fn clone(&self) -> Self {
        Callback(Rc::clone(&self.0))
    }
}

/// One listener record.
pub(crate) struct Entry<C> {
    pub(crate) serial: u64,
    pub(crate) expected: PayloadType,
    pub(crate) api: Api,
    pub(crate) callback: Callback<C>,
}

/// Every listener record of one router.
pub(crate) struct Table<C> {
    lists: Vec<Vec<Entry<C>>>,
    live: usize,
}

impl<C> Table<C> {
    /// Empty lists for `slots` listen points.
    pub(crate) fn new(slots: usize) -> Table<C> {
        Table { lists: (0..slots * 2).map(|_| Vec::new()).collect(), live: 0 }
    }

    fn index(list: ListRef) -> usize {
        list.slot as usize * 2
            + match list.matching {
                Match::Exact => 0,
                Match::Hierarchical => 1,
            }
    }

    /// The records of `list`, in registration order (empty for a list this router lacks).
    pub(crate) fn list(&self, list: ListRef) -> &[Entry<C>] {
        self.lists.get(Self::index(list)).map_or(&[], |l| l.as_slice())
    }

    /// Appends a record; its serial is newer than every serial already stored.
    pub(crate) fn push(&mut self, list: ListRef, entry: Entry<C>) {
        if let Some(l) = self.lists.get_mut(Self::index(list)) {
            debug_assert!(l.last().is_none_or(|last| last.serial < entry.serial));
            l.push(entry);
            self.live += 1;
        }
    }

    /// The record `serial` of `list`, if it is still there.
    pub(crate) fn find(&self, list: ListRef, serial: u64) -> Option<&Entry<C>> {
        let l = self.list(list);
        l.binary_search_by_key(&serial, |e| e.serial).ok().map(|at| &l[at])
    }

    /// Removes the record `serial` of `list`, keeping the order of the others. The caller drops
    /// the returned record after releasing its borrow (dropping a callback runs user code).
    pub(crate) fn remove(&mut self, list: ListRef, serial: u64) -> Option<Entry<C>> {
        let l = self.lists.get_mut(Self::index(list))?;
        let at = l.binary_search_by_key(&serial, |e| e.serial).ok()?;
        self.live -= 1;
        Some(l.remove(at))
    }

    /// Number of live records.
    pub(crate) fn live(&self) -> usize {
        self.live
    }
}
