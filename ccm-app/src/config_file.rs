//! The YAML config file (`--config FILE`): the same settings as the flags, camelCase keys, unknown keys rejected.
//!
//! ```
//! use ccm_app::config_file::parse_config_str;
//!
//! let settings = parse_config_str("cloudProvider: fake\nkubeApiQps: 50\n", "ccm.yaml").unwrap();
//! assert_eq!(settings.cloud_provider.as_deref(), Some("fake"));
//!
//! let err = parse_config_str("kubeApiQPS: 50\n", "ccm.yaml").unwrap_err();
//! assert!(err.to_string().starts_with("invalid config file ccm.yaml: unknown key \"kubeApiQPS\""), "{err}");
//! ```

use std::path::{Path, PathBuf};

use crate::options::Settings;

/// Why the config file cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigFileError {
    /// The file cannot be read.
    #[error("cannot read config file {path}: {source}; check --config")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A key is not a known setting.
    #[error(
        "invalid config file {file}: unknown key {key:?}{location}; known keys are the camelCase names of the \
         flags (see docs/runtime.md or docs/schema/ccm-config.schema.json)"
    )]
    UnknownKey {
        /// The file (or origin).
        file: String,
        /// The unknown key.
        key: String,
        /// ` (line L, column C)` or empty.
        location: String,
    },
    /// A value has the wrong type or is invalid.
    #[error("invalid config file {file}: {field}: {message}{location}")]
    InvalidValue {
        /// The file (or origin).
        file: String,
        /// The key (path) of the value.
        field: String,
        /// What is wrong.
        message: String,
        /// ` (line L, column C)` or empty.
        location: String,
    },
    /// The file is not YAML, or not a mapping.
    #[error("invalid config file {file}: {message}{location}")]
    Syntax {
        /// The file (or origin).
        file: String,
        /// What is wrong.
        message: String,
        /// ` (line L, column C)` or empty.
        location: String,
    },
}

impl ConfigFileError {
    /// The key the error is about, if any.
    pub fn field(&self) -> Option<&str> {
        match self {
            ConfigFileError::UnknownKey { key, .. } => Some(key),
            ConfigFileError::InvalidValue { field, .. } => Some(field),
            ConfigFileError::Read { .. } | ConfigFileError::Syntax { .. } => None,
        }
    }
}

fn location(err: &serde_saphyr::Error) -> String {
    match err.location() {
        Some(loc) if loc.line() > 0 => format!(" (line {}, column {})", loc.line(), loc.column()),
        _ => String::new(),
    }
}

/// Remove a trailing ` at line L, column C` (the location is reported separately).
fn strip_location(message: &str) -> String {
    if let Some(at) = message.rfind(" at line ") {
        let tail = &message[at + " at line ".len()..];
        if tail
            .chars()
            .all(|c| c.is_ascii_digit() || c == ',' || c == ' ' || "column".contains(c))
        {
            return message[..at].to_owned();
        }
    }
    message.to_owned()
}

fn is_blank(yaml: &str) -> bool {
    yaml.lines()
        .map(str::trim)
        .all(|l| l.is_empty() || l.starts_with('#') || l == "---" || l == "...")
}

fn classify(file: &str, path: &str, err: &serde_saphyr::Error) -> ConfigFileError {
    let location = location(err);
    let file = file.to_owned();
    let field = if path.is_empty() || path == "." {
        None
    } else {
        Some(path.to_owned())
    };
    match (err.without_snippet(), field) {
        (serde_saphyr::Error::SerdeUnknownField { field: key, .. }, _) => {
            ConfigFileError::UnknownKey {
                file,
                key: key.clone(),
                location,
            }
        }
        (other, Some(field)) => ConfigFileError::InvalidValue {
            file,
            field,
            message: match other {
                serde_saphyr::Error::SerdeInvalidType {
                    unexpected,
                    expected,
                    ..
                }
                | serde_saphyr::Error::SerdeInvalidValue {
                    unexpected,
                    expected,
                    ..
                } => format!("expected {expected}, found {unexpected}"),
                serde_saphyr::Error::SerdeUnknownVariant {
                    variant, expected, ..
                } => format!(
                    "unknown value {variant:?}; expected one of: {}",
                    expected.join(", ")
                ),
                other => strip_location(&other.to_string()),
            },
            location,
        },
        (other, None) => ConfigFileError::Syntax {
            file,
            message: strip_location(&other.to_string()),
            location,
        },
    }
}

