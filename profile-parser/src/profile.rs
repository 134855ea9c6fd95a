//! Streaming reader of ONNX Runtime profile files (Chrome-trace JSON) into typed, per-run data.
//!
//! Accepted variants: a bare JSON array of events or `{"traceEvents": [...]}`; numeric `args` as
//! strings (ORT) or numbers; `node_index` or the pre-1.14 `graph_index`; pre-1.20 `_fence_before` /
//! `_fence_after` events (skipped); events in any order.
//!
//! Memory: events arrive one at a time from [`crate::event_stream`]; per kernel execution only a
//! 16-byte record (node id, start, duration) is kept, and node metadata (shapes) once per distinct
//! node. ORT records at most 1,000,000 events, so the working set is bounded (≤ ~40 MB with the
//! per-run lists) however large the event text is.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::io::Read;

use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::event_stream::{for_each_event, StreamError};
use crate::shape::TensorShape;

/// ORT's default cap on recorded profile events (`Profiler::global_max_num_events_`).
pub const ORT_MAX_EVENTS: usize = 1_000_000;

/// Suffix ORT appends to a node's name in its Node event.
const KERNEL_TIME_SUFFIX: &str = "_kernel_time";

/// One `model_run` window: the span of one `Run()` call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunWindow {
    /// Start (µs from profiling start).
    pub ts_us: u64,
    /// Duration (µs).
    pub dur_us: u64,
}

/// A node (kernel) as the profile shows it: one per distinct event name.
#[derive(Debug, Clone, PartialEq)]
pub struct ProfiledNode {
    /// Node name (event name without `_kernel_time`); post-optimization for optimized sessions.
    pub name: String,
    /// `args.op_name`: op type, or the metadef name for a fused partition node.
    pub op_type: String,
    /// `args.provider`: the EP that ran it.
    pub provider: String,
    /// `args.node_index` (or `graph_index` in old builds).
    pub node_index: Option<u64>,
    /// Input shapes of its first execution.
    pub input_shapes: Vec<TensorShape>,
    /// Output shapes of its first execution.
    pub output_shapes: Vec<TensorShape>,
    /// Read with [`parse_profile_every_shape`]: each distinct set of shapes it ran with and how
    /// often, in order of first appearance (a decode step's attention at each past length); empty
    /// otherwise.
    pub shaped_executions: Vec<ShapedExecutions>,
}

/// The executions of one node with one set of shapes.
#[derive(Debug, Clone, PartialEq)]
pub struct ShapedExecutions {
    /// Input shapes.
    pub input_shapes: Vec<TensorShape>,
    /// Output shapes.
    pub output_shapes: Vec<TensorShape>,
    /// How many executions had them.
    pub executions: usize,
}

/// One kernel execution inside a run (16 bytes: one is kept per kernel event).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Execution {
    /// Index into [`Profile::nodes`].
    pub node: u32,
    /// Duration (µs), saturated at ~71 minutes.
    pub dur_us: u32,
    /// Start (µs from profiling start).
    pub ts_us: u64,
}

/// A parsed profile: runs, the nodes seen, and each run's kernel executions in execution order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Profile {
    /// `model_run` windows sorted by start.
    pub runs: Vec<RunWindow>,
    /// Every distinct node, in order of first appearance in the file.
    pub nodes: Vec<ProfiledNode>,
    /// Kernel executions inside runs, sorted by start time.
    executions: Vec<Execution>,
    /// Per run (same order as `runs`), its slice of `executions`.
    run_ranges: Vec<std::ops::Range<usize>>,
    /// Total events in the file.
    pub event_count: usize,
    /// Named, non-fatal observations (skipped events, the event cap, events outside runs).
    pub warnings: Vec<String>,
}

impl Profile {
    /// Index of the node with this name.
    pub fn find(&self, name: &str) -> Option<usize> {
        self.nodes.iter().position(|n| n.name == name)
    }

    /// One run's kernel executions in execution order (empty for an unknown run).
    pub fn run(&self, run: usize) -> &[Execution] {
        self.run_ranges.get(run).map_or(&[], |range| &self.executions[range.clone()])
    }

