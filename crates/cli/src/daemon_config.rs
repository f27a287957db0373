//! The machine-wide daemon's rules (`herd daemon`, `docs/daemon.md`),
//! parsed and checked without I/O: which processes each rule takes, under
//! which policy, on which CPUs.
//!
//! A config is TOML:
//!
//! ```toml
//! [daemon]
//! scan_interval_ms = 1000          # /proc scan period where no proc connector
//!
//! [metrics]
//! listen = "127.0.0.1:9464"        # off when absent
//!
//! [[rule]]                         # first match wins, in file order
//! name = "slurm jobs"
//! policy = "numa:model"            # a catalogue policy, or "auto"
//! reserve_cpus = "8-15"            # optional: only this rule's jobs use them
//! max_cpus = 8                     # optional: a job's share at most
//! share = false                    # may its jobs share CPUs with other rules'
//! [rule.match]                     # every key given must match
//! cgroup = "/system.slice/slurmstepd.scope/job_*"   # glob on the cgroup path
//! unit = "*.service"               # glob on the systemd unit or slice
//! user = "alice"                   # user name or numeric uid
//! exe = "/usr/bin/lmp*"            # glob on the executable's path
//! comm = "lmp*"                    # glob on the process name
//! cmdline = "-in +\\S+\\.lammps"   # regex on the command line
//! slurm = true                     # a Slurm job its prolog registered
//! ```
//!
//! Everything a user could get wrong is refused with the rule's name and
//! the key: an unknown key or policy, a bad glob or regex, a rule that
//! matches on nothing, overlapping reservations, a reservation naming no
//! CPU. Processes that match no rule are load, never touched.

use std::collections::BTreeMap;

use globset::{Glob, GlobMatcher};
use herd_policy::PolicySpec;
use herd_topo::CpuSet;
use regex::Regex;
use serde::Deserialize;

