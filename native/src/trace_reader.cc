// See trace_reader.h. A small JSON scanner over one line at a time: it validates every value it
// skips (strings' escapes and UTF-8, numbers' grammar, nesting up to kMaxDepth) and refuses what it
// does not need to understand (escapes in the strings it returns, duplicate keys, integers past
// int64, a state that needs re-serializing to match its hash).
#include "trace_reader.h"

#include <array>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "rng.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if defined(__x86_64__)
#include <tmmintrin.h>
#endif

namespace arena {
namespace traces {
namespace {

constexpr int kMaxDepth = 64;

struct Cursor {
  const char* p;
  const char* end;

  void Ws() {
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')) ++p;
  }
  bool Eat(char c) {
    Ws();
    if (p < end && *p == c) {
      ++p;
      return true;
    }
    return false;
  }
};

int Hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// A JSON string at c.p: its bytes between the quotes; *escaped says whether it holds a backslash.
// Escapes that stand for surrogates are refused (the reference decides about them).
bool String(Cursor& c, std::string_view* raw, bool* escaped) {
  c.Ws();
  if (c.p >= c.end || *c.p != '"') return false;
  const char* start = ++c.p;
  *escaped = false;
  while (c.p < c.end) {
#if defined(__SSE2__)
    // Sixteen plain bytes at a time (no quote, backslash, control or non-ASCII byte among them).
    while (c.end - c.p >= 16) {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(c.p));
      const __m128i special = _mm_or_si128(
          _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('"')), _mm_cmpeq_epi8(v, _mm_set1_epi8('\\'))),
          _mm_cmplt_epi8(v, _mm_set1_epi8(0x20)));  // signed: bytes >= 0x80 count as below 0x20
      const int mask = _mm_movemask_epi8(special);
      if (mask == 0) {
        c.p += 16;
        continue;
      }
      c.p += __builtin_ctz(static_cast<unsigned>(mask));
      break;
    }
    if (c.p >= c.end) break;
#endif
    const unsigned char ch = static_cast<unsigned char>(*c.p);
    if (ch == '"') {
      *raw = std::string_view(start, c.p - start);
      ++c.p;
      return true;
    }
    if (ch < 0x20) return false;
    if (ch < 0x80 && ch != '\\') {
      ++c.p;
      continue;
    }
    if (ch == '\\') {
      *escaped = true;
      if (c.end - c.p < 2) return false;
      const char e = c.p[1];
      if (e == 'u') {
        if (c.end - c.p < 6) return false;
        int v = 0;
        for (int i = 2; i < 6; ++i) {
          const int h = Hex(c.p[i]);
          if (h < 0) return false;
          v = v * 16 + h;
        }
        if (v >= 0xD800 && v <= 0xDFFF) return false;
        c.p += 6;
      } else if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' || e == 'r' || e == 't') {
        c.p += 2;
      } else {
        return false;
      }
      continue;
    }
    int len;
    uint32_t cp;
    if ((ch & 0xE0) == 0xC0) {
      len = 2, cp = ch & 0x1F;
    } else if ((ch & 0xF0) == 0xE0) {
      len = 3, cp = ch & 0x0F;
    } else if ((ch & 0xF8) == 0xF0) {
      len = 4, cp = ch & 0x07;
    } else {
      return false;
    }
    if (c.end - c.p < len) return false;
    for (int i = 1; i < len; ++i) {
      const unsigned char b = static_cast<unsigned char>(c.p[i]);
      if ((b & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (b & 0x3F);
    }
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
        (cp >= 0xD800 && cp <= 0xDFFF)) {
      return false;
    }
    c.p += len;
  }
  return false;
}

bool Digit(const Cursor& c) { return c.p < c.end && *c.p >= '0' && *c.p <= '9'; }

