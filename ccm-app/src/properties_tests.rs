//! Property tests of the CCM's settings parsers (unit tests: they reach the parsers behind the public API): the command line (`CcmBuilder::parse_args`), the config file
//! (`config_file::parse_config_str`), `--cloud-api-operation-limit`, `--kube-api-qps`/`--kube-api-burst` and Go
//! booleans. Each property runs `ccm_testenv::properties::DEFAULT_CASES` generated cases (or `PROPTEST_CASES`);
//! see docs/architecture.md, "Property tests".

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crate::config_file::parse_config_str;
use crate::options::{KubeApiLimit, parse_go_bool, parse_operation_limit};
use crate::{CcmBuilder, CcmOptions, CloudControllerManager, LogFormat, Settings, StartupError};
use ccm_core::duration::format_go_duration;
use ccm_core::intercept::Operation;
use ccm_core::provider::CloudProvider;
use ccm_core::registry::ProviderRegistry;
use ccm_testenv::properties::config;
use clap::FromArgMatches;
use proptest::prelude::*;

/// A provider that offers nothing: enough for the settings to validate.
struct Named;

impl CloudProvider for Named {
    fn provider_name(&self) -> &str {
        "fake"
    }
}

fn builder() -> CcmBuilder {
    let registry = ProviderRegistry::new();
    registry
        .register("fake", |_| async {
            Ok(Arc::new(Named) as Arc<dyn CloudProvider>)
        })
        .expect("a new registry takes the provider");
    CloudControllerManager::builder(registry).with_default_controllers()
}

/// The CCM the properties parse with, built once.
fn ccm() -> &'static CcmBuilder {
    static CCM: OnceLock<CcmBuilder> = OnceLock::new();
    CCM.get_or_init(builder)
}

/// The CCM's command, built (and checked by clap) once: cloning a built command skips clap's per-build checks,
/// which dominate a debug-build parse.
fn command() -> &'static clap::Command {
    static COMMAND: OnceLock<clap::Command> = OnceLock::new();
    COMMAND.get_or_init(|| {
        let mut command = ccm().command();
        command.build();
        command
    })
}

/// The settings a command line gives (only those it names).
fn flags(args: &[String]) -> Result<Settings, StartupError> {
    let matches = command()
        .clone()
        .try_get_matches_from(std::iter::once("ccm".to_owned()).chain(args.iter().cloned()))
        .map_err(StartupError::Args)?;
    Settings::from_arg_matches(&matches).map_err(StartupError::Args)
}

/// Parse a command line as `CcmBuilder::parse_args` does without `--config`: clap, the flag table, the
/// precedence over the defaults, and validation.
fn parse(args: &[String]) -> Result<CcmOptions, StartupError> {
    let options = CcmOptions::resolve(&CcmOptions::default(), &Settings::default(), &flags(args)?);
    ccm().validate(&options)?;
    Ok(options)
}

/// Every long flag of the CCM except `--config` (which would read a file).
fn flag_names() -> &'static [String] {
    static NAMES: OnceLock<Vec<String>> = OnceLock::new();
    NAMES.get_or_init(|| {
        ccm()
            .command()
            .get_arguments()
            .filter_map(|a| a.get_long())
            .filter(|name| *name != "config")
            .map(|name| format!("--{name}"))
            .collect()
    })
}

/// One command-line word: a known flag alone or with a value, or anything at all.
fn argument() -> impl Strategy<Value = String> {
    let flag = (0..flag_names().len()).prop_map(|i| flag_names()[i].clone());
    let value = prop_oneof![
        any::<String>(),
        Just("true".to_owned()),
        Just("0".to_owned()),
        Just("-1".to_owned()),
        Just("10s".to_owned()),
        Just("auto".to_owned()),
        Just("fake".to_owned()),
        Just("create=1:2".to_owned()),
        Just(String::new()),
    ];
    prop_oneof![
        2 => flag.clone(),
        3 => (flag, value.clone()).prop_map(|(f, v)| format!("{f}={v}")),
        2 => value,
        1 => "-{1,2}[a-z-]{0,12}",
    ]
    .prop_filter("never --config (it reads a file)", |a| {
        !a.starts_with("--conf")
    })
}

