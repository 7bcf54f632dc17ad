//! How much memory the shared Node cache needs, and how long a Node takes to decode and to read back: whole, as
//! the shared informer decodes it (`CachedNode`, which keeps what `strip_node` lists), and as its store keeps that
//! (`CompactNode`): the figures of
//! docs/benchmarks.md, "Cached object size". A measurement, not a test:
//!
//! ```sh
//! cargo run --release -p examples --example bench-cache-size
//! ```
//!
//! Each node is the realistic fixture `ccm-core/tests/fixtures/node.json` (50 images, the managedFields of seven
//! managers, 16 labels, 6 annotations, volumes, nodeInfo) with its own name, uid, addresses, providerID and pod
//! CIDR. It is serialized to JSON and deserialized again, as the watch delivers it, then held in an `Arc` as the
//! store holds it; the stripped run decodes each node as a `CachedNode`, as the informer does, and the compact
//! run also keeps it in a `StoreWriter<Node, CompactNode>`, as the shared Node informer's store does. Each
//! mode runs in a process of its own (this program started again with `--mode whole|stripped|compact`), and
//! reports the compact JSON size of what it holds, the growth of its resident set (VmRSS) after 1,000 and 5,000
//! nodes, the mean time one node's JSON took to decode (compact: and to be packed), and the mean time per node of
//! one `list()` of the whole cache (compact: each node is made again).

use std::process::{Command, ExitCode};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ccm_core::runtime::informer::{CachedNode, CompactNode, StoreWriter};
use k8s_openapi::api::core::v1::Node;

/// The reference CCM's allocator, so that memory and times are those of the CCM.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

const NODE: &str = include_str!("../../ccm-core/tests/fixtures/node.json");

/// This process's resident set in bytes (Linux; 0 elsewhere).
fn rss() -> usize {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<usize>().ok())
        })
        .map_or(0, |kib| kib * 1024)
}

/// The JSON of node `i`: the fixture with its own identity.
fn node_json(template: &Node, i: usize) -> String {
    let mut node = template.clone();
    let name = format!("worker-pool-a-{i:05}");
    let ip = format!("10.0.{}.{}", i / 250, i % 250 + 1);
    node.metadata.name = Some(name.clone());
    node.metadata.uid = Some(format!("0b4e8c2a-6d1f-4f57-9a3e-{i:012}"));
    node.metadata
        .labels
        .as_mut()
        .unwrap()
        .insert("kubernetes.io/hostname".into(), name.clone());
    node.metadata
        .annotations
        .as_mut()
        .unwrap()
        .insert("alpha.kubernetes.io/provided-node-ip".into(), ip.clone());
    let spec = node.spec.as_mut().unwrap();
    spec.provider_id = Some(format!("aws:///eu-west-1b/i-{i:017x}"));
    let cidr = format!("10.{}.{}.0/24", 120 + i / 250, i % 250);
    spec.pod_cidr = Some(cidr.clone());
    spec.pod_cidrs = Some(vec![cidr]);
    let status = node.status.as_mut().unwrap();
    for address in status.addresses.as_mut().unwrap() {
        match address.type_.as_str() {
            "InternalIP" => address.address = ip.clone(),
            "Hostname" => address.address = name.clone(),
            _ => address.address = format!("{}-{i}", address.address),
        }
    }
    serde_json::to_string(&node).unwrap()
}

/// How many nodes the measurement holds, and after how many it reports.
const COUNTS: [usize; 2] = [1_000, 5_000];

/// Build `COUNTS` nodes, whole, stripped or compact (`mode`), reporting per step: the compact JSON of the cached
/// nodes, the growth of the resident set since the start (bytes), the time spent decoding (and, compact, packing),
/// and the time one read of every node from the store took (compact: each read makes a `Node` again).
fn build(mode: &str) -> Vec<(usize, usize, usize, Duration, Duration)> {
    let template: Node = serde_json::from_str(NODE).unwrap();
    let rss_before = rss();
    let mut json = 0;
    let mut nodes: Vec<Arc<Node>> = Vec::with_capacity(COUNTS[COUNTS.len() - 1]);
    let compact: StoreWriter<Node, CompactNode> = StoreWriter::new();
    let mut held = 0;
    let mut report = Vec::new();
    let mut decoding = Duration::ZERO;
    for count in COUNTS {
        while held < count {
            let text = node_json(&template, held);
            let started = Instant::now();
            let node: Node = if mode == "whole" {
                serde_json::from_str(&text).unwrap()
            } else {
                serde_json::from_str::<CachedNode>(&text).unwrap().into()
            };
            let node = Arc::new(node);
            if mode == "compact" {
                compact.insert(format!("{held}"), node.clone());
            }
            decoding += started.elapsed();
            drop(text);
            json += serde_json::to_string(&*node).unwrap().len();
            if mode != "compact" {
                nodes.push(node);
            }
            held += 1;
        }
        let grown = rss().saturating_sub(rss_before);
        // the second of two reads: the first also pays for the allocator's first use of the memory
        let mut took = Duration::ZERO;
        for _ in 0..2 {
            let started = Instant::now();
            let read = if mode == "compact" {
                compact.store().list()
            } else {
                nodes.to_vec()
            };
            took = started.elapsed();
            assert_eq!(read.len(), count);
        }
        report.push((count, json, grown, decoding, took));
    }
    report
}

fn per_node_kib(bytes: usize, count: usize) -> String {
    format!("{:.1}", bytes as f64 / count as f64 / 1024.0)
}

fn mib(bytes: usize) -> String {
    format!("{:.1}", bytes as f64 / 1024.0 / 1024.0)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if let [_, flag, mode] = args.as_slice()
        && flag == "--mode"
    {
        for (count, json, rss, decoding, read) in build(mode) {
            println!(
                "RESULT {mode} {count} {json} {rss} {} {}",
                decoding.as_nanos(),
                read.as_nanos()
            );
        }
        return ExitCode::SUCCESS;
    }
    let mut rows = Vec::new();
    for mode in ["whole", "stripped", "compact"] {
        // a process per mode, so that neither run reuses memory the other freed
        let out = match Command::new(&args[0]).args(["--mode", mode]).output() {
            Ok(out) if out.status.success() => out,
            Ok(out) => {
                eprintln!(
                    "bench-cache-size: the {mode} run failed: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                return ExitCode::FAILURE;
            }
            Err(err) => {
                eprintln!("bench-cache-size: cannot start the {mode} run: {err}");
                return ExitCode::FAILURE;
            }
        };
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            if let Some(result) = line.strip_prefix("RESULT ") {
                let f: Vec<&str> = result.split(' ').collect();
                let n = |i: usize| f[i].parse::<usize>().unwrap_or(0);
                rows.push((f[0].to_owned(), n(1), n(2), n(3), n(4), n(5)));
            }
        }
    }
    rows.sort_by_key(|r| r.1);
    println!(
        "| nodes | cache | JSON per node (KiB) | RSS growth (MiB) | RSS per node (KiB) | decode per node (µs) | read per node (µs) |"
    );
    println!("|---|---|---|---|---|---|---|");
    for (mode, count, json, rss, nanos, read) in &rows {
        println!(
            "| {count} | {mode} | {} | {} | {} | {:.1} | {:.2} |",
            per_node_kib(*json, *count),
            mib(*rss),
            per_node_kib(*rss, *count),
            *nanos as f64 / *count as f64 / 1000.0,
            *read as f64 / *count as f64 / 1000.0
        );
    }
    ExitCode::SUCCESS
}
