// The Parquet reader's oracle (tests/parquet_oracle.sh): parquet-wasm, arrow-rs's Parquet
// writer built to WebAssembly (tools/npm_packages.sh set parquet), writes the same strings
// in every combination zaya reads, and files with features zaya refuses.
//   node parquet_oracle.mjs NPM_ROOT write DIR    files, DIR/cases.txt and the expected values
//   node parquet_oracle.mjs NPM_ROOT seeds DIR    small files for the fuzz corpus
//   node parquet_oracle.mjs NPM_ROOT check DIR    for each case, DIR/FILE.jsonl (zaya dev
//                                                 parquet-dump's lines) equals the values written
import fs from 'fs';
import path from 'path';
import { createRequire } from 'module';

const [root, mode, ...args] = process.argv.slice(2);
const require = createRequire(path.join(root, 'node_modules', 'x.js'));
// The writer only where it writes (its WebAssembly takes a while to load).
const pq = mode === 'check' ? null : require('parquet-wasm');
const arrow = mode === 'check' ? null : require('apache-arrow');

// A fixed-seed generator (mulberry32), so every run writes the same files.
function rng(seed) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const WORDS = ['the', 'of', 'and', 'héllo', 'naïve', '日本語', 'данные', '🙂', 'ünïcödé', 'tab\there', 'quote"s',
  'back\\slash', 'line\nbreak', 'crlf\r\nline', 'ctl\u0001x', 'emoji👩‍💻', 'Ω≈ç√', 'a', 'zaya', 'parquet'];
function text(r, words) {
  const out = [];
  for (let i = 0; i < words; ++i) out.push(WORDS[Math.floor(r() * WORDS.length)]);
  return out.join(r() < 0.2 ? '\n' : ' ');
}

// n rows: nulls (when nullable), repeats (so dictionaries pay), an empty string, and `big`
// characters in one row (over 1 MB of UTF-8 when big > 0).
function values(n, nullable, big, seed) {
  const r = rng(seed);
  const common = Array.from({ length: 12 }, (_, i) => `common value ${i}: ${text(r, 3)}`);
  const v = [];
  for (let i = 0; i < n; ++i) {
    if (nullable && i % 13 === 5) v.push(null);
    else if (i % 3 === 0) v.push(common[Math.floor(r() * common.length)]);
    else v.push(`${i} ${text(r, 1 + Math.floor(r() * 40))}`);
  }
  if (n > 7) v[7] = '';
  if (big > 0 && n > 100) {
    const parts = [];
    let len = 0;
    while (len < big) { const w = text(r, 50); parts.push(w); len += w.length + 1; }
    v[100] = parts.join(' ');
  }
  return v;
}

function column(name, type, vals, nullable) {
  const vec = arrow.vectorFromArray(vals, type);
  if (vec.data.length !== 1) throw new Error(`column ${name} came in ${vec.data.length} chunks`);
  return { field: new arrow.Field(name, type, nullable), data: vec.data[0] };
}

function table(cols) {
  const schema = new arrow.Schema(cols.map((c) => c.field));
  const n = cols[0].data.length;
  const data = arrow.makeData({ type: new arrow.Struct(schema.fields), length: n, nullCount: 0, children: cols.map((c) => c.data) });
  return pq.Table.fromIPCStream(arrow.tableToIPC(new arrow.Table([new arrow.RecordBatch(schema, data)]), 'stream'));
}

// id (INT32) | text | url: the text column sits between two others that zaya skips.
function dataset(vals) {
  const n = vals.length;
  return () => table([
    column('id', new arrow.Int32(), Int32Array.from({ length: n }, (_, i) => i), false),
    column('text', new arrow.Utf8(), vals, vals.includes(null)),
    column('url', new arrow.Utf8(), Array.from({ length: n }, (_, i) => (i % 4 ? `https://example.com/${i}` : null)), true),
  ]);
}

const C = pq?.Compression;
const CODECS = pq ? { none: C.UNCOMPRESSED, snappy: C.SNAPPY, gzip: C.GZIP, zstd: C.ZSTD } : {};

function props({ codec = C.SNAPPY, v2 = false, dict = true, rows = 700, page = 8192, stats = true, encoding } = {}) {
  let b = new pq.WriterPropertiesBuilder()
    .setCompression(codec)
    .setWriterVersion(v2 ? pq.WriterVersion.V2 : pq.WriterVersion.V1)
    .setDictionaryEnabled(dict)
    .setMaxRowGroupSize(rows)
    .setDataPageSizeLimit(page)
    .setWriteBatchSize(64);
  if (!stats) b = b.setStatisticsEnabled(pq.EnabledStatistics.None);
  if (encoding !== undefined) b = b.setColumnEncoding('text', encoding);
  return b.build();
}

function write(file, tbl, p) { fs.writeFileSync(file, pq.writeParquet(tbl, p)); }

