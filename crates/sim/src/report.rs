//! The HTML report of `herd sim --report`: bars per policy and a timeline
//! of which job ran on which CPU. Self-contained SVG drawn by
//! [`crate::chart`], no scripts.

use std::fmt::Write;

use crate::chart::{self, ChartError, Span};
use crate::{Comparison, PolicyResult};

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A chart under a heading, or the reason it could not be drawn.
fn section(out: &mut String, title: &str, chart: Result<String, ChartError>) {
    let _ = writeln!(out, "<h3>{}</h3>", esc(title));
    match chart {
        Ok(svg) => out.push_str(&svg),
        Err(e) => {
            let _ = writeln!(out, "<p>{}</p>", esc(&e.to_string()));
        }
    }
    out.push('\n');
}

fn timeline(out: &mut String, r: &PolicyResult, job_names: &[String]) {
    let Some(segments) = &r.timeline else { return };
    let spans: Vec<Span> = segments
        .iter()
        .map(|s| Span {
            row: s.cpu,
            start_s: s.start_ns as f64 * 1e-9,
            end_s: s.end_ns as f64 * 1e-9,
            series: s.job,
            // Shared CPUs are drawn paler: each thread got 1/sharing of it.
            opacity: 1.0 / s.sharing.max(1) as f64,
        })
        .collect();
    let title = format!(
        "Timeline: {} (seed {}), the job at the head of each CPU",
        r.name, r.seed
    );
    section(out, &title, chart::timeline(&spans, job_names));
    if segments.len() >= crate::MAX_SEGMENTS {
        let _ = writeln!(out, "<p>Timeline cut at {} segments.</p>", crate::MAX_SEGMENTS);
    }
}

/// S4's consolidation study over time: each policy's batch work per
/// interval (lines), the batch job's core budget (grey steps, right axis),
/// and the intervals that missed the service's objective (shaded).
fn consolidation(out: &mut String, c: &Comparison) {
    let Some(service) = &c.service else { return };
    let runs: Vec<&PolicyResult> = c
        .policies
        .iter()
        .filter(|r| r.seed == c.seed && r.consolidation.is_some())
        .collect();
    if runs.is_empty() || service.intervals.is_empty() {
        return;
    }
    let dt = service.interval_ns as f64 * 1e-9;
    let steps: Vec<(f64, f64, f64)> = service
        .intervals
        .iter()
        .map(|i| (i.start_s, i.start_s + dt, i.batch_cores as f64))
        .collect();
    let shade: Vec<(f64, f64)> = service
        .intervals
        .iter()
        .filter(|i| i.violated)
        .map(|i| (i.start_s, i.start_s + dt))
        .collect();
    let lines: Vec<chart::Line> = runs
        .iter()
        .filter_map(|r| {
            let cr = r.consolidation.as_ref()?;
            let points = cr
                .batch
                .iter()
                .map(|b| (b.start_s + dt / 2.0, b.ginstr_per_s))
                .collect();
            Some((format!("{} ({:.2})", r.name, cr.batch_ginstr_per_s), points))
        })
        .collect();
    section(
        out,
        "Consolidation: batch work per interval and its core budget",
        chart::lines_over_steps(
            "batch work (G instructions/s)",
            &lines,
            "batch core budget (cores)",
            &steps,
            &shade,
        ),
    );
    let _ = writeln!(
        out,
        "<p>{}: {} of {} intervals missed the p99 objective of {} ms (shaded).</p>",
        esc(&service.service),
        shade.len(),
        service.intervals.len(),
        service.slo_ms
    );
}

/// The report as one HTML page.
pub fn html(c: &Comparison, job_names: &[String]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>herd sim: {0}</title></head><body style=\"font-family:sans-serif\"><h1>herd sim: {0}</h1>",
        esc(&c.scenario)
    );
    let label = |r: &PolicyResult| format!("{} (seed {})", r.name, r.seed);
    let series =
        |f: &dyn Fn(&PolicyResult) -> f64| c.policies.iter().map(|r| (label(r), f(r))).collect::<Vec<_>>();
    for (title, axis, f) in [
        (
            "Makespan (lower is better)",
            "makespan (s)",
            &(|r: &PolicyResult| r.makespan_s) as &dyn Fn(&PolicyResult) -> f64,
        ),
        ("Throughput (higher is better)", "weighted speedup (x)", &|r| {
            r.throughput
        }),
        ("Energy (lower is better)", "energy (J)", &|r| r.energy_j),
        ("Migrations", "migrations (count)", &|r| r.migrations as f64),
    ] {
        section(&mut out, title, chart::bars(axis, &series(f)));
    }
    consolidation(&mut out, c);
    for r in &c.policies {
        timeline(&mut out, r, job_names);
    }
    out.push_str("</body></html>\n");
    out
}
