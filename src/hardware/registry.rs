//! The set of device profiles a run can use: the built-in ones embedded from
//! `profiles/devices/*.yaml`, plus any `--device-file`.

use super::DeviceProfile;
use crate::yaml;
use std::path::Path;

macro_rules! builtin_profiles {
    ($($file:literal),* $(,)?) => {
        &[$(($file, include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/profiles/devices/", $file)))),*]
    };
}

/// Built-in profiles in the order `--list-devices` prints them.
const BUILTIN: &[(&str, &str)] = builtin_profiles!(
    "TEST_DEVICE.yaml",
    "ATLAS_800_A2_376T_64G.yaml",
    "ATLAS_800_A2_313T_64G.yaml",
    "ATLAS_800_A2_280T_64G.yaml",
    "ATLAS_800_A2_280T_64G_PCIE.yaml",
    "ATLAS_800_A2_280T_32G_PCIE.yaml",
    "ATLAS_800_A3_752T_128G_DIE.yaml",
    "ATLAS_800_A3_560T_128G_DIE.yaml",
    "ATLAS_800_A3_560T_128G_DIE_ROCE.yaml",
    "ATLAS_350_425T_112G.yaml",
    "ATLAS_350_425T_84G.yaml",
    "A100_SXM_80G.yaml",
    "H100_SXM.yaml",
    "H200_SXM.yaml",
    "B200.yaml",
    "L40S.yaml",
    "B300.yaml",
    "GB200_NVL72.yaml",
    "GB300_NVL72.yaml",
    "H20.yaml",
    "RTX_PRO_6000.yaml",
    "L20.yaml",
    "MI300X.yaml",
    "MI325X.yaml",
    "MI355X.yaml",
);

/// Most profiles one `--device-file` may hold.
pub const MAX_PROFILES_PER_FILE: usize = 1024;

/// Why a device profile could not be loaded or found.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DeviceError {
    #[error("--device-file {path}: {message}")]
    File { path: String, message: String },
    #[error("--device-file {path}: profile `{name}` is already defined ({previous}); rename it in the file")]
    Duplicate { path: String, name: String, previous: String },
    #[error("--device `{name}` is not a known device profile; valid names: {valid}{hint}")]
    Unknown { name: String, valid: String, hint: String },
    #[error("--device: a device name must not be blank")]
    Blank,
}

/// All profiles available to this run, in registration order.
#[derive(Debug, Clone)]
pub struct DeviceRegistry {
    profiles: Vec<(DeviceProfile, String)>,
}

impl DeviceRegistry {
    /// The embedded profiles. They are part of the binary, so a broken one is a build bug.
    pub fn builtin() -> Self {
        let profiles = BUILTIN
            .iter()
            .map(|(file, text)| {
                let p: DeviceProfile = yaml::from_str(text).unwrap_or_else(|e| panic!("built-in profile {file} is malformed: {e}"));
                p.validate().unwrap_or_else(|e| panic!("built-in profile {file} is invalid: {e}"));
                (p, "built-in".to_string())
            })
            .collect();
        DeviceRegistry { profiles }
    }

    /// Add the profile(s) of a YAML file: one profile, or a list of profiles.
    pub fn add_file(&mut self, path: &Path) -> Result<Vec<String>, DeviceError> {
        let shown = path.display().to_string();
        let text = crate::util::read_bounded(path, crate::util::MAX_CONFIG_BYTES)
            .map_err(|e| DeviceError::File { path: shown.clone(), message: e.to_string() })?;
        self.add_text(&text, &shown)
    }

    pub(crate) fn add_text(&mut self, text: &str, shown: &str) -> Result<Vec<String>, DeviceError> {
        let file_err = |message: String| DeviceError::File { path: shown.to_string(), message };
        let value = yaml::value_from_str(text).map_err(|e| file_err(e.to_string()))?;
        let list: Vec<DeviceProfile> = if value.is_sequence() {
            yaml::from_str(text).map_err(|e| file_err(e.to_string()))?
        } else {
            vec![yaml::from_str(text).map_err(|e| file_err(e.to_string()))?]
        };
        if list.is_empty() {
            return Err(file_err("the file holds no device profile; give one profile or a non-empty list of them".into()));
        }
        if list.len() > MAX_PROFILES_PER_FILE {
            return Err(file_err(format!("the file holds {} profiles; at most {MAX_PROFILES_PER_FILE} are read", list.len())));
        }
        let mut names = Vec::new();
        for p in list {
            p.validate().map_err(|m| {
                // Point at the failing profile's own `name:` line.
                let line = text
                    .lines()
                    .position(|l| {
                        let t = l.trim_start().trim_start_matches("- ").trim_start();
                        t.strip_prefix("name:").is_some_and(|v| v.trim().trim_matches('"') == p.name)
                    })
                    .map(|i| format!("line {}: ", i + 1))
                    .unwrap_or_default();
                file_err(format!("{line}profile `{}`: {m}", p.name))
            })?;
            if let Some((_, origin)) = self.profiles.iter().find(|(q, _)| q.name == p.name) {
                return Err(DeviceError::Duplicate { path: shown.to_string(), name: p.name.clone(), previous: origin.clone() });
            }
            names.push(p.name.clone());
            self.profiles.push((p, shown.to_string()));
        }
        Ok(names)
    }

    pub fn names(&self) -> Vec<&str> {
        self.profiles.iter().map(|(p, _)| p.name.as_str()).collect()
    }

    pub fn profiles(&self) -> impl Iterator<Item = (&DeviceProfile, &str)> {
        self.profiles.iter().map(|(p, o)| (p, o.as_str()))
    }

    /// Exact name first, then a case-insensitive match.
    pub fn get(&self, name: &str) -> Result<&DeviceProfile, DeviceError> {
        if name.trim().is_empty() {
            return Err(DeviceError::Blank);
        }
        if let Some((p, _)) = self.profiles.iter().find(|(p, _)| p.name == name) {
            return Ok(p);
        }
        if let Some((p, _)) = self.profiles.iter().find(|(p, _)| p.name.eq_ignore_ascii_case(name)) {
            return Ok(p);
        }
        if let Some(p) = self.by_system_name(name) {
            return Ok(p);
        }
        let names = self.names();
        let close = crate::util::closest(name, &names, 3);
        let hint = if close.is_empty() { String::new() } else { format!(" (did you mean {}?)", close.join(", ")) };
        Err(DeviceError::Unknown { name: name.to_string(), valid: names.join(", "), hint })
    }
}

/// Other names of built-in profiles that are not a profile's name with an `_sxm` form factor
/// (`b200_sxm` is `B200` without this table): NVIDIA AIConfigurator's system names (its
/// `systems/*.yaml` and the `gpu` column of the serving benchmarks published with it: `gb200`,
/// `rtx_pro_6000_server`, …) and the bare chip names, each mapped to the profile of that part
/// (the A100 profile is the 80 GB SXM one; GB200 and GB300 are the NVL72 racks).
const SYSTEM_ALIASES: [(&str, &str); 9] = [
    ("a100", "A100_SXM_80G"),
    ("h100", "H100_SXM"),
    ("h200", "H200_SXM"),
    ("gb200", "GB200_NVL72"),
    ("gb300", "GB300_NVL72"),
    ("gb200_nvl", "GB200_NVL72"),
    ("gb300_nvl", "GB300_NVL72"),
    ("rtx_pro_6000_server", "RTX_PRO_6000"),
    ("l40s_pcie", "L40S"),
];

impl DeviceRegistry {
    /// The profile a system or chip name means (case-insensitive, `-` read as `_`): the name,
    /// or the name without an `_sxm` form factor, as an alias of [`SYSTEM_ALIASES`] or a
    /// profile's own name (`a100_sxm` is `A100_SXM_80G`, `b200_sxm` is `B200`).
    fn by_system_name(&self, name: &str) -> Option<&DeviceProfile> {
        let key = name.trim().to_lowercase().replace('-', "_");
        let bare = key.strip_suffix("_sxm").unwrap_or(&key);
        for k in [key.as_str(), bare] {
            let target = SYSTEM_ALIASES.iter().find(|(a, _)| *a == k).map_or(k, |(_, p)| *p);
            if let Some((p, _)) = self.profiles.iter().find(|(p, _)| p.name.eq_ignore_ascii_case(target)) {
                return Some(p);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_profiles_load_and_carry_reference_numbers() {
        let reg = DeviceRegistry::builtin();
        assert_eq!(reg.names().len(), 25);
        let t = reg.get("TEST_DEVICE").unwrap();
        assert_eq!(t.matrix_flops(crate::hardware::Dtype::Int8), Some(707.8e12 * 0.7));
        assert!((t.display_cube_tflops() - 247.73).abs() < 1e-9);
        assert!((t.display_vector_tflops() - 7.7).abs() < 1e-9);
        assert!((t.display_hbm_tib_s() - 0.96).abs() < 1e-12);
        assert_eq!(t.grid_shape(), "256 x 8");
        assert_eq!(t.display_comm_gb_s(), "35 | 137.2");
        let a2 = reg.get("atlas_800_a2_376t_64g").unwrap();
        assert_eq!(a2.display_comm_gb_s(), "17.5 | 137.2");
        assert_eq!(reg.get("ATLAS_800_A2_280T_32G_PCIE").unwrap().grid_size(), 8);
        assert_eq!(reg.get("ATLAS_800_A3_560T_128G_DIE_ROCE").unwrap().grid_size(), 32);
    }

    #[test]
    fn aiconfigurator_system_names_and_bare_chip_names_find_their_profiles() {
        // The benchmarks published with AIConfigurator name GPUs `h100_sxm`, `b200_sxm`,
        // `gb200`…: each must find its profile, and every alias must name a built-in profile.
        // (Mutations: drop the lookup from `get` and `b200_sxm` is unknown; drop the `_sxm` rule
        // and `a100_sxm` is.)
        let reg = DeviceRegistry::builtin();
        for (alias, profile) in [
            ("h100_sxm", "H100_SXM"),
            ("b200_sxm", "B200"),
            ("B200-SXM", "B200"),
            ("gb200", "GB200_NVL72"),
            ("a100_sxm", "A100_SXM_80G"),
            ("H100", "H100_SXM"),
            ("b300_sxm", "B300"),
        ] {
            assert_eq!(reg.get(alias).unwrap().name, profile, "{alias}");
        }
        for (_, profile) in SYSTEM_ALIASES {
            assert!(reg.get(profile).is_ok(), "{profile}");
        }
        assert!(matches!(reg.get("b200_pcie"), Err(DeviceError::Unknown { .. })));
    }

    #[test]
    fn non_physical_values_are_refused_with_field_and_range() {
        let text = include_str!("../../profiles/devices/TEST_DEVICE.yaml").replace("name: TEST_DEVICE", "name: ODD");
        let refuse = |from: &str, to: &str, field: &str| {
            let mut reg = DeviceRegistry::builtin();
            let e = reg.add_text(&text.replace(from, to), "odd.yaml").unwrap_err().to_string();
            assert!(e.contains(&format!("field `{field}`")) && e.contains("a physical device has it between"), "{e}");
        };
        // Each fails if its `physical` check in DeviceProfile::validate is removed.
        refuse("memory_bandwidth: 1.6 TiB/s", "memory_bandwidth: 0.000000001 MB/s", "memory_bandwidth");
        refuse("bf16: 353.9", "bf16: 1e-300", "matrix_tflops.bf16");
        refuse("host_overhead_us: 0", "host_overhead_us: 1e14", "host_overhead_us");
        refuse("memory: 64 GiB", "memory: 1 MB", "memory");
        // Fails if grid_size multiplies with wrapping arithmetic (the product wraps to 8).
        let wrap = text.replace("size: 256,", "size: 27905,").replace(
            "comm_grid:  # outermost level first; ranks row-major, last level fastest\n",
            "comm_grid:\n  - {size: 429509837, bandwidth: 50 GB/s, latency_us: 10, efficiency: 0.7, topology: clos}\n  - {size: 384773, bandwidth: 50 GB/s, latency_us: 10, efficiency: 0.7, topology: clos}\n",
        );
        let e = DeviceRegistry::builtin().add_text(&wrap, "g.yaml").unwrap_err().to_string();
        assert!(e.contains("at most 1048576"), "{e}");
        // Fails if an empty list of profiles is accepted.
        assert!(DeviceRegistry::builtin().add_text("[]\n", "e.yaml").unwrap_err().to_string().contains("no device profile"));
    }

    #[test]
    fn unknown_name_lists_valid_ones() {
        let reg = DeviceRegistry::builtin();
        let e = reg.get("TEST_DEVIC").unwrap_err().to_string();
        assert!(e.contains("valid names: TEST_DEVICE, ATLAS_800_A2_376T_64G"), "{e}");
        assert!(e.contains("did you mean TEST_DEVICE"), "{e}");
    }

    #[test]
    fn custom_profile_errors_name_the_field() {
        let mut reg = DeviceRegistry::builtin();
        let text = include_str!("../../profiles/devices/TEST_DEVICE.yaml").replace("name: TEST_DEVICE", "name: MY_DEV");
        assert_eq!(reg.add_text(&text, "my.yaml").unwrap(), vec!["MY_DEV"]);
        let bad = text.replace("name: MY_DEV", "name: BAD").replace("compute_efficiency: 0.7", "compute_efficiency: 1.7");
        let e = reg.add_text(&bad, "bad.yaml").unwrap_err().to_string();
        assert!(e.contains("compute_efficiency") && e.contains("1.7") && e.contains("(0, 1]"), "{e}");
        let unknown_key = text.replace("name: MY_DEV", "name: X\nflops: 3");
        let e = reg.add_text(&unknown_key, "k.yaml").unwrap_err().to_string();
        assert!(e.contains("unknown field `flops`") && e.contains("line 3"), "{e}");
        let e = reg.add_text(&text, "again.yaml").unwrap_err().to_string();
        assert!(e.contains("already defined"), "{e}");
    }
}
