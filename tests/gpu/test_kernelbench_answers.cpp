// KernelBench answers (tests/kernelbench/answers/) converted into kforge candidates and judged on
// a real GPU as `kforge verify --kernelbench` judges them: the converted plans run the answers'
// own kernels correctly (one launch; two launches with a workspace; a zeroing launch kforge adds),
// and an answer that computes the wrong thing is judged wrong.
#include <iostream>

#include "../kernelbench_answer_util.h"
#include "gpu_test_util.h"
#include "kforge/verify/device_facts.h"
#include "kforge/verify/judge.h"

using namespace kforge;
using namespace kforge::test;

TEST(GpuKernelBenchAnswers, ConvertedAnswersAreJudgedCorrectAndAWrongOneWrong) {
  KFORGE_REQUIRE_GPU();
  REQUIRE_PYTHON3();
  TempDir dir;
  compile::Compiler compiler(private_cache(dir));
  verify::VerifyOptions o;
  o.time = false;  // correctness is what the conversion must keep
  o.compiled.enabled = false;
  verify::Judge judge(o);
  struct Case {
    const char* file;
    const char* task;
    verify::Outcome want;
  };
  for (const Case& c :
       {Case{"vector_add.py", "smoke/vector_add", verify::Outcome::Correct},
        Case{"softmax_two_kernels.py", "level1/softmax", verify::Outcome::Correct},
        Case{"sum_dim_zeros.py", "level1/sum_dim", verify::Outcome::Correct},
        Case{"wrong_vector_add.py", "smoke/vector_add", verify::Outcome::WrongResult}}) {
    ConvertedAnswer a = convert_answer(c.file, c.task);
    compile::CandidateReport r =
        compile::check_candidate(a.fixture.task, a.fixture.tensors, a.candidate.source,
                                 a.candidate.plan, std::nullopt, verify::plan_facts(0), compiler);
    ASSERT_TRUE(r.ok()) << c.file << ": " << (r.errors.empty() ? r.module.log : r.errors[0]);
    verify::Verdict v = judge.verify(a.fixture.task, r);
    std::cout << "  " << c.file << " (" << c.task << "): " << verify::to_string(v.outcome) << ": "
              << v.summary << std::endl;
    EXPECT_EQ(v.outcome, c.want) << c.file << ": " << v.summary << "\n" << v.evidence.dump(1);
  }
}
