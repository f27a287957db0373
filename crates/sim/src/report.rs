//! The HTML report of `herd sim --report`: bars per policy and a timeline
//! of which job ran on which CPU. Self-contained SVG, no scripts.

use std::fmt::Write;

use crate::{Comparison, PolicyResult};

const PALETTE: [&str; 10] = [
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f",
    "#bab0ac",
];

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn bars(out: &mut String, title: &str, unit: &str, values: &[(String, f64)]) {
    let max = values.iter().map(|v| v.1).fold(0.0, f64::max).max(1e-12);
    let (w, row) = (640.0, 26.0);
    let h = 30.0 + row * values.len() as f64;
    let _ = writeln!(
        out,
        "<h3>{}</h3><svg width=\"{w}\" height=\"{h}\" role=\"img\">",
        esc(title)
    );
    for (i, (name, v)) in values.iter().enumerate() {
        let y = 10.0 + row * i as f64;
        let len = 380.0 * v / max;
        let _ = writeln!(
            out,
            "<text x=\"0\" y=\"{}\" font-size=\"12\">{}</text><rect x=\"200\" y=\"{y}\" width=\"{len:.1}\" height=\"18\" fill=\"{}\"/><text x=\"{:.1}\" y=\"{}\" font-size=\"12\">{v:.3} {unit}</text>",
            y + 13.0,
            esc(name),
            PALETTE[i % PALETTE.len()],
            205.0 + len,
            y + 13.0
        );
    }
    out.push_str("</svg>\n");
}

fn timeline(out: &mut String, r: &PolicyResult, job_names: &[String]) {
    let Some(segments) = &r.timeline else { return };
    let cpus: Vec<u32> = {
        let mut c: Vec<u32> = segments.iter().map(|s| s.cpu).collect();
        c.sort_unstable();
        c.dedup();
        c
    };
    let end = segments.iter().map(|s| s.end_ns).max().unwrap_or(1).max(1) as f64;
    let (w, row) = (900.0, 14.0);
    let h = 40.0 + row * cpus.len() as f64;
    let _ = writeln!(out, "<h3>Timeline: {} (seed {})</h3>", esc(&r.name), r.seed);
    let _ = writeln!(out, "<svg width=\"{}\" height=\"{h}\" role=\"img\">", w + 60.0);
    for (i, cpu) in cpus.iter().enumerate() {
        let _ = writeln!(
            out,
            "<text x=\"0\" y=\"{}\" font-size=\"10\">CPU {cpu}</text>",
            10.0 + row * i as f64 + 10.0
        );
    }
    for s in segments {
        let i = cpus.binary_search(&s.cpu).unwrap_or(0);
        let x = 50.0 + w * s.start_ns as f64 / end;
        let width = (w * (s.end_ns - s.start_ns) as f64 / end).max(0.5);
        // Shared CPUs are drawn paler: each thread got 1/sharing of it.
        let opacity = 1.0 / s.sharing.max(1) as f64;
        let name = job_names.get(s.job).map_or("?", String::as_str);
        let _ = writeln!(
            out,
            "<rect x=\"{x:.2}\" y=\"{}\" width=\"{width:.2}\" height=\"{}\" fill=\"{}\" fill-opacity=\"{opacity:.2}\"><title>{} on CPU {}, x{}</title></rect>",
            10.0 + row * i as f64,
            row - 2.0,
            PALETTE[s.job % PALETTE.len()],
            esc(name),
            s.cpu,
            s.sharing
        );
    }
    let _ = writeln!(
        out,
        "<text x=\"50\" y=\"{}\" font-size=\"10\">0 s</text><text x=\"{}\" y=\"{}\" font-size=\"10\">{:.2} s</text>",
        h - 8.0,
        w,
        h - 8.0,
        end * 1e-9
    );
    out.push_str("</svg>\n");
    if segments.len() >= crate::MAX_SEGMENTS {
        let _ = writeln!(out, "<p>Timeline cut at {} segments.</p>", crate::MAX_SEGMENTS);
    }
}