    /// Every run's kernel executions, in run order.
    pub fn run_executions(&self) -> impl Iterator<Item = &[Execution]> {
        self.run_ranges.iter().map(|range| &self.executions[range.clone()])
    }

    /// The node an execution ran.
    pub fn node_of(&self, execution: &Execution) -> &ProfiledNode {
        &self.nodes[execution.node as usize]
    }

    /// Each execution of `run` with its own time (µs): its duration less the durations of the
    /// kernels that ran inside it. A control-flow kernel (`Loop`, `If`, `Scan`) is timed around
    /// its body's kernels, which have events of their own: counted whole, the body's time would
    /// count twice (slanet-plus's Loop: 1,730 ms a run summed where ~1,050 ms were measured).
    pub fn self_times<'p>(&'p self, run: &'p [Execution]) -> impl Iterator<Item = (&'p Execution, f64)> {
        let mut own: Vec<f64> = run.iter().map(|e| f64::from(e.dur_us)).collect();
        // Executions are sorted by start: a stack of the kernels still open finds each one's parent.
        let mut open: Vec<usize> = Vec::new();
        for (i, execution) in run.iter().enumerate() {
            let end = execution.ts_us + u64::from(execution.dur_us);
            while open.last().is_some_and(|&p| run[p].ts_us + u64::from(run[p].dur_us) <= execution.ts_us) {
                open.pop();
            }
            if let Some(&parent) = open.last().filter(|&&p| end <= run[p].ts_us + u64::from(run[p].dur_us)) {
                own[parent] -= f64::from(execution.dur_us);
            }
            open.push(i);
        }
        run.iter().zip(own).map(|(e, t)| (e, t.max(0.0)))
    }

    /// A node's summed kernel time in each run (µs; its own, see [`Profile::self_times`]), in run
    /// order; 0 where it did not run.
    pub fn node_time_per_run(&self, node: usize) -> Vec<f64> {
        self.run_executions()
            .map(|run| self.self_times(run).filter(|(e, _)| e.node as usize == node).map(|(_, t)| t).sum())
            .collect()
    }

    /// The providers of one run's kernels in execution order.
    pub fn provider_sequence(&self, run: usize) -> Vec<&str> {
        self.run(run).iter().map(|e| self.node_of(e).provider.as_str()).collect()
    }
}

/// Why a profile could not be parsed.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    /// The file ends in the middle of the JSON (ORT killed before `EndProfiling`, or a partial copy).
    #[error("is truncated at line {line}, column {column}: re-run the profiled pass or copy the whole file")]
    Truncated {
        /// Line where input ended.
        line: usize,
        /// Column where input ended.
        column: usize,
    },
    /// The JSON is malformed or not an ORT profile.
    #[error("is not an ORT profile: {message} at line {line}, column {column}")]
    Malformed {
        /// Line of the problem.
        line: usize,
        /// Column of the problem.
        column: usize,
        /// What is wrong.
        message: String,
    },
    /// Reading failed.
    #[error("cannot be read: {0}")]
    Io(std::io::Error),
}

impl From<StreamError> for ProfileError {
    fn from(err: StreamError) -> Self {
        match err {
            StreamError::Truncated(at) => ProfileError::Truncated { line: at.line, column: at.column },
            StreamError::Malformed(at, message) => {
                ProfileError::Malformed { line: at.line, column: at.column, message }
            }
            StreamError::Io(e) => ProfileError::Io(e),
        }
    }
}

/// Parses a profile from a reader (a file, a slice), streaming: memory does not grow with the text.
pub fn parse_profile<R: Read>(reader: R) -> Result<Profile, ProfileError> {
    parse(reader, ProfileBuilder::default())
}

/// [`parse_profile`] that also keeps every distinct set of shapes each node ran with
/// ([`ProfiledNode::shaped_executions`]): for a reference profile whose runs differ in shape.
/// Every event's `args` is read, so it is slower on large profiles.
pub fn parse_profile_every_shape<R: Read>(reader: R) -> Result<Profile, ProfileError> {
    parse(reader, ProfileBuilder { every_shape: true, ..ProfileBuilder::default() })
}

