//! Turning a `MODEL_ID` into a [`ModelArch`]: catalog, local directory, config path, HF cache.

use super::{catalog, hf, ModelArch, WeightFormat};
use std::path::{Path, PathBuf};

/// Where a model's architecture came from (shown in reports).
#[derive(Debug, Clone, PartialEq)]
pub enum ModelSource {
    Catalog,
    File(PathBuf),
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ModelError {
    #[error("model `{id}` was not found: it is not in the built-in catalog, not a directory with a config.json, not a config.json file, and not in the Hugging Face cache ({cache}).{hint} Run --list-models for the catalog")]
    NotFound { id: String, cache: String, hint: String },
    #[error("{path}: {message}")]
    BadConfig { path: String, message: String },
}

fn hf_cache_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Ok(h) = std::env::var("HF_HUB_CACHE") {
        dirs.push(PathBuf::from(h));
    }
    if let Ok(h) = std::env::var("HF_HOME") {
        dirs.push(PathBuf::from(h).join("hub"));
    }
    if let Ok(h) = std::env::var("HOME") {
        dirs.push(PathBuf::from(h).join(".cache/huggingface/hub"));
    }
    dirs
}

fn from_file(path: &Path, id: &str) -> Result<ModelArch, ModelError> {
    let bad = |message: String| ModelError::BadConfig { path: path.display().to_string(), message };
    let text = crate::util::read_bounded(path, crate::util::MAX_CONFIG_BYTES).map_err(|e| match e {
        crate::util::ReadError::Io(e) => bad(format!("cannot read: {e}")),
        other => bad(other.to_string()),
    })?;
    // ModelOpt checkpoints keep their quantization in `hf_quant_config.json` beside the config.
    let sibling = path.with_file_name("hf_quant_config.json");
    let hf_quant = match sibling.is_file() {
        false => None,
        true => Some(crate::util::read_bounded(&sibling, crate::util::MAX_CONFIG_BYTES).map_err(|e| ModelError::BadConfig {
            path: sibling.display().to_string(),
            message: match e {
                crate::util::ReadError::Io(e) => format!("cannot read: {e}"),
                other => other.to_string(),
            },
        })?),
    };
    hf::parse_config_with(&text, hf_quant.as_deref(), id).map_err(bad)
}

/// What identifies a network in a Hugging Face id: the name after the organisation, without
/// the `Meta-` prefix, a precision suffix (`-BF16` too: NVIDIA names its bf16 releases so) or a
/// fine-tune's suffix (`-Instruct`, `-Thinking`, `-chat`,
/// `-Python`, the `-hf` of Meta's converted checkpoints; `-Instruct` also before a release
/// suffix such as `-v0.1`), lower-case: `nvidia/Llama-3.1-8B-Instruct-FP8` and
/// `meta-llama/Meta-Llama-3.1-8B` are `llama-3.1-8b`, `meta-llama/Llama-2-70b-chat-hf` is
/// `llama-2-70b`, `mistralai/Mixtral-8x7B-Instruct-v0.1` is `mixtral-8x7b-v0.1`. A fine-tune
/// has its base network's architecture.
pub fn network_key(id: &str) -> String {
    let name = id.trim().rsplit('/').next().unwrap_or("").to_lowercase();
    let mut s = name.strip_prefix("meta-").unwrap_or(&name).to_string();
    let suffixes =
        || PRECISION_SUFFIXES.iter().map(|(s, _)| *s).chain(["-hf", "-instruct", "-thinking", "-chat", "-python", "-bf16", "-base", "-it"]);
    // Each pass strips one suffix; a name carries a few at most (`-Instruct-hf`, `-chat-hf`).
    while let Some(t) = suffixes().find_map(|suffix| s.strip_suffix(suffix)).or_else(|| without_release_tag(&s)) {
        s = t.to_string();
    }
    if let Some(at) = s.find("-instruct-v") {
        let release = &s[at + "-instruct-".len()..];
        if release[1..].chars().all(|c| c.is_ascii_digit() || c == '.') && release.len() > 1 {
            s = format!("{}-{release}", &s[..at]);
        }
    }
    s
}

