//! Every flag of Go's cloud-controller-manager (the `--help` of the Go reference CCM, `k8s.io/cloud-provider`'s
//! fake-cloud-controller-manager built by `cargo xtask controlplane build --go-ccm`) is either accepted by the
//! reference CCM or listed with a reason in docs/runtime.md ("Go flags that are not accepted"), and that list names
//! only Go flags the reference CCM really rejects.
//!
//! `cargo xtask test` builds the Go binary and passes it in `$CCM_GO_CCM`; without it the test looks for
//! `controlplane/bin/fake-cloud-controller-manager` in the target directory of the test binary.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The environment variable naming the Go reference CCM.
const GO_CCM_ENV: &str = "CCM_GO_CCM";

/// The prefix of the flags `xtask/go/cmd/fake-cloud-controller-manager` adds for its fake cloud (`--fake-zone`,
/// ...): the test program's own, not Go's CCM's.
const GO_TEST_PROGRAM_PREFIX: &str = "fake-";

/// The heading of the list in docs/runtime.md.
const UNSUPPORTED_HEADING: &str = "### Go flags that are not accepted";

fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    exe.parent()
        .and_then(Path::parent)
        .and_then(Path::parent)
        .expect("target/<profile>/deps")
        .to_path_buf()
}

fn go_ccm() -> PathBuf {
    if let Some(path) = std::env::var_os(GO_CCM_ENV) {
        return PathBuf::from(path);
    }
    let candidate = target_dir()
        .join("controlplane")
        .join("bin")
        .join("fake-cloud-controller-manager");
    assert!(
        candidate.is_file(),
        "the Go reference CCM is missing: run these tests with `cargo xtask test` (it builds it), build it with \
         `cargo xtask controlplane build --go-ccm`, or set {GO_CCM_ENV} to the binary"
    );
    candidate
}

fn reference_ccm() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let binary = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps")
        .join("examples")
        .join("reference-ccm");
    assert!(
        binary.is_file(),
        "{} is missing; build it with `cargo build -p examples --example reference-ccm` (cargo xtask test does)",
        binary.display()
    );
    binary
}

/// The `--help` text of `binary` (stdout and stderr: cobra and clap differ).
fn help(binary: &Path) -> String {
    let output = Command::new(binary)
        .arg("--help")
        .env_remove("KUBECONFIG")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", binary.display()));
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// The long flag names a `--help` text lists: lines that start (after spaces and an optional `-x, `) with
/// `--name`.
fn flag_names(help: &str) -> BTreeSet<String> {
    help.lines()
        .filter_map(|line| {
            let line = line.trim_start();
            let line = match line.strip_prefix('-') {
                Some(rest) if !rest.starts_with('-') => {
                    rest.split_once(", ").map_or(line, |(_, r)| r)
                }
                _ => line,
            };
            let name = line.strip_prefix("--")?;
            let end = name
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
                .unwrap_or(name.len());
            (end > 0).then(|| name[..end].to_owned())
        })
        .collect()
}

/// The flags docs/runtime.md lists as not accepted, each with its reason: the rows `| `--flag` | reason |` of the
/// table under [`UNSUPPORTED_HEADING`].
fn documented_unsupported() -> Vec<(String, String)> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/runtime.md");
    let text = std::fs::read_to_string(&path).expect("docs/runtime.md");
    let start = text
        .find(UNSUPPORTED_HEADING)
        .unwrap_or_else(|| panic!("no {UNSUPPORTED_HEADING:?} in docs/runtime.md"));
    let section = &text[start + UNSUPPORTED_HEADING.len()..];
    let section = &section[..section.find("\n#").unwrap_or(section.len())];
    section
        .lines()
        .filter_map(|line| {
            let cells: Vec<&str> = line
                .trim()
                .strip_prefix('|')?
                .split('|')
                .map(str::trim)
                .collect();
            let flag = cells.first()?.strip_prefix("`--")?.strip_suffix('`')?;
            Some((
                flag.to_owned(),
                cells.get(1).copied().unwrap_or_default().to_owned(),
            ))
        })
        .collect()
}

#[test]
fn every_go_flag_is_accepted_or_documented_with_a_reason() {
    let go: BTreeSet<String> = flag_names(&help(&go_ccm()))
        .into_iter()
        .filter(|f| !f.starts_with(GO_TEST_PROGRAM_PREFIX))
        .collect();
    let ours = flag_names(&help(&reference_ccm()));
    assert!(
        go.len() >= 84 && go.contains("webhook-secure-port") && go.contains("cloud-provider"),
        "the Go --help did not parse as expected: {go:?}"
    );
    assert!(
        ours.contains("webhooks") && ours.contains("cloud-provider"),
        "{ours:?}"
    );
    let documented = documented_unsupported();
    let mut problems = Vec::new();
    for (flag, reason) in &documented {
        if reason.len() < 10 {
            problems.push(format!("docs/runtime.md lists --{flag} without a reason"));
        }
        if !go.contains(flag) {
            problems.push(format!(
                "docs/runtime.md lists --{flag}, which Go's CCM does not have"
            ));
        }
        if ours.contains(flag) {
            problems.push(format!(
                "docs/runtime.md lists --{flag} as not accepted, but the reference CCM accepts it"
            ));
        }
    }
    for flag in &go {
        if !ours.contains(flag) && !documented.iter().any(|(d, _)| d == flag) {
            problems.push(format!(
                "Go's --{flag} is neither accepted by the reference CCM nor listed with a reason in docs/runtime.md"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn help_lines_parse() {
    let names = flag_names(
        "      --bind-address ip   The IP\n  -v, --v Level   number\n  -h, --help  help\n\
         --webhooks strings  list\n  not a flag --x\n      --version version[=true]\n",
    );
    let expected: BTreeSet<String> = ["bind-address", "v", "help", "webhooks", "version"]
        .map(str::to_owned)
        .into();
    assert_eq!(names, expected);
}
