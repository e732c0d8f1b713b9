//! Writes the built-in kernel tables (`profiles/kernels/<system>/<engine>.tables.zst`) from
//! NVIDIA AIConfigurator's silicon database, read by the same reader as
//! `--profiling-database-path`:
//!
//! ```text
//! pip download aiconfigurator-core==0.12.0 --no-deps && unzip aiconfigurator_core-*.whl -d aic
//! rm aic/aiconfigurator_core/systems/silicon_sample.csv   # measured serving runs: not kernel data
//! cargo run --release --example pack_kernel_tables -- aic/aiconfigurator_core/systems profiles/kernels
//! ```
//!
//! Each file is the database's current version for the engine (with its backward fill), every
//! table this tool prices from, latencies rounded to 0.05 % (see `hardware::kernels::packed`).

use throughput_optimizer::hardware::kernels::{aic::AicDatabase, packed};

const SYSTEMS: &[&str] = &["h100_sxm", "h200_sxm", "b200_sxm", "b300_sxm", "gb200", "gb300", "rtx_pro_6000_server", "a100_sxm", "l40s"];
const ENGINES: &[&str] = &["vllm", "sglang", "trtllm"];
const PACKAGE: &str = "aiconfigurator-core 0.12.0";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [db, out] = args.as_slice() else {
        eprintln!("usage: pack_kernel_tables <aiconfigurator_core/systems> <output directory>");
        std::process::exit(2);
    };
    let db = AicDatabase::open(std::path::Path::new(db)).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(1)
    });
    for system in SYSTEMS {
        for engine in ENGINES {
            let mut tables = match db.load(system, engine) {
                Ok(t) => t,
                Err(e) => {
                    eprintln!("{system} {engine}: {e}");
                    continue;
                }
            };
            tables.provenance.origin = format!("NVIDIA AIConfigurator silicon database ({PACKAGE}, Apache-2.0)");
            let attribution = [
                "Derived from the kernel measurements NVIDIA publishes with AIConfigurator",
                "(https://github.com/ai-dynamo/aiconfigurator, PyPI aiconfigurator-core 0.12.0),",
                "licensed under the Apache License 2.0. Latencies are rounded to 0.05 %.",
            ];
            let text = packed::to_text(&tables, &attribution);
            let bytes = packed::compress(&text).expect("compression of text in memory");
            let dir = std::path::Path::new(out).join(system);
            std::fs::create_dir_all(&dir).expect("output directory");
            let path = dir.join(format!("{engine}.tables.zst"));
            std::fs::write(&path, &bytes).expect("write the packed file");
            let count: usize = tables.tables().map(|(_, g)| g.points().len()).sum();
            println!("{}: {} tables, {count} points, {} bytes", path.display(), tables.tables().count(), bytes.len());
        }
    }
}