// A JSON number's text at c.p; *integer: no fraction, no exponent.
bool Number(Cursor& c, std::string_view* text, bool* integer) {
  c.Ws();
  const char* start = c.p;
  if (c.p < c.end && *c.p == '-') ++c.p;
  if (!Digit(c)) return false;
  if (*c.p == '0') {
    ++c.p;
  } else {
    while (Digit(c)) ++c.p;
  }
  *integer = true;
  if (c.p < c.end && *c.p == '.') {
    *integer = false;
    ++c.p;
    if (!Digit(c)) return false;
    while (Digit(c)) ++c.p;
  }
  if (c.p < c.end && (*c.p == 'e' || *c.p == 'E')) {
    *integer = false;
    ++c.p;
    if (c.p < c.end && (*c.p == '+' || *c.p == '-')) ++c.p;
    if (!Digit(c)) return false;
    while (Digit(c)) ++c.p;
  }
  *text = std::string_view(start, c.p - start);
  return true;
}

// A JSON integer that fits int64 with room (at most 18 digits).
bool Int(Cursor& c, int64_t* out) {
  std::string_view text;
  bool integer;
  if (!Number(c, &text, &integer) || !integer || text.size() > 19 || (text.size() == 19 && text[0] != '-')) return false;
  const auto r = std::from_chars(text.data(), text.data() + text.size(), *out);
  return r.ec == std::errc() && r.ptr == text.data() + text.size();
}

bool Literal(Cursor& c, const char* word) {
  const size_t n = std::strlen(word);
  if (static_cast<size_t>(c.end - c.p) < n || std::memcmp(c.p, word, n) != 0) return false;
  c.p += n;
  return true;
}

// true, false or null at c.p.
bool Word(Cursor& c) {
  return *c.p == 't' ? Literal(c, "true") : *c.p == 'f' ? Literal(c, "false") : Literal(c, "null");
}

bool Skip(Cursor& c, int depth);

// An object's members, calling member(key, cursor) for each; keys with escapes are refused.
template <typename F>
bool Members(Cursor& c, F&& member) {
  if (!c.Eat('{')) return false;
  if (c.Eat('}')) return true;
  while (true) {
    std::string_view key;
    bool escaped;
    if (!String(c, &key, &escaped) || escaped || !c.Eat(':') || !member(key, c)) return false;
    if (c.Eat(',')) continue;
    return c.Eat('}');
  }
}

// One value at c.p skipped and validated: nesting up to kMaxDepth counting from `depth`, object
// keys without escapes. A loop over an explicit stack of open containers (bit k of `objects`:
// the k-th innermost is an object), not a call per value: states are mostly short numbers.
bool Skip(Cursor& c, int depth) {
  const char* p = c.p;
  const char* const end = c.end;
  uint64_t objects = 0;
  int level = 0;  // open containers; depth + level <= kMaxDepth <= 64 bits of `objects`
  const auto ws = [&] {
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')) ++p;
  };
  const auto digits = [&] {
    if (p >= end || *p < '0' || *p > '9') return false;
    while (p < end && *p >= '0' && *p <= '9') ++p;
    return true;
  };
  const auto string = [&](bool key) {
    c.p = p;
    std::string_view s;
    bool escaped;
    if (!String(c, &s, &escaped) || (key && escaped)) return false;
    p = c.p;
    return true;
  };
value:
  if (depth + level > kMaxDepth) return false;
  ws();
  if (p >= end) return false;
  switch (*p) {
    case '{':
      ++p;
      ws();
      if (p < end && *p == '}') {
        ++p;
        goto after;
      }
      objects = (objects << 1) | 1;
      ++level;
      goto key;
    case '[':
      ++p;
      ws();
      if (p < end && *p == ']') {
        ++p;
        goto after;
      }
      objects <<= 1;
      ++level;
      goto value;
    case '"':
      if (!string(false)) return false;
      goto after;
    case 't':
    case 'f':
    case 'n':
      c.p = p;
      if (!Word(c)) return false;
      p = c.p;
      goto after;
    default:  // a number: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
      if (*p == '-') ++p;
      if (p < end && *p == '0') {
        ++p;
      } else if (!digits()) {
        return false;
      }
      if (p < end && *p == '.') {
        ++p;
        if (!digits()) return false;
      }
      if (p < end && (*p == 'e' || *p == 'E')) {
        ++p;
        if (p < end && (*p == '+' || *p == '-')) ++p;
        if (!digits()) return false;
      }
      goto after;
  }
key:
  if (!string(true)) return false;
  ws();
  if (p >= end || *p != ':') return false;
  ++p;
  goto value;
after:
  if (level == 0) {
    c.p = p;
    return true;
  }
  ws();
  if (p >= end) return false;
  if (*p == ',') {
    ++p;
    if (objects & 1) goto key;
    goto value;
  }
  if (*p != ((objects & 1) ? '}' : ']')) return false;
  ++p;
  objects >>= 1;
  --level;
  goto after;
}

