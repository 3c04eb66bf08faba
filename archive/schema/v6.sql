-- kforge archive, schema version 6: the outcome does_not_fit (docs/design.md, Outcomes): the task's
-- timed sizes need more memory than the GPU had free, so the candidate was not judged (its evidence
-- says the bytes needed and free). SQLite cannot change a CHECK constraint in place: the table is
-- made again with the same columns in the same order (version 1's, then 2's and 5's), its rows
-- copied by name, and its indexes made again.
CREATE TABLE evaluations_v6 (
  id INTEGER PRIMARY KEY,
  candidate_id INTEGER NOT NULL REFERENCES candidates (id),
  device_id INTEGER REFERENCES devices (id),
  outcome TEXT NOT NULL CHECK (outcome IN ('compile_error', 'plan_error', 'launch_error', 'runtime_error', 'timeout',
    'wrong_result', 'input_modified', 'out_of_bounds_write', 'out_of_bounds_read', 'incomplete_output',
    'nondeterministic', 'does_not_fit', 'harness_error', 'correct')),
  flags TEXT NOT NULL DEFAULT '[]',
  evidence TEXT NOT NULL DEFAULT '{}',
  dims TEXT NOT NULL DEFAULT '{}',
  time_ms REAL, time_iqr_ms REAL, time_min_ms REAL,
  eager_ms REAL, scripted_ms REAL,
  speedup_eager REAL, speedup_scripted REAL,
  roofline_fraction REAL,
  admitted INTEGER NOT NULL DEFAULT 0,
  harness_version INTEGER NOT NULL,
  toolchain TEXT NOT NULL DEFAULT '{}',
  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  import_source TEXT,
  import_trust TEXT CHECK (import_trust IN ('claimed', 'trusted')),
  compiled_ms REAL,
  speedup_compiled REAL
);
INSERT INTO evaluations_v6 (id, candidate_id, device_id, outcome, flags, evidence, dims, time_ms, time_iqr_ms,
  time_min_ms, eager_ms, scripted_ms, speedup_eager, speedup_scripted, roofline_fraction, admitted, harness_version,
  toolchain, created_at, import_source, import_trust, compiled_ms, speedup_compiled)
  SELECT id, candidate_id, device_id, outcome, flags, evidence, dims, time_ms, time_iqr_ms, time_min_ms, eager_ms,
  scripted_ms, speedup_eager, speedup_scripted, roofline_fraction, admitted, harness_version, toolchain, created_at,
  import_source, import_trust, compiled_ms, speedup_compiled FROM evaluations;
DROP TABLE evaluations;
ALTER TABLE evaluations_v6 RENAME TO evaluations;
CREATE INDEX evaluations_by_candidate ON evaluations (candidate_id);
CREATE INDEX evaluations_by_outcome ON evaluations (outcome, time_ms);
