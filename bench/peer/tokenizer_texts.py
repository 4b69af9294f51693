#!/usr/bin/env python3
"""The texts of bench/tokenizer_peer.sh, each as two JSONL files of JSON strings: docs.jsonl
(one document a line) and lines.jsonl (each non-empty line of those documents, without its
newline), so both encoders get exactly the same strings; sample_docs.jsonl and
sample_lines.jsonl hold every k-th document (about 2 MB in all), on which the peer's setups
are compared.

  tokenizer_texts.py kjv KJV.txt OUTDIR       the KJV from scripts/corpus.sh: a document per
                                              chapter (its verses joined with newlines)
  tokenizer_texts.py mancode OUTDIR [--bytes N]
      a multilingual and code-heavy text built from what a Debian machine has, in a fixed
      order: every translated manual page (roff source, /usr/share/man/LANG/, all languages
      but English: German, French, Japanese, Russian, Ukrainian, Chinese, Korean, ...), then
      the C and C++ headers under /usr/include, each file one document, files in sorted
      path order, until N bytes (default 24,000,000; the last document is whole). Files that
      are not valid UTF-8 or hold a NUL byte are left out. It is deterministic for a given set
      of installed packages; the script prints its size and SHA-256 for the record.
"""
import gzip
import hashlib
import json
import os
import sys


def write_jsonl(path, items):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        for s in items:
            f.write(json.dumps(s, ensure_ascii=False) + "\n")
    os.replace(tmp, path)


def write_text(outdir, docs, what):
    os.makedirs(outdir, exist_ok=True)
    lines = [l for d in docs for l in d.split("\n") if l]
    write_jsonl(os.path.join(outdir, "docs.jsonl"), docs)
    write_jsonl(os.path.join(outdir, "lines.jsonl"), lines)
    total = sum(len(d.encode("utf-8")) for d in docs)
    sample = docs[:: max(1, -(-total // 2_000_000))]
    write_jsonl(os.path.join(outdir, "sample_docs.jsonl"), sample)
    write_jsonl(os.path.join(outdir, "sample_lines.jsonl"), [l for d in sample for l in d.split("\n") if l])
    blob = "\x00".join(docs).encode("utf-8")
    print(json.dumps({"text": what, "bytes": total, "documents": len(docs),
                      "lines": len(lines), "sha256": hashlib.sha256(blob).hexdigest()}))


def kjv(src, outdir):
    with open(src, encoding="utf-8") as f:
        text = f.read()
    docs = [c.strip("\n") for c in text.split("\n\n") if c.strip("\n")]
    write_text(outdir, docs, "KJV Bible (scripts/corpus.sh), a document per chapter")


def read_utf8(path):
    try:
        raw = gzip.open(path).read() if path.endswith(".gz") else open(path, "rb").read()
        s = raw.decode("utf-8")
    except (OSError, UnicodeDecodeError, EOFError):
        return None
    return None if "\x00" in s or not s.strip() else s


def files_under(top, keep):
    out = []
    for d, dirs, names in os.walk(top):
        dirs.sort()
        out += [os.path.join(d, n) for n in names if keep(n) and os.path.isfile(os.path.join(d, n))]
    return sorted(out)


def mancode(outdir, limit):
    man = "/usr/share/man"
    langs = sorted(l for l in os.listdir(man) if not l.startswith("man") and os.path.isdir(os.path.join(man, l)))
    paths = [p for l in langs for p in files_under(os.path.join(man, l), lambda n: True)]
    paths += files_under("/usr/include", lambda n: n.endswith((".h", ".hpp", ".hh", ".hxx", ".tcc")))
    docs, total = [], 0
    for p in paths:
        if os.path.islink(p):
            continue
        s = read_utf8(p)
        if s is None:
            continue
        docs.append(s)
        total += len(s.encode("utf-8"))
        if total >= limit:
            break
    if total < limit:
        sys.exit(f"tokenizer_texts.py: only {total} bytes of manual pages and headers on this machine (asked {limit})")
    write_text(outdir, docs, f"translated manual pages ({', '.join(langs)}) then C/C++ headers of /usr/include, "
                             f"a document per file, {total} bytes")


if __name__ == "__main__":
    a = sys.argv[1:]
    if len(a) == 3 and a[0] == "kjv":
        kjv(a[1], a[2])
    elif len(a) in (2, 4) and a[0] == "mancode":
        mancode(a[1], int(a[3]) if len(a) == 4 and a[2] == "--bytes" else 24_000_000)
    else:
        sys.exit(__doc__)
