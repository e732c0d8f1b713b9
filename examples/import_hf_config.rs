//! Convert a Hugging Face `config.json` into the catalog's YAML format.
//!
//! `cargo run --example import_hf_config -- path/to/config.json Org/Name > profiles/models/Org--Name.yaml`
//!
//! A ModelOpt `hf_quant_config.json` beside the config is read too, as the CLI reads it.

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 3 {
        eprintln!("usage: import_hf_config CONFIG_JSON HF_ID");
        std::process::exit(2);
    }
    let text = std::fs::read_to_string(&args[1]).unwrap_or_else(|e| {
        eprintln!("{}: {e}", args[1]);
        std::process::exit(1)
    });
    let sibling = std::path::Path::new(&args[1]).with_file_name("hf_quant_config.json");
    let hf_quant = std::fs::read_to_string(&sibling).ok();
    match throughput_optimizer::model::hf::parse_config_with(&text, hf_quant.as_deref(), &args[2]) {
        Ok(m) => {
            println!(
                "# {} — converted from its Hugging Face config.json{} by examples/import_hf_config.rs",
                m.id,
                if hf_quant.is_some() { " and hf_quant_config.json" } else { "" }
            );
            print!("{}", throughput_optimizer::yaml::to_string(&m).expect("serializable"));
        }
        Err(e) => {
            eprintln!("{}: {e}", args[1]);
            std::process::exit(2)
        }
    }
}
