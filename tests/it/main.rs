//! Command-line integration tests of `throughput-optimizer`, one test binary:
//! `validation` (every rejected command line) and `modes` (every mode and output).

mod calibrate;
mod capacity;
mod engines;
mod help;
mod hostile;
mod interactive;
mod launch;
mod layers;
mod modes;
mod msrv;
mod price;
mod scenarios;
mod schema;
mod search;
mod shard;
mod timeline;
mod util;
mod validation;
mod width;