// A value's exact bytes (msgspec.Raw's): from its first byte to its last.
bool Raw(Cursor& c, std::string_view* raw) {
  c.Ws();
  const char* start = c.p;
  if (!Skip(c, 1)) return false;
  *raw = std::string_view(start, c.p - start);
  return true;
}

bool Null(Cursor& c) {
  c.Ws();
  return Literal(c, "null");
}

// A string without escapes (or, when nullable, null).
bool Str(Cursor& c, Text* out, bool nullable) {
  c.Ws();
  if (c.p < c.end && *c.p == 'n') {
    out->null = true;
    return nullable && Literal(c, "null");
  }
  bool escaped;
  out->null = false;
  return String(c, &out->value, &escaped) && !escaped;
}

bool Hash(Cursor& c, std::string_view* out) {
  Text t;
  if (!Str(c, &t, false) || t.value.size() != 64) return false;
  *out = t.value;
  return true;
}

// `state` hashes to `recorded` (its 64 hex digits).
bool Verified(std::string_view state, std::string_view recorded) {
  char hex[64];
  Sha256Hex(state.data(), state.size(), hex);
  return std::memcmp(hex, recorded.data(), 64) == 0;
}

#if defined(__x86_64__)
// Sixteen base64 characters to twelve bytes with SSSE3 (Wojciech Mula's and Daniel Lemire's
// vectorized decoding, as in aklomp/base64): false when any of them is outside the alphabet.
// Writes 16 bytes at out (the last four are garbage the caller overwrites or leaves past the end).
__attribute__((target("ssse3"))) bool Base64Block(const unsigned char* in, unsigned char* out) {
  const __m128i lut_lo = _mm_setr_epi8(0x15, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x13, 0x1A, 0x1B,
                                       0x1B, 0x1B, 0x1A);
  const __m128i lut_hi = _mm_setr_epi8(0x10, 0x10, 0x01, 0x02, 0x04, 0x08, 0x04, 0x08, 0x10, 0x10, 0x10, 0x10, 0x10,
                                       0x10, 0x10, 0x10);
  const __m128i lut_roll = _mm_setr_epi8(0, 16, 19, 4, -65, -65, -71, -71, 0, 0, 0, 0, 0, 0, 0, 0);
  const __m128i mask_2f = _mm_set1_epi8(0x2f);
  __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in));
  const __m128i hi_nibbles = _mm_and_si128(_mm_srli_epi32(v, 4), mask_2f);
  const __m128i lo_nibbles = _mm_and_si128(v, mask_2f);
  const __m128i hi = _mm_shuffle_epi8(lut_hi, hi_nibbles);
  const __m128i lo = _mm_shuffle_epi8(lut_lo, lo_nibbles);
  if (_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_and_si128(lo, hi), _mm_setzero_si128())) != 0xFFFF) return false;
  const __m128i roll = _mm_shuffle_epi8(lut_roll, _mm_add_epi8(_mm_cmpeq_epi8(v, mask_2f), hi_nibbles));
  v = _mm_add_epi8(v, roll);  // each byte its 6-bit value
  const __m128i ab_bc = _mm_maddubs_epi16(v, _mm_set1_epi32(0x01400140));
  const __m128i abc = _mm_madd_epi16(ab_bc, _mm_set1_epi32(0x00011000));
  const __m128i packed = _mm_shuffle_epi8(abc, _mm_setr_epi8(2, 1, 0, 6, 5, 4, 10, 9, 8, 14, 13, 12, -1, -1, -1, -1));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out), packed);
  return true;
}

