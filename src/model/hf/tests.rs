//! The config parser against published configs and hostile ones.
use super::*;
use crate::model::WeightFormat;

const QWEN3_32B: &str = r#"{"model_type":"qwen3","hidden_size":5120,"intermediate_size":25600,
    "num_attention_heads":64,"num_key_value_heads":8,"head_dim":128,"num_hidden_layers":64,
    "vocab_size":151936,"tie_word_embeddings":false}"#;

#[test]
fn counts_that_size_memory_are_bounded() {
    // Fails if `limit` stops bounding layers: qwen3_5 would allocate a billion layer types.
    let huge = QWEN3_32B.replace(r#""num_hidden_layers":64"#, r#""num_hidden_layers":1000000000"#).replace("\"qwen3\"", "\"qwen3_5\"");
    let e = parse_config(&huge, "x").unwrap_err();
    assert_eq!(e, "field `num_hidden_layers` is 1000000000; at most 1024 is modelled");
    // Fails if dimensions are unbounded (2^54 overflows the parameter count to 0).
    let wide = QWEN3_32B.replace(r#""hidden_size":5120"#, r#""hidden_size":18014398509481984"#);
    assert!(parse_config(&wide, "x").unwrap_err().starts_with("field `hidden_size` is 18014398509481984; at most"));
    // Fails if the vision depth is read with `as u32` (4294967297 would become 1).
    let vl = format!(
        r#"{{"model_type":"qwen3_vl","text_config":{},"vision_config":{{"depth":4294967297,"hidden_size":1152,"intermediate_size":4304,"num_heads":16,"patch_size":16}}}}"#,
        QWEN3_32B.replace("\"qwen3\"", "\"qwen3_vl_text\"")
    );
    assert!(parse_config(&vl, "x").unwrap_err().contains("`vision_config.depth` is 4294967297"));
}

#[test]
fn llama4_layers_split_by_rotary_and_moe_interleave() {
    // Maverick's layout: 48 layers, MoE every second (`interleave_moe_layer_step` 2), every
    // fourth without rotary and with global attention, the others chunked to 8,192 tokens.
    // (Mutations: take every layer as MoE and the dense group vanishes; drop the chunk and
    // no group has a window.)
    let maverick = r#"{"model_type":"llama4","text_config":{"model_type":"llama4_text","hidden_size":5120,
        "intermediate_size":8192,"intermediate_size_mlp":16384,"num_attention_heads":40,"num_key_value_heads":8,
        "head_dim":128,"num_hidden_layers":48,"vocab_size":202048,"num_local_experts":128,"num_experts_per_tok":1,
        "interleave_moe_layer_step":2,"attention_chunk_size":8192}}"#;
    let m = parse_config(maverick, "x").unwrap();
    let shape: Vec<(u32, Option<u32>, bool)> = m
        .layers
        .iter()
        .map(|g| {
            let w = match g.attention {
                Attention::Gqa { sliding_window, .. } => sliding_window,
                _ => None,
            };
            (g.count, w, matches!(g.mlp, Mlp::Moe { .. }))
        })
        .collect();
    assert_eq!(shape, vec![(24, Some(8192), false), (12, Some(8192), true), (12, None, true)]);
    let scout = maverick.replace(r#""interleave_moe_layer_step":2"#, r#""interleave_moe_layer_step":1"#);
    let s = parse_config(&scout, "x").unwrap();
    assert!(s.layers.iter().all(|g| matches!(g.mlp, Mlp::Moe { shared_intermediate_size: 8192, .. })));
}

#[test]
fn qwen3_32b_parameter_count_matches_reference() {
    let m = parse_config(QWEN3_32B, "Qwen/Qwen3-32B").unwrap();
    // 487,587,840 linear parameters per layer (the original tool's published per-layer count).
    let g = &m.layers[0];
    assert_eq!(g.attention.params(5120) + g.mlp.params(5120).0, 487_587_840);
    assert_eq!(m.num_layers(), 64);
}

#[test]
fn missing_head_dim_is_derived_and_missing_required_field_is_named() {
    let no_hd = QWEN3_32B.replace(r#""head_dim":128,"#, "");
    let m = parse_config(&no_hd, "x").unwrap();
    assert!(matches!(m.layers[0].attention, Attention::Gqa { head_dim: 80, .. }));
    let no_layers = QWEN3_32B.replace(r#""num_hidden_layers":64,"#, "");
    assert_eq!(parse_config(&no_layers, "x").unwrap_err(), "required field `num_hidden_layers` is missing");
    let bad = QWEN3_32B.replace(r#""hidden_size":5120"#, r#""hidden_size":"big""#);
    assert!(parse_config(&bad, "x").unwrap_err().contains("field `hidden_size` is \"big\""));
}

#[test]
fn text_config_nesting_is_read() {
    let vl = format!(
        r#"{{"model_type":"qwen3_vl","text_config":{},"vision_config":{{"depth":27,"hidden_size":1152,
        "intermediate_size":4304,"num_heads":16,"patch_size":16,"spatial_merge_size":2,"out_hidden_size":5120,
        "deepstack_visual_indexes":[8,16,24]}}}}"#,
        QWEN3_32B
    );
    let m = parse_config(&vl, "vl").unwrap();
    assert_eq!(m.hidden_size, 5120);
    let v = m.vision.unwrap();
    assert_eq!(v.deepstack_mergers, 3);
    assert_eq!(v.image_tokens(448, 448), (28 * 28, 196));
    // Qwen3-VL's MoE releases nest a qwen3_moe text model (Qwen3-VL-30B-A3B's fields).
    // Mutation: leave `qwen3_vl_moe` out of the MoE branch and the layers read as dense.
    let moe_text = r#"{"model_type":"qwen3_vl_moe_text","hidden_size":2048,"intermediate_size":6144,
        "moe_intermediate_size":768,"num_experts":128,"num_experts_per_tok":8,"num_hidden_layers":48,
        "num_attention_heads":32,"num_key_value_heads":4,"head_dim":128,"vocab_size":151936,"mlp_only_layers":[],
        "decoder_sparse_step":1}"#;
    let m = parse_config(&vl.replace(QWEN3_32B, moe_text).replace(r#""qwen3_vl","#, r#""qwen3_vl_moe","#), "vl-moe").unwrap();
    assert_eq!(m.layers.len(), 1);
    assert!(matches!(m.layers[0].mlp, Mlp::Moe { experts: 128, top_k: 8, expert_intermediate_size: 768, .. }), "{:?}", m.layers[0].mlp);
    assert!(m.vision.is_some());
}

#[test]
fn nemotron_h_reads_its_block_pattern_with_ungated_mlps() {
    // Nemotron 3 Nano's fields: 23 Mamba-2 blocks, 6 attention blocks, 23 MoE blocks, in
    // the pattern's order; 31.6 B parameters (the model card's), 3.6 B active with the
    // embeddings. Mutation: parse the experts as gated and the total reads 46 B.
    let nano = r#"{"model_type":"nemotron_h","hidden_size":2688,"vocab_size":131072,"num_hidden_layers":52,
        "hybrid_override_pattern":"MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME",
        "mamba_num_heads":64,"mamba_head_dim":64,"ssm_state_size":128,"n_groups":8,"conv_kernel":4,
        "num_attention_heads":32,"num_key_value_heads":2,"head_dim":128,"intermediate_size":1856,
        "n_routed_experts":128,"num_experts_per_tok":6,"moe_intermediate_size":1856,
        "moe_shared_expert_intermediate_size":3712,"n_shared_experts":1,"tie_word_embeddings":false,
        "time_step_limit":[0.0, Infinity]}"#;
    let m = parse_config(nano, "nano").unwrap();
    let count = |f: &dyn Fn(&LayerGroup) -> bool| m.layers.iter().filter(|g| f(g)).map(|g| g.count).sum::<u32>();
    assert_eq!(count(&|g| matches!(g.attention, Attention::Mamba2 { .. })), 23);
    assert_eq!(count(&|g| matches!(g.attention, Attention::Gqa { .. })), 6);
    assert_eq!(count(&|g| matches!(g.mlp, Mlp::Moe { gated: false, .. })), 23);
    assert!(matches!(m.layers[0].attention, Attention::Mamba2 { heads: 64, state_size: 128, .. }));
    assert!(matches!(m.layers[1].mlp, Mlp::Moe { shared_intermediate_size: 3712, .. }));
    let (total, active) = m.param_counts();
    assert!((total as f64 / 31.6e9 - 1.0).abs() < 0.01, "{total}");
    assert!((active as f64 / 3.6e9 - 1.0).abs() < 0.02, "{active}");
    // A block the pattern does not define is named.
    let e = parse_config(&nano.replace("MEMEM*", "MEMEMX"), "x").unwrap_err();
    assert!(e.contains("holds `X`"), "{e}");
}

