//! The vendor's own flags (a `clap::Args` type flattened into the command line) and config-file section (a serde
//! type under one top-level key), parsed with the runtime's and handed, typed, to the provider factory and the
//! controllers as [`VendorSettings`].

use std::any::Any;
use std::path::Path;
use std::sync::{Arc, Mutex};

use ccm_core::vendor::VendorSettings;
use clap::{ArgMatches, Command};
use serde::de::DeserializeOwned;

use super::StartupError;
use crate::config_file::{
    ConfigFileError, parse_config_str, parse_config_with_section, read_config_file,
};
use crate::options::Settings;

/// The `--help` heading of vendor flags whose type names none (`#[command(next_help_heading = "...")]`).
pub const VENDOR_HELP_HEADING: &str = "Cloud provider (vendor flags)";

type AnyValue = Arc<dyn Any + Send + Sync>;
type ParseFile = fn(&str, &str, &str) -> Result<(Settings, AnyValue), ConfigFileError>;

#[derive(Debug)]
struct ArgsSpec {
    type_name: &'static str,
    augment: fn(Command) -> Command,
    parse: fn(&ArgMatches) -> Result<AnyValue, clap::Error>,
}

#[derive(Debug)]
struct ConfigSpec {
    section: String,
    parse: ParseFile,
    default: fn() -> AnyValue,
}

/// What the binary declared, and what the last [`parse`](VendorSpec::parse) found.
#[derive(Debug, Default)]
pub(super) struct VendorSpec {
    args: Option<ArgsSpec>,
    config: Option<ConfigSpec>,
    parsed: Mutex<Option<VendorSettings>>,
}

