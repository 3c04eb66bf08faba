// Kernel parameter types, read from the demangled name NVRTC lowers each kernel to (C++ linkage)
// or, for extern "C" kernels, from the PTX .param list (sizes only). The plan's arguments are
// checked against them before any GPU sees the candidate.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kforge/compile/plan.h"

namespace kforge::compile {

struct ParamType {
  enum class Kind { Pointer, Integer, Other } kind = Kind::Other;
  std::string text;       // as demangled, e.g. "float const*"
  std::string pointee;    // for pointers, without const: "float", "float4", "__half"
  bool is_const = false;  // pointer to const
  int bits = 0;           // integers: 32 or 64; Other: its size in bits, from PTX (0: unknown)
  bool is_signed = true;
};

// "void softmax<256>(float const*, float*, int)" -> the three parameter types.
std::optional<std::vector<ParamType>> parse_demangled_parameters(const std::string& demangled);

// Parameter sizes of an extern "C" entry in PTX (pointers and 64-bit integers look the same).
std::optional<std::vector<ParamType>> ptx_parameters(const std::string& ptx,
                                                     const std::string& entry);

std::string demangle(const std::string& lowered);  // "" when not a mangled C++ name

// Every problem with launch `index`'s arguments at one configuration: arity, pointer vs integer,
// pointee dtype, const-ness of inputs, integer width and range. Empty when all is well.
std::vector<std::string> check_arguments(const ConcreteLaunch& launch, size_t index,
                                         const Plan& plan, const std::vector<ParamType>& params,
                                         bool from_ptx);

// The pointee types accepted for a tensor dtype ("float", "float2", "float4" for float32, ...).
const std::vector<std::string>& accepted_pointees(tasks::Dtype dtype);

}  // namespace kforge::compile