const bool kSsse3 = __builtin_cpu_supports("ssse3") && std::getenv("ENGINE_NATIVE_NO_SSSE3") == nullptr;
#endif

}  // namespace

// Strict base64 (the standard alphabet, padding only at the end, unused bits zero), as
// pybase64.b64decode(validate=True) takes it; appended to *out.
bool DecodeBase64(std::string_view text, std::string* out) {
  static const auto kTable = [] {
    std::array<int8_t, 256> t{};
    t.fill(-1);
    const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (int i = 0; i < 64; ++i) t[static_cast<unsigned char>(alphabet[i])] = static_cast<int8_t>(i);
    return t;
  }();
  if (text.size() % 4 != 0 || text.empty()) return false;
  const size_t pad = text[text.size() - 1] == '=' ? (text[text.size() - 2] == '=' ? 2 : 1) : 0;
  const size_t n = text.size() - pad;
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t before = out->size();
  out->resize(before + n * 6 / 8);
  auto* o = reinterpret_cast<unsigned char*>(out->data() + before);
  size_t i = 0;
#if defined(__x86_64__)
  if (kSsse3) {  // while 8 more characters follow: their 6 bytes leave room for the block's 16-byte store
    for (; i + 24 <= n; i += 16, o += 12) {
      if (!Base64Block(s + i, o)) return false;
    }
  }
#endif
  for (; i + 4 <= n; i += 4, o += 3) {  // whole groups: any byte outside the alphabet sets the sign bit
    const int a = kTable[s[i]], b = kTable[s[i + 1]], c = kTable[s[i + 2]], d = kTable[s[i + 3]];
    if ((a | b | c | d) < 0) return false;
    const uint32_t v = (uint32_t(a) << 18) | (uint32_t(b) << 12) | (uint32_t(c) << 6) | uint32_t(d);
    o[0] = static_cast<unsigned char>(v >> 16);
    o[1] = static_cast<unsigned char>(v >> 8);
    o[2] = static_cast<unsigned char>(v);
  }
  const size_t rest = n - i;  // 0, 2 (pad 2) or 3 (pad 1)
  if (rest == 0) return pad == 0;
  if ((rest == 2 && pad != 2) || (rest == 3 && pad != 1) || rest == 1) return false;
  uint32_t v = 0;
  for (size_t k = 0; k < rest; ++k) {
    const int x = kTable[s[i + k]];
    if (x < 0) return false;
    v = (v << 6) | uint32_t(x);
  }
  if (rest == 2) {  // 12 bits: one byte, the low 4 bits unused and zero
    o[0] = static_cast<unsigned char>(v >> 4);
    return (v & 0xF) == 0;
  }
  o[0] = static_cast<unsigned char>(v >> 10);  // 18 bits: two bytes, the low 2 bits zero
  o[1] = static_cast<unsigned char>(v >> 2);
  return (v & 0x3) == 0;
}

