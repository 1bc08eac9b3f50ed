#!/usr/bin/env python3
"""Reference fixture for our chat prompts (engine/text/chat_format.*, engine/text/prompt.*),
rendered by each family's own Jinja chat template.

Purpose
-------
A prompt for an instruction-tuned model must read exactly as the model's chat template renders
the same conversation. This script renders, with Python's jinja2 (as Hugging Face's
apply_chat_template does: trim_blocks, lstrip_blocks, raise_exception), two conversations per
template and writes

  fixtures/chat_templates.json   the conversations (inputs) and, per template, its source,
                                 the bos_token / eos_token strings it was given, and the
                                 rendered text of
                                   "single":    [system] + user(document + question)
                                   "follow_up": [system] + user(document + question 1)
                                                + assistant(answer 1) + user(question 2)
                                 both with add_generation_prompt=True.

The user turn's text is how Spanscope words a question about documents ("Document: NAME\\n\\n",
the text, "\\n" or "\\n\\n", then "Answer the question using the documents above.\\n" and the
question; docs/architecture.md, "One question"); the system text is the one Spanscope gives the
formats with a system role. Both are inputs here, not outputs: what is compared is how each
template wraps them. Families without a system role (Gemma joins a system text to the first
user turn, Mistral's template has none) get no system message, as Spanscope sends none.

Templates
---------
  gemma3      Gemma 3 instruction-tuned models (google/gemma-3-*-it, tokenizer_config.json
              "chat_template").
  llama3      Meta-Llama-3-8B-Instruct (meta-llama/Meta-Llama-3-8B-Instruct,
              tokenizer_config.json "chat_template").
  qwen2       Qwen2 instruct models (Qwen/Qwen2-*-Instruct, tokenizer_config.json
              "chat_template"): ChatML with a default system turn.
  smollm2     SmolLM2-135M-Instruct: read from the GGUF file's tokenizer.chat_template with
              gguf-py (the file the tests' SmolLM2 tokenizer comes from).
  mistral     Mistral-7B-Instruct-v0.2 (mistralai/Mistral-7B-Instruct-v0.2,
              tokenizer_config.json "chat_template"; no system role).

How to run
----------
    /work/venv-llama/bin/pip install jinja2 gguf
    /work/venv-llama/bin/python tests/reference/make_chat_fixtures.py \\
        [--model ~/.local/share/spanscope/models/SmolLM2-135M-Instruct.Q4_1.gguf]

The output is deterministic.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import jinja2

HERE = Path(__file__).resolve().parent

GEMMA3 = (
    "{{ bos_token }}\n"
    "{%- if messages[0]['role'] == 'system' -%}\n"
    "    {%- if messages[0]['content'] is string -%}\n"
    "        {%- set first_user_prefix = messages[0]['content'] + '\\n\\n' -%}\n"
    "    {%- else -%}\n"
    "        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '\\n\\n' -%}\n"
    "    {%- endif -%}\n"
    "    {%- set loop_messages = messages[1:] -%}\n"
    "{%- else -%}\n"
    "    {%- set first_user_prefix = \"\" -%}\n"
    "    {%- set loop_messages = messages -%}\n"
    "{%- endif -%}\n"
    "{%- for message in loop_messages -%}\n"
    "    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}\n"
    "        {{ raise_exception(\"Conversation roles must alternate "
    "user/assistant/user/assistant/...\") }}\n"
    "    {%- endif -%}\n"
    "    {%- if (message['role'] == 'assistant') -%}\n"
    "        {%- set role = \"model\" -%}\n"
    "    {%- else -%}\n"
    "        {%- set role = message['role'] -%}\n"
    "    {%- endif -%}\n"
    "    {{ '<start_of_turn>' + role + '\\n' + (first_user_prefix if loop.first else \"\") }}\n"
    "    {%- if message['content'] is string -%}\n"
    "        {{ message['content'] | trim }}\n"
    "    {%- elif message['content'] is iterable -%}\n"
    "        {%- for item in message['content'] -%}\n"
    "            {%- if item['type'] == 'image' -%}\n"
    "                {{ '<start_of_image>' }}\n"
    "            {%- elif item['type'] == 'text' -%}\n"
    "                {{ item['text'] | trim }}\n"
    "            {%- endif -%}\n"
    "        {%- endfor -%}\n"
    "    {%- else -%}\n"
    "        {{ raise_exception(\"Invalid content type\") }}\n"
    "    {%- endif -%}\n"
    "    {{ '<end_of_turn>\\n' }}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}\n"
    "    {{'<start_of_turn>model\\n'}}\n"
    "{%- endif -%}\n"
)

LLAMA3 = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'"
    "+ message['content'] | trim + '<|eot_id|>' %}"
    "{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}"
    "{{ content }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}"
    "{% endif %}"
)

QWEN2 = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

MISTRAL = (
    "{{ bos_token }}{% for message in messages %}"
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
    "{% endif %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}"
    "{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}"
    "{% endif %}{% endfor %}"
)

# The conversation: Spanscope's wording (inputs, see the module docstring).
SYSTEM = "You answer questions about the documents the user gives you."
DOCUMENT_NAME = "notes.txt"
DOCUMENT_TEXT = "The lighthouse keeper rang the bell at dawn.\nShips answered from the harbour.\n"
QUESTION_1 = "Who rang the bell?"
ANSWER_1 = "The lighthouse keeper."
QUESTION_2 = "When did the keeper ring it?"


def documents_block() -> str:
    text = DOCUMENT_TEXT
    return "Document: " + DOCUMENT_NAME + "\n\n" + text + ("\n" if text.endswith("\n") else "\n\n")


def first_user_turn(question: str) -> str:
    return documents_block() + "Answer the question using the documents above.\n" + question


def render(template: str, messages: list[dict], bos: str, eos: str) -> str:
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = raise_exception
    return env.from_string(template).render(
        messages=messages, bos_token=bos, eos_token=eos, add_generation_prompt=True
    )


def smollm2_template(model: str) -> str:
    from gguf import GGUFReader  # gguf-py

    reader = GGUFReader(model)
    field = reader.fields["tokenizer.chat_template"]
    return field.contents()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--model",
        default=os.path.expanduser(
            "~/.local/share/spanscope/models/SmolLM2-135M-Instruct.Q4_1.gguf"
        ),
    )
    ap.add_argument("--out", default=str(HERE / "fixtures" / "chat_templates.json"))
    args = ap.parse_args()

    families = [
        ("gemma3", "google/gemma-3-*-it tokenizer_config.json", GEMMA3, "<bos>", "<eos>", False),
        (
            "llama3",
            "meta-llama/Meta-Llama-3-8B-Instruct tokenizer_config.json",
            LLAMA3,
            "<|begin_of_text|>",
            "<|eot_id|>",
            True,
        ),
        ("qwen2", "Qwen/Qwen2-7B-Instruct tokenizer_config.json", QWEN2, "", "<|im_end|>", True),
        (
            "smollm2",
            "SmolLM2-135M-Instruct.Q4_1.gguf tokenizer.chat_template",
            smollm2_template(args.model),
            "<|im_start|>",
            "<|im_end|>",
            True,
        ),
        (
            "mistral",
            "mistralai/Mistral-7B-Instruct-v0.2 tokenizer_config.json",
            MISTRAL,
            "<s>",
            "</s>",
            False,
        ),
    ]
    out = {
        "meta": {
            "made_by": "tests/reference/make_chat_fixtures.py",
            "jinja2": jinja2.__version__,
            "environment": "trim_blocks=True, lstrip_blocks=True, add_generation_prompt=True",
        },
        "conversation": {
            "system": SYSTEM,
            "document_name": DOCUMENT_NAME,
            "document_text": DOCUMENT_TEXT,
            "question_1": QUESTION_1,
            "answer_1": ANSWER_1,
            "question_2": QUESTION_2,
        },
        "templates": {},
    }
    for name, source, template, bos, eos, has_system in families:
        system = [{"role": "system", "content": SYSTEM}] if has_system else []
        single = system + [{"role": "user", "content": first_user_turn(QUESTION_1)}]
        follow_up = single + [
            {"role": "assistant", "content": ANSWER_1},
            {"role": "user", "content": QUESTION_2},
        ]
        out["templates"][name] = {
            "source": source,
            "chat_template": template,
            "bos_token": bos,
            "eos_token": eos,
            "system_role": has_system,
            "single": render(template, single, bos, eos),
            "follow_up": render(template, follow_up, bos, eos),
        }
    Path(args.out).write_text(json.dumps(out, indent=2, ensure_ascii=False) + "\n")
    print("wrote", args.out)


if __name__ == "__main__":
    main()
