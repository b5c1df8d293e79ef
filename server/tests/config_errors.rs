//! Config errors as an operator meets them at start: one line naming the
//! dotted key, where its value came from (the file and line, an environment variable or a flag),
//! what was expected and what was found; one JSON object when the logs are JSON.

// Test helpers: a failed expectation is a failed test.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::path::Path;
use std::process::{Command, Output};

use gatehouse_tests::process::shipped_config;

const SERVER: &str = env!("CARGO_BIN_EXE_gatehouse-server");

/// The binary with `config` as its config file, a clean environment plus `envs`, and `args`;
/// run to its end (a refused config stops it before it binds anything).
fn refused(config: &Path, args: &[&str], envs: &[(&str, &str)]) -> String {
    let out: Output = Command::new(SERVER)
        .env_clear()
        .envs(envs.iter().copied())
        .arg("--config")
        .arg(config)
        .args(args)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "refused at start");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(stderr.trim_end().lines().count(), 1, "one line: {stderr}");
    stderr
}

#[test]
fn a_bad_value_in_the_file_is_blamed_on_its_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("server.toml");
    std::fs::write(&config, "[network]\nbind = \"127.0.0.1:0\"\nmax_players = -3\n").unwrap();
    let err = refused(&config, &[], &[]);
    let at = format!("{}:3", config.display());
    assert!(err.contains("network.max_players") && err.contains(&at), "{err}");
    assert!(err.contains("expected a whole number (0 or more), found the number -3"), "{err}");
}

#[test]
fn a_bad_value_in_an_environment_variable_is_blamed_on_the_variable() {
    let err = refused(&shipped_config(), &[], &[("GATEHOUSE_BIND", "xyz")]);
    assert_eq!(
        err.trim_end(),
        "error: invalid network.bind from environment variable GATEHOUSE_BIND: expected an \
         address such as 0.0.0.0:7777 or 127.0.0.1:0, found \"xyz\""
    );
}

#[test]
fn a_bad_value_in_a_flag_is_blamed_on_the_flag() {
    let err = refused(&shipped_config(), &["--bind", "xyz"], &[]);
    assert!(err.contains("invalid network.bind from flag --bind"), "{err}");
    let err = refused(&shipped_config(), &["--log-format", "yaml"], &[]);
    assert!(err.contains("invalid log_format from flag --log-format: expected human or json"));
}

#[test]
fn an_exposed_admin_bind_from_a_flag_is_blamed_on_the_flag_not_the_file() {
    let args = ["--bind", "127.0.0.1:0", "--admin-bind", "0.0.0.0:0"];
    let err = refused(&shipped_config(), &args, &[]);
    assert!(err.contains("invalid admin.bind from flag --admin-bind"), "{err}");
    assert!(!err.contains("server.toml"), "{err}");
}

#[test]
fn a_config_error_is_one_json_object_when_the_logs_are_json() {
    let args = ["--log-format", "json"];
    let err = refused(&shipped_config(), &args, &[("GATEHOUSE_TOKEN_KEY", "short")]);
    let json: serde_json::Value = serde_json::from_str(err.trim_end()).expect("a JSON line");
    assert_eq!(json["level"], "ERROR");
    assert_eq!(json["key"], "auth.token_key");
    assert_eq!(json["origin_kind"], "env");
    assert_eq!(json["origin_var"], "GATEHOUSE_TOKEN_KEY");
    assert_eq!(json["expected"], "a key of at least 16 bytes");
    assert_eq!(json["found"], "5 bytes");
}

/// An orchestrator this build lacks stops the server at start, naming the key,
/// the flag that chose it and the feature to build with; an unknown one names the choices.
#[cfg(not(feature = "agones"))]
#[test]
fn agones_chosen_without_the_feature_is_refused_naming_the_flag_and_the_feature() {
    let err = refused(&shipped_config(), &["--orchestrator", "agones"], &[]);
    assert!(err.contains("invalid fleet.orchestrator from flag --orchestrator"), "{err}");
    assert!(err.contains("--features agones"), "{err}");
    let err = refused(&shipped_config(), &[], &[("GATEHOUSE_ORCHESTRATOR", "kubernetes")]);
    assert!(err.contains("environment variable GATEHOUSE_ORCHESTRATOR"), "{err}");
    assert!(err.contains("none or agones") && err.contains("\"kubernetes\""), "{err}");
}