/// S4's consolidation study over time: each policy's batch work per
/// interval (lines), and the batch job's core budget (grey steps, on the
/// same scale as one core's worth of the best interval's work per core).
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
    let (w, h, left, top) = (900.0, 260.0, 50.0, 20.0);
    let end_s = service.intervals.len() as f64 * service.interval_ns as f64 * 1e-9;
    let top_rate = runs
        .iter()
        .flat_map(|r| r.consolidation.as_ref().into_iter().flat_map(|c| c.batch.iter()))
        .map(|b| b.ginstr_per_s)
        .fold(0.0, f64::max)
        .max(1e-9);
    let most_cores = service
        .intervals
        .iter()
        .map(|i| i.batch_cores)
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let x = |t: f64| left + w * t / end_s;
    let y_rate = |v: f64| top + h * (1.0 - v / top_rate);
    let y_cores = |n: f64| top + h * (1.0 - n / most_cores);
    let _ = writeln!(
        out,
        "<h3>Consolidation: batch work per interval (G instructions/s) and its core budget (grey, 0 to {most_cores})</h3><svg width=\"{}\" height=\"{}\" role=\"img\">",
        w + left + 10.0,
        h + top + 30.0
    );
    let dt = service.interval_ns as f64 * 1e-9;
    let steps: String = service
        .intervals
        .iter()
        .map(|i| {
            format!(
                "{:.1},{:.1} {:.1},{:.1} ",
                x(i.start_s),
                y_cores(i.batch_cores as f64),
                x(i.start_s + dt),
                y_cores(i.batch_cores as f64)
            )
        })
        .collect();
    let _ = writeln!(
        out,
        "<polyline points=\"{steps}\" fill=\"none\" stroke=\"#bbb\" stroke-width=\"6\"/>"
    );
    for i in service.intervals.iter().filter(|i| i.violated) {
        let _ = writeln!(
            out,
            "<rect x=\"{:.1}\" y=\"{top}\" width=\"{:.1}\" height=\"{h}\" fill=\"#e15759\" fill-opacity=\"0.15\"><title>SLO missed at {:.1} s</title></rect>",
            x(i.start_s),
            x(i.start_s + dt) - x(i.start_s),
            i.start_s
        );
    }
    for (k, r) in runs.iter().enumerate() {
        let Some(cr) = &r.consolidation else { continue };
        let points: String = cr
            .batch
            .iter()
            .map(|b| format!("{:.1},{:.1} ", x(b.start_s + dt / 2.0), y_rate(b.ginstr_per_s)))
            .collect();
        let colour = PALETTE[k % PALETTE.len()];
        let _ = writeln!(
            out,
            "<polyline points=\"{points}\" fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\"/><text x=\"{:.1}\" y=\"{:.1}\" font-size=\"12\" fill=\"{colour}\">{} ({:.2})</text>",
            left + 10.0,
            top + 14.0 * (k + 1) as f64,
            esc(&r.name),
            cr.batch_ginstr_per_s
        );
    }
    let _ = writeln!(
        out,
        "<text x=\"{left}\" y=\"{:.1}\" font-size=\"10\">0 s</text><text x=\"{:.1}\" y=\"{:.1}\" font-size=\"10\">{end_s:.1} s</text><text x=\"0\" y=\"{:.1}\" font-size=\"10\">{top_rate:.1}</text></svg>",
        h + top + 20.0,
        left + w - 20.0,
        h + top + 20.0,
        top + 4.0
    );
    let _ = writeln!(
        out,
        "<p>{}: {} of {} intervals missed the p99 objective of {} ms (shaded).</p>",
        esc(&service.service),
        service.intervals.iter().filter(|i| i.violated).count(),
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
    bars(
        &mut out,
        "Makespan (lower is better)",
        "s",
        &series(&|r| r.makespan_s),
    );
    bars(
        &mut out,
        "Throughput: weighted speedup (higher is better)",
        "",
        &series(&|r| r.throughput),
    );
    bars(
        &mut out,
        "Energy (lower is better)",
        "J",
        &series(&|r| r.energy_j),
    );
    bars(&mut out, "Migrations", "", &series(&|r| r.migrations as f64));
    consolidation(&mut out, c);
    for r in &c.policies {
        timeline(&mut out, r, job_names);
    }
    out.push_str("</body></html>\n");
    out
}
