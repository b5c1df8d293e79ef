//! Worker tests on a fake store with scripted faults, on paused (simulated) time.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Mutex;

use gatehouse_protocol::{CharacterDef, NodeId};
use tokio::time::Instant;

use super::*;
use crate::model::{HandoffState, InventoryItem, Preset};

const SETTINGS: StoreSettings = StoreSettings {
    load_timeout: Duration::from_secs(5),
    save_retry: Duration::from_millis(500),
    save_attempts: 5,
};

/// What the fake store does on one call.
#[derive(Debug, Clone, Copy)]
enum Fault {
    /// Fails with a transient error, writing nothing.
    Fail,
    /// Never answers.
    Hang,
    /// Writes, then fails as if the answer was lost.
    CommitThenFail,
}

/// An in-memory store with the real one's versioning, a fixed delay per call and scripted
/// faults.
#[derive(Default)]
struct Fake {
    state: Mutex<FakeState>,
}

#[derive(Default)]
struct FakeState {
    players: HashMap<PlayerId, PlayerSave>,
    sessions: HashMap<String, SessionSave>,
    save_faults: VecDeque<Fault>,
    load_faults: VecDeque<Fault>,
    delay: Duration,
    /// `(player, version written)` per applied save, in order.
    writes: Vec<(String, u64)>,
    /// Player-save transactions attempted.
    save_calls: usize,
    /// The players of each player-save transaction attempted, in order.
    batches: Vec<Vec<String>>,
    /// Players whose saves fail on their own (a transient error) inside a committed batch.
    failing: HashSet<String>,
}

fn transient() -> StoreError {
    StoreError::Query {
        url: "fake".into(),
        operation: "test".into(),
        source: sqlx::Error::PoolTimedOut,
    }
}

impl Fake {
    fn with(f: impl FnOnce(&mut FakeState)) -> Arc<Fake> {
        let fake = Fake::default();
        f(&mut fake.state.lock().unwrap());
        Arc::new(fake)
    }

    fn state(&self) -> std::sync::MutexGuard<'_, FakeState> {
        self.state.lock().unwrap()
    }

    async fn pause(&self, fault: Option<Fault>) {
        let delay = self.state().delay;
        tokio::time::sleep(delay).await;
        if let Some(Fault::Hang) = fault {
            std::future::pending::<()>().await;
        }
    }
}

impl FakeState {
    /// One save with the real store's versioning.
    fn apply(&mut self, save: &PlayerSave) -> Result<u64, StoreError> {
        let found = self.players.get(&save.player).map(|p| p.version);
        if found.unwrap_or(0) != save.version {
            return Err(StoreError::Conflict {
                key: format!("player {}", save.player),
                expected: save.version,
                found,
            });
        }
        let mut stored = save.clone();
        stored.version += 1;
        self.writes.push((save.player.as_str().to_owned(), stored.version));
        self.players.insert(save.player.clone(), stored);
        Ok(save.version + 1)
    }
}

impl SaveBackend for Arc<Fake> {
    async fn load_player(&self, player: &PlayerId) -> Result<Option<PlayerSave>, StoreError> {
        let fault = self.state().load_faults.pop_front();
        self.pause(fault).await;
        if let Some(Fault::Fail) = fault {
            return Err(transient());
        }
        Ok(self.state().players.get(player).cloned())
    }

    /// One transaction: a scripted fault applies to the whole batch; otherwise each save
    /// applies or conflicts on its own.
    async fn save_players(
        &self,
        saves: &[PlayerSave],
    ) -> Result<Vec<Result<u64, StoreError>>, StoreError> {
        let fault = {
            let mut s = self.state();
            s.save_calls += 1;
            s.batches.push(saves.iter().map(|save| save.player.as_str().to_owned()).collect());
            s.save_faults.pop_front()
        };
        self.pause(fault).await;
        if let Some(Fault::Fail) = fault {
            return Err(transient());
        }
        let mut s = self.state();
        let results = saves
            .iter()
            .map(|save| {
                if s.failing.contains(save.player.as_str()) {
                    return Err(transient());
                }
                s.apply(save)
            })
            .collect();
        if let Some(Fault::CommitThenFail) = fault {
            return Err(transient());
        }
        Ok(results)
    }

    async fn load_session(&self, session: &str) -> Result<Option<SessionSave>, StoreError> {
        let fault = self.state().load_faults.pop_front();
        self.pause(fault).await;
        Ok(self.state().sessions.get(session).cloned())
    }

    async fn save_session(&self, save: &SessionSave) -> Result<u64, StoreError> {
        self.pause(None).await;
        let mut s = self.state();
        let found = s.sessions.get(&save.session).map(|p| p.version);
        if found.unwrap_or(0) != save.version {
            return Err(StoreError::Conflict {
                key: format!("session {}", save.session),
                expected: save.version,
                found,
            });
        }
        let mut stored = save.clone();
        stored.version += 1;
        s.sessions.insert(save.session.clone(), stored);
        Ok(save.version + 1)
    }
}

fn id(name: &str) -> PlayerId {
    PlayerId::new(name).unwrap()
}

fn save(player: &str, version: u64, count: u32) -> PlayerSave {
    PlayerSave {
        player: id(player),
        node: Some(NodeId::new("harbor").unwrap()),
        preset: Preset::Character {
            character_def: CharacterDef::new("Vanguard").unwrap(),
            kits: vec![],
        },
        inventory: vec![InventoryItem { item: "rope".into(), count }],
        equipment: vec![],
        version,
        handoff: None,
        holder: None,
    }
}

fn start(fake: &Arc<Fake>) -> (StoreHandle, JoinHandle<()>, mpsc::Receiver<StoreReply>) {
    let (tx, rx) = mpsc::channel(256);
    let (handle, join) = StoreWorker::spawn(fake.clone(), SETTINGS, tx, |r| r);
    (handle, join, rx)
}

async fn next(rx: &mut mpsc::Receiver<StoreReply>) -> StoreReply {
    tokio::time::timeout(Duration::from_secs(600), rx.recv())
        .await
        .expect("a reply within 10 minutes of simulated time")
        .expect("the worker is running")
}

async fn next_saved(rx: &mut mpsc::Receiver<StoreReply>) -> SaveOutcome {
    match next(rx).await {
        StoreReply::PlayerSaved { outcome, .. } => outcome,
        other => panic!("expected PlayerSaved, found {other:?}"),
    }
}

