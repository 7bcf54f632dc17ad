//! Locations in the workspace that the tasks use.

use std::path::{Path, PathBuf};

/// The workspace root (the parent of the `xtask` crate).
pub fn workspace_root() -> PathBuf {
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest_dir
        .parent()
        .map_or_else(|| manifest_dir.join(".."), Path::to_path_buf)
}

/// Cargo's target directory: `$CARGO_TARGET_DIR` if set, else `<workspace>/target`.
pub fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => absolute(Path::new(&dir)),
        None => workspace_root().join("target"),
    }
}

/// The Go module that builds the control-plane binaries.
pub fn go_module_dir() -> PathBuf {
    workspace_root().join("xtask").join("go")
}

/// Where `controlplane build` puts binaries (and where `ccm-testenv` looks for them).
pub fn controlplane_bin_dir() -> PathBuf {
    target_dir().join("controlplane").join("bin")
}

/// Where `controlplane build` puts the tools the tests run besides the control plane (helm).
pub fn tools_bin_dir() -> PathBuf {
    target_dir().join("tools").join("bin")
}

/// Default directory of a control plane started by `controlplane start`.
pub fn default_run_dir() -> PathBuf {
    target_dir().join("controlplane").join("run")
}

/// `path` made absolute against the current directory (without resolving symlinks).
pub fn absolute(path: &Path) -> PathBuf {
    if path.is_absolute() {
        path.to_owned()
    } else {
        std::env::current_dir()
            .map(|cwd| cwd.join(path))
            .unwrap_or_else(|_| path.to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workspace_layout() {
        let root = workspace_root();
        assert!(root.join("Cargo.toml").is_file());
        assert!(go_module_dir().join("go.mod").is_file());
        assert!(controlplane_bin_dir().ends_with("controlplane/bin"));
        assert!(default_run_dir().ends_with("controlplane/run"));
        assert!(tools_bin_dir().ends_with("tools/bin"));
    }

    #[test]
    fn absolute_paths() {
        assert_eq!(absolute(Path::new("/x/y")), PathBuf::from("/x/y"));
        let rel = absolute(Path::new("x"));
        assert!(rel.is_absolute());
        assert!(rel.ends_with("x"));
    }
}
