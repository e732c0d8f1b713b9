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

/// Parse a YAML document into `T`. A value rejected by its own parser (a unit, an enum name)
/// is reported by serde_yaml at the enclosing mapping; when the message quotes the value in
/// backticks, the error is pointed at the line that holds it and names its field.
pub fn from_str<T: DeserializeOwned>(text: &str) -> Result<T, YamlError> {
    check_nesting(text)?;
    serde_yaml::from_str(text).map_err(|e| {
        let mut err = YamlError::from(e);
        if let Some((line, key)) = quoted_value(&err.message).and_then(|v| line_of_value(text, v)) {
            err.line = Some(line);
            err.column = None;
            if let Some(k) = key {
                // serde_yaml sometimes starts its message with the path ("admissions_per_step:
                // invalid type …"): the field is named once.
                let own = err.message.strip_prefix(&format!("{k}: ")).unwrap_or(&err.message).to_string();
                err.message = format!("field `{k}`: {own}");
            }
        }
        err
    })
}

/// Deepest flow nesting (`[`, `{`) a document may have; the parser's time grows with the
/// square of the depth (100 000 levels took half a minute before its own recursion limit).
pub const MAX_NESTING: usize = 64;
/// Deepest indentation, in columns, of a block-style line.
pub const MAX_INDENT: usize = 512;

/// Refuse documents nested deeper than [`MAX_NESTING`] brackets or indented more than
/// [`MAX_INDENT`] columns, in one linear pass before the parser sees them. Quoted text and
/// comments are skipped.
fn check_nesting(text: &str) -> Result<(), YamlError> {
    let mut depth = 0usize;
    let mut quote: Option<char> = None;
    for (i, line) in text.lines().enumerate() {
        let too_deep = |column: usize, message: String| YamlError { line: Some(i + 1), column: Some(column), message };
        let indent = line.len() - line.trim_start_matches(' ').len();
        if indent > MAX_INDENT && quote.is_none() {
            return Err(too_deep(indent + 1, format!("indented {indent} columns; at most {MAX_INDENT} are read")));
        }
        let mut prev = ' ';
        for (col, c) in line.chars().enumerate() {
            match (quote, c) {
                (Some(q), c) if c == q => quote = None,
                (Some(_), _) => {}
                (None, '#') if prev.is_whitespace() => break,
                (None, '\'' | '"') if depth > 0 || prev.is_whitespace() || prev == ':' => quote = Some(c),
                (None, '[' | '{') => {
                    depth += 1;
                    if depth > MAX_NESTING {
                        return Err(too_deep(col + 1, format!("nested more than {MAX_NESTING} levels deep")));
                    }
                }
                (None, ']' | '}') => depth = depth.saturating_sub(1),
                _ => {}
            }
            prev = c;
        }
    }
    Ok(())
}

/// The first backticked text of a message.
fn quoted_value(message: &str) -> Option<&str> {
    let start = message.find('`')? + 1;
    let len = message[start..].find('`')?;
    Some(&message[start..start + len]).filter(|v| !v.is_empty())
}

/// The 1-based line where `value` is written as a value, and the key it belongs to.
fn line_of_value(text: &str, value: &str) -> Option<(usize, Option<String>)> {
    text.lines().enumerate().find_map(|(i, l)| {
        let code = l.split(" #").next().unwrap_or(l);
        let at = code.find(value)?;
        let before = code[..at].trim_end().strip_suffix(':')?;
        let key = before.rsplit(|c: char| c == '{' || c == ',' || c == '-' || c.is_whitespace()).next().unwrap_or("").trim();
        Some((i + 1, (!key.is_empty()).then(|| key.trim_matches('"').to_string())))
    })
}

/// Parse a YAML document into an untyped value (used to find the line of a field).
pub fn value_from_str(text: &str) -> Result<serde_yaml::Value, YamlError> {
    check_nesting(text)?;
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

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Link {
        name: String,
        bandwidth: crate::units::Bandwidth,
    }

    #[test]
    fn a_rejected_value_is_pointed_at_its_line_and_field() {
        let e = from_str::<Link>("name: x\nbandwidth: 2.4 TiBps\n").unwrap_err();
        assert_eq!(e.line, Some(2));
        assert!(e.to_string().starts_with("line 2: field `bandwidth`: `2.4 TiBps` has no bandwidth unit"), "{e}");
        let e = from_str::<Vec<Link>>("- {name: a, bandwidth: 1 GB/s}\n- {name: b, bandwidth: 9 GBs}\n").unwrap_err();
        assert_eq!(e.line, Some(2), "{e}");
        assert!(e.to_string().contains("field `bandwidth`"), "{e}");
        // A message that starts with the field's path names it once (fails without the
        // `strip_prefix` in `from_str`: "field `count`: count: invalid type …").
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        struct Counted {
            count: u32,
        }
        let e = from_str::<Counted>("count: -1\n").unwrap_err().to_string();
        assert_eq!(e.matches("count").count(), 1, "{e}");
    }
    #[test]
    fn deep_nesting_is_refused_before_parsing() {
        // Fails if check_nesting is not called: the parser would spend seconds on this.
        let deep = format!("model: {}\n", "[".repeat(100_000));
        let started = std::time::Instant::now();
        let e = value_from_str(&deep).unwrap_err();
        assert!(e.to_string().contains("nested more than 64 levels"), "{e}");
        assert!(started.elapsed().as_secs_f64() < 1.0);
        // Brackets inside quotes or comments do not count.
        assert!(value_from_str(&format!("a: '{}' # {}\n", "[".repeat(100), "{".repeat(100))).is_ok());
    }

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