/// A save that fails twice is retried every save_retry and lands on the third attempt.
#[tokio::test(start_paused = true)]
async fn a_failed_save_is_retried_until_it_lands() {
    let fake = Fake::with(|s| s.save_faults.extend([Fault::Fail, Fault::Fail]));
    let (handle, _join, mut rx) = start(&fake);
    let t0 = Instant::now();
    handle.submit(StoreRequest::SavePlayer(save("p1", 0, 1))).unwrap();
    assert_eq!(next_saved(&mut rx).await, SaveOutcome::Saved { version: 1, attempts: 3 });
    assert!(t0.elapsed() >= 2 * SETTINGS.save_retry);
    assert_eq!(fake.state().players[&id("p1")].version, 1);
}

/// A save that fails on every attempt is reported after save_attempts attempts.
#[tokio::test(start_paused = true)]
async fn a_save_that_keeps_failing_is_given_up_after_save_attempts() {
    let fake = Fake::with(|s| s.save_faults.extend([Fault::Fail; 5]));
    let (handle, _join, mut rx) = start(&fake);
    handle.submit(StoreRequest::SavePlayer(save("p1", 0, 1))).unwrap();
    let outcome = next_saved(&mut rx).await;
    assert!(
        matches!(outcome, SaveOutcome::Failed { attempts: 5, ref reason } if reason.contains("pool timed out")),
        "{outcome:?}"
    );
    assert_eq!(fake.state().save_calls, 5);
    assert!(fake.state().players.is_empty());
    assert_eq!(handle.pending_saves(), 0);
}

/// A save that never answers is timed out per attempt and retried.
#[tokio::test(start_paused = true)]
async fn a_hanging_save_attempt_times_out_and_is_retried() {
    let fake = Fake::with(|s| s.save_faults.push_back(Fault::Hang));
    let (handle, _join, mut rx) = start(&fake);
    handle.submit(StoreRequest::SavePlayer(save("p1", 0, 1))).unwrap();
    assert_eq!(next_saved(&mut rx).await, SaveOutcome::Saved { version: 1, attempts: 2 });
}

/// A conflict (another writer saved meanwhile) is reported at once, never retried.
#[tokio::test(start_paused = true)]
async fn a_conflict_is_reported_not_retried() {
    let fake = Fake::with(|s| {
        s.players.insert(id("p1"), save("p1", 3, 9));
    });
    let (handle, _join, mut rx) = start(&fake);
    handle.submit(StoreRequest::SavePlayer(save("p1", 1, 1))).unwrap();
    assert_eq!(next_saved(&mut rx).await, SaveOutcome::Conflict { expected: 1, found: Some(3) });
    assert_eq!(fake.state().save_calls, 1);
    assert_eq!(fake.state().players[&id("p1")].inventory[0].count, 9);
}

/// An attempt that wrote but lost its answer is recognised on the retry, not reported as
/// a conflict with itself.
#[tokio::test(start_paused = true)]
async fn a_save_whose_answer_was_lost_is_recognised_on_retry() {
    let fake = Fake::with(|s| s.save_faults.push_back(Fault::CommitThenFail));
    let (handle, _join, mut rx) = start(&fake);
    handle.submit(StoreRequest::SavePlayer(save("p1", 0, 1))).unwrap();
    assert_eq!(next_saved(&mut rx).await, SaveOutcome::Saved { version: 1, attempts: 2 });
    assert_eq!(fake.state().writes, vec![("p1".to_owned(), 1)]);
}

/// A load that does not answer within load_timeout is a distinct outcome: Failed.
#[tokio::test(start_paused = true)]
async fn a_load_past_load_timeout_fails() {
    let fake = Fake::with(|s| s.load_faults.push_back(Fault::Hang));
    let (handle, _join, mut rx) = start(&fake);
    let t0 = Instant::now();
    handle.submit(StoreRequest::LoadPlayer { player: id("p1"), ticket: 7 }).unwrap();
    match next(&mut rx).await {
        StoreReply::PlayerLoaded { player, ticket: 7, outcome: LoadOutcome::Failed(reason) } => {
            assert_eq!(player, id("p1"));
            assert!(reason.contains("timed out after 5000 ms"), "{reason}");
        }
        other => panic!("expected a failed load, found {other:?}"),
    }
    assert_eq!(t0.elapsed(), SETTINGS.load_timeout);
}

/// A load waiting behind a stuck save of the same player still fails on time.
#[tokio::test(start_paused = true)]
async fn a_load_queued_behind_a_stuck_save_fails_on_time() {
    let fake = Fake::with(|s| s.save_faults.extend([Fault::Hang; 5]));
    let (handle, _join, mut rx) = start(&fake);
    let t0 = Instant::now();
    handle.submit(StoreRequest::SavePlayer(save("p1", 0, 1))).unwrap();
    handle.submit(StoreRequest::LoadPlayer { player: id("p1"), ticket: 1 }).unwrap();
    match next(&mut rx).await {
        StoreReply::PlayerLoaded { outcome: LoadOutcome::Failed(reason), .. } => {
            assert!(reason.contains("waiting behind"), "{reason}")
        }
        other => panic!("expected the load to fail first, found {other:?}"),
    }
    assert_eq!(t0.elapsed(), SETTINGS.load_timeout);
    assert!(matches!(next_saved(&mut rx).await, SaveOutcome::Failed { attempts: 5, .. }));
}

/// A transiently failing load is retried within its deadline.
#[tokio::test(start_paused = true)]
async fn a_load_that_fails_once_is_retried_within_its_deadline() {
    let fake = Fake::with(|s| {
        s.load_faults.push_back(Fault::Fail);
        s.players.insert(id("p1"), save("p1", 4, 2));
    });
    let (handle, _join, mut rx) = start(&fake);
    handle.submit(StoreRequest::LoadPlayer { player: id("p1"), ticket: 1 }).unwrap();
    assert!(matches!(
        next(&mut rx).await,
        StoreReply::PlayerLoaded { outcome: LoadOutcome::Found(s), .. } if s.version == 4
    ));
}

