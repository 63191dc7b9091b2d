//! Line charts as inline SVG, written by hand: lines (broken where a value is missing or not a number),
//! dots with a hover title, horizontal threshold lines, a shaded band between two bounds and a vertical line
//! at one x. Axes get round-number ticks. No script is needed to see a chart; classes are styled by
//! `page`'s style sheet. Every label passes through [`escape`].

use std::fmt::Write;

use super::page::escape;

/// What one chart draws. Coordinates are in the data's units; the chart fits them into its box.
#[derive(Debug, Clone)]
pub struct Chart {
    /// Read by screen readers and shown by browsers on hover.
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub x_ticks: fn(f64) -> String,
    pub y_ticks: fn(f64) -> String,
    pub lines: Vec<Line>,
    pub rules: Vec<Rule>,
    pub bands: Vec<Band>,
    pub marker: Option<Marker>,
}

/// A series joined point to point; a non-finite `y` breaks the line.
#[derive(Debug, Clone)]
pub struct Line {
    pub name: String,
    pub class: String,
    /// Each point: x, y and the dot's class and hover text (`None`: no dot).
    pub points: Vec<(f64, f64, Option<Dot>)>,
}

#[derive(Debug, Clone)]
pub struct Dot {
    pub class: String,
    pub title: String,
}

/// A horizontal line across the chart at `y`, labelled at its right end.
#[derive(Debug, Clone)]
pub struct Rule {
    pub y: f64,
    pub label: String,
    pub class: String,
}

/// A shaded area between a lower and an upper bound per x; an open bound (`None`) runs to the chart's edge.
#[derive(Debug, Clone)]
pub struct Band {
    pub class: String,
    pub points: Vec<(f64, Option<f64>, Option<f64>)>,
}

/// A vertical line at `x`, labelled at its top.
#[derive(Debug, Clone)]
pub struct Marker {
    pub x: f64,
    pub label: String,
}

const WIDTH: f64 = 760.0;
const HEIGHT: f64 = 300.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 150.0;
const TOP: f64 = 28.0;
const BOTTOM: f64 = 44.0;

/// The extent of the data, padded, with round ticks.
struct Scale {
    x: (f64, f64),
    y: (f64, f64),
}

impl Scale {
    fn fit(chart: &Chart) -> Scale {
        let xs = chart
            .lines
            .iter()
            .flat_map(|l| l.points.iter().map(|p| p.0))
            .chain(
                chart
                    .bands
                    .iter()
                    .flat_map(|b| b.points.iter().map(|p| p.0)),
            )
            .chain(chart.marker.iter().map(|m| m.x));
        let ys: Vec<f64> = chart
            .lines
            .iter()
            .flat_map(|l| l.points.iter().map(|p| p.1))
            .chain(chart.rules.iter().map(|r| r.y))
            .filter(|y| y.is_finite())
            .collect();
        let x = extent(xs);
        let data = extent(ys.iter().copied());
        // A band may widen the view, but by no more than the data's own span on each side, so one wide bound
        // does not flatten every line.
        let span = (data.1 - data.0).max(data.1.abs() * 0.1).max(1e-9);
        let bounds = chart
            .bands
            .iter()
            .flat_map(|b| b.points.iter().flat_map(|p| [p.1, p.2]))
            .flatten()
            .filter(|v| v.is_finite())
            .map(|v| v.clamp(data.0 - span, data.1 + span));
        let y = extent(ys.into_iter().chain(bounds));
        let y_pad = ((y.1 - y.0) * 0.08).max(span * 0.05);
        let y_low = if y.0 >= 0.0 && y.0 - y_pad < 0.0 {
            0.0
        } else {
            y.0 - y_pad
        };
        Scale {
            x,
            y: (y_low, y.1 + y_pad),
        }
    }

    fn px(&self, x: f64) -> f64 {
        LEFT + (x - self.x.0) / (self.x.1 - self.x.0) * (WIDTH - LEFT - RIGHT)
    }

    fn py(&self, y: f64) -> f64 {
        let clamped = y.clamp(self.y.0, self.y.1);
        HEIGHT - BOTTOM - (clamped - self.y.0) / (self.y.1 - self.y.0) * (HEIGHT - TOP - BOTTOM)
    }
}

/// The smallest and largest finite value, widened to a non-empty range (`(0, 1)` when there are none).
fn extent(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (low, high) = values
        .filter(|v| v.is_finite())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        });
    if low > high {
        (0.0, 1.0)
    } else if low == high {
        let pad = if low == 0.0 { 1.0 } else { low.abs() * 0.5 };
        (low - pad, high + pad)
    } else {
        (low, high)
    }
}

