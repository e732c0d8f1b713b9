//! Prints the JSON Schema of `--output json`, generated from the report types.
//!
//! `cargo run --example report_schema > docs/report.schema.json`
//! (the test `json_schema_is_published` checks that the committed file is this output).

fn main() {
    print!("{}", throughput_optimizer::report::json::schema());
}
