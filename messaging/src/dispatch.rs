//! Delivery: how one message reaches its listeners, and how a sticky message reaches a late one.
//!
//! Contract (the seed's MB-11 and MB-12, and the "during delivery" rules):
//! - delivery is synchronous and follows global registration order across every list the
//!   channel's walk visits (its exact and hierarchical lists, then each ancestor's hierarchical
//!   list);
//! - the recipients are fixed when the broadcast starts: a listener registered during the
//!   delivery does not receive this message (a sticky channel's registration replay gives it
//!   the message instead, exactly once); a listener removed before its turn is not called;
//! - each listener's expected type is checked by the one rule; a mismatch skips that listener
//!   loudly (warn + counter) and the broadcast goes on;
//! - nesting (a callback broadcasting, or registering on a sticky channel) is bounded by the
//!   configured depth, and a refused level is an error, never a silent drop;
//! - no borrow of the router's state is held while a callback runs, so callbacks may do
//!   anything the router offers.

use std::any::Any;
use std::cell::Cell;
use std::rc::Rc;

use gatehouse_tags::GameplayTag;

use crate::declare::Keep;
use crate::delivery::Delivery;
use crate::error::Error;
use crate::handle::{ListenerId, serial_watermark};
use crate::payload::PayloadType;
use crate::router::{Retained, Router};
use crate::rule::{self, Fits};
use crate::stats::Report;
use crate::table::{Api, Callback, Entry, ListRef};

/// A position in one list of a broadcast's walk.
#[derive(Clone, Copy)]
struct Cursor {
    list: ListRef,
    pos: usize,
}

/// The next listener to call, copied out of the table so no borrow outlives the lookup.
struct Recipient<C> {
    id: ListenerId,
    expected: PayloadType,
    api: Api,
    callback: Callback<C>,
}

/// One level of nesting, released when dropped (also on unwind).
struct Level<'a>(&'a Cell<usize>);

impl Drop for Level<'_> {
    fn drop(&mut self) {
        self.0.set(self.0.get().saturating_sub(1));
    }
}

impl<C: 'static> Router<C> {
    /// Delivers one message on the channel at `index`.
    ///
    /// 1. Check the payload against the channel's declared type (the one rule).
    /// 2. Enter one nesting level, or refuse past the configured depth (MB-12).
    /// 3. On a sticky channel, retain a copy as the declared type (MB-13).
    /// 4. Fix the recipients: records registered before this point (serial watermark).
    /// 5. Call them in registration order, looking each one up afresh (MB-11).
    pub(crate) fn dispatch(
        &self,
        state: &mut C,
        index: usize,
        sent: PayloadType,
        payload: &dyn Any,
    ) -> Result<Report, Error> {
        let plan = &self.shared.layout.channels[index];
        let channel = plan.decl.tag;
        let fits = rule::check(&plan.decl.ty, &sent).map_err(|m| {
            self.refuse_broadcast(Error::PayloadMismatch {
                channel,
                expected: m.expected,
                arrived: m.arrived,
            })
        })?;
        let _level = self.enter(channel).map_err(|e| self.refuse_broadcast(e))?;
        if let Some(keep) = plan.decl.sticky {
            self.retain(index, keep, fits, &sent, payload);
        }
        self.shared.bump(|s| s.broadcasts += 1);

        let watermark = serial_watermark();
        let mut cursors: Vec<Cursor> = Vec::new();
        {
            let table = self.shared.table.borrow();
            for &list in plan.walk.iter() {
                if table.list(list).first().is_some_and(|e| e.serial < watermark) {
                    cursors.push(Cursor { list, pos: 0 });
                }
            }
        }
        let mut report = Report::default();
        let mut last = 0;
        while let Some(recipient) = self.next_recipient(&mut cursors, last, watermark) {
            last = recipient.id.serial;
            self.deliver(state, recipient, channel, &sent, payload, false, &mut report);
        }
        Ok(report)
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
            let decl = self.shared.layout.channels[index].decl;
            // The listener may have removed itself during an earlier replay.
            let Some(recipient) = self.recipient(id) else {
                break;
            };
            self.shared.bump(|s| s.replays += 1);
            self.deliver(state, recipient, decl.tag, &decl.ty, &*value, true, &mut report);
        }
        Ok(())
    }

    /// Enters one nesting level, or refuses if the configured depth is reached.
    fn enter(&self, channel: GameplayTag) -> Result<Level<'_>, Error> {
        let depth = self.shared.depth.get();
        let limit = self.shared.config.max_depth();
        if depth >= limit {
            self.shared.bump(|s| s.depth_exceeded += 1);
            return Err(Error::DepthExceeded { channel, limit, arrived: depth + 1 });
        }
        self.shared.depth.set(depth + 1);
        Ok(Level(&self.shared.depth))
    }

    /// Keeps a copy of a sticky channel's message, as the channel's declared type.
    fn retain(&self, index: usize, keep: Keep, fits: Fits, sent: &PayloadType, payload: &dyn Any) {
        let Some(copy) = fits.view(sent, payload).and_then(|view| keep.copy(view)) else {
            // `fits` was checked against the channel's type, and `payload` is of type `sent`.
            tracing::error!(
                sent = sent.name,
                "router invariant broken: a checked sticky payload could not be retained"
            );
            return;
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
    }

    /// The record `id`, copied out, if it is still registered.
    fn recipient(&self, id: ListenerId) -> Option<Recipient<C>> {
        let table = self.shared.table.borrow();
        table.find(id.list, id.serial).map(|e| Recipient::of(id.list, e))
    }

    /// The registered record with the smallest serial above `last` and below `watermark`
    /// across the cursors' lists, re-finding each cursor's position if its list changed.
    fn next_recipient(
        &self,
        cursors: &mut [Cursor],
        last: u64,
        watermark: u64,
    ) -> Option<Recipient<C>> {
        let table = self.shared.table.borrow();
        let mut best: Option<(u64, usize)> = None;
        for (at, cursor) in cursors.iter_mut().enumerate() {
            let list = table.list(cursor.list);
            cursor.pos = resync(list, cursor.pos, last);
            if let Some(entry) = list.get(cursor.pos) {
                if entry.serial < watermark && best.is_none_or(|(serial, _)| entry.serial < serial)
                {
                    best = Some((entry.serial, at));
                }
            }
        }
        let (_, at) = best?;
        let cursor = &mut cursors[at];
        let entry = &table.list(cursor.list)[cursor.pos];
        cursor.pos += 1;
        Some(Recipient::of(cursor.list, entry))
    }

    /// Calls one listener, or reports why not.
    #[allow(clippy::too_many_arguments)]
    fn deliver(
        &self,
        state: &mut C,
        recipient: Recipient<C>,
        channel: GameplayTag,
        sent: &PayloadType,
        payload: &dyn Any,
        replay: bool,
        report: &mut Report,
    ) {
        let id = recipient.id;
        let view = match rule::check(&recipient.expected, sent) {
            Ok(fits) => fits.view(sent, payload),
            Err(mismatch) => {
                report.mismatched += 1;
                self.shared.bump(|s| s.mismatches += 1);
                tracing::warn!(
                    channel = %channel,
                    listener = %id,
                    api = recipient.api.as_str(),
                    expected = mismatch.expected,
                    arrived = mismatch.arrived,
                    replay,
                    "payload type mismatch: expected {}, arrived {}; listener skipped",
                    mismatch.expected,
                    mismatch.arrived,
                );
                return;
            }
        };
        let Some(view) = view else {
            // `payload` is of type `sent` (checked where it entered) and `sent` fits.
            report.mismatched += 1;
            self.shared.bump(|s| s.mismatches += 1);
            tracing::error!(
                listener = %id,
                "router invariant broken: a fitting payload could not be viewed as the expected type"
            );
            return;
        };
        report.delivered += 1;
        self.shared.bump(|s| s.deliveries += 1);
        let mut delivery = Delivery::new(self, state, channel, sent.name, id, replay);
        recipient.callback.call(&mut delivery, view);
    }
}

