//! Metrics for operators: what `GET /metrics` of the daemon exposes, in the Prometheus
//! text format (docs/metrics.md).
//!
//! Two kinds: what this process counts as it goes (tool calls, their outcomes and
//! latency: [`record_call`]) and what is read when a scrape comes (sessions, index
//! sizes, pending work: [`Scrape`], filled by the daemon from the database).
//! Label values are bounded: a tool name is one of the registered tools (anything else
//! is `(unknown)`), an outcome is `ok` or an error code of the envelope table.
//!
//! The work a call does, counted in deterministic units, is [`cost`]'s: shown here
//! (`cairn_tool_work_total`) and held to budgets by the tests.

pub mod cost;

use std::sync::LazyLock;

use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounterVec, Opts, Registry, TextEncoder,
};

/// The latency buckets, in seconds: 0.25 ms to about 8 s, doubling.
fn buckets() -> Vec<f64> {
    prometheus::exponential_buckets(0.000_25, 2.0, 16).expect("valid buckets")
}

/// What this process counts as it serves.
struct Counted {
    registry: Registry,
    calls: IntCounterVec,
    errors: IntCounterVec,
    latency: HistogramVec,
    work: IntCounterVec,
}

static COUNTED: LazyLock<Counted> = LazyLock::new(|| {
    let registry = Registry::new();
    let calls = IntCounterVec::new(
        Opts::new(
            "cairn_tool_calls_total",
            "Tool calls answered, by tool and outcome (ok or error).",
        ),
        &["tool", "outcome"],
    )
    .expect("valid metric");
    let errors = IntCounterVec::new(
        Opts::new(
            "cairn_tool_call_errors_total",
            "Tool calls answered with an error, by tool and error code.",
        ),
        &["tool", "code"],
    )
    .expect("valid metric");
    let latency = HistogramVec::new(
        HistogramOpts::new(
            "cairn_tool_call_duration_seconds",
            "Time from a tool call's arrival to its answer, by tool.",
        )
        .buckets(buckets()),
        &["tool"],
    )
    .expect("valid metric");
    let work = IntCounterVec::new(
        Opts::new(
            "cairn_tool_work_total",
            "Work tool calls did, by tool and unit (documents_scored, postings_read, rows_read, \
             texts_read, vectors_compared, model_runs, candidates_grouped, bytes_serialized, \
             threads_started).",
        ),
        &["tool", "unit"],
    )
    .expect("valid metric");
    for m in [
        Box::new(calls.clone()) as Box<dyn prometheus::core::Collector>,
        Box::new(errors.clone()),
        Box::new(latency.clone()),
        Box::new(work.clone()),
    ] {
        registry.register(m).expect("metric names are unique");
    }
    Counted {
        registry,
        calls,
        errors,
        latency,
        work,
    }
});

/// The label of tool `name`: itself when `known`, else `(unknown)` (a name an agent
/// made up must not grow the label set).
fn tool_label(name: &str, known: bool) -> &str {
    if known { name } else { "(unknown)" }
}

/// Count one answered call of tool `name` (`known`: a registered tool), `None` when it
/// succeeded or the error code it failed with, how long it took and the work it did.
pub(crate) fn record_call(
    name: &str,
    known: bool,
    error: Option<&str>,
    seconds: f64,
    work: &crate::metrics::cost::Work,
) {
    let tool = tool_label(name, known);
    let c = &*COUNTED;
    let outcome = if error.is_some() { "error" } else { "ok" };
    c.calls.with_label_values(&[tool, outcome]).inc();
    if let Some(code) = error {
        c.errors.with_label_values(&[tool, code]).inc();
    }
    c.latency.with_label_values(&[tool]).observe(seconds);
    for unit in crate::metrics::cost::Unit::ALL {
        // A unit the call did none of adds no sample (a `server_ping` adds one).
        let n = work.get(unit);
        if n > 0 {
            c.work.with_label_values(&[tool, unit.name()]).inc_by(n);
        }
    }
}

/// One tool's calls as counted so far (the web page's service view).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ToolStat {
    pub(crate) tool: String,
    pub(crate) calls: u64,
    pub(crate) errors: u64,
    /// The upper bound of the latency bucket holding the median and the 95th
    /// percentile, in milliseconds (`f64::INFINITY` past the last bucket).
    pub(crate) p50_ms: f64,
    pub(crate) p95_ms: f64,
    pub(crate) mean_ms: f64,
    /// Calls per latency bucket (not cumulative), with each bucket's upper bound in ms.
    pub(crate) histogram: Vec<(f64, u64)>,
}