/// About five round ticks (1, 2 or 5 times a power of ten apart) within `range`.
fn ticks(range: (f64, f64)) -> Vec<f64> {
    let raw = (range.1 - range.0) / 5.0;
    let power = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * power)
        .find(|s| *s >= raw)
        .unwrap_or(power * 10.0);
    let mut tick = (range.0 / step).ceil() * step;
    let mut out = Vec::new();
    while tick <= range.1 + step * 1e-9 && out.len() < 20 {
        // Snap -0.0 and float noise (0.30000000000000004) to the step's grid.
        out.push((tick / step).round() * step);
        tick += step;
    }
    out
}

/// The chart as an `<svg>` element.
pub fn line_chart(chart: &Chart) -> String {
    let scale = Scale::fit(chart);
    let mut svg = format!(
        "<svg class=\"chart\" viewBox=\"0 0 {WIDTH} {HEIGHT}\" role=\"img\" aria-label=\"{title}\" \
         xmlns=\"http://www.w3.org/2000/svg\"><title>{title}</title>",
        title = escape(&chart.title)
    );
    axes(&mut svg, chart, &scale);
    for band in &chart.bands {
        band_path(&mut svg, band, &scale);
    }
    let mut labelled: Vec<f64> = Vec::new();
    for rule in &chart.rules {
        let y = scale.py(rule.y);
        // Labels of lines at (nearly) the same height are stacked, not drawn over each other.
        let mut label_y = y;
        while labelled.iter().any(|l| (l - label_y).abs() < 13.0) {
            label_y += 13.0;
        }
        labelled.push(label_y);
        let _ = write!(
            svg,
            "<line class=\"{class}\" x1=\"{LEFT}\" x2=\"{x2:.1}\" y1=\"{y:.1}\" y2=\"{y:.1}\"/>\
             <text class=\"{class}\" x=\"{tx:.1}\" y=\"{ty:.1}\">{label}</text>",
            class = escape(&rule.class),
            x2 = WIDTH - RIGHT,
            tx = WIDTH - RIGHT + 6.0,
            ty = label_y + 4.0,
            label = escape(&rule.label),
        );
    }
    for line in &chart.lines {
        line_path(&mut svg, line, &scale);
    }
    if let Some(marker) = &chart.marker {
        let x = scale.px(marker.x);
        let _ = write!(
            svg,
            "<line class=\"decided\" x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{TOP}\" y2=\"{y2:.1}\"/>\
             <text class=\"decided\" x=\"{x:.1}\" y=\"{ty:.1}\" text-anchor=\"middle\">{label}</text>",
            y2 = HEIGHT - BOTTOM,
            ty = TOP - 8.0,
            label = escape(&marker.label),
        );
    }
    legend(&mut svg, chart);
    svg.push_str("</svg>");
    svg
}

fn axes(svg: &mut String, chart: &Chart, scale: &Scale) {
    let (bottom, right) = (HEIGHT - BOTTOM, WIDTH - RIGHT);
    for y in ticks(scale.y) {
        let py = scale.py(y);
        let _ = write!(
            svg,
            "<line class=\"grid\" x1=\"{LEFT}\" x2=\"{right}\" y1=\"{py:.1}\" y2=\"{py:.1}\"/>\
             <text x=\"{tx}\" y=\"{ty:.1}\" text-anchor=\"end\">{label}</text>",
            tx = LEFT - 6.0,
            ty = py + 4.0,
            label = escape(&(chart.y_ticks)(y)),
        );
    }
    for x in ticks(scale.x) {
        let px = scale.px(x);
        let _ = write!(
            svg,
            "<line class=\"axis\" x1=\"{px:.1}\" x2=\"{px:.1}\" y1=\"{bottom}\" y2=\"{y2}\"/>\
             <text x=\"{px:.1}\" y=\"{ty}\" text-anchor=\"middle\">{label}</text>",
            y2 = bottom + 4.0,
            ty = bottom + 17.0,
            label = escape(&(chart.x_ticks)(x)),
        );
    }
    let _ = write!(
        svg,
        "<line class=\"axis\" x1=\"{LEFT}\" x2=\"{right}\" y1=\"{bottom}\" y2=\"{bottom}\"/>\
         <line class=\"axis\" x1=\"{LEFT}\" x2=\"{LEFT}\" y1=\"{TOP}\" y2=\"{bottom}\"/>\
         <text x=\"{mid:.1}\" y=\"{xl}\" text-anchor=\"middle\">{x_label}</text>\
         <text x=\"12\" y=\"{ymid:.1}\" text-anchor=\"middle\" transform=\"rotate(-90 12 {ymid:.1})\">{y_label}</text>",
        mid = (LEFT + right) / 2.0,
        xl = HEIGHT - 8.0,
        ymid = (TOP + bottom) / 2.0,
        x_label = escape(&chart.x_label),
        y_label = escape(&chart.y_label),
    );
}

