#include "data/regex.h"

#include <limits>

#include "core/error.h"

namespace linattn::data {

namespace {

constexpr uint32_t unbounded = std::numeric_limits<uint32_t>::max();

using Item = Regex::Item;
using Class = Regex::Class;
using Inst = Regex::Inst;

Inst make(Inst::Op op) {
  Inst i;
  i.op = op;
  return i;
}

// The parsed pattern.
struct Node {
  enum Kind { alt, concat, one, repeat, look, begin, end } kind;
  explicit Node(Kind k) : kind(k) {}
  std::vector<Node> kids;
  uint32_t cls = 0, min = 0, max = 0;
  bool greedy = true, negate = false;
};

bool nullable(const Node& n) {
  switch (n.kind) {
    case Node::one: return false;
    case Node::repeat: return n.min == 0 || nullable(n.kids[0]);
    case Node::concat:
      for (const Node& k : n.kids)
        if (!nullable(k)) return false;
      return true;
    case Node::alt:
      for (const Node& k : n.kids)
        if (nullable(k)) return true;
      return false;
    default: return true;  // lookaheads and anchors take no text
  }
}

Item range_item(uint32_t first, uint32_t last, bool negated = false) {
  Item it;
  it.kind = Item::range;
  it.first = first, it.last = last, it.negated = negated;
  return it;
}

class Parser {
 public:
  Parser(std::string_view pattern, const std::string& source, std::vector<Class>& classes)
      : source_(source), pattern_(pattern), classes_(classes) {
    const auto* s = reinterpret_cast<const unsigned char*>(pattern.data());
    for (size_t i = 0; i < pattern.size();) {
      uint32_t cp;
      const int len = decode_utf8(s + i, pattern.size() - i, cp);
      LINATTN_REQUIRE(len > 0, source_, ": the pattern is not valid UTF-8 at byte ", i);
      cps_.push_back(cp);
      i += size_t(len);
    }
  }

  Node parse() {
    Node n = parse_alt(false);
    if (at_ < cps_.size()) fail("unbalanced ')'");
    return n;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    ::linattn::detail::fail_input(source_, ": pattern \"", std::string(pattern_), "\": at character ", at_ + 1, ": ", what,
                       " (docs/tokenizers.md lists the syntax linattn reads)");
  }
  bool more() const { return at_ < cps_.size(); }
  uint32_t peek(size_t ahead = 0) const { return at_ + ahead < cps_.size() ? cps_[at_ + ahead] : 0; }
  bool eat(uint32_t c) {
    if (peek() != c || !more()) return false;
    ++at_;
    return true;
  }

  uint32_t add_class(Class c) {
    c.finish();
    classes_.push_back(std::move(c));
    return uint32_t(classes_.size() - 1);
  }
  Node class_node(Class c) {
    Node n(Node::one);
    n.cls = add_class(std::move(c));
    return n;
  }

  Node parse_alt(bool ci) {
    Node first = parse_concat(ci);
    if (peek() != '|' || !more()) return first;
    Node n(Node::alt);
    n.kids.push_back(std::move(first));
    while (eat('|')) n.kids.push_back(parse_concat(ci));
    return n;
  }

  Node parse_concat(bool ci) {
    Node n(Node::concat);
    while (more() && peek() != '|' && peek() != ')') n.kids.push_back(parse_quantified(ci));
    return n;
  }

  Node parse_quantified(bool ci) {
    Node atom = parse_atom(ci);
    uint32_t min, max;
    if (eat('?')) min = 0, max = 1;
    else if (eat('*')) min = 0, max = unbounded;
    else if (eat('+')) min = 1, max = unbounded;
    else if (peek() == '{' && more()) {
      ++at_;
      min = number();
      max = min;
      if (eat(',')) max = peek() == '}' ? unbounded : number();
      if (!eat('}')) fail("expected '}' to close the repetition");
      if (max < min) fail("repetition {n,m} with m < n");
      if (max != unbounded && max > 1000) fail("repetition counts above 1000 are not supported");
    } else {
      return atom;
    }
    if (atom.kind == Node::look || atom.kind == Node::begin || atom.kind == Node::end) fail("nothing to repeat");
    Node n(Node::repeat);
    n.min = min, n.max = max;
    n.greedy = !eat('?');
    if (peek() == '+' && more()) fail("possessive quantifiers are not supported");
    if (max > 1 && nullable(atom)) fail("a repeated group that can match nothing is not supported");
    n.kids.push_back(std::move(atom));
    return n;
  }

