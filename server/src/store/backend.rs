//! [`Store`]: the player and session saves on one of two backends, the embedded SQLite file
//! (the default) or PostgreSQL, through one query layer (sqlx) and the same SQL text.
//!
//! Owns connecting, migrating and the queries. Knows nothing of the game or of retries: the
//! worker ([`super::StoreWorker`]) decides when to load, save and retry.

use std::collections::{HashMap, HashSet};
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use gatehouse_protocol::PlayerId;
use sqlx::ConnectOptions as _;
use sqlx::Connection as _;
use sqlx::postgres::{PgConnectOptions, PgConnection, PgPool, PgPoolOptions};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteConnection, SqliteJournalMode, SqlitePool, SqlitePoolOptions,
    SqliteSynchronous,
};

use super::codec::{
    PlayerColumns, PlayerRow, SessionRow, player_columns, player_from_row, player_key,
    session_from_row, session_key, version_column,
};
use super::schema::{self, Dialect};
use super::{StoreError, StoreUrl};
use crate::config::Resolved;
use crate::model::{PlayerSave, SessionSave};

/// How long opening may take to get its first connection.
const OPEN_TIMEOUT: Duration = Duration::from_secs(10);
/// How long an operation waits for a pooled connection before failing (and being retried).
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long SQLite waits on a lock held by another connection before failing.
const SQLITE_BUSY_TIMEOUT: Duration = Duration::from_secs(5);
/// Pooled connections: SQLite in WAL mode reads concurrently and writes one at a time.
const SQLITE_CONNECTIONS: u32 = 4;
/// Pooled connections to PostgreSQL, per server process.
const POSTGRES_CONNECTIONS: u32 = 8;

const SELECT_PLAYER: &str = "SELECT player_id, node, preset_kind, preset_name, character_def, \
     kits, inventory, equipment, handoff, held_by, version FROM players";
const PLAYER_VERSION: &str = "SELECT version FROM players WHERE player_id = $1";
/// A run of first saves, before its VALUES: the rows written are returned.
const INSERT_PLAYERS: &str = "INSERT INTO players (player_id, node, preset_kind, preset_name, \
     character_def, kits, inventory, equipment, handoff, held_by, version, saved_at) ";
const INSERT_PLAYERS_END: &str = " ON CONFLICT (player_id) DO NOTHING RETURNING player_id";
/// A run of updates: its VALUES go between the two halves; a row applies only on the stored
/// version it was based on (`base`), and the rows written are returned.
const UPDATE_PLAYERS: &str = "WITH v (id, node, preset_kind, preset_name, character_def, kits, \
     inventory, equipment, handoff, held_by, version, base) AS (";
const UPDATE_PLAYERS_END: &str = ") UPDATE players SET node = v.node, \
     preset_kind = v.preset_kind, preset_name = v.preset_name, character_def = v.character_def, \
     kits = v.kits, inventory = v.inventory, equipment = v.equipment, handoff = v.handoff, \
     held_by = v.held_by, version = v.version, saved_at = CURRENT_TIMESTAMP FROM v \
     WHERE players.player_id = v.id AND players.version = v.base RETURNING player_id";
/// PostgreSQL: the stored rows of a batch's players locked before it writes any, in byte order
/// (`COLLATE "C"`, the order Rust sorts the ids in, whatever the database's collation).
const LOCK_PLAYERS: &str = "SELECT player_id FROM players WHERE player_id IN (";
const LOCK_PLAYERS_END: &str = ") ORDER BY player_id COLLATE \"C\" FOR UPDATE";
/// Most rows one multi-row statement writes: 12 bound values a row keeps it far below the parameter
/// limits (SQLite 32,766, PostgreSQL 65,535). Every shape of statement stays prepared on each
/// pooled connection, about 0.9 KiB a row on SQLite: 256 rows a statement kept 3.9 KiB per client
/// prepared at 1,000 clients, 64 keep 1.5 (docs/performance.md, 2026-12-04), for a dozen more
/// statements per thousand saves.
const ROWS_PER_STATEMENT: usize = 64;
/// Most ids one PostgreSQL lock statement names (one bound value each).
const IDS_PER_LOCK: usize = 1024;
const SELECT_SESSION: &str = "SELECT session, node, version FROM sessions";
const INSERT_SESSION: &str = "INSERT INTO sessions (session, node, version, saved_at) \
     VALUES ($1, $2, $3, CURRENT_TIMESTAMP) ON CONFLICT (session) DO NOTHING";
