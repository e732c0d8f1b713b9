//! How one operator's shape becomes roofline coefficients: GEMMs (quantized or bf16, priced at
//! the nearest matrix peak the device has), element-wise operators and the activation
//! quantization before a quantized linear. The builders call these; a cost backend that prices
//! kernels another way would replace them.

use super::Builder;
use crate::cost::ops::{add, f, scaled, unit, Coef, Op, OpKind};
use crate::hardware::Dtype;
use crate::quant::{ActQuant, LinearQuant};

impl Builder<'_> {
    /// Effective matrix FLOP/s for `dt`; a dtype the device lacks falls back to the nearest
    /// wider one it has (the original would price such GEMMs at zero time).
    pub(super) fn mma_rate(&mut self, dt: Dtype) -> f64 {
        let chain: &[Dtype] = match dt {
            Dtype::Fp4 => &[Dtype::Fp4, Dtype::Fp8, Dtype::Int8, Dtype::Bf16, Dtype::Fp16],
            Dtype::Fp8 => &[Dtype::Fp8, Dtype::Int8, Dtype::Bf16, Dtype::Fp16],
            Dtype::Int8 => &[Dtype::Int8, Dtype::Fp16, Dtype::Bf16],
            Dtype::Bf16 => &[Dtype::Bf16, Dtype::Fp16],
            Dtype::Fp16 => &[Dtype::Fp16, Dtype::Bf16],
            Dtype::Fp32 => &[Dtype::Fp32, Dtype::Bf16, Dtype::Fp16],
        };
        for (i, &d) in chain.iter().enumerate() {
            if let Some(r) = self.dev.matrix_flops(d) {
                if i > 0 {
                    let w = format!("{} has no {} matrix peak; {} GEMMs are priced at its {} peak", self.dev.name, dt, dt, d);
                    if !self.warnings.contains(&w) {
                        self.warnings.push(w);
                    }
                }
                return r;
            }
        }
        unreachable!("validated profiles have a bf16 or fp16 matrix peak")
    }

    /// Whether the device's tensor cores take FP4 operands (and so convert FP4 in hardware).
    pub(super) fn fp4_cores(&self) -> bool {
        self.dev.has_fp4_tensor_cores()
    }

    /// With causal masking, prefill pairs lose q(q−1)/2 per sequence: Σ q·c − (Σ q² − Σ q)/2.
    pub(super) fn causal(&self, mma: &mut Coef, gp: &mut Coef) {
        if self.opts.causal_attention {
            for c in [mma, gp] {
                let per_pair = c[f::P_PAIRS];
                c[f::P_QSQ] -= 0.5 * per_pair;
                c[f::P_TOKENS] += 0.5 * per_pair;
            }
        }
    }

    pub(super) fn gate_of(tok: &Coef) -> usize {
        (1..f::N).find(|&i| tok[i] != 0.0).unwrap_or(f::ONE)
    }

    pub(super) fn track_width(&mut self, w: f64) {
        if w > self.max_act_width {
            self.max_act_width = w;
        }
    }

    /// A GEMM of `tok`·[K] × [K, N]; `q = None` keeps it in bf16 (lm_head, router, vision).
    pub(super) fn gemm_op(&mut self, name: &'static str, count: f64, tok: Coef, k: f64, n: f64, q: Option<LinearQuant>, bias: bool) -> Op {
        let g = self.opts.quant.mxfp4_group_size;
        let (dt, wb, ab, sb, deq) = match q {
            Some(q) if q.is_quantized() => (
                q.gemm_dtype(),
                q.weight_bytes(g),
                q.activation_bytes(g),
                q.channel_scale_bytes(),
                q.dequant_flops_per_weight(self.fp4_cores()),
            ),
            _ => (Dtype::Bf16, 2.0, 2.0, 0.0, 0.0),
        };
        let rate = self.mma_rate(dt);
        let mma = scaled(&tok, 2.0 * k * n / rate);
        let gp = add(&scaled(&tok, if bias { n / self.vec_bf16 } else { 0.0 }), &unit(f::ONE, deq * k * n / self.vec_fp32));
        let mem = add(&unit(f::ONE, (k * n * wb + n * sb) / self.hbm), &scaled(&tok, (k * ab + n * 2.0) / self.hbm));
        self.weights += count * self.copies * (k * n * wb + n * sb + if bias { n * 2.0 } else { 0.0 });
        // Widths per token in flight; the LM head runs on sampled rows only (counted apart).
        if tok[f::TOKENS] != 0.0 {
            self.track_width((k + n) * tok[f::TOKENS]);
        }
        let op =
            Op { name, count, gate: Self::gate_of(&tok), fixed_s: self.fixed_mma, window: None, kind: OpKind::Roofline { mma, gp, mem } };
        self.measured_gemm(op, &tok, k, n, q)
    }

    pub(super) fn gemm(&mut self, name: &'static str, count: f64, tok: usize, k: f64, n: f64, q: Option<LinearQuant>, bias: bool) {
        let op = self.gemm_op(name, count, unit(tok, 1.0), k, n, q, bias);
        self.ops.push(op);
    }

    pub(super) fn gemm_c(&mut self, name: &'static str, count: f64, tok: Coef, k: f64, n: f64, q: Option<LinearQuant>, bias: bool) {
        let op = self.gemm_op(name, count, tok, k, n, q, bias);
        self.ops.push(op);
    }

    /// An element-wise operator over `elems` per token; `kernels` launches in eager mode.
    pub(super) fn vector_op(
        &self,
        name: &'static str,
        count: f64,
        tok: Coef,
        elems: f64,
        flops: f64,
        bytes: f64,
        fp32: bool,
        kernels: f64,
    ) -> Op {
        let rate = if fp32 { self.vec_fp32 } else { self.vec_bf16 };
        Op {
            name,
            count,
            gate: Self::gate_of(&tok),
            fixed_s: self.fixed_gp * kernels,
            window: None,
            kind: OpKind::Roofline {
                mma: [0.0; f::N],
                gp: scaled(&tok, elems * flops / rate),
                mem: scaled(&tok, elems * bytes / self.hbm),
            },
        }
    }

    pub(super) fn vector(&mut self, name: &'static str, count: f64, tok: usize, elems: f64, flops: f64, bytes: f64, fp32: bool) {
        let op = self.vector_op(name, count, unit(tok, 1.0), elems, flops, bytes, fp32, 1.0);
        self.ops.push(op);
    }

    /// The activation quantization a quantized linear needs before it (none for bf16).
    fn act_quant_op(&self, name: &'static str, count: f64, tok: Coef, elems: f64, q: LinearQuant) -> Option<Op> {
        if self.quant_in_gemm(q) {
            return None;
        }
        let (flops, bytes) = match q.act_quant() {
            ActQuant::None => return None,
            ActQuant::Static => (2.0, 3.0),
            ActQuant::Dynamic => (3.0, 3.0),
            ActQuant::Mxfp4 | ActQuant::Mxfp8 | ActQuant::Fp8Group | ActQuant::Nvfp4 => {
                (2.0, 2.0 + q.activation_bytes(self.opts.quant.mxfp4_group_size))
            }
        };
        Some(self.vector_op(name, count, tok, elems, flops, bytes, true, 1.0))
    }

    pub(super) fn act_quant(&mut self, name: &'static str, count: f64, tok: Coef, elems: f64, q: LinearQuant) {
        if let Some(op) = self.act_quant_op(name, count, tok, elems, q) {
            self.ops.push(op);
        }
    }
}
