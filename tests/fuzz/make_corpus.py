#!/usr/bin/env python3
"""Writes the seed corpora tests/fuzz/corpus/<target>/ (small valid and near-valid inputs).
Run from the repository root; the checkpoint manifest seed comes from the fuzz target itself
(ZAYA_FUZZ_WRITE_SEED, see fuzz_ckpt_manifest.cpp), so pass build-fuzz as the first argument
to refresh it."""
import json, os, struct, subprocess, sys

ROOT = os.path.join("tests", "fuzz", "corpus")
SPLIT = b"\n====\n"


def put(target, name, data):
    d = os.path.join(ROOT, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def safetensors(tensors, meta=None, pad=True, header_len=None):
    """tensors: [(name, dtype, shape, bytes)] -> file bytes."""
    h, off, blob = {}, 0, b""
    if meta is not None:
        h["__metadata__"] = meta
    for name, dt, shape, raw in tensors:
        h[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(raw)]}
        off += len(raw)
        blob += raw
    hs = json.dumps(h).encode()
    while pad and (len(hs) + 8) % 8:
        hs += b" "
    n = len(hs) if header_len is None else header_len
    return struct.pack("<Q", n) + hs + blob


f32 = lambda *v: struct.pack("<%df" % len(v), *v)

# --- safetensors
good = safetensors([("w", "F32", [2, 3], f32(0, 1, 2, 3, 4, 5)), ("b", "BF16", [2], b"\x80\x3f\x00\x40")],
                   meta={"format": "pt"})
put("safetensors", "valid", good)
put("safetensors", "valid_f16_f64_i32", safetensors([("h", "F16", [2], b"\x00\x3c\x00\x40"),
                                                   ("d", "F64", [1], struct.pack("<d", 1.5)),
                                                   ("i", "I32", [1], b"\x01\x00\x00\x00")]))
