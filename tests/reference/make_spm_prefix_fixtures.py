#!/usr/bin/env python3
"""llama.cpp's tokenisation with a SentencePiece space prefix (tokenizer.ggml.add_space_prefix
true or absent, as in Llama 2 and Mistral 7B files), checked by
tests/unit/test_spm_space_prefix.cpp against engine/text/tokenizer.* and the prompts of
engine/text/prompt.* and engine/text/chunking.*.

The vocabularies are real and whole: Gemma 3's (262 144 pieces, from the GGUF file the set-up
installs), with its metadata copied (no tensors) and changed as a Llama 2 / Mistral file would
have it; llama.cpp loads each copy with vocab_only=True, and the test builds the same
vocabularies in memory with our GGUF writer from the same file:

  prefix          tokenizer.ggml.add_space_prefix = true; "<s>" (203) and "</s>" (212), which
                  Gemma keeps USER_DEFINED, made CONTROL as Llama 2 and Mistral have them (so
                  Mistral's "</s>" is a control token and "[INST]" plain text: Mistral
                  v0.1 / v0.2, Llama 2 chat).
  prefix_absent   the same without the key (llama.cpp's default for SentencePiece: true).
  prefix_text_newlines  `prefix` with every USER_DEFINED piece (Gemma's runs of newlines, spaces
                  and tabs, "<start_of_image>", ...) made NORMAL: a line end is ordinary text, as
                  in Llama 2 and Mistral (where it is the byte <0x0A>), so a part of a prompt
                  that follows one continues the text (TextStart::Continues) and gets no space.
  prefix_markup   `prefix` with <unused0> ... <unused6> (CONTROL) renamed to the markup of the
                  other chat formats: "[INST]", "[/INST]" (Mistral v0.3), "<|im_start|>",
                  "<|im_end|>" (ChatML, as OpenHermes-2.5-Mistral adds them),
                  "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"; Gemma's own
                  "<start_of_turn>" / "<end_of_turn>" are there already.

With --llama-spm-vocab PATH it also records `llama_spm`: llama.cpp's own Llama 2 vocabulary
file (models/ggml-vocab-llama-spm.gguf in llama.cpp's source tree, e.g. the llama-cpp-python
0.3.36 sdist: `pip download --no-binary :all: --no-deps llama-cpp-python==0.3.36`), the real
32 000-piece Llama 2 vocabulary without the key. The test runs those cases only when
$SPANSCOPE_LLAMA_SPM_VOCAB names that file (its sha256 is in the fixture).

`tiny_mistral` runs a whole model: tests/reference/fixtures/tiny_mistral.gguf (a Mistral-7B-shaped
`llama` file with random weights and the tests' tiny SentencePiece vocabulary,
make_llama_fixtures.py) copied with tokenizer.ggml.add_space_prefix left out, as Mistral 7B's
files have it, its BOS and EOS spelled "<s>" and "</s>", and Llama-2-chat's template as
tokenizer.chat_template. llama.cpp (use_extra_bufts
false, as make_llama_fixtures.py: its AMX path crashes on this CPU) tokenises a rendered
Mistral-format prompt and evaluates it; the fixture keeps the ids and the logits of every
position (every 4th and the last 16 are stored), which the test holds our engine to (the file
loaded, the prompt built, prefilled).

For each vocabulary the fixture holds:
  cases     (prefix_absent: a sample, equal to prefix's; prefix_markup, prefix_text_newlines:
            those whose ids differ from prefix's) the strings of make_fixtures.py (whitespace runs, newlines, CRLF, unicode, digits,
            code, literal special tokens, byte fallback, ...) and a few more about the prefix,
            tokenised with add_bos=False and special=True (`ids`) and special=False
            (`ids_special_false`, where it differs);
  with_bos  a few with add_bos=True;
  detok     llama_detokenize (remove_special=False) of id sequences, unparse_special both ways;
  prompts   whole prompts rendered as engine/text/prompt.h builds them (Completion and the chat
            formats the vocabulary can hold: markup in chat_format.cpp), tokenised as llama.cpp
            tokenises a rendered prompt: add_bos=True, special=True. `unit` prompts are one
            document unit (its header, text and trailer) alone.

How to run (a few seconds; vocab_only needs no weights):

    /work/venv-llama/bin/python tests/reference/make_spm_prefix_fixtures.py \\
        [--model ~/.local/share/spanscope/models/gemma-3-270m-q4_k_m.gguf] \\
        [--llama-spm-vocab /tmp/llama_cpp_python-0.3.36/vendor/llama.cpp/models/ggml-vocab-llama-spm.gguf]

Versions used for the committed fixture: those in its `meta` (the same llama-cpp-python 0.3.36
as the other fixtures). A rerun writes the same bytes.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from make_llama_fixtures import eval_all, new_llama  # noqa: E402
from make_fixtures import (  # noqa: E402
    bytes_desc,
    detokenize,
    tokenizer_cases,
    versions,
    vocab_of,
)

OUT = os.path.join(HERE, "fixtures", "spm_space_prefix.json")

# Gemma 3's ids of what the copies change.
S_ID, SLASH_S_ID = 203, 212
MARKUP_RENAMES = {6: "[INST]", 7: "[/INST]", 8: "<|im_start|>", 9: "<|im_end|>",
                  10: "<|start_header_id|>", 11: "<|end_header_id|>", 12: "<|eot_id|>"}
NORMAL, CONTROL, USER_DEFINED = 1, 3, 4

# engine/text/chat_format.cpp's markup; engine/text/prompt.cpp's texts.
SYSTEM_TEXT = "You answer questions about the documents the user gives you."
INSTRUCTION = "Answer the question using the documents above.\n"
MARKUP = {
    "gemma": dict(system=None, user_open="<start_of_turn>user\n", user_close="<end_of_turn>\n",
                  assistant_open="<start_of_turn>model\n", assistant_close="<end_of_turn>\n"),
    "llama3": dict(system=("<|start_header_id|>system<|end_header_id|>\n\n", "<|eot_id|>"),
                   user_open="<|start_header_id|>user<|end_header_id|>\n\n",
                   user_close="<|eot_id|>",
                   assistant_open="<|start_header_id|>assistant<|end_header_id|>\n\n",
                   assistant_close="<|eot_id|>"),
    "chatml": dict(system=("<|im_start|>system\n", "<|im_end|>\n"),
                   user_open="<|im_start|>user\n", user_close="<|im_end|>\n",
                   assistant_open="<|im_start|>assistant\n", assistant_close="<|im_end|>\n"),
    "mistral": dict(system=None, user_open="[INST] ", user_close=" [/INST]", assistant_open="",
                    assistant_close="</s>"),
}

DOCS = {
    "notes": ("notes.txt", "The lighthouse keeper rang the bell at dawn. Ships answered from "
                           "the harbour, 3 of them."),
    "zurich": ("zürich.md", "Grüße aus Zürich!\nLine two has  two spaces and a tab\there."),
    # Paragraphs short enough that chunking cuts only between them (chunk_target_tokens).
    "manual": ("manual.txt", "Chapter 1. Getting started\n\nInstall the package with apt, then "
                             "run it once.\n\n  Indented note: two spaces open this one.\n\n"
                             "42 is the answer; 3.14 is not.\n\nÜber-long words stay whole: "
                             "Donaudampfschiff.\n\nThe end."),
    # Ends in a line end: the trailer is "\n" (only for llama_spm: Gemma's newline runs are
    # user-defined pieces that span the text's last "\n" and the trailer's).
    "lines": ("lines.txt", "First line.\nSecond line, indented below.\n    Third.\n"),
}
Q1, A1, Q2 = "Who rang the bell?", "The lighthouse keeper.", "How many ships answered?"
CHUNK_TARGET_TOKENS = 24

# meta-llama/Llama-2-7b-chat-hf's tokenizer_config.json chat_template: its turns are Mistral's
# "[INST] … [/INST]" (chat_format_of picks the Mistral format by "[INST]").
LLAMA2_CHAT_TEMPLATE = (
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}"
    "{% set system_message = messages[0]['content'] %}{% else %}"
    "{% set loop_messages = messages %}{% set system_message = false %}{% endif %}"
    "{% for message in loop_messages %}"
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
    "{% endif %}{% if loop.index0 == 0 and system_message != false %}"
    "{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}"
    "{% else %}{% set content = message['content'] %}{% endif %}"
    "{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}"
    "{% endif %}{% endfor %}")
# The tiny vocabulary's BOS and EOS (CONTROL) spelled as Llama 2's and Mistral's: the Mistral
# format closes an answer's turn with "</s>".
TINY_RENAMES = {1: ("<eos>", "</s>"), 2: ("<bos>", "<s>")}
TINY_DOC = ("cats.txt", "the cat at the hat.\n\nthe bat at the cat")
TINY_QUESTION = "the cat?"


def extra_cases() -> list[tuple[str, str]]:
    """Strings about where the prefix goes."""
    return [
        ("word", "Hello"),
        ("space_word", " Hello"),
        ("two_spaces_word", "  Hello"),
        ("newline_word", "\nHello"),
        ("word_newline_word", "Hello\nworld"),
        ("paragraphs", "One.\n\nTwo.\n\n\nThree."),
        ("text_control_text", "Hi<start_of_turn>user\nthere<end_of_turn>"),
        ("control_space_text", "<start_of_turn> spaced"),
        ("inst_markup", "[INST] Hi [/INST]Hello</s>[INST] More [/INST]"),
        ("s_markup", "<s>Hi</s>"),
        ("im_markup", "<|im_start|>user\nHi<|im_end|>\n"),
        ("digits_after_control", "<end_of_turn>2024"),
    ]


def sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def write_vocab_copy(src: str, dst: str, variant: str) -> None:
    """`src`'s metadata (no tensors), changed as `variant` says (module docstring)."""
    import gguf

    r = gguf.GGUFReader(src)
    w = gguf.GGUFWriter(dst, arch=r.fields["general.architecture"].contents())
    for name, f in r.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        if name == "tokenizer.ggml.add_space_prefix":
            continue  # written below, or left out
        val = f.contents()
        if name == "tokenizer.ggml.token_type":
            val = list(val)
            if variant == "prefix_text_newlines":
                val = [NORMAL if t == USER_DEFINED else t for t in val]
            for i in (S_ID, SLASH_S_ID):
                val[i] = CONTROL
        if name == "tokenizer.ggml.tokens" and variant == "prefix_markup":
            val = list(val)
            for i, text in MARKUP_RENAMES.items():
                assert val[i] == f"<unused{i - 6}>", val[i]
                val[i] = text
        vtype = f.types[0]
        sub = f.types[1] if vtype == gguf.GGUFValueType.ARRAY else None
        w.add_key_value(name, val, vtype, sub_type=sub)
    if variant != "prefix_absent":
        w.add_bool("tokenizer.ggml.add_space_prefix", True)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def documents_block(docs: list[tuple[str, str]]) -> str:
    s = ""
    for name, text in docs:
        s += f"Document: {name}\n\n" + text
        if not s.endswith("\n"):
            s += "\n"
        s += "\n"
    return s