/// The peer link's bounds (docs/spec/travel.md V14, V16) are checked at start like their
/// neighbours: one out of range is blamed on its key and where it came from; a resolve timeout
/// that cannot hold one ask names the peer timeout and where that came from.
#[test]
fn a_peer_link_bound_out_of_range_is_blamed_on_its_key_and_origin() {
    let env = [("GATEHOUSE_FLEET__PEER_IDLE_TIMEOUT_MS", "500")];
    let err = refused(&shipped_config(), &[], &env);
    assert_eq!(
        err.trim_end(),
        "error: invalid fleet.peer_idle_timeout_ms from environment variable \
         GATEHOUSE_FLEET__PEER_IDLE_TIMEOUT_MS: expected between 2000 and 60000 ms, found 500 ms"
    );
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("server.toml");
    std::fs::write(&config, "[fleet]\npeer_timeout_ms = 3000\nresolve_timeout_ms = 2000\n")
        .unwrap();
    let err = refused(&config, &[], &[]);
    let at = |line| format!("{}:{line}", config.display());
    assert!(err.contains(&format!("invalid fleet.resolve_timeout_ms from {}", at(3))), "{err}");
    assert!(err.contains(&format!("at least fleet.peer_timeout_ms (3000 ms, from {})", at(2))));
    assert!(err.contains("found 2000 ms"), "{err}");
}

#[test]
fn a_world_file_that_cannot_be_read_is_blamed_on_where_it_was_named() {
    let err = refused(&shipped_config(), &["--world", "/nonexistent/world.toml"], &[]);
    assert!(err.contains("invalid game.world from flag --world"), "{err}");
    assert!(err.contains("expected a readable world file, found /nonexistent/world.toml"), "{err}");
    let env = [("GATEHOUSE_WORLD", "/nonexistent/world.toml")];
    let err = refused(&shipped_config(), &[], &env);
    assert!(err.contains("from environment variable GATEHOUSE_WORLD"), "{err}");
}

/// The binary with `config` as its config file, a clean environment plus `envs`, and `args`;
/// run to its end.
fn run(config: &Path, args: &[&str], envs: &[(&str, &str)]) -> Output {
    Command::new(SERVER)
        .env_clear()
        .envs(envs.iter().copied())
        .args(args)
        .arg("--config")
        .arg(config)
        .output()
        .unwrap()
}

#[test]
fn config_check_accepts_the_shipped_config_without_serving() {
    let out = run(&shipped_config(), &["config", "check"], &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout} {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    assert!(stdout.starts_with("config OK: ") && stdout.contains("world.toml"), "{stdout}");
}

#[test]
fn config_check_exits_nonzero_on_a_bad_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("server.toml");
    std::fs::write(&file, "[network]\nmax_players = \"many\"\n").unwrap();
    let err = refused(&file, &["config", "check"], &[]);
    assert!(err.contains("invalid network.max_players from"), "{err}");
    assert!(err.contains("server.toml:2"), "{err}");
    // What only the start refuses, `config check` refuses too: a missing world file, a
    // certificate that cannot be read, the development key beyond loopback, an unknown variable.
    std::fs::write(&file, "[game]\nworld = \"missing.toml\"\n").unwrap();
    let err = refused(&file, &["config", "check"], &[]);
    assert!(err.contains("invalid game.world from"), "{err}");
    let shipped = shipped_config();
    let tls = [
        ("GATEHOUSE_TLS__CERTIFICATE", "/nonexistent/cert.pem"),
        ("GATEHOUSE_TLS__PRIVATE_KEY", "/nonexistent/key.pem"),
    ];
    let err = refused(&shipped, &["config", "check"], &tls);
    assert!(err.contains("/nonexistent/cert.pem"), "{err}");
    let err =
        refused(&shipped, &["config", "check"], &[("GATEHOUSE_NETWORK__BIND", "0.0.0.0:7777")]);
    assert!(err.contains("invalid auth.token_key"), "{err}");
    let err = refused(&shipped, &["config", "check"], &[("GATEHOUSE_NETWORK__MAX_PLAYERZ", "9")]);
    assert!(err.contains("environment variable GATEHOUSE_NETWORK__MAX_PLAYERZ"), "{err}");
}

#[test]
fn config_show_redacts_secrets() {
    let envs = [
        ("GATEHOUSE_TOKEN_KEY", "token-secret-key-0123456789"),
        ("GATEHOUSE_ADMIN__TOKEN", "admin-secret-token-1234"),
        ("GATEHOUSE_STORE_URL", "postgres://gate:hunter2@127.0.0.1/saves"),
        ("GATEHOUSE_NETWORK__IDLE_TIMEOUT_MS", "20s"),
        ("GATEHOUSE_TICKET_KEY", "ticket-secret-key-of-32-bytes-0123"),
    ];
    let out = run(&shipped_config(), &["config", "show", "--bind", "127.0.0.1:9"], &envs);
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{shown} {}", String::from_utf8_lossy(&out.stderr));
    for secret in ["token-secret", "admin-secret", "hunter2", "ticket-secret"] {
        assert!(!shown.contains(secret), "{secret} in {shown}");
    }
    let line = |key: &str| shown.lines().find(|l| l.starts_with(&format!("{key} ="))).unwrap();
    assert!(line("auth.token_key").ends_with("# env GATEHOUSE_TOKEN_KEY"), "{shown}");
    assert!(line("admin.token").contains("<redacted>"), "{shown}");
    assert!(line("fleet.ticket_key").contains("= \"<redacted>\""), "{shown}");
    assert!(line("fleet.ticket_key").ends_with("# env GATEHOUSE_TICKET_KEY"), "{shown}");
    assert!(line("store.url").contains("postgres://gate:***@127.0.0.1/saves"), "{shown}");
    assert!(line("network.idle_timeout_ms").contains("= 20000"), "{shown}");
    assert!(line("network.bind").ends_with("# flag --bind"), "{shown}");
    assert!(line("network.max_players").contains("server.toml:"), "{shown}");
    assert!(line("tls.certificate").ends_with("# default"), "{shown}");
}

