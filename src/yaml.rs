//! The only module that touches the YAML library.
//!
//! `serde_yaml` is archived upstream; keeping every call behind these three functions means a
//! drop-in fork (serde_norway, serde_yaml_ng) is a one-line change here.

use serde::de::DeserializeOwned;
use serde::Serialize;

/// A YAML document that could not be read into the expected shape, with the position the
/// parser reported (1-based line and column) when it knows one.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}{message}", location_prefix(*.line, *.column))]
pub struct YamlError {
    pub line: Option<usize>,
    pub column: Option<usize>,
    pub message: String,
}

fn location_prefix(line: Option<usize>, column: Option<usize>) -> String {
    match (line, column) {
        (Some(l), Some(c)) => format!("line {l}, column {c}: "),
        (Some(l), None) => format!("line {l}: "),
        _ => String::new(),
    }
}

impl From<serde_yaml::Error> for YamlError {
    fn from(e: serde_yaml::Error) -> Self {
        let loc = e.location();
        // serde_yaml appends " at line X column Y" to its message; the location is
        // reported separately, so strip it to avoid saying it twice.
        let mut message = e.to_string();
        if let Some(idx) = message.find(" at line ") {
            message.truncate(idx);
        }
        YamlError { line: loc.as_ref().map(|l| l.line()), column: loc.as_ref().map(|l| l.column()), message }
    }
}

/// Parse a YAML document into `T`.
pub fn from_str<T: DeserializeOwned>(text: &str) -> Result<T, YamlError> {
    serde_yaml::from_str(text).map_err(YamlError::from)
}

/// Parse a YAML document into an untyped value (used to find the line of a field).
pub fn value_from_str(text: &str) -> Result<serde_yaml::Value, YamlError> {
    serde_yaml::from_str(text).map_err(YamlError::from)
}

/// Serialize `value` as YAML.
pub fn to_string<T: Serialize>(value: &T) -> Result<String, YamlError> {
    serde_yaml::to_string(value).map_err(YamlError::from)
}

/// The 1-based line on which `key:` first appears as a mapping key (block or flow style),
/// searching from `from_line`. Used to point semantic errors (found after parsing) at a line
/// of the user's file.
pub fn line_of_key(text: &str, key: &str, from_line: usize) -> Option<usize> {
    text.lines().enumerate().skip(from_line.saturating_sub(1)).find(|(_, l)| line_has_key(l, key)).map(|(i, _)| i + 1)
}

fn line_has_key(line: &str, key: &str) -> bool {
    let code = line.split(" #").next().unwrap_or(line);
    let mut search = 0;
    while let Some(pos) = code[search..].find(key) {
        let at = search + pos;
        let before = code[..at].trim_end();
        let boundary = before.is_empty() || before.ends_with('-') || before.ends_with('{') || before.ends_with(',');
        let after = code[at + key.len()..].trim_start();
        if boundary && after.starts_with(':') {
            return true;
        }
        search = at + key.len();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn finds_keys_in_block_and_flow_style() {
        let t = "a: 1\nbins:\n  - {min_tokens: 1, max_tokens: 2}\n  - min_tokens: 3\n";
        assert_eq!(line_of_key(t, "bins", 1), Some(2));
        assert_eq!(line_of_key(t, "min_tokens", 1), Some(3));
        assert_eq!(line_of_key(t, "min_tokens", 4), Some(4));
        assert_eq!(line_of_key(t, "max_tokens", 1), Some(3));
        assert_eq!(line_of_key(t, "tokens", 1), None);
    }
}