const UPDATE_SESSION: &str = "UPDATE sessions SET node = $2, version = $3, \
     saved_at = CURRENT_TIMESTAMP WHERE session = $1 AND version = $4";
const SESSION_VERSION: &str = "SELECT version FROM sessions WHERE session = $1";

/// The player-save store: the embedded SQLite file or a PostgreSQL database, chosen by the
/// URL given to [`Store::open`]. Cheap to clone (the clones share one connection pool).
///
/// Every save is optimistic: it applies only if the stored version equals `save.version`, and
/// stores `save.version + 1`. An acknowledged save is durable: the embedded store runs in WAL
/// mode with `synchronous = FULL` (each commit is fsynced), so it survives `kill -9` and
/// power loss.
#[derive(Clone)]
pub struct Store {
    pool: Pool,
    /// The store's name in logs and errors (resolved, password redacted).
    location: Arc<str>,
    /// Statements the batches of player writes ran (shared by the clones).
    batch_statements: Arc<AtomicU64>,
}

#[derive(Clone)]
enum Pool {
    Sqlite(SqlitePool),
    Postgres(PgPool),
}

/// Runs `$body` with `$pool` bound to the concrete pool of either backend: one query text,
/// type-checked once per driver.
macro_rules! on_pool {
    ($store:expr, $pool:ident => $body:expr) => {
        match &$store.pool {
            Pool::Sqlite($pool) => $body,
            Pool::Postgres($pool) => $body,
        }
    };
}

/// Builds the one statement that writes a run of [`statement_runs`]: a multi-row INSERT of
/// first saves, or an UPDATE from a VALUES list of saves each based on a stored version. Either
/// returns the ids of the rows it wrote; a row it did not write met another version.
macro_rules! player_rows {
    ($rows:expr) => {{
        let rows: &[(usize, PlayerWrite)] = $rows;
        let update = rows.first().is_some_and(|(_, w)| w.base.is_some());
        let mut query =
            sqlx::QueryBuilder::new(if update { UPDATE_PLAYERS } else { INSERT_PLAYERS });
        query.push_values(rows, |mut row, (_, w)| {
            let c = &w.columns;
            row.push_bind(c.player_id.as_str())
                .push_bind(c.node.as_deref())
                .push_bind(c.preset_kind)
                .push_bind(c.preset_name.as_deref())
                .push_bind(c.character_def.as_deref())
                .push_bind(c.kits.as_deref())
                .push_bind(c.inventory.as_str())
                .push_bind(c.equipment.as_str())
                .push_bind(c.handoff.as_deref())
                .push_bind(c.held_by.as_deref())
                .push_bind(w.next);
            match w.base {
                Some(base) => row.push_bind(base),
                None => row.push("CURRENT_TIMESTAMP"),
            };
        });
        query.push(if update { UPDATE_PLAYERS_END } else { INSERT_PLAYERS_END });
        query
    }};
}

/// The order a batch's writes run in: the players whose first save in the batch is an update,
/// then those whose first is a first save, each in player-id order (so two processes saving
/// overlapping players write them in the same order); a player's saves stay together, in the
/// order given (a first save and the update based on it both apply).
fn write_order(writes: &mut [(usize, PlayerWrite)]) {
    let mut first_is_insert: HashMap<String, bool> = HashMap::new();
    for (_, w) in writes.iter() {
        first_is_insert.entry(w.columns.player_id.clone()).or_insert(w.base.is_none());
    }
    let section =
        |w: &PlayerWrite| first_is_insert.get(&w.columns.player_id).copied().unwrap_or_default();
    writes.sort_by(|(_, a), (_, b)| {
        (section(a), &a.columns.player_id).cmp(&(section(b), &b.columns.player_id))
    });
}

