//! Where a configuration value came from, so an error blames the right place:
//! a line of the config file, an environment variable, a command-line flag, or the default.
//!
//! [`Sources`] maps dotted keys (`network.max_players`, `node[2].levels[0].stream_ms`) to their
//! source: the lines of the file are read once from the parsed document's spans, and each
//! override records itself on top. [`describe_serde`] turns serde's messages (`invalid type:
//! string "x", expected usize`) into plain words.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

/// Where one configuration value came from.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ValueSource {
    /// The config file, at `line` (1-based) when the key is written in it.
    File {
        /// The file.
        path: PathBuf,
        /// The key's line, 1-based.
        line: Option<usize>,
    },
    /// An environment variable, e.g. `GATEHOUSE_BIND`.
    Env {
        /// The variable's name.
        var: String,
    },
    /// A command-line flag, e.g. `--bind`.
    Flag {
        /// The flag, with its dashes.
        flag: String,
    },
    /// Nobody set it: the built-in default, since `path` does not name the key.
    Default {
        /// The config file that was read.
        path: PathBuf,
    },
}

impl fmt::Display for ValueSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ValueSource::File { path, line: Some(line) } => write!(f, "{}:{line}", path.display()),
            ValueSource::File { path, line: None } => write!(f, "{}", path.display()),
            ValueSource::Env { var } => write!(f, "environment variable {var}"),
            ValueSource::Flag { flag } => write!(f, "flag {flag}"),
            ValueSource::Default { path } => {
                write!(f, "the default (not set in {})", path.display())
            }
        }
    }
}

/// How a secret key's value is kept out of errors and `config show`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Secrecy {
    /// Never shown: `config show` prints `<redacted>`, an error never quotes it.
    Hidden,
    /// A URL that may carry a password: shown with the password replaced by `***`.
    Redacted,
}

/// The keys of `config/server.toml` that hold secrets, declared once for the errors and
/// `config show` (docs/operations.md, "Configuration"). Every other key's value is quoted back
/// in an error about it.
pub const SECRET_KEYS: &[(&str, Secrecy)] = &[
    ("auth.token_key", Secrecy::Hidden),
    ("admin.token", Secrecy::Hidden),
    ("fleet.ticket_key", Secrecy::Hidden),
    ("store.url", Secrecy::Redacted),
];

/// How `key`'s value is kept secret, if it is one of [`SECRET_KEYS`].
pub fn secrecy(key: &str) -> Option<Secrecy> {
    SECRET_KEYS.iter().find(|(secret, _)| *secret == key).map(|(_, secrecy)| *secrecy)
}

/// The source of every key of one config file, with the overrides applied after it. Its
/// `Debug` shows no value (a config file holds keys and passwords).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Sources {
    file: PathBuf,
    /// The line of each key written in the file (tables and array items included).
    lines: BTreeMap<String, usize>,
    /// Keys set after the file was read: environment variables and flags.
    overrides: BTreeMap<String, ValueSource>,
    /// The text of each scalar value written in the file, as written (for "found").
    values: BTreeMap<String, String>,
}

impl Sources {
    /// The lines of every key in `text`, read from `path`. Text that does not parse gives no
    /// lines (the parse error reports itself).
    pub fn of_file(path: &Path, text: &str) -> Sources {
        let mut found = Found { text, starts: line_starts(text), ..Found::default() };
        if let Ok(document) = toml::de::DeTable::parse(text) {
            collect_lines(document.get_ref(), "", &mut found);
        }
        Sources {
            file: path.to_owned(),
            lines: found.lines,
            overrides: BTreeMap::new(),
            values: found.values,
        }
    }

    /// The config file these sources are about.
    pub fn file(&self) -> &Path {
        &self.file
    }

    /// Records that `key` was set by `source` after the file was read.
    pub fn set(&mut self, key: &str, source: ValueSource) {
        self.overrides.insert(key.to_owned(), source);
    }

    /// Where `key`'s value came from.
    pub fn of(&self, key: &str) -> ValueSource {
        if let Some(source) = self.overrides.get(key) {
            return source.clone();
        }
        match self.lines.get(key) {
            Some(&line) => ValueSource::File { path: self.file.clone(), line: Some(line) },
            None => ValueSource::Default { path: self.file.clone() },
        }
    }

    /// Where the value at `key` came from, `key` being inside a key's value (a list's entry
    /// `fleet.servers[1]`, a table's `fleet.allocator_labels.agones.dev/fleet`): the variable or
    /// flag that set it or the key holding it, else its own line in the file, else the line of
    /// the nearest key holding it, else the default.
    pub fn of_nested(&self, key: &str) -> ValueSource {
        let holders: Vec<&str> = key
            .char_indices()
            .filter(|&(_, c)| c == '.' || c == '[')
            .map(|(i, _)| &key[..i])
            .chain(std::iter::once(key))
            .collect();
        if let Some(source) = holders.iter().rev().find_map(|k| self.overrides.get(*k)) {
            return source.clone();
        }
        match holders.iter().rev().find_map(|k| self.lines.get(*k)) {
            Some(&line) => ValueSource::File { path: self.file.clone(), line: Some(line) },
            None => ValueSource::Default { path: self.file.clone() },
        }
    }