if (mode === 'write') {
  const dir = args[0];
  fs.mkdirSync(dir, { recursive: true });
  const cases = [];
  const sets = { nullable: values(2500, true, 1_100_000, 1), required: values(1500, false, 0, 2) };
  for (const [name, vals] of Object.entries(sets)) fs.writeFileSync(path.join(dir, `${name}.json`), JSON.stringify(vals));
  // Every codec x page version x PLAIN / dictionary, several row groups and many pages each.
  for (const [cname, codec] of Object.entries(CODECS)) {
    for (const v2 of [false, true]) {
      for (const dict of [false, true]) {
        const f = `nullable-${cname}-${v2 ? 'v2' : 'v1'}-${dict ? 'dict' : 'plain'}.parquet`;
        // PLAIN named: arrow-rs's v2 writer otherwise falls back to DELTA_BYTE_ARRAY.
        write(path.join(dir, f), dataset(sets.nullable)(), props({ codec, v2, dict, encoding: pq.Encoding.PLAIN }));
        cases.push(`${f} nullable`);
      }
    }
  }
  // A required column; one row group of large pages; no statistics.
  write(path.join(dir, 'required-zstd-v2-dict.parquet'), dataset(sets.required)(), props({ codec: C.ZSTD, v2: true, encoding: pq.Encoding.PLAIN }));
  write(path.join(dir, 'required-gzip-v1-plain.parquet'), dataset(sets.required)(), props({ codec: C.GZIP, dict: false, rows: 1e6, page: 1 << 20, stats: false }));
  cases.push('required-zstd-v2-dict.parquet required', 'required-gzip-v1-plain.parquet required');
  fs.writeFileSync(path.join(dir, 'cases.txt'), cases.join('\n') + '\n');

  // What zaya refuses.
  const small = dataset(values(300, true, 0, 3));
  const E = pq.Encoding;
  write(path.join(dir, 'delta-length.parquet'), small(), props({ dict: false, v2: true, encoding: E.DELTA_LENGTH_BYTE_ARRAY }));
  write(path.join(dir, 'delta-byte-array.parquet'), small(), props({ dict: false, v2: true, encoding: E.DELTA_BYTE_ARRAY }));
  write(path.join(dir, 'lz4.parquet'), small(), props({ codec: C.LZ4_RAW }));
  write(path.join(dir, 'brotli.parquet'), small(), props({ codec: C.BROTLI }));
  const lists = arrow.vectorFromArray([['a'], ['b', 'c'], null], new arrow.List(new arrow.Field('item', new arrow.Utf8(), true)));
  write(path.join(dir, 'list.parquet'), table([{ field: new arrow.Field('text', lists.type, true), data: lists.data[0] }]), props());
  // Only the text column, gzip (its CRC catches any changed byte), no statistics: the middle
  // of the file is inside the column's pages, for the corrupt-page case.
  write(path.join(dir, 'corrupt-me.parquet'), table([column('text', new arrow.Utf8(), values(2000, true, 0, 4), true)]),
    props({ codec: C.GZIP, stats: false, page: 4096 }));
} else if (mode === 'seeds') {
  const dir = args[0];
  fs.mkdirSync(dir, { recursive: true });
  const vals = values(24, true, 0, 5).map((v) => (v === null ? v : v.slice(0, 40)));
  const tbl = () => table([column('text', new arrow.Utf8(), vals, true)]);
  const seeds = { 'plain-v1-none': { codec: C.UNCOMPRESSED, dict: false }, 'dict-v1-snappy': {},
    'dict-v2-zstd': { codec: C.ZSTD, v2: true }, 'plain-v2-gzip': { codec: C.GZIP, v2: true, dict: false },
    'delta-v2': { v2: true, dict: false, encoding: pq.Encoding.DELTA_BYTE_ARRAY } };
  for (const [name, p] of Object.entries(seeds)) {
    write(path.join(dir, `${name}.parquet`), tbl(), props({ rows: 10, page: 128, stats: false, encoding: pq.Encoding.PLAIN, ...p }));
  }
} else if (mode === 'check') {
  const dir = args[0];
  const sets = {};
  let failed = 0, passed = 0;
  for (const line of fs.readFileSync(path.join(dir, 'cases.txt'), 'utf8').trim().split('\n')) {
    const [file, set] = line.split(' ');
    sets[set] ??= JSON.parse(fs.readFileSync(path.join(dir, `${set}.json`), 'utf8'));
    const want = sets[set];
    const lines = fs.readFileSync(path.join(dir, `${file}.jsonl`), 'utf8').split('\n');
    if (lines.at(-1) === '') lines.pop();
    const bad = [];
    if (lines.length !== want.length) bad.push(`${lines.length} rows, the writer wrote ${want.length}`);
    for (let i = 0; i < Math.min(lines.length, want.length) && bad.length < 5; ++i) {
      const got = JSON.parse(lines[i]);
      if (got !== want[i]) bad.push(`row ${i}: ${JSON.stringify(got)?.slice(0, 80)} != ${JSON.stringify(want[i])?.slice(0, 80)}`);
    }
    if (bad.length) {
      failed++;
      console.log(`FAIL: ${file}: zaya's values differ from the writer's`);
      for (const b of bad) console.log(`  ${b}`);
    } else {
      passed++;
    }
  }
  console.log(`zaya read the writer's strings exactly in ${passed} of ${passed + failed} files`);
  process.exit(failed ? 1 : 0);
} else {
  console.error('usage: parquet_oracle.mjs NPM_ROOT write|seeds|check DIR');
  process.exit(2);
}
