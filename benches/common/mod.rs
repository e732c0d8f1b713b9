//! What the whole-run benches share: a plan built from a command line, as the CLI builds it.

use clap::Parser;
use throughput_optimizer::cli::{self, Command, RawArgs};
use throughput_optimizer::plan::Plan;

/// The plan of `throughput-optimizer ARGS` (a `Run` command line; the benches' own, so a
/// parse failure is a bug in the bench).
pub fn plan(args: &str) -> Plan {
    let argv = std::iter::once("throughput-optimizer").chain(args.split_whitespace());
    match cli::build(RawArgs::try_parse_from(argv).unwrap()).unwrap() {
        Command::Run(p) => *p,
        _ => unreachable!(),
    }
}
