//! Reading Prometheus text exposition (the API server's and the CCMs' `/metrics`), and counting the
//! API server's requests by verb and resource.

use std::collections::BTreeMap;

use anyhow::{Context as _, bail};

/// One sample line: `name{label="value",...} value`.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Metric name, with any `_total` / `_bucket` suffix as written.
    pub name: String,
    /// Labels, by name.
    pub labels: BTreeMap<String, String>,
    /// The value (`+Inf`, `-Inf` and `NaN` included).
    pub value: f64,
}

impl Sample {
    /// The value of label `key`, or `""` when the sample has no such label.
    pub fn label(&self, key: &str) -> &str {
        self.labels.get(key).map_or("", String::as_str)
    }
}

/// Parses Prometheus text format (0.0.4) or OpenMetrics text: comments (`#`) and blank lines are
/// skipped, an optional timestamp after the value is ignored.
///
/// # Errors
/// Names the first line that is not a valid sample.
pub fn parse(text: &str) -> anyhow::Result<Vec<Sample>> {
    let mut samples = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let sample =
            parse_line(line).with_context(|| format!("metrics line {}: {line:?}", index + 1))?;
        samples.push(sample);
    }
    Ok(samples)
}

fn parse_line(line: &str) -> anyhow::Result<Sample> {
    let name_end = line
        .find(|c: char| c == '{' || c.is_whitespace())
        .context("no value after the metric name")?;
    let name = &line[..name_end];
    if name.is_empty() {
        bail!("the metric name is empty");
    }
    let mut rest = &line[name_end..];
    let mut labels = BTreeMap::new();
    if let Some(after_brace) = rest.strip_prefix('{') {
        let (parsed, remainder) = parse_labels(after_brace)?;
        labels = parsed;
        rest = remainder;
    }
    let value_text = rest
        .split_whitespace()
        .next()
        .context("no value after the labels")?;
    let value = match value_text {
        "+Inf" | "Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        "NaN" => f64::NAN,
        other => other
            .parse()
            .with_context(|| format!("the value {other:?} is not a number"))?,
    };
    Ok(Sample {
        name: name.to_owned(),
        labels,
        value,
    })
}

/// Parses `key="value",...}` and returns the labels and what follows the closing brace.
fn parse_labels(mut text: &str) -> anyhow::Result<(BTreeMap<String, String>, &str)> {
    let mut labels = BTreeMap::new();
    loop {
        text = text.trim_start();
        if let Some(rest) = text.strip_prefix('}') {
            return Ok((labels, rest));
        }
        let eq = text.find('=').context("a label has no '='")?;
        let key = text[..eq].trim().to_owned();
        let after_eq = text[eq + 1..].trim_start();
        let mut chars = after_eq.char_indices();
        if chars.next().map(|(_, c)| c) != Some('"') {
            bail!("the value of label {key:?} is not quoted");
        }
        let mut value = String::new();
        let mut end = None;
        let mut escaped = false;
        for (i, c) in chars {
            if escaped {
                value.push(match c {
                    'n' => '\n',
                    other => other,
                });
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                end = Some(i);
                break;
            } else {
                value.push(c);
            }
        }
        let end = end.with_context(|| format!("the value of label {key:?} is not terminated"))?;
        labels.insert(key, value);
        text = after_eq[end + 1..].trim_start();
        if let Some(rest) = text.strip_prefix(',') {
            text = rest;
        } else if !text.starts_with('}') {
            bail!("expected ',' or '}}' after a label");
        }
    }
}

/// The sum of every sample named `name` whose labels include all of `matching`.
pub fn sum(samples: &[Sample], name: &str, matching: &[(&str, &str)]) -> f64 {
    samples
        .iter()
        .filter(|s| s.name == name)
        .filter(|s| matching.iter().all(|(k, v)| s.label(k) == *v))
        .map(|s| s.value)
        .sum()
}

/// A request kind as the API server counts it: `PATCH nodes/status`, `POST events`, `GET nodes`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct RequestKind {
    /// `GET`, `LIST`, `WATCH`, `POST`, `PUT`, `PATCH`, `APPLY`, `DELETE`, `DELETECOLLECTION`.
    pub verb: String,
    /// `resource` or `resource/subresource`.
    pub resource: String,
}