  uint32_t number() {
    if (!(peek() >= '0' && peek() <= '9') || !more()) fail("expected a number in the repetition");
    uint64_t v = 0;
    while (more() && peek() >= '0' && peek() <= '9') {
      v = v * 10 + (cps_[at_++] - '0');
      if (v > 100000) fail("repetition count too large");
    }
    return uint32_t(v);
  }

  Node parse_atom(bool ci) {
    const uint32_t c = cps_[at_++];
    switch (c) {
      case '(': return parse_group(ci);
      case ')': fail("unbalanced ')'");
      case '[': return class_node(parse_class(ci));
      case '.': {
        Class dot;
        dot.negated = true;
        for (const uint32_t t : {uint32_t('\n'), uint32_t('\r'), 0x2028u, 0x2029u}) dot.items.push_back(range_item(t, t));
        return class_node(std::move(dot));
      }
      case '^': return Node(Node::begin);
      case '$': return Node(Node::end);
      case '*': case '+': case '?': case '{': --at_; fail("nothing to repeat");
      case '\\': {
        Class cls;
        if (class_escape(cls.items)) {
          if (ci) fail("character class escapes inside (?i:...) are not supported");
          return class_node(std::move(cls));
        }
        return literal(char_escape(), ci);
      }
      default: return literal(c, ci);
    }
  }

  Node literal(uint32_t c, bool ci) {
    Class cls;
    cls.items.push_back(range_item(c, c));
    if (ci) fold(cls);
    return class_node(std::move(cls));
  }

  // ASCII case-insensitivity: each ASCII letter of the class brings its other case.
  void fold(Class& cls) {
    std::vector<Item> extra;
    for (const Item& it : cls.items) {
      if (it.kind != Item::range || it.negated) fail("only literals and ranges are supported inside (?i:...)");
      for (uint32_t c = it.first; c <= it.last && c < 128; ++c)
        if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') extra.push_back(range_item(c ^ 0x20, c ^ 0x20));
      if (it.last >= 128 && (is_letter(it.last) || is_letter(it.first)))
        fail("(?i:...) with letters outside ASCII is not supported");
    }
    cls.items.insert(cls.items.end(), extra.begin(), extra.end());
  }

  Node parse_group(bool ci) {
    Node n(Node::concat);
    bool group_ci = ci;
    if (eat('?')) {
      if (eat(':')) {
      } else if (peek() == 'i' && peek(1) == ':') {
        at_ += 2;
        group_ci = true;
      } else if (eat('=') || eat('!')) {
        n = Node(Node::look);
        n.negate = cps_[at_ - 1] == '!';
      } else if (peek() == '<') {
        fail("lookbehind and named groups are not supported");
      } else {
        fail("unknown group flag");
      }
    }
    Node inner = parse_alt(group_ci);
    if (!eat(')')) fail("missing ')'");
    n.kids.push_back(std::move(inner));
    return n;
  }

