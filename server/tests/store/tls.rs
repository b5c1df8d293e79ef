//! The store over TLS, against a PostgreSQL server that accepts TCP clients only over TLS
//! (`.ci/postgres start DIR --tls`): `GATEHOUSE_TEST_POSTGRES_TLS_URL` names it (no `sslmode`;
//! each test adds its own) and `GATEHOUSE_TEST_POSTGRES_TLS_CA` is the CA file that signed its
//! certificate. Without both, these tests are reported as ignored, with the reason
//! (docs/testing.md, "PostgreSQL tests"; docs/operations.md, "PostgreSQL over TLS").

use std::path::{Path, PathBuf};

use gatehouse_server::store::{Store, StoreError, StoreUrl};
use sqlx::Connection as _;

use crate::backends::Backend;

/// The variable that names the TLS-only PostgreSQL server for the tests.
const TLS_URL_ENV: &str = "GATEHOUSE_TEST_POSTGRES_TLS_URL";
/// The variable that names the CA file of that server's certificate.
const TLS_CA_ENV: &str = "GATEHOUSE_TEST_POSTGRES_TLS_CA";

/// The TLS-only server's URL and its CA file.
///
/// # Panics
/// When either variable is unset (the tests are ignored then, unless run with `--ignored`).
fn tls_server() -> (String, PathBuf) {
    let get = |name: &str| {
        std::env::var(name).ok().filter(|v| !v.is_empty()).unwrap_or_else(|| {
            panic!(
                "set {TLS_URL_ENV} and {TLS_CA_ENV} to run the PostgreSQL TLS tests \
                 (docs/testing.md, \"PostgreSQL tests\")"
            )
        })
    };
    (get(TLS_URL_ENV), PathBuf::from(get(TLS_CA_ENV)))
}

/// `base` with `params` (`key=value&…`) added to its query.
fn with_params(base: &str, params: &str) -> String {
    let sep = if base.contains('?') { '&' } else { '?' };
    format!("{base}{sep}{params}")
}

/// Whether a connection to `url` is encrypted, as the server sees it.
async fn server_sees_tls(url: &str) -> bool {
    let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
    let ssl: bool = sqlx::query_scalar("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    conn.close().await.unwrap();
    ssl
}

/// The password in a URL's user info, if any.
fn password(url: &str) -> Option<String> {
    let (_, rest) = url.split_once("://")?;
    let (userinfo, _) = rest.rsplit_once('@')?;
    userinfo.split_once(':').map(|(_, password)| password.to_owned())
}

/// Asserts that `text` never shows the password of `url`.
fn assert_no_password(text: &str, url: &str) {
    if let Some(password) = password(url) {
        assert!(!text.contains(&password), "never the password: {text}");
    }
}

/// A self-signed CA certificate (PEM) that signed nothing the server holds.
fn unrelated_ca(dir: &Path) -> PathBuf {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params.distinguished_name.push(rcgen::DnType::CommonName, "a CA the server never used");
    let ca = params.self_signed(&key).unwrap();
    let path = dir.join("wrong-ca.pem");
    std::fs::write(&path, ca.pem()).unwrap();
    path
}

/// `sslmode=require`: encrypted, the certificate not checked (as libpq does without a CA
/// file); the whole store contract holds over it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(gatehouse_postgres_tls_tests),
    ignore = "PostgreSQL over TLS skipped: GATEHOUSE_TEST_POSTGRES_TLS_URL and GATEHOUSE_TEST_POSTGRES_TLS_CA are not set (docs/testing.md, \"PostgreSQL tests\")"
)]
async fn the_store_connects_with_sslmode_require() {
    let (base, _) = tls_server();
    let backend = Backend::postgres_at(with_params(&base, "sslmode=require")).await;
    crate::suite::every_field_round_trips(&backend).await;
    assert!(server_sees_tls(&backend.url_text()).await, "the server sees an encrypted session");
    backend.cleanup().await;
}

/// `sslmode=verify-full` with `sslrootcert`: the certificate must chain to the CA file and
/// name the host, by IP address (127.0.0.1) or by name (`localhost`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(gatehouse_postgres_tls_tests),
    ignore = "PostgreSQL over TLS skipped: GATEHOUSE_TEST_POSTGRES_TLS_URL and GATEHOUSE_TEST_POSTGRES_TLS_CA are not set (docs/testing.md, \"PostgreSQL tests\")"
)]
async fn the_store_verifies_the_server_with_verify_full_and_a_ca_file() {
    let (base, ca) = tls_server();
    let params = format!("sslmode=verify-full&sslrootcert={}", ca.display());
    let backend = Backend::postgres_at(with_params(&base, &params)).await;
    crate::suite::every_field_round_trips(&backend).await;
    assert!(server_sees_tls(&backend.url_text()).await, "the server sees an encrypted session");

    let by_name = backend.url_text().replacen("@127.0.0.1:", "@localhost:", 1);
    assert!(by_name.contains("@localhost:"), "the TLS test server is on 127.0.0.1: {base}");
    let store = Store::open(&StoreUrl::parse(&by_name).unwrap(), Path::new("unused"))
        .await
        .unwrap_or_else(|e| panic!("verify-full by host name: {e}"));
    store.close().await;
    backend.cleanup().await;
}

