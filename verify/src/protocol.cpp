#include "kforge/verify/protocol.h"

#include <regex>
#include <stdexcept>

namespace kforge::verify {

using nlohmann::json;

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(BufferSpec, name, allocation_bytes, offset, bytes, read_only)

json to_json(const BufferSpec& b) {
  return json(b);
}

BufferSpec buffer_from_json(const json& j) {
  return j.get<BufferSpec>();
}

json to_json(const RunRequest& r) {
  json launches = json::array();
  for (const LaunchSpecWire& l : r.launches) {
    json args = json::array();
    for (const LaunchArg& a : l.args) {
      json arg =
          a.buffer >= 0 ? json{{"buffer", a.buffer}} : json{{"int", a.value}, {"bytes", a.bytes}};
      if (a.map.rank > 0) {
        const kforge_launch::TensorMap& m = a.map;
        arg["map"] = {{"dims", std::vector<int64_t>(m.dims, m.dims + m.rank)},
                      {"box", std::vector<int64_t>(m.box, m.box + m.rank)},
                      {"element_bytes", m.element_bytes},
                      {"type", static_cast<int>(m.type)},
                      {"swizzle", m.swizzle}};
      }
      args.push_back(arg);
    }
    launches.push_back({{"index", l.index},
                        {"kernel", l.kernel},
                        {"grid", l.grid},
                        {"block", l.block},
                        {"cluster", l.cluster},
                        {"shared_bytes", l.shared_bytes},
                        {"cooperative", l.cooperative},
                        {"args", args}});
  }
  return {{"op", "run"},
          {"launches", launches},
          {"zero_buffers", r.zero_buffers},
          {"repeat", r.repeat},
          {"timed", r.timed}};
}

namespace {

kforge_launch::TensorMap tensor_map_from_json(const json& j) {
  kforge_launch::TensorMap m;
  auto dims = j.at("dims").get<std::vector<int64_t>>();
  auto box = j.at("box").get<std::vector<int64_t>>();
  if (dims.empty() || dims.size() > 5 || box.size() != dims.size())
    throw std::invalid_argument("a tensor map has 1 to 5 dims, and a box size for each");
  m.rank = static_cast<int>(dims.size());
  std::copy(dims.begin(), dims.end(), m.dims);
  std::copy(box.begin(), box.end(), m.box);
  m.element_bytes = j.at("element_bytes");
  m.type = static_cast<CUtensorMapDataType>(j.at("type").get<int>());
  m.swizzle = j.at("swizzle");
  return m;
}

}  // namespace

RunRequest run_request_from_json(const json& j) {
  RunRequest r;
  for (const json& l : j.at("launches")) {
    LaunchSpecWire w;
    w.index = l.value("index", -1);
    w.kernel = l.at("kernel");
    w.grid = l.at("grid");
    w.block = l.at("block");
    w.cluster = l.at("cluster");
    w.shared_bytes = l.at("shared_bytes");
    w.cooperative = l.at("cooperative");
    for (const json& a : l.at("args")) {
      LaunchArg arg;
      if (a.contains("buffer")) {
        arg.buffer = a.at("buffer");
        if (a.contains("map")) arg.map = tensor_map_from_json(a.at("map"));
      } else {
        arg.value = a.at("int");
        arg.bytes = a.at("bytes");
      }
      w.args.push_back(arg);
    }
    r.launches.push_back(std::move(w));
  }
  r.zero_buffers = j.at("zero_buffers").get<std::vector<int>>();
  r.repeat = j.value("repeat", 1);
  r.timed = j.value("timed", false);
  return r;
}

json to_json(const RunReply& r) {
  json j{{"op", "run"}, {"ok", r.ok}, {"ms", r.ms}, {"gpu_ms", r.gpu_ms}};
  if (r.hold_timed_out) j["hold_timed_out"] = true;
  if (!r.ok) {
    j["stage"] = r.stage;
    j["launch"] = r.launch;
    j["error"] = r.error;
    j["message"] = r.message;
  }
  return j;
}

RunReply run_reply_from_json(const json& j) {
  RunReply r;
  r.ok = j.at("ok");
  r.ms = j.value("ms", 0.0);
  r.gpu_ms = j.value("gpu_ms", 0.0);
  r.hold_timed_out = j.value("hold_timed_out", false);
  r.stage = j.value("stage", "");
  r.launch = j.value("launch", -1);
  r.error = j.value("error", "");
  r.message = j.value("message", "");
  return r;
}

std::vector<std::string> ptx_global_variables(const std::string& ptx) {
  // ".visible .global .align 4 .u32 counter;"  ".global .align 8 .b8 _ZN2ns5cacheE[64];"
  static const std::regex re(
      R"(^\s*(?:\.(?:visible|weak|extern)\s+)*\.global\s+[^;=\[]*?([A-Za-z_$][\w$]*)\s*(?:\[[^\]]*\]\s*)*(?:=[^;]*)?;)",
      std::regex::multiline);
  std::vector<std::string> out;
  for (auto it = std::sregex_iterator(ptx.begin(), ptx.end(), re); it != std::sregex_iterator();
       ++it) {
    if (std::regex_search(it->str(), std::regex(R"(^\s*\.extern)")))
      continue;  // declared elsewhere
    out.push_back((*it)[1]);
  }
  return out;
}

}  // namespace kforge::verify
