//! The history store: every sweep's finished cells in an embedded SQLite file (no server), with the
//! raw latencies of each cell so later comparisons use the gate's statistics.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use rusqlite::{params, Connection, OptionalExtension};
use serde::{Deserialize, Serialize};

use crate::sweep::cell::{Findings, HOST_HTP_FINGERPRINT};
use crate::sweep::{finished_cells, CellRecord, FinishedCell, SweepSummary};
use npugate_gate::verdict::GenerationSummary;

/// Schema version of the SQLite file (`PRAGMA user_version`).
const STORE_VERSION: i64 = 6;

const CREATE: &str = "
CREATE TABLE IF NOT EXISTS sweeps (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  night TEXT NOT NULL,
  started_at TEXT NOT NULL,
  sweep_dir TEXT NOT NULL,
  UNIQUE (name, night)
);
CREATE TABLE IF NOT EXISTS cells (
  sweep_id INTEGER NOT NULL REFERENCES sweeps(id) ON DELETE CASCADE,
  device TEXT NOT NULL,
  serial TEXT NOT NULL,
  soc TEXT NOT NULL,
  device_model TEXT,
  runtime TEXT NOT NULL,
  ort_version TEXT NOT NULL,
  qnn_build TEXT,
  device_fingerprint TEXT,
  model TEXT NOT NULL,
  model_digest TEXT NOT NULL,
  outcome TEXT NOT NULL,
  median_ns REAL,
  cv_pct REAL,
  npu_flops_pct REAL,
  fallback_nodes INTEGER,
  latencies_ns TEXT NOT NULL,
  result_dir TEXT NOT NULL,
  ttft_ns REAL,
  prefill_tok_s REAL,
  decode_tok_s REAL,
  emulated TEXT,
  compile_error TEXT,
  npu_nodes_pct REAL,
  fallback TEXT,
  outputs TEXT,
  peak_memory_mb REAL,
  memory_growth_mb REAL,
  energy_mj REAL,
  PRIMARY KEY (sweep_id, device, runtime, model)
);
CREATE INDEX IF NOT EXISTS cells_by_model ON cells (model, soc);
";

/// The default store: `<cache>/history.sqlite`.
pub fn default_path() -> PathBuf {
    npugate_host::paths::cache_dir().join("history.sqlite")
}

/// One finished cell as it is recorded: its record, and what is stored as JSON text.
struct Row {
    cell: FinishedCell,
    latencies: String,
    generation: Option<GenerationFigures>,
    fallback: String,
    outputs: Option<String>,
    resources: ResourceFigures,
}

/// An open history store.
pub struct HistoryStore {
    connection: Connection,
    path: PathBuf,
}

/// Which cells a query wants; `None` matches everything.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct HistoryFilter {
    /// Model name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// SoC (device class), case-insensitive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub soc: Option<String>,
    /// Device serial or device directory name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// Runtime name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<String>,
    /// Only the last this many nights that have a matching sweep.
    pub nights: usize,
    /// Only nights up to and including this one (`YYYY-MM-DD`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<String>,
}

/// One finished cell of one night, as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredCell {
    /// Sweep name.
    pub sweep: String,
    /// Night of the sweep.
    pub night: String,
    /// When that sweep started.
    pub started_at: String,
    /// Device directory name.
    pub device: String,
    /// adb serial.
    pub serial: String,
    /// Device class (SoC).
    pub soc: String,
    /// Runtime name.
    pub runtime: String,
    /// Model name.
    pub model: String,
    /// What the cell ran: model digest, QNN build, ONNX Runtime, device fingerprint.
    pub axes: CellAxes,
    /// `pass`, `fail` or `error`.
    pub outcome: String,
    /// Median latency (ns).
    pub median_ns: Option<f64>,
    /// CV (%).
    pub cv_pct: Option<f64>,
    /// Share of FLOPs on the preferred EP (%).
    pub npu_flops_pct: Option<f64>,
    /// Unexpected fallback nodes.
    pub fallback_nodes: Option<i64>,
    /// Every timed run (ns); an LLM folder's decode steps.
    pub latencies_ns: Vec<u64>,
    /// An LLM folder's generation figures (none for a single model and in cells before version 4).
    pub generation: Option<GenerationFigures>,
    /// Set when the cell ran on an emulator: its latency is host time (see [`CellRecord::emulated`]).
    pub emulated: Option<String>,
    /// Compile, placement and outputs (unknown in cells before version 5, but the FLOP share and
    /// fallback count above).
    pub findings: Findings,
    /// Peak memory, its growth and energy per inference (unknown in cells before version 6).
    pub resources: ResourceFigures,
}

