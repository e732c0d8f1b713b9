//! Reading a Hugging Face `config.json` into a [`ModelArch`].
//!
//! Multimodal configs nest the language model under `text_config`; fields are looked up there
//! first and then at the top level. Every error names the field (and the file, added by the
//! caller).

use super::{Attention, BlockSparse, LayerGroup, Mlp, ModelArch, MtpBlock, SparseIndexer, VisionTower};
use serde_json::{Map, Value};

/// `model_type` values this parser understands, for error messages.
pub const SUPPORTED_MODEL_TYPES: &[&str] = &[
    "llama",
    "llama4",
    "llama4_text",
    "mistral",
    "qwen2",
    "qwen3",
    "qwen3_vl",
    "qwen3_vl_text",
    "qwen3_vl_moe",
    "qwen3_vl_moe_text",
    "qwen2_moe",
    "qwen3_moe",
    "mixtral",
    "deepseek_v2",
    "deepseek_v3",
    "deepseek_v32",
    "kimi_k2",
    "kimi_k25",
    "glm_moe_dsa",
    "minimax_m2",
    "gpt_oss",
    "qwen3_5",
    "qwen3_5_text",
    "qwen3_5_moe",
    "qwen3_5_moe_text",
    "qwen3_next",
    "nemotron_h",
    "nemotron-nas",
    "mimo",
    "gemma4",
    "gemma4_text",
    "step3p7",
    "mimo_v2_flash",
    "minimax_m3",
    "minimax_m3_vl",
];

/// The largest value a config field may hold: counts that size memory (layers, experts,
/// heads) and dimensions are bounded, so that a mistyped config is refused instead of
/// allocating gigabytes or overflowing the parameter count.
fn limit(key: &str) -> u64 {
    use super::{MAX_CONTEXT, MAX_DIM, MAX_EXPERTS, MAX_HEADS, MAX_LAYERS, MAX_VOCAB};
    match key {
        "num_hidden_layers"
        | "mtp_num_hidden_layers"
        | "num_nextn_predict_layers"
        | "depth"
        | "first_k_dense_replace"
        | "decoder_sparse_step"
        | "moe_layer_freq"
        | "full_attention_interval"
        | "num_kv_shared_layers" => MAX_LAYERS,
        "num_experts"
        | "n_routed_experts"
        | "num_local_experts"
        | "n_shared_experts"
        | "num_experts_per_tok"
        | "experts_per_token"
        | "top_k_experts" => MAX_EXPERTS,
        "num_attention_heads"
        | "num_key_value_heads"
        | "num_global_key_value_heads"
        | "swa_num_attention_heads"
        | "swa_num_key_value_heads"
        | "linear_num_key_heads"
        | "linear_num_value_heads"
        | "num_heads"
        | "index_n_heads"
        | "vt_num_attention_heads" => MAX_HEADS,
        "vt_num_hidden_layers" => MAX_LAYERS,
        "index_topk" => MAX_CONTEXT,
        "vocab_size" => MAX_VOCAB,
        "dense_intermediate_size" | "shared_intermediate_size" => MAX_DIM,
        "max_position_embeddings" | "sliding_window" | "sliding_window_size" => MAX_CONTEXT,
        _ => MAX_DIM,
    }
}

struct Fields<'a> {
    text: &'a Map<String, Value>,
    top: &'a Map<String, Value>,
    prefix: &'static str,
}