put("safetensors", "empty_tensor", safetensors([("e", "F32", [0, 4], b"")]))
put("safetensors", "truncated", good[: len(good) - 5])
put("safetensors", "header_too_long", safetensors([("w", "F32", [1], f32(1))], header_len=4096))
put("safetensors", "gap", struct.pack("<Q", 64) + json.dumps(
    {"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}).encode().ljust(64) + b"\0" * 8)
put("safetensors", "wrong_size", struct.pack("<Q", 64) + json.dumps(
    {"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}).encode().ljust(64) + b"\0" * 8)
put("safetensors", "bad_dtype", safetensors([("w", "Q4", [1], b"\0")]))
put("safetensors", "not_json", struct.pack("<Q", 8) + b"{not js}")

# --- model.safetensors.index.json (shards a.safetensors: x, y; b.safetensors: z)
put("hf_index", "valid", json.dumps({"metadata": {"total_size": 40},
                                     "weight_map": {"x": "a.safetensors", "y": "a.safetensors", "z": "b.safetensors"}}))
put("hf_index", "one_shard", json.dumps({"weight_map": {"z": "b.safetensors"}}))
put("hf_index", "missing_tensor", json.dumps({"weight_map": {"q": "a.safetensors"}}))
put("hf_index", "missing_shard", json.dumps({"weight_map": {"x": "c.safetensors"}}))
put("hf_index", "outside", json.dumps({"weight_map": {"x": "../a.safetensors"}}))
put("hf_index", "not_a_map", json.dumps({"weight_map": ["a.safetensors"]}))
put("hf_index", "truncated", json.dumps({"weight_map": {"x": "a.safetensors"}})[:20])

# --- model configs
tiny = open("configs/zaya1-tiny.toml").read()
put("model_toml", "zaya1_tiny", tiny)
put("model_toml", "zaya1_small", open("configs/zaya1-small.toml").read())
put("model_toml", "unknown_key", tiny + "\nfoo = 1\n")
put("model_toml", "bad_heads", tiny.replace("num_query_groups_list = 2", "num_query_groups_list = 3"))
put("model_toml", "list_fields", tiny.replace("ffn_hidden_size_list = 48", "ffn_hidden_size_list = [0, 48, 0, 48, 0, 48]"))
put("model_toml", "syntax_error", tiny.replace("hidden_size = 32", "hidden_size = = 32"))
hf = {"model_type": "zaya", "architectures": ["ZayaForCausalLM"], "hidden_size": 32, "vocab_size": 96,
      "num_attention_heads": 4, "head_dim": 8, "num_key_value_heads": 2, "cca_num_q_heads": [4] * 6,
      "num_query_groups_list": [2] * 6, "zaya_layers": ["a", 4] * 3, "ffn_hidden_size_list": [48] * 6,
      "zaya_mlp_expansion": [16] * 6, "moe_router_topk": 1, "cca_time0": 2, "cca_time1": 2, "zaya_use_mod": True,
      "zaya_use_eda": True, "partial_rotary_factor": 0.5, "rope_theta": 10000.0, "norm_epsilon": 1e-5,
      "max_position_embeddings": 512, "tie_word_embeddings": True, "pad_token_id": 0, "bos_token_id": 2,
      "eos_token_id": 1, "torch_dtype": "bfloat16", "transformers_version": "4.57.0"}
put("hf_config", "valid", json.dumps(hf, indent=1))
put("hf_config", "kv_disagree", json.dumps(dict(hf, num_key_value_heads=1)))
put("hf_config", "nonuniform", json.dumps(dict(hf, cca_num_q_heads=[4, 0, 2, 0, 4, 0])))
put("hf_config", "bad_type", json.dumps(dict(hf, hidden_size="32")))
put("hf_config", "tokenizer_as_config", json.dumps({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}}))
put("hf_config", "truncated", json.dumps(hf)[:100])

# --- run configs
put("run_toml", "demo", open("configs/recipes/demo.toml").read())
put("run_toml", "zaya1_base", open("configs/recipes/zaya1-base.toml").read())
run_small = """[run]
name = "r"
[model]
config = "model.toml"
[[data.sources]]
name = "a"
train = ["a/train_00000.bin"]
[[phases]]
tokens = 1000
seq_len = 16
mixture = { a = 1.0 }
[batch]
global_batch = 4
micro_batch = 2
"""
put("run_toml", "small_model_path", run_small)
put("run_toml", "hf_model_path", run_small.replace('config = "model.toml"', 'config = "config.json"'))
put("run_toml", "override", run_small.replace('config = "model.toml"', 'config = "model.toml"\nvocab_size = 512'))
put("run_toml", "unknown_key", run_small + "[optimizer]\nlrr = 1e-3\n")
put("run_toml", "bad_batch", run_small.replace("micro_batch = 2", "micro_batch = 3"))

# --- shards + meta.json
def shard(tokens, vocab, count=None, version=1, dtype=1, magic=b"ZAYATOK1"):
    n = len(tokens) if count is None else count
    h = magic + struct.pack("<IIQI", version, dtype, n, vocab)
    return h.ljust(64, b"\0") + struct.pack("<%dI" % len(tokens), *tokens)

meta = json.dumps({"train": {"shards": ["train_00000.bin"], "tokens": 5}, "val": {"shards": ["train_00000.bin"]}})
put("shard", "valid", shard([1, 2, 3, 0, 5], 8) + SPLIT + meta.encode())
put("shard", "valid_no_meta", shard([1, 2, 3], 8))
put("shard", "token_out_of_vocab", shard([1, 9], 8))
put("shard", "count_too_big", shard([1, 2], 8, count=3))
put("shard", "trailing", shard([1, 2], 8, count=1))
put("shard", "bad_magic", shard([1], 8, magic=b"ZAYATOK2"))
put("shard", "truncated_header", shard([1], 8)[:40])
put("shard", "meta_bad_shards", shard([1], 8) + SPLIT + b'{"train": {"shards": [1]}, "val": {"shards": []}}')
put("shard", "meta_no_val", shard([1], 8) + SPLIT + b'{"train": {"shards": ["x.bin"]}}')

# --- --ids files
put("ids", "valid", "2 17 33 4 1\n")
put("ids", "lines", "2\n17\n\n33\n")
put("ids", "one_id", "5\n")
put("ids", "negative", "1 -2 3\n")
put("ids", "overflow", "1 99999999999999999999 3\n")
put("ids", "junk", "1 2x 3\n")

# --- nccl-tests text (first byte picks the file name)
cluster = open("tests/data/size/cluster-a.txt", "rb").read()
put("nccl", "cluster_a", b"\x00" + cluster)
put("nccl", "cluster_a_named", b"\x01" + cluster)
put("nccl", "no_ranks", b"\x00" + b"\n".join(l for l in cluster.split(b"\n") if b"Rank" not in l and b"nGpus" not in l))
put("nccl", "bad_row", b"\x00" + cluster.replace(b"84.04    0.01", b"84.04    x.01", 1))
put("nccl", "no_rows", b"\x00# nThread 1 nGpus 8\n# Avg bus bandwidth : 1.0\n")
put("nccl", "reduce_root", b"\x00# nThread 1 nGpus 4\n 1024 256 float sum 0 10.0 0.1 0.1 0 10.0 0.1 0.1 0\n")

# --- bench profile directory: gemm.csv, mem.csv, peak.json, comm.csv, elementwise.json, nccl.txt
b = "tests/data/size/bench/"
parts = [open(b + n, "rb").read() for n in ("gemm.csv", "mem.csv", "peak.json", "comm.csv", "elementwise.json")]
put("bench_profile", "full", SPLIT.join(parts + [cluster]))
put("bench_profile", "gemm_mem_only", SPLIT.join(parts[:2]))
put("bench_profile", "gemm_peak", SPLIT.join([parts[0], b"-", parts[2]]))
put("bench_profile", "bad_header", SPLIT.join([parts[0].replace(b"tflops", b"tflop", 1), parts[1]]))
put("bench_profile", "no_memory", SPLIT.join([parts[0], b"-", b"{}"]))
put("bench_profile", "bad_peak", SPLIT.join([parts[0], parts[1], b'{"fp32_tflops": "x"}']))
put("bench_profile", "comm_bad_field", SPLIT.join(parts[:3] + [parts[3].replace(b"4.06", b"4..06", 1)]))
put("bench_profile", "elementwise_bad", SPLIT.join(parts[:4] + [b'{"exp_f32_per_s": []}']))

# --- tokenizer.json [==== tokenizer_config.json [==== text]]
vocab = {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3}
for i in range(256):
    vocab["<0x%02X>" % i] = 4 + i
base = ["\u2581", "h", "e", "l", "o", "w", "r", "d", "he", "ll", "hell", "hello", "\u2581hello", "\u2581w", "or", "\u2581wor", "\u2581worl", "\u2581world"]
for p in base:
    if p not in vocab:
        vocab[p] = len(vocab)
tok = {"version": "1.0", "truncation": None, "padding": None,
       "added_tokens": [{"id": 0, "content": "<pad>", "special": True}, {"id": 1, "content": "<eos>", "special": True},
                        {"id": 2, "content": "<bos>", "special": True}, {"id": 3, "content": "<unk>", "special": True},
                        {"id": len(vocab), "content": "<b>", "special": False, "lstrip": False, "rstrip": False}],
       "normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"},
       "pre_tokenizer": {"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious", "invert": False},
       "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<bos>", "type_id": 0}},
                                                                    {"Sequence": {"id": "A", "type_id": 0}}]},
       "decoder": {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
                                                   {"type": "ByteFallback"}, {"type": "Fuse"},
                                                   {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
       "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                 "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                 "vocab": vocab,
                 "merges": [["h", "e"], ["l", "l"], ["he", "ll"], ["hell", "o"], ["\u2581", "hello"], ["\u2581", "w"],
                            "o r", ["\u2581w", "or"], ["\u2581wor", "l"], ["\u2581worl", "d"]]}}
cfg = {"add_bos_token": True, "add_eos_token": False, "bos_token": "<bos>", "eos_token": "<eos>",
       "pad_token": "<pad>", "unk_token": {"content": "<unk>"}}
tj = json.dumps(tok, ensure_ascii=False).encode()
put("tokenizer", "valid", tj + SPLIT + json.dumps(cfg).encode() + SPLIT + "hello world <b> \xe9\u00ff!".encode())
put("tokenizer", "no_config", tj)
put("tokenizer", "bad_merge", tj.replace(b'"o r"', b'"o q"'))
put("tokenizer", "regex", tj.replace(b'{"String": " "}, "behavior"', b'{"Regex": " "}, "behavior"'))
put("tokenizer", "config_unknown_bos", tj + SPLIT + b'{"bos_token": "<nope>"}')
put("tokenizer", "wordpiece", b'{"model": {"type": "WordPiece", "vocab": {"a": 0}}}')
put("tokenizer", "config_as_tokenizer", json.dumps(cfg).encode())

# --- GGUF: header, metadata of every scalar type and arrays, tensor infos, aligned data
def gguf(kvs, tensors, version=3, align=32):
    """kvs: [(key, type, packed value bytes)]; tensors: [(name, dims, ggml type, bytes)]."""
    gs = lambda b: struct.pack("<Q", len(b)) + b
    out = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kvs))
    for k, t, v in kvs:
        out += gs(k.encode()) + struct.pack("<I", t) + v
    off, blob = 0, b""
    for name, dims, ty, raw in tensors:
        out += gs(name.encode()) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        out += struct.pack("<IQ", ty, off)
        blob += raw + b"\0" * ((-len(raw)) % align)
        off = len(blob)
    out += b"\0" * ((-len(out)) % align)
    return out + blob


