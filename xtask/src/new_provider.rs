//! `cargo xtask new-provider NAME --dir DIR`: write a provider crate to start from — the provider over an
//! in-memory cloud to replace (`src/lib.rs`), the CCM binary on the reference runtime (`src/main.rs`), the
//! conformance suite wired to it (`tests/conformance.rs`), a README and a Cargo.toml depending on the SDK (by path
//! to this workspace, or by version with `--sdk-version`). The templates are the files under
//! `xtask/templates/new-provider/`; `{{key}}` marks what is filled in.

use std::fmt::Write as _;
use std::path::{Component, Path, PathBuf};

use anyhow::{Context as _, bail};
use clap::Args;

use crate::paths;

/// Arguments of `cargo xtask new-provider`.
#[derive(Debug, Args)]
pub struct NewProviderArgs {
    /// The provider name: `--cloud-provider`, the providerID scheme and the crate name. A DNS-1123 label that
    /// starts with a letter (lower-case letters, digits and `-`, at most 63 characters).
    pub name: String,
    /// The directory to create the crate in; must not exist or be empty.
    #[arg(long, value_name = "DIR")]
    pub dir: PathBuf,
    /// Depend on this published version of the SDK crates (e.g. `0.1.0`) instead of this workspace by path.
    #[arg(long, value_name = "VERSION", conflicts_with = "sdk_path")]
    pub sdk_version: Option<String>,
    /// Depend on the SDK crates of this workspace checkout by path (default: the workspace running this command).
    #[arg(long, value_name = "WORKSPACE")]
    pub sdk_path: Option<PathBuf>,
}

/// The SDK crates a generated provider depends on, and as dev-dependencies.
const SDK_CRATES: &[&str] = &["ccm-core", "ccm-app"];
const SDK_DEV_CRATES: &[&str] = &["ccm-conformance"];

/// The template files, by path in the generated crate.
const TEMPLATES: &[(&str, &str)] = &[
    (
        "Cargo.toml",
        include_str!("../templates/new-provider/Cargo.toml"),
    ),
    (
        "README.md",
        include_str!("../templates/new-provider/README.md"),
    ),
    (
        "src/lib.rs",
        include_str!("../templates/new-provider/src/lib.rs"),
    ),
    (
        "src/main.rs",
        include_str!("../templates/new-provider/src/main.rs"),
    ),
    (
        "tests/conformance.rs",
        include_str!("../templates/new-provider/tests/conformance.rs"),
    ),
];

/// Names a generated crate cannot take: Rust keywords and reserved crate names, the SDK's crates, and the
/// provider name that means "no provider in this process".
const RESERVED: &[&str] = &[
    "abstract",
    "alloc",
    "as",
    "async",
    "await",
    "become",
    "box",
    "break",
    "const",
    "continue",
    "core",
    "crate",
    "do",
    "dyn",
    "else",
    "enum",
    "extern",
    "false",
    "final",
    "fn",
    "for",
    "gen",
    "if",
    "impl",
    "in",
    "let",
    "loop",
    "macro",
    "match",
    "mod",
    "move",
    "mut",
    "override",
    "priv",
    "proc-macro",
    "pub",
    "ref",
    "return",
    "self",
    "static",
    "std",
    "struct",
    "super",
    "test",
    "trait",
    "true",
    "try",
    "type",
    "typeof",
    "unsafe",
    "unsized",
    "use",
    "virtual",
    "where",
    "while",
    "yield",
    "external",
    "ccm-app",
    "ccm-core",
    "ccm-conformance",
    "ccm-doctor",
    "ccm-testenv",
    "ccm-provider-fake",
    "examples",
    "xtask",
];

/// Check that `name` is a DNS-1123 label starting with a letter and not reserved; the error says what to change.
pub fn validate_name(name: &str) -> Result<(), String> {
    let rule = "a provider name is a DNS-1123 label that starts with a letter: lower-case letters, digits and \
                '-', at most 63 characters, ending with a letter or digit (e.g. \"acme\" or \"acme-cloud\")";
    if name.is_empty() || name.len() > 63 {
        return Err(format!(
            "invalid provider name {name:?} ({} characters): {rule}",
            name.len()
        ));
    }
    if let Some(bad) = name
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-'))
    {
        return Err(format!(
            "invalid provider name {name:?}: {bad:?} is not allowed; {rule}"
        ));
    }
    if !name.starts_with(|c: char| c.is_ascii_lowercase()) || name.ends_with('-') {
        return Err(format!("invalid provider name {name:?}: {rule}"));
    }
    if RESERVED.contains(&name) {
        return Err(format!(
            "provider name {name:?} is reserved (a Rust keyword or crate, an SDK crate, or \"external\"); choose another"
        ));
    }
    Ok(())
}

