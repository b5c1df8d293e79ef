//! Draws a run's [`ClientTimeline`] rows as one SVG picture (docs/simulator.md, "The timeline"): a
//! header with the title and legend, one row per client with its loading screens as bars split by
//! phase and its marks as glyphs, and below it the histogram of shown → ended.
//!
//! It owns only the drawing; it never reads a clock and does I/O only in [`render`]. It uses
//! `plotters` without its `ttf` feature, so no font is ever loaded: the SVG backend writes each
//! label as an SVG `<text>` and the viewer lays it out. Plotters' own text measuring is then a
//! crude estimate (about 0.7 em per byte), so every label area here has a fixed size and the
//! legend is laid out by this module, never by plotters' measured layouts.

use std::cmp::Reverse;
use std::path::{Path, PathBuf};

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::{ClientTimeline, MarkKind, ScreenBar, ScreenKind};

/// The most client rows [`pick_rows`] keeps by default: about 60 rows keep the picture under
/// 1,300 px tall.
pub const MAX_ROWS: usize = 60;

/// Why a picture could not be drawn or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TimelineError {
    /// Plotters refused to draw an element; the SVG backend draws into a string, so this is a
    /// bug in the layout rather than an I/O failure.
    #[error("drawing the timeline failed: {0}")]
    Draw(String),
    /// The SVG could not be written to `path`.
    #[error("cannot write the timeline picture to {path}: {source}")]
    Write {
        /// The output file the picture was meant for.
        path: PathBuf,
        /// What the file system said.
        source: std::io::Error,
    },
}

/// Which rows to draw: every client when there are at most `max_rows`, otherwise an even sample by
/// index plus the slowest (by [`ClientTimeline::slowest_screen_us`]), in index order, at most
/// `max_rows`.
///
/// A quarter of the rows (at least one) go to the slowest clients, ties broken by the lower
/// index; the rest are spread evenly over the remaining clients by index. `max_rows == 0`
/// picks nothing.
pub fn pick_rows(all: &[ClientTimeline], max_rows: usize) -> Vec<&ClientTimeline> {
    let mut sorted: Vec<&ClientTimeline> = all.iter().collect();
    sorted.sort_by_key(|c| c.index);
    if sorted.len() <= max_rows {
        return sorted;
    }
    if max_rows == 0 {
        return Vec::new();
    }
    let slow_count = (max_rows / 4).max(1);
    let slowest: Vec<u64> = sorted.iter().map(|c| c.slowest_screen_us()).collect();
    let mut by_slowness: Vec<usize> = (0..sorted.len()).collect();
    by_slowness.sort_by_key(|&i| (Reverse(slowest[i]), i));
    let mut keep = vec![false; sorted.len()];
    for &i in by_slowness.iter().take(slow_count) {
        keep[i] = true;
    }
    let rest: Vec<usize> = (0..sorted.len()).filter(|&i| !keep[i]).collect();
    // `rest.len() > sample`, so the positions `j * rest.len() / sample` are distinct.
    let sample = max_rows - slow_count;
    for j in 0..sample {
        keep[rest[j * rest.len() / sample]] = true;
    }
    sorted.into_iter().zip(keep).filter_map(|(c, k)| k.then_some(c)).collect()
}

/// Renders the picture to an SVG string.
///
/// One row per client in `rows` (top to bottom in the given order), time across in seconds
/// from the run's start (`0..=run_us`, µs). Each [`ScreenBar`] is a bar split by phase, one
/// colour each: shown → ready sent "streaming", ready sent → possessed "waiting for pawn",
/// possessed → ended "settling". A screen with no end runs to `run_us`; a missing boundary
/// takes the next known one, so the phase it would have started collapses (no ready sent:
/// the bar is streaming up to possession or the end). Join screens carry a dark outline, a
/// move's screen (one bar from the source's freeze to the destination's end) a purple one. Each
/// [`MarkKind`] has its own glyph and colour; full clients' rows are labelled
/// `sim-0003 (full)` in bold. A legend sits above the rows; below them, the histogram of
/// `shown_to_ended_us` (values in µs) bucketed in whole milliseconds, with its p50, p99 and
/// max in the caption.
///
/// Steps:
/// 1. size the picture: a header (title, legend), 14 px per row, the histogram;
/// 2. draw the header;
/// 3. draw the time axis, the row bands and labels, every bar and mark;
/// 4. draw the histogram.
///
/// # Errors
/// [`TimelineError::Draw`] if plotters refuses an element (a layout bug).
pub fn render_svg(
    rows: &[&ClientTimeline],
    run_us: u64,
    shown_to_ended_us: &hdrhistogram::Histogram<u64>,
) -> Result<String, TimelineError> {
    let legend = legend_items();
    let legend_lines = legend_layout(&legend).last().map_or(1, |item| item.line + 1);
    let header_px = TITLE_PX + legend_lines as u32 * LEGEND_LINE_PX + 6;
    let row_count = rows.len().max(1) as u32;
    let timeline_px = TIMELINE_TOP_PX + row_count * ROW_PX + TIMELINE_AXIS_PX;
    let height = header_px + timeline_px + HISTOGRAM_PX;
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (WIDTH, height)).into_drawing_area();
        draw_picture(&root, header_px, timeline_px, rows, run_us, shown_to_ended_us)
            .map_err(|e| TimelineError::Draw(e.to_string()))?;
        root.present().map_err(|e| TimelineError::Draw(e.to_string()))?;
    }
    Ok(out)
}

