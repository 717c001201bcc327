// Reading tokenizer.json (and tokenizer_config.json): every field linattn uses is checked, and a field
// or value it does not implement is refused by name, so that a file is never tokenized differently
// from how its own library would without saying so.
#include <atomic>
#include <filesystem>
#include <initializer_list>

#include "core/error.h"
#include "data/byte_level.h"
#include "data/hf_tokenizer.h"
#include "data/json.h"
#include "data/mapped_file.h"
#include "data/sha256.h"
#include "data/unicode.h"

namespace linattn::data {

namespace fs = std::filesystem;

struct HfLoader {
  HfTokenizer& t;
  std::string file;                         // the path, in messages
  std::vector<std::string> token_strings;   // id -> its string in the file
  std::vector<bool> has_token;

  // ---- checks that name the field ----

  static std::string show(const Json& v) {
    std::string s = v.dump();
    return s.size() > 80 ? s.substr(0, 77) + "..." : s;
  }
  [[noreturn]] void refuse(const std::string& field, const Json& value, const std::string& why) const {
    LINATTN_REQUIRE(false, file, ": ", field, " is ", show(value), ": ", why, " (docs/tokenizers.md)");
    std::abort();
  }
  void only_keys(const Json& obj, const std::string& where, std::initializer_list<const char*> keys) const {
    if (!obj.is_object()) refuse(where, obj, "expected an object");
    for (const auto& [key, value] : obj.items()) {
      bool known = false;
      for (const char* k : keys) known = known || key == k;
      if (!known) refuse(where + "." + key, value, "a field linattn does not read, so it cannot honour what it changes");
    }
  }
  const Json* find(const Json& obj, const char* key) const {
    const auto it = obj.find(key);
    return it == obj.end() || it->is_null() ? nullptr : &*it;
  }
  bool get_bool(const Json& obj, const char* key, const std::string& where, bool fallback) const {
    const Json* v = find(obj, key);
    if (!v) return fallback;
    if (!v->is_boolean()) refuse(where + "." + key, *v, "expected true or false");
    return v->get<bool>();
  }
  std::string get_string(const Json& obj, const char* key, const std::string& where) const {
    const Json* v = find(obj, key);
    if (!v || !v->is_string()) refuse(where + "." + key, v ? *v : Json(), "expected a string");
    return v->get<std::string>();
  }
  int get_int(const Json& obj, const char* key, const std::string& where) const {
    const Json* v = find(obj, key);
    if (!v || !v->is_number_integer() || v->get<int64_t>() < 0 || v->get<int64_t>() > 1000000)
      refuse(where + "." + key, v ? *v : Json(), "expected a small whole number");
    return int(v->get<int64_t>());
  }
  std::string type_of(const Json& obj, const std::string& where) const {
    if (!obj.is_object()) refuse(where, obj, "expected an object with a \"type\"");
    return get_string(obj, "type", where);
  }
  // A {"String": ...} or {"Regex": ...} pattern: the string, and whether it is a regular expression.
  std::pair<std::string, bool> pattern(const Json& obj, const std::string& where) const {
    const Json* p = find(obj, "pattern");
    const std::string field = where + ".pattern";
    if (!p || !p->is_object() || p->size() != 1) refuse(field, p ? *p : Json(), "expected {\"String\": ...} or {\"Regex\": ...}");
    if (p->contains("String")) return {get_string(*p, "String", field), false};
    if (p->contains("Regex")) return {get_string(*p, "Regex", field), true};
    refuse(field, *p, "expected {\"String\": ...} or {\"Regex\": ...}");
  }
  std::shared_ptr<Regex> regex(const std::string& pattern, bool is_regex, const std::string& where) const {
    std::string escaped;  // a String pattern is matched literally
    if (!is_regex)
      for (const char c : pattern) {
        if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) escaped += '\\';
        escaped += c;
      }
    return std::make_shared<Regex>(is_regex ? pattern : escaped, file + ": " + where);
  }

  // ---- the parts ----

