// Generates data/unicode_tables.cpp from node's Unicode data, as node's regular expressions and
// String.prototype.normalize see it. node runs the reference tokenizers (gpt-3-encoder for GPT-2,
// @lenml/tokenizers for tokenizer.json files), so the tables agree with them:
//   - the general category of every code point (\p{L}, \p{Lu}, \p{N}, \p{P}, ... of the regular
//     expressions of pre-tokenizers), as ranges;
//   - JavaScript's \s;
//   - what NFC needs: the full canonical decomposition of every code point that has one (Hangul
//     syllables excepted: they are computed), the canonical ordering classes, and the primary
//     composites (pairs that compose). JavaScript does not expose the canonical combining classes, so
//     the tables hold order-preserving ranks found by asking normalize('NFD') which of two marks goes
//     first; canonical ordering and blocking only compare classes, so ranks are enough.
// Before writing, the generator runs NFC from these tables over every code point and over random
// mark sequences and checks it against normalize('NFC'); a difference stops it.
// Run: node data/unicode_tables.gen.js > data/unicode_tables.cpp
'use strict';

const MAX = 0x110000;
const isSurrogate = cp => cp >= 0xd800 && cp <= 0xdfff;
const isHangulSyllable = cp => cp >= 0xac00 && cp <= 0xd7a3;
const str = cps => String.fromCodePoint(...cps);
const cpsOf = s => Array.from(s, c => c.codePointAt(0));

// ---- general categories ----
const CATEGORIES = ['Cn', 'Lu', 'Ll', 'Lt', 'Lm', 'Lo', 'Mn', 'Mc', 'Me', 'Nd', 'Nl', 'No', 'Pc', 'Pd', 'Ps', 'Pe',
                    'Pi', 'Pf', 'Po', 'Sm', 'Sc', 'Sk', 'So', 'Zs', 'Zl', 'Zp', 'Cc', 'Cf', 'Cs', 'Co'];
const categoryRes = CATEGORIES.map(c => new RegExp(`^\\p{${c}}$`, 'u'));
function categoryOf(cp) {
  if (isSurrogate(cp)) return CATEGORIES.indexOf('Cs');
  const s = String.fromCodePoint(cp);
  for (let k = 1; k < CATEGORIES.length; ++k)
    if (categoryRes[k].test(s)) return k;
  return 0;
}
const categoryRanges = [];
for (let cp = 0, start = 0, cat = categoryOf(0); cp <= MAX; ++cp) {
  const c = cp < MAX ? categoryOf(cp) : -1;
  if (c !== cat) {
    if (cat !== 0) categoryRanges.push([start, cp - 1, cat]);
    start = cp;
    cat = c;
  }
}

// ---- JavaScript's \s ----
function ranges(test) {
  const out = [];
  let start = -1;
  for (let cp = 0; cp <= MAX; ++cp) {
    const inside = cp < MAX && !isSurrogate(cp) && test(cp);
    if (inside && start < 0) start = cp;
    if (!inside && start >= 0) { out.push([start, cp - 1]); start = -1; }
  }
  return out;
}
const spaceRanges = ranges(cp => /^\s$/u.test(String.fromCodePoint(cp)));

// ---- NFC: decompositions ----
const decomposition = new Map();  // cp -> full canonical decomposition (code points), when not itself
for (let cp = 0; cp < MAX; ++cp) {
  if (isSurrogate(cp) || isHangulSyllable(cp)) continue;
  const d = cpsOf(String.fromCodePoint(cp).normalize('NFD'));
  if (d.length !== 1 || d[0] !== cp) decomposition.set(cp, d);
}