impl<C> Recipient<C> {
    fn of(list: ListRef, entry: &Entry<C>) -> Recipient<C> {
        Recipient {
            id: ListenerId { serial: entry.serial, list },
            expected: entry.expected,
            api: entry.api,
            callback: entry.callback.clone(),
        }
    }
}

/// The first position in `list` whose serial is above `last`: `pos` itself when the list has
/// not changed around it, otherwise found again by binary search.
fn resync<C>(list: &[Entry<C>], pos: usize, last: u64) -> usize {
    let settled = pos <= list.len()
        && (pos == 0 || list[pos - 1].serial <= last)
        && list.get(pos).is_none_or(|e| e.serial > last);
    if settled { pos } else { list.partition_point(|e| e.serial <= last) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channel::Match;
    use crate::payload::Payload;
    use crate::table::Table;

    struct P;
    impl Payload for P {
        const NAME: &'static str = "P";
    }

    fn list_of(serials: &[u64]) -> Table<()> {
        let mut table = Table::new(1);
        for &serial in serials {
            table.push(
                LIST,
                Entry {
                    serial,
                    expected: PayloadType::of::<P>(),
                    api: Api::Typed,
                    callback: Callback::new(|_, _| {}),
                },
            );
        }
        table
    }

    const LIST: ListRef = ListRef { slot: 0, matching: Match::Exact };

    #[test]
    fn a_cursor_keeps_its_place_or_finds_it_again() {
        let mut table = list_of(&[2, 4, 6, 8]);
        // Unchanged list: the position after the last delivered serial stands.
        assert_eq!(resync(table.list(LIST), 2, 4), 2);
        // The delivered record (4) removed itself: the next one (6) is now at index 1.
        table.remove(LIST, 4);
        assert_eq!(resync(table.list(LIST), 2, 4), 1);
        // An earlier record (2) was removed: everything shifted left by one.
        table.remove(LIST, 2);
        assert_eq!(resync(table.list(LIST), 1, 4), 0);
        // Past the end.
        assert_eq!(resync(table.list(LIST), 2, 8), 2);
        assert_eq!(resync(table.list(LIST), 9, 8), 2);
    }
}