/// A cell's memory and energy figures, each where the run recorded it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct ResourceFigures {
    /// Peak resident memory of the harness, MiB.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_memory_mb: Option<f64>,
    /// Resident growth over the leak check's session re-creations, MiB.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_growth_mb: Option<f64>,
    /// Energy per inference above idle, mJ (a device run with `--energy-window`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub energy_mj: Option<f64>,
}

impl ResourceFigures {
    /// The figures of a verdict.
    pub fn of(verdict: &npugate_gate::Verdict) -> ResourceFigures {
        let mb = |bytes: f64| bytes / npugate_result::resources::MB;
        let memory = verdict.memory.as_ref();
        ResourceFigures {
            peak_memory_mb: memory.and_then(|m| m.peak_bytes).map(|b| mb(b as f64)),
            memory_growth_mb: memory.and_then(|m| m.leak_check.as_ref()).map(|l| mb(l.growth_bytes as f64)),
            energy_mj: verdict.energy.as_ref().and_then(|e| e.measured.as_ref()).map(|m| m.energy_mj),
        }
    }

    /// `peak 312.4 MiB, growth +0.2 MiB, 1.230 mJ/inference`: the figures known, or nothing.
    pub fn describe(&self) -> String {
        [
            self.peak_memory_mb.map(|m| format!("peak {m:.1} MiB")),
            self.memory_growth_mb.map(|m| format!("growth {m:+.1} MiB")),
            self.energy_mj.map(|e| format!("{e:.3} mJ/inference")),
        ]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(", ")
    }
}

/// An LLM cell's generation beside its decode steps: what `latencies_ns` leaves out.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct GenerationFigures {
    /// Median time to first token (ns).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttft_ns: Option<f64>,
    /// Prompt tokens per second (prompt tokens / median TTFT).
    pub prefill_tok_s: f64,
    /// Generated tokens per second (1 / median decode step).
    pub decode_tok_s: f64,
}

impl GenerationFigures {
    /// The figures of a verdict's generation summary.
    pub fn of(summary: &GenerationSummary) -> GenerationFigures {
        GenerationFigures {
            ttft_ns: summary.ttft.as_ref().map(|ttft| ttft.median_ns),
            prefill_tok_s: summary.prefill_tok_s,
            decode_tok_s: summary.decode_tok_s,
        }
    }
}

/// What a cell ran with, beside its key: the axes whose change between nights explains a flip.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CellAxes {
    /// The model's digest.
    pub model_digest: String,
    /// The QNN build of the runtime's HTP backend (unknown for other runtimes and older records).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub qnn_build: Option<String>,
    /// ONNX Runtime version.
    pub ort_version: String,
    /// The device's build fingerprint (unknown in older records).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_fingerprint: Option<String>,
}