/// A relative `sslrootcert` is a file in the data dir, as a relative `sqlite:` path is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(gatehouse_postgres_tls_tests),
    ignore = "PostgreSQL over TLS skipped: GATEHOUSE_TEST_POSTGRES_TLS_URL and GATEHOUSE_TEST_POSTGRES_TLS_CA are not set (docs/testing.md, \"PostgreSQL tests\")"
)]
async fn a_relative_sslrootcert_is_read_from_the_data_dir() {
    let (base, ca) = tls_server();
    let data_dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(data_dir.path().join("certs")).unwrap();
    std::fs::copy(&ca, data_dir.path().join("certs/db-ca.pem")).unwrap();
    let backend = Backend::postgres_at(with_params(&base, "sslmode=require")).await;
    let relative = backend.url_text().replacen(
        "sslmode=require",
        "sslmode=verify-full&sslrootcert=certs/db-ca.pem",
        1,
    );
    let store = Store::open(&StoreUrl::parse(&relative).unwrap(), data_dir.path())
        .await
        .unwrap_or_else(|e| panic!("verify-full with certs/db-ca.pem in the data dir: {e}"));
    store.close().await;
    backend.cleanup().await;
}

/// A CA file that did not sign the server's certificate: the start fails, saying the
/// certificate is not trusted, naming the store (password redacted) and so its CA file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(gatehouse_postgres_tls_tests),
    ignore = "PostgreSQL over TLS skipped: GATEHOUSE_TEST_POSTGRES_TLS_URL and GATEHOUSE_TEST_POSTGRES_TLS_CA are not set (docs/testing.md, \"PostgreSQL tests\")"
)]
async fn verify_full_with_the_wrong_ca_is_refused_with_a_clear_error() {
    let (base, _) = tls_server();
    let dir = tempfile::tempdir().unwrap();
    let wrong = unrelated_ca(dir.path());
    let url = with_params(&base, &format!("sslmode=verify-full&sslrootcert={}", wrong.display()));
    let err = Store::open(&StoreUrl::parse(&url).unwrap(), Path::new("unused")).await.unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, StoreError::OpenTls { .. }), "{text}");
    assert!(text.contains("TLS failed"), "says TLS failed: {text}");
    assert!(text.contains("not signed by a trusted CA"), "says why: {text}");
    assert!(text.contains(&wrong.display().to_string()), "names the CA file: {text}");
    assert!(text.contains(":***@"), "names the url, password redacted: {text}");
    assert_no_password(&text, &url);
    assert_no_password(&format!("{err:?}"), &url);
}

/// The fixture itself: a client that does not ask for TLS is turned away, so the tests above
/// passing means they used TLS.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(gatehouse_postgres_tls_tests),
    ignore = "PostgreSQL over TLS skipped: GATEHOUSE_TEST_POSTGRES_TLS_URL and GATEHOUSE_TEST_POSTGRES_TLS_CA are not set (docs/testing.md, \"PostgreSQL tests\")"
)]
async fn a_plaintext_connection_is_refused_by_a_server_that_requires_tls() {
    let (base, _) = tls_server();
    let url = with_params(&base, "sslmode=disable");
    let err = Store::open(&StoreUrl::parse(&url).unwrap(), Path::new("unused")).await.unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, StoreError::Open { .. }), "{text}");
    assert!(text.contains("pg_hba.conf rejects connection"), "the server refused it: {text}");
    assert!(text.contains("no encryption"), "because it was not encrypted: {text}");
    assert_no_password(&text, &url);
}

/// `sslmode=require` against a server without TLS: a clear start error, never a silent
/// fall-back to plaintext. The server is a stand-in on 127.0.0.1 that answers PostgreSQL's TLS
/// request with "no" (`N`), as a server with `ssl = off` does, so no real server is needed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sslmode_require_against_a_server_without_tls_is_a_clear_error() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let no_tls = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        // SSLRequest: length 8, code 80877103.
        let mut request = [0u8; 8];
        socket.read_exact(&mut request).await.unwrap();
        assert_eq!(request, [0, 0, 0, 8, 4, 210, 22, 47], "expected PostgreSQL's SSLRequest");
        socket.write_all(b"N").await.unwrap();
        // Keep the socket open until the client gives up.
        let _ = socket.read(&mut [0u8; 1]).await;
    });
    let url = format!("postgres://gate:hunter2@127.0.0.1:{port}/saves?sslmode=require");
    let err = Store::open(&StoreUrl::parse(&url).unwrap(), Path::new("unused")).await.unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, StoreError::OpenTls { .. }), "{text}");
    assert!(text.contains("does not offer TLS"), "says why: {text}");
    assert!(text.contains("postgres://gate:***@127.0.0.1"), "names the url: {text}");
    assert_no_password(&text, &url);
    tokio::time::timeout(std::time::Duration::from_secs(10), no_tls).await.unwrap().unwrap();
}
