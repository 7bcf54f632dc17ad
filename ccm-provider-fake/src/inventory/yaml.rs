//! Reading an inventory's YAML, and the wording of its errors: every error names the file, the field path and,
//! where the parser knows it, the line and column.

use super::*;

/// A bad inventory. Every variant names the file (`file`) and, where there is one, the field path (`path`,
/// such as `instances[2].addresses[0].address`).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InventoryError {
    /// The file could not be read.
    #[error("{file}: cannot read the fake cloud inventory: {source}")]
    Read {
        /// The file.
        file: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The text is not valid YAML (or not one document).
    #[error("{file}{}: {message}", suffix(.at))]
    Syntax {
        /// The file.
        file: String,
        /// Where in the file, if known.
        at: Option<Position>,
        /// The parser's explanation.
        message: String,
    },
    /// A key the format does not have (a typo?).
    #[error("{file}: {path}: unknown field {field:?}{}; expected one of: {expected}", suffix(.at))]
    UnknownField {
        /// The file.
        file: String,
        /// The path of the mapping holding the key.
        path: String,
        /// The unknown key.
        field: String,
        /// The keys allowed there, comma separated.
        expected: String,
        /// Where in the file, if known.
        at: Option<Position>,
    },
    /// A value of the wrong type, an unknown enum value or a missing required field.
    #[error("{file}: {path}: {message}{}", suffix(.at))]
    WrongType {
        /// The file.
        file: String,
        /// The field path.
        path: String,
        /// What was wrong.
        message: String,
        /// Where in the file, if known.
        at: Option<Position>,
    },
    /// An address of type `InternalIP`/`ExternalIP` that is not an IP address.
    #[error("{file}: {path}: invalid IP address {value:?}")]
    InvalidIp {
        /// The file.
        file: String,
        /// The field path.
        path: String,
        /// The value.
        value: String,
    },
    /// A CIDR that does not parse, or has host bits set.
    #[error("{file}: {path}: invalid CIDR {value:?}: {reason}")]
    InvalidCidr {
        /// The file.
        file: String,
        /// The field path.
        path: String,
        /// The value.
        value: String,
        /// Why.
        reason: String,
    },
    /// A providerID that is not `<providerName>://<id>`.
    #[error("{file}: {path}: invalid provider ID {value:?}: {reason}")]
    InvalidProviderId {
        /// The file.
        file: String,
        /// The field path.
        path: String,
        /// The value.
        value: String,
        /// Why.
        reason: String,
    },
    /// Two entries with the same identity (instance name, providerID, route CIDR).
    #[error("{file}: {path}: duplicate {what} {value:?}, already used at {first}")]
    Duplicate {
        /// The file.
        file: String,
        /// The field path of the second occurrence.
        path: String,
        /// What is duplicated (`instance name`, ...).
        what: &'static str,
        /// The value.
        value: String,
        /// The field path of the first occurrence.
        first: String,
    },
    /// An operation name (in `faults` or `latency`) the fake cloud does not have.
    #[error("{file}: {path}: unknown operation {value:?}; known operations: {known}")]
    UnknownOperation {
        /// The file.
        file: String,
        /// The field path.
        path: String,
        /// The value.
        value: String,
        /// The operation names, comma separated.
        known: String,
    },
    /// Any other invalid value.
    #[error("{file}: {path}: {message}")]
    Invalid {
        /// The file.
        file: String,
        /// The field path.
        path: String,
        /// What is wrong and how to fix it.
        message: String,
    },
}

/// A 1-based line and column in the inventory file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    /// The line, from 1.
    pub line: u64,
    /// The column, from 1.
    pub column: u64,
}

impl std::fmt::Display for Position {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}, column {}", self.line, self.column)
    }
}

fn suffix(at: &Option<Position>) -> String {
    at.map(|p| format!(" ({p})")).unwrap_or_default()
}

impl InventoryError {
    /// The file (or origin) the error is about.
    pub fn file(&self) -> &str {
        match self {
            InventoryError::Read { file, .. }
            | InventoryError::Syntax { file, .. }
            | InventoryError::UnknownField { file, .. }
            | InventoryError::WrongType { file, .. }
            | InventoryError::InvalidIp { file, .. }
            | InventoryError::InvalidCidr { file, .. }
            | InventoryError::InvalidProviderId { file, .. }
            | InventoryError::Duplicate { file, .. }
            | InventoryError::UnknownOperation { file, .. }
            | InventoryError::Invalid { file, .. } => file,
        }
    }

    /// The field path the error is about, if any.
    pub fn path(&self) -> Option<&str> {
        match self {
            InventoryError::Read { .. } | InventoryError::Syntax { .. } => None,
            InventoryError::UnknownField { path, .. }
            | InventoryError::WrongType { path, .. }
            | InventoryError::InvalidIp { path, .. }
            | InventoryError::InvalidCidr { path, .. }
            | InventoryError::InvalidProviderId { path, .. }
            | InventoryError::Duplicate { path, .. }
            | InventoryError::UnknownOperation { path, .. }
            | InventoryError::Invalid { path, .. } => Some(path),
        }
    }
}

