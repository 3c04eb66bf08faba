-- kforge archive, schema version 2: imported rows are claims, and say where they came from.
-- import_source: the file a row was imported from (NULL: made here). import_trust: 'claimed' (an
-- import's unverified claim, never a winner) or 'trusted' (`kforge archive import --trust`).
ALTER TABLE candidates ADD COLUMN import_source TEXT;
ALTER TABLE candidates ADD COLUMN import_trust TEXT CHECK (import_trust IN ('claimed', 'trusted'));
ALTER TABLE compiles ADD COLUMN import_source TEXT;
ALTER TABLE evaluations ADD COLUMN import_source TEXT;
ALTER TABLE evaluations ADD COLUMN import_trust TEXT CHECK (import_trust IN ('claimed', 'trusted'));
-- Version 1 kept imported AI CUDA Engineer rows unverified; they are claims from the file they name.
UPDATE candidates SET import_trust = 'claimed',
  import_source = CASE WHEN json_valid(imported) THEN json_extract(imported, '$.source') END
  WHERE origin = 'imported';
-- The file's own marker ("kfor"): other programs' SQLite files are recognised before anything is changed.
PRAGMA application_id = 1801875314;