/// Saves of one player apply in submission order; saves the game based on the version it
/// loaded (not hearing back in between) chain onto each other instead of conflicting.
#[tokio::test(start_paused = true)]
async fn saves_of_one_player_apply_in_order() {
    let fake = Fake::with(|s| s.delay = Duration::from_millis(10));
    let (handle, _join, mut rx) = start(&fake);
    for count in 0..10 {
        handle.submit(StoreRequest::SavePlayer(save("p1", 0, count))).unwrap();
    }
    for n in 1..=10 {
        assert_eq!(next_saved(&mut rx).await, SaveOutcome::Saved { version: n, attempts: 1 });
    }
    let s = fake.state();
    assert_eq!(s.writes, (1..=10).map(|v| ("p1".to_owned(), v)).collect::<Vec<_>>());
    assert_eq!(s.players[&id("p1")].inventory[0].count, 9, "the last save wins");
}

/// A load submitted after a save of the same player sees that save.
#[tokio::test(start_paused = true)]
async fn a_load_sees_the_saves_submitted_before_it() {
    let fake = Fake::with(|s| s.delay = Duration::from_millis(50));
    let (handle, _join, mut rx) = start(&fake);
    handle.submit(StoreRequest::SavePlayer(save("p1", 0, 3))).unwrap();
    handle.submit(StoreRequest::LoadPlayer { player: id("p1"), ticket: 2 }).unwrap();
    assert!(matches!(next_saved(&mut rx).await, SaveOutcome::Saved { .. }));
    match next(&mut rx).await {
        StoreReply::PlayerLoaded { outcome: LoadOutcome::Found(found), .. } => {
            assert_eq!(found, save("p1", 1, 3))
        }
        other => panic!("expected the saved player, found {other:?}"),
    }
}

/// A save given up after every attempt leaves the stored version as it was: the next save of
/// that player, based on the same loaded version, lands instead of conflicting.
#[tokio::test(start_paused = true)]
async fn a_save_given_up_does_not_make_the_next_one_conflict() {
    let fake = Fake::with(|s| s.save_faults.extend([Fault::Fail; 5]));
    let (handle, _join, mut rx) = start(&fake);
    handle.submit(StoreRequest::LoadPlayer { player: id("p1"), ticket: 1 }).unwrap();
    let _ = next(&mut rx).await;
    handle.submit(StoreRequest::SavePlayer(save("p1", 0, 1))).unwrap();
    assert!(matches!(next_saved(&mut rx).await, SaveOutcome::Failed { attempts: 5, .. }));
    handle.submit(StoreRequest::SavePlayer(save("p1", 0, 2))).unwrap();
    assert_eq!(next_saved(&mut rx).await, SaveOutcome::Saved { version: 1, attempts: 1 });
    handle.submit(StoreRequest::SavePlayer(save("p1", 0, 3))).unwrap();
    assert_eq!(next_saved(&mut rx).await, SaveOutcome::Saved { version: 2, attempts: 1 });
    assert_eq!(fake.state().players[&id("p1")].inventory[0].count, 3);
}

/// Rebasing covers only this worker's own writes: a version another process wrote still
/// conflicts.
#[tokio::test(start_paused = true)]
async fn another_writers_save_still_conflicts() {
    let fake = Fake::with(|s| {
        s.players.insert(id("p1"), save("p1", 5, 0));
    });
    let (handle, _join, mut rx) = start(&fake);
    handle.submit(StoreRequest::LoadPlayer { player: id("p1"), ticket: 1 }).unwrap();
    let _ = next(&mut rx).await;
    handle.submit(StoreRequest::SavePlayer(save("p1", 5, 1))).unwrap();
    assert!(matches!(next_saved(&mut rx).await, SaveOutcome::Saved { version: 6, .. }));
    // Another server process saves the player.
    fake.state().players.insert(id("p1"), save("p1", 7, 100));
    handle.submit(StoreRequest::SavePlayer(save("p1", 5, 2))).unwrap();
    assert_eq!(next_saved(&mut rx).await, SaveOutcome::Conflict { expected: 6, found: Some(7) });
    assert_eq!(fake.state().players[&id("p1")].inventory[0].count, 100);
}

/// Saves of different players run at the same time, not one after another.
#[tokio::test(start_paused = true)]
async fn saves_of_different_players_run_concurrently() {
    let fake = Fake::with(|s| s.delay = Duration::from_millis(100));
    let (handle, _join, mut rx) = start(&fake);
    let t0 = Instant::now();
    for i in 0..20 {
        handle.submit(StoreRequest::SavePlayer(save(&format!("p{i}"), 0, i))).unwrap();
    }
    for _ in 0..20 {
        assert!(matches!(next_saved(&mut rx).await, SaveOutcome::Saved { version: 1, .. }));
    }
    assert!(
        t0.elapsed() < Duration::from_millis(200),
        "20 saves of 100 ms took {:?}",
        t0.elapsed()
    );
}

/// The drain waits for pending saves and says how many were left when it gave up.
#[tokio::test(start_paused = true)]
async fn drain_waits_for_pending_saves_within_its_bound() {
    let fake = Fake::with(|s| {
        s.delay = Duration::from_secs(1);
        s.save_faults.extend([Fault::Fail, Fault::Fail]);
    });
    let (handle, _join, _rx) = start(&fake);
    for i in 0..3 {
        handle.submit(StoreRequest::SavePlayer(save(&format!("p{i}"), 0, i))).unwrap();
    }
    assert_eq!(handle.pending_saves(), 3);
    assert_eq!(handle.drain(Duration::from_secs(10)).await, 0);
    assert_eq!(fake.state().players.len(), 3);

    // p1's first attempt hangs (until load_timeout); p2's save, submitted once p1's attempt
    // started (so not in its batch), lands at once.
    let fake = Fake::with(|s| s.save_faults.push_back(Fault::Hang));
    let (handle, _join, _rx) = start(&fake);
    handle.submit(StoreRequest::SavePlayer(save("p1", 0, 1))).unwrap();
    tokio::time::sleep(Duration::from_millis(1)).await;
    handle.submit(StoreRequest::SavePlayer(save("p2", 0, 1))).unwrap();
    let t0 = Instant::now();
    assert_eq!(handle.drain(Duration::from_secs(2)).await, 1);
    assert_eq!(t0.elapsed(), Duration::from_secs(2));
}