/// [`render_svg`], written to `path` (the swarm's `--timeline FILE.svg`).
///
/// # Errors
/// [`TimelineError::Draw`] as [`render_svg`]; [`TimelineError::Write`], naming `path`, if the
/// file cannot be written.
pub fn render(
    path: &Path,
    rows: &[&ClientTimeline],
    run_us: u64,
    shown_to_ended_us: &hdrhistogram::Histogram<u64>,
) -> Result<(), TimelineError> {
    let svg = render_svg(rows, run_us, shown_to_ended_us)?;
    std::fs::write(path, svg)
        .map_err(|source| TimelineError::Write { path: path.to_path_buf(), source })
}

/// The picture's width, px.
const WIDTH: u32 = 1200;
/// The title line's height, px.
const TITLE_PX: u32 = 30;
/// One legend line's height, px.
const LEGEND_LINE_PX: u32 = 22;
/// One client row's height, px.
const ROW_PX: u32 = 14;
/// A bar's height inside its row, px.
const BAR_PX: i32 = 8;
/// Space above the first row, px.
const TIMELINE_TOP_PX: u32 = 6;
/// The time axis under the rows (ticks, numbers, its description), px.
const TIMELINE_AXIS_PX: u32 = 44;
/// The row labels' column on the left, px; it also aligns the histogram's plot.
const LABEL_COLUMN_PX: u32 = 130;
/// The histogram's count labels and their description, px (the rest of the label column is
/// margin, so both plots start at the same x).
const HISTOGRAM_Y_LABELS_PX: u32 = 64;
/// The free margin on the right, px.
const RIGHT_MARGIN_PX: u32 = 24;
/// The histogram's section, caption included, px.
const HISTOGRAM_PX: u32 = 300;
/// The thinnest bar drawn, px, so that a screen of a few ms stays visible on a long run.
const MIN_BAR_PX: i32 = 2;
/// The font every label uses (the viewer's sans-serif; no font file is read).
const FONT: &str = "sans-serif";
/// Plotters' text size for ordinary labels; the SVG backend writes `size / 1.24` as the
/// `font-size`, so this is 11.3 px on screen.
const LABEL_SIZE: f64 = 14.0;
/// An average sans-serif glyph's width as a share of the on-screen font size, for laying out
/// the legend (plotters' own estimate without `ttf` is 0.7 em per byte, too wide, and counts
/// bytes, not characters).
const GLYPH_EM: f64 = 0.56;

/// The text colour.
const INK: RGBColor = RGBColor(0x22, 0x22, 0x22);
/// Secondary text (thin clients' labels).
const INK_SOFT: RGBColor = RGBColor(0x44, 0x44, 0x44);
/// Full clients' labels.
const INK_FULL: RGBColor = RGBColor(0x1A, 0x3F, 0x8F);
/// Every other row's background band.
const BAND: RGBColor = RGBColor(0xF2, 0xF2, 0xF2);
/// The histogram's bars (distinct from the phase colours).
const HISTOGRAM_FILL: RGBColor = RGBColor(0x6E, 0x7F, 0x99);
/// The histogram's percentile lines.
const PERCENTILE: RGBColor = RGBColor(0xB0, 0x30, 0x30);
/// The outline of a move's screen: one bar across two servers.
const TRAVEL_OUTLINE: RGBColor = RGBColor(0x6A, 0x1B, 0x9A);

/// One phase of a loading screen as the client saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Shown → ready sent.
    Streaming,
    /// Ready sent → possessed.
    WaitingForPawn,
    /// Possessed → ended.
    Settling,
}

impl Phase {
    /// The phase's fill.
    fn colour(self) -> RGBColor {
        match self {
            Phase::Streaming => RGBColor(0x4C, 0x78, 0xA8),
            Phase::WaitingForPawn => RGBColor(0xF5, 0x85, 0x18),
            Phase::Settling => RGBColor(0x72, 0xB7, 0x4F),
        }
    }

    /// The legend's words for it.
    fn label(self) -> &'static str {
        match self {
            Phase::Streaming => "streaming (shown → ready sent)",
            Phase::WaitingForPawn => "waiting for pawn (ready → possessed)",
            Phase::Settling => "settling (possessed → ended)",
        }
    }
}

/// A mark's colour.
fn mark_colour(kind: MarkKind) -> RGBColor {
    match kind {
        MarkKind::Death => RGBColor(0x11, 0x11, 0x11),
        MarkKind::Respawn => RGBColor(0x8E, 0x44, 0xAD),
        MarkKind::Relaunch => RGBColor(0x8C, 0x56, 0x4B),
        MarkKind::Reconnect => RGBColor(0x17, 0xA2, 0xB8),
        MarkKind::Error => RGBColor(0xD6, 0x27, 0x28),
        MarkKind::ServerChange => RGBColor(0x00, 0x6D, 0x5B),
    }
}

/// A mark's legend words.
fn mark_label(kind: MarkKind) -> &'static str {
    match kind {
        MarkKind::Death => "death",
        MarkKind::Respawn => "respawn",
        MarkKind::Relaunch => "relaunch",
        MarkKind::Reconnect => "reconnect",
        MarkKind::Error => "error",
        MarkKind::ServerChange => "server change",
    }
}

/// Every mark kind, in legend order.
const MARK_KINDS: [MarkKind; 6] = [
    MarkKind::Death,
    MarkKind::Respawn,
    MarkKind::Relaunch,
    MarkKind::Reconnect,
    MarkKind::ServerChange,
    MarkKind::Error,
];