/// The provider type's name: `acme` → `AcmeCloud`, `my-cloud` → `MyCloud`.
pub fn type_name(name: &str) -> String {
    let mut out: String = name
        .split('-')
        .filter(|part| !part.is_empty())
        .map(|part| {
            let mut chars = part.chars();
            chars.next().map_or_else(String::new, |first| {
                first.to_ascii_uppercase().to_string() + chars.as_str()
            })
        })
        .collect();
    if !out.ends_with("Cloud") {
        out.push_str("Cloud");
    }
    out
}

/// The version requirement of `dependency` in the `[workspace.dependencies]` of `manifest`.
pub fn workspace_dependency_version(manifest: &str, dependency: &str) -> Option<String> {
    let section = manifest.split("[workspace.dependencies]").nth(1)?;
    let section = section.split("\n[").next().unwrap_or(section);
    let line = section.lines().find(|line| {
        line.split_once('=')
            .is_some_and(|(key, _)| key.trim() == dependency)
    })?;
    let value = line.split_once('=')?.1.trim();
    let quoted = match value.strip_prefix('"') {
        Some(rest) => rest,
        None => value.split("version = \"").nth(1)?,
    };
    quoted.split('"').next().map(str::to_owned)
}

/// `path` without `.` and `..` components (lexically; `path` is absolute).
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// How the crate in `dir` refers to the workspace `sdk`: a relative path when `dir` is inside the workspace's
/// parent directory (inside or next to the workspace), else the absolute path. Both are absolute.
pub fn sdk_path_from(dir: &Path, sdk: &Path) -> PathBuf {
    let (dir, sdk) = (normalize(dir), normalize(sdk));
    let Some(parent) = sdk.parent().filter(|p| dir.starts_with(p)) else {
        return sdk;
    };
    let below = dir.strip_prefix(parent).unwrap_or(&dir);
    let mut relative = PathBuf::new();
    for _ in below.components() {
        relative.push("..");
    }
    relative.join(sdk.strip_prefix(parent).unwrap_or(&sdk))
}

/// Where the SDK crates come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sdk {
    /// A workspace checkout, as the path written in Cargo.toml.
    Path(PathBuf),
    /// A published version.
    Version(String),
}

/// The dependency lines of `crates` on `sdk`.
pub fn sdk_dependencies(sdk: &Sdk, crates: &[&str]) -> String {
    let mut out = String::new();
    for krate in crates {
        let _ = match sdk {
            Sdk::Path(root) => writeln!(
                out,
                "{krate} = {{ path = \"{}\" }}",
                root.join(krate).display()
            ),
            Sdk::Version(version) => writeln!(out, "{krate} = \"{version}\""),
        };
    }
    out.trim_end().to_owned()
}

/// `template` with every `{{key}}` of `vars` filled in.
///
/// # Errors
///
/// A `{{...}}` left that no variable fills.
pub fn render(path: &str, template: &str, vars: &[(&str, String)]) -> anyhow::Result<String> {
    let mut out = template.to_owned();
    for (key, value) in vars {
        out = out.replace(&format!("{{{{{key}}}}}"), value);
    }
    if let Some(at) = out.find("{{") {
        let rest = &out[at..];
        bail!(
            "template {path} has an unknown placeholder {}",
            &rest[..rest.find("}}").map_or(rest.len().min(40), |end| end + 2)]
        );
    }
    Ok(out)
}

/// Refuse a `dir` that is a file or a non-empty directory.
fn check_dir(dir: &Path) -> anyhow::Result<()> {
    if dir.is_file() {
        bail!(
            "{} is a file; give --dir a new or empty directory",
            dir.display()
        );
    }
    if dir.is_dir()
        && std::fs::read_dir(dir)
            .with_context(|| format!("reading {}", dir.display()))?
            .next()
            .is_some()
    {
        bail!(
            "{} is not empty; give --dir a new or empty directory (nothing was written)",
            dir.display()
        );
    }
    Ok(())
}

