//! The MLP of dense layers and of shared experts, which the MoE builder lays out with it: gated
//! (gate/up projection, SwiGLU, down projection) or ungated (up projection, squared ReLU, down
//! projection: Nemotron-H).

use super::Builder;
use crate::cost::ops::Coef;
use crate::quant::{ActQuant, LinearQuant};

impl Builder<'_> {
    /// MLP with intermediate width `i_l` on this rank, over `tok` tokens, gated or not; `reduce`
    /// adds the TP all-reduce (row-parallel down projection).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn dense_mlp(&mut self, count: f64, tok: Coef, i_l: f64, bias: bool, q: LinearQuant, reduce: bool, gated: bool) {
        let h = self.h;
        let qq = Some(q);
        if !gated {
            self.ungated_up(count, tok, i_l, bias, q);
        } else if self.compile {
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

    /// The up projection and squared ReLU of an ungated MLP (fused into one kernel after the
    /// GEMM under `--compile`, two element-wise kernels eagerly: relu, square).
    fn ungated_up(&mut self, count: f64, tok: Coef, i_l: f64, bias: bool, q: LinearQuant) {
        let h = self.h;
        if !self.compile {
            self.act_quant("up_input_quant", count, tok, h, q);
        }
        self.gemm_c("up_proj", count, tok, h, i_l, Some(q), bias);
        let quant_fused = self.compile && q.act_quant() != ActQuant::None;
        // Read the bf16 input, write the output (FP8 when the next GEMM's quantization is fused).
        let (bytes, kernels) = if self.compile { (2.0 + if quant_fused { 1.0 } else { 2.0 }, 1.0) } else { (8.0, 2.0) };
        let op = self.vector_op("relu2", count, tok, i_l, 2.0 + if quant_fused { 3.0 } else { 0.0 }, bytes, false, kernels);
        self.ops.push(op);
        if !self.compile {
            self.act_quant("down_input_quant", count, tok, i_l, q);
        }
    }
}
