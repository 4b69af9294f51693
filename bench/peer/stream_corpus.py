#!/usr/bin/env python3
"""A JSON lines corpus of a given size for bench/prepare_stream.sh, written to stdout.

  stream_corpus.py MB DOCS.jsonl...

DOCS.jsonl: one JSON string a line (bench/peer/tokenizer_texts.py's docs.jsonl). Copies of all
the documents, in order, as {"text": "copy K\\n" + document} lines, until the output holds MB
x 1e6 bytes (the last line whole): the counter keeps every document distinct, so dedup drops
none. Deterministic for given inputs."""
import json
import sys


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    limit = int(float(sys.argv[1]) * 1e6)
    docs = []
    for p in sys.argv[2:]:
        with open(p, encoding="utf-8") as f:
            docs += [json.loads(l) for l in f if l.strip()]
    if not docs:
        sys.exit("stream_corpus.py: no documents")
    out, n, k = sys.stdout.buffer, 0, 0
    while n < limit:
        for d in docs:
            line = (json.dumps({"text": f"copy {k}\n{d}"}, ensure_ascii=False) + "\n").encode("utf-8")
            out.write(line)
            n += len(line)
            if n >= limit:
                break
        k += 1


if __name__ == "__main__":
    main()
