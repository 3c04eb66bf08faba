#include "kforge/compile/signature.h"

#include <cxxabi.h>

#include <cstdlib>
#include <map>
#include <regex>

#include "kforge/common/strings.h"

namespace kforge::compile {
namespace {

std::string remove_word(std::string s, const std::string& word) {
  size_t at;
  while ((at = s.find(word)) != std::string::npos) s.erase(at, word.size());
  return trim(s);
}

ParamType classify(const std::string& text) {
  ParamType p;
  p.text = trim(text);
  std::string t = remove_word(remove_word(p.text, "__restrict__"), "__restrict");
  if (!t.empty() && t.back() == '*') {
    std::string pointee = trim(t.substr(0, t.size() - 1));
    if (!pointee.empty() && pointee.back() == '*') return p;  // pointer to pointer: Other
    p.kind = ParamType::Kind::Pointer;
    p.is_const = pointee.find("const") != std::string::npos;
    p.pointee = remove_word(remove_word(pointee, "const"), "volatile");
    return p;
  }
  static const std::map<std::string, std::pair<int, bool>> ints = {
      {"int", {32, true}},           {"unsigned int", {32, false}},
      {"long", {64, true}},          {"unsigned long", {64, false}},
      {"long long", {64, true}},     {"unsigned long long", {64, false}},
      {"short", {16, true}},         {"unsigned short", {16, false}},
      {"char", {8, true}},           {"signed char", {8, true}},
      {"unsigned char", {8, false}}, {"bool", {8, false}}};
  if (auto it = ints.find(remove_word(t, "const")); it != ints.end()) {
    p.kind = ParamType::Kind::Integer;
    p.bits = it->second.first;
    p.is_signed = it->second.second;
  }
  return p;
}

std::string dtype_list(tasks::Dtype d) {
  std::string s;
  for (const auto& p : accepted_pointees(d)) s += (s.empty() ? "" : ", ") + p + "*";
  return s;
}

}  // namespace

std::string demangle(const std::string& lowered) {
  int status = 0;
  char* d = abi::__cxa_demangle(lowered.c_str(), nullptr, nullptr, &status);
  if (status != 0 || !d) return "";
  std::string out = d;
  std::free(d);
  return out;
}

std::optional<std::vector<ParamType>> parse_demangled_parameters(const std::string& demangled) {
  if (demangled.empty() || demangled.back() != ')') return std::nullopt;
  // The parameter list is the last top-level parenthesised group.
  int depth = 0;
  size_t open = std::string::npos;
  for (size_t i = demangled.size(); i-- > 0;) {
    char c = demangled[i];
    if (c == ')') ++depth;
    if (c == '(' && --depth == 0) {
      open = i;
      break;
    }
  }
  if (open == std::string::npos) return std::nullopt;
  std::string inner = demangled.substr(open + 1, demangled.size() - open - 2);
  std::vector<ParamType> out;
  if (trim(inner).empty() || trim(inner) == "void") return out;
  std::string cur;
  int nest = 0;
  for (char c : inner) {
    if (c == '<' || c == '(' || c == '[') ++nest;
    if (c == '>' || c == ')' || c == ']') --nest;
    if (c == ',' && nest == 0) {
      out.push_back(classify(cur));
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(classify(cur));
  return out;
}

std::optional<std::vector<ParamType>> ptx_parameters(const std::string& ptx,
                                                     const std::string& entry) {
  std::regex head(R"(\.entry\s+)" + entry + R"(\s*\()");
  std::smatch m;
  if (!std::regex_search(ptx, m, head)) return std::nullopt;
  size_t start = m.position(0) + m.length(0);
  size_t end = ptx.find(')', start);
  if (end == std::string::npos) return std::nullopt;
  std::string list = ptx.substr(start, end - start);
  // ".param .u64 name", ".param .u64 .ptr .align 1 name" (a pointer's attributes), ".param .align
  // 64 .b8 name[128]" (a struct by value: its bytes).
  static const std::regex param(
      R"(\.param\s+\.(?:align\s+\d+\s+)?\.?([a-z]+)(\d+)\s+(?:\.\w+\s+(?:\d+\s+)?)*[\w$]+(?:\[(\d+)\])?)");
  std::vector<ParamType> out;
  for (auto it = std::sregex_iterator(list.begin(), list.end(), param);
       it != std::sregex_iterator(); ++it) {
    ParamType p;
    p.kind = ParamType::Kind::Other;
    const int count = (*it)[3].matched ? std::stoi((*it)[3]) : 1;
    p.bits = std::stoi((*it)[2]) * count;
    p.text = "." + std::string((*it)[1]) + std::string((*it)[2]) +
             ((*it)[3].matched ? "[" + std::string((*it)[3]) + "]" : "");
    out.push_back(p);
  }
  return out;
}

const std::vector<std::string>& accepted_pointees(tasks::Dtype d) {
  static const std::map<tasks::Dtype, std::vector<std::string>> table = {
      {tasks::Dtype::Float32, {"float", "float2", "float4"}},
      {tasks::Dtype::Float16, {"__half", "__half2", "half", "half2"}},
      {tasks::Dtype::BFloat16, {"__nv_bfloat16", "__nv_bfloat162", "nv_bfloat16", "nv_bfloat162"}},
      {tasks::Dtype::Float64, {"double", "double2"}},
      {tasks::Dtype::Int32, {"int", "int2", "int4"}},
      {tasks::Dtype::Int64, {"long long", "long", "longlong2", "long2"}},
      {tasks::Dtype::Bool, {"bool", "unsigned char", "signed char", "char"}}};
  return table.at(d);
}

namespace {

// By name, and by size where PTX gave it (check_candidate fills an Other parameter's bits from
// PTX): a struct of another size named CUtensorMap_st would make the driver copy past the 128
// bytes kforge encodes.
bool is_tensor_map_type(const ParamType& p) {
  return p.kind == ParamType::Kind::Other &&
         (p.text == "CUtensorMap_st" || p.text == "CUtensorMap_st const" ||
          p.text == "CUtensorMap");
}
bool is_tensor_map_parameter(const ParamType& p) {
  return is_tensor_map_type(p) && p.bits == 1024;
}

}  // namespace

std::vector<std::string> check_arguments(const ConcreteLaunch& launch, size_t index,
                                         const Plan& plan, const std::vector<ParamType>& params,
                                         bool from_ptx) {
  std::vector<std::string> problems;
  std::string field = "launch[" + std::to_string(index) + "]";
  if (params.size() != launch.args.size()) {
    problems.push_back(field + ".args: kernel " + launch.kernel + " takes " +
                       std::to_string(params.size()) + " parameter(s) but the plan passes " +
                       std::to_string(launch.args.size()));
    return problems;
  }
  for (size_t i = 0; i < params.size(); ++i) {
    const ParamType& p = params[i];
    const ConcreteArg& a = launch.args[i];
    std::string af = field + ".args[" + std::to_string(i) + "]";
    std::string arg_text =
        a.is_tensor ? "tensor '" + a.tensor + "'" : "the integer " + std::to_string(a.value);
    if (a.map.rank > 0) {  // by value: a 128-byte CUtensorMap
      if (from_ptx ? p.bits != 1024 : !is_tensor_map_parameter(p))
        problems.push_back(af + ": the tensor map of '" + a.tensor + "' is passed to parameter " +
                           std::to_string(i + 1) + " of type '" + p.text +
                           "'; declare it 'const __grid_constant__ CUtensorMap' (#include "
                           "<cuda.h>)");
      continue;
    }
    if (is_tensor_map_type(p)) {
      problems.push_back(af + ": parameter " + std::to_string(i + 1) + " is a CUtensorMap, but " +
                         "the plan passes " + arg_text +
                         "; pass {\"tensor_map\": TENSOR, \"dims\": [...], \"box\": [...]}");
      continue;
    }
    if (from_ptx) {
      // extern "C": PTX only says how wide each parameter is.
      if (a.is_tensor && p.bits != 64)
        problems.push_back(af + ": " + arg_text +
                           " needs a 64-bit pointer parameter, but parameter " +
                           std::to_string(i + 1) + " is " + p.text +
                           " (use C++ linkage so kforge can check types)");
      if (!a.is_tensor && p.bits == 32 && (a.value < INT32_MIN || a.value > INT32_MAX))
        problems.push_back(af + ": " + std::to_string(a.value) + " does not fit parameter " +
                           std::to_string(i + 1) + " (32 bits)");
      if (!a.is_tensor && p.bits != 32 && p.bits != 64)
        problems.push_back(af + ": parameter " + std::to_string(i + 1) + " is " + p.text +
                           "; integers must be 32 or 64 bits");
      continue;
    }
    if (p.kind == ParamType::Kind::Other) {
      problems.push_back(af + ": parameter " + std::to_string(i + 1) + " has type '" + p.text +
                         "'; kernel parameters must be tensor pointers, integers or tensor "
                         "maps (float constants belong in the source)");
      continue;
    }
    if (a.is_tensor) {
      const TensorInfo* t = plan.tensor(a.tensor);
      if (p.kind != ParamType::Kind::Pointer) {
        problems.push_back(af + ": " + arg_text + " is passed to parameter " +
                           std::to_string(i + 1) + " of type '" + p.text +
                           "', which is not a pointer");
        continue;
      }
      const auto& ok = accepted_pointees(t->dtype);
      if (std::find(ok.begin(), ok.end(), p.pointee) == ok.end())
        problems.push_back(af + ": " + arg_text + " is " +
                           std::string(tasks::dtype_name(t->dtype)) + " but parameter " +
                           std::to_string(i + 1) + " is '" + p.text + "' (use " +
                           dtype_list(t->dtype) + ")");
      if (t->role == TensorRole::Input && !p.is_const)
        problems.push_back(af + ": " + arg_text + " is an input, so parameter " +
                           std::to_string(i + 1) + " must be const ('const " + p.pointee +
                           "*'), not '" + p.text + "'");
      // Outputs and workspaces may be const in a launch that only reads them (a second pass).
    } else {
      if (p.kind != ParamType::Kind::Integer) {
        problems.push_back(af + ": " + arg_text + " is passed to parameter " +
                           std::to_string(i + 1) + " of type '" + p.text + "', which is a pointer");
        continue;
      }
      if (p.bits < 32) {
        problems.push_back(af + ": parameter " + std::to_string(i + 1) + " is '" + p.text +
                           "'; integer parameters must be 32 or 64 bits");
        continue;
      }
      bool fits = p.bits == 64 ? (p.is_signed || a.value >= 0)
                               : (p.is_signed ? (a.value >= INT32_MIN && a.value <= INT32_MAX)
                                              : (a.value >= 0 && a.value <= UINT32_MAX));
      if (!fits)
        problems.push_back(af + ": " + std::to_string(a.value) + " does not fit parameter " +
                           std::to_string(i + 1) + " ('" + p.text +
                           "'); use a 64-bit integer (long long)");
    }
  }
  return problems;
}

}  // namespace kforge::compile
