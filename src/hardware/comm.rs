//! Collective costs over the communication grid: link selection for a group of ranks and the
//! cheaper of two algorithms per collective (ring vs tree / recursive doubling / Bruck).

use super::{DeviceProfile, Topology};

/// A group of ranks that communicate, reduced to what prices a collective.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CommGroup {
    pub size: u32,
    /// Effective bandwidth per device, bytes/s.
    pub bandwidth: f64,
    /// Per-step latency, seconds.
    pub latency_s: f64,
}

impl CommGroup {
    pub const SINGLE: CommGroup = CommGroup { size: 1, bandwidth: f64::INFINITY, latency_s: 0.0 };

    fn n(&self) -> f64 {
        self.size as f64
    }

    /// All-reduce of an `m`-byte tensor: min(ring, tree).
    pub fn all_reduce(&self, m: f64) -> f64 {
        if self.size <= 1 || m <= 0.0 {
            return 0.0;
        }
        let (n, l, bw) = (self.n(), self.latency_s, self.bandwidth);
        let ring = 2.0 * (n - 1.0) * l + 2.0 * (n - 1.0) * m / (n * bw);
        let tree = 2.0 * n.log2() * l + 2.0 * m / bw;
        ring.min(tree)
    }

    /// All-gather where each rank contributes `m_local` bytes: min(ring, recursive doubling).
    pub fn all_gather(&self, m_local: f64) -> f64 {
        if self.size <= 1 || m_local <= 0.0 {
            return 0.0;
        }
        let (n, l, bw) = (self.n(), self.latency_s, self.bandwidth);
        let xfer = (n - 1.0) * m_local / bw;
        ((n - 1.0) * l).min(n.log2() * l) + xfer
    }

    /// Reduce-scatter of an `m_full`-byte tensor.
    pub fn reduce_scatter(&self, m_full: f64) -> f64 {
        if self.size <= 1 || m_full <= 0.0 {
            return 0.0;
        }
        let (n, l, bw) = (self.n(), self.latency_s, self.bandwidth);
        ((n - 1.0) * l).min(n.log2() * l) + (n - 1.0) * m_full / (n * bw)
    }

    /// All-to-all where each rank exchanges `per_rank` bytes with the others (own share
    /// excluded): min(pairwise, Bruck) latency plus the bytes.
    pub fn all_to_all(&self, per_rank: f64) -> f64 {
        if self.size <= 1 || per_rank <= 0.0 {
            return 0.0;
        }
        let (n, l, bw) = (self.n(), self.latency_s, self.bandwidth);
        ((n - 1.0) * l).min(n.log2() * l) + per_rank / bw
    }
}

impl DeviceProfile {
    /// Grid coordinates of `rank` (outermost first, last dimension fastest).
    fn coords(&self, mut rank: u64, out: &mut [u64]) {
        for (i, level) in self.comm_grid.iter().enumerate().rev() {
            out[i] = rank % level.size as u64;
            rank /= level.size as u64;
        }
    }

    /// The link a group of ranks communicates over: the outermost grid level on which their
    /// coordinates differ decides bandwidth, latency and efficiency.
    pub fn comm_group(&self, ranks: &[u64]) -> CommGroup {
        if ranks.len() <= 1 {
            return CommGroup::SINGLE;
        }
        let dims = self.comm_grid.len();
        let mut first = vec![0u64; dims];
        let mut other = vec![0u64; dims];
        self.coords(ranks[0], &mut first);
        let mut diff_dim = dims;
        for &r in &ranks[1..] {
            self.coords(r, &mut other);
            if let Some(d) = (0..dims).find(|&d| first[d] != other[d]) {
                diff_dim = diff_dim.min(d);
            }
        }
        if diff_dim == dims {
            // Several ranks mapped on the same device: no transfer cost.
            return CommGroup::SINGLE;
        }
        let level = &self.comm_grid[diff_dim];
        let mut bw = level.bandwidth.bytes_per_s * level.efficiency;
        if level.topology == Topology::FullMesh {
            let max_group: u64 = self.comm_grid[diff_dim..].iter().map(|l| l.size as u64).product();
            if max_group > 1 {
                bw *= (ranks.len() as f64 - 1.0).min(max_group as f64 - 1.0) / (max_group as f64 - 1.0);
            }
        }
        CommGroup { size: ranks.len() as u32, bandwidth: bw, latency_s: level.latency_us * 1e-6 }
    }

    /// Ranks `start, start+stride, …` (`count` of them).
    pub fn strided_group(&self, count: u64, stride: u64) -> CommGroup {
        let ranks: Vec<u64> = (0..count).map(|i| i * stride).collect();
        self.comm_group(&ranks)
    }
}

#[cfg(test)]
mod tests {
    use crate::hardware::DeviceRegistry;

    #[test]
    fn test_device_intra_node_mesh_scales_with_group_size() {
        let reg = DeviceRegistry::builtin();
        let d = reg.get("TEST_DEVICE").unwrap();
        let tp8 = d.strided_group(8, 1);
        assert!((tp8.bandwidth - 137.2e9).abs() < 1e3, "{}", tp8.bandwidth);
        assert!((tp8.latency_s - 1.3e-6).abs() < 1e-12);
        let tp2 = d.strided_group(2, 1);
        assert!((tp2.bandwidth - 137.2e9 / 7.0).abs() < 1e3);
        // 16 ranks span two nodes: the inter-node CLOS level prices it.
        let tp16 = d.strided_group(16, 1);
        assert!((tp16.bandwidth - 35e9).abs() < 1e3);
        assert!((tp16.latency_s - 10e-6).abs() < 1e-12);
    }

    #[test]
    fn all_reduce_takes_cheaper_algorithm() {
        let g = super::CommGroup { size: 8, bandwidth: 137.2e9, latency_s: 1.3e-6 };
        let m = 14000.0 * 5120.0 * 2.0;
        let ring = 2.0 * 7.0 * 1.3e-6 + 2.0 * 7.0 * m / (8.0 * 137.2e9);
        let tree = 2.0 * 3.0 * 1.3e-6 + 2.0 * m / 137.2e9;
        assert!((g.all_reduce(m) - ring.min(tree)).abs() < 1e-12);
        assert!(ring < tree, "large messages prefer the ring");
        let small = 193.0 * 5120.0 * 2.0;
        let tree_small = 2.0 * 3.0 * 1.3e-6 + 2.0 * small / 137.2e9;
        assert!((g.all_reduce(small) - tree_small).abs() < 1e-12, "small messages prefer the tree");
    }
}