  void normalizer(const Json& n, const std::string& where) {
    if (n.is_null()) return;
    const std::string type = type_of(n, where);
    using N = HfTokenizer::Normalizer;
    if (type == "Sequence") {
      only_keys(n, where, {"type", "normalizers"});
      const Json* list = find(n, "normalizers");
      if (!list || !list->is_array()) refuse(where + ".normalizers", list ? *list : Json(), "expected a list");
      for (size_t k = 0; k < list->size(); ++k) normalizer((*list)[k], where + ".normalizers[" + std::to_string(k) + "]");
    } else if (type == "Prepend") {
      only_keys(n, where, {"type", "prepend"});
      t.normalizers_.push_back(N(N::prepend, get_string(n, "prepend", where)));
    } else if (type == "Replace") {
      only_keys(n, where, {"type", "pattern", "content"});
      const auto [p, is_regex] = pattern(n, where);
      N step{N::replace, "", get_string(n, "content", where)};
      if (is_regex) step.pattern = regex(p, true, where + ".pattern.Regex");
      else step.text = p;
      if (!is_regex && p.empty()) refuse(where + ".pattern.String", Json(p), "an empty pattern");
      t.normalizers_.push_back(step);
    } else if (type == "NFC") {
      only_keys(n, where, {"type"});
      t.normalizers_.push_back(N(N::nfc));
    } else {
      refuse(where + ".type", Json(type), "a normalizer linattn does not implement (it reads Prepend, Replace, NFC, Sequence)");
    }
  }

  void pre_tokenizer(const Json& p, const std::string& where) {
    if (p.is_null()) return;
    const std::string type = type_of(p, where);
    using P = HfTokenizer::PreTokenizer;
    if (!t.pre_tokenizers_.empty() && t.pre_tokenizers_.back().kind == P::byte_level)
      refuse(where + ".type", Json(type), "a pre-tokenizer after ByteLevel, which has already mapped bytes to characters");
    if (type == "Sequence") {
      only_keys(p, where, {"type", "pretokenizers"});
      const Json* list = find(p, "pretokenizers");
      if (!list || !list->is_array()) refuse(where + ".pretokenizers", list ? *list : Json(), "expected a list");
      for (size_t k = 0; k < list->size(); ++k) pre_tokenizer((*list)[k], where + ".pretokenizers[" + std::to_string(k) + "]");
    } else if (type == "ByteLevel") {
      only_keys(p, where, {"type", "add_prefix_space", "trim_offsets", "use_regex"});
      P step{P::byte_level};
      step.add_prefix_space = get_bool(p, "add_prefix_space", where, true);
      step.use_regex = get_bool(p, "use_regex", where, true);
      t.pre_tokenizers_.push_back(step);
    } else if (type == "Split") {
      only_keys(p, where, {"type", "pattern", "behavior", "invert"});
      const auto [pat, is_regex] = pattern(p, where);
      P step{P::split};
      step.pattern = regex(pat, is_regex, where + (is_regex ? ".pattern.Regex" : ".pattern.String"));
      const std::string behavior = get_string(p, "behavior", where);
      const std::pair<const char*, P::Behavior> names[] = {{"Removed", P::removed}, {"Isolated", P::isolated},
          {"MergedWithPrevious", P::merged_with_previous}, {"MergedWithNext", P::merged_with_next}, {"Contiguous", P::contiguous}};
      bool known = false;
      for (const auto& [name, b] : names)
        if (behavior == name) step.behavior = b, known = true;
      if (!known) refuse(where + ".behavior", Json(behavior), "not a split behavior");
      if (get_bool(p, "invert", where, false)) refuse(where + ".invert", Json(true), "inverted splits are not implemented");
      t.pre_tokenizers_.push_back(step);
    } else if (type == "Metaspace") {
      only_keys(p, where, {"type", "replacement", "str_rep", "add_prefix_space", "prepend_scheme", "split"});
      P step{P::metaspace};
      step.replacement = get_string(p, "replacement", where);
      if (const Json* rep = find(p, "str_rep"); rep && *rep != Json(step.replacement))
        refuse(where + ".str_rep", *rep, "a str_rep other than the replacement");
      step.prepend = get_bool(p, "add_prefix_space", where, true) ? P::always : P::never;
      if (const Json* scheme = find(p, "prepend_scheme")) {
        const std::string s = scheme->is_string() ? scheme->get<std::string>() : "";
        if (s == "always") step.prepend = P::always;
        else if (s == "first") step.prepend = P::first;
        else if (s == "never") step.prepend = P::never;
        else refuse(where + ".prepend_scheme", *scheme, "expected \"always\", \"first\" or \"never\"");
      }
      step.split_words = get_bool(p, "split", where, true);
      t.pre_tokenizers_.push_back(step);
    } else {
      refuse(where + ".type", Json(type),
             "a pre-tokenizer linattn does not implement (it reads ByteLevel, Split, Metaspace, Sequence)");
    }
  }

