//! QNN's own profiling CSV (`profiling_file_path`), appended once per execute.
//!
//! Header: `Msg Timestamp,Message,Time,Unit of Measurement,Timing Source,Event Level,Event Identifier`.
//! Per-op rows are `NODE` sub-events whose `Event Identifier` is the QNN op name (at `detailed`
//! level; `NULL` otherwise). Their values are collected per op and reduced to the median.
//!
//! Rows are read with the `csv` crate, so a quoted op name may hold commas, quotes and line breaks.
//! An op name written unquoted with commas in it spills into extra columns; as the identifier is
//! the last column, those columns are joined back into the name.

use std::collections::BTreeMap;
use std::io::Read;

use crate::report::BackendOpTime;

/// The header QNN EP writes (`qnn_profile_serializer.cc` `InitCsvFile`).
pub const QNN_CSV_HEADER: &str =
    "Msg Timestamp,Message,Time,Unit of Measurement,Timing Source,Event Level,Event Identifier";

/// Columns of a row; the last one, the event identifier, may have been split by unquoted commas.
const COLUMNS: usize = 7;

/// Why a QNN CSV could not be read.
#[derive(Debug, thiserror::Error)]
pub enum QnnCsvError {
    /// The first line is not QNN's header.
    #[error("first line is not the QNN profiling header {QNN_CSV_HEADER:?}")]
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

/// Per-op backend timings, one entry per QNN op (median over executes).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QnnProfile {
    /// Per-op times, in first-seen order.
    pub ops: Vec<BackendOpTime>,
    /// Number of `EXECUTE` root events (profiled executes).
    pub executes: usize,
}

/// Parses a QNN profiling CSV.
pub fn parse_qnn_csv<R: Read>(reader: R) -> Result<QnnProfile, QnnCsvError> {
    let mut rows = csv::ReaderBuilder::new().has_headers(false).flexible(true).trim(csv::Trim::All).from_reader(reader);
    let mut record = csv::StringRecord::new();
    if !rows.read_record(&mut record)? || record.iter().collect::<Vec<_>>().join(",") != QNN_CSV_HEADER {
        return Err(QnnCsvError::Header);
    }
    let mut samples: BTreeMap<(String, String), Vec<f64>> = BTreeMap::new();
    let mut order: Vec<(String, String)> = Vec::new();
    let mut executes = 0;
    while rows.read_record(&mut record)? {
        let line = record.position().map_or(0, csv::Position::line);
        let row_error = |problem: String| QnnCsvError::Row { line, problem };
        if record.len() < COLUMNS {
            return Err(row_error(format!("expected {COLUMNS} columns, found {}", record.len())));
        }
        let (message, time, unit, level) = (&record[1], &record[2], &record[3], &record[5]);
        let identifier = record.iter().skip(COLUMNS - 1).collect::<Vec<_>>().join(",");
        if message == "EXECUTE" && level == "ROOT" {
            executes += 1;
        }
        if message != "NODE" || identifier == "NULL" {
            continue;
        }
        let value: f64 = time.parse().map_err(|_| row_error(format!("time {time:?} is not a number")))?;
        let key = (identifier, unit.to_string());
        let entry = samples.entry(key.clone()).or_default();
        if entry.is_empty() {
            order.push(key);
        }
        entry.push(value);
    }
    let ops = order
        .into_iter()
        .map(|key| {
            let value = samples.get(&key).and_then(|v| npugate_stats::median(v)).unwrap_or_default();
            BackendOpTime { name: key.0, value, unit: key.1 }
        })
        .collect();
    Ok(QnnProfile { ops, executes })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_per_op_and_counts_executes() {
        let csv = format!(
            "{QNN_CSV_HEADER}\nUNKNOWN,EXECUTE,900,US,BACKEND,ROOT,NULL\nUNKNOWN,NODE,10,US,BACKEND,SUB-EVENT,conv1\n\
             UNKNOWN,EXECUTE,800,US,BACKEND,ROOT,NULL\nUNKNOWN,NODE,30,US,BACKEND,SUB-EVENT,conv1\n\
             UNKNOWN,NODE,20,US,BACKEND,SUB-EVENT,conv1\n"
        );
        let p = parse_qnn_csv(csv.as_bytes()).unwrap();
        assert_eq!(p.executes, 2);
        assert_eq!(p.ops, [BackendOpTime { name: "conv1".into(), value: 20.0, unit: "US".into() }]);
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
        assert_eq!(
            p.ops,
            [
                BackendOpTime { name: "/model.1/conv,\"fused\"".into(), value: 20.0, unit: "US".into() },
                BackendOpTime { name: "/model.2/mul,a,b".into(), value: 5.0, unit: "CYCLES".into() },
            ]
        );
    }
}
