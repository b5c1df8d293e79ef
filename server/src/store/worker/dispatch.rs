//! The worker's one dispatching task: a lane of queued requests per key, started one at a
//! time; queued loads failed at their deadline; replies passed on in order.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::sync::Arc;

use gatehouse_protocol::PlayerId;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tracing::Instrument as _;

use super::job::{Ctx, Learned, Lineage, run_job};
use super::{LoadOutcome, SaveBackend, SaveOutcome, StoreReply, StoreRequest};

impl StoreRequest {
    fn key(&self) -> Key {
        match self {
            StoreRequest::LoadPlayer { player, .. } => Key::Player(player.clone()),
            StoreRequest::SavePlayer(save) => Key::Player(save.player.clone()),
            StoreRequest::LoadSession(session) => Key::Session(session.clone()),
            StoreRequest::SaveSession(save) => Key::Session(save.session.clone()),
        }
    }

    pub(super) fn is_save(&self) -> bool {
        matches!(self, StoreRequest::SavePlayer(_) | StoreRequest::SaveSession(_))
    }

    pub(super) fn is_load(&self) -> bool {
        !self.is_save()
    }

    /// The reply for a request that cannot run: a failed load or save.
    pub(super) fn failed(&self, reason: String) -> StoreReply {
        match self {
            StoreRequest::LoadPlayer { player, ticket } => StoreReply::PlayerLoaded {
                player: player.clone(),
                ticket: *ticket,
                outcome: LoadOutcome::Failed(reason),
            },
            StoreRequest::SavePlayer(save) => StoreReply::PlayerSaved {
                player: save.player.clone(),
                outcome: SaveOutcome::Failed { attempts: 0, reason },
            },
            StoreRequest::LoadSession(session) => StoreReply::SessionLoaded {
                session: session.clone(),
                outcome: LoadOutcome::Failed(reason),
            },
            StoreRequest::SaveSession(save) => StoreReply::SessionSaved {
                session: save.session.clone(),
                outcome: SaveOutcome::Failed { attempts: 0, reason },
            },
        }
    }
}

/// What requests are ordered by.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Key {
    Player(PlayerId),
    Session(String),
}

impl Key {
    fn span(&self) -> tracing::Span {
        match self {
            Key::Player(player) => tracing::info_span!("store", player = %player),
            Key::Session(session) => tracing::info_span!("store", session = %session),
        }
    }
}

/// A queued request.
#[derive(Debug)]
pub(super) struct Job {
    pub(super) seq: u64,
    pub(super) request: StoreRequest,
    pub(super) submitted: Instant,
}

/// The requests of one key.
#[derive(Debug, Default)]
struct Lane {
    queue: VecDeque<Job>,
    busy: bool,
    lineage: Option<Lineage>,
}

/// A queued load's deadline.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Expiry {
    deadline: Instant,
    seq: u64,
    key: Key,
}

/// A running job, for when it dies without answering.
struct Running {
    key: Key,
    request: StoreRequest,
}

/// The worker's one task: queues requests per key and starts them.
pub(super) struct Dispatcher<B> {
    ctx: Arc<Ctx<B>>,
    lanes: HashMap<Key, Lane>,
    running: JoinSet<Learned>,
    tasks: HashMap<tokio::task::Id, Running>,
    expiries: BinaryHeap<Reverse<Expiry>>,
    next_seq: u64,
}

impl<B: SaveBackend> Dispatcher<B> {
    pub(super) fn new(ctx: Ctx<B>) -> Self {
        Dispatcher {
            ctx: Arc::new(ctx),
            lanes: HashMap::new(),
            running: JoinSet::new(),
            tasks: HashMap::new(),
            expiries: BinaryHeap::new(),
            next_seq: 0,
        }
    }

