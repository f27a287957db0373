//! `herd top`: a live terminal view of what a running `herd daemon`
//! manages (its jobs, from its socket) and of the machine's CPUs by NUMA
//! node and core kind, each with its load and the job holding it. Without
//! a daemon it shows the CPUs alone. `--once` prints one frame as text (for
//! scripts and tests) instead of taking the terminal.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::layout::{Constraint, Direction, Layout};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Paragraph, Row, Table, Wrap};

use crate::common::Failure;
use crate::daemon_wire::{self as wire, Status};

/// Arguments of `herd top`.
#[derive(Args, Debug)]
pub struct TopArgs {
    /// The daemon's state directory [default: /run/herd, or $HERD_RUN_DIR].
    #[arg(long, value_name = "DIR")]
    state_dir: Option<PathBuf>,
    /// Refresh period in milliseconds.
    #[arg(long, default_value_t = 1000)]
    interval_ms: u64,
    /// Print one frame (after one interval, so loads are measured) and exit.
    #[arg(long)]
    once: bool,
}

/// CPU ticks from /proc/stat: (busy, total) per CPU.
fn cpu_ticks() -> BTreeMap<u32, (u64, u64)> {
    let text = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("cpu")?;
            let mut f = rest.split_whitespace();
            let cpu: u32 = f.next()?.parse().ok()?;
            let v: Vec<u64> = f.filter_map(|x| x.parse().ok()).collect();
            // user nice system idle iowait irq softirq steal
            let total: u64 = v.iter().take(8).sum();
            let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
            Some((cpu, (total.saturating_sub(idle), total)))
        })
        .collect()
}

struct Frame {
    machine: herd_topo::Machine,
    status: Option<Status>,
    dir: PathBuf,
    /// Busy share per CPU over the last interval.
    load: BTreeMap<u32, f64>,
    counters: bool,
}

fn draw(f: &mut ratatui::Frame<'_>, fr: &Frame) {
    let area = f.area();
    let rows = Layout::default()
        .direction(Direction::Vertical)
        .constraints([
            Constraint::Length(4),
            Constraint::Min(5),
            Constraint::Length(fr.machine.numa_nodes().len() as u16 * 2 + 4),
        ])
        .split(area);
    let head = match &fr.status {
        Some(s) => s.headline(),
        None => format!(
            "no herd daemon answers at {}: the machine's CPUs only",
            wire::socket_path(&fr.dir).display()
        ),
    };
    f.render_widget(
        Paragraph::new(head).wrap(Wrap { trim: true }).block(
            Block::default()
                .borders(Borders::ALL)
                .title(" herd top (q quits) "),
        ),
        rows[0],
    );
    let jobs: Vec<Row> = fr
        .status
        .iter()
        .flat_map(|s| &s.jobs)
        .map(|j| {
            Row::new(vec![
                j.id.to_string(),
                j.pid.to_string(),
                j.name.clone(),
                j.rule.clone(),
                j.policy.clone(),
                j.state.clone(),
                j.cpus.clone(),
                j.decisions.to_string(),
                format!("{:.1}", j.decide_s * 1e3),
            ])
        })
        .collect();
    let widths = [
        Constraint::Length(4),
        Constraint::Length(8),
        Constraint::Length(16),
        Constraint::Min(12),
        Constraint::Length(18),
        Constraint::Length(8),
        Constraint::Length(10),
        Constraint::Length(9),
        Constraint::Length(9),
    ];
    f.render_widget(
        Table::new(jobs, widths)
            .header(
                Row::new(vec![
                    "job",
                    "pid",
                    "name",
                    "rule",
                    "policy",
                    "state",
                    "cpus",
                    "decisions",
                    "decide ms",
                ])
                .style(Style::default().add_modifier(Modifier::BOLD)),
            )
            .block(Block::default().borders(Borders::ALL).title(" jobs ")),
        rows[1],
    );
    // Which job holds each CPU.
    let mut holder: BTreeMap<u32, u64> = BTreeMap::new();
    for j in fr.status.iter().flat_map(|s| &s.jobs) {
        if let Ok(c) = herd_topo::CpuSet::parse_list(&j.cpus) {
            for cpu in c.iter() {
                holder.insert(cpu, j.id);
            }
        }
    }
    let m = &fr.machine;
    let mut lines: Vec<Line> = Vec::new();
    for node in m.numa_nodes() {
        for (k, kind) in m.kinds().iter().enumerate() {
            let cpus: Vec<String> = node
                .cpus
                .iter()
                .filter(|c| m.cpu(*c).is_some_and(|x| x.kind == k))
                .map(|c| {
                    let load = fr
                        .load
                        .get(&c)
                        .map_or("?".into(), |l| format!("{:.0}%", l * 100.0));
                    let by = holder.get(&c).map(|j| format!(" j{j}")).unwrap_or_default();
                    format!("{c}:{load}{by}")
                })
                .collect();
            if !cpus.is_empty() {
                lines.push(Line::from(format!(
                    "node {} · kind {} (capacity {}): {}",
                    node.os,
                    kind.label,
                    kind.capacity,
                    cpus.join("  ")
                )));
            }
        }
    }
    lines.push(Line::from(if fr.counters {
        "memory bandwidth: counters exist here; the daemon does not export per-job bandwidth yet".to_string()
    } else {
        "memory bandwidth: no LLC-miss counters on this machine (herd doctor): not measured".to_string()
    }));
    f.render_widget(
        Paragraph::new(lines).wrap(Wrap { trim: true }).block(
            Block::default()
                .borders(Borders::ALL)
                .title(" CPUs: load, and the job holding each "),
        ),
        rows[2],
    );
}

