//! The gated MLP (gate/up projection, SwiGLU, down projection) of dense layers, and of shared
//! experts, which the MoE builder lays out with it.

use super::Builder;
use crate::cost::ops::Coef;
use crate::quant::{ActQuant, LinearQuant};

impl Builder<'_> {
    /// Gated MLP with intermediate width `i_l` on this rank, over `tok` tokens; `reduce` adds
    /// the TP all-reduce (row-parallel down projection).
    pub(super) fn dense_mlp(&mut self, count: f64, tok: Coef, i_l: f64, bias: bool, q: LinearQuant, reduce: bool) {
        let h = self.h;
        let qq = Some(q);
        if self.compile {
            self.gemm_c("gate_up_proj", count, tok, h, 2.0 * i_l, qq, bias);
            let quant_fused = q.act_quant() != ActQuant::None;
            let op = self.vector_op(
                "swiglu",
                count,
                tok,
                i_l,
                5.0 + if quant_fused { 3.0 } else { 0.0 },
                4.0 + if quant_fused { 1.0 } else { 2.0 },
                false,
                1.0,
            );
            self.ops.push(op);
        } else {
            for name in ["gate_proj", "up_proj"] {
                self.act_quant(if name == "gate_proj" { "gate_input_quant" } else { "up_input_quant" }, count, tok, h, q);
                self.gemm_c(name, count, tok, h, i_l, qq, bias);
            }
            let op = self.vector_op("silu_and_mul", count, tok, i_l, 5.0, 10.0, false, 2.0);
            self.ops.push(op);
            self.act_quant("down_input_quant", count, tok, i_l, q);
        }
        if reduce {
            self.row_parallel("down_proj", "mlp_all_reduce", count, tok, i_l, h, qq, bias);
        } else {
            self.gemm_c("shared_down_proj", count, tok, i_l, h, qq, bias);
        }
    }
}
