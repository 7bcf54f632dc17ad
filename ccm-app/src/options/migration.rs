//! Go's checks of two flags the SDK accepts for compatibility: `--leader-migration-config` (a
//! `LeaderMigrationConfiguration` file, read only with `--enable-leader-migration`) and the logging info-buffer
//! sizes (`--log-json-info-buffer-size`, `--log-text-info-buffer-size`, Kubernetes quantities).

use std::collections::BTreeSet;
use std::path::Path;

/// The API versions of Go's `LeaderMigrationConfiguration`.
const MIGRATION_API_VERSIONS: &[&str] = &[
    "controllermanager.config.k8s.io/v1",
    "controllermanager.config.k8s.io/v1beta1",
    "controllermanager.config.k8s.io/v1alpha1",
];

#[derive(Debug, Default, serde::Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct MigrationConfig {
    api_version: String,
    kind: String,
    leader_name: String,
    resource_lock: String,
    controller_leaders: Vec<ControllerLeader>,
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
struct ControllerLeader {
    name: String,
    component: String,
}

/// Read and check a `LeaderMigrationConfiguration` file as Go does.
pub(crate) fn check_config_file(path: &Path) -> Result<(), String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    check_config(&text).map_err(|reason| format!("{}: {reason}", path.display()))
}

/// Go's rules: the type, a leader name, the `leases` lock, and named controllers with a component, each once.
pub(crate) fn check_config(text: &str) -> Result<(), String> {
    let config: MigrationConfig = serde_saphyr::from_str(text)
        .map_err(|e| format!("not a LeaderMigrationConfiguration: {e}"))?;
    if config.kind != "LeaderMigrationConfiguration"
        || !MIGRATION_API_VERSIONS.contains(&config.api_version.as_str())
    {
        return Err(format!(
            "expected kind LeaderMigrationConfiguration of apiVersion {}, got kind {:?} of apiVersion {:?}",
            MIGRATION_API_VERSIONS[0], config.kind, config.api_version
        ));
    }
    if config.leader_name.trim().is_empty() {
        return Err("leaderName is required".to_owned());
    }
    if config.resource_lock != "leases" {
        return Err(format!(
            "resourceLock must be \"leases\", got {:?}",
            config.resource_lock
        ));
    }
    let mut seen = BTreeSet::new();
    for (i, leader) in config.controller_leaders.iter().enumerate() {
        if leader.name.is_empty() {
            return Err(format!("controllerLeaders[{i}].name is required"));
        }
        if leader.component.is_empty() {
            return Err(format!("controllerLeaders[{i}].component is required"));
        }
        if !seen.insert(leader.name.as_str()) {
            return Err(format!(
                "controllerLeaders[{i}].name {:?} is listed twice",
                leader.name
            ));
        }
    }
    Ok(())
}

/// Parse a Kubernetes quantity used as a byte count (`0`, `65536`, `64Ki`, `1M`, `1.5Gi`); it must not be negative.
pub(crate) fn parse_buffer_size(value: &str) -> Result<u64, String> {
    const SUFFIXES: &[(&str, f64)] = &[
        ("Ki", 1024.0),
        ("Mi", 1024.0 * 1024.0),
        ("Gi", 1024.0 * 1024.0 * 1024.0),
        ("Ti", 1024.0 * 1024.0 * 1024.0 * 1024.0),
        ("k", 1e3),
        ("M", 1e6),
        ("G", 1e9),
        ("T", 1e12),
        ("", 1.0),
    ];
    let invalid = || {
        format!(
            "{value:?} is not a size; use a number of bytes with an optional suffix such as 64Ki, 1Mi or 1M"
        )
    };
    let value = value.trim();
    let (number, factor) = SUFFIXES
        .iter()
        .find_map(|(suffix, factor)| {
            value
                .strip_suffix(suffix)
                .filter(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit() || c == '.'))
                .map(|n| (n, *factor))
        })
        .ok_or_else(invalid)?;
    let number: f64 = number.parse().map_err(|_| invalid())?;
    let bytes = (number * factor).ceil();
    if !bytes.is_finite() || bytes > u64::MAX as f64 {
        return Err(invalid());
    }
    // finite, non-negative (only digits and '.') and at most u64::MAX: the conversion cannot truncate
    Ok(bytes as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffer_sizes() {
        assert_eq!(parse_buffer_size("0"), Ok(0));
        assert_eq!(parse_buffer_size("65536"), Ok(65536));
        assert_eq!(parse_buffer_size("64Ki"), Ok(65536));
        assert_eq!(parse_buffer_size("1M"), Ok(1_000_000));
        assert_eq!(parse_buffer_size("1.5Ki"), Ok(1536));
        for bad in ["", "-1", "1Q", "Ki", "one", "1e3"] {
            assert!(parse_buffer_size(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn migration_config_rules() {
        let ok = "apiVersion: controllermanager.config.k8s.io/v1\nkind: LeaderMigrationConfiguration\n\
                  leaderName: cloud-provider-extraction-migration\nresourceLock: leases\ncontrollerLeaders:\n\
                  - name: route\n  component: '*'\n- name: service\n  component: '*'\n";
        assert_eq!(check_config(ok), Ok(()));
        let cases = [
            (
                ok.replace("kind: LeaderMigrationConfiguration", "kind: Other"),
                "expected kind",
            ),
            (
                ok.replace(
                    "leaderName: cloud-provider-extraction-migration",
                    "leaderName: ''",
                ),
                "leaderName is required",
            ),
            (
                ok.replace("resourceLock: leases", "resourceLock: endpoints"),
                "resourceLock must be",
            ),
            (ok.replace("name: service", "name: route"), "listed twice"),
            (
                ok.replace(
                    "component: '*'\n- name: service",
                    "component: ''\n- name: service",
                ),
                "component is required",
            ),
            (
                "[not, a, map]".to_owned(),
                "not a LeaderMigrationConfiguration",
            ),
        ];
        for (text, message) in cases {
            let err = check_config(&text).unwrap_err();
            assert!(err.contains(message), "{message}: {err}");
        }
    }
}