namespace {

bool FitsInt16(int64_t v) { return v >= INT16_MIN && v <= INT16_MAX; }

// A number as a double, as Python reads it and Arrow then stores it in float32: integers only
// where float32 holds them exactly, floats only within float32's range.
bool Float(std::string_view text, bool integer, double* out) {
  if (integer && text.size() > 8) return false;
  const auto r = std::from_chars(text.data(), text.data() + text.size(), *out);
  return r.ec == std::errc() && r.ptr == text.data() + text.size() && std::fabs(*out) <= 3.4028234663852886e38 &&
         (!integer || std::fabs(*out) <= 16777216.0);
}

// The policy object exactly as orjson.dumps(orjson.loads(it)) writes it: no whitespace, no
// escapes, no duplicate keys, numbers in orjson's own text. Numbers met on the way are checked.
bool Canonical(Cursor& c, int depth) {
  if (depth > kMaxDepth || c.p >= c.end) return false;
  switch (*c.p) {
    case '"': {
      std::string_view s;
      bool e;
      return String(c, &s, &e) && !e;
    }
    case '{': {
      ++c.p;
      if (c.p < c.end && *c.p == '}') return ++c.p, true;
      std::vector<std::string_view> keys;
      while (true) {
        std::string_view key;
        bool e;
        if (c.p >= c.end || *c.p != '"' || !String(c, &key, &e) || e) return false;
        for (std::string_view k : keys) {
          if (k == key) return false;
        }
        keys.push_back(key);
        if (c.p >= c.end || *c.p != ':') return false;
        ++c.p;
        if (!Canonical(c, depth + 1) || c.p >= c.end) return false;
        if (*c.p == ',') {
          ++c.p;
          continue;
        }
        return *c.p++ == '}';
      }
    }
    case '[':
      ++c.p;
      if (c.p < c.end && *c.p == ']') return ++c.p, true;
      while (true) {
        if (!Canonical(c, depth + 1) || c.p >= c.end) return false;
        if (*c.p == ',') {
          ++c.p;
          continue;
        }
        return *c.p++ == ']';
      }
    case 't':
    case 'f':
    case 'n':
      return Word(c);
    default: {
      std::string_view text;
      bool integer;
      if ((*c.p != '-' && (*c.p < '0' || *c.p > '9')) || !Number(c, &text, &integer)) return false;  // no spaces
      if (integer) return text.size() <= 18 && text != "-0";
      double v;
      const auto r = std::from_chars(text.data(), text.data() + text.size(), v);
      return r.ec == std::errc() && r.ptr == text.data() + text.size() && std::isfinite(v) && OrjsonFloat(v) == text;
    }
  }
}

struct Policy {
  bool has_probabilities = false;
  std::vector<double> probabilities;
  bool has_value = false;
  double value = 0;
  Text json;
};

// The recorded policy (its raw text, already validated JSON), read as battles._policy reads it.
bool ReadPolicy(std::string_view raw, size_t n_legal, Policy* out) {
  if (raw.empty() || raw[0] != '{') return true;  // null, or not an object: no columns
  Cursor whole{raw.data(), raw.data() + raw.size()};
  if (!Canonical(whole, 1) || whole.p != whole.end) return false;
  out->json = Text{raw, false};
  Cursor c{raw.data(), raw.data() + raw.size()};
  return Members(c, [&](std::string_view key, Cursor& cc) {
    if (key == "probabilities") {
      if (cc.p < cc.end && *cc.p == '[') {
        ++cc.p;
        bool numbers = true;
        std::vector<double> values;
        if (!cc.Eat(']')) {
          while (true) {
            std::string_view text;
            bool integer;
            double v;
            if (cc.p < cc.end && (*cc.p == '-' || (*cc.p >= '0' && *cc.p <= '9'))) {
              if (!Number(cc, &text, &integer) || !Float(text, integer, &v)) return false;
              values.push_back(v);
            } else {
              numbers = false;
              if (!Skip(cc, 2)) return false;
            }
            if (cc.Eat(',')) continue;
            if (!cc.Eat(']')) return false;
            break;
          }
        }
        out->has_probabilities = numbers && values.size() == n_legal;
        if (out->has_probabilities) out->probabilities = std::move(values);
        return true;
      }
      return Skip(cc, 2);
    }
    if (key == "value") {
      if (cc.p < cc.end && (*cc.p == '-' || (*cc.p >= '0' && *cc.p <= '9'))) {
        std::string_view text;
        bool integer;
        if (!Number(cc, &text, &integer) || !Float(text, integer, &out->value)) return false;
        out->has_value = true;
        return true;
      }
      return Skip(cc, 2);
    }
    return Skip(cc, 2);
  });
}

enum Field : uint32_t {
  kSchema = 1u << 0, kBattle = 1u << 1, kIndex = 1u << 2, kTurn = 1u << 3, kPlayer = 1u << 4, kActor = 1u << 5,
  kHash = 1u << 6, kObservation = 1u << 7, kLegal = 1u << 8, kAction = 1u << 9, kState = 1u << 10,
  kRationale = 1u << 11, kPolicy = 1u << 12,
};
constexpr uint32_t kRequired = (1u << 11) - 1;

// Marks `bit` seen; false if it was already (a duplicate key).
bool First(uint32_t* seen, uint32_t bit) {
  if (*seen & bit) return false;
  *seen |= bit;
  return true;
}

bool Actor(Cursor& c, DecisionColumns* out) {
  Text type, kind, spec, weights, codename;
  uint32_t seen = 0;
  const bool ok = Members(c, [&](std::string_view key, Cursor& cc) {
    if (key == "type") return First(&seen, 1) && Str(cc, &type, false);
    if (key == "kind") return First(&seen, 2) && Str(cc, &kind, false);
    if (key == "spec") return First(&seen, 4) && Str(cc, &spec, true);
    if (key == "weights_hash") return First(&seen, 8) && Str(cc, &weights, true);
    if (key == "codename") return First(&seen, 16) && Str(cc, &codename, true);
    return Skip(cc, 3);
  });
  if (!ok || (seen & 3) != 3) return false;
  out->actor_type.push_back(type.value);
  out->actor_kind.push_back(kind.value);
  out->actor_spec.push_back(spec);
  out->actor_weights_hash.push_back(weights);
  out->actor_codename.push_back(codename);
  return true;
}

bool Observation(Cursor& c, const DecisionExpect& expect, DecisionColumns* out) {
  int64_t version = -1;
  Text dtype, encoding, data;
  uint32_t seen = 0;
  const bool ok = Members(c, [&](std::string_view key, Cursor& cc) {
    if (key == "obs_version") return First(&seen, 1) && Int(cc, &version);
    if (key == "dtype") return First(&seen, 2) && Str(cc, &dtype, false);
    if (key == "encoding") return First(&seen, 4) && Str(cc, &encoding, false);
    if (key == "data") {  // its quote found directly: the base64 below refuses anything else inside it
      cc.Ws();
      if (!First(&seen, 8) || cc.p >= cc.end || *cc.p != '"') return false;
      const char* close = static_cast<const char*>(std::memchr(cc.p + 1, '"', cc.end - cc.p - 1));
      if (close == nullptr) return false;
      data = Text{std::string_view(cc.p + 1, close - cc.p - 1), false};
      cc.p = close + 1;
      return true;
    }
    return Skip(cc, 3);
  });
  if (!ok || seen != 15 || version != expect.obs_version || dtype.value != "float32" || encoding.value != "base64") {
    return false;
  }
  const size_t before = out->observations.size();
  return DecodeBase64(data.value, &out->observations) && out->observations.size() - before == expect.obs_bytes;
}

bool Legal(Cursor& c, DecisionColumns* out) {
  if (!c.Eat('[')) return false;
  if (!c.Eat(']')) {
    while (true) {
      int64_t id = -1;
      uint32_t seen = 0;
      const bool ok = Members(c, [&](std::string_view key, Cursor& cc) {
        if (key == "action_id") return First(&seen, 1) && Int(cc, &id);
        return Skip(cc, 4);
      });
      if (!ok || seen != 1 || !FitsInt16(id)) return false;
      out->legal_ids.push_back(static_cast<int16_t>(id));
      if (c.Eat(',')) continue;
      if (!c.Eat(']')) return false;
      break;
    }
  }
  out->legal_offsets.push_back(static_cast<int32_t>(out->legal_ids.size()));
  return true;
}

bool Decision(Cursor& c, const DecisionExpect& expect, DecisionColumns* out) {
  const size_t i = out->count;
  int64_t schema = -1, index = -1, turn = 0, player = 0, action = -1;
  std::string_view battle, hash, state, policy;
  Text rationale;
  uint32_t seen = 0;
  const bool ok = Members(c, [&](std::string_view key, Cursor& cc) {
    if (key == "schema_version") return First(&seen, kSchema) && Int(cc, &schema);
    if (key == "battle_id") {
      Text t;
      if (!First(&seen, kBattle) || !Str(cc, &t, false)) return false;
      battle = t.value;
      return true;
    }
    if (key == "decision_index") return First(&seen, kIndex) && Int(cc, &index);
    if (key == "turn") return First(&seen, kTurn) && Int(cc, &turn);
    if (key == "player") return First(&seen, kPlayer) && Int(cc, &player);
    if (key == "actor") return First(&seen, kActor) && Actor(cc, out);
    if (key == "state_hash_before") return First(&seen, kHash) && Hash(cc, &hash);
    if (key == "observation") return First(&seen, kObservation) && Observation(cc, expect, out);
    if (key == "legal_actions") return First(&seen, kLegal) && Legal(cc, out);
    if (key == "action_id") return First(&seen, kAction) && Int(cc, &action);
    if (key == "policy") return First(&seen, kPolicy) && Raw(cc, &policy);
    if (key == "rationale") return First(&seen, kRationale) && Str(cc, &rationale, true);
    if (key == "state_before") return First(&seen, kState) && Raw(cc, &state);
    return Skip(cc, 2);
  });
  if (!ok || (seen & kRequired) != kRequired || schema != expect.schema_version || index != static_cast<int64_t>(i) ||
      battle != expect.battle_id || !FitsInt16(turn) || (player != 1 && player != 2) || !FitsInt16(action) ||
      !Verified(state, hash)) {
    return false;
  }
  const int32_t begin = out->legal_offsets[i], end = out->legal_offsets[i + 1];
  int position = -1;
  for (int32_t k = begin; k < end; ++k) {
    if (out->legal_ids[k] == action) {
      position = k - begin;
      break;
    }
  }
  if (position < 0) return false;
  Policy p;
  if (!policy.empty() && !ReadPolicy(policy, static_cast<size_t>(end - begin), &p)) return false;
  if (i == 0) out->first_state = state;
  out->turn.push_back(static_cast<int16_t>(turn));
  out->player.push_back(static_cast<int8_t>(player));
  out->state_hash.push_back(hash);
  out->action_id.push_back(static_cast<int16_t>(action));
  out->action_index.push_back(static_cast<int16_t>(position));
  out->rationale.push_back(rationale);
  out->policy_json.push_back(p.json);
  out->has_probabilities.push_back(p.has_probabilities);
  out->probabilities.insert(out->probabilities.end(), p.probabilities.begin(), p.probabilities.end());
  out->probability_offsets.push_back(static_cast<int32_t>(out->probabilities.size()));
  out->has_value.push_back(p.has_value);
  out->value.push_back(p.value);
  out->count = i + 1;
  return true;
}

// Calls line(cursor) for each non-empty line; a line of whitespace only is refused.
template <typename F>
bool Lines(std::string_view data, F&& line) {
  const char* p = data.data();
  const char* end = p + data.size();
  while (p < end) {
    const char* nl = static_cast<const char*>(std::memchr(p, '\n', end - p));
    const char* stop = nl ? nl : end;
    if (stop > p) {
      Cursor c{p, stop};
      if (!line(c)) return false;
      c.Ws();
      if (c.p != stop) return false;
    }
    p = stop + 1;
  }
  return true;
}

bool Turn(Cursor& c, int64_t schema_version, TurnColumns* out) {
  int64_t schema = -1, turn = 0, active = 0;
  int32_t events = 0;
  std::string_view events_raw, start_hash, end_hash, start, end;
  uint32_t seen = 0;
  const bool ok = Members(c, [&](std::string_view key, Cursor& cc) {
    if (key == "schema_version") return First(&seen, 1) && Int(cc, &schema);
    if (key == "turn") return First(&seen, 2) && Int(cc, &turn);
    if (key == "active_player") return First(&seen, 4) && Int(cc, &active);
    if (key == "events") {
      if (!First(&seen, 8)) return false;
      cc.Ws();
      const char* from = cc.p;
      if (!cc.Eat('[')) return false;
      if (!cc.Eat(']')) {
        while (true) {
          if (!Skip(cc, 3)) return false;
          ++events;
          if (cc.Eat(',')) continue;
          if (!cc.Eat(']')) return false;
          break;
        }
      }
      events_raw = std::string_view(from, cc.p - from);
      return true;
    }
    if (key == "state_start_hash") return First(&seen, 16) && Hash(cc, &start_hash);
    if (key == "state_end_hash") return First(&seen, 32) && Hash(cc, &end_hash);
    if (key == "state_start") return First(&seen, 64) && Raw(cc, &start);
    if (key == "state_end") return First(&seen, 128) && Raw(cc, &end);
    return Skip(cc, 2);
  });
  // The events' text is stored as written where the reference keeps it so (no whitespace, no \u).
  for (char ch : events_raw) {
    if (ch == ' ' || ch == '\t' || ch == '\r' || ch == '\n') return false;
  }
  if (!ok || seen != 255 || schema != schema_version || !FitsInt16(turn) || active < INT8_MIN || active > INT8_MAX ||
      events_raw.find("\\u") != std::string_view::npos || !Verified(start, start_hash) || !Verified(end, end_hash)) {
    return false;
  }
  out->turn.push_back(static_cast<int16_t>(turn));
  out->active_player.push_back(static_cast<int8_t>(active));
  out->events.push_back(events);
  out->start_hash.push_back(start_hash);
  out->end_hash.push_back(end_hash);
  out->events_json.push_back(events_raw);
  out->state_start.push_back(start);
  out->state_end.push_back(end);
  return true;
}

}  // namespace