  // \s \S \d \D \w \W \p{..} \P{..} after the backslash (not consumed when it is none of them).
  bool class_escape(std::vector<Item>& items) {
    const uint32_t c = peek();
    const bool negated = c == 'S' || c == 'D' || c == 'W' || c == 'P';
    switch (c) {
      case 's': case 'S': {
        ++at_;
        Item it;
  it.kind = Item::space;
        it.negated = negated;
        items.push_back(it);
        return true;
      }
      case 'd': case 'D':
        ++at_;
        items.push_back(range_item('0', '9', negated));
        return true;
      case 'w': case 'W': {
        ++at_;
        if (!negated) {
          for (const auto& [a, b] : {std::pair{'a', 'z'}, {'A', 'Z'}, {'0', '9'}, {'_', '_'}}) items.push_back(range_item(a, b));
          return true;
        }
        // \W: a class of its own is the complement of the four ranges; as an item of a larger class,
        // the code points outside them are the gaps between them.
        for (const auto& [a, b] : {std::pair{0u, 0x2Fu}, {0x3Au, 0x40u}, {0x5Bu, 0x5Eu}, {0x60u, 0x60u}, {0x7Bu, 0x10FFFFu}})
          items.push_back(range_item(a, b));
        return true;
      }
      case 'p': case 'P': {
        ++at_;
        if (!eat('{')) fail("expected '{' after \\p");
        std::string name;
        while (more() && peek() != '}') name += char(cps_[at_++]);
        if (!eat('}')) fail("expected '}' after \\p{NAME");
        const size_t eq = name.find('=');
        if (eq != std::string::npos) {
          const std::string key = name.substr(0, eq);
          if (key != "gc" && key != "General_Category") fail("\\p{" + name + "}: only general categories are supported");
          name = name.substr(eq + 1);
        }
        const uint32_t mask = category_mask(name);
        if (mask == 0) fail("\\p{" + name + "}: not a general category (L, Lu, N, Nd, P, S, Z, ...)");
        Item it;
  it.kind = Item::categories;
        it.mask = mask, it.negated = negated;
        items.push_back(it);
        return true;
      }
      default: return false;
    }
  }

  uint32_t hex_digits(int count) {
    uint32_t v = 0;
    for (int k = 0; k < count; ++k) {
      const uint32_t h = peek();
      const int d = h >= '0' && h <= '9' ? int(h - '0') : (h | 0x20) >= 'a' && (h | 0x20) <= 'f' ? int((h | 0x20) - 'a' + 10) : -1;
      if (d < 0 || !more()) fail("expected a hexadecimal digit");
      v = v * 16 + uint32_t(d);
      ++at_;
    }
    return v;
  }

  // A character escape after the backslash.
  uint32_t char_escape() {
    if (!more()) fail("the pattern ends with a backslash");
    const uint32_t c = cps_[at_++];
    switch (c) {
      case 't': return '\t';
      case 'n': return '\n';
      case 'v': return '\v';
      case 'f': return '\f';
      case 'r': return '\r';
      case '0':
        if (peek() >= '0' && peek() <= '9' && more()) fail("octal escapes are not supported");
        return 0;
      case 'x': return hex_digits(2);
      case 'u':
        if (eat('{')) {
          uint32_t v = 0;
          int digits = 0;
          while (more() && peek() != '}') v = v * 16 + hex_digits(1), ++digits;
          if (!eat('}') || digits == 0 || v > 0x10FFFF) fail("bad \\u{...} escape");
          return v;
        }
        return hex_digits(4);
      default:
        if (c < 128 && !((c | 0x20) >= 'a' && (c | 0x20) <= 'z') && !(c >= '0' && c <= '9')) return c;
        --at_;
        fail(std::string("the escape \\") + char(c) + " is not supported");
    }
  }

  Class parse_class(bool ci) {
    Class cls;
    cls.negated = eat('^');
    bool first = true;
    while (more() && (peek() != ']' || first)) {
      first = false;
      uint32_t lo;
      if (eat('\\')) {
        if (class_escape(cls.items)) {
          if (peek() == '-' && peek(1) != ']' && more()) fail("a class escape cannot start a range");
          continue;
        }
        lo = char_escape();
      } else {
        lo = cps_[at_++];
      }
      uint32_t hi = lo;
      if (peek() == '-' && peek(1) != ']' && at_ + 1 < cps_.size()) {
        ++at_;
        if (eat('\\')) {
          std::vector<Item> probe;
          if (class_escape(probe)) fail("a class escape cannot end a range");
          hi = char_escape();
        } else {
          hi = cps_[at_++];
        }
        if (hi < lo) fail("range out of order in the character class");
      }
      cls.items.push_back(range_item(lo, hi));
    }
    if (!eat(']')) fail("missing ']'");
    if (ci) fold(cls);
    return cls;
  }

