//! What can be wrong with measured results: each error names the file, and where it applies
//! the row (1 = the first run after the CSV header; a JSON file holds one run, row 1) and the
//! field (CSV column or JSON key).

/// A measured-results file that cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CalibrateError {
    /// The file cannot be read, or is not CSV / JSON at all.
    #[error("{file}: {message}")]
    Read { file: String, message: String },
    /// The CSV header lacks a required column.
    #[error("{file}: missing column `{column}` (the header must name {expected})")]
    MissingColumn { file: String, column: String, expected: String },
    /// One field of one run is missing, not a number, out of range or unknown.
    #[error("{file}: row {row}, field `{field}`: {message}")]
    Field { file: String, row: usize, field: String, message: String },
    /// One run names a model, GPU or engine the simulator does not have: a well-formed run the
    /// tool cannot predict. Reading many files drops such a run and reports it
    /// ([`super::read_files`]); reading one CSV text refuses it ([`super::read_csv`]).
    #[error("{file}: row {row}, field `{field}`: {message}")]
    Unsupported { file: String, row: usize, field: String, message: String },
    /// The files hold no run at all.
    #[error("{files}: no measured runs")]
    Empty { files: String },
    /// Every run read was dropped by the hygiene checks (`report` lists them).
    #[error("none of the {read} measured runs is left to predict\n{report}")]
    AllDropped { read: usize, report: String },
}

impl CalibrateError {
    pub fn field(file: &str, row: usize, field: &str, message: impl Into<String>) -> Self {
        CalibrateError::Field { file: file.to_string(), row, field: field.to_string(), message: message.into() }
    }

    pub fn unsupported(file: &str, row: usize, field: &str, message: impl Into<String>) -> Self {
        CalibrateError::Unsupported { file: file.to_string(), row, field: field.to_string(), message: message.into() }
    }
}
