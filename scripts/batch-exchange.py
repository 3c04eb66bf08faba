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
import re
import stat
import sys
import time
from pathlib import Path

# The folder may come from elsewhere: what it holds is checked before it is used. Ids become file
# names, so they are kforge's own form or at least plain names (no '/', no '..', not absolute).
ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}\Z")
MAX_FILE_BYTES = 1 << 30  # kforge's own bounds (evolve/src/batch.cpp)
MAX_LINE_BYTES = 64 << 20


class Bad(Exception):
    """Bad input: one line, "PATH[:LINE]: problem"."""


def read_text(path, limit=MAX_FILE_BYTES):
    """The text of a regular file (after links) of at most `limit` bytes; never blocks on a FIFO."""
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            raise Bad(f"{path}: not a regular file (a FIFO, device or folder)")
        if st.st_size > limit:
            raise Bad(f"{path}: {st.st_size} bytes; the limit is {limit}")
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise Bad(f"{path}: not a regular file (a FIFO, device or folder)")
            data = f.read(limit + 1)
    except OSError as e:
        raise Bad(f"{path}: {e.strerror}")
    if len(data) > limit:
        raise Bad(f"{path}: more than {limit} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise Bad(f"{path}: not UTF-8 ({e.reason} at byte {e.start})")


def read_jsonl(path, strict):
    """(line number, value) of each JSON line; a line that is not JSON is an error when `strict`,
    else skipped with a note (an answer file still being written)."""
    out = []
    for n, line in enumerate(read_text(path).split("\n"), 1):
        if len(line) > MAX_LINE_BYTES:
            raise Bad(f"{path}:{n}: a line of more than {MAX_LINE_BYTES} bytes")
        line = line.strip()
        if not line:
            continue
        try:
            out.append((n, json.loads(line)))
        except (ValueError, RecursionError) as e:
            why = "nested too deep" if isinstance(e, RecursionError) else str(e)
            if strict:
                raise Bad(f"{path}:{n}: not a JSON line ({why})")
            print(f"{path}:{n}: not a JSON line (skipped)", file=sys.stderr)
    return out


def check_request(r, where):
    if not isinstance(r, dict):
        raise Bad(f"{where}: a request must be a JSON object")
    cid = r.get("custom_id")
    if not isinstance(cid, str) or not ID.match(cid):
        raise Bad(f"{where}: custom_id: must be a name of letters, digits, '-' and '_' (kforge writes kf- and 24 hex "
                  f"digits), got {json.dumps(cid)[:80]}")
    body = r.get("body")
    messages = body.get("messages") if isinstance(body, dict) else None
    if not isinstance(messages, list) or not messages:
        raise Bad(f"{where}: body.messages: must be a list of messages")
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str) or not isinstance(m.get("content"), str):
            raise Bad(f"{where}: body.messages[{i}]: must be an object with a string role and content")
    model = body.get("model", "batch")
    if not isinstance(model, str):
        raise Bad(f"{where}: body.model: must be a string")
    return r


def requests(folder):
    path = folder / "requests.jsonl"
    if not path.exists():
        raise Bad(f"{path}: no such file (is {folder} a kforge batch folder?)")
    return [check_request(r, f"{path}:{n}") for n, r in read_jsonl(path, strict=True)]


def answered(folder):
    ids = set()
    for p in sorted(folder.glob("*.jsonl")):
        if p.name != "requests.jsonl":
            ids.update(j["custom_id"] for _, j in read_jsonl(p, strict=False)
                       if isinstance(j, dict) and isinstance(j.get("custom_id"), str))
    return ids


def write_new(path, text):
    """Writes `path`, never through a symbolic link planted there."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    except OSError as e:
        raise Bad(f"{path}: cannot write ({e.strerror})")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)


def pending(args):
    folder = Path(args.dir)
    out = Path(args.out) if args.out else folder / "pending"
    done = answered(folder)
    todo = [r for r in requests(folder) if r["custom_id"] not in done]
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise Bad(f"{out}: cannot create the folder ({e.strerror})")
    for r in todo:
        text = "\n\n".join(f"<!-- {m['role']} -->\n{m['content']}" for m in r["body"]["messages"])
        write_new(out / f"{r['custom_id']}.md", text)
    print(f"{len(todo)} unanswered request(s) written to {out}")


def collect(args):
    folder = Path(args.dir)
    answers = Path(args.answers) if args.answers else folder / "answered"
    done = answered(folder)
    by_id = {r["custom_id"]: r for r in requests(folder)}
    lines = []
    for p in sorted(answers.glob("*.md")):
        cid = p.stem
        if cid not in by_id or not ID.match(cid):
            print(f"{p}: no request {cid} in {folder / 'requests.jsonl'} (skipped)", file=sys.stderr)
            continue
        if cid in done:
            continue
        text = read_text(p, MAX_LINE_BYTES // 2)
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
    write_new(tmp, "".join(json.dumps(l) + "\n" for l in lines))
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
    try:
        args.fn(args)
    except Bad as e:
        sys.exit(f"batch-exchange.py: {e}")
    except OSError as e:
        sys.exit(f"batch-exchange.py: {e.filename or ''}: {e.strerror}")


if __name__ == "__main__":
    main()