impl<'a> Fields<'a> {
    fn get(&self, key: &str) -> Option<&'a Value> {
        self.text.get(key).filter(|v| !v.is_null()).or_else(|| self.top.get(key).filter(|v| !v.is_null()))
    }
    fn name(&self, key: &str) -> String {
        if self.text.contains_key(key) {
            format!("{}{key}", self.prefix)
        } else {
            key.to_string()
        }
    }
    fn u64_opt(&self, key: &str) -> Result<Option<u64>, String> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_u64()
                .or_else(|| v.as_f64().filter(|f| f.fract() == 0.0 && *f >= 0.0).map(|f| f as u64))
                .ok_or_else(|| format!("field `{}` is {v}; expected a non-negative integer", self.name(key)))
                .and_then(|n| match limit(key) {
                    max if n > max => Err(format!("field `{}` is {n}; at most {max} is modelled", self.name(key))),
                    _ => Ok(Some(n)),
                }),
        }
    }
    fn u64(&self, key: &str) -> Result<u64, String> {
        self.u64_opt(key)?.ok_or_else(|| format!("required field `{key}` is missing"))
    }
    fn u32(&self, key: &str) -> Result<u32, String> {
        let v = self.u64(key)?;
        u32::try_from(v).map_err(|_| format!("field `{}` is {v}; too large", self.name(key)))
    }
    fn u32_opt(&self, key: &str) -> Result<Option<u32>, String> {
        match self.u64_opt(key)? {
            None => Ok(None),
            Some(v) => u32::try_from(v).map(Some).map_err(|_| format!("field `{}` is {v}; too large", self.name(key))),
        }
    }
    fn bool_or(&self, key: &str, default: bool) -> Result<bool, String> {
        match self.get(key) {
            None => Ok(default),
            Some(Value::Bool(b)) => Ok(*b),
            Some(v) => Err(format!("field `{}` is {v}; expected true or false", self.name(key))),
        }
    }
    fn f64_opt(&self, key: &str) -> Result<Option<f64>, String> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v.as_f64().map(Some).ok_or_else(|| format!("field `{}` is {v}; expected a number", self.name(key))),
        }
    }
    fn str_list(&self, key: &str) -> Result<Option<Vec<String>>, String> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Array(a)) => a
                .iter()
                .map(|v| v.as_str().map(str::to_string).ok_or_else(|| format!("field `{}` must be a list of strings", self.name(key))))
                .collect::<Result<Vec<_>, _>>()
                .map(Some),
            Some(v) => Err(format!("field `{}` is {v}; expected a list of strings", self.name(key))),
        }
    }
    fn u32_list(&self, key: &str) -> Result<Vec<u32>, String> {
        match self.get(key) {
            None => Ok(vec![]),
            Some(Value::Array(a)) => a
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    v.as_u64()
                        .or_else(|| v.as_f64().filter(|f| f.fract() == 0.0 && *f >= 0.0).map(|f| f as u64))
                        .and_then(|x| u32::try_from(x).ok())
                        .ok_or_else(|| format!("field `{}[{i}]` is {v}; expected a non-negative integer", self.name(key)))
                })
                .collect(),
            Some(v) => Err(format!("field `{}` is {v}; expected a list of integers", self.name(key))),
        }
    }
}

