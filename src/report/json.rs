//! `--output json`: the [`Report`] as one JSON document (schema in docs/user-guide.md).

use super::Report;

pub fn render(report: &Report) -> Result<String, String> {
    serde_json::to_string_pretty(report).map(|s| s + "\n").map_err(|e| format!("cannot serialize the report: {e}"))
}