/// Write the provider crate `args` describes; returns the files written.
///
/// # Errors
///
/// A bad name, a non-empty directory, an SDK workspace without a Cargo.toml, or an I/O error.
pub fn generate(args: &NewProviderArgs) -> anyhow::Result<Vec<PathBuf>> {
    validate_name(&args.name).map_err(anyhow::Error::msg)?;
    let dir = paths::absolute(&args.dir);
    check_dir(&dir)?;
    let workspace = match &args.sdk_path {
        Some(path) => paths::absolute(path),
        None => paths::workspace_root(),
    };
    let manifest = std::fs::read_to_string(workspace.join("Cargo.toml")).with_context(|| {
        format!(
            "reading the SDK workspace's Cargo.toml in {}",
            workspace.display()
        )
    })?;
    let version = |dependency: &str| {
        workspace_dependency_version(&manifest, dependency).with_context(|| {
            format!(
                "the SDK workspace's Cargo.toml has no version of {dependency} in [workspace.dependencies]"
            )
        })
    };
    let sdk = match &args.sdk_version {
        Some(version) => Sdk::Version(version.clone()),
        None => Sdk::Path(sdk_path_from(&dir, &workspace)),
    };
    let vars = [
        ("name", args.name.clone()),
        ("crate_ident", args.name.replace('-', "_")),
        ("type_name", type_name(&args.name)),
        (
            "env_prefix",
            args.name.replace('-', "_").to_ascii_uppercase(),
        ),
        ("sdk_dependencies", sdk_dependencies(&sdk, SDK_CRATES)),
        (
            "sdk_dev_dependencies",
            sdk_dependencies(&sdk, SDK_DEV_CRATES),
        ),
        ("k8s_openapi_version", version("k8s-openapi")?),
        ("tokio_version", version("tokio")?),
        ("async_trait_version", version("async-trait")?),
        ("clap_version", version("clap")?),
    ];
    let rendered = TEMPLATES
        .iter()
        .map(|(path, template)| Ok((*path, render(path, template, &vars)?)))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let mut written = Vec::new();
    for (path, text) in rendered {
        let file = dir.join(path);
        if let Some(parent) = file.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
        }
        std::fs::write(&file, text).with_context(|| format!("writing {}", file.display()))?;
        written.push(file);
    }
    // By path, start from the versions the SDK is tested with (cargo adds the new crate and drops the rest).
    if matches!(sdk, Sdk::Path(_)) && workspace.join("Cargo.lock").is_file() {
        let lock = dir.join("Cargo.lock");
        std::fs::copy(workspace.join("Cargo.lock"), &lock)
            .with_context(|| format!("writing {}", lock.display()))?;
        written.push(lock);
    }
    Ok(written)
}