/// Parse config-file YAML; `origin` (usually the file name) is named in every error. An empty document means no
/// settings.
///
/// # Errors
///
/// [`ConfigFileError`] naming the origin, the key and, when known, the line and column.
pub fn parse_config_str(yaml: &str, origin: &str) -> Result<Settings, ConfigFileError> {
    if is_blank(yaml) {
        return Ok(Settings::default());
    }
    let mut options = serde_saphyr::Options::default();
    options.with_snippet = false;
    // A deserialization error stops reading midway, after which the reader also complains about the unread rest
    // of the input; the deserialization error is the one that explains the problem.
    let mut typed = None;
    let outer = serde_saphyr::with_deserializer_from_str_with_options(yaml, options, |de| {
        typed = Some(serde_path_to_error::deserialize::<_, Settings>(de));
        Ok(())
    });
    match (typed, outer) {
        (Some(Err(err)), _) => Err(classify(origin, &err.path().to_string(), err.inner())),
        (_, Err(err)) => Err(classify(origin, "", &err)),
        (Some(Ok(settings)), Ok(())) => Ok(settings),
        (None, Ok(())) => Ok(Settings::default()),
    }
}

/// Read and parse the config file at `path`.
///
/// # Errors
///
/// [`ConfigFileError::Read`] if the file cannot be read, otherwise as [`parse_config_str`].
pub fn load_config_file(path: &Path) -> Result<Settings, ConfigFileError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigFileError::Read {
        path: path.to_owned(),
        source,
    })?;
    parse_config_str(&text, &path.display().to_string())
}

