//! Building the control-plane binaries from the Go module in `xtask/go`.
//!
//! The Kubernetes version is recorded here ([`KUBERNETES_VERSION`]) and in `xtask/go/go.mod`;
//! [`check_go_mod`] fails the build when the two disagree. Each binary gets a stamp file next to
//! it holding the version and a hash of its inputs (go.mod, go.sum, its `cmd/` sources, the Go
//! version and the linker flags); a build with a matching stamp is skipped.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};

use crate::process::{self, Interrupt, Stopwatch};

/// The Kubernetes release whose kube-apiserver is built. Keep `xtask/go/go.mod` in step:
/// `k8s.io/kubernetes` at this version and every `k8s.io/*` staging module at the matching
/// `v0.x.y` version.
pub const KUBERNETES_VERSION: &str = "v1.36.2";

/// What to tell a user without Go.
pub const GO_MISSING_HINT: &str = "Install Go 1.26 or newer (the toolchain from the Go project or \
     your distribution's package) and make sure `go` is on PATH; it builds kube-apiserver, etcd, \
     kube-scheduler, kube-controller-manager and kwok for the local test control plane and cluster.";

/// A program of the Go module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GoProgram {
    /// Binary name in the bin directory.
    pub name: &'static str,
    /// The Go module it is built in: a directory below `xtask/go` (`""` = `xtask/go` itself, the
    /// control-plane module whose go.mod [`check_go_mod`] checks).
    pub module_subdir: &'static str,
    /// Directory of its main package inside the module, e.g. `cmd/kube-apiserver`; empty for a
    /// program the module pins with a `tool` directive ([`GoProgram::tool`]).
    pub package_dir: &'static str,
    /// The import path of a main package that go.mod pins with a `tool` directive, built as is
    /// (no sources of ours); `None` for a main package of the module (`package_dir`).
    pub tool: Option<&'static str>,
    /// Shown while building.
    pub duration_hint: &'static str,
    /// Whether to stamp the Kubernetes version into the binary (`/version`, `--version`).
    pub kubernetes_version_ldflags: bool,
    /// The Go module whose version (as go.mod selects it) is the program's version.
    pub version_module: &'static str,
}

/// kube-apiserver, from `k8s.io/kubernetes/cmd/kube-apiserver/app`.
pub const KUBE_APISERVER: GoProgram = GoProgram {
    name: "kube-apiserver",
    module_subdir: "",
    package_dir: "cmd/kube-apiserver",
    tool: None,
    duration_hint: "first build takes ~4-6 minutes on 2 cores, up to ~10 when other builds \
                    compete; later builds reuse Go's cache",
    kubernetes_version_ldflags: true,
    version_module: "k8s.io/kubernetes",
};

/// etcd, from `go.etcd.io/etcd/server/v3/embed`.
pub const ETCD: GoProgram = GoProgram {
    name: "etcd",
    module_subdir: "",
    package_dir: "cmd/etcd",
    tool: None,
    duration_hint: "1-2 minutes on a cold Go cache",
    kubernetes_version_ldflags: false,
    version_module: "go.etcd.io/etcd/server/v3",
};

/// The reference cloud-controller-manager of `k8s.io/cloud-provider` with its fake cloud.
pub const GO_CCM: GoProgram = GoProgram {
    name: "fake-cloud-controller-manager",
    module_subdir: "",
    package_dir: "cmd/fake-cloud-controller-manager",
    tool: None,
    duration_hint: "2-3 minutes on a cold Go cache, seconds after kube-apiserver was built",
    kubernetes_version_ldflags: true,
    version_module: "k8s.io/cloud-provider",
};

/// kube-scheduler, from `k8s.io/kubernetes/cmd/kube-scheduler/app`, for the cluster in a box
/// (`ccm_testenv::cluster`).
pub const KUBE_SCHEDULER: GoProgram = GoProgram {
    name: "kube-scheduler",
    module_subdir: "",
    package_dir: "cmd/kube-scheduler",
    tool: None,
    duration_hint: "under a minute after kube-apiserver was built",
    kubernetes_version_ldflags: true,
    version_module: "k8s.io/kubernetes",
};

