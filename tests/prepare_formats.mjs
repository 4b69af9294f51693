// Writes the documents of a JSON lines file as a Parquet file's "text" column (with an "id"
// column before it), with parquet-wasm (tools/npm_packages.sh set parquet): dictionary
// encoding, snappy pages, two row groups. tests/prepare_formats.sh prepares it beside the
// JSON lines and expects the same tokens.
//   node prepare_formats.mjs NPM_ROOT IN.jsonl OUT.parquet
import fs from 'fs';
import path from 'path';
import { createRequire } from 'module';

const [root, input, output] = process.argv.slice(2);
const require = createRequire(path.join(root, 'node_modules', 'x.js'));
const pq = require('parquet-wasm');
const arrow = require('apache-arrow');

const texts = fs.readFileSync(input, 'utf8').split('\n').filter((l) => l.trim() !== '').map((l) => JSON.parse(l).text);
const n = texts.length;
const cols = [
  { field: new arrow.Field('id', new arrow.Int32(), false), data: arrow.vectorFromArray(Int32Array.from({ length: n }, (_, i) => i), new arrow.Int32()).data[0] },
  { field: new arrow.Field('text', new arrow.Utf8(), false), data: arrow.vectorFromArray(texts, new arrow.Utf8()).data[0] },
];
const schema = new arrow.Schema(cols.map((c) => c.field));
const data = arrow.makeData({ type: new arrow.Struct(schema.fields), length: n, nullCount: 0, children: cols.map((c) => c.data) });
const table = pq.Table.fromIPCStream(arrow.tableToIPC(new arrow.Table([new arrow.RecordBatch(schema, data)]), 'stream'));
const props = new pq.WriterPropertiesBuilder()
  .setCompression(pq.Compression.SNAPPY)
  .setDictionaryEnabled(true)
  .setMaxRowGroupSize(Math.ceil(n / 2))
  .build();
fs.writeFileSync(output, pq.writeParquet(table, props));