// ---- NFC: canonical ordering ranks ----
// Whether normalize('NFD') puts y before x in "a x y" (x, y marks that do not decompose): ccc(x) > ccc(y) > 0.
const swaps = (x, y) => str([0x61, x, y]).normalize('NFD') === str([0x61, y, x]);
const IOTA = 0x345;     // ccc 240, the highest class
const OVERLAY = 0x334;  // ccc 1, the lowest
const marks = [];
for (let cp = 0; cp < MAX; ++cp) {
  if (isSurrogate(cp) || decomposition.has(cp) || isHangulSyllable(cp) || cp === IOTA || cp === OVERLAY) continue;
  if (swaps(IOTA, cp) || swaps(cp, OVERLAY)) marks.push(cp);
}
marks.push(IOTA, OVERLAY);
marks.sort((x, y) => (swaps(x, y) ? 1 : swaps(y, x) ? -1 : 0));
const rank = new Map();
for (let k = 0, r = 0; k < marks.length; ++k) {
  if (k === 0 || swaps(marks[k], marks[k - 1])) ++r;
  rank.set(marks[k], r);
}
const rankRanges = [];
{
  const sorted = [...rank.keys()].sort((a, b) => a - b);
  for (const cp of sorted) {
    const last = rankRanges[rankRanges.length - 1];
    if (last && last[1] === cp - 1 && last[2] === rank.get(cp)) last[1] = cp;
    else rankRanges.push([cp, cp, rank.get(cp)]);
  }
}

// ---- NFC: primary composites ----
// P composes from (L, C) when normalize('NFC') keeps P and P decomposes. L + C is found from P's full
// decomposition D: C is D's last code point and L the composition of the rest (tried first), or C is
// the mark of D that normalize('NFD') moved before others.
const compositions = [];  // [L, C, P]
for (const [p, d] of decomposition) {
  if (String.fromCodePoint(p).normalize('NFC') !== String.fromCodePoint(p)) continue;  // excluded or a singleton
  let found = null;
  for (let k = d.length - 1; k >= 1 && !found; --k) {
    const rest = d.slice(0, k).concat(d.slice(k + 1));
    const l = cpsOf(str(rest).normalize('NFC'));
    if (l.length === 1 && str([l[0], d[k]]).normalize('NFC') === String.fromCodePoint(p) &&
        str([l[0], d[k]]).normalize('NFD') === str(d))
      found = [l[0], d[k], p];
  }
  if (!found) throw new Error(`no pair composes U+${p.toString(16)}`);
  compositions.push(found);
}
compositions.sort((a, b) => a[0] - b[0] || a[1] - b[1]);

// ---- self-check: NFC from these tables equals normalize('NFC') ----
const compose = new Map(compositions.map(([l, c, p]) => [l * MAX + c, p]));
const S_BASE = 0xac00, L_BASE = 0x1100, V_BASE = 0x1161, T_BASE = 0x11a7, L_COUNT = 19, V_COUNT = 21, T_COUNT = 28;
const N_COUNT = V_COUNT * T_COUNT, S_COUNT = L_COUNT * N_COUNT;
function nfc(cps) {
  const d = [];
  for (const cp of cps) {
    if (isHangulSyllable(cp)) {
      const s = cp - S_BASE;
      d.push(L_BASE + Math.floor(s / N_COUNT), V_BASE + Math.floor((s % N_COUNT) / T_COUNT));
      if (s % T_COUNT) d.push(T_BASE + (s % T_COUNT));
    } else {
      d.push(...(decomposition.get(cp) || [cp]));
    }
  }
  const cc = cp => rank.get(cp) || 0;
  for (let i = 1; i < d.length; ++i)  // canonical ordering: a stable insertion sort of each run of marks
    for (let j = i; j > 0 && cc(d[j]) && cc(d[j - 1]) > cc(d[j]); --j) [d[j - 1], d[j]] = [d[j], d[j - 1]];
  const out = [];
  let starter = -1, lastCc = 0;
  for (const c of d) {
    const k = cc(c);
    if (starter >= 0 && (out.length - 1 === starter || (lastCc !== 0 && lastCc < k))) {
      const l = out[starter];
      let p;
      if (l >= L_BASE && l < L_BASE + L_COUNT && c >= V_BASE && c < V_BASE + V_COUNT)
        p = S_BASE + ((l - L_BASE) * V_COUNT + (c - V_BASE)) * T_COUNT;
      else if (isHangulSyllable(l) && (l - S_BASE) % T_COUNT === 0 && c > T_BASE && c < T_BASE + T_COUNT)
        p = l + (c - T_BASE);
      else p = compose.get(l * MAX + c);
      if (p !== undefined) { out[starter] = p; continue; }
    }
    if (k === 0) { starter = out.length; lastCc = 0; } else lastCc = k;
    out.push(c);
  }
  return out;
}
for (let cp = 0; cp < MAX; ++cp) {
  if (isSurrogate(cp)) continue;
  if (str(nfc([cp])) !== String.fromCodePoint(cp).normalize('NFC')) throw new Error(`NFC differs at U+${cp.toString(16)}`);
}
{
  const pool = [0x61, 0x65, 0x41, 0x1100, 0x1161, 0x11a8, 0xac00, 0x0b47, 0x0b3e, 0x0cc6, 0x0cc2, 0x0cd5, 0x3099,
                0x304b, 0x05d0, 0x0627, 0x0653, 0x0654, 0x0655, 0x1e63, 0x0fb2, 0x0f80, 0x0f71, 0x0f72, 0x11131, 0x11127,
                ...marks.slice(0, 40), ...marks.slice(-40)];
  let seed = 12345;
  const next = () => (seed = (seed * 1103515245 + 12345) % 2147483648) % pool.length;
  for (let t = 0; t < 200000; ++t) {
    const s = [];
    for (let k = 1 + (t % 6); k > 0; --k) s.push(pool[next()]);
    if (str(nfc(s)) !== str(s).normalize('NFC')) throw new Error(`NFC differs on ${s.map(c => c.toString(16))}`);
  }
}

