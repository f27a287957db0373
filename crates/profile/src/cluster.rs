//! S2's a-priori estimates: past jobs grouped by agglomerative hierarchical
//! clustering, and a new job given the mean characteristics of the cluster
//! nearest to it by mean distance to the cluster's members.
//!
//! S2 found complete linkage (cluster distance = the largest distance
//! between members) and average linkage (the mean distance) group its jobs
//! best; both are here, with single linkage for comparison. Merges use the
//! Lance-Williams updates on a distance matrix: O(n^2) memory and O(n^3)
//! time in the worst case, which is why [`MAX_POINTS`] bounds the input (a
//! profile database holds one row per program, hundreds at most). Written
//! here because the crates that offer it either pull a numeric stack or do
//! not expose the merge heights needed to cut by distance.

use serde::{Deserialize, Serialize};

/// Inputs larger than this are refused: the matrix alone would be 200 MB.
pub const MAX_POINTS: usize = 5000;

/// How the distance between two clusters follows from their members'.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Linkage {
    /// The largest member distance (S2's choice, with average).
    Complete,
    /// The mean member distance (UPGMA).
    Average,
    /// The smallest member distance.
    Single,
}

/// One merge of the dendrogram: clusters `a` and `b` (indices as in
/// scipy: points are 0..n, the i-th merge makes cluster n + i).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Merge {
    /// First cluster merged.
    pub a: usize,
    /// Second cluster merged.
    pub b: usize,
    /// Their linkage distance.
    pub distance: f64,
}

/// Why clustering was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClusterError {
    /// More than [`MAX_POINTS`] points.
    #[error("{0} points to cluster; at most {MAX_POINTS}")]
    TooMany(usize),
    /// The distance matrix is not n x n, symmetric, with a zero diagonal,
    /// finite and non-negative; the pair names the first bad entry.
    #[error("distance ({0}, {1}) breaks the matrix rules (square, symmetric, zero diagonal, finite, >= 0)")]
    BadMatrix(usize, usize),
}

/// Agglomerative clustering of `dist` (a full symmetric matrix): the n - 1
/// merges, closest first. Ties merge the lowest indices first, so the
/// result is deterministic.
pub fn hierarchical(dist: &[Vec<f64>], linkage: Linkage) -> Result<Vec<Merge>, ClusterError> {
    let n = dist.len();
    if n > MAX_POINTS {
        return Err(ClusterError::TooMany(n));
    }
    for (i, row) in dist.iter().enumerate() {
        if row.len() != n {
            return Err(ClusterError::BadMatrix(i, row.len().min(n)));
        }
        for (j, &d) in row.iter().enumerate() {
            if !(d.is_finite() && d >= 0.0) || d != dist[j][i] || (i == j && d != 0.0) {
                return Err(ClusterError::BadMatrix(i, j));
            }
        }
    }
    let mut d: Vec<Vec<f64>> = dist.to_vec();
    // Active clusters: matrix row -> (cluster id, size).
    let mut active: Vec<Option<(usize, usize)>> = (0..n).map(|i| Some((i, 1))).collect();
    let mut merges = Vec::with_capacity(n.saturating_sub(1));
    for step in 0..n.saturating_sub(1) {
        let mut best = (f64::INFINITY, 0, 0);
        for i in 0..n {
            if active[i].is_none() {
                continue;
            }
            for j in i + 1..n {
                if active[j].is_some() && d[i][j] < best.0 {
                    best = (d[i][j], i, j);
                }
            }
        }
        let (dist_ij, i, j) = best;
        let ((id_i, n_i), (id_j, n_j)) = (active[i].unwrap(), active[j].unwrap());
        merges.push(Merge {
            a: id_i.min(id_j),
            b: id_i.max(id_j),
            distance: dist_ij,
        });
        // Row i becomes the merged cluster; row j retires.
        for k in 0..n {
            if k == i || k == j || active[k].is_none() {
                continue;
            }
            let (dki, dkj) = (d[k][i], d[k][j]);
            let merged = match linkage {
                Linkage::Complete => dki.max(dkj),
                Linkage::Single => dki.min(dkj),
                Linkage::Average => (n_i as f64 * dki + n_j as f64 * dkj) / (n_i + n_j) as f64,
            };
            d[k][i] = merged;
            d[i][k] = merged;
        }
        active[i] = Some((n + step, n_i + n_j));
        active[j] = None;
    }
    Ok(merges)
}

/// Cluster labels 0..k for the n points after undoing the last k - 1
/// merges (k clusters; clamped to 1..=n). Labels number clusters in order
/// of their lowest point.
pub fn cut(n: usize, merges: &[Merge], k: usize) -> Vec<usize> {
    let keep = n.saturating_sub(k.clamp(1, n.max(1)));
    labels(n, &merges[..keep.min(merges.len())])
}

