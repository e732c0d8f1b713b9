//! The built-in model catalog: architectures stored in this project's YAML format under
//! `profiles/models/` and embedded in the binary (no network needed).

use super::ModelArch;
use crate::yaml;

macro_rules! catalog_files {
    ($($file:literal),* $(,)?) => {
        &[$(($file, include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/profiles/models/", $file)))),*]
    };
}

const FILES: &[(&str, &str)] = catalog_files!(
    "Qwen--Qwen3-0.6B.yaml",
    "Qwen--Qwen3-1.7B.yaml",
    "Qwen--Qwen3-4B.yaml",
    "Qwen--Qwen3-8B.yaml",
    "Qwen--Qwen3-14B.yaml",
    "Qwen--Qwen3-32B.yaml",
    "Qwen--Qwen3-30B-A3B.yaml",
    "Qwen--Qwen3-235B-A22B.yaml",
    "Qwen--Qwen3-VL-8B-Instruct.yaml",
    "Qwen--Qwen3.5-27B.yaml",
    "Qwen--Qwen3.5-35B-A3B.yaml",
    "meta-llama--Meta-Llama-3-8B.yaml",
    "meta-llama--Meta-Llama-3-70B.yaml",
    "meta-llama--Meta-Llama-3.1-8B.yaml",
    "meta-llama--Meta-Llama-3.1-70B.yaml",
    "meta-llama--Meta-Llama-3.1-405B.yaml",
    "meta-llama--Llama-3.3-70B-Instruct.yaml",
    "meta-llama--Llama-4-Scout-17B-16E-Instruct.yaml",
    "meta-llama--Llama-4-Maverick-17B-128E-Instruct.yaml",
    "meta-llama--Llama-2-7b-hf.yaml",
    "meta-llama--Llama-2-13b-hf.yaml",
    "meta-llama--Llama-2-70b-hf.yaml",
    "codellama--CodeLlama-7b-hf.yaml",
    "codellama--CodeLlama-13b-hf.yaml",
    "codellama--CodeLlama-34b-hf.yaml",
    "mistralai--Mistral-7B-v0.1.yaml",
    "mistralai--Mistral-7B-v0.2.yaml",
    "mistralai--Mistral-7B-v0.3.yaml",
    "mistralai--Mixtral-8x7B-v0.1.yaml",
    "deepseek-ai--DeepSeek-V3.yaml",
    "deepseek-ai--DeepSeek-V3.1.yaml",
    "deepseek-ai--DeepSeek-R1.yaml",
    "moonshotai--Kimi-K2-Instruct.yaml",
    "openai--gpt-oss-20b.yaml",
    "openai--gpt-oss-120b.yaml",
    "zai-org--GLM-5.yaml",
    "zai-org--GLM-5-FP8.yaml",
    "moonshotai--Kimi-K2.5.yaml",
    "MiniMaxAI--MiniMax-M2.5.yaml",
    "MiniMaxAI--MiniMax-M2.7.yaml",
    "Qwen--Qwen3-Coder-480B-A35B-Instruct.yaml",
    "Qwen--Qwen3-VL-2B-Instruct.yaml",
    "Qwen--Qwen3-VL-4B-Instruct.yaml",
    "Qwen--Qwen3-VL-32B-Instruct.yaml",
    "Qwen--Qwen3.5-122B-A10B.yaml",
    "Qwen--Qwen3.5-397B-A17B.yaml",
    "deepseek-ai--DeepSeek-V3.2.yaml",
    "mistralai--Mixtral-8x22B-v0.1.yaml",
    "zai-org--GLM-5.1.yaml",
    "zai-org--GLM-5.1-FP8.yaml",
    "zai-org--GLM-5.2.yaml",
    "zai-org--GLM-5.2-FP8.yaml",
    "zai-org--GLM-5.3.yaml",
    "zai-org--GLM-5.3-FP8.yaml",
    "nvidia--Kimi-K2.6-NVFP4.yaml",
    "nvidia--Kimi-K2.7-Code-NVFP4.yaml",
    "Qwen--Qwen3-VL-30B-A3B-Instruct.yaml",
    "Qwen--Qwen3-VL-235B-A22B-Instruct.yaml",
    "nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.yaml",
    "nvidia--Nemotron-H-56B-Base-8K.yaml",
    "nvidia--NVIDIA-Nemotron-3-Super-120B-A12B-BF16.yaml",
    "nvidia--NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16.yaml",
    "nvidia--Llama-3_3-Nemotron-Super-49B-v1.yaml",
    "XiaomiMiMo--MiMo-7B-Base.yaml",
    "nvidia--Qwen3.6-27B-NVFP4.yaml",
    "nvidia--Qwen3.6-35B-A3B-NVFP4.yaml",
    "nvidia--NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4.yaml",
    "google--gemma-4-26B-A4B.yaml",
    "nvidia--Gemma-4-31B-IT-NVFP4.yaml",
    "stepfun-ai--Step-3.7-Flash.yaml",
    "stepfun-ai--Step-3.7-Flash-FP8.yaml",
    "XiaomiMiMo--MiMo-V2-Flash.yaml",
    "MiniMaxAI--MiniMax-M3.yaml",
);

/// Every catalog entry, in `--list-models` order.
pub fn all() -> Vec<ModelArch> {
    FILES
        .iter()
        .map(|(file, text)| {
            let m: ModelArch = yaml::from_str(text).unwrap_or_else(|e| panic!("catalog entry {file} is malformed: {e}"));
            m.validate().unwrap_or_else(|e| panic!("catalog entry {file} is invalid: {e}"));
            m
        })
        .collect()
}

/// Catalog ids, for listings and "did you mean" hints.
pub fn ids() -> Vec<String> {
    all().into_iter().map(|m| m.id).collect()
}

/// Exact HF id, case-insensitive.
pub fn find(id: &str) -> Option<ModelArch> {
    let file = format!("{}.yaml", id.replace('/', "--"));
    FILES
        .iter()
        .find(|(f, _)| f.eq_ignore_ascii_case(&file))
        .map(|(f, text)| yaml::from_str(text).unwrap_or_else(|e| panic!("catalog entry {f} is malformed: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn every_entry_loads_and_is_findable_case_insensitively() {
        let all = all();
        assert_eq!(all.len(), FILES.len());
        for m in &all {
            assert_eq!(find(&m.id.to_lowercase()).unwrap().id, m.id);
        }
        assert!(find("Qwen/Qwen3-99B").is_none());
    }

    /// The catalog is this project's own format; the models' published Hugging Face
    /// `config.json` files are kept under tests/fixtures/hf-configs, and every entry must still
    /// say what its config says. (Mutation: change a layer count in a catalog YAML file.)
    #[test]
    fn entries_match_published_configs() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hf-configs");
        let entries = std::fs::read_dir(&dir).expect("tests/fixtures/hf-configs is part of the repository");
        let mut checked = 0;
        for e in entries.flatten() {
            let path = e.path();
            let stem = path.file_stem().unwrap().to_string_lossy().to_string();
            if stem.ends_with(".hf_quant_config") {
                continue; // read with its config, below
            }
            let id = stem.replacen("--", "/", 1);
            let text = std::fs::read_to_string(&path).unwrap();
            // A ModelOpt checkpoint's `hf_quant_config.json`, kept as `Org--Name.hf_quant_config.json`.
            let hf_quant = std::fs::read_to_string(dir.join(format!("{stem}.hf_quant_config.json"))).ok();
            let parsed = crate::model::hf::parse_config_with(&text, hf_quant.as_deref(), &id).unwrap();
            let stored = find(&id).unwrap_or_else(|| panic!("{id} missing from the catalog"));
            assert_eq!(parsed, stored, "catalog entry {id} differs from its config.json");
            checked += 1;
        }
        assert!(checked >= 25);
    }

    fn assert_within_1pct(what: &str, ours: u64, published: f64) {
        let err = (ours as f64 / published - 1.0).abs();
        assert!(err < 0.01, "{what}: {ours} parameters against {published} published ({:.2} % off)", err * 100.0);
    }

    /// Each architecture issue 23 added holds its published checkpoint's weight count within
    /// 1 %. (Mutation: drop the sparse-attention indexer's, or the vision tower's, parameters,
    /// or count MiniMax-M2's MTP modules, and a bound fails.)
    #[test]
    fn new_architectures_match_their_published_weight_counts() {
        // GLM-5 (`glm_moe_dsa`): the model card's "744B parameters (40B active)", which leaves
        // out the MTP layer (one more MoE decoder layer, not counted here either); the lightning
        // indexer's projections (9.4 M a layer) are in.
        let glm = find("zai-org/GLM-5").unwrap();
        assert_within_1pct("GLM-5 without MTP", glm.param_counts().0, 744e9);
        assert_eq!(glm.mtp.as_ref().map(|m| m.layers), Some(1));
        let fp8 = find("zai-org/GLM-5-FP8").unwrap();
        assert_eq!((fp8.param_counts(), fp8.weights), (glm.param_counts(), crate::model::WeightFormat::Fp8Block));
        // Kimi-K2.5 (`kimi_k25`): its text backbone is Kimi-K2's, whose safetensors hold
        // 1,026,408,232,448 parameters (Hugging Face's count of moonshotai/Kimi-K2-Instruct,
        // shown as 1.03T; no MTP layers), plus the 400M MoonViT vision encoder of the model card
        // (ours: 411 M in its 27 blocks, 466 M with the patch embedding and the patch merger).
        let kimi = find("moonshotai/Kimi-K2.5").unwrap();
        let text = kimi.param_counts().0;
        assert_within_1pct("Kimi-K2.5 text backbone", text, 1_026_408_232_448.0);
        let vision = kimi.vision.as_ref().expect("Kimi-K2.5 has a vision tower").params();
        assert_within_1pct("Kimi-K2.5 with vision", text + vision, 1_026_408_232_448.0 + 400e6);
        assert!((400_000_000..500_000_000).contains(&vision), "MoonViT {vision}");
        assert_eq!(kimi.weights, crate::model::WeightFormat::Int4Experts);
        // MiniMax-M2.5 (`minimax_m2`): 229B parameters in its safetensors (Hugging Face's count;
        // the model card says 230B total, 10B active). Its config's three MTP modules are not in
        // the checkpoint, and not counted.
        let minimax = find("MiniMaxAI/MiniMax-M2.5").unwrap();
        assert_within_1pct("MiniMax-M2.5", minimax.param_counts().0, 229e9);
        // Nemotron-H (`nemotron_h`): the cards' totals, Nemotron 3 Nano "31.6B", Super "120B",
        // Ultra "550B" (latent MoE: the experts at the latent width, its two projections per
        // layer), Nemotron-H 56B. (Mutation: price the experts at the hidden width and Super
        // reads 450 B.)
        for (id, published) in [
            ("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", 31.6e9),
            ("nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-BF16", 120e9),
            ("nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16", 550e9),
            ("nvidia/Nemotron-H-56B-Base-8K", 56e9),
        ] {
            assert_within_1pct(id, find(id).unwrap().param_counts().0, published);
        }
        assert!(minimax.mtp.is_none());
        // Llama 3.3 Nemotron Super 49B (`nemotron-nas`): 49.9B parameters in its safetensors
        // (Hugging Face's count), 49 attention layers of 80. (Mutation: take every layer's MLP
        // as Llama 3 70B's 28,672 and it reads 66 B.)
        let nas = find("nvidia/Llama-3_3-Nemotron-Super-49B-v1").unwrap();
        assert_within_1pct("Llama-3.3-Nemotron-Super-49B", nas.param_counts().0, 49.9e9);
        let attention: u32 =
            nas.layers.iter().filter(|g| matches!(g.attention, crate::model::Attention::Gqa { .. })).map(|g| g.count).sum();
        assert_eq!(attention, 49);
        // MiMo-7B (`mimo`): 7.83B in its safetensors (Hugging Face's count), its MTP layer
        // included. (Mutation: parse it without the MTP layer and the sum reads 7.62 B.)
        let mimo = find("XiaomiMiMo/MiMo-7B-Base").unwrap();
        let mtp = mimo.mtp.as_ref().expect("MiMo ships an MTP layer");
        let mtp_params = mtp.attention.params(mimo.hidden_size) + mtp.mlp.params(mimo.hidden_size).0;
        assert_within_1pct("MiMo-7B with its MTP layer", mimo.param_counts().0 + mtp_params, 7.83e9);
    }

    /// MiMo-V2-Flash (`mimo_v2_flash`): the model card's "309B total parameters and 15B active",
    /// with keys of 192 and values of 128 per head. (Mutation: make the values as wide as the
    /// keys, in the projections or the cache, and the totals or the cache width fail.)
    #[test]
    fn mimo_v2_flash_holds_its_published_weights_and_a_narrow_value_cache() {
        let m = find("XiaomiMiMo/MiMo-V2-Flash").unwrap();
        let (total, active) = m.param_counts();
        assert_within_1pct("MiMo-V2-Flash", total, 309e9);
        // "15B" is rounded to the billion: 15.4 B with both embedding tables.
        assert!((14.5e9..15.5e9).contains(&(active as f64)), "active {active}");
        // A full layer by hand: 4096 × (64 × 192 + 4 × (192 + 128)) for Q, K and V, and the
        // output's 64 × 128 × 4096.
        assert_eq!(m.layers[0].attention.params(4096), 4096 * (64 * 192 + 4 * 320) + 64 * 128 * 4096);
    }

    /// MiniMax-M3 (`minimax_m3`): the model card's "~428B" total (with its vision encoder, which
    /// this text model leaves out), 3 dense full-attention layers and 57 MoE layers attending
    /// through MSA (16 blocks of 128 tokens). (Mutation: read `sparse_attention_freq` as all
    /// zeros, or drop the index projections, and the layer split or the count moves.)
    #[test]
    fn minimax_m3_holds_its_published_weights_and_its_sparse_layers() {
        let m = find("MiniMaxAI/MiniMax-M3").unwrap();
        assert_within_1pct("MiniMax-M3", m.param_counts().0, 428e9);
        // "~23B activated": 23.5 B without the two embedding tables (4 routed and the shared
        // expert, attention and its index projections, the dense layers).
        let tables = 2 * m.vocab_size * m.hidden_size;
        assert!((22.5e9..24e9).contains(&((m.param_counts().1 - tables) as f64)), "{}", m.param_counts().1 - tables);
        let sparse: Vec<(u32, Option<u64>)> = m
            .layers
            .iter()
            .map(|g| match g.attention {
                crate::model::Attention::Gqa { block_sparse, .. } => (g.count, block_sparse.map(|b| b.read_tokens())),
                _ => panic!("MiniMax-M3 layers are GQA"),
            })
            .collect();
        assert_eq!(sparse, vec![(3, None), (57, Some(2048))]);
        // A sparse layer's projections by hand: Q, K and V of 6144 × (8192 + 1024), the output's
        // 8192 × 6144, the index query of 6144 × 4 × 128 and the one index key head's 6144 × 128.
        assert_eq!(m.layers[1].attention.params(6144), 6144 * 9216 + 8192 * 6144 + 6144 * 5 * 128);
    }
}
