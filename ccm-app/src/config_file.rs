//! The YAML config file (`--config FILE`): the same settings as the flags, camelCase keys, unknown keys rejected.

use std::marker::PhantomData;
use std::path::{Path, PathBuf};

use serde::Deserialize as _;
use serde::de::value::MapAccessDeserializer;
use serde::de::{
    DeserializeOwned, DeserializeSeed, Deserializer, IntoDeserializer, MapAccess, Visitor,
};

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
    /// A key of the vendor's section is not one of its settings.
    #[error(
        "invalid config file {file}: unknown key {key:?} in section {section:?}{location}; the section holds the \
         settings of the cloud provider (see its documentation)"
    )]
    UnknownSectionKey {
        /// The file (or origin).
        file: String,
        /// The vendor's section.
        section: String,
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

/// Remove a trailing ` at line L, column C` (the location is reported separately).
fn strip_location(message: &str) -> String {
    let location = |tail: &str| {
        tail.chars()
            .all(|c| c.is_ascii_digit() || ", column".contains(c))
    };
    match message.rsplit_once(" at line ") {
        Some((head, tail)) if location(tail) => head.to_owned(),
        _ => message.to_owned(),
    }
}

fn is_blank(yaml: &str) -> bool {
    yaml.lines()
        .map(str::trim)
        .all(|l| l.is_empty() || l.starts_with('#') || l == "---" || l == "...")
}

fn classify(
    file: &str,
    path: &str,
    err: &serde_saphyr::Error,
    section: Option<&str>,
) -> ConfigFileError {
    let location = match err.location() {
        Some(loc) if loc.line() > 0 => format!(" (line {}, column {})", loc.line(), loc.column()),
        _ => String::new(),
    };
    let file = file.to_owned();
    let in_section = section.filter(|s| {
        path.strip_prefix(*s)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('.'))
    });
    let field = (!path.is_empty() && path != ".").then(|| path.to_owned());
    use serde_saphyr::Error as E;
    match (err.without_snippet(), field) {
        (E::SerdeUnknownField { field: key, .. }, _) => match in_section {
            Some(section) => ConfigFileError::UnknownSectionKey {
                file,
                section: section.to_owned(),
                key: key.clone(),
                location,
            },
            None => ConfigFileError::UnknownKey {
                file,
                key: key.clone(),
                location,
            },
        },
        (other, Some(field)) => ConfigFileError::InvalidValue {
            file,
            field,
            message: match other {
                E::SerdeInvalidType {
                    unexpected,
                    expected,
                    ..
                }
                | E::SerdeInvalidValue {
                    unexpected,
                    expected,
                    ..
                } => format!("expected {expected}, found {unexpected}"),
                E::SerdeUnknownVariant {
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

/// Parse config-file YAML (an empty document means no settings); a [`ConfigFileError`] names `origin` (usually the
/// file name), the key and, when known, the line and column.
pub fn parse_config_str(yaml: &str, origin: &str) -> Result<Settings, ConfigFileError> {
    parse_config_with_section::<serde::de::IgnoredAny>(yaml, origin, None)
        .map(|(settings, _)| settings)
}

/// Parse config-file YAML that may hold the vendor's own section under the top-level key `section`, deserialized
/// into `T` (`None` when the file has no such section); the other keys are the runtime's settings. Errors as
/// [`parse_config_str`]'s; a bad key or value inside the section names the section.
pub fn parse_config_with_section<T: DeserializeOwned>(
    yaml: &str,
    origin: &str,
    section: Option<&str>,
) -> Result<(Settings, Option<T>), ConfigFileError> {
    if is_blank(yaml) {
        return Ok((Settings::default(), None));
    }
    let mut options = serde_saphyr::Options::default();
    options.with_snippet = false;
    // A deserialization error stops reading midway, after which the reader also complains about the unread rest
    // of the input; the deserialization error is the one that explains the problem.
    let mut typed = None;
    let outer = serde_saphyr::with_deserializer_from_str_with_options(yaml, options, |de| {
        let mut track = serde_path_to_error::Track::new();
        let document = Document::<T> {
            section,
            vendor: PhantomData,
        };
        let result = document.deserialize(serde_path_to_error::Deserializer::new(de, &mut track));
        typed = Some(result.map_err(|err| (track.path().to_string(), err)));
        Ok(())
    });
    match (typed, outer) {
        (Some(Err((path, err))), _) => Err(classify(origin, &path, &err, section)),
        (_, Err(err)) => Err(classify(origin, "", &err, section)),
        (Some(Ok(parsed)), Ok(())) => Ok(parsed),
        (None, Ok(())) => Ok((Settings::default(), None)),
    }
}

/// The whole document: the runtime's settings, and the vendor's section taken out of the same mapping.
struct Document<'s, T> {
    section: Option<&'s str>,
    vendor: PhantomData<T>,
}

impl<'de, T: DeserializeOwned> DeserializeSeed<'de> for Document<'_, T> {
    type Value = (Settings, Option<T>);

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<Self::Value, D::Error> {
        de.deserialize_map(self)
    }
}

impl<'de, T: DeserializeOwned> Visitor<'de> for Document<'_, T> {
    type Value = (Settings, Option<T>);

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a mapping of settings")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        let mut vendor = None;
        let settings = Settings::deserialize(MapAccessDeserializer::new(WithoutSection {
            inner: map,
            section: self.section,
            vendor: &mut vendor,
        }))?;
        Ok((settings, vendor))
    }
}

/// The document's mapping without the vendor's section, which is deserialized aside into `vendor`.
struct WithoutSection<'a, A, T> {
    inner: A,
    section: Option<&'a str>,
    vendor: &'a mut Option<T>,
}

