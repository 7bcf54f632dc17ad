//! `loc`: how much of each controller crate is plumbing and how much is decision, and how big the runtime is.
//!
//! A controller crate's `src/` files are counted up to their in-file test module (`#[cfg(test)]` followed by
//! `mod tests {`; an item gated `#[cfg(test)]` before it is counted), non-blank, non-comment lines only. Test
//! files are left out: files named `tests.rs`, files under a `tests/` folder, and the file of every module declared
//! only under `#[cfg(test)]` (`#[cfg(test)] mod fence_tests;`) with its sub-module folder. A whole file is
//! **plumbing** when one of those lines does I/O or runtime wiring (see [`PLUMBING_MARKERS`]), else **decision**.
//! `--runtime` prints every line before the in-file test module of the runtime's crates instead
//! (docs/architecture.md), and beside it issue 23's reading (every line before a file's first `#[cfg(test)]`,
//! test-only files included: see [`first_cfg_test_lines`]).

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
    /// Print the non-test lines of the runtime's crates (every line before the in-file test module) instead.
    #[arg(long)]
    runtime: bool,
    /// The workspace to count (default: this one), for example a checkout of another commit.
    #[arg(long)]
    root: Option<PathBuf>,
}

/// Lines of one file up to its in-file test module.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct FileCount {
    /// Every line, blank and comment lines included.
    all: usize,
    /// Non-blank, non-comment lines.
    code: usize,
    /// Whether a code line carries a plumbing marker.
    plumbing: bool,
}