/// What a legend entry shows beside its words.
#[derive(Debug, Clone, Copy)]
enum Swatch {
    /// A bar of that phase's colour.
    Phase(Phase),
    /// An outlined bar: a join's screen.
    Join,
    /// A bar outlined in [`TRAVEL_OUTLINE`]: a move's screen, across two servers.
    Travel,
    /// That mark's glyph.
    Mark(MarkKind),
}

/// The legend's entries, in order.
fn legend_items() -> Vec<(Swatch, &'static str)> {
    let mut items = vec![
        (Swatch::Phase(Phase::Streaming), Phase::Streaming.label()),
        (Swatch::Phase(Phase::WaitingForPawn), Phase::WaitingForPawn.label()),
        (Swatch::Phase(Phase::Settling), Phase::Settling.label()),
        (Swatch::Join, "join screen (outlined)"),
        (Swatch::Travel, "move to another server (one screen, outlined)"),
    ];
    items.extend(MARK_KINDS.iter().map(|&k| (Swatch::Mark(k), mark_label(k))));
    items
}

/// Where one legend entry goes: its line and its x, px.
struct LegendSlot {
    /// The legend line, from 0.
    line: usize,
    /// The swatch's left edge, px from the picture's left.
    x: i32,
}

/// The width of a swatch and the gap before its words, px.
const SWATCH_PX: i32 = 22;

