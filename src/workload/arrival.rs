//! Request streams for the simulator: arrival processes (closed loop, burst, Poisson, gamma,
//! trace replay), lengths (fixed or drawn from a distribution) and shared-prefix groups — each
//! concern with its own seeded ChaCha stream, so adding one does not perturb the others.

use super::trace::TraceFormat;
use super::{LengthBin, Lengths};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Exp, Gamma};
use serde::{Deserialize, Serialize};

/// Independent random streams derived from `--seed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Arrivals = 1,
    InputLengths = 2,
    OutputLengths = 3,
    PrefixGroups = 4,
    MtpAcceptance = 5,
    /// When a benchmark client's requests reach the server (see `sim::CLIENT_JITTER_NS`).
    ClientJitter = 6,
}

pub fn rng(seed: u64, stream: Stream) -> ChaCha8Rng {
    let mut r = ChaCha8Rng::seed_from_u64(seed);
    r.set_stream(stream as u64);
    r
}

/// How requests arrive.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ArrivalProcess {
    /// Keep the candidate's concurrency in flight: a new request when one finishes.
    Closed,
    /// Every request at t = 0, one pass.
    Burst,
    /// Exponential inter-arrival times at `rate` req/s.
    Poisson { rate: f64 },
    /// Fixed inter-arrival times of 1/rate (the fixed-rate profile of benchmark clients such
    /// as guidellm's `constant`).
    Constant { rate: f64 },
    /// Gamma inter-arrival times with mean 1/rate and shape `burstiness` (1 = Poisson;
    /// smaller = burstier).
    Gamma { rate: f64, burstiness: f64 },
    /// Replay of a trace file.
    Trace(Trace),
}

impl ArrivalProcess {
    pub fn name(&self) -> &'static str {
        match self {
            ArrivalProcess::Closed => "closed",
            ArrivalProcess::Burst => "burst",
            ArrivalProcess::Poisson { .. } => "poisson",
            ArrivalProcess::Constant { .. } => "constant",
            ArrivalProcess::Gamma { .. } => "gamma",
            ArrivalProcess::Trace(_) => "trace",
        }
    }
    pub fn is_open(&self) -> bool {
        matches!(
            self,
            ArrivalProcess::Poisson { .. } | ArrivalProcess::Constant { .. } | ArrivalProcess::Gamma { .. } | ArrivalProcess::Trace(_)
        )
    }
}

/// Requests sharing a cached prefix: `groups` groups of `length` tokens, drawn uniformly.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SharedPrefix {
    pub groups: u32,
    pub length: u64,
}

pub use super::trace::{Trace, TraceError, TraceRequest, MAX_ARRIVAL_S, MAX_REQUESTS, MAX_TRACE_REQUESTS};

/// Draw a length from bins: a bin by weight, then uniformly within [min, max).
fn draw_from_bins(bins: &[LengthBin], rng: &mut ChaCha8Rng) -> u64 {
    let total: f64 = bins.iter().map(|b| b.weight).sum();
    let mut u = rng.random::<f64>() * total;
    let mut pick = &bins[bins.len() - 1];
    for b in bins {
        if u < b.weight {
            pick = b;
            break;
        }
        u -= b.weight;
    }
    rng.random_range(pick.min_tokens..pick.max_tokens).max(1)
}

/// A generated request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NewRequest {
    pub arrival_ns: u64,
    pub input: u64,
    pub output: u64,
    pub prefix_group: Option<u32>,
    pub prefix_len: u64,
}

/// Produces requests for one simulation.
#[derive(Debug, Clone)]
pub struct RequestFactory {
    input: Lengths,
    output: Lengths,
    shared: Option<SharedPrefix>,
    process: ArrivalProcess,
    arrivals: ChaCha8Rng,
    input_rng: ChaCha8Rng,
    output_rng: ChaCha8Rng,
    group_rng: ChaCha8Rng,
    next_arrival_ns: u64,
    /// Open-loop requests made so far (the constant process places the k-th at k / rate).
    issued_open: u64,
    /// `--random-range-ratio` for fixed lengths.
    range_ratio: Option<f64>,
    /// The benchmark client's spread of fixed output lengths, tokens (see `with_output_spread`).
    output_spread: Option<u64>,
    trace_pos: usize,
}

