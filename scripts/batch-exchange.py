#!/usr/bin/env python3
"""Work a `kforge evolve --model batch:DIR` folder by hand or with any client.

  batch-exchange.py pending DIR [--out PROMPTS]
      Writes each unanswered request of DIR/requests.jsonl as PROMPTS/<custom_id>.md (its system
      and user text) and prints how many there are. PROMPTS defaults to DIR/pending.
  batch-exchange.py collect DIR [--answers ANSWERS] [--model NAME]
      Turns each ANSWERS/<custom_id>.md (the model's whole answer text) whose request is still
      unanswered into one line of a new DIR/answers-<time>.jsonl in the OpenAI Batch API's output
      format, written whole and then renamed, so a running kforge never reads half a file.
      ANSWERS defaults to DIR/answered. Token counts are estimates (characters / 4) and say so.

Then `kforge evolve --resume RUN` reads the answers. Only the standard library is used.
"""
import argparse
import json
import os
import sys
import time
from pathlib import Path


def read_jsonl(path):
    out = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                print(f"{path}:{n}: not a JSON line (skipped)", file=sys.stderr)
    return out


def requests(folder):
    path = folder / "requests.jsonl"
    if not path.exists():
        sys.exit(f"{path}: no such file (is {folder} a kforge batch folder?)")
    return read_jsonl(path)


def answered(folder):
    ids = set()
    for p in folder.glob("*.jsonl"):
        if p.name != "requests.jsonl":
            ids.update(j.get("custom_id") for j in read_jsonl(p) if isinstance(j, dict))
    return ids


def pending(args):
    folder = Path(args.dir)
    out = Path(args.out) if args.out else folder / "pending"
    out.mkdir(parents=True, exist_ok=True)
    done = answered(folder)
    n = 0
    for r in requests(folder):
        if r["custom_id"] in done:
            continue
        text = "\n\n".join(f"<!-- {m['role']} -->\n{m['content']}" for m in r["body"]["messages"])
        (out / f"{r['custom_id']}.md").write_text(text, encoding="utf-8")
        n += 1
    print(f"{n} unanswered request(s) written to {out}")


def collect(args):
    folder = Path(args.dir)
    answers = Path(args.answers) if args.answers else folder / "answered"
    done = answered(folder)
    by_id = {r["custom_id"]: r for r in requests(folder)}
    lines = []
    for p in sorted(answers.glob("*.md")):
        cid = p.stem
        if cid not in by_id:
            print(f"{p}: no request {cid} in {folder / 'requests.jsonl'} (skipped)", file=sys.stderr)
            continue
        if cid in done:
            continue
        text = p.read_text(encoding="utf-8")
        prompt = sum(len(m["content"]) for m in by_id[cid]["body"]["messages"])
        usage = {"prompt_tokens": prompt // 4, "completion_tokens": len(text) // 4,
                 "total_tokens": prompt // 4 + len(text) // 4, "estimated": True}
        body = {"id": f"chatcmpl-{cid}", "object": "chat.completion", "created": int(time.time()),
                "model": args.model or by_id[cid]["body"].get("model", "batch"),
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": text}}],
                "usage": usage}
        lines.append({"id": f"batch_req_{cid}", "custom_id": cid,
                      "response": {"status_code": 200, "request_id": cid, "body": body}, "error": None})
    if not lines:
        print("no new answers")
        return
    final = folder / f"answers-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}.jsonl"
    tmp = final.with_suffix(".tmp")
    tmp.write_text("".join(json.dumps(l) + "\n" for l in lines), encoding="utf-8")
    tmp.rename(final)
    print(f"{len(lines)} answer(s) written to {final}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("pending")
    p.add_argument("dir")
    p.add_argument("--out")
    p.set_defaults(fn=pending)
    c = sub.add_parser("collect")
    c.add_argument("dir")
    c.add_argument("--answers")
    c.add_argument("--model")
    c.set_defaults(fn=collect)
    args = ap.parse_args()
    args.fn(args)


if __name__ == "__main__":
    main()