/// The runs of `writes` (in [`write_order`]) that one statement each writes: consecutive writes
/// of one kind (first saves, or updates), at most [`ROWS_PER_STATEMENT`], never one player
/// twice (its second save is based on the version its first writes). So a thousand saves are a
/// handful of statements, not a thousand round trips to the store.
///
/// Every run is a power of two long, largest first (a run of 40 is written as 32 and 8 rows):
/// each row count is a statement the pool keeps prepared on every connection, so a server
/// keeps at most seven shapes of each kind, not one for every count from 1 to
/// [`ROWS_PER_STATEMENT`] that its batches happened to have.
fn statement_runs(writes: &[(usize, PlayerWrite)]) -> Vec<Range<usize>> {
    let mut runs = Vec::new();
    let mut start = 0;
    for end in 1..=writes.len() {
        let closes = match (writes.get(end - 1), writes.get(end)) {
            (Some((_, last)), Some((_, next))) => {
                end - start == ROWS_PER_STATEMENT
                    || last.base.is_some() != next.base.is_some()
                    || last.columns.player_id == next.columns.player_id
            }
            _ => true,
        };
        if closes {
            split_in_powers_of_two(start..end, &mut runs);
            start = end;
        }
    }
    runs
}

/// Pushes `run` onto `runs` as consecutive runs whose lengths are the powers of two that sum to
/// its length, largest first.
fn split_in_powers_of_two(run: Range<usize>, runs: &mut Vec<Range<usize>>) {
    let mut start = run.start;
    while start < run.end {
        let piece = 1 << (run.end - start).ilog2();
        runs.push(start..start + piece);
        start += piece;
    }
}

/// What a batch of player writes attempted, for its error: `save player NAME` for one save,
/// `save N players` for more.
fn batch_operation(writes: &[(usize, PlayerWrite)]) -> String {
    match writes {
        [(_, write)] => format!("save {}", write.key),
        _ => format!("save {} players", writes.len()),
    }
}

/// One player save encoded for its conditional write.
struct PlayerWrite {
    /// `player NAME`, for errors.
    key: String,
    columns: PlayerColumns,
    /// The version an update must find; `None` for a first save (an INSERT).
    base: Option<i64>,
    /// The version written.
    next: i64,
    /// `save.version`, for a conflict.
    expected: u64,
}

impl PlayerWrite {
    /// Encodes `save`.
    ///
    /// # Errors
    /// [`StoreError::Unwritable`] for a value the schema cannot hold.
    fn new(save: &PlayerSave) -> Result<PlayerWrite, StoreError> {
        let key = player_key(&save.player);
        let columns = player_columns(save)?;
        let base = version_column(&key, save.version)?;
        let next = version_column(&key, save.version.saturating_add(1))?;
        let base = (base != 0).then_some(base);
        Ok(PlayerWrite { key, columns, base, next, expected: save.version })
    }

    /// The conflict of a write that found `found` stored instead of its base.
    fn conflict(&self, found: Option<i64>) -> StoreError {
        StoreError::Conflict {
            key: self.key.clone(),
            expected: self.expected,
            found: found.map(|v| v.max(0).unsigned_abs()),
        }
    }
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("location", &self.location).finish_non_exhaustive()
    }
}

impl Store {
    /// Opens the store `url` names (a relative SQLite path is resolved against `data_dir`,
    /// whose directories are created) and brings its schema up to date.
    ///
    /// 1. Resolve the URL; for SQLite, create the file's directory.
    /// 2. Open one connection, failing fast with the driver's reason.
    /// 3. Apply pending migrations on it (a no-op when up to date).
    /// 4. Pool connections lazily for the operations.
    ///
    /// # Errors
    /// Every error names the store, password redacted: [`StoreError::CreateDir`],
    /// [`StoreError::Open`] (unreachable server, refused login, a file that is not a
    /// database), [`StoreError::OpenTls`] (no TLS, an untrusted certificate),
    /// [`StoreError::OpenTimeout`], [`StoreError::Migrate`] (including a store
    /// whose schema is newer than this server).
    pub async fn open(url: &StoreUrl, data_dir: &Path) -> Result<Store, StoreError> {
        let location: Arc<str> = url.describe(data_dir).into();
        let store = match url.resolve(data_dir)? {
            Resolved::Embedded(path) => open_sqlite(&path, &location).await?,
            Resolved::Postgres(options) => open_postgres(*options, &location).await?,
        };
        tracing::info!(store = %location, schema = schema::latest_version(), "store open");
        Ok(Store { pool: store, location, batch_statements: Arc::default() })
    }

    /// The store's name for logs: the resolved URL, password redacted.
    pub fn location(&self) -> &str {
        &self.location
    }

