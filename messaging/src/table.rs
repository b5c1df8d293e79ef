//! Listener records: one list per (listen point, [`Match`]), each kept in registration order.
//!
//! Serials are process-wide and increase with every registration, so each list is sorted by
//! serial and "registration order" is "serial order" across all lists. Removal shifts the list
//! (never swap-with-last), so it keeps that order (MB-11).
//!
//! A list is shared copy-on-write: a broadcast takes a [`Snapshot`] of each list it walks (one
//! reference count each) and delivers from it without holding any borrow of the table, so
//! callbacks may register and remove freely; a change to a list while a snapshot of it is out
//! copies the list first and leaves the snapshot as it was. The snapshot therefore fixes the
//! recipients: a record registered later is not in it. A record removed later still is, so the
//! router counts removals and a delivery that sees the count changed since its snapshot asks the
//! table whether the record is still listed before calling it. Records are
//! small and stored inline, so a long list is walked through contiguous memory. This module
//! stores and finds; it never calls a callback, and its callers never hold a borrow of it while
//! one runs.

use std::any::Any;
use std::rc::Rc;

use crate::channel::Match;
use crate::delivery::Delivery;
use crate::handle::ListenerId;

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

/// The erased callback signature, named once: it receives the payload already seen as the
/// listener's expected type.
pub(crate) trait ErasedFn<C>: Fn(&mut Delivery<'_, C>, &dyn Any) {}

impl<C, F: Fn(&mut Delivery<'_, C>, &dyn Any)> ErasedFn<C> for F {}

/// One listener record.
pub(crate) struct Record<C> {
    pub(crate) id: ListenerId,
    /// The expected payload type, as its index in the router's type table.
    pub(crate) expected: u32,
    pub(crate) api: Api,
    /// Boxed inside the shared pointer: the record stays small (a thin pointer), and a call is
    /// two loads away.
    callback: Rc<Box<dyn ErasedFn<C>>>,
}

impl<C> Clone for Record<C> {
    fn clone(&self) -> Self {
        Record {
            id: self.id,
            expected: self.expected,
            api: self.api,
            callback: Rc::clone(&self.callback),
        }
    }
}

impl<C> Record<C> {
    pub(crate) fn new<F>(id: ListenerId, expected: u32, api: Api, callback: F) -> Record<C>
    where
        F: Fn(&mut Delivery<'_, C>, &dyn Any) + 'static,
    {
        Record { id, expected, api, callback: Rc::new(Box::new(callback)) }
    }

    pub(crate) fn serial(&self) -> u64 {
        self.id.serial
    }

    #[inline]
    pub(crate) fn call(&self, delivery: &mut Delivery<'_, C>, payload: &dyn Any) {
        (self.callback)(delivery, payload)
    }
}

/// One list: its records, and the expected type they all share, if they do.
pub(crate) struct List<C> {
    records: Vec<Record<C>>,
    /// `Some(type)` while every record ever pushed since the list was last empty expects that
    /// type, so a delivery asks the rule once for the whole list. Kept conservative: removing
    /// the odd record out does not bring it back.
    uniform: Option<u32>,
}

impl<C> Clone for List<C> {
    fn clone(&self) -> Self {
        List { records: self.records.clone(), uniform: self.uniform }
    }
}

/// One list's records as they were when it was taken; see the module documentation.
pub(crate) struct Snapshot<C>(Rc<List<C>>);

impl<C> Snapshot<C> {
    pub(crate) fn records(&self) -> &[Record<C>] {
        &self.0.records
    }

    /// The expected type every record of the snapshot shares, if they do.
    pub(crate) fn uniform(&self) -> Option<u32> {
        self.0.uniform
    }
}

/// Every listener record of one router.
pub(crate) struct Table<C> {
    /// `None` for an empty list.
    lists: Vec<Option<Rc<List<C>>>>,
    /// For each channel, the lists its broadcasts walk (as indices into `lists`).
    walks: Vec<Box<[usize]>>,
    /// For each channel, the lists of its walk that are not empty: what a broadcast visits.
    occupied: Vec<Vec<usize>>,
    /// For each list, the channels whose walk includes it.
    walked_by: Vec<Vec<usize>>,
    live: usize,
}

impl<C> Table<C> {
    /// Empty lists for `slots` listen points, and the walk of each channel.
    pub(crate) fn new(slots: usize, walks: &[&[ListRef]]) -> Table<C> {
        let walks: Vec<Box<[usize]>> =
            walks.iter().map(|walk| walk.iter().map(|&l| Self::index(l)).collect()).collect();
        let mut walked_by = vec![Vec::new(); slots * 2];
        for (channel, walk) in walks.iter().enumerate() {
            for &list in walk.iter() {
                if let Some(users) = walked_by.get_mut(list) {
                    users.push(channel);
                }
            }
        }
        Table {
            lists: (0..slots * 2).map(|_| None).collect(),
            occupied: vec![Vec::new(); walks.len()],
            walks,
            walked_by,
            live: 0,
        }
    }

    /// The non-empty lists a broadcast on `channel` visits, as indices for [`Table::snapshot_at`].
    pub(crate) fn occupied(&self, channel: usize) -> &[usize] {
        self.occupied.get(channel).map_or(&[], Vec::as_slice)
    }

    /// The records of the list at `index` as they are now, if it has any.
    pub(crate) fn snapshot_at(&self, index: usize) -> Option<Snapshot<C>> {
        self.lists.get(index)?.as_ref().map(|l| Snapshot(Rc::clone(l)))
    }

    /// The list at `index` became empty or stopped being empty: the walks through it change.
    fn occupancy_changed(&mut self, index: usize) {
        let Some(users) = self.walked_by.get(index) else { return };
        for &channel in users {
            let lists = &self.lists;
            let occupied = self.walks[channel]
                .iter()
                .copied()
                .filter(|&l| lists.get(l).is_some_and(Option::is_some));
            self.occupied[channel] = occupied.collect();
        }
    }

    fn index(list: ListRef) -> usize {
        list.slot as usize * 2
            + match list.matching {
                Match::Exact => 0,
                Match::Hierarchical => 1,
            }
    }

    /// The records of `list`, in registration order (empty for a list this router lacks).
    pub(crate) fn list(&self, list: ListRef) -> &[Record<C>] {
        self.lists.get(Self::index(list)).and_then(Option::as_ref).map_or(&[], |l| &l.records)
    }

    /// Appends a record; its serial is newer than every serial already stored.
    pub(crate) fn push(&mut self, record: Record<C>) {
        let index = Self::index(record.id.list);
        let Some(slot) = self.lists.get_mut(index) else { return };
        let was_empty = slot.is_none();
        let uniform = Some(record.expected);
        let l = Rc::make_mut(
            slot.get_or_insert_with(|| Rc::new(List { records: Vec::new(), uniform })),
        );
        debug_assert!(l.records.last().is_none_or(|last| last.serial() < record.serial()));
        if l.uniform != uniform {
            l.uniform = None;
        }
        l.records.push(record);
        self.live += 1;
        if was_empty {
            self.occupancy_changed(index);
        }
    }

    /// The record `serial` of `list`, if it is still there.
    pub(crate) fn find(&self, list: ListRef, serial: u64) -> Option<&Record<C>> {
        let l = self.list(list);
        l.binary_search_by_key(&serial, Record::serial).ok().map(|at| &l[at])
    }

    /// Removes the record `serial` of `list`, keeping the order of the others. The caller drops
    /// the returned record after releasing its borrow (dropping a callback runs user code).
    pub(crate) fn remove(&mut self, list: ListRef, serial: u64) -> Option<Record<C>> {
        let index = Self::index(list);
        let slot = self.lists.get_mut(index)?;
        let l = slot.as_mut()?;
        let at = l.records.binary_search_by_key(&serial, Record::serial).ok()?;
        let record = Rc::make_mut(l).records.remove(at);
        self.live -= 1;
        if l.records.is_empty() {
            *slot = None;
            self.occupancy_changed(index);
        }
        Some(record)
    }

    /// Number of live records.
    pub(crate) fn live(&self) -> usize {
        self.live
    }
}
