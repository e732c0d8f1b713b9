//! Candidate parallel layouts: TP × EP × MoE-DP × DCP × MTP from the search flags, filtered by
//! divisibility and by what the model allows (heads, KV heads, experts).

use crate::cost::ParallelConfig;
use crate::model::{Attention, Mlp, ModelArch};
use crate::outcome::Phase;
use crate::plan::{Plan, Speculative, SpeculativeMethod};
use serde::{Deserialize, Serialize};

/// One parallel layout with its MTP depth.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Candidate {
    pub parallel: ParallelConfig,
    pub mtp: u32,
}

impl Candidate {
    /// "TP=8 | PP=1 | DP=1" (+ "| EP=8 | MOE-TP=1 | MOE-DP=1" for MoE, "| MTP=k", "| DCP=d",
    /// draft tags), as the original prints it.
    pub fn label(&self, model: &ModelArch, spec: Option<&Speculative>) -> String {
        let p = &self.parallel;
        let mut s = format!("TP={} | PP={} | DP={}", p.tp, p.pp, p.dp);
        if model.is_moe() {
            s += &format!(" | EP={} | MOE-TP={} | MOE-DP={}", p.ep, p.moe_tp, p.moe_dp);
        }
        if self.mtp > 0 {
            s += &format!(" | MTP={}", self.mtp);
        }
        if p.dcp > 1 {
            s += &format!(" | DCP={}", p.dcp);
        }
        if let Some(sp) = spec {
            match sp.method {
                SpeculativeMethod::Dflash => s += &format!(" | DFlash={}/acc={}", sp.block, sp.acceptance),
                SpeculativeMethod::Dspark => {
                    s += &format!(" | DSpark={}/acc={}/markov={}", sp.block, sp.acceptance, sp.markov_rank.unwrap_or(256))
                }
            }
        }
        s
    }
}

/// `None` → `[default]`; `[]` → powers of two ≤ n; explicit values as given.
pub fn resolve_sizes(v: &Option<Vec<u32>>, default: u32, n: u32) -> Vec<u32> {
    match v {
        None => vec![default],
        Some(x) if x.is_empty() => (0..32).map(|k| 1u32 << k).take_while(|&p| p <= n).collect(),
        Some(x) => x.clone(),
    }
}

/// Why the model cannot run a layout, if it cannot.
pub fn model_limit(model: &ModelArch, p: &ParallelConfig, with_vision: bool) -> Option<String> {
    let tp = p.tp;
    let blocks = model.layers.iter().map(|g| (&g.attention, &g.mlp)).chain(model.mtp.iter().map(|m| (&m.attention, &m.mlp)));
    for (att, mlp) in blocks {
        match *att {
            Attention::Gqa { heads, kv_heads, .. } => {
                if heads % tp != 0 {
                    return Some(format!("TP={tp} does not divide the {heads} attention heads"));
                }
                if tp > kv_heads && !tp.is_multiple_of(kv_heads) {
                    return Some(format!("TP={tp} is neither a divisor nor a multiple of the {kv_heads} KV heads"));
                }
                if tp <= kv_heads && kv_heads % tp != 0 {
                    return Some(format!("TP={tp} does not divide the {kv_heads} KV heads"));
                }
            }
            Attention::Mla { heads, .. } => {
                if heads % tp != 0 {
                    return Some(format!("TP={tp} does not divide the {heads} attention heads"));
                }
            }
            Attention::LinearAttention { key_heads, value_heads, .. } => {
                if key_heads % tp != 0 || value_heads % tp != 0 {
                    return Some(format!(
                        "TP={tp} does not divide the {key_heads} key / {value_heads} value heads of the linear-attention layers"
                    ));
                }
            }
            Attention::Mamba2 { heads, groups, .. } => {
                if heads % tp != 0 {
                    return Some(format!("TP={tp} does not divide the {heads} Mamba-2 heads"));
                }
                if !(groups % tp == 0 || tp.is_multiple_of(groups)) {
                    return Some(format!("TP={tp} is neither a divisor nor a multiple of the {groups} Mamba-2 groups"));
                }
            }
            Attention::None => {}
        }
        if let Mlp::Moe { experts, expert_intermediate_size, .. } = *mlp {
            if experts % p.ep != 0 {
                return Some(format!("EP={} does not divide the {experts} experts", p.ep));
            }
            if expert_intermediate_size % p.moe_tp as u64 != 0 {
                return Some(format!("MOE-TP={} does not divide the expert width {expert_intermediate_size}", p.moe_tp));
            }
        }
        if let Mlp::Dense { intermediate_size, .. } = *mlp {
            if intermediate_size % tp as u64 != 0 {
                return Some(format!("TP={tp} does not divide the MLP width {intermediate_size}"));
            }
        }
    }
    if with_vision {
        if let Some(v) = &model.vision {
            if v.heads % tp != 0 {
                return Some(format!("TP={tp} does not divide the {} vision heads", v.heads));
            }
        }
    }
    None
}