/// Cluster labels after every merge closer than `distance`.
pub fn cut_at(n: usize, merges: &[Merge], distance: f64) -> Vec<usize> {
    let keep = merges.iter().take_while(|m| m.distance <= distance).count();
    labels(n, &merges[..keep])
}

/// Labels from the first merges (union-find over cluster ids).
fn labels(n: usize, merges: &[Merge]) -> Vec<usize> {
    // parent over cluster ids 0..n + merges.len().
    let mut parent: Vec<usize> = (0..n + merges.len()).collect();
    fn root(p: &mut [usize], mut x: usize) -> usize {
        while p[x] != x {
            p[x] = p[p[x]];
            x = p[x];
        }
        x
    }
    for (i, m) in merges.iter().enumerate() {
        parent[m.a] = n + i;
        parent[m.b] = n + i;
    }
    let mut label_of_root = std::collections::BTreeMap::new();
    (0..n)
        .map(|p| {
            let r = root(&mut parent, p);
            let next = label_of_root.len();
            *label_of_root.entry(r).or_insert(next)
        })
        .collect()
}

/// The cluster nearest a new point: the label whose members are closest on
/// average (S2), given the new point's distance to every clustered point.
/// `None` without points. Returns (label, mean distance).
pub fn nearest(labels: &[usize], dist_to: &[f64]) -> Option<(usize, f64)> {
    let k = labels.iter().copied().max()? + 1;
    let (mut sum, mut count) = (vec![0.0; k], vec![0usize; k]);
    for (&l, &d) in labels.iter().zip(dist_to) {
        sum[l] += d;
        count[l] += 1;
    }
    (0..k)
        .filter(|&l| count[l] > 0)
        .map(|l| (l, sum[l] / count[l] as f64))
        .min_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)))
}

/// Euclidean distances between feature vectors, as a full matrix.
pub fn euclidean_matrix(points: &[Vec<f64>]) -> Vec<Vec<f64>> {
    points
        .iter()
        .map(|a| points.iter().map(|b| euclidean(a, b)).collect())
        .collect()
}

/// Euclidean distance over the common dimensions.
pub fn euclidean(a: &[f64], b: &[f64]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y) * (x - y))
        .sum::<f64>()
        .sqrt()
}

/// Distance between two program keys (executable and arguments) as a
/// new job's descriptor: the Jaccard distance of their tokens (split at
/// spaces, `/`, `=` and `,`), in [0, 1]. A new program is compared with past
/// ones by what it is called with, since its behaviour is not known yet.
pub fn key_distance(a: &str, b: &str) -> f64 {
    let tokens = |s: &str| -> std::collections::BTreeSet<String> {
        s.split(|c: char| c.is_whitespace() || "/=,".contains(c))
            .filter(|t| !t.is_empty())
            .map(str::to_string)
            .collect()
    };
    let (ta, tb) = (tokens(a), tokens(b));
    let union = ta.union(&tb).count();
    if union == 0 {
        return 0.0;
    }
    1.0 - ta.intersection(&tb).count() as f64 / union as f64
}

