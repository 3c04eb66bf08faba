-- kforge archive, schema version 4: Nsight Compute profiles (kforge evolve's profile feedback).
-- One run of a correct candidate's plan at the timed dims under `ncu`: per launch its time, DRAM,
-- SM and L2 throughput as % of peak, achieved occupancy, registers and top stall reasons (or the
-- error that stopped the tool). One profile per candidate and GPU: measured once, quoted after.
CREATE TABLE profiles (
  id INTEGER PRIMARY KEY,
  candidate_id INTEGER NOT NULL REFERENCES candidates (id),
  device_id INTEGER NOT NULL REFERENCES devices (id),
  profile TEXT NOT NULL,                     -- JSON: {"kernels": [...], "dims", "tool", "ms"} or {"error"}
  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  UNIQUE (candidate_id, device_id)
);
