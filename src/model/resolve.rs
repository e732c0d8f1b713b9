//! Turning a `MODEL_ID` into a [`ModelArch`]: catalog, local directory, config path, HF cache.

use super::{catalog, hf, ModelArch};
use std::path::{Path, PathBuf};

/// Where a model's architecture came from (shown in reports).
#[derive(Debug, Clone, PartialEq)]
pub enum ModelSource {
    Catalog,
    File(PathBuf),
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ModelError {
    #[error("model `{id}` was not found: it is not in the built-in catalog, not a directory with a config.json, not a config.json file, and not in the Hugging Face cache ({cache}).{hint} Run --list-models for the catalog")]
    NotFound { id: String, cache: String, hint: String },
    #[error("{path}: {message}")]
    BadConfig { path: String, message: String },
}

fn hf_cache_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Ok(h) = std::env::var("HF_HUB_CACHE") {
        dirs.push(PathBuf::from(h));
    }
    if let Ok(h) = std::env::var("HF_HOME") {
        dirs.push(PathBuf::from(h).join("hub"));
    }
    if let Ok(h) = std::env::var("HOME") {
        dirs.push(PathBuf::from(h).join(".cache/huggingface/hub"));
    }
    dirs
}

fn from_file(path: &Path, id: &str) -> Result<ModelArch, ModelError> {
    let bad = |message: String| ModelError::BadConfig { path: path.display().to_string(), message };
    let text = crate::util::read_bounded(path, crate::util::MAX_CONFIG_BYTES).map_err(|e| match e {
        crate::util::ReadError::Io(e) => bad(format!("cannot read: {e}")),
        other => bad(other.to_string()),
    })?;
    hf::parse_config(&text, id).map_err(bad)
}

/// Resolve in the documented order: catalog (exact id, case-insensitive), a directory holding
/// `config.json`, a path to a config file, then the local Hugging Face cache. Never the network.
pub fn resolve_model(id: &str) -> Result<(ModelArch, ModelSource), ModelError> {
    if let Some(m) = catalog::find(id) {
        return Ok((m, ModelSource::Catalog));
    }
    let p = Path::new(id);
    if p.is_dir() {
        let cfg = p.join("config.json");
        if cfg.is_file() {
            return from_file(&cfg, id).map(|m| (m, ModelSource::File(cfg)));
        }
    } else if p.is_file() {
        return from_file(p, id).map(|m| (m, ModelSource::File(p.to_path_buf())));
    }
    let cache_dirs = hf_cache_dirs();
    if id.contains('/') {
        let folder = format!("models--{}", id.replace('/', "--"));
        for dir in &cache_dirs {
            let snaps = dir.join(&folder).join("snapshots");
            let Ok(entries) = std::fs::read_dir(&snaps) else { continue };
            let mut configs: Vec<PathBuf> = entries.flatten().map(|e| e.path().join("config.json")).filter(|c| c.is_file()).collect();
            configs.sort();
            if let Some(cfg) = configs.last() {
                return from_file(cfg, id).map(|m| (m, ModelSource::File(cfg.clone())));
            }
        }
    }
    let ids = catalog::ids();
    let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    let close = crate::util::closest(id, &refs, 3);
    let hint = if close.is_empty() { String::new() } else { format!(" Closest catalog names: {}.", close.join(", ")) };
    Err(ModelError::NotFound {
        id: id.to_string(),
        cache: cache_dirs.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(", "),
        hint,
    })
}