gstr = lambda b: struct.pack("<Q", len(b)) + b
kvs = [("general.architecture", 8, gstr(b"zaya")), ("general.alignment", 4, struct.pack("<I", 32)),
       ("zaya.block_count", 4, struct.pack("<I", 2)), ("zaya.rope_theta", 6, struct.pack("<f", 1e4)),
       ("zaya.neg", 5, struct.pack("<i", -3)), ("zaya.u64", 10, struct.pack("<Q", 1 << 40)),
       ("zaya.i64", 11, struct.pack("<q", -1)), ("zaya.f64", 12, struct.pack("<d", 0.5)),
       ("zaya.flag", 7, b"\x01"), ("zaya.u8", 0, b"\x07"), ("zaya.i16", 3, struct.pack("<h", -2)),
       ("tokenizer.ggml.tokens", 9, struct.pack("<IQ", 8, 2) + gstr(b"<s>") + gstr(b"a")),
       ("tokenizer.ggml.scores", 9, struct.pack("<IQ", 6, 2) + f32(0, -1))]
q8 = struct.pack("<e", 0.5) + bytes(range(32))
tensors = [("token_embd.weight", [4, 2], 0, f32(*range(8))), ("blk.0.ffn_exp.3.linear_fc1.weight", [32, 1], 8, q8),
           ("output_norm.weight", [4], 30, b"\x80\x3f" * 4)]