  void decoder(const Json& d, const std::string& where, bool& fused) {
    const std::string type = type_of(d, where);
    using D = HfTokenizer::DecodeStep;
    if (type == "Sequence") {
      only_keys(d, where, {"type", "decoders"});
      const Json* list = find(d, "decoders");
      if (!list || !list->is_array()) refuse(where + ".decoders", list ? *list : Json(), "expected a list");
      for (size_t k = 0; k < list->size(); ++k) decoder((*list)[k], where + ".decoders[" + std::to_string(k) + "]", fused);
    } else if (type == "ByteLevel") {
      only_keys(d, where, {"type", "add_prefix_space", "trim_offsets", "use_regex"});
      t.decode_steps_.push_back(D(D::byte_level));
    } else if (type == "ByteFallback") {
      only_keys(d, where, {"type"});
      t.decode_steps_.push_back(D(D::byte_fallback));
    } else if (type == "Fuse") {
      only_keys(d, where, {"type"});
      t.decode_steps_.push_back(D(D::fuse));
      fused = true;
    } else if (type == "Strip") {
      only_keys(d, where, {"type", "content", "start", "stop"});
      D step{D::strip};
      step.content = get_string(d, "content", where);
      uint32_t cp;
      if (decode_utf8(reinterpret_cast<const unsigned char*>(step.content.data()), step.content.size(), cp) !=
          int(step.content.size()) || step.content.empty())
        refuse(where + ".content", Json(step.content), "expected one character");
      step.start = get_int(d, "start", where);
      step.stop = get_int(d, "stop", where);
      t.decode_steps_.push_back(step);
    } else if (type == "Replace") {
      only_keys(d, where, {"type", "pattern", "content"});
      const auto [p, is_regex] = pattern(d, where);
      if (is_regex) refuse(where + ".pattern.Regex", Json(p), "decoders replace String patterns only");
      if (p.empty()) refuse(where + ".pattern.String", Json(p), "an empty pattern");
      uint32_t cp;
      if (fused && decode_utf8(reinterpret_cast<const unsigned char*>(p.data()), p.size(), cp) != int(p.size()))
        refuse(where + ".pattern.String", Json(p), "a pattern of several characters after Fuse (it could span tokens)");
      D step{D::replace, p, get_string(d, "content", where)};
      t.decode_steps_.push_back(step);
    } else if (type == "Metaspace") {
      only_keys(d, where, {"type", "replacement", "str_rep", "add_prefix_space", "prepend_scheme", "split"});
      D step{D::metaspace, "", get_string(d, "replacement", where)};
      step.prepend = get_bool(d, "add_prefix_space", where, true);
      if (const Json* scheme = find(d, "prepend_scheme")) step.prepend = *scheme != Json("never");
      t.decode_steps_.push_back(step);
    } else {
      refuse(where + ".type", Json(type), "a decoder linattn does not implement (it reads ByteLevel, ByteFallback, Fuse, "
                                          "Strip, Replace, Metaspace, Sequence)");
    }
  }