impl RequestFactory {
    pub fn new(input: Lengths, output: Lengths, shared: Option<SharedPrefix>, process: ArrivalProcess, seed: u64) -> Self {
        RequestFactory {
            input,
            output,
            shared,
            process,
            arrivals: rng(seed, Stream::Arrivals),
            input_rng: rng(seed, Stream::InputLengths),
            output_rng: rng(seed, Stream::OutputLengths),
            group_rng: rng(seed, Stream::PrefixGroups),
            next_arrival_ns: 0,
            issued_open: 0,
            range_ratio: None,
            output_spread: None,
            trace_pos: 0,
        }
    }

    pub fn process(&self) -> &ArrivalProcess {
        &self.process
    }

    /// Requests a trace holds (`None`: the process never runs out).
    pub fn trace_len(&self) -> Option<u64> {
        match &self.process {
            ArrivalProcess::Trace(t) => Some(t.requests.len() as u64),
            _ => None,
        }
    }

    /// Spread fixed lengths uniformly over [⌊(1 − r)·L⌋, ⌊(1 + r)·L⌋] (vLLM's random dataset:
    /// `randint(low, high + 1)`), never below one token.
    pub fn with_range_ratio(mut self, ratio: Option<f64>) -> Self {
        self.range_ratio = ratio.filter(|r| *r > 0.0);
        self
    }

    /// Spread fixed output lengths alone uniformly over [L − k, L + k] tokens (at least one),
    /// as a benchmark client that honours end-of-sequence gets them (a `--random-range-ratio`
    /// replaces it).
    pub fn with_output_spread(mut self, tokens: Option<u64>) -> Self {
        self.output_spread = tokens.filter(|k| *k > 0);
        self
    }

    fn spread(ratio: Option<f64>, n: u64, rng: &mut ChaCha8Rng) -> u64 {
        match ratio {
            Some(r) => {
                let lo = ((n as f64 * (1.0 - r)).floor() as u64).max(1);
                let hi = ((n as f64 * (1.0 + r)).floor() as u64).max(lo);
                rng.random_range(lo..=hi)
            }
            None => n,
        }
    }

    fn lengths(&mut self) -> (u64, u64) {
        let input = match &self.input {
            Lengths::Fixed(n) => Self::spread(self.range_ratio, *n, &mut self.input_rng),
            Lengths::Distribution(d) => draw_from_bins(&d.bins, &mut self.input_rng),
        };
        let output = match (&self.output, &self.input) {
            (_, Lengths::Distribution(d)) if d.output_bins.is_some() => {
                draw_from_bins(d.output_bins.as_ref().unwrap(), &mut self.output_rng)
            }
            (Lengths::Fixed(n), _) => match (self.range_ratio, self.output_spread) {
                (None, Some(k)) => self.output_rng.random_range(n.saturating_sub(k).max(1)..=n + k),
                (ratio, _) => Self::spread(ratio, *n, &mut self.output_rng),
            },
            (Lengths::Distribution(d), _) => draw_from_bins(&d.bins, &mut self.output_rng),
        };
        (input, output)
    }

    fn group(&mut self, input: u64) -> (Option<u32>, u64) {
        match self.shared {
            Some(s) if s.groups > 0 => (Some(self.group_rng.random_range(0..s.groups)), s.length.min(input)),
            _ => (None, 0),
        }
    }

    /// A request arriving at `at_ns` (closed loop and burst decide the time).
    pub fn make(&mut self, at_ns: u64) -> NewRequest {
        let (input, output) = self.lengths();
        let (prefix_group, prefix_len) = self.group(input);
        NewRequest { arrival_ns: at_ns, input, output, prefix_group, prefix_len }
    }

