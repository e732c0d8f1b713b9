//! Command-line integration tests of `throughput-optimizer`, one test binary:
//! `validation` (every rejected command line) and `modes` (every mode and output).

mod calibrate;
mod capacity;
mod capacity_pd;
mod costing;
mod defects;
mod engines;
mod help;
mod hostile;
mod interactive;
mod launch;
mod launch_check;
mod layers;
mod modes;
mod msrv;
mod pipeline;
mod price;
mod scenarios;
mod schema;
mod search;
mod shard;
mod silicon;
mod timeline;
mod util;
mod validation;
mod warnings;
mod width;
