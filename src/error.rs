//! The library's error: what was rejected (the flag or file key, the value, what is allowed)
//! and whether it is the user's mistake ([`ErrorKind::Usage`], exit code 2) or a failure while
//! running ([`ErrorKind::Runtime`], exit code 1).
//!
//! Each variant's `Display` is the message printed after `error: `. Lower layers have their
//! own errors ([`DeviceError`], [`ModelError`], [`TraceError`], [`LengthError`],
//! [`ChoiceError`]); they are wrapped here unchanged.

use crate::hardware::DeviceError;
use crate::model::ModelError;
use crate::quant::ChoiceError;
use crate::workload::arrival::TraceError;
use crate::workload::LengthError;
use std::fmt;

/// Whose fault an error is; decides the exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The command line, a scenario or an input file is wrong: exit code 2.
    Usage,
    /// Running failed (writing the report, reading the terminal): exit code 1.
    Runtime,
}

impl ErrorKind {
    pub fn exit_code(self) -> u8 {
        match self {
            ErrorKind::Usage => 2,
            ErrorKind::Runtime => 1,
        }
    }
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    /// `field` does not accept `value`; `allowed` says what it accepts.
    #[error("{field} {value}: {allowed}")]
    InvalidValue { field: String, value: String, allowed: String },
    /// `field`'s value is not one of its choices.
    #[error("{field}: {source}")]
    Choice { field: String, source: ChoiceError },
    /// `field`'s `value` is refused by a rule that involves other flags, the model or the
    /// devices; `message` explains it in full.
    #[error("{message}")]
    Rejected { field: String, value: String, message: String },
    /// A required flag is missing.
    #[error("{message}")]
    Missing { field: String, message: String },
    /// `field` cannot be combined with `other`.
    #[error("{message}")]
    Conflict { field: String, other: String, message: String },
    /// `field` was given without `needs`, which it depends on.
    #[error("{message}")]
    Requires { field: String, needs: String, message: String },
    /// A device profile file or name.
    #[error(transparent)]
    Device(#[from] DeviceError),
    /// A model id or config.
    #[error(transparent)]
    Model(#[from] ModelError),
    /// An arrival trace file.
    #[error(transparent)]
    Trace(#[from] TraceError),
    /// A length-distribution file.
    #[error(transparent)]
    Lengths(#[from] LengthError),
    /// The search space holds no runnable layout.
    #[error("{0}")]
    NoLayout(String),
    /// The argument parser rejected the command line (its first line).
    #[error("{0}")]
    Args(String),
    /// A scenario file's own structure (`line` of the offending key when known).
    #[error("--scenario {path}: {}{message}", line_prefix(*line))]
    ScenarioFile { path: String, line: Option<usize>, message: String },
    /// An error in the run a scenario describes, pointed at the scenario key (`key`, on `line`)
    /// of the flag it names.
    #[error("--scenario {path}: {}", Located(key.as_deref(), *line, source))]
    Scenario { path: String, key: Option<String>, line: Option<usize>, source: Box<Error> },
    /// The guided session could not complete (`--interactive: …`).
    #[error("--interactive: {0}")]
    Interactive(String),
    /// Reading or writing failed: `what` names the flag (and file) and the action.
    #[error("{what}: {message}")]
    Io { what: String, message: String },
    /// Rendering the report failed.
    #[error("{0}")]
    Output(String),
    /// A measured-results file of `calibrate` (names the file, row and field).
    #[error(transparent)]
    Calibrate(#[from] crate::calibrate::CalibrateError),
    /// The search ran out of its simulation work budget: the report is incomplete.
    #[error("{0}")]
    WorkBudget(String),
    /// A sizing run (`--target-request-rate`, `--target-concurrency`) found no deployment
    /// within `--num-devices` that serves the target: the most it serves.
    #[error("{0}")]
    Unserved(String),
    /// `throughput-optimizer merge`: a shard file that cannot be read or does not belong.
    #[error("merge {file}: {message}")]
    Merge { file: String, message: String },
    /// The caller stopped the run before it finished (an embedder's Ctrl-C; the binary's
    /// Ctrl-C ends the process instead).
    #[error("the run was stopped before it finished")]
    Stopped,
}

impl From<crate::report::ExportError> for Error {
    /// A file that cannot be written keeps its flag and path; a format that cannot be produced
    /// keeps its message. Both are runtime failures.
    fn from(e: crate::report::ExportError) -> Self {
        match e {
            crate::report::ExportError::Write { flag, path, source } => {
                Error::Io { what: format!("{flag} {}: cannot write", path.display()), message: source.to_string() }
            }
            // The user's --emit choice cannot run the plan: a usage error, like a rejected flag.
            crate::report::ExportError::Launch { engine, message } => Error::Rejected { field: "--emit".into(), value: engine, message },
            crate::report::ExportError::Stdout(e) => Error::Io { what: "stdout: cannot write the report".into(), message: e.to_string() },
            other => Error::Output(other.to_string()),
        }
    }
}

fn line_prefix(line: Option<usize>) -> String {
    line.map(|l| format!("line {l}: ")).unwrap_or_default()
}

struct Located<'a>(Option<&'a str>, Option<usize>, &'a Error);

impl fmt::Display for Located<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.0, self.1) {
            (Some(key), Some(line)) => write!(f, "line {line}: field `{key}`: {}", self.2),
            _ => write!(f, "{}", self.2),
        }
    }
}

impl Error {
    pub fn invalid(field: &str, value: impl ToString, allowed: impl Into<String>) -> Self {
        Error::InvalidValue { field: field.to_string(), value: value.to_string(), allowed: allowed.into() }
    }
    pub fn choice(field: &str, source: ChoiceError) -> Self {
        Error::Choice { field: field.to_string(), source }
    }
    pub fn rejected(field: &str, value: impl ToString, message: impl Into<String>) -> Self {
        Error::Rejected { field: field.to_string(), value: value.to_string(), message: message.into() }
    }
    pub fn missing(field: &str, message: impl Into<String>) -> Self {
        Error::Missing { field: field.to_string(), message: message.into() }
    }
    pub fn conflict(field: &str, other: &str, message: impl Into<String>) -> Self {
        Error::Conflict { field: field.to_string(), other: other.to_string(), message: message.into() }
    }
    pub fn requires(field: &str, needs: &str, message: impl Into<String>) -> Self {
        Error::Requires { field: field.to_string(), needs: needs.to_string(), message: message.into() }
    }

    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Io { .. } | Error::Output(_) | Error::WorkBudget(_) | Error::Unserved(_) | Error::Stopped => ErrorKind::Runtime,
            Error::Scenario { source, .. } => source.kind(),
            _ => ErrorKind::Usage,
        }
    }

