//! Scenario files: a whole run in YAML. Keys are the command line's long flags in snake_case
//! (`tpot_limits: 50`, `tp_sizes: [1, 2]`, `compile: true`), plus `model` and an optional
//! `name` and `description`. A scenario is turned into the same raw arguments the command line
//! produces, so every validation rule applies unchanged; errors point at the scenario's file,
//! line and key.

use super::args::RawArgs;
use crate::error::Error as PlanError;
use crate::yaml;
use clap::{CommandFactory, Parser};
use serde_yaml::Value;
use std::path::Path;

/// Keys that describe a scenario rather than a flag.
const META: [&str; 3] = ["name", "description", "model"];
/// Flags a scenario may not set (they are actions, not parts of a run).
const FORBIDDEN: [&str; 8] = ["scenario", "list_devices", "list_models", "show_model", "help", "version", "model_id", "interactive"];

fn err(path: &str, line: Option<usize>, message: String) -> PlanError {
    PlanError::ScenarioFile { path: path.to_string(), line, message }
}

/// Every long flag of the command line, snake_case.
fn known_keys() -> Vec<String> {
    // Each flag's long name and its aliases (`devices` for `--device`), as the command line
    // takes them.
    RawArgs::command()
        .get_arguments()
        .flat_map(|a| {
            a.get_long().into_iter().chain(a.get_all_aliases().unwrap_or_default()).map(|l| l.replace('-', "_")).collect::<Vec<_>>()
        })
        .collect()
}

fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// Keys whose values may name input files; relative paths resolve against the scenario's
/// directory.
const PATH_KEYS: [&str; 7] = ["input_length", "length_distribution", "arrival", "device_file", "model", "calibration", "device_hour_cost"];

/// `value` resolved against `base` when it is a relative path to an existing file there.
fn resolve(value: String, base: Option<&Path>) -> String {
    match base {
        Some(dir) if !value.is_empty() && Path::new(&value).is_relative() && dir.join(&value).exists() => {
            dir.join(&value).display().to_string()
        }
        _ => value,
    }
}

/// The argv a scenario stands for.
pub fn to_argv(text: &str, path: &str) -> Result<Vec<String>, PlanError> {
    to_argv_in(text, path, None, &[])
}

/// [`to_argv`], resolving input files against `base` and leaving out the keys in `skip` (the
/// command line gives them instead).
pub fn to_argv_in(text: &str, path: &str, base: Option<&Path>, skip: &[String]) -> Result<Vec<String>, PlanError> {
    let doc = yaml::value_from_str(text).map_err(|e| err(path, None, e.to_string()))?;
    let Value::Mapping(map) = doc else {
        return Err(err(path, None, "the file must be a mapping of keys such as `model:` and `num_devices:`".into()));
    };
    let known = known_keys();
    let line = |key: &str| yaml::line_of_key(text, key, 1);
    let mut argv = vec!["throughput-optimizer".to_string()];
    let mut model = None;
    for (k, v) in &map {
        let Some(key) = k.as_str() else {
            return Err(err(path, None, format!("keys must be strings, found {k:?}")));
        };
        if META.contains(&key) {
            if key == "model" {
                let m = scalar(v).ok_or_else(|| err(path, line(key), "field `model` must be a model id or path".into()))?;
                model = Some(resolve(m, base));
            } else if scalar(v).is_none() {
                return Err(err(path, line(key), format!("field `{key}` must be text")));
            }
            continue;
        }
        if FORBIDDEN.contains(&key) {
            return Err(err(path, line(key), format!("field `{key}` cannot be set in a scenario")));
        }
        if !known.iter().any(|k| k == key) {
            let refs: Vec<&str> = known.iter().map(String::as_str).collect();
            let close = crate::util::closest(key, &refs, 3);
            let hint = if close.is_empty() { String::new() } else { format!(" (did you mean {}?)", close.join(", ")) };
            return Err(err(path, line(key), format!("unknown field `{key}`{hint}")));
        }
        if skip.iter().any(|k| k == key) {
            continue;
        }
        let flag = format!("--{}", key.replace('_', "-"));
        let fix = |x: String| if PATH_KEYS.contains(&key) { resolve(x, base) } else { x };
        // Values are data: each is attached to its flag (`--flag=value`), so the parser never
        // reads a value such as `--list-devices` as a flag of its own.
        match v {
            Value::Null => {}
            Value::Bool(false) => {}
            Value::Bool(true) => argv.push(flag),
            Value::Sequence(items) => {
                if items.is_empty() {
                    argv.push(flag.clone());
                }
                for it in items {
                    let item =
                        scalar(it).ok_or_else(|| err(path, line(key), format!("field `{key}`: list items must be numbers or text")))?;
                    argv.push(format!("{flag}={}", fix(item)));
                }
            }
            other => {
                let value = scalar(other).ok_or_else(|| err(path, line(key), format!("field `{key}` must be a value or a list")))?;
                argv.push(format!("{flag}={}", fix(value)));
            }
        }
    }
    let Some(model) = model else {
        return Err(err(path, None, "field `model` is required (a catalog id such as Qwen/Qwen3-32B)".into()));
    };
    argv.insert(1, format!("--model-id={model}"));
    Ok(argv)
}