impl<'de, A: MapAccess<'de>, T: DeserializeOwned> MapAccess<'de> for WithoutSection<'_, A, T> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Self::Error> {
        loop {
            let Some(key) = self.inner.next_key::<String>()? else {
                return Ok(None);
            };
            if self.section == Some(key.as_str()) {
                *self.vendor = Some(self.inner.next_value::<T>()?);
                continue;
            }
            return seed
                .deserialize(IntoDeserializer::<A::Error>::into_deserializer(key))
                .map(Some);
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> Result<V::Value, Self::Error> {
        self.inner.next_value_seed(seed)
    }
}

/// The text of the config file at `path`, or [`ConfigFileError::Read`].
pub fn read_config_file(path: &Path) -> Result<String, ConfigFileError> {
    std::fs::read_to_string(path).map_err(|source| ConfigFileError::Read {
        path: path.to_owned(),
        source,
    })
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

    impl ConfigFileError {
        /// The key the error is about, if any.
        pub(crate) fn field(&self) -> Option<&str> {
            match self {
                ConfigFileError::UnknownKey { key, .. }
                | ConfigFileError::UnknownSectionKey { key, .. } => Some(key),
                ConfigFileError::InvalidValue { field, .. } => Some(field),
                ConfigFileError::Read { .. } | ConfigFileError::Syntax { .. } => None,
            }
        }
    }

    /// Read and parse the config file at `path`.
    ///
    /// # Errors
    ///
    /// [`ConfigFileError::Read`] if the file cannot be read, otherwise as [`parse_config_str`].
    pub(crate) fn load_config_file(path: &Path) -> Result<Settings, ConfigFileError> {
        parse_config_str(&read_config_file(path)?, &path.display().to_string())
    }

    use crate::options::{CcmOptions, LogFormat};

    /// [`parse_config_with_section`] with the section's default when the file has none.
    fn with_section<T: DeserializeOwned + Default>(
        yaml: &str,
        origin: &str,
        section: &str,
    ) -> Result<(Settings, T), ConfigFileError> {
        parse_config_with_section(yaml, origin, Some(section))
            .map(|(settings, vendor)| (settings, vendor.unwrap_or_default()))
    }

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

    #[derive(Debug, Default, PartialEq, serde::Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    struct Acme {
        region: String,
        #[serde(default)]
        zones: Vec<String>,
    }