/// kube-controller-manager, from `k8s.io/kubernetes/cmd/kube-controller-manager/app`, for the
/// cluster in a box (`ccm_testenv::cluster`).
pub const KUBE_CONTROLLER_MANAGER: GoProgram = GoProgram {
    name: "kube-controller-manager",
    module_subdir: "",
    package_dir: "cmd/kube-controller-manager",
    tool: None,
    duration_hint: "2-4 minutes after kube-apiserver was built (it also compiles kubelet and \
                    volume packages)",
    kubernetes_version_ldflags: true,
    version_module: "k8s.io/kubernetes",
};

/// kwok (Kubernetes WithOut Kubelet), which simulates the kubelets of the cluster in a box: its own
/// module (`xtask/go/kwok`) because it needs the `k8s.io/*` modules at its own versions.
pub const KWOK: GoProgram = GoProgram {
    name: "kwok",
    module_subdir: "kwok",
    package_dir: "",
    tool: Some("sigs.k8s.io/kwok/cmd/kwok"),
    duration_hint: "1-3 minutes on a cold Go cache",
    kubernetes_version_ldflags: false,
    version_module: "sigs.k8s.io/kwok",
};

/// helm, for the chart checks of `cargo xtask test`: its own module (`xtask/go/helm`) because helm
/// needs the `k8s.io/*` modules at its own versions, which the control-plane module replaces with
/// the Kubernetes release it builds.
pub const HELM: GoProgram = GoProgram {
    name: "helm",
    module_subdir: "helm",
    package_dir: "",
    tool: Some("helm.sh/helm/v4/cmd/helm"),
    duration_hint: "2-4 minutes on a cold Go cache",
    kubernetes_version_ldflags: false,
    version_module: "helm.sh/helm/v4",
};

/// The version of the `k8s.io/*` staging modules matching a Kubernetes version
/// (`v1.36.2` → `v0.36.2`).
fn staging_version_of(kubernetes: &str) -> String {
    match kubernetes.strip_prefix("v1.") {
        Some(rest) => format!("v0.{rest}"),
        None => kubernetes.to_owned(),
    }
}

/// Checks that `go.mod` requires `k8s.io/kubernetes` at [`KUBERNETES_VERSION`] and replaces every
/// `k8s.io/*` module with itself at the matching `v0.x.y` version.
///
/// # Errors
/// Describes the first disagreement and how to fix it.
pub fn check_go_mod(go_mod: &str) -> anyhow::Result<()> {
    check_go_mod_for(go_mod, KUBERNETES_VERSION)
}

fn check_go_mod_for(go_mod: &str, kubernetes: &str) -> anyhow::Result<()> {
    let staging = staging_version_of(kubernetes);
    let mut required = None;
    let mut replaces = 0;
    let mut bad_replace = None;
    for line in go_mod.lines() {
        let line = line.split("//").next().unwrap_or_default().trim();
        let words: Vec<&str> = line.split_whitespace().collect();
        // Inside a block: `k8s.io/kubernetes v1.36.2`; single line: `require k8s.io/... v1.36.2`.
        let words = match words.first() {
            Some(&"require") | Some(&"replace") => &words[1..],
            _ => &words[..],
        };
        match words {
            ["k8s.io/kubernetes", version] => required = Some(*version),
            [module, "=>", target, version] if module.starts_with("k8s.io/") => {
                if (module != target || *version != staging) && bad_replace.is_none() {
                    bad_replace = Some(format!(
                        "xtask/go/go.mod replaces {module} with {target} {version}, expected \
                         {module} {staging} to match Kubernetes {kubernetes} \
                         (KUBERNETES_VERSION in xtask/src/gobuild.rs)"
                    ));
                }
                replaces += 1;
            }
            _ => {}
        }
    }
    match required {
        Some(version) if version == kubernetes => {}
        Some(version) => bail!(
            "xtask/go/go.mod requires k8s.io/kubernetes {version} but KUBERNETES_VERSION in \
             xtask/src/gobuild.rs is {kubernetes}: change both together"
        ),
        None => bail!("xtask/go/go.mod does not require k8s.io/kubernetes"),
    }
    if let Some(message) = bad_replace {
        bail!("{message}");
    }
    if replaces == 0 {
        bail!(
            "xtask/go/go.mod has no replace directives for the k8s.io staging modules; \
             k8s.io/kubernetes cannot be built without them"
        );
    }
    Ok(())
}

