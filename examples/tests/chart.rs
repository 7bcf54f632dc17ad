//! The Helm chart `deploy/chart`: `helm lint` passes, the default values render exactly the objects of
//! `deploy/*.yaml` (one source of truth: `ccm_app::deploy`), and every rendering (defaults and overrides) is
//! accepted by a real kube-apiserver in a server-side dry run and by the doctor's lint mode.
//!
//! helm is the one `cargo xtask test` builds from `xtask/go/helm` (pinned there) and passes in `$CCM_HELM`;
//! without it the tests look for `tools/bin/helm` next to the test binary's target directory.

mod support;

use std::path::PathBuf;
use std::process::Command;

use ccm_doctor::finding::Severity;
use ccm_testenv::TestEnv;
use serde_json::{Value, json};

use support::workspace_root;

/// The environment variable naming the helm binary.
const HELM_ENV: &str = "CCM_HELM";

fn helm() -> PathBuf {
    if let Some(path) = std::env::var_os(HELM_ENV) {
        return PathBuf::from(path);
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    exe.ancestors()
        .map(|dir| dir.join("tools").join("bin").join("helm"))
        .find(|candidate| candidate.is_file())
        .unwrap_or_else(|| {
            panic!(
                "helm not found: run these tests with `cargo xtask test` (it builds helm from xtask/go/helm into \
                 <target>/tools/bin) or set {HELM_ENV} to a helm binary"
            )
        })
}

fn chart_dir() -> String {
    workspace_root()
        .join("deploy")
        .join("chart")
        .display()
        .to_string()
}

/// Runs helm with its state directories in a private temporary directory; returns (success, stdout, stderr).
fn run_helm(args: &[&str]) -> (bool, String, String) {
    let home = std::env::temp_dir().join(format!("ccm-chart-test-{}", std::process::id()));
    let output = Command::new(helm())
        .args(args)
        .env("HELM_CACHE_HOME", home.join("cache"))
        .env("HELM_CONFIG_HOME", home.join("config"))
        .env("HELM_DATA_HOME", home.join("data"))
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", helm().display()));
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// `helm template` of the chart with `overrides`; the rendered text.
fn render(overrides: &[&str]) -> String {
    let chart = chart_dir();
    let mut args = vec![
        "template",
        "ccm",
        chart.as_str(),
        "--namespace",
        "kube-system",
    ];
    args.extend_from_slice(overrides);
    let (ok, stdout, stderr) = run_helm(&args);
    assert!(ok, "helm {args:?} failed: {stderr}");
    stdout
}

fn documents(text: &str, origin: &str) -> Vec<Value> {
    let docs: Vec<Value> =
        serde_saphyr::from_multiple(text).unwrap_or_else(|e| panic!("{origin}: {e}\n{text}"));
    docs.into_iter().filter(|doc| !doc.is_null()).collect()
}

fn key(doc: &Value) -> String {
    format!(
        "{}/{}/{}",
        doc["kind"].as_str().unwrap_or_default(),
        doc["metadata"]["namespace"].as_str().unwrap_or_default(),
        doc["metadata"]["name"].as_str().unwrap_or_default()
    )
}

fn sorted(mut docs: Vec<Value>) -> Vec<Value> {
    docs.sort_by_key(key);
    docs
}

fn find<'a>(docs: &'a [Value], kind: &str) -> Vec<&'a Value> {
    docs.iter().filter(|doc| doc["kind"] == kind).collect()
}

fn deployment(docs: &[Value]) -> &Value {
    let found = find(docs, "Deployment");
    assert_eq!(found.len(), 1, "one Deployment");
    found[0]
}

fn container(docs: &[Value]) -> &Value {
    &deployment(docs)["spec"]["template"]["spec"]["containers"][0]
}

fn args(docs: &[Value]) -> Vec<String> {
    container(docs)["args"]
        .as_array()
        .expect("args")
        .iter()
        .map(|a| a.as_str().expect("string arg").to_owned())
        .collect()
}