/// The JSON schema of the config file, pretty-printed with a final newline: the content of
/// `docs/schema/ccm-config.schema.json`.
pub fn config_schema_json() -> String {
    let schema = schemars::schema_for!(Settings);
    let mut text =
        serde_json::to_string_pretty(&schema).expect("a JSON schema always serializes to JSON");
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    use crate::options::{CcmOptions, LogFormat};

    #[test]
    fn a_full_file_parses() {
        let yaml = r#"
# every kind of value
cloudProvider: fake
cloudConfig: /etc/kubernetes/inventory.yaml
kubeconfig: /etc/kubernetes/ccm.conf
kubeApiQps: 50
kubeApiBurst: 100
controllers: ["*", "-route"]
clusterCIDR: 10.244.0.0/16
allocateNodeCIDRs: false
configureCloudRoutes: false
nodeMonitorPeriod: 10s
nodeStatusUpdateFrequency: 1h30m
minResyncPeriod: 0
leaderElect: true
leaderElectLeaseDuration: 30s
securePort: 0
bindAddress: 127.0.0.1
nodeSelector: ccm=a
verbosity: 4
loggingFormat: json
"#;
        let s = parse_config_str(yaml, "ccm.yaml").unwrap();
        let o = CcmOptions::resolve(&CcmOptions::default(), &s, &Settings::default());
        assert_eq!(o.cloud_provider, "fake");
        assert_eq!(o.kube_api_qps, 50.0);
        assert_eq!(o.kube_api_burst, 100);
        assert_eq!(o.controllers, vec!["*", "-route"]);
        assert_eq!(o.cluster_cidr, "10.244.0.0/16");
        assert!(!o.configure_cloud_routes);
        assert_eq!(o.node_monitor_period, Duration::from_secs(10));
        assert_eq!(o.node_status_update_frequency, Duration::from_secs(5400));
        assert_eq!(o.min_resync_period, Duration::ZERO);
        assert_eq!(o.leader_elect_lease_duration, Duration::from_secs(30));
        assert_eq!(o.secure_port, 0);
        assert_eq!(o.bind_address.to_string(), "127.0.0.1");
        assert_eq!(o.node_selector.as_deref(), Some("ccm=a"));
        assert_eq!(o.verbosity, 4);
        assert_eq!(o.logging_format, LogFormat::Json);
    }

    #[test]
    fn locations_are_stripped_from_messages() {
        assert_eq!(
            strip_location("invalid i32 at line 1, column 15"),
            "invalid i32"
        );
        assert_eq!(strip_location("bad at line one"), "bad at line one");
        assert_eq!(strip_location("no location"), "no location");
    }

    #[test]
    fn empty_files_are_no_settings() {
        for yaml in ["", "\n", "# nothing\n", "---\n"] {
            assert_eq!(parse_config_str(yaml, "x").unwrap(), Settings::default());
        }
    }

    #[test]
    fn errors_name_the_file_the_key_and_the_line() {
        let err = parse_config_str("cloudProvider: fake\nkubeApiQPS: 5\n", "ccm.yaml").unwrap_err();
        assert_eq!(err.field(), Some("kubeApiQPS"), "{err:?}");
        assert!(
            err.to_string().starts_with(
                "invalid config file ccm.yaml: unknown key \"kubeApiQPS\" (line 2, column 1)"
            ),
            "{err}"
        );

        let err = parse_config_str("nodeMonitorPeriod: 5 minutes\n", "ccm.yaml").unwrap_err();
        assert_eq!(err.field(), Some("nodeMonitorPeriod"));
        assert!(
            err.to_string().starts_with(
                "invalid config file ccm.yaml: nodeMonitorPeriod: invalid duration \"5 minutes\""
            ),
            "{err}"
        );

        let err = parse_config_str("kubeApiBurst: lots\n", "ccm.yaml").unwrap_err();
        assert_eq!(err.field(), Some("kubeApiBurst"));
        assert!(
            err.to_string()
                .starts_with("invalid config file ccm.yaml: kubeApiBurst: "),
            "{err}"
        );
        assert_eq!(err.to_string().matches("line 1").count(), 1, "{err}");

        let err = parse_config_str("securePort: 70000\n", "ccm.yaml").unwrap_err();
        assert_eq!(err.field(), Some("securePort"));

        let err = parse_config_str("loggingFormat: xml\n", "ccm.yaml").unwrap_err();
        assert_eq!(err.field(), Some("loggingFormat"));
        assert!(err.to_string().contains("xml"), "{err}");

        let err = parse_config_str("leaderElect: maybe\n", "ccm.yaml").unwrap_err();
        assert_eq!(err.field(), Some("leaderElect"));

        let err = parse_config_str("controllers: route\n", "ccm.yaml").unwrap_err();
        assert_eq!(err.field(), Some("controllers"));

        let err = parse_config_str("- a\n- b\n", "ccm.yaml").unwrap_err();
        assert!(matches!(err, ConfigFileError::Syntax { .. }), "{err}");
        assert!(
            err.to_string()
                .starts_with("invalid config file ccm.yaml: "),
            "{err}"
        );

        let err = parse_config_str("a: [\n", "ccm.yaml").unwrap_err();
        assert!(
            err.to_string()
                .starts_with("invalid config file ccm.yaml: "),
            "{err}"
        );
    }

    #[test]
    fn unreadable_files_are_named() {
        let err = load_config_file(Path::new("/nonexistent/ccm.yaml")).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("cannot read config file /nonexistent/ccm.yaml: "),
            "{err}"
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ccm.yaml");
        std::fs::write(&path, "clusterName: prod\n").unwrap();
        assert_eq!(
            load_config_file(&path).unwrap().cluster_name.as_deref(),
            Some("prod")
        );
    }

    #[test]
    fn the_committed_schema_is_current() {
        let committed = include_str!("../../docs/schema/ccm-config.schema.json");
        assert!(
            committed == config_schema_json(),
            "docs/schema/ccm-config.schema.json is stale; regenerate it with `cargo xtask manifests`"
        );
    }

    #[test]
    fn the_schema_accepts_valid_files_and_rejects_unknown_keys() {
        let schema: serde_json::Value = serde_json::from_str(&config_schema_json()).unwrap();
        let validator = jsonschema::validator_for(&schema).unwrap();
        let full = serde_json::to_value(
            CcmOptions {
                cloud_provider: "fake".into(),
                ..CcmOptions::default()
            }
            .to_settings(),
        )
        .unwrap();
        assert!(validator.is_valid(&full), "{full}");
        assert!(validator.is_valid(&serde_json::json!({"kubeApiQps": 5, "controllers": ["*"]})));
        assert!(!validator.is_valid(&serde_json::json!({"kubeApiQPS": 5})));
        assert!(!validator.is_valid(&serde_json::json!({"nodeMonitorPeriod": "5 minutes"})));
        assert!(!validator.is_valid(&serde_json::json!({"loggingFormat": "xml"})));
    }
}
