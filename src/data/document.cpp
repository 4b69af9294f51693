#include "data/document.h"

#include <simdjson.h>
#include <xxhash.h>

#include "core/error.h"

namespace zaya {

TextKey parse_text_key(const std::string& dotted) {
  TextKey key{dotted, {}};
  ZAYA_CHECK(!dotted.empty(), "--text-key: empty key");
  size_t start = 0;
  while (true) {
    size_t dot = dotted.find('.', start);
    std::string part = dotted.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    ZAYA_CHECK(!part.empty(), "--text-key \"", dotted, "\": empty component in the dotted path");
    key.path.push_back(std::move(part));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return key;
}

namespace {

const char* type_name(simdjson::dom::element_type t) {
  using T = simdjson::dom::element_type;
  switch (t) {
    case T::ARRAY: return "an array";
    case T::OBJECT: return "an object";
    case T::INT64:
    case T::UINT64:
    case T::DOUBLE: return "a number";
    case T::STRING: return "a string";
    case T::BOOL: return "a boolean";
    case T::NULL_VALUE: return "null";
  }
  return "a value";
}

}  // namespace

struct JsonTextExtractor::Impl {
  simdjson::dom::parser parser;
};

JsonTextExtractor::JsonTextExtractor() : impl_(std::make_unique<Impl>()) {}
JsonTextExtractor::~JsonTextExtractor() = default;

std::string JsonTextExtractor::extract(std::string_view line, const TextKey& key, std::string& text) {
  text.clear();
  simdjson::dom::element doc;
  auto err = impl_->parser.parse(line.data(), line.size(), true).get(doc);
  if (err) return cat("malformed JSON (", simdjson::error_message(err), ")");
  simdjson::dom::element cur = doc;
  std::string reached;
  for (size_t i = 0; i < key.path.size(); ++i) {
    if (cur.type() != simdjson::dom::element_type::OBJECT)
      return i == 0 ? cat("the line is ", type_name(cur.type()), ", not a JSON object")
                    : cat("\"", reached, "\" is ", type_name(cur.type()), ", not an object");
    simdjson::dom::element next;
    if (cur.get_object().at_key(key.path[i]).get(next)) {
      if (key.path.size() == 1) return cat("no key \"", key.dotted, "\"");
      return cat("no key \"", key.dotted, "\" (missing \"", key.path[i], "\"", i ? " in \"" + reached + "\"" : "",
                 ")");
    }
    if (i) reached += '.';
    reached += key.path[i];
    cur = next;
  }
  std::string_view value;
  if (cur.get_string().get(value)) return cat("\"", key.dotted, "\" is ", type_name(cur.type()), ", not a string");
  text.assign(value.data(), value.size());
  return {};
}

bool is_valid_utf8(std::string_view s) { return simdjson::validate_utf8(s.data(), s.size()); }

size_t repair_utf8(std::string& s) {
  if (is_valid_utf8(s)) return 0;
  static const char kReplacement[] = "\xEF\xBF\xBD";
  std::string out;
  out.reserve(s.size() + 16);
  size_t replaced = 0, i = 0, n = s.size();
  auto byte = [&](size_t k) { return uint8_t(s[k]); };
  while (i < n) {
    uint8_t b = byte(i);
    if (b < 0x80) {
      out += char(b);
      ++i;
      continue;
    }
    // Length of the sequence this lead byte starts, and the range its second byte must be in.
    int need = 0;
    uint8_t lo = 0x80, hi = 0xBF;
    if (b >= 0xC2 && b <= 0xDF) {
      need = 1;
    } else if (b >= 0xE0 && b <= 0xEF) {
      need = 2;
      if (b == 0xE0) lo = 0xA0;
      if (b == 0xED) hi = 0x9F;  // no surrogates
    } else if (b >= 0xF0 && b <= 0xF4) {
      need = 3;
      if (b == 0xF0) lo = 0x90;
      if (b == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
    }
    size_t j = i + 1;
    int got = 0;
    while (got < need && j < n) {
      uint8_t c = byte(j);
      bool ok = got == 0 ? (c >= lo && c <= hi) : (c >= 0x80 && c <= 0xBF);
      if (!ok) break;
      ++got;
      ++j;
    }
    if (need > 0 && got == need) {
      out.append(s, i, size_t(need) + 1);
    } else {
      out += kReplacement;  // the maximal subpart [i, j) becomes one U+FFFD
      ++replaced;
    }
    i = j;
  }
  s.swap(out);
  return replaced;
}

DocHash hash_document(std::string_view text) {
  XXH128_hash_t h = XXH3_128bits(text.data(), text.size());
  return {h.low64, h.high64};
}

}  // namespace zaya
