//! QNN's own profiling CSV (`profiling_file_path`), appended once per execute.
//!
//! Header: `Msg Timestamp,Message,Time,Unit of Measurement,Timing Source,Event Level,Event Identifier`,
//! and, when the EP's framework op trace is on (onnxruntime-qnn ≥ 2.7), an eighth column `ONNX
//! Source Ops` (the op's ONNX source nodes, `;`-separated). Per-op rows are `NODE` sub-events whose
//! `Event Identifier` names the QNN op: `conv1_token_1:OpId_23 (cycles)` — the op's name, QNN's op
//! id, the unit — or `Input OpId_2 (cycles)`, `Output OpId_3 (cycles)` (QNN's graph input and
//! output) and `OpId_19 (cycles)` (an op the HTP's compiler added, without a name); `NULL` at
//! levels without per-op events. Their values are collected per op and reduced to the median.
//!
//! Rows are read with the `csv` crate, so a quoted op name may hold commas, quotes and line breaks.
//! In the seven-column layout an op name written unquoted with commas in it spills into extra
//! columns; as the identifier is the last column there, those columns are joined back into the name.

use std::collections::BTreeMap;
use std::io::Read;

/// The header QNN EP writes (`qnn_profile_serializer.cc` `InitCsvFile`), without the trace's column.
pub const QNN_CSV_HEADER: &str =
    "Msg Timestamp,Message,Time,Unit of Measurement,Timing Source,Event Level,Event Identifier";

/// The column the EP adds when its framework op trace is on.
pub const SOURCES_COLUMN: &str = "ONNX Source Ops";

/// Columns of the plain layout; its last one, the event identifier, may have been split by unquoted commas.
const COLUMNS: usize = 7;

/// Why a QNN CSV could not be read.
#[derive(Debug, thiserror::Error)]
pub enum QnnCsvError {
    /// The first line is not QNN's header.
    #[error(
        "first line is not the QNN profiling header {QNN_CSV_HEADER:?} (optionally followed by {SOURCES_COLUMN:?})"
    )]
    Header,
    /// A row has too few columns, a non-numeric time or is not valid CSV.
    #[error("line {line}: {problem}")]
    Row {
        /// 1-based line number.
        line: u64,
        /// What is wrong.
        problem: String,
    },
    /// Reading failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

impl From<csv::Error> for QnnCsvError {
    fn from(error: csv::Error) -> QnnCsvError {
        let line = error.position().map_or(0, csv::Position::line);
        let problem = error.to_string();
        match error.into_kind() {
            csv::ErrorKind::Io(io) => QnnCsvError::Io(io),
            _ => QnnCsvError::Row { line, problem },
        }
    }
}

/// One QNN op's time in QNN's profile: the median over executes.
#[derive(Debug, Clone, PartialEq)]
pub struct ProfiledOp {
    /// The event identifier as QNN wrote it (`conv1_token_1:OpId_23 (cycles)`).
    pub identifier: String,
    /// What it names.
    pub op: OpIdentity,
    /// Median value per execute.
    pub value: f64,
    /// Unit as QNN reported it (`US`, `CYCLES`).
    pub unit: String,
    /// The op's ONNX source nodes from the `ONNX Source Ops` column (empty without it).
    pub sources: Vec<String>,
}

/// What a per-op event identifier names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpIdentity {
    /// The QNN op's name (`conv1_token_1`); `None` for QNN's graph input/output and ops without a name.
    pub name: Option<String>,
    /// QNN's op id (`OpId_23` → 23).
    pub op_id: Option<u32>,
    /// QNN's graph input (`Input OpId_2`) or output (`Output OpId_3`) op.
    pub graph_io: Option<GraphIoOp>,
}

/// QNN's own graph input and output ops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GraphIoOp {
    /// Reads the graph's inputs.
    Input,
    /// Writes the graph's outputs.
    Output,
}

