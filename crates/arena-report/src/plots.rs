//! The report's plots, as SVG text drawn with plotters: speedup per task with its interval,
//! the fast_p curve, seen-vs-unseen speedups by generalization quadrant, and scores by task type.

use plotters::prelude::*;

use crate::generalization::{Quadrant, TaskGeneralization};
use crate::stats::fast_p;

const SIZE: (u32, u32) = (720, 360);
const FONT: (&str, u32) = ("sans-serif", 14);

/// One task's point in the speedup plot.
pub struct TaskPoint {
    pub speedup: f64,
    pub interval: Option<(f64, f64)>,
}

fn svg(
    draw: impl FnOnce(DrawingArea<SVGBackend, plotters::coord::Shift>) -> Result<(), String>,
) -> String {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, SIZE).into_drawing_area();
        let drawn = root
            .fill(&WHITE)
            .map_err(|e| e.to_string())
            .and_then(|_| draw(root.clone()))
            .and_then(|_| root.present().map_err(|e| e.to_string()));
        if let Err(e) = drawn {
            // A plot that cannot be drawn says why in its place; the report goes on.
            tracing::warn!("plot not drawn: {e}");
        }
    }
    out
}

fn err<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

fn top(values: impl Iterator<Item = f64>) -> f64 {
    values.filter(|v| v.is_finite()).fold(1.5f64, f64::max) * 1.1
}

/// Speedups of every task run, sorted, each with its 95% interval where it has one; a line at 1.
pub fn speedup_per_task(points: &[TaskPoint]) -> String {
    let mut sorted: Vec<&TaskPoint> = points.iter().collect();
    sorted.sort_by(|a, b| a.speedup.total_cmp(&b.speedup));
    let ymax = top(sorted.iter().map(|p| p.interval.map_or(p.speedup, |i| i.1)));
    svg(|root| {
        let n = sorted.len().max(1) as f64;
        let mut c = ChartBuilder::on(&root)
            .caption(
                "Speedup per task run (sorted; bars: 95% bootstrap interval)",
                FONT,
            )
            .margin(12)
            .x_label_area_size(30)
            .y_label_area_size(50)
            .build_cartesian_2d(-0.5..n - 0.5, 0.0..ymax)
            .map_err(err)?;
        c.configure_mesh()
            .x_desc("task runs, slowest to fastest")
            .y_desc("speedup")
            .disable_x_mesh()
            .draw()
            .map_err(err)?;
        c.draw_series(LineSeries::new(
            [(-0.5, 1.0), (n - 0.5, 1.0)],
            BLACK.mix(0.5),
        ))
        .map_err(err)?;
        c.draw_series(sorted.iter().enumerate().filter_map(|(i, p)| {
            p.interval.map(|(lo, hi)| {
                PathElement::new(vec![(i as f64, lo), (i as f64, hi)], BLUE.mix(0.4))
            })
        }))
        .map_err(err)?;
        c.draw_series(sorted.iter().enumerate().map(|(i, p)| {
            let color = if p.speedup > 0.0 { BLUE } else { RED };
            Circle::new((i as f64, p.speedup), 3, color.filled())
        }))
        .map_err(err)?;
        Ok(())
    })
}

/// fast_p over p: the share of tasks correct and faster than p (failures count as not fast).
pub fn fast_p_curve(speedups: &[f64]) -> String {
    let pmax = top(speedups.iter().copied()).max(2.0);
    let ps: Vec<f64> = (0..=100).map(|i| pmax * i as f64 / 100.0).collect();
    let curve = fast_p(speedups, &ps);
    svg(|root| {
        let mut c = ChartBuilder::on(&root)
            .caption("fast_p: tasks correct and faster than p", FONT)
            .margin(12)
            .x_label_area_size(30)
            .y_label_area_size(50)
            .build_cartesian_2d(0.0..pmax, 0.0..100.0)
            .map_err(err)?;
        c.configure_mesh()
            .x_desc("p (speedup threshold)")
            .y_desc("% of tasks")
            .draw()
            .map_err(err)?;
        c.draw_series(LineSeries::new(curve, BLUE.stroke_width(2)))
            .map_err(err)?;
        for p in [1.0, 2.0] {
            c.draw_series(LineSeries::new([(p, 0.0), (p, 100.0)], BLACK.mix(0.3)))
                .map_err(err)?;
        }
        Ok(())
    })
}

