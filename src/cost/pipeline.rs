//! Pipeline parallelism in the cost model: how a replica's decoder layers are split over its
//! stages ([`StageSpan`]), each stage's own cost and memory models ([`StageModels`]), and the
//! activation send between consecutive stages ([`StageSend`]).
//!
//! The split is vLLM's (`get_pp_indices` in `vllm/distributed/utils.py`, v0.8–0.11, without
//! `VLLM_PP_LAYER_PARTITION`): every stage gets ⌊L / S⌋ layers and the remainder goes one
//! each to the stages before the last, from the second-to-last backwards, because the first
//! stage also holds the embedding and the last the LM head. SGLang's `get_pp_indices` is the
//! same function. The stage that leaves the least memory for KV decides a replica's KV pool:
//! every stage holds the KV of its own layers for every sequence, so the pool holds as many
//! tokens as its fullest stage allows.

use super::graph::build_stage;
use super::memory::MemoryModel;
use super::{CostOptions, ParallelConfig, RooflineCost};
use crate::hardware::{CommGroup, DeviceProfile};
use crate::model::ModelArch;

/// The share of the model one pipeline stage runs: decoder layers `[layers.0, layers.1)` in
/// the model's order, the embedding (and a vision tower) on the first stage, MTP and drafter
/// passes, final norm and LM head on the last.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StageSpan {
    pub layers: (u32, u32),
    pub first: bool,
    pub last: bool,
}

impl StageSpan {
    /// The whole model: one stage that is both first and last.
    pub fn whole(model: &ModelArch) -> Self {
        StageSpan { layers: (0, model.num_layers()), first: true, last: true }
    }

    /// Stage `stage` of `stages` over `layers` decoder layers, split as vLLM splits them (see
    /// the module comment). `stages` must be at least 1 and at most `layers`.
    pub fn of(layers: u32, stage: u32, stages: u32) -> Self {
        let base = layers / stages;
        let extra = layers % stages;
        // Stages that get one more layer: the `extra` stages just before the last one.
        let count = |k: u32| base + u32::from(extra > 0 && k + 1 < stages && k + 1 + extra >= stages);
        let start: u32 = (0..stage).map(count).sum();
        StageSpan { layers: (start, start + count(stage)), first: stage == 0, last: stage + 1 == stages }
    }

    /// Decoder layers of the stage.
    pub fn len(&self) -> u32 {
        self.layers.1 - self.layers.0
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The activation send from one stage to the next, per micro-batch: the hidden states and the
/// residual stream (what vLLM's `IntermediateTensors` and SGLang's `PPProxyTensors` carry for
/// a decoder model), in bf16, every TP rank to its peer in the next stage over its own link.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StageSend {
    /// Per send: the link's latency and a collective kernel's fixed cost.
    pub fixed_s: f64,
    /// Per token of the micro-batch.
    pub per_token_s: f64,
}

impl StageSend {
    /// No send (tests; a replica of one stage).
    pub const NONE: StageSend = StageSend { fixed_s: 0.0, per_token_s: 0.0 };

    /// Bytes per token of one send: hidden states and residual, bf16.
    pub fn bytes_per_token(hidden: u64) -> f64 {
        2.0 * hidden as f64 * 2.0
    }

    /// The send between stages whose first ranks are `stride` apart on `dev`'s grid (a stage
    /// takes `num_devices / pp` consecutive ranks): NVLink inside a node or NVLink domain,
    /// the scale-out level across.
    pub fn between(dev: &DeviceProfile, hidden: u64, stride: u64) -> Self {
        let link: CommGroup = dev.comm_group(&[0, stride]);
        if link.size <= 1 {
            return StageSend::NONE;
        }
        StageSend {
            fixed_s: link.latency_s + dev.op_overhead_us.collective * 1e-6,
            per_token_s: Self::bytes_per_token(hidden) / link.bandwidth,
        }
    }

    /// Seconds to send a micro-batch of `tokens` tokens.
    pub fn seconds(&self, tokens: u64) -> f64 {
        if tokens == 0 {
            return 0.0;
        }
        self.fixed_s + self.per_token_s * tokens as f64
    }
}

/// A pipelined replica's models: each stage's cost, the memory model of the stage that leaves
/// the least room for KV, and the send between stages.
#[derive(Debug, Clone)]
pub struct StageModels {
    pub costs: Vec<RooflineCost>,
    pub spans: Vec<StageSpan>,
    pub mem: MemoryModel,
    pub send: StageSend,
}

impl StageModels {
    /// The stages of `par` (`par.pp` of them, at least 2).
    pub fn build(model: &ModelArch, dev: &DeviceProfile, par: &ParallelConfig, opts: &CostOptions) -> Self {
        let stages = par.pp.max(1);
        let spans: Vec<StageSpan> = (0..stages).map(|k| StageSpan::of(model.num_layers(), k, stages)).collect();
        let built: Vec<(RooflineCost, MemoryModel)> = spans.iter().map(|s| build_stage(model, dev, par, opts, s)).collect();
        let mem = built.iter().map(|(_, m)| m).min_by(|a, b| kv_room(a).total_cmp(&kv_room(b))).cloned().expect("at least one stage");
        let stride = (par.num_devices / stages).max(1) as u64;
        StageModels {
            costs: built.into_iter().map(|(c, _)| c).collect(),
            spans,
            mem,
            send: StageSend::between(dev, model.hidden_size, stride),
        }
    }
}

/// Cached tokens a stage's memory could hold beside its weights (what ranks the stages: the
/// activations and the reserve are alike on every stage).
fn kv_room(m: &MemoryModel) -> f64 {
    let free = m.device_bytes - m.weight_bytes;
    if m.kv_bytes_per_token > 0.0 {
        free / m.kv_bytes_per_token
    } else {
        free
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layers_split_as_vllm_splits_them() {
        // vLLM's own test goldens: 20 layers on 4 stages evenly; 126 (Llama-3.1-405B) on 4:
        // 31, 32, 32, 31 (the remainder goes to the middle stages, from the second-to-last).
        // Mutation: give the remainder to the first stages, and the 126-layer split fails.
        let split = |l: u32, s: u32| (0..s).map(|k| StageSpan::of(l, k, s).layers).collect::<Vec<_>>();
        assert_eq!(split(20, 4), vec![(0, 5), (5, 10), (10, 15), (15, 20)]);
        assert_eq!(split(126, 4), vec![(0, 31), (31, 63), (63, 95), (95, 126)]);
        assert_eq!(split(5, 3), vec![(0, 2), (2, 4), (4, 5)]);
        assert_eq!(split(7, 1), vec![(0, 7)]);
        let first = StageSpan::of(126, 0, 4);
        let last = StageSpan::of(126, 3, 4);
        assert!(first.first && !first.last && last.last && !last.first);
    }
}
