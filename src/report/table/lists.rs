//! The catalogues: `--list-devices` and `--list-models`.

use super::layout::new_table;
use crate::hardware::DeviceRegistry;

/// `--list-devices`
pub fn device_list(reg: &DeviceRegistry) -> String {
    let mut t = new_table(&[
        "Device",
        "Vendor",
        "Cube bf16 (TFLOPS, eff.)",
        "Memory (GiB)",
        "HBM BW (TiB/s, eff.)",
        "Comm Grid",
        "Max devices",
        "Source",
    ]);
    for (p, origin) in reg.profiles() {
        t.add_row(vec![
            p.name.clone(),
            p.vendor.clone(),
            format!("{:.2}", p.display_cube_tflops()),
            format!("{:.1}", p.memory_gib()),
            format!("{:.3}", p.display_hbm_tib_s()),
            match p.gpus_per_host {
                Some(h) => format!("{} ({h} per host)", p.grid_shape()),
                None => p.grid_shape(),
            },
            p.grid_size().to_string(),
            origin.to_string(),
        ]);
    }
    // Where each profile's figures come from: too long for a column, one line per device.
    let sources: String =
        reg.profiles().filter(|(p, _)| !p.source.is_empty()).map(|(p, _)| format!("  {}: {}\n", p.name, p.source)).collect();
    if sources.is_empty() {
        format!("{t}\n")
    } else {
        format!("{t}\nFigures from:\n{sources}")
    }
}

/// `--list-models`
pub fn model_list() -> String {
    let mut t = new_table(&["Model", "Type", "Architecture"]);
    for m in crate::model::catalog::all() {
        t.add_row(vec![m.id.clone(), m.model_type.clone(), m.summary()]);
    }
    format!("{t}\nAlso accepted: a directory with a config.json, a path to a config.json, or a model in the local Hugging Face cache.\n")
}
