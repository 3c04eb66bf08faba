#!/usr/bin/env python3
"""Records a batch folder's answers as the LLM answer corpus (tests/corpus/llm/README.md).

A batch folder (`kforge evolve --model batch:DIR`, docs/evolve.md "The batch exchange") holds
kforge's requests (requests.jsonl, the OpenAI Batch API's input format) and the answers (any other
.jsonl file, the Batch API's output format). This writes one JSON line per answered request, in the
order of the requests: the task and prompt kind read from the request's text (the prompt template
whose first line it starts with), the answer, the usage the answer reported, where it came from, and
what it is expected to give on the CPU ("compiles" when it has a ```cuda block, else "answer_error";
edit an expectation by hand when an answer legitimately fails: the test names any that differ).

    python3 scripts/llm-corpus.py docs/results/llm-batch-h200-2026-12-03.tgz \\
        --origin "batch run of 2026-12-03 (docs/results.md), answered by helpers acting as the model" \\
        -o tests/corpus/llm/recorded.jsonl

FOLDER may be the folder itself or a .tgz of it (its exchange/ folder or any folder holding a
requests.jsonl).
"""
import argparse
import json
import pathlib
import re
import sys
import tarfile
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
KINDS = ["translate", "optimize", "crossover", "repair_compile", "repair_wrong", "ideas", "idea"]


def first_lines():
    """Each prompt kind's template's first line: a rendered prompt starts with it."""
    out = {}
    for kind in KINDS:
        out[kind] = (ROOT / "prompts" / f"{kind}.md").read_text().split("\n", 1)[0]
    return out


def kind_of(prompt, starts):
    for kind, line in starts.items():
        if prompt.startswith(line):
            return kind
    return None


def load_folder(folder):
    requests_file = next(folder.rglob("requests.jsonl"), None)
    if requests_file is None:
        sys.exit(f"{folder}: no requests.jsonl")
    requests = [json.loads(line) for line in requests_file.read_text().splitlines() if line.strip()]
    answers = {}  # custom_id -> (answer file's rank, the Batch output line)
    files = sorted(p for p in requests_file.parent.glob("*.jsonl") if p.name != "requests.jsonl")
    for rank, path in enumerate(files, 1):
        for line in path.read_text().splitlines():
            try:
                a = json.loads(line)
            except json.JSONDecodeError:
                continue  # a partial or malformed line, as kforge skips it
            if a.get("error") is None and (a.get("response") or {}).get("status_code") == 200:
                answers.setdefault(a["custom_id"], (rank, a))
    return requests, answers


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folder", help="a batch folder, or a .tgz holding one")
    ap.add_argument("--origin", required=True, help="where the answers came from, in words")
    ap.add_argument("--id-prefix", default="batch-")
    ap.add_argument("-o", "--output", required=True)
    args = ap.parse_args()
    starts = first_lines()
    src = pathlib.Path(args.folder)
    with tempfile.TemporaryDirectory() as tmp:
        if src.is_file():
            with tarfile.open(src) as t:
                t.extractall(tmp, filter="data")
            src = pathlib.Path(tmp)
        requests, answers = load_folder(src)
    out = []
    for r in requests:
        if r["custom_id"] not in answers:
            continue
        rank, a = answers[r["custom_id"]]
        prompt = r["body"]["messages"][-1]["content"]
        task = re.search(r"^## The operation: (\S+)$", prompt, re.M)
        kind = kind_of(prompt, starts)
        if not task or not kind:
            sys.exit(f"{r['custom_id']}: cannot tell the task or the prompt kind from the request")
        body = a["response"]["body"]
        text = body["choices"][0]["message"]["content"]
        usage = body.get("usage", {})
        out.append({
            "id": f"{args.id_prefix}{len(out):02d}",
            "task": task.group(1),
            "kind": kind,
            "expect": "compiles" if re.search(r"^```(cuda|cu|c\+\+|cpp)\s*$", text, re.M) else "answer_error",
            "usage": {"prompt_tokens": usage.get("prompt_tokens", len(prompt) // 4),
                      "completion_tokens": usage.get("completion_tokens", len(text) // 4)},
            "origin": {"about": args.origin, "custom_id": r["custom_id"], "model": body.get("model", ""),
                       "answer_round": rank},
            "answer": text,
        })
    with open(args.output, "w") as f:
        for e in out:
            f.write(json.dumps(e) + "\n")
    print(f"{args.output}: {len(out)} answer(s) of {len(requests)} request(s)")


if __name__ == "__main__":
    main()
