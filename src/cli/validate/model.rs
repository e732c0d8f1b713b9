//! The model and the device profiles.

use super::usage;
use crate::cli::args::RawArgs;
use crate::cli::plan::PlanError;
use crate::hardware::{DeviceProfile, DeviceRegistry};
use crate::model::{self, ModelArch, ModelSource};
use std::path::Path;

/// The built-in device profiles plus those of every `--device-file`.
pub(crate) fn validate_registry(raw: &RawArgs) -> Result<DeviceRegistry, PlanError> {
    let mut registry = DeviceRegistry::builtin();
    for f in &raw.device_file {
        registry.add_file(f).map_err(|e| usage(e.to_string()))?;
    }
    Ok(registry)
}

fn model_id_ok(id: &str) -> bool {
    id.len() <= 256 && !id.is_empty() && id.chars().all(|c| c.is_ascii_alphanumeric() || "_/.-".contains(c))
}

/// The model named positionally or by `--model-id`, resolved from the catalog or a config.
pub(crate) fn validate_model(raw: &RawArgs) -> Result<(ModelArch, ModelSource), PlanError> {
    let id = match (&raw.model_id, &raw.model_id_flag) {
        (Some(_), Some(_)) => return Err(usage("pass either a positional MODEL_ID or --model-id, not both")),
        (None, None) => {
            return Err(usage(
                "MODEL_ID is required: a catalog id such as Qwen/Qwen3-32B (see --list-models), a directory with a config.json, or a config.json path",
            ))
        }
        (Some(m), None) | (None, Some(m)) => m.clone(),
    };
    if !Path::new(&id).exists() && !model_id_ok(&id) {
        return Err(usage(format!(
            "MODEL_ID `{id}`: a model id may only contain letters, digits, `_`, `/`, `.` and `-` (at most 256 characters), or be an existing path"
        )));
    }
    model::resolve_model(&id).map_err(|e| usage(e.to_string()))
}

/// The profiles of `--device` (TEST_DEVICE when none is given), each once.
pub(crate) fn validate_devices(raw: &RawArgs, registry: &DeviceRegistry) -> Result<Vec<DeviceProfile>, PlanError> {
    let names: Vec<String> = if raw.device.is_empty() { vec!["TEST_DEVICE".to_string()] } else { raw.device.clone() };
    let mut devices: Vec<DeviceProfile> = Vec::new();
    for n in &names {
        let p = registry.get(n).map_err(|e| usage(e.to_string()))?;
        if !devices.iter().any(|d| d.name == p.name) {
            devices.push(p.clone());
        }
    }
    Ok(devices)
}
