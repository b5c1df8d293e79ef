//! The worker's one dispatching task: a lane of queued requests per key, started one at a
//! time; player saves ready together started as batches; queued loads failed at their
//! deadline; replies passed on in order.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::sync::Arc;

use gatehouse_protocol::PlayerId;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tracing::Instrument as _;

use super::batch::{self, Answer, Attempted, Pending, SAVE_BATCH_MAX};
use super::job::{Alone, Ctx, Learned, Lineage, rebase, run_job};
use super::{HandoverOutcome, PlayerSave, SaveBackend, SaveOutcome, StoreReply, StoreRequest};

/// Requests taken from the channel per wake, at most: a burst is taken whole (so its saves
/// batch), without starving finished jobs.
const REQUESTS_PER_WAKE: usize = 1024;

impl StoreRequest {
    /// How many saves the request carries: what [`super::StoreHandle::pending_saves`] counts.
    pub(super) fn save_count(&self) -> usize {
        match self {
            StoreRequest::SavePlayer(_)
            | StoreRequest::SaveSession(_)
            | StoreRequest::SaveHandoff { .. }
            | StoreRequest::Handover { .. } => 1,
            StoreRequest::SavePlayers(saves) => saves.len(),
            StoreRequest::LoadPlayer { .. } | StoreRequest::LoadSession(_) => 0,
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
    fn of(work: &Work) -> Key {
        match work {
            Work::Alone(Alone::LoadPlayer { player, .. }) => Key::Player(player.clone()),
            Work::Alone(Alone::LoadSession(session)) => Key::Session(session.clone()),
            Work::Alone(Alone::SaveSession(save)) => Key::Session(save.session.clone()),
            Work::Save { save, .. } => Key::Player(save.player.clone()),
        }
    }

    fn span(&self) -> tracing::Span {
        match self {
            Key::Player(player) => tracing::info_span!("store", player = %player),
            Key::Session(session) => tracing::info_span!("store", session = %session),
        }
    }
}

/// What a queued request does.
#[derive(Debug)]
enum Work {
    /// A load or a session save: one job to its reply.
    Alone(Alone),
    /// A player save (a handoff save and a handover are ones): started in a batch with other
    /// players' saves.
    Save { save: PlayerSave, answer: Answer },
}

/// A queued request.
#[derive(Debug)]
struct Job {
    seq: u64,
    work: Work,
    submitted: Instant,
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

/// What a task of the worker returns.
enum Done {
    /// A load or session save of `key` answered; what its lane learned.
    Alone(Key, Learned),
    /// One attempt of a batch of player saves: each save's verdict.
    Batch(Vec<Attempted>),
    /// Player saves whose wait before their next attempt is over.
    RetryDue(Vec<Pending>),
}

/// A running task, for when it dies without returning: who is owed a reply.
enum Running {
    /// A load or session save.
    Alone { key: Key, request: Alone },
    /// Player saves: a batch's attempt, or a wait before the next.
    Saves(Vec<(PlayerId, Answer)>),
}

/// The outcomes of one [`StoreRequest::SavePlayers`], gathered for its one reply.
struct Gather {
    outcomes: Vec<Option<(PlayerId, SaveOutcome)>>,
    left: usize,
}

/// The worker's one task: queues requests per key and starts them.
pub(super) struct Dispatcher<B> {
    ctx: Arc<Ctx<B>>,
    lanes: HashMap<Key, Lane>,
    running: JoinSet<Done>,
    tasks: HashMap<tokio::task::Id, Running>,
    expiries: BinaryHeap<Reverse<Expiry>>,
    /// Player saves taken from their lanes (which stay busy), to start as batches at the end
    /// of this wake.
    ready: Vec<Pending>,
    gathers: HashMap<u64, Gather>,
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
            ready: Vec::new(),
            gathers: HashMap::new(),
            next_seq: 0,
        }
    }

    /// Until the handles are gone and every request is answered, each wake:
    /// 1. takes the requests that arrived into their keys' lanes (starting each idle lane),
    /// 2. or settles every finished task and starts the next of each freed lane,
    /// 3. or fails the queued loads whose deadline passed;
    /// 4. then starts the player saves made ready meanwhile, as batches.
    pub(super) async fn run(mut self, mut requests: mpsc::UnboundedReceiver<StoreRequest>) {
        let mut open = true;
        let mut arrived = Vec::new();
        loop {
            let next_expiry = self.expiries.peek().map(|Reverse(e)| e.deadline);
            tokio::select! {
                taken = requests.recv_many(&mut arrived, REQUESTS_PER_WAKE), if open => {
                    open = taken > 0;
                    for request in arrived.drain(..) {
                        self.enqueue(request);
                    }
                }
                Some(done) = self.running.join_next_with_id(), if !self.running.is_empty() => {
                    self.finish(done);
                    while let Some(done) = self.running.try_join_next_with_id() {
                        self.finish(done);
                    }
                }
                () = sleep_until(next_expiry), if next_expiry.is_some() => {
                    self.expire(Instant::now());
                }
            }
            self.start_batches();
            if !open && self.running.is_empty() {
                break;
            }
        }
    }

    fn enqueue(&mut self, request: StoreRequest) {
        match request {
            StoreRequest::LoadPlayer { player, ticket } => {
                self.queue(Work::Alone(Alone::LoadPlayer { player, ticket }));
            }
            StoreRequest::LoadSession(session) => {
                self.queue(Work::Alone(Alone::LoadSession(session)))
            }
            StoreRequest::SaveSession(save) => self.queue(Work::Alone(Alone::SaveSession(save))),
            StoreRequest::SavePlayer(save) => {
                self.queue(Work::Save { save, answer: Answer::Alone })
            }
            StoreRequest::SaveHandoff { save, ticket } => {
                self.queue(Work::Save { save, answer: Answer::Handoff { ticket } })
            }
            StoreRequest::Handover { save, ticket } => {
                self.queue(Work::Save { save, answer: Answer::Handover { ticket } })
            }
            StoreRequest::SavePlayers(saves) => {
                if saves.is_empty() {
                    self.ctx.reply(StoreReply::PlayersSaved { outcomes: Vec::new() });
                    return;
                }
                // The sequence number of its first save names the gather: unique and unused.
                let gather = self.next_seq;
                let outcomes = (0..saves.len()).map(|_| None).collect();
                self.gathers.insert(gather, Gather { outcomes, left: saves.len() });
                for (index, save) in saves.into_iter().enumerate() {
                    self.queue(Work::Save { save, answer: Answer::Gathered { gather, index } });
                }
            }
        }
    }

    /// Queues `work` in its key's lane and starts it if the lane is idle.
    fn queue(&mut self, work: Work) {
        let key = Key::of(&work);
        let seq = self.next_seq;
        self.next_seq += 1;
        let submitted = Instant::now();
        let job = Job { seq, work, submitted };
        let lane = self.lanes.entry(key.clone()).or_default();
        if lane.busy {
            // Only a load that waits behind another request can time out waiting.
            if matches!(&job.work, Work::Alone(request) if request.is_load()) {
                let deadline = submitted + self.ctx.settings.load_timeout;
                self.expiries.push(Reverse(Expiry { deadline, seq, key: key.clone() }));
            }
            lane.queue.push_back(job);
        } else {
            // An idle lane's queue is empty: the job starts without passing through it, so a
            // lane that never has two jobs at once never allocates one.
            self.start(&key, job);
        }
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
        self.start(key, job);
    }

    /// Starts `job` in `key`'s idle lane, which is busy from here: a player save joins the
    /// saves to batch at the end of this wake; anything else starts alone.
    fn start(&mut self, key: &Key, job: Job) {
        let Some(lane) = self.lanes.get_mut(key) else {
            return;
        };
        lane.busy = true;
        match job.work {
            Work::Save { save, answer } => {
                let save = if answer.exact() {
                    save
                } else {
                    key.span().in_scope(|| rebase(save, lane.lineage))
                };
                self.ready.push(Pending::new(save, answer));
            }
            Work::Alone(request) => {
                let ctx = self.ctx.clone();
                let task = run_job(ctx, request.clone(), job.submitted, lane.lineage);
                let done = key.clone();
                let task = async move { Done::Alone(done, task.await) };
                let abort = self.running.spawn(task.instrument(key.span()));
                self.tasks.insert(abort.id(), Running::Alone { key: key.clone(), request });
            }
        }
    }

    /// Starts the ready player saves, [`SAVE_BATCH_MAX`] to a batch.
    fn start_batches(&mut self) {
        while !self.ready.is_empty() {
            let rest = self.ready.split_off(self.ready.len().min(SAVE_BATCH_MAX));
            let saves = std::mem::replace(&mut self.ready, rest);
            let owed = saves.iter().map(|p| (p.player().clone(), p.answer)).collect();
            let span = tracing::info_span!("store_batch", saves = saves.len());
            let task = batch::attempt(self.ctx.clone(), saves);
            let task = async move { Done::Batch(task.await) };
            let abort = self.running.spawn(task.instrument(span));
            self.tasks.insert(abort.id(), Running::Saves(owed));
        }
    }

    fn finish(&mut self, done: Result<(tokio::task::Id, Done), tokio::task::JoinError>) {
        let (id, done) = match done {
            Ok(finished) => finished,
            Err(e) => return self.died(e),
        };
        self.tasks.remove(&id);
        match done {
            Done::Alone(key, learned) => self.free(&key, learned),
            Done::Batch(verdicts) => {
                let mut retry = Vec::new();
                for verdict in verdicts {
                    match verdict {
                        Attempted::Finished { pending, outcome, learned } => {
                            let player = pending.save.player;
                            self.answer(player.clone(), pending.answer, outcome);
                            self.free(&Key::Player(player), learned);
                        }
                        Attempted::Retry(pending) => retry.push(pending),
                    }
                }
                if !retry.is_empty() {
                    self.wait_to_retry(retry);
                }
            }
            Done::RetryDue(saves) => self.ready.extend(saves),
        }
    }

    /// A task that panicked (or was cancelled) still owes its replies; its lanes go on.
    fn died(&mut self, e: tokio::task::JoinError) {
        let Some(running) = self.tasks.remove(&e.id()) else {
            return;
        };
        tracing::error!(error = %e, "a store task died without answering");
        let reason = format!("the store job died: {e}");
        match running {
            Running::Alone { key, request } => {
                if !request.is_load() {
                    self.ctx.save_finished();
                    let outcome = SaveOutcome::Failed { attempts: 0, reason: reason.clone() };
                    self.ctx.metrics.count_save(&outcome);
                }
                self.ctx.reply(request.failed(reason));
                self.free(&key, Learned::Nothing);
            }
            Running::Saves(owed) => {
                for (player, answer) in owed {
                    let outcome = SaveOutcome::Failed { attempts: 0, reason: reason.clone() };
                    self.answer(player.clone(), answer, outcome);
                    self.free(&Key::Player(player), Learned::Nothing);
                }
            }
        }
    }

    /// Saves whose attempt failed wait `save_retry` (their lanes busy), then are ready again.
    fn wait_to_retry(&mut self, saves: Vec<Pending>) {
        let owed = saves.iter().map(|p| (p.player().clone(), p.answer)).collect();
        let delay = self.ctx.settings.save_retry;
        let abort = self.running.spawn(async move {
            tokio::time::sleep(delay).await;
            Done::RetryDue(saves)
        });
        self.tasks.insert(abort.id(), Running::Saves(owed));
    }

    /// `key`'s running request finished, having learned `learned`: its lane starts the next.
    fn free(&mut self, key: &Key, learned: Learned) {
        if let Some(lane) = self.lanes.get_mut(key) {
            lane.busy = false;
            lane.lineage = learned.apply(lane.lineage);
            if lane.queue.is_empty() {
                if lane.lineage.is_none() {
                    self.lanes.remove(key);
                    return;
                }
                // The lane lives on for its lineage; the room a burst made goes.
                lane.queue = VecDeque::new();
            }
        }
        self.start_next(key);
    }

    /// A player save finished: its reply, or its place in its request's one reply.
    fn answer(&mut self, player: PlayerId, answer: Answer, outcome: SaveOutcome) {
        self.ctx.save_finished();
        self.ctx.metrics.count_save(&outcome);
        let (gather, index) = match answer {
            Answer::Alone => {
                self.ctx.reply(StoreReply::PlayerSaved { player, outcome });
                return;
            }
            Answer::Handoff { ticket } => {
                self.ctx.reply(StoreReply::HandoffSaved { player, ticket, outcome });
                return;
            }
            Answer::Handover { ticket } => {
                let outcome = HandoverOutcome::of(outcome);
                self.ctx.reply(StoreReply::HandoverDecided { player, ticket, outcome });
                return;
            }
            Answer::Gathered { gather, index } => (gather, index),
        };
        let Some(g) = self.gathers.get_mut(&gather) else { return };
        if let Some(slot @ None) = g.outcomes.get_mut(index) {
            *slot = Some((player, outcome));
            g.left -= 1;
        }
        if g.left == 0
            && let Some(g) = self.gathers.remove(&gather)
        {
            let outcomes = g.outcomes.into_iter().flatten().collect();
            self.ctx.reply(StoreReply::PlayersSaved { outcomes });
        }
    }

    /// Answers the queued loads whose deadline is past with a failed load. A load that already
    /// started enforces its own deadline.
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
            if let Some(Job { work: Work::Alone(request), submitted, .. }) = lane.queue.remove(at) {
                let waited = now.saturating_duration_since(submitted);
                let reason = format!(
                    "timed out after {} ms waiting behind earlier store requests for this key",
                    waited.as_millis()
                );
                key.span().in_scope(|| tracing::warn!(%reason, "load failed"));
                self.ctx.reply(request.failed(reason));
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
