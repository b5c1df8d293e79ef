//! Log field values without Debug noise (issue 15 item 5): an operator filtering logs reads
//! `pawn=7` or `pawn=none`, and `kits=Kit.A,Kit.B`, never `Some(PawnId(7))` or `["Kit.A"]`.

use std::fmt;

/// An optional value: the value, or `none`.
pub(crate) struct OrNone<T>(pub(crate) Option<T>);

impl<T: fmt::Display> fmt::Display for OrNone<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Some(value) => value.fmt(f),
            None => f.write_str("none"),
        }
    }
}

/// A list: its items joined by commas, or `none` when empty.
pub(crate) struct Joined<'a, T>(pub(crate) &'a [T]);

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

/// A duration in whole milliseconds, as a number field (tracing logs a `u128` as a string).
pub(crate) fn millis(duration: std::time::Duration) -> u64 {
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
    fn durations_log_as_whole_milliseconds() {
        assert_eq!(millis(std::time::Duration::from_micros(1_500_900)), 1500);
        assert_eq!(millis(std::time::Duration::MAX), u64::MAX);
    }
}