fn sample(dir: &Path, before: &mut BTreeMap<u32, (u64, u64)>) -> (Option<Status>, BTreeMap<u32, f64>) {
    let status = wire::connect(dir).and_then(|c| wire::ask::<Status>(&c, &wire::Request::Status).ok());
    let now = cpu_ticks();
    let load = now
        .iter()
        .filter_map(|(cpu, (busy, total))| {
            let (b0, t0) = before.get(cpu)?;
            let dt = total.saturating_sub(*t0);
            (dt > 0).then(|| (*cpu, busy.saturating_sub(*b0) as f64 / dt as f64))
        })
        .collect();
    *before = now;
    (status, load)
}

/// `herd top`.
pub fn run(args: &TopArgs) -> Result<(), Failure> {
    if args.interval_ms == 0 {
        return Err(Failure::Input(anyhow::anyhow!(
            "--interval-ms must be at least 1"
        )));
    }
    let dir = args.state_dir.clone().unwrap_or_else(herd_runtime::peers::dir);
    let machine = crate::common::this_machine()?;
    let counters = herd_runtime::perf::open_counter(herd_runtime::perf::Event::LlcMisses, 0).is_ok();
    let interval = Duration::from_millis(args.interval_ms);
    let mut before = cpu_ticks();
    let mut frame = Frame {
        machine,
        status: None,
        dir: dir.clone(),
        load: BTreeMap::new(),
        counters,
    };
    if args.once {
        std::thread::sleep(interval);
        (frame.status, frame.load) = sample(&dir, &mut before);
        let mut t = Terminal::new(TestBackend::new(140, 30)).map_err(|e| Failure::Internal(e.into()))?;
        t.draw(|f| draw(f, &frame))
            .map_err(|e| Failure::Internal(e.into()))?;
        let buf = t.backend().buffer();
        let width = buf.area.width as usize;
        let mut out = String::new();
        for row in buf.content.chunks(width) {
            let line: String = row.iter().map(|c| c.symbol()).collect();
            out += line.trim_end();
            out.push('\n');
        }
        return Ok(crate::output::print(&out)?);
    }
    let mut terminal = ratatui::init();
    let result = (|| -> std::io::Result<()> {
        loop {
            (frame.status, frame.load) = sample(&dir, &mut before);
            terminal.draw(|f| draw(f, &frame))?;
            if crossterm::event::poll(interval)? {
                if let crossterm::event::Event::Key(k) = crossterm::event::read()? {
                    use crossterm::event::{KeyCode, KeyModifiers};
                    let ctrl_c = k.code == KeyCode::Char('c') && k.modifiers.contains(KeyModifiers::CONTROL);
                    if matches!(k.code, KeyCode::Char('q') | KeyCode::Esc) || ctrl_c {
                        return Ok(());
                    }
                }
            }
        }
    })();
    ratatui::restore();
    result.map_err(|e| Failure::Internal(e.into()))
}
