//! The flags each engine version defines, as kept in `profiles/engines/flags/<engine>-<version>.txt`
//! (embedded): one section per program (`[vllm serve]`), `[env]` for environment variables,
//! `[options]` for the keys of the option files. Every command an emitter writes is checked
//! against its engine's list before it is written, so that no emitted flag is one the version
//! does not have; the lists name the sources they were read from.

use super::Process;
use crate::plan::LaunchEngine;

const VLLM: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/profiles/engines/flags/vllm-0.11.txt"));
const SGLANG: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/profiles/engines/flags/sglang-0.5.txt"));
const TRTLLM: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/profiles/engines/flags/trtllm-1.1.txt"));

/// One engine version's flags.
#[derive(Debug, Clone, PartialEq)]
pub struct FlagList {
    /// The engine and version the list is for (`vLLM 0.11`).
    pub version: &'static str,
    /// The list's file under `profiles/engines/flags/`.
    pub file: &'static str,
    sections: Vec<(String, Vec<String>)>,
}

impl FlagList {
    /// The flag list of an engine's emitted version.
    pub fn of(engine: LaunchEngine) -> FlagList {
        let (version, file, text) = match engine {
            LaunchEngine::Vllm => ("vLLM 0.11", "vllm-0.11.txt", VLLM),
            LaunchEngine::Sglang => ("SGLang 0.5", "sglang-0.5.txt", SGLANG),
            LaunchEngine::Trtllm => ("TensorRT-LLM 1.1", "trtllm-1.1.txt", TRTLLM),
        };
        FlagList { version, file, sections: parse(text) }
    }

    /// Whether `section` (a program, `env` or `options`) has `name`.
    pub fn knows(&self, section: &str, name: &str) -> bool {
        self.sections.iter().any(|(s, names)| s == section && names.iter().any(|n| n == name))
    }

    /// The section of a program as written in a command: `python -m sglang.launch_server` is
    /// `sglang.launch_server`, a script path its file name.
    pub fn section_of(program: &str) -> &str {
        let p = program.strip_prefix("python -m ").or_else(|| program.strip_prefix("python ")).unwrap_or(program);
        p.rsplit('/').next().unwrap_or(p)
    }

    /// Every flag and environment variable of `p` that this version does not define.
    pub fn unknown_in(&self, p: &Process) -> Vec<String> {
        let mut bad: Vec<String> = p.env.iter().filter(|(k, _)| !self.knows("env", k)).map(|(k, _)| k.clone()).collect();
        let section = Self::section_of(p.program);
        bad.extend(p.args.iter().filter(|w| is_flag(w) && !self.knows(section, w)).cloned());
        if let Some(mpi) = p.launcher.first() {
            bad.extend(p.launcher.iter().filter(|w| is_flag(w) && !self.knows(mpi, w)).cloned());
        }
        bad
    }

    /// [`Self::unknown_in`] as a refusal naming the version and the list.
    pub fn check(&self, p: &Process) -> Result<(), String> {
        let bad = self.unknown_in(p);
        if bad.is_empty() {
            return Ok(());
        }
        Err(format!("{} has no {} (profiles/engines/flags/{}); the commands would not start", self.version, bad.join(", "), self.file))
    }
}

/// A flag word: a dash then a letter (`-1` is a value).
pub fn is_flag(w: &str) -> bool {
    w.starts_with('-') && w.chars().nth(1).is_some_and(|c| c.is_ascii_alphabetic() || c == '-')
}

fn parse(text: &str) -> Vec<(String, Vec<String>)> {
    let mut sections: Vec<(String, Vec<String>)> = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            sections.push((name.to_string(), Vec::new()));
        } else if let Some((_, names)) = sections.last_mut() {
            names.push(line.to_string());
        }
    }
    sections
}