/// `text` with Python's non-JSON float literals (`Infinity`, `-Infinity`, `NaN`, which
/// `json.dumps` writes: Nemotron-H's `time_step_limit: [0.0, Infinity]`) outside strings
/// replaced by `null`; `None` when it has none. No field this tool reads takes them.
fn python_literals_as_null(text: &str) -> Option<String> {
    let mut out = String::with_capacity(text.len());
    let (mut in_string, mut escaped, mut changed) = (false, false, false);
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if in_string {
            (in_string, escaped) = (escaped || c != '"', !escaped && c == '\\');
        } else if c == '"' {
            in_string = true;
        } else if let Some(lit) = ["-Infinity", "Infinity", "NaN"].iter().find(|l| rest.starts_with(**l)) {
            out.push_str("null");
            rest = &rest[lit.len()..];
            changed = true;
            continue;
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    changed.then_some(out)
}

/// Parse the text of a `config.json`. `id` is what the model is called in reports.
pub fn parse_config(text: &str, id: &str) -> Result<ModelArch, String> {
    parse_config_with(text, None, id)
}

/// [`parse_config`] with the `hf_quant_config.json` that ModelOpt writes beside a checkpoint's
/// `config.json`: its `quantization` object stands for a missing `quantization_config` (NVIDIA's
/// Nemotron 3.5 Lightning NVFP4 has none), and its `kv_cache_quant_algo` also counts where the
/// config's own quantization leaves the KV cache unsaid (NVIDIA's Qwen3.6-35B-A3B NVFP4).
pub fn parse_config_with(text: &str, hf_quant: Option<&str>, id: &str) -> Result<ModelArch, String> {
    let modelopt = match hf_quant {
        None => None,
        Some(t) => {
            let v: Value = serde_json::from_str(t).map_err(|e| format!("hf_quant_config.json: not valid JSON: {e}"))?;
            let mut q = v
                .get("quantization")
                .and_then(Value::as_object)
                .cloned()
                .ok_or("hf_quant_config.json: required field `quantization` (an object) is missing")?;
            q.insert("quant_method".into(), Value::String("modelopt".into()));
            Some(q)
        }
    };
    let mut model = parse_text(text, modelopt.as_ref(), id)?;
    if let Some(q) = &modelopt {
        model.fp8_kv_cache |= quant::fp8_kv_cache(q);
    }
    Ok(model)
}

fn parse_text(text: &str, modelopt: Option<&Map<String, Value>>, id: &str) -> Result<ModelArch, String> {
    let root: Value = serde_json::from_str(text)
        .or_else(|e| serde_json::from_str(&python_literals_as_null(text).ok_or(e)?))
        .map_err(|e| format!("not valid JSON: {e}"))?;
    let top = root.as_object().ok_or("the top level must be a JSON object")?;
    let text_cfg = match top.get("text_config") {
        Some(Value::Object(m)) => Some(m),
        Some(Value::Null) | None => None,
        Some(v) => return Err(format!("field `text_config` is {v}; expected an object")),
    };
    let empty = Map::new();
    let f = Fields { text: text_cfg.unwrap_or(&empty), top, prefix: "text_config." };
    let model_type = top
        .get("model_type")
        .and_then(Value::as_str)
        .or_else(|| text_cfg.and_then(|t| t.get("model_type")).and_then(Value::as_str))
        .ok_or("required field `model_type` is missing")?
        .to_string();
    let arch = match model_type.as_str() {
        "llama" | "mistral" | "qwen2" | "qwen3" | "qwen3_vl" | "qwen3_vl_text" => dense_or_moe(&f, &model_type)?,
        "qwen2_moe" | "qwen3_moe" | "qwen3_vl_moe" | "qwen3_vl_moe_text" | "mixtral" => dense_or_moe(&f, &model_type)?,
        "deepseek_v2" | "deepseek_v3" | "deepseek_v32" | "kimi_k2" | "kimi_k25" | "glm_moe_dsa" => deepseek(&f)?,
        "minimax_m2" => minimax_m2(&f)?,
        "gpt_oss" => gpt_oss(&f)?,
        "llama4" | "llama4_text" => llama4(&f)?,
        "qwen3_5" | "qwen3_5_text" | "qwen3_5_moe" | "qwen3_5_moe_text" | "qwen3_next" => qwen3_5(&f)?,
        "mimo" => mimo(&f)?,
        "gemma4" | "gemma4_text" => gemma::gemma4(&f)?,
        "step3p7" => step::step3p7(&f)?,
        "mimo_v2_flash" => mimo::mimo_v2_flash(&f)?,
        "minimax_m3" | "minimax_m3_vl" => minimax::minimax_m3(&f)?,
        "nemotron_h" => nemotron::nemotron_h(&f)?,
        "nemotron-nas" => nemotron::nemotron_nas(&f)?,
        other => {
            return Err(format!(
                "field `model_type` is `{other}`, which this tool does not model; supported: {}",
                SUPPORTED_MODEL_TYPES.join(", ")
            ))
        }
    };
    let vision = match top.get("vision_config") {
        Some(Value::Object(v)) if model_type.starts_with("qwen3_vl") || model_type.starts_with("qwen3_5") => Some(vision(v)?),
        Some(Value::Object(v)) if model_type == "kimi_k25" => Some(moonvit(v, f.u64("hidden_size")?)?),
        _ => None,
    };
    let (layers, mtp) = arch;
    let model = ModelArch {
        id: id.to_string(),
        model_type,
        hidden_size: f.u64("hidden_size")?,
        vocab_size: f.u64("vocab_size")?,
        tie_word_embeddings: f.bool_or("tie_word_embeddings", false)?,
        max_position_embeddings: f.u64_opt("max_position_embeddings")?,
        layers,
        mtp,
        vision,
        weights: match quantization_config(&f)? {
            Some(q) => quant::weight_format(Some(q))?,
            // Errors name the file and its own object (`quantization`), not config.json's.
            None => quant::weight_format(modelopt)
                .map_err(|e| format!("hf_quant_config.json: {}", e.replace("`quantization_config.", "`quantization.")))?,
        },
        fp8_kv_cache: quantization_config(&f)?.is_some_and(quant::fp8_kv_cache),
    };
    model.validate()?;
    Ok(model)
}

/// The checkpoint's `quantization_config`: at the top level, or in the language model's
/// `text_config` (Kimi-K2.5 quantizes only its text backbone).
fn quantization_config<'a>(f: &Fields<'a>) -> Result<Option<&'a Map<String, Value>>, String> {
    match f.get("quantization_config") {
        None => Ok(None),
        Some(Value::Object(q)) => Ok(Some(q)),
        Some(_) => Err(format!("field `{}` must be an object", f.name("quantization_config"))),
    }
}