/// S2's a-priori estimate of a value (here: memory traffic) for a program
/// with no history: past programs with known values are clustered on
/// log(value) (a factor e apart is distance 1), cut at `cut` (so members of
/// a cluster are within that of each other, under complete linkage), and
/// the new key takes the mean value of the cluster nearest it by mean key
/// distance. Returns (estimate, the cluster's member keys), or `None`
/// without history.
pub fn prior_estimate(
    key: &str,
    known: &[(String, f64)],
    linkage: Linkage,
    cut: f64,
) -> Option<(f64, Vec<String>)> {
    let known: Vec<&(String, f64)> = known.iter().filter(|(_, v)| v.is_finite() && *v > 0.0).collect();
    if known.is_empty() || known.len() > MAX_POINTS {
        return None;
    }
    let logs: Vec<Vec<f64>> = known.iter().map(|(_, v)| vec![v.ln()]).collect();
    let merges = hierarchical(&euclidean_matrix(&logs), linkage).ok()?;
    let labels = cut_at(known.len(), &merges, cut);
    let to: Vec<f64> = known.iter().map(|(k, _)| key_distance(key, k)).collect();
    let (label, _) = nearest(&labels, &to)?;
    let members: Vec<&(String, f64)> = known
        .iter()
        .zip(&labels)
        .filter(|(_, l)| **l == label)
        .map(|(m, _)| *m)
        .collect();
    let mean = members.iter().map(|(_, v)| v).sum::<f64>() / members.len() as f64;
    Some((mean, members.iter().map(|(k, _)| k.clone()).collect()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Three well-separated groups with some spread: every linkage S2
    /// recommends finds them exactly.
    fn three_groups() -> (Vec<Vec<f64>>, Vec<usize>) {
        let centres = [(0.0, 0.0), (10.0, 0.0), (5.0, 9.0)];
        let mut pts = Vec::new();
        let mut truth = Vec::new();
        for (g, (cx, cy)) in centres.iter().enumerate() {
            for i in 0..7 {
                let a = i as f64 * 0.9;
                pts.push(vec![cx + a.cos() * (0.3 + 0.1 * i as f64), cy + a.sin() * 0.8]);
                truth.push(g);
            }
        }
        (pts, truth)
    }

    #[test]
    fn complete_and_average_linkage_recover_known_groups() {
        let (pts, truth) = three_groups();
        let d = euclidean_matrix(&pts);
        for linkage in [Linkage::Complete, Linkage::Average, Linkage::Single] {
            let merges = hierarchical(&d, linkage).unwrap();
            assert_eq!(merges.len(), pts.len() - 1);
            // These three linkages never invert: merge heights only grow.
            assert!(merges.windows(2).all(|w| w[0].distance <= w[1].distance + 1e-12));
            let labels = cut(pts.len(), &merges, 3);
            assert_eq!(labels, truth, "{linkage:?}");
        }
    }

    #[test]
    fn linkages_differ_where_they_should() {
        // Points on a line at 0, 1, 2 and 10: complete linkage merges {0,1}
        // at 1, then {0,1,2} at 2, then the far point at 10 (the largest
        // distance); average at mean(10, 9, 8) = 9; single at 8.
        let pts: Vec<Vec<f64>> = [0.0, 1.0, 2.0, 10.0].iter().map(|&x| vec![x]).collect();
        let d = euclidean_matrix(&pts);
        let last = |l| hierarchical(&d, l).unwrap().last().unwrap().distance;
        assert_eq!(last(Linkage::Complete), 10.0);
        assert_eq!(last(Linkage::Average), 9.0);
        assert_eq!(last(Linkage::Single), 8.0);
        let merges = hierarchical(&d, Linkage::Complete).unwrap();
        assert_eq!(cut_at(4, &merges, 2.5), vec![0, 0, 0, 1]);
        assert_eq!(cut(4, &merges, 4), vec![0, 1, 2, 3]);
        assert_eq!(cut(4, &merges, 1), vec![0, 0, 0, 0]);
    }

    #[test]
    fn a_new_point_goes_to_the_cluster_with_the_least_mean_distance() {
        let (pts, truth) = three_groups();
        let q = vec![9.0, 1.0];
        let to: Vec<f64> = pts.iter().map(|p| euclidean(p, &q)).collect();
        let (label, mean) = nearest(&truth, &to).unwrap();
        assert_eq!(label, 1);
        assert!(mean < 2.0);
        assert_eq!(nearest(&[], &[]), None);
    }

    #[test]
    fn a_new_program_takes_the_traffic_of_the_programs_it_resembles() {
        let known: Vec<(String, f64)> = [
            ("/opt/res/sim --grid big --wells 40", 30.0),
            ("/opt/res/sim --grid big --wells 60", 34.0),
            ("/opt/res/sim --grid small", 28.0),
            ("/usr/bin/povray scene.pov", 0.4),
            ("/usr/bin/povray other.pov", 0.5),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), *v))
        .collect();
        let (bw, members) = prior_estimate(
            "/opt/res/sim --grid big --wells 80",
            &known,
            Linkage::Average,
            1.0,
        )
        .unwrap();
        assert_eq!(members.len(), 3, "{members:?}");
        assert!((bw - 92.0 / 3.0).abs() < 1e-9, "{bw}");
        let (bw, _) = prior_estimate("/usr/bin/povray new.pov", &known, Linkage::Complete, 1.0).unwrap();
        assert!((bw - 0.45).abs() < 1e-9);
        assert_eq!(prior_estimate("x", &[], Linkage::Average, 1.0), None);
        assert_eq!(key_distance("a b", "a b"), 0.0);
        assert_eq!(key_distance("a", "b"), 1.0);
    }

    #[test]
    fn bad_matrices_are_refused() {
        assert_eq!(
            hierarchical(&[vec![0.0, 1.0], vec![2.0, 0.0]], Linkage::Complete),
            Err(ClusterError::BadMatrix(0, 1))
        );
        assert_eq!(
            hierarchical(&[vec![0.0, f64::NAN], vec![f64::NAN, 0.0]], Linkage::Average),
            Err(ClusterError::BadMatrix(0, 1))
        );
        assert_eq!(
            hierarchical(&[vec![0.0, 1.0]], Linkage::Average),
            Err(ClusterError::BadMatrix(0, 1))
        );
        assert_eq!(hierarchical(&[], Linkage::Average), Ok(vec![]));
    }
}
