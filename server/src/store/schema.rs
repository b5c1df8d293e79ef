//! The schema: versioned migrations in both dialects, applied at open by sqlx's migrator
//! (which records them in `_sqlx_migrations`, refuses a changed or unknown applied migration,
//! and on PostgreSQL holds an advisory lock so servers starting together migrate once).
//!
//! Owns the migration list. The SQL lives in `migrations/{sqlite,postgres}/`, one file per
//! version, never edited once released.

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;

use sqlx::error::BoxDynError;
use sqlx::migrate::{Migration, MigrationSource, MigrationType, Migrator};

/// One schema version: its number, what it does, its SQL.
#[derive(Debug)]
struct Step {
    version: i64,
    description: &'static str,
    sql: &'static str,
}

/// The SQLite (embedded store) migrations, oldest first.
///
/// 1. The `players` and `sessions` tables.
/// 2. `players.handoff`: a travel's handoff state (docs/spec/travel.md V2), NULL otherwise.
/// 3. `players.held_by`: the server that wrote the row (docs/spec/travel.md V17), NULL in no
///    fleet.
const SQLITE: &[Step] = &[
    Step {
        version: 1,
        description: "players and sessions",
        sql: include_str!("migrations/sqlite/0001_players_and_sessions.sql"),
    },
    Step {
        version: 2,
        description: "handoff state",
        sql: include_str!("migrations/sqlite/0002_handoff_state.sql"),
    },
    Step {
        version: 3,
        description: "held by",
        sql: include_str!("migrations/sqlite/0003_held_by.sql"),
    },
];

/// The PostgreSQL migrations, oldest first; the same versions as [`SQLITE`].
const POSTGRES: &[Step] = &[
    Step {
        version: 1,
        description: "players and sessions",
        sql: include_str!("migrations/postgres/0001_players_and_sessions.sql"),
    },
    Step {
        version: 2,
        description: "handoff state",
        sql: include_str!("migrations/postgres/0002_handoff_state.sql"),
    },
    Step {
        version: 3,
        description: "held by",
        sql: include_str!("migrations/postgres/0003_held_by.sql"),
    },
];

/// Which SQL dialect a backend speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    /// The embedded store.
    Sqlite,
    /// PostgreSQL.
    Postgres,
}

/// The schema version this build expects: the newest migration.
pub(crate) fn latest_version() -> i64 {
    SQLITE.last().map_or(0, |step| step.version)
}

/// The migrator for `dialect`.
///
/// # Errors
/// Never in practice (the list is static); the migrator's API is fallible.
pub(crate) async fn migrator(dialect: Dialect) -> Result<Migrator, sqlx::migrate::MigrateError> {
    let steps = match dialect {
        Dialect::Sqlite => SQLITE,
        Dialect::Postgres => POSTGRES,
    };
    Migrator::new(Embedded(steps)).await
}

/// A migration source compiled into the binary.
#[derive(Debug)]
struct Embedded(&'static [Step]);

impl MigrationSource<'static> for Embedded {
    fn resolve(
        self,
    ) -> Pin<Box<dyn Future<Output = Result<Vec<Migration>, BoxDynError>> + Send + 'static>> {
        let migrations = self
            .0
            .iter()
            .map(|step| {
                Migration::new(
                    step.version,
                    Cow::Borrowed(step.description),
                    MigrationType::Simple,
                    Cow::Borrowed(step.sql),
                    false,
                )
            })
            .collect();
        Box::pin(std::future::ready(Ok(migrations)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_dialects_have_the_same_versions_in_order() {
        let versions = |steps: &[Step]| steps.iter().map(|s| s.version).collect::<Vec<_>>();
        assert_eq!(versions(SQLITE), versions(POSTGRES));
        let v = versions(SQLITE);
        assert!(v.windows(2).all(|w| w[0] < w[1]), "versions must increase: {v:?}");
        assert_eq!(v.first(), Some(&1));
        assert_eq!(latest_version(), *v.last().unwrap());
    }

    #[tokio::test]
    async fn the_migrators_resolve_every_step() {
        for dialect in [Dialect::Sqlite, Dialect::Postgres] {
            let m = migrator(dialect).await.unwrap();
            assert_eq!(
                m.iter().map(|m| m.version).collect::<Vec<_>>(),
                (1..=latest_version()).collect::<Vec<_>>()
            );
        }
    }
}
