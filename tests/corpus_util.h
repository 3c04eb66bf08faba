// Candidate corpora as the tests read them: answer files whose first line names their task
// (`<!-- task: suite/name -->`), checked and compiled as `kforge verify` does.
#pragma once

#include <dirent.h>

#include <algorithm>
#include <string>
#include <vector>

#include "compile_test_util.h"
#include "kforge/common/files.h"
#include "kforge/common/strings.h"
#include "kforge/compile/answer.h"

namespace kforge::test {

using compile::task_named_in;

// *.md files of a folder, sorted (README.md left out).
inline std::vector<std::string> answers_in(const std::string& folder) {
  std::vector<std::string> out;
  if (DIR* d = ::opendir(folder.c_str())) {
    while (dirent* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n.size() > 3 && n.substr(n.size() - 3) == ".md" && n != "README.md")
        out.push_back(folder + "/" + n);
    }
    ::closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

struct CheckedAnswer {
  CompileFixture fixture;
  compile::CandidateReport report;
};

inline CheckedAnswer check_answer_file(const std::string& path, const compile::DeviceFacts& facts,
                                       compile::Compiler& compiler) {
  std::string text = read_file(path).value();
  CompileFixture f = CompileFixture::load(task_named_in(text));
  compile::Answer a = compile::parse_answer(text);
  compile::CandidateReport r =
      compile::check_candidate(f.task, f.tensors, a.source, a.plan, std::nullopt, facts, compiler);
  return {std::move(f), std::move(r)};
}

}  // namespace kforge::test