impl CellAxes {
    /// Each axis that differs from `before`, as `name old → new` (an axis unknown on either night
    /// is not compared).
    pub fn changes_from(&self, before: &CellAxes) -> Vec<String> {
        let short = |digest: &str| digest.chars().take(12).collect::<String>();
        let mut changed = Vec::new();
        if self.model_digest != before.model_digest {
            changed.push(format!("model digest {} → {}", short(&before.model_digest), short(&self.model_digest)));
        }
        let known = |a: &Option<String>, b: &Option<String>| matches!((a, b), (Some(a), Some(b)) if a != b);
        if known(&before.qnn_build, &self.qnn_build) {
            changed.push(format!(
                "QNN build {} → {}",
                before.qnn_build.as_deref().unwrap_or_default(),
                self.qnn_build.as_deref().unwrap_or_default()
            ));
        }
        if self.ort_version != before.ort_version {
            changed.push(format!("ONNX Runtime {} → {}", before.ort_version, self.ort_version));
        }
        if known(&before.device_fingerprint, &self.device_fingerprint) {
            changed.push(format!(
                "device fingerprint {} → {}",
                before.device_fingerprint.as_deref().unwrap_or_default(),
                self.device_fingerprint.as_deref().unwrap_or_default()
            ));
        }
        changed
    }
}

