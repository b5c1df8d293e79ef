//! The two backends the suite runs on: a fresh embedded store in a temporary data dir, or a
//! fresh schema in the PostgreSQL database that `GATEHOUSE_TEST_POSTGRES_URL` names.
//!
//! Each fixture is private to one test, so tests run in parallel without seeing each other.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use gatehouse_server::store::{Store, StoreUrl};
use sqlx::{Connection as _, Executor as _};

/// The variable that names the PostgreSQL server for the tests.
pub(crate) const POSTGRES_ENV: &str = "GATEHOUSE_TEST_POSTGRES_URL";

/// A store location private to one test.
pub(crate) enum Backend {
    /// A temporary data dir holding `saves.db`.
    Embedded { dir: tempfile::TempDir },
    /// A schema of its own in the test database.
    Postgres { base: String, schema: String },
}

impl Backend {
    /// A fresh embedded store location.
    pub(crate) fn embedded() -> Backend {
        Backend::Embedded { dir: tempfile::tempdir().unwrap() }
    }

    /// A fresh schema in the test database.
    ///
    /// # Panics
    /// When `GATEHOUSE_TEST_POSTGRES_URL` is unset (the PostgreSQL tests are ignored then,
    /// unless run with `--ignored`) or its server refuses the schema.
    pub(crate) async fn postgres() -> Backend {
        let base = std::env::var(POSTGRES_ENV).unwrap_or_else(|_| {
            panic!("set {POSTGRES_ENV} to run the PostgreSQL tests (docs/testing.md, \"PostgreSQL tests\")")
        });
        Backend::postgres_at(base).await
    }