impl RequestKind {
    /// Whether the request changes something.
    pub fn is_write(&self) -> bool {
        matches!(
            self.verb.as_str(),
            "POST" | "PUT" | "PATCH" | "APPLY" | "DELETE" | "DELETECOLLECTION"
        )
    }

    /// Whether a CCM under test can have made it: requests about the resources the cloud node and
    /// service controllers touch. The API server's own housekeeping (its identity Lease, flow-control
    /// status, bootstrap RBAC) is about other resources; the benchmarks run the CCMs without leader
    /// election, so they never touch Leases.
    pub fn is_ccm_resource(&self) -> bool {
        let base = self.resource.split('/').next().unwrap_or_default();
        matches!(base, "nodes" | "events" | "services")
    }
}

impl std::fmt::Display for RequestKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.verb, self.resource)
    }
}

/// Answers of the API server by status class that matter for a client's health: 429 (rejected
/// by API Priority and Fairness or the max-in-flight limit) and 403 (forbidden by RBAC).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Answers {
    /// `apiserver_request_total{code="429"}`, all resources and verbs.
    pub rejected: u64,
    /// `apiserver_request_total{code="403"}`.
    pub forbidden: u64,
}

impl Answers {
    /// Reads the counters from the API server's metrics.
    pub fn from_samples(samples: &[Sample]) -> Self {
        let count = |code: &str| -> u64 {
            samples
                .iter()
                .filter(|s| s.name == "apiserver_request_total" && s.label("code") == code)
                .map(|s| {
                    if s.value.is_finite() && s.value > 0.0 {
                        s.value.round() as u64
                    } else {
                        0
                    }
                })
                .sum()
        };
        Answers {
            rejected: count("429"),
            forbidden: count("403"),
        }
    }

    /// What was counted after `before` (a counter that went down counts from zero).
    pub fn since(&self, before: &Answers) -> Answers {
        let delta = |now: u64, then: u64| if now >= then { now - then } else { now };
        Answers {
            rejected: delta(self.rejected, before.rejected),
            forbidden: delta(self.forbidden, before.forbidden),
        }
    }
}

/// The API server's `apiserver_request_total`, summed over response codes, groups, versions and
/// scopes: how many requests of each kind it served.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestCounts(pub BTreeMap<RequestKind, u64>);

impl RequestCounts {
    /// Reads `apiserver_request_total` from the API server's metrics. Non-resource requests
    /// (`/readyz`, `/metrics`, ...) are left out.
    pub fn from_samples(samples: &[Sample]) -> Self {
        let mut counts = BTreeMap::new();
        for sample in samples
            .iter()
            .filter(|s| s.name == "apiserver_request_total")
        {
            let resource = sample.label("resource");
            if resource.is_empty() {
                continue;
            }
            let subresource = sample.label("subresource");
            let resource = if subresource.is_empty() {
                resource.to_owned()
            } else {
                format!("{resource}/{subresource}")
            };
            let kind = RequestKind {
                verb: sample.label("verb").to_owned(),
                resource,
            };
            // Counters are integral; a negative or fractional value would be a broken server.
            let value = if sample.value.is_finite() && sample.value > 0.0 {
                sample.value.round() as u64
            } else {
                0
            };
            *counts.entry(kind).or_default() += value;
        }
        RequestCounts(counts)
    }

    /// What was counted after `before` (kinds with no new requests are left out). A counter that
    /// went down (a restarted server) counts from zero.
    pub fn since(&self, before: &RequestCounts) -> RequestCounts {
        let counts = self
            .0
            .iter()
            .filter_map(|(kind, &after)| {
                let earlier = before.0.get(kind).copied().unwrap_or(0);
                let delta = if after >= earlier {
                    after - earlier
                } else {
                    after
                };
                (delta > 0).then(|| (kind.clone(), delta))
            })
            .collect();
        RequestCounts(counts)
    }

    /// Only the requests about resources a CCM touches ([`RequestKind::is_ccm_resource`]).
    pub fn ccm_requests(&self) -> RequestCounts {
        RequestCounts(
            self.0
                .iter()
                .filter(|(kind, _)| kind.is_ccm_resource())
                .map(|(kind, &count)| (kind.clone(), count))
                .collect(),
        )
    }

    /// The same counts without `kind` (e.g. the benchmark's own creates).
    pub fn without(&self, kind: &RequestKind) -> RequestCounts {
        let mut counts = self.0.clone();
        counts.remove(kind);
        RequestCounts(counts)
    }

