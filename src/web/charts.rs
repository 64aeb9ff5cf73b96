//! Pictures for people who would rather look than read: SVG drawn on the server with
//! plotters (no script; readable in any browser). Every label is Cairn's own (dates,
//! counts, registered tool names), never text an agent wrote.

use plotters::prelude::*;

use crate::learnings::LearningTrends;
use crate::metrics::ToolStat;

const CREATED: RGBColor = RGBColor(0x2a, 0x6f, 0xb0);
const CONFIRMED: RGBColor = RGBColor(0x2f, 0x8f, 0x4e);
const SUPERSEDED: RGBColor = RGBColor(0xb0, 0x4a, 0x2a);

/// Draw with `f` on an SVG of `size`; the SVG text, or a short note when drawing failed.
/// A drawing area of an SVG held in memory.
type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;

fn svg(
    size: (u32, u32),
    f: impl FnOnce(&Area<'_>) -> Result<(), Box<dyn std::error::Error>>,
) -> String {
    let mut out = String::new();
    let drawn = {
        let root = SVGBackend::with_string(&mut out, size).into_drawing_area();
        let r = root
            .fill(&WHITE)
            .map_err(|e| e.to_string())
            .and_then(|()| f(&root).map_err(|e| e.to_string()));
        r.and_then(|()| root.present().map_err(|e| e.to_string()))
    };
    match drawn {
        Ok(()) => out,
        Err(e) => {
            tracing::warn!(error = %e, "a picture could not be drawn");
            String::new()
        }
    }
}

/// Learnings added, confirmed (merged into) and superseded per day.
pub(crate) fn learnings_over_time(a: &LearningTrends) -> String {
    let days = a.days.len().max(1) as u32;
    let top = a
        .days
        .iter()
        .map(|d| d.created.max(d.confirmed).max(d.superseded))
        .max()
        .unwrap_or(0)
        .max(1);
    svg((720, 280), |root| {
        let mut chart = ChartBuilder::on(root)
            .caption("Learnings per day", ("sans-serif", 16))
            .margin(12)
            .x_label_area_size(34)
            .y_label_area_size(40)
            .build_cartesian_2d(0u32..days, 0u64..top + top / 5 + 1)?;
        let label = |i: &u32| {
            a.days
                .get(*i as usize)
                .map(|d| d.day.clone())
                .unwrap_or_default()
        };
        chart
            .configure_mesh()
            .x_labels(days.min(8) as usize)
            .x_label_formatter(&label)
            .y_desc("learnings")
            .draw()?;
        for (name, colour, pick) in [
            (
                "added",
                CREATED,
                (|d: &crate::learnings::Day| d.created) as fn(&crate::learnings::Day) -> u64,
            ),
            ("confirmed", CONFIRMED, |d| d.confirmed),
            ("superseded", SUPERSEDED, |d| d.superseded),
        ] {
            chart
                .draw_series(LineSeries::new(
                    a.days.iter().enumerate().map(|(i, d)| (i as u32, pick(d))),
                    colour.stroke_width(2),
                ))?
                .label(name)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 16, y)], colour.stroke_width(2))
                });
            // A point per day, so that a single day shows too.
            chart.draw_series(
                a.days
                    .iter()
                    .enumerate()
                    .map(|(i, d)| Circle::new((i as u32, pick(d)), 3, colour.filled())),
            )?;
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK.mix(0.3))
            .draw()?;
        Ok(())
    })
}

/// How many learnings have each quality score, in tens (0-9, ..., 90-99, 100).
pub(crate) fn quality_distribution(a: &LearningTrends) -> String {
    let top = a.quality.iter().copied().max().unwrap_or(0).max(1);
    svg((720, 260), |root| {
        let mut chart = ChartBuilder::on(root)
            .caption("Quality scores", ("sans-serif", 16))
            .margin(12)
            .x_label_area_size(34)
            .y_label_area_size(40)
            .build_cartesian_2d((0u32..10u32).into_segmented(), 0u64..top + top / 5 + 1)?;
        chart
            .configure_mesh()
            .x_desc("quality (tens; 100 counts with 90-99)")
            .y_desc("learnings")
            .x_label_formatter(&|v| match v {
                SegmentValue::CenterOf(t) | SegmentValue::Exact(t) => format!("{}", t * 10),
                SegmentValue::Last => String::new(),
            })
            .draw()?;
        chart.draw_series(
            Histogram::vertical(&chart)
                .style(CREATED.filled())
                .margin(4)
                .data(
                    a.quality
                        .iter()
                        .enumerate()
                        .map(|(i, n)| ((i as u32).min(9), *n)),
                ),
        )?;
        Ok(())
    })
}

/// One tool's calls per latency bucket.
pub(crate) fn latency(s: &ToolStat) -> String {
    let buckets: Vec<&(f64, u64)> = s.histogram.iter().collect();
    let n = buckets.len().max(1) as u32;
    let top = buckets.iter().map(|(_, c)| *c).max().unwrap_or(0).max(1);
    svg((480, 200), |root| {
        let mut chart = ChartBuilder::on(root)
            .caption(format!("{}: calls by latency", s.tool), ("sans-serif", 14))
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(36)
            .build_cartesian_2d((0u32..n).into_segmented(), 0u64..top + top / 5 + 1)?;
        chart
            .configure_mesh()
            .x_labels(6)
            .x_desc("≤ ms")
            .x_label_formatter(&|v| match v {
                SegmentValue::CenterOf(i) | SegmentValue::Exact(i) => buckets
                    .get(*i as usize)
                    .map(|(le, _)| format!("{le}"))
                    .unwrap_or_default(),
                SegmentValue::Last => String::new(),
            })
            .draw()?;
        chart.draw_series(
            Histogram::vertical(&chart)
                .style(CONFIRMED.filled())
                .margin(2)
                .data(buckets.iter().enumerate().map(|(i, (_, c))| (i as u32, *c))),
        )?;
        Ok(())
    })
}