#[test]
fn a_legacy_variable_and_its_new_name_both_set_are_refused_naming_both() {
    let envs = [("GATEHOUSE_BIND", "127.0.0.1:0"), ("GATEHOUSE_NETWORK__BIND", "127.0.0.1:1")];
    let err = refused(&shipped_config(), &["config", "check"], &envs);
    assert!(err.contains("GATEHOUSE_BIND") && err.contains("GATEHOUSE_NETWORK__BIND"), "{err}");
}

/// The binary's `config check` with `envs` over the shipped config, its data dir in `data`.
fn check(data: &Path, envs: &[(&str, &str)]) -> Output {
    let data = data.to_str().unwrap();
    let mut all = vec![("GATEHOUSE_DATA_DIR", data)];
    all.extend_from_slice(envs);
    run(&shipped_config(), &["config", "check"], &all)
}

/// The one error line of a `config check` that must fail.
fn check_refused(data: &Path, envs: &[(&str, &str)]) -> String {
    let out = check(data, envs);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "refused: {stderr}");
    assert!(out.stdout.is_empty(), "no OK line: {}", String::from_utf8_lossy(&out.stdout));
    assert_eq!(stderr.trim_end().lines().count(), 1, "one line: {stderr}");
    stderr
}

/// The start reads a PostgreSQL URL's CA file before it connects: `config check` reads it
/// too, and refuses one that is missing or holds no PEM certificate, never showing the
/// password.
#[test]
fn config_check_refuses_a_missing_store_ca_file() {
    let dir = tempfile::tempdir().unwrap();
    let url = "postgres://gate:hunter2@127.0.0.1/saves?sslmode=verify-full&sslrootcert=/nope.pem";
    let err = check_refused(dir.path(), &[("GATEHOUSE_STORE_URL", url)]);
    assert!(err.contains("invalid store.url from environment variable GATEHOUSE_STORE_URL"));
    assert!(err.contains("`sslrootcert`") && err.contains("/nope.pem"), "{err}");
    assert!(!err.contains("hunter2"), "{err}");
    let not_pem = dir.path().join("ca.pem");
    std::fs::write(&not_pem, "not a certificate\n").unwrap();
    let url = format!(
        "postgres://gate:hunter2@127.0.0.1/saves?sslmode=verify-full&sslrootcert={}",
        not_pem.display()
    );
    let err = check_refused(dir.path(), &[("GATEHOUSE_STORE__URL", &url)]);
    assert!(err.contains("GATEHOUSE_STORE__URL") && err.contains("expected PEM"), "{err}");
    assert!(!err.contains("hunter2"), "{err}");
}

/// A certificate and a private key, each PEM, from two different key pairs.
fn certificate_and_key(dir: &Path, matching: bool) -> (String, String) {
    let first = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let second = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let key = if matching { &first.signing_key } else { &second.signing_key };
    let (cert_path, key_path) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&cert_path, first.cert.pem()).unwrap();
    std::fs::write(&key_path, key.serialize_pem()).unwrap();
    (cert_path.display().to_string(), key_path.display().to_string())
}

/// The start builds the QUIC endpoint's TLS configuration from the certificate and its key,
/// which refuses a key of another pair: `config check` builds it too.
#[test]
fn config_check_refuses_a_private_key_that_does_not_match_its_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = certificate_and_key(dir.path(), false);
    let tls = [("GATEHOUSE_TLS__CERTIFICATE", cert.as_str()), ("GATEHOUSE_TLS__PRIVATE_KEY", &key)];
    let err = check_refused(dir.path(), &tls);
    assert!(
        err.contains(
            "invalid tls.private_key from environment variable GATEHOUSE_TLS__PRIVATE_KEY"
        ),
        "{err}"
    );
    assert!(err.contains(&format!("the private key of tls.certificate {cert}")), "{err}");
    assert!(err.contains("environment variable GATEHOUSE_TLS__CERTIFICATE"), "{err}");
    // The pair's own key passes.
    let (cert, key) = certificate_and_key(dir.path(), true);
    let tls = [("GATEHOUSE_TLS__CERTIFICATE", cert.as_str()), ("GATEHOUSE_TLS__PRIVATE_KEY", &key)];
    let out = check(dir.path(), &tls);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