/// `name` without a dated release: after an instruct or thinking tune (Qwen's `-Instruct-2507`,
/// `-Thinking-2507`) or of a DeepSeek network (`DeepSeek-R1-0528`, `DeepSeek-V3-0324`, whose
/// config.json is the original's), and without the re-quantization tag NVIDIA puts after a
/// precision suffix (`nvidia/DeepSeek-R1-0528-FP4-v2`, a second NVFP4 quantization of the same
/// network). The release of that date, or that quantization, has its base network's
/// architecture.
fn without_release_tag(name: &str) -> Option<&str> {
    let (rest, tag) = name.rsplit_once('-')?;
    let dated = tag.len() == 4 && tag.chars().all(|c| c.is_ascii_digit());
    let dated_tune = rest.ends_with("-instruct") || rest.ends_with("-thinking") || rest.starts_with("deepseek-");
    (dated && dated_tune).then_some(rest).or_else(|| requantized(name))
}

/// `name` without a `-v2`-style tag after a precision suffix (`…-fp4-v2` → `…-fp4`).
fn requantized(name: &str) -> Option<&str> {
    let (rest, tag) = name.rsplit_once('-')?;
    let version = tag.strip_prefix('v').is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
    (version && PRECISION_SUFFIXES.iter().any(|(s, _)| rest.ends_with(s))).then_some(rest)
}

/// Precision suffixes of republished checkpoints and the weight format each names (FP8 under
/// the `Qwen` organisation is Qwen's own 128 × 128 block format; elsewhere — NVIDIA ModelOpt,
/// Red Hat / Neural Magic llm-compressor — one scale per tensor or channel).
const PRECISION_SUFFIXES: [(&str, Option<WeightFormat>); 7] = [
    ("-fp8-dynamic", Some(WeightFormat::Fp8Tensor)),
    ("-fp8-static-pertensor", Some(WeightFormat::Fp8Tensor)),
    ("-fp8-block", Some(WeightFormat::Fp8Block)),
    ("-fp8", None),
    ("-nvfp4", Some(WeightFormat::Nvfp4)),
    ("-fp4", Some(WeightFormat::Nvfp4)),
    ("-mxfp4", Some(WeightFormat::Mxfp4Experts)),
];

/// The weight format an id's precision suffix names, if it has one.
fn suffix_weights(id: &str) -> Option<WeightFormat> {
    let lower = id.trim().to_lowercase();
    let name = lower.rsplit('/').next().unwrap_or("");
    let name = requantized(name).unwrap_or(name);
    let name = name.strip_suffix("-instruct").unwrap_or(name);
    let (_, w) = PRECISION_SUFFIXES.iter().find(|(s, _)| name.ends_with(s))?;
    Some(w.unwrap_or(if lower.starts_with("qwen/") { WeightFormat::Fp8Block } else { WeightFormat::Fp8Tensor }))
}

/// The FP8 weight format a run in FP8 of `id` was served in, when the run names the network and
/// not the checkpoint: the id's own FP8 format if it names one (`…-FP8-Dynamic`, `…-FP8`),
/// else the format of its publisher's FP8 release. Qwen releases its FP8 checkpoints itself,
/// in 128 × 128 blocks (`Qwen/Qwen3-32B-FP8`: `quant_method: fp8`, `weight_block_size: [128,
/// 128]`), and an engine that only serves pre-quantized checkpoints (TensorRT-LLM's PyTorch
/// backend) can run Qwen3 in FP8 from no other; every other publisher's FP8 release (NVIDIA
/// ModelOpt, Red Hat llm-compressor) has one scale per tensor or channel.
pub fn fp8_release_weights(id: &str) -> WeightFormat {
    match suffix_weights(id) {
        Some(w @ (WeightFormat::Fp8Tensor | WeightFormat::Fp8Block)) => w,
        _ => suffix_weights(&format!("{}-fp8", id.trim())).unwrap_or(WeightFormat::Fp8Tensor),
    }
}