std::string OrjsonFloat(double value) {
  char buf[64];
  const double a = std::fabs(value);
  if (a == 0 || (a >= 1e-5 && a < 1e16)) {
    const auto r = std::to_chars(buf, buf + sizeof buf, value, std::chars_format::fixed);
    std::string s(buf, r.ptr);
    if (s.find('.') == std::string::npos) s += ".0";
    return s;
  }
  const auto r = std::to_chars(buf, buf + sizeof buf, value, std::chars_format::scientific);
  std::string s(buf, r.ptr);  // d[.ddd]e(+|-)XX: orjson drops the exponent's leading zeros
  const size_t e = s.find('e');
  size_t digits = e + 2;
  while (digits + 1 < s.size() && s[digits] == '0') s.erase(digits, 1);
  return s;
}

bool ReadDecisions(std::string_view data, const DecisionExpect& expect, DecisionColumns* out) {
  *out = DecisionColumns{};
  out->legal_offsets.push_back(0);
  out->probability_offsets.push_back(0);
  return Lines(data, [&](Cursor& c) { return Decision(c, expect, out); }) && out->count > 0;
}

bool ReadTurns(std::string_view data, int64_t schema_version, TurnColumns* out) {
  *out = TurnColumns{};
  return Lines(data, [&](Cursor& c) { return Turn(c, schema_version, out); });
}

}  // namespace traces
}  // namespace arena
