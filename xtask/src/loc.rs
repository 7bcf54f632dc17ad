//! `loc`: how much of each controller crate is plumbing and how much is decision, and how big the runtime is.
//!
//! A controller crate's `src/` files are counted up to their first `#[cfg(test)]` (files named `tests.rs` or
//! under a `tests/` folder are left out), non-blank, non-comment lines only. A whole file is **plumbing** when one
//! of those lines does I/O or runtime wiring (see [`PLUMBING_MARKERS`]), else **decision**. `--runtime` prints
//! every line before the first `#[cfg(test)]` of the runtime's crates instead (docs/architecture.md).

use std::path::{Path, PathBuf};

use anyhow::Context as _;

use crate::paths::workspace_root;

/// The controller crates whose plumbing and decision lines are counted.
const CONTROLLER_CRATES: [&str; 3] = [
    "ccm-nodecontroller",
    "ccm-servicecontroller",
    "ccm-routecontroller",
];

/// The crates of the runtime, whose non-test lines `--runtime` counts.
const RUNTIME_CRATES: [&str; 6] = [
    "ccm-core",
    "ccm-nodecontroller",
    "ccm-servicecontroller",
    "ccm-routecontroller",
    "ccm-leaderelection",
    "ccm-app",
];

/// A code line containing one of these makes its file plumbing: I/O, async runtime wiring, metrics, Events or logs.
const PLUMBING_MARKERS: [&str; 14] = [
    "async ",
    ".await",
    "kube::",
    "tokio::",
    "Api<",
    "tracing::",
    "prometheus_client",
    "Recorder",
    "recorder",
    "info!",
    "warn!",
    "debug!",
    "error!",
    "trace!",
];

/// Arguments of `cargo xtask loc`.
#[derive(Debug, clap::Args)]
pub struct LocArgs {
    /// Print the non-test lines of the runtime's crates (every line before the first `#[cfg(test)]`) instead.
    #[arg(long)]
    runtime: bool,
    /// The workspace to count (default: this one), for example a checkout of another commit.
    #[arg(long)]
    root: Option<PathBuf>,
}

/// Lines of one file up to its first `#[cfg(test)]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct FileCount {
    /// Every line, blank and comment lines included.
    all: usize,
    /// Non-blank, non-comment lines.
    code: usize,
    /// Whether a code line carries a plumbing marker.
    plumbing: bool,
}

/// Counts `source` up to its first `#[cfg(test)]`.
fn count(source: &str) -> FileCount {
    let mut counted = FileCount::default();
    let mut in_block_comment = false;
    for line in source.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with("#[cfg(test)]") {
            break;
        }
        counted.all += 1;
        let Some(code) = code_of(trimmed, &mut in_block_comment) else {
            continue;
        };
        counted.code += 1;
        counted.plumbing |= PLUMBING_MARKERS.iter().any(|m| code.contains(m));
    }
    counted
}

/// The code on a trimmed line, `None` for a blank or comment-only line; tracks `/* ... */` across lines.
fn code_of<'a>(trimmed: &'a str, in_block_comment: &mut bool) -> Option<&'a str> {
    let mut rest = trimmed;
    if *in_block_comment {
        let end = rest.find("*/")?;
        *in_block_comment = false;
        rest = rest[end + 2..].trim_start();
    }
    if let Some(inner) = rest.strip_prefix("/*") {
        match inner.find("*/") {
            Some(end) => rest = inner[end + 2..].trim_start(),
            None => {
                *in_block_comment = true;
                return None;
            }
        }
    }
    (!rest.is_empty() && !rest.starts_with("//")).then_some(rest)
}

/// Whether a file is test code by its path: `tests.rs`, or anything under a `tests/` folder.
fn is_test_file(relative: &Path) -> bool {
    relative.file_name().is_some_and(|n| n == "tests.rs")
        || relative
            .parent()
            .is_some_and(|p| p.components().any(|c| c.as_os_str() == "tests"))
}

/// The `.rs` files under `dir`, sorted, test files left out.
fn source_files(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_owned()];
    while let Some(next) = pending.pop() {
        for entry in
            std::fs::read_dir(&next).with_context(|| format!("reading {}", next.display()))?
        {
            let path = entry?.path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "rs")
                && !is_test_file(path.strip_prefix(dir).unwrap_or(&path))
            {
                files.push(path);
            }
        }
    }
    files.sort();
    Ok(files)
}

