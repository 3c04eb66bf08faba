#include "kforge/common/secrets.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string_view>
#include <unordered_set>
#include <vector>

extern char** environ;

namespace kforge {
namespace {

constexpr size_t kShortestSecret = 8;

// Lookups by string_view, so the scan over a text makes no copies of its windows.
struct ViewHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

// Forms a secret can take in a text: itself, and as JSON or a JSON-in-JSON string escapes it.
std::vector<std::string> echo_forms(const std::string& secret) {
  std::string json, slashes, unicode;
  for (unsigned char c : secret) {
    if (c == '"' || c == '\\') json += '\\';
    json += static_cast<char>(c);
    slashes += c == '/' ? std::string("\\/") : std::string(1, static_cast<char>(c));
    char buf[8];
    std::snprintf(buf, sizeof buf, "\\u%04x", c);
    unicode += buf;
  }
  return {secret, json, slashes, unicode};
}

class Secrets {
 public:
  Secrets() {
    for (char** e = environ; e && *e; ++e) {
      std::string_view entry(*e);
      size_t eq = entry.find('=');
      if (eq != std::string_view::npos && is_secret_name(entry.substr(0, eq)))
        add(std::string(entry.substr(eq + 1)));
    }
  }

  void add(const std::string& value) {
    if (value.size() < kShortestSecret) return;
    std::lock_guard<std::mutex> lock(mutex_);
    if (!values_.insert(value).second) return;
    for (const std::string& form : echo_forms(value)) {
      // kSecretWindow characters of the secret, however many bytes its form spends on each.
      size_t window =
          std::min(form.size(), kSecretWindow * std::max<size_t>(1, form.size() / value.size()));
      for (size_t i = 0; i + window <= form.size(); ++i) windows_.insert(form.substr(i, window));
      shortest_ = std::min(shortest_, window);
      if (std::find(window_sizes_.begin(), window_sizes_.end(), window) == window_sizes_.end())
        window_sizes_.push_back(window);
    }
  }

  std::string redact(std::string text) const {
    std::lock_guard<std::mutex> lock(mutex_);
    if (windows_.empty() || text.size() < shortest_) return text;
    // Mark every byte covered by a window of a secret's form, then replace each covered run.
    std::vector<bool> covered(text.size(), false);
    bool any = false;
    for (size_t window : window_sizes_)
      for (size_t i = 0; i + window <= text.size(); ++i)
        if (windows_.count(std::string_view(text).substr(i, window))) {
          std::fill(covered.begin() + i, covered.begin() + i + window, true);
          any = true;
        }
    if (!any) return text;
    std::string out;
    out.reserve(text.size());
    for (size_t i = 0; i < text.size();) {
      if (!covered[i]) {
        out += text[i++];
        continue;
      }
      out += kRedacted;
      while (i < text.size() && covered[i]) ++i;
    }
    return out;
  }

 private:
  mutable std::mutex mutex_;
  std::unordered_set<std::string> values_;
  std::unordered_set<std::string, ViewHash, std::equal_to<>>
      windows_;  // every kSecretWindow-long run of every form
  std::vector<size_t> window_sizes_;
  size_t shortest_ = SIZE_MAX;
};

Secrets& secrets() {
  static Secrets s;
  return s;
}

}  // namespace

bool is_secret_name(std::string_view name) {
  std::string upper;
  for (char c : name) upper += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (std::string_view word : {"KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL"})
    if (upper.find(word) != std::string::npos) return true;
  return false;
}

void remember_secret(const std::string& value) {
  secrets().add(value);
}

std::string redact_secrets(std::string text) {
  return secrets().redact(std::move(text));
}

}  // namespace kforge
