// Reading a KernelBench answer (ModelNew + load_inline) without running it: kforge's helper
// tasks/kernelbench/kb_answer.py (embedded in the binary) parses the file with Python's `ast`,
// started as the importer starts its helper (kernelbench_import.h): a private temporary folder, a
// minimal environment, Landlock (it reads Python's standard library, the helper and the answer;
// writes nothing; no TCP), memory and CPU-time limits and a deadline kforge keeps. It needs any
// Python 3, not PyTorch. kforge/compile/kernelbench_answer.h turns its reply into a candidate.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace kforge::tasks {

// The helper's reply for `file`: {"ok": true, "extension": ..., "model": ...} or {"ok": false,
// "line": N|null, "reason": ...} (kb_answer.py documents the fields). `python`: the Python to
// use; "": python_candidates() (paths.h), the first that answers. Throws UsageError when the file
// cannot be read or no Python answers (each one tried, and why).
nlohmann::json read_kernelbench_answer(const std::string& file, const std::string& python = "");

}  // namespace kforge::tasks
