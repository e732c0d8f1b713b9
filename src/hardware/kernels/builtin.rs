//! The kernel tables that ship inside the binary (`profiles/kernels/<system>/<engine>.tables.zst`,
//! derived from NVIDIA AIConfigurator's silicon database by `examples/pack_kernel_tables.rs`),
//! decoded on first use and shared.

use super::{packed, KernelTables};
use std::sync::{Arc, OnceLock};

macro_rules! builtin_tables {
    ($(($system:literal, $engine:literal)),* $(,)?) => {
        &[$(($system, $engine, include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/profiles/kernels/", $system, "/", $engine, ".tables.zst")) as &[u8])),*]
    };
}

/// (system, engine, packed file) of every built-in set.
const BUILTIN: &[(&str, &str, &[u8])] = builtin_tables!(
    ("h100_sxm", "vllm"),
    ("h100_sxm", "sglang"),
    ("h100_sxm", "trtllm"),
    ("h200_sxm", "vllm"),
    ("h200_sxm", "sglang"),
    ("h200_sxm", "trtllm"),
    ("b200_sxm", "vllm"),
    ("b200_sxm", "sglang"),
    ("b200_sxm", "trtllm"),
    ("b300_sxm", "vllm"),
    ("b300_sxm", "sglang"),
    ("b300_sxm", "trtllm"),
    ("gb200", "vllm"),
    ("gb200", "sglang"),
    ("gb200", "trtllm"),
    ("gb300", "vllm"),
    ("gb300", "sglang"),
    ("gb300", "trtllm"),
    ("rtx_pro_6000_server", "vllm"),
    ("rtx_pro_6000_server", "sglang"),
    ("rtx_pro_6000_server", "trtllm"),
    ("a100_sxm", "vllm"),
    ("a100_sxm", "sglang"),
    ("a100_sxm", "trtllm"),
    ("l40s", "vllm"),
    ("l40s", "sglang"),
    ("l40s", "trtllm"),
);

static DECODED: [OnceLock<Arc<KernelTables>>; BUILTIN.len()] = [const { OnceLock::new() }; BUILTIN.len()];

/// The built-in tables of `system` under `engine`'s kernels, if they ship.
pub fn tables(system: &str, engine: &str) -> Option<Arc<KernelTables>> {
    let i = BUILTIN.iter().position(|(s, e, _)| *s == system && *e == engine)?;
    let t = DECODED[i].get_or_init(|| {
        // The files are part of the binary; a damaged one is a build bug.
        Arc::new(packed::from_compressed(BUILTIN[i].2).unwrap_or_else(|e| panic!("built-in kernel tables {system}/{engine}: {e}")))
    });
    Some(Arc::clone(t))
}

/// Systems and engines with built-in tables.
pub fn available() -> impl Iterator<Item = (&'static str, &'static str)> {
    BUILTIN.iter().map(|(s, e, _)| (*s, *e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_set_decodes_with_its_tables() {
        for (system, engine) in available() {
            let t = tables(system, engine).unwrap();
            assert_eq!((t.provenance.system.as_str(), t.provenance.engine.as_str()), (system, engine));
            // Mutation: pack without GEMMs or attention and this fails.
            assert!(t.gemm(super::super::GemmDtype::Bf16).is_some(), "{system}/{engine}: no bf16 GEMM table");
            assert!(t.variants(super::super::KernelOp::GenerationAttention).count() > 0, "{system}/{engine}");
        }
        assert!(tables("h200_sxm", "msmodeling").is_none());
    }

    #[test]
    fn borrowed_expert_tables_replace_only_their_dtype_and_are_shared() {
        use super::super::{with_moe_from, GemmDtype, KernelOp, MoeDtype, TableId};
        let (trt, vllm) = (tables("h200_sxm", "trtllm").unwrap(), tables("h200_sxm", "vllm").unwrap());
        let merged = with_moe_from(&trt, &vllm, MoeDtype::W4a16Mxfp4);
        let id = TableId::moe(MoeDtype::W4a16Mxfp4, "balanced");
        // The experts are the donor's; every other table stays the engine's own. (Mutation:
        // leave the donor's tables out of the merge and the first assertion fails.)
        assert_eq!(merged.get(&id), vllm.get(&id));
        assert_ne!(trt.get(&id), vllm.get(&id));
        assert_eq!(merged.gemm(GemmDtype::Bf16), trt.gemm(GemmDtype::Bf16));
        assert_eq!(
            merged.variants(KernelOp::Moe).filter(|v| v.starts_with("fp8/")).count(),
            trt.variants(KernelOp::Moe).filter(|v| v.starts_with("fp8/")).count()
        );
        assert!(merged.provenance.to_string().contains("w4a16_mxfp4 experts from vllm 0.24.0"), "{}", merged.provenance);
        // Merged once: a second call shares the tables (candidates compare them by identity).
        assert!(Arc::ptr_eq(&merged, &with_moe_from(&trt, &vllm, MoeDtype::W4a16Mxfp4)));
        // A donor without tables of that dtype leaves the engine's own.
        assert!(Arc::ptr_eq(&with_moe_from(&trt, &vllm, MoeDtype::Nvfp4), &trt));
    }
}
