// The reference ids of a Hugging Face tokenizer.json, from @lenml/tokenizers (a JavaScript port of
// transformers.js's tokenizers, which implements the same format). tests/data/hf_tokenizer_test.cpp
// compares linattn's HfTokenizer against it.
//
//   node data/hf_reference.js corpus TOKENIZERS_PACKAGE MODEL_DIR CORPUS_DIR OUT_FILE
//     One line per .txt file of CORPUS_DIR: FILE_NAME <TAB> TOKEN_COUNT <TAB> ID ID ID ... (the ids of
//     the file's text without the post-processor's special tokens). Run once by scripts/fetch-data.
//   node data/hf_reference.js strings TOKENIZERS_PACKAGE MODEL_DIR IN_JSON OUT_JSON
//     IN_JSON is a list of texts as hexadecimal bytes (any bytes: node reads ill-formed UTF-8 as
//     U+FFFD); OUT_JSON the list of their ids, and of their ids with the special tokens added.
//
// MODEL_DIR holds tokenizer.json and tokenizer_config.json (the models/ folder of a tokenizer package).
'use strict';
const fs = require('fs');
const path = require('path');

const [mode, packageDir, modelDir, input, output] = process.argv.slice(2);
if (!output || (mode !== 'corpus' && mode !== 'strings')) {
  console.error('usage: node hf_reference.js corpus|strings TOKENIZERS_PACKAGE MODEL_DIR IN OUT');
  process.exit(2);
}
const { TokenizerLoader } = require(path.resolve(packageDir, 'dist/main.js'));
const readJson = name => JSON.parse(fs.readFileSync(path.join(modelDir, name), 'utf-8'));
const tokenizer = TokenizerLoader.fromPreTrained({
  tokenizerJSON: readJson('tokenizer.json'),
  tokenizerConfig: readJson('tokenizer_config.json'),
});
const encode = (text, special) => {
  const ids = tokenizer.encode(text, { add_special_tokens: special });
  if (ids.some(x => typeof x !== 'number')) throw new Error(`the reference gave a non-number id for ${JSON.stringify(text)}`);
  return ids;
};

function writeAtomically(file, text) {
  fs.writeFileSync(file + '.tmp', text);
  fs.renameSync(file + '.tmp', file);
}

if (mode === 'corpus') {
  const files = fs.readdirSync(input).filter(f => f.endsWith('.txt')).sort();
  const lines = files.map(f => {
    const ids = encode(fs.readFileSync(path.join(input, f), 'utf-8'), false);
    return `${f}\t${ids.length}\t${ids.join(' ')}`;
  });
  writeAtomically(output, lines.join('\n') + '\n');
} else {
  const texts = JSON.parse(fs.readFileSync(input, 'utf-8')).map(hex => Buffer.from(hex, 'hex').toString('utf-8'));
  writeAtomically(output, JSON.stringify(texts.map(t => ({ ids: encode(t, false), with_special: encode(t, true) }))));
}