def render(fmt: str, docs: list[tuple[str, str]], question: str,
           history: list[tuple[str, str]]) -> str:
    """The prompt as build_question_prompt (no history) or the document unit followed by
    question_tokens (history) writes it, without the BOS (llama.cpp adds it)."""
    if fmt == "completion":
        s = documents_block(docs)
        for q, a in history:
            s += f"Question: {q}\nAnswer: {a}\n"
        return s + f"Question: {question}\nAnswer:"
    m = MARKUP[fmt]
    s = ""
    if m["system"]:
        s += m["system"][0] + SYSTEM_TEXT + m["system"][1]
    s += m["user_open"] + documents_block(docs) + INSTRUCTION
    for q, a in history:
        s += q + m["user_close"] + m["assistant_open"] + a + m["assistant_close"] + m["user_open"]
    return s + question + m["user_close"] + m["assistant_open"]


def render_unit(fmt: str, doc: tuple[str, str]) -> str:
    """One document unit alone (document_unit_header, text, document_unit_trailer)."""
    name, text = doc
    s = f"Document: {name}\n\n" + text + ("\n" if text.endswith("\n") else "\n\n")
    if fmt == "completion":
        return s
    m = MARKUP[fmt]
    head = m["system"][0] + SYSTEM_TEXT + m["system"][1] if m["system"] else ""
    return head + m["user_open"] + s