/// Point an error whose message names a `--flag` at the scenario key and its line.
fn locate(source: PlanError, text: &str, path: &str) -> PlanError {
    let msg = source.to_string();
    // The first `--flag` the message names that is a key of the file (a value such as
    // `--list-devices` quoted in the message is not).
    let flags = msg
        .split(|c: char| c.is_whitespace() || c == '\'' || c == '`' || c == ':' || c == '<' || c == ',' || c == '=')
        .filter(|w| w.starts_with("--") && w.len() > 2);
    let found = flags.map(|f| f.trim_start_matches('-').replace('-', "_")).find_map(|k| yaml::line_of_key(text, &k, 1).map(|l| (k, l)));
    let (key, line) = found.map_or((None, None), |(k, l)| (Some(k), Some(l)));
    PlanError::Scenario { path: path.to_string(), key, line, source: Box::new(source) }
}

/// A scenario file turned into raw arguments, with what is needed to point later errors at
/// the file and to say which of its values the command line replaced.
pub struct Loaded {
    pub raw: RawArgs,
    text: String,
    shown: String,
    overridden: Vec<String>,
}

impl Loaded {
    /// An error of the run the scenario describes, pointed at the key of the flag it names.
    pub fn locate(&self, e: PlanError) -> PlanError {
        locate(e, &self.text, &self.shown)
    }

    /// One warning per file value the command line replaced: nothing is changed silently.
    pub fn override_warnings(&self) -> Vec<String> {
        self.overridden.iter().map(|flag| format!("{flag} on the command line replaces the value in {}", self.shown)).collect()
    }
}

/// Read a scenario file into raw arguments. Flags given next to `--scenario` replace the
/// file's values for the same keys (a list flag replaces the whole list), `--device-file` adds
/// to the file's profiles, and a model given on the command line replaces the file's `model`.
pub fn load(path: &Path, cli: &RawArgs) -> Result<Loaded, PlanError> {
    let shown = path.display().to_string();
    let text = crate::util::read_bounded(path, crate::util::MAX_CONFIG_BYTES).map_err(|e| err(&shown, None, e.to_string()))?;
    let extra = cli.explicit_flags().map_err(|e| PlanError::Args(first_line(&e)))?;
    // Keys the command line gives; `device_file` is repeatable and adds instead.
    let given: Vec<String> = extra
        .iter()
        .filter_map(|t| t.to_str())
        .filter(|t| t.starts_with("--") && *t != "--device-file")
        .map(|t| t[2..].replace('-', "_"))
        .collect();
    let mut argv: Vec<std::ffi::OsString> = to_argv_in(&text, &shown, path.parent(), &given)?.into_iter().map(Into::into).collect();
    let mut overridden = Vec::new();
    if let Some(m) = cli.model_id.as_ref().or(cli.model_id_flag.as_ref()) {
        argv[1] = format!("--model-id={m}").into();
        overridden.push("MODEL_ID".to_string());
    }
    overridden.extend(given.iter().filter(|k| text_has_key(&text, k)).map(|k| format!("--{}", k.replace('_', "-"))));
    argv.extend(extra);
    let raw = RawArgs::try_parse_from(&argv).map_err(|e| locate(PlanError::Args(first_line(&e)), &text, &shown))?;
    Ok(Loaded { raw, text, shown, overridden })
}

/// A clap error's first line without its `error: ` (the caller prints its own).
pub(crate) fn first_line(e: &clap::Error) -> String {
    e.to_string().lines().next().unwrap_or("").trim_start_matches("error: ").to_string()
}

fn text_has_key(text: &str, key: &str) -> bool {
    yaml::line_of_key(text, key, 1).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "name: t\nmodel: Qwen/Qwen3-32B\nnum_devices: 8\ninput_length: 3500\noutput_length: 1500\ncompile: true\ntp_sizes: [4, 8]\ntpot_limits: 50\n";

    #[test]
    fn keys_become_flags() {
        let argv = to_argv(GOOD, "s.yaml").unwrap();
        assert_eq!(
            argv,
            [
                "throughput-optimizer",
                "--model-id=Qwen/Qwen3-32B",
                "--num-devices=8",
                "--input-length=3500",
                "--output-length=1500",
                "--compile",
                "--tp-sizes=4",
                "--tp-sizes=8",
                "--tpot-limits=50"
            ]
        );
    }

    #[test]
    fn errors_name_file_line_and_field() {
        let e = to_argv(&GOOD.replace("compile: true", "compile: true\ntpot_limit_ms: 3"), "s.yaml").unwrap_err();
        assert!(e.to_string().contains("--scenario s.yaml: line 7: unknown field `tpot_limit_ms`"), "{e}");
        assert!(matches!(e, PlanError::ScenarioFile { line: Some(7), .. }), "{e:?}");
        let e = to_argv("num_devices: 8\n", "s.yaml").unwrap_err();
        assert!(e.to_string().contains("field `model` is required"), "{e}");
        let m = locate(PlanError::Args("invalid value '-3' for '--tpot-limits <MS>': must be positive".into()), GOOD, "s.yaml");
        assert_eq!(
            m.to_string(),
            "--scenario s.yaml: line 8: field `tpot_limits`: invalid value '-3' for '--tpot-limits <MS>': must be positive"
        );
    }
}