impl HistoryStore {
    /// Opens (creating if needed) the store at `path`.
    pub fn open(path: &Path) -> Result<HistoryStore> {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).with_context(|| format!("cannot create {}", parent.display()))?;
        }
        let connection = Connection::open(path).with_context(|| format!("cannot open history {}", path.display()))?;
        let fail = |e: rusqlite::Error| anyhow::anyhow!("history {}: {e}", path.display());
        let version: i64 = connection.query_row("PRAGMA user_version", [], |row| row.get(0)).map_err(fail)?;
        if version > STORE_VERSION {
            anyhow::bail!(
                "history {} has schema version {version}; this npugate reads version {STORE_VERSION}",
                path.display()
            );
        }
        connection.execute_batch("PRAGMA foreign_keys = ON;").map_err(fail)?;
        if version == 1 {
            // Version 2 keys cells on the model digest (over every file of the model), which for
            // the one-file models of version 1 is the sha256 it stored.
            connection.execute_batch("ALTER TABLE cells RENAME COLUMN model_sha256 TO model_digest;").map_err(fail)?;
        }
        if (1..3).contains(&version) {
            // Version 3 records each cell's QNN build and device fingerprint (unknown before).
            connection.execute_batch("ALTER TABLE cells ADD COLUMN qnn_build TEXT; ALTER TABLE cells ADD COLUMN device_fingerprint TEXT;").map_err(fail)?;
        }
        if (1..4).contains(&version) {
            // Version 4 records an LLM cell's median TTFT and tokens per second (unknown before).
            connection
                .execute_batch("ALTER TABLE cells ADD COLUMN ttft_ns REAL; ALTER TABLE cells ADD COLUMN prefill_tok_s REAL; ALTER TABLE cells ADD COLUMN decode_tok_s REAL;")
                .map_err(fail)?;
        }
        if (1..5).contains(&version) {
            // Version 5 records whether a cell was emulated — known for the host-HTP cells before
            // it by their device's fingerprint — and its compile, node share, fallback nodes and
            // worst output (unknown before).
            connection
                .execute_batch(&format!(
                    "ALTER TABLE cells ADD COLUMN emulated TEXT; ALTER TABLE cells ADD COLUMN compile_error TEXT;
                     ALTER TABLE cells ADD COLUMN npu_nodes_pct REAL; ALTER TABLE cells ADD COLUMN fallback TEXT;
                     ALTER TABLE cells ADD COLUMN outputs TEXT;
                     UPDATE cells SET emulated = 'Qualcomm''s HTP emulator ({HOST_HTP_FINGERPRINT}), recorded before store version 5'
                       WHERE device_fingerprint = '{HOST_HTP_FINGERPRINT}';"
                ))
                .map_err(fail)?;
        }
        if (1..6).contains(&version) {
            // Version 6 records each cell's peak memory, its growth and energy (unknown before).
            connection
                .execute_batch("ALTER TABLE cells ADD COLUMN peak_memory_mb REAL; ALTER TABLE cells ADD COLUMN memory_growth_mb REAL; ALTER TABLE cells ADD COLUMN energy_mj REAL;")
                .map_err(fail)?;
        }
        connection.execute_batch(CREATE).map_err(fail)?;
        connection.pragma_update(None, "user_version", STORE_VERSION).map_err(fail)?;
        Ok(HistoryStore { connection, path: path.to_path_buf() })
    }

    /// Records a sweep's finished cells with their latencies and, for an LLM folder, its median
    /// TTFT and tokens per second (read from each cell's verdict). A sweep
    /// of the same name and night is replaced, so recording a resumed sweep again is idempotent; a
    /// shard's result (`--shard`) replaces only its own devices' cells of that night, so shards
    /// recording into one store make the night together (and their merge replaces it whole).
    pub fn record(&mut self, summary: &SweepSummary, sweep_dir: &Path) -> Result<usize> {
        let mut rows: Vec<Row> = Vec::new();
        for cell in finished_cells(sweep_dir)? {
            let verdict = CellRecord::read_verdict(&cell.dir)?;
            let findings = &cell.record.findings;
            rows.push(Row {
                latencies: serde_json::to_string(&verdict.latencies_ns)?,
                generation: verdict.generation.as_ref().map(GenerationFigures::of),
                fallback: serde_json::to_string(&findings.fallback)?,
                outputs: findings.outputs.as_ref().map(serde_json::to_string).transpose()?,
                resources: ResourceFigures::of(&verdict),
                cell,
            });
        }
        let fail = |e: rusqlite::Error| anyhow::anyhow!("history {}: {e}", self.path.display());
        let tx = self.connection.transaction().map_err(fail)?;
        let sweep_dir_text =
            std::fs::canonicalize(sweep_dir).unwrap_or_else(|_| sweep_dir.to_path_buf()).display().to_string();
        if summary.shard.is_none() {
            tx.execute("DELETE FROM sweeps WHERE name = ?1 AND night = ?2", params![summary.name, summary.night])
                .map_err(fail)?;
        }
        tx.execute(
            "INSERT INTO sweeps (name, night, started_at, sweep_dir) VALUES (?1, ?2, ?3, ?4) ON CONFLICT (name, night) DO NOTHING",
            params![summary.name, summary.night, summary.started_at, sweep_dir_text],
        )
        .map_err(fail)?;
        let sweep_id: i64 = tx
            .query_row(
                "SELECT id FROM sweeps WHERE name = ?1 AND night = ?2",
                params![summary.name, summary.night],
                |row| row.get(0),
            )
            .map_err(fail)?;
        for device in &summary.devices {
            tx.execute("DELETE FROM cells WHERE sweep_id = ?1 AND device = ?2", params![sweep_id, device.dir])
                .map_err(fail)?;
        }
        for Row { cell: FinishedCell { record, dir }, latencies, generation, fallback, outputs, resources } in &rows {
            tx.execute(
                "INSERT INTO cells (sweep_id, device, serial, soc, device_model, runtime, ort_version, model, model_digest,
                   outcome, median_ns, cv_pct, npu_flops_pct, fallback_nodes, latencies_ns, result_dir, qnn_build, device_fingerprint,
                   ttft_ns, prefill_tok_s, decode_tok_s, emulated, compile_error, npu_nodes_pct, fallback, outputs,
                   peak_memory_mb, memory_growth_mb, energy_mj)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21,
                   ?22, ?23, ?24, ?25, ?26, ?27, ?28, ?29)",
                params![
                    sweep_id,
                    record.key.device,
                    record.device.serial,
                    record.device.soc,
                    record.device.model,
                    record.key.runtime,
                    record.ort_version,
                    record.key.model,
                    record.model_digest,
                    record.outcome.label().to_lowercase(),
                    record.median_ns,
                    record.cv_pct,
                    record.npu_flops_pct,
                    record.fallback_nodes.map(|n| n as i64),
                    latencies,
                    dir.display().to_string(),
                    record.qnn_build,
                    record.device.fingerprint,
                    generation.and_then(|g| g.ttft_ns),
                    generation.map(|g| g.prefill_tok_s),
                    generation.map(|g| g.decode_tok_s),
                    record.emulated,
                    record.findings.compile_error,
                    record.findings.npu_nodes_pct,
                    fallback,
                    outputs,
                    resources.peak_memory_mb,
                    resources.memory_growth_mb,
                    resources.energy_mj,
                ],
            )
            .map_err(fail)?;
        }
        tx.commit().map_err(fail)?;
        Ok(rows.len())
    }

    /// The matching cells of the last `filter.nights` nights that have any, oldest night first.
    pub fn cells(&self, filter: &HistoryFilter) -> Result<Vec<StoredCell>> {
        let fail = |e: rusqlite::Error| anyhow::anyhow!("history {}: {e}", self.path.display());
        let conditions = "(?1 IS NULL OR c.model = ?1) AND (?2 IS NULL OR c.soc = ?2 COLLATE NOCASE)
              AND (?3 IS NULL OR c.serial = ?3 COLLATE NOCASE OR c.device = ?3 COLLATE NOCASE) AND (?4 IS NULL OR c.runtime = ?4)
              AND (?5 IS NULL OR s.night <= ?5)";
        let args = params![filter.model, filter.soc, filter.device, filter.runtime, filter.until];
        let oldest: Option<String> = self
            .connection
            .query_row(
                &format!(
                    "SELECT MIN(night) FROM (SELECT DISTINCT s.night AS night FROM cells c JOIN sweeps s ON s.id = c.sweep_id
                     WHERE {conditions} ORDER BY s.night DESC LIMIT {})",
                    filter.nights.max(1)
                ),
                args,
                |row| row.get(0),
            )
            .optional()
            .map_err(fail)?
            .flatten();
        let Some(oldest) = oldest else { return Ok(Vec::new()) };
        let mut statement = self
            .connection
            .prepare(&format!(
                "SELECT s.name, s.night, s.started_at, c.device, c.serial, c.soc, c.runtime, c.model, c.outcome,
                        c.median_ns, c.cv_pct, c.npu_flops_pct, c.fallback_nodes, c.latencies_ns,
                        c.model_digest, c.qnn_build, c.ort_version, c.device_fingerprint,
                        c.ttft_ns, c.prefill_tok_s, c.decode_tok_s,
                        c.emulated, c.compile_error, c.npu_nodes_pct, c.fallback, c.outputs,
                        c.peak_memory_mb, c.memory_growth_mb, c.energy_mj
                 FROM cells c JOIN sweeps s ON s.id = c.sweep_id
                 WHERE {conditions} AND s.night >= ?6
                 ORDER BY s.night, s.started_at, c.model, c.soc, c.device, c.runtime"
            ))
            .map_err(fail)?;
        let rows = statement
            .query_map(params![filter.model, filter.soc, filter.device, filter.runtime, filter.until, oldest], |row| {
                let latencies_ns = json_column(row, 13)?.unwrap_or_default();
                let rates: (Option<f64>, Option<f64>) = (row.get(19)?, row.get(20)?);
                let generation = match rates {
                    (Some(prefill_tok_s), Some(decode_tok_s)) => {
                        Some(GenerationFigures { ttft_ns: row.get(18)?, prefill_tok_s, decode_tok_s })
                    }
                    _ => None,
                };
                Ok(StoredCell {
                    sweep: row.get(0)?,
                    night: row.get(1)?,
                    started_at: row.get(2)?,
                    device: row.get(3)?,
                    serial: row.get(4)?,
                    soc: row.get(5)?,
                    runtime: row.get(6)?,
                    model: row.get(7)?,
                    axes: CellAxes {
                        model_digest: row.get(14)?,
                        qnn_build: row.get(15)?,
                        ort_version: row.get(16)?,
                        device_fingerprint: row.get(17)?,
                    },
                    outcome: row.get(8)?,
                    median_ns: row.get(9)?,
                    cv_pct: row.get(10)?,
                    npu_flops_pct: row.get(11)?,
                    fallback_nodes: row.get(12)?,
                    latencies_ns,
                    generation,
                    emulated: row.get(21)?,
                    findings: Findings {
                        compile_error: row.get(22)?,
                        npu_nodes_pct: row.get(23)?,
                        fallback: json_column(row, 24)?.unwrap_or_default(),
                        outputs: json_column(row, 25)?,
                    },
                    resources: ResourceFigures {
                        peak_memory_mb: row.get(26)?,
                        memory_growth_mb: row.get(27)?,
                        energy_mj: row.get(28)?,
                    },
                })
            })
            .map_err(fail)?;
        rows.collect::<Result<Vec<_>, _>>().map_err(fail)
    }
}

