// Writes the GPT-2 token ids that the reference encoder (the npm package gpt-3-encoder, a JavaScript
// port of GPT-2's encoder) gives for every .txt file of a folder, one line per file:
//   FILE_NAME <TAB> TOKEN_COUNT <TAB> ID ID ID ...
// Run by scripts/fetch-data once; tests/data compares linattn's Gpt2Tokenizer against the result.
// usage: node data/gpt2_reference.js ENCODER_PACKAGE_DIR CORPUS_DIR OUT_FILE
'use strict';
const fs = require('fs');
const path = require('path');

const [packageDir, corpusDir, outFile] = process.argv.slice(2);
if (!outFile) {
  console.error('usage: node gpt2_reference.js ENCODER_PACKAGE_DIR CORPUS_DIR OUT_FILE');
  process.exit(2);
}
const { encode } = require(path.resolve(packageDir, 'Encoder.js'));
const files = fs.readdirSync(corpusDir).filter(f => f.endsWith('.txt')).sort();
const lines = [];
for (const f of files) {
  const ids = encode(fs.readFileSync(path.join(corpusDir, f), 'utf-8'));
  if (ids.some(x => typeof x !== 'number')) throw new Error(`${f}: the reference encoder gave a non-number id`);
  lines.push(`${f}\t${ids.length}\t${ids.join(' ')}`);
}
fs.writeFileSync(outFile + '.tmp', lines.join('\n') + '\n');
fs.renameSync(outFile + '.tmp', outFile);
