// The differential corpus: hand-picked strings per category (the cases the
// issue names) plus seeded-random mixtures of them, so the set is large and
// varied yet identical on every run. The strings themselves are committed
// (corpus.json), so the seed only matters when regenerating.

// mulberry32: a tiny deterministic PRNG (Math.random cannot be seeded).
function mulberry32(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const prose = [
  'Hello, world!', 'The quick brown fox jumps over the lazy dog.',
  'It was the best of times, it was the worst of times.',
  'Der schnelle braune Fuchs springt über den faulen Hund. Straße, Größe, Äpfel.',
  'Le cœur a ses raisons que la raison ne connaît point. Où est l\'hôtel?',
  '¿Dónde está la biblioteca? ¡Qué día más bonito! Mañana será otro día.',
  'Съешь же ещё этих мягких французских булок, да выпей чаю.',
  'Ξεσκεπάζω την ψυχοφθόρα βδελυγμία.', 'Pchnąć w tę łódź jeża lub ośm skrzyń fig.',
  'Árvíztűrő tükörfúrógép', 'Příliš žluťoučký kůň úpěl ďábelské ódy.',
  'Türkçe: Pijamalı hasta yağız şoföre çabucak güvendi. İstanbul, ılık.',
  '我能吞下玻璃而不伤身体。', '今日は良い天気ですね。カタカナとひらがな、漢字。',
  '다람쥐 헌 쳇바퀴에 타고파. 한국어 문장입니다.', 'العربية لغة جميلة، مرحبا بالعالم!',
  'שלום עולם, זוהי בדיקה של טקסט עברי.', 'नमस्ते दुनिया, यह हिंदी का वाक्य है।',
  'สวัสดีชาวโลก ภาษาไทยไม่มีการเว้นวรรคระหว่างคำ', 'Tiếng Việt có nhiều dấu: ă â ê ô ơ ư đ.',
  'ሰላም ዓለም', 'გამარჯობა მსოფლიო', 'Բարեւ աշխարհ', 'வணக்கம் உலகம்', 'ಹಲೋ ವರ್ಲ್ಡ್',
  'I\'m sure you\'re right; they\'ll see it\'s fine, we\'ve done what we\'d planned.',
  'I\'M SURE YOU\'RE RIGHT, THEY\'LL SEE. IT\'S FINE. WE\'VE DONE IT. I\'D SAY.',
  'don\'t can\'t won\'t shouldn\'t y\'all o\'clock rock \'n\' roll',
  'the dog\'s bone, the dogs\' bones, James\'s book', '"Quoted," she said. \'Single\' quotes. «Guillemets» „Anführung“',
  'Em—dash, en–dash, ellipsis… bullet • and © ® ™ § ¶ † ‡',
];
const code = [
  'def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n',
  'import numpy as np\nx = np.arange(10, dtype=np.float32)\nprint(f"{x.mean():.3f}")',
  'class Foo:\n\tdef __init__(self):\n\t\tself._x = {"a": [1, 2, 3]}\n',
  '#include <vector>\nint main() {\n  std::vector<int> v{1, 2, 3};\n  for (auto& x : v) x *= 2;\n  return 0;\n}\n',
  'template <typename T>\nconstexpr T square(T x) noexcept { return x * x; }  // C++20',
  'if (a != b && c <= d || !e) { p->q = r[i++]; }',
  '{"name": "sightline", "version": "1.0.0", "nested": {"array": [1, 2.5, -3e10, null, true]}}',
  '{\n  "key": "value",\n  "list": [\n    "a",\n    "b"\n  ]\n}',
  '<!DOCTYPE html>\n<html lang="en">\n<head><meta charset="utf-8"><title>Test</title></head>\n<body><p class="x">Hi &amp; bye</p></body>\n</html>',
  '<div style="color: red;">&lt;script&gt;alert(1)&lt;/script&gt;</div>',
  'SELECT id, name FROM users WHERE age >= 18 ORDER BY name DESC LIMIT 10;',
  '$ ls -la /usr/local/bin | grep -v "^d" && echo "done" > /dev/null 2>&1',
  'fn main() { let v: Vec<u8> = vec![0xff; 16]; println!("{:?}", v); }',
  'const f = async (x) => { await fetch(`https://example.com/${x}?q=1&r=2`); };',
  '    indented with four spaces\n        and eight\n\t\tand two tabs',
  'https://www.example.com/path/to/page.html?query=string&foo=bar#anchor',
  'user.name+tag@example.co.uk', 'C:\\Windows\\System32\\drivers\\etc\\hosts',
  '0x1F600 0b1010 0o777 1e-9 3.14159265358979 -0.0 +42 NaN Infinity',
  '// comment\n/* block\n   comment */\n# hash comment\n-- sql comment',
  'a=b;c=d;e==f;g!=h;i<=j;k>=l;m<<n;o>>p;q&&r;s||t;u::v;w->x;y=>z',
  '```python\nprint("hi")\n```', '| a | b |\n|---|---|\n| 1 | 2 |',
];
const whitespace = [
  '', ' ', '  ', '   ', '    ', '        ', '\t', '\t\t', '\n', '\n\n', '\n\n\n', '\r\n', '\r\n\r\n', '\r',
  ' \n', '\n ', ' \t \n \r\n ', 'a b', 'a  b', 'a   b', 'a\tb', 'a\nb', 'a\r\nb', 'a \n b',
  '  leading', 'trailing  ', '  both  ', '\tleading tab', 'trailing tab\t', '\nleading newline',
  'trailing newline\n', 'line1\nline2\r\nline3\rline4', 'word\n\n\n\n\nword', 'x' + ' '.repeat(40) + 'y',
  ' '.repeat(17), '\n'.repeat(9), '\t \t \t', '\u00a0non-breaking\u00a0space', 'ideographic\u3000space',
  'thin\u2009space and\u200bzero-width', 'en\u2002em\u2003spaces', '\u2028line sep\u2029para sep',
  '\u000bvertical tab\u000cform feed', 'a\u0085b (NEL)',
];
const numbers = [
  '0', '1', '12', '123', '1234', '12345', '123456789', '1234567890123456789012345678901234567890',
  '3.14', '0.000001', '1,234,567', '1.234.567,89', '$1,000,000.00', '€99,99', '¥1000', '100%',
  '2024-01-15T10:30:00Z', '12:34:56', '+1 (555) 123-4567', '192.168.0.1', 'v1.2.3-rc.4',
  'The year 1999 had 365 days and 8760 hours.', 'Call 911 or 112.', '1st 2nd 3rd 4th 21st',
  '١٢٣٤٥٦٧٨٩٠', '१२३४५', '一二三 四五六', '①②③ ⅠⅡⅢ ½ ¾ ² ³', '10⁻⁹ x₁ + x₂',
];
const emoji = [
  '😀', '😀😃😄', 'I ❤️ NY', '👍🏻👍🏼👍🏽👍🏾👍🏿', '👨‍👩‍👧‍👦', '👩‍💻', '🏳️‍🌈', '🏴‍☠️',
  '🇺🇸🇬🇧🇯🇵🇩🇪', '🇫🇷 France', '🏴󠁧󠁢󠁳󠁣󠁴󠁿', '🧑🏽‍🚀', '👁️‍🗨️', '❤️‍🔥', '1️⃣ #️⃣ *️⃣',
  'Hello 👋 world 🌍!', '🎉🎊🎈', '🤷‍♂️🤦‍♀️', '☕ ☃ ★ ☂', 'emoji at end 🙂', '🙂 emoji at start',
];
const unicodeHard = [
  'e\u0301', 'caf\u00e9 vs cafe\u0301', 'Z\u0351\u0354a\u0310\u0359l\u0314\u034eg\u0313\u0353o\u0346\u0329',
  'H̸̡̪̯ͨ͊̽̅̾̎Ȩ̬̩̾͛ͪ̈́̀́͘ ̶̧̨̱̹̭̯ͧ̾ͬC̷̙̲̝͖ͭ̏ͥͮ͟Oͮ͏̮̪̝͍M̲̖͊̒ͪͩͬ̚̚͜Ȇ̴̟̟͙̞ͩ͌͝S̨̥̫͎̭ͯ̿̔̀ͅ',
  '\ufb01nance \ufb02ow \ufb00', 'ﬁ ﬂ ﬀ ﬃ ﬄ ﬅ ﬆ', 'ＦＵＬＬ－ＷＩＤＴＨ　１２３', 'ｶﾀｶﾅ half-width',
  '\u00c5 vs A\u030a vs \u212b', '\u1100\u1161\u11a8 vs \uac01', '\u1112\u1161\u11ab\u1100\u1173\u11af',
  'Ω vs \u2126', 'ǅ ǆ Ǆ', '\u0041\u0308\u0304', 'x\u20d7 vector', '\u00bd \u2153 \u2155',
  '㍻ ㌀ ㎏ ㏄', '\u2460\u2461', 'ẛ̣', 'ḱṷṓn', '\u0958\u0959 (Devanagari nukta)',
  'a\u0000b', '\u0000', '\u0007bell', 'esc\u001b[31mred\u001b[0m', '\u0001\u0002\u0003\u001f\u007f',
  '\u0080\u009f C1 controls', '\ufeffBOM at start', 'mid\ufeffBOM', '\ufffd replacement', '\uffff\ufffe nonchars',
  '\u{11f04}', 'Kawi \u{11f04}\u{11f05}\u{11f06}', '\u{1e4f0}\u{1e4f1} Nag Mundari', 'Mongolian\u180evowel sep',
  '\u180e', '\u{1f9d1}\u{200d}\u{1f91d}\u{200d}\u{1f9d1}', '\u200d\u200c ZWJ ZWNJ', '\u{10ffff} max',
  '\u{e0001}\u{e0041} tags', '\u{1d400}\u{1d401} math bold', '\u{20000}\u{2a6d6} CJK ext B',
  '\u202eRTL override\u202c', 'mixed English עברית العربية 中文', '\u0627\u0644\u0644\u0647 \ufdf2',
  'ﷺ ﷻ', '\u0e01\u0e34\u0e4d', 'ꦲꦏ꧀ꦱꦫ', '\u{16fe4}', '\u{1e030}',
];
const specials = [
  'a <|eot_id|> b', '<|begin_of_text|>Hello<|end_of_text|>', '<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>',
  '<s>', '</s>', '<s> hi </s>', '<unk>', '<pad>', '<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n',
  '<|im_start|>', '<|endoftext|>', 'text<|endoftext|>more', '<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n',
  '<bos>', '<eos>', '[INST] What is 2+2? [/INST]', '[INST]', '<s>[INST] hi [/INST] hello</s>',
  '<think>\nreasoning\n</think>\n\nanswer', '<tool_call>{"name": "f"}</tool_call>',
  '<｜begin▁of▁sentence｜>', '<｜User｜>hi<｜Assistant｜>', '<|eot_id|><|eot_id|>', '<|eot_id', '|eot_id|>',
  '< s>', '<S>', '<<s>>', '<|fim_prefix|>a<|fim_suffix|>b<|fim_middle|>', '<image>', '<start_of_image>',
  '[SYSTEM_PROMPT]', '[AVAILABLE_TOOLS]', '<mask>', '<|reserved_special_token_5|>',
];
const longWords = [
  'a'.repeat(100), 'ab'.repeat(80), 'Pneumonoultramicroscopicsilicovolcanoconiosis',
  'Donaudampfschifffahrtsgesellschaftskapitänswitwe', 'x'.repeat(500),
  'supercalifragilisticexpialidocious'.repeat(5), '9'.repeat(120), '!'.repeat(50), '=' .repeat(80),
  '-'.repeat(64) + '\n' + '#'.repeat(64), '漢'.repeat(60), '😀'.repeat(30), 'é'.repeat(70),
  'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab',
  'ThisIsAVeryLongCamelCaseIdentifierThatKeepsGoingAndGoingForTesting',
  'snake_case_identifier_that_is_rather_long_and_has_many_parts_1234',
];

// Code point ranges the random mixtures draw from (assigned characters).
const ranges = [
  [0x20, 0x7e], [0xa0, 0x17f], [0x370, 0x3ff], [0x400, 0x4ff], [0x5d0, 0x5ea], [0x620, 0x64a],
  [0x900, 0x97f], [0xe01, 0xe3a], [0x3041, 0x3096], [0x30a1, 0x30fa], [0x4e00, 0x9fa5],
  [0xac00, 0xd7a3], [0x1f300, 0x1f64f], [0x1f680, 0x1f6c5], [0x2000, 0x206f], [0x300, 0x36f],
  [0xff01, 0xff5e], [0x1100, 0x11ff],
];

export function makeCorpus() {
  const rand = mulberry32(0x51647);
  const pick = (arr) => arr[Math.floor(rand() * arr.length)];
  const groups = [prose, code, whitespace, numbers, emoji, unicodeHard, specials, longWords];
  const out = [];
  const seen = new Set();
  const add = (s) => {
    if (!seen.has(s)) {
      seen.add(s);
      out.push(s);
    }
  };
  for (const g of groups) g.forEach(add);
  const seps = [' ', '', '\n', '  ', '\t', '\r\n', ' \n', '\n\n', ', ', '. '];
  const gens = [
    // Two or three fragments from any categories, joined by varied whitespace.
    () => {
      const n = 2 + Math.floor(rand() * 2);
      let s = pick(pick(groups));
      for (let i = 1; i < n; i++) s += pick(seps) + pick(pick(groups));
      return s;
    },
    // Random characters from one or two scripts.
    () => {
      const r1 = pick(ranges), r2 = pick(ranges);
      let s = '';
      const n = 1 + Math.floor(rand() * 24);
      for (let i = 0; i < n; i++) {
        const r = rand() < 0.7 ? r1 : r2;
        s += String.fromCodePoint(r[0] + Math.floor(rand() * (r[1] - r[0] + 1)));
        if (rand() < 0.15) s += pick(seps);
      }
      return s;
    },
    // Numbers of random lengths in text.
    () => {
      let d = '';
      const n = 1 + Math.floor(rand() * 30);
      for (let i = 0; i < n; i++) d += Math.floor(rand() * 10);
      return pick(['', 'x=', 'Total: ', ' ', '$']) + d + pick(['', '.5', ' items', ',000', '%', '\n']);
    },
    // A prose sentence with contractions / special tokens / emoji spliced in.
    () => {
      const words = pick(prose).split(' ');
      const at = Math.floor(rand() * (words.length + 1));
      words.splice(at, 0, pick([...specials, ...emoji, "'s", "'re", "'LL", "n't", '  ', '\t']));
      return words.join(rand() < 0.8 ? ' ' : '  ');
    },
    // Whitespace runs around a word.
    () => pick(whitespace) + pick(['word', 'Hello', '你好', 'x', '1', '😀', 'def']) + pick(whitespace),
  ];
  while (out.length < 640) add(gens[Math.floor(rand() * gens.length)]());
  return out;
}