type Parsed = (Vec<LayerGroup>, Option<MtpBlock>);

fn gqa(f: &Fields, window: Option<u32>) -> Result<Attention, String> {
    let heads = f.u32("num_attention_heads")?;
    let hidden = f.u64("hidden_size")?;
    let kv_heads = f.u32_opt("num_key_value_heads")?.unwrap_or(heads);
    let head_dim = match f.u32_opt("head_dim")? {
        Some(d) => d,
        None => {
            if heads == 0 || hidden % heads as u64 != 0 {
                return Err(format!(
                    "field `head_dim` is missing and `hidden_size` ({hidden}) is not a multiple of `num_attention_heads` ({heads})"
                ));
            }
            (hidden / heads as u64) as u32
        }
    };
    let model_type = f.get("model_type").and_then(Value::as_str).unwrap_or("");
    let rotary = match f.get("rope_parameters").and_then(|r| r.get("partial_rotary_factor")) {
        Some(v) => v.as_f64().ok_or("field `rope_parameters.partial_rotary_factor` must be a number")?,
        None => f.f64_opt("partial_rotary_factor")?.unwrap_or(1.0),
    };
    Ok(Attention::Gqa {
        heads,
        kv_heads,
        head_dim,
        qk_norm: model_type.starts_with("qwen3"),
        bias: f.bool_or("attention_bias", model_type == "qwen2" || model_type == "qwen2_moe")?,
        sliding_window: window,
        output_gate: f.bool_or("attn_output_gate", false)?,
        rotary_fraction: rotary,
        value_is_key: false,
        value_head_dim: None,
        block_sparse: None,
    })
}

fn uniform_window(f: &Fields) -> Result<Option<u32>, String> {
    // Qwen2/3 and Mistral configs carry `sliding_window` but only apply it with
    // `use_sliding_window`; Mistral v0.1 applies it unconditionally.
    let w = f.u32_opt("sliding_window")?;
    let mt = f.get("model_type").and_then(Value::as_str).unwrap_or("");
    let used = match f.get("use_sliding_window") {
        Some(Value::Bool(b)) => *b,
        _ => mt == "mistral",
    };
    Ok(if used { w } else { None })
}

