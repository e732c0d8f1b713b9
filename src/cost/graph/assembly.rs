//! The graph assembly: the model's layers in step order (embedding, decoder layers, MTP and
//! drafter passes, final norm, LM head, vision tower), whole or one pipeline stage's share of
//! them, and the memory model from what the builders accumulated.

use super::moe::MoeBlock;
use super::{Builder, TOK};
use crate::cost::memory::MemoryModel;
use crate::cost::ops::{f, unit, Collective};
use crate::cost::pipeline::StageSpan;
use crate::cost::{CostOptions, EmbeddingTp, ParallelConfig, RooflineCost};
use crate::hardware::DeviceProfile;
use crate::model::{Attention, LayerGroup, Mlp, ModelArch};
use crate::quant::ActQuant;

/// Build the cost model and the matching memory model of one candidate.
pub fn build_both(model: &ModelArch, dev: &DeviceProfile, par: &ParallelConfig, opts: &CostOptions) -> (RooflineCost, MemoryModel) {
    build_stage(model, dev, par, opts, &StageSpan::whole(model))
}

/// Build the cost and memory models of one pipeline stage: its decoder layers, the embedding
/// (and a vision tower) on the first stage, MTP and drafter passes, the final norm and the LM
/// head on the last. The whole model is the one stage that is both.
pub fn build_stage(
    model: &ModelArch,
    dev: &DeviceProfile,
    par: &ParallelConfig,
    opts: &CostOptions,
    span: &StageSpan,
) -> (RooflineCost, MemoryModel) {
    let mut b = Builder::new(model, dev, par, opts);
    // A last stage without the embedding holds its own LM head, tied or not.
    b.tied_flag &= span.first;
    if span.first {
        b.embedding();
    }
    let mut at = 0;
    for g in &model.layers {
        let (lo, hi) = (at.max(span.layers.0), (at + g.count).min(span.layers.1));
        at += g.count;
        if hi > lo {
            b.copies = 1.0;
            b.layer((hi - lo) as f64, &g.attention, &g.mlp, TOK);
        }
    }
    if span.last {
        b.head(model);
    }
    if span.first && opts.with_vision {
        if let Some(v) = &model.vision {
            b.vision(v);
        }
    }
    let sampled = if span.last { b.vocab / b.tp * 2.0 + b.vocab * 4.0 } else { 0.0 };
    let mem = MemoryModel {
        device_bytes: dev.memory.bytes,
        weight_bytes: b.weights,
        kv_bytes_per_token: b.kv_per_token,
        state_bytes_per_seq: b.state_per_seq,
        kv_capacity_factor: b.kv_capacity_factor,
        act_bytes_per_token: 2.0 * (2.0 * b.h) + b.max_act_width * 2.0,
        act_bytes_per_sampled: sampled,
        sampled_vocab: if span.last { b.vocab } else { 0.0 },
    };
    let mut cost = RooflineCost::from_ops(b.ops, dev.host_overhead_us * 1e-6, b.warnings);
    cost.power = dev.power_limit;
    (cost, mem)
}

impl Builder<'_> {
    /// The last stage's passes after the decoder layers: MTP and drafter passes, the final
    /// norm, the LM head and the sampler.
    fn head(&mut self, model: &ModelArch) {
        let opts = self.opts;
        let mut lm_passes = 1.0;
        if opts.mtp_tokens > 0 {
            if let Some(m) = &model.mtp {
                let k = opts.mtp_tokens as f64;
                // k draft passes reuse the model's MTP layer(s): compute k times, hold weights once.
                self.copies = m.layers as f64 / k;
                self.gemm("mtp_eh_proj", k, TOK, 2.0 * self.h, self.h, Some(self.non_expert_q), false);
                self.vector("mtp_enorm_hnorm", 2.0 * k, TOK, self.h, 5.0, 4.0, false);
                self.weights += 2.0 * self.h * 2.0 * m.layers as f64;
                self.layer(k, &m.attention, &m.mlp, TOK);
                lm_passes += k;
            }
        }
        if opts.draft_layers > 0 {
            // DFlash/DSpark drafters: priced as extra layers of the target's first layer kind.
            let g: &LayerGroup = &model.layers[0];
            self.copies = 1.0;
            self.layer(opts.draft_layers as f64, &g.attention, &g.mlp, TOK);
        }
        self.copies = 1.0;
        self.norm("final_norm", 1.0, TOK, self.h, true, ActQuant::None);
        self.lm_head(lm_passes);
    }
}

