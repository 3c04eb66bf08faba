#include "kforge/evolve/run.h"

namespace kforge::evolve {

std::string to_string(LoopEvent::Kind kind) {
  switch (kind) {
    case LoopEvent::Kind::Screen:
      return "screen";
    case LoopEvent::Kind::Judge:
      return "judge";
    case LoopEvent::Kind::Profile:
      return "profile";
    case LoopEvent::Kind::Duplicate:
      return "duplicate";
  }
  return "event";
}

nlohmann::json LoopEvent::to_json() const {
  using nlohmann::json;
  auto maybe = [](const auto& v) { return v ? json(*v) : json(nullptr); };
  json j = {{"event", to_string(kind)}, {"task", task}};
  switch (kind) {
    case Kind::Screen:
      j.update({{"generation", generation},
                {"island", island},
                {"identity", identity},
                {"tunables", tunables},
                {"outcome", outcome},
                {"median_ms", maybe(ms)}});
      break;
    case Kind::Judge:
      j.update({{"generation", generation},
                {"island", island},
                {"candidate", maybe(candidate)},
                {"tunables", tunables},
                {"outcome", outcome},
                {"time_ms", maybe(ms)},
                {"admitted", admitted},
                {"summary", summary},
                {"admission", maybe(admission)}});
      break;
    case Kind::Profile:
      j.update({{"candidate", maybe(candidate)}, {"s", seconds}, {"error", error}});
      break;
    case Kind::Duplicate:
      j["identity"] = identity;
      break;
  }
  j.update({{"t", t}, {"gpu_s", gpu_s}, {"evaluations", evaluations}});
  return j;
}

}  // namespace kforge::evolve
