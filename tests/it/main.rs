//! Command-line integration tests of `throughput-optimizer`, one test binary:
//! `validation` (every rejected command line) and `modes` (every mode and output).

mod interactive;
mod layers;
mod modes;
mod scenarios;
mod search;
mod util;
mod validation;