#[test]
fn python_float_literals_outside_strings_read_as_null() {
    // `json.dumps` writes Infinity and NaN; a string that spells them stays. (Mutation:
    // replace inside strings too and the name below changes.)
    let t = r#"{"a":[0.0, Infinity, -Infinity, NaN],"name":"Infinity \"NaN\""}"#;
    let fixed = python_literals_as_null(t).unwrap();
    let v: Value = serde_json::from_str(&fixed).unwrap();
    assert_eq!(v["a"], serde_json::json!([0.0, null, null, null]));
    assert_eq!(v["name"], "Infinity \"NaN\"");
    assert_eq!(python_literals_as_null(r#"{"a":1}"#), None);
}

#[test]
fn unsupported_and_inconsistent_configs_fail_clearly() {
    let e = parse_config(r#"{"model_type":"rwkv"}"#, "x").unwrap_err();
    assert!(e.contains("`model_type` is `rwkv`") && e.contains("supported: llama"), "{e}");
    let e = parse_config(&QWEN3_32B.replace(r#""num_key_value_heads":8"#, r#""num_key_value_heads":7"#), "x").unwrap_err();
    assert!(e.contains("multiple of `num_key_value_heads` (7)"), "{e}");
    assert!(parse_config("{not json", "x").unwrap_err().starts_with("not valid JSON"));
}

#[test]
fn nemotron_nas_layers_follow_their_block_configs() {
    // Three searched blocks: full attention with 8 query heads per KV head and a 5.25 × MLP;
    // no attention and a 1.0 × MLP (2/3 × 4096 = 2730.67, truncated to 2730 and rounded up to
    // 2816 as DeciLM rounds to multiples of 256); no attention and no MLP (an identity, left
    // out). The first repeats. (Mutations: drop the rounding and the second MLP reads 2730;
    // read `no_op` as absent and the third layer gets attention.)
    let nas = |third: &str| {
        format!(
            r#"{{"model_type":"nemotron-nas","hidden_size":4096,"num_attention_heads":32,"num_key_value_heads":null,
            "intermediate_size":null,"num_hidden_layers":4,"vocab_size":1000,"block_configs":[
            {{"attention":{{"n_heads_in_group":8,"no_op":false}},"ffn":{{"ffn_mult":5.25}}}},
            {{"attention":{{"n_heads_in_group":null,"no_op":true}},"ffn":{{"ffn_mult":1.0,"no_op":false}}}},
            {third},
            {{"attention":{{"n_heads_in_group":8,"no_op":false}},"ffn":{{"ffn_mult":5.25}}}}]}}"#
        )
    };
    let m = parse_config(&nas(r#"{"attention":{"no_op":true},"ffn":{"no_op":true,"ffn_mult":null}}"#), "x").unwrap();
    let gqa = Attention::Gqa {
        heads: 32,
        kv_heads: 4,
        head_dim: 128,
        qk_norm: false,
        bias: false,
        sliding_window: None,
        output_gate: false,
        rotary_fraction: 1.0,
        value_is_key: false,
        value_head_dim: None,
        block_sparse: None,
    };
    let dense = |i| Mlp::Dense { intermediate_size: i, bias: false, gated: true };
    let shape: Vec<(u32, &Attention, &Mlp)> = m.layers.iter().map(|g| (g.count, &g.attention, &g.mlp)).collect();
    assert_eq!(shape, vec![(2, &gqa, &dense(14336)), (1, &Attention::None, &dense(2816))]);
    // A block replaced by one linear layer is not priced as something else.
    let linear = nas(r#"{"attention":{"replace_with_linear":true},"ffn":{"ffn_mult":1.0}}"#);
    let e = parse_config(&linear, "x").unwrap_err();
    assert_eq!(e, "field `block_configs[2].attention.replace_with_linear` is true; this tool models only absent, null or false");
    let empty = r#"{"model_type":"nemotron-nas","hidden_size":64,"num_attention_heads":4,"num_hidden_layers":1,"vocab_size":10,
        "block_configs":[{"attention":{"no_op":true},"ffn":{"no_op":true}}]}"#;
    assert!(parse_config(empty, "x").unwrap_err().starts_with("every entry of `block_configs` skips"));
    let e = parse_config(&nas(r#"{"attention":{"n_heads_in_group":5},"ffn":{"ffn_mult":1.0}}"#), "x").unwrap_err();
    assert!(e.contains("`block_configs[2].attention.n_heads_in_group` is 5; expected a divisor"), "{e}");
}

#[test]
fn modelopt_mixed_precision_reads_mlps_and_mixers_apart() {
    // ModelOpt MIXED_PRECISION lists a format per module: NVFP4 (or W4A16_NVFP4) MLPs with FP8
    // mixers, or with none listed (bf16). (Mutations: classify `self_attn` as an MLP and the
    // first reads as an error; drop the W4A16 alias and the second does.)
    let with = |layers: &str, kv: &str| {
        QWEN3_32B.replace(
            r#""tie_word_embeddings":false"#,
            &format!(
                r#""tie_word_embeddings":false,"quantization_config":{{"quant_method":"modelopt","quant_algo":"MIXED_PRECISION"{kv},"quantized_layers":{{{layers}}}}}"#
            ),
        )
    };
    let fp8_attn = r#""model.layers.0.self_attn.q_proj":{"quant_algo":"FP8"},"model.layers.0.mlp.up_proj":{"quant_algo":"NVFP4"}"#;
    let m = parse_config(&with(fp8_attn, r#","kv_cache_quant_algo":"FP8""#), "x").unwrap();
    assert_eq!((m.weights, m.fp8_kv_cache), (WeightFormat::Nvfp4MlpFp8Attention, true));
    let mlp_only = r#""model.layers.0.mlp.experts":{"quant_algo":"W4A16_NVFP4","group_size":16},"lm_head":{"quant_algo":"W4A16_NVFP4"}"#;
    assert_eq!(parse_config(&with(mlp_only, ""), "x").unwrap().weights, WeightFormat::Nvfp4Mlp);
    // MiniMax-M3's NVIDIA release: NVFP4 routed experts, MXFP8 attention, indexer, shared
    // experts and dense MLPs (MXFP8 reads as FP8). (Mutation: class shared experts as routed
    // and it reads as NVFP4 MLPs with FP8 attention.)
    let m3 = r#""l.0.self_attn.index_q_proj":{"quant_algo":"MXFP8"},"l.0.mlp.up_proj":{"quant_algo":"MXFP8"},
        "l.3.block_sparse_moe.shared_experts.w1":{"quant_algo":"MXFP8"},"l.3.block_sparse_moe.experts.0.w1":{"quant_algo":"NVFP4"}"#;
    assert_eq!(parse_config(&with(m3, ""), "x").unwrap().weights, WeightFormat::Nvfp4ExpertsFp8);
    // Qwen3.6's routed experts sit under `.mlp.`: still NVFP4 MLPs with FP8 mixers.
    let qwen = r#""m.layers.0.mlp.experts.0.up_proj":{"quant_algo":"NVFP4"},"m.layers.0.mlp.shared_expert.up_proj":{"quant_algo":"NVFP4"},
        "m.layers.0.self_attn.q_proj":{"quant_algo":"FP8"}"#;
    assert_eq!(parse_config(&with(qwen, ""), "x").unwrap().weights, WeightFormat::Nvfp4MlpFp8Attention);
    // A format this tool does not price is refused, named.
    let int8 = r#""model.layers.0.self_attn.q_proj":{"quant_algo":"INT8"},"model.layers.0.mlp.up_proj":{"quant_algo":"NVFP4"}"#;
    let e = parse_config(&with(int8, ""), "x").unwrap_err();
    assert!(e.contains("MLPs in [NVFP4] and token mixers in [INT8]"), "{e}");
}

#[test]
fn a_modelopt_hf_quant_config_stands_for_a_missing_quantization_config() {
    // Nemotron 3.5 Lightning's config.json has no quantization_config; its hf_quant_config.json
    // says NVFP4 experts, FP8 mixers and an FP8 KV cache. (Mutation: ignore the file's KV
    // algorithm and the cache reads bf16.)
    let hf_quant = r#"{"producer":{"name":"modelopt"},"quantization":{"quant_algo":"MIXED_PRECISION","kv_cache_quant_algo":"FP8",
        "quantized_layers":{"backbone.layers.0.mixer.in_proj":{"quant_algo":"FP8"},
        "backbone.layers.1.mixer.experts.0.up_proj":{"quant_algo":"W4A16_NVFP4","group_size":16}}}}"#;
    let m = parse_config_with(QWEN3_32B, Some(hf_quant), "x").unwrap();
    assert_eq!((m.weights, m.fp8_kv_cache), (WeightFormat::Nvfp4MlpFp8Attention, true));
    let int4 = hf_quant.replace(r#"{"quant_algo":"FP8"}"#, r#"{"quant_algo":"INT4"}"#);
    let e = parse_config_with(QWEN3_32B, Some(&int4), "x").unwrap_err();
    assert!(
        e.starts_with("hf_quant_config.json: field `quantization.quantized_layers` holds MLPs in [NVFP4] and token mixers in [INT4]"),
        "{e}"
    );
    let e = parse_config_with(QWEN3_32B, Some(r#"{"producer":{}}"#), "x").unwrap_err();
    assert_eq!(e, "hf_quant_config.json: required field `quantization` (an object) is missing");
}

#[test]
fn a_modelopt_export_without_a_quant_method_reads_as_modelopt() {
    // ModelOpt 0.31 writes `producer` and `quant_algo` into config.json's quantization_config
    // but no `quant_method` (the per-tensor FP8 Qwen3-32B AIConfigurator lists). (Mutation:
    // leave the method unnamed and it is refused as ``.)
    let with =
        |q: &str| QWEN3_32B.replace(r#""tie_word_embeddings":false"#, &format!(r#""tie_word_embeddings":false,"quantization_config":{q}"#));
    let exported = r#"{"config_groups":{"group_0":{"weights":{"num_bits":8,"type":"float"}}},"quant_algo":"FP8","kv_cache_scheme":"FP8","producer":{"name":"modelopt","version":"0.31.0"}}"#;
    let m = parse_config(&with(exported), "x").unwrap();
    assert_eq!((m.weights, m.fp8_kv_cache), (WeightFormat::Fp8Tensor, true));
    // Without ModelOpt's name the method stays unknown and is refused, naming the field.
    let e = parse_config(&with(r#"{"quant_algo":"FP8"}"#), "x").unwrap_err();
    assert!(e.contains("field `quantization_config.quant_method` is ``"), "{e}");
}

#[test]
fn gemma4_prices_its_sliding_and_global_layers_apart() {
    // Gemma 4 31B's text model: 50 sliding layers (16 KV heads of 256, a 1,024-token window)
    // and 10 global ones (4 KV heads of 512, rotary on a quarter, values that are the keys).
    // A global layer's projections by hand: 5376 × (32 × 512 + 4 × 512) for Q and K, and the
    // output's 32 × 512 × 5376: 187,170,816. (Mutation: give it a value projection and it
    // reads 198,180,864.)
    let layer_types =
        (0..60).map(|i| if i % 6 == 5 { r#""full_attention""# } else { r#""sliding_attention""# }).collect::<Vec<_>>().join(",");
    let text = format!(
        r#"{{"model_type":"gemma4","text_config":{{"model_type":"gemma4_text","hidden_size":5376,"intermediate_size":21504,
        "num_hidden_layers":60,"num_attention_heads":32,"num_key_value_heads":16,"head_dim":256,"global_head_dim":512,
        "num_global_key_value_heads":4,"attention_k_eq_v":true,"sliding_window":1024,"vocab_size":262144,
        "tie_word_embeddings":true,"enable_moe_block":false,"hidden_size_per_layer_input":0,"num_kv_shared_layers":0,
        "rope_parameters":{{"full_attention":{{"partial_rotary_factor":0.25}},"sliding_attention":{{}}}},
        "layer_types":[{layer_types}]}}}}"#
    );
    let m = parse_config(&text, "x").unwrap();
    let shape: Vec<(u32, Option<u32>, u32, u32, bool)> = m
        .layers
        .iter()
        .map(|g| match g.attention {
            Attention::Gqa { kv_heads, head_dim, sliding_window, value_is_key, .. } => {
                (g.count, sliding_window, kv_heads, head_dim, value_is_key)
            }
            _ => panic!("Gemma 4 layers are GQA"),
        })
        .collect();
    assert_eq!(shape, vec![(50, Some(1024), 16, 256, false), (10, None, 4, 512, true)]);
    assert_eq!(m.layers[1].attention.params(5376), 187_170_816);
    assert!(matches!(m.layers[1].attention, Attention::Gqa { rotary_fraction, .. } if rotary_fraction == 0.25));
    // Gemma 3n-style per-layer inputs are not priced as something else.
    let e = parse_config(&text.replace(r#""hidden_size_per_layer_input":0"#, r#""hidden_size_per_layer_input":256"#), "x").unwrap_err();
    assert_eq!(e, "field `text_config.hidden_size_per_layer_input` is 256: per-layer input embeddings are not modelled");
}

#[test]
fn step3p7_splits_full_and_sliding_layers_and_dense_and_moe_ones() {
    // Step-3.7-Flash: 45 layers, 12 with full attention and 33 with a 512-token window; the
    // first 3 dense, the rest 288 experts (8 routed) and one shared expert of 1,280; 3 MTP
    // layers. (Mutations: ignore `first_k_dense_replace` and no dense layer is left; drop the
    // window and every layer is full.)
    let types = (0..45).map(|i| if i % 4 == 0 { r#""full_attention""# } else { r#""sliding_attention""# }).collect::<Vec<_>>().join(",");
    let text = format!(
        r#"{{"model_type":"step3p7","num_hidden_layers":45,"hidden_size":4096,"num_attention_heads":64,"num_key_value_heads":8,
        "head_dim":128,"vocab_size":128896,"intermediate_size":11264,"sliding_window":512,"layer_types":[{types}],
        "first_k_dense_replace":3,"num_experts":288,"num_experts_per_tok":8,"moe_intermediate_size":1280,
        "share_expert_dim":1280,"n_shared_experts":1,"num_nextn_predict_layers":3}}"#
    );
    let m = parse_config(&text, "x").unwrap();
    let count = |f: &dyn Fn(&LayerGroup) -> bool| m.layers.iter().filter(|g| f(g)).map(|g| g.count).sum::<u32>();
    assert_eq!(count(&|g| matches!(g.attention, Attention::Gqa { sliding_window: None, .. })), 12);
    assert_eq!(count(&|g| matches!(g.attention, Attention::Gqa { sliding_window: Some(512), .. })), 33);
    assert_eq!(count(&|g| matches!(g.mlp, Mlp::Dense { intermediate_size: 11264, .. })), 3);
    assert_eq!(count(&|g| matches!(g.mlp, Mlp::Moe { experts: 288, shared_intermediate_size: 1280, .. })), 42);
    assert_eq!(m.mtp.as_ref().map(|t| t.layers), Some(3));
}

#[test]
fn minimax_m3_refuses_a_sparse_attention_config_it_cannot_read() {
    // A sparse-attention config of the wrong shape is an error naming the field and the value,
    // never a silently dense model. (Mutation: read a non-object `sparse_attention_config` as
    // absent and the first case is accepted.)
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/hf-configs/MiniMaxAI--MiniMax-M3.json")).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let err = |v: &serde_json::Value| parse_config(&v.to_string(), "x").unwrap_err();
    let mut list = v.clone();
    list["sparse_attention_config"] = serde_json::json!([1, 2, 3]);
    assert_eq!(err(&list), "field `sparse_attention_config` is [1,2,3]; expected an object");
    let mut heads = v.clone();
    heads["sparse_attention_config"]["sparse_num_index_heads"] = serde_json::json!(3);
    assert!(
        err(&heads).contains("`sparse_attention_config.sparse_num_index_heads` is 3; this tool splits index heads over TP as the KV heads")
    );
    // An index value path in a sparse layer is not priced: refused, named.
    let mut value = v.clone();
    value["sparse_attention_config"]["sparse_disable_index_value"][10] = serde_json::json!(0);
    assert_eq!(
        err(&value),
        "field `sparse_attention_config.sparse_disable_index_value` holds 0 for a sparse layer; only 1 (no index value path) is modelled"
    );
    v["sparse_attention_config"]["sparse_attention_freq"][5] = serde_json::json!(2);
    assert_eq!(err(&v), "field `sparse_attention_config.sparse_attention_freq[5]` is 2; expected 0 or 1");
}
