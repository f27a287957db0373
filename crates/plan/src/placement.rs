//! How jobs are placed over a cluster's nodes: the node selectors of
//! [`crate::node`] and S2's two references, by name.

use crate::node::Selector;

/// The references that are not selectors.
pub const REFERENCES: [(&str, &str); 3] = [
    (
        "one-per-node",
        "S2's baseline: every job alone on a node of its own (as many nodes as jobs)",
    ),
    (
        "worst",
        "S2's worst packing: jobs waiting together sorted by memory traffic, heaviest first, packed first-fit",
    ),
    (
        "s2-rule",
        "numa:model without herd's correction of jobs placed together (swap_improve): S2's rule alone",
    ),
];

/// How jobs are placed on a cluster's nodes: a node selector, or one of
/// S2's references.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClusterPlacement {
    /// A node-selection policy.
    Select(Selector),
    /// Every job alone on a node of its own.
    OnePerNode,
    /// Waiting jobs sorted by memory traffic, heaviest first, then first fit.
    Worst,
    /// `numa:model`'s rule without its batch correction.
    S2Rule,
}

impl ClusterPlacement {
    /// Its name, as scenarios and `--policy` take it.
    pub fn name(self) -> &'static str {
        match self {
            ClusterPlacement::Select(s) => s.name(),
            ClusterPlacement::OnePerNode => REFERENCES[0].0,
            ClusterPlacement::Worst => REFERENCES[1].0,
            ClusterPlacement::S2Rule => REFERENCES[2].0,
        }
    }
}

impl std::str::FromStr for ClusterPlacement {
    type Err = String;
    /// A selector's or a reference's name; anything else is an error
    /// naming the known ones.
    fn from_str(name: &str) -> Result<ClusterPlacement, String> {
        if let Some(s) = Selector::parse(name) {
            return Ok(ClusterPlacement::Select(s));
        }
        match name {
            "one-per-node" => Ok(ClusterPlacement::OnePerNode),
            "worst" => Ok(ClusterPlacement::Worst),
            "s2-rule" => Ok(ClusterPlacement::S2Rule),
            _ => {
                let known: Vec<&str> = Selector::ALL
                    .iter()
                    .map(|(_, n, _)| *n)
                    .chain(REFERENCES.iter().map(|(n, _)| *n))
                    .collect();
                Err(format!(
                    "unknown placement '{name}' (known: {})",
                    known.join(", ")
                ))
            }
        }
    }
}

impl std::fmt::Display for ClusterPlacement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
