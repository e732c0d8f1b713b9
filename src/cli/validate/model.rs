//! The model and the device profiles.

use crate::cli::args::RawArgs;
use crate::error::Error;
use crate::hardware::{DeviceProfile, DeviceRegistry};
use crate::model::{self, ModelArch, ModelSource};
use std::path::Path;

/// The built-in device profiles plus those of every `--device-file`.
pub(crate) fn validate_registry(raw: &RawArgs) -> Result<DeviceRegistry, Error> {
    let mut registry = DeviceRegistry::builtin();
    for f in &raw.device_file {
        registry.add_file(f)?;
    }
    Ok(registry)
}

fn model_id_ok(id: &str) -> bool {
    id.len() <= 256 && !id.is_empty() && id.chars().all(|c| c.is_ascii_alphanumeric() || "_/.-".contains(c))
}

/// The model named positionally or by `--model-id`, resolved from the catalog or a config.
pub(crate) fn validate_model(raw: &RawArgs) -> Result<(ModelArch, ModelSource), Error> {
    let id = match (&raw.model_id, &raw.model_id_flag) {
        (Some(_), Some(_)) => return Err(Error::conflict("MODEL_ID", "--model-id", "pass either a positional MODEL_ID or --model-id, not both")),
        (None, None) => {
            return Err(Error::missing(
                "MODEL_ID",
                "MODEL_ID is required: a catalog id such as Qwen/Qwen3-32B (see --list-models), a directory with a config.json, or a config.json path",
            ))
        }
        (Some(m), None) | (None, Some(m)) => m.clone(),
    };
    if !Path::new(&id).exists() && !model_id_ok(&id) {
        return Err(Error::rejected(
            "MODEL_ID",
            &id,
            format!(
            "MODEL_ID `{id}`: a model id may only contain letters, digits, `_`, `/`, `.` and `-` (at most 256 characters), or be an existing path"
        ),
        ));
    }
    Ok(model::resolve_model(&id)?)
}

/// The profiles of `--device` (TEST_DEVICE when none is given), each once.
pub(crate) fn validate_devices(raw: &RawArgs, registry: &DeviceRegistry) -> Result<Vec<DeviceProfile>, Error> {
    let names: Vec<String> = if raw.device.is_empty() { vec!["TEST_DEVICE".to_string()] } else { raw.device.clone() };
    let mut devices: Vec<DeviceProfile> = Vec::new();
    for n in &names {
        let p = registry.get(n)?;
        if !devices.iter().any(|d| d.name == p.name) {
            devices.push(p.clone());
        }
    }
    Ok(devices)
}
