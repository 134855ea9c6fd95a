//! QNN's own profiling CSV (`profiling_file_path`), appended once per execute.
//!
//! Header: `Msg Timestamp,Message,Time,Unit of Measurement,Timing Source,Event Level,Event Identifier`.
//! Per-op rows are `NODE` sub-events whose `Event Identifier` is the QNN op name (at `detailed`
//! level; `NULL` otherwise). Their values are collected per op and reduced to the median.

use std::collections::BTreeMap;
use std::io::BufRead;

use crate::report::BackendOpTime;
use crate::timing::median;

/// The header QNN EP writes (`qnn_profile_serializer.cc` `InitCsvFile`).
pub const QNN_CSV_HEADER: &str =
    "Msg Timestamp,Message,Time,Unit of Measurement,Timing Source,Event Level,Event Identifier";

/// Why a QNN CSV could not be read.
#[derive(Debug, thiserror::Error)]
pub enum QnnCsvError {
    /// The first line is not QNN's header.
    #[error("first line is not the QNN profiling header {QNN_CSV_HEADER:?}")]
    Header,
    /// A row has the wrong number of columns or a non-numeric time.
    #[error("line {line}: {problem}")]
    Row {
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        problem: String,
    },
    /// Reading failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
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
pub fn parse_qnn_csv<R: BufRead>(reader: R) -> Result<QnnProfile, QnnCsvError> {
    let mut lines = reader.lines();
    let header = lines.next().transpose()?.unwrap_or_default();
    if header.trim() != QNN_CSV_HEADER {
        return Err(QnnCsvError::Header);
    }
    let mut samples: BTreeMap<(String, String), Vec<f64>> = BTreeMap::new();
    let mut order: Vec<(String, String)> = Vec::new();
    let mut executes = 0;
    for (index, line) in lines.enumerate() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let cols: Vec<&str> = line.split(',').map(str::trim).collect();
        let row_error = |problem: String| QnnCsvError::Row { line: index + 2, problem };
        let [_, message, time, unit, _, level, identifier] = cols.as_slice() else {
            return Err(row_error(format!("expected 7 columns, found {}", cols.len())));
        };
        if *message == "EXECUTE" && *level == "ROOT" {
            executes += 1;
        }
        if *message != "NODE" || *identifier == "NULL" {
            continue;
        }
        let value: f64 = time.parse().map_err(|_| row_error(format!("time {time:?} is not a number")))?;
        let key = (identifier.to_string(), unit.to_string());
        let entry = samples.entry(key.clone()).or_default();
        if entry.is_empty() {
            order.push(key);
        }
        entry.push(value);
    }
    let ops = order
        .into_iter()
        .map(|key| {
            let value = samples.get(&key).map(|v| median(v)).unwrap_or_default();
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
    }
}