    /// Records that `key` was set to `written` by `source` after the file was read (an
    /// environment variable's value, quoted back in errors unless a secret).
    pub(super) fn set_written(&mut self, key: &str, source: ValueSource, written: &str) {
        self.overrides.insert(key.to_owned(), source);
        self.values.insert(key.to_owned(), written.to_owned());
    }

    /// Whether `key` was set after the file was read (by a variable or a flag).
    pub fn is_overridden(&self, key: &str) -> bool {
        self.overrides.contains_key(key)
    }

    /// Whether `key` holds a secret ([`SECRET_KEYS`]): never quoted back in full nor shown.
    pub fn is_secret(&self, key: &str) -> bool {
        secrecy(key).is_some()
    }

    /// The line of `key` in the file, if it is written there.
    pub fn line(&self, key: &str) -> Option<usize> {
        self.lines.get(key).copied()
    }

    /// The value of `key` as the file (or the variable that set it) writes it, if it is a
    /// scalar written there: a hidden secret ([`SECRET_KEYS`]) never, a URL that may carry a
    /// password with the password redacted.
    pub fn written(&self, key: &str) -> Option<String> {
        let value = self.values.get(key)?;
        match secrecy(key) {
            None => Some(value.clone()),
            Some(Secrecy::Hidden) => None,
            Some(Secrecy::Redacted) => Some(super::redact(value)),
        }
    }
}

impl fmt::Debug for Sources {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sources")
            .field("file", &self.file)
            .field("keys", &self.lines.len())
            .field("overrides", &self.overrides)
            .finish_non_exhaustive()
    }
}

/// What a walk of the document collects.
#[derive(Default)]
struct Found<'t> {
    text: &'t str,
    starts: Vec<usize>,
    lines: BTreeMap<String, usize>,
    values: BTreeMap<String, String>,
}

/// Byte offsets at which each line starts.
fn line_starts(text: &str) -> Vec<usize> {
    std::iter::once(0).chain(text.match_indices('\n').map(|(i, _)| i + 1)).collect()
}

/// The 1-based line holding byte `offset`.
pub(super) fn line_of(text: &str, offset: usize) -> usize {
    text.get(..offset).map_or(1, |before| before.matches('\n').count() + 1)
}

fn collect_lines(table: &toml::de::DeTable<'_>, prefix: &str, found: &mut Found<'_>) {
    for (key, value) in table {
        let name = if prefix.is_empty() {
            key.get_ref().to_string()
        } else {
            format!("{prefix}.{}", key.get_ref())
        };
        collect_value(value, name, key.span().start, found);
    }
}

fn collect_value(
    value: &toml::Spanned<toml::de::DeValue<'_>>,
    name: String,
    at: usize,
    found: &mut Found<'_>,
) {
    let line = found.starts.partition_point(|&start| start <= at);
    match value.get_ref() {
        toml::de::DeValue::Table(table) => collect_lines(table, &name, found),
        toml::de::DeValue::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                collect_value(item, format!("{name}[{i}]"), item.span().start, found);
            }
        }
        _ => {
            if let Some(raw) = found.text.get(value.span()) {
                found.values.insert(name.clone(), raw.trim().to_owned());
            }
        }
    }
    found.lines.entry(name).or_insert(line);
}

/// Splits one of serde's messages into what was expected and what was found, in plain words:
/// `invalid type: string "x", expected usize` gives `("a whole number", "the string \"x\"")`.
/// A message of another shape (a custom check's own words) comes back whole as `expected`,
/// with nothing found.
pub(super) fn describe_serde(message: &str) -> (String, String) {
    let message = message.trim();
    for prefix in ["invalid type: ", "invalid value: ", "invalid length "] {
        if let Some(rest) = message.strip_prefix(prefix)
            && let Some((found, expected)) = rest.rsplit_once(", expected ")
        {
            return (plain_expected(expected), plain_found(found));
        }
    }
    if let Some(rest) = message.strip_prefix("unknown field ") {
        let (field, expected) = rest.split_once(", expected ").unwrap_or((rest, ""));
        let expected = match expected.strip_prefix("one of ") {
            Some(list) => format!("one of the keys {list}"),
            None if expected.is_empty() => "no such key".to_owned(),
            None => format!("the key {expected}"),
        };
        return (expected, format!("the unknown key {field}"));
    }
    if let Some(rest) = message.strip_prefix("unknown variant ")
        && let Some((variant, expected)) = rest.split_once(", expected ")
    {
        return (plain_expected(expected), variant.to_owned());
    }
    if let Some(field) = message.strip_prefix("missing field ") {
        return (format!("the key {field}"), "nothing".to_owned());
    }
    // Messages of std's parsers, as serde passes them on.
    if message == "invalid socket address syntax" {
        return ("an address such as 0.0.0.0:7777 or 127.0.0.1:0".to_owned(), String::new());
    }
    (message.to_owned(), String::new())
}