    /// The player's save, or `None` if it was never saved.
    ///
    /// # Errors
    /// [`StoreError::Query`] when the store cannot be read; [`StoreError::Corrupt`] when the
    /// stored row cannot be read back.
    pub async fn load_player(&self, player: &PlayerId) -> Result<Option<PlayerSave>, StoreError> {
        let sql = format!("{SELECT_PLAYER} WHERE player_id = $1");
        let row: Option<PlayerRow> = on_pool!(self, pool => {
            sqlx::query_as(&sql).bind(player.as_str()).fetch_optional(pool).await
        })
        .map_err(|e| self.query_error(format!("load {}", player_key(player)), e))?;
        row.map(|row| player_from_row(&self.location, row)).transpose()
    }

    /// Writes `save` if the stored version is `save.version` (0: nothing stored) and returns
    /// the new version, `save.version + 1`. A read-only preset is written as its name only.
    /// A batch of one ([`Store::save_players`]): one write path for both.
    ///
    /// # Errors
    /// [`StoreError::Conflict`] when the stored version differs (nothing is written);
    /// [`StoreError::Unwritable`] for a value the schema cannot hold; [`StoreError::Query`]
    /// when the store cannot be written (the save may or may not have applied).
    pub async fn save_player(&self, save: &PlayerSave) -> Result<u64, StoreError> {
        let mut results = self.save_players(std::slice::from_ref(save)).await?;
        results.pop().unwrap_or_else(|| unreachable!("save_players answers one result per save"))
    }

    /// Writes many player saves in one transaction (one commit, so one fsync on the embedded
    /// store): each applies only if the stored version is its own `version` (0: nothing
    /// stored), and stores `version + 1`. The answer holds one result per save, in the order given: the new
    /// version, or why that save alone was not written.
    ///
    /// A conflict or an unwritable value refuses only its own save; the others still commit.
    /// The saves are written a run of rows per statement ([`statement_runs`]), in
    /// [`write_order`]; on PostgreSQL the stored rows are locked first, in byte order, so two
    /// processes saving overlapping players wait for each other instead of deadlocking.
    ///
    /// # Errors
    /// The outer error is the transaction's: [`StoreError::Query`] when the store cannot be
    /// written, and then none of the saves applied, or, when the commit's answer was lost, all
    /// of them may have. Per save: [`StoreError::Conflict`] (the stored version differs,
    /// nothing written for it) and [`StoreError::Unwritable`] (a value the schema cannot hold).
    pub async fn save_players(
        &self,
        saves: &[PlayerSave],
    ) -> Result<Vec<Result<u64, StoreError>>, StoreError> {
        // 1. Encode every save; one the schema cannot hold is refused alone, up front. The
        //    others are answered with their new version unless step 2 finds a conflict.
        let mut results = Vec::with_capacity(saves.len());
        let mut writes = Vec::with_capacity(saves.len());
        for (index, save) in saves.iter().enumerate() {
            match PlayerWrite::new(save) {
                Ok(write) => {
                    results.push(Ok(save.version + 1));
                    writes.push((index, write));
                }
                Err(e) => results.push(Err(e)),
            }
        }
        if writes.is_empty() {
            return Ok(results);
        }
        // 2. One transaction: each conditional write, and the stored version where one did
        //    not apply; any statement's failure rolls the whole batch back.
        write_order(&mut writes);
        let missed = self
            .exec_players(&writes)
            .await
            .map_err(|e| self.query_error(batch_operation(&writes), e))?;
        // 3. A write that did not apply is that save's conflict.
        for ((index, write), missed) in writes.iter().zip(missed) {
            if let (Some(found), Some(result)) = (missed, results.get_mut(*index)) {
                *result = Err(write.conflict(found));
            }
        }
        Ok(results)
    }

    /// The session's save, or `None` if it was never saved.
    ///
    /// # Errors
    /// As [`Store::load_player`].
    pub async fn load_session(&self, session: &str) -> Result<Option<SessionSave>, StoreError> {
        let sql = format!("{SELECT_SESSION} WHERE session = $1");
        let row: Option<SessionRow> = on_pool!(self, pool => {
            sqlx::query_as(&sql).bind(session).fetch_optional(pool).await
        })
        .map_err(|e| self.query_error(format!("load {}", session_key(session)), e))?;
        row.map(|row| session_from_row(&self.location, row)).transpose()
    }