fn dense_or_moe(f: &Fields, model_type: &str) -> Result<Parsed, String> {
    let n = f.u32("num_hidden_layers")?;
    let attention = gqa(f, uniform_window(f)?)?;
    let dense = Mlp::Dense { intermediate_size: f.u64("intermediate_size")?, bias: f.bool_or("mlp_bias", false)?, gated: true };
    let moe = match model_type {
        "mixtral" => Some(Mlp::swiglu_moe(f.u32("num_local_experts")?, f.u32("num_experts_per_tok")?, f.u64("intermediate_size")?, 0)),
        "qwen2_moe" | "qwen3_moe" | "qwen3_vl_moe" | "qwen3_vl_moe_text" => Some(Mlp::swiglu_moe(
            f.u32("num_experts")?,
            f.u32("num_experts_per_tok")?,
            f.u64("moe_intermediate_size")?,
            f.u64_opt("shared_expert_intermediate_size")?.unwrap_or(0),
        )),
        _ => None,
    };
    let Some(moe) = moe else {
        return Ok((vec![LayerGroup { count: n, attention, mlp: dense }], None));
    };
    // Qwen MoE: `mlp_only_layers` and `decoder_sparse_step` make some layers dense.
    let dense_only = f.u32_list("mlp_only_layers")?;
    let step = f.u32_opt("decoder_sparse_step")?.unwrap_or(1).max(1);
    let mut dense_count = 0;
    for i in 0..n {
        let sparse = !dense_only.contains(&i) && (i + 1) % step == 0;
        if !sparse {
            dense_count += 1;
        }
    }
    let mut groups = Vec::new();
    if dense_count > 0 {
        groups.push(LayerGroup { count: dense_count, attention: attention.clone(), mlp: dense });
    }
    if n - dense_count > 0 {
        groups.push(LayerGroup { count: n - dense_count, attention, mlp: moe });
    }
    Ok((groups, None))
}

/// Xiaomi MiMo (`mimo`): a Qwen2 network (biased QKV) with `num_nextn_predict_layers` MTP
/// modules, each one more decoder layer of the same shape.
fn mimo(f: &Fields) -> Result<Parsed, String> {
    let (layers, _) = dense_or_moe(f, "qwen2")?;
    let mtp = match f.u32_opt("num_nextn_predict_layers")? {
        Some(n) if n > 0 => {
            let layer = &layers[0];
            Some(MtpBlock { layers: n, attention: layer.attention.clone(), mlp: layer.mlp.clone() })
        }
        _ => None,
    };
    Ok((layers, mtp))
}

/// DeepSeek's MoE fields: `n_routed_experts` experts of `moe_intermediate_size`,
/// `num_experts_per_tok` routed, and `n_shared_experts` shared ones of the same width (missing
/// or null: none).
fn routed_and_shared_moe(f: &Fields) -> Result<Mlp, String> {
    let expert_i = f.u64("moe_intermediate_size")?;
    Ok(Mlp::swiglu_moe(
        f.u32("n_routed_experts")?,
        f.u32("num_experts_per_tok")?,
        expert_i,
        f.u64_opt("n_shared_experts")?.unwrap_or(0) * expert_i,
    ))
}

/// Adds one layer to `groups`, counted with an identical group where there is one (layers of
/// the same kinds cost the same wherever they sit).
fn add_layer(groups: &mut Vec<LayerGroup>, attention: Attention, mlp: Mlp) {
    match groups.iter_mut().find(|g| g.attention == attention && g.mlp == mlp) {
        Some(g) => g.count += 1,
        None => groups.push(LayerGroup { count: 1, attention, mlp }),
    }
}

