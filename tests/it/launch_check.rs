//! The checks every emitted launch script must pass, read from its text as a shell would: each
//! node's servers on disjoint GPU sets that together cover the plan's devices, distinct ports
//! on every node (the router's too), and only flags, environment variables and option keys
//! that the engine version's list (`profiles/engines/flags/`) defines. The Kubernetes form's
//! GPU requests add up to the plan's devices.

use std::collections::BTreeSet;

/// One command of a script: the file it is in, its environment, its words.
#[derive(Debug)]
pub struct Cmd {
    pub file: String,
    pub env: Vec<(String, String)>,
    pub words: Vec<String>,
}

/// Shell words of a line: whitespace-separated, single quotes kept together.
fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let (mut cur, mut quoted) = (String::new(), false);
    for c in line.chars() {
        match c {
            '\'' => quoted = !quoted,
            c if c.is_whitespace() && !quoted => {
                if !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
            }
            c => cur.push(c),
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// The commands and here-document files of a printed script (`# ---- f ----` starts file f).
pub fn parse(script: &str) -> (Vec<Cmd>, Vec<(String, String)>) {
    let mut cmds = Vec::new();
    let mut docs = Vec::new();
    let mut file = "launch.sh".to_string();
    let mut lines = script.lines();
    while let Some(line) = lines.next() {
        if let Some(name) = line.strip_prefix("# ---- ").and_then(|l| l.strip_suffix(" ----")) {
            file = name.to_string();
            continue;
        }
        if line.starts_with("cat > ") && line.contains("<<") {
            let name = line["cat > ".len()..].split_whitespace().next().unwrap().to_string();
            let body: Vec<&str> = lines.by_ref().take_while(|l| *l != "EOF").collect();
            docs.push((name, body.join("\n")));
            continue;
        }
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') || t == "wait" {
            continue;
        }
        let mut joined = t.to_string();
        while let Some(head) = joined.strip_suffix('\\') {
            joined = format!("{head} {}", lines.next().expect("a continued line goes on").trim());
        }
        let mut w = words(joined.trim_end_matches(['&', ' ']));
        let mut env = Vec::new();
        while let Some((k, v)) =
            w.first().and_then(|x| x.split_once('=')).filter(|(k, _)| k.chars().all(|c| c.is_ascii_uppercase() || c == '_'))
        {
            env.push((k.to_string(), v.to_string()));
            w.remove(0);
        }
        cmds.push(Cmd { file: file.clone(), env, words: w });
    }
    (cmds, docs)
}

/// One engine version's list: (section, names).
fn flag_list(engine: &str) -> Vec<(String, BTreeSet<String>)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("profiles/engines/flags");
    let path = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.file_name().unwrap().to_str().unwrap().starts_with(&format!("{engine}-")))
        .unwrap_or_else(|| panic!("no flag list for {engine} in {}", dir.display()));
    let mut sections: Vec<(String, BTreeSet<String>)> = Vec::new();
    for l in std::fs::read_to_string(path).unwrap().lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        match l.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            Some(s) => sections.push((s.to_string(), BTreeSet::new())),
            None => {
                sections.last_mut().unwrap().1.insert(l.to_string());
            }
        }
    }
    sections
}

fn known(list: &[(String, BTreeSet<String>)], section: &str, name: &str) -> bool {
    list.iter().any(|(s, names)| s == section && names.contains(name))
}

fn is_flag(w: &str) -> bool {
    w.starts_with('-') && w.chars().nth(1).is_some_and(|c| c.is_ascii_alphabetic() || c == '-')
}

/// The program of a command (after any `mpirun … trtllm-llmapi-launch`) as its list's
/// section, and the words after it.
fn program(words: &[String]) -> (String, &[String]) {
    let two = |n: usize| words[..n].join(" ");
    match words[0].as_str() {
        "vllm" => (two(2), &words[2..]),
        "python" if words[1] == "-m" => (words[2].clone(), &words[3..]),
        "python" => (words[1].rsplit('/').next().unwrap().to_string(), &words[2..]),
        "trtllm-serve" if words.get(1).map(String::as_str) == Some("disaggregated") => (two(2), &words[2..]),
        w => (w.to_string(), &words[1..]),
    }
}

/// Ports a command listens on: (first, width) — a NIXL side channel counts up per GPU.
fn ports(c: &Cmd) -> Vec<(u32, u32)> {
    let gpus = c.env.iter().find(|(k, _)| k == "CUDA_VISIBLE_DEVICES").map_or(1, |(_, v)| v.split(',').count() as u32);
    let mut v = Vec::new();
    for (k, val) in &c.env {
        if k == "VLLM_NIXL_SIDE_CHANNEL_PORT" {
            v.push((val.parse().unwrap(), gpus));
        }
    }
    for w in c.words.windows(2) {
        if ["--port", "--data-parallel-rpc-port", "--disaggregation-bootstrap-port"].contains(&w[0].as_str()) {
            v.push((w[1].parse().unwrap(), 1));
        }
        if w[0] == "--dist-init-addr" {
            v.push((w[1].rsplit(':').next().unwrap().parse().unwrap(), 1));
        }
    }
    v
}

