-- kforge archive, schema version 5: torch.compile's baseline beside eager and TorchScript's.
-- compiled_ms: the reference compiled by TorchInductor (torch.compile's backend, via an AOTInductor
-- package), timed like eager; NULL where it was not measured (rows before version 5 included).
-- speedup_compiled = compiled_ms / time_ms. compiled_absent: why a baseline has no compiled time
-- (no Python with PyTorch, a build that failed, ...); NULL when it has one, or was timed before version 5.
ALTER TABLE evaluations ADD COLUMN compiled_ms REAL;
ALTER TABLE evaluations ADD COLUMN speedup_compiled REAL;
ALTER TABLE baselines ADD COLUMN compiled_ms REAL;
ALTER TABLE baselines ADD COLUMN compiled_absent TEXT;