    /// The number of writes.
    pub fn writes(&self) -> u64 {
        self.0
            .iter()
            .filter(|(kind, _)| kind.is_write())
            .map(|(_, &count)| count)
            .sum()
    }

    /// The number of single-object reads (`GET`; lists and watches are not included).
    pub fn gets(&self) -> u64 {
        self.0
            .iter()
            .filter(|(kind, _)| kind.verb == "GET")
            .map(|(_, &count)| count)
            .sum()
    }

    /// `PATCH nodes/status 1000, POST events 1000` (writes only, in kind order).
    pub fn describe_writes(&self) -> String {
        let parts: Vec<String> = self
            .0
            .iter()
            .filter(|(kind, _)| kind.is_write())
            .map(|(kind, count)| format!("{kind} {count}"))
            .collect();
        if parts.is_empty() {
            "none".to_owned()
        } else {
            parts.join(", ")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_count_rejections_and_forbidden_requests_of_every_resource() {
        let samples = parse(
            "apiserver_request_total{code=\"429\",resource=\"nodes\",verb=\"PATCH\"} 3\n\
             apiserver_request_total{code=\"429\",resource=\"\",verb=\"GET\"} 1\n\
             apiserver_request_total{code=\"403\",resource=\"nodes\",verb=\"UPDATE\"} 2\n\
             apiserver_request_total{code=\"200\",resource=\"nodes\",verb=\"PATCH\"} 90\n\
             apiserver_flowcontrol_rejected_requests_total{code=\"429\"} 7\n",
        )
        .expect("parses");
        let now = Answers::from_samples(&samples);
        assert_eq!(
            now,
            Answers {
                rejected: 4,
                forbidden: 2
            }
        );
        let before = Answers {
            rejected: 1,
            forbidden: 0,
        };
        assert_eq!(
            now.since(&before),
            Answers {
                rejected: 3,
                forbidden: 2
            }
        );
        let restarted = Answers {
            rejected: 10,
            forbidden: 5,
        };
        assert_eq!(
            now.since(&restarted),
            now,
            "a reset counter counts from zero"
        );
    }

    const APISERVER: &str = r#"# HELP apiserver_request_total [STABLE] Counter of apiserver requests
# TYPE apiserver_request_total counter
apiserver_request_total{code="200",component="",dry_run="",group="",resource="",scope="",subresource="/readyz",verb="GET",version=""} 3
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="nodes",scope="resource",subresource="status",verb="PATCH",version="v1"} 7
apiserver_request_total{code="409",component="apiserver",dry_run="",group="",resource="nodes",scope="resource",subresource="status",verb="PATCH",version="v1"} 1
apiserver_request_total{code="201",component="apiserver",dry_run="",group="events.k8s.io",resource="events",scope="resource",subresource="",verb="POST",version="v1"} 2
apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="events",scope="resource",subresource="",verb="POST",version="v1"} 3
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="nodes",scope="resource",subresource="",verb="GET",version="v1"} 4
apiserver_request_total{code="200",component="apiserver",dry_run="",group="coordination.k8s.io",resource="leases",scope="resource",subresource="",verb="PUT",version="v1"} 9
apiserver_request_total{code="0",component="apiserver",dry_run="",group="",resource="nodes",scope="cluster",subresource="",verb="WATCH",version="v1"} 1
apiserver_current_inflight_requests{request_kind="mutating"} 0
"#;

    fn kind(verb: &str, resource: &str) -> RequestKind {
        RequestKind {
            verb: verb.to_owned(),
            resource: resource.to_owned(),
        }
    }

    #[test]
    fn samples_with_and_without_labels() {
        let samples = parse(
            "# TYPE x counter\n\nup 1\nx_total{a=\"1\",b=\"two words\"} 2.5 1700000000\n\
             y{le=\"+Inf\"} +Inf\nz{q=\"say \\\"hi\\\"\\n\",} NaN\n# EOF\n",
        )
        .expect("parses");
        assert_eq!(samples.len(), 4);
        assert_eq!(samples[0].name, "up");
        assert!(samples[0].labels.is_empty());
        assert_eq!(samples[0].value, 1.0);
        assert_eq!(samples[1].label("b"), "two words");
        assert_eq!(samples[1].value, 2.5);
        assert_eq!(samples[2].value, f64::INFINITY);
        assert_eq!(samples[3].label("q"), "say \"hi\"\n");
        assert!(samples[3].value.is_nan());
        assert_eq!(samples[1].label("missing"), "");
    }

    #[test]
    fn malformed_lines_are_errors_naming_the_line() {
        for bad in [
            "x{a=\"1\" 2",
            "x{a=1} 2",
            "x{a=\"1\"",
            "x",
            "x{a=\"1\"} ",
            "x notanumber",
        ] {
            let err = parse(&format!("ok 1\n{bad}\n")).expect_err(bad);
            assert!(
                format!("{err:#}").contains("metrics line 2"),
                "{bad}: {err:#}"
            );
        }
    }

    #[test]
    fn sums_filter_by_labels() {
        let samples = parse(
            "calls_total{operation=\"update\",result=\"success\"} 5\n\
             calls_total{operation=\"update\",result=\"error\"} 1\n\
             calls_total{operation=\"create\",result=\"success\"} 2\n",
        )
        .expect("parses");
        assert_eq!(sum(&samples, "calls_total", &[]), 8.0);
        assert_eq!(
            sum(&samples, "calls_total", &[("operation", "update")]),
            6.0
        );
        assert_eq!(
            sum(
                &samples,
                "calls_total",
                &[("operation", "update"), ("result", "success")]
            ),
            5.0
        );
        assert_eq!(sum(&samples, "other_total", &[]), 0.0);
    }

    #[test]
    fn request_counts_sum_codes_and_groups_and_skip_non_resource_requests() {
        let counts = RequestCounts::from_samples(&parse(APISERVER).expect("parses"));
        assert_eq!(counts.0[&kind("PATCH", "nodes/status")], 8);
        assert_eq!(counts.0[&kind("POST", "events")], 5);
        assert_eq!(counts.0[&kind("GET", "nodes")], 4);
        assert!(!counts.0.keys().any(|k| k.resource.is_empty()));
        assert_eq!(counts.writes(), 8 + 5 + 9);
        assert_eq!(counts.gets(), 4);
        let ccm = counts.ccm_requests();
        assert_eq!(ccm.writes(), 13, "the Lease renewals are not the CCM's");
        assert_eq!(ccm.describe_writes(), "PATCH nodes/status 8, POST events 5");
    }

    #[test]
    fn deltas_leave_out_unchanged_kinds_and_survive_resets() {
        let before = RequestCounts(BTreeMap::from([
            (kind("PATCH", "nodes"), 10),
            (kind("POST", "events"), 4),
            (kind("PUT", "nodes"), 50),
        ]));
        let after = RequestCounts(BTreeMap::from([
            (kind("PATCH", "nodes"), 25),
            (kind("POST", "events"), 4),
            (kind("PUT", "nodes"), 3),
            (kind("DELETE", "services"), 2),
        ]));
        let delta = after.since(&before);
        assert_eq!(
            delta,
            RequestCounts(BTreeMap::from([
                (kind("PATCH", "nodes"), 15),
                (kind("PUT", "nodes"), 3),
                (kind("DELETE", "services"), 2),
            ]))
        );
        assert_eq!(RequestCounts::default().describe_writes(), "none");
        let without = delta.without(&kind("DELETE", "services"));
        assert_eq!(without.writes(), 18);
        assert_eq!(without.without(&kind("GET", "absent")), without);
    }

    #[test]
    fn writes_and_ccm_resources() {
        for verb in [
            "POST",
            "PUT",
            "PATCH",
            "APPLY",
            "DELETE",
            "DELETECOLLECTION",
        ] {
            assert!(kind(verb, "nodes").is_write(), "{verb}");
        }
        for verb in ["GET", "LIST", "WATCH"] {
            assert!(!kind(verb, "nodes").is_write(), "{verb}");
        }
        assert!(kind("PATCH", "services/status").is_ccm_resource());
        assert!(kind("POST", "events").is_ccm_resource());
        assert!(!kind("PUT", "leases").is_ccm_resource());
        assert!(!kind("APPLY", "flowschemas/status").is_ccm_resource());
        assert_eq!(
            kind("PATCH", "nodes/status").to_string(),
            "PATCH nodes/status"
        );
    }
}
