//! One step priced operator by operator, for `throughput-optimizer price` and the operator
//! trace: each operator kind's total time over its calls, what kind of kernel it is, and where
//! its time came from (a measured table or the roofline).

use super::ops::{Collective, Features, Op, OpKind};
use super::{BatchShape, RooflineCost};
use crate::hardware::kernels::Source;
use serde::Serialize;

/// What kind of kernel an operator is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OperatorKind {
    Gemm,
    Attention,
    MoeExperts,
    MoeRouting,
    AllReduce,
    AllGather,
    ReduceScatter,
    AllToAll,
    SendRecv,
    Quantize,
    Elementwise,
    Norm,
    Embedding,
    Sampler,
}

impl OperatorKind {
    pub fn name(self) -> &'static str {
        match self {
            OperatorKind::Gemm => "gemm",
            OperatorKind::Attention => "attention",
            OperatorKind::MoeExperts => "moe_experts",
            OperatorKind::MoeRouting => "moe_routing",
            OperatorKind::AllReduce => "all_reduce",
            OperatorKind::AllGather => "all_gather",
            OperatorKind::ReduceScatter => "reduce_scatter",
            OperatorKind::AllToAll => "all_to_all",
            OperatorKind::SendRecv => "send_recv",
            OperatorKind::Quantize => "quantize",
            OperatorKind::Elementwise => "elementwise",
            OperatorKind::Norm => "norm",
            OperatorKind::Embedding => "embedding",
            OperatorKind::Sampler => "sampler",
        }
    }

    /// The kind of `op`: a collective by its algorithm; everything else by the name the graph
    /// gives it (the builders name operators after the kernels engines run).
    pub fn of(op: &Op) -> OperatorKind {
        let algo = match &op.kind {
            OpKind::Collective { algo, .. } => Some(*algo),
            OpKind::Measured(m) => match &m.roofline {
                OpKind::Collective { algo, .. } => Some(*algo),
                _ => None,
            },
            _ => None,
        };
        match algo {
            Some(Collective::AllReduce) => OperatorKind::AllReduce,
            Some(Collective::AllGather) => OperatorKind::AllGather,
            Some(Collective::ReduceScatter) => OperatorKind::ReduceScatter,
            Some(Collective::AllToAll) => OperatorKind::AllToAll,
            None => OperatorKind::of_name(op.name),
        }
    }

    fn of_name(name: &str) -> OperatorKind {
        match name {
            "embedding" => OperatorKind::Embedding,
            "sampler" => OperatorKind::Sampler,
            "router" | "topk_softmax" | "permute_tokens" | "unpermute_weighted_sum" => OperatorKind::MoeRouting,
            "moe_experts" | "dispatch_ffn_combine" | "moe_multistream" => OperatorKind::MoeExperts,
            "matmul_all_reduce" | "mla_absorb_bmm" => OperatorKind::Gemm,
            "causal_conv1d" => OperatorKind::Attention,
            n if n.starts_with("grouped_") || n.starts_with("expert_") => OperatorKind::MoeExperts,
            n if n.ends_with("_input_quant") => OperatorKind::Quantize,
            n if n.ends_with("attention") || n.ends_with("_indexer") || n.starts_with("gated_delta_rule") || n.starts_with("mamba_") => {
                OperatorKind::Attention
            }
            n if n.ends_with("norm")
                || n.ends_with("norm1")
                || n.ends_with("norm2")
                || n.ends_with("layernorm")
                || n.ends_with("_hnorm") =>
            {
                OperatorKind::Norm
            }
            n if n.ends_with("_proj")
                || n.ends_with("_proj_expand")
                || n.ends_with("_proj_with_mqa")
                || n.starts_with("in_proj")
                || n == "lm_head"
                || n == "vision_qkv"
                || n.starts_with("vision_fc")
                || n.starts_with("vision_merger_fc")
                || n == "vision_patch_embed" =>
            {
                OperatorKind::Gemm
            }
            n if n.ends_with("_all_reduce") => OperatorKind::AllReduce,
            n if n.ends_with("_all_gather") => OperatorKind::AllGather,
            n if n.ends_with("_reduce_scatter") => OperatorKind::ReduceScatter,
            n if n.ends_with("_all_to_all") => OperatorKind::AllToAll,
            _ => OperatorKind::Elementwise,
        }
    }
}

/// One operator kind of a step: all its calls.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct PricedOp {
    pub name: &'static str,
    pub kind: OperatorKind,
    /// Calls per step (layers × calls per layer).
    pub count: f64,
    /// Seconds over all `count` calls.
    pub seconds: f64,
    pub source: Source,
}

/// Where an operator's time came from on features `x`: the least direct of its tables, or the
/// roofline.
pub fn source_of(op: &Op, x: &Features) -> Source {
    match &op.kind {
        OpKind::Measured(m) => m.priced(x).source,
        OpKind::Overlap { streams, .. } => streams.iter().flatten().map(|o| source_of(o, x)).max().unwrap_or(Source::Roofline),
        _ => Source::Roofline,
    }
}

impl RooflineCost {
    /// The operators of a step on `shape` that take time, in step order: their seconds sum to
    /// the step's device time (without the host's), in the same order as the simulator sums.
    pub fn priced_ops(&self, shape: &BatchShape) -> Vec<PricedOp> {
        let x = shape.features();
        self.ops()
            .iter()
            .filter_map(|op| {
                let seconds = op.seconds(&x);
                (seconds > 0.0).then(|| PricedOp {
                    name: op.name,
                    kind: OperatorKind::of(op),
                    count: op.count,
                    seconds,
                    source: source_of(op, &x),
                })
            })
            .collect()
    }
}
