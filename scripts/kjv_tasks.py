#!/usr/bin/env python3
"""Builds the KJV evaluation tasks from the corpus (scripts/corpus.sh output) into OUTDIR.

  kjv_tasks.py CORPUS OUTDIR [--verse-items 300] [--word-items 200] [--seed 1]

kjv_verse: verse completion in HellaSwag's shape. The first half of a verse (by words) is
  the context; the endings are its true second half and the second halves of 3 other
  verses of similar length, in a random order; `label` is the true one. Scored with
  acc / acc_norm like hellaswag (kjv_verse.json, a zaya eval task file).
kjv_word: LAMBADA-style. A verse without its last word is the context and " word" the
  continuation (trailing punctuation dropped); acc = the word is the greedy continuation,
  perplexity over the word's log-likelihood (kjv_word.json).
Deterministic for a given corpus and seed. Python's standard library only.
"""
import argparse
import json
import os
import random
import re
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("corpus")
    ap.add_argument("outdir")
    ap.add_argument("--verse-items", type=int, default=300)
    ap.add_argument("--word-items", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    try:
        lines = open(a.corpus, encoding="utf-8").read().split("\n")
    except OSError as e:
        sys.exit(f"kjv_tasks.py: error: {a.corpus}: {e.strerror}")
    verses = [l.strip() for l in lines if len(l.split()) >= 10]
    if len(verses) < 4 * (a.verse_items + a.word_items):
        sys.exit(f"kjv_tasks.py: error: {a.corpus}: {len(verses)} verses of 10+ words; too few")
    rng = random.Random(a.seed)
    pool = list(range(len(verses)))
    rng.shuffle(pool)
    verse_idx, word_idx = pool[: a.verse_items], pool[a.verse_items : a.verse_items + a.word_items]

    def halves(v):
        w = v.split()
        k = len(w) // 2
        return " ".join(w[:k]), " ".join(w[k:])

    by_len = {}
    for i, v in enumerate(verses):
        by_len.setdefault(len(halves(v)[1].split()), []).append(i)
    docs = []
    for n, i in enumerate(verse_idx):
        ctx, true_end = halves(verses[i])
        L = len(true_end.split())
        cands = [j for d in (0, -1, 1, -2, 2, -3, 3) for j in by_len.get(L + d, []) if j != i]
        others = []
        while len(others) < 3:  # distractors of about the same length: length alone tells nothing
            j = cands[rng.randrange(len(cands))]
            e = halves(verses[j])[1]
            if j != i and e != true_end and e not in others:
                others.append(e)
        label = rng.randrange(4)
        endings = others[:label] + [true_end] + others[label:]
        docs.append({"id": n, "ctx": ctx, "endings": endings, "label": label})
    words = []
    for n, i in enumerate(word_idx):
        v = re.sub(r"[^\w]+$", "", verses[i])
        cut = v.rfind(" ")
        words.append({"id": n, "text": v, "context": v[:cut], "target": v[cut:]})

    os.makedirs(os.path.join(a.outdir, "kjv_verse"), exist_ok=True)
    os.makedirs(os.path.join(a.outdir, "kjv_word"), exist_ok=True)
    for path, rows in ((os.path.join(a.outdir, "kjv_verse", "validation.jsonl"), docs),
                       (os.path.join(a.outdir, "kjv_word", "test.jsonl"), words)):
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
        os.replace(path + ".tmp", path)
    tasks = {
        "kjv_verse.json": {"task": "kjv_verse", "output_type": "multiple_choice",
                           "data_files": {"validation": "kjv_verse/validation.jsonl"}, "test_split": "validation",
                           "doc_to_text": "{{ctx}}", "doc_to_choice": "endings", "doc_to_target": "label",
                           "metric_list": [{"metric": "acc"}, {"metric": "acc_norm"}]},
        "kjv_word.json": {"task": "kjv_word", "output_type": "loglikelihood",
                          "data_files": {"test": "kjv_word/test.jsonl"}, "test_split": "test",
                          "doc_to_text": "{{context}}", "doc_to_target": "{{target}}",
                          "metric_list": [{"metric": "perplexity"}, {"metric": "acc"}]},
    }
    for name, t in tasks.items():
        with open(os.path.join(a.outdir, name), "w") as f:
            json.dump(t, f, indent=2)
            f.write("\n")
    print(f"wrote {a.outdir}: kjv_verse ({len(docs)} items), kjv_word ({len(words)} items) from {len(verses)} verses")


if __name__ == "__main__":
    main()
