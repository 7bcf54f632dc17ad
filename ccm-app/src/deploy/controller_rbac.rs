//! `controller-rbac.yaml`, the RBAC of `--use-service-account-credentials` (ccm-app's `service_accounts` module), as
//! the `deploy` module describes it; the ClusterRoles are named as Go's controller roles. Informers stay on the
//! CCM's own identity, so the controllers' roles hold only what the controllers read directly and write.
//!
//! `service-controller` and `route-controller` are not generated: every API server with RBAC already has
//! `system:controller:service-controller` and `system:controller:route-controller`, bound to those accounts in
//! `kube-system`, and reconciles them at start (a generated copy would be overwritten); their rules cover what
//! these controllers do.

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding};
use serde_json::{Value, json};

use super::{ManifestOptions, binding, events_rule, fill, template};
use crate::service_accounts::SERVICE_ACCOUNT_NAMESPACE;

/// The prefix of the controllers' ClusterRoles (Go's bootstrap controller roles).
pub(crate) const CONTROLLER_ROLE_PREFIX: &str = "system:controller:";

/// The ServiceAccounts of the standard controllers (and of the doctor's bootstrap self-check), as
/// `service_accounts::service_account_name` names them.
pub(crate) const CONTROLLER_ACCOUNTS: [&str; 5] = [
    "cloud-node-controller",
    "cloud-node-lifecycle-controller",
    "service-controller",
    "route-controller",
    "node-bootstrap-selfcheck",
];

/// The accounts whose ClusterRole and binding the API server itself provides (its bootstrap policy).
pub(crate) const API_SERVER_BOOTSTRAP_ACCOUNTS: [&str; 2] =
    ["service-controller", "route-controller"];

/// The accounts whose ClusterRole and binding are generated: the standard ones the API server does not provide,
/// then the vendor controllers' ([`ManifestOptions::with_controller_account`]).
fn generated_accounts(options: &ManifestOptions) -> impl Iterator<Item = &str> {
    CONTROLLER_ACCOUNTS
        .into_iter()
        .filter(|a| !API_SERVER_BOOTSTRAP_ACCOUNTS.contains(a))
        .chain(options.controller_accounts.iter().map(|a| a.name.as_str()))
}

/// Every account the CCM requests tokens for: [`CONTROLLER_ACCOUNTS`], then the vendor controllers'.
pub(crate) fn token_accounts(options: &ManifestOptions) -> Vec<String> {
    CONTROLLER_ACCOUNTS
        .into_iter()
        .chain(options.controller_accounts.iter().map(|a| a.name.as_str()))
        .map(str::to_owned)
        .collect()
}

/// The rules of generated account `account`: a vendor controller's own rules plus Events, or
/// [`controller_rules`].
fn account_rules(options: &ManifestOptions, account: &str) -> Vec<PolicyRule> {
    match options
        .controller_accounts
        .iter()
        .find(|a| a.name == account)
    {
        Some(vendor) => [vendor.rules.clone(), vec![events_rule()]].concat(),
        None => controller_rules(account),
    }
}

/// The rules of the controller acting as ServiceAccount `account` (one of [`CONTROLLER_ACCOUNTS`] not in
/// [`API_SERVER_BOOTSTRAP_ACCOUNTS`]; any other account gets only Events: a vendor controller's own rights are the
/// vendor's to grant).
pub(crate) fn controller_rules(account: &str) -> Vec<PolicyRule> {
    let own = template("controllerRules")
        .get_mut(account)
        .map_or(json!([]), Value::take);
    let mut rules: Vec<PolicyRule> =
        serde_json::from_value(own).expect("controllerRules holds lists of PolicyRules");
    rules.push(events_rule());
    rules
}

/// The ClusterRole of each of `CONTROLLER_ACCOUNTS` but `API_SERVER_BOOTSTRAP_ACCOUNTS`, and of each vendor
/// controller account.
pub fn controller_cluster_roles(options: &ManifestOptions) -> Vec<ClusterRole> {
    generated_accounts(options)
        .map(|account| {
            let values = json!({
                "roleName": format!("{CONTROLLER_ROLE_PREFIX}{account}"),
                "rules": account_rules(options, account),
            });
            fill(options, "controllerClusterRole", values)
        })
        .collect()
}

/// The ClusterRoleBinding of each generated ClusterRole to its controller's ServiceAccount (in `kube-system`).
pub fn controller_cluster_role_bindings(options: &ManifestOptions) -> Vec<ClusterRoleBinding> {
    generated_accounts(options)
        .map(|account| {
            let name = format!("{CONTROLLER_ROLE_PREFIX}{account}");
            let subject = Some((account, SERVICE_ACCOUNT_NAMESPACE));
            binding(options, (&name, None), &name, subject)
        })
        .collect()
}

