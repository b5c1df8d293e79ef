//! The log lines of gatehouse's binaries (`gatehouse-server`, `gatehouse-sim`): human-readable
//! lines, or one flat JSON object per line that a log aggregator indexes without a parsing rule
//! (docs/operations.md, "Logs").
//!
//! Every JSON line has one shape: `timestamp` (RFC 3339, UTC), `level`, `target` and `message`,
//! then the event's fields, then the fields of the spans it happened in (innermost first), all at
//! the top level. Numbers stay numbers (`"connection":3`), text stays text (`"player":"sim-0001"`).
//! A key is written once: an event's field wins over a span's of the same name, an inner span's
//! over an outer's, and the four fixed keys over anything else.
//!
//! tracing-subscriber's own JSON format can flatten an event's fields but only nests a span's
//! (`"span":{...}`, `"spans":[...]`), so [`FlatJson`] formats the event itself; the spans' fields
//! are recorded by the stock [`JsonFields`], which keeps their types.
//!
//! This crate only formats and installs; which fields a line carries is its caller's business.

#![forbid(unsafe_code)]

use std::collections::HashSet;
use std::fmt;

use serde_json::Value;
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::{JsonFields, Writer};
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, FormattedFields};
use tracing_subscriber::registry::LookupSpan;

/// How a binary writes its logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    /// One human-readable line per event (tracing-subscriber's default format).
    #[default]
    Human,
    /// One flat JSON object per line ([`FlatJson`]).
    Json,
}

impl LogFormat {
    /// `human` or `json` (any case); anything else is `None`.
    pub fn parse(text: &str) -> Option<LogFormat> {
        if text.eq_ignore_ascii_case("json") {
            Some(LogFormat::Json)
        } else if text.eq_ignore_ascii_case("human") {
            Some(LogFormat::Human)
        } else {
            None
        }
    }
}

/// Installs the process's tracing subscriber: logs on stderr in `format`, filtered by `RUST_LOG`
/// or else at `default_level` (`info`, `warn`, …). Call once, first thing; a second call
/// changes nothing.
pub fn install(format: LogFormat, default_level: &str) {
    use std::io::IsTerminal as _;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_level));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    // Only a second subscriber fails to install, and the first one stays.
    let _ = match format {
        LogFormat::Human => builder.with_ansi(std::io::stderr().is_terminal()).try_init(),
        LogFormat::Json => builder
            .with_ansi(false)
            .fmt_fields(JsonFields::new())
            .event_format(FlatJson::new())
            .try_init(),
    };
}

/// The JSON event format: one flat object per line (the crate documentation), its timestamp
/// from `T` (the system clock unless a test fixes it).
#[derive(Debug, Clone)]
pub struct FlatJson<T = SystemTime> {
    timer: T,
}

impl FlatJson {
    /// The format, its timestamps from the system clock.
    pub fn new() -> FlatJson {
        FlatJson { timer: SystemTime }
    }
}

impl Default for FlatJson {
    fn default() -> FlatJson {
        FlatJson::new()
    }
}

impl<T: FormatTime> FlatJson<T> {
    /// The format with its timestamps from `timer` instead of the system clock.
    pub fn with_timer<U: FormatTime>(self, timer: U) -> FlatJson<U> {
        FlatJson { timer }
    }
}

impl<S, N, T> FormatEvent<S, N> for FlatJson<T>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
    T: FormatTime,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let metadata = event.metadata();
        let mut timestamp = String::new();
        self.timer.format_time(&mut Writer::new(&mut timestamp))?;
        let mut fields = Fields::default();
        event.record(&mut fields);
        let message = fields.message.take().unwrap_or_default();
        // The spans' fields, innermost first: an inner span's value of a key wins.
        let mut spans = Vec::new();
        if let Some(scope) = ctx.event_scope() {
            for span in scope {
                let extensions = span.extensions();
                let Some(recorded) = extensions.get::<FormattedFields<N>>() else { continue };
                if let Ok(Value::Object(map)) = serde_json::from_str::<Value>(recorded) {
                    spans.extend(map);
                }
            }
        }
        let line = json_line(
            &timestamp,
            metadata.level().as_str(),
            // A `log` record's own target, not the bridge's `log`.
            fields.log_target.as_deref().unwrap_or(metadata.target()),
            &message,
            fields.values.into_iter().chain(spans),
        );
        writeln!(writer, "{line}")
    }
}

/// One log line in the shape of every other ([`FlatJson`]), for what is printed without
/// tracing (an error before the subscriber is installed), its timestamp read now.
pub fn line_now(
    level: tracing::Level,
    target: &str,
    message: &str,
    fields: impl IntoIterator<Item = (String, Value)>,
) -> String {
    let mut timestamp = String::new();
    // The system clock's formatting does not fail; an empty timestamp if it ever did.
    let _ = SystemTime.format_time(&mut Writer::new(&mut timestamp));
    json_line(&timestamp, level.as_str(), target, message, fields)
}

/// The JSON object of one line: the four fixed keys, then `fields`, each key once (the first
/// value of a key is kept).
fn json_line(
    timestamp: &str,
    level: &str,
    target: &str,
    message: &str,
    fields: impl IntoIterator<Item = (String, Value)>,
) -> String {
    let fixed =
        [("timestamp", timestamp), ("level", level), ("target", target), ("message", message)];
    let mut seen: HashSet<String> = fixed.iter().map(|(key, _)| (*key).to_owned()).collect();
    let mut line = String::from("{");
    let put = |line: &mut String, key: &str, value: &Value| {
        if line.len() > 1 {
            line.push(',');
        }
        line.push_str(&Value::from(key).to_string());
        line.push(':');
        line.push_str(&value.to_string());
    };
    for (key, value) in fixed {
        put(&mut line, key, &Value::from(value));
    }
    for (key, value) in fields {
        if seen.insert(key.clone()) {
            put(&mut line, &key, &value);
        }
    }
    line.push('}');
    line
}

