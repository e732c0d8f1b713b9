//! RMSNorm: one fused kernel with `--compile` (quantizing its output for the next GEMM), the
//! decomposed aten ops in eager mode; on the TP-local token slice under sequence parallelism.

use super::{Builder, TOK};
use crate::cost::ops::{unit, Coef};
use crate::quant::ActQuant;

impl Builder<'_> {
    /// RMSNorm over `elems` per token, with the residual add fused when `residual`; with
    /// `--compile` one fused kernel (quantizing its output for the next GEMM), eager the
    /// decomposed aten ops.
    pub(super) fn norm(&mut self, name: &'static str, count: f64, tok: usize, elems: f64, residual: bool, quant_out: ActQuant) {
        self.weights += count * self.copies * elems * 2.0;
        let tok_c = self.norm_tokens(tok);
        if self.compile {
            let q = quant_out != ActQuant::None;
            let flops = 5.0 + if residual { 1.0 } else { 0.0 } + if q { 3.0 } else { 0.0 };
            let bytes = 2.0 + if residual { 4.0 } else { 0.0 } + if q { 1.0 } else { 2.0 };
            let op = self.vector_op(name, count, tok_c, elems, flops, bytes, !q, 1.0);
            self.ops.push(op);
        } else {
            if residual {
                let op = self.vector_op("residual_add", count, tok_c, elems, 1.0, 6.0, false, 1.0);
                self.ops.push(op);
            }
            // to_fp32, pow, mean, add+rsqrt, mul, to_bf16, mul weight.
            let op = self.vector_op(name, count, tok_c, elems, 4.0, 36.0, true, 7.0);
            self.ops.push(op);
        }
    }

    /// Under sequence parallelism norms run on the TP-local token slice.
    fn norm_tokens(&self, tok: usize) -> Coef {
        if self.opts.compile.sequence_parallel && self.tp > 1.0 && tok == TOK {
            unit(tok, 1.0 / self.tp)
        } else {
            unit(tok, 1.0)
        }
    }
}