fn line_path(svg: &mut String, line: &Line, scale: &Scale) {
    let mut d = String::new();
    let mut pen_down = false;
    for (x, y, _) in &line.points {
        if y.is_finite() {
            let command = if pen_down { 'L' } else { 'M' };
            let _ = write!(d, "{command}{:.1},{:.1} ", scale.px(*x), scale.py(*y));
            pen_down = true;
        } else {
            pen_down = false;
        }
    }
    let class = escape(&line.class);
    if !d.is_empty() {
        let _ = write!(svg, "<path class=\"line {class}\" d=\"{}\"/>", d.trim_end());
    }
    for (x, y, dot) in &line.points {
        if let (true, Some(dot)) = (y.is_finite(), dot) {
            let _ = write!(
                svg,
                "<circle class=\"{class} {}\" cx=\"{:.1}\" cy=\"{:.1}\" r=\"3.5\"><title>{}</title></circle>",
                escape(&dot.class),
                scale.px(*x),
                scale.py(*y),
                escape(&dot.title)
            );
        }
    }
}

fn band_path(svg: &mut String, band: &Band, scale: &Scale) {
    if band.points.is_empty() {
        return;
    }
    let edge = |v: Option<f64>, open: f64| v.filter(|v| v.is_finite()).unwrap_or(open);
    let mut d = String::new();
    for (i, (x, low, _)) in band.points.iter().enumerate() {
        let command = if i == 0 { 'M' } else { 'L' };
        let y = scale.py(edge(*low, scale.y.0));
        let _ = write!(d, "{command}{:.1},{y:.1} ", scale.px(*x));
    }
    for (x, _, high) in band.points.iter().rev() {
        let y = scale.py(edge(*high, scale.y.1));
        let _ = write!(d, "L{:.1},{y:.1} ", scale.px(*x));
    }
    let _ = write!(
        svg,
        "<path class=\"{}\" d=\"{}Z\"/>",
        escape(&band.class),
        d
    );
}

fn legend(svg: &mut String, chart: &Chart) {
    svg.push_str("<g class=\"legend\">");
    for (i, line) in chart.lines.iter().enumerate() {
        let y = TOP + 6.0 + i as f64 * 18.0;
        let x = WIDTH - RIGHT + 64.0;
        let _ = write!(
            svg,
            "<line class=\"line {class}\" x1=\"{x}\" x2=\"{x2}\" y1=\"{y}\" y2=\"{y}\" stroke-width=\"3\"/>\
             <text x=\"{tx}\" y=\"{ty}\">{name}</text>",
            class = escape(&line.class),
            x2 = x + 16.0,
            tx = x + 20.0,
            ty = y + 4.0,
            name = escape(&line.name),
        );
    }
    svg.push_str("</g>");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chart(points: Vec<(f64, f64, Option<Dot>)>) -> Chart {
        Chart {
            title: "t".into(),
            x_label: "x".into(),
            y_label: "y".into(),
            x_ticks: |x| format!("{x}"),
            y_ticks: |y| format!("{y}"),
            lines: vec![Line {
                name: "<b>".into(),
                class: "series-0".into(),
                points,
            }],
            rules: vec![],
            bands: vec![],
            marker: None,
        }
    }

    #[test]
    fn ticks_are_round_numbers_inside_the_range() {
        assert_eq!(
            ticks((0.0, 1.0)),
            vec![0.0, 0.2, 0.4, 0.6000000000000001, 0.8, 1.0]
        );
        assert_eq!(ticks((3.0, 48.0)), vec![10.0, 20.0, 30.0, 40.0]);
    }

    #[test]
    fn a_value_that_is_not_a_number_breaks_the_line_and_gets_no_dot() {
        let dot = || {
            Some(Dot {
                class: "phase-Successful".into(),
                title: "m".into(),
            })
        };
        let svg = line_chart(&chart(vec![
            (0.0, 1.0, dot()),
            (1.0, 2.0, dot()),
            (2.0, f64::NAN, dot()),
            (3.0, 1.5, dot()),
        ]));
        let d = svg
            .split("d=\"")
            .nth(1)
            .and_then(|s| s.split('"').next())
            .unwrap_or("");
        assert_eq!(d.matches('M').count(), 2, "{d}");
        assert_eq!(svg.matches("<circle").count(), 3);
        assert!(svg.contains("&lt;b&gt;") && !svg.contains("<b>"));
        assert!(!svg.contains("NaN"), "{svg}");
    }

    #[test]
    fn a_chart_without_numbers_still_draws_its_axes() {
        let svg = line_chart(&chart(vec![(0.0, f64::NAN, None)]));
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
        assert!(!svg.contains("<path class=\"line"), "{svg}");
        assert!(!svg.contains("NaN"), "{svg}");
    }
}
