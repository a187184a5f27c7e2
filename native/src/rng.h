// SplitMix64 and derive_seed exactly as engine/rng.py (the Python engine is the reference).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace arena {

// SplitMix64 (Steele, Lea, Flood 2014); `state` is the whole generator state.
struct SplitMix64 {
  uint64_t state;

  uint64_t NextU64() {
    state += 0x9E3779B97F4A7C15ULL;
    uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }

  // Uniform integer in [0, n) by rejection sampling, as SplitMix64.below (n > 0).
  uint64_t Below(uint64_t n) {
    const uint64_t rem = (0 - n) % n;  // 2**64 mod n
    while (true) {
      const uint64_t x = NextU64();
      if (rem == 0 || x < 0 - rem) return x % n;  // limit = 2**64 - rem
    }
  }

  // Fisher-Yates shuffle in place, as SplitMix64.shuffle.
  template <typename T>
  void Shuffle(T* items, int n) {
    for (int i = n - 1; i > 0; --i) {
      const int j = static_cast<int>(Below(static_cast<uint64_t>(i) + 1));
      T tmp = items[i];
      items[i] = items[j];
      items[j] = tmp;
    }
  }
};

// sha256 of `text`, as 32 raw bytes (SHA-NI where the CPU has it; ENGINE_NATIVE_NO_SHANI=1 forces
// the portable code, for the differential tests).
std::string Sha256(const std::string& text);
void Sha256(const char* data, size_t size, unsigned char out[32]);
// The 64 lowercase hex digits of sha256(data[0:size]), written to out (no terminator).
void Sha256Hex(const char* data, size_t size, char out[64]);
// sha256 of `text` as 64 lowercase hex digits.
std::string Sha256Hex(const std::string& text);
// derive_seed(seed, label): the first 8 bytes (big-endian) of sha256("arena-1:{seed}:{label}");
// `seed` is the decimal text of the Python integer.
uint64_t DeriveSeed(const std::string& seed, const std::string& label);

}  // namespace arena
