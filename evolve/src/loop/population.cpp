#include "population.h"

#include <algorithm>

#include "kforge/common/hash.h"

namespace kforge::evolve::loop {

std::string Population::family_key(const std::string& source, const std::string& plan) {
  return content_hash(source + std::string(1, '\0') + plan);
}

Family* Population::family(const std::string& key) {
  auto it = families_.find(key);
  return it == families_.end() ? nullptr : &it->second;
}

bool Population::accept(const Member& m, bool wins) {
  members_.push_back(m);
  if (!wins || (best_ && m.time_ms >= best_->time_ms)) return false;
  best_ = m;
  return true;
}

const Member& Population::select_parent(int island, std::mt19937_64& rng) const {
  std::vector<const Member*> pool;
  for (const Member& m : members_)
    if (m.island == island) pool.push_back(&m);
  if (pool.empty())
    for (const Member& m : members_) pool.push_back(&m);
  std::uniform_real_distribution<double> u(0, 1);
  double r = u(rng);
  auto faster = [](const Member* a, const Member* b) { return a->time_ms < b->time_ms; };
  if (r < select_best_) return **std::min_element(pool.begin(), pool.end(), faster);
  if (r < select_best_ + select_elite_) {
    std::map<std::string, const Member*> elites;  // per cell, the fastest
    for (const Member* m : pool)
      if (!elites.count(m->cell) || m->time_ms < elites[m->cell]->time_ms) elites[m->cell] = m;
    auto it = elites.begin();
    std::advance(it, static_cast<long>(rng() % elites.size()));
    return *it->second;
  }
  return *pool[rng() % pool.size()];
}

Choice Population::choose(const OperatorWeights& w, int island, std::mt19937_64& rng) const {
  std::discrete_distribution<int> pick({w.optimize, w.crossover, w.ideas});
  int op = pick(rng);
  const Member& a = select_parent(island, rng);
  Choice out;
  out.parent = a.id;
  out.kind = op == 2 ? PromptKind::Ideas : PromptKind::Optimize;
  if (op != 1) return out;
  const Member* b = nullptr;
  auto rank = [&](const Member& m) {
    return (m.island != a.island ? 0 : 2) + (m.cell != a.cell ? 0 : 1);
  };
  for (const Member& m : members_)
    if (m.family != a.family &&
        (!b || rank(m) < rank(*b) || (rank(m) == rank(*b) && m.time_ms < b->time_ms)))
      b = &m;
  if (!b) return out;
  out.second_parent = b->id;
  out.kind = PromptKind::Crossover;
  return out;
}

void Population::migrate() {
  std::vector<Member> moved;
  for (int i = 0; i < islands_; ++i) {
    const Member* best = nullptr;
    for (const Member& m : members_)
      if (m.island == i && (!best || m.time_ms < best->time_ms)) best = &m;
    if (!best) continue;
    Member copy = *best;
    copy.island = (i + 1) % islands_;
    bool there = std::any_of(members_.begin(), members_.end(), [&](const Member& m) {
      return m.id == copy.id && m.island == copy.island;
    });
    if (!there) moved.push_back(copy);
  }
  members_.insert(members_.end(), moved.begin(), moved.end());
}

int Population::repair_depth(int64_t id) const {
  auto it = repair_depth_.find(id);
  return it == repair_depth_.end() ? 0 : it->second;
}

}  // namespace kforge::evolve::loop