def prompt_specs(variant: str) -> list[dict]:
    formats = {"prefix": ["completion", "mistral"],
               "prefix_absent": ["completion", "mistral"],
               "prefix_text_newlines": ["completion", "mistral"],
               "prefix_markup": ["completion", "mistral", "chatml", "llama3", "gemma"],
               "llama_spm": ["completion", "mistral"]}[variant]
    specs = []
    for fmt in formats:
        specs.append(dict(name=f"{fmt}/one_doc", format=fmt, docs=["notes"], question=Q1,
                          history=[]))
        specs.append(dict(name=f"{fmt}/two_docs", format=fmt, docs=["notes", "zurich"],
                          question=Q1, history=[]))
        specs.append(dict(name=f"{fmt}/follow_up", format=fmt, docs=["notes"], question=Q2,
                          history=[[Q1, A1]]))
        specs.append(dict(name=f"{fmt}/chunked", format=fmt, docs=["manual"], question=Q1,
                          history=[]))
        if variant == "llama_spm":
            specs.append(dict(name=f"{fmt}/ends_in_newline", format=fmt, docs=["lines"],
                              question=Q1, history=[]))
        for key in ["notes", "zurich", "manual"] + (["lines"] if variant == "llama_spm" else []):
            specs.append(dict(name=f"{fmt}/unit/{key}", format=fmt, unit=key))
    return specs