    /// The next request of an open-loop process (`None` when a trace is exhausted). The
    /// simulator pulls arrivals through this one at a time, as they are due: a source of
    /// requests never has to hold them all.
    pub fn next_open(&mut self) -> Option<NewRequest> {
        let at = self.next_arrival_ns;
        // Matched by reference: a trace is read in place, not copied per request.
        self.next_arrival_ns = match &self.process {
            ArrivalProcess::Poisson { rate } => {
                let gap = Exp::new(*rate).expect("validated rate").sample(&mut self.arrivals);
                at + (gap * 1e9).round() as u64
            }
            ArrivalProcess::Constant { rate } => {
                // The k-th arrival at round(k / rate): no drift from summing rounded gaps.
                self.issued_open += 1;
                (self.issued_open as f64 / rate * 1e9).round() as u64
            }
            ArrivalProcess::Gamma { rate, burstiness } => {
                let g = Gamma::new(*burstiness, 1.0 / (rate * burstiness)).expect("validated parameters");
                at + (g.sample(&mut self.arrivals) * 1e9).round() as u64
            }
            ArrivalProcess::Trace(t) => {
                let r = t.requests.get(self.trace_pos)?;
                self.trace_pos += 1;
                return Some(NewRequest {
                    arrival_ns: (r.arrival_s * 1e9).round() as u64,
                    input: r.input_tokens,
                    output: r.output_tokens,
                    prefix_group: r.prefix_group,
                    prefix_len: r.prefix_len,
                });
            }
            ArrivalProcess::Closed | ArrivalProcess::Burst => return Some(self.make(0)),
        };
        Some(self.make(at))
    }
}

impl ArrivalProcess {
    /// The mean offered rate, requests per second: a generated process's rate; a trace's
    /// arrivals after the first over the span from the first to the last (`None` for closed
    /// loops, bursts and traces whose arrivals share one instant).
    pub fn mean_rate(&self) -> Option<f64> {
        match self {
            ArrivalProcess::Poisson { rate } | ArrivalProcess::Constant { rate } | ArrivalProcess::Gamma { rate, .. } => Some(*rate),
            ArrivalProcess::Trace(t) => {
                let (first, last) = (t.requests.first()?.arrival_s, t.requests.last()?.arrival_s);
                (last > first).then(|| (t.requests.len() - 1) as f64 / (last - first))
            }
            ArrivalProcess::Closed | ArrivalProcess::Burst => None,
        }
    }

    /// The same arrivals offered at `rate` requests per second. A generated process keeps its
    /// shape with the new rate: from the same seed it draws the same pattern with every gap
    /// scaled by the ratio of the rates (rand_distr's exponential and gamma samples are a draw
    /// of the unit distribution times the scale; the constant process places arrival k at
    /// k / rate), so a higher rate is the same requests arriving sooner (common random
    /// numbers across rates). A trace's times are divided by the ratio of the rates. Closed
    /// loops and bursts have no rate and are returned unchanged.
    pub fn at_rate(&self, rate: f64) -> ArrivalProcess {
        match self {
            ArrivalProcess::Poisson { .. } => ArrivalProcess::Poisson { rate },
            ArrivalProcess::Constant { .. } => ArrivalProcess::Constant { rate },
            ArrivalProcess::Gamma { burstiness, .. } => ArrivalProcess::Gamma { rate, burstiness: *burstiness },
            ArrivalProcess::Trace(t) => match self.mean_rate() {
                Some(own) => {
                    let factor = own / rate;
                    let mut t = t.clone();
                    for r in &mut t.requests {
                        r.arrival_s *= factor;
                    }
                    t.time_scale = Some(t.time_scale.unwrap_or(1.0) * factor);
                    ArrivalProcess::Trace(t)
                }
                None => self.clone(),
            },
            other => other.clone(),
        }
    }

