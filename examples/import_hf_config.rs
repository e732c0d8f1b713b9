//! Convert a Hugging Face `config.json` into the catalog's YAML format.
//!
//! `cargo run --example import_hf_config -- path/to/config.json Org/Name > profiles/models/Org--Name.yaml`

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
    match throughput_optimizer::model::hf::parse_config(&text, &args[2]) {
        Ok(m) => {
            println!("# {} — converted from its Hugging Face config.json by examples/import_hf_config.rs", m.id);
            print!("{}", throughput_optimizer::yaml::to_string(&m).expect("serializable"));
        }
        Err(e) => {
            eprintln!("{}: {e}", args[1]);
            std::process::exit(2)
        }
    }
}