/// The counts of every source file of `krate`'s `src/`.
fn crate_counts(root: &Path, krate: &str) -> anyhow::Result<Vec<(PathBuf, FileCount)>> {
    let src = root.join(krate).join("src");
    source_files(&src)?
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("reading {}", path.display()))?;
            let relative = path.strip_prefix(&src).unwrap_or(&path).to_owned();
            Ok((relative, count(&text)))
        })
        .collect()
}

/// Plumbing and decision lines of a crate's files.
fn split(counts: &[(PathBuf, FileCount)]) -> (usize, usize) {
    counts.iter().fold((0, 0), |(plumbing, decision), (_, c)| {
        if c.plumbing {
            (plumbing + c.code, decision)
        } else {
            (plumbing, decision + c.code)
        }
    })
}

/// Runs `cargo xtask loc`.
pub fn run(args: &LocArgs) -> anyhow::Result<()> {
    let root = args.root.clone().unwrap_or_else(workspace_root);
    if args.runtime {
        let mut total = 0;
        for krate in RUNTIME_CRATES {
            let lines: usize = crate_counts(&root, krate)?.iter().map(|(_, c)| c.all).sum();
            println!("{krate:<24} {lines:>7}");
            total += lines;
        }
        println!("{:<24} {total:>7}", "runtime");
        return Ok(());
    }
    println!("{:<24} {:>9} {:>9}", "crate", "plumbing", "decision");
    for krate in CONTROLLER_CRATES {
        let counts = crate_counts(&root, krate)?;
        let (plumbing, decision) = split(&counts);
        println!("{krate:<24} {plumbing:>9} {decision:>9}");
        for (file, c) in &counts {
            let kind = if c.plumbing { "plumbing" } else { "decision" };
            println!("  {:<30} {:>6} {kind}", file.display(), c.code);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_blanks_and_tests_are_not_counted() {
        let source = "//! A module.\n\n/// A function.\npub fn f() -> u8 {\n    // a comment\n    1 /* one */\n}\n\
                      /* a block\n   comment */\nconst X: u8 = 2;\n#[cfg(test)]\nmod tests { async fn t() {} }\n";
        assert_eq!(
            count(source),
            FileCount {
                all: 10,
                code: 4,
                plumbing: false
            }
        );
    }

    #[test]
    fn a_marker_on_a_code_line_makes_the_file_plumbing() {
        assert!(count("async fn f() {}\n").plumbing);
        assert!(count("fn f() { g().await }\n").plumbing);
        assert!(count("use kube::Api;\n").plumbing);
        assert!(count("fn f() { tracing::info!(\"x\") }\n").plumbing);
        assert!(count("fn f() { warn!(\"x\") }\n").plumbing);
        assert!(count("fn f(r: &EventRecorder) {}\n").plumbing);
        // Markers in comments, or after the tests, do not count.
        assert!(!count("/// Called from an async reconcile.\nfn f() {}\n").plumbing);
        assert!(!count("/* tokio::spawn */\nfn f() {}\n").plumbing);
        assert!(!count("fn f() {}\n#[cfg(test)]\nmod tests { async fn t() {} }\n").plumbing);
    }

    #[test]
    fn test_files_are_recognised_by_path() {
        assert!(is_test_file(Path::new("predicates/tests.rs")));
        assert!(is_test_file(Path::new("tests.rs")));
        assert!(is_test_file(Path::new("tests/support.rs")));
        assert!(!is_test_file(Path::new("plan.rs")));
        assert!(!is_test_file(Path::new("tests_support.rs")));
    }

    #[test]
    fn split_adds_each_file_to_its_side() {
        let file = |code, plumbing| {
            (
                PathBuf::from("f.rs"),
                FileCount {
                    all: code,
                    code,
                    plumbing,
                },
            )
        };
        assert_eq!(
            split(&[file(10, true), file(3, false), file(4, false)]),
            (10, 7)
        );
        assert_eq!(split(&[]), (0, 0));
    }

    #[test]
    fn the_controller_crates_are_counted() {
        for krate in CONTROLLER_CRATES {
            let counts = crate_counts(&workspace_root(), krate).expect("a controller crate");
            assert!(
                counts.iter().any(|(f, _)| f == Path::new("lib.rs")),
                "{krate}"
            );
        }
    }
}
