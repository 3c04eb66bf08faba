// The pure part of memory.h: a verification's needs, the pool it can keep, sizes in words.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "kforge/verify/memory.h"
#include "kforge/verify/shared_buffer.h"

namespace kforge::verify {

using nlohmann::json;

namespace {
json optional_json(const std::optional<uint64_t>& v) {
  return v ? json(*v) : json(nullptr);
}
}  // namespace

uint64_t MemoryNeeds::for_sets(int sets) const {
  return buffers + working + reserve + static_cast<uint64_t>(std::max(sets, 0)) * set;
}

json MemoryNeeds::to_json() const {
  return {{"buffers_bytes", buffers},
          {"set_bytes", set},
          {"working_bytes", working},
          {"reserve_bytes", reserve}};
}

uint64_t buffer_allocation_bytes(const std::vector<TensorSize>& tensors, uint64_t granularity) {
  uint64_t sum = 0;
  for (const TensorSize& t : tensors)
    sum += buffer_layout(t.bytes(), std::max<uint64_t>(granularity, 1)).allocation_bytes;
  return sum;
}

MemoryNeeds memory_needs(const std::vector<TensorSize>& inputs,
                         const std::vector<TensorSize>& outputs,
                         const std::vector<TensorSize>& workspaces, uint64_t granularity,
                         uint64_t total) {
  MemoryNeeds n;
  std::vector<TensorSize> all = inputs;
  all.insert(all.end(), outputs.begin(), outputs.end());
  all.insert(all.end(), workspaces.begin(), workspaces.end());
  n.buffers = buffer_allocation_bytes(all, granularity);
  uint64_t in = 0, out = 0, wide_in = 0, wide_out = 0, poison = 0, largest_out = 0;
  for (const TensorSize& t : inputs) {
    in += t.bytes();
    if (t.floating)
      wide_in += t.numel * 8;  // reference64 widens floating inputs; integers pass as they are
  }
  for (const TensorSize& t : outputs) {
    out += t.bytes();
    wide_out += t.floating ? t.numel * 8 : t.bytes();
    largest_out = std::max(largest_out, t.numel);
  }
  for (const std::vector<TensorSize>* group : {&outputs, &workspaces})
    for (const TensorSize& t : *group)
      if (t.numel >= kCachedPoisonMinElements) poison += t.bytes();
  n.set = in + out;
  uint64_t compare = 4 * 8 * std::min(largest_out, kCompareChunkElements);
  n.working = out /* run 1's outputs copied */ + poison + wide_in + wide_out +
              std::max(wide_in, wide_out) + compare;
  n.reserve = std::max(kMinReserveBytes, total / 32);
  return n;
}

PoolPlan plan_pool(const MemoryNeeds& needs, uint64_t available, int wanted, int minimum) {
  PoolPlan p;
  p.needs = needs;
  p.wanted = std::max(wanted, 1);
  p.minimum = std::clamp(minimum, 1, p.wanted);
  p.available = available;
  p.needed = needs.for_sets(p.minimum);
  uint64_t fixed = needs.for_sets(0);
  int fit = 0;
  if (available >= fixed)
    fit = needs.set == 0 ? p.wanted
                         : static_cast<int>(std::min<uint64_t>((available - fixed) / needs.set,
                                                               static_cast<uint64_t>(p.wanted)));
  p.fits = fit >= p.minimum;
  p.sets = p.fits ? fit : 0;
  return p;
}

std::string PoolPlan::shortfall() const {
  auto both = [](uint64_t b) { return std::to_string(b) + " bytes (" + format_bytes(b) + ")"; };
  std::string s = "the timed dims need " + both(needed) + " of GPU memory for " +
                  std::to_string(minimum) + " input set(s) of " + format_bytes(needs.set) +
                  ", buffers of " + format_bytes(needs.buffers) + ", " +
                  format_bytes(needs.working) + " of working memory and a reserve of " +
                  format_bytes(needs.reserve) + "; " + both(available) + " can be used";
  const DeviceMemory& d = device;
  if (limit && *limit <= d.free) {
    s += " (the limit KFORGE_GPU_MEMORY_LIMIT / memory_limit)";
  } else if (d.total) {
    s += " (free of " + format_bytes(d.total);
    // Who holds the rest, as far as this process can tell.
    if (d.torch_reserved && d.total >= d.free)
      s += "; of the " + format_bytes(d.total - d.free) +
           " in use, LibTorch in this process holds " + format_bytes(*d.torch_reserved) + " (" +
           format_bytes(d.torch_allocated.value_or(0)) + " of it in live tensors)";
    s += ")";
  }
  return s + ": the task's sizes do not fit this GPU's memory";
}

json PoolPlan::to_json() const {
  return {{"pool_sets", sets},
          {"pool_wanted", wanted},
          {"pool_minimum", minimum},
          {"fits", fits},
          {"needed_bytes", needed},
          {"available_bytes", available},
          {"free_bytes", device.free},
          {"total_bytes", device.total},
          {"limit_bytes", optional_json(limit)},
          {"released_torch_cache", released_torch_cache},
          {"torch_allocated_bytes", optional_json(device.torch_allocated)},
          {"torch_reserved_bytes", optional_json(device.torch_reserved)},
          {"needs", needs.to_json()}};
}

std::optional<uint64_t> parse_bytes(std::string_view text) {
  std::string s;
  for (char c : text)
    if (!std::isspace(static_cast<unsigned char>(c)))
      s += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  size_t digits = 0;
  while (digits < s.size() &&
         (std::isdigit(static_cast<unsigned char>(s[digits])) || s[digits] == '.'))
    ++digits;
  if (digits == 0 || std::count(s.begin(), s.begin() + static_cast<long>(digits), '.') > 1)
    return std::nullopt;
  double value = std::strtod(s.substr(0, digits).c_str(), nullptr);
  std::string unit = s.substr(digits);
  int power = -1;
  const char* names[][3] = {{"", "b", "bytes"},
                            {"k", "kb", "kib"},
                            {"m", "mb", "mib"},
                            {"g", "gb", "gib"},
                            {"t", "tb", "tib"}};
  for (int p = 0; p < 5; ++p)
    for (const char* n : names[p])
      if (unit == n) power = p;
  if (power < 0) return std::nullopt;
  double bytes = value * std::pow(1024.0, power);
  if (!(bytes >= 1) || bytes > 1e18) return std::nullopt;
  return static_cast<uint64_t>(bytes);
}

std::string format_bytes(uint64_t bytes) {
  const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) return std::to_string(bytes) + " bytes";
  double v = static_cast<double>(bytes);
  int u = -1;
  while (v >= 1024 && u < 3) v /= 1024, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  return buf;
}

std::optional<uint64_t> memory_limit(std::optional<uint64_t> option) {
  if (option) return option;
  const char* env = std::getenv("KFORGE_GPU_MEMORY_LIMIT");
  if (!env || !*env) return std::nullopt;
  std::optional<uint64_t> b = parse_bytes(env);
  if (!b)
    throw Error(std::string("KFORGE_GPU_MEMORY_LIMIT=") + env +
                " is not a size (bytes, or a number with K, M, G or T: e.g. 24GiB)");
  return b;
}

}  // namespace kforge::verify
