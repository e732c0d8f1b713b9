//! The MoE block: router, routed experts (grouped GEMMs priced by how many experts a batch
//! touches), the optional shared expert, and the two communication patterns around them —
//! tokens sliced over TP and dispatched / combined over EP and MoE-TP, or, under
//! `moe_all_reduce`, replicated on every rank and summed by one all-reduce — scheduled fused,
//! on two streams or one after the other as `--compile` allows.

use super::{Builder, TOK};
use crate::cost::ops::{scaled, unit, Coef, Collective, ExpertCost, Op, OpKind};
use crate::hardware::Dtype;
use crate::quant::LinearQuant;

impl Builder<'_> {
    /// A MoE block: router, routed experts (wrapped in the EP dispatch/combine and the MoE-TP
    /// gather/scatter), the optional shared expert, then the TP ranks' token restore. Under
    /// `moe_all_reduce`, when the MoE ranks are the attention TP ranks, every rank routes every
    /// token instead and one all-reduce sums the experts' partial outputs (see
    /// [`CostOptions::moe_all_reduce`]).
    pub(super) fn moe(&mut self, count: f64, b: &MoeBlock) {
        let h = self.h;
        let s = self.moe_shape(b);
        let (experts, top_k, shared, bias, gated) = (b.experts, b.top_k, b.shared, b.bias, b.gated);
        self.gemm_c("router", count, s.sliced, h, experts, None, bias);
        // A measured fused-MoE kernel selects the top-k itself.
        if !self.experts_measured(experts) {
            let op = self.vector_op("topk_softmax", count, s.sliced, experts, 5.0, 6.0, true, 1.0);
            self.ops.push(op);
        }
        // Permuted rows and expert intermediates per sliced token.
        self.track_width((top_k * (s.eh + s.up() * s.i_l) * s.moe_tp) / s.tp + 2.0 * h);
        if s.replicated {
            // No dispatch or combine to fuse with the experts (`dispatch_ffn_combine`). The
            // shared expert is split over TP like a dense MLP, and the all-reduce sums what both
            // the routed and the shared experts computed: it waits for both, after any second
            // stream.
            let mut routed = self.latent_ops(count, &s, true);
            routed.extend(self.expert_ops(count, &s));
            routed.extend(self.latent_ops(count, &s, false));
            let shared_ops = self.shared_mlp_ops(count, unit(TOK, 1.0), shared / self.tp, false, gated);
            self.schedule_moe(count, routed, shared_ops, 1.0);
            let reduce = self.tp_reduce_op("moe_all_reduce", count, h);
            self.ops.extend(reduce);
        } else {
            let mut routed = self.latent_ops(count, &s, true);
            routed.extend(self.moe_dispatch_ops(count, &s));
            routed.extend(self.expert_ops(count, &s));
            routed.extend(self.moe_combine_ops(count, &s));
            routed.extend(self.latent_ops(count, &s, false));
            let shared_ops = self.shared_expert_ops(count, shared, s.sliced, gated);
            self.schedule_moe(count, routed, shared_ops, s.ep);
            self.restore_tokens(count);
        }
    }

    /// The per-rank sizes of one MoE block under this candidate's TP, EP and MoE-TP.
    fn moe_shape(&self, b: &MoeBlock) -> MoeShape {
        let &MoeBlock { experts, top_k, inter, latent, .. } = b;
        let par = self.par;
        let (tp, ep, moe_tp) = (self.tp, par.ep.max(1) as f64, par.moe_tp.max(1) as f64);
        let q = self.expert_q;
        let g = self.opts.quant.mxfp4_group_size;
        // The experts' ranks are exactly the attention TP group (no attention DP): the engine's
        // tokens are already on every rank.
        let replicated = self.opts.moe_all_reduce && tp > 1.0 && par.ep.max(1) * par.moe_tp.max(1) == par.tp;
        MoeShape {
            block: *b,
            eh: latent.unwrap_or(self.h),
            replicated,
            tp,
            ep,
            moe_tp,
            q,
            ab: if q.is_quantized() { q.activation_bytes(g) } else { 2.0 },
            wb: if q.is_quantized() { q.weight_bytes(g) } else { 2.0 },
            // Tokens are sliced across the TP ranks before routing (padded to a multiple of TP),
            // unless every rank routes them all.
            sliced: unit(TOK, if replicated { 1.0 } else { 1.0 / tp }),
            per_rank_rows: if ep > 1.0 { top_k } else { 1.0 },
            i_l: inter / moe_tp,
            local: (experts / ep).max(1.0),
        }
    }

    /// A latent MoE's projection of the routed tokens down to the experts' width (`down`) or
    /// back up after them, on this rank's token slice (none without a latent width).
    fn latent_ops(&mut self, count: f64, s: &MoeShape, down: bool) -> Vec<Op> {
        if s.eh == self.h {
            return Vec::new();
        }
        let (name, k, n) = if down { ("fc1_latent_proj", self.h, s.eh) } else { ("fc2_latent_proj", s.eh, self.h) };
        let before = self.ops.len();
        let q = self.non_expert_q;
        self.gemm_c(name, count, s.sliced, k, n, Some(q), false);
        self.ops.split_off(before)
    }

    /// Before the experts: permute and all-to-all the routed rows over EP, all-gather over MoE-TP.
    fn moe_dispatch_ops(&self, count: f64, s: &MoeShape) -> Vec<Op> {
        let h = s.eh;
        let mut routed: Vec<Op> = Vec::new();
        if s.ep > 1.0 {
            routed.push(self.vector_op("permute_tokens", count, s.sliced, s.block.top_k * h, 0.0, 2.0 * s.ab, false, 1.0));
            routed.extend(self.collective_op(
                "moe_dispatch_all_to_all",
                count,
                self.ep_group,
                Collective::AllToAll,
                scaled(&s.sliced, s.block.top_k * h * s.ab * (s.ep - 1.0) / s.ep),
            ));
        }
        if s.moe_tp > 1.0 {
            routed.extend(self.collective_op(
                "moe_tp_all_gather",
                count,
                self.moe_tp_group,
                Collective::AllGather,
                scaled(&s.sliced, s.per_rank_rows * h * s.ab),
            ));
        }
        routed
    }

    /// The grouped expert GEMMs and activation (gate_up, act, down), and the expert and router
    /// weights they hold.
    fn expert_ops(&mut self, count: f64, s: &MoeShape) -> Vec<Op> {
        let h = s.eh;
        let eager = !self.compile;
        let [mut gate_up, act, down] = self.expert_costs(s);
        if eager {
            // Two separate GEMMs each move half the gate_up traffic; keep totals right.
            gate_up.mma_per_pair /= 2.0;
            gate_up.gp_per_pair /= 2.0;
            gate_up.mem_per_pair /= 2.0;
            gate_up.mem_per_expert /= 2.0;
            gate_up.gp_per_expert /= 2.0;
        }
        let (fixed_mma, fixed_gp) = (self.fixed_mma, self.fixed_gp);
        let (gu_name, act_name, down_name) = if self.compile {
            ("grouped_gate_up", "grouped_swiglu", "grouped_down")
        } else {
            ("expert_gate_up", "expert_act", "expert_down")
        };
        let eager_kernels = if eager { 2.0 } else { 1.0 };
        let ops = vec![
            Op { name: gu_name, count: count * eager_kernels, gate: TOK, fixed_s: fixed_mma, window: None, kind: OpKind::Experts(gate_up) },
            Op {
                name: act_name,
                count,
                gate: TOK,
                fixed_s: fixed_gp * if eager { 3.0 } else { 1.0 },
                window: None,
                kind: OpKind::Experts(act),
            },
            Op { name: down_name, count, gate: TOK, fixed_s: fixed_mma, window: None, kind: OpKind::Experts(down) },
        ];
        let i_l = s.i_l;
        self.weights +=
            count * self.copies * s.local * (s.matrices() * h * i_l * s.wb + if s.block.bias { (s.up() * i_l + h) * 2.0 } else { 0.0 });
        self.weights += count * self.copies * self.h * s.block.experts * 2.0;
        if self.experts_measured(s.block.experts) {
            let route = if s.replicated { (1.0, 1.0) } else { (s.tp, s.ep * s.moe_tp) };
            let [gu, act, down] = self.expert_costs(s);
            let sum = ExpertCost {
                mma_per_pair: gu.mma_per_pair + act.mma_per_pair + down.mma_per_pair,
                gp_per_pair: gu.gp_per_pair + act.gp_per_pair + down.gp_per_pair,
                mem_per_pair: gu.mem_per_pair + act.mem_per_pair + down.mem_per_pair,
                mem_per_expert: gu.mem_per_expert + act.mem_per_expert + down.mem_per_expert,
                gp_per_expert: gu.gp_per_expert + act.gp_per_expert + down.gp_per_expert,
                fixed_per_expert: false,
                ..gu
            };
            if let Some(op) = self.measured_experts(count, s, OpKind::Experts(sum), route) {
                return vec![op];
            }
        }
        ops
    }

    /// Per-pair and per-expert costs of the fused gate_up GEMM, the activation and the down GEMM.
    fn expert_costs(&mut self, s: &MoeShape) -> [ExpertCost; 3] {
        let (h, q, i_l, ab, wb) = (s.eh, s.q, s.i_l, s.ab, s.wb);
        let mma_r = self.mma_rate(if q.is_quantized() { q.gemm_dtype() } else { Dtype::Bf16 });
        let deq = q.dequant_flops_per_weight(self.fp4_cores());
        let eager = !self.compile;
        // Grouped kernels run below dense efficiency by the device's (calibrated) factor.
        let g = self.dev.grouped_gemm_efficiency;
        // Replicated tokens are routed once, by every rank alike: one group of all the tokens.
        let (route_tp, group_ranks) = if s.replicated { (1.0, 1.0) } else { (s.tp, s.ep * s.moe_tp) };
        let mk = |mma: f64, gp: f64, mem_pair: f64, w_bytes: f64, deq_w: f64| ExpertCost {
            tp: route_tp,
            group_ranks,
            top_k: s.block.top_k,
            experts: s.block.experts,
            local_experts: s.local,
            mma_per_pair: mma / g,
            gp_per_pair: gp / g,
            mem_per_pair: mem_pair / g,
            mem_per_expert: w_bytes / g,
            gp_per_expert: deq_w / g,
            fixed_per_expert: eager,
        };
        let bias_gp = if s.block.bias { 1.0 } else { 0.0 };
        let hbm = self.hbm;
        // Gate and up (or up alone, for ungated experts) in one GEMM.
        let up = s.up() * i_l;
        let gate_up = mk(
            2.0 * h * up / mma_r,
            bias_gp * up / self.vec_bf16,
            (h * ab + up * 2.0) / hbm,
            h * up * wb / hbm,
            deq * h * up / self.vec_fp32,
        );
        let act_bytes = 4.0 + if q.is_quantized() { 1.0 } else { 2.0 };
        let act = ExpertCost {
            mma_per_pair: 0.0,
            gp_per_pair: 8.0 * i_l / self.vec_bf16 / g,
            mem_per_pair: i_l * act_bytes / hbm / g,
            mem_per_expert: 0.0,
            gp_per_expert: 0.0,
            ..gate_up.clone()
        };
        let down = mk(
            2.0 * i_l * h / mma_r,
            bias_gp * h / self.vec_bf16,
            (i_l * ab + h * 2.0) / hbm,
            i_l * h * wb / hbm,
            deq * i_l * h / self.vec_fp32,
        );
        [gate_up, act, down]
    }

    /// After the experts: reduce-scatter over MoE-TP, all-to-all back over EP and unpermute.
    fn moe_combine_ops(&self, count: f64, s: &MoeShape) -> Vec<Op> {
        let h = s.eh;
        let mut routed: Vec<Op> = Vec::new();
        if s.moe_tp > 1.0 {
            routed.extend(self.collective_op(
                "moe_tp_reduce_scatter",
                count,
                self.moe_tp_group,
                Collective::ReduceScatter,
                scaled(&s.sliced, s.per_rank_rows * s.moe_tp * h * 2.0),
            ));
        }
        if s.ep > 1.0 {
            let top_k = s.block.top_k;
            routed.extend(self.collective_op(
                "moe_combine_all_to_all",
                count,
                self.ep_group,
                Collective::AllToAll,
                scaled(&s.sliced, top_k * h * 2.0 * (s.ep - 1.0) / s.ep),
            ));
            routed.push(self.vector_op("unpermute_weighted_sum", count, s.sliced, top_k * h, 2.0, 2.0 + 2.0 / top_k, false, 1.0));
        }
        routed
    }

    /// The shared expert's dense MLP (TP-split or on the sliced tokens), laid out apart so it
    /// can be scheduled beside the routed experts.
    fn shared_expert_ops(&mut self, count: f64, shared: f64, sliced: Coef, gated: bool) -> Vec<Op> {
        if self.opts.shared_expert_tp {
            self.shared_mlp_ops(count, unit(TOK, 1.0), shared / self.tp, true, gated)
        } else {
            self.shared_mlp_ops(count, sliced, shared, false, gated)
        }
    }

    /// A shared expert of `width` on `tok` tokens, with its own TP reduction when `reduce`, as
    /// ops taken out of the graph (none without a shared expert).
    fn shared_mlp_ops(&mut self, count: f64, tok: Coef, width: f64, reduce: bool, gated: bool) -> Vec<Op> {
        if width <= 0.0 {
            return Vec::new();
        }
        let qs = self.non_expert_q;
        let before = self.ops.len();
        self.dense_mlp(count, tok, width, false, qs, reduce, gated);
        self.ops.split_off(before)
    }

    /// Append the routed and shared expert ops: fused with their communication, on two streams,
    /// or one after the other, as `--compile` allows.
    fn schedule_moe(&mut self, count: f64, routed: Vec<Op>, mut shared_ops: Vec<Op>, ep: f64) {
        if self.compile && self.opts.compile.dispatch_ffn_combine && ep > 1.0 {
            // One fused dispatch → FFN → combine kernel: communication hides under compute.
            let (comm, compute): (Vec<Op>, Vec<Op>) = routed.into_iter().partition(|o| matches!(o.kind, OpKind::Collective { .. }));
            let fixed = self.fixed_mma;
            self.ops.push(Op {
                name: "dispatch_ffn_combine",
                count,
                gate: TOK,
                fixed_s: fixed,
                window: None,
                kind: OpKind::Overlap { streams: vec![compute, comm], fused: true },
            });
        } else if self.compile && self.opts.compile.multistream && !shared_ops.is_empty() {
            // The shared expert runs on a second stream beside the routed experts.
            let streams = vec![routed, std::mem::take(&mut shared_ops)];
            self.ops.push(Op {
                name: "moe_multistream",
                count: 1.0,
                gate: TOK,
                fixed_s: 0.0,
                window: None,
                kind: OpKind::Overlap { streams, fused: false },
            });
        } else {
            self.ops.extend(routed);
        }
        self.ops.extend(shared_ops);
    }

    /// After MoE, TP ranks gather their token slices back into full hidden states.
    fn restore_tokens(&mut self, count: f64) {
        let tg = self.tp_group;
        let h = self.h;
        self.collective("moe_tp_restore_all_gather", count, tg, Collective::AllGather, unit(TOK, h / self.tp * 2.0));
    }
}

