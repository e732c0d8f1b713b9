//! Command-line integration tests of `throughput-optimizer`, one test binary:
//! `validation` (every rejected command line) and `modes` (every mode and output).

mod calibrate;
mod hostile;
mod interactive;
mod layers;
mod modes;
mod scenarios;
mod schema;
mod search;
mod util;
mod validation;
