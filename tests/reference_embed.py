#!/usr/bin/env python3
"""Independent reference embeddings for Cairn's fidelity checks.

Reads JSON lines of texts (each line a JSON string, or an object with a
"text" field) from stdin or from the file named as the first argument, and
prints one JSON line per text: the embedding as a list of floats.

The computation uses only the Python `onnxruntime`, `tokenizers` and `numpy`
packages on the same model files Cairn uses (models/all-minilm-l6-v2-int8):
tokenize with truncation to 256 tokens, run the ONNX model with
input_ids / attention_mask / token_type_ids, mean-pool `last_hidden_state`
with the attention mask, and L2-normalise.

With `--time THREADS SPIN` it measures instead of printing vectors (the vault
benchmark's "raw ONNX Runtime" baseline, in its best configuration): every text
tokenized once, the texts sorted by token count (longest first), batches of 32 padded
to their longest member, ONNX Runtime with THREADS intra-op threads (0: ORT's default)
and SPIN `default` (ORT's default session options: idle workers spin) or `off`
(`session.intra_op.allow_spinning = 0`). One JSON line on stdout: `seconds` (wall time
from tokenizing to the last pooled vector, model load excluded), `cpu_seconds` (process
CPU time over the same span), `tokens` and `padding` (padding tokens added).

With `--single THREADS SPIN` it measures one query at a time instead (the load
benchmark's "model alone" baseline for a never-seen search): each text tokenized, run
through the model as a batch of one and pooled, in turn, after 20 unmeasured warm-up
texts. One JSON line: `p50_ms` and `mean_ms` (wall time per text), `cpu_ms` (process CPU
time per text), `texts`.

Environment: CAIRN_MODEL_DIR overrides the model directory.
    pip install onnxruntime tokenizers numpy
"""

import json
import os
import sys
import time

import numpy as np

# ONNX Runtime 1.31 records and uploads usage events unless this is set when it starts
# (docs/security.md, "Nothing leaves the machine").
os.environ["ORT_DISABLE_TELEMETRY"] = "1"
import onnxruntime as ort  # noqa: E402
from tokenizers import Tokenizer

MAX_LENGTH = 256
BATCH = 32


def model_dir() -> str:
    env = os.environ.get("CAIRN_MODEL_DIR")
    if env:
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.join(here, "..", "models", "all-minilm-l6-v2-int8")


def read_texts(stream):
    texts = []
    for line in stream:
        line = line.strip()
        if not line:
            continue
        value = json.loads(line)
        texts.append(value["text"] if isinstance(value, dict) else value)
    return texts


def main() -> int:
    args = sys.argv[1:]
    threads = None
    spin = "default"
    mode = args[0] if args[:1] in (["--time"], ["--single"]) else None
    if mode:
        threads, spin, args = int(args[1]), args[2], args[3:]
    d = model_dir()
    tok = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
    tok.enable_truncation(max_length=MAX_LENGTH)
    if threads is None:
        tok.enable_padding(pad_id=0, pad_token="[PAD]")
    else:
        tok.no_padding()  # tokenizer.json pads to a fixed 128; batches pad themselves
    opts = ort.SessionOptions()
    if threads:
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
    if spin == "off":
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        opts.add_session_config_entry("session.inter_op.allow_spinning", "0")
    sess = ort.InferenceSession(
        os.path.join(d, "model.onnx"), opts, providers=["CPUExecutionProvider"]
    )
    input_names = {i.name for i in sess.get_inputs()}
    output_names = [o.name for o in sess.get_outputs()]
    out_name = "last_hidden_state" if "last_hidden_state" in output_names else output_names[0]

    if args:
        with open(args[0], encoding="utf-8") as fh:
            texts = read_texts(fh)
    else:
        texts = read_texts(sys.stdin)
    if mode == "--time":
        print(json.dumps(time_sorted(tok, sess, input_names, out_name, texts)))
        return 0
    if mode == "--single":
        print(json.dumps(time_single(tok, sess, input_names, out_name, texts)))
        return 0

    vectors = []
    for start in range(0, len(texts), BATCH):
        batch = texts[start : start + BATCH]
        enc = tok.encode_batch(batch)
        ids = np.array([e.ids for e in enc], dtype=np.int64)
        mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
        types = np.array([e.type_ids for e in enc], dtype=np.int64)
        vectors.append(embed(sess, input_names, out_name, ids, mask, types))

    out = sys.stdout
    for batch in vectors:
        for row in batch:
            out.write(json.dumps([float(x) for x in row]) + "\n")
    out.flush()
    return 0


def embed(sess, input_names, out_name, ids, mask, types):
    """Unit mean-pooled vectors of one padded batch."""
    feeds = {"input_ids": ids, "attention_mask": mask}
    if "token_type_ids" in input_names:
        feeds["token_type_ids"] = types
    hidden = sess.run([out_name], feeds)[0]  # (batch, seq, 384)
    m = mask[:, :, None].astype(np.float32)
    pooled = (hidden * m).sum(axis=1) / np.clip(m.sum(axis=1), 1e-9, None)
    norms = np.linalg.norm(pooled, axis=1, keepdims=True)
    return pooled / np.clip(norms, 1e-12, None)


def time_sorted(tok, sess, input_names, out_name, texts):
    """Embed `texts` in token-sorted batches; the timing line's fields."""
    started, cpu_started = time.perf_counter(), time.process_time()
    enc = tok.encode_batch(texts)
    enc.sort(key=lambda e: len(e.ids), reverse=True)
    tokens = padding = 0
    for start in range(0, len(enc), BATCH):
        batch = enc[start : start + BATCH]
        seq = len(batch[0].ids)
        ids = np.zeros((len(batch), seq), dtype=np.int64)
        mask = np.zeros((len(batch), seq), dtype=np.int64)
        types = np.zeros((len(batch), seq), dtype=np.int64)
        for row, e in enumerate(batch):
            n = len(e.ids)
            ids[row, :n] = e.ids
            mask[row, :n] = 1
            types[row, :n] = e.type_ids
            tokens += n
            padding += seq - n
        embed(sess, input_names, out_name, ids, mask, types)
    return {
        "seconds": time.perf_counter() - started,
        "cpu_seconds": time.process_time() - cpu_started,
        "tokens": tokens,
        "padding": padding,
    }


def time_single(tok, sess, input_names, out_name, texts):
    """Embed `texts` one at a time; the timing line's fields."""

    def one(text):
        e = tok.encode(text)
        ids = np.array([e.ids], dtype=np.int64)
        mask = np.array([e.attention_mask], dtype=np.int64)
        types = np.array([e.type_ids], dtype=np.int64)
        embed(sess, input_names, out_name, ids, mask, types)

    for text in texts[:20]:
        one(text + " (warm-up)")
    walls = []
    cpu_started = time.process_time()
    for text in texts:
        t = time.perf_counter()
        one(text)
        walls.append(time.perf_counter() - t)
    cpu = time.process_time() - cpu_started
    walls.sort()
    return {
        "p50_ms": walls[len(walls) // 2] * 1e3,
        "mean_ms": sum(walls) / len(walls) * 1e3,
        "cpu_ms": cpu / len(texts) * 1e3,
        "texts": len(texts),
    }


if __name__ == "__main__":
    sys.exit(main())
