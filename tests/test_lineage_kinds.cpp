// How a candidate was made (archive::LineageKind, the prompt_kind column) and where its judgment
// comes from (archive::Origin, the origin column) are enums with one spelling each (issue 36): the
// spellings archives, JSONL files and export manifests already hold, read back to the same value;
// a spelling that is not a kind is refused where it is read, naming what gave it.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <utility>
#include <vector>

#include "kforge/archive/archive.h"
#include "kforge/archive/lineage.h"
#include "kforge/common/error.h"
#include "kforge/common/identity.h"
#include "kforge/evolve/prompt.h"
#include "test_util.h"

namespace {

using namespace kforge;
using archive::LineageKind;
using archive::Origin;
using kforge::test::TempDir;
using nlohmann::json;

// The spellings stored since the columns exist: changing one would orphan every archive's rows.
const std::vector<std::pair<LineageKind, std::string>> kStored = {
    {LineageKind::Manual, "manual"},
    {LineageKind::Seed, "seed"},
    {LineageKind::Archive, "archive"},
    {LineageKind::Tune, "tune"},
    {LineageKind::Import, "import"},
    {LineageKind::Translate, "translate"},
    {LineageKind::Optimize, "optimize"},
    {LineageKind::Crossover, "crossover"},
    {LineageKind::RepairCompile, "repair_compile"},
    {LineageKind::RepairWrong, "repair_wrong"},
    {LineageKind::Idea, "idea"}};

TEST(LineageKinds, EachKindHasOneStoredSpellingThatReadsBackToIt) {
  ASSERT_EQ(archive::lineage_kinds().size(), kStored.size());
  for (size_t i = 0; i < kStored.size(); ++i) {
    const auto& [kind, name] = kStored[i];
    EXPECT_EQ(archive::lineage_kinds()[i], kind) << name;
    EXPECT_EQ(archive::to_string(kind), name);
    EXPECT_EQ(archive::lineage_kind_from_string(name), kind) << name;
  }
  for (const char* other : {"", "Seed", "seed ", "ideas", "repair", "tuner", "human", "?"})
    EXPECT_EQ(archive::lineage_kind_from_string(other), std::nullopt) << other;
  std::string listed = archive::lineage_kinds_text();
  for (const auto& [kind, name] : kStored)
    EXPECT_NE(listed.find(name), std::string::npos) << name << " missing from " << listed;

  EXPECT_EQ(archive::to_string(Origin::Kforge), "kforge");
  EXPECT_EQ(archive::to_string(Origin::Imported), "imported");
  for (Origin o : {Origin::Kforge, Origin::Imported})
    EXPECT_EQ(archive::origin_from_string(archive::to_string(o)), o);
  for (const char* other : {"", "Kforge", "import", "claimed"})
    EXPECT_EQ(archive::origin_from_string(other), std::nullopt) << other;
}

// An LLM's candidate is stored under its prompt's name, as before the enum: an ideas prompt's
// kernels as "idea" (each implements one idea).
TEST(LineageKinds, AnAnswerIsStoredUnderItsPromptsName) {
  using evolve::PromptKind;
  for (PromptKind k : {PromptKind::Translate, PromptKind::Optimize, PromptKind::Crossover,
                       PromptKind::RepairCompile, PromptKind::RepairWrong, PromptKind::Idea})
    EXPECT_EQ(archive::to_string(evolve::lineage_kind(k)), evolve::prompt_kind_name(k));
  EXPECT_EQ(evolve::lineage_kind(PromptKind::Ideas), LineageKind::Idea);
}

// A kforge JSONL line whose origin is no origin is refused naming the field; "imported" stays an
// imported claim.
TEST(LineageKinds, AnImportedLineWhoseOriginIsNoneIsRefusedNamingTheField) {
  std::string source = "__global__ void k() {}";
  json plan = {
      {"launch",
       json::array(
           {{{"kernel", "k"}, {"grid", {"1"}}, {"block", {"BLOCK"}}, {"args", json::array()}}})},
      {"tune", {{"BLOCK", {128, 256}}}}};
  json line = {{"kforge_archive", 1},
               {"task",
                {{"suite", "level1"},
                 {"name", "relu"},
                 {"version", "0123456789abcdef0123456789abcdef"},
                 {"summary", "ReLU"},
                 {"tags", {"elementwise"}},
                 {"definition", "def forward(x):\n    return x\n"},
                 {"created_at", "2026-12-01T00:00:00.000Z"}}},
               {"candidate",
                {{"identity", candidate_identity(source, plan, {{"BLOCK", 128}})},
                 {"source", source},
                 {"plan", plan},
                 {"tunables", {{"BLOCK", 128}}},
                 {"generation", 0},
                 {"island", 0},
                 {"prompt_kind", "seed"},
                 {"model", "human"},
                 {"origin", "Kforge"},
                 {"verified", true},
                 {"imported", json::object()},
                 {"created_at", "2026-12-01T00:00:01.000Z"},
                 {"parents", json::array()}}},
               {"compiles", json::array()},
               {"evaluations", json::array()}};
  TempDir dir;
  archive::Archive a = archive::Archive::open((dir.path() / "a.db").string());
  std::stringstream bad(line.dump() + "\n");
  try {
    a.import_jsonl(bad, "other.jsonl", {true});
    FAIL() << "a line of origin \"Kforge\" was imported";
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), "other.jsonl");
    EXPECT_EQ(e.field(), "candidate.origin");
    EXPECT_NE(e.problem().find("'Kforge'"), std::string::npos) << e.what();
  }
  line["candidate"]["origin"] = "imported";
  line["candidate"]["verified"] = false;
  std::stringstream good(line.dump() + "\n");
  archive::ImportReport r = a.import_jsonl(good, "other.jsonl", {true});
  EXPECT_EQ(r.new_candidates, 1u);
  json c = a.show(archive::CandidateId{1});
  EXPECT_EQ(c["origin"], "imported");
  EXPECT_EQ(c["prompt_kind"], "seed");
}

// `kforge corpus --kind` stores the kind as given: one that is not a kind is refused before
// anything runs (a typo would have filed the candidates where no `--kind` filter finds them).
TEST(LineageKinds, KforgeCorpusRefusesAKindItDoesNotKnow) {
  TempDir dir;
  auto [rc, out] = kforge::test::run_kforge("corpus " + dir.path().string() + " --kind seeds");
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("--kind 'seeds' is not a kind"), std::string::npos) << out;
  EXPECT_NE(out.find(archive::lineage_kinds_text()), std::string::npos) << out;
}

}  // namespace
