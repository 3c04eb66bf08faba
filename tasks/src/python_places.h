// What a confined Python must read, shared by the KernelBench importer's helper and the answer
// reader (tasks/src/kernelbench_import.cpp, kernelbench_answer.cpp).
#pragma once

#include <string>
#include <vector>

namespace kforge::tasks {

// `places` (its interpreter, prefixes and module folders) without one that holds the user's home
// (a PYTHONPATH of ~ or / would open every file there), then the system's library folders.
std::vector<std::string> python_read_places(const std::vector<std::string>& places);

}  // namespace kforge::tasks
