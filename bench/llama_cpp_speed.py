#!/usr/bin/env python3
"""Prefill and decode speed of llama.cpp on the same GGUF file, for comparison with
`spanscope-cli bench` (docs/benchmarks.md).

Same prompts as spanscope-cli bench: BOS + the GPL-3 text (Debian base-files) repeated to the
length; prefill timed over the whole prompt, then decode timed over N greedy tokens fed one by
one. Threads: 2 (the CI machine's cores).

    pip install llama-cpp-python==0.3.36          # builds llama.cpp from source (~10 min)
    python3 bench/llama_cpp_speed.py [--lengths 512,2048,8192] [--decode 32] [--model PATH] [--json]

bench/compare_llama_cpp.sh builds it with the flags right for the CPU and runs it side by side
with spanscope-cli bench.
"""
import argparse
import json
import os
import time

import llama_cpp
import numpy as np


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.path.expanduser(
        "~/.local/share/spanscope/models/gemma-3-270m-q4_k_m.gguf"))
    ap.add_argument("--lengths", default="512,2048,8192")
    ap.add_argument("--decode", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", action="store_true", help="print only the JSON summary")
    a = ap.parse_args()
    lengths = [int(x) for x in a.lengths.split(",")]
    text = open("/usr/share/common-licenses/GPL-3", encoding="utf-8").read()
    results = []
    for n in lengths:
        llm = llama_cpp.Llama(a.model, n_ctx=n + a.decode + 8, n_batch=512, n_ubatch=512,
                              n_threads=a.threads, n_threads_batch=a.threads, verbose=False)
        piece = llm.tokenize(text.encode(), add_bos=False, special=False)
        ids = llm.tokenize(b"", add_bos=True, special=False)  # BOS only where the model wants one
        while len(ids) < n:
            ids += piece[: n - len(ids)]
        t0 = time.perf_counter()
        llm.eval(ids)
        prefill = time.perf_counter() - t0
        t0 = time.perf_counter()
        for _ in range(a.decode):
            ptr = llama_cpp.llama_get_logits_ith(llm.ctx, -1)
            nxt = int(np.argmax(np.ctypeslib.as_array(ptr, shape=(llm.n_vocab(),))))
            llm.eval([nxt])
        decode = time.perf_counter() - t0
        results.append({"prompt_tokens": n, "prefill_tokens_per_s": n / prefill,
                        "decode_tokens_per_s": a.decode / decode})
        if not a.json:
            print(f"{n:<10} prefill {n / prefill:8.1f} tok/s   decode {a.decode / decode:6.1f} tok/s",
                  flush=True)
        del llm
    print(json.dumps({"engine": "llama.cpp via llama-cpp-python " + llama_cpp.__version__,
                      "threads": a.threads, "results": results}, indent=2))


if __name__ == "__main__":
    main()