/// A config refused, with where and why.
#[derive(Debug, thiserror::Error, PartialEq)]
#[error("{file}: {where_}: {why}")]
pub struct ConfigError {
    /// The file, as named.
    pub file: String,
    /// The rule and key (or the TOML position).
    pub where_: String,
    /// What is wrong.
    pub why: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    daemon: DaemonSection,
    metrics: Option<MetricsSection>,
    #[serde(default)]
    rule: Vec<RuleSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DaemonSection {
    #[serde(default = "default_scan_ms")]
    scan_interval_ms: u64,
}

impl Default for DaemonSection {
    fn default() -> Self {
        DaemonSection {
            scan_interval_ms: default_scan_ms(),
        }
    }
}

fn default_scan_ms() -> u64 {
    1000
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MetricsSection {
    listen: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleSpec {
    name: String,
    policy: String,
    #[serde(rename = "match")]
    matches: MatchSpec,
    reserve_cpus: Option<String>,
    max_cpus: Option<u32>,
    #[serde(default)]
    share: bool,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct MatchSpec {
    cgroup: Option<String>,
    unit: Option<String>,
    user: Option<String>,
    exe: Option<String>,
    comm: Option<String>,
    cmdline: Option<String>,
    slurm: Option<bool>,
}

/// What a rule's policy is.
#[derive(Debug, Clone, PartialEq)]
pub enum RulePolicy {
    /// A catalogue policy with its parameters.
    Spec(PolicySpec),
    /// Chosen per program from its learned profile.
    Auto,
}

/// A checked rule.
#[derive(Debug)]
pub struct Rule {
    /// Its name, for logs and metrics.
    pub name: String,
    /// The policy its jobs run under.
    pub policy: RulePolicy,
    /// CPUs only its jobs may use.
    pub reserve: Option<CpuSet>,
    /// The most CPUs one of its jobs may hold.
    pub max_cpus: Option<u32>,
    /// Whether its jobs may share CPUs with other rules' jobs.
    pub share: bool,
    cgroup: Option<GlobMatcher>,
    unit: Option<GlobMatcher>,
    user: Option<String>,
    exe: Option<GlobMatcher>,
    comm: Option<GlobMatcher>,
    cmdline: Option<Regex>,
    slurm: bool,
}

/// A checked config.
#[derive(Debug)]
pub struct Config {
    /// /proc scan period, where the proc connector is not used.
    pub scan_interval_ms: u64,
    /// Where the metrics endpoint listens, if anywhere.
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// The rules, first match wins.
    pub rules: Vec<Rule>,
}

/// What the daemon knows of a process when it matches rules.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Process {
    /// Its cgroup path (v2), e.g. `/system.slice/foo.service`.
    pub cgroup: String,
    /// Its systemd unit or slice, from the cgroup path.
    pub unit: Option<String>,
    /// Its real user's name, if known.
    pub user: Option<String>,
    /// Its real uid.
    pub uid: u32,
    /// Its executable's path.
    pub exe: String,
    /// Its name (`comm`).
    pub comm: String,
    /// Its command line, arguments joined by spaces.
    pub cmdline: String,
    /// The Slurm job it belongs to, when the job's prolog registered it
    /// with the daemon.
    pub slurm_job: Option<u64>,
}

impl Rule {
    /// Whether every criterion this rule gives matches `p`.
    pub fn matches(&self, p: &Process) -> bool {
        let glob = |g: &Option<GlobMatcher>, s: Option<&str>| {
            g.as_ref().is_none_or(|g| s.is_some_and(|s| g.is_match(s)))
        };
        let user_ok = self.user.as_ref().is_none_or(|u| {
            p.user.as_deref() == Some(u.as_str()) || u.parse::<u32>().is_ok_and(|uid| uid == p.uid)
        });
        glob(&self.cgroup, Some(&p.cgroup))
            && glob(&self.unit, p.unit.as_deref())
            && user_ok
            && glob(&self.exe, Some(&p.exe))
            && glob(&self.comm, Some(&p.comm))
            && self.cmdline.as_ref().is_none_or(|r| r.is_match(&p.cmdline))
            && (!self.slurm || p.slurm_job.is_some())
    }
}

impl Config {
    /// The first rule that takes `p`, or `None`: `p` is load, untouched.
    pub fn rule_for(&self, p: &Process) -> Option<&Rule> {
        self.rules.iter().find(|r| r.matches(p))
    }

    /// Parses and checks `text` (from `file`) for a machine whose CPUs are
    /// `cpus`.
    pub fn parse(text: &str, file: &str, cpus: &CpuSet) -> Result<Config, ConfigError> {
        let err = |where_: String, why: String| ConfigError {
            file: file.to_string(),
            where_,
            why,
        };
        let spec: File = toml::from_str(text).map_err(|e| {
            let at = e
                .span()
                .map(|s| format!("line {}", text[..s.start.min(text.len())].lines().count().max(1)))
                .unwrap_or_else(|| "the file".into());
            err(at, e.message().to_string())
        })?;
        if !(10..=3_600_000).contains(&spec.daemon.scan_interval_ms) {
            return Err(err(
                "daemon.scan_interval_ms".into(),
                format!("must be 10 to 3600000, got {}", spec.daemon.scan_interval_ms),
            ));
        }
        let metrics_listen = match &spec.metrics {
            None => None,
            Some(m) => Some(m.listen.parse().map_err(|e| {
                err(
                    "metrics.listen".into(),
                    format!("'{}' is not an address:port ({e})", m.listen),
                )
            })?),
        };
        let mut rules = Vec::new();
        let mut reserved: BTreeMap<String, CpuSet> = BTreeMap::new();
        for (i, r) in spec.rule.iter().enumerate() {
            let at = |key: &str| format!("rule {} ('{}').{key}", i + 1, r.name);
            let policy = if r.policy == "auto" {
                RulePolicy::Auto
            } else {
                RulePolicy::Spec(PolicySpec::parse(&r.policy).map_err(|e| err(at("policy"), e.to_string()))?)
            };
            let glob = |key: &str, g: &Option<String>| -> Result<Option<GlobMatcher>, ConfigError> {
                g.as_ref()
                    .map(|g| {
                        Glob::new(g)
                            .map(|g| g.compile_matcher())
                            .map_err(|e| err(at(&format!("match.{key}")), format!("bad glob '{g}': {e}")))
                    })
                    .transpose()
            };
            let m = &r.matches;
            if [&m.cgroup, &m.unit, &m.user, &m.exe, &m.comm, &m.cmdline]
                .iter()
                .all(|v| v.is_none())
                && m.slurm != Some(true)
            {
                return Err(err(
                    at("match"),
                    "matches on nothing: give cgroup, unit, user, exe, comm, cmdline or slurm = true".into(),
                ));
            }
            let cmdline = m
                .cmdline
                .as_ref()
                .map(|c| Regex::new(c).map_err(|e| err(at("match.cmdline"), format!("bad regex: {e}"))))
                .transpose()?;
            let reserve = match &r.reserve_cpus {
                None => None,
                Some(list) => {
                    let set = CpuSet::parse_list(list)
                        .map_err(|e| err(at("reserve_cpus"), format!("'{list}': {e}")))?;
                    if set.is_empty() || !set.iter().all(|c| cpus.contains(c)) {
                        return Err(err(
                            at("reserve_cpus"),
                            format!("'{list}' names CPUs this machine does not have (it has {cpus})"),
                        ));
                    }
                    if let Some((other, _)) = reserved.iter().find(|(_, s)| !s.intersection(&set).is_empty())
                    {
                        return Err(err(
                            at("reserve_cpus"),
                            format!("'{list}' overlaps rule '{other}''s reservation"),
                        ));
                    }
                    reserved.insert(r.name.clone(), set.clone());
                    Some(set)
                }
            };
            if r.max_cpus == Some(0) {
                return Err(err(at("max_cpus"), "must be at least 1".into()));
            }
            rules.push(Rule {
                name: r.name.clone(),
                policy,
                reserve,
                max_cpus: r.max_cpus,
                share: r.share,
                cgroup: glob("cgroup", &m.cgroup)?,
                unit: glob("unit", &m.unit)?,
                user: m.user.clone(),
                exe: glob("exe", &m.exe)?,
                comm: glob("comm", &m.comm)?,
                cmdline,
                slurm: m.slurm == Some(true),
            });
        }
        Ok(Config {
            scan_interval_ms: spec.daemon.scan_interval_ms,
            metrics_listen,
            rules,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpus() -> CpuSet {
        CpuSet::parse_list("0-15").unwrap()
    }

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::parse(text, "herd.toml", &cpus())
    }

    const GOOD: &str = r#"
[metrics]
listen = "127.0.0.1:9464"

[[rule]]
name = "slurm"
policy = "numa:model"
reserve_cpus = "8-15"
[rule.match]
cgroup = "/system.slice/slurmstepd.scope/job_*"

[[rule]]
name = "lammps"
policy = "auto"
max_cpus = 4
[rule.match]
exe = "/usr/bin/lmp*"
cmdline = '-in +\S+\.lammps'
user = "alice"
"#;

    fn process(cgroup: &str, exe: &str, cmdline: &str, user: &str) -> Process {
        Process {
            cgroup: cgroup.into(),
            user: Some(user.into()),
            uid: 1000,
            exe: exe.into(),
            comm: exe.rsplit('/').next().unwrap_or(exe).into(),
            cmdline: cmdline.into(),
            ..Process::default()
        }
    }

    #[test]
    fn the_first_rule_that_matches_takes_a_process_and_others_are_left_alone() {
        let c = parse(GOOD).unwrap();
        assert_eq!(c.metrics_listen, Some("127.0.0.1:9464".parse().unwrap()));
        assert_eq!(c.rules[0].reserve, Some(CpuSet::parse_list("8-15").unwrap()));
        assert_eq!(c.rules[1].policy, RulePolicy::Auto);
        let job = process(
            "/system.slice/slurmstepd.scope/job_42/step_0",
            "/usr/bin/lmp",
            "lmp -in a.lammps",
            "bob",
        );
        assert_eq!(c.rule_for(&job).map(|r| r.name.as_str()), Some("slurm"));
        let mine = process(
            "/user.slice/user-1000.slice",
            "/usr/bin/lmp_mpi",
            "lmp_mpi -in run.lammps",
            "alice",
        );
        assert_eq!(c.rule_for(&mine).map(|r| r.name.as_str()), Some("lammps"));
        // Every criterion must hold: another user, another command line.
        let bobs = process(
            "/user.slice/user-1001.slice",
            "/usr/bin/lmp_mpi",
            "lmp_mpi -in run.lammps",
            "bob",
        );
        assert!(c.rule_for(&bobs).is_none());
        let other = process(
            "/user.slice/user-1000.slice",
            "/usr/bin/lmp_mpi",
            "lmp_mpi -h",
            "alice",
        );
        assert!(c.rule_for(&other).is_none());
        // A numeric uid names the user too.
        let by_uid = parse(&GOOD.replace("user = \"alice\"", "user = \"1000\"")).unwrap();
        assert!(by_uid.rule_for(&mine).is_some());
    }

    #[test]
    fn the_sample_config_shipped_with_the_systemd_unit_checks() {
        let text = include_str!("../../../integrations/systemd/herd.toml");
        let c = parse(text).unwrap();
        assert_eq!(c.rules.len(), 3);
        assert_eq!(c.rules[2].policy, RulePolicy::Auto);
    }

    #[test]
    fn bad_configs_are_refused_naming_the_rule_and_key() {
        let cases = [
            (
                GOOD.replace("policy = \"numa:model\"", "policy = \"numa:magic\""),
                "rule 1 ('slurm').policy",
            ),
            (GOOD.replace("job_*", "job_[*"), "rule 1 ('slurm').match.cgroup"),
            (
                GOOD.replace(r"\S+\.lammps", r"(\S+"),
                "rule 2 ('lammps').match.cmdline",
            ),
            (
                GOOD.replace("max_cpus = 4", "max_cpus = 4\nreserve_cpus = \"12-13\""),
                "rule 2 ('lammps').reserve_cpus",
            ),
            (GOOD.replace("8-15", "8-31"), "rule 1 ('slurm').reserve_cpus"),
            (
                GOOD.replace("max_cpus = 4", "max_cpus = 0"),
                "rule 2 ('lammps').max_cpus",
            ),
            (GOOD.replace("127.0.0.1:9464", "localhost"), "metrics.listen"),
            (
                GOOD.replace("cgroup = \"/system.slice/slurmstepd.scope/job_*\"", ""),
                "rule 1 ('slurm').match",
            ),
            (
                GOOD.replace("policy = \"auto\"", "policy = \"auto\"\ncolour = \"red\""),
                "line",
            ),
        ];
        for (text, want) in cases {
            let e = parse(&text).expect_err(want);
            assert!(
                e.to_string().starts_with(&format!("herd.toml: {want}")),
                "{want}: {e}"
            );
        }
        // Overlapping reservations name the other rule.
        let e = parse(&GOOD.replace("max_cpus = 4", "max_cpus = 4\nreserve_cpus = \"12-13\"")).unwrap_err();
        assert!(e.why.contains("overlaps rule 'slurm'"), "{e}");
    }
}