/// Checks a printed `--emit ENGINE` script; `devices` is what the plan uses.
pub fn check_script(engine: &str, script: &str, devices: u32) {
    let list = flag_list(engine);
    let (cmds, docs) = parse(script);
    assert!(!cmds.is_empty(), "no command in:\n{script}");
    let mut covered = 0;
    let files: BTreeSet<&str> = cmds.iter().map(|c| c.file.as_str()).collect();
    for f in &files {
        let here: Vec<&Cmd> = cmds.iter().filter(|c| c.file == *f).collect();
        let mut gpus = BTreeSet::new();
        let mut node_ports: Vec<(u32, u32)> = Vec::new();
        for c in &here {
            if let Some((_, set)) = c.env.iter().find(|(k, _)| k == "CUDA_VISIBLE_DEVICES") {
                for g in set.split(',') {
                    let g: u32 = g.parse().unwrap();
                    assert!(gpus.insert(g), "{f}: GPU {g} given to two servers:\n{script}");
                }
                let np = c.words.windows(2).find(|w| w[0] == "-np").map(|w| w[1].parse::<u32>().unwrap());
                covered += np.unwrap_or(set.split(',').count() as u32);
            }
            node_ports.extend(ports(c));
        }
        for (i, a) in node_ports.iter().enumerate() {
            for b in &node_ports[i + 1..] {
                assert!(a.0 + a.1 <= b.0 || b.0 + b.1 <= a.0, "{f}: ports {a:?} and {b:?} overlap:\n{script}");
            }
        }
    }
    if let Some(router) = cmds.iter().find(|c| c.file == "router.sh") {
        // TensorRT-LLM's disaggregated server reads its port from its configuration.
        let from_config =
            || docs.iter().find(|(n, _)| n == "disagg-config.yaml")?.1.lines().find_map(|l| l.strip_prefix("port: ")?.parse().ok());
        let p = ports(router).first().map(|p| p.0).or_else(from_config).expect("the router's port");
        let servers: Vec<u32> = cmds.iter().filter(|c| c.file != "router.sh").flat_map(ports).map(|p| p.0).collect();
        assert!(!servers.contains(&p), "the router's port {p} is a server's:\n{script}");
    }
    assert_eq!(covered, devices, "the servers' GPUs do not add up to the plan's {devices} devices:\n{script}");
    for c in &cmds {
        for (k, _) in &c.env {
            assert!(known(&list, "env", k), "{engine}'s list has no environment variable {k}");
        }
        let mut w: &[String] = &c.words;
        if w[0] == "mpirun" {
            let end = w.iter().position(|x| x == "trtllm-llmapi-launch").expect("mpirun starts trtllm-llmapi-launch");
            for f in w[..end].iter().filter(|x| is_flag(x)) {
                assert!(known(&list, "mpirun", f), "{engine}'s list has no mpirun flag {f}");
            }
            w = &w[end + 1..];
        }
        let (section, rest) = program(w);
        for f in rest.iter().filter(|x| is_flag(x)) {
            assert!(known(&list, &section, f), "{engine}: `{section}` has no {f} in its version's list:\n{script}");
        }
    }
    for (name, body) in docs.iter().filter(|(n, _)| n.ends_with(".yaml")) {
        for key in body.lines().filter_map(|l| l.trim_start().trim_start_matches("- ").split_once(':').map(|(k, _)| k.trim())) {
            if key.chars().all(|c| c.is_ascii_lowercase() || c == '_') && !key.is_empty() {
                assert!(known(&list, "options", key), "{name}: {engine}'s list has no option {key}");
            }
        }
    }
}

/// The `nvidia.com/gpu` a `--emit-format k8s` manifest requests in all: per Deployment its
/// replicas × its pod's GPUs, per LeaderWorkerSet its replicas × (leader + workers).
pub fn k8s_gpus(yaml: &str) -> u32 {
    let mut total = 0;
    for doc in yaml.split("\n---\n") {
        let field = |key: &str| doc.lines().find_map(|l| l.trim().strip_prefix(key).map(|v| v.trim().parse::<u32>().unwrap()));
        let gpus: Vec<u32> =
            doc.lines().filter_map(|l| l.trim().strip_prefix("nvidia.com/gpu:").map(|v| v.trim().parse().unwrap())).collect();
        let replicas = field("replicas:").unwrap_or(1);
        total += match (doc.contains("kind: LeaderWorkerSet"), gpus.as_slice()) {
            (_, []) => 0,
            (false, [g]) => replicas * g,
            (true, [leader, worker]) => replicas * (leader + (field("size:").unwrap() - 1) * worker),
            other => panic!("unexpected GPU requests {other:?} in:\n{doc}"),
        };
    }
    total
}
