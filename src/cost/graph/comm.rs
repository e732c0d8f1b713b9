//! Communication operators: a collective on a communication group (none on a group of one), and
//! the TP reduction after a row-parallel linear — an all-reduce, or reduce-scatter + all-gather
//! under sequence parallelism — fused with its GEMM on two streams under `matmul_allreduce`.

use super::{Builder, TOK};
use crate::cost::ops::{scaled, unit, Coef, Collective, Op, OpKind};
use crate::hardware::CommGroup;
use crate::quant::LinearQuant;

impl Builder<'_> {
    pub(super) fn collective_op(&self, name: &'static str, count: f64, group: CommGroup, algo: Collective, bytes: Coef) -> Option<Op> {
        if group.size <= 1 {
            return None;
        }
        let mem = scaled(&bytes, 2.0 / self.hbm);
        let op = Op {
            name,
            count,
            gate: Self::gate_of(&bytes),
            fixed_s: self.fixed_comm,
            window: None,
            kind: OpKind::Collective { algo, group, bytes, mem },
        };
        Some(self.measured_collective(op, group, algo, &bytes))
    }

    pub(super) fn collective(&mut self, name: &'static str, count: f64, group: CommGroup, algo: Collective, bytes: Coef) {
        if let Some(op) = self.collective_op(name, count, group, algo, bytes) {
            self.ops.push(op);
        }
    }

    /// Sum partial outputs over the TP group after a row-parallel linear (o_proj, down).
    pub(super) fn tp_reduce_op(&self, name: &'static str, count: f64, width: f64) -> Vec<Op> {
        let bytes = unit(TOK, width * 2.0);
        if self.opts.compile.sequence_parallel {
            let rs = self.collective_op(name, count, self.tp_group, Collective::ReduceScatter, bytes);
            let ag = self.collective_op("sp_all_gather", count, self.tp_group, Collective::AllGather, scaled(&bytes, 1.0 / self.tp));
            rs.into_iter().chain(ag).collect()
        } else {
            self.collective_op(name, count, self.tp_group, Collective::AllReduce, bytes).into_iter().collect()
        }
    }

    /// A row-parallel GEMM followed by its TP reduction (fused when matmul_allreduce).
    pub(super) fn row_parallel(
        &mut self,
        name: &'static str,
        reduce: &'static str,
        count: f64,
        tok: Coef,
        k: f64,
        n: f64,
        q: Option<LinearQuant>,
        bias: bool,
    ) {
        let mm = self.gemm_op(name, count, tok, k, n, q, bias);
        let red = self.tp_reduce_op(reduce, count, n);
        if self.compile && self.opts.compile.matmul_allreduce && !red.is_empty() {
            let fixed = mm.fixed_s;
            let streams = vec![vec![mm], red];
            self.ops.push(Op {
                name: "matmul_all_reduce",
                count,
                gate: TOK,
                fixed_s: fixed,
                window: None,
                kind: OpKind::Overlap { streams, fused: true },
            });
        } else {
            self.ops.push(mm);
            self.ops.extend(red);
        }
    }
}