/// Counts `source` up to its first in-file test module (`#[cfg(test)]` then `mod tests {`); an item gated
/// `#[cfg(test)]` before it (an import, a helper) is counted like any line.
fn count(source: &str) -> FileCount {
    let mut counted = FileCount::default();
    let mut in_block_comment = false;
    let lines: Vec<&str> = source.lines().map(str::trim).collect();
    for (index, &trimmed) in lines.iter().enumerate() {
        if trimmed == "#[cfg(test)]" && opens_inline_module(&lines[index + 1..]) {
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

/// Whether the first non-blank line of `rest` opens a module written in the file (`mod tests {`), not `mod x;`.
fn opens_inline_module(rest: &[&str]) -> bool {
    rest.iter().find(|l| !l.is_empty()).is_some_and(|line| {
        let declaration = line
            .strip_prefix("pub(crate) ")
            .or_else(|| line.strip_prefix("pub "))
            .unwrap_or(line);
        declaration.starts_with("mod ") && declaration.contains('{')
    })
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

/// The names of the modules `source` declares out of line only under `#[cfg(test)]` (`#[cfg(test)] mod x;`).
fn test_modules(source: &str) -> Vec<&str> {
    let mut names = Vec::new();
    let mut after_cfg_test = false;
    for line in source.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if after_cfg_test {
            let declaration = line
                .strip_prefix("pub(crate) ")
                .or_else(|| line.strip_prefix("pub "))
                .unwrap_or(line);
            if let Some(name) = declaration
                .strip_prefix("mod ")
                .and_then(|rest| rest.strip_suffix(';'))
            {
                names.push(name.trim());
            }
        }
        after_cfg_test = line == "#[cfg(test)]";
    }
    names
}

/// Where the files of `file`'s child module `name` live: `name.rs` and the `name/` folder, next to `file` when
/// `file` is `lib.rs`, `main.rs` or `mod.rs`, else in the folder named after `file`.
fn child_module_paths(file: &Path, name: &str) -> (PathBuf, PathBuf) {
    let parent = file.parent().unwrap_or(Path::new(""));
    let owns_folder = file
        .file_name()
        .is_some_and(|n| n == "lib.rs" || n == "main.rs" || n == "mod.rs");
    let folder = match file.file_stem() {
        Some(stem) if !owns_folder => parent.join(stem),
        _ => parent.to_owned(),
    };
    (folder.join(format!("{name}.rs")), folder.join(name))
}

/// `files` without the files of modules declared only under `#[cfg(test)]` (and everything below them).
fn without_test_modules(files: Vec<PathBuf>) -> anyhow::Result<Vec<PathBuf>> {
    let mut test_paths = Vec::new();
    for file in &files {
        let text =
            std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
        for name in test_modules(&text) {
            let (module_file, module_folder) = child_module_paths(file, name);
            test_paths.push(module_file);
            test_paths.push(module_folder);
        }
    }
    Ok(files
        .into_iter()
        .filter(|f| !test_paths.iter().any(|t| f.starts_with(t)))
        .collect())
}

/// Every `.rs` file under `dir`, sorted.
fn rust_files(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_owned()];
    while let Some(next) = pending.pop() {
        for entry in
            std::fs::read_dir(&next).with_context(|| format!("reading {}", next.display()))?
        {
            let path = entry?.path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    Ok(files)
}

/// The `.rs` files under `dir`, sorted, test files left out.
fn source_files(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let files = rust_files(dir)?
        .into_iter()
        .filter(|path| !is_test_file(path.strip_prefix(dir).unwrap_or(path)))
        .collect();
    without_test_modules(files)
}

/// Issue 23's reading of a crate's size: every line of every `.rs` file under `src/` up to the file's first
/// `#[cfg(test)]` line, whatever that line gates, test-only files included. It gives 27,868 for the runtime at
/// `bd76acb`, the issue's "27.9k"; it counts a test file's lines (a test-only file has no `#[cfg(test)]` line) and
/// stops before a gated import, so it is printed beside the count of this module, not instead of it.
fn first_cfg_test_lines(root: &Path, krate: &str) -> anyhow::Result<usize> {
    let mut total = 0;
    for path in rust_files(&root.join(krate).join("src"))? {
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        total += lines_before_first_cfg_test(&text);
    }
    Ok(total)
}

/// The lines of `source` before its first `#[cfg(test)]` line (all of them if it has none).
fn lines_before_first_cfg_test(source: &str) -> usize {
    source
        .lines()
        .take_while(|line| line.trim() != "#[cfg(test)]")
        .count()
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
        println!("{:<24} {:>7} {:>12}", "crate", "lines", "first-cfg");
        let (mut total, mut total_first_cfg) = (0, 0);
        for krate in RUNTIME_CRATES {
            let lines: usize = crate_counts(&root, krate)?.iter().map(|(_, c)| c.all).sum();
            let first_cfg = first_cfg_test_lines(&root, krate)?;
            println!("{krate:<24} {lines:>7} {first_cfg:>12}");
            total += lines;
            total_first_cfg += first_cfg;
        }
        println!("{:<24} {total:>7} {total_first_cfg:>12}", "runtime");
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
    fn the_issue_reading_stops_at_the_first_cfg_test_whatever_it_gates() {
        let source =
            "use a;\n\n#[cfg(test)]\nuse std::fmt;\nfn f() {}\n#[cfg(test)]\nmod tests {\n}\n";
        assert_eq!(lines_before_first_cfg_test(source), 2);
        assert_eq!(lines_before_first_cfg_test("fn f() {}\n// end\n"), 2);
        assert_eq!(count(source).all, 5);
    }

    #[test]
    fn counting_stops_at_the_test_module_not_at_a_test_only_item() {
        let source = "#[cfg(test)]\nuse std::fmt;\nfn f() {}\n#[cfg(test)]\nmod samples;\n#[cfg(test)]\n\nmod tests {\n}\n";
        assert_eq!(count(source).code, 5);
        assert_eq!(
            count("fn f() {}\n#[cfg(test)]\npub(crate) mod support {\n}\n").all,
            1
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
    fn modules_declared_only_for_tests_are_test_code() {
        let source = "mod plan;\n#[cfg(test)]\nmod apiserver_tests;\n\n#[cfg(test)]\npub(crate) mod support;\n\
                      #[cfg(test)]\nmod tests {\n    mod inner;\n}\n#[cfg(feature = \"x\")]\nmod gated;\n";
        assert_eq!(test_modules(source), ["apiserver_tests", "support"]);
        assert_eq!(
            child_module_paths(Path::new("src/client.rs"), "fence_tests"),
            (
                PathBuf::from("src/client/fence_tests.rs"),
                PathBuf::from("src/client/fence_tests")
            )
        );
        assert_eq!(
            child_module_paths(Path::new("src/lib.rs"), "properties_tests"),
            (
                PathBuf::from("src/properties_tests.rs"),
                PathBuf::from("src/properties_tests")
            )
        );
        assert_eq!(
            child_module_paths(Path::new("src/auth/mod.rs"), "t"),
            (PathBuf::from("src/auth/t.rs"), PathBuf::from("src/auth/t"))
        );
    }

    #[test]
    fn the_app_test_modules_are_not_counted() {
        let files = source_files(&workspace_root().join("ccm-app/src")).expect("ccm-app's sources");
        assert!(files.iter().any(|f| f.ends_with("client.rs")));
        assert!(!files.iter().any(|f| f.ends_with("client/fence_tests.rs")));
        assert!(!files.iter().any(|f| f.ends_with("properties_tests.rs")));
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