    /// A fresh schema in the database `base` names (with its TLS parameters, if any).
    ///
    /// # Panics
    /// When that server refuses the schema.
    pub(crate) async fn postgres_at(base: String) -> Backend {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().subsec_nanos();
        let schema = format!(
            "gh_test_{}_{}_{nanos}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let mut conn = sqlx::PgConnection::connect(&base)
            .await
            .unwrap_or_else(|e| panic!("cannot reach the test PostgreSQL server: {e}"));
        conn.execute(format!("CREATE SCHEMA {schema}").as_str()).await.unwrap();
        conn.close().await.unwrap();
        Backend::Postgres { base, schema }
    }

    /// The `store.url` for this location.
    pub(crate) fn url(&self) -> StoreUrl {
        StoreUrl::parse(&self.url_text()).unwrap()
    }

    /// The same, as text (for `GATEHOUSE_STORE_URL` and child processes).
    pub(crate) fn url_text(&self) -> String {
        match self {
            Backend::Embedded { .. } => "sqlite:saves.db".to_owned(),
            Backend::Postgres { base, schema } => {
                let sep = if base.contains('?') { '&' } else { '?' };
                format!("{base}{sep}options=-c%20search_path%3D{schema}")
            }
        }
    }

    /// The password in the URL, if any.
    pub(crate) fn password(&self) -> Option<String> {
        let Backend::Postgres { base, .. } = self else { return None };
        let (_, rest) = base.split_once("://")?;
        let (userinfo, _) = rest.rsplit_once('@')?;
        userinfo.split_once(':').map(|(_, password)| password.to_owned())
    }

    /// The data dir to open the store with.
    pub(crate) fn data_dir(&self) -> PathBuf {
        match self {
            Backend::Embedded { dir } => dir.path().to_owned(),
            Backend::Postgres { .. } => PathBuf::from("unused-data-dir"),
        }
    }

    /// Opens the store here.
    pub(crate) async fn open(&self) -> Store {
        Store::open(&self.url(), &self.data_dir()).await.unwrap()
    }

    /// One query's rows, read behind the store's back: `(preset_kind, preset_name,
    /// character_def, kits)` of a player.
    pub(crate) async fn raw_preset_columns(
        &self,
        player: &str,
    ) -> (String, Option<String>, Option<String>, Option<String>) {
        let sql = "SELECT preset_kind, preset_name, character_def, kits FROM players \
                   WHERE player_id = $1";
        match self {
            Backend::Embedded { dir } => {
                let mut conn = sqlite(dir.path()).await;
                sqlx::query_as(sql).bind(player).fetch_one(&mut conn).await.unwrap()
            }
            Backend::Postgres { .. } => {
                let mut conn = sqlx::PgConnection::connect(&self.url_text()).await.unwrap();
                sqlx::query_as(sql).bind(player).fetch_one(&mut conn).await.unwrap()
            }
        }
    }

    /// A player's `handoff` column, read behind the store's back (`None`: NULL).
    pub(crate) async fn raw_handoff(&self, player: &str) -> Option<String> {
        let sql = "SELECT handoff FROM players WHERE player_id = $1";
        match self {
            Backend::Embedded { dir } => {
                let mut conn = sqlite(dir.path()).await;
                sqlx::query_scalar(sql).bind(player).fetch_one(&mut conn).await.unwrap()
            }
            Backend::Postgres { .. } => {
                let mut conn = sqlx::PgConnection::connect(&self.url_text()).await.unwrap();
                sqlx::query_scalar(sql).bind(player).fetch_one(&mut conn).await.unwrap()
            }
        }
    }

    /// Creates the store at schema version 1, as a server of that version left it: its one
    /// migration applied and recorded by sqlx's migrator, from the file this build still ships
    /// (migrations are never edited once released, so it is the one a server of version 1 ran).
    pub(crate) async fn create_at_schema_1(&self) {
        let dialect = match self {
            Backend::Embedded { .. } => "sqlite",
            Backend::Postgres { .. } => "postgres",
        };
        let file = "0001_players_and_sessions.sql";
        let shipped = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("src/store/migrations")
            .join(dialect)
            .join(file);
        let only_the_first = tempfile::tempdir().unwrap();
        std::fs::copy(&shipped, only_the_first.path().join(file)).unwrap();
        let migrator = sqlx::migrate::Migrator::new(only_the_first.path()).await.unwrap();
        assert_eq!(migrator.iter().map(|m| m.version).collect::<Vec<_>>(), [1]);
        match self {
            Backend::Embedded { dir } => {
                let options = sqlx::sqlite::SqliteConnectOptions::new()
                    .filename(dir.path().join("saves.db"))
                    .create_if_missing(true);
                let mut conn = sqlx::SqliteConnection::connect_with(&options).await.unwrap();
                migrator.run(&mut conn).await.unwrap();
                conn.close().await.unwrap();
            }
            Backend::Postgres { .. } => {
                let mut conn = sqlx::PgConnection::connect(&self.url_text()).await.unwrap();
                migrator.run(&mut conn).await.unwrap();
                conn.close().await.unwrap();
            }
        }
    }

    /// Runs `sql` behind the store's back (rows written as an older server wrote them).
    pub(crate) async fn execute(&self, sql: &str) {
        match self {
            Backend::Embedded { dir } => {
                let mut conn = sqlite(dir.path()).await;
                conn.execute(sql).await.unwrap();
            }
            Backend::Postgres { .. } => {
                let mut conn = sqlx::PgConnection::connect(&self.url_text()).await.unwrap();
                conn.execute(sql).await.unwrap();
            }
        }
    }

    /// The tables in the store, sorted.
    pub(crate) async fn table_names(&self) -> Vec<String> {
        match self {
            Backend::Embedded { dir } => {
                let mut conn = sqlite(dir.path()).await;
                sqlx::query_scalar(
                    "SELECT name FROM sqlite_master WHERE type = 'table' \
                     AND name NOT LIKE 'sqlite_%' ORDER BY name",
                )
                .fetch_all(&mut conn)
                .await
                .unwrap()
            }
            Backend::Postgres { .. } => {
                let mut conn = sqlx::PgConnection::connect(&self.url_text()).await.unwrap();
                sqlx::query_scalar(
                    "SELECT table_name::text FROM information_schema.tables \
                     WHERE table_schema = current_schema() ORDER BY table_name",
                )
                .fetch_all(&mut conn)
                .await
                .unwrap()
            }
        }
    }

    /// Writes a player row whose equipment names no known tag (the catalog lost it).
    pub(crate) async fn record_unreadable_player(&self, player: &str) {
        let sql = "INSERT INTO players (player_id, node, preset_kind, preset_name, inventory, \
                   equipment, version) VALUES ($1, NULL, 'read_only', 'Scout', '[]', \
                   '[\"No.Such.Tag\"]', 1)";
        match self {
            Backend::Embedded { dir } => {
                let mut conn = sqlite(dir.path()).await;
                sqlx::query(sql).bind(player).execute(&mut conn).await.unwrap();
            }
            Backend::Postgres { .. } => {
                let mut conn = sqlx::PgConnection::connect(&self.url_text()).await.unwrap();
                sqlx::query(sql).bind(player).execute(&mut conn).await.unwrap();
            }
        }
    }

    /// Makes the store refuse every write of `player`'s row with an error, behind the store's
    /// back (a trigger), so a transaction that writes it fails as a whole.
    pub(crate) async fn refuse_writes_of(&self, player: &str) {
        match self {
            Backend::Embedded { dir } => {
                let mut conn = sqlite(dir.path()).await;
                let sql = format!(
                    "CREATE TRIGGER refuse_{player} BEFORE INSERT ON players \
                     WHEN NEW.player_id = '{player}' \
                     BEGIN SELECT RAISE(ABORT, 'refused by the test'); END"
                );
                conn.execute(sql.as_str()).await.unwrap();
            }
            Backend::Postgres { .. } => {
                let mut conn = sqlx::PgConnection::connect(&self.url_text()).await.unwrap();
                conn.execute(
                    "CREATE FUNCTION refuse_write() RETURNS trigger LANGUAGE plpgsql AS \
                     $$ BEGIN RAISE EXCEPTION 'refused by the test'; END $$",
                )
                .await
                .unwrap();
                let sql = format!(
                    "CREATE TRIGGER refuse_{player} BEFORE INSERT ON players FOR EACH ROW \
                     WHEN (NEW.player_id = '{player}') EXECUTE FUNCTION refuse_write()"
                );
                conn.execute(sql.as_str()).await.unwrap();
            }
        }
    }

    /// Records a migration this build does not know, as a newer server would have.
    pub(crate) async fn record_foreign_migration(&self, version: i64) {
        let sql = "INSERT INTO _sqlx_migrations \
                   (version, description, success, checksum, execution_time) \
                   VALUES ($1, 'from a newer server', TRUE, $2, 0)";
        let checksum = vec![0u8; 48];
        match self {
            Backend::Embedded { dir } => {
                let mut conn = sqlite(dir.path()).await;
                sqlx::query(sql).bind(version).bind(checksum).execute(&mut conn).await.unwrap();
            }
            Backend::Postgres { .. } => {
                let mut conn = sqlx::PgConnection::connect(&self.url_text()).await.unwrap();
                sqlx::query(sql).bind(version).bind(checksum).execute(&mut conn).await.unwrap();
            }
        }
    }

    /// The versions recorded in `_sqlx_migrations`.
    pub(crate) async fn applied_migrations(&self) -> Vec<i64> {
        let sql = "SELECT version FROM _sqlx_migrations ORDER BY version";
        match self {
            Backend::Embedded { dir } => {
                let mut conn = sqlite(dir.path()).await;
                sqlx::query_scalar(sql).fetch_all(&mut conn).await.unwrap()
            }
            Backend::Postgres { .. } => {
                let mut conn = sqlx::PgConnection::connect(&self.url_text()).await.unwrap();
                sqlx::query_scalar(sql).fetch_all(&mut conn).await.unwrap()
            }
        }
    }

    /// Drops the test's schema (PostgreSQL); the embedded store's directory goes with `self`.
    pub(crate) async fn cleanup(self) {
        if let Backend::Postgres { base, schema } = &self {
            let mut conn = sqlx::PgConnection::connect(base).await.unwrap();
            conn.execute(format!("DROP SCHEMA {schema} CASCADE").as_str()).await.unwrap();
            conn.close().await.unwrap();
        }
    }
}

/// A plain connection to the embedded store's file.
async fn sqlite(dir: &Path) -> sqlx::SqliteConnection {
    let options = sqlx::sqlite::SqliteConnectOptions::new().filename(dir.join("saves.db"));
    sqlx::SqliteConnection::connect_with(&options).await.unwrap()
}
