// Generates tests/tokenizer/testdata/hand_written/tokenizers.json: small
// hand-written tokenizer.json files, one per feature of the pipeline
// (byte-level BPE, byte fallback, fuse_unk, continuing-subword prefixes,
// ignore_merges, every added-token flag, every decoder, the post-processors),
// with what Hugging Face `tokenizers` (the npm binding tokenizers@0.23.2 of
// the Rust library) encodes and decodes with each. bpe_tokenizer_test.cc and
// hf_decoders_test.cc replay them against api_server/tokenizer/src/hf/.
//
// Run once, offline afterwards (the output is committed):
//   mkdir -p /tmp/hfbpe && (cd /tmp/hfbpe && npm install tokenizers@0.23.2)
//   NODE_PATH=/tmp/hfbpe/node_modules node tools/testdata/tokenizer_reference/hand_written.mjs \
//     > tests/tokenizer/testdata/hand_written/tokenizers.json
import { createRequire } from 'node:module';
const require = createRequire(import.meta.url);
const { Tokenizer } = require('tokenizers');

// GPT-2's bytes_to_unicode.
const BYTE_CHAR = (() => {
  const map = [];
  let extra = 256;
  for (let b = 0; b < 256; ++b) {
    const printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
    map.push(String.fromCodePoint(printable ? b : extra++));
  }
  return map;
})();
const bl = (s) => Array.from(Buffer.from(s, 'utf8')).map((b) => BYTE_CHAR[b]).join('');

// A vocabulary from base tokens and merges (each merge's result is added).
function vocabOf(base, merges, prefix = '') {
  const vocab = {};
  for (const t of base) if (!(t in vocab)) vocab[t] = Object.keys(vocab).length;
  for (const m of merges) {
    const [a, b] = Array.isArray(m) ? m : m.split(' ');
    const ab = a + b.slice(prefix.length);
    if (!(ab in vocab)) vocab[ab] = Object.keys(vocab).length;
  }
  return vocab;
}
const added = (id, content, flags = {}) => ({
  id, content, single_word: false, lstrip: false, rstrip: false, normalized: false,
  special: false, ...flags,
});
const bpe = (vocab, merges, opts = {}) => ({
  type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null,
  end_of_word_suffix: null, fuse_unk: false, byte_fallback: false, ignore_merges: false,
  vocab, merges, ...opts,
});
const spec = (model, rest = {}) => ({
  version: '1.0', truncation: null, padding: null, added_tokens: [], normalizer: null,
  pre_tokenizer: null, post_processor: null, decoder: null, model, ...rest,
});
const template = (single, specials) => ({
  type: 'TemplateProcessing', single, pair: single,
  special_tokens: Object.fromEntries(specials.map(([t, id]) => [t, { id: t, ids: [id], tokens: [t] }])),
});

const PROSE = [
  '', ' ', '  ', 'Hello world', 'hello  there', ' the the', "I'm sure they'll", '12312 45',
  'héllo wörld 😀', '\n\t x', 'tab\there  12 ¡¬®', 'the end. ', 'ZWJ 👩‍💻 family',
];

const CASES = [];
const addCase = (name, tok, texts, decodes = [], about = '') => CASES.push({ name, about, tok, texts, decodes });