/// Column `index` of `row`, JSON text, as a `T` (`None` when NULL).
fn json_column<T: serde::de::DeserializeOwned>(row: &rusqlite::Row<'_>, index: usize) -> rusqlite::Result<Option<T>> {
    let Some(text) = row.get::<_, Option<String>>(index)? else { return Ok(None) };
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| rusqlite::Error::FromSqlConversionFailure(index, rusqlite::types::Type::Text, Box::new(e)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The columns each store version added, newest first.
    const ADDED: [(i64, &str); 4] = [
        (6, "  peak_memory_mb REAL,\n  memory_growth_mb REAL,\n  energy_mj REAL,\n"),
        (5, "  emulated TEXT,\n  compile_error TEXT,\n  npu_nodes_pct REAL,\n  fallback TEXT,\n  outputs TEXT,\n"),
        (4, "  ttft_ns REAL,\n  prefill_tok_s REAL,\n  decode_tok_s REAL,\n"),
        (3, "  qnn_build TEXT,\n  device_fingerprint TEXT,\n"),
    ];

    /// The tables of store version `version`.
    fn create_of_version(version: i64) -> String {
        let create =
            ADDED.iter().filter(|(added, _)| *added > version).fold(CREATE.to_string(), |create, (_, columns)| {
                assert!(create.contains(columns), "{columns} is in CREATE");
                create.replace(columns, "")
            });
        if version == 1 {
            create.replace("model_digest", "model_sha256")
        } else {
            create
        }
    }

    /// A store of `version` holding one sweep and the cells `rows` inserts, in a new temporary directory.
    fn store_of_version(version: i64, rows: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("history.sqlite");
        let connection = Connection::open(&path).unwrap();
        connection.execute_batch(&create_of_version(version)).unwrap();
        connection
            .execute_batch(
                "INSERT INTO sweeps (id, name, night, started_at, sweep_dir) VALUES (1, 'n', '2026-11-01', 't', 'd');",
            )
            .unwrap();
        connection.execute_batch(rows).unwrap();
        connection.pragma_update(None, "user_version", version).unwrap();
        (dir, path)
    }

    #[test]
    fn a_version_1_store_is_migrated_to_model_digests_keeping_its_rows() {
        let (_dir, path) = store_of_version(
            1,
            "INSERT INTO cells VALUES (1, 'dev', 's', 'SM8650', NULL, 'rt', '1.31', 'm', 'abc', 'pass', 1.0, 1.0, NULL, NULL, '[]', 'r');",
        );
        let store = HistoryStore::open(&path).unwrap();
        let digest: String =
            store.connection.query_row("SELECT model_digest FROM cells", [], |row| row.get(0)).unwrap();
        assert_eq!(digest, "abc");
        let qnn: Option<String> =
            store.connection.query_row("SELECT qnn_build FROM cells", [], |row| row.get(0)).unwrap();
        assert_eq!(qnn, None, "version 3 adds the QNN build, unknown for older cells");
        let ttft: Option<f64> = store.connection.query_row("SELECT ttft_ns FROM cells", [], |row| row.get(0)).unwrap();
        assert_eq!(ttft, None, "version 4 adds the TTFT, unknown for older cells");
        let version: i64 = store.connection.query_row("PRAGMA user_version", [], |row| row.get(0)).unwrap();
        assert_eq!(version, STORE_VERSION);
        drop(store);
        assert!(HistoryStore::open(&path).is_ok(), "opening again is a no-op");
    }

    #[test]
    fn a_version_3_store_gains_the_generation_columns_and_an_llm_cell_reads_its_ttft_back() {
        let (_dir, path) = store_of_version(
            3,
            "INSERT INTO cells (sweep_id, device, serial, soc, runtime, ort_version, model, model_digest, outcome, latencies_ns, result_dir)
                     VALUES (1, 'dev', 's', 'SM8650', 'rt', '1.31', 'old', 'abc', 'pass', '[1000]', 'r');",
        );
        let store = HistoryStore::open(&path).unwrap();
        store
            .connection
            .execute_batch(
                "INSERT INTO cells (sweep_id, device, serial, soc, runtime, ort_version, model, model_digest, outcome, latencies_ns, result_dir,
                   ttft_ns, prefill_tok_s, decode_tok_s)
                 VALUES (1, 'dev', 's', 'SM8650', 'rt', '1.31', 'tinyllm', 'def', 'pass', '[95000, 96000]', 'r', 210000.0, 76065.9, 10490.6);",
            )
            .unwrap();
        let cells = store.cells(&HistoryFilter { nights: 30, ..Default::default() }).unwrap();
        let by_model: Vec<(&str, Option<GenerationFigures>)> =
            cells.iter().map(|c| (c.model.as_str(), c.generation)).collect();
        assert_eq!(
            by_model,
            [
                ("old", None),
                (
                    "tinyllm",
                    Some(GenerationFigures { ttft_ns: Some(210000.0), prefill_tok_s: 76065.9, decode_tok_s: 10490.6 })
                )
            ],
            "a cell from before version 4 has no generation figures"
        );
    }

    #[test]
    fn a_version_4_store_knows_its_host_htp_cells_as_emulated_and_version_5_findings_read_back() {
        let (_dir, path) = store_of_version(
            4,
            &format!(
                    "INSERT INTO cells (sweep_id, device, serial, soc, runtime, ort_version, model, model_digest, outcome, latencies_ns,
                       result_dir, device_fingerprint)
                     VALUES (1, 'htp-SM8650', 'htp-SM8650', 'SM8650', 'qnn', '1.31', 'm', 'abc', 'pass', '[84000000]', 'r', '{HOST_HTP_FINGERPRINT}'),
                            (1, 'R5CX', 'R5CX', 'SM8650', 'qnn', '1.31', 'm', 'abc', 'pass', '[4000000]', 'r', 'samsung/e3q/…');"
                ),
        );
        let store = HistoryStore::open(&path).unwrap();
        store
            .connection
            .execute_batch(
                r#"INSERT INTO cells (sweep_id, device, serial, soc, runtime, ort_version, model, model_digest, outcome, latencies_ns, result_dir,
                   emulated, compile_error, npu_nodes_pct, fallback, outputs)
                 VALUES (1, 'htp-SM8350', 'htp-SM8350', 'SM8350', 'qnn', '1.31', 'm', 'abc', 'fail', '[]', 'r',
                   'emulator', NULL, 83.3, '[{"node":"lppool","op_type":"LpPool","ep":"CPUExecutionProvider"}]',
                   '{"output":"y","sqnr_db":"inf","cosine":1.0}');"#,
            )
            .unwrap();
        let cells = store.cells(&HistoryFilter { nights: 30, ..Default::default() }).unwrap();
        let by_device = |device: &str| cells.iter().find(|c| c.device == device).unwrap();
        assert!(by_device("htp-SM8650")
            .emulated
            .as_deref()
            .is_some_and(|e| e.contains("recorded before store version 5")));
        assert_eq!(by_device("R5CX").emulated, None, "a device is no emulator");
        assert_eq!(by_device("R5CX").findings, Findings::default(), "findings are unknown before version 5");
        let findings = &by_device("htp-SM8350").findings;
        assert_eq!((findings.npu_nodes_pct, findings.fallback[0].label().as_str()), (Some(83.3), "lppool (LpPool)"));
        assert_eq!(
            findings.outputs.as_ref().map(|o| o.sqnr_db),
            Some(f64::INFINITY),
            "identical outputs stay infinite"
        );
    }
}