const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/// A vendor's production settings: own image pinned by digest, 3 replicas, limits, credentials in a Secret, an
/// extra controller rule, toleration and argument.
fn vendor_overrides() -> Vec<String> {
    [
        "--set",
        "image.repository=registry.example/acme/ccm",
        "--set",
        "image.tag=1.2.3",
        "--set",
        &format!("image.digest={DIGEST}"),
        "--set",
        "image.pullPolicy=IfNotPresent",
        "--set",
        "replicas=3",
        "--set-json",
        r#"resources={"requests":{"cpu":"200m","memory":"128Mi"},"limits":{"memory":"256Mi"}}"#,
        "--set-json",
        r#"args=["--cloud-provider=fake","--cloud-config=/etc/acme/cloud.yaml"]"#,
        "--set-json",
        r#"extraArgs=["--controllers=*,-route"]"#,
        "--set",
        "cloudConfig.secretName=acme-cloud-credentials",
        "--set",
        "cloudConfig.mountDir=/etc/acme",
        "--set-json",
        r#"extraTolerations=[{"key":"dedicated","operator":"Equal","value":"ccm","effect":"NoSchedule"}]"#,
        "--set-json",
        r#"rbac.extraRules=[{"apiGroups":[""],"resources":["configmaps"],"verbs":["get","list","watch"]}]"#,
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect()
}

/// One replica without leader election, no cloud config file.
fn single_replica_overrides() -> Vec<String> {
    [
        "--set",
        "replicas=1",
        "--set",
        "leaderElection.enabled=false",
        "--set",
        "cloudConfig.enabled=false",
        "--set-json",
        r#"args=["--cloud-provider=fake"]"#,
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect()
}

/// Placement by node affinity instead of the node selector, pod network and cluster DNS, another Lease name.
fn placement_overrides() -> Vec<String> {
    [
        "--set-json",
        "nodeSelector=null",
        "--set-json",
        r#"affinity={"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"node-role.kubernetes.io/control-plane","operator":"Exists"}]}]}}}"#,
        "--set",
        "hostNetwork=false",
        "--set",
        "dnsPolicy=ClusterFirst",
        "--set",
        "leaderElection.resourceName=acme-ccm",
        "--set",
        "priorityClassName=system-node-critical",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect()
}

/// `--use-service-account-credentials`, with a vendor controller's own account.
fn controller_credentials_overrides() -> Vec<String> {
    [
        "--set",
        "serviceAccountCredentials.enabled=true",
        "--set-json",
        r#"serviceAccountCredentials.extraControllers=[{"name":"acme-tagging","rules":[{"apiGroups":[""],"resources":["nodes"],"verbs":["get","patch"]}]}]"#,
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect()
}

/// The admission webhooks: the flags, the port, the Service and the sample configuration.
fn webhook_overrides() -> Vec<String> {
    ["--set", "webhooks.enabled=true"]
        .iter()
        .map(|s| (*s).to_owned())
        .collect()
}

fn committed(files: &[&str]) -> Vec<Value> {
    let mut committed = Vec::new();
    for file in files {
        let path = workspace_root().join("deploy").join(file);
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        committed.extend(documents(&text, file));
    }
    sorted(committed)
}

fn assert_same_objects(rendered: &[Value], committed: &[Value], what: &str) {
    let rendered_keys: Vec<String> = rendered.iter().map(key).collect();
    let committed_keys: Vec<String> = committed.iter().map(key).collect();
    assert_eq!(rendered_keys, committed_keys, "the same objects ({what})");
    for (chart, deploy) in rendered.iter().zip(committed) {
        assert_eq!(chart, deploy, "{} differs ({what})", key(chart));
    }
}

fn strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

#[test]
fn helm_lint_passes_with_the_defaults_and_the_overrides() {
    let chart = chart_dir();
    for overrides in [
        Vec::new(),
        vendor_overrides(),
        single_replica_overrides(),
        placement_overrides(),
        controller_credentials_overrides(),
        webhook_overrides(),
    ] {
        let mut args = vec!["lint", "--strict", chart.as_str()];
        args.extend(strs(&overrides));
        let (ok, stdout, stderr) = run_helm(&args);
        assert!(ok, "helm {args:?} failed:\n{stdout}\n{stderr}");
        assert!(stdout.contains("0 chart(s) failed"), "{stdout}");
    }
}

#[test]
fn the_default_values_render_exactly_the_committed_manifests() {
    let rendered = sorted(documents(&render(&[]), "helm template"));
    let committed = committed(&[
        "serviceaccount.yaml",
        "rbac.yaml",
        "deployment.yaml",
        "cloud-config.yaml",
    ]);
    assert_same_objects(&rendered, &committed, "the chart's defaults and deploy/");
}

#[test]
fn webhooks_render_the_committed_webhook_manifests() {
    let docs = documents(&render(&strs(&webhook_overrides())), "webhooks");
    let args = args(&docs);
    for flag in ["--webhooks=*", "--webhook-secure-port=10260"] {
        assert!(args.contains(&flag.to_owned()), "{args:?}");
    }
    assert_eq!(
        container(&docs)["ports"][1],
        json!({"name": "webhook", "containerPort": 10260, "protocol": "TCP"})
    );
    let rendered: Vec<Value> = docs
        .into_iter()
        .filter(|d| d["kind"] != "Deployment")
        .collect();
    let committed = committed(&[
        "serviceaccount.yaml",
        "rbac.yaml",
        "cloud-config.yaml",
        "webhook/webhook.yaml",
    ]);
    assert_same_objects(
        &sorted(rendered),
        &committed,
        "the chart with webhooks.enabled and deploy/ with webhook/webhook.yaml",
    );
    // off by default: no port, no flag, no Service
    let defaults = documents(&render(&[]), "defaults");
    assert!(find(&defaults, "Service").is_empty());
    assert!(
        !self::args(&defaults)
            .iter()
            .any(|a| a.starts_with("--webhook"))
    );
}

#[test]
fn service_account_credentials_render_the_committed_controller_rbac() {
    let overrides = ["--set", "serviceAccountCredentials.enabled=true"];
    let docs = documents(&render(&overrides), "credentials");
    let flag = "--use-service-account-credentials=true".to_owned();
    assert!(args(&docs).contains(&flag), "{:?}", args(&docs));
    let rendered: Vec<Value> = docs
        .into_iter()
        .filter(|d| d["kind"] != "Deployment")
        .collect();
    let committed: Vec<Value> = committed(&[
        "serviceaccount.yaml",
        "rbac.yaml",
        "cloud-config.yaml",
        "controller-rbac.yaml",
    ]);
    assert_same_objects(
        &sorted(rendered),
        &committed,
        "the chart with serviceAccountCredentials.enabled and deploy/ with controller-rbac.yaml",
    );

    // A vendor controller's account: its role (with Events) and binding, and the CCM may mint its tokens.
    let docs = documents(
        &render(&strs(&controller_credentials_overrides())),
        "vendor controller",
    );
    let role = find(&docs, "ClusterRole")
        .into_iter()
        .find(|r| r["metadata"]["name"] == "system:controller:acme-tagging")
        .expect("the vendor controller's ClusterRole");
    assert_eq!(
        role["rules"],
        json!([
            {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]},
            {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]}
        ])
    );
    let binding = find(&docs, "ClusterRoleBinding")
        .into_iter()
        .find(|r| r["metadata"]["name"] == "system:controller:acme-tagging")
        .expect("the vendor controller's ClusterRoleBinding");
    assert_eq!(
        binding["subjects"],
        json!([{"kind": "ServiceAccount", "name": "acme-tagging", "namespace": "kube-system"}])
    );
    let tokens = find(&docs, "Role")
        .into_iter()
        .find(|r| r["metadata"]["name"] == "cloud-controller-manager:controller-tokens")
        .expect("the token Role");
    assert_eq!(
        tokens["rules"][2]["resourceNames"].as_array().map(Vec::len),
        Some(6),
        "the five standard accounts and the vendor's"
    );
}

#[test]
fn overrides_change_what_they_name() {
    let docs = documents(&render(&strs(&vendor_overrides())), "vendor");
    assert_eq!(
        container(&docs)["image"],
        format!("registry.example/acme/ccm:1.2.3@{DIGEST}")
    );
    assert_eq!(container(&docs)["imagePullPolicy"], "IfNotPresent");
    assert_eq!(deployment(&docs)["spec"]["replicas"], 3);
    assert_eq!(container(&docs)["resources"]["limits"]["memory"], "256Mi");
    let args = args(&docs);
    assert_eq!(args[0], "--leader-elect=true");
    assert_eq!(
        args[args.len() - 3..],
        [
            "--cloud-provider=fake",
            "--cloud-config=/etc/acme/cloud.yaml",
            "--controllers=*,-route"
        ]
    );
    let pod = &deployment(&docs)["spec"]["template"]["spec"];
    assert_eq!(
        pod["volumes"],
        json!([{"name": "cloud-config", "secret": {"secretName": "acme-cloud-credentials"}}])
    );
    assert_eq!(
        container(&docs)["volumeMounts"][0]["mountPath"],
        "/etc/acme"
    );
    assert!(
        find(&docs, "ConfigMap").is_empty(),
        "a Secret replaces the ConfigMap"
    );
    let tolerations = pod["tolerations"].as_array().expect("tolerations");
    assert_eq!(tolerations.len(), 9);
    assert_eq!(tolerations[8]["key"], "dedicated");
    let rules = find(&docs, "ClusterRole")[0]["rules"]
        .as_array()
        .expect("rules");
    assert_eq!(rules.len(), 9, "the standard rules, then the extra one");
    assert_eq!(rules[8]["resources"], json!(["configmaps"]));

    let docs = documents(&render(&strs(&single_replica_overrides())), "single");
    assert_eq!(deployment(&docs)["spec"]["replicas"], 1);
    assert_eq!(
        self::args(&docs),
        [
            "--leader-elect=false",
            "--secure-port=10258",
            "--v=2",
            "--cloud-provider=fake"
        ]
    );
    assert!(find(&docs, "Role").is_empty(), "no leader-election Role");
    let bindings = find(&docs, "RoleBinding");
    assert_eq!(
        bindings.len(),
        1,
        "only the authentication reader's binding"
    );
    assert_eq!(
        bindings[0]["roleRef"]["name"],
        "extension-apiserver-authentication-reader"
    );
    assert!(find(&docs, "ConfigMap").is_empty());
    let pod = &deployment(&docs)["spec"]["template"]["spec"];
    assert!(pod.get("volumes").is_none(), "{pod}");

    let docs = documents(&render(&strs(&placement_overrides())), "placement");
    let pod = &deployment(&docs)["spec"]["template"]["spec"];
    assert!(pod.get("nodeSelector").is_none(), "{pod}");
    assert_eq!(
        pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
            [0]["matchExpressions"][0]["key"],
        "node-role.kubernetes.io/control-plane"
    );
    assert_eq!(
        pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]["topologyKey"],
        "kubernetes.io/hostname",
        "anti-affinity is added to the given affinity"
    );
    assert_eq!(pod["hostNetwork"], false);
    assert_eq!(pod["dnsPolicy"], "ClusterFirst");
    assert_eq!(pod["priorityClassName"], "system-node-critical");
    assert!(self::args(&docs).contains(&"--leader-elect-resource-name=acme-ccm".to_owned()));
    assert_eq!(
        find(&docs, "Role")[0]["rules"][1]["resourceNames"],
        json!(["acme-ccm"])
    );
}

#[test]
fn values_that_cannot_work_fail_the_rendering_with_the_reason() {
    let chart = chart_dir();
    for (overrides, reason) in [
        (
            vec!["--set", "leaderElection.enabled=false"],
            "replicas > 1 needs leaderElection.enabled=true",
        ),
        (
            vec!["--set", "image.digest=0123"],
            "image.digest must be sha256:",
        ),
        (
            vec!["--set", "image.repository="],
            "image.repository must not be empty",
        ),
    ] {
        let mut args = vec!["template", "ccm", chart.as_str()];
        args.extend(overrides.iter().copied());
        let (ok, _, stderr) = run_helm(&args);
        assert!(!ok, "helm {args:?} succeeded");
        assert!(stderr.contains(reason), "helm {args:?}: {stderr}");
    }
}

#[tokio::test]
async fn every_rendering_passes_a_dry_run_and_the_doctor() {
    let env = TestEnv::shared().await;
    let client = env.client();
    for (name, overrides) in [
        ("defaults", Vec::new()),
        ("vendor", vendor_overrides()),
        ("single replica", single_replica_overrides()),
        ("placement", placement_overrides()),
        ("controller credentials", controller_credentials_overrides()),
        ("webhooks", webhook_overrides()),
    ] {
        let text = render(&strs(&overrides));
        for doc in documents(&text, name) {
            support::dry_run_create(&client, &doc, &format!("the chart ({name})")).await;
        }
        let report = ccm_doctor::manifest::lint_manifest(
            &text,
            name,
            &ccm_doctor::manifest::WorkloadFilter::default(),
        )
        .unwrap_or_else(|e| panic!("{name}: {e}"));
        let errors: Vec<_> = report
            .findings()
            .iter()
            .filter(|f| f.severity == Severity::Error)
            .collect();
        assert!(
            errors.is_empty(),
            "the doctor finds errors in the chart ({name}): {errors:#?}"
        );
        if name == "defaults" {
            assert!(report.findings().is_empty(), "{:#?}", report.findings());
        }
    }
}