    #[test]
    fn the_vendor_section_is_parsed_aside_and_its_errors_name_it() {
        let yaml = "clusterName: prod\nacme:\n  region: eu-1\n  zones: [a, b]\nkubeApiQps: 5\n";
        let (settings, acme) = with_section::<Acme>(yaml, "ccm.yaml", "acme").unwrap();
        assert_eq!(settings.cluster_name.as_deref(), Some("prod"));
        assert!(
            settings.kube_api_qps.is_some(),
            "keys after the section are read"
        );
        assert_eq!(
            acme,
            Acme {
                region: "eu-1".into(),
                zones: vec!["a".into(), "b".into()]
            }
        );

        let (_, absent) = with_section::<Acme>("clusterName: x\n", "f", "acme").unwrap();
        assert_eq!(absent, Acme::default());
        let (_, blank) = with_section::<Acme>("", "f", "acme").unwrap();
        assert_eq!(blank, Acme::default());

        let err = with_section::<Acme>("acme:\n  regoin: x\n", "ccm.yaml", "acme").unwrap_err();
        assert!(
            matches!(err, ConfigFileError::UnknownSectionKey { .. }),
            "{err:?}"
        );
        assert_eq!(err.field(), Some("regoin"));
        assert!(
            err.to_string().starts_with(
                "invalid config file ccm.yaml: unknown key \"regoin\" in section \"acme\""
            ),
            "{err}"
        );

        let err = with_section::<Acme>("acme:\n  region: [1]\n", "ccm.yaml", "acme").unwrap_err();
        assert_eq!(err.field(), Some("acme.region"), "{err:?}");

        // the runtime's own keys are still checked, and without a declared section the key is unknown
        let err =
            with_section::<Acme>("acme: {region: x}\nkubeApiQPS: 1\n", "f", "acme").unwrap_err();
        assert!(
            matches!(err, ConfigFileError::UnknownKey { ref key, .. } if key == "kubeApiQPS"),
            "{err:?}"
        );
        let err = parse_config_str("acme: {region: x}\n", "f").unwrap_err();
        assert!(
            matches!(err, ConfigFileError::UnknownKey { ref key, .. } if key == "acme"),
            "{err:?}"
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

    /// Formerly the rustdoc example of an item that is now internal.
    #[test]
    fn doc_example_parse_config_str() {
        use crate::config_file::parse_config_str;

        let settings =
            parse_config_str("cloudProvider: fake\nkubeApiQps: 50\n", "ccm.yaml").unwrap();
        assert_eq!(settings.cloud_provider.as_deref(), Some("fake"));

        let err = parse_config_str("kubeApiQPS: 50\n", "ccm.yaml").unwrap_err();
        assert!(
            err.to_string()
                .starts_with("invalid config file ccm.yaml: unknown key \"kubeApiQPS\""),
            "{err}"
        );
    }

    /// Formerly the rustdoc example of an item that is now internal.
    #[test]
    fn doc_example_parse_config_with_section() {
        #[derive(Debug, Default, serde::Deserialize)]
        #[serde(deny_unknown_fields, rename_all = "camelCase")]
        struct AcmeConfig {
            region: String,
            api_timeout_seconds: Option<u32>,
        }

        let yaml = "cloudProvider: acme\nacme:\n  region: eu-1\n";
        let (settings, acme) = with_section::<AcmeConfig>(yaml, "ccm.yaml", "acme").unwrap();
        assert_eq!(settings.cloud_provider.as_deref(), Some("acme"));
        assert_eq!(acme.region, "eu-1");
        assert_eq!(acme.api_timeout_seconds, None);

        let err =
            with_section::<AcmeConfig>("acme:\n  regoin: eu-1\n", "ccm.yaml", "acme").unwrap_err();
        assert!(
            err.to_string().starts_with(
                "invalid config file ccm.yaml: unknown key \"regoin\" in section \"acme\""
            ),
            "{err}"
        );
    }
}