/// The cost model alone.
pub fn build(model: &ModelArch, dev: &DeviceProfile, par: &ParallelConfig, opts: &CostOptions) -> RooflineCost {
    build_both(model, dev, par, opts).0
}

impl Builder<'_> {
    /// One decoder layer kind, `count` times: its token mixer and its MLP, each after its norm
    /// (a Nemotron-H block has only one of the two).
    fn layer(&mut self, count: f64, att: &Attention, mlp: &Mlp, tok: usize) {
        let _ = tok;
        self.attention(count, att);
        let q = match mlp {
            Mlp::Dense { .. } => self.non_expert_q,
            Mlp::Moe { .. } => self.expert_q,
            Mlp::None => return,
        };
        let h = self.h;
        let post_quant = if self.compile { q.act_quant() } else { ActQuant::None };
        let norm = if matches!(att, Attention::None) { "mlp_norm" } else { "post_attention_norm" };
        self.norm(norm, count, TOK, h, true, post_quant);
        match *mlp {
            Mlp::Dense { intermediate_size, bias, gated } => {
                let q = self.non_expert_q;
                self.dense_mlp(count, unit(TOK, 1.0), intermediate_size as f64 / self.tp, bias, q, true, gated);
            }
            Mlp::Moe { experts, top_k, expert_intermediate_size, shared_intermediate_size, bias, gated, latent_size } => {
                let block = MoeBlock {
                    experts: experts as f64,
                    top_k: top_k as f64,
                    inter: expert_intermediate_size as f64,
                    shared: shared_intermediate_size as f64,
                    bias,
                    gated,
                    latent: latent_size.map(|l| l as f64),
                };
                self.moe(count, &block);
            }
            Mlp::None => {}
        }
    }

    fn embedding(&mut self) {
        let h = self.h;
        match self.opts.word_embedding_tp {
            None => {
                self.weights += self.vocab * h * 2.0;
                self.vector("embedding", 1.0, TOK, h, 0.0, 4.0, false);
            }
            Some(EmbeddingTp::Row) => {
                self.weights += self.vocab / self.tp * h * 2.0;
                self.vector("embedding", 1.0, TOK, h, 0.0, 4.0, false);
                let tg = self.tp_group;
                self.collective("embedding_all_reduce", 1.0, tg, Collective::AllReduce, unit(TOK, h * 2.0));
            }
            Some(EmbeddingTp::Col) => {
                self.weights += self.vocab * h / self.tp * 2.0;
                self.vector("embedding", 1.0, TOK, h / self.tp, 0.0, 4.0, false);
                let tg = self.tp_group;
                self.collective("embedding_all_gather", 1.0, tg, Collective::AllGather, unit(TOK, h / self.tp * 2.0));
            }
        }
    }

    fn lm_head(&mut self, passes: f64) {
        let (h, v_l) = (self.h, self.vocab / self.tp);
        let tied_and_replicated = self.opts.word_embedding_tp.is_none() && self.tied();
        let before = self.weights;
        self.gemm("lm_head", passes, f::SAMPLED, h, v_l, None, false);
        if tied_and_replicated {
            // Tied embeddings: the head reads the (replicated) embedding matrix.
            self.weights = before;
        } else {
            // Only one head even with MTP passes.
            self.weights = before + h * v_l * 2.0;
        }
        let tg = self.tp_group;
        self.collective("logits_all_gather", passes, tg, Collective::AllGather, unit(f::SAMPLED, v_l * 2.0));
        let v = self.vocab;
        self.vector("sampler", passes, f::SAMPLED, v, 5.0, 6.0, true);
    }

    fn tied(&self) -> bool {
        self.tied_flag
    }
}