/// The root path, as shown in messages.
const ROOT: &str = "(top level)";

/// True if the text has no YAML content (only blanks, comments and document markers).
fn is_blank(yaml: &str) -> bool {
    yaml.lines()
        .map(str::trim)
        .all(|l| l.is_empty() || l.starts_with('#') || l == "---" || l == "...")
}

fn location(err: &serde_saphyr::Error) -> Option<Position> {
    err.location()
        .filter(|loc| loc.line() > 0)
        .map(|loc| Position {
            line: loc.line(),
            column: loc.column(),
        })
}

/// `message` without a trailing ` at line N, column M` (the position is shown separately).
fn without_location(message: &str) -> String {
    if let Some((head, tail)) = message.rsplit_once(" at line ") {
        let mut parts = tail.splitn(2, ", column ");
        let numeric = |s: Option<&str>| {
            s.is_some_and(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
        };
        if numeric(parts.next()) && numeric(parts.next()) {
            return head.to_owned();
        }
    }
    message.to_owned()
}

/// The parser's message in the words of the inventory format, without its position.
fn humanize(message: &str) -> String {
    let message = without_location(message);
    match message.as_str() {
        "expected sequence start" => "expected a list".to_owned(),
        "expected mapping start" => "expected a mapping of keys to values".to_owned(),
        "invalid boolean" => "expected true or false".to_owned(),
        _ => message,
    }
}

/// Turn a deserialization error at `path` into an [`InventoryError`].
fn classify(file: &str, path: String, err: &serde_saphyr::Error) -> InventoryError {
    let at = location(err);
    let file = file.to_owned();
    let path = if path.is_empty() || path == "." {
        ROOT.to_owned()
    } else {
        path
    };
    match err.without_snippet() {
        serde_saphyr::Error::SerdeUnknownField {
            field, expected, ..
        } => {
            // serde_path_to_error reports the unknown key as the last path segment; point at its mapping
            let parent = match path.strip_suffix(field.as_str()) {
                Some(p) => p.trim_end_matches('.').to_owned(),
                None => path.clone(),
            };
            InventoryError::UnknownField {
                file,
                path: if parent.is_empty() {
                    ROOT.to_owned()
                } else {
                    parent
                },
                field: field.clone(),
                expected: expected.join(", "),
                at,
            }
        }
        serde_saphyr::Error::SerdeInvalidType {
            unexpected,
            expected,
            ..
        }
        | serde_saphyr::Error::SerdeInvalidValue {
            unexpected,
            expected,
            ..
        } => InventoryError::WrongType {
            file,
            path,
            message: format!("expected {expected}, found {unexpected}"),
            at,
        },
        serde_saphyr::Error::SerdeUnknownVariant {
            variant, expected, ..
        } => InventoryError::WrongType {
            file,
            path,
            message: format!(
                "unknown value {variant:?}; expected one of: {}",
                expected.join(", ")
            ),
            at,
        },
        serde_saphyr::Error::SerdeMissingField { field, .. } => InventoryError::WrongType {
            file,
            path,
            message: format!("missing required field {field:?}"),
            at,
        },
        serde_saphyr::Error::MultipleDocuments { .. } => InventoryError::Syntax {
            file,
            at,
            message: "the inventory must be a single YAML document; remove the extra `---` section"
                .to_owned(),
        },
        other if path != ROOT => InventoryError::WrongType {
            file,
            path,
            message: humanize(&other.to_string()),
            at,
        },
        other => InventoryError::Syntax {
            file,
            at,
            message: humanize(&other.to_string()),
        },
    }
}

impl Inventory {
    /// Parse an inventory from YAML; `origin` (usually the file name) prefixes every error. Unknown keys and
    /// wrong types are errors; values (IPs, CIDRs, providerIDs, operation names) are checked by
    /// [`FakeCloud::from_inventory`](crate::FakeCloud::from_inventory).
    pub fn from_yaml_str(yaml: &str, origin: &str) -> Result<Inventory, InventoryError> {
        if is_blank(yaml) {
            return Ok(Inventory::default());
        }
        let mut options = serde_saphyr::Options::default();
        options.with_snippet = false;
        // serde_path_to_error knows where a deserialization error happened; hand the inner error back to the
        // parser (so it stops cleanly) and keep the path aside.
        let mut failed_at: Option<String> = None;
        let parsed = serde_saphyr::with_deserializer_from_str_with_options(yaml, options, |de| {
            serde_path_to_error::deserialize::<_, Inventory>(de).map_err(|err| {
                failed_at = Some(err.path().to_string());
                err.into_inner()
            })
        });
        parsed.map_err(|err| classify(origin, failed_at.unwrap_or_default(), &err))
    }
}