/// NVIDIA's republished FP8 and NVFP4 checkpoints (ModelOpt) quantize the KV cache to FP8 too:
/// their `hf_quant_config.json` says `kv_cache_quant_algo: FP8` (e.g.
/// `nvidia/Llama-3.1-70B-Instruct-FP8`).
pub fn modelopt_kv(id: &str) -> bool {
    let lower = id.trim().to_lowercase();
    lower.starts_with("nvidia/") && suffix_weights(&lower).is_some_and(|w| w != WeightFormat::Mxfp4Experts)
}

/// NVIDIA's NVFP4 checkpoints that keep attention in bf16 (their `hf_quant_config.json` or
/// `quantization_config` excludes every `self_attn` module), by `model_type`; they quantize the
/// KV cache to FP8 (`kv_cache_quant_algo`) as every ModelOpt checkpoint does: nvidia/GLM-5-NVFP4,
/// nvidia/MiniMax-M2.5-NVFP4, nvidia/DeepSeek-V3.1-NVFP4 and -V3.2-NVFP4 (MLA projections and
/// the indexer excluded), nvidia/Qwen3.5-122B-A10B-NVFP4 and -397B-A17B-NVFP4 (both kinds of
/// attention and the shared experts excluded) and nvidia/Kimi-K2.5-NVFP4 (its config.json's
/// `kv_cache_scheme`: 8-bit float) all do, and nvidia/Gemma-4-26B-A4B-NVFP4 and -31B-IT-NVFP4
/// (attention, and in the MoE release the dense MLP and router, excluded). In a MoE, shared
/// experts and dense MLPs are priced in bf16 with attention (DeepSeek's NVFP4 shared experts
/// included: a small over-price beside the routed experts); a dense network keeps its MLPs in
/// NVFP4.
const NVFP4_MLP_ONLY: [&str; 7] = ["glm_moe_dsa", "minimax_m2", "kimi_k25", "deepseek_v3", "deepseek_v32", "qwen3_5_moe", "gemma4"];

/// A catalog network under another name: another organisation, the `Meta-` prefix, an
/// `-Instruct` or precision suffix (the suffix sets the checkpoint's weight format).
fn catalog_alias(id: &str) -> Option<ModelArch> {
    alias_in(&catalog::all(), id)
}

/// [`catalog_alias`] among `models` (the catalog, loaded once by a caller that places many ids).
fn alias_in(models: &[ModelArch], id: &str) -> Option<ModelArch> {
    let key = network_key(id);
    if key.is_empty() {
        return None;
    }
    let mut m = models.iter().find(|m| network_key(&m.id) == key)?.clone();
    if let Some(w) = suffix_weights(id) {
        m.weights = w;
        m.fp8_kv_cache = modelopt_kv(id);
        let nvidia_nvfp4 = w == WeightFormat::Nvfp4 && id.trim().to_lowercase().starts_with("nvidia/");
        if nvidia_nvfp4 && NVFP4_MLP_ONLY.contains(&m.model_type.as_str()) {
            m.weights = WeightFormat::Nvfp4Mlp;
        }
        // nvidia/MiniMax-M3-NVFP4 (its hf_quant_config.json): NVFP4 routed experts, MXFP8
        // everything else, and no KV cache quantization (`kv_cache_quant_algo: null`).
        if nvidia_nvfp4 && m.model_type == "minimax_m3" {
            (m.weights, m.fp8_kv_cache) = (WeightFormat::Nvfp4ExpertsFp8, false);
        }
    } else if suffix_weights(&m.id).is_some() {
        // The network is in the catalog only as a quantized republish (nvidia/Qwen3.6-27B-NVFP4);
        // an id without a precision suffix names the publisher's own bf16 release.
        m.weights = WeightFormat::Bf16;
        m.fp8_kv_cache = false;
    }
    m.id = id.trim().to_string();
    Some(m)
}

/// What the catalog `models` know of the checkpoint an id names, with no file or cache lookup:
/// the catalog entry of that id (case-insensitive), or the catalog network it republishes with
/// the weight format and KV cache its precision suffix names (`nvidia/Llama-3.1-8B-Instruct-FP8`:
/// FP8 per tensor, FP8 cache). `None` when the catalog does not know the network.
pub fn checkpoint_in(models: &[ModelArch], id: &str) -> Option<ModelArch> {
    models.iter().find(|m| m.id.eq_ignore_ascii_case(id.trim())).cloned().or_else(|| alias_in(models, id))
}