  // The special tokens a TemplateProcessing puts before and after the text ($A).
  void post_processor(const Json& p, const std::string& where) {
    if (p.is_null()) return;
    const std::string type = type_of(p, where);
    if (type == "Sequence") {
      only_keys(p, where, {"type", "processors"});
      const Json* list = find(p, "processors");
      if (!list || !list->is_array()) refuse(where + ".processors", list ? *list : Json(), "expected a list");
      for (size_t k = 0; k < list->size(); ++k) post_processor((*list)[k], where + ".processors[" + std::to_string(k) + "]");
    } else if (type == "ByteLevel") {  // offsets only: the ids are left as they are
      only_keys(p, where, {"type", "add_prefix_space", "trim_offsets", "use_regex"});
    } else if (type == "TemplateProcessing") {
      only_keys(p, where, {"type", "single", "pair", "special_tokens"});
      const Json* single = find(p, "single");
      if (!single || !single->is_array()) refuse(where + ".single", single ? *single : Json(), "expected a list");
      const Json* specials = find(p, "special_tokens");
      bool after = false, seen_a = false;
      for (size_t k = 0; k < single->size(); ++k) {
        const Json& item = (*single)[k];
        const std::string at = where + ".single[" + std::to_string(k) + "]";
        if (item.contains("Sequence")) {
          if (seen_a || !item["Sequence"].is_object() || item["Sequence"].value("id", "") != "A")
            refuse(at, item, "expected the one sequence $A");
          seen_a = after = true;
          continue;
        }
        if (!item.contains("SpecialToken")) refuse(at, item, "expected a SpecialToken or the Sequence A");
        const std::string name = get_string(item["SpecialToken"], "id", at + ".SpecialToken");
        const Json* spec = specials ? find(*specials, name.c_str()) : nullptr;
        const Json* ids = spec ? find(*spec, "ids") : nullptr;
        if (!ids || !ids->is_array() || ids->size() != 1 || !(*ids)[0].is_number_unsigned())
          refuse(where + ".special_tokens." + name, spec ? *spec : Json(), "expected one id for the template's token");
        const auto id = (*ids)[0].get<uint32_t>();
        std::optional<uint32_t>& slot = after ? t.eos_ : t.bos_;
        if (slot) refuse(at, item, std::string("more than one special token ") + (after ? "after" : "before") + " the text");
        slot = id;
      }
      if (!seen_a) refuse(where + ".single", *single, "no Sequence A: the template leaves out the text");
    } else {
      refuse(where + ".type", Json(type),
             "a post-processor linattn does not implement (it reads TemplateProcessing, ByteLevel, Sequence)");
    }
  }

  void set_token(uint32_t id, const std::string& text, const std::string& where) {
    if (id >= 16777216) refuse(where, Json(id), "an id above 2^24 (a vocabulary that large is not supported)");
    if (id >= token_strings.size()) token_strings.resize(id + 1), has_token.resize(id + 1);
    token_strings[id] = text;
    has_token[id] = true;
  }

  // The model's string of a token in the domain it merges in (see HfTokenizer::byte_level_).
  bool to_domain(const std::string& s, std::string& out) const {
    if (t.byte_level_) return byte_level_to_bytes(s, out);
    out = s;
    return true;
  }

  void model(const Json& m) {
    const std::string where = "model";
    const std::string type = type_of(m, where);
    if (type != "BPE") refuse("model.type", Json(type), "linattn reads the BPE model only");
    only_keys(m, where, {"type", "dropout", "unk_token", "continuing_subword_prefix", "end_of_word_suffix", "fuse_unk",
                         "byte_fallback", "ignore_merges", "vocab", "merges"});
    if (const Json* d = find(m, "dropout"); d && !(d->is_number() && d->get<double>() == 0))
      refuse("model.dropout", *d, "BPE dropout is random; linattn encodes deterministically");
    for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
      if (const Json* v = find(m, key); v && *v != Json(""))
        refuse(std::string("model.") + key, *v, "subword prefixes and suffixes are not implemented");
    t.fuse_unk_ = get_bool(m, "fuse_unk", where, false);
    t.byte_fallback_ = get_bool(m, "byte_fallback", where, false);
    t.ignore_merges_ = get_bool(m, "ignore_merges", where, false);
    const Json* vocab = find(m, "vocab");
    if (!vocab || !vocab->is_object() || vocab->empty()) refuse("model.vocab", vocab ? *vocab : Json(), "expected an object of token: id");
    std::string key;
    for (auto it = vocab->begin(); it != vocab->end(); ++it) {
      if (!it->is_number_unsigned()) refuse("model.vocab[\"" + it.key() + "\"]", *it, "expected an id");
      const auto id = it->get<uint32_t>();
      set_token(id, it.key(), "model.vocab[\"" + it.key() + "\"]");
      if (!to_domain(it.key(), key)) continue;  // a byte-level vocabulary's token no bytes spell
      if (!t.vocab_.insert(key, id)) refuse("model.vocab[\"" + it.key() + "\"]", *it, "a token listed twice");
      uint32_t cp;
      if (!t.byte_level_ && decode_utf8(reinterpret_cast<const unsigned char*>(key.data()), key.size(), cp) == int(key.size()))
        t.char_id_[cp] = id;
    }
    for (uint32_t c = 0; c < 128; ++c) {
      const auto it = t.char_id_.find(c);
      t.ascii_id_[c] = it == t.char_id_.end() ? UINT32_MAX : it->second;
    }
    if (t.byte_level_)
      for (int b = 0; b < 256; ++b) {
        const uint32_t* id = t.vocab_.find(std::string(1, char(b)));
        if (!id) refuse("model.vocab", Json("..."), "no token for byte " + std::to_string(b) + " of the byte-level alphabet");
        t.byte_id_[b] = *id;
      }
    if (t.byte_fallback_) {
      static const char hex[] = "0123456789ABCDEF";
      for (int b = 0; b < 256; ++b) {
        const std::string name = std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">";
        const uint32_t* id = t.vocab_.find(name);
        t.fallback_id_[b] = id ? *id : UINT32_MAX;
      }
    }
    if (const Json* unk = find(m, "unk_token")) {
      if (!unk->is_string()) refuse("model.unk_token", *unk, "expected a token");
      const uint32_t* id = t.vocab_.find(unk->get<std::string>());
      if (!id) refuse("model.unk_token", *unk, "not in model.vocab");
      t.unk_ = *id;
    }
    merges(m);
  }

