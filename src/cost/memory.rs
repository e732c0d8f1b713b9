//! Device memory of a candidate: resident weights, KV cache per token (and per-sequence state
//! for sliding-window and linear-attention layers), activation estimates, and what is left.
//!
//! Built together with the operator graph ([`super::graph::build_both`]) so both agree on
//! what a layer holds. All quantities are per device, in bytes.

use super::BatchShape;
use serde::{Deserialize, Serialize};

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

#[derive(Debug, Clone, PartialEq)]
pub struct MemoryModel {
    pub device_bytes: f64,
    pub weight_bytes: f64,
    /// KV bytes one cached token occupies on this device (all full-attention layers).
    pub kv_bytes_per_token: f64,
    /// Bytes per running sequence independent of its length (sliding windows, recurrent state).
    pub state_bytes_per_seq: f64,
    /// Decode context parallelism spreads a sequence's KV over this many devices.
    pub kv_capacity_factor: f64,
    /// Live intermediate bytes per token in flight through the largest layer.
    pub act_bytes_per_token: f64,
    /// Logits bytes per sampled row (local shard plus the gathered fp32 copy).
    pub act_bytes_per_sampled: f64,
    /// Vocabulary entries of one sampled row's gathered logits (0 on a pipeline stage without
    /// the LM head).
    pub sampled_vocab: f64,
}

/// The memory picture of one forward, as the report columns show it (GiB).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MemoryUse {
    pub weight_gib: f64,
    pub kv_cache_gib: f64,
    pub activation_gib: f64,
    pub avail_gib: f64,
}

impl MemoryUse {
    pub fn is_oom(&self) -> bool {
        self.avail_gib < 0.0
    }
}

impl MemoryModel {
    /// Peak activation bytes of a step.
    pub fn activation_bytes(&self, shape: &BatchShape) -> f64 {
        shape.tokens() as f64 * self.act_bytes_per_token + shape.sampled as f64 * self.act_bytes_per_sampled
    }

    /// KV bytes for `seqs` sequences holding `tokens` cached tokens in total, in whole blocks.
    pub fn kv_bytes(&self, seqs: u64, tokens: u64, block_size: u64) -> f64 {
        let blocks = (tokens as f64 / self.kv_capacity_factor / block_size as f64).ceil();
        blocks * block_size as f64 * self.kv_bytes_per_token + seqs as f64 * self.state_bytes_per_seq
    }

    /// What a forward of `shape` leaves, holding `kv_bytes` of cache, with `reserved` bytes
    /// kept back: available < 0 means out of memory.
    pub fn usage(&self, shape: &BatchShape, kv_bytes: f64, reserved: f64) -> MemoryUse {
        let act = self.activation_bytes(shape);
        MemoryUse {
            weight_gib: self.weight_bytes / GIB,
            kv_cache_gib: kv_bytes / GIB,
            activation_gib: act / GIB,
            avail_gib: (self.device_bytes - self.weight_bytes - kv_bytes - act - reserved) / GIB,
        }
    }

    /// Bytes left for the KV cache once weights, the reserve and the activations of the
    /// largest step (`peak_step`) are set aside.
    pub fn kv_budget_bytes(&self, peak_step: &BatchShape, reserved: f64) -> f64 {
        self.device_bytes - self.weight_bytes - reserved - self.activation_bytes(peak_step)
    }

    /// Whole KV blocks of `block_size` tokens that fit in `budget` bytes when `max_seqs`
    /// sequences also hold their per-sequence state.
    pub fn kv_capacity_blocks(&self, budget: f64, block_size: u64, max_seqs: u64) -> u64 {
        let for_kv = budget - max_seqs as f64 * self.state_bytes_per_seq;
        if for_kv <= 0.0 {
            return 0;
        }
        if self.kv_bytes_per_token <= 0.0 {
            // No per-token cache (all-linear-attention models): capacity is unbounded by tokens.
            return u64::MAX / 4;
        }
        let per_block = block_size as f64 * self.kv_bytes_per_token / self.kv_capacity_factor;
        (for_kv / per_block).floor().max(0.0) as u64
    }
}

pub fn gib(bytes: f64) -> f64 {
    bytes / GIB
}

pub fn bytes_from_gib(gib: f64) -> f64 {
    gib * GIB
}