/// Run `cargo xtask new-provider`.
///
/// # Errors
///
/// See [`generate`].
pub fn run(args: &NewProviderArgs) -> anyhow::Result<()> {
    let written = generate(args)?;
    let dir = paths::absolute(&args.dir);
    // The templates are formatted for a short name; rustfmt lays the long ones out (best effort: without rustfmt
    // the crate is only less tidy).
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let formatted = std::process::Command::new(cargo)
        .arg("fmt")
        .arg("--manifest-path")
        .arg(dir.join("Cargo.toml"))
        .status();
    if !formatted.is_ok_and(|status| status.success()) {
        eprintln!(
            "note: `cargo fmt` did not run on {}; the crate is complete but not formatted",
            dir.display()
        );
    }
    println!(
        "wrote the {} provider crate in {}:",
        args.name,
        dir.display()
    );
    for file in &written {
        println!("  {}", file.strip_prefix(&dir).unwrap_or(file).display());
    }
    println!(
        "next: cd {} && cargo test (the conformance suite), then replace the in-memory Backend in src/lib.rs with \
         your cloud's SDK; see docs/vendor-guide.md",
        dir.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_dns_labels_starting_with_a_letter() {
        for good in [
            "acme",
            "acme-cloud",
            "a",
            "x1",
            "my-cloud-2",
            &"a".repeat(63),
        ] {
            assert_eq!(validate_name(good), Ok(()), "{good}");
        }
        for (bad, says) in [
            ("", "0 characters"),
            (&"a".repeat(64) as &str, "64 characters"),
            ("Acme", "'A' is not allowed"),
            ("acme_cloud", "'_' is not allowed"),
            ("acme.cloud", "'.' is not allowed"),
            ("1acme", "starts with a letter"),
            ("-acme", "starts with a letter"),
            ("acme-", "ending with a letter or digit"),
            ("fn", "reserved"),
            ("external", "reserved"),
            ("ccm-core", "reserved"),
        ] {
            let err = validate_name(bad).expect_err(bad);
            assert!(err.contains(says), "{bad}: {err}");
            assert!(err.contains(&format!("{bad:?}")), "{bad}: {err}");
        }
    }

    #[test]
    fn type_names() {
        assert_eq!(type_name("acme"), "AcmeCloud");
        assert_eq!(type_name("my-cloud"), "MyCloud");
        assert_eq!(type_name("x1-y"), "X1YCloud");
    }

    #[test]
    fn versions_come_from_the_workspace_manifest() {
        let manifest = "[package]\ntokio = \"0\"\n[workspace.dependencies]\ntokio = { version = \"1.48\", \
                        features = [\"rt\"] }\nasync-trait = \"0.1\"\nasync-trait-x = \"9\"\n[profile.dev]\nclap = \"4\"\n";
        let v = |d| workspace_dependency_version(manifest, d);
        assert_eq!(v("tokio").as_deref(), Some("1.48"));
        assert_eq!(v("async-trait").as_deref(), Some("0.1"));
        assert_eq!(v("clap"), None, "outside [workspace.dependencies]");
        assert_eq!(v("serde"), None);
        let real = std::fs::read_to_string(paths::workspace_root().join("Cargo.toml")).unwrap();
        for dependency in ["k8s-openapi", "tokio", "async-trait", "clap"] {
            assert!(
                workspace_dependency_version(&real, dependency).is_some(),
                "{dependency}"
            );
        }
    }

    #[test]
    fn sdk_paths_are_relative_inside_or_next_to_the_workspace() {
        let sdk = Path::new("/src/ccm-rs");
        let from = |dir: &str| sdk_path_from(Path::new(dir), sdk);
        assert_eq!(from("/src/acme"), PathBuf::from("../ccm-rs"));
        assert_eq!(from("/src/vendors/acme"), PathBuf::from("../../ccm-rs"));
        assert_eq!(
            from("/src/ccm-rs/providers/acme"),
            PathBuf::from("../../../ccm-rs")
        );
        assert_eq!(from("/src/x/../acme"), PathBuf::from("../ccm-rs"));
        assert_eq!(from("/tmp/acme"), PathBuf::from("/src/ccm-rs"));
    }

    #[test]
    fn dependencies_by_path_or_version() {
        let by_path = sdk_dependencies(&Sdk::Path("../ccm-rs".into()), SDK_CRATES);
        assert_eq!(
            by_path,
            "ccm-core = { path = \"../ccm-rs/ccm-core\" }\nccm-app = { path = \"../ccm-rs/ccm-app\" }"
        );
        let by_version = sdk_dependencies(&Sdk::Version("0.2.0".into()), SDK_DEV_CRATES);
        assert_eq!(by_version, "ccm-conformance = \"0.2.0\"");
    }

    #[test]
    fn render_fills_every_placeholder_or_fails() {
        let vars = [("name", "acme".to_owned())];
        assert_eq!(render("t", "a {{name}} b", &vars).unwrap(), "a acme b");
        let err = render("src/x.rs", "{{name}} {{nope}} x", &vars).unwrap_err();
        assert_eq!(
            err.to_string(),
            "template src/x.rs has an unknown placeholder {{nope}}"
        );
        // Rust's own braces are left alone.
        assert_eq!(
            render("t", "format!(\"{x}\") {}", &vars).unwrap(),
            "format!(\"{x}\") {}"
        );
    }

    /// The Cargo.toml of `docs/vendor-guide.md` is what the template writes for a published release: each of its
    /// lines is a line of the rendered template.
    #[test]
    fn the_guide_cargo_toml_is_the_templates() {
        let guide =
            std::fs::read_to_string(paths::workspace_root().join("docs/vendor-guide.md")).unwrap();
        let block = guide
            .split("```toml\n")
            .nth(1)
            .and_then(|rest| rest.split("```").next())
            .expect("the guide has a toml block");
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("acme");
        let mut published = args("acme", &dir);
        published.sdk_version = Some("0.1.0".to_owned());
        generate(&published).unwrap();
        let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
        let lines: Vec<&str> = manifest.lines().collect();
        let mut checked = 0;
        for line in block.lines().filter(|l| !l.trim().is_empty()) {
            assert!(
                lines.contains(&line),
                "docs/vendor-guide.md's Cargo.toml line {line:?} is not in the template:\n{manifest}"
            );
            checked += 1;
        }
        assert!(checked >= 9, "{block}");
    }

    /// The template, and the guide's second toml block, carry the workspace's `[profile.release]` (the profile the
    /// memory figures were measured with), line by line.
    #[test]
    fn the_template_carries_the_workspaces_release_profile() {
        let section = |text: &str| -> Vec<String> {
            text.split("[profile.release]\n")
                .nth(1)
                .expect("a [profile.release] section")
                .lines()
                .take_while(|l| !l.starts_with('[') && !l.starts_with("```"))
                .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
                .map(str::to_owned)
                .collect()
        };
        let root = paths::workspace_root();
        let workspace = section(&std::fs::read_to_string(root.join("Cargo.toml")).unwrap());
        assert!(
            workspace.iter().any(|l| l.starts_with("lto")),
            "{workspace:?}"
        );
        let template = section(include_str!("../templates/new-provider/Cargo.toml"));
        assert_eq!(template, workspace);
        let guide = section(&std::fs::read_to_string(root.join("docs/vendor-guide.md")).unwrap());
        assert_eq!(guide, workspace);
    }

    fn args(name: &str, dir: &Path) -> NewProviderArgs {
        NewProviderArgs {
            name: name.to_owned(),
            dir: dir.to_owned(),
            sdk_version: None,
            sdk_path: None,
        }
    }

    #[test]
    fn generates_every_file_and_refuses_a_non_empty_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("acme-cloud");
        let written = generate(&args("acme-cloud", &dir)).unwrap();
        let names: Vec<_> = written
            .iter()
            .map(|f| f.strip_prefix(&dir).unwrap().display().to_string())
            .collect();
        assert_eq!(
            names,
            [
                "Cargo.toml",
                "README.md",
                "src/lib.rs",
                "src/main.rs",
                "tests/conformance.rs",
                "Cargo.lock"
            ]
        );
        let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
        assert!(manifest.contains("name = \"acme-cloud\""), "{manifest}");
        // Relative when the temporary directory is next to the workspace (a checkout under /tmp), else absolute.
        let sdk = sdk_path_from(&dir, &paths::workspace_root()).join("ccm-core");
        assert!(
            manifest.contains(&format!("ccm-core = {{ path = \"{}\" }}", sdk.display())),
            "{manifest}"
        );
        assert!(manifest.contains("\"v1_36\""), "{manifest}");
        let lib = std::fs::read_to_string(dir.join("src/lib.rs")).unwrap();
        assert!(lib.contains("pub struct AcmeCloud {"), "{lib}");
        assert!(lib.contains("env = \"ACME_CLOUD_REGION\""), "{lib}");
        let main = std::fs::read_to_string(dir.join("src/main.rs")).unwrap();
        assert!(main.contains("use acme_cloud::{"), "{main}");

        let err = generate(&args("acme-cloud", &dir)).unwrap_err();
        assert!(err.to_string().contains("is not empty"), "{err}");
        let err = generate(&args("Acme", &tmp.path().join("other"))).unwrap_err();
        assert!(err.to_string().contains("invalid provider name"), "{err}");
        assert!(!tmp.path().join("other").exists());

        let published = tmp.path().join("published");
        let mut by_version = args("acme", &published);
        by_version.sdk_version = Some("0.1.0".to_owned());
        let written = generate(&by_version).unwrap();
        assert!(!written.iter().any(|f| f.ends_with("Cargo.lock")));
        let manifest = std::fs::read_to_string(published.join("Cargo.toml")).unwrap();
        assert!(manifest.contains("ccm-app = \"0.1.0\""), "{manifest}");
        assert!(
            manifest.contains("ccm-conformance = \"0.1.0\""),
            "{manifest}"
        );
    }
}