def fixture_for(path: str, variant: str) -> dict:
    from llama_cpp import Llama

    llm = Llama(model_path=path, vocab_only=True, verbose=False)
    vocab = vocab_of(llm)

    def tok(text: str, add_bos: bool, special: bool) -> list[int]:
        return llm.tokenize(text.encode("utf-8"), add_bos=add_bos, special=special)

    all_cases = tokenizer_cases() + extra_cases()
    if variant == "prefix_absent":  # a sample: the test checks it equals `prefix`'s ids
        keep = {"lone_space", "leading_spaces", "hello_world", "hello_world_space_prefix",
                "newlines_2", "chat_markup", "word", "newline_word", "paragraphs",
                "text_control_text", "inst_markup"}
        all_cases = [c for c in all_cases if c[0] in keep]
    cases = []
    for name, text in all_cases:
        e = {"name": name, "utf8_hex": text.encode("utf-8").hex(),
             "ids": tok(text, False, True)}
        plain = tok(text, False, False)
        if plain != e["ids"]:
            e["ids_special_false"] = plain
        cases.append(e)
    with_bos = [{"utf8_hex": t.encode("utf-8").hex(), "ids": tok(t, True, True)}
                for t in ["Hello world", " Hello", "", "<start_of_turn>user\nHi", "\n"]]
    detok = []
    for t in ["Hello world", " Hello world", "\nHello", "  two", "<start_of_turn>x", "x"]:
        ids = tok(t, False, True)
        for seq in (ids, [llm.token_bos()] + ids):
            for unparse in (False, True):
                detok.append({"ids": seq, "unparse_special": unparse,
                              "hex": detokenize(vocab, seq, False, unparse).hex()})
    prompts = []
    for spec in prompt_specs(variant):
        if "unit" in spec:
            text = render_unit(spec["format"], DOCS[spec["unit"]])
        else:
            text = render(spec["format"], [DOCS[d] for d in spec["docs"]], spec["question"],
                          [tuple(h) for h in spec["history"]])
        spec = dict(spec)
        spec["utf8_hex"] = text.encode("utf-8").hex()
        spec["ids"] = tok(text, True, True)
        prompts.append(spec)
    out = {"add_space_prefix_key": "absent" if variant in ("prefix_absent", "llama_spm") else True,
           "n_vocab": llm.n_vocab(),
           "bos": llm.token_bos(), "cases": cases, "with_bos": with_bos, "detok": detok,
           "prompts": prompts}
    del llm
    return out


def compact_json(fx: dict) -> str:
    """One line per case, prompt or detokenisation (keeps diffs readable)."""
    def one(v) -> str:
        return json.dumps(v, ensure_ascii=False, separators=(",", ":"))

    def block(v, indent: str) -> str:
        if isinstance(v, list) and v and isinstance(v[0], dict):
            return "[\n" + ",\n".join(indent + one(e) for e in v) + "\n" + indent[:-1] + "]"
        if isinstance(v, dict) and any(isinstance(x, (list, dict)) for x in v.values()):
            return "{\n" + ",\n".join(f"{indent}{one(k)}: " + block(x, indent + " ")
                                       for k, x in v.items()) + "\n" + indent[:-1] + "}"
        return one(v)

    return block(fx, " ") + "\n"