fn quadrant_color(q: Quadrant) -> RGBColor {
    match q {
        Quadrant::BothPass => RGBColor(31, 119, 180),
        Quadrant::OptRegression => RGBColor(214, 39, 40),
        Quadrant::OptImprovement => RGBColor(44, 160, 44),
        Quadrant::BothFail => RGBColor(127, 127, 127),
    }
}

/// Seen against unseen speedup per task run, coloured by generalization quadrant; task runs
/// without an unseen speedup (a kernel failed there) sit at 0. Lines at 1 and y = x.
pub fn seen_vs_unseen(items: &[TaskGeneralization]) -> String {
    let m = top(items
        .iter()
        .flat_map(|g| [g.seen_speedup, g.unseen_speedup.unwrap_or(0.0)]));
    svg(|root| {
        let mut c = ChartBuilder::on(&root)
            .caption("Seen vs unseen speedup, by generalization quadrant", FONT)
            .margin(12)
            .x_label_area_size(30)
            .y_label_area_size(50)
            .build_cartesian_2d(0.0..m, 0.0..m)
            .map_err(err)?;
        c.configure_mesh()
            .x_desc("speedup on the visible shapes")
            .y_desc("speedup on unseen shapes")
            .draw()
            .map_err(err)?;
        c.draw_series(LineSeries::new([(0.0, 0.0), (m, m)], BLACK.mix(0.2)))
            .map_err(err)?;
        c.draw_series(LineSeries::new([(1.0, 0.0), (1.0, m)], BLACK.mix(0.4)))
            .map_err(err)?;
        c.draw_series(LineSeries::new([(0.0, 1.0), (m, 1.0)], BLACK.mix(0.4)))
            .map_err(err)?;
        for q in [
            Quadrant::BothPass,
            Quadrant::OptRegression,
            Quadrant::OptImprovement,
            Quadrant::BothFail,
        ] {
            let color = quadrant_color(q);
            c.draw_series(items.iter().filter(|g| g.quadrant == q).map(|g| {
                Circle::new(
                    (g.seen_speedup, g.unseen_speedup.unwrap_or(0.0)),
                    4,
                    color.filled(),
                )
            }))
            .map_err(err)?
            .label(q.as_str())
            .legend(move |(x, y)| Circle::new((x, y), 4, color.filled()));
        }
        c.configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperLeft)
            .draw()
            .map_err(err)?;
        Ok(())
    })
}

/// Every task run's score, one column per task type (spread sideways so that equal scores
/// stay visible), with the type's mean as a bar.
pub fn scores_by_type(scores: &[(String, f64)]) -> String {
    let mut types: Vec<&str> = scores.iter().map(|(t, _)| t.as_str()).collect();
    types.sort();
    types.dedup();
    let ymax = top(scores.iter().map(|(_, s)| *s)).max(440.0);
    svg(|root| {
        let n = types.len().max(1) as f64;
        let mut c = ChartBuilder::on(&root)
            .caption(
                "Score by task type (20·compiled + 100·correct + 100·speedup·correct)",
                FONT,
            )
            .margin(12)
            .x_label_area_size(30)
            .y_label_area_size(50)
            .build_cartesian_2d(-0.5..n - 0.5, 0.0..ymax)
            .map_err(err)?;
        let labels = types.clone();
        c.configure_mesh()
            .disable_x_mesh()
            .x_labels(types.len().max(1))
            .x_label_formatter(&move |x| {
                let i = x.round();
                if (x - i).abs() < 1e-6 && i >= 0.0 {
                    labels
                        .get(i as usize)
                        .map(|s| s.to_string())
                        .unwrap_or_default()
                } else {
                    String::new()
                }
            })
            .y_desc("score")
            .draw()
            .map_err(err)?;
        for (i, t) in types.iter().enumerate() {
            let mine: Vec<f64> = scores
                .iter()
                .filter(|(x, _)| x == t)
                .map(|(_, s)| *s)
                .collect();
            let k = mine.len().max(1) as f64;
            c.draw_series(mine.iter().enumerate().map(|(j, s)| {
                let dx = 0.6 * ((j as f64 + 0.5) / k - 0.5);
                Circle::new((i as f64 + dx, *s), 3, BLUE.mix(0.6).filled())
            }))
            .map_err(err)?;
            let mean = mine.iter().sum::<f64>() / k;
            c.draw_series(LineSeries::new(
                [(i as f64 - 0.35, mean), (i as f64 + 0.35, mean)],
                RED.stroke_width(2),
            ))
            .map_err(err)?;
        }
        Ok(())
    })
}