#[test]
fn the_shortcut_parses_as_parse_args_does() {
    // The properties parse through `parse` above; it agrees with the entry point on valid and invalid lines.
    for line in [
        &[
            "--cloud-provider=fake",
            "--node-monitor-period=7s",
            "--kube-api-qps=auto",
        ][..],
        &[
            "--cloud-provider=fake",
            "--concurrent-service-syncs",
            "3",
            "--allow-untagged-cloud",
        ][..],
        &["--cloud-provider=nope"][..],
        &["--node-monitor-period=5"][..],
    ] {
        let args: Vec<String> = line.iter().map(|s| (*s).to_owned()).collect();
        let entry = ccm().parse_args(std::iter::once("ccm".to_owned()).chain(args.iter().cloned()));
        match (parse(&args), entry) {
            (Ok(a), Ok(b)) => assert_eq!(a, b),
            (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
            (a, b) => panic!("{line:?}: {a:?} vs {b:?}"),
        }
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn any_command_line_parses_or_fails_cleanly(args in prop::collection::vec(argument(), 0..6)) {
        match parse(&args) {
            Ok(options) => prop_assert!(options.validate().is_empty()),
            Err(err) => {
                let message = err.to_string();
                prop_assert!(!message.is_empty());
                prop_assert!(err.exit_code() <= 2);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------------------
// Valid values round-trip through the command line and the config file
// ---------------------------------------------------------------------------------------------------------

fn go_bool_spelling(value: bool) -> impl Strategy<Value = String> {
    let spellings: &[&str] = if value {
        &["1", "t", "T", "TRUE", "true", "True"]
    } else {
        &["0", "f", "F", "FALSE", "false", "False"]
    };
    (0..spellings.len()).prop_map(move |i| spellings[i].to_owned())
}

fn duration(min_ms: u64, max_ms: u64) -> impl Strategy<Value = Duration> {
    (min_ms..max_ms).prop_map(Duration::from_millis)
}

/// Valid settings, chosen freely, and the command line that says them.
#[derive(Debug, Clone)]
struct Chosen {
    node_monitor_period: Duration,
    route_reconciliation_period: Duration,
    min_resync_period: Duration,
    concurrent_service_syncs: i32,
    concurrent_node_syncs: i32,
    allow_untagged_cloud: (bool, String),
    kube_api_qps: KubeApiLimit<f32>,
    kube_api_burst: KubeApiLimit<i32>,
    cluster_name: String,
    json_logs: bool,
    operation_limit: Option<(Operation, f64, u32)>,
}

prop_compose! {
    fn chosen()(
        node_monitor_period in duration(1, 3_600_000),
        route_reconciliation_period in duration(1_000, 3_600_000),
        min_resync_period in duration(0, 86_400_000),
        concurrent_service_syncs in 1i32..100,
        concurrent_node_syncs in 1i32..100,
        allow_untagged_cloud in any::<bool>().prop_flat_map(|b| (Just(b), go_bool_spelling(b))),
        kube_api_qps in prop_oneof![Just(KubeApiLimit::Auto), (0.5f32..500.0).prop_map(KubeApiLimit::Value)],
        kube_api_burst in prop_oneof![Just(KubeApiLimit::Auto), (0i32..1_000).prop_map(KubeApiLimit::Value)],
        cluster_name in "[a-z][a-z0-9-]{0,20}",
        json_logs in any::<bool>(),
        operation_limit in prop::option::of((1..Operation::ALL.len(), 1u32..1_000, 1u32..100)),
    ) -> Chosen {
        Chosen {
            node_monitor_period,
            route_reconciliation_period,
            min_resync_period,
            concurrent_service_syncs,
            concurrent_node_syncs,
            allow_untagged_cloud,
            kube_api_qps,
            kube_api_burst,
            cluster_name,
            json_logs,
            // Rates in steps of 1/8: written and read back exactly.
            operation_limit: operation_limit.map(|(op, qps8, burst)| (Operation::ALL[op], f64::from(qps8) / 8.0, burst)),
        }
    }
}

impl Chosen {
    fn args(&self) -> Vec<String> {
        let mut args = vec![
            "--cloud-provider=fake".to_owned(),
            format!(
                "--node-monitor-period={}",
                format_go_duration(self.node_monitor_period)
            ),
            format!(
                "--route-reconciliation-period={}",
                format_go_duration(self.route_reconciliation_period)
            ),
            format!(
                "--min-resync-period={}",
                format_go_duration(self.min_resync_period)
            ),
            format!(
                "--concurrent-service-syncs={}",
                self.concurrent_service_syncs
            ),
            // the space-separated form works for flags that take a value
            "--concurrent-node-syncs".to_owned(),
            self.concurrent_node_syncs.to_string(),
            format!("--allow-untagged-cloud={}", self.allow_untagged_cloud.1),
            format!("--kube-api-qps={}", self.kube_api_qps),
            format!("--kube-api-burst={}", self.kube_api_burst),
            format!("--cluster-name={}", self.cluster_name),
            format!(
                "--logging-format={}",
                if self.json_logs { "json" } else { "text" }
            ),
        ];
        if let Some((op, qps, burst)) = self.operation_limit {
            args.push(format!(
                "--cloud-api-operation-limit={}={qps}:{burst}",
                op.as_str()
            ));
        }
        args
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn valid_flags_round_trip_through_the_command_line_and_the_config_file(chosen in chosen()) {
        let mut given = flags(&chosen.args()).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let options = CcmOptions::resolve(&CcmOptions::default(), &Settings::default(), &given);
        ccm().validate(&options).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(options.node_monitor_period, chosen.node_monitor_period);
        prop_assert_eq!(options.route_reconciliation_period, chosen.route_reconciliation_period);
        prop_assert_eq!(options.min_resync_period, chosen.min_resync_period);
        prop_assert_eq!(options.concurrent_service_syncs, chosen.concurrent_service_syncs);
        prop_assert_eq!(options.concurrent_node_syncs, chosen.concurrent_node_syncs);
        prop_assert_eq!(options.allow_untagged_cloud, chosen.allow_untagged_cloud.0);
        prop_assert_eq!(options.kube_api_qps, chosen.kube_api_qps);
        prop_assert_eq!(options.kube_api_burst, chosen.kube_api_burst);
        prop_assert_eq!(&options.cluster_name, &chosen.cluster_name);
        prop_assert_eq!(options.logging_format, if chosen.json_logs { LogFormat::Json } else { LogFormat::Text });
        if let Some((op, qps, burst)) = chosen.operation_limit {
            let limit = &options.cloud_api_operation_limits[op.as_str()];
            prop_assert_eq!((limit.qps, limit.burst), (qps, burst));
        }

        // The same settings written in a config file (JSON is YAML) mean the same options. The file has no
        // --cloud-api-operation-limit (a flag that adds to a setting): it writes the whole operation table.
        if given.cloud_api_operation_limit.take().is_some() {
            given.cloud_api_operation_limits = Some(options.cloud_api_operation_limits.clone());
        }
        let yaml = serde_json::to_string(&given).unwrap();
        let file = parse_config_str(&yaml, "ccm.yaml").map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(&file, &given);
        prop_assert_eq!(CcmOptions::resolve(&CcmOptions::default(), &file, &Settings::default()), options.clone());
        // And what /configz serves for them is that file too, completed with the defaults.
        let configz = options.to_settings();
        prop_assert_eq!(CcmOptions::resolve(&CcmOptions::default(), &configz, &Settings::default()), options);
    }
}

// ---------------------------------------------------------------------------------------------------------
// The config file
// ---------------------------------------------------------------------------------------------------------

/// YAML-looking text: known keys and nesting with values of every type, and stray characters.
fn yaml_like() -> impl Strategy<Value = String> {
    let key = prop_oneof![
        Just("kubeApiQps"),
        Just("nodeMonitorPeriod"),
        Just("controllers"),
        Just("cloudApiOperationLimits"),
        Just("leaderElect"),
        Just("clusterCIDR"),
        Just("bindAddress"),
        Just("unknownKey"),
        Just("- "),
        Just(""),
    ];
    let value = prop_oneof![
        Just("10s"),
        Just("auto"),
        Just("1.5"),
        Just("-3"),
        Just("[a, b]"),
        Just("{create: {qps: 1, burst: 2}}"),
        Just("true"),
        Just("~"),
        Just("'unterminated"),
        Just("&anchor x"),
        Just("*anchor"),
        Just("!!binary aGk="),
        Just("\t"),
        Just(""),
    ];
    let line = (
        0usize..3,
        key,
        prop_oneof![Just(": "), Just(":"), Just(" ")],
        value,
    )
        .prop_map(|(indent, k, sep, v)| format!("{}{k}{sep}{v}", "  ".repeat(indent)));
    prop::collection::vec(line, 0..6).prop_map(|lines| lines.join("\n"))
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn any_config_text_parses_or_fails_with_its_origin(text in prop_oneof![any::<String>(), yaml_like()]) {
        if let Err(err) = parse_config_str(&text, "ccm.yaml") {
            let message = err.to_string();
            prop_assert!(message.contains("ccm.yaml"), "{}", message);
        }
    }

    #[test]
    fn any_bytes_as_config_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
        let text = String::from_utf8_lossy(&bytes);
        let _ = parse_config_str(&text, "ccm.yaml");
    }
}

// ---------------------------------------------------------------------------------------------------------
// Value parsers
// ---------------------------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(config())]

    #[test]
    fn operation_limits_parse_back(text in prop_oneof![any::<String>(), "[a-z-]{0,12}=[0-9.:e-]{0,8}"], op in 1..Operation::ALL.len(), qps8 in 0u32..100_000, burst in prop::option::of(any::<u32>())) {
        if let Ok(limit) = parse_operation_limit(&text) {
            prop_assert!(limit.limit.qps.is_finite() && limit.limit.qps >= 0.0);
            let prefix = format!("{}=", limit.operation.as_str());
            prop_assert!(text.starts_with(&prefix));
        }
        let op = Operation::ALL[op];
        let qps = f64::from(qps8) / 8.0;
        let written = match burst {
            Some(burst) => format!("{}={qps}:{burst}", op.as_str()),
            None => format!("{}={qps}", op.as_str()),
        };
        let limit = parse_operation_limit(&written).map_err(TestCaseError::fail)?;
        prop_assert_eq!(limit.operation, op);
        prop_assert_eq!(limit.limit.qps, qps);
        // Without a burst: the rate rounded up, at least 1.
        prop_assert_eq!(limit.limit.burst, burst.unwrap_or_else(|| (qps.ceil() as u32).max(1)));
        // `initialize` is not a cloud call that can be limited.
        let initialize = format!("{}=1:1", Operation::Initialize.as_str());
        prop_assert!(parse_operation_limit(&initialize).is_err());
    }

    #[test]
    fn kube_api_limits_are_a_number_or_auto(text in prop_oneof![any::<String>(), "[0-9.a-z-]{0,6}"], qps in any::<f32>(), burst in any::<i32>()) {
        if let Ok(limit) = text.parse::<KubeApiLimit<i32>>() {
            prop_assert_eq!(limit.to_string().parse::<KubeApiLimit<i32>>(), Ok(limit));
        }
        let _ = text.parse::<KubeApiLimit<f32>>();
        prop_assert_eq!(KubeApiLimit::Value(burst).to_string().parse::<KubeApiLimit<i32>>(), Ok(KubeApiLimit::Value(burst)));
        if qps.is_finite() {
            prop_assert_eq!(KubeApiLimit::Value(qps).to_string().parse::<KubeApiLimit<f32>>(), Ok(KubeApiLimit::Value(qps)));
        }
        prop_assert_eq!("auto".parse::<KubeApiLimit<f32>>(), Ok(KubeApiLimit::Auto));
    }

    #[test]
    fn both_go_boolean_parsers_agree(text in prop_oneof![any::<String>(), "[tTfF01rRuUeEaAlLsS]{1,5}"]) {
        // The flag parser and the exclusion-label parser are both Go's strconv.ParseBool.
        prop_assert_eq!(parse_go_bool(&text).ok(), ccm_servicecontroller::predicates::parse_go_bool(&text));
        if let Err(message) = parse_go_bool(&text) {
            prop_assert!(message.contains("invalid boolean"));
        }
    }
}

// ---------------------------------------------------------------------------------------------------------
// --controllers
// ---------------------------------------------------------------------------------------------------------

/// (canonical name, alias, disabled by default)
const CATALOG: [(&str, &str, bool); 3] = [
    ("cloud-node-controller", "cloud-node", false),
    ("service-lb-controller", "service", false),
    ("tagging-controller", "tagging", true),
];

fn controller_entry() -> impl Strategy<Value = String> {
    let known = (0..CATALOG.len(), any::<bool>(), any::<bool>()).prop_map(|(i, alias, off)| {
        let (name, short, _) = CATALOG[i];
        format!(
            "{}{}",
            if off { "-" } else { "" },
            if alias { short } else { name }
        )
    });
    prop_oneof![4 => known, 1 => Just("*".to_owned()), 1 => Just("nope".to_owned()), 1 => Just("-nope".to_owned())]
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn controller_lists_follow_first_mention_wins(list in prop::collection::vec(controller_entry(), 0..7)) {
        let catalog = crate::controllers::ControllerCatalog::new(
            CATALOG.iter().map(|(name, alias, off)| (*name, std::slice::from_ref(alias), *off)),
        )
        .unwrap();
        let unknown = list.iter().any(|e| e.trim_start_matches('-') == "nope");
        match catalog.enabled(&list) {
            Err(err) => prop_assert!(unknown, "{}", err),
            Ok(enabled) => {
                prop_assert!(!unknown);
                // The model: the first entry naming a controller (by name or alias) decides; else `*` turns on
                // the controllers that are on by default.
                let expected: Vec<String> = CATALOG
                    .iter()
                    .filter(|(name, alias, off)| {
                        let first = list.iter().find_map(|e| {
                            let bare = e.strip_prefix('-').unwrap_or(e);
                            (bare == *name || bare == *alias).then(|| !e.starts_with('-'))
                        });
                        first.unwrap_or(list.iter().any(|e| e == "*") && !off)
                    })
                    .map(|(name, _, _)| (*name).to_owned())
                    .collect();
                prop_assert_eq!(enabled, expected);
            }
        }
    }
}
