//! Log field values without Debug noise: an operator filtering logs reads
//! `pawn=7` or `pawn=none`, and `kits=Kit.A,Kit.B`, never `Some(PawnId(7))` or `["Kit.A"]`.

use std::fmt;

/// An optional value: the value, or `none`.
pub struct OrNone<T>(pub Option<T>);

impl<T: fmt::Display> fmt::Display for OrNone<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Some(value) => value.fmt(f),
            None => f.write_str("none"),
        }
    }
}

/// A list: its items joined by commas, or `none` when empty.
pub struct Joined<'a, T>(pub &'a [T]);

impl<T: fmt::Display> fmt::Display for Joined<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("none");
        }
        for (i, item) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            item.fmt(f)?;
        }
        Ok(())
    }
}

/// Longest text a peer controls that reaches a log field, in characters; the rest is cut and
/// its length given instead.
pub const PEER_TEXT_MAX_CHARS: usize = 200;

/// Text a peer controls (a close reason, a refused token's detail) as a log field: control and
/// line-breaking characters escaped (`\n`, `\u{1b}`, `\u{2028}`) so a peer can never start a
/// log line of its own, and cut to [`PEER_TEXT_MAX_CHARS`] characters so it cannot fill the log.
pub struct PeerText<'a>(pub &'a str);

impl PeerText<'_> {
    /// The escaped, capped text of `bytes` (invalid UTF-8 replaced).
    pub fn of_bytes(bytes: &[u8]) -> String {
        PeerText(&String::from_utf8_lossy(bytes)).to_string()
    }
}

impl fmt::Display for PeerText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use fmt::Write as _;
        for (i, c) in self.0.chars().enumerate() {
            if i == PEER_TEXT_MAX_CHARS {
                return write!(f, "... (cut, {} bytes in all)", self.0.len());
            }
            if breaks_a_line(c) {
                for escaped in c.escape_default() {
                    f.write_char(escaped)?;
                }
            } else {
                f.write_char(c)?;
            }
        }
        Ok(())
    }
}

/// Control characters, Unicode's line and paragraph separators, and the bidirectional
/// overrides that make a terminal show text in another order than it was written.
fn breaks_a_line(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{2028}' | '\u{2029}' | '\u{200e}' | '\u{200f}')
        || ('\u{202a}'..='\u{202e}').contains(&c)
        || ('\u{2066}'..='\u{2069}').contains(&c)
}

/// A duration in whole milliseconds, as a number field (tracing logs a `u128` as a string).
pub fn millis(duration: std::time::Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn optional_and_listed_values_print_without_debug_noise() {
        assert_eq!(OrNone(Some(7)).to_string(), "7");
        assert_eq!(OrNone::<u32>(None).to_string(), "none");
        assert_eq!(Joined(&["a", "b"]).to_string(), "a,b");
        assert_eq!(Joined::<&str>(&[]).to_string(), "none");
    }

    #[test]
    fn peer_text_cannot_start_a_log_line_of_its_own() {
        let forged = "bye\n2026-12-05T00:00:00Z WARN gatehouse: forged\r\u{1b}[31m\u{2028}\u{202e}";
        let logged = PeerText(forged).to_string();
        assert!(!logged.chars().any(breaks_a_line), "{logged}");
        assert_eq!(
            logged,
            "bye\\n2026-12-05T00:00:00Z WARN gatehouse: forged\\r\\u{1b}[31m\\u{2028}\\u{202e}"
        );
        assert_eq!(PeerText::of_bytes(b"ok \xff"), "ok \u{fffd}");
    }

    #[test]
    fn peer_text_is_cut_to_its_maximum_with_its_length() {
        let long = "x".repeat(10_000);
        let logged = PeerText(&long).to_string();
        assert!(logged.starts_with(&"x".repeat(PEER_TEXT_MAX_CHARS)));
        assert!(!logged.starts_with(&"x".repeat(PEER_TEXT_MAX_CHARS + 1)));
        assert!(logged.ends_with("(cut, 10000 bytes in all)"), "{logged}");
        let exact = "y".repeat(PEER_TEXT_MAX_CHARS);
        assert_eq!(PeerText(&exact).to_string(), exact);
    }

    #[test]
    fn durations_log_as_whole_milliseconds() {
        assert_eq!(millis(std::time::Duration::from_micros(1_500_900)), 1500);
        assert_eq!(millis(std::time::Duration::MAX), u64::MAX);
    }
}