/// An event's fields as JSON values: integers and booleans as such, everything else as the
/// text it displays (a `%value` field's `Display`, an error's message).
#[derive(Default)]
struct Fields {
    message: Option<String>,
    /// The target of a record of the `log` crate, bridged to tracing.
    log_target: Option<String>,
    values: Vec<(String, Value)>,
}

impl Fields {
    fn put(&mut self, field: &Field, value: Value) {
        let name = field.name();
        if name == "message" {
            self.message = Some(match value {
                Value::String(text) => text,
                other => other.to_string(),
            });
        } else if name == "log.target" {
            self.log_target = value.as_str().map(str::to_owned);
        } else if !name.starts_with("log.") {
            // `log.*` are the `log` crate's metadata, already in `target`.
            self.values.push((name.to_owned(), value));
        }
    }
}

impl Visit for Fields {
    fn record_f64(&mut self, field: &Field, value: f64) {
        let value =
            serde_json::Number::from_f64(value).map_or(value.to_string().into(), Value::Number);
        self.put(field, value);
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field, value.into());
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put(field, value.into());
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put(field, value.into());
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field, value.into());
    }
    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.put(field, value.to_string().into());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.put(field, format!("{value:?}").into());
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    /// A fixed clock: the tests' lines are the same on every run.
    struct Fixed;
    impl FormatTime for Fixed {
        fn format_time(&self, w: &mut Writer<'_>) -> fmt::Result {
            w.write_str("2026-12-06T16:00:00.000000Z")
        }
    }

    /// Everything logged while `f` runs, with the JSON format.
    fn logged(f: impl FnOnce()) -> String {
        let buffer = Arc::new(Mutex::new(Vec::new()));
        let writer = buffer.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::DEBUG)
            .with_ansi(false)
            .with_writer(move || Sink(writer.clone()))
            .fmt_fields(JsonFields::new())
            .event_format(FlatJson::new().with_timer(Fixed))
            .finish();
        tracing::subscriber::with_default(subscriber, f);
        let bytes = buffer.lock().map(|b| b.clone()).unwrap_or_default();
        String::from_utf8(bytes).unwrap()
    }

    struct Sink(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Sink {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().map_err(|_| std::io::Error::other("poisoned"))?.extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_line_is_flat_with_the_spans_fields_typed() {
        let text = logged(|| {
            let outer =
                tracing::info_span!("connection", connection = 3u64, remote = "127.0.0.1:5000");
            let _outer = outer.enter();
            let inner = tracing::info_span!("transition", transition = 7u64, node = "hub");
            let _inner = inner.enter();
            tracing::info!(player = "sim-0001", pawn = 12u64, alive = true, "pawn spawned");
        });
        let line: Value = serde_json::from_str(text.trim_end()).unwrap();
        assert_eq!(
            line,
            serde_json::json!({
                "timestamp": "2026-12-06T16:00:00.000000Z",
                "level": "INFO",
                "target": "gatehouse_logs::tests",
                "message": "pawn spawned",
                "player": "sim-0001",
                "pawn": 12,
                "alive": true,
                "transition": 7,
                "node": "hub",
                "connection": 3,
                "remote": "127.0.0.1:5000",
            })
        );
    }

    #[test]
    fn each_key_is_written_once_the_event_first_then_the_innermost_span() {
        let text = logged(|| {
            let outer = tracing::info_span!("outer", node = "far", connection = 1u64);
            let _outer = outer.enter();
            let inner = tracing::info_span!("inner", node = "near");
            let _inner = inner.enter();
            tracing::warn!(connection = 2u64, level = "mine", "clash");
        });
        let line = text.trim_end();
        assert_eq!(line.matches("\"connection\"").count(), 1, "{line}");
        assert_eq!(line.matches("\"level\"").count(), 1, "{line}");
        let line: Value = serde_json::from_str(line).unwrap();
        assert_eq!(line["connection"], 2);
        assert_eq!(line["node"], "near");
        assert_eq!(line["level"], "WARN");
    }

    #[test]
    fn text_fields_stay_escaped_on_one_line() {
        let text = logged(|| {
            let forged = "bye\n{\"level\":\"ERROR\"}";
            tracing::info!(reason = %forged, "closed");
            tracing::debug!("no fields, no span");
        });
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        let first: Value = serde_json::from_str(lines[0]).unwrap();
        assert_eq!(first["reason"], "bye\n{\"level\":\"ERROR\"}");
        let second: Value = serde_json::from_str(lines[1]).unwrap();
        let keys: Vec<&String> = second.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["level", "message", "target", "timestamp"]);
    }

    #[test]
    fn a_line_printed_without_tracing_has_the_same_shape() {
        let line = line_now(
            tracing::Level::ERROR,
            "gatehouse_server",
            "invalid bind",
            [("key".to_owned(), Value::from("network.bind"))],
        );
        let line: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(line["level"], "ERROR");
        assert_eq!(line["target"], "gatehouse_server");
        assert_eq!(line["message"], "invalid bind");
        assert_eq!(line["key"], "network.bind");
        assert!(line["timestamp"].as_str().unwrap().ends_with('Z'), "{line}");
    }

    #[test]
    fn formats_are_named_human_or_json() {
        assert_eq!(LogFormat::parse("JSON"), Some(LogFormat::Json));
        assert_eq!(LogFormat::parse("human"), Some(LogFormat::Human));
        assert_eq!(LogFormat::parse("xml"), None);
    }
}