fn parse<R: Read>(reader: R, mut builder: ProfileBuilder) -> Result<Profile, ProfileError> {
    for_each_event(reader, |bytes: &[u8]| {
        let mut events = serde_json::Deserializer::from_slice(bytes).into_iter::<RawEvent<'_>>();
        match events.next() {
            Some(Ok(event)) => {
                builder.add(event);
                Ok(events.byte_offset())
            }
            Some(Err(err)) => Err(err),
            None => Ok(bytes.len()),
        }
    })?;
    Ok(builder.finish())
}

/// A number ORT may write as a JSON string (`"602112"`) or a plain number.
#[derive(Debug, Clone, Copy)]
struct LooseU64(Option<u64>);

impl<'de> Deserialize<'de> for LooseU64 {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = LooseU64;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a number or a numeric string")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<LooseU64, E> {
                Ok(LooseU64(Some(v)))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<LooseU64, E> {
                Ok(LooseU64(u64::try_from(v).ok()))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<LooseU64, E> {
                Ok(LooseU64((v.is_finite() && v >= 0.0).then_some(v as u64)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<LooseU64, E> {
                Ok(LooseU64(v.trim().parse().ok()))
            }
        }
        d.deserialize_any(V)
    }
}

/// The `args` of an event; unknown keys (memory stats, thread stats) are skipped unparsed, shapes
/// are kept raw and parsed only for a node's first event.
#[derive(Debug, Default, Deserialize)]
struct RawArgs<'a> {
    #[serde(borrow)]
    provider: Option<Cow<'a, str>>,
    #[serde(borrow)]
    op_name: Option<Cow<'a, str>>,
    node_index: Option<LooseU64>,
    graph_index: Option<LooseU64>,
    #[serde(borrow)]
    input_type_shape: Option<&'a RawValue>,
    #[serde(borrow)]
    output_type_shape: Option<&'a RawValue>,
}

/// One trace event with every field optional, so a missing field is a counted warning, not an abort.
/// `args` (the bulk of the text) is kept raw and parsed only for a node's first event.
#[derive(Debug, Deserialize)]
struct RawEvent<'a> {
    #[serde(borrow)]
    cat: Option<Cow<'a, str>>,
    #[serde(borrow)]
    name: Option<Cow<'a, str>>,
    ts: Option<LooseU64>,
    dur: Option<LooseU64>,
    #[serde(borrow, default)]
    args: Option<&'a RawValue>,
}

/// Accumulates events; turns them into a [`Profile`] once all are seen (events may be unsorted).
#[derive(Default)]
struct ProfileBuilder {
    runs: Vec<RunWindow>,
    nodes: Vec<ProfiledNode>,
    node_ids: HashMap<String, usize>,
    records: Vec<Execution>,
    event_count: usize,
    fence_events: usize,
    incomplete_events: usize,
    first_incomplete: Option<usize>,
    no_provider_events: usize,
    unreadable_shapes: usize,
    unreadable_args: usize,
    /// Keep every distinct shape set per node ([`parse_profile_every_shape`]).
    every_shape: bool,
    /// (node, raw input and output shape text) → index into the node's `shaped_executions`.
    shape_sets: HashMap<(usize, String), usize>,
}

impl ProfileBuilder {
    fn add(&mut self, event: RawEvent<'_>) {
        let index = self.event_count;
        self.event_count += 1;
        let (Some(cat), Some(name), Some(LooseU64(Some(ts))), Some(LooseU64(Some(dur)))) =
            (event.cat, event.name, event.ts, event.dur)
        else {
            self.incomplete_events += 1;
            self.first_incomplete.get_or_insert(index);
            return;
        };
        match cat.as_ref() {
            "Session" if name == "model_run" => self.runs.push(RunWindow { ts_us: ts, dur_us: dur }),
            "Node" => self.add_node_event(&name, ts, dur, event.args),
            _ => {}
        }
    }