fn deepseek(f: &Fields) -> Result<Parsed, String> {
    let n = f.u32("num_hidden_layers")?;
    let attention = Attention::Mla {
        heads: f.u32("num_attention_heads")?,
        q_lora_rank: f.u32_opt("q_lora_rank")?,
        kv_lora_rank: f.u32("kv_lora_rank")?,
        qk_nope_head_dim: f.u32("qk_nope_head_dim")?,
        qk_rope_head_dim: f.u32("qk_rope_head_dim")?,
        v_head_dim: f.u32("v_head_dim")?,
        indexer: sparse_indexer(f)?,
    };
    let dense = Mlp::Dense { intermediate_size: f.u64("intermediate_size")?, bias: false, gated: true };
    let moe = routed_and_shared_moe(f)?;
    let first_dense = f.u32_opt("first_k_dense_replace")?.unwrap_or(0).min(n);
    let freq = f.u32_opt("moe_layer_freq")?.unwrap_or(1).max(1);
    let mut dense_count = 0;
    for i in 0..n {
        if i < first_dense || i % freq != 0 {
            dense_count += 1;
        }
    }
    let mut groups = Vec::new();
    if dense_count > 0 {
        groups.push(LayerGroup { count: dense_count, attention: attention.clone(), mlp: dense });
    }
    if n > dense_count {
        groups.push(LayerGroup { count: n - dense_count, attention: attention.clone(), mlp: moe.clone() });
    }
    let nextn = f.u32_opt("num_nextn_predict_layers")?.unwrap_or(0);
    let mtp = (nextn > 0).then_some(MtpBlock { layers: nextn, attention, mlp: moe });
    Ok((groups, mtp))
}

/// DeepSeek Sparse Attention's indexer (GLM-5 `glm_moe_dsa`, DeepSeek-V3.2): present when the
/// config names its top-k.
fn sparse_indexer(f: &Fields) -> Result<Option<SparseIndexer>, String> {
    let Some(top_k) = f.u32_opt("index_topk")? else { return Ok(None) };
    Ok(Some(SparseIndexer { heads: f.u32("index_n_heads")?, head_dim: f.u32("index_head_dim")?, top_k }))
}

/// MiniMax-M2 (`minimax_m2`): GQA with QK-norm over the whole projection and rotary on
/// `rotary_dim` of each head, every layer a sigmoid-routed MoE of `num_local_experts` experts of
/// `intermediate_size` and no shared expert. Its MTP modules (`use_mtp`, `num_mtp_modules`) are
/// not in the published checkpoint (229 B parameters without them), so none is modelled.
fn minimax_m2(f: &Fields) -> Result<Parsed, String> {
    let n = f.u32("num_hidden_layers")?;
    let attention = minimax::minimax_gqa(f)?;
    let shared = f.u64_opt("shared_intermediate_size")?.unwrap_or(0);
    let mlp = Mlp::swiglu_moe(f.u32("num_local_experts")?, f.u32("num_experts_per_tok")?, f.u64("intermediate_size")?, shared);
    Ok((vec![LayerGroup { count: n, attention, mlp }], None))
}

/// Llama 4 (`llama4`, its text model `llama4_text`): GQA in every layer, chunked attention
/// (`attention_chunk_size` tokens, priced as a sliding window of that size, its upper bound)
/// in the layers with rotary embedding and global attention without it in the others
/// (`no_rope_layers`, by default every fourth layer); an MoE of `num_local_experts` experts of
/// `intermediate_size` with one shared expert of the same size in the layers
/// `interleave_moe_layer_step` picks (`moe_layers`, by default every step-th layer), a dense
/// MLP of `intermediate_size_mlp` in the others. The vision tower is not modelled.
fn llama4(f: &Fields) -> Result<Parsed, String> {
    let n = f.u32("num_hidden_layers")?;
    let rope = match f.get("no_rope_layers") {
        Some(Value::Array(_)) => f.u32_list("no_rope_layers")?,
        _ => (0..n).map(|i| u32::from((i + 1) % 4 != 0)).collect(),
    };
    let step = f.u32_opt("interleave_moe_layer_step")?.unwrap_or(1).max(1);
    let listed = match f.get("moe_layers") {
        Some(Value::Array(_)) => f.u32_list("moe_layers")?,
        _ => (step - 1..n).step_by(step as usize).collect(),
    };
    let mut is_moe = vec![false; n as usize];
    for i in listed.into_iter().filter(|&i| i < n) {
        is_moe[i as usize] = true;
    }
    let global = gqa(f, None)?;
    let mut chunked = global.clone();
    if let Attention::Gqa { sliding_window, qk_norm, .. } = &mut chunked {
        *sliding_window = f.u32_opt("attention_chunk_size")?;
        *qk_norm = f.bool_or("use_qk_norm", false)?;
    }
    let expert_i = f.u64("intermediate_size")?;
    let moe = Mlp::swiglu_moe(f.u32("num_local_experts")?, f.u32("num_experts_per_tok")?, expert_i, expert_i);
    let dense = Mlp::Dense { intermediate_size: f.u64("intermediate_size_mlp")?, bias: false, gated: true };
    // (rotary, MoE) -> layer count, in a fixed order so the groups do not depend on the map.
    let mut counts = [[0u32; 2]; 2];
    for i in 0..n {
        let r = rope.get(i as usize).is_none_or(|&x| x != 0);
        counts[usize::from(r)][usize::from(is_moe[i as usize])] += 1;
    }
    let mut groups = Vec::new();
    for (r, attention) in [(1, &chunked), (0, &global)] {
        for (m, mlp) in [(0, &dense), (1, &moe)] {
            if counts[r][m] > 0 {
                groups.push(LayerGroup { count: counts[r][m], attention: attention.clone(), mlp: mlp.clone() });
            }
        }
    }
    Ok((groups, None))
}