good = gguf(kvs, tensors)
put("gguf", "valid", good)
put("gguf", "v2_no_tensors", gguf(kvs[:3], [], version=2))
put("gguf", "truncated", good[: len(good) - 20])
put("gguf", "bad_alignment", good.replace(struct.pack("<I", 32), struct.pack("<I", 24), 1))
put("gguf", "unknown_type", gguf(kvs[:1], [("w", [4], 99, f32(1, 2, 3, 4))]))
two = gguf(kvs[:1], [("a", [8], 0, f32(*range(8))), ("b", [8], 0, f32(*range(8)))])
put("gguf", "overlap", two.replace(struct.pack("<IQ", 0, 32), struct.pack("<IQ", 0, 0), 1))
put("gguf", "huge_counts", b"GGUF" + struct.pack("<IQQ", 3, 1 << 62, 1 << 62))
put("gguf", "array_of_arrays", gguf([("x", 9, struct.pack("<IQ", 9, 1))], []))

# --- SentencePiece .model [==== text]: tiny models spm_train writes (identity normalizer)
import shutil, tempfile
if shutil.which("spm_train"):
    with tempfile.TemporaryDirectory() as tmp:
        txt = os.path.join(tmp, "t.txt")
        with open(txt, "wb") as f:
            f.write(open(os.path.join("tests", "data", "kjv_sample.txt"), "rb").read()[:20000])
        for kind in ("bpe", "unigram", "char", "word"):
            pre = os.path.join(tmp, kind)
            subprocess.run(["spm_train", "--input=" + txt, "--model_prefix=" + pre, "--vocab_size=60",
                            "--model_type=" + kind, "--normalization_rule_name=identity", "--minloglevel=2"],
                           check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            m = open(pre + ".model", "rb").read()
            put("spm_model", kind, m + SPLIT + b"In the beginning God created \xe2\x96\x81 \xff")
        put("spm_model", "truncated", m[: len(m) // 2])
put("spm_model", "a_tokenizer_json", tj)
put("spm_model", "not_protobuf", b"\x0a\xff\xff\xff\xff\x0f" + b"x" * 32)

# --- eval tasks: task.json ==== docs.jsonl ==== docs.csv ==== mmlu test csv ==== mmlu dev csv
docs = b'{"question": "In the beginning God created the", "answer": "earth", "choices": {"text": ["earth", "sea"], "label": ["A", "B"]}, "answerKey": "A", "ctx": "a", "endings": ["b", "c"], "label": "0", "goal": "g", "sol1": "x", "sol2": "y", "sentence": "The _ fell.", "option1": "rain", "option2": "sky", "text": "And God said light"}\n' * 3
csv = b'question,answer\n"Let there be","light"\n"a ""quoted"", field",b\n'
mmlu = b"What is 7 + 5?,11,12,13,14,B\n\"Which, with a comma?\",a,b,c,d,A\n"
mc = {"task": "t", "output_type": "multiple_choice", "data_files": {"train": "docs.jsonl", "test": "docs.jsonl"},
      "num_fewshot": 2, "doc_to_text": "{{question}}", "doc_to_choice": ["{{answer}}", "water"], "doc_to_target": "0"}
put("eval_task", "multiple_choice", SPLIT.join([json.dumps(mc).encode(), docs, csv, mmlu, mmlu]))
put("eval_task", "choice_field", SPLIT.join([json.dumps(dict(mc, doc_to_choice="choices.text", doc_to_target="answerKey")).encode(), docs]))
put("eval_task", "csv_generate", SPLIT.join([json.dumps({"task": "g", "output_type": "generate_until", "data_files": {"test": "docs.csv"},
                                                       "doc_to_text": "Q: {{question}}", "doc_to_target": "{{answer}}"}).encode(), docs, csv]))
put("eval_task", "rolling", SPLIT.join([json.dumps({"task": "r", "output_type": "loglikelihood_rolling", "data_files": {"test": "docs.jsonl"},
                                                  "doc_to_target": "{{text}}"}).encode(), docs]))
put("eval_task", "bad_jsonl", SPLIT.join([b"{}", b'{"a": 1}\n{"a": \n', b"a,b\n1\n", b"q,a,b\n"]))

# --- hardware profile TOML (configs/hardware/*.toml)
for name in sorted(os.listdir(os.path.join("configs", "hardware"))):
    if name.endswith(".toml"):
        put("hardware", name[:-5], open(os.path.join("configs", "hardware", name), "rb").read())
put("hardware", "not_toml", b"name = \n[[tiles]\n")

# --- Megatron indexed dataset: PREFIX.idx [ ==== PREFIX.bin ]
def megatron_idx(lengths, code=8, size=2, pointers=None, docs=None, version=1, magic=b"MMIDIDX\x00\x00"):
    if pointers is None:
        pointers, p = [], 0
        for n in lengths:
            pointers.append(p)
            p += n * size
    if docs is None:
        docs = list(range(len(lengths) + 1))
    return (magic + struct.pack("<QBQQ", version, code, len(lengths), len(docs)) +
            struct.pack("<%di" % len(lengths), *lengths) + struct.pack("<%dq" % len(pointers), *pointers) +
            struct.pack("<%dq" % len(docs), *docs))


meg_bin = struct.pack("<9H", 5, 6, 1, 7, 8, 9, 1, 4, 1)
put("megatron_idx", "valid", megatron_idx([3, 4, 2]) + SPLIT + meg_bin)
put("megatron_idx", "valid_int32", megatron_idx([3, 4, 2], 4, 4) + SPLIT + struct.pack("<9i", 5, 6, 1, 7, 8, 9, 1, 4, 1))
put("megatron_idx", "valid_int64_negative", megatron_idx([2], 5, 8) + SPLIT + struct.pack("<2q", -3, 1 << 40))
put("megatron_idx", "empty", megatron_idx([]))
put("megatron_idx", "multimodal", megatron_idx([3, 4, 2]) + b"\x00\x01\x00" + SPLIT + meg_bin)
put("megatron_idx", "short_bin", megatron_idx([3, 4, 2]) + SPLIT + meg_bin[:16])
put("megatron_idx", "pointer_gap", megatron_idx([3, 4, 2], pointers=[0, 8, 6]) + SPLIT + meg_bin)
put("megatron_idx", "docs_unordered", megatron_idx([3, 4, 2], docs=[0, 2, 1, 3]) + SPLIT + meg_bin)
put("megatron_idx", "float_dtype", megatron_idx([3, 4, 2], 7, 4) + SPLIT + meg_bin)
put("megatron_idx", "huge_counts", b"MMIDIDX\x00\x00" + struct.pack("<QBQQ", 1, 8, 1 << 62, 1 << 62) + b"\x00" * 32)
put("megatron_idx", "truncated", megatron_idx([3, 4, 2])[:40])

# --- checkpoint manifest: written by the target itself (a real CheckpointWriter manifest)
if len(sys.argv) > 1:
    d = os.path.join(ROOT, "ckpt_manifest")
    os.makedirs(d, exist_ok=True)
    seed = os.path.join(d, "valid")
    env = dict(os.environ, ZAYA_FUZZ_WRITE_SEED=os.path.abspath(seed))
    subprocess.run([os.path.join(sys.argv[1], "fuzz_ckpt_manifest"), "-runs=0"], env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    m = json.load(open(seed))
    put("ckpt_manifest", "no_tensors", json.dumps(dict(m, tensors=[])))
    t0 = m["tensors"][0]
    bad = json.loads(json.dumps(m)); bad["tensors"][0]["slices"][0]["xxh3"] = "0" * 16
    put("ckpt_manifest", "bad_checksum", json.dumps(bad))
    bad = json.loads(json.dumps(m)); bad["tensors"][0]["slices"][0]["file"] = "../params.safetensors"
    put("ckpt_manifest", "outside_file", json.dumps(bad))
    bad = json.loads(json.dumps(m)); bad["tensors"][0]["numel"] = 99
    put("ckpt_manifest", "bad_numel", json.dumps(bad))
    bad = json.loads(json.dumps(m)); bad["format"] = "zaya.ckpt.v0"
    put("ckpt_manifest", "bad_format", json.dumps(bad))
    put("ckpt_manifest", "truncated", json.dumps(m)[:200])
    put("ckpt_manifest", "with_data_file", json.dumps(m).encode() + SPLIT + safetensors([("x", "F32", [1], f32(1))]))