    fn shapes(&mut self, raw: Option<&RawValue>) -> Vec<TensorShape> {
        raw.map_or_else(Vec::new, |raw| {
            serde_json::from_str(raw.get()).unwrap_or_else(|_| {
                self.unreadable_shapes += 1;
                Vec::new()
            })
        })
    }

    fn args<'a>(&mut self, raw_args: Option<&'a RawValue>) -> RawArgs<'a> {
        raw_args.map_or_else(RawArgs::default, |raw| {
            serde_json::from_str(raw.get()).unwrap_or_else(|_| {
                self.unreadable_args += 1;
                RawArgs::default()
            })
        })
    }

    /// Counts one execution of `node` under its shape set (a new set is parsed and kept).
    fn add_shape_set(&mut self, node: usize, args: &RawArgs<'_>) {
        let text = |raw: Option<&RawValue>| raw.map_or("", RawValue::get).to_string();
        let key = (node, text(args.input_type_shape) + "|" + &text(args.output_type_shape));
        let next = self.nodes[node].shaped_executions.len();
        let index = *self.shape_sets.entry(key).or_insert(next);
        if index == next {
            let shaped = ShapedExecutions {
                input_shapes: self.shapes(args.input_type_shape),
                output_shapes: self.shapes(args.output_type_shape),
                executions: 0,
            };
            self.nodes[node].shaped_executions.push(shaped);
        }
        self.nodes[node].shaped_executions[index].executions += 1;
    }

    fn add_node_event(&mut self, name: &str, ts: u64, dur: u64, raw_args: Option<&RawValue>) {
        if name.ends_with("_fence_before") || name.ends_with("_fence_after") {
            self.fence_events += 1;
            return;
        }
        let node = match self.node_ids.get(name) {
            Some(&id) => {
                if self.every_shape {
                    let args = self.args(raw_args);
                    self.add_shape_set(id, &args);
                }
                id
            }
            None => {
                let args = self.args(raw_args);
                let provider = args.provider.as_deref().map_or_else(
                    || {
                        self.no_provider_events += 1;
                        "<unknown>".to_string()
                    },
                    str::to_string,
                );
                let id = self.nodes.len();
                let node = ProfiledNode {
                    name: name.strip_suffix(KERNEL_TIME_SUFFIX).unwrap_or(name).to_string(),
                    op_type: args.op_name.as_deref().unwrap_or_default().to_string(),
                    provider,
                    node_index: args.node_index.or(args.graph_index).and_then(|n| n.0),
                    input_shapes: self.shapes(args.input_type_shape),
                    output_shapes: self.shapes(args.output_type_shape),
                    shaped_executions: Vec::new(),
                };
                self.nodes.push(node);
                self.node_ids.insert(name.to_string(), id);
                if self.every_shape {
                    self.add_shape_set(id, &args);
                }
                id
            }
        };
        // Node ids are < 2^32 (ORT caps events at 1e6) and one kernel never runs for 71 minutes.
        self.records.push(Execution {
            node: u32::try_from(node).unwrap_or(u32::MAX),
            dur_us: u32::try_from(dur).unwrap_or(u32::MAX),
            ts_us: ts,
        });
    }

    fn finish(mut self) -> Profile {
        let mut warnings = Vec::new();
        if self.incomplete_events > 0 {
            warnings.push(format!(
                "skipped {} event(s) missing cat/name/ts/dur (first is event #{})",
                self.incomplete_events,
                self.first_incomplete.unwrap_or(0)
            ));
        }
        if self.fence_events > 0 {
            warnings.push(format!("ignored {} _fence_before/_fence_after event(s) (ORT < 1.20)", self.fence_events));
        }
        if self.unreadable_args > 0 {
            warnings.push(format!(
                "{} node(s) have args that are not an object of ORT's keys: op/provider/shapes unknown",
                self.unreadable_args
            ));
        }
        if self.unreadable_shapes > 0 {
            warnings.push(format!(
                "{} shape list(s) are not [{{\"type\":[dims]}}, …]: shapes unknown there",
                self.unreadable_shapes
            ));
        }
        if self.no_provider_events > 0 {
            warnings.push(format!("{} node(s) have no args.provider; shown as <unknown>", self.no_provider_events));
        }
        if self.event_count >= ORT_MAX_EVENTS {
            warnings.push(format!(
                "profile holds {} events, ORT's cap is {ORT_MAX_EVENTS}: later events were dropped, use fewer --profile-runs",
                self.event_count
            ));
        }
        if self.runs.is_empty() {
            warnings.push("profile has no model_run events: 0 runs profiled".to_string());
        }
        self.runs.sort_by_key(|r| (r.ts_us, r.dur_us));
        let (executions, run_ranges, outside) = split_into_runs(self.records, &self.runs);
        if outside > 0 {
            warnings.push(format!("{outside} kernel event(s) lie outside every model_run window and were not counted"));
        }
        Profile { runs: self.runs, nodes: self.nodes, executions, run_ranges, event_count: self.event_count, warnings }
    }
}