/// The start creates the data dir: `config check` refuses one that cannot be created, naming
/// where it came from, and creates nothing.
#[test]
fn config_check_refuses_a_data_dir_that_cannot_be_created() {
    let err = check_refused(Path::new("/proc/nope"), &[]);
    assert!(err.contains("invalid data_dir from environment variable GATEHOUSE_DATA_DIR"), "{err}");
    assert!(err.contains("would be created") && err.contains("/proc is not writable"), "{err}");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, b"x").unwrap();
    let err = check_refused(&file.join("data"), &[]);
    assert!(err.contains("is not a directory"), "{err}");
    // A data dir that does not exist yet under a writable one passes, and is not created.
    let fresh = dir.path().join("new/data");
    let out = check(&fresh, &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!dir.path().join("new").exists(), "config check creates nothing");
}

/// A TLS file that cannot be read names its key and where its value came from, at
/// `config check` and at the start.
#[test]
fn a_tls_file_error_names_its_key_and_where_it_came_from() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, _) = certificate_and_key(dir.path(), true);
    let tls =
        [("GATEHOUSE_TLS_CERTIFICATE", cert.as_str()), ("GATEHOUSE_TLS_PRIVATE_KEY", "/nope")];
    let err = check_refused(dir.path(), &tls);
    assert!(
        err.contains(
            "invalid tls.private_key from environment variable GATEHOUSE_TLS_PRIVATE_KEY: \
                      expected a readable private key file (DER or PEM), found /nope: "
        ),
        "{err}"
    );
    let data = dir.path().to_str().unwrap();
    let envs = [("GATEHOUSE_DATA_DIR", data), ("GATEHOUSE_TLS_PRIVATE_KEY", "/nope")];
    let mut envs = envs.to_vec();
    envs.push(("GATEHOUSE_TLS_CERTIFICATE", &cert));
    // The start logs a few lines before it reads the certificate; its error is the last.
    let args = ["--bind", "127.0.0.1:0", "--admin-bind", "off"];
    let out = run(&shipped_config(), &args, &envs);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let err = stderr.trim_end().lines().last().unwrap_or_default();
    assert!(
        err.starts_with(
            "error: invalid tls.private_key from environment variable \
                         GATEHOUSE_TLS_PRIVATE_KEY: expected a readable private key file"
        ),
        "{stderr}"
    );
    let file = dir.path().join("server.toml");
    std::fs::write(&file, "[tls]\ncertificate = \"/nope.pem\"\nprivate_key = \"key.pem\"\n")
        .unwrap();
    let world = shipped_config().with_file_name("world.toml");
    let envs = [("GATEHOUSE_DATA_DIR", data), ("GATEHOUSE_WORLD", world.to_str().unwrap())];
    let err = refused(&file, &["config", "check"], &envs);
    let at = format!("invalid tls.certificate from {}:2", file.display());
    assert!(err.contains(&at) && err.contains("/nope.pem"), "{err}");
}

/// A `[[fleet.servers]]` entry the static directory cannot offer is refused by `config check`
/// naming its place in the list and its line in the file.
#[test]
fn config_check_refuses_a_bad_fleet_server_naming_its_place() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("server.toml");
    let world = shipped_config().with_file_name("world.toml");
    let entry = |id: &str, address: &str| {
        format!(
            "[[fleet.servers]]\nid = \"{id}\"\naddress = \"{address}\"\nserver_name = \"{id}\"\n\
             nodes = [\"crypt\"]\n"
        )
    };
    let head = format!(
        "data_dir = \"{}\"\n[game]\nworld = \"{}\"\n[store]\nurl = \"postgres://gate:hunter2@127.0.0.1/saves\"\n\
         [fleet]\ndirectory = \"static\"\nticket_key = \"a-fleet-key-of-thirty-two-bytes-0\"\n",
        dir.path().display(),
        world.display()
    );
    let good = format!("{head}{}", entry("dungeon-1", "10.0.0.2:7777"));
    std::fs::write(&file, &good).unwrap();
    let out = run(&file, &["config", "check"], &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // The second entry (line 14, after the first's five lines) has no port.
    std::fs::write(&file, format!("{good}{}", entry("dungeon-2", "10.0.0.3"))).unwrap();
    let err = refused(&file, &["config", "check"], &[]);
    let at = format!("invalid fleet.servers[1] from {}:14: ", file.display());
    assert!(err.contains(&at), "{err}");
    assert!(err.contains("id \"dungeon-2\": address:") && err.contains("not host:port"), "{err}");
    assert!(!err.contains("hunter2"), "{err}");
}