  void merges(const Json& m) {
    const Json* list = find(m, "merges");
    if (!list || !list->is_array()) refuse("model.merges", list ? *list : Json(), "expected a list");
    const std::string meta = "\xE2\x96\x81";  // ▁
    bool cut_ok = !t.ignore_merges_;
    std::string a, b, left, right;
    for (size_t k = 0; k < list->size(); ++k) {
      const Json& item = (*list)[k];
      const std::string where = "model.merges[" + std::to_string(k) + "]";
      if (item.is_string()) {  // "left right"
        const std::string& s = item.get_ref<const std::string&>();
        const size_t space = s.find(' ');
        if (space == std::string::npos || space == 0 || space + 1 == s.size() || s.find(' ', space + 1) != std::string::npos)
          refuse(where, item, "expected two tokens separated by one space");
        a = s.substr(0, space), b = s.substr(space + 1);
      } else if (item.is_array() && item.size() == 2 && item[0].is_string() && item[1].is_string()) {  // ["left", "right"]
        a = item[0].get<std::string>(), b = item[1].get<std::string>();
      } else {
        refuse(where, item, "expected \"left right\" or [\"left\", \"right\"]");
      }
      const bool ok = to_domain(a, left) && to_domain(b, right);
      const uint32_t* l = ok ? t.vocab_.find(left) : nullptr;
      const uint32_t* r = ok ? t.vocab_.find(right) : nullptr;
      const uint32_t* lr = ok ? t.vocab_.find(left + right) : nullptr;
      if (!l || !r || !lr) refuse(where, item, "the merge or its result is not in model.vocab");
      t.merges_.add(*l, *r, *lr);
      // A merge of a token that ends in another character with one that starts with ▁ joins across the
      // cuts cut_at_metaspace_ would make.
      if (b.compare(0, meta.size(), meta) == 0 && !(a.size() >= meta.size() && a.compare(a.size() - meta.size(), meta.size(), meta) == 0))
        cut_ok = false;
    }
    t.cut_at_metaspace_ = cut_ok;
  }

  void added_tokens(const Json& list) {
    if (list.is_null()) return;
    if (!list.is_array()) refuse("added_tokens", list, "expected a list");
    for (size_t k = 0; k < list.size(); ++k) {
      const Json& a = list[k];
      const std::string where = "added_tokens[" + std::to_string(k) + "]";
      only_keys(a, where, {"id", "content", "single_word", "lstrip", "rstrip", "normalized", "special"});
      HfTokenizer::AddedToken token;
      token.content = get_string(a, "content", where);
      if (token.content.empty()) refuse(where + ".content", Json(""), "an empty token");
      const Json* id = find(a, "id");
      if (!id || !id->is_number_unsigned()) refuse(where + ".id", id ? *id : Json(), "expected an id");
      token.id = id->get<uint32_t>();
      if (get_bool(a, "single_word", where, false)) refuse(where + ".single_word", Json(true), "not implemented");
      token.lstrip = get_bool(a, "lstrip", where, false);
      token.rstrip = get_bool(a, "rstrip", where, false);
      token.special = get_bool(a, "special", where, false);
      set_token(token.id, token.content, where + ".id");
      t.added_.push_back(token);
    }
    for (uint32_t k = 0; k < t.added_.size(); ++k)
      t.added_by_first_byte_[static_cast<unsigned char>(t.added_[k].content[0])].push_back(k);
    for (auto& list_of_byte : t.added_by_first_byte_)
      std::stable_sort(list_of_byte.begin(), list_of_byte.end(),
                       [&](uint32_t x, uint32_t y) { return t.added_[x].content.size() > t.added_[y].content.size(); });
  }

