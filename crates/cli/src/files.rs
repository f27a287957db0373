//! The batch file (`herd batch`, docs/batch.md) and the cluster file
//! (`herd place`), parsed and checked as text: what needs the file system
//! (working directories, programs on `PATH`, the profile database) is the
//! commands' part.

use std::collections::{BTreeMap, BTreeSet};

use herd_model::ModelParams;
use herd_plan::character::s2_model;
use herd_policy::Level;
use serde::Deserialize;

/// A problem with an input file: the line (1-based) where one is known,
/// and why.
#[derive(Debug, Clone, PartialEq)]
pub struct FileError {
    /// The line, 1-based, where the file shows it.
    pub line: Option<usize>,
    /// What is wrong.
    pub why: String,
}

/// A batch file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BatchFile {
    /// The batch's name (default: the file's stem).
    pub name: Option<String>,
    #[serde(default)]
    program: Vec<toml::Spanned<ProgramSpec>>,
}

/// One `[[program]]` of a batch file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProgramSpec {
    /// Its name.
    pub name: String,
    /// The command and its arguments.
    pub cmd: Vec<String>,
    /// How many copies to start (default 1).
    pub copies: Option<u32>,
    /// Its working directory, relative to the batch file's folder.
    pub cwd: Option<String>,
    #[serde(default)]
    /// Variables added to its environment.
    pub env: BTreeMap<String, String>,
    /// How memory-bound it is, where the machine cannot count it.
    pub memory: Option<Level>,
    /// How many threads it runs: sets OMP_NUM_THREADS (unless `env` does),
    /// replaces `{threads}` in `cmd`, and sizes layouts from its start.
    pub threads: Option<u32>,
}

/// The most threads a batch program may declare (the kernel's own
/// default `threads-max` on a large machine is in the millions; a typo
/// like 80000000 is not a thread count).
pub const MAX_DECLARED_THREADS: u32 = 65_536;

/// The most programs one batch starts (copies counted).
pub const MAX_PROGRAMS: usize = 10_000;

/// Line numbers of byte offsets, by binary search over the line starts
/// (a scan per program made loading 20k programs take 7 s).
struct Lines(Vec<usize>);

impl Lines {
    fn of(text: &str) -> Lines {
        Lines(text.match_indices('\n').map(|(i, _)| i).collect())
    }

    fn line(&self, offset: usize) -> usize {
        self.0.partition_point(|&nl| nl < offset) + 1
    }
}

impl BatchFile {
    /// Parses and checks a batch file: every program names a command,
    /// names are unique, copies are at least one and, over the batch, at
    /// most [`MAX_PROGRAMS`].
    pub fn parse(text: &str) -> Result<BatchFile, FileError> {
        let lines = Lines::of(text);
        let file: BatchFile = toml::from_str(text).map_err(|e| FileError {
            line: e.span().map(|s| lines.line(s.start)),
            why: e.message().to_string(),
        })?;
        if file.program.is_empty() {
            return Err(FileError {
                line: None,
                why: "the batch has no [[program]]".into(),
            });
        }
        let mut names = BTreeSet::new();
        let mut total = 0usize;
        for sp in &file.program {
            let p = sp.get_ref();
            let bad = |why: String| FileError {
                line: Some(lines.line(sp.span().start)),
                why: format!("program '{}': {why}", p.name),
            };
            if p.cmd.is_empty() || p.cmd[0].is_empty() {
                return Err(bad("cmd must name a program".into()));
            }
            // Names key the programs' logs and results.
            if !names.insert(p.name.as_str()) {
                return Err(bad("a name used twice".into()));
            }
            let copies = p.copies.unwrap_or(1);
            if copies == 0 {
                return Err(bad("copies must be >= 1".into()));
            }
            if p.threads.is_some_and(|n| n == 0 || n > MAX_DECLARED_THREADS) {
                return Err(bad(format!("threads must be from 1 to {MAX_DECLARED_THREADS}")));
            }
            total += copies as usize;
            if total > MAX_PROGRAMS {
                return Err(bad(format!(
                    "more than {MAX_PROGRAMS} programs in one batch (copies counted): \
                     herd holds a process, its threads' files and a pipe for each"
                )));
            }
        }
        Ok(file)
    }

    /// The programs, each with the line it starts on.
    pub fn programs(&self, text: &str) -> Vec<(usize, &ProgramSpec)> {
        let lines = Lines::of(text);
        self.program
            .iter()
            .map(|sp| (lines.line(sp.span().start), sp.get_ref()))
            .collect()
    }
}

/// A cluster file (`herd place`): the machine every node is, the model,
/// and each node's running jobs.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterFile {
    /// Every node's machine, as a synthetic topology.
    pub machine: String,
    #[serde(default = "s2_model")]
    /// The NUMA model's parameters (default: S2's).
    pub model: ModelParams,
    /// The nodes.
    pub node: Vec<NodeSpec>,
}

/// One node of a cluster file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeSpec {
    /// Its name.
    pub name: String,
    #[serde(default)]
    /// Its running jobs.
    pub job: Vec<JobSpec>,
}

/// One running job of a cluster file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobSpec {
    /// Its name.
    pub name: String,
    /// Its threads on each NUMA node.
    pub threads_per_numa: Vec<u32>,
    /// Its memory traffic, GB/s (one of this, `hint`, `program`).
    pub bw_gbps: Option<f64>,
    /// Its memory traffic as a level.
    pub hint: Option<Level>,
    /// The program, whose traffic the database knows.
    pub program: Option<String>,
    #[serde(default = "half")]
    /// The share of its memory all its threads touch (default 0.5).
    pub shared_fraction: f64,
}

fn half() -> f64 {
    0.5
}

impl ClusterFile {
    /// Parses a cluster file and checks that no node is listed twice (two
    /// entries for one node would count its jobs twice and could place the
    /// new job on it twice). The machine and jobs are checked against each
    /// other by `herd place`, which knows the machine.
    pub fn parse(text: &str) -> Result<ClusterFile, FileError> {
        let lines = Lines::of(text);
        let file: ClusterFile = toml::from_str(text).map_err(|e| FileError {
            line: e.span().map(|s| lines.line(s.start)),
            why: e.message().to_string(),
        })?;
        let mut names = BTreeSet::new();
        for n in &file.node {
            if !names.insert(n.name.as_str()) {
                return Err(FileError {
                    line: None,
                    why: format!("node {} is listed twice", n.name),
                });
            }
        }
        Ok(file)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_counted_from_one() {
        let l = Lines::of("a\nbb\n\nc");
        assert_eq!(
            [l.line(0), l.line(1), l.line(2), l.line(5), l.line(6)],
            [1, 1, 2, 3, 4]
        );
    }

    #[test]
    fn a_batch_names_the_line_of_its_problem() {
        let text = "[[program]]\nname = \"a\"\ncmd = [\"x\"]\n\n[[program]]\nname = \"a\"\ncmd = [\"y\"]\n";
        let e = BatchFile::parse(text).unwrap_err();
        assert_eq!(e.line, Some(5));
        assert!(e.why.contains("used twice"), "{}", e.why);
    }

    #[test]
    fn a_declared_thread_count_is_checked() {
        let with = |n: &str| format!("[[program]]\nname = \"a\"\ncmd = [\"x\"]\nthreads = {n}\n");
        assert_eq!(
            BatchFile::parse(&with("8")).unwrap().program[0].get_ref().threads,
            Some(8)
        );
        for bad in ["0", "70000"] {
            let e = BatchFile::parse(&with(bad)).unwrap_err();
            assert!(e.why.contains("threads must be from 1 to 65536"), "{}", e.why);
        }
    }
}