/// Lays the legend out left to right: the screens' entries, then the marks' on a new line,
/// wrapping to another line whenever an entry would pass the right margin.
fn legend_layout(items: &[(Swatch, &'static str)]) -> Vec<LegendSlot> {
    let left = 12;
    let right = (WIDTH - RIGHT_MARGIN_PX) as i32;
    let (mut line, mut x) = (0, left);
    items
        .iter()
        .enumerate()
        .map(|(i, (swatch, words))| {
            let width = SWATCH_PX + text_width_px(words) + 18;
            // Marks start their own line, after the screens' entries.
            let first_mark = matches!(swatch, Swatch::Mark(_))
                && i > 0
                && !matches!(items[i - 1].0, Swatch::Mark(_));
            if (x + width > right || first_mark) && x > left {
                line += 1;
                x = left;
            }
            let slot = LegendSlot { line, x };
            x += width;
            slot
        })
        .collect()
}

/// An estimate of `text`'s on-screen width at [`LABEL_SIZE`], px.
fn text_width_px(text: &str) -> i32 {
    (text.chars().count() as f64 * LABEL_SIZE / 1.24 * GLYPH_EM).ceil() as i32
}

/// A text style: the label font at `size`, in `colour`, anchored at `pos`.
fn text_style(size: f64, colour: &'static RGBColor, pos: Pos) -> TextStyle<'static> {
    TextStyle::from((FONT, size).into_font()).color(colour).pos(pos)
}

/// A screen's phases as µs spans `[from, to)`, each clamped into the screen, which is clamped
/// into `0..=run_us`. A missing boundary takes the next known one (so its phase collapses);
/// no end means `run_us`.
fn phase_spans(screen: &ScreenBar, run_us: u64) -> [(Phase, u64, u64); 3] {
    let end = screen.ended_us.unwrap_or(run_us).min(run_us);
    let shown = screen.shown_us.min(end);
    let possessed = screen.possessed_us.unwrap_or(end).clamp(shown, end);
    let ready = screen.ready_sent_us.unwrap_or(possessed).clamp(shown, possessed);
    [
        (Phase::Streaming, shown, ready),
        (Phase::WaitingForPawn, ready, possessed),
        (Phase::Settling, possessed, end),
    ]
}

/// A row's label: `sim-0003`, or `sim-0003 (full)` for a full client.
fn row_label(client: &ClientTimeline) -> String {
    if client.full {
        format!("sim-{:04} (full)", client.index)
    } else {
        format!("sim-{:04}", client.index)
    }
}

/// µs as ms for a caption, with a precision that suits the size.
fn ms_text(us: u64) -> String {
    let ms = us as f64 / 1000.0;
    if ms < 10.0 {
        format!("{ms:.2} ms")
    } else if ms < 100.0 {
        format!("{ms:.1} ms")
    } else {
        format!("{ms:.0} ms")
    }
}

/// Seconds for the time axis, with as many decimals as the run's length needs.
fn seconds_text(s: f64, run_s: f64) -> String {
    if run_s >= 10.0 { format!("{s:.0}") } else { format!("{s:.1}") }
}

/// Draws the header, the timeline and the histogram on `root` (see [`render_svg`]).
fn draw_picture(
    root: &DrawingArea<SVGBackend<'_>, Shift>,
    header_px: u32,
    timeline_px: u32,
    rows: &[&ClientTimeline],
    run_us: u64,
    shown_to_ended_us: &hdrhistogram::Histogram<u64>,
) -> Result<(), DrawingAreaErrorKind<std::io::Error>> {
    root.fill(&WHITE)?;
    let (header, rest) = root.split_vertically(header_px);
    let (timeline, histogram) = rest.split_vertically(timeline_px);
    draw_header(&header, rows.len(), run_us)?;
    draw_timeline(root, &timeline, rows, run_us)?;
    draw_histogram(&histogram, shown_to_ended_us)
}

/// The title and the legend.
fn draw_header(
    header: &DrawingArea<SVGBackend<'_>, Shift>,
    row_count: usize,
    run_us: u64,
) -> Result<(), DrawingAreaErrorKind<std::io::Error>> {
    let title = format!(
        "Loading screens by client: {row_count} {}, {:.1} s run",
        if row_count == 1 { "row" } else { "rows" },
        run_us as f64 / 1e6
    );
    let title_style = TextStyle::from((FONT, 20.0).into_font().style(FontStyle::Bold))
        .color(&INK)
        .pos(Pos::new(HPos::Left, VPos::Center));
    header.draw(&Text::new(title, (12, (TITLE_PX / 2) as i32), title_style))?;
    let words_style = text_style(LABEL_SIZE, &INK, Pos::new(HPos::Left, VPos::Center));
    let items = legend_items();
    for ((swatch, words), slot) in items.iter().zip(legend_layout(&items)) {
        let y = (TITLE_PX + slot.line as u32 * LEGEND_LINE_PX + LEGEND_LINE_PX / 2) as i32;
        let (x0, x1) = (slot.x, slot.x + SWATCH_PX - 6);
        let (top, bottom) = (y - BAR_PX / 2, y + BAR_PX / 2);
        match *swatch {
            Swatch::Phase(phase) => {
                header.draw(&Rectangle::new([(x0, top), (x1, bottom)], phase.colour().filled()))?
            }
            Swatch::Join | Swatch::Travel => {
                header.draw(&Rectangle::new(
                    [(x0, top), (x1, bottom)],
                    Phase::Streaming.colour().filled(),
                ))?;
                let outline = match *swatch {
                    Swatch::Travel => TRAVEL_OUTLINE.stroke_width(2),
                    _ => INK.stroke_width(1),
                };
                header.draw(&Rectangle::new([(x0, top), (x1, bottom)], outline))?;
            }
            Swatch::Mark(kind) => draw_mark(header, kind, ((x0 + x1) / 2, y), top, bottom)?,
        }
        header.draw(&Text::new(*words, (slot.x + SWATCH_PX, y), words_style.clone()))?;
    }
    Ok(())
}

/// Draws a mark's glyph centred at `at`, on a row spanning `top..bottom` px.
fn draw_mark(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    kind: MarkKind,
    at: (i32, i32),
    top: i32,
    bottom: i32,
) -> Result<(), DrawingAreaErrorKind<std::io::Error>> {
    let colour = mark_colour(kind);
    let (x, y) = at;
    match kind {
        MarkKind::Death => area.draw(&Cross::new(at, 4, colour.stroke_width(2))),
        MarkKind::Respawn => area.draw(&TriangleMarker::new(at, 5, colour.filled())),
        MarkKind::Relaunch => area
            .draw(&PathElement::new(vec![(x, top - 2), (x, bottom + 2)], colour.stroke_width(3))),
        MarkKind::Reconnect => area.draw(&Circle::new(at, 4, colour.stroke_width(2))),
        MarkKind::Error => area.draw(&Polygon::new(
            vec![(x, y - 5), (x + 5, y), (x, y + 5), (x - 5, y)],
            colour.filled(),
        )),
        MarkKind::ServerChange => {
            area.draw(&Rectangle::new([(x - 3, y - 3), (x + 3, y + 3)], colour.stroke_width(2)))
        }
    }
}

/// The rows: a time axis, a band on every other row, each row's label, bars and marks. Bars
/// and marks are drawn on `root` in pixels (mapped through the chart), so that a screen
/// shorter than a pixel still shows as a [`MIN_BAR_PX`] sliver.
fn draw_timeline(
    root: &DrawingArea<SVGBackend<'_>, Shift>,
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    rows: &[&ClientTimeline],
    run_us: u64,
) -> Result<(), DrawingAreaErrorKind<std::io::Error>> {
    let run_s = if run_us == 0 { 1.0 } else { run_us as f64 / 1e6 };
    let row_count = rows.len().max(1) as f64;
    let mut chart = ChartBuilder::on(area)
        .margin_top(TIMELINE_TOP_PX)
        .margin_right(RIGHT_MARGIN_PX)
        .x_label_area_size(TIMELINE_AXIS_PX)
        .y_label_area_size(LABEL_COLUMN_PX)
        .build_cartesian_2d(0.0..run_s, 0.0..row_count)?;
    // The chart's mapping to picture pixels, kept apart so the mesh can borrow the chart.
    let to_px = chart.as_coord_spec().clone();
    // Row `i` (0 at the top) spans chart y `row_count - i - 1 .. row_count - i`.
    let row_px = |i: usize| {
        let top = to_px.translate(&(0.0, row_count - i as f64)).1;
        let bottom = to_px.translate(&(0.0, row_count - i as f64 - 1.0)).1;
        (top, bottom)
    };
    let x_px = |us: u64| to_px.translate(&(us as f64 / 1e6, 0.0)).0;
    let (left, right) = (x_px(0), to_px.translate(&(run_s, 0.0)).0);
    for i in (1..rows.len()).step_by(2) {
        let (top, bottom) = row_px(i);
        root.draw(&Rectangle::new([(left, top), (right, bottom)], BAND.filled()))?;
    }
    let seconds = |s: &f64| seconds_text(*s, run_s);
    chart
        .configure_mesh()
        .disable_y_mesh()
        .y_labels(0)
        .x_labels(16)
        .x_max_light_lines(1)
        .x_label_formatter(&seconds)
        .x_desc("seconds since the run's start")
        .label_style(text_style(LABEL_SIZE, &INK, Pos::new(HPos::Center, VPos::Top)))
        .axis_desc_style(text_style(LABEL_SIZE, &INK, Pos::new(HPos::Center, VPos::Top)))
        .draw()?;
    let thin_style = text_style(LABEL_SIZE, &INK_SOFT, Pos::new(HPos::Right, VPos::Center));
    let full_style = TextStyle::from((FONT, LABEL_SIZE).into_font().style(FontStyle::Bold))
        .color(&INK_FULL)
        .pos(Pos::new(HPos::Right, VPos::Center));
    for (i, client) in rows.iter().enumerate() {
        let (top, bottom) = row_px(i);
        let centre = (top + bottom) / 2;
        let style = if client.full { full_style.clone() } else { thin_style.clone() };
        root.draw(&Text::new(row_label(client), (left - 6, centre), style))?;
        let (bar_top, bar_bottom) = (centre - BAR_PX / 2, centre + BAR_PX / 2);
        for screen in &client.screens {
            let spans = phase_spans(screen, run_us);
            let start = x_px(spans[0].1);
            let end = x_px(spans[2].2).max(start + MIN_BAR_PX);
            for (phase, from, to) in spans {
                let (from, to) = (x_px(from).clamp(start, end), x_px(to).clamp(start, end));
                // The last phase takes any width the minimum added.
                let to = if phase == Phase::Settling { end } else { to };
                if to > from {
                    root.draw(&Rectangle::new(
                        [(from, bar_top), (to, bar_bottom)],
                        phase.colour().filled(),
                    ))?;
                }
            }
            let outline = match screen.kind {
                ScreenKind::Transition => None,
                ScreenKind::Join => Some(INK.stroke_width(1)),
                ScreenKind::Travel => Some(TRAVEL_OUTLINE.stroke_width(2)),
            };
            if let Some(outline) = outline {
                root.draw(&Rectangle::new([(start, bar_top), (end, bar_bottom)], outline))?;
            }
        }
        for mark in &client.marks {
            let at = (x_px(mark.at_us.min(run_us)), centre);
            draw_mark(root, mark.kind, at, bar_top, bar_bottom)?;
        }
    }
    if rows.is_empty() {
        let (top, bottom) = row_px(0);
        let style = text_style(LABEL_SIZE, &INK_SOFT, Pos::new(HPos::Left, VPos::Center));
        root.draw(&Text::new("no clients", (left + 8, (top + bottom) / 2), style))?;
    }
    Ok(())
}

/// How many buckets the histogram aims for.
const TARGET_BUCKETS: u64 = 50;

/// The histogram's bucket width: the smallest 1, 2 or 5 × 10ⁿ ms that puts `max_us` into at
/// most [`TARGET_BUCKETS`] buckets, at least 1 ms.
fn bucket_width_ms(max_us: u64) -> u64 {
    let wanted = max_us.div_ceil(1000).div_ceil(TARGET_BUCKETS).max(1);
    let mut decade = 1u64;
    loop {
        for step in [1, 2, 5] {
            let width = step * decade;
            if width >= wanted {
                return width;
            }
        }
        decade = decade.saturating_mul(10);
    }
}

/// Counts per bucket of `width_ms`, from 0 up to the bucket holding the histogram's max.
fn bucket_counts(histogram: &hdrhistogram::Histogram<u64>, width_ms: u64) -> Vec<u64> {
    let width_us = width_ms * 1000;
    let mut counts = vec![0u64; (histogram.max() / width_us + 1) as usize];
    for value in histogram.iter_recorded() {
        // Bucket by the recorded range's lowest value, so no sample moves up a bucket.
        let at = histogram.lowest_equivalent(value.value_iterated_to());
        let bucket = ((at / width_us) as usize).min(counts.len() - 1);
        counts[bucket] += value.count_at_value();
    }
    counts
}

/// The histogram of shown → ended, bucketed in ms, with p50 and p99 lines.
fn draw_histogram(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    histogram: &hdrhistogram::Histogram<u64>,
) -> Result<(), DrawingAreaErrorKind<std::io::Error>> {
    let caption = if histogram.is_empty() {
        "shown → ended: no screen ended".to_string()
    } else {
        format!(
            "shown → ended, {} screens: p50 {}, p99 {}, max {}",
            histogram.len(),
            ms_text(histogram.value_at_quantile(0.5)),
            ms_text(histogram.value_at_quantile(0.99)),
            ms_text(histogram.max()),
        )
    };
    let width_ms = bucket_width_ms(histogram.max());
    let counts = if histogram.is_empty() { Vec::new() } else { bucket_counts(histogram, width_ms) };
    let x_end = (counts.len().max(10) as u64 * width_ms) as f64;
    let y_end = counts.iter().copied().max().unwrap_or(0).max(1) as f64 * 1.12;
    let caption_style =
        TextStyle::from((FONT, 17.0).into_font().style(FontStyle::Bold)).color(&INK);
    let mut chart = ChartBuilder::on(area)
        .margin_top(16)
        .margin_right(RIGHT_MARGIN_PX)
        .margin_bottom(6)
        .caption(caption, caption_style)
        .margin_left(LABEL_COLUMN_PX - HISTOGRAM_Y_LABELS_PX)
        .x_label_area_size(TIMELINE_AXIS_PX)
        .y_label_area_size(HISTOGRAM_Y_LABELS_PX)
        .build_cartesian_2d(0.0..x_end, 0.0..y_end)?;
    let whole = |v: &f64| format!("{v:.0}");
    let x_label = |v: &f64| if v.fract() == 0.0 { format!("{v:.0}") } else { format!("{v:.1}") };
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(16)
        .y_labels(6)
        .max_light_lines(0)
        .x_label_formatter(&x_label)
        .y_label_formatter(&whole)
        .x_desc("shown → ended (ms)")
        .y_desc("screens")
        .label_style(text_style(LABEL_SIZE, &INK, Pos::new(HPos::Center, VPos::Top)))
        .axis_desc_style(text_style(LABEL_SIZE, &INK, Pos::new(HPos::Center, VPos::Top)))
        .draw()?;
    chart.draw_series(counts.iter().enumerate().filter(|(_, n)| **n > 0).map(|(i, n)| {
        let from = (i as u64 * width_ms) as f64;
        let mut bar = Rectangle::new(
            [(from, *n as f64), (from + width_ms as f64, 0.0)],
            HISTOGRAM_FILL.filled(),
        );
        bar.set_margin(0, 0, 1, 1);
        bar
    }))?;
    if !histogram.is_empty() {
        for (i, (name, quantile)) in [("p50", 0.5), ("p99", 0.99)].into_iter().enumerate() {
            let x = histogram.value_at_quantile(quantile) as f64 / 1000.0;
            chart.draw_series([PathElement::new(
                vec![(x, 0.0), (x, y_end)],
                PERCENTILE.stroke_width(1),
            )])?;
            let style = text_style(LABEL_SIZE, &PERCENTILE, Pos::new(HPos::Left, VPos::Top));
            let label =
                EmptyElement::at((x, y_end)) + Text::new(name, (4, 2 + 14 * i as i32), style);
            chart.draw_series([label])?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::Mark;

    fn screen(shown_ms: u64, phases_ms: [u64; 3]) -> ScreenBar {
        let ready = shown_ms + phases_ms[0];
        let possessed = ready + phases_ms[1];
        ScreenBar {
            kind: ScreenKind::Transition,
            shown_us: shown_ms * 1000,
            ready_sent_us: Some(ready * 1000),
            possessed_us: Some(possessed * 1000),
            ended_us: Some((possessed + phases_ms[2]) * 1000),
        }
    }

    fn client(
        index: usize,
        full: bool,
        screens: Vec<ScreenBar>,
        marks: Vec<Mark>,
    ) -> ClientTimeline {
        ClientTimeline { index, full, screens, marks }
    }

    fn histogram_of(rows: &[&ClientTimeline]) -> hdrhistogram::Histogram<u64> {
        let mut h = hdrhistogram::Histogram::<u64>::new(3).unwrap();
        for c in rows {
            for s in &c.screens {
                if let Some(end) = s.ended_us {
                    h.record(end - s.shown_us).unwrap();
                }
            }
        }
        h
    }

    fn colour_hex(c: RGBColor) -> String {
        format!("#{:02X}{:02X}{:02X}", c.0, c.1, c.2)
    }

    /// How many `<rect>`s are filled with `c`.
    fn rects_filled_with(svg: &str, c: RGBColor) -> usize {
        let fill = format!("fill=\"{}\"", colour_hex(c));
        svg.lines().filter(|l| l.starts_with("<rect") && l.contains(&fill)).count()
    }

    /// Whether some `<text>` says exactly `words` (as escaped in the SVG).
    fn has_text(svg: &str, words: &str) -> bool {
        svg.contains(&format!(">\n{words}\n</text>"))
    }

    /// A rect of `colour` whose right edge is at `x` px.
    fn rect_ending_at(svg: &str, c: RGBColor, x_right: i32) -> bool {
        svg.lines()
            .filter(|l| {
                l.starts_with("<rect") && l.contains(&format!("fill=\"{}\"", colour_hex(c)))
            })
            .any(|l| {
                let attr = |name: &str| -> i32 {
                    let start = l.find(&format!(" {name}=\"")).unwrap() + name.len() + 3;
                    l[start..].split('"').next().unwrap().parse().unwrap()
                };
                attr("x") + attr("width") == x_right
            })
    }

    #[test]
    fn pick_rows_keeps_every_client_when_few() {
        let all: Vec<_> = (0..5).map(|i| client(i, false, vec![], vec![])).collect();
        let picked = pick_rows(&all, 10);
        assert_eq!(picked.iter().map(|c| c.index).collect::<Vec<_>>(), vec![0, 1, 2, 3, 4]);
        assert_eq!(pick_rows(&all, 5).len(), 5);
    }

    #[test]
    fn pick_rows_on_1000_clients_samples_in_index_order_and_keeps_the_slowest() {
        let all: Vec<_> = (0..1000)
            .map(|i| {
                // Client 777 is by far the slowest; the rest vary a little.
                let ms = if i == 777 { 5000 } else { 50 + (i as u64 * 7) % 40 };
                client(i, i < 16, vec![screen(100, [ms, 1, 1])], vec![])
            })
            .collect();
        let picked = pick_rows(&all, MAX_ROWS);
        assert!(picked.len() <= MAX_ROWS, "picked {}", picked.len());
        assert!(picked.len() >= MAX_ROWS - 1, "picked only {}", picked.len());
        let indices: Vec<usize> = picked.iter().map(|c| c.index).collect();
        assert!(indices.windows(2).all(|w| w[0] < w[1]), "not in index order: {indices:?}");
        assert!(indices.contains(&777), "slowest client missing: {indices:?}");
        // The sample spreads over the whole index range, not just its start.
        assert!(
            indices.iter().any(|&i| i < 100) && indices.iter().any(|&i| i > 900),
            "{indices:?}"
        );
        assert!(pick_rows(&all, 0).is_empty());
        assert_eq!(pick_rows(&all, 1).iter().map(|c| c.index).collect::<Vec<_>>(), vec![777]);
    }

    #[test]
    fn render_svg_of_a_small_run_draws_phases_legend_labels_marks_and_histogram() {
        let a = client(
            3,
            true,
            vec![screen(1000, [300, 200, 100]), screen(5000, [400, 100, 200])],
            vec![
                Mark { at_us: 3_000_000, kind: MarkKind::Death },
                Mark { at_us: 3_500_000, kind: MarkKind::Respawn },
            ],
        );
        let b = client(
            4,
            false,
            vec![screen(1000, [500, 300, 100])],
            vec![
                Mark { at_us: 6_000_000, kind: MarkKind::Relaunch },
                Mark { at_us: 7_000_000, kind: MarkKind::Reconnect },
                Mark { at_us: 7_500_000, kind: MarkKind::ServerChange },
                Mark { at_us: 8_000_000, kind: MarkKind::Error },
            ],
        );
        let rows = [&a, &b];
        let svg = render_svg(&rows, 10_000_000, &histogram_of(&rows)).unwrap();
        // The same rows without marks, and no rows at all: what the legend alone draws.
        let (a_bare, b_bare) = (
            client(3, true, a.screens.clone(), vec![]),
            client(4, false, b.screens.clone(), vec![]),
        );
        let bare = render_svg(&[&a_bare, &b_bare], 10_000_000, &histogram_of(&rows)).unwrap();
        let legend_only = render_svg(&[], 10_000_000, &histogram_of(&[])).unwrap();
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"), "{svg}");
        for phase in [Phase::Streaming, Phase::WaitingForPawn, Phase::Settling] {
            assert!(
                rects_filled_with(&svg, phase.colour())
                    > rects_filled_with(&legend_only, phase.colour()),
                "no {phase:?} bar"
            );
            assert!(has_text(&svg, &phase.label().replace('>', "&gt;")), "legend misses {phase:?}");
        }
        for kind in MARK_KINDS {
            assert!(has_text(&svg, mark_label(kind)), "legend misses {kind:?}");
            let colour = colour_hex(mark_colour(kind));
            assert!(
                svg.matches(&colour).count() > bare.matches(&colour).count(),
                "no {kind:?} glyph on its row"
            );
        }
        assert!(has_text(&svg, "sim-0003 (full)"), "full client's label");
        assert!(has_text(&svg, "sim-0004"), "thin client's label");
        assert!(!svg.contains("sim-0004 (full)"));
        assert!(svg.contains("shown → ended, 3 screens"), "histogram caption");
        assert!(has_text(&svg, "shown → ended (ms)"), "histogram axis label");
        assert!(rects_filled_with(&svg, HISTOGRAM_FILL) > 0, "histogram bars");
        assert_eq!(rects_filled_with(&legend_only, HISTOGRAM_FILL), 0);
    }

    /// A move to another server is one bar across both servers, outlined as a move's, with the
    /// server change marked on it: no gap, no second bar (docs/spec/travel.md V3).
    #[test]
    fn a_move_is_one_outlined_bar_across_both_servers_with_its_server_change_marked() {
        let mut moved = screen(1000, [800, 300, 200]);
        moved.kind = ScreenKind::Travel;
        let change = Mark { at_us: 1_500_000, kind: MarkKind::ServerChange };
        let row = client(1, false, vec![moved.clone()], vec![change]);
        let plain =
            client(1, false, vec![ScreenBar { kind: ScreenKind::Transition, ..moved }], vec![]);
        let svg = render_svg(&[&row], 4_000_000, &histogram_of(&[&row])).unwrap();
        let bare = render_svg(&[&plain], 4_000_000, &histogram_of(&[&plain])).unwrap();
        let outline = format!("stroke=\"{}\"", colour_hex(TRAVEL_OUTLINE));
        assert!(
            svg.matches(&outline).count() > bare.matches(&outline).count(),
            "the move's outline"
        );
        assert!(has_text(&svg, "move to another server (one screen, outlined)"));
        let streaming = rects_filled_with(&svg, Phase::Streaming.colour());
        assert_eq!(
            streaming,
            rects_filled_with(&bare, Phase::Streaming.colour()),
            "one bar, not two"
        );
        let mark = colour_hex(mark_colour(MarkKind::ServerChange));
        assert!(svg.matches(&mark).count() > bare.matches(&mark).count(), "the server change");
    }

    #[test]
    fn a_screen_with_no_end_is_drawn_to_the_runs_end() {
        let mut open = screen(2000, [100, 100, 100]);
        open.ended_us = None;
        let c = client(0, false, vec![open], vec![]);
        let rows = [&c];
        let empty = hdrhistogram::Histogram::<u64>::new(3).unwrap();
        let svg = render_svg(&rows, 10_000_000, &empty).unwrap();
        // The plot's right edge: the picture's width less the right margin.
        let right = (WIDTH - RIGHT_MARGIN_PX) as i32 - 1;
        let settled_to_end =
            (right - 1..=right + 1).any(|x| rect_ending_at(&svg, Phase::Settling.colour(), x));
        assert!(settled_to_end, "settling bar should reach the run's end at x≈{right}:\n{svg}");
    }

    #[test]
    fn a_missing_boundary_collapses_the_phase_it_would_start() {
        let still_streaming = ScreenBar {
            kind: ScreenKind::Transition,
            shown_us: 10,
            ready_sent_us: None,
            possessed_us: None,
            ended_us: None,
        };
        assert_eq!(
            phase_spans(&still_streaming, 100),
            [
                (Phase::Streaming, 10, 100),
                (Phase::WaitingForPawn, 100, 100),
                (Phase::Settling, 100, 100)
            ]
        );
        let never_possessed =
            ScreenBar { ready_sent_us: Some(30), ended_us: Some(60), ..still_streaming.clone() };
        assert_eq!(
            phase_spans(&never_possessed, 100),
            [
                (Phase::Streaming, 10, 30),
                (Phase::WaitingForPawn, 30, 60),
                (Phase::Settling, 60, 60)
            ]
        );
    }

    #[test]
    fn an_empty_run_renders_without_error() {
        let empty = hdrhistogram::Histogram::<u64>::new(3).unwrap();
        let svg = render_svg(&[], 0, &empty).unwrap();
        assert!(has_text(&svg, "no clients"));
        assert!(svg.contains("shown → ended: no screen ended"));
    }

    #[test]
    fn render_writes_the_file_and_names_the_path_when_it_cannot() {
        let dir = tempfile::tempdir().unwrap();
        let c = client(1, false, vec![screen(0, [1, 1, 1])], vec![]);
        let rows = [&c];
        let path = dir.path().join("run.svg");
        render(&path, &rows, 1_000_000, &histogram_of(&rows)).unwrap();
        assert!(std::fs::read_to_string(&path).unwrap().contains("sim-0001"));
        let bad = dir.path().join("missing-dir").join("run.svg");
        let err = render(&bad, &rows, 1_000_000, &histogram_of(&rows)).unwrap_err();
        assert!(matches!(err, TimelineError::Write { .. }));
        assert!(err.to_string().contains(&bad.display().to_string()), "{err}");
    }

    #[test]
    fn bucket_width_is_a_round_number_of_ms() {
        assert_eq!(bucket_width_ms(0), 1);
        assert_eq!(bucket_width_ms(40_000), 1);
        assert_eq!(bucket_width_ms(90_000), 2);
        assert_eq!(bucket_width_ms(560_000), 20);
        assert_eq!(bucket_width_ms(16_000_000), 500);
    }

    /// A deterministic stand-in for a 60 s, 40-client run (4 full): a join each, 10
    /// transitions with jittered phases, a few deaths, respawns, relaunches, reconnects and
    /// errors, the last transition still up at the end.
    fn demo_run() -> (Vec<ClientTimeline>, u64) {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = move |below: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % below
        };
        let run_us = 60_000_000;
        let clients = (0..40)
            .map(|index| {
                let slow = if index % 13 == 7 { 3 } else { 1 };
                let join_at = 200 + index as u64 * 40;
                let mut screens = vec![ScreenBar {
                    kind: ScreenKind::Join,
                    ..screen(join_at, [100 + next(300), 10 + next(50), 5 + next(20)])
                }];
                let mut marks = Vec::new();
                for t in 0..10u64 {
                    let shown = 5_000 + t * 6_000 + next(30);
                    let phases = [slow * (150 + next(700)), 20 + next(250), 10 + next(120)];
                    let mut bar = screen(shown, phases);
                    if t == 9 && index % 5 == 0 {
                        bar.possessed_us = None;
                        bar.ended_us = None;
                    }
                    screens.push(bar);
                }
                if index % 7 == 3 {
                    let at = 8_000 + next(40_000);
                    marks.push(Mark { at_us: at * 1000, kind: MarkKind::Death });
                    marks.push(Mark { at_us: (at + 1_500) * 1000, kind: MarkKind::Respawn });
                }
                if index % 11 == 5 {
                    let at = 20_000 + next(20_000);
                    marks.push(Mark { at_us: at * 1000, kind: MarkKind::Relaunch });
                    screens.push(ScreenBar {
                        kind: ScreenKind::Join,
                        ..screen(at + 300, [400, 60, 20])
                    });
                }
                if index == 17 {
                    marks.push(Mark { at_us: 33_000_000, kind: MarkKind::Reconnect });
                }
                if index == 29 || index == 17 {
                    marks.push(Mark { at_us: 33_000_000 + next(2_000_000), kind: MarkKind::Error });
                }
                screens.sort_by_key(|s| s.shown_us);
                marks.sort_by_key(|m| m.at_us);
                ClientTimeline { index, full: index % 10 == 0, screens, marks }
            })
            .collect();
        (clients, run_us)
    }

    #[test]
    fn a_realistic_run_renders_every_picked_row() {
        let (clients, run_us) = demo_run();
        let rows = pick_rows(&clients, MAX_ROWS);
        let svg = render_svg(&rows, run_us, &histogram_of(&rows)).unwrap();
        assert_eq!(rows.len(), 40);
        for c in &rows {
            assert!(svg.contains(&row_label(c)), "row {} missing", c.index);
        }
    }

    /// Writes the demo picture to `$TIMELINE_DEMO` (e.g. /tmp/timeline-demo.svg) to look at:
    /// `TIMELINE_DEMO=/tmp/timeline-demo.svg cargo test -p gatehouse-client-sim --lib
    /// timeline::svg::tests::demo_picture -- --ignored`.
    #[test]
    #[ignore = "writes a picture to look at"]
    fn demo_picture() {
        let path = std::env::var_os("TIMELINE_DEMO").expect("set TIMELINE_DEMO to an .svg path");
        let (clients, run_us) = demo_run();
        let rows = pick_rows(&clients, MAX_ROWS);
        render(Path::new(&path), &rows, run_us, &histogram_of(&rows)).unwrap();
    }
}
