//! Delivery: how one message reaches its listeners, and how a sticky message reaches a late one.
//!
//! Contract (docs/spec/router.md R10 and R11, MB-11 and MB-12, with R2 and R12 as they apply
//! during a delivery):
//! - delivery is synchronous and follows global registration order across every list the
//!   channel's walk visits (its exact and hierarchical lists, then each ancestor's hierarchical
//!   list);
//! - the recipients are fixed when the broadcast starts (a snapshot of each list): a listener
//!   registered during the delivery does not receive this message (a sticky channel's
//!   registration replay gives it the message instead, exactly once); a listener removed before
//!   its turn is not called;
//! - each listener's expected type is checked by the one rule; a mismatch skips that listener
//!   loudly (an error in the log, and a counter) and the broadcast goes on;
//! - nesting (a callback broadcasting, or registering on a sticky channel) is bounded by the
//!   configured depth, and a refused level is an error, never a silent drop;
//! - no borrow of the router's state is held while a callback runs, so callbacks may do
//!   anything the router offers.
//!
//! Cost: per broadcast, one type check against the channel and one snapshot per non-empty list;
//! per delivery, a liveness flag, a type identity compared with the previous listener's (the
//! rule runs again only when the expected type changes), two counters and the call.

use std::any::Any;
use std::cell::Cell;
use std::rc::Rc;

use gatehouse_tags::GameplayTag;

use crate::declare::{Keep, TypeTable};
use crate::delivery::{Delivery, Header};
use crate::error::Error;
use crate::handle::{Lifetime, ListenerId};
use crate::payload::PayloadType;
use crate::router::{Retained, Router};
use crate::rule::{self, Fits};
use crate::stats::{Report, bump};
use crate::table::{Record, Snapshot};

/// One level of nesting, released when dropped (also on unwind).
struct Level<'a>(&'a Cell<usize>);

impl Drop for Level<'_> {
    fn drop(&mut self) {
        self.0.set(self.0.get().saturating_sub(1));
    }
}

/// One message on its way: what was sent, and its view as the last expected type asked for.
struct Message<'p> {
    sent: &'p PayloadType,
    /// `sent`'s index in the router's type table.
    sent_index: u32,
    payload: &'p dyn Any,
    /// The router's removal count when the recipients were fixed.
    removals: u64,
    /// The expected type (by index) that `view` answers for: the rule's answer is reused while
    /// listeners expect the same type.
    last_type: u32,
    /// The payload seen as `last_type`; `None` if it does not fit.
    view: Option<&'p dyn Any>,
}

impl<'p> Message<'p> {
    /// The payload seen as the type at `expected` in `types`, by the one rule (as `types`
    /// remembers its answers); `None` if it does not fit.
    #[inline(always)]
    fn view(&mut self, types: &TypeTable, expected: u32) -> Option<&'p dyn Any> {
        if expected != self.last_type {
            self.last_type = expected;
            self.view = types
                .fits(self.sent_index, expected)
                .and_then(|fits| fits.view(self.sent, self.payload));
        }
        self.view
    }
}

