//! One AnalysisRun as an HTML section: per metric its chart and the numbers under it; for the error-rate
//! judge the rates per look, the bound on their ratio against the margin, the deciding look and the sentence
//! saying why. The numbers come from [`model`]; this file only lays them out. [`section`] is the entry point
//! the reports and the dashboard share.

pub mod model;
pub mod sentence;
#[cfg(test)]
mod tests;

use std::fmt::Write;

use jiff::SignedDuration;

use self::model::{ConditionKind, ErrorRateView, MeasurementsView, MetricView, Picture, RunView};
use self::sentence::{number, percent};
use super::page::escape;
use super::svg::{Band, Chart, Dot, Line, Marker, Rule, line_chart};
use crate::api::{AnalysisPhase, AnalysisRun};
use crate::engine::judge::Verdict;

/// The run as a `<section>`: its name, phase and message, then each metric.
pub fn section(run: &AnalysisRun) -> String {
    let view = RunView::of(run);
    let mut html = format!(
        "<section class=\"analysis-run\" id=\"run-{id}\">\n<h2>AnalysisRun {name} {phase}</h2>\n",
        id = escape(&view.name),
        name = escape(&view.name),
        phase = badge(view.phase),
    );
    if let Some(message) = &view.message {
        let _ = writeln!(html, "<p class=\"message\">{}</p>", escape(message));
    }
    for metric in &view.metrics {
        metric_html(&mut html, metric);
    }
    html.push_str("</section>\n");
    html
}

fn badge(phase: Option<AnalysisPhase>) -> String {
    let phase = phase.map_or("Pending", AnalysisPhase::as_str);
    format!("<span class=\"phase phase-{phase}\">{phase}</span>")
}

fn metric_html(html: &mut String, metric: &MetricView) {
    let _ = writeln!(
        html,
        "<div class=\"metric\">\n<h3>metric {} {}</h3>",
        escape(&metric.name),
        badge(metric.phase)
    );
    if let Some(message) = &metric.message {
        let _ = writeln!(html, "<p class=\"message\">{}</p>", escape(message));
    }
    match &metric.picture {
        Picture::Measurements(m) => measurements_html(html, &metric.name, m),
        Picture::ErrorRate(e) => error_rate_html(html, &metric.name, e),
        Picture::Unreadable(why) => {
            let _ = writeln!(
                html,
                "<p class=\"message\">cannot draw: {}</p>",
                escape(why)
            );
        }
    }
    html.push_str("</div>\n");
}

/// `+1m30s` from seconds since the run started.
fn elapsed(seconds: f64) -> String {
    if !seconds.is_finite() {
        return String::new();
    }
    let whole = seconds.round() as i64;
    if whole == 0 {
        return "0s".to_string();
    }
    format!("+{:#}", SignedDuration::from_secs(whole))
}

