//! `cargo xtask ci`: every check CI runs, in order, with a summary.

use std::time::Duration;

use clap::Args;

use crate::api::{self, ChangelogCheckArgs};
use crate::chaos::{self, ChaosArgs};
use crate::conformance::{self, ConformanceArgs};
use crate::controlplane;
use crate::image::{self, ImageArgs};
use crate::package::{self, PackageArgs};
use crate::process::{self, Interrupt, Interrupted, Stopwatch};
use crate::shear::{self, ShearArgs};
use crate::test::{self, TestArgs};

/// Arguments of `cargo xtask ci`.
#[derive(Debug, Args)]
pub struct CiArgs {
    /// Stop at the first failing step instead of running the remaining ones.
    #[arg(long)]
    pub fail_fast: bool,
    /// Skip the container image step (`cargo xtask image`): its static release build of the reference CCM and
    /// every dependency is the longest step from cold (docs/deployment.md, "The container image"). For quick
    /// local runs; CI runs it.
    #[arg(long)]
    pub no_image: bool,
}

/// The steps of a CI run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// `cargo fmt --all -- --check`
    Fmt,
    /// `cargo xtask shear`: every declared dependency is used, and in the right table (cargo-shear reads
    /// the sources, builds nothing).
    Shear,
    /// `cargo xtask changelog-check`: the public API snapshots are current, and a public API change since the
    /// merge base with main comes with a CHANGELOG.md entry.
    Changelog,
    /// `cargo clippy --workspace --all-targets -- -D warnings`
    Clippy,
    /// `cargo doc --workspace --no-deps` with `RUSTDOCFLAGS=-D warnings`
    Doc,
    /// `cargo xtask package`: every library crate packaged and built from its `.crate` file.
    Package,
    /// `cargo xtask controlplane build --go-ccm` (the Go reference CCM for the Go-flag test)
    ControlPlaneBuild,
    /// `cargo xtask test`
    Test,
    /// `cargo xtask conformance`: the provider contract clauses and the controller scenarios with the fake
    /// provider against a local control plane, printed as tables.
    Conformance,
    /// `cargo xtask chaos --short`: a frozen leader, then replicas frozen and killed at random on a
    /// control plane with audit logging; the audit log must show no two leaders and no write by a
    /// replica that had lost the lease (docs/reliability.md).
    Chaos,
    /// `cargo xtask image`: the reference CCM's container image, checked by running its binary in the
    /// unpacked root filesystem.
    Image,
}

impl Step {
    /// All steps in execution order.
    pub const ALL: [Step; 11] = [
        Step::Fmt,
        Step::Shear,
        Step::Changelog,
        Step::Clippy,
        Step::Doc,
        Step::Package,
        Step::ControlPlaneBuild,
        Step::Test,
        Step::Conformance,
        Step::Chaos,
        Step::Image,
    ];

    /// The title printed in the header and the summary.
    pub fn title(self) -> &'static str {
        match self {
            Step::Fmt => "cargo fmt --all -- --check",
            Step::Shear => "cargo xtask shear (unused dependencies, cargo-shear)",
            Step::Changelog => {
                "cargo xtask changelog-check (public API snapshots, CHANGELOG entry)"
            }
            Step::Clippy => "cargo clippy --workspace --all-targets -- -D warnings",
            Step::Doc => "cargo doc --workspace --no-deps (RUSTDOCFLAGS=-D warnings)",
            Step::Package => "cargo xtask package (every library crate, verified)",
            Step::ControlPlaneBuild => "cargo xtask controlplane build --go-ccm",
            Step::Test => "cargo xtask test (unit, integration and doctests, real apiserver)",
            Step::Conformance => "cargo xtask conformance (contract clauses, controller scenarios)",
            Step::Chaos => {
                "cargo xtask chaos --short (frozen leader, random replica faults, audit-log proof)"
            }
            Step::Image => {
                "cargo xtask image (OCI image of the reference CCM, run in its root filesystem)"
            }
        }
    }

    /// A step that cannot run when `failed` failed.
    fn depends_on(self, failed: Step) -> bool {
        matches!(self, Step::Test | Step::Conformance | Step::Chaos)
            && failed == Step::ControlPlaneBuild
    }
}

/// How a step ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// It succeeded.
    Passed(Duration),
    /// It failed with this message.
    Failed(Duration, String),
    /// It did not run, for this reason.
    Skipped(&'static str),
}

