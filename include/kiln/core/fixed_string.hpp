// kiln: a string literal usable as a template argument (for kiln::input<"x", 2>()), and the
// FNV-1a hash that turns it into the integer that keys a symbol's type (DESIGN.md, Lowering).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace kiln {

template <std::size_t N>
struct fixed_string {
  char data[N]{};
  constexpr fixed_string(const char (&s)[N]) {
    for (std::size_t i = 0; i < N; ++i) data[i] = s[i];
  }
  constexpr std::size_t size() const { return N - 1; }
  constexpr std::string_view view() const { return {data, N - 1}; }
};

constexpr std::uint64_t fnv1a(std::string_view s) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (char c : s) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  return h;
}

// Mixes v into the hash h (for tags derived from other tags: gradients, optimizer states).
constexpr std::uint64_t hash_mix(std::uint64_t h, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) h = (h ^ ((v >> (8 * i)) & 0xffu)) * 0x100000001b3ull;
  return h;
}

// The name as a pack of chars: a non-class template argument, which nvcc handles.
template <char... Cs>
struct Name {
  static constexpr char chars[] = {Cs..., '\0'};
  static constexpr std::string_view view() { return {chars, sizeof...(Cs)}; }
};

}  // namespace kiln
