// Regenerates hf_cases.json: random Unicode texts encoded by Hugging Face's
// own tokenizers library (npm `tokenizers`, the Rust implementation) with the
// glm5-tiny-dev tokenizer.json, so that the C++ tokenizer can be checked
// against the reference on inputs beyond the fixtures' code prompts.
//
//   npm install tokenizers@0.23.2
//   node gen_hf_cases.js <fixtures>/glm5-tiny-dev/tokenizer.json > hf_cases.json
//
// Not run by the build or CI; the generated file is checked in.
const { Tokenizer } = require('tokenizers');

let state = 0x2545f491;
function rand(n) { // xorshift32, deterministic
  state ^= state << 13; state >>>= 0;
  state ^= state >>> 17;
  state ^= state << 5; state >>>= 0;
  return state % n;
}

const ranges = [
  [0x20, 0x7e], [0x20, 0x7e], [0x20, 0x7e], [0x30, 0x39], [0x09, 0x0d],
  [0xa0, 0xff], [0x100, 0x17f], [0x370, 0x3ff], [0x400, 0x45f],
  [0x5d0, 0x5ea], [0x620, 0x64a], [0x660, 0x669], [0x900, 0x97f],
  [0x300, 0x36f], [0xe01, 0xe5b], [0x4e00, 0x4e80], [0xac00, 0xac40],
  [0x3040, 0x30ff], [0xff10, 0xff5a], [0x2000, 0x200d], [0x2028, 0x202f],
  [0x2150, 0x218b], [0xb2, 0xbe], [0x1f600, 0x1f64f], [0x1d400, 0x1d44f],
  [0xfe00, 0xfe0f], [0x3000, 0x3003], [0xe000, 0xe010],
];
const fixed = [
  '\u0085', '\u1680', '\u180e', '\u200b', '\ufeff', '\u205f', '\r\n',
  '\n\n', '    ', '\t\t', "'s", "'S", "'Ll", "'RE", "'ve", "'d", "'M",
  '<|user|>', '[gMASK]', '<sop>', '<think>', '</think>', '<|endoftext|>',
  '<|assist', '[MASK', '1234567', 'def ', 'self.', '()', '):\n', '\u{1F468}\u200d\u{1F469}',
  '\u180e(', '  \u180e', '\f \u180e', 'x\u180e y',
  // Words longer than 32 bytes take the heap path of the BPE.
  ' '.repeat(70), '='.repeat(45), '_'.repeat(40), '\n'.repeat(36),
  'selfreturnimportdefinitionsclassnamespacemodule',
  'self_avoid_backslashes_and_other_long_identifiers',
  '#' + '-'.repeat(77), '\u00e9\u00e8'.repeat(20),
];

// Any scalar value, weighted to the first planes, mixed with whitespace of
// every kind (U+180E is the case where PCRE2's \s and Oniguruma's differ).
const spaces = [' ', '\t', '\n', '\r', '\v', '\f', '\u0085', '\u00a0',
  '\u1680', '\u2000', '\u2007', '\u200a', '\u2028', '\u2029', '\u202f',
  '\u205f', '\u3000', '\u180e', '\u200b', '\ufeff', '\u001c', '\u001f'];
function randomScalars() {
  let out = '';
  const n = 1 + rand(30);
  for (let k = 0; k < n; k++) {
    const r = rand(10);
    if (r < 3) { out += spaces[rand(spaces.length)]; continue; }
    if (r < 5) { out += String.fromCodePoint(0x20 + rand(95)); continue; }
    let cp;
    do { cp = rand(4) ? rand(0x30000) : rand(0x110000); }
    while (cp >= 0xd800 && cp <= 0xdfff);
    out += String.fromCodePoint(cp);
  }
  return out;
}

function randomText() {
  let out = '';
  const pieces = 1 + rand(60);
  for (let i = 0; i < pieces; i++) {
    if (rand(5) === 0) { out += fixed[rand(fixed.length)]; continue; }
    const [lo, hi] = ranges[rand(ranges.length)];
    out += String.fromCodePoint(lo + rand(hi - lo + 1));
  }
  return out;
}

(async () => {
  const tok = Tokenizer.fromFile(process.argv[2]);
  const cases = [];
  for (let i = 0; i < 600; i++) {
    const text = i < 300 ? randomText() : randomScalars();
    const enc = await tok.encode(text);
    cases.push({ text, ids: Array.from(enc.getIds()) });
  }
  process.stdout.write(JSON.stringify({
    generator: 'npm tokenizers@0.23.2, glm5-tiny-dev/tokenizer.json, special tokens parsed',
    cases,
  }) + '\n');
})();