impl OpIdentity {
    /// Parses `name:OpId_23 (cycles)`, `Input OpId_2 (cycles)`, `OpId_19 (cycles)` or a bare name.
    pub fn parse(identifier: &str) -> OpIdentity {
        let text = match identifier.rsplit_once(" (") {
            Some((head, unit)) if unit.ends_with(')') && !unit.contains(' ') => head,
            _ => identifier,
        };
        let op_id = |s: &str| s.strip_prefix("OpId_").and_then(|n| n.parse::<u32>().ok());
        for (prefix, io) in [("Input ", GraphIoOp::Input), ("Output ", GraphIoOp::Output)] {
            if let Some(id) = text.strip_prefix(prefix).and_then(op_id) {
                return OpIdentity { name: None, op_id: Some(id), graph_io: Some(io) };
            }
        }
        if let Some(id) = op_id(text) {
            return OpIdentity { name: None, op_id: Some(id), graph_io: None };
        }
        match text.rsplit_once(":OpId_").and_then(|(name, id)| Some((name, id.parse::<u32>().ok()?))) {
            Some((name, id)) => OpIdentity { name: Some(name.to_string()), op_id: Some(id), graph_io: None },
            None => OpIdentity { name: Some(text.to_string()), op_id: None, graph_io: None },
        }
    }
}

/// Per-op backend timings, one entry per QNN op (median over executes).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QnnProfile {
    /// Per-op times, in first-seen order.
    pub ops: Vec<ProfiledOp>,
    /// Number of `EXECUTE` root events (profiled executes).
    pub executes: usize,
}

