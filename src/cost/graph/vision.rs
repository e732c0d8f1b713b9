//! The vision tower: patch embedding, its attention and MLP blocks over image patches, and the
//! patch mergers (deepstack included).

use super::Builder;
use crate::cost::ops::{f, unit, Collective, Op, OpKind};
use crate::hardware::Dtype;
use crate::model::VisionTower;
use crate::quant::ActQuant;

impl Builder<'_> {
    pub(super) fn vision(&mut self, v: &VisionTower) {
        let tp = self.tp;
        let hv = v.hidden_size as f64;
        let iv = v.intermediate_size as f64;
        let heads = v.heads as f64 / tp;
        let hd = v.hidden_size as f64 / v.heads as f64;
        let p = f::IMG_PATCHES;
        let depth = v.depth as f64;
        let patch_in = (v.in_channels * v.temporal_patch_size * v.patch_size * v.patch_size) as f64;
        self.gemm("vision_patch_embed", 1.0, p, patch_in, hv, None, true);
        self.norm("vision_norm1", depth, p, hv, true, ActQuant::None);
        self.gemm("vision_qkv", depth, p, hv, 3.0 * hv / tp, None, true);
        self.vector("vision_rope", depth, p, 2.0 * hv / tp, 3.0, 4.0, false);
        let mma_r = self.mma_rate(Dtype::Bf16);
        let mut mma = [0.0; f::N];
        let mut gp = [0.0; f::N];
        let mut mem = [0.0; f::N];
        mma[f::IMG_PAIRS] = 4.0 * heads * hd / mma_r;
        gp[f::IMG_PAIRS] = 4.0 * heads / self.vec_bf16;
        mem[p] = 4.0 * heads * hd * 2.0 / self.hbm;
        self.ops.push(Op {
            name: "vision_attention",
            count: depth,
            gate: p,
            fixed_s: self.fixed_mma,
            window: None,
            kind: OpKind::Roofline { mma, gp, mem },
        });
        let tok = unit(p, 1.0);
        self.gemm("vision_proj", depth, p, hv / tp, hv, None, true);
        let tg = self.tp_group;
        self.collective("vision_attn_all_reduce", depth, tg, Collective::AllReduce, unit(p, hv * 2.0));
        self.norm("vision_norm2", depth, p, hv, true, ActQuant::None);
        self.gemm("vision_fc1", depth, p, hv, iv / tp, None, true);
        let op = self.vector_op("vision_gelu", depth, tok, iv / tp, 8.0, 4.0, false, 1.0);
        self.ops.push(op);
        self.gemm("vision_fc2", depth, p, iv / tp, hv, None, true);
        self.collective("vision_mlp_all_reduce", depth, tg, Collective::AllReduce, unit(p, hv * 2.0));
        let merge = (v.spatial_merge_size as f64).powi(2);
        let merged = hv * merge;
        let mergers = 1.0 + v.deepstack_mergers as f64;
        let mtok = unit(p, 1.0 / merge);
        self.gemm_c("vision_merger_fc1", mergers, mtok, merged, merged, None, true);
        self.gemm_c("vision_merger_fc2", mergers, mtok, merged, v.out_hidden_size as f64, None, true);
        self.track_width(iv / tp + hv);
    }
}
