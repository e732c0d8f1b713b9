//! `--emit-format k8s`: the deployment as Kubernetes manifests in one file (`k8s.yaml`): per
//! instance kind a Deployment of its servers (a LeaderWorkerSet when a server spans nodes, one
//! pod per node), each pod requesting its GPUs as `nvidia.com/gpu` (together the plan's
//! devices), a Service per kind, and for a P/D deployment the router's Deployment and Service.
//! Pods run the same commands as the shell scripts, started by `/bin/sh -c`; the cluster gives
//! each pod its GPUs and address, so commands carry no `CUDA_VISIBLE_DEVICES` and every pod of
//! a kind listens on the same ports.

use super::deployment::{Deployment, Role};
use super::flags::FlagList;
use super::placement::{Placement, Server, FRONT_PORT};
use super::script::shell_command;
use super::{Emitter, Endpoint, LaunchFile, Process, Rank, Site};
use std::fmt::Write as _;

/// A name Kubernetes accepts (lowercase letters, digits and dashes, at most 40 here).
fn slug(model: &str) -> String {
    let base = model.trim_end_matches('/').rsplit('/').next().unwrap_or(model).to_ascii_lowercase();
    let s: String = base.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).collect();
    let s: String = s.split('-').filter(|p| !p.is_empty()).collect::<Vec<_>>().join("-");
    let s: String = s.chars().take(40).collect();
    s.trim_end_matches('-').to_string()
}

fn image(e: &dyn Emitter) -> &'static str {
    match e.title() {
        "vLLM" => "vllm/vllm-openai:v0.11.0",
        "SGLang" => "lmsysorg/sglang:v0.5.2",
        _ => "nvcr.io/nvidia/tensorrt-llm/release:1.1.0",
    }
}

/// The script a container runs, indented as a YAML block.
fn block(script: &str, indent: usize) -> String {
    let pad = " ".repeat(indent);
    script.lines().map(|l| if l.is_empty() { "\n".to_string() } else { format!("{pad}{l}\n") }).collect()
}

/// A pod spec's containers (and volumes) at indent 0: the engine's image, the script, its
/// GPUs and port.
fn container(e: &dyn Emitter, name: &str, script: &str, gpus: u32, port: u32) -> String {
    let mut s = format!("containers:\n- name: {name}\n  image: {}\n", image(e));
    s += "  command: [\"/bin/sh\", \"-c\"]\n  args:\n  - |\n";
    s += &block(script, 4);
    s += "  env:\n  - name: POD_IP\n    valueFrom: {fieldRef: {fieldPath: status.podIP}}\n";
    let _ = writeln!(s, "  ports:\n  - containerPort: {port}");
    if gpus > 0 {
        let _ = writeln!(s, "  resources:\n    limits:\n      nvidia.com/gpu: {gpus}");
        // NCCL needs more shared memory than a container's default.
        s += "  volumeMounts:\n  - {name: shm, mountPath: /dev/shm}\n";
        s += "volumes:\n- name: shm\n  emptyDir: {medium: Memory}\n";
    }
    s
}

fn service(name: &str, selector: &str, port: u32) -> String {
    format!(
        "---\napiVersion: v1\nkind: Service\nmetadata:\n  name: {name}\nspec:\n  selector:\n{selector}  ports:\n  - port: {port}\n    targetPort: {port}\n"
    )
}

/// The script of one pod: the files its server reads, then its command.
fn pod_script(e: &dyn Emitter, role: Role, files: &[LaunchFile], p: &Process) -> Result<String, String> {
    FlagList::of(e.engine()).check(p)?;
    let mut s = String::new();
    for f in files.iter().filter(|f| f.name.starts_with(role.name())) {
        let _ = write!(s, "cat > {} <<'EOF'\n{}EOF\n", f.name, f.contents);
    }
    Ok(s + "exec " + &shell_command(p) + "\n")
}