/// Parses a QNN profiling CSV.
pub fn parse_qnn_csv<R: Read>(reader: R) -> Result<QnnProfile, QnnCsvError> {
    let mut rows = csv::ReaderBuilder::new().has_headers(false).flexible(true).trim(csv::Trim::All).from_reader(reader);
    let mut record = csv::StringRecord::new();
    if !rows.read_record(&mut record)? {
        return Err(QnnCsvError::Header);
    }
    let header = record.iter().collect::<Vec<_>>().join(",");
    let with_sources = match header.strip_prefix(QNN_CSV_HEADER) {
        Some("") => false,
        Some(rest) if rest == format!(",{SOURCES_COLUMN}") => true,
        _ => return Err(QnnCsvError::Header),
    };
    let mut samples: BTreeMap<(String, String), (Vec<f64>, Vec<String>)> = BTreeMap::new();
    let mut order: Vec<(String, String)> = Vec::new();
    let mut executes = 0;
    while rows.read_record(&mut record)? {
        let line = record.position().map_or(0, csv::Position::line);
        let row_error = |problem: String| QnnCsvError::Row { line, problem };
        if record.len() < COLUMNS {
            return Err(row_error(format!("expected {COLUMNS} columns, found {}", record.len())));
        }
        let (message, time, unit, level) = (&record[1], &record[2], &record[3], &record[5]);
        let (identifier, sources) = match with_sources {
            // The trace's layout quotes what needs it: one identifier, one source list.
            true => (record[COLUMNS - 1].to_string(), record.get(COLUMNS).unwrap_or_default()),
            false => (record.iter().skip(COLUMNS - 1).collect::<Vec<_>>().join(","), ""),
        };
        if message == "EXECUTE" && level == "ROOT" {
            executes += 1;
        }
        if message != "NODE" || identifier == "NULL" {
            continue;
        }
        let value: f64 = time.parse().map_err(|_| row_error(format!("time {time:?} is not a number")))?;
        let key = (identifier, unit.to_string());
        let entry = samples.entry(key.clone()).or_default();
        if entry.0.is_empty() {
            order.push(key);
            entry.1 = sources.split(';').map(str::trim).filter(|s| !s.is_empty()).map(str::to_string).collect();
        }
        entry.0.push(value);
    }
    let ops = order
        .into_iter()
        .map(|key| {
            let (values, sources) = samples.remove(&key).unwrap_or_default();
            ProfiledOp {
                op: OpIdentity::parse(&key.0),
                identifier: key.0,
                value: npugate_result::stats::median(&values).unwrap_or_default(),
                unit: key.1,
                sources,
            }
        })
        .collect();
    Ok(QnnProfile { ops, executes })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(p: &QnnProfile) -> Vec<(&str, f64, &str)> {
        p.ops.iter().map(|o| (o.identifier.as_str(), o.value, o.unit.as_str())).collect()
    }

    #[test]
    fn medians_per_op_and_counts_executes() {
        let csv = format!(
            "{QNN_CSV_HEADER}\nUNKNOWN,EXECUTE,900,US,BACKEND,ROOT,NULL\nUNKNOWN,NODE,10,US,BACKEND,SUB-EVENT,conv1\n\
             UNKNOWN,EXECUTE,800,US,BACKEND,ROOT,NULL\nUNKNOWN,NODE,30,US,BACKEND,SUB-EVENT,conv1\n\
             UNKNOWN,NODE,20,US,BACKEND,SUB-EVENT,conv1\n"
        );
        let p = parse_qnn_csv(csv.as_bytes()).unwrap();
        assert_eq!(p.executes, 2);
        assert_eq!(values(&p), [("conv1", 20.0, "US")]);
        assert_eq!(p.ops[0].op, OpIdentity { name: Some("conv1".into()), op_id: None, graph_io: None });
        assert!(matches!(parse_qnn_csv(&b"a,b\n"[..]), Err(QnnCsvError::Header)));
        let bad = format!("{QNN_CSV_HEADER}\nUNKNOWN,NODE,x,US,BACKEND,SUB-EVENT,conv1\n");
        assert!(parse_qnn_csv(bad.as_bytes()).unwrap_err().to_string().contains("line 2"));
        let short = format!("{QNN_CSV_HEADER}\nUNKNOWN,NODE,10\n");
        assert!(parse_qnn_csv(short.as_bytes()).unwrap_err().to_string().contains("line 2: expected 7 columns"));
    }

    #[test]
    fn op_names_may_hold_commas_and_quotes() {
        // Quoted as RFC 4180 has it (quotes doubled), and unquoted with commas spilling into extra columns.
        let csv = format!(
            "{QNN_CSV_HEADER}\nUNKNOWN,NODE,10,US,BACKEND,SUB-EVENT,\"/model.1/conv,\"\"fused\"\"\"\n\
             UNKNOWN,NODE,30,US,BACKEND,SUB-EVENT,\"/model.1/conv,\"\"fused\"\"\"\n\
             UNKNOWN,NODE,5,CYCLES,BACKEND,SUB-EVENT,/model.2/mul,a,b\n"
        );
        let p = parse_qnn_csv(csv.as_bytes()).unwrap();
        assert_eq!(values(&p), [("/model.1/conv,\"fused\"", 20.0, "US"), ("/model.2/mul,a,b", 5.0, "CYCLES")]);
    }

    #[test]
    fn the_traces_column_gives_each_op_its_onnx_sources() {
        // As onnxruntime-qnn 2.7 writes it with the framework op trace on (the emulator, QNN 2.51).
        let csv = format!(
            "{QNN_CSV_HEADER},{SOURCES_COLUMN}\n0,NODE,19200,CYCLES,BACKEND,SUB-EVENT,Input OpId_2 (cycles),\n\
             0,NODE,27234100,CYCLES,BACKEND,SUB-EVENT,conv1_token_1:OpId_23 (cycles),DequantizeLinear_token_48;conv1.w_DequantizeLinear;conv1_token_1\n\
             0,NODE,800,CYCLES,BACKEND,SUB-EVENT,OpId_19 (cycles),\n\
             0,NODE,13600,CYCLES,BACKEND,SUB-EVENT,Output OpId_3 (cycles),\n\
             0,EXECUTE,267022,US,BACKEND,ROOT,QNN (execute) time,\n"
        );
        let p = parse_qnn_csv(csv.as_bytes()).unwrap();
        assert_eq!(p.executes, 1);
        let ops: Vec<&OpIdentity> = p.ops.iter().map(|o| &o.op).collect();
        assert_eq!(
            ops,
            [
                &OpIdentity { name: None, op_id: Some(2), graph_io: Some(GraphIoOp::Input) },
                &OpIdentity { name: Some("conv1_token_1".into()), op_id: Some(23), graph_io: None },
                &OpIdentity { name: None, op_id: Some(19), graph_io: None },
                &OpIdentity { name: None, op_id: Some(3), graph_io: Some(GraphIoOp::Output) },
            ]
        );
        assert_eq!(p.ops[1].sources, ["DequantizeLinear_token_48", "conv1.w_DequantizeLinear", "conv1_token_1"]);
        assert!(p.ops[0].sources.is_empty());
        assert_eq!(
            OpIdentity::parse("MatMul_6/MatMulAddFusion_2:OpId_41 (cycles)").name.as_deref(),
            Some("MatMul_6/MatMulAddFusion_2")
        );
    }
}