/// Sessions load and save through the same paths, and replies can be wrapped into the
/// shell's own event type.
#[tokio::test(start_paused = true)]
async fn sessions_round_trip_and_replies_are_wrapped() {
    #[derive(Debug)]
    enum ShellEvent {
        Store(StoreReply),
    }
    let fake = Arc::new(Fake::default());
    let (tx, mut rx) = mpsc::channel(8);
    let (handle, join) = StoreWorker::spawn(fake.clone(), SETTINGS, tx, ShellEvent::Store);
    handle.submit(StoreRequest::LoadSession("main".into())).unwrap();
    let saved =
        SessionSave { session: "main".into(), node: NodeId::new("harbor").unwrap(), version: 0 };
    handle.submit(StoreRequest::SaveSession(saved.clone())).unwrap();
    handle.submit(StoreRequest::LoadSession("main".into())).unwrap();
    let mut replies = Vec::new();
    for _ in 0..3 {
        let Some(ShellEvent::Store(reply)) = rx.recv().await else { panic!("the worker stopped") };
        replies.push(reply);
    }
    assert_eq!(
        replies,
        vec![
            StoreReply::SessionLoaded { session: "main".into(), outcome: LoadOutcome::NotFound },
            StoreReply::SessionSaved {
                session: "main".into(),
                outcome: SaveOutcome::Saved { version: 1, attempts: 1 }
            },
            StoreReply::SessionLoaded {
                session: "main".into(),
                outcome: LoadOutcome::Found(SessionSave { version: 1, ..saved })
            },
        ]
    );
    drop(handle);
    tokio::time::timeout(Duration::from_secs(1), join)
        .await
        .expect("the worker stops once its handles are gone")
        .unwrap();
}

/// Dropping every handle lets queued saves finish before the worker stops.
#[tokio::test(start_paused = true)]
async fn the_worker_finishes_queued_saves_before_it_stops() {
    let fake = Fake::with(|s| s.delay = Duration::from_millis(100));
    let (handle, join, mut rx) = start(&fake);
    for count in 0..3 {
        handle.submit(StoreRequest::SavePlayer(save("p1", 0, count))).unwrap();
    }
    drop(handle);
    join.await.unwrap();
    assert_eq!(fake.state().writes.len(), 3);
    let mut replies = 0;
    while rx.recv().await.is_some() {
        replies += 1;
    }
    assert_eq!(replies, 3);
}

// Saves batched, one transaction for many players.

async fn next_batch_saved(rx: &mut mpsc::Receiver<StoreReply>) -> Vec<(String, SaveOutcome)> {
    match next(rx).await {
        StoreReply::PlayersSaved { outcomes } => {
            outcomes.into_iter().map(|(p, o)| (p.as_str().to_owned(), o)).collect()
        }
        other => panic!("expected PlayersSaved, found {other:?}"),
    }
}

fn saved(version: u64, attempts: u32) -> SaveOutcome {
    SaveOutcome::Saved { version, attempts }
}

/// Saves of different players that are ready together (a transition's batch and single saves
/// submitted in the same burst) are written in one transaction; the batch request gets one
/// reply, with each save's outcome in its order, and each single save its own.
#[tokio::test(start_paused = true)]
async fn saves_ready_together_are_written_in_one_transaction() {
    let fake = Fake::with(|s| s.delay = Duration::from_millis(10));
    let (handle, _join, mut rx) = start(&fake);
    let batch: Vec<PlayerSave> = (0..10).map(|i| save(&format!("b{i}"), 0, i)).collect();
    handle.submit(StoreRequest::SavePlayers(batch)).unwrap();
    for i in 0..5 {
        handle.submit(StoreRequest::SavePlayer(save(&format!("s{i}"), 0, i))).unwrap();
    }
    let mut singles = 0;
    let mut batched = Vec::new();
    for _ in 0..6 {
        match next(&mut rx).await {
            StoreReply::PlayerSaved { outcome, .. } => {
                assert_eq!(outcome, saved(1, 1));
                singles += 1;
            }
            StoreReply::PlayersSaved { outcomes } => batched.push(outcomes),
            other => panic!("expected save replies, found {other:?}"),
        }
    }
    assert_eq!(singles, 5);
    assert_eq!(batched.len(), 1, "one reply for the batch request");
    let expected: Vec<_> = (0..10).map(|i| (id(&format!("b{i}")), saved(1, 1))).collect();
    assert_eq!(batched[0], expected, "each save's outcome, in the request's order");
    let s = fake.state();
    assert_eq!(s.save_calls, 1, "one transaction for 15 saves: {:?}", s.batches);
    assert_eq!(s.players.len(), 15);
}

/// A burst larger than the batch bound is written as several transactions, each at most
/// SAVE_BATCH_MAX saves.
#[tokio::test(start_paused = true)]
async fn a_burst_larger_than_the_batch_bound_is_split() {
    let fake = Arc::new(Fake::default());
    let (handle, _join, mut rx) = start(&fake);
    let n = SAVE_BATCH_MAX + 10;
    let batch: Vec<PlayerSave> = (0..n).map(|i| save(&format!("p{i:04}"), 0, 1)).collect();
    handle.submit(StoreRequest::SavePlayers(batch)).unwrap();
    let outcomes = next_batch_saved(&mut rx).await;
    assert_eq!(outcomes.len(), n);
    assert!(outcomes.iter().all(|(_, o)| *o == saved(1, 1)));
    let sizes: Vec<usize> = fake.state().batches.iter().map(Vec::len).collect();
    assert_eq!(sizes, vec![SAVE_BATCH_MAX, 10]);
}

/// A conflict on one save of a batch refuses that save alone: the others are written in the
/// same transaction, and the conflict is not retried.
#[tokio::test(start_paused = true)]
async fn a_conflict_in_a_batch_does_not_abort_the_other_saves() {
    let fake = Fake::with(|s| {
        s.players.insert(id("p2"), save("p2", 3, 9));
    });
    let (handle, _join, mut rx) = start(&fake);
    let batch = vec![save("p1", 0, 1), save("p2", 1, 1), save("p3", 0, 1)];
    handle.submit(StoreRequest::SavePlayers(batch)).unwrap();
    assert_eq!(
        next_batch_saved(&mut rx).await,
        vec![
            ("p1".to_owned(), saved(1, 1)),
            ("p2".to_owned(), SaveOutcome::Conflict { expected: 1, found: Some(3) }),
            ("p3".to_owned(), saved(1, 1)),
        ]
    );
    let s = fake.state();
    assert_eq!(s.save_calls, 1, "the conflict is not retried");
    assert_eq!(
        s.players[&id("p2")].inventory[0].count,
        9,
        "p2 is left as the other writer saved it"
    );
    assert_eq!(s.writes, vec![("p1".to_owned(), 1), ("p3".to_owned(), 1)]);
}