    /// Until the handles are gone and every request is answered, each wake:
    /// 1. takes a new request into its key's lane (starting it if the lane is idle),
    /// 2. or settles a finished job and starts the next of its lane,
    /// 3. or fails the queued loads whose deadline passed.
    pub(super) async fn run(mut self, mut requests: mpsc::UnboundedReceiver<StoreRequest>) {
        let mut open = true;
        loop {
            let next_expiry = self.expiries.peek().map(|Reverse(e)| e.deadline);
            tokio::select! {
                request = requests.recv(), if open => match request {
                    Some(request) => self.enqueue(request),
                    None => open = false,
                },
                Some(done) = self.running.join_next_with_id(), if !self.running.is_empty() => {
                    self.finish(done);
                }
                () = sleep_until(next_expiry), if next_expiry.is_some() => {
                    self.expire(Instant::now());
                }
            }
            if !open && self.running.is_empty() {
                break;
            }
        }
    }

    fn enqueue(&mut self, request: StoreRequest) {
        let key = request.key();
        let seq = self.next_seq;
        self.next_seq += 1;
        let submitted = Instant::now();
        if request.is_load() {
            self.expiries.push(Reverse(Expiry {
                deadline: submitted + self.ctx.settings.load_timeout,
                seq,
                key: key.clone(),
            }));
        }
        self.lanes.entry(key.clone()).or_default().queue.push_back(Job { seq, request, submitted });
        self.start_next(&key);
    }

    /// Starts the head of `key`'s lane unless the lane is busy.
    fn start_next(&mut self, key: &Key) {
        let Some(lane) = self.lanes.get_mut(key) else {
            return;
        };
        if lane.busy {
            return;
        }
        let Some(job) = lane.queue.pop_front() else {
            return;
        };
        lane.busy = true;
        let ctx = self.ctx.clone();
        let lineage = lane.lineage;
        let request = job.request.clone();
        let span = key.span();
        let abort = self.running.spawn(run_job(ctx, job, lineage).instrument(span));
        self.tasks.insert(abort.id(), Running { key: key.clone(), request });
    }

    fn finish(&mut self, done: Result<(tokio::task::Id, Learned), tokio::task::JoinError>) {
        let (id, learned) = match done {
            Ok((id, learned)) => (id, learned),
            Err(e) => {
                // A job that panicked (or was cancelled) still owes its reply.
                if let Some(running) = self.tasks.get(&e.id()) {
                    tracing::error!(error = %e, "a store job died without answering");
                    if running.request.is_save() {
                        self.ctx.save_finished();
                    }
                    self.ctx.reply(running.request.failed(format!("the store job died: {e}")));
                }
                (e.id(), Learned::Nothing)
            }
        };
        let Some(Running { key, .. }) = self.tasks.remove(&id) else {
            return;
        };
        if let Some(lane) = self.lanes.get_mut(&key) {
            lane.busy = false;
            lane.lineage = learned.apply(lane.lineage);
            if lane.queue.is_empty() && lane.lineage.is_none() {
                self.lanes.remove(&key);
                return;
            }
        }
        self.start_next(&key);
    }

    /// Answers the queued loads whose deadline is past with [`LoadOutcome::Failed`]. A load
    /// that already started enforces its own deadline.
    fn expire(&mut self, now: Instant) {
        while let Some(Reverse(expiry)) = self.expiries.peek() {
            if expiry.deadline > now {
                break;
            }
            let Some(Reverse(expiry)) = self.expiries.pop() else {
                break;
            };
            let key = expiry.key;
            let Some(lane) = self.lanes.get_mut(&key) else {
                continue;
            };
            let Some(at) = lane.queue.iter().position(|job| job.seq == expiry.seq) else {
                continue;
            };
            if let Some(job) = lane.queue.remove(at) {
                let waited = now.saturating_duration_since(job.submitted);
                let reason = format!(
                    "timed out after {} ms waiting behind earlier store requests for this key",
                    waited.as_millis()
                );
                key.span().in_scope(|| tracing::warn!(%reason, "load failed"));
                self.ctx.reply(job.request.failed(reason));
            }
        }
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// Passes replies on to the shell's channel, in order, however long it takes.
pub(super) async fn forward<E, F>(
    mut replies: mpsc::UnboundedReceiver<StoreReply>,
    out: mpsc::Sender<E>,
    wrap: F,
) where
    F: Fn(StoreReply) -> E,
{
    while let Some(reply) = replies.recv().await {
        if out.send(wrap(reply)).await.is_err() {
            tracing::debug!("store reply dropped: its receiver is gone");
        }
    }
}