    /// One line for reports.
    pub fn describe(&self) -> String {
        match self {
            ArrivalProcess::Poisson { rate } => format!("poisson at {rate} req/s"),
            ArrivalProcess::Constant { rate } => format!("constant at {rate} req/s"),
            ArrivalProcess::Gamma { rate, burstiness } => format!("gamma at {rate} req/s, burstiness {burstiness}"),
            ArrivalProcess::Trace(t) => format!(
                "trace {} ({}{} requests{})",
                t.source,
                match t.format {
                    TraceFormat::AzureCsv | TraceFormat::MooncakeJsonLines => format!("{}, ", t.format.describe()),
                    _ => String::new(),
                },
                t.requests.len(),
                t.time_scale.map(|x| format!(", times ×{x}")).unwrap_or_default()
            ),
            other => other.name().to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_ratio_draws_uniform_lengths_in_vllms_bounds() {
        // L = 1000, R = 0.5: every length in [500, 1500], both ends reached, mean near 1000.
        // Mutation: drop the `+ r` upper side (or use `lo..hi`) and the maximum is never 1500.
        let mut f =
            RequestFactory::new(Lengths::Fixed(1000), Lengths::Fixed(10), None, ArrivalProcess::Closed, 1).with_range_ratio(Some(0.5));
        let v: Vec<(u64, u64)> = (0..20_000).map(|_| f.lengths()).collect();
        let ins: Vec<u64> = v.iter().map(|x| x.0).collect();
        assert_eq!((*ins.iter().min().unwrap(), *ins.iter().max().unwrap()), (500, 1500));
        let mean = ins.iter().sum::<u64>() as f64 / ins.len() as f64;
        assert!((mean - 1000.0).abs() < 10.0, "{mean}");
        // Output 10 × [0.5, 1.5] → [5, 15].
        assert_eq!((v.iter().map(|x| x.1).min().unwrap(), v.iter().map(|x| x.1).max().unwrap()), (5, 15));
    }

    #[test]
    fn constant_arrivals_are_evenly_spaced_without_drift() {
        // 3 req/s: arrivals at round(k / 3 s). Mutation: add the rounded gap to the previous
        // arrival instead (333333333 ns each) and the 3000th arrival drifts by 1 µs.
        let mut f = RequestFactory::new(Lengths::Fixed(10), Lengths::Fixed(5), None, ArrivalProcess::Constant { rate: 3.0 }, 0);
        let t: Vec<u64> = (0..3001).map(|_| f.next_open().unwrap().arrival_ns).collect();
        assert_eq!(&t[..4], &[0, 333_333_333, 666_666_667, 1_000_000_000]);
        assert_eq!(t[3000], 1_000_000_000_000);
    }

    #[test]
    fn a_higher_rate_is_the_same_requests_arriving_sooner() {
        // Common random numbers across rates: at twice the rate every arrival comes at half
        // the time (to the nanosecond's rounding) with the same lengths. Mutation: rebuild the
        // factory with another seed per rate (or draw gaps from a stream that depends on the
        // rate) and the arrival times stop scaling.
        let d = crate::workload::LengthDistribution::builtin();
        for p in [
            ArrivalProcess::Poisson { rate: 3.0 },
            ArrivalProcess::Gamma { rate: 3.0, burstiness: 0.5 },
            ArrivalProcess::Constant { rate: 3.0 },
        ] {
            let mk = |p: ArrivalProcess| RequestFactory::new(Lengths::Distribution(d.clone()), Lengths::Fixed(100), None, p, 9);
            let (mut a, mut b) = (mk(p.clone()), mk(p.at_rate(6.0)));
            for _ in 0..200 {
                let (x, y) = (a.next_open().unwrap(), b.next_open().unwrap());
                assert_eq!((x.input, x.output), (y.input, y.output));
                assert!((x.arrival_ns as f64 / 2.0 - y.arrival_ns as f64).abs() <= 200.0, "{p:?}: {} vs {}", x.arrival_ns, y.arrival_ns);
            }
            assert_eq!(p.at_rate(6.0).mean_rate(), Some(6.0));
        }
        let t = Trace::parse("arrival_s,input_tokens,output_tokens\n0,5,5\n1,5,5\n4,5,5\n", "t.csv").unwrap();
        let p = ArrivalProcess::Trace(t);
        assert_eq!(p.mean_rate(), Some(0.5));
        let ArrivalProcess::Trace(fast) = p.at_rate(2.0) else { panic!() };
        assert_eq!(fast.requests.iter().map(|r| r.arrival_s).collect::<Vec<_>>(), vec![0.0, 0.25, 1.0]);
        assert_eq!(ArrivalProcess::Closed.mean_rate(), None);
    }

    #[test]
    fn streams_are_independent_and_seeded() {
        let d = crate::workload::LengthDistribution::builtin();
        let mk = |seed| {
            RequestFactory::new(Lengths::Distribution(d.clone()), Lengths::Fixed(100), None, ArrivalProcess::Poisson { rate: 2.0 }, seed)
        };
        let (mut a, mut b) = (mk(7), mk(7));
        let ra: Vec<NewRequest> = (0..50).map(|_| a.next_open().unwrap()).collect();
        let rb: Vec<NewRequest> = (0..50).map(|_| b.next_open().unwrap()).collect();
        assert_eq!(ra, rb);
        let mut c = mk(8);
        let rc: Vec<NewRequest> = (0..50).map(|_| c.next_open().unwrap()).collect();
        assert_ne!(ra, rc);
        // Arrival times increase; mean gap near 1/rate.
        assert!(ra.windows(2).all(|w| w[1].arrival_ns >= w[0].arrival_ns));
        let mut p = mk(1);
        let many: Vec<NewRequest> = (0..4000).map(|_| p.next_open().unwrap()).collect();
        let mean_gap = many.last().unwrap().arrival_ns as f64 / 3999.0 / 1e9;
        assert!((mean_gap - 0.5).abs() < 0.03, "{mean_gap}");
        let mean_in = many.iter().map(|r| r.input as f64).sum::<f64>() / 4000.0;
        assert!((mean_in - 4231.0).abs() < 400.0, "{mean_in}");
    }

    #[test]
    fn trace_files_report_file_line_and_field() {
        let t = Trace::parse("arrival_s,input_tokens,output_tokens\n0.5,100,10\n0.0,200,20\n", "t.csv").unwrap();
        assert_eq!(t.requests[0].input_tokens, 200);
        let e = Trace::parse("arrival_s,input_tokens,output_tokens\n0.5,100,10\n-1,200,20\n", "t.csv").unwrap_err();
        assert_eq!(
            e.to_string(),
            "--arrival trace t.csv: line 3: field `arrival_s`: -1 is negative or not finite; arrival times are seconds ≥ 0"
        );
        let e = Trace::parse("arrival_s,input_tokens,output_tokens\n0.5,0,10\n", "t.csv").unwrap_err();
        assert!(e.message.contains("line 2: field `input_tokens`: 0 is not between 1"), "{e}");
        // An extra column is left out and named (mutation: return the old "unknown column"
        // error and this fails).
        let t = Trace::parse("arrival_s,input_tokens,output_tokens,speed\n0,5,5,9\n", "t.csv").unwrap();
        assert_eq!((t.requests.len(), t.ignored_columns.clone()), (1, vec!["speed".to_string()]));
        let e =
            Trace::parse("{\"arrival_s\": 0, \"input_tokens\": 5, \"output_tokens\": 5}\n{\"arrival_s\": 1, \"input\": 5}\n", "t.jsonl")
                .unwrap_err();
        assert!(e.message.contains("line 2") && e.message.contains("unknown field `input`"), "{e}");
        let e = Trace::parse("{\"arrival_s\": 0, \"input_tokens\": 5, \"output_tokens\": 0}\n", "t.jsonl").unwrap_err();
        assert!(e.message.contains("line 1: field `output_tokens`"), "{e}");
        let e = Trace::parse("arrival_s,input_tokens,output_tokens\n0.5,abc,10\n", "t.csv").unwrap_err();
        assert!(e.message.contains("line 2: field `input_tokens` is `abc`"), "{e}");
    }
}