/// A failed transaction fails an attempt of each of its saves; each save keeps its own budget
/// of save_attempts: a save that joined later has used fewer, and a batch that keeps failing
/// is given up after save_attempts attempts of each save, save_retry apart.
#[tokio::test(start_paused = true)]
async fn a_failed_batch_is_retried_with_each_saves_budget() {
    // p1 and p2 fail at 0, 500 and 1000 ms; p3 (submitted at 100 ms, its own batch) at 100
    // and 600 ms. p3 lands on its third attempt, at 1100 ms; p1 and p2 on their fourth.
    let fake = Fake::with(|s| s.save_faults.extend([Fault::Fail; 5]));
    let (handle, _join, mut rx) = start(&fake);
    let t0 = Instant::now();
    handle.submit(StoreRequest::SavePlayers(vec![save("p1", 0, 1), save("p2", 0, 1)])).unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    handle.submit(StoreRequest::SavePlayer(save("p3", 0, 1))).unwrap();
    assert_eq!(next_saved(&mut rx).await, saved(1, 3));
    assert_eq!(t0.elapsed(), Duration::from_millis(1100));
    assert_eq!(
        next_batch_saved(&mut rx).await,
        vec![("p1".to_owned(), saved(1, 4)), ("p2".to_owned(), saved(1, 4))]
    );
    assert_eq!(t0.elapsed(), Duration::from_millis(1500));
    assert_eq!(fake.state().save_calls, 7);

    // Every attempt fails: each save of the batch is given up after its 5 attempts.
    let fake = Fake::with(|s| s.save_faults.extend([Fault::Fail; 6]));
    let (handle, _join, mut rx) = start(&fake);
    handle.submit(StoreRequest::SavePlayers(vec![save("p1", 0, 1), save("p2", 0, 1)])).unwrap();
    let outcomes = next_batch_saved(&mut rx).await;
    for (player, outcome) in outcomes {
        assert!(
            matches!(outcome, SaveOutcome::Failed { attempts: 5, ref reason } if reason.contains("pool timed out")),
            "{player}: {outcome:?}"
        );
    }
    assert_eq!(fake.state().save_calls, 5);
    assert!(fake.state().players.is_empty());
    assert_eq!(handle.pending_saves(), 0);
}

/// A save that fails on its own inside a committed batch is retried alone; its batch-mates'
/// lanes are free as soon as their own saves land, so a load of one of them does not wait for
/// the retries.
#[tokio::test(start_paused = true)]
async fn a_saved_player_is_free_while_its_batch_mates_retry() {
    let fake = Fake::with(|s| {
        s.failing.insert("p2".to_owned());
    });
    let (handle, _join, mut rx) = start(&fake);
    let t0 = Instant::now();
    handle.submit(StoreRequest::SavePlayers(vec![save("p1", 0, 4), save("p2", 0, 1)])).unwrap();
    handle.submit(StoreRequest::LoadPlayer { player: id("p1"), ticket: 1 }).unwrap();
    match next(&mut rx).await {
        StoreReply::PlayerLoaded { outcome: LoadOutcome::Found(found), .. } => {
            assert_eq!(found, save("p1", 1, 4));
        }
        other => panic!("expected p1's load first, found {other:?}"),
    }
    assert!(t0.elapsed() < SETTINGS.save_retry, "answered after {:?}", t0.elapsed());
    let outcomes = next_batch_saved(&mut rx).await;
    assert_eq!(outcomes[0], ("p1".to_owned(), saved(1, 1)));
    assert!(matches!(outcomes[1], (_, SaveOutcome::Failed { attempts: 5, .. })), "{outcomes:?}");
    assert_eq!(fake.state().batches[1], vec!["p2".to_owned()], "p2 is retried alone");
}

/// A batch whose transaction committed but whose answer was lost is recognised on the retry:
/// each of its saves finds exactly its own write, and is saved, not a conflict with itself.
#[tokio::test(start_paused = true)]
async fn a_batched_save_whose_answer_was_lost_is_recognised_on_retry() {
    let fake = Fake::with(|s| s.save_faults.push_back(Fault::CommitThenFail));
    let (handle, _join, mut rx) = start(&fake);
    handle.submit(StoreRequest::SavePlayers(vec![save("p1", 0, 1), save("p2", 0, 2)])).unwrap();
    assert_eq!(
        next_batch_saved(&mut rx).await,
        vec![("p1".to_owned(), saved(1, 2)), ("p2".to_owned(), saved(1, 2))]
    );
    let s = fake.state();
    assert_eq!(s.writes, vec![("p1".to_owned(), 1), ("p2".to_owned(), 1)], "written once each");
    assert_eq!(s.save_calls, 2);
}

/// Saves of one player in one burst (in a batch request and beside it) still apply one at a
/// time in submission order, chained onto each other; two saves of one player never share a
/// transaction.
#[tokio::test(start_paused = true)]
async fn saves_of_one_player_in_one_burst_still_apply_in_order() {
    let fake = Fake::with(|s| s.delay = Duration::from_millis(10));
    let (handle, _join, mut rx) = start(&fake);
    let batch = vec![save("p1", 0, 0), save("p2", 0, 0), save("p1", 0, 1), save("p1", 0, 2)];
    handle.submit(StoreRequest::SavePlayers(batch)).unwrap();
    handle.submit(StoreRequest::SavePlayer(save("p1", 0, 3))).unwrap();
    handle.submit(StoreRequest::SavePlayers(vec![save("p1", 0, 4), save("p2", 0, 1)])).unwrap();
    let mut replies = Vec::new();
    for _ in 0..3 {
        replies.push(next(&mut rx).await);
    }
    assert!(replies.contains(&StoreReply::PlayersSaved {
        outcomes: vec![
            (id("p1"), saved(1, 1)),
            (id("p2"), saved(1, 1)),
            (id("p1"), saved(2, 1)),
            (id("p1"), saved(3, 1)),
        ]
    }));
    assert!(replies.contains(&StoreReply::PlayerSaved { player: id("p1"), outcome: saved(4, 1) }));
    assert!(replies.contains(&StoreReply::PlayersSaved {
        outcomes: vec![(id("p1"), saved(5, 1)), (id("p2"), saved(2, 1))]
    }));
    let s = fake.state();
    let p1: Vec<u64> = s.writes.iter().filter(|(p, _)| p == "p1").map(|(_, v)| *v).collect();
    assert_eq!(p1, vec![1, 2, 3, 4, 5]);
    assert_eq!(s.players[&id("p1")].inventory[0].count, 4, "the last save wins");
    for batch in &s.batches {
        let distinct: HashSet<&String> = batch.iter().collect();
        assert_eq!(distinct.len(), batch.len(), "a player twice in one transaction: {batch:?}");
    }
}

