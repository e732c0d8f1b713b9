//! Where each server of a deployment runs: its node (or the whole nodes it spans), the GPUs it
//! owns there (`CUDA_VISIBLE_DEVICES`), and the ports it listens on. Servers are packed onto
//! nodes of the device profile's `gpus_per_host` (8 unless it says otherwise) in order (prefill before decode), each on its
//! own GPUs; a server larger than a node takes whole nodes. Ports are distinct across the whole
//! deployment, so that any two servers can share a host.

use super::deployment::{Deployment, Role};

/// The port bases of an engine: every server gets `http + k` (k: its index in the deployment),
/// `aux + first device` (a range as wide as its devices: vLLM's NIXL side channel counts up
/// per rank from it, SGLang's bootstrap port) and `dist + k` (vLLM's data-parallel RPC port,
/// SGLang's `--dist-init-addr`).
#[derive(Debug, Clone, Copy)]
pub struct PortBases {
    pub http: u32,
    pub aux: u32,
    pub dist: u32,
}

/// The port clients (or the router) reach.
pub(super) const FRONT_PORT: u32 = 8000;

/// One server: a process group serving one engine instance (one node's share of it per node).
#[derive(Debug, Clone, PartialEq)]
pub struct Server {
    pub role: Role,
    /// Index of its instance kind in [`Deployment::instances`].
    pub kind: usize,
    /// 0-based among the servers of its kind, and how many there are.
    pub index: u32,
    pub count: u32,
    /// Devices of the whole server.
    pub devices: u32,
    /// First node, and how many nodes it spans (1: it fits one node).
    pub node: u32,
    pub nodes: u32,
    /// GPU indices it owns on each of its nodes.
    pub gpus: Vec<u32>,
    pub port: u32,
    pub aux_port: u32,
    pub dist_port: u32,
}

impl Server {
    /// `CUDA_VISIBLE_DEVICES` of its processes.
    pub fn visible_devices(&self) -> String {
        self.gpus.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
    }
}

/// The servers of a deployment on its nodes.
#[derive(Debug, Clone, PartialEq)]
pub struct Placement {
    pub servers: Vec<Server>,
    pub nodes: u32,
    pub gpus_per_node: u32,
}

/// Packs `shapes` (per instance kind: servers, devices per server) onto nodes.
pub(super) fn place(d: &Deployment, shapes: &[(u32, u32)], ports: PortBases) -> Result<Placement, String> {
    let per_node = d.gpus_per_node.max(1);
    let (mut node, mut used, mut first_device, mut k) = (0u32, 0u32, 0u32, 0u32);
    let mut servers = Vec::new();
    for (kind, (&(count, devices), inst)) in shapes.iter().zip(&d.instances).enumerate() {
        for index in 0..count {
            let (start, nodes, gpus) = if devices <= per_node {
                if used + devices > per_node {
                    node += 1;
                    used = 0;
                }
                let gpus: Vec<u32> = (used..used + devices).collect();
                used += devices;
                (node, 1, gpus)
            } else {
                if !devices.is_multiple_of(per_node) {
                    return Err(format!(
                        "a {} server of {devices} devices does not fill whole nodes of {per_node} on {}; plan instances of a multiple of {per_node} devices",
                        inst.role.name(),
                        d.device
                    ));
                }
                if used > 0 {
                    node += 1;
                }
                let start = node;
                let nodes = devices / per_node;
                node += nodes - 1;
                used = per_node;
                (start, nodes, (0..per_node).collect())
            };
            servers.push(Server {
                role: inst.role,
                kind,
                index,
                count,
                devices,
                node: start,
                nodes,
                gpus,
                port: ports.http + k,
                aux_port: ports.aux + first_device,
                dist_port: ports.dist + k,
            });
            k += 1;
            first_device += devices;
        }
    }
    Ok(Placement { nodes: node + 1, servers, gpus_per_node: per_node })
}

impl Placement {
    /// The address of node `n` as the scripts write it: `localhost` on a single node, else the
    /// variable the user sets on every node (`NODE1_HOST`).
    pub fn host(&self, n: u32) -> String {
        if self.nodes == 1 {
            "localhost".into()
        } else {
            format!("${{NODE{n}_HOST}}")
        }
    }

    /// The servers with a process on node `n`.
    pub fn on_node(&self, n: u32) -> impl Iterator<Item = &Server> {
        self.servers.iter().filter(move |s| (s.node..s.node + s.nodes).contains(&n))
    }
}
