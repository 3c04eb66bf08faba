#include "kforge/tasks/reference_cache.h"

#include <optional>

#include "kforge/common/hash.h"

namespace kforge::tasks {

struct ReferenceCache::Entry {
  std::mutex mutex;  // held while compiling: one compile per task
  std::shared_ptr<const Reference> reference;
  std::optional<std::vector<OutputInfo>> outputs;

  void compile(const Task& task) {
    if (!reference) reference = std::make_shared<const Reference>(Reference::compile(task));
  }
};

namespace {

// What Reference::compile and describe_outputs read of a task, besides its dims.
std::string key_of(const Task& task) {
  std::string k = task.content_hash + '\n' + task.file.string() + '\n' + task.reference + '\n';
  for (const InputSpec& in : task.inputs)
    k += in.name + ':' + std::string(dtype_name(in.dtype)) + '\n';
  for (const OutputSpec& out : task.outputs)
    k += out.name + ':' + (out.dtype ? std::string(dtype_name(*out.dtype)) : "") + '\n';
  return content_hash(k);
}

}  // namespace

std::shared_ptr<ReferenceCache::Entry> ReferenceCache::entry(const Task& task) {
  std::string key = key_of(task);
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = entries_.find(key);
  if (it != entries_.end()) return it->second;
  if (max_entries_ > 0 && entries_.size() >= max_entries_) entries_.clear();
  return entries_.emplace(key, std::make_shared<Entry>()).first->second;
}

std::shared_ptr<const Reference> ReferenceCache::reference(const Task& task) {
  std::shared_ptr<Entry> e = entry(task);
  std::lock_guard<std::mutex> lock(e->mutex);
  e->compile(task);
  return e->reference;
}

std::vector<OutputInfo> ReferenceCache::outputs(const Task& task) {
  std::shared_ptr<Entry> e = entry(task);
  std::lock_guard<std::mutex> lock(e->mutex);
  e->compile(task);
  if (!e->outputs) e->outputs = describe_outputs(task, *e->reference);
  return *e->outputs;
}

void ReferenceCache::adopt(const Task& task, Reference reference) {
  std::shared_ptr<Entry> e = entry(task);
  std::lock_guard<std::mutex> lock(e->mutex);
  if (!e->reference) e->reference = std::make_shared<const Reference>(std::move(reference));
}

size_t ReferenceCache::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return entries_.size();
}

ReferenceCache& shared_references() {
  static ReferenceCache* cache =
      new ReferenceCache(256);  // never destroyed: nothing to gain at exit
  return *cache;
}

}  // namespace kforge::tasks