// 1. Byte-level BPE (GPT-2 / Llama 3 / Qwen shape).
{
  const merges = [[bl('h'), bl('e')], [bl(' '), bl('t')], [bl(' t'), bl('he')], [bl('1'), bl('2')],
    [bl('l'), bl('l')], [bl('he'), bl('ll')], [bl('hell'), bl('o')], [bl(' '), bl(' ')]];
  const vocab = vocabOf(BYTE_CHAR, merges);
  const n = Object.keys(vocab).length;
  const base = spec(bpe(vocab, merges), {
    added_tokens: [added(n, '<|eot|>', { special: true }), added(n + 1, '<s>', { special: true }),
      added(n + 2, '<|tool|>')],
    pre_tokenizer: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true },
    post_processor: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: false, use_regex: true },
    decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
  });
  const b = (s) => Array.from(Buffer.from(s, 'latin1')).map((x) => vocab[BYTE_CHAR[x]]);
  addCase('byte_level', base, [...PROSE, '<s>hello<|eot|><|tool|> x', 'a<|eot|>b <s> c'],
    [[240, 159, 152, 65].map((x) => vocab[BYTE_CHAR[x]]), b('\xff\xfeA\xc3'), b('\xe2\x82'),
      [n, n + 2, vocab[bl('hello')], n + 1], [n + 7, 3, n + 2]],
    'ByteLevel pre-tokenizer with its regex, ByteLevel decoder (from_utf8_lossy), added tokens');
  addCase('byte_level_prefix_space', {
    ...base, pre_tokenizer: { ...base.pre_tokenizer, add_prefix_space: true },
  }, PROSE, [], 'ByteLevel add_prefix_space');
  addCase('bytelevel_template', {
    ...base,
    pre_tokenizer: { type: 'Sequence', pretokenizers: [
      { type: 'Split', pattern: { Regex: '\\p{N}{1,3}' }, behavior: 'Isolated', invert: false },
      { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: false }] },
    post_processor: { type: 'Sequence', processors: [base.post_processor,
      template([{ SpecialToken: { id: '<s>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } },
        { SpecialToken: { id: '<|eot|>', type_id: 0 } }], [['<s>', n + 1], ['<|eot|>', n]])] },
  }, PROSE, [[n + 1, vocab[bl('hello')], n]], 'Split + ByteLevel without regex; Sequence(ByteLevel, TemplateProcessing) BOS and EOS');
  addCase('ignore_merges', { ...base, model: { ...base.model, ignore_merges: true,
    vocab: { ...vocab, [bl('hel')]: n + 10, [bl(' hello')]: n + 11 } } },
  ['hel', 'hello', ' hello', 'help', ' hel'], [], 'ignore_merges: a pre-token in the vocabulary is one token');
}

// 2. SentencePiece-style byte fallback (Llama 2 shape) with normalizer.
{
  const base = ['<unk>', '<s>', '</s>'];
  for (let b = 0; b < 256; ++b) base.push(`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`);
  base.push('▁', 'a', 'b', 'c', 'h', 'e', 'l', 'o', 'w', 'r', 'd', 't');
  const merges = ['▁ ▁', '▁ h', 'e l', '▁h el', 'l o', '▁hel lo', 'a b', '▁ ab', '▁ w', 'o r', '▁w or', 'l d', '▁wor ld'];
  const vocab = vocabOf(base, merges);
  const decoder = { type: 'Sequence', decoders: [
    { type: 'Replace', pattern: { String: '▁' }, content: ' ' }, { type: 'ByteFallback' },
    { type: 'Fuse' }, { type: 'Strip', content: ' ', start: 1, stop: 0 }] };
  const llama2 = spec(bpe(vocab, merges, { unk_token: '<unk>', fuse_unk: true, byte_fallback: true }), {
    added_tokens: [added(0, '<unk>', { special: true }), added(1, '<s>', { special: true }),
      added(2, '</s>', { special: true })],
    normalizer: { type: 'Sequence', normalizers: [{ type: 'Prepend', prepend: '▁' },
      { type: 'Replace', pattern: { String: ' ' }, content: '▁' }] },
    post_processor: template([{ SpecialToken: { id: '<s>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }], [['<s>', 1]]),
    decoder,
  });
  const byte = (x) => 3 + x;
  addCase('byte_fallback', llama2, [...PROSE, 'hello</s>world', 'ab<s> ab', 'x✓ yz'],
    [[1, byte(0xf0), byte(0x9f), byte(0x98), byte(0x80), vocab['▁hello']],
      [byte(0xf0), byte(0x9f), vocab['a'], byte(0xe2)], [vocab['▁'], vocab['▁'], vocab['ab']],
      [vocab['▁hello'], 2, vocab['▁world']]],
    'byte_fallback <0xXX> tokens, ByteFallback/Fuse/Strip/Replace decoders, Prepend normalizer, " " case of the issue');
  // Normalized added tokens under Prepend: matched (and decoded) in their
  // normalized form "▁</s>", which is not in the special set any more.
  addCase('normalized_prepend', { ...llama2,
    added_tokens: [added(0, '<unk>', { special: true }), added(1, '<s>', { special: true }),
      added(2, '</s>', { special: true, normalized: true }),
      added(Object.keys(vocab).length, 'ab', { normalized: true, single_word: true })] },
  ['hello </s>world', 'hello</s>', '</s>', 'x ab ab', 'ab', ' ab'],
  [[1, 2, vocab['▁hello'], 2], [Object.keys(vocab).length, 2]],
  'normalized=true added tokens with a Prepend/Replace normalizer');
  // 3. Metaspace (Mistral shape): no normalizer, prepend_scheme first.
  const metaspace = { ...llama2, normalizer: null,
    added_tokens: [...llama2.added_tokens, added(Object.keys(vocab).length, '[INST]', { special: true })],
    pre_tokenizer: { type: 'Metaspace', replacement: '▁', prepend_scheme: 'first', split: false },
    decoder: { type: 'Sequence', decoders: [{ type: 'Metaspace', replacement: '▁', prepend_scheme: 'first', split: false },
      { type: 'ByteFallback' }, { type: 'Fuse' }] } };
  addCase('metaspace_first', metaspace, [...PROSE, '[INST] hello world[INST]hello', ' [INST]ab'],
    [[vocab['▁hello'], vocab['▁world']], [vocab['▁▁'], vocab['▁hello']]],
    'Metaspace pre-tokenizer and decoder, prepend_scheme first: not after an added token');
  addCase('metaspace_lstrip_first', { ...metaspace,
    added_tokens: [...llama2.added_tokens, added(Object.keys(vocab).length, '[INST]', { special: true, lstrip: true, rstrip: true })] },
  ['  [INST]  hello', '[INST]hello', 'hello  [INST]  world', ' [INST] '], [],
  'Metaspace first with lstrip/rstrip added tokens at the start');
  addCase('metaspace_always_split', { ...metaspace,
    pre_tokenizer: { type: 'Metaspace', replacement: '▁', prepend_scheme: 'always', split: true },
    decoder: { type: 'Metaspace', replacement: '▁', prepend_scheme: 'always', split: true } },
  [...PROSE, '[INST] hello world[INST]hello'], [[vocab['▁▁'], vocab['▁hello'], vocab['▁']]],
  'Metaspace always/split');
  addCase('metaspace_never', { ...metaspace,
    pre_tokenizer: { type: 'Metaspace', replacement: '▁', prepend_scheme: 'never', split: true },
    decoder: { type: 'Metaspace', replacement: '▁', prepend_scheme: 'never', split: true } },
  ['hello world', ' hello'], [[vocab['▁hello'], vocab['▁world']]], 'Metaspace never');
}

// 4. Unknown characters: unk_token with and without fuse_unk; no decoder.
{
  const merges = ['a b', 'ab c'];
  const vocab = vocabOf(['<unk>', 'a', 'b', 'c', ' '], merges);
  const tok = (fuse) => spec(bpe(vocab, merges, { unk_token: '<unk>', fuse_unk: fuse }));
  const texts = ['abc', 'xyab', 'a✓✓b', 'abcx', 'zz zz', 'a b'];
  addCase('unk_fused', tok(true), texts, [[1, 0, 6, 4]], 'fuse_unk: a run of unknown characters is one <unk>; no decoder joins with spaces');
  addCase('unk_unfused', tok(false), texts, [], 'fuse_unk false');
  const noUnk = spec(bpe(vocab, merges));
  addCase('unk_none', noUnk, texts, [], 'no unk_token: unknown characters vanish');
}

// 5. Continuing-subword prefix and end-of-word suffix (WordPiece / BPEDecoder).
{
  const merges = ['h ##e', 'he ##l', '##l ##o', 'hel ##lo', 'w ##o', 'wo ##r'];
  const vocab = vocabOf(['h', 'e', 'l', 'o', 'w', 'r', 'd', '##e', '##l', '##o', '##r', '##d', '##lo'], merges, '##');
  addCase('subword_prefix', spec(bpe(vocab, merges, { continuing_subword_prefix: '##' }), {
    pre_tokenizer: { type: 'Whitespace' },
    decoder: { type: 'WordPiece', prefix: '##', cleanup: true },
  }), ['hello world', 'hell', 'hero word', 'ow'], [[vocab['hello'], vocab['wor'], vocab['##d']], [vocab['h'], vocab['##e']]],
  'continuing_subword_prefix; WordPiece decoder');
  const sm = ['h e', 'l o</w>', 'he l', 'hel lo</w>'];
  const sv = vocabOf(['h', 'e', 'l', 'o', 'o</w>', 'l</w>', 'e</w>'], sm);
  addCase('end_of_word_suffix', spec(bpe(sv, sm, { end_of_word_suffix: '</w>' }), {
    pre_tokenizer: { type: 'WhitespaceSplit' },
    decoder: { type: 'BPEDecoder', suffix: '</w>' },
  }), ['hello', 'hello hel', 'ole'], [[sv['hello</w>'], sv['hello</w>']], [sv['he'], sv['l</w>']]], 'end_of_word_suffix; BPEDecoder');
}

// 6. Added-token flags.
{
  const merges = [[bl('a'), bl('b')]];
  const vocab = vocabOf(BYTE_CHAR, merges);
  const n = Object.keys(vocab).length;
  const base = spec(bpe(vocab, merges), {
    added_tokens: [
      added(n, '<L>', { special: true, lstrip: true }),
      added(n + 1, '<R>', { special: true, rstrip: true }),
      added(n + 2, 'word', { single_word: true }),
      added(n + 3, '<LR>', { lstrip: true, rstrip: true }),
      added(n + 4, 'Norm', { normalized: true }),
      added(n + 5, '<L', {}),
      added(n + 6, 'ab', { special: true }), // already in the model vocabulary: keeps its id
    ],
    normalizer: { type: 'Lowercase' },
    pre_tokenizer: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true },
    decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
  });
  addCase('added_flags', base, [
    'x  <L>  y', 'x  <R>  y', 'a word here', 'awordb', 'words word', 'x <LR>  <LR> y', 'NORM norm Norm',
    '<L<L>', '  <L>', '<R>\n\n', 'ab AB', 'x\u3000<L>', 'é<LR>\u00a0z', 'word_x word', 'wordé word'],
  [[n, n + 1, n + 2, n + 4, n + 6], [vocab[bl('a')], n + 6]],
  'lstrip, rstrip, single_word, normalized (with Lowercase: decodes to the normalized form), special, leftmost-longest, ids');
}

// 7. Decoders alone: Replace with a regex, Strip both ends, Fuse.
{
  const words = ['▁▁hi', 'x--y', '__a__', '<0x41>', '<0x+4>', '<0xZZ>', '▁', 'a▁b', 'end'];
  const vocab = vocabOf(words, []);
  const cases = [
    ['decoder_replace_regex', { type: 'Replace', pattern: { Regex: '-+|_' }, content: ' ' }],
    ['decoder_strip', { type: 'Strip', content: '_', start: 2, stop: 1 }],
    ['decoder_strip_overlong', { type: 'Strip', content: '▁', start: 5, stop: 0 }],
    ['decoder_bytefallback_odd', { type: 'ByteFallback' }],
    ['decoder_fuse_metaspace', { type: 'Sequence', decoders: [{ type: 'Fuse' }, { type: 'Metaspace', replacement: '▁', prepend_scheme: 'always', split: true }] }],
    ['decoder_metaspace_first_token', { type: 'Metaspace', replacement: '▁', prepend_scheme: 'first', split: true }],
  ];
  const all = words.map((w) => vocab[w]);
  for (const [name, decoder] of cases)
    addCase(name, spec(bpe(vocab, []), { decoder }), [], [all, [vocab['__a__'], vocab['▁▁hi']], [vocab['▁▁hi'], vocab['a▁b']], [vocab['<0x41>'], vocab['<0x+4>'], vocab['end']]], 'decoder ' + name);
}

// 7b. The WordPiece model (greedy longest match, unk for a bad word).
{
  const vocab = vocabOf(['[UNK]', '[CLS]', '[SEP]', 'un', '##aff', '##able', 'aff', 'able', 'a', '##a', 'é', '##é', ',', '.', '!'], []);
  const wp = (extra) => spec({ type: 'WordPiece', unk_token: '[UNK]', continuing_subword_prefix: '##', max_input_chars_per_word: 8, vocab, ...extra }, {
    added_tokens: [added(0, '[UNK]', { special: true }), added(1, '[CLS]', { special: true }), added(2, '[SEP]', { special: true })],
    pre_tokenizer: { type: 'BertPreTokenizer' },
    post_processor: template(['[CLS]', '$A', '[SEP]'].map((p) => (p === '$A' ? { Sequence: { id: 'A', type_id: 0 } } : { SpecialToken: { id: p, type_id: 0 } })), [['[CLS]', 1], ['[SEP]', 2]]),
    decoder: { type: 'WordPiece', prefix: '##', cleanup: true },
  });
  addCase('wordpiece', wp({}), ['unaffable', 'affable, able!', 'unx able', 'aaaaaaaaa aaaaaaaa', 'éé aé', ''],
    [[3, 4, 5, 12, 7, 14], [1, 6, 0, 2]], 'WordPiece model, BertPreTokenizer, WordPiece decoder');
}

// 8. Bert / Roberta processing.
{
  const vocab = vocabOf(['[CLS]', '[SEP]', 'a', 'b'], ['a b']);
  const tokens = [added(0, '[CLS]', { special: true }), added(1, '[SEP]', { special: true })];
  addCase('bert_processing', spec(bpe(vocab, ['a b']), { added_tokens: tokens,
    post_processor: { type: 'BertProcessing', sep: ['[SEP]', 1], cls: ['[CLS]', 0] } }), ['ab', 'aab', ''], [[0, 4, 1]], 'BertProcessing');
  addCase('roberta_processing', spec(bpe(vocab, ['a b']), { added_tokens: tokens,
    post_processor: { type: 'RobertaProcessing', sep: ['[SEP]', 1], cls: ['[CLS]', 0], trim_offsets: true, add_prefix_space: false } }), ['ab', 'ba'], [], 'RobertaProcessing');
}

const out = [];
for (const c of CASES) {
  const t = Tokenizer.fromString(JSON.stringify(c.tok));
  const encodes = [];
  for (const text of c.texts)
    for (const addSpecialTokens of [false, true]) {
      const enc = await t.encode(text, null, { addSpecialTokens });
      encodes.push({ text, add_special_tokens: addSpecialTokens, ids: enc.getIds() });
    }
  const decodes = [];
  const idLists = [...c.decodes, ...encodes.filter((e) => e.add_special_tokens).map((e) => e.ids)];
  for (const ids of idLists)
    for (const skip of [false, true]) decodes.push({ ids, skip_special_tokens: skip, text: await t.decode(ids, skip) });
  out.push({ name: c.name, about: c.about, tokenizer: c.tok, encode: encodes, decode: decodes });
}
process.stdout.write(JSON.stringify({ generator: 'tokenizers@0.23.2 (npm)', cases: out }, null, 1) + '\n');
