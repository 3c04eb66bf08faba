-- kforge archive, schema version 1. Every candidate ever made, with how it was made and how it fared.
CREATE TABLE tasks (
  id INTEGER PRIMARY KEY,
  suite TEXT NOT NULL,
  name TEXT NOT NULL,
  version TEXT NOT NULL,             -- content hash of the task file: an edited task is a new version
  summary TEXT NOT NULL DEFAULT '',
  tags TEXT NOT NULL DEFAULT '[]',   -- JSON array
  definition TEXT NOT NULL DEFAULT '',
  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  UNIQUE (suite, name, version)
);
CREATE TABLE devices (
  id INTEGER PRIMARY KEY,
  uuid TEXT NOT NULL UNIQUE,
  name TEXT NOT NULL,
  arch TEXT NOT NULL,
  sms INTEGER,
  memory_bytes INTEGER,
  driver TEXT
);
CREATE TABLE runs (
  id INTEGER PRIMARY KEY,
  started_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  finished_at TEXT,
  status TEXT NOT NULL DEFAULT 'running' CHECK (status IN ('running', 'finished', 'failed', 'interrupted')),
  config TEXT NOT NULL DEFAULT '{}',        -- JSON: suite, models, budgets (never keys)
  budgets_used TEXT NOT NULL DEFAULT '{}'   -- JSON: calls, tokens, dollars, seconds, evaluations
);
CREATE TABLE candidates (
  id INTEGER PRIMARY KEY,
  task_id INTEGER NOT NULL REFERENCES tasks (id),
  run_id INTEGER REFERENCES runs (id),
  identity TEXT NOT NULL,                  -- hash of source, plan and tunables (docs/answer-format.md)
  source TEXT NOT NULL,
  plan TEXT NOT NULL DEFAULT '{}',
  tunables TEXT NOT NULL DEFAULT '{}',
  generation INTEGER NOT NULL DEFAULT 0,
  island INTEGER NOT NULL DEFAULT 0,
  prompt_kind TEXT NOT NULL DEFAULT '',    -- seed, translate, optimize, crossover, repair, import, tune
  model TEXT NOT NULL DEFAULT '',
  origin TEXT NOT NULL DEFAULT 'kforge' CHECK (origin IN ('kforge', 'imported')),
  verified INTEGER NOT NULL DEFAULT 1,     -- 0: imported text, never a winner until kforge verifies it
  imported TEXT NOT NULL DEFAULT '{}',     -- JSON: the importing archive's own claims
  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  UNIQUE (task_id, identity)
);
CREATE TABLE candidate_parents (
  candidate_id INTEGER NOT NULL REFERENCES candidates (id),
  parent_id INTEGER NOT NULL REFERENCES candidates (id),
  PRIMARY KEY (candidate_id, parent_id)
);
CREATE TABLE compiles (
  id INTEGER PRIMARY KEY,
  candidate_id INTEGER NOT NULL REFERENCES candidates (id),
  ok INTEGER NOT NULL,
  stage TEXT NOT NULL,
  errors TEXT NOT NULL DEFAULT '[]',
  log TEXT NOT NULL DEFAULT '',
  resources TEXT NOT NULL DEFAULT '{}',
  compile_ms REAL,
  arch TEXT NOT NULL DEFAULT '',
  nvrtc TEXT NOT NULL DEFAULT '',
  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
CREATE TABLE evaluations (
  id INTEGER PRIMARY KEY,
  candidate_id INTEGER NOT NULL REFERENCES candidates (id),
  device_id INTEGER REFERENCES devices (id),
  outcome TEXT NOT NULL CHECK (outcome IN ('compile_error', 'plan_error', 'launch_error', 'runtime_error', 'timeout',
    'wrong_result', 'input_modified', 'out_of_bounds_write', 'out_of_bounds_read', 'incomplete_output',
    'nondeterministic', 'harness_error', 'correct')),
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
  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
CREATE TABLE baselines (
  id INTEGER PRIMARY KEY,
  task_id INTEGER NOT NULL REFERENCES tasks (id),
  dims TEXT NOT NULL,
  device_id INTEGER NOT NULL REFERENCES devices (id),
  math_mode TEXT NOT NULL,
  eager_ms REAL, scripted_ms REAL,
  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  UNIQUE (task_id, dims, device_id, math_mode)
);
CREATE TABLE llm_calls (                     -- never API keys or auth headers
  id INTEGER PRIMARY KEY,
  run_id INTEGER REFERENCES runs (id),
  candidate_id INTEGER REFERENCES candidates (id),
  model TEXT NOT NULL,
  tokens_in INTEGER NOT NULL DEFAULT 0,
  tokens_out INTEGER NOT NULL DEFAULT 0,
  cost_usd REAL NOT NULL DEFAULT 0,
  latency_ms REAL,
  status TEXT NOT NULL,
  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
CREATE INDEX candidates_by_task ON candidates (task_id);
CREATE INDEX candidates_by_run ON candidates (run_id);
CREATE INDEX evaluations_by_candidate ON evaluations (candidate_id);
CREATE INDEX evaluations_by_outcome ON evaluations (outcome, time_ms);
CREATE INDEX compiles_by_candidate ON compiles (candidate_id);
CREATE INDEX llm_calls_by_run ON llm_calls (run_id);
-- Retrieval: tasks by what they are, kernels by what they contain.
CREATE VIRTUAL TABLE task_text USING fts5 (name, tags, summary, task_id UNINDEXED);
CREATE VIRTUAL TABLE kernel_text USING fts5 (source, task, candidate_id UNINDEXED);
