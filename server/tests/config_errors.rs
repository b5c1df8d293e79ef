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
    ];
    let out = run(&shipped_config(), &["config", "show", "--bind", "127.0.0.1:9"], &envs);
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{shown} {}", String::from_utf8_lossy(&out.stderr));
    for secret in ["token-secret", "admin-secret", "hunter2"] {
        assert!(!shown.contains(secret), "{secret} in {shown}");
    }
    let line = |key: &str| shown.lines().find(|l| l.starts_with(&format!("{key} ="))).unwrap();
    assert!(line("auth.token_key").ends_with("# env GATEHOUSE_TOKEN_KEY"), "{shown}");
    assert!(line("admin.token").contains("<redacted>"), "{shown}");
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