    /// The process exit code: 2 for usage errors, 1 for runtime failures.
    pub fn exit_code(&self) -> u8 {
        self.kind().exit_code()
    }

    /// The flag (or `MODEL_ID`) the error is about, when it names one.
    pub fn field(&self) -> Option<&str> {
        match self {
            Error::InvalidValue { field, .. }
            | Error::Choice { field, .. }
            | Error::Rejected { field, .. }
            | Error::Missing { field, .. }
            | Error::Conflict { field, .. }
            | Error::Requires { field, .. } => Some(field),
            Error::Scenario { source, .. } => source.field(),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_map_to_exit_codes() {
        // Fails if Usage and Runtime swap codes in ErrorKind::exit_code.
        assert_eq!(ErrorKind::Usage.exit_code(), 2);
        assert_eq!(ErrorKind::Runtime.exit_code(), 1);
        // Fails if Io is classified as Usage in Error::kind.
        assert_eq!(Error::Io { what: "--output-file x: cannot write".into(), message: "denied".into() }.exit_code(), 1);
        assert_eq!(Error::Output("bad".into()).exit_code(), 1);
        // Fails if a stopped run is classified as the user's mistake.
        assert_eq!(Error::Stopped.exit_code(), 1);
        assert_eq!(Error::invalid("--jobs", 2000, "at most 1024").exit_code(), 2);
        // Fails if a scenario error takes Usage instead of its source's kind.
        let located = Error::Scenario { path: "s.yaml".into(), key: None, line: None, source: Box::new(Error::Output("x".into())) };
        assert_eq!(located.kind(), ErrorKind::Runtime);
    }

    #[test]
    fn messages_keep_their_form() {
        // Fails if the InvalidValue template drops the colon.
        assert_eq!(Error::invalid("--jobs", 2000, "at most 1024").to_string(), "--jobs 2000: at most 1024");
        let located = Error::Scenario {
            path: "s.yaml".into(),
            key: Some("jobs".into()),
            line: Some(3),
            source: Box::new(Error::invalid("--jobs", 2000, "at most 1024")),
        };
        // Fails if Located forgets the line or the key.
        assert_eq!(located.to_string(), "--scenario s.yaml: line 3: field `jobs`: --jobs 2000: at most 1024");
        assert_eq!(located.field(), Some("--jobs"));
        let file = Error::ScenarioFile { path: "s.yaml".into(), line: Some(7), message: "unknown field `x`".into() };
        assert_eq!(file.to_string(), "--scenario s.yaml: line 7: unknown field `x`");
    }
}