fn gpt_oss(f: &Fields) -> Result<Parsed, String> {
    let n = f.u32("num_hidden_layers")?;
    let window = f.u32_opt("sliding_window")?;
    let types = f.str_list("layer_types")?.unwrap_or_default();
    let sliding = types.iter().filter(|t| t.as_str() == "sliding_attention").count() as u32;
    if !types.is_empty() && types.len() as u32 != n {
        return Err(format!("field `layer_types` has {} entries but `num_hidden_layers` is {n}", types.len()));
    }
    let top_k = match f.u32_opt("num_experts_per_tok")? {
        Some(k) => k,
        None => f.u32("experts_per_token")?,
    };
    let moe = Mlp::Moe {
        experts: f.u32("num_local_experts")?,
        top_k,
        expert_intermediate_size: f.u64("intermediate_size")?,
        shared_intermediate_size: 0,
        bias: true,
        gated: true,
        latent_size: None,
    };
    let mut full = gqa(f, None)?;
    if let Attention::Gqa { bias, .. } = &mut full {
        *bias = f.bool_or("attention_bias", true)?;
    }
    let mut groups = Vec::new();
    if sliding > 0 {
        let mut s = full.clone();
        if let Attention::Gqa { sliding_window, .. } = &mut s {
            *sliding_window = Some(window.ok_or("field `sliding_window` is missing but `layer_types` has sliding layers")?);
        }
        groups.push(LayerGroup { count: sliding, attention: s, mlp: moe.clone() });
    }
    if n > sliding {
        groups.push(LayerGroup { count: n - sliding, attention: full, mlp: moe });
    }
    Ok((groups, None))
}

