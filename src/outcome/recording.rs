//! What the search recorded of each device's best configuration for the outputs that look
//! inside one run (`--chrome-trace-file`, `--requests-file`, `--operator-trace-file`): its
//! simulated timeline (every engine step, bounded, and every request's life) and its priced
//! operators. `search::record` fills it, only for the outputs the plan asks for; `report`
//! renders it and computes nothing. It is kept beside the [`super::Report`], not in it: it is
//! not part of the JSON report (whose schema is published), and a merged report has none.

use super::Row;

/// Most engine steps a timeline keeps and draws (a step is three events, about 300 bytes).
pub const MAX_TIMELINE_STEPS: usize = 100_000;
/// Most requests a timeline draws (a request is eight events, about 900 bytes).
pub const MAX_TIMELINE_REQUESTS: usize = 20_000;

/// Everything recorded for one run's per-configuration outputs.
#[derive(Debug, Clone, PartialEq)]
pub struct Recordings {
    /// One simulated timeline per device with a best row (none unless `--chrome-trace-file` or
    /// `--requests-file` is given), or why a simulation failed.
    pub timelines: Result<Vec<Timeline>, RecordingFailure>,
    /// One operator breakdown per device with a best row (none unless
    /// `--operator-trace-file` is given).
    pub operator_traces: Vec<OperatorTrace>,
}

impl Default for Recordings {
    fn default() -> Self {
        Recordings { timelines: Ok(Vec::new()), operator_traces: Vec::new() }
    }
}

/// A simulation of a best row that failed while recording.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordingFailure {
    pub device: String,
    pub message: String,
}

/// What a simulated instance runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InstanceRole {
    /// Prefill and decode (aggregated serving).
    Mixed,
    Prefill,
    Decode,
}

/// One simulated run of a device's best row (of its first phase with one: aggregated, or
/// prefill under disaggregation): the search's own probe of that row, same configuration, seed
/// and requests, so its figures are the report's.
#[derive(Debug, Clone, PartialEq)]
pub struct Timeline {
    pub device: String,
    /// The row simulated.
    pub row: Row,
    pub role: InstanceRole,
    /// Instances simulated (one representative replica of a closed loop, every replica of an
    /// open one).
    pub instances: u32,
    /// KV blocks each instance holds.
    pub kv_blocks: u64,
    /// The first [`MAX_TIMELINE_STEPS`] engine steps, in the order they ran.
    pub steps: Vec<StepSpan>,
    /// Engine steps the run took in all.
    pub steps_total: u64,
    /// Every request issued, in issue order.
    pub requests: Vec<RequestLife>,
}

/// One engine step of one instance (times in ns from the start of the run).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepSpan {
    pub instance: u32,
    pub start_ns: u64,
    pub end_ns: u64,
    /// Prompt chunks and their tokens.
    pub prefill_seqs: u64,
    pub prefill_tokens: u64,
    pub decode_seqs: u64,
    pub decode_tokens: u64,
    /// KV blocks in use on the instance once the step's blocks are allocated.
    pub kv_used: u64,
}

/// One request's life (times in ns from the start of the run, engine times: the serving front
/// end's per-request overhead is not in them). A request still running when the run stopped
/// has no first token or finish.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestLife {
    /// The instance that served it.
    pub instance: u32,
    pub arrival_ns: u64,
    /// First admitted: by a scheduler, or on a decode instance (P/D).
    pub scheduled_ns: Option<u64>,
    pub first_token_ns: Option<u64>,
    pub finish_ns: Option<u64>,
    pub input_tokens: u64,
    /// Prompt tokens found in the KV cache at its first admission (prefix-cache hits).
    pub cached_tokens: u64,
    pub output_tokens: u64,
    pub preemptions: u32,
}

/// The operators of a device's best row priced at the shapes its engine priced: one prefill
/// forward and one decode step (the one its phase runs, both when aggregated).
#[derive(Debug, Clone, PartialEq)]
pub struct OperatorTrace {
    pub device: String,
    /// The row priced.
    pub row: Row,
    pub passes: Vec<PricedPass>,
}

/// Which forward a [`PricedPass`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PassKind {
    /// One prefill forward at the budget's chunks.
    PrefillForward,
    /// One decode step of the whole batch at the mid-generation context.
    DecodeStep,
}

/// One forward, operator by operator, in the order the forward runs them.
#[derive(Debug, Clone, PartialEq)]
pub struct PricedPass {
    pub kind: PassKind,
    pub operators: Vec<PricedOperator>,
}

/// One operator kind of a forward: how many times it runs (layers, experts) and the seconds of
/// one run by the component that bounds it.
#[derive(Debug, Clone, PartialEq)]
pub struct PricedOperator {
    pub name: String,
    pub count: f64,
    pub cube_s: f64,
    pub vector_s: f64,
    pub memory_s: f64,
    pub comm_s: f64,
    pub fixed_s: f64,
    /// One run: max(compute, memory, communication) + fixed.
    pub total_s: f64,
}