/// serde's names for types, as an operator would say them.
fn plain_expected(expected: &str) -> String {
    let expected = expected.trim();
    let word = match expected {
        "usize" | "u64" | "u32" | "u16" | "u8" => "a whole number (0 or more)",
        "isize" | "i64" | "i32" | "i16" | "i8" => "a whole number",
        "f64" | "f32" => "a number",
        "a boolean" | "bool" => "true or false",
        "a string" | "string" => "a string",
        _ if expected.starts_with("struct ") || expected == "a map" => "a table",
        _ if expected.starts_with("a sequence") => "a list",
        _ if expected.starts_with("one of ") => return expected.replace('`', "\""),
        _ => return expected.to_owned(),
    };
    word.to_owned()
}

/// serde's description of what it found, e.g. `string "x"` → `the string "x"`.
fn plain_found(found: &str) -> String {
    let found = found.trim();
    for (kind, plain) in [
        ("string ", "the string "),
        ("integer ", "the number "),
        ("floating point ", "the number "),
        ("boolean ", ""),
    ] {
        if let Some(value) = found.strip_prefix(kind) {
            // serde writes a number too large for 64 bits as "`N` as i128".
            let value = value.trim_end_matches(" as i128").trim_end_matches(" as u128");
            let value = value.trim_matches('`');
            return format!("{plain}{value}");
        }
    }
    match found {
        "map" => "a table".to_owned(),
        "sequence" => "a list".to_owned(),
        other => other.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_of_a_file_knows_its_line() {
        let text = "log_format = \"json\"\n\n[network]\nmax_players = 8\n\n[[node]]\nid = \"a\"\nlevels = [\n  { name = \"x\", stream_ms = 5 },\n]\n";
        let sources = Sources::of_file(Path::new("s.toml"), text);
        assert_eq!(sources.line("log_format"), Some(1));
        assert_eq!(sources.line("network.max_players"), Some(4));
        assert_eq!(sources.line("node[0].id"), Some(7));
        assert_eq!(sources.line("node[0].levels[0].stream_ms"), Some(9));
        assert_eq!(sources.line("network.idle_timeout_ms"), None);
    }

    #[test]
    fn an_override_is_the_source_and_an_unset_key_is_the_default() {
        let mut sources = Sources::of_file(Path::new("s.toml"), "[network]\nbind = \"x\"\n");
        assert_eq!(
            sources.of("network.bind"),
            ValueSource::File { path: "s.toml".into(), line: Some(2) }
        );
        sources.set("network.bind", ValueSource::Env { var: "GATEHOUSE_BIND".into() });
        assert_eq!(sources.of("network.bind").to_string(), "environment variable GATEHOUSE_BIND");
        assert_eq!(
            sources.of("network.max_players").to_string(),
            "the default (not set in s.toml)"
        );
    }

    #[test]
    fn secrets_are_never_quoted_back_nor_shown_in_debug() {
        let text = "[auth]\ntoken_key = \"super-secret-1\"\n[store]\nurl = \"postgres://u:pw-2@h/db\"\n[network]\nbind = \"x\"\n";
        let sources = Sources::of_file(Path::new("s.toml"), text);
        assert_eq!(sources.written("auth.token_key"), None);
        assert_eq!(sources.written("store.url").as_deref(), Some("\"postgres://u:***@h/db\""));
        assert_eq!(sources.written("network.bind").as_deref(), Some("\"x\""));
        let debug = format!("{sources:?}");
        assert!(!debug.contains("super-secret") && !debug.contains("pw-2"), "{debug}");
    }

    #[test]
    fn serde_messages_become_plain_words() {
        assert_eq!(
            describe_serde("invalid type: string \"many\", expected usize"),
            ("a whole number (0 or more)".to_owned(), "the string \"many\"".to_owned())
        );
        assert_eq!(
            describe_serde("invalid type: integer `5`, expected a string"),
            ("a string".to_owned(), "the number 5".to_owned())
        );
        let (expected, found) =
            describe_serde("unknown field `idle_timeout`, expected one of `bind`, `max_players`");
        assert!(
            expected.contains("`bind`") && found.contains("idle_timeout"),
            "{expected} / {found}"
        );
        let (expected, found) =
            describe_serde("unknown variant `yaml`, expected `human` or `json`");
        assert!(expected.contains("human") && found.contains("yaml"), "{expected} / {found}");
        assert_eq!(describe_serde("must be odd"), ("must be odd".to_owned(), String::new()));
    }
}