impl VendorSpec {
    pub(super) fn set_args<A: clap::Args + Send + Sync + 'static>(&mut self) {
        self.args = Some(ArgsSpec {
            type_name: std::any::type_name::<A>(),
            augment: A::augment_args,
            parse: |matches| Ok(Arc::new(A::from_arg_matches(matches)?) as AnyValue),
        });
    }

    pub(super) fn set_config<C>(&mut self, section: &str)
    where
        C: DeserializeOwned + Default + Send + Sync + 'static,
    {
        self.config = Some(ConfigSpec {
            section: section.to_owned(),
            parse: |yaml, origin, section| {
                let (settings, vendor) =
                    parse_config_with_section::<C>(yaml, origin, Some(section))?;
                Ok((settings, Arc::new(vendor.unwrap_or_default()) as AnyValue))
            },
            default: || Arc::new(C::default()),
        });
    }

    /// `command` with the vendor's flags added under their heading.
    pub(super) fn augment(&self, command: Command) -> Command {
        match &self.args {
            None => command,
            Some(spec) => (spec.augment)(command.next_help_heading(VENDOR_HELP_HEADING)),
        }
    }

    /// Programming errors of the declarations: a vendor flag that clashes with one of `builtin`, a section named
    /// like a runtime setting.
    pub(super) fn check(&self, builtin: &Command) -> Result<(), StartupError> {
        let mut clashes = Vec::new();
        if let Some(spec) = &self.args {
            let vendor = (spec.augment)(Command::new("vendor"));
            for arg in vendor.get_arguments() {
                for theirs in builtin.get_arguments() {
                    let same_long = arg.get_long().is_some() && arg.get_long() == theirs.get_long();
                    let same_short =
                        arg.get_short().is_some() && arg.get_short() == theirs.get_short();
                    if arg.get_id() == theirs.get_id() || same_long || same_short {
                        clashes.push(format!(
                            "the flag {:?} of {} clashes with the runtime's flag --{}; rename it",
                            arg.get_long().unwrap_or(arg.get_id().as_str()),
                            spec.type_name,
                            theirs.get_long().unwrap_or(theirs.get_id().as_str()),
                        ));
                    }
                }
            }
        }
        if let Some(spec) = &self.config {
            let schema = schemars::schema_for!(Settings);
            let taken = schema.as_value()["properties"].get(&spec.section).is_some();
            if taken || spec.section.is_empty() {
                clashes.push(format!(
                    "the vendor config section {:?} is the name of a runtime setting (or empty); choose another, \
                     for example the provider's name",
                    spec.section
                ));
            }
        }
        match clashes.is_empty() {
            true => Ok(()),
            false => Err(StartupError::VendorExtension(clashes.join("; "))),
        }
    }

    /// Read the config file at `path`: the runtime's settings and the vendor's section, if one was declared.
    pub(super) fn load_file(
        &self,
        path: &Path,
    ) -> Result<(Settings, Option<AnyValue>), ConfigFileError> {
        let text = read_config_file(path)?;
        let origin = path.display().to_string();
        match &self.config {
            None => parse_config_str(&text, &origin).map(|s| (s, None)),
            Some(spec) => (spec.parse)(&text, &origin, &spec.section).map(|(s, v)| (s, Some(v))),
        }
    }

    /// The vendor's settings from the command line and the file's section (its default without one).
    pub(super) fn parse(
        &self,
        matches: &ArgMatches,
        config: Option<AnyValue>,
    ) -> Result<VendorSettings, clap::Error> {
        let mut vendor = VendorSettings::new();
        if let Some(spec) = &self.args {
            vendor = vendor.with_args_value((spec.parse)(matches)?);
        }
        if let Some(spec) = &self.config {
            vendor = vendor.with_config_value(config.unwrap_or_else(spec.default));
        }
        Ok(vendor)
    }

    /// Keep what [`parse`](Self::parse) found for the start that follows.
    pub(super) fn remember(&self, vendor: VendorSettings) {
        *self.parsed.lock().unwrap_or_else(|e| e.into_inner()) = Some(vendor);
    }

    /// What the last parse found; without one (options built by hand), the vendor flags' defaults and environment
    /// variables and the section's default.
    pub(super) fn take(&self, command_name: &str) -> Result<VendorSettings, StartupError> {
        if let Some(vendor) = self.parsed.lock().unwrap_or_else(|e| e.into_inner()).take() {
            return Ok(vendor);
        }
        let matches = self
            .augment(Command::new(command_name.to_owned()))
            .try_get_matches_from([command_name])
            .map_err(StartupError::Args)?;
        self.parse(&matches, None).map_err(StartupError::Args)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::test_support::builder;

    #[derive(Debug, Clone, clap::Args)]
    #[command(next_help_heading = "Acme")]
    struct AcmeArgs {
        /// The Acme region.
        #[arg(
            long = "acme-region",
            env = "CCM_APP_TEST_ACME_REGION",
            default_value = "eu-1"
        )]
        region: String,
        /// Calls per second to the Acme API.
        #[arg(long = "acme-qps", default_value_t = 5)]
        qps: u32,
    }

    #[derive(Debug, Default, PartialEq, serde::Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    struct AcmeConfig {
        endpoint: String,
    }

    #[derive(Debug, Clone, clap::Args)]
    struct Clashing {
        #[arg(long = "cluster-name")]
        cluster: String,
    }

    fn parse(args: &[&str]) -> Result<VendorSettings, StartupError> {
        let b = builder()
            .with_vendor_args::<AcmeArgs>()
            .with_vendor_config::<AcmeConfig>("acme");
        let mut argv = vec!["ccm", "--cloud-provider=fake"];
        argv.extend_from_slice(args);
        b.parse_args(argv)?;
        b.vendor.take("ccm")
    }

    #[test]
    fn vendor_flags_parse_with_their_defaults_and_show_under_their_heading() {
        let v = parse(&["--acme-qps=7"]).unwrap();
        let args = v.args::<AcmeArgs>().unwrap();
        assert_eq!((args.region.as_str(), args.qps), ("eu-1", 7));
        assert_eq!(v.config::<AcmeConfig>(), Some(&AcmeConfig::default()));

        let err = parse(&["--acme-qps=many"]).unwrap_err();
        assert!(matches!(err, StartupError::Args(_)));
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains("--acme-qps"), "{err}");

        let help = builder()
            .with_vendor_args::<AcmeArgs>()
            .command()
            .render_long_help()
            .to_string();
        let heading = help.find("Acme:").expect("the vendor's heading");
        assert!(help[heading..].contains("--acme-region"), "{help}");
        assert!(help.contains("CCM_APP_TEST_ACME_REGION"), "{help}");
    }

    #[test]
    fn the_vendor_section_comes_from_the_config_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ccm.yaml");
        std::fs::write(
            &path,
            "clusterName: prod\nacme:\n  endpoint: https://api.acme\n",
        )
        .unwrap();
        let config = format!("--config={}", path.display());
        let v = parse(&[&config]).unwrap();
        assert_eq!(
            v.config::<AcmeConfig>().unwrap().endpoint,
            "https://api.acme"
        );

        std::fs::write(&path, "acme:\n  endpont: x\n").unwrap();
        let err = parse(&[&config]).unwrap_err();
        assert_eq!(err.exit_code(), 1);
        assert!(
            err.to_string()
                .contains("unknown key \"endpont\" in section \"acme\""),
            "{err}"
        );
    }

    #[test]
    fn clashing_declarations_are_reported() {
        let b = builder().with_vendor_args::<Clashing>();
        let err = b.parse_args(["ccm", "--cloud-provider=fake"]).unwrap_err();
        assert!(matches!(err, StartupError::VendorExtension(_)), "{err}");
        assert!(err.to_string().contains("--cluster-name"), "{err}");

        let b = builder().with_vendor_config::<AcmeConfig>("clusterName");
        let err = b.parse_args(["ccm", "--cloud-provider=fake"]).unwrap_err();
        assert!(err.to_string().contains("\"clusterName\""), "{err}");
    }

    #[test]
    fn without_a_parse_the_defaults_are_used() {
        let b = builder().with_vendor_args::<AcmeArgs>();
        let v = b.vendor.take("ccm").unwrap();
        assert_eq!(v.args::<AcmeArgs>().unwrap().qps, 5);
    }
}
