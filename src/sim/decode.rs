//! Speculative decoding: how a decode step drafts tokens ([`DecodeMode`]: plain, MTP, block
//! drafts) and the seeded uniforms that decide which drafts a request accepts
//! ([`AcceptanceDraws`]).

use crate::workload::arrival::{rng, Stream};

/// How decode steps draft tokens.
#[derive(Debug, Clone, PartialEq)]
pub enum DecodeMode {
    /// One token per step.
    Plain,
    /// MTP with one marginal acceptance rate per draft position (non-increasing).
    Mtp { rates: Vec<f64> },
    /// Block drafting (DFlash/DSpark): `block` query tokens, up to `drafts` accepted, on
    /// average `mean_accepted`.
    Block { block: u64, drafts: u64, mean_accepted: f64 },
}

impl DecodeMode {
    /// MTP with `k` drafts and the given rates (missing rates are 0; a rate cannot exceed the
    /// one before it).
    pub fn mtp(k: u32, rates: &[f64]) -> Self {
        if k == 0 {
            return DecodeMode::Plain;
        }
        let mut v = Vec::with_capacity(k as usize);
        let mut prev: f64 = 1.0;
        for i in 0..k as usize {
            let r = rates.get(i).copied().unwrap_or(0.0).min(prev);
            v.push(r);
            prev = r;
        }
        DecodeMode::Mtp { rates: v }
    }

    /// Query tokens per decode step.
    pub fn query_tokens(&self) -> u64 {
        match self {
            DecodeMode::Plain => 1,
            DecodeMode::Mtp { rates } => 1 + rates.len() as u64,
            DecodeMode::Block { block, .. } => *block,
        }
    }

    /// Drafts accepted by request `req` in the decode step that starts at output position
    /// `pos`.
    pub fn draw_accepted(&self, draws: &AcceptanceDraws, req: u32, pos: u64) -> u64 {
        match self {
            DecodeMode::Plain => 0,
            DecodeMode::Mtp { rates } => {
                // Position i is accepted with marginal probability rates[i] (made
                // non-increasing, since a draft needs its predecessors): one uniform decides all.
                let u = draws.uniform(req, pos, 0);
                rates.iter().take_while(|&&r| u < r).count() as u64
            }
            DecodeMode::Block { drafts, mean_accepted, .. } => {
                let p = if *drafts == 0 { 0.0 } else { (mean_accepted / *drafts as f64).clamp(0.0, 1.0) };
                (0..*drafts).filter(|&j| draws.uniform(req, pos, j) < p).count() as u64
            }
        }
    }

    /// Expected output tokens per decode step.
    pub fn expected_tokens(&self) -> f64 {
        match self {
            DecodeMode::Plain => 1.0,
            DecodeMode::Mtp { rates } => 1.0 + rates.iter().sum::<f64>(),
            DecodeMode::Block { mean_accepted, .. } => 1.0 + mean_accepted,
        }
    }
}

/// The uniforms of speculative decoding's acceptance, keyed by request, output position and
/// draft: request r decoding from output position k draws the same uniforms in every run with
/// the same seed, whatever else runs beside it and in whatever order the decode set is walked.
/// So every probe of a candidate sees the same acceptances per request (common random
/// numbers), and probe-to-probe differences come from the configuration. A counter-based
/// hash (SplitMix64's finalizer over the keys), cheaper than a stream per request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AcceptanceDraws {
    key: u64,
}

impl AcceptanceDraws {
    pub fn new(seed: u64) -> Self {
        AcceptanceDraws { key: rand::Rng::random(&mut rng(seed, Stream::MtpAcceptance)) }
    }

    /// A uniform in [0, 1).
    fn uniform(&self, req: u32, pos: u64, draft: u64) -> f64 {
        let mut z = self.key
            ^ (req as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)
            ^ (pos + 1).wrapping_mul(0xD1B5_4A32_D192_ED03)
            ^ (draft + 1).wrapping_mul(0x8CB9_2BA7_2F3D_8DD7);
        for _ in 0..2 {
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
        }
        (z >> 11) as f64 / (1u64 << 53) as f64
    }
}
