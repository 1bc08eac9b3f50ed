#!/usr/bin/env python3
"""Check the QA question set in tests/qa/questions.json against the documents.

For every question it verifies that:
  * the id is unique and the required fields are present;
  * the document exists, is a plain-text (not gzip) file, and is under the
    size limit (default 80 000 bytes, roughly 20 000 tokens);
  * the first (canonical) accepted answer occurs in the document text
    (case-insensitive, runs of whitespace collapsed);
  * every accepted answer is at least 2 characters long (short strings such
    as "a" or "1" would match wrong answers by accident).

Other accepted answers are variants for scoring (for example "thirty" next to
"30") and need not occur in the document; they are reported, not failed,
unless --strict is given.

With --manifest it also prints a Markdown table of the documents (package,
path, size in bytes, sha256, number of questions) for tests/qa/README.md.

Exit status: 0 when all checks pass, 1 otherwise, 2 on usage errors.
"""

import argparse
import collections
import hashlib
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_QUESTIONS = os.path.join(HERE, "..", "tests", "qa", "questions.json")
REQUIRED = ("id", "doc", "package", "question", "answers", "where")


def norm(text):
    return re.sub(r"\s+", " ", text).lower()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("questions", nargs="?", default=DEFAULT_QUESTIONS)
    ap.add_argument("--max-bytes", type=int, default=80000,
                    help="largest allowed document size (default 80000)")
    ap.add_argument("--strict", action="store_true",
                    help="require every accepted answer to occur in the document")
    ap.add_argument("--manifest", action="store_true",
                    help="print a Markdown table of the documents")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()

    try:
        with open(args.questions, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        print(f"error: cannot read {args.questions}: {e}", file=sys.stderr)
        return 2
    questions = data["questions"] if isinstance(data, dict) else data

    failures = []
    notes = []
    seen = set()
    docs = collections.OrderedDict()  # path -> dict(package, count, text)

    for i, q in enumerate(questions):
        qid = q.get("id", f"#{i}")
        missing = [k for k in REQUIRED if k not in q]
        if missing:
            failures.append(f"{qid}: missing fields {missing}")
            continue
        if qid in seen:
            failures.append(f"{qid}: duplicate id")
        seen.add(qid)
        answers = q["answers"]
        if not isinstance(answers, list) or not answers:
            failures.append(f"{qid}: answers must be a non-empty list")
            continue
        for a in answers:
            if len(a.strip()) < 2:
                failures.append(f"{qid}: answer {a!r} is too short to score safely")

        path = q["doc"]
        if path not in docs:
            entry = {"package": q["package"], "count": 0, "text": None, "error": None}
            docs[path] = entry
            try:
                with open(path, "rb") as f:
                    raw = f.read()
                if raw[:2] == b"\x1f\x8b":
                    entry["error"] = "gzip-compressed; the CLI reads plain text"
                elif len(raw) > args.max_bytes:
                    entry["error"] = f"{len(raw)} bytes, over the {args.max_bytes}-byte limit"
                entry["size"] = len(raw)
                entry["sha256"] = hashlib.sha256(raw).hexdigest()
                entry["text"] = norm(raw.decode("utf-8", errors="replace"))
            except OSError as e:
                entry["error"] = f"cannot read: {e.strerror}"
        entry = docs[path]
        entry["count"] += 1
        if entry["package"] != q["package"]:
            failures.append(f"{qid}: package {q['package']!r} differs from "
                            f"{entry['package']!r} given for the same document")
        if entry["error"]:
            failures.append(f"{qid}: {path}: {entry['error']}")
            continue

        text = entry["text"]
        found = [a for a in answers if norm(a) in text]
        absent = [a for a in answers if norm(a) not in text]
        if norm(answers[0]) not in text:
            failures.append(f"{qid}: canonical answer {answers[0]!r} not found in {path}")
        elif absent:
            msg = f"{qid}: variants not in document (scoring only): {absent}"
            (failures if args.strict else notes).append(msg)
        if args.verbose:
            print(f"ok  {qid}: found {found}")

    for n in notes:
        if args.verbose:
            print(f"note {n}")
    for fl in failures:
        print(f"FAIL {fl}")

    if args.manifest:
        print()
        print("| Package | Document | Bytes | sha256 | Questions |")
        print("|---|---|---:|---|---:|")
        for path, e in docs.items():
            print(f"| {e['package']} | `{path}` | {e.get('size', '?')} | "
                  f"`{e.get('sha256', '?')}` | {e['count']} |")

    print(f"{len(questions)} questions over {len(docs)} documents: "
          f"{'all checks passed' if not failures else str(len(failures)) + ' failure(s)'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
