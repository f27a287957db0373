//! `herd plot`: draws a figure described in JSON as SVG, for the scripts
//! (`scripts/s3-summary.py --svg`), so they need no plotting library of
//! their own: the drawing is `herd_sim::chart`'s, with plotters.

use std::io::Read;
use std::path::PathBuf;

use clap::Args;
use herd_sim::chart::{GroupedBars, grouped_bars};

use crate::common::Failure;
use crate::output;

/// Arguments of `herd plot`.
#[derive(Args, Debug)]
pub struct PlotArgs {
    /// The figure as JSON (`-`: standard input): bars in groups in panels,
    /// as `herd_sim::chart::GroupedBars` describes.
    #[arg(value_name = "FIGURE.json")]
    figure: PathBuf,
    /// Write the SVG here instead of standard output.
    #[arg(long, value_name = "FILE.svg")]
    out: Option<PathBuf>,
}

/// `herd plot`.
pub fn run(args: &PlotArgs) -> Result<(), Failure> {
    let name = args.figure.display().to_string();
    let input = |why: String| Failure::Input(anyhow::anyhow!("{name}: {why}"));
    let mut text = String::new();
    if args.figure.as_os_str() == "-" {
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|e| input(e.to_string()))?;
    } else {
        text = std::fs::read_to_string(&args.figure).map_err(|e| input(e.to_string()))?;
    }
    let fig: GroupedBars = serde_json::from_str(&text).map_err(|e| input(e.to_string()))?;
    let svg = grouped_bars(&fig).map_err(|e| Failure::Internal(e.into()))?;
    match &args.out {
        None => output::print(&svg)?,
        Some(path) => std::fs::write(path, svg)
            .map_err(|e| Failure::Input(anyhow::anyhow!("--out {}: {e}", path.display())))?,
    }
    Ok(())
}