fn qwen3_5(f: &Fields) -> Result<Parsed, String> {
    let n = f.u32("num_hidden_layers")?;
    let types = match f.str_list("layer_types")? {
        Some(t) => t,
        None => {
            let interval = f.u32_opt("full_attention_interval")?.unwrap_or(4).max(1);
            (0..n).map(|i| if (i + 1) % interval == 0 { "full_attention" } else { "linear_attention" }.to_string()).collect()
        }
    };
    if types.len() as u32 != n {
        return Err(format!("field `layer_types` has {} entries but `num_hidden_layers` is {n}", types.len()));
    }
    if let Some(bad) = types.iter().find(|t| *t != "full_attention" && *t != "linear_attention") {
        return Err(format!("field `layer_types` contains `{bad}`; expected full_attention or linear_attention"));
    }
    let linear_count = types.iter().filter(|t| t.as_str() == "linear_attention").count() as u32;
    let full = gqa(f, None)?;
    let linear = Attention::LinearAttention {
        key_heads: f.u32("linear_num_key_heads")?,
        value_heads: f.u32("linear_num_value_heads")?,
        key_head_dim: f.u32("linear_key_head_dim")?,
        value_head_dim: f.u32("linear_value_head_dim")?,
        conv_kernel: f.u32_opt("linear_conv_kernel_dim")?.unwrap_or(4),
    };
    let mlp = match f.u32_opt("num_experts")? {
        Some(e) if e > 0 => Mlp::swiglu_moe(
            e,
            f.u32("num_experts_per_tok")?,
            f.u64("moe_intermediate_size")?,
            f.u64_opt("shared_expert_intermediate_size")?.unwrap_or(0),
        ),
        _ => Mlp::Dense { intermediate_size: f.u64("intermediate_size")?, bias: false, gated: true },
    };
    let mut groups = Vec::new();
    if linear_count > 0 {
        groups.push(LayerGroup { count: linear_count, attention: linear, mlp: mlp.clone() });
    }
    if n > linear_count {
        groups.push(LayerGroup { count: n - linear_count, attention: full.clone(), mlp: mlp.clone() });
    }
    let mtp_layers = f.u32_opt("mtp_num_hidden_layers")?.unwrap_or(0);
    let mtp = (mtp_layers > 0).then_some(MtpBlock { layers: mtp_layers, attention: full, mlp });
    Ok((groups, mtp))
}

/// Kimi-K2.5's MoonViT (`vt_*` fields): a ViT of 14-pixel patches whose 2 × 2 neighbours a
/// patch merger (two linear layers) maps into the language model's width, as Qwen-VL's.
fn moonvit(v: &Map<String, Value>, text_hidden: u64) -> Result<VisionTower, String> {
    let empty = Map::new();
    let f = Fields { text: v, top: &empty, prefix: "vision_config." };
    let named = |e: String| if e.starts_with("required field") { e.replace("field `", "field `vision_config.") } else { e };
    let hidden = f.u64("vt_hidden_size").map_err(named)?;
    let merge = f.u32_list("merge_kernel_size")?;
    Ok(VisionTower {
        depth: f.u32("vt_num_hidden_layers").map_err(named)?,
        hidden_size: hidden,
        intermediate_size: f.u64("vt_intermediate_size").map_err(named)?,
        heads: f.u32("vt_num_attention_heads").map_err(named)?,
        patch_size: f.u32("patch_size").map_err(named)?,
        spatial_merge_size: merge.first().copied().unwrap_or(2),
        temporal_patch_size: 1,
        in_channels: 3,
        out_hidden_size: f.u64_opt("text_hidden_size")?.unwrap_or(text_hidden),
        deepstack_mergers: 0,
    })
}

fn vision(v: &Map<String, Value>) -> Result<VisionTower, String> {
    let empty = Map::new();
    let f = Fields { text: v, top: &empty, prefix: "vision_config." };
    let req = |k: &str| f.u64(k).map_err(|e| e.replace(&format!("`{k}`"), &format!("`vision_config.{k}`")));
    let hidden = req("hidden_size")?;
    Ok(VisionTower {
        depth: f.u32("depth").map_err(|e| e.replace("`depth`", "`vision_config.depth`"))?,
        hidden_size: hidden,
        intermediate_size: req("intermediate_size")?,
        heads: f.u32("num_heads").map_err(|e| e.replace("`num_heads`", "`vision_config.num_heads`"))?,
        patch_size: f.u32("patch_size").map_err(|e| e.replace("`patch_size`", "`vision_config.patch_size`"))?,
        spatial_merge_size: f.u32_opt("spatial_merge_size")?.unwrap_or(2),
        temporal_patch_size: f.u32_opt("temporal_patch_size")?.unwrap_or(2),
        in_channels: f.u32_opt("in_channels")?.unwrap_or(3),
        out_hidden_size: f.u64_opt("out_hidden_size")?.unwrap_or(hidden),
        deepstack_mergers: f.u32_list("deepstack_visual_indexes")?.len() as u32,
    })
}

mod gemma;
mod mimo;
mod minimax;
mod nemotron;
mod quant;
mod step;
#[cfg(test)]
mod tests;
