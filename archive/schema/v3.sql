-- kforge archive, schema version 3: the search loop's screens (kforge evolve).
-- A screen is a quick look at one point of a kernel's tune space: correctness on the timed dims
-- with one seed and a short timing; the fastest points are then judged in full (evaluations).
-- One screen per candidate, GPU and harness version: no point is measured twice.
CREATE TABLE screens (
  id INTEGER PRIMARY KEY,
  candidate_id INTEGER NOT NULL REFERENCES candidates (id),
  device_id INTEGER NOT NULL REFERENCES devices (id),
  harness_version INTEGER NOT NULL,
  run_id INTEGER REFERENCES runs (id),
  outcome TEXT NOT NULL,
  median_ms REAL,                            -- NULL unless the point screened correct
  summary TEXT NOT NULL DEFAULT '',
  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  UNIQUE (candidate_id, device_id, harness_version)
);
CREATE INDEX screens_by_run ON screens (run_id);