/// Resolve in the documented order: catalog (exact id, case-insensitive), a directory holding
/// `config.json`, a path to a config file, the local Hugging Face cache, then the catalog
/// network the id republishes (`Qwen/Qwen3-235B-A22B-FP8`, `nvidia/Llama-3.1-8B-Instruct-FP8`).
/// Never the network.
pub fn resolve_model(id: &str) -> Result<(ModelArch, ModelSource), ModelError> {
    if let Some(m) = catalog::find(id) {
        return Ok((m, ModelSource::Catalog));
    }
    let p = Path::new(id);
    if p.is_dir() {
        let cfg = p.join("config.json");
        if cfg.is_file() {
            return from_file(&cfg, id).map(|m| (m, ModelSource::File(cfg)));
        }
    } else if p.is_file() {
        return from_file(p, id).map(|m| (m, ModelSource::File(p.to_path_buf())));
    }
    let cache_dirs = hf_cache_dirs();
    if id.contains('/') {
        let folder = format!("models--{}", id.replace('/', "--"));
        for dir in &cache_dirs {
            let snaps = dir.join(&folder).join("snapshots");
            let Ok(entries) = std::fs::read_dir(&snaps) else { continue };
            let mut configs: Vec<PathBuf> = entries.flatten().map(|e| e.path().join("config.json")).filter(|c| c.is_file()).collect();
            configs.sort();
            if let Some(cfg) = configs.last() {
                return from_file(cfg, id).map(|m| (m, ModelSource::File(cfg.clone())));
            }
        }
    }
    if let Some(m) = catalog_alias(id) {
        return Ok((m, ModelSource::Catalog));
    }
    let ids = catalog::ids();
    let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    let close = crate::util::closest(id, &refs, 3);
    let hint = if close.is_empty() { String::new() } else { format!(" Closest catalog names: {}.", close.join(", ")) };
    Err(ModelError::NotFound {
        id: id.to_string(),
        cache: cache_dirs.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(", "),
        hint,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvidia_nvfp4_checkpoints_of_glm5_kimi_k25_minimax_m25_deepseek_and_qwen35_keep_attention_in_bf16() {
        // Their exclude lists name every `self_attn` projection; each quantizes the KV cache
        // to FP8 (Kimi-K2.5's config.json: `kv_cache_scheme` of 8-bit floats). (Mutation: drop
        // NVFP4_MLP_ONLY and all six read as whole-NVFP4.)
        for id in [
            "nvidia/GLM-5-NVFP4",
            "nvidia/Kimi-K2.5-NVFP4",
            "nvidia/MiniMax-M2.5-NVFP4",
            "nvidia/DeepSeek-V3.1-NVFP4",
            "nvidia/DeepSeek-V3.2-NVFP4",
            "nvidia/Qwen3.5-397B-A17B-NVFP4",
            "nvidia/Gemma-4-26B-A4B-NVFP4",
        ] {
            let (m, _) = resolve_model(id).unwrap();
            assert_eq!((m.weights, m.fp8_kv_cache), (WeightFormat::Nvfp4Mlp, true), "{id}");
        }
        // Kimi-K2.6 and K2.7-Code, republished by NVIDIA only: catalog entries of their own,
        // K2.5's network with the shared experts and the dense first layer in bf16 too.
        for id in ["nvidia/Kimi-K2.6-NVFP4", "nvidia/Kimi-K2.7-Code-NVFP4"] {
            let (m, _) = resolve_model(id).unwrap();
            assert_eq!(
                (m.weights, m.fp8_kv_cache, m.layers.clone()),
                (WeightFormat::Nvfp4Mlp, true, resolve_model("moonshotai/Kimi-K2.5").unwrap().0.layers),
                "{id}"
            );
        }
        // MiniMax-M3's: NVFP4 routed experts, the rest MXFP8 (priced as FP8), bf16 KV.
        // (Mutation: drop the MiniMax-M3 rule and it reads as whole-NVFP4 with FP8 KV.)
        let (m3, _) = resolve_model("nvidia/MiniMax-M3-NVFP4").unwrap();
        assert_eq!((m3.weights, m3.fp8_kv_cache), (WeightFormat::Nvfp4ExpertsFp8, false));
        // Qwen3's excludes only its routers: the whole network in NVFP4, FP8 KV.
        let (q, _) = resolve_model("nvidia/Qwen3-32B-NVFP4").unwrap();
        assert_eq!((q.weights, q.fp8_kv_cache), (WeightFormat::Nvfp4, true));
        // The published precisions of the originals.
        assert_eq!(resolve_model("zai-org/GLM-5-FP8").unwrap().0.weights, WeightFormat::Fp8Block);
        assert_eq!(resolve_model("MiniMaxAI/MiniMax-M2.5").unwrap().0.weights, WeightFormat::Fp8Block);
        assert_eq!(resolve_model("moonshotai/Kimi-K2.5").unwrap().0.weights, WeightFormat::Int4Experts);
    }

    #[test]
    fn fine_tunes_and_converted_checkpoints_resolve_to_their_base_network() {
        // Chat, instruct and Python fine-tunes have their base's architecture; Meta's Llama 2
        // and Code Llama ids end in `-hf`; Mistral puts the release after `-Instruct`.
        // (Mutations: drop `-hf` from the suffixes and the Llama 2 chat id is not found; drop
        // the `-instruct-v` rule and Mixtral's instruct id is not; drop `without_release_tag` and Qwen's
        // 2507 releases are not.)
        for (id, catalog_id, layers, kv_heads) in [
            ("meta-llama/Llama-2-7b-chat-hf", "meta-llama/Llama-2-7b-hf", 32, 32),
            ("meta-llama/Llama-2-70b-chat-hf", "meta-llama/Llama-2-70b-hf", 80, 8),
            ("codellama/CodeLlama-34b-Instruct-hf", "codellama/CodeLlama-34b-hf", 48, 8),
            ("codellama/CodeLlama-34b-Python-hf", "codellama/CodeLlama-34b-hf", 48, 8),
            ("mistralai/Mixtral-8x7B-Instruct-v0.1", "mistralai/Mixtral-8x7B-v0.1", 32, 8),
            ("mistralai/Mistral-7B-Instruct-v0.3", "mistralai/Mistral-7B-v0.3", 32, 8),
            ("meta-llama/Llama-3.1-70B-Instruct", "meta-llama/Meta-Llama-3.1-70B", 80, 8),
            ("Qwen/Qwen3-235B-A22B-Instruct-2507-FP8", "Qwen/Qwen3-235B-A22B", 94, 4),
            ("Qwen/Qwen3-30B-A3B-Thinking-2507", "Qwen/Qwen3-30B-A3B", 48, 4),
            // DeepSeek's dated releases and NVIDIA's second NVFP4 quantization of one
            // (mutations: drop the `deepseek-` arm and R1-0528 is not found; drop
            // `requantized` and the `-FP4-v2` id is not).
            ("deepseek-ai/DeepSeek-R1-0528", "deepseek-ai/DeepSeek-R1", 61, 0),
            ("deepseek-ai/DeepSeek-V3-0324", "deepseek-ai/DeepSeek-V3", 61, 0),
            ("nvidia/DeepSeek-R1-0528-FP4-v2", "deepseek-ai/DeepSeek-R1", 61, 0),
            ("meta-llama/Meta-Llama-3-8B-Instruct", "meta-llama/Meta-Llama-3-8B", 32, 8),
            // A `-Base` release is the pretrained network itself (mutation: drop `-base` from
            // the suffixes and it is not found).
            ("Qwen/Qwen3-8B-Base", "Qwen/Qwen3-8B", 36, 8),
            // Gemma's instruction tunes end in `-it` (mutation: drop it and the id is not found).
            ("google/gemma-4-31B-it", "google/gemma-4-31B", 60, 16),
        ] {
            let (m, _) = resolve_model(id).unwrap_or_else(|e| panic!("{id}: {e}"));
            assert_eq!(network_key(id), network_key(catalog_id), "{id}");
            assert_eq!(m.id, id);
            assert_eq!(m.layers.iter().map(|l| l.count as u64).sum::<u64>(), layers, "{id}");
            let kv = match m.layers[0].attention {
                crate::model::Attention::Gqa { kv_heads, .. } => kv_heads,
                _ => 0,
            };
            assert_eq!(kv, kv_heads, "{id}");
        }
        // The re-quantized release keeps NVIDIA's NVFP4 format for DeepSeek (MLPs in NVFP4,
        // attention bf16, FP8 KV).
        let (v2, _) = resolve_model("nvidia/DeepSeek-R1-0528-FP4-v2").unwrap();
        assert_eq!((v2.weights, v2.fp8_kv_cache), (WeightFormat::Nvfp4Mlp, true));
        // A version tag after no precision suffix is part of the name (Mistral's releases).
        assert_eq!(network_key("mistralai/Mistral-7B-v0.3"), "mistral-7b-v0.3");
        // A name that only contains the words is not a fine-tune of another network.
        assert_eq!(network_key("org/Instruct-v2"), "instruct-v2");
        assert!(resolve_model("meta-llama/Llama-2-7b-chat-hf-FP8").is_ok());
    }

    #[test]
    fn an_fp8_run_of_a_network_takes_its_publishers_fp8_format() {
        // Qwen's own FP8 release is block-scaled; NVIDIA's and Red Hat's are per tensor; a
        // suffix that names the format wins. (Mutation: return Fp8Tensor for every id and the
        // first assertion fails; drop the suffix arm and the Qwen `-FP8-Dynamic` one does.)
        assert_eq!(fp8_release_weights("Qwen/Qwen3-32B"), WeightFormat::Fp8Block);
        assert_eq!(fp8_release_weights("meta-llama/Llama-3.1-8B-Instruct"), WeightFormat::Fp8Tensor);
        assert_eq!(fp8_release_weights("nvidia/Llama-3.1-8B-Instruct-FP8"), WeightFormat::Fp8Tensor);
        assert_eq!(fp8_release_weights("RedHatAI/Qwen3-32B-FP8-dynamic"), WeightFormat::Fp8Tensor);
        assert_eq!(fp8_release_weights("Qwen/Qwen3-32B-FP8"), WeightFormat::Fp8Block);
        assert_eq!(fp8_release_weights("Qwen/Qwen3-32B-FP8-Dynamic"), WeightFormat::Fp8Tensor);
        // AIConfigurator's static per-tensor FP8 Qwen3-32B. (Mutation: drop its suffix and the
        // id is not found.)
        assert_eq!(resolve_model("Qwen/Qwen3-32B-FP8-Static-PerTensor").unwrap().0.weights, WeightFormat::Fp8Tensor);
    }

    #[test]
    fn a_network_catalogued_only_as_a_quantized_republish_reads_bf16_under_its_own_name() {
        // nvidia/Qwen3.6-27B-NVFP4 is the catalog's only Qwen3.6-27B: Qwen's own release is
        // bf16 with a bf16 KV cache, NVIDIA's FP8 one FP8. (Mutation: drop the bf16 reset and
        // Qwen's id prices NVFP4 MLPs and FP8 attention.)
        let (own, _) = resolve_model("Qwen/Qwen3.6-27B").unwrap();
        assert_eq!((own.weights, own.fp8_kv_cache), (WeightFormat::Bf16, false));
        let (fp8, _) = resolve_model("nvidia/Qwen3.6-27B-FP8").unwrap();
        assert_eq!((fp8.weights, fp8.fp8_kv_cache), (WeightFormat::Fp8Tensor, true));
        let (nvfp4, _) = resolve_model("nvidia/Qwen3.6-27B-NVFP4").unwrap();
        assert_eq!((nvfp4.weights, nvfp4.fp8_kv_cache), (WeightFormat::Nvfp4MlpFp8Attention, true));
    }
}