/// The largest EP an instance of `n` devices takes for a model of `experts` routed experts:
/// `n` while it has no more ranks than experts, else the largest size dividing both (the
/// remaining devices split each expert, MoE-TP).
pub fn ep_cap(n: u32, experts: u32) -> u32 {
    if n <= experts {
        return n;
    }
    let (mut a, mut b) = (n, experts.max(1));
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// Candidates for an instance of `n` devices in `phase`, plus why layouts were skipped.
pub fn enumerate(plan: &Plan, n: u32, phase: Phase) -> (Vec<Candidate>, Vec<String>) {
    let model = &plan.model;
    let s = &plan.search;
    let moe = model.is_moe();
    let tps = resolve_sizes(&s.tp, n, n);
    let pps = resolve_sizes(&s.pp, 1, n);
    let mdps = if moe { resolve_sizes(&s.moe_dp, 1, n) } else { vec![1] };
    // Decode context parallelism splits decode attention only.
    let dcps = if phase == Phase::Prefill { vec![1] } else { resolve_sizes(&s.dcp, 1, n) };
    let mtps: Vec<u32> = if phase == Phase::Prefill { vec![0] } else { s.mtp.clone() };
    let mut out = Vec::new();
    let mut skipped = Vec::new();
    for &tp in &tps {
        for &pp in &pps {
            // One pipeline stage's devices: EP, MoE-TP and MoE-DP lay out those (the default EP
            // spans the stage).
            let stage = (n / pp).max(1);
            // The default EP range stops at the expert count (explicit sizes are checked
            // against it).
            let ep_max = model.num_experts().map_or(stage, |e| ep_cap(stage, e));
            let eps = if moe { resolve_sizes(&s.ep, ep_max, ep_max) } else { vec![1] };
            for ep in eps {
                for &md in &mdps {
                    for &mtp in &mtps {
                        for &dcp in &dcps {
                            if !n.is_multiple_of(tp * pp) || !stage.is_multiple_of(ep) || !stage.is_multiple_of(ep * md) || tp % dcp != 0 {
                                continue;
                            }
                            let p = ParallelConfig {
                                num_devices: n,
                                tp,
                                dp: n / (tp * pp),
                                ep: if moe { ep } else { 1 },
                                moe_tp: if moe { stage / (ep * md) } else { 1 },
                                moe_dp: if moe { md } else { 1 },
                                dcp,
                                pp,
                            };
                            push_candidate(plan, p, mtp, &mut out, &mut skipped);
                        }
                    }
                }
            }
        }
    }
    (out, skipped)
}

/// Keep a layout the model can run (once), or say why it was skipped (once).
fn push_candidate(plan: &Plan, p: ParallelConfig, mtp: u32, out: &mut Vec<Candidate>, skipped: &mut Vec<String>) {
    let model = &plan.model;
    if let Some(why) = model_limit(model, &p, plan.workload.images.is_some()) {
        let msg = format!("{}: {why}", Candidate { parallel: p, mtp }.label(model, None));
        if !skipped.contains(&msg) {
            skipped.push(msg);
        }
        return;
    }
    let c = Candidate { parallel: p, mtp };
    if !out.contains(&c) {
        out.push(c);
    }
}

/// Fail early (as a usage error) when a phase has no runnable layout.
pub fn check(plan: &Plan) -> Result<(), String> {
    use crate::plan::Mode;
    let phases: Vec<(u32, Phase, &str)> = match &plan.mode {
        Mode::Aggregation => vec![(plan.num_devices, Phase::Aggregated, "")],
        Mode::Disaggregation { prefill, decode } => {
            let mut v = Vec::new();
            if *prefill {
                v.push((plan.num_devices, Phase::Prefill, ""));
            }
            if *decode {
                v.push((plan.num_devices, Phase::Decode, ""));
            }
            v
        }
        Mode::PdRatio { prefill_devices, decode_devices, .. } => {
            vec![(*prefill_devices, Phase::Prefill, " for prefill instances"), (*decode_devices, Phase::Decode, " for decode instances")]
        }
    };
    for (n, phase, which) in phases {
        let (c, skipped) = enumerate(plan, n, phase);
        if c.is_empty() {
            if skipped.is_empty() {
                let s = &plan.search;
                let given: Vec<String> = [
                    ("--tp-sizes", &s.tp),
                    ("--ep-sizes", &s.ep),
                    ("--moe-dp-sizes", &s.moe_dp),
                    ("--dcp-sizes", &s.dcp),
                    ("--pp-sizes", &s.pp),
                ]
                .iter()
                .filter_map(|(f, v)| {
                    v.as_ref()
                        .filter(|x| !x.is_empty())
                        .map(|x| format!("{f} {}", x.iter().map(|n| n.to_string()).collect::<Vec<_>>().join(" ")))
                })
                .collect();
                let given = if given.is_empty() { String::new() } else { format!(" ({})", given.join(", ")) };
                let pp_rule = if s.pp.is_some() { ", TP × PP must divide it, and EP × MoE-DP must divide a stage's devices" } else { "" };
                return Err(format!(
                    "No valid parallel combination is produced by the provided search arguments{given} under {n} devices{which}: every size must divide the device count{pp_rule} (and TP must be a multiple of DCP); use divisors of {n}"
                ));
            }
            return Err(format!("no parallel layout{which} fits {}: {}; choose sizes the model allows", plan.model.id, skipped.join("; ")));
        }
    }
    Ok(())
}