def tiny_mistral_fixture() -> dict:
    """tiny_mistral.gguf without the add_space_prefix key and with Llama-2-chat's template, run
    by llama.cpp on the Mistral-format prompt (module docstring)."""
    import gguf
    import jinja2

    src = os.path.join(HERE, "fixtures", "tiny_mistral.gguf")
    # Our single-question prompt is what Llama-2-chat's template renders for one user message.
    text = render("mistral", [TINY_DOC], TINY_QUESTION, [])
    rendered = jinja2.Environment().from_string(LLAMA2_CHAT_TEMPLATE).render(
        messages=[{"role": "user", "content": text[len("[INST] "):-len(" [/INST]")]}],
        bos_token="<s>", eos_token="</s>")
    assert rendered == "<s>" + text, rendered
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "tiny_mistral_prefix.gguf")
        r = gguf.GGUFReader(src)
        w = gguf.GGUFWriter(path, arch=r.fields["general.architecture"].contents())
        for name, f in r.fields.items():
            if name.startswith("GGUF.") or name in ("general.architecture",
                                                    "tokenizer.ggml.add_space_prefix"):
                continue
            val = f.contents()
            if name == "tokenizer.ggml.tokens":
                val = list(val)
                for i, (old, new) in TINY_RENAMES.items():
                    assert val[i] == old, val[i]
                    val[i] = new
            vtype = f.types[0]
            sub = f.types[1] if vtype == gguf.GGUFValueType.ARRAY else None
            w.add_key_value(name, val, vtype, sub_type=sub)
        w.add_string("tokenizer.chat_template", LLAMA2_CHAT_TEMPLATE)
        for t in r.tensors:
            w.add_tensor(t.name, t.data, raw_shape=list(t.data.shape),
                         raw_dtype=t.tensor_type)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        llm = new_llama(path, n_batch=256, n_ctx=256)
        ids = llm.tokenize(text.encode("utf-8"), add_bos=True, special=True)
        logits = eval_all(llm, ids)
        del llm
    # Every 4th position and the last 16 (the question and the answer's cue): the fixture stays
    # small, and every stretch of the prompt is compared.
    positions = sorted(set(range(0, len(ids), 4)) | set(range(max(0, len(ids) - 16), len(ids))))
    logits = logits[positions]
    return {"source": "fixtures/tiny_mistral.gguf", "source_sha256": sha256_file(src),
            "changed": "tokenizer.ggml.add_space_prefix left out; tokens 1 <eos> -> </s> and 2 "
                       "<bos> -> <s>; tokenizer.chat_template = Llama-2-chat's",
            "renames": {str(i): new for i, (_, new) in TINY_RENAMES.items()},
            "chat_template": LLAMA2_CHAT_TEMPLATE, "doc": list(TINY_DOC),
            "question": TINY_QUESTION, "utf8_hex": text.encode("utf-8").hex(), "ids": ids,
            "settings": "CPU, n_threads 2, n_ctx 256, one ubatch, logits_all, flash_attn off, "
                        "f16 K/V cache, use_extra_bufts false",
            "positions": positions, "logits_shape": list(logits.shape),
            "logits_f32le_base64": base64.b64encode(logits.astype("<f4").tobytes()).decode()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=os.environ.get("SPANSCOPE_MODEL") or os.path.expanduser(
        "~/.local/share/spanscope/models/gemma-3-270m-q4_k_m.gguf"))
    ap.add_argument("--llama-spm-vocab", default=None)
    args = ap.parse_args()

    meta = {"made_by": "tests/reference/make_spm_prefix_fixtures.py", "versions": versions(),
            "gemma_model": os.path.basename(args.model), "gemma_sha256": sha256_file(args.model),
            "docs": {k: {"name": n, "text": t} for k, (n, t) in DOCS.items()},
            "chunk_target_tokens": CHUNK_TARGET_TOKENS,
            "markup_renames": {str(k): v for k, v in MARKUP_RENAMES.items()},
            "made_control": [S_ID, SLASH_S_ID]}
    fx = {"meta": meta, "vocabularies": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for variant in ["prefix", "prefix_absent", "prefix_text_newlines", "prefix_markup"]:
            path = os.path.join(tmp, f"{variant}.gguf")
            write_vocab_copy(args.model, path, variant)
            fx["vocabularies"][variant] = fixture_for(path, variant)
    if args.llama_spm_vocab:
        meta["llama_spm_vocab"] = {"file": os.path.basename(args.llama_spm_vocab),
                                   "sha256": sha256_file(args.llama_spm_vocab),
                                   "source": "llama.cpp models/ (llama-cpp-python 0.3.36 sdist)"}
        fx["vocabularies"]["llama_spm"] = fixture_for(args.llama_spm_vocab, "llama_spm")
    fx["tiny_mistral"] = tiny_mistral_fixture()
    # llama.cpp's default for a SentencePiece vocabulary without the key is the prefix.
    prefix_cases = {c["name"]: c for c in fx["vocabularies"]["prefix"]["cases"]}
    for c in fx["vocabularies"]["prefix_absent"]["cases"]:
        assert c == prefix_cases[c["name"]], c["name"]
    # prefix_markup and prefix_text_newlines keep only the cases whose ids differ from prefix's.
    for variant in ["prefix_markup", "prefix_text_newlines"]:
        v = fx["vocabularies"][variant]
        v["cases"] = [c for c in v["cases"] if c != prefix_cases[c["name"]]]
    with open(OUT, "w", encoding="utf-8") as f:
        f.write(compact_json(fx))
    print(f"wrote {OUT} ({os.path.getsize(OUT)} bytes)")


if __name__ == "__main__":
    main()