  // The bytes of one token in the middle of a text: the decoder's steps on its own (Strip only where
  // it applies to every token).
  std::string decoded(const std::string& token) const {
    using D = HfTokenizer::DecodeStep;
    std::string s = token, bytes;
    bool fused = false;
    for (const D& step : t.decode_steps_) {
      switch (step.kind) {
        case D::replace:
        case D::metaspace: {
          const std::string from = step.kind == D::replace ? step.pattern : step.content;
          const std::string to = step.kind == D::replace ? step.content : " ";
          replace_all(s, from, to);
          break;
        }
        case D::byte_fallback: {
          auto hexval = [](char c) { return c >= '0' && c <= '9' ? c - '0' : (c | 0x20) >= 'a' && (c | 0x20) <= 'f' ? (c | 0x20) - 'a' + 10 : -1; };
          if (s.size() == 6 && s.compare(0, 3, "<0x") == 0 && s[5] == '>' && hexval(s[3]) >= 0 && hexval(s[4]) >= 0)
            s = std::string(1, char(hexval(s[3]) * 16 + hexval(s[4])));
          break;
        }
        case D::byte_level:
          if (byte_level_to_bytes(s, bytes)) s = bytes;
          break;
        case D::fuse: fused = true; break;
        case D::strip:
          if (!fused) {
            for (int k = 0; k < step.start && s.compare(0, step.content.size(), step.content) == 0; ++k) s.erase(0, step.content.size());
            for (int k = 0; k < step.stop && s.size() >= step.content.size() &&
                            s.compare(s.size() - step.content.size(), step.content.size(), step.content) == 0; ++k)
              s.resize(s.size() - step.content.size());
          }
          break;
      }
    }
    return s;
  }

  // tokenizer_config.json's token, which is a string or {"content": ...}.
  std::optional<uint32_t> config_token(const Json& config, const char* key, const std::string& config_file) const {
    const Json* v = find(config, key);
    if (!v) return std::nullopt;
    const Json* content = v->is_object() ? find(*v, "content") : v;
    if (!content || !content->is_string())
      LINATTN_REQUIRE(false, config_file, ": ", key, " is ", show(*v), ": expected a token");
    const std::string name = content->get<std::string>();
    for (const auto& a : t.added_)
      if (a.content == name) return a.id;
    const uint32_t* id = t.vocab_.find(name);
    LINATTN_REQUIRE(id, config_file, ": ", key, " \"", name, "\" is not a token of ", file);
    return *id;
  }
};

