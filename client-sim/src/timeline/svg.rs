//! Draws a run's [`ClientTimeline`](super::ClientTimeline) rows as an SVG picture (being written).