// ---- output ----
const hex = x => '0x' + x.toString(16).toUpperCase();
function rows(items, perRow, fmt) {
  const out = [];
  for (let i = 0; i < items.length; i += perRow) out.push('    ' + items.slice(i, i + perRow).map(fmt).join(', ') + ',');
  return out.join('\n');
}
const pool = [];
const decompRows = [...decomposition.entries()].sort((a, b) => a[0] - b[0]).map(([cp, d]) => {
  const at = pool.length;
  pool.push(...d);
  return [cp, at, d.length];
});
const unicode = process.versions.unicode || 'unknown';
console.log(`// Generated by data/unicode_tables.gen.js with node ${process.version} (Unicode ${unicode}). Do not edit.
// General categories, JavaScript's \\s, and NFC's decompositions, canonical ordering ranks and
// compositions (see the generator for how each is found).
#include "data/unicode.h"

namespace linattn::data::unicode_tables {

// {first, last, category}: category indexes category_names; code points in no range are Cn.
const CategoryRange category[] = {
${rows(categoryRanges, 4, ([a, b, c]) => `{${hex(a)}, ${hex(b)}, ${c}}`)}
};
const size_t category_count = ${categoryRanges.length};
const char* const category_names[] = {${CATEGORIES.map(c => `"${c}"`).join(', ')}};

const CodeRange space[] = {
${rows(spaceRanges, 4, ([a, b]) => `{${hex(a)}, ${hex(b)}}`)}
};
const size_t space_count = ${spaceRanges.length};

// {code point, offset in decomposition_pool, length}, sorted by code point.
const Decomposition decomposition[] = {
${rows(decompRows, 4, ([cp, at, n]) => `{${hex(cp)}, ${at}, ${n}}`)}
};
const size_t decomposition_count = ${decompRows.length};
const uint32_t decomposition_pool[] = {
${rows(pool, 8, hex)}
};

// {first, last, rank}: canonical ordering ranks of the marks (0, a starter, elsewhere).
const CategoryRange ordering[] = {
${rows(rankRanges, 4, ([a, b, r]) => `{${hex(a)}, ${hex(b)}, ${r}}`)}
};
const size_t ordering_count = ${rankRanges.length};

// {first, second, composite}, sorted by (first, second); Hangul syllables are computed instead.
const Composition composition[] = {
${rows(compositions, 3, ([l, c, p]) => `{${hex(l)}, ${hex(c)}, ${hex(p)}}`)}
};
const size_t composition_count = ${compositions.length};

const char* const version = "${unicode}";

}  // namespace linattn::data::unicode_tables`);