pub(crate) fn token_role_name(options: &ManifestOptions) -> String {
    format!("{}:controller-tokens", options.name)
}

/// The Role (in `kube-system`) of the CCM's own identity on the controllers' accounts: create them (a create
/// cannot be limited by name), read them and request their tokens (both limited to the accounts of the standard
/// and the vendor controllers).
pub fn token_requester_role(options: &ManifestOptions) -> Role {
    fill(options, "tokenRequesterRole", Value::Null)
}

/// The RoleBinding of the CCM's ServiceAccount to [`token_requester_role`].
pub fn token_requester_role_binding(options: &ManifestOptions) -> RoleBinding {
    let name = token_role_name(options);
    binding(
        options,
        (&name, Some(SERVICE_ACCOUNT_NAMESPACE)),
        &name,
        None,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deploy::rule;

    #[test]
    fn one_go_named_role_per_controller_and_nothing_broad() {
        let options = ManifestOptions::new("example.invalid/ccm:1");
        let roles = controller_cluster_roles(&options);
        let names: Vec<String> = roles
            .iter()
            .filter_map(|r| r.metadata.name.clone())
            .collect();
        assert_eq!(
            names,
            [
                "system:controller:cloud-node-controller",
                "system:controller:cloud-node-lifecycle-controller",
                "system:controller:node-bootstrap-selfcheck",
            ]
        );
        for role in &roles {
            for rule in role.rules.as_deref().unwrap_or_default() {
                assert!(
                    !rule
                        .verbs
                        .iter()
                        .any(|v| v == "*" || v == "list" || v == "watch"),
                    "{rule:?}"
                );
            }
        }
        let bindings = controller_cluster_role_bindings(&options);
        let subject = &bindings[1].subjects.as_ref().unwrap()[0];
        assert_eq!(
            (subject.name.as_str(), subject.namespace.as_deref()),
            ("cloud-node-lifecycle-controller", Some("kube-system"))
        );
        assert_eq!(
            bindings[1].role_ref.name,
            "system:controller:cloud-node-lifecycle-controller"
        );
        assert_eq!(controller_rules("acme-tagging"), vec![events_rule()]);
        assert!(
            controller_rules("cloud-node-lifecycle-controller")[0]
                .verbs
                .contains(&"delete".to_owned())
        );
        assert!(
            !controller_rules("cloud-node-controller")
                .iter()
                .any(|r| r.verbs.contains(&"delete".to_owned()))
        );
    }

    #[test]
    fn the_ccm_may_only_mint_tokens_of_the_controllers_accounts() {
        let options = ManifestOptions::new("example.invalid/ccm:1");
        let role = token_requester_role(&options);
        assert_eq!(role.metadata.namespace.as_deref(), Some("kube-system"));
        let rules = role.rules.unwrap();
        let token = rules
            .iter()
            .find(|r| r.resources.as_deref() == Some(&["serviceaccounts/token".to_owned()][..]))
            .unwrap();
        assert_eq!(token.verbs, ["create"]);
        assert_eq!(
            token.resource_names.as_ref().unwrap().len(),
            CONTROLLER_ACCOUNTS.len()
        );
        let binding = token_requester_role_binding(&options);
        assert_eq!(
            binding.subjects.unwrap()[0].name,
            "cloud-controller-manager"
        );
    }

    #[test]
    fn a_vendor_controller_account_gets_its_role_binding_and_tokens() {
        let tagging = rule(&[""], &["nodes"], &["get", "patch"]);
        let options = ManifestOptions::new("example.invalid/ccm:1")
            .with_controller_account("acme-tagging", vec![tagging.clone()]);
        let roles = controller_cluster_roles(&options);
        let role = roles.last().unwrap();
        assert_eq!(
            role.metadata.name.as_deref(),
            Some("system:controller:acme-tagging")
        );
        assert_eq!(role.rules.as_deref(), Some(&[tagging, events_rule()][..]));
        let bindings = controller_cluster_role_bindings(&options);
        let subject = &bindings.last().unwrap().subjects.as_ref().unwrap()[0];
        assert_eq!(
            (subject.name.as_str(), subject.namespace.as_deref()),
            ("acme-tagging", Some("kube-system"))
        );
        let rules = token_requester_role(&options).rules.unwrap();
        for rule in &rules[1..] {
            let names = rule.resource_names.as_ref().unwrap();
            assert_eq!(names.len(), CONTROLLER_ACCOUNTS.len() + 1);
            assert_eq!(names.last().map(String::as_str), Some("acme-tagging"));
        }
        // Without vendor accounts nothing changes.
        let plain = ManifestOptions::new("example.invalid/ccm:1");
        assert_eq!(controller_cluster_roles(&plain).len(), 3);
        assert_eq!(token_accounts(&plain), CONTROLLER_ACCOUNTS);
    }
}