fn value_tick(y: f64) -> String {
    let magnitude = y.abs();
    if magnitude != 0.0 && !(0.001..1e6).contains(&magnitude) {
        format!("{y:.2e}")
    } else {
        let text = format!("{y:.4}");
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

fn measurements_html(html: &mut String, name: &str, view: &MeasurementsView) {
    if view.points.is_empty() {
        html.push_str("<p class=\"muted\">no measurements yet</p>\n");
        return;
    }
    let lines = view
        .series
        .iter()
        .enumerate()
        .map(|(i, series)| Line {
            name: series.clone(),
            class: format!("series-{}", i % 3),
            points: view
                .points
                .iter()
                .map(|p| {
                    let y = p.numbers.get(i).copied().unwrap_or(f64::NAN);
                    let title =
                        format!("{} {}: {} {}", elapsed(p.seconds), series, p.value, p.phase);
                    let dot = Dot {
                        class: format!("phase-{}", p.phase),
                        title,
                    };
                    (p.seconds, y, Some(dot))
                })
                .collect(),
        })
        .collect();
    let rules = view
        .thresholds
        .iter()
        .map(|t| {
            let (class, word) = match t.condition {
                ConditionKind::Success => ("success", "success"),
                ConditionKind::Failure => ("failure", "failure"),
            };
            let series = view.series.get(t.series).map_or("result", String::as_str);
            Rule {
                y: t.value,
                label: format!(
                    "{word}: {series} {} {}",
                    t.comparison.symbol(),
                    value_tick(t.value)
                ),
                class: class.to_string(),
            }
        })
        .collect();
    html.push_str(&line_chart(&Chart {
        title: format!("{name}: measurements over time"),
        x_label: "time since the run started".to_string(),
        y_label: "measured value".to_string(),
        x_ticks: elapsed,
        y_ticks: value_tick,
        lines,
        rules,
        bands: vec![],
        marker: None,
    }));
    html.push_str("\n<table class=\"measurements\"><tr><th>when</th><th>value</th><th>phase</th><th>message</th></tr>\n");
    for p in &view.points {
        let _ = writeln!(
            html,
            "<tr><td>{}</td><td>{}</td><td class=\"phase-{phase}\">{phase}</td><td>{}</td></tr>",
            escape(
                &p.at
                    .map(|t| t.strftime("%H:%M:%S").to_string())
                    .unwrap_or_default()
            ),
            escape(&p.value),
            escape(p.message.as_deref().unwrap_or("")),
            phase = p.phase,
        );
    }
    html.push_str("</table>\n");
}

fn error_rate_html(html: &mut String, name: &str, view: &ErrorRateView) {
    let class = match (view.decided_at, view.verdict) {
        (Some(_), Verdict::Fail) => "fail",
        (Some(_), _) => "pass",
        (None, _) => "inconclusive",
    };
    let _ = writeln!(
        html,
        "<p class=\"why {class}\">{}</p>",
        escape(&view.sentence)
    );
    if view.looks.is_empty() {
        return;
    }
    let marker = view.decided_at.map(|n| Marker {
        x: n as f64,
        label: format!("decided at look {n}"),
    });
    let per_look = |name: &str, class: &str, value: fn(&model::LookView) -> f64| Line {
        name: name.to_string(),
        class: class.to_string(),
        points: view
            .looks
            .iter()
            .map(|l| {
                let title = format!("look {}: {name} {}", l.number, percent(value(l)));
                (
                    l.number as f64,
                    value(l),
                    Some(Dot {
                        class: class.to_string(),
                        title,
                    }),
                )
            })
            .collect(),
    };
    let look_tick = |x: f64| {
        if x.fract() == 0.0 {
            format!("{x}")
        } else {
            String::new()
        }
    };
    html.push_str(&line_chart(&Chart {
        title: format!("{name}: canary and baseline error rates per look"),
        x_label: "look".to_string(),
        y_label: "error rate".to_string(),
        x_ticks: look_tick,
        y_ticks: percent,
        lines: vec![
            per_look("canary", "canary", |l| l.result.canary_rate),
            per_look("baseline", "baseline", |l| l.result.baseline_rate),
            per_look("allowed", "allowed", |l| l.allowed_rate),
        ],
        rules: vec![],
        bands: vec![],
        marker: marker.clone(),
    }));
    let confidence = percent(view.params.confidence);
    let boundary = 1.0 + view.params.max_relative_increase;
    html.push_str(&line_chart(&Chart {
        title: format!("{name}: canary/baseline error-rate ratio with its {confidence} bound"),
        x_label: "look".to_string(),
        y_label: "canary rate / baseline rate".to_string(),
        x_ticks: look_tick,
        y_ticks: number,
        lines: vec![per_look("ratio", "canary", |l| {
            l.result.canary_rate / l.result.baseline_rate
        })],
        rules: vec![Rule {
            y: boundary,
            label: format!("margin {}", number(boundary)),
            class: "margin".to_string(),
        }],
        bands: vec![Band {
            class: "bound".to_string(),
            points: view
                .looks
                .iter()
                .map(|l| (l.number as f64, l.result.ratio_lower, l.result.ratio_upper))
                .collect(),
        }],
        marker,
    }));
    looks_table(html, view, &confidence);
}

fn looks_table(html: &mut String, view: &ErrorRateView, confidence: &str) {
    let _ = writeln!(
        html,
        "\n<table class=\"looks\"><tr><th>look</th><th>canary errors / requests</th><th>canary rate</th>\
         <th>baseline errors / requests</th><th>baseline rate</th><th>ratio {confidence} bound</th><th>verdict</th></tr>"
    );
    let bound = |b: Option<f64>| b.map_or("-".to_string(), number);
    for l in &view.looks {
        let r = &l.result;
        let _ = writeln!(
            html,
            "<tr{}><td>{}</td><td>{} / {}</td><td>{}</td><td>{} / {}</td><td>{}</td><td>{} to {}</td><td>{}</td></tr>",
            if view.decided_at == Some(l.number) {
                " class=\"decided\""
            } else {
                ""
            },
            l.number,
            r.canary_errors,
            r.canary_requests,
            percent(r.canary_rate),
            r.baseline_errors,
            r.baseline_requests,
            percent(r.baseline_rate),
            bound(r.ratio_lower),
            bound(r.ratio_upper),
            r.verdict,
        );
    }
    html.push_str("</table>\n");
}