    /// Writes `save` if the stored version is `save.version` and returns the new version.
    ///
    /// # Errors
    /// As [`Store::save_player`].
    pub async fn save_session(&self, save: &SessionSave) -> Result<u64, StoreError> {
        let key = session_key(&save.session);
        let base = version_column(&key, save.version)?;
        let next = version_column(&key, save.version.saturating_add(1))?;
        let node = save.node.as_str();
        let (sql, expected) =
            if base == 0 { (INSERT_SESSION, None) } else { (UPDATE_SESSION, Some(base)) };
        let affected = on_pool!(self, pool => {
            let query = sqlx::query(sql).bind(&save.session).bind(node).bind(next);
            let query = match expected {
                Some(base) => query.bind(base),
                None => query,
            };
            query.execute(pool).await.map(|r| r.rows_affected())
        })
        .map_err(|e| self.query_error(format!("save {key}"), e))?;
        if affected == 1 {
            return Ok(save.version + 1);
        }
        let found: Option<i64> = on_pool!(self, pool => {
            sqlx::query_scalar(SESSION_VERSION)
                .bind(&save.session)
                .fetch_optional(pool)
                .await
        })
        .map_err(|e| self.query_error(format!("read the version of {key}"), e))?;
        Err(StoreError::Conflict {
            key,
            expected: save.version,
            found: found.map(|v| v.max(0).unsigned_abs()),
        })
    }

    /// Every saved player, ordered by player id.
    ///
    /// # Errors
    /// As [`Store::load_player`].
    pub async fn list_players(&self) -> Result<Vec<PlayerSave>, StoreError> {
        let sql = format!("{SELECT_PLAYER} ORDER BY player_id");
        let rows: Vec<PlayerRow> = on_pool!(self, pool => {
            sqlx::query_as(&sql).fetch_all(pool).await
        })
        .map_err(|e| self.query_error("list players".to_owned(), e))?;
        rows.into_iter().map(|row| player_from_row(&self.location, row)).collect()
    }

    /// Every session save, ordered by name.
    ///
    /// # Errors
    /// As [`Store::load_player`].
    pub async fn list_sessions(&self) -> Result<Vec<SessionSave>, StoreError> {
        let sql = format!("{SELECT_SESSION} ORDER BY session");
        let rows: Vec<SessionRow> = on_pool!(self, pool => {
            sqlx::query_as(&sql).fetch_all(pool).await
        })
        .map_err(|e| self.query_error("list sessions".to_owned(), e))?;
        rows.into_iter().map(|row| session_from_row(&self.location, row)).collect()
    }

    /// Closes every pooled connection, waiting for operations in progress. Later operations
    /// fail.
    pub async fn close(&self) {
        on_pool!(self, pool => pool.close().await);
    }

    /// Runs `writes` (ordered by [`write_order`]) in one transaction (`BEGIN IMMEDIATE` on
    /// SQLite: the write lock is taken up front, waiting out another writer, instead of failing
    /// at the first write), one statement per run of [`statement_runs`]; for each write, `None`
    /// when it applied, or the stored version it found instead.
    ///
    /// PostgreSQL first locks every stored row the batch names, in byte order, before it writes
    /// any: two processes saving overlapping players then wait for each other instead of
    /// deadlocking (an update's lock taken before a first save's wait on another process's new
    /// row could otherwise close a cycle).
    async fn exec_players(
        &self,
        writes: &[(usize, PlayerWrite)],
    ) -> Result<Vec<Option<Option<i64>>>, sqlx::Error> {
        let postgres = matches!(self.pool, Pool::Postgres(_));
        let begin = if postgres { "BEGIN" } else { "BEGIN IMMEDIATE" };
        on_pool!(self, pool => {
            let mut tx = pool.begin_with(begin).await?;
            let mut missed = Vec::with_capacity(writes.len());
            if postgres {
                let mut players: Vec<&str> =
                    writes.iter().map(|(_, w)| w.columns.player_id.as_str()).collect();
                players.sort_unstable();
                players.dedup();
                for chunk in players.chunks(IDS_PER_LOCK) {
                    let mut lock = sqlx::QueryBuilder::new(LOCK_PLAYERS);
                    let mut ids = lock.separated(", ");
                    for id in chunk {
                        ids.push_bind(*id);
                    }
                    lock.push(LOCK_PLAYERS_END);
                    lock.build().execute(&mut *tx).await?;
                    self.count_statement();
                }
            }
            for run in statement_runs(writes) {
                let rows = &writes[run];
                let mut query = player_rows!(rows);
                let applied: HashSet<String> =
                    query.build_query_scalar().fetch_all(&mut *tx).await?.into_iter().collect();
                self.count_statement();
                for (_, w) in rows {
                    if applied.contains(&w.columns.player_id) {
                        missed.push(None);
                        continue;
                    }
                    let found: Option<i64> = sqlx::query_scalar(PLAYER_VERSION)
                        .bind(&w.columns.player_id)
                        .fetch_optional(&mut *tx)
                        .await?;
                    self.count_statement();
                    missed.push(Some(found));
                }
            }
            tx.commit().await?;
            Ok(missed)
        })
    }