/// Every tool called so far, by name.
pub(crate) fn tool_stats() -> Vec<ToolStat> {
    use prometheus::core::Collector;
    let label = |m: &prometheus::proto::Metric, name: &str| {
        m.get_label()
            .iter()
            .find(|l| l.name() == name)
            .map(|l| l.value().to_string())
            .unwrap_or_default()
    };
    let mut errors = std::collections::HashMap::new();
    for family in COUNTED.calls.collect() {
        for m in family.get_metric() {
            if label(m, "outcome") == "error" {
                *errors.entry(label(m, "tool")).or_insert(0) += m.get_counter().get_value() as u64;
            }
        }
    }
    let mut out = Vec::new();
    for family in COUNTED.latency.collect() {
        for m in family.get_metric() {
            let tool = label(m, "tool");
            let h = m.get_histogram();
            let count = h.get_sample_count();
            let cumulative: Vec<(f64, u64)> = h
                .get_bucket()
                .iter()
                .map(|b| (b.upper_bound() * 1000.0, b.cumulative_count()))
                .collect();
            let quantile = |q: f64| {
                let want = (q * count as f64).ceil() as u64;
                cumulative
                    .iter()
                    .find(|(_, c)| *c >= want.max(1))
                    .map_or(f64::INFINITY, |(le, _)| *le)
            };
            let mut before = 0;
            let histogram = cumulative
                .iter()
                .map(|(le, c)| {
                    let n = c - before;
                    before = *c;
                    (*le, n)
                })
                .collect();
            out.push(ToolStat {
                errors: errors.get(&tool).copied().unwrap_or(0),
                tool,
                calls: count,
                p50_ms: quantile(0.5),
                p95_ms: quantile(0.95),
                mean_ms: if count == 0 {
                    0.0
                } else {
                    h.get_sample_sum() * 1000.0 / count as f64
                },
                histogram,
            });
        }
    }
    out.sort_by(|a, b| a.tool.cmp(&b.tool));
    out
}

/// What a scrape reads at the time it comes, beside what was counted.
pub(crate) struct Scrape {
    registry: Registry,
}

impl Default for Scrape {
    fn default() -> Self {
        Scrape {
            registry: Registry::new(),
        }
    }
}

impl Scrape {
    /// A gauge without labels.
    pub(crate) fn gauge(&self, name: &str, help: &str, value: f64) {
        self.gauge_by(name, help, &[], &[(Vec::new(), value)]);
    }

    /// A gauge with labels `labels`, one sample per `(label values, value)`.
    pub(crate) fn gauge_by(
        &self,
        name: &str,
        help: &str,
        labels: &[&str],
        samples: &[(Vec<String>, f64)],
    ) {
        let Ok(g) = prometheus::GaugeVec::new(Opts::new(name, help), labels) else {
            tracing::warn!(metric = name, "not a valid metric; left out");
            return;
        };
        for (values, v) in samples {
            let values: Vec<&str> = values.iter().map(String::as_str).collect();
            g.with_label_values(&values).set(*v);
        }
        self.register(name, Box::new(g));
    }

    /// A counter read from elsewhere (a total kept by another part of the process).
    pub(crate) fn counter(&self, name: &str, help: &str, value: u64) {
        let Ok(c) = prometheus::IntCounter::new(name, help) else {
            tracing::warn!(metric = name, "not a valid metric; left out");
            return;
        };
        c.inc_by(value);
        self.register(name, Box::new(c));
    }

    fn register(&self, name: &str, m: Box<dyn prometheus::core::Collector>) {
        if let Err(e) = self.registry.register(m) {
            tracing::warn!(metric = name, error = %e, "metric left out");
        }
    }

    /// The exposition: what was counted, then what was read, in the text format.
    pub(crate) fn render(self) -> String {
        let mut families = COUNTED.registry.gather();
        families.extend(self.registry.gather());
        let mut out = Vec::new();
        if let Err(e) = TextEncoder::new().encode(&families, &mut out) {
            tracing::warn!(error = %e, "metrics could not be encoded");
        }
        String::from_utf8(out).unwrap_or_default()
    }
}

/// The content type of [`Scrape::render`]'s text.
pub(crate) const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_are_counted_by_known_tool_and_made_up_names_share_one_label() {
        let work = crate::metrics::cost::Work {
            texts_read: 3,
            ..Default::default()
        };
        record_call("metrics_test_tool", true, None, 0.002, &work);
        record_call(
            "metrics_test_tool",
            true,
            Some("ERR_NOT_FOUND"),
            0.004,
            &Default::default(),
        );
        record_call(
            "no such tool <script>",
            false,
            Some("ERR_UNKNOWN_TOOL"),
            0.0001,
            &Default::default(),
        );
        let scrape = Scrape::default();
        scrape.gauge_by(
            "cairn_test_documents",
            "Documents.",
            &["collection"],
            &[(vec!["docs".into()], 3.0)],
        );
        let text = scrape.render();
        assert!(
            text.contains(r#"cairn_tool_calls_total{outcome="ok",tool="metrics_test_tool"} 1"#),
            "{text}"
        );
        assert!(text.contains(
            r#"cairn_tool_call_errors_total{code="ERR_NOT_FOUND",tool="metrics_test_tool"} 1"#
        ));
        assert!(text.contains(r#"tool="(unknown)""#) && !text.contains("<script>"));
        assert!(
            text.contains(r#"cairn_tool_work_total{tool="metrics_test_tool",unit="texts_read"} 3"#),
            "{text}"
        );
        assert!(!text.contains(r#"tool="metrics_test_tool",unit="rows_read""#));
        assert!(text.contains(r#"cairn_test_documents{collection="docs"} 3"#));
        assert!(text.contains(
            r#"cairn_tool_call_duration_seconds_bucket{tool="metrics_test_tool",le="0.004"} 2"#
        ));
        let stats = tool_stats();
        let mine = stats
            .iter()
            .find(|s| s.tool == "metrics_test_tool")
            .unwrap();
        assert_eq!((mine.calls, mine.errors), (2, 1));
        assert!((mine.p50_ms - 2.0).abs() < 1e-9 && (mine.p95_ms - 4.0).abs() < 1e-9);
        assert_eq!(mine.histogram.iter().map(|(_, n)| n).sum::<u64>(), 2);
    }
}
