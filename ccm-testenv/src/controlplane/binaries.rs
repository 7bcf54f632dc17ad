//! Where the server binaries are: `<target dir>/controlplane/bin`, or `$CCM_CONTROLPLANE_BIN`.

use std::path::{Path, PathBuf};

use super::*;

/// Paths of the server binaries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binaries {
    /// The etcd binary.
    pub etcd: PathBuf,
    /// The kube-apiserver binary.
    pub kube_apiserver: PathBuf,
}

impl Binaries {
    /// The binaries named `etcd` and `kube-apiserver` in `dir` (existence is not checked).
    pub fn in_dir(dir: &Path) -> Self {
        Self {
            etcd: dir.join("etcd"),
            kube_apiserver: dir.join("kube-apiserver"),
        }
    }

    /// Finds the binaries built by `cargo xtask controlplane build`.
    ///
    /// Looks in `$CCM_CONTROLPLANE_BIN` if set; otherwise in `controlplane/bin` below each
    /// ancestor directory of the running executable (test binaries and xtask live in the target
    /// directory), then below `$CARGO_TARGET_DIR`, then below the workspace's `target`.
    ///
    /// # Errors
    /// [`ControlPlaneError::BinariesMissing`] naming where they were looked for.
    pub fn find() -> Result<Self, ControlPlaneError> {
        if let Some(dir) = std::env::var_os(BIN_DIR_ENV_VAR) {
            let binaries = Self::in_dir(Path::new(&dir));
            binaries.verify()?;
            return Ok(binaries);
        }
        let candidates = Self::candidate_dirs();
        for dir in &candidates {
            let binaries = Self::in_dir(dir);
            if binaries.verify().is_ok() {
                return Ok(binaries);
            }
        }
        Err(ControlPlaneError::BinariesMissing {
            missing: candidates
                .iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
        })
    }

    fn candidate_dirs() -> Vec<PathBuf> {
        let mut dirs = Vec::new();
        if let Ok(exe) = std::env::current_exe() {
            for ancestor in exe.ancestors().skip(1) {
                let dir = ancestor.join("controlplane").join("bin");
                if !dirs.contains(&dir) {
                    dirs.push(dir);
                }
            }
        }
        if let Some(target) = std::env::var_os("CARGO_TARGET_DIR") {
            dirs.push(Path::new(&target).join("controlplane").join("bin"));
        }
        let workspace_target = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join("target")
            .join("controlplane")
            .join("bin");
        dirs.push(workspace_target);
        dirs
    }

    /// Checks that both binaries exist.
    ///
    /// # Errors
    /// [`ControlPlaneError::BinariesMissing`] listing the missing ones.
    pub fn verify(&self) -> Result<(), ControlPlaneError> {
        let missing: Vec<String> = [&self.etcd, &self.kube_apiserver]
            .into_iter()
            .filter(|p| !p.is_file())
            .map(|p| p.display().to_string())
            .collect();
        if missing.is_empty() {
            Ok(())
        } else {
            Err(ControlPlaneError::BinariesMissing {
                missing: missing.join(", "),
            })
        }
    }
}