    /// Counts one statement of a batch of player writes (the complexity test reads it).
    fn count_statement(&self) {
        self.batch_statements.fetch_add(1, Ordering::Relaxed);
    }

    /// Statements the batches of player writes ran so far (a statement per run of rows, not per
    /// save).
    #[cfg(test)]
    fn batch_statements(&self) -> u64 {
        self.batch_statements.load(Ordering::Relaxed)
    }

    fn query_error(&self, operation: String, source: sqlx::Error) -> StoreError {
        StoreError::Query { url: self.location.to_string(), operation, source }
    }
}

/// Opens (creating if missing) the SQLite file: WAL journal, `synchronous = FULL`.
async fn open_sqlite(path: &Path, location: &str) -> Result<Pool, StoreError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|source| StoreError::CreateDir {
            url: location.to_owned(),
            path: dir.to_owned(),
            source,
        })?;
    }
    let options = SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Full)
        .busy_timeout(SQLITE_BUSY_TIMEOUT)
        .foreign_keys(true)
        .disable_statement_logging();
    let mut conn = connect(SqliteConnection::connect_with(&options), location).await?;
    let migrator =
        schema::migrator(Dialect::Sqlite).await.map_err(|e| migrate_error(location, e))?;
    migrator.run(&mut conn).await.map_err(|e| migrate_error(location, e))?;
    let _ = conn.close().await;
    Ok(Pool::Sqlite(
        SqlitePoolOptions::new()
            .max_connections(SQLITE_CONNECTIONS)
            .acquire_timeout(ACQUIRE_TIMEOUT)
            .connect_lazy_with(options),
    ))
}

/// Connects to PostgreSQL.
async fn open_postgres(options: PgConnectOptions, location: &str) -> Result<Pool, StoreError> {
    let options = options.application_name("gatehouse-server").disable_statement_logging();
    let mut conn = connect(PgConnection::connect_with(&options), location).await?;
    let migrator =
        schema::migrator(Dialect::Postgres).await.map_err(|e| migrate_error(location, e))?;
    migrator.run(&mut conn).await.map_err(|e| migrate_error(location, e))?;
    let _ = conn.close().await;
    Ok(Pool::Postgres(
        PgPoolOptions::new()
            .max_connections(POSTGRES_CONNECTIONS)
            .acquire_timeout(ACQUIRE_TIMEOUT)
            .connect_lazy_with(options),
    ))
}

/// Awaits a first connection, bounded by [`OPEN_TIMEOUT`].
async fn connect<C>(
    attempt: impl Future<Output = Result<C, sqlx::Error>>,
    location: &str,
) -> Result<C, StoreError> {
    match tokio::time::timeout(OPEN_TIMEOUT, attempt).await {
        Ok(Ok(conn)) => Ok(conn),
        Ok(Err(source)) => match super::error::tls_failure(&source) {
            Some(why) => Err(StoreError::OpenTls { url: location.to_owned(), why, source }),
            None => Err(StoreError::Open { url: location.to_owned(), source }),
        },
        Err(_) => Err(StoreError::OpenTimeout {
            url: location.to_owned(),
            after_ms: u64::try_from(OPEN_TIMEOUT.as_millis()).unwrap_or(u64::MAX),
        }),
    }
}

fn migrate_error(location: &str, source: sqlx::migrate::MigrateError) -> StoreError {
    StoreError::Migrate { url: location.to_owned(), expected: schema::latest_version(), source }
}

#[cfg(test)]
mod tests {
    use gatehouse_protocol::NodeId;

    use super::*;
    use crate::store::Preset;

