//! `--output json`: the [`Report`] as one JSON document (schema in docs/user-guide.md).

use crate::outcome::Report;

pub fn render(report: &Report) -> Result<String, super::ExportError> {
    Ok(serde_json::to_string_pretty(report)? + "\n")
}
