//! A store that cannot be used stops the start with an error naming it (password redacted),
//! never a panic: a corrupt or unreachable store gives a clear start-up error.

use gatehouse_server::store::{Store, StoreError, StoreUrl};

use crate::backends::{Backend, POSTGRES_ENV};

/// A file that is not a database: the error names the store's file.
#[tokio::test]
async fn a_corrupt_embedded_file_is_a_clear_start_error() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("saves.db");
    std::fs::write(&file, "this is not a database, it is a shopping list\n".repeat(200)).unwrap();
    let err =
        Store::open(&StoreUrl::parse("sqlite:saves.db").unwrap(), dir.path()).await.unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, StoreError::Open { .. }), "{text}");
    assert!(text.contains(&format!("sqlite:{}", file.display())), "names the file: {text}");
    assert!(text.contains("not a database"), "says why: {text}");
}

/// A store whose tables were damaged after migration: loads fail with a clear error.
#[tokio::test]
async fn an_unreadable_row_is_an_error_naming_its_column() {
    let b = Backend::embedded();
    b.open().await.close().await;
    b.record_unreadable_player("p-bad").await;
    let store = b.open().await;
    let err = store
        .load_player(&gatehouse_protocol::PlayerId::new("p-bad").unwrap())
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("player p-bad") && err.contains("`equipment`"), "{err}");
}

/// Nothing listens on port 1: the error names the URL without its password.
#[tokio::test]
async fn an_unreachable_postgres_server_is_a_clear_start_error_without_the_password() {
    let url = StoreUrl::parse("postgres://gate:hunter2@127.0.0.1:1/saves").unwrap();
    let err = Store::open(&url, std::path::Path::new("unused")).await.unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, StoreError::Open { .. }), "{text}");
    assert!(text.contains("postgres://gate:***@127.0.0.1:1/saves"), "names the url: {text}");
    assert!(!text.contains("hunter2"), "never the password: {text}");
    assert!(!format!("{err:?}").contains("hunter2"), "not even in Debug: {err:?}");
}

/// A refused login names the URL without its password.
#[tokio::test]
#[cfg_attr(
    not(gatehouse_postgres_tests),
    ignore = "PostgreSQL skipped: GATEHOUSE_TEST_POSTGRES_URL is not set (docs/testing.md, \"PostgreSQL tests\")"
)]
async fn a_refused_postgres_login_is_a_clear_start_error_without_the_password() {
    let base = std::env::var(POSTGRES_ENV).unwrap();
    let (scheme, rest) = base.split_once("://").unwrap();
    let (userinfo, host) = rest.rsplit_once('@').expect("the test URL names a user");
    let user = userinfo.split(':').next().unwrap();
    let wrong = format!("{scheme}://{user}:not-the-password-42@{host}");
    let err = Store::open(&StoreUrl::parse(&wrong).unwrap(), std::path::Path::new("unused"))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains(&format!("{scheme}://{user}:***@")), "names the url: {err}");
    assert!(err.contains("password authentication failed"), "says why: {err}");
    assert!(!err.contains("not-the-password-42"), "never the password: {err}");
}

/// A CA file that is not there stops the start before any connection: the error names the
/// parameter and the file, resolved against the data dir, and never the password.
#[tokio::test]
async fn a_missing_ca_file_is_a_clear_start_error_naming_sslrootcert_and_the_file() {
    let data_dir = tempfile::tempdir().unwrap();
    let url = StoreUrl::parse(
        "postgres://gate:hunter2@127.0.0.1:1/saves?sslmode=verify-full&sslrootcert=certs/ca.pem",
    )
    .unwrap();
    let err = Store::open(&url, data_dir.path()).await.unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, StoreError::InvalidUrl { .. }), "{text}");
    assert!(text.contains("`sslrootcert`"), "names the parameter: {text}");
    let file = data_dir.path().join("certs/ca.pem");
    assert!(text.contains(&file.display().to_string()), "names the file: {text}");
    assert!(text.contains("No such file"), "says why: {text}");
    assert!(!text.contains("hunter2"), "never the password: {text}");
}