  const std::string& source_;
  std::string_view pattern_;
  std::vector<Class>& classes_;
  std::vector<uint32_t> cps_;
  size_t at_ = 0;
};

void compile(const Node& n, std::vector<Inst>& prog) {
  auto emit = [&](Inst i) {
    prog.push_back(i);
    return uint32_t(prog.size() - 1);
  };
  switch (n.kind) {
    case Node::one: {
      Inst i{Inst::char_class};
      i.cls = n.cls;
      emit(i);
      return;
    }
    case Node::begin: emit(make(Inst::begin)); return;
    case Node::end: emit(make(Inst::end)); return;
    case Node::concat:
      for (const Node& k : n.kids) compile(k, prog);
      return;
    case Node::alt: {
      std::vector<uint32_t> jumps;
      for (size_t k = 0; k < n.kids.size(); ++k) {
        uint32_t split = 0;
        if (k + 1 < n.kids.size()) split = emit(make(Inst::split));
        if (k + 1 < n.kids.size()) prog[split].x = split + 1;
        compile(n.kids[k], prog);
        if (k + 1 < n.kids.size()) {
          jumps.push_back(emit(make(Inst::jump)));
          prog[split].y = uint32_t(prog.size());
        }
      }
      for (const uint32_t j : jumps) prog[j].x = uint32_t(prog.size());
      return;
    }
    case Node::look: {
      Inst i{Inst::look};
      i.negate = n.negate;
      const uint32_t at = emit(i);
      prog[at].x = at + 1;
      compile(n.kids[0], prog);
      emit(make(Inst::match));
      prog[at].y = uint32_t(prog.size());
      return;
    }
    case Node::repeat: {
      const Node& body = n.kids[0];
      if (body.kind == Node::one) {  // one instruction that backtracks a character at a time
        Inst i{Inst::repeat};
        i.cls = body.cls, i.min = n.min, i.max = n.max, i.greedy = n.greedy;
        emit(i);
        return;
      }
      for (uint32_t k = 0; k < n.min; ++k) compile(body, prog);
      auto split_to_body = [&](uint32_t split) {  // greedy: the body first
        prog[split].x = n.greedy ? split + 1 : 0;
        prog[split].y = n.greedy ? 0 : split + 1;
      };
      auto set_exit = [&](uint32_t split, uint32_t exit) { (n.greedy ? prog[split].y : prog[split].x) = exit; };
      if (n.max == unbounded) {
        const uint32_t split = emit(make(Inst::split));
        split_to_body(split);
        compile(body, prog);
        Inst back{Inst::jump};
        back.x = split;
        emit(back);
        set_exit(split, uint32_t(prog.size()));
        return;
      }
      std::vector<uint32_t> splits;
      for (uint32_t k = n.min; k < n.max; ++k) {
        splits.push_back(emit(make(Inst::split)));
        split_to_body(splits.back());
        compile(body, prog);
      }
      for (const uint32_t s : splits) set_exit(s, uint32_t(prog.size()));
      return;
    }
  }
}

// The code point at text[pos] (well-formed UTF-8) and its length.
inline int next_cp(std::string_view text, size_t pos, uint32_t& cp) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data()) + pos;
  if (s[0] < 0x80) {
    cp = s[0];
    return 1;
  }
  return decode_utf8_lossy(s, text.size() - pos, cp);
}

inline size_t prev_cp_start(std::string_view text, size_t pos) {
  do --pos;
  while (pos > 0 && (static_cast<unsigned char>(text[pos]) & 0xC0) == 0x80);
  return pos;
}

struct Frame {
  enum Kind : uint8_t { resume, give_back, take_more } kind;
  uint32_t pc, count;
  size_t pos;
};

}  // namespace

bool Class::in_items(uint32_t cp) const {
  for (const Item& it : items) {
    bool hit;
    switch (it.kind) {
      case Item::range: hit = cp >= it.first && cp <= it.last; break;
      case Item::categories: hit = (it.mask >> uint32_t(category(cp))) & 1; break;
      default: hit = is_space(cp);
    }
    if (hit != it.negated) return true;
  }
  return false;
}