std::unique_ptr<HfTokenizer> HfTokenizer::load(const std::string& path) {
  fs::path file = path;
  if (fs::is_directory(file)) file /= "tokenizer.json";
  LINATTN_REQUIRE(fs::is_regular_file(file), file.string(), ": no such file; --tokenizer takes bytes, gpt2, or the "
                  "path of a Hugging Face tokenizer.json (or of the folder that holds it)");
  std::unique_ptr<HfTokenizer> t(new HfTokenizer());
  static std::atomic<uint64_t> instances{0};
  t->instance_ = ++instances;
  t->path_ = file.string();
  const MappedFile mapped(t->path_);
  t->sha256_ = sha256_hex(mapped.text());
  const Json j = parse_json(mapped.text(), t->path_);
  HfLoader l{*t, t->path_, {}, {}};
  l.only_keys(j, "tokenizer.json", {"version", "truncation", "padding", "added_tokens", "normalizer", "pre_tokenizer",
                                    "model", "post_processor", "decoder"});
  if (!j.contains("model")) l.refuse("model", Json(), "the file has no model");
  l.normalizer(j.value("normalizer", Json()), "normalizer");
  l.pre_tokenizer(j.value("pre_tokenizer", Json()), "pre_tokenizer");
  for (const PreTokenizer& p : t->pre_tokenizers_) t->byte_level_ = t->byte_level_ || p.kind == PreTokenizer::byte_level;
  l.model(j["model"]);
  l.added_tokens(j.value("added_tokens", Json()));
  l.post_processor(j.value("post_processor", Json()), "post_processor");
  const Json decoder = j.value("decoder", Json());
  if (decoder.is_null()) l.refuse("decoder", decoder, "linattn needs the decoder to turn tokens back into text");
  bool fused = false;
  l.decoder(decoder, "decoder", fused);
  bool byte_level_decoder = false;
  for (const DecodeStep& d : t->decode_steps_) byte_level_decoder = byte_level_decoder || d.kind == DecodeStep::byte_level;
  if (byte_level_decoder != t->byte_level_)
    l.refuse("decoder", decoder, t->byte_level_ ? "the pre-tokenizer is ByteLevel but the decoder has no ByteLevel step"
                                                : "a ByteLevel decoder without a ByteLevel pre-tokenizer");
  // A section is one word without a pre-tokenizer; the cuts also need no unknown token to fuse across them.
  bool all_fallback = t->byte_fallback_;
  for (const uint32_t id : t->fallback_id_) all_fallback = all_fallback && id != UINT32_MAX;
  t->cut_at_metaspace_ = t->cut_at_metaspace_ && t->pre_tokenizers_.empty() && (all_fallback || !t->fuse_unk_);
  if (t->cut_at_metaspace_) {  // nor a token that holds another character followed by ▁
    const std::string meta = "\xE2\x96\x81";
    t->vocab_.for_each([&](std::string_view token, uint32_t) {
      for (size_t at = token.find(meta, 1); at != std::string_view::npos && t->cut_at_metaspace_; at = token.find(meta, at + 1))
        if (at < meta.size() || token.substr(at - meta.size(), meta.size()) != meta) t->cut_at_metaspace_ = false;
    });
  }

  // Every id's bytes.
  t->token_bytes_.resize(l.token_strings.size());
  t->is_added_.assign(l.token_strings.size(), false);
  for (size_t id = 0; id < l.token_strings.size(); ++id)
    if (l.has_token[id]) t->token_bytes_[id] = l.decoded(l.token_strings[id]);
  for (const AddedToken& a : t->added_) {
    t->token_bytes_[a.id] = a.content;
    t->is_added_[a.id] = true;
  }

  // The document separator and the tokens that end a generated text.
  const fs::path config_path = file.parent_path() / "tokenizer_config.json";
  std::optional<uint32_t> config_bos, config_eos, endoftext;
  if (fs::is_regular_file(config_path)) {
    const MappedFile config_file(config_path.string());
    const Json config = parse_json(config_file.text(), config_path.string());
    LINATTN_REQUIRE(config.is_object(), config_path.string(), ": expected a JSON object");
    if (l.get_bool(config, "add_bos_token", "tokenizer_config.json", true))
      config_bos = l.config_token(config, "bos_token", config_path.string());
    config_eos = l.config_token(config, "eos_token", config_path.string());
  }
  for (const AddedToken& a : t->added_)
    if (a.content == "<|endoftext|>") endoftext = a.id;
  const std::optional<uint32_t> separator = t->bos_ ? t->bos_ : config_bos ? config_bos : endoftext ? endoftext
                                            : t->eos_ ? t->eos_ : config_eos;
  LINATTN_REQUIRE(separator.has_value(), t->path_, ": names no token to separate documents with: no BOS or EOS in "
                  "its post_processor, no bos_token or eos_token in a tokenizer_config.json beside it, no "
                  "\"<|endoftext|>\" added token; add a tokenizer_config.json with \"bos_token\" or \"eos_token\"");
  t->eot_ = *separator;
  if (!t->bos_) t->bos_ = config_bos;
  if (!t->eos_) t->eos_ = config_eos;
  for (const std::optional<uint32_t>& s : {t->eos_, config_eos, endoftext})
    if (s) t->stop_ids_.push_back(*s);

  std::string steps;
  auto add = [&](const char* what, bool any) { steps += std::string(steps.empty() ? "" : ", ") + what; return any; };
  if (!t->normalizers_.empty()) add("normalizer", true);
  if (!t->pre_tokenizers_.empty()) add(t->byte_level_ ? "byte-level pre-tokenizer" : "pre-tokenizer", true);
  t->summary_ = t->path_ + " (sha256 " + t->sha256_.substr(0, 12) + "...): BPE, vocabulary " +
                std::to_string(t->vocab_size()) + ", " + std::to_string(t->merges_.size()) + " merges" +
                (t->byte_fallback_ ? ", byte fallback" : "") + (steps.empty() ? "" : ", " + steps) +
                ", documents separated by \"" + t->token_bytes_[t->eot_] + "\" (" + std::to_string(t->eot_) + ")";
  return t;
}

}  // namespace linattn::data
