// The web view's pages: each one's data (the JSON API's answer) and its HTML, from one archive.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "kforge/archive/archive.h"

namespace kforge::browse {

struct View {
  nlohmann::json data;  // /api/...
  std::string html;     // the page; empty when only the data is asked for
  int status = 200;
};

View overview(archive::Archive& ar);  // /
View leaderboard(archive::Archive& ar, const std::string& suite, const std::string& device,
                 const std::string& tag);                     // /leaderboard?suite=&device=&tag=
View task_list(archive::Archive& ar);                         // /tasks
View task_page(archive::Archive& ar, const std::string& id);  // /task?id=suite/name
View candidate_page(archive::Archive& ar, int64_t id);        // /candidate/N
View search_page(archive::Archive& ar, const std::string& query);  // /search?q=

}  // namespace kforge::browse