impl<C: 'static> Router<C> {
    /// Delivers one message on the channel at `index`; `sent_index` is the payload's declared
    /// type (an index in the type table).
    ///
    /// 1. Check the payload against the channel's declared type (the one rule).
    /// 2. Enter one nesting level, or refuse past the configured depth (MB-12).
    /// 3. On a sticky channel, retain a copy as the declared type (MB-13), held by `owner` if
    ///    one is given.
    /// 4. Fix the recipients: a snapshot of each non-empty list of the channel's walk.
    /// 5. Call the live ones in registration order across the snapshots (MB-11).
    #[inline]
    pub(crate) fn dispatch(
        &self,
        state: &mut C,
        index: usize,
        sent_index: u32,
        payload: &dyn Any,
        owner: Option<&mut Lifetime>,
    ) -> Result<Report, Error> {
        let plan = &self.shared.layout.channels[index];
        let channel = plan.decl.tag;
        let types = &self.shared.layout.types;
        let sent = types.get(sent_index);
        let Some(fits) = types.fits(sent_index, plan.ty) else {
            return Err(self.refuse_broadcast(Error::PayloadMismatch {
                channel,
                expected: plan.decl.ty.name,
                arrived: sent.name,
            }));
        };
        let _level = self.enter(channel).map_err(|e| self.refuse_broadcast(e))?;
        if let Some(keep) = plan.decl.sticky {
            let seq = self.retain(index, keep, fits, sent, payload);
            if let (Some(seq), Some(owner)) = (seq, owner) {
                owner.hold_retained(self.registry(), index, seq);
            }
        }
        bump(&self.shared.stats.broadcasts);

        let header = Header { channel, sent_type: sent.name, replay: false };
        let view = fits.view(sent, payload);
        let mut message = self.message(sent_index, payload, plan.ty, view);
        let mut report = Report::default();
        let table = self.shared.table.borrow();
        match *table.occupied(index) {
            [] => drop(table),
            [only] => {
                // The usual case: every recipient in one list.
                let snapshot = table.snapshot_at(only);
                drop(table);
                if let Some(only) = snapshot {
                    let (records, uniform) = (only.records(), only.uniform());
                    self.deliver_list(state, records, uniform, &header, &mut message, &mut report);
                }
            }
            ref lists => {
                let snapshots: Vec<Snapshot<C>> =
                    lists.iter().filter_map(|&l| table.snapshot_at(l)).collect();
                drop(table);
                self.deliver_merged(state, &snapshots, &header, &mut message, &mut report);
            }
        }
        self.count_deliveries(&report);
        Ok(report)
    }

    /// Adds what one broadcast or replay delivered to the router's totals, once it is done.
    fn count_deliveries(&self, report: &Report) {
        let deliveries = &self.shared.stats.deliveries;
        deliveries.set(deliveries.get() + report.delivered as u64);
    }

    /// Delivers to the records of one list, in order. When they all expect one type
    /// (`uniform`) that the message fits, the rule is asked once for all of them.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn deliver_list(
        &self,
        state: &mut C,
        records: &[Record<C>],
        uniform: Option<u32>,
        header: &Header,
        message: &mut Message<'_>,
        report: &mut Report,
    ) {
        let Some(first) = records.first() else { return };
        let mut delivery = Delivery::new(self, state, header, &first.id);
        let types = &self.shared.layout.types;
        match uniform.and_then(|ty| message.view(types, ty)) {
            Some(view) => {
                for record in records {
                    if self.is_live(record, message) {
                        report.delivered += 1;
                        delivery.set_listener(&record.id);
                        record.call(&mut delivery, view);
                    }
                }
            }
            None => {
                for record in records {
                    self.deliver(&mut delivery, record, message, report);
                }
            }
        }
    }

    /// Delivers from several snapshots, always taking the smallest serial next: registration
    /// order across lists.
    fn deliver_merged(
        &self,
        state: &mut C,
        snapshots: &[Snapshot<C>],
        header: &Header,
        message: &mut Message<'_>,
        report: &mut Report,
    ) {
        let Some(first) = snapshots.iter().find_map(|s| s.records().first()) else { return };
        let mut delivery = Delivery::new(self, state, header, &first.id);
        let mut next = vec![0usize; snapshots.len()];
        loop {
            let mut best: Option<(u64, usize)> = None;
            for (at, snapshot) in snapshots.iter().enumerate() {
                if let Some(record) = snapshot.records().get(next[at])
                    && best.is_none_or(|(serial, _)| record.serial() < serial)
                {
                    best = Some((record.serial(), at));
                }
            }
            let Some((_, at)) = best else { return };
            let record = &snapshots[at].records()[next[at]];
            next[at] += 1;
            self.deliver(&mut delivery, record, message, report);
        }
    }

    /// Replays to the new listener `id` alone the retained message of each sticky channel in
    /// `matched`, oldest first. Each replay goes through the same rule and reporting as a
    /// broadcast, and counts as one nesting level.
    pub(crate) fn replay(
        &self,
        state: &mut C,
        matched: &[usize],
        id: ListenerId,
    ) -> Result<(), Error> {
        let mut pending: Vec<(u64, usize, Rc<dyn Any>)> = {
            let retained = self.shared.retained.borrow();
            matched
                .iter()
                .filter_map(|&i| {
                    let kept = retained.get(i)?.as_ref()?;
                    Some((kept.seq, i, Rc::clone(&kept.value)))
                })
                .collect()
        };
        let Some(first) = pending.iter().min_by_key(|p| p.0) else {
            return Ok(());
        };
        let first_channel = self.shared.layout.channels[first.1].decl.tag;
        let _level = self.enter(first_channel)?;
        pending.sort_by_key(|p| p.0);
        let mut report = Report::default();
        for (_, index, value) in pending {
            let plan = &self.shared.layout.channels[index];
            // The listener may have removed itself during an earlier replay.
            let Some(record) = self.record(id) else {
                break;
            };
            bump(&self.shared.stats.replays);
            let header =
                Header { channel: plan.decl.tag, sent_type: plan.decl.ty.name, replay: true };
            let mut message = self.message(plan.ty, &*value, plan.ty, Some(&*value));
            let records = std::slice::from_ref(&record);
            self.deliver_list(state, records, None, &header, &mut message, &mut report);
        }
        self.count_deliveries(&report);
        Ok(())
    }

    /// Enters one nesting level, or refuses if the configured depth is reached.
    fn enter(&self, channel: GameplayTag) -> Result<Level<'_>, Error> {
        let depth = self.shared.depth.get();
        let limit = self.shared.config.max_depth();
        if depth >= limit {
            bump(&self.shared.stats.depth_exceeded);
            return Err(Error::DepthExceeded { channel, limit, arrived: depth + 1 });
        }
        self.shared.depth.set(depth + 1);
        Ok(Level(&self.shared.depth))
    }

    /// Keeps a copy of a sticky channel's message, as the channel's declared type, and returns
    /// its sequence number.
    fn retain(
        &self,
        index: usize,
        keep: Keep,
        fits: Fits,
        sent: &PayloadType,
        payload: &dyn Any,
    ) -> Option<u64> {
        let Some(copy) = fits.view(sent, payload).and_then(|view| keep.copy(view)) else {
            // `fits` was checked against the channel's type, and `payload` is of type `sent`.
            tracing::error!(
                sent = sent.name,
                "router invariant broken: a checked sticky payload could not be retained"
            );
            return None;
        };
        let seq = self.shared.retained_seq.get() + 1;
        self.shared.retained_seq.set(seq);
        let previous = self
            .shared
            .retained
            .borrow_mut()
            .get_mut(index)
            .and_then(|slot| slot.replace(Retained { seq, value: copy }));
        // Dropped after the borrow: a payload is user data.
        drop(previous);
        Some(seq)
    }

    /// A message sent as the type at `sent_index`, to deliver from now on, whose view as the
    /// type `ty` (both indices in the type table) is `view`.
    fn message<'p>(
        &'p self,
        sent_index: u32,
        payload: &'p dyn Any,
        ty: u32,
        view: Option<&'p dyn Any>,
    ) -> Message<'p> {
        let sent = self.shared.layout.types.get(sent_index);
        let removals = self.shared.removals.get();
        Message { sent, sent_index, payload, removals, last_type: ty, view }
    }

    /// The record `id`, if it is still registered.
    fn record(&self, id: ListenerId) -> Option<Record<C>> {
        self.shared.table.borrow().find(id.list, id.serial).cloned()
    }

    /// Whether `record`, taken from a snapshot of `message`'s recipients, is still registered.
    #[inline]
    fn is_live(&self, record: &Record<C>, message: &Message<'_>) -> bool {
        // Nothing was removed since the snapshot: every record in it is live.
        self.shared.removals.get() == message.removals || {
            let id = record.id;
            self.shared.table.borrow().find(id.list, id.serial).is_some()
        }
    }

    /// Calls one listener, or reports why not: it was removed since the snapshot (skipped
    /// quietly), or the message does not fit its expected type (skipped loudly).
    #[inline(always)]
    fn deliver<'r>(
        &self,
        delivery: &mut Delivery<'r, C>,
        record: &'r Record<C>,
        message: &mut Message<'_>,
        report: &mut Report,
    ) {
        if !self.is_live(record, message) {
            return;
        }
        match message.view(&self.shared.layout.types, record.expected) {
            Some(view) => {
                report.delivered += 1;
                delivery.set_listener(&record.id);
                record.call(delivery, view);
            }
            None => self.skip(record, delivery.channel(), delivery.is_replay(), message, report),
        }
    }

    /// Skips a listener the message does not fit: counted and logged as an error, the same way in
    /// both APIs (docs/spec/router.md R2).
    #[cold]
    #[inline(never)]
    fn skip(
        &self,
        record: &Record<C>,
        channel: GameplayTag,
        replay: bool,
        message: &Message<'_>,
        report: &mut Report,
    ) {
        report.mismatched += 1;
        bump(&self.shared.stats.mismatches);
        let id = record.id;
        match rule::check(self.shared.layout.types.get(record.expected), message.sent) {
            Err(mismatch) => tracing::error!(
                channel = %channel,
                listener = %id,
                api = record.api.as_str(),
                expected = mismatch.expected,
                arrived = mismatch.arrived,
                replay,
                "payload type mismatch: expected {}, arrived {}; listener skipped",
                mismatch.expected,
                mismatch.arrived,
            ),
            // `payload` is of type `sent` (checked where it entered) and `sent` fits.
            Ok(_) => tracing::error!(
                listener = %id,
                "router invariant broken: a fitting payload could not be viewed as the expected type"
            ),
        }
    }
}