/// Manifests of one instance kind: its servers as a Deployment (or a LeaderWorkerSet) and
/// its Service; returns them and the endpoint the router reaches.
fn kind(e: &dyn Emitter, d: &Deployment, files: &[LaunchFile], first: &Server, app: &str) -> Result<(String, Endpoint), String> {
    let i = &d.instances[first.kind];
    let name = format!("{app}-{}", i.role.name());
    let labels = format!("      labels: {{app: {app}, role: {}}}\n", i.role.name());
    let site = |rank: Rank| Site {
        server: first,
        rank,
        leader: "${LWS_LEADER_ADDRESS}".into(),
        hosts: Vec::new(),
        host: "${POD_IP}".into(),
        k8s: true,
    };
    let process = |rank| e.process(d, i, &site(rank))?.ok_or_else(|| "a server over several nodes has no Kubernetes form here".to_string());
    let mut y = String::new();
    let selector = if first.nodes == 1 {
        let script = pod_script(e, i.role, files, &process(Rank::Node(0))?)?;
        let _ = write!(y, "---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\nspec:\n  replicas: {}\n", first.count);
        let _ = write!(
            y,
            "  selector:\n    matchLabels: {{app: {app}, role: {}}}\n  template:\n    metadata:\n{labels}    spec:\n",
            i.role.name()
        );
        y += &block(&container(e, "server", &script, first.devices, first.port), 6);
        format!("    app: {app}\n    role: {}\n", i.role.name())
    } else {
        let per_node = first.devices / first.nodes;
        let leader = pod_script(e, i.role, files, &process(Rank::Node(0))?)?;
        let worker = pod_script(e, i.role, files, &process(Rank::LwsWorker)?)?;
        let _ = write!(
            y,
            "---\napiVersion: leaderworkerset.x-k8s.io/v1\nkind: LeaderWorkerSet\nmetadata:\n  name: {name}\nspec:\n  replicas: {}\n  leaderWorkerTemplate:\n    size: {}\n",
            first.count, first.nodes
        );
        for (key, script) in [("leaderTemplate", leader), ("workerTemplate", worker)] {
            let _ = write!(y, "    {key}:\n      metadata:\n  {labels}      spec:\n");
            y += &block(&container(e, "server", &script, per_node, first.port), 8);
        }
        format!("    app: {app}\n    role: {}\n    leaderworkerset.sigs.k8s.io/worker-index: \"0\"\n", i.role.name())
    };
    y += &service(&name, &selector, first.port);
    Ok((y, Endpoint { role: i.role, host: name, port: first.port, aux_port: first.aux_port }))
}

/// The manifests of a deployment.
pub(super) fn manifests(e: &dyn Emitter, d: &Deployment, placement: &Placement) -> Result<Vec<LaunchFile>, String> {
    let app = slug(&d.model);
    let files = e.files(d)?;
    let mut y = String::new();
    for n in e.notes(d) {
        let _ = writeln!(y, "# {n}");
    }
    let _ = writeln!(y, "# Model: {} on {}; {}", d.model, d.device, d.source);
    let total: u32 = placement.servers.iter().map(|s| s.devices).sum();
    let _ = writeln!(y, "# {} servers requesting {total} nvidia.com/gpu in all", placement.servers.len());
    if d.is_pd() && d.instances.iter().any(|i| i.role == Role::Prefill && i.count > 1) {
        y += "# Each Service spreads requests over its kind's pods; the router reaches every kind through its Service\n";
    }
    let mut endpoints = Vec::new();
    for (k, _) in d.instances.iter().enumerate() {
        let Some(first) = placement.servers.iter().find(|s| s.kind == k) else { continue };
        let (m, ep) = kind(e, d, &files, first, &app)?;
        y += &m;
        endpoints.push(ep);
    }
    if d.is_pd() {
        let (pre, p) = e.router(d, &endpoints);
        FlagList::of(e.engine()).check(&p)?;
        let script = pre + "exec " + &shell_command(&p) + "\n";
        let name = format!("{app}-router");
        let _ = write!(
            y,
            "---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\nspec:\n  replicas: 1\n  selector:\n    matchLabels: {{app: {app}, role: router}}\n  template:\n    metadata:\n      labels: {{app: {app}, role: router}}\n    spec:\n"
        );
        y += &block(&container(e, "router", &script, 0, FRONT_PORT), 6);
        y += &service(&name, &format!("    app: {app}\n    role: router\n"), FRONT_PORT);
    }
    Ok(vec![LaunchFile { name: "k8s.yaml".into(), contents: y }])
}