/// The version go.mod selects for `module`: the target of its replace directive if it has one,
/// else its require line; `None` if go.mod mentions neither.
pub fn module_version(go_mod: &str, module: &str) -> Option<String> {
    let mut required = None;
    let mut replaced = None;
    for line in go_mod.lines() {
        let line = line.split("//").next().unwrap_or_default().trim();
        let words: Vec<&str> = line.split_whitespace().collect();
        let words = match words.first() {
            Some(&"require") | Some(&"replace") => &words[1..],
            _ => &words[..],
        };
        match words {
            [name, version] if *name == module => required = Some((*version).to_owned()),
            [name, "=>", _, version] if *name == module => replaced = Some((*version).to_owned()),
            _ => {}
        }
    }
    replaced.or(required)
}

/// Linker flags for `program`: stripped, and with the Kubernetes version where it reports one.
pub fn ldflags(program: &GoProgram) -> String {
    let mut flags = vec!["-s".to_owned(), "-w".to_owned()];
    if program.kubernetes_version_ldflags {
        let (major, minor) = major_minor(KUBERNETES_VERSION);
        for package in [
            "k8s.io/component-base/version",
            "k8s.io/client-go/pkg/version",
        ] {
            flags.push(format!("-X {package}.gitVersion={KUBERNETES_VERSION}"));
            flags.push(format!("-X {package}.gitMajor={major}"));
            flags.push(format!("-X {package}.gitMinor={minor}"));
            flags.push(format!("-X {package}.gitTreeState=clean"));
        }
    }
    flags.join(" ")
}

fn major_minor(version: &str) -> (&str, &str) {
    let mut parts = version.trim_start_matches('v').split('.');
    (
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
    )
}