/// A MoE block as the model defines it (widths unsharded).
#[derive(Debug, Clone, Copy)]
pub(super) struct MoeBlock {
    pub(super) experts: f64,
    pub(super) top_k: f64,
    /// Each routed expert's intermediate width.
    pub(super) inter: f64,
    /// The shared experts' total intermediate width (0: none).
    pub(super) shared: f64,
    pub(super) bias: bool,
    /// Gated experts (gate and up); `false`: up alone and a squared ReLU.
    pub(super) gated: bool,
    /// A latent MoE's expert width (`None`: the model's hidden width).
    pub(super) latent: Option<f64>,
}

/// One MoE block's sizes on this rank, shared by the steps that lay it out.
pub(super) struct MoeShape {
    /// The block as the model defines it.
    pub(super) block: MoeBlock,
    /// The experts' hidden width: the model's, or a latent MoE's latent width.
    pub(super) eh: f64,
    /// Every TP rank holds every token and one all-reduce combines the experts (no slicing,
    /// dispatch or restore).
    pub(super) replicated: bool,
    pub(super) tp: f64,
    pub(super) ep: f64,
    pub(super) moe_tp: f64,
    /// The experts' quantization, with its activation and weight bytes per element.
    pub(super) q: LinearQuant,
    pub(super) ab: f64,
    pub(super) wb: f64,
    /// One TP rank's slice of the tokens.
    pub(super) sliced: Coef,
    /// Rows a rank exchanges per sliced token over MoE-TP: top_k once EP has dispatched them.
    pub(super) per_rank_rows: f64,
    /// Expert intermediate width per MoE-TP rank.
    pub(super) i_l: f64,
    /// Experts held by this rank.
    pub(super) local: f64,
}

impl MoeShape {
    /// The first GEMM's width in units of the intermediate width: gate and up, or up alone.
    pub(super) fn up(&self) -> f64 {
        if self.block.gated {
            2.0
        } else {
            1.0
        }
    }

    /// Weight matrices of an expert: gate, up and down, or up and down.
    pub(super) fn matrices(&self) -> f64 {
        self.up() + 1.0
    }
}
