//! Fuzz target: the config and world TOML parsers, on text an operator (or whoever can write
//! the file) controls.
//!
//! The input is TOML-ish text, parsed as a server config and as a world map. Checked:
//! - nothing panics;
//! - every refusal is one line (the server prints it as its one line of output at start) and
//!   its JSON form carries that line as `message`;
//! - a config that parses passes its own checks again, with the same warnings each time.

#![no_main]
#![forbid(unsafe_code)]

use std::path::Path;

use gatehouse_server::config::{ConfigError, ServerConfig, parse_world};
use libfuzzer_sys::fuzz_target;

/// The refusal's text is one line, and its JSON says the same.
fn check_refusal(error: &ConfigError) {
    let text = error.to_string();
    assert!(!text.contains('\n') && !text.contains('\r'), "a refusal of more than one line: {text:?}");
    assert_eq!(error.to_json()["message"], text.as_str());
}

fuzz_target!(|text: &str| {
    match ServerConfig::parse(Path::new("fuzz/server.toml"), text) {
        Ok(config) => {
            assert!(config.check().is_ok(), "a parsed config fails its own checks");
            assert_eq!(config.exposure_warnings(), config.exposure_warnings());
            let _ = config.check_key_exposure();
            let _ = config.check_admin_exposure();
        }
        Err(error) => check_refusal(&error),
    }
    if let Err(error) = parse_world(Path::new("fuzz/world.toml"), text) {
        check_refusal(&error);
    }
});
