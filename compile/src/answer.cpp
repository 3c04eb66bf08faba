#include "kforge/compile/answer.h"

#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "kforge/common/json_limits.h"
#include "kforge/common/strings.h"
#include "kforge/compile/plan.h"

namespace kforge::compile {
namespace {

struct Block {
  std::string tag;
  std::string content;
  int first_line = 0;  // line of the first content line
  int fence_line = 0;
};

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::vector<Block> fenced_blocks(const std::string& md) {
  std::vector<Block> blocks;
  std::istringstream in(md);
  std::string line;
  int n = 0;
  Block* open = nullptr;
  std::string fence;
  while (std::getline(in, line)) {
    ++n;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    size_t indent = line.find_first_not_of(' ');
    std::string body = indent == std::string::npos || indent > 3 ? "" : line.substr(indent);
    bool is_fence = body.rfind("```", 0) == 0 || body.rfind("~~~", 0) == 0;
    if (!open) {
      if (!is_fence) continue;
      size_t len = body.find_first_not_of(body[0]);
      fence = body.substr(0, len == std::string::npos ? body.size() : len);
      blocks.push_back({lower(trim(body.substr(fence.size()))), "", n + 1, n});
      open = &blocks.back();
      continue;
    }
    if (is_fence && trim(body) == std::string(trim(body).size(), fence[0]) &&
        trim(body).size() >= fence.size()) {
      open = nullptr;
      continue;
    }
    open->content += line + "\n";
  }
  if (open)
    throw AnswerError("The code block opened at line " + std::to_string(open->fence_line) +
                      " is never closed: end it with a line of " + fence + ".");
  return blocks;
}

bool is_cuda_tag(const std::string& tag) {
  std::string first = tag.substr(0, tag.find(' '));
  return first == "cuda" || first == "cu" || first == "cpp" || first == "c++" || first == "c" ||
         first == "cxx" || first == "cc";
}

bool looks_like_plan(const std::string& content) {
  try {
    auto j = parse_json_bounded(content, "plan", kMaxPlanDepth, kMaxPlanBytes);
    return j.is_object() && j.contains("launch");
  } catch (const InputError&) {
    return false;
  }
}

std::string lines_of(const std::vector<const Block*>& bs) {
  std::string s;
  for (size_t i = 0; i < bs.size(); ++i)
    s += (i ? (i + 1 == bs.size() ? " and " : ", ") : "") + std::to_string(bs[i]->fence_line);
  return s;
}

}  // namespace

Answer parse_answer(const std::string& markdown) {
  std::vector<Block> blocks = fenced_blocks(markdown);
  std::vector<const Block*> cuda, plans;
  for (const Block& b : blocks) {
    if (b.tag == "json" || b.tag == "jsonc")
      plans.push_back(&b);
    else if (is_cuda_tag(b.tag))
      cuda.push_back(&b);
    else if (b.tag.empty())
      (looks_like_plan(b.content) ? plans : cuda).push_back(&b);
  }
  if (cuda.empty())
    throw AnswerError(
        blocks.empty()
            ? "The answer has no code blocks. Give the kernel source in one ```cuda block and the "
              "launch plan in one ```json block."
            : "The answer has no CUDA code block. Give all device code in one ```cuda block.");
  if (cuda.size() > 1)
    throw AnswerError("The answer has " + std::to_string(cuda.size()) +
                      " CUDA code blocks (opened at lines " + lines_of(cuda) +
                      "). Give all device code in exactly one ```cuda block.");
  if (plans.empty())
    throw AnswerError(
        "The answer has no launch plan. Add one ```json block with {\"launch\": [...]} as the "
        "answer format describes.");
  if (plans.size() > 1)
    throw AnswerError("The answer has " + std::to_string(plans.size()) +
                      " JSON blocks (opened at lines " + lines_of(plans) +
                      "). Give exactly one launch plan.");
  if (trim(cuda[0]->content).empty())
    throw AnswerError("The CUDA code block (line " + std::to_string(cuda[0]->fence_line) +
                      ") is empty.");
  if (cuda[0]->content.find("__global__") == std::string::npos)
    throw AnswerError("The CUDA code block (line " + std::to_string(cuda[0]->fence_line) +
                      ") defines no __global__ kernel.");
  Answer a;
  a.source = cuda[0]->content;
  a.source_first_line = cuda[0]->first_line;
  a.plan = plans[0]->content;
  a.plan_first_line = plans[0]->first_line;
  return a;
}

std::string task_named_in(const std::string& text) {
  size_t a = text.find("<!--"), t = text.find("task:", a == std::string::npos ? 0 : a),
         b = text.find("-->", t);
  if (a == std::string::npos || t == std::string::npos || b == std::string::npos) return "";
  return trim(text.substr(t + 5, b - t - 5));
}

}  // namespace kforge::compile
