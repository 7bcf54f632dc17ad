//! `cargo xtask image`: a container image of the reference CCM (`examples --example reference-ccm`) as an OCI
//! image layout in `<target dir>/image/oci`, built offline with nothing installed beyond the Rust toolchain.
//!
//! The image is "FROM scratch": one layer holding the binary (a static release build:
//! `-C target-feature=+crt-static` on the host's `*-linux-gnu` target), the host's CA certificates and
//! `/etc/passwd` + `/etc/group` entries for the non-root user 65532, which it runs as. The layout (tar layer,
//! config, manifest, index) is built with the `tar` and `oci-spec` crates ([`oci`]); the same binary gives the
//! same digest.
//!
//! Then the image is checked: its layer is unpacked (with the `tar` crate) into an empty directory and the binary
//! run there
//! (`chroot` as user 65532 when xtask runs as root, else `unshare --map-root-user --root`) with `--version`
//! and with `doctor --manifest -` on `deploy/deployment.yaml`, which must find nothing.

pub mod oci;

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use clap::Args;
use tokio::io::AsyncWriteExt as _;

use crate::paths;
use crate::process::{self, Interrupt, Stopwatch};

use oci::Entry;

/// Arguments of `cargo xtask image`.
#[derive(Debug, Args, Default)]
pub struct ImageArgs {
    /// Build and write the layout only; do not run the image's binary in an unpacked root filesystem.
    #[arg(long)]
    pub no_check: bool,
}

/// The example the image ships.
pub const EXAMPLE: &str = "reference-ccm";
/// Where the binary lives in the image (the entrypoint).
pub const ENTRYPOINT: &str = "/usr/local/bin/reference-ccm";
/// The user and group the image runs as (the deployment's `runAsUser`).
pub const USER: &str = "65532:65532";
/// Where the CA bundle goes in the image (Debian's path, which rustls-native-certs and Go look at).
pub const CA_BUNDLE_PATH: &str = "etc/ssl/certs/ca-certificates.crt";
/// CA bundles of the build machine, in order of preference (Debian/Ubuntu, Fedora/RHEL, Alpine/macOS-like).
const HOST_CA_BUNDLES: &[&str] = &[
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/cert.pem",
];
/// The passwd entries: root (owner of every file) and the runtime user.
pub const PASSWD: &str = "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n";
/// The group entries.
pub const GROUP: &str = "root:x:0:\nnonroot:x:65532:\n";

/// The image directory, `<target dir>/image`.
pub fn image_dir() -> PathBuf {
    paths::target_dir().join("image")
}

/// The host target triple from `rustc -vV`.
pub fn parse_host_triple(rustc_version: &str) -> Option<&str> {
    rustc_version
        .lines()
        .find_map(|line| line.strip_prefix("host: "))
        .map(str::trim)
}

/// The OCI architecture of a `*-linux-gnu` target, which can link a static binary with `+crt-static`.
///
/// # Errors
/// For other targets (the image is a Linux image; musl targets are not installed offline).
pub fn oci_architecture(triple: &str) -> anyhow::Result<&'static str> {
    if !triple.ends_with("-linux-gnu") {
        bail!(
            "the image needs a *-linux-gnu host target for a static build (+crt-static), this host is {triple}: \
             build the image on Linux"
        );
    }
    match triple.split('-').next() {
        Some("x86_64") => Ok("amd64"),
        Some("aarch64") => Ok("arm64"),
        _ => bail!(
            "no OCI architecture known for {triple}: add it to oci_architecture in xtask/src/image.rs"
        ),
    }
}