async fn run_step(step: Step, interrupt: &Interrupt) -> anyhow::Result<()> {
    match step {
        Step::Fmt => {
            let mut command = process::cargo();
            command.args(["fmt", "--all", "--", "--check"]);
            process::run(command, interrupt, "").await
        }
        Step::Shear => shear::run(&ShearArgs::default(), interrupt).await,
        Step::Changelog => api::check(&ChangelogCheckArgs::default(), interrupt).await,
        Step::Clippy => {
            let mut command = process::cargo();
            command.args([
                "clippy",
                "--workspace",
                "--all-targets",
                "--",
                "-D",
                "warnings",
            ]);
            process::run(command, interrupt, "").await
        }
        Step::Doc => {
            let mut command = process::cargo();
            command
                .args(["doc", "--workspace", "--no-deps"])
                .env("RUSTDOCFLAGS", "-D warnings");
            process::run(command, interrupt, "").await
        }
        Step::Package => {
            // CI checks the working tree it was given, committed or not.
            let args = PackageArgs {
                allow_dirty: true,
                ..PackageArgs::default()
            };
            package::run(&args, interrupt).await
        }
        Step::ControlPlaneBuild => controlplane::build(&test::build_args(), interrupt).await,
        Step::Test => test::run_tests(&TestArgs::default(), interrupt).await,
        Step::Conformance => {
            let args = ConformanceArgs {
                timeout_seconds: 60,
                ..ConformanceArgs::default()
            };
            conformance::run(&args, interrupt).await
        }
        Step::Chaos => {
            let args = ChaosArgs {
                short: true,
                ..ChaosArgs::default()
            };
            chaos::run(&args, interrupt).await
        }
        Step::Image => image::run(&ImageArgs::default(), interrupt).await,
    }
}

/// The summary table printed at the end.
pub fn summary(results: &[(Step, Outcome)]) -> String {
    let mut text = String::from("==== ci summary ====\n");
    for (step, outcome) in results {
        let line = match outcome {
            Outcome::Passed(took) => {
                format!("ok      {:>8}  {}", process::seconds(*took), step.title())
            }
            Outcome::Failed(took, _) => {
                format!("FAILED  {:>8}  {}", process::seconds(*took), step.title())
            }
            Outcome::Skipped(why) => format!("skipped {:>8}  {} ({why})", "", step.title()),
        };
        text.push_str(&line);
        text.push('\n');
    }
    for (step, outcome) in results {
        if let Outcome::Failed(_, message) = outcome {
            text.push_str(&format!("\n{}:\n  {message}\n", step.title()));
        }
    }
    text
}

/// Runs every CI step and prints a summary.
///
/// # Errors
/// If any step failed (after all steps ran, unless `--fail-fast`), or on Ctrl-C.
pub async fn run(args: &CiArgs, interrupt: &Interrupt) -> anyhow::Result<()> {
    let total = Stopwatch::start();
    let mut results: Vec<(Step, Outcome)> = Vec::new();
    for step in Step::ALL {
        let failed_dependency = results.iter().any(|(done, outcome)| {
            matches!(outcome, Outcome::Failed(..)) && step.depends_on(*done)
        });
        let any_failed = results
            .iter()
            .any(|(_, outcome)| matches!(outcome, Outcome::Failed(..)));
        if failed_dependency {
            results.push((step, Outcome::Skipped("a step it needs failed")));
            continue;
        }
        if any_failed && args.fail_fast {
            results.push((step, Outcome::Skipped("--fail-fast")));
            continue;
        }
        if step == Step::Image && args.no_image {
            results.push((step, Outcome::Skipped("--no-image")));
            continue;
        }
        eprintln!("\n==== {} ====", step.title());
        let stopwatch = Stopwatch::start();
        let outcome = match run_step(step, interrupt).await {
            Ok(()) => Outcome::Passed(stopwatch.elapsed()),
            Err(err) if err.is::<Interrupted>() => return Err(err),
            Err(err) => Outcome::Failed(stopwatch.elapsed(), format!("{err:#}")),
        };
        results.push((step, outcome));
    }
    eprintln!("\n{}", summary(&results));
    let failed = results
        .iter()
        .filter(|(_, outcome)| matches!(outcome, Outcome::Failed(..)))
        .count();
    eprintln!("total {}", process::seconds(total.elapsed()));
    if failed > 0 {
        anyhow::bail!("{failed} ci step(s) failed");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_step_depends_on_the_build() {
        assert!(Step::Test.depends_on(Step::ControlPlaneBuild));
        assert!(!Step::Test.depends_on(Step::Fmt));
        assert!(!Step::Clippy.depends_on(Step::ControlPlaneBuild));
    }

    #[test]
    fn summary_lists_every_step_and_failure_details() {
        let results = vec![
            (Step::Fmt, Outcome::Passed(Duration::from_millis(1500))),
            (
                Step::ControlPlaneBuild,
                Outcome::Failed(Duration::from_secs(3), "go missing".into()),
            ),
            (Step::Test, Outcome::Skipped("a step it needs failed")),
        ];
        let text = summary(&results);
        assert!(
            text.contains("ok         1.5 s  cargo fmt --all -- --check"),
            "{text}"
        );
        assert!(
            text.contains("FAILED     3.0 s  cargo xtask controlplane build"),
            "{text}"
        );
        assert!(text.contains("skipped"), "{text}");
        assert!(text.contains("a step it needs failed"), "{text}");
        assert!(text.contains("go missing"), "{text}");
    }

    #[test]
    fn steps_run_in_the_documented_order() {
        assert_eq!(Step::ALL[0], Step::Fmt);
        assert_eq!(Step::ALL[1], Step::Shear);
        assert_eq!(Step::ALL[2], Step::Changelog);
        assert_eq!(Step::ALL[Step::ALL.len() - 2], Step::Chaos);
        assert_eq!(Step::ALL[Step::ALL.len() - 1], Step::Image);
    }
}
