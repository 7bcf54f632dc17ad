//! What the benchmarks (and `e2e`, `chaos`) share, one concern per module; the items are re-exported here, so
//! `support::CcmProcess` and `support::ccm::CcmProcess` name the same thing (the less used items only by their
//! module path, e.g. `support::procfs::status_kib`).
//!
//! - [`matrix`]: the CCMs under test, the API limits, the common options and the matrix of runs;
//! - [`binaries`]: the binaries (built unless `--no-build`), the output directory, the environment line;
//! - [`ccm`]: a CCM process under test, its command line, watchdog and `/metrics`;
//! - [`procfs`]: memory, CPU and load figures from `/proc`;
//! - [`cluster`]: a fresh control plane per run and the API server's request counts;
//! - [`objects`]: creating objects and watching them converge;
//! - [`table`]: the printed tables and their cells.

pub mod binaries;
pub mod ccm;
pub mod cluster;
pub mod matrix;
pub mod objects;
pub mod procfs;
pub mod table;

pub use binaries::{BenchBinaries, environment_summary, output_dir, prepare};
pub use ccm::{CcmProcess, CcmSpec, free_port};
pub use cluster::Cluster;
pub use matrix::{CommonArgs, DEFAULT_LIMITS, Implementation, LimitMode, RunSpec, run_matrix};
pub use objects::{Tracker, create_all, pause};
pub use procfs::{ProcStats, load_average};
pub use table::{Table, cpu, mib, ratio, secs};