/// Whether an ELF64 little-endian executable has no program interpreter (`PT_INTERP`): it runs without a
/// dynamic loader or libc in the root filesystem.
///
/// # Errors
/// When `elf` is not a 64-bit little-endian ELF file or its program headers are cut off.
pub fn is_static_elf(elf: &[u8]) -> anyhow::Result<bool> {
    const PT_INTERP: u32 = 3;
    if elf.len() < 64 || &elf[..4] != b"\x7fELF" || elf[4] != 2 || elf[5] != 1 {
        bail!("not a 64-bit little-endian ELF file");
    }
    let u16_at = |at: usize| u16::from_le_bytes([elf[at], elf[at + 1]]);
    let mut offset_bytes = [0u8; 8];
    offset_bytes.copy_from_slice(&elf[0x20..0x28]);
    let ph_offset = usize::try_from(u64::from_le_bytes(offset_bytes))?;
    let ph_size = usize::from(u16_at(0x36));
    let ph_count = usize::from(u16_at(0x38));
    for index in 0..ph_count {
        let at = ph_offset + index * ph_size;
        let Some(header) = elf.get(at..at + 4) else {
            bail!("the ELF program headers are cut off");
        };
        if u32::from_le_bytes([header[0], header[1], header[2], header[3]]) == PT_INTERP {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The layer's entries: directories first, then the files, each under its directory.
pub fn layer_entries(binary: Vec<u8>, ca_bundle: Vec<u8>) -> Vec<Entry> {
    let dir = |path: &str| Entry::Dir {
        path: path.to_owned(),
        mode: 0o755,
    };
    let file = |path: &str, mode: u32, data: Vec<u8>| Entry::File {
        path: path.to_owned(),
        mode,
        data,
    };
    vec![
        dir("etc"),
        file("etc/group", 0o644, GROUP.as_bytes().to_vec()),
        file("etc/passwd", 0o644, PASSWD.as_bytes().to_vec()),
        dir("etc/ssl"),
        dir("etc/ssl/certs"),
        file(CA_BUNDLE_PATH, 0o644, ca_bundle),
        dir("usr"),
        dir("usr/local"),
        dir("usr/local/bin"),
        file(ENTRYPOINT.trim_start_matches('/'), 0o755, binary),
    ]
}

/// The image config of the reference CCM at `version`.
pub fn image_config(architecture: &str, version: &str) -> oci::ImageConfig {
    oci::ImageConfig {
        architecture: architecture.to_owned(),
        user: USER.to_owned(),
        entrypoint: vec![ENTRYPOINT.to_owned()],
        env: vec![
            "PATH=/usr/local/bin".to_owned(),
            format!("SSL_CERT_FILE=/{CA_BUNDLE_PATH}"),
        ],
        labels: vec![
            (
                "org.opencontainers.image.title".to_owned(),
                "reference-ccm".to_owned(),
            ),
            (
                "org.opencontainers.image.description".to_owned(),
                "The reference cloud controller manager of ccm-rs on its fake cloud".to_owned(),
            ),
            (
                "org.opencontainers.image.version".to_owned(),
                version.to_owned(),
            ),
            (
                "org.opencontainers.image.licenses".to_owned(),
                "Apache-2.0".to_owned(),
            ),
        ],
    }
}

async fn host_triple(interrupt: &Interrupt) -> anyhow::Result<String> {
    interrupt.check()?;
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let output = tokio::process::Command::new(&rustc)
        .arg("-vV")
        .output()
        .await
        .context("cannot run `rustc -vV`")?;
    let text = String::from_utf8_lossy(&output.stdout);
    parse_host_triple(&text)
        .map(str::to_owned)
        .with_context(|| format!("`rustc -vV` printed no host line: {text}"))
}

fn read_ca_bundle() -> anyhow::Result<Vec<u8>> {
    for path in HOST_CA_BUNDLES {
        if let Ok(data) = std::fs::read(path) {
            return Ok(data);
        }
    }
    bail!(
        "no CA certificate bundle on this machine (looked at {}): install the ca-certificates package \
         (apt-get install ca-certificates)",
        HOST_CA_BUNDLES.join(", ")
    )
}

/// Builds the static binary; returns its path.
async fn build_binary(triple: &str, interrupt: &Interrupt) -> anyhow::Result<PathBuf> {
    let mut rustflags = std::env::var("RUSTFLAGS").unwrap_or_default();
    if !rustflags.is_empty() {
        rustflags.push(' ');
    }
    rustflags.push_str("-C target-feature=+crt-static");
    let mut command = process::cargo();
    // With --target, RUSTFLAGS reach the target's artifacts only, not build scripts and proc macros.
    command
        .args(["build", "--release", "-p", "examples", "--example", EXAMPLE])
        .args(["--target", triple])
        .env("RUSTFLAGS", rustflags);
    process::run(command, interrupt, "").await?;
    Ok(paths::target_dir()
        .join(triple)
        .join("release")
        .join("examples")
        .join(EXAMPLE))
}

fn write_layout(dir: &Path, layout: &oci::Layout) -> anyhow::Result<()> {
    if dir.exists() {
        std::fs::remove_dir_all(dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    let blobs = dir.join("blobs").join("sha256");
    std::fs::create_dir_all(&blobs).with_context(|| format!("creating {}", blobs.display()))?;
    for blob in &layout.blobs {
        let path = blobs.join(blob.file_name());
        std::fs::write(&path, &blob.data).with_context(|| format!("writing {}", path.display()))?;
    }
    std::fs::write(dir.join("oci-layout"), &layout.oci_layout)?;
    std::fs::write(dir.join("index.json"), &layout.index)?;
    Ok(())
}

/// The path of `name` on `$PATH` or in the sbin directories (often not on a user's `PATH`): the child runs
/// with the image's environment, so the program is looked up here.
fn find_program(name: &str) -> anyhow::Result<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/bin", "/bin"].map(PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
        .with_context(|| {
            format!(
                "`{name}` not found on PATH or in /usr/sbin, /sbin: it runs the image's binary in the unpacked \
                 root filesystem (chroot comes with coreutils, unshare with util-linux)"
            )
        })
}

/// Runs `argv` inside `root` as the image would (user 65532 with chroot as root; mapped root with unshare
/// otherwise), feeding `stdin`; returns the exit code and output.
async fn run_in_root(
    root: &Path,
    argv: &[&str],
    stdin: &[u8],
    interrupt: &Interrupt,
) -> anyhow::Result<(Option<i32>, String)> {
    interrupt.check()?;
    let as_root = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix("Uid:"))
                .and_then(|ids| ids.split_whitespace().nth(1).map(|euid| euid == "0"))
        })
        .unwrap_or(false);
    let mut command = if as_root {
        let mut command = tokio::process::Command::new(find_program("chroot")?);
        command.arg(format!("--userspec={USER}")).arg(root);
        command
    } else {
        let mut command = tokio::process::Command::new(find_program("unshare")?);
        command
            .arg("--map-root-user")
            .arg(format!("--root={}", root.display()));
        command
    };
    // The image's environment, not the build machine's (the config's Env).
    command
        .args(argv)
        .env_clear()
        .env("PATH", "/usr/local/bin")
        .env("SSL_CERT_FILE", format!("/{CA_BUNDLE_PATH}"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let shown = process::display_command(&command);
    let mut child = command
        .spawn()
        .with_context(|| format!("cannot run `{shown}`"))?;
    if let Some(mut input) = child.stdin.take() {
        input.write_all(stdin).await?;
    }
    let output = child.wait_with_output().await?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    Ok((output.status.code(), text))
}

/// Unpacks the layer into an empty directory and runs the binary there.
async fn check_image(layer: &Path, version: &str, interrupt: &Interrupt) -> anyhow::Result<()> {
    let root = image_dir().join("rootfs-check");
    if root.exists() {
        std::fs::remove_dir_all(&root).with_context(|| format!("removing {}", root.display()))?;
    }
    std::fs::create_dir_all(&root)?;
    interrupt.check()?;
    let file =
        std::fs::File::open(layer).with_context(|| format!("opening {}", layer.display()))?;
    let mut archive = tar::Archive::new(std::io::BufReader::new(file));
    // Owners are not kept (the check may run unprivileged); permission bits are.
    archive.set_preserve_permissions(true);
    archive
        .unpack(&root)
        .with_context(|| format!("unpacking {} into {}", layer.display(), root.display()))?;

    let (code, output) = run_in_root(&root, &[ENTRYPOINT, "--version"], b"", interrupt).await?;
    if code != Some(0) || !output.contains(version) {
        bail!(
            "`{ENTRYPOINT} --version` in the image's root filesystem failed ({code:?}): {output}"
        );
    }
    eprintln!("image check: {}", output.trim());

    let manifest_path = paths::workspace_root()
        .join("deploy")
        .join("deployment.yaml");
    let manifest = std::fs::read(&manifest_path)
        .with_context(|| format!("reading {}", manifest_path.display()))?;
    let argv = [ENTRYPOINT, "doctor", "--manifest", "-"];
    let (code, output) = run_in_root(&root, &argv, &manifest, interrupt).await?;
    if code != Some(0) {
        bail!(
            "`{}` on deploy/deployment.yaml in the image's root filesystem failed ({code:?}): {output}",
            argv.join(" ")
        );
    }
    eprintln!("image check: doctor --manifest deploy/deployment.yaml: no findings");
    std::fs::remove_dir_all(&root).with_context(|| format!("removing {}", root.display()))?;
    Ok(())
}

/// Runs `cargo xtask image`.
///
/// # Errors
/// If the build fails, the binary is not static, no CA bundle is found, or the check fails.
pub async fn run(args: &ImageArgs, interrupt: &Interrupt) -> anyhow::Result<()> {
    let stopwatch = Stopwatch::start();
    let triple = host_triple(interrupt).await?;
    let architecture = oci_architecture(&triple)?;
    let binary_path = build_binary(&triple, interrupt).await?;
    let binary = std::fs::read(&binary_path)
        .with_context(|| format!("reading {}", binary_path.display()))?;
    if !is_static_elf(&binary).with_context(|| binary_path.display().to_string())? {
        bail!(
            "{} is dynamically linked although it was built with +crt-static",
            binary_path.display()
        );
    }
    let version = env!("CARGO_PKG_VERSION");
    let binary_size = binary.len();
    let layer = oci::tar(&layer_entries(binary, read_ca_bundle()?), 0)?;
    let layout = oci::layout(layer, &image_config(architecture, version), version)?;
    let dir = image_dir().join("oci");
    write_layout(&dir, &layout)?;
    let layer_path = dir
        .join("blobs")
        .join("sha256")
        .join(layout.blobs[0].file_name());
    eprintln!(
        "wrote the OCI image layout {} ({} linux/{architecture}, binary {:.1} MiB, layer {:.1} MiB) in {}",
        dir.display(),
        version,
        binary_size as f64 / 1_048_576.0,
        layout.blobs[0].data.len() as f64 / 1_048_576.0,
        process::seconds(stopwatch.elapsed())
    );
    std::fs::write(
        image_dir().join("digest"),
        format!("{}\n", layout.manifest_digest),
    )?;
    if !args.no_check {
        check_image(&layer_path, version, interrupt).await?;
    }
    println!("{}", layout.manifest_digest);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_triples_and_architectures() {
        let text = "rustc 1.95.0\nbinary: rustc\nhost: x86_64-unknown-linux-gnu\nrelease: 1.95.0\n";
        assert_eq!(parse_host_triple(text), Some("x86_64-unknown-linux-gnu"));
        assert_eq!(parse_host_triple("rustc 1.95.0\n"), None);
        assert_eq!(
            oci_architecture("x86_64-unknown-linux-gnu").expect("amd64"),
            "amd64"
        );
        assert_eq!(
            oci_architecture("aarch64-unknown-linux-gnu").expect("arm64"),
            "arm64"
        );
        let err = oci_architecture("aarch64-apple-darwin").expect_err("not linux");
        assert!(
            err.to_string().contains("build the image on Linux"),
            "{err}"
        );
        assert!(oci_architecture("riscv64gc-unknown-linux-gnu").is_err());
    }

    /// A minimal ELF64 header with the given program header types.
    fn elf(types: &[u32]) -> Vec<u8> {
        let mut data = vec![0u8; 64];
        data[..4].copy_from_slice(b"\x7fELF");
        data[4] = 2;
        data[5] = 1;
        data[0x20..0x28].copy_from_slice(&64u64.to_le_bytes());
        data[0x36..0x38].copy_from_slice(&56u16.to_le_bytes());
        data[0x38..0x3a].copy_from_slice(&u16::try_from(types.len()).expect("few").to_le_bytes());
        for kind in types {
            let mut header = vec![0u8; 56];
            header[..4].copy_from_slice(&kind.to_le_bytes());
            data.extend(header);
        }
        data
    }

    #[test]
    fn static_binaries_have_no_interpreter() {
        assert!(is_static_elf(&elf(&[1, 1, 7])).expect("elf"));
        assert!(!is_static_elf(&elf(&[6, 3, 1])).expect("elf"));
        assert!(is_static_elf(b"#!/bin/sh\n").is_err());
        let mut cut = elf(&[1, 3]);
        cut.truncate(64 + 56);
        assert!(is_static_elf(&cut).is_err());
    }

    #[test]
    fn the_binary_running_now_is_classified() {
        // Whatever xtask was linked as, its own file parses as ELF on Linux.
        let exe = std::fs::read(std::env::current_exe().expect("exe")).expect("read");
        assert!(is_static_elf(&exe).is_ok());
    }

    #[test]
    fn the_layer_has_the_user_certificates_and_binary() {
        let entries = layer_entries(b"ELF".to_vec(), b"CERTS".to_vec());
        let files: Vec<(&str, u32)> = entries
            .iter()
            .filter_map(|entry| match entry {
                Entry::File { path, mode, .. } => Some((path.as_str(), *mode)),
                Entry::Dir { .. } => None,
            })
            .collect();
        assert_eq!(
            files,
            [
                ("etc/group", 0o644),
                ("etc/passwd", 0o644),
                (CA_BUNDLE_PATH, 0o644),
                ("usr/local/bin/reference-ccm", 0o755),
            ]
        );
        // Every file's directory comes before it.
        for (index, entry) in entries.iter().enumerate() {
            if let Entry::File { path, .. } = entry {
                let parent = path.rsplit_once('/').map(|(dir, _)| dir).expect("in a dir");
                assert!(
                    entries[..index]
                        .iter()
                        .any(|e| matches!(e, Entry::Dir { path, .. } if path == parent)),
                    "{path}"
                );
            }
        }
        assert!(PASSWD.contains(":65532:65532:"));
        assert!(GROUP.contains(":65532:"));
        let config = image_config("amd64", "0.1.0");
        assert_eq!(config.user, USER);
        assert_eq!(config.entrypoint, [ENTRYPOINT]);
        assert!(
            config
                .env
                .contains(&format!("SSL_CERT_FILE=/{CA_BUNDLE_PATH}"))
        );
    }
}