    fn save(player: &str, version: u64) -> PlayerSave {
        PlayerSave {
            player: PlayerId::new(player).unwrap(),
            node: Some(NodeId::new("harbor").unwrap()),
            preset: Preset::ReadOnly { name: "Scout".into() },
            inventory: vec![],
            equipment: vec![],
            version,
            handoff: None,
            holder: None,
        }
    }

    fn writes(saves: &[PlayerSave]) -> Vec<(usize, PlayerWrite)> {
        let mut writes: Vec<_> =
            saves.iter().enumerate().map(|(i, s)| (i, PlayerWrite::new(s).unwrap())).collect();
        write_order(&mut writes);
        writes
    }

    /// Updates run before first saves, each kind in player-id order, a run
    /// holds at most `ROWS_PER_STATEMENT` rows and never one player twice.
    #[test]
    fn a_run_of_rows_is_one_kind_at_most_a_statements_rows_and_each_player_once() {
        let mut saves: Vec<PlayerSave> =
            (0..ROWS_PER_STATEMENT + 2).map(|i| save(&format!("u-{i:04}"), 1)).collect();
        saves.push(save("a-first", 0));
        saves.push(save("u-0001", 2));
        let writes = writes(&saves);
        assert_eq!(writes[0].1.columns.player_id, "u-0000", "updates first, by player id");
        assert_eq!(writes.last().map(|(i, _)| *i), Some(ROWS_PER_STATEMENT + 2), "then the insert");
        assert_eq!(
            statement_runs(&writes),
            vec![
                0..2,
                2..ROWS_PER_STATEMENT + 2,
                ROWS_PER_STATEMENT + 2..ROWS_PER_STATEMENT + 3,
                ROWS_PER_STATEMENT + 3..ROWS_PER_STATEMENT + 4
            ]
        );
        assert_eq!(statement_runs(&[]), Vec::<Range<usize>>::new());
    }

    /// However many saves a batch holds, each statement writes a power of two
    /// rows (at most seven shapes of each kind stay prepared), largest first, the runs cover the
    /// batch in order, and a run of n rows costs at most one statement per bit of n.
    #[test]
    fn every_statement_writes_a_power_of_two_rows() {
        for n in [1, 2, 3, 7, 100, 232, 255, 256, 257, 600, 1000] {
            let saves: Vec<PlayerSave> = (0..n).map(|i| save(&format!("p-{i:04}"), 1)).collect();
            let runs = statement_runs(&writes(&saves));
            let lengths: Vec<usize> = runs.iter().map(|r| r.len()).collect();
            assert!(
                lengths.iter().all(|l| l.is_power_of_two() && *l <= ROWS_PER_STATEMENT),
                "{n}: {lengths:?}"
            );
            assert!(lengths.windows(2).all(|w| w[0] >= w[1]), "{n}: largest first: {lengths:?}");
            let full = n / ROWS_PER_STATEMENT;
            let rest = n % ROWS_PER_STATEMENT;
            assert_eq!(runs.len(), full + rest.count_ones() as usize, "{n}: {lengths:?}");
            let covered: Vec<usize> = runs.into_iter().flatten().collect();
            assert_eq!(covered, (0..n).collect::<Vec<_>>(), "{n}: in order, each row once");
        }
    }

    /// The regression pin: a thousand saves cost a statement per run of
    /// rows, not one per save; a conflict adds only its own version read.
    #[tokio::test]
    async fn a_thousand_saves_are_a_statement_per_run_of_rows() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&StoreUrl::default(), dir.path()).await.unwrap();
        let first: Vec<PlayerSave> = (0..1000).map(|i| save(&format!("p-{i:04}"), 0)).collect();
        let results = store.save_players(&first).await.unwrap();
        assert!(results.iter().all(|r| matches!(r, Ok(1))));
        // Fifteen runs of 64, then 40 as 32 + 8.
        let runs = 17;
        assert_eq!(store.batch_statements(), runs);
        let mut again: Vec<PlayerSave> = first.iter().map(|s| save(s.player.as_str(), 1)).collect();
        again[500].version = 7;
        let results = store.save_players(&again).await.unwrap();
        assert!(matches!(results[500], Err(StoreError::Conflict { found: Some(1), .. })));
        assert_eq!(results.iter().filter(|r| matches!(r, Ok(2))).count(), 999);
        assert_eq!(store.batch_statements(), 2 * runs + 1, "one version read for the conflict");
        store.close().await;
    }
}
