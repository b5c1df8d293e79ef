//! The player-save store against real backends: one suite, run on the embedded store always
//! and on PostgreSQL when `GATEHOUSE_TEST_POSTGRES_URL` names a server (otherwise its half is
//! reported as ignored, with the reason). Also the SIGKILL crash test, the `saves`
//! operator commands (docs/operations.md, "Player saves") and the store over TLS to a server
//! that requires it (`tls.rs`, when `GATEHOUSE_TEST_POSTGRES_TLS_URL` names one).

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod backends;
mod cli;
mod crash;
mod start_errors;
mod suite;
mod tls;

/// Declares each listed `module::test` twice, in `embedded` and `postgres`, each on a fresh
/// store of its own.
macro_rules! on_both_backends {
    ($($module:ident :: $name:ident),* $(,)?) => {
        mod embedded {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let backend = crate::backends::Backend::embedded();
                    crate::$module::$name(&backend).await;
                    backend.cleanup().await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                #[cfg_attr(
                    not(gatehouse_postgres_tests),
                    ignore = "PostgreSQL skipped: GATEHOUSE_TEST_POSTGRES_URL is not set (docs/testing.md, \"PostgreSQL tests\")"
                )]
                async fn $name() {
                    let backend = crate::backends::Backend::postgres().await;
                    crate::$module::$name(&backend).await;
                    backend.cleanup().await;
                }
            )*
        }
    };
}

on_both_backends!(
    suite::every_field_round_trips,
    suite::a_read_only_preset_is_never_written,
    suite::concurrent_saves_of_different_players_all_land,
    suite::a_stale_version_is_a_conflict_and_writes_nothing,
    suite::a_batch_of_saves_lands_with_one_result_each,
    suite::a_conflict_in_a_batch_refuses_only_that_save,
    suite::a_large_mixed_batch_lands_as_the_saves_one_by_one_would,
    suite::a_first_save_and_the_save_based_on_it_in_one_batch_both_apply,
    suite::a_batch_that_fails_as_a_whole_writes_nothing,
    suite::a_save_is_visible_after_reopening_the_store,
    suite::migrations_are_idempotent,
    suite::a_store_with_a_newer_schema_is_refused,
    suite::a_handoff_save_round_trips_every_field,
    suite::a_save_without_a_handoff_state_loads_none,
    suite::a_claim_and_a_recall_at_the_handoff_version_one_wins,
    suite::a_store_at_schema_1_opens_at_the_latest_schema_and_loads_its_rows_unchanged,
    suite::the_holder_is_written_by_saves_claims_recalls_and_takes,
    crash::a_save_acknowledged_before_sigkill_survives,
    cli::saves_show_prints_a_players_save,
    cli::saves_list_prints_every_player,
);

/// Tests of what only PostgreSQL has: row locks held by concurrent processes (the embedded
/// store writes one transaction at a time).
mod postgres_only {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[cfg_attr(
        not(gatehouse_postgres_tests),
        ignore = "PostgreSQL skipped: GATEHOUSE_TEST_POSTGRES_URL is not set (docs/testing.md, \"PostgreSQL tests\")"
    )]
    async fn overlapping_batches_of_two_processes_finish_without_a_deadlock() {
        let backend = crate::backends::Backend::postgres().await;
        crate::suite::overlapping_batches_of_two_processes_finish_without_a_deadlock(&backend)
            .await;
        backend.cleanup().await;
    }
}