/// A load submitted after a batch that saves its player waits in the player's lane and sees
/// that save.
#[tokio::test(start_paused = true)]
async fn a_load_queued_behind_a_batched_save_sees_it() {
    let fake = Fake::with(|s| s.delay = Duration::from_millis(50));
    let (handle, _join, mut rx) = start(&fake);
    handle.submit(StoreRequest::SavePlayers(vec![save("p1", 0, 3), save("p2", 0, 1)])).unwrap();
    handle.submit(StoreRequest::LoadPlayer { player: id("p1"), ticket: 2 }).unwrap();
    let mut found = None;
    for _ in 0..2 {
        match next(&mut rx).await {
            StoreReply::PlayerLoaded { outcome: LoadOutcome::Found(save), .. } => {
                found = Some(save);
            }
            StoreReply::PlayersSaved { .. } => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(found, Some(save("p1", 1, 3)));
}

/// Every save of a batch request counts as pending until it finishes, and the drain waits for
/// them all.
#[tokio::test(start_paused = true)]
async fn pending_saves_count_every_save_of_a_batch() {
    let fake = Fake::with(|s| {
        s.delay = Duration::from_millis(100);
        s.save_faults.push_back(Fault::Fail);
    });
    let (handle, _join, mut rx) = start(&fake);
    let batch: Vec<PlayerSave> = (0..3).map(|i| save(&format!("p{i}"), 0, i)).collect();
    handle.submit(StoreRequest::SavePlayers(batch)).unwrap();
    handle.submit(StoreRequest::SavePlayers(Vec::new())).unwrap();
    assert_eq!(handle.pending_saves(), 3);
    assert_eq!(next_batch_saved(&mut rx).await, vec![], "an empty batch is answered at once");
    assert_eq!(handle.drain(Duration::from_secs(10)).await, 0);
    assert_eq!(fake.state().players.len(), 3);
    assert_eq!(next_batch_saved(&mut rx).await.len(), 3);
}

// Travel: handoff saves, claims and recalls (docs/spec/travel.md V2, V5).

/// `save` carrying a handoff state: a travel's handoff save.
fn handoff(player: &str, version: u64, count: u32) -> PlayerSave {
    PlayerSave { handoff: Some(Box::new(HandoffState::sample())), ..save(player, version, count) }
}

/// A claim: the destination's save of the player as its own, at its node.
fn claim(player: &str, version: u64) -> PlayerSave {
    PlayerSave { node: Some(NodeId::new("sunken-keep").unwrap()), ..save(player, version, 50) }
}

/// A recall: the source's save of the player it keeps, at the node it never left.
fn recall(player: &str, version: u64) -> PlayerSave {
    save(player, version, 60)
}

/// A store holding p1's handoff save at version 4, its player-save transactions meeting
/// `faults` first.
fn handed_off(faults: impl IntoIterator<Item = Fault>) -> Arc<Fake> {
    Fake::with(|s| {
        s.players.insert(id("p1"), handoff("p1", 4, 1));
        s.save_faults.extend(faults);
    })
}

async fn next_handoff_saved(rx: &mut mpsc::Receiver<StoreReply>) -> (u64, SaveOutcome) {
    match next(rx).await {
        StoreReply::HandoffSaved { ticket, outcome, .. } => (ticket, outcome),
        other => panic!("expected HandoffSaved, found {other:?}"),
    }
}

async fn next_decided(rx: &mut mpsc::Receiver<StoreReply>) -> (u64, HandoverOutcome) {
    match next(rx).await {
        StoreReply::HandoverDecided { ticket, outcome, .. } => (ticket, outcome),
        other => panic!("expected HandoverDecided, found {other:?}"),
    }
}

fn won(version: u64) -> HandoverOutcome {
    HandoverOutcome::Won { version }
}

fn lost(found: u64) -> HandoverOutcome {
    HandoverOutcome::Lost { found: Some(found) }
}

/// V2: a handoff save is written as any save and answered with its request's ticket and the
/// version the store acknowledged; the store holds its handoff state.
#[tokio::test(start_paused = true)]
async fn a_handoff_save_is_answered_with_its_ticket_and_the_version_written() {
    let fake = Fake::with(|s| {
        s.players.insert(id("p1"), save("p1", 3, 1));
    });
    let (handle, _join, mut rx) = start(&fake);
    handle.submit(StoreRequest::SaveHandoff { save: handoff("p1", 3, 2), ticket: 42 }).unwrap();
    assert_eq!(handle.pending_saves(), 1);
    assert_eq!(
        next(&mut rx).await,
        StoreReply::HandoffSaved { player: id("p1"), ticket: 42, outcome: saved(4, 1) }
    );
    assert_eq!(handle.pending_saves(), 0);
    assert_eq!(fake.state().players[&id("p1")], handoff("p1", 4, 2));
}

/// V2: a handoff save waits in its player's lane behind an earlier save of that player and,
/// based on the version the game knew before that save landed, is rebased onto it as any save.
#[tokio::test(start_paused = true)]
async fn a_handoff_save_waits_behind_an_earlier_save_and_is_rebased() {
    let fake = Fake::with(|s| s.delay = Duration::from_millis(10));
    let (handle, _join, mut rx) = start(&fake);
    handle.submit(StoreRequest::SavePlayer(save("p1", 0, 1))).unwrap();
    handle.submit(StoreRequest::SaveHandoff { save: handoff("p1", 0, 2), ticket: 7 }).unwrap();
    assert_eq!(next_saved(&mut rx).await, saved(1, 1));
    assert_eq!(next_handoff_saved(&mut rx).await, (7, saved(2, 1)));
    let s = fake.state();
    assert_eq!(s.writes, vec![("p1".to_owned(), 1), ("p1".to_owned(), 2)], "in order");
    assert_eq!(s.save_calls, 2, "one after the other, never in one transaction");
    assert_eq!(s.players[&id("p1")], handoff("p1", 2, 2));
}

/// V5: a handover at the stored version wins, and the worker chains from the version it wrote:
/// a save submitted right behind it, based on the version the handover replaced, is rebased
/// onto it, and the next chains on.
#[tokio::test(start_paused = true)]
async fn a_handover_at_the_stored_version_wins_and_the_next_save_chains_from_it() {
    let fake = handed_off([]);
    let (handle, _join, mut rx) = start(&fake);
    handle.submit(StoreRequest::Handover { save: claim("p1", 4), ticket: 9 }).unwrap();
    handle.submit(StoreRequest::SavePlayer(save("p1", 4, 2))).unwrap();
    assert_eq!(next_decided(&mut rx).await, (9, won(5)));
    assert_eq!(next_saved(&mut rx).await, saved(6, 1));
    handle.submit(StoreRequest::SavePlayer(save("p1", 6, 3))).unwrap();
    assert_eq!(next_saved(&mut rx).await, saved(7, 1));
    let s = fake.state();
    let p1: Vec<u64> = s.writes.iter().map(|(_, v)| *v).collect();
    assert_eq!(p1, vec![5, 6, 7]);
    assert_eq!(s.players[&id("p1")], save("p1", 7, 3));
}

/// V5: a handover based on a version other than the stored one is lost at once (the other
/// side's write came first) and never retried; the store keeps the other side's write.
#[tokio::test(start_paused = true)]
async fn a_handover_at_another_version_is_lost_at_once_and_not_retried() {
    let fake = Fake::with(|s| {
        s.players.insert(id("p1"), claim("p1", 5));
    });
    let (handle, _join, mut rx) = start(&fake);
    let t0 = Instant::now();
    handle.submit(StoreRequest::Handover { save: recall("p1", 4), ticket: 3 }).unwrap();
    assert_eq!(next_decided(&mut rx).await, (3, lost(5)));
    assert_eq!(t0.elapsed(), Duration::ZERO, "at once");
    assert_eq!(handle.pending_saves(), 0);
    // Long after every retry could have come: still one call.
    tokio::time::sleep(SETTINGS.save_retry * SETTINGS.save_attempts).await;
    let s = fake.state();
    assert_eq!(s.save_calls, 1, "a lost handover is not retried");
    assert_eq!(s.players[&id("p1")], claim("p1", 5));
}

/// V5, V16: a handover whose attempts fail is retried every save_retry, each attempt bounded by
/// load_timeout, and answered Failed (undecided) after save_attempts attempts, nothing written.
#[tokio::test(start_paused = true)]
async fn a_failing_handover_is_retried_and_answered_failed_after_save_attempts() {
    let fake = handed_off([Fault::Fail, Fault::Hang, Fault::Fail, Fault::Fail, Fault::Fail]);
    let (handle, _join, mut rx) = start(&fake);
    let t0 = Instant::now();
    handle.submit(StoreRequest::Handover { save: claim("p1", 4), ticket: 1 }).unwrap();
    assert_eq!(handle.pending_saves(), 1);
    let (ticket, outcome) = next_decided(&mut rx).await;
    assert_eq!(ticket, 1);
    assert!(
        matches!(outcome, HandoverOutcome::Failed { attempts: 5, ref reason } if reason.contains("pool timed out")),
        "{outcome:?}"
    );
    assert_eq!(t0.elapsed(), SETTINGS.load_timeout + 4 * SETTINGS.save_retry);
    assert_eq!(handle.pending_saves(), 0);
    let s = fake.state();
    assert_eq!(s.save_calls, 5);
    assert_eq!(s.players[&id("p1")], handoff("p1", 4, 1), "nothing written");
}

/// V5: a handover whose attempt wrote but lost its answer is won on the retry, which finds
/// exactly its own write: it is not lost to itself.
#[tokio::test(start_paused = true)]
async fn a_handover_whose_answer_was_lost_is_won_on_retry() {
    let fake = handed_off([Fault::CommitThenFail]);
    let (handle, _join, mut rx) = start(&fake);
    handle.submit(StoreRequest::Handover { save: claim("p1", 4), ticket: 2 }).unwrap();
    assert_eq!(next_decided(&mut rx).await, (2, won(5)));
    let s = fake.state();
    assert_eq!(s.writes, vec![("p1".to_owned(), 5)], "written once");
    assert_eq!(s.save_calls, 2);
}

/// V5: a handover whose first attempt failed, retried after the other side's write landed, is
/// lost: the retry's conflict counts as its own write only when the store holds exactly this
/// handover.
#[tokio::test(start_paused = true)]
async fn a_handover_retried_after_the_other_side_wrote_is_lost() {
    let fake = handed_off([Fault::Fail]);
    let (source, _s, mut source_rx) = start(&fake);
    let (destination, _d, mut destination_rx) = start(&fake);
    source.submit(StoreRequest::Handover { save: recall("p1", 4), ticket: 1 }).unwrap();
    tokio::time::sleep(SETTINGS.save_retry / 5).await;
    destination.submit(StoreRequest::Handover { save: claim("p1", 4), ticket: 2 }).unwrap();
    assert_eq!(next_decided(&mut destination_rx).await, (2, won(5)));
    assert_eq!(next_decided(&mut source_rx).await, (1, lost(5)));
    assert_eq!(fake.state().players[&id("p1")], claim("p1", 5));
}

/// V5: a claim and a recall of one player at the handoff version, from two workers sharing one
/// store (the destination's and the source's): the first written wins and the other is lost, in
/// both orders; submitted at once, exactly one wins.
#[tokio::test(start_paused = true)]
async fn a_claim_and_a_recall_from_two_workers_the_first_wins_the_second_is_lost() {
    let fake = Arc::new(Fake::default());
    let (source, _s, mut source_rx) = start(&fake);
    let (destination, _d, mut destination_rx) = start(&fake);
    for claim_first in [true, false] {
        let player = if claim_first { "claim-first" } else { "recall-first" };
        let handoff_save = StoreRequest::SaveHandoff { save: handoff(player, 0, 1), ticket: 1 };
        source.submit(handoff_save).unwrap();
        assert_eq!(next_handoff_saved(&mut source_rx).await, (1, saved(1, 1)));
        let (claim, recall) = (claim(player, 1), recall(player, 1));
        let (first, first_rx, first_save, second, second_rx, second_save) = if claim_first {
            (&destination, &mut destination_rx, claim, &source, &mut source_rx, recall)
        } else {
            (&source, &mut source_rx, recall, &destination, &mut destination_rx, claim)
        };
        first.submit(StoreRequest::Handover { save: first_save.clone(), ticket: 2 }).unwrap();
        assert_eq!(next_decided(first_rx).await, (2, won(2)), "{player}: the first wins");
        second.submit(StoreRequest::Handover { save: second_save, ticket: 3 }).unwrap();
        assert_eq!(next_decided(second_rx).await, (3, lost(2)), "{player}: the second is lost");
        let stored = PlayerSave { version: 2, ..first_save };
        assert_eq!(fake.state().players[&id(player)], stored, "{player}");
    }

    // Both at once.
    source.submit(StoreRequest::SaveHandoff { save: handoff("race", 0, 1), ticket: 1 }).unwrap();
    assert_eq!(next_handoff_saved(&mut source_rx).await, (1, saved(1, 1)));
    destination.submit(StoreRequest::Handover { save: claim("race", 1), ticket: 2 }).unwrap();
    source.submit(StoreRequest::Handover { save: recall("race", 1), ticket: 3 }).unwrap();
    let claimed = next_decided(&mut destination_rx).await.1;
    let recalled = next_decided(&mut source_rx).await.1;
    let winner = match (&claimed, &recalled) {
        (HandoverOutcome::Won { version: 2 }, HandoverOutcome::Lost { found: Some(2) }) => claim,
        (HandoverOutcome::Lost { found: Some(2) }, HandoverOutcome::Won { version: 2 }) => recall,
        other => panic!("expected one won and one lost, found {other:?}"),
    };
    assert_eq!(fake.state().players[&id("race")], winner("race", 2));
}

/// V5: a handover is written at exactly its version, never rebased onto this worker's own
/// earlier save: a recall based on the handoff version, behind a later save of the player by the
/// same worker, is lost to that save instead of being written over it.
#[tokio::test(start_paused = true)]
async fn a_handover_is_never_rebased_onto_the_workers_own_earlier_save() {
    let fake = Arc::new(Fake::default());
    let (handle, _join, mut rx) = start(&fake);
    handle.submit(StoreRequest::SaveHandoff { save: handoff("p1", 0, 1), ticket: 1 }).unwrap();
    handle.submit(StoreRequest::SavePlayer(save("p1", 0, 2))).unwrap();
    handle.submit(StoreRequest::Handover { save: recall("p1", 1), ticket: 2 }).unwrap();
    assert_eq!(next_handoff_saved(&mut rx).await, (1, saved(1, 1)));
    assert_eq!(next_saved(&mut rx).await, saved(2, 1), "rebased onto the handoff save");
    assert_eq!(next_decided(&mut rx).await, (2, lost(2)), "not rebased onto the save");
    assert_eq!(fake.state().players[&id("p1")], save("p1", 2, 2));
}

/// V5, V10: a handover this worker lost teaches it nothing: a later save of that player, based on
/// the handoff save's version or the one before it, conflicts with the other side's write
/// instead of being rebased past it.
#[tokio::test(start_paused = true)]
async fn a_save_after_a_lost_handover_conflicts_instead_of_being_rebased_past_it() {
    let fake = Arc::new(Fake::default());
    let (source, _s, mut source_rx) = start(&fake);
    let (destination, _d, mut destination_rx) = start(&fake);
    source.submit(StoreRequest::SaveHandoff { save: handoff("p1", 0, 1), ticket: 1 }).unwrap();
    assert_eq!(next_handoff_saved(&mut source_rx).await, (1, saved(1, 1)));
    destination.submit(StoreRequest::Handover { save: claim("p1", 1), ticket: 2 }).unwrap();
    assert_eq!(next_decided(&mut destination_rx).await, (2, won(2)));
    source.submit(StoreRequest::Handover { save: recall("p1", 1), ticket: 3 }).unwrap();
    assert_eq!(next_decided(&mut source_rx).await, (3, lost(2)));
    for base in [0, 1] {
        source.submit(StoreRequest::SavePlayer(save("p1", base, 7))).unwrap();
        assert_eq!(
            next_saved(&mut source_rx).await,
            SaveOutcome::Conflict { expected: 1, found: Some(2) },
            "a save based on {base}"
        );
    }
    assert_eq!(fake.state().players[&id("p1")], claim("p1", 2));
}

/// Handoff saves and handovers count as pending saves, and the shutdown drain waits for them.
#[tokio::test(start_paused = true)]
async fn the_drain_waits_for_handoff_saves_and_handovers() {
    let fake = Fake::with(|s| {
        s.delay = Duration::from_secs(1);
        s.players.insert(id("p2"), handoff("p2", 3, 1));
    });
    let (handle, _join, mut rx) = start(&fake);
    handle.submit(StoreRequest::SaveHandoff { save: handoff("p1", 0, 1), ticket: 1 }).unwrap();
    handle.submit(StoreRequest::Handover { save: claim("p2", 3), ticket: 2 }).unwrap();
    assert_eq!(handle.pending_saves(), 2);
    assert_eq!(handle.drain(Duration::from_secs(10)).await, 0);
    {
        let s = fake.state();
        assert_eq!(s.players[&id("p1")], handoff("p1", 1, 1));
        assert_eq!(s.players[&id("p2")], claim("p2", 4));
    }
    let mut replies = vec![next(&mut rx).await, next(&mut rx).await];
    replies.sort_by_key(|r| matches!(r, StoreReply::HandoverDecided { .. }));
    assert_eq!(
        replies,
        vec![
            StoreReply::HandoffSaved { player: id("p1"), ticket: 1, outcome: saved(1, 1) },
            StoreReply::HandoverDecided { player: id("p2"), ticket: 2, outcome: won(4) },
        ]
    );
}