bool Class::contains(uint32_t cp) const {
  if (cp < 128) return (ascii[cp >> 6] >> (cp & 63)) & 1;
  return in_items(cp) != negated;
}

void Class::finish() {
  ascii[0] = ascii[1] = 0;
  for (uint32_t cp = 0; cp < 128; ++cp)
    if (in_items(cp) != negated) ascii[cp >> 6] |= uint64_t(1) << (cp & 63);
}

Regex::Regex(std::string_view pattern, const std::string& source) {
  Parser parser(pattern, source, classes_);
  const Node root = parser.parse();
  compile(root, prog_);
  prog_.push_back(make(Inst::match));
}

bool Regex::search(std::string_view text, size_t from, size_t& begin, size_t& end) const {
  for (size_t pos = from; pos <= text.size();) {
    if (run(0, text, pos, end)) {
      begin = pos;
      return true;
    }
    if (pos == text.size()) break;
    uint32_t cp;
    pos += size_t(next_cp(text, pos, cp));
  }
  return false;
}

// Backtracking over the program from pc at pos: the first way through in priority order wins.
bool Regex::run(uint32_t start_pc, std::string_view text, size_t start_pos, size_t& end) const {
  thread_local std::vector<Frame> stack;
  const size_t base = stack.size();
  stack.push_back(Frame{Frame::resume, start_pc, 0, start_pos});
  const size_t n = text.size();
  auto matches_at = [&](uint32_t cls, size_t pos, int& len) {
    if (pos >= n) return false;
    uint32_t cp;
    len = next_cp(text, pos, cp);
    return classes_[cls].contains(cp);
  };
  while (stack.size() > base) {
    Frame f = stack.back();
    stack.pop_back();
    uint32_t pc = f.pc;
    size_t pos = f.pos;
    if (f.kind == Frame::give_back) {  // a greedy repeat gives back its last character
      pos = prev_cp_start(text, pos);
      if (f.count - 1 > prog_[pc].min) stack.push_back(Frame{Frame::give_back, pc, f.count - 1, pos});
      ++pc;
    } else if (f.kind == Frame::take_more) {  // a lazy repeat takes one more character
      int len;
      if (!matches_at(prog_[pc].cls, pos, len)) continue;
      pos += size_t(len);
      if (f.count + 1 < prog_[pc].max) stack.push_back(Frame{Frame::take_more, pc, f.count + 1, pos});
      ++pc;
    }
    bool failed = false;
    while (!failed) {
      const Inst& in = prog_[pc];
      switch (in.op) {
        case Inst::match:
          end = pos;
          stack.resize(base);
          return true;
        case Inst::char_class: {
          int len;
          if (matches_at(in.cls, pos, len)) pos += size_t(len), ++pc;
          else failed = true;
          break;
        }
        case Inst::repeat: {
          uint32_t count = 0;
          int len;
          const uint32_t want = in.greedy ? in.max : in.min;
          while (count < want && matches_at(in.cls, pos, len)) pos += size_t(len), ++count;
          if (count < in.min) {
            failed = true;
            break;
          }
          if (in.greedy && count > in.min) stack.push_back(Frame{Frame::give_back, pc, count, pos});
          if (!in.greedy && count < in.max) stack.push_back(Frame{Frame::take_more, pc, count, pos});
          ++pc;
          break;
        }
        case Inst::split:
          stack.push_back(Frame{Frame::resume, in.y, 0, pos});
          pc = in.x;
          break;
        case Inst::jump: pc = in.x; break;
        case Inst::look: {
          size_t ignored;
          const bool found = run(in.x, text, pos, ignored);
          if (found != in.negate) pc = in.y;
          else failed = true;
          break;
        }
        case Inst::begin:
          if (pos == 0) ++pc;
          else failed = true;
          break;
        case Inst::end:
          if (pos == n) ++pc;
          else failed = true;
          break;
      }
    }
  }
  return false;
}

}  // namespace linattn::data
