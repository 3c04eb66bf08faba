-- kforge archive, schema version 7: baselines are a list keyed by kind (common/baseline.h), so a
-- new kind (torch.compile max-autotune, and whatever comes next) is rows, not a migration. Each
-- row is one kind's median time, or why it has none (absent); a kind without a time and without
-- a reason has no row. `kind` is the stored name ('eager', 'scripted', 'compiled',
-- 'compiled_max_autotune', ...) and has no CHECK: a kind kforge adds later needs no migration, and
-- one this kforge does not know is skipped when read. Speedups are not stored: a kind's is its
-- time / the evaluation's time_ms.
CREATE TABLE evaluation_baselines (
  evaluation_id INTEGER NOT NULL REFERENCES evaluations (id),
  kind TEXT NOT NULL,
  ms REAL,
  absent TEXT,
  PRIMARY KEY (evaluation_id, kind)
);
CREATE TABLE baseline_times (
  baseline_id INTEGER NOT NULL REFERENCES baselines (id),
  kind TEXT NOT NULL,
  ms REAL,
  absent TEXT,
  PRIMARY KEY (baseline_id, kind)
);
-- The old columns become rows. An evaluation's reason for no torch.compile time was in its
-- evidence (the judge's timing, "compiled_absent"), a baseline's in its compiled_absent column.
INSERT INTO evaluation_baselines (evaluation_id, kind, ms, absent)
  SELECT id, 'eager', eager_ms, NULL FROM evaluations WHERE eager_ms IS NOT NULL
  UNION ALL
  SELECT id, 'scripted', scripted_ms, NULL FROM evaluations WHERE scripted_ms IS NOT NULL
  UNION ALL
  SELECT id, 'compiled', compiled_ms, CASE WHEN compiled_ms IS NULL THEN why END FROM (
    SELECT id, compiled_ms, CASE WHEN json_valid(evidence) THEN
      CASE WHEN json_type(evidence, '$.timing.compiled_absent') = 'text' THEN
      NULLIF(json_extract(evidence, '$.timing.compiled_absent'), '') END END AS why FROM evaluations)
    WHERE compiled_ms IS NOT NULL OR why IS NOT NULL;
INSERT INTO baseline_times (baseline_id, kind, ms, absent)
  SELECT id, 'eager', eager_ms, NULL FROM baselines WHERE eager_ms IS NOT NULL
  UNION ALL
  SELECT id, 'scripted', scripted_ms, NULL FROM baselines WHERE scripted_ms IS NOT NULL
  UNION ALL
  SELECT id, 'compiled', compiled_ms, CASE WHEN compiled_ms IS NULL THEN NULLIF(compiled_absent, '')
    END FROM baselines WHERE compiled_ms IS NOT NULL OR NULLIF(compiled_absent, '') IS NOT NULL;
-- No index, view or trigger names these columns (evaluations' indexes are on candidate_id and on
-- outcome, time_ms), so they are dropped in place.
ALTER TABLE evaluations DROP COLUMN eager_ms;
ALTER TABLE evaluations DROP COLUMN scripted_ms;
ALTER TABLE evaluations DROP COLUMN speedup_eager;
ALTER TABLE evaluations DROP COLUMN speedup_scripted;
ALTER TABLE evaluations DROP COLUMN compiled_ms;
ALTER TABLE evaluations DROP COLUMN speedup_compiled;
ALTER TABLE baselines DROP COLUMN eager_ms;
ALTER TABLE baselines DROP COLUMN scripted_ms;
ALTER TABLE baselines DROP COLUMN compiled_ms;
ALTER TABLE baselines DROP COLUMN compiled_absent;