/// Sorts executions by start and keeps those inside a run (`[ts, ts+dur]` contains their start),
/// in place; returns them, each run's range, and how many were outside every run.
fn split_into_runs(
    mut executions: Vec<Execution>,
    runs: &[RunWindow],
) -> (Vec<Execution>, Vec<std::ops::Range<usize>>, usize) {
    executions.sort_by_key(|e| e.ts_us);
    let mut ranges = vec![0..0; runs.len()];
    let (mut kept, mut run) = (0, 0);
    for read in 0..executions.len() {
        let e = executions[read];
        while run < runs.len() && e.ts_us > runs[run].ts_us.saturating_add(runs[run].dur_us) {
            run += 1;
        }
        if run < runs.len() && e.ts_us >= runs[run].ts_us {
            if ranges[run].is_empty() {
                ranges[run] = kept..kept;
            }
            executions[kept] = e;
            kept += 1;
            ranges[run].end = kept;
        }
    }
    let outside = executions.len() - kept;
    executions.truncate(kept);
    executions.shrink_to_fit();
    (executions, ranges, outside)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TWO_RUNS: &str = r#"[
{"cat":"Node","name":"b_kernel_time","ts":30,"dur":5,"args":{"provider":"CPUExecutionProvider","op_name":"Relu","node_index":"1"}},
{"cat":"Node","name":"a_kernel_time","ts":12,"dur":4,"args":{"provider":"QNNExecutionProvider","op_name":"Q","input_type_shape":[{"float":[1,3]}]}},
{"cat":"Session","name":"model_run","ts":10,"dur":30,"args":{}},
{"cat":"Node","name":"a_kernel_time","ts":52,"dur":6,"args":{"provider":"QNNExecutionProvider","op_name":"Q"}},
{"cat":"Node","name":"b_fence_before","ts":58,"dur":0,"args":{}},
{"cat":"Session","name":"model_run","ts":50,"dur":30,"args":{}}
]"#;

    #[test]
    fn assigns_unsorted_events_to_runs_and_orders_them() {
        let p = parse_profile(TWO_RUNS.as_bytes()).unwrap();
        assert_eq!(p.runs.len(), 2);
        assert_eq!(p.provider_sequence(0), ["QNNExecutionProvider", "CPUExecutionProvider"]);
        assert_eq!(p.provider_sequence(1), ["QNNExecutionProvider"]);
        let a = p.find("a").unwrap();
        assert_eq!(p.run(0).len(), 2);
        assert_eq!(p.node_time_per_run(a), [4.0, 6.0]);
        assert_eq!(p.nodes[a].input_shapes[0].to_string(), "[1,3]");
        assert_eq!(p.nodes[p.find("b").unwrap()].node_index, Some(1));
        assert!(p.warnings.iter().any(|w| w.contains("_fence_before")), "{:?}", p.warnings);
    }

    #[test]
    fn a_loops_kernel_time_is_its_own_not_its_bodys_again() {
        let text = r#"[
{"cat":"Session","name":"model_run","ts":0,"dur":100,"args":{}},
{"cat":"Node","name":"loop_kernel_time","ts":10,"dur":80,"args":{"provider":"CPUExecutionProvider","op_name":"Loop"}},
{"cat":"Node","name":"body_a_kernel_time","ts":12,"dur":30,"args":{"provider":"QNNExecutionProvider","op_name":"MatMul"}},
{"cat":"Node","name":"body_b_kernel_time","ts":50,"dur":35,"args":{"provider":"CPUExecutionProvider","op_name":"Tanh"}},
{"cat":"Node","name":"after_kernel_time","ts":91,"dur":5,"args":{"provider":"CPUExecutionProvider","op_name":"Add"}}
]"#;
        let p = parse_profile(text.as_bytes()).unwrap();
        let time = |name: &str| p.node_time_per_run(p.nodes.iter().position(|n| n.name == name).unwrap())[0];
        assert_eq!((time("loop"), time("body_a"), time("body_b"), time("after")), (15.0, 30.0, 35.0, 5.0));
        let run = p.run_executions().next().unwrap();
        let total: f64 = p.self_times(run).map(|(_, t)| t).sum();
        assert_eq!(total, 85.0, "the Loop's 80 µs and the kernel after it, the body counted once");
    }

    #[test]
    fn every_shape_keeps_each_distinct_shape_set_with_its_count() {
        let event = |ts: u64, past: u64| {
            format!(
                r#"{{"cat":"Node","name":"att_kernel_time","ts":{ts},"dur":1,"args":{{"provider":"CPUExecutionProvider","op_name":"MatMul","input_type_shape":[{{"float":[1,{past}]}}]}}}}"#
            )
        };
        let text = format!("[{},{},{}]", event(1, 32), event(2, 32), event(3, 431));
        let p = parse_profile_every_shape(text.as_bytes()).unwrap();
        let counts: Vec<(String, usize)> =
            p.nodes[0].shaped_executions.iter().map(|s| (s.input_shapes[0].to_string(), s.executions)).collect();
        assert_eq!(counts, [("[1,32]".to_string(), 2), ("[1,431]".to_string(), 1)]);
        assert!(parse_profile(text.as_bytes()).unwrap().nodes[0].shaped_executions.is_empty());
    }

    #[test]
    fn accepts_trace_events_wrapper_and_numeric_args() {
        let text = r#"{"displayTimeUnit":"us","traceEvents":[
            {"cat":"Session","name":"model_run","ts":"0","dur":"100"},
            {"cat":"Node","name":"x_kernel_time","ts":1,"dur":2,"args":{"provider":"CPUExecutionProvider","op_name":"Add","graph_index":7}}]}"#;
        let p = parse_profile(text.as_bytes()).unwrap();
        assert_eq!(p.runs.len(), 1);
        assert_eq!(p.nodes[0].node_index, Some(7));
        assert_eq!(p.run(0).len(), 1);
    }

    #[test]
    fn truncated_and_wrong_type_are_distinct_errors() {
        let cut = &TWO_RUNS[..TWO_RUNS.len() / 2];
        assert!(matches!(parse_profile(cut.as_bytes()), Err(ProfileError::Truncated { .. })));
        let err = parse_profile(&b"42"[..]).unwrap_err().to_string();
        assert!(err.contains("array of trace events"), "{err}");
        let err = parse_profile(&br#"{"other":[]}"#[..]).unwrap_err().to_string();
        assert!(err.contains("traceEvents"), "{err}");
    }

    #[test]
    fn missing_fields_and_no_runs_are_warnings() {
        let text = r#"[{"cat":"Node","ts":1,"dur":2},{"cat":"Node","name":"y_kernel_time","ts":1,"dur":2,"args":{"provider":"CPUExecutionProvider"}}]"#;
        let p = parse_profile(text.as_bytes()).unwrap();
        let all = p.warnings.join("\n");
        assert!(all.contains("skipped 1 event(s) missing"), "{all}");
        assert!(all.contains("no model_run"), "{all}");
        assert!(all.contains("outside every model_run"), "{all}");
    }
}
