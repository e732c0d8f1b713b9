//! Why a simulation could not run to completion ([`SimError`]).

/// Why a simulation could not run to completion. It travels to the outcome as this value, so a
/// step limit is never mistaken for a latency limit.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SimError {
    #[error("the KV cache holds {capacity} blocks of {block_size} tokens, but one request needs {needed} ({tokens} tokens)")]
    KvTooSmall { needed: u64, capacity: u64, block_size: u64, tokens: u64 },
    #[error("no KV capacity is left after weights, the peak activations and what the memory setting keeps back (a serving engine's: its share of the device, its profiling step, its buffers)")]
    NoKvCapacity,
    #[error("the simulation did not finish within {steps} engine steps")]
    StepLimit { steps: u64 },
    #[error("the search's simulation work budget ({budget} engine steps) is spent")]
    WorkBudget { budget: u64 },
    #[error("one engine step takes {seconds:e} s (more than an hour): the device profile's values are not physical")]
    StepTooSlow { seconds: f64 },
    #[error("a prompt of {prompt} tokens cannot be scheduled whole in a budget of {budget} tokens without chunked prefill")]
    PromptTooLong { prompt: u64, budget: u64 },
    #[error("instance {instance} stalled: {waiting} requests wait but none can be scheduled")]
    Stalled { instance: u32, waiting: u64 },
    #[error("{batch} requests in flight need about {needed} KV blocks at their mean context, but the cache holds {capacity}")]
    KvOversubscribed { needed: u64, capacity: u64, batch: u64 },
    /// A failure read back from a JSON report (`merge`): only its message survives there.
    #[error("{0}")]
    Reported(String),
}