/// 64-bit FNV-1a: a small, stable hash for stamps (not for security).
fn fnv1a64(data: &[u8], mut hash: u64) -> u64 {
    for byte in data {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// The stamp text for `program` given its inputs as (name, contents) pairs.
pub fn stamp(program: &GoProgram, go_version: &str, inputs: &[(String, Vec<u8>)]) -> String {
    let mut hash = FNV_OFFSET;
    for (name, contents) in inputs {
        hash = fnv1a64(name.as_bytes(), hash);
        hash = fnv1a64(&[0], hash);
        hash = fnv1a64(&(contents.len() as u64).to_le_bytes(), hash);
        hash = fnv1a64(contents, hash);
    }
    hash = fnv1a64(ldflags(program).as_bytes(), hash);
    format!(
        "program {}\nkubernetes {KUBERNETES_VERSION}\ngo {go_version}\ninputs {hash:016x}\n",
        program.name
    )
}

/// Reads go.mod, go.sum and every file below the program's package directory, sorted by path.
fn read_inputs(module_dir: &Path, program: &GoProgram) -> anyhow::Result<Vec<(String, Vec<u8>)>> {
    let mut paths = vec![PathBuf::from("go.mod"), PathBuf::from("go.sum")];
    let mut pending = if program.tool.is_some() {
        Vec::new()
    } else {
        vec![PathBuf::from(program.package_dir)]
    };
    while let Some(dir) = pending.pop() {
        let full = module_dir.join(&dir);
        let entries =
            std::fs::read_dir(&full).with_context(|| format!("reading {}", full.display()))?;
        for entry in entries {
            let entry = entry.with_context(|| format!("reading {}", full.display()))?;
            let relative = dir.join(entry.file_name());
            if entry.file_type()?.is_dir() {
                pending.push(relative);
            } else {
                paths.push(relative);
            }
        }
    }
    paths.sort();
    paths
        .into_iter()
        .map(|path| {
            let full = module_dir.join(&path);
            let contents =
                std::fs::read(&full).with_context(|| format!("reading {}", full.display()))?;
            Ok((path.display().to_string(), contents))
        })
        .collect()
}

fn stamp_path(bin_dir: &Path, program: &GoProgram) -> PathBuf {
    bin_dir.join(format!(".{}.stamp", program.name))
}

/// The installed Go version (`go1.26.8`).
///
/// # Errors
/// If `go` is missing (with [`GO_MISSING_HINT`]) or prints something unexpected.
pub async fn go_version(interrupt: &Interrupt) -> anyhow::Result<String> {
    interrupt.check()?;
    let output = match tokio::process::Command::new("go")
        .arg("env")
        .arg("GOVERSION")
        .output()
        .await
    {
        Ok(output) => output,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            bail!("`go` was not found on PATH. {GO_MISSING_HINT}")
        }
        Err(err) => return Err(err).context("cannot run `go env GOVERSION`"),
    };
    if !output.status.success() {
        bail!(
            "`go env GOVERSION` failed with {}: {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    let version = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    if !version.starts_with("go") {
        bail!("unexpected output of `go env GOVERSION`: {version:?}");
    }
    Ok(version)
}

/// What [`ensure_built`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The binary was up to date.
    UpToDate,
    /// The binary was built.
    Built,
}

/// Builds `program` (in its module below `module_dir`, the `xtask/go` directory) into `bin_dir`
/// unless its stamp shows it is current (or `force`).
///
/// Go's module and build caches stay in Go's default locations, so a rebuild after a stamp
/// change usually takes seconds.
///
/// # Errors
/// If Go is missing, go.mod disagrees with [`KUBERNETES_VERSION`], or `go build` fails.
pub async fn ensure_built(
    program: &GoProgram,
    module_dir: &Path,
    bin_dir: &Path,
    force: bool,
    interrupt: &Interrupt,
) -> anyhow::Result<Outcome> {
    let module_dir = &module_dir.join(program.module_subdir);
    let go_mod_path = module_dir.join("go.mod");
    let go_mod = std::fs::read_to_string(&go_mod_path)
        .with_context(|| format!("reading {}", go_mod_path.display()))?;
    if program.module_subdir.is_empty() {
        check_go_mod(&go_mod)?;
    }
    let version = module_version(&go_mod, program.version_module)
        .unwrap_or_else(|| "(version unknown)".to_owned());
    let label = format!("{} {version}", program.name);
    let go = go_version(interrupt).await?;
    let inputs = read_inputs(module_dir, program)?;
    let expected = stamp(program, &go, &inputs);
    let binary = bin_dir.join(program.name);
    let stamp_file = stamp_path(bin_dir, program);
    if !force
        && binary.is_file()
        && std::fs::read_to_string(&stamp_file).is_ok_and(|found| found == expected)
    {
        eprintln!("{label} is up to date ({})", binary.display());
        return Ok(Outcome::UpToDate);
    }

    std::fs::create_dir_all(bin_dir).with_context(|| format!("creating {}", bin_dir.display()))?;
    eprintln!("building {label} with {go} ({})...", program.duration_hint);
    let partial = bin_dir.join(format!(".{}.partial", program.name));
    let mut command = tokio::process::Command::new("go");
    command
        .current_dir(module_dir)
        .arg("build")
        .arg("-v")
        .arg("-buildvcs=false")
        .arg(format!("-ldflags={}", ldflags(program)))
        .arg("-o")
        .arg(&partial)
        .arg(
            program
                .tool
                .map_or_else(|| format!("./{}", program.package_dir), str::to_owned),
        );
    let stopwatch = Stopwatch::start();
    process::run(command, interrupt, GO_MISSING_HINT)
        .await
        .with_context(|| format!("building {} failed (see go's output above)", program.name))?;
    std::fs::rename(&partial, &binary)
        .with_context(|| format!("moving the new binary to {}", binary.display()))?;
    std::fs::write(&stamp_file, expected)
        .with_context(|| format!("writing {}", stamp_file.display()))?;
    eprintln!(
        "built {label} in {} ({})",
        process::seconds(stopwatch.elapsed()),
        binary.display()
    );
    Ok(Outcome::Built)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn staging_versions_follow_the_kubernetes_version() {
        assert_eq!(staging_version_of("v1.36.2"), "v0.36.2");
        assert_eq!(staging_version_of("v1.37.0"), "v0.37.0");
    }

    /// The committed go.mod agrees with KUBERNETES_VERSION.
    #[test]
    fn committed_go_mod_matches_the_version() {
        let go_mod =
            std::fs::read_to_string(crate::paths::go_module_dir().join("go.mod")).expect("go.mod");
        check_go_mod(&go_mod).expect("go.mod pins");
        assert!(go_mod.contains(&format!(
            "k8s.io/cri-streaming => k8s.io/cri-streaming {}",
            staging_version_of(KUBERNETES_VERSION)
        )));
    }

    #[test]
    fn go_mod_disagreements_are_reported() {
        let good = "module x\n\nrequire k8s.io/kubernetes v1.36.2\n\nreplace (\n\t\
                    k8s.io/api => k8s.io/api v0.36.2 // pinned\n)\n";
        assert!(check_go_mod_for(good, "v1.36.2").is_ok());

        let err = check_go_mod_for(good, "v1.37.0").expect_err("version mismatch");
        assert!(err.to_string().contains("change both together"), "{err}");

        let stale = good.replace("k8s.io/api v0.36.2", "k8s.io/api v0.35.0");
        let err = check_go_mod_for(&stale, "v1.36.2").expect_err("stale replace");
        assert!(err.to_string().contains("k8s.io/api v0.36.2"), "{err}");

        let no_replace = "module x\nrequire (\n\tk8s.io/kubernetes v1.36.2\n)\n";
        let err = check_go_mod_for(no_replace, "v1.36.2").expect_err("no replaces");
        assert!(err.to_string().contains("replace directives"), "{err}");

        let err = check_go_mod_for("module x\n", "v1.36.2").expect_err("no require");
        assert!(err.to_string().contains("does not require"), "{err}");
    }

    #[test]
    fn ldflags_carry_the_version_where_wanted() {
        let flags = ldflags(&KUBE_APISERVER);
        assert!(flags.starts_with("-s -w"));
        assert!(flags.contains(&format!(
            "-X k8s.io/component-base/version.gitVersion={KUBERNETES_VERSION}"
        )));
        assert!(flags.contains("-X k8s.io/component-base/version.gitMinor=36"));
        assert_eq!(ldflags(&ETCD), "-s -w");
    }

    #[test]
    fn stamps_change_with_every_input() {
        let inputs = vec![
            ("go.mod".to_owned(), b"module x".to_vec()),
            ("go.sum".to_owned(), b"sums".to_vec()),
        ];
        let base = stamp(&ETCD, "go1.26.8", &inputs);
        assert_eq!(base, stamp(&ETCD, "go1.26.8", &inputs), "deterministic");
        assert!(base.contains(&format!("kubernetes {KUBERNETES_VERSION}")));
        assert_ne!(base, stamp(&ETCD, "go1.26.9", &inputs));
        assert_ne!(base, stamp(&KUBE_APISERVER, "go1.26.8", &inputs));
        let mut changed = inputs.clone();
        changed[1].1.push(b'!');
        assert_ne!(base, stamp(&ETCD, "go1.26.8", &changed));
        // Moving bytes between files changes the hash too.
        let shifted = vec![
            ("go.mod".to_owned(), b"module xs".to_vec()),
            ("go.sum".to_owned(), b"ums".to_vec()),
        ];
        assert_ne!(base, stamp(&ETCD, "go1.26.8", &shifted));
    }

    #[test]
    fn fnv_matches_reference_values() {
        assert_eq!(fnv1a64(b"", FNV_OFFSET), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a", FNV_OFFSET), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(b"foobar", FNV_OFFSET), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn inputs_include_module_files_and_sources() {
        let inputs = read_inputs(&crate::paths::go_module_dir(), &ETCD).expect("inputs");
        let names: Vec<&str> = inputs.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names[..3], ["cmd/etcd/main.go", "go.mod", "go.sum"]);
    }

    #[test]
    fn module_versions_prefer_replacements() {
        let go_mod = "require (\n\tgo.etcd.io/etcd/server/v3 v3.6.8\n\tk8s.io/kubernetes v1.36.2\n)\n\
                      replace k8s.io/api => k8s.io/api v0.36.2\n\
                      replace (\n\tk8s.io/cloud-provider => k8s.io/cloud-provider v0.36.2\n)\n";
        assert_eq!(
            module_version(go_mod, "go.etcd.io/etcd/server/v3").as_deref(),
            Some("v3.6.8")
        );
        assert_eq!(
            module_version(go_mod, "k8s.io/kubernetes").as_deref(),
            Some("v1.36.2")
        );
        assert_eq!(
            module_version(go_mod, "k8s.io/api").as_deref(),
            Some("v0.36.2")
        );
        assert_eq!(
            module_version(go_mod, "k8s.io/cloud-provider").as_deref(),
            Some("v0.36.2")
        );
        assert_eq!(module_version(go_mod, "k8s.io/other"), None);
    }

    #[test]
    fn committed_go_mod_names_every_program_version() {
        let go_mod =
            std::fs::read_to_string(crate::paths::go_module_dir().join("go.mod")).expect("go.mod");
        assert_eq!(
            module_version(&go_mod, KUBE_APISERVER.version_module).as_deref(),
            Some(KUBERNETES_VERSION)
        );
        let etcd = module_version(&go_mod, ETCD.version_module).expect("etcd version");
        assert!(etcd.starts_with("v3.6."), "{etcd}");
    }

    #[test]
    fn helm_is_a_pinned_tool_of_its_own_module() {
        let module_dir = crate::paths::go_module_dir().join(HELM.module_subdir);
        let go_mod = std::fs::read_to_string(module_dir.join("go.mod")).expect("helm go.mod");
        let tool = HELM.tool.expect("helm is a tool");
        assert!(
            go_mod
                .lines()
                .any(|line| line.trim() == format!("tool {tool}")),
            "xtask/go/helm/go.mod pins {tool} with a tool directive"
        );
        let version = module_version(&go_mod, HELM.version_module).expect("helm version");
        assert!(version.starts_with("v4."), "{version}");
        // Only go.mod and go.sum are inputs: helm's sources come from the module cache.
        let inputs = read_inputs(&module_dir, &HELM).expect("inputs");
        let names: Vec<&str> = inputs.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["go.mod", "go.sum"]);
        assert_eq!(ldflags(&HELM), "-s -w");
    }

    #[test]
    fn cluster_programs_are_pinned() {
        let go_mod =
            std::fs::read_to_string(crate::paths::go_module_dir().join("go.mod")).expect("go.mod");
        for program in [KUBE_SCHEDULER, KUBE_CONTROLLER_MANAGER] {
            assert_eq!(
                module_version(&go_mod, program.version_module).as_deref(),
                Some(KUBERNETES_VERSION)
            );
            assert!(
                ldflags(&program).contains("gitVersion="),
                "{}",
                program.name
            );
            let inputs = read_inputs(&crate::paths::go_module_dir(), &program).expect("inputs");
            assert!(
                inputs
                    .iter()
                    .any(|(name, _)| name == &format!("{}/main.go", program.package_dir)),
                "{} hashes its main package",
                program.name
            );
        }
        let module_dir = crate::paths::go_module_dir().join(KWOK.module_subdir);
        let go_mod = std::fs::read_to_string(module_dir.join("go.mod")).expect("kwok go.mod");
        let tool = KWOK.tool.expect("kwok is a tool");
        assert!(
            go_mod
                .lines()
                .any(|line| line.trim() == format!("tool {tool}")),
            "xtask/go/kwok/go.mod pins {tool} with a tool directive"
        );
        assert_eq!(
            module_version(&go_mod, KWOK.version_module).as_deref(),
            Some("v0.8.0")
        );
        let inputs = read_inputs(&module_dir, &KWOK).expect("inputs");
        let names: Vec<&str> = inputs.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["go.mod", "go.sum"]);
    }

    #[test]
    fn major_and_minor() {
        assert_eq!(major_minor("v1.36.2"), ("1", "36"));
        assert_eq!(major_minor(""), ("", ""));
    }
}
