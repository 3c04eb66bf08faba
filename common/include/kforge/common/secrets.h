// Secrets (API keys, tokens) kforge must never write anywhere: logs, the cache, the archive,
// prompts, stdout. The environment's secret-looking variables are known from the start; keys read
// from a config file are added with remember_secret(). redact_secrets() runs over a whole text,
// before any truncation, and catches the secret itself, any run of kSecretWindow or more of its
// characters (a partial echo), and its JSON-escaped forms.
#pragma once

#include <string>
#include <string_view>

namespace kforge {

// The shortest run of a secret's characters that counts as an echo of it.
inline constexpr size_t kSecretWindow = 10;

// What replaces a secret (or a part of one) in redacted text.
inline constexpr std::string_view kRedacted = "[redacted]";

// Whether an environment variable's name says it holds a secret (…KEY, …TOKEN, …SECRET,
// …PASSWORD, …CREDENTIAL(S), case-insensitive). Such variables never reach a child process.
bool is_secret_name(std::string_view name);

// Adds `value` to the secrets redact_secrets() removes (values shorter than 8 are ignored).
void remember_secret(const std::string& value);

// `text` with every known secret, partial echo and escaped echo replaced by kRedacted.
std::string redact_secrets(std::string text);

}  // namespace kforge
