#!/usr/bin/env python3
"""Work a `kforge evolve --model batch:DIR` folder by hand or with any client.

DIR/requests.jsonl holds kforge's requests, each line in the format of the API it was written for:
an OpenAI Batch API input line (custom_id, method, url, body: a chat completions body) or, with
`--batch-model anthropic:MODEL`, an Anthropic Message Batches request item (custom_id, params: a
Messages API body). Both may be in one folder; each is answered in its own format.

  batch-exchange.py pending DIR [--out PROMPTS]
      Writes each unanswered request of DIR/requests.jsonl as PROMPTS/<custom_id>.md (its system
      and user text), removes the files there of requests answered since, and prints how many
      there are. PROMPTS defaults to DIR/pending.
  batch-exchange.py collect DIR [--answers ANSWERS] [--model NAME]
      Turns each ANSWERS/<custom_id>.md (the model's whole answer text) whose request is still
      unanswered into one line of a new DIR/answers-<time>.jsonl, in the output format of the
      request's API: an OpenAI Batch API output line (a chat completion), or an Anthropic results
      line (result type "succeeded" with a Messages response). The file is written whole and then
      renamed, so a running kforge never reads half a file. ANSWERS defaults to DIR/answered.
      Token counts are estimates (characters / 4) and say so ("estimated": true in the usage).
  batch-exchange.py anthropic-body DIR [--first N] > batch.json
      Prints the body to submit DIR's unanswered Anthropic requests as one Message Batch,
      {"requests": [{"custom_id": ..., "params": ...}, ...]}, for POST /v1/messages/batches:
          curl https://api.anthropic.com/v1/messages/batches -H "x-api-key: $ANTHROPIC_API_KEY" \\
               -H "anthropic-version: 2023-06-01" -H "content-type: application/json" -d @batch.json
      Once the batch has ended, save its results (GET /v1/messages/batches/<id>/results, a .jsonl)
      under another name and rename it into DIR as <anything>.jsonl: kforge reads results lines as
      they are. OpenAI-format requests are left out (said on stderr). A batch holds at most 100,000
      requests and 256 MB: past that it is an error; --first N takes the first N unanswered.
      With no unanswered Anthropic request, it says so and exits with 1.

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
MAX_FILE_BYTES = 1 << 30  # kforge's own bounds (evolve/src/llm/batch.cpp)
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


def is_anthropic(r):
    """Whether a (checked) request is an Anthropic Message Batches item rather than an OpenAI line."""
    return "params" in r


def check_text_blocks(blocks, where):
    """A string, or a list of content blocks each with a string type (a text block's text a string)."""
    if isinstance(blocks, str):
        return
    if not isinstance(blocks, list):
        raise Bad(f"{where}: must be a string or a list of content blocks")
    for i, b in enumerate(blocks):
        if (not isinstance(b, dict) or not isinstance(b.get("type"), str)
                or (b["type"] == "text" and not isinstance(b.get("text"), str))):
            raise Bad(f"{where}[{i}]: must be a content block with a string type (a text block's text a string)")


def check_anthropic(r, where):
    params = r["params"]
    if not isinstance(params, dict):
        raise Bad(f"{where}: params: must be an object (a Messages API body)")
    if not isinstance(params.get("model"), str):
        raise Bad(f"{where}: params.model: must be a string")
    if "system" in params:
        check_text_blocks(params["system"], f"{where}: params.system")
    messages = params.get("messages")
    if not isinstance(messages, list) or not messages:
        raise Bad(f"{where}: params.messages: must be a list of messages")
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str) or "content" not in m:
            raise Bad(f"{where}: params.messages[{i}]: must be an object with a string role and content")
        check_text_blocks(m["content"], f"{where}: params.messages[{i}].content")


def check_openai(r, where):
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


def check_request(r, where):
    if not isinstance(r, dict):
        raise Bad(f"{where}: a request must be a JSON object")
    cid = r.get("custom_id")
    if not isinstance(cid, str) or not ID.match(cid):
        raise Bad(f"{where}: custom_id: must be a name of letters, digits, '-' and '_' (kforge writes kf- and 24 hex "
                  f"digits), got {json.dumps(cid)[:80]}")
    (check_anthropic if is_anthropic(r) else check_openai)(r, where)
    return r


def block_text(content):
    """A message's (or Anthropic system's) text: a string, or its text blocks joined by a blank line."""
    if isinstance(content, str):
        return content
    return "\n\n".join(b["text"] if b["type"] == "text" else f"[a {b['type']} block]" for b in content)


def prompt_parts(r):
    """(role, text) of each part of a request's prompt, its system text first."""
    if not is_anthropic(r):
        return [(m["role"], m["content"]) for m in r["body"]["messages"]]
    params = r["params"]
    parts = [("system", block_text(params["system"]))] if params.get("system") else []
    return parts + [(m["role"], block_text(m["content"])) for m in params["messages"]]


def request_model(r):
    return r["params"]["model"] if is_anthropic(r) else r["body"].get("model", "batch")


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
        text = "\n\n".join(f"<!-- {role} -->\n{part}" for role, part in prompt_parts(r))
        write_new(out / f"{r['custom_id']}.md", text)
    # An earlier `pending`'s prompt whose request has an answer now is not work left: removed.
    removed = 0
    for cid in sorted(done):
        stale = out / f"{cid}.md"
        if ID.match(cid) and stale.is_file() and not stale.is_symlink():
            stale.unlink()
            removed += 1
    print(f"{len(todo)} unanswered request(s) written to {out}"
          + (f"; {removed} answered one(s) removed from it" if removed else ""))


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
        prompt = sum(len(part) for _, part in prompt_parts(by_id[cid])) // 4
        model = args.model or request_model(by_id[cid])
        if is_anthropic(by_id[cid]):
            message = {"id": f"msg_{cid}", "type": "message", "role": "assistant", "model": model,
                       "content": [{"type": "text", "text": text}], "stop_reason": "end_turn", "stop_sequence": None,
                       "usage": {"input_tokens": prompt, "output_tokens": len(text) // 4, "estimated": True}}
            lines.append({"custom_id": cid, "result": {"type": "succeeded", "message": message}})
            continue
        usage = {"prompt_tokens": prompt, "completion_tokens": len(text) // 4,
                 "total_tokens": prompt + len(text) // 4, "estimated": True}
        body = {"id": f"chatcmpl-{cid}", "object": "chat.completion", "created": int(time.time()), "model": model,
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


# What one Message Batch may hold (Anthropic's documented limits) and its custom_id's form.
BATCH_MAX_REQUESTS = 100_000
BATCH_MAX_BYTES = 256 << 20
ANTHROPIC_ID = re.compile(r"[A-Za-z0-9_-]{1,64}\Z")


def anthropic_body(args):
    folder = Path(args.dir)
    done = answered(folder)
    todo = [r for r in requests(folder) if r["custom_id"] not in done]
    items = [{"custom_id": r["custom_id"], "params": r["params"]} for r in todo if is_anthropic(r)]
    if len(items) < len(todo):
        print(f"{len(todo) - len(items)} unanswered OpenAI-format request(s) left out (they are OpenAI Batch API "
              f"lines)", file=sys.stderr)
    for item in items:
        if not ANTHROPIC_ID.match(item["custom_id"]):
            raise Bad(f"{folder / 'requests.jsonl'}: custom_id {item['custom_id']}: Anthropic takes at most 64 letters, "
                      f"digits, '-' and '_'")
    if args.first is not None:
        items = items[:args.first]
    if not items:
        raise Bad(f"{folder / 'requests.jsonl'}: no unanswered Anthropic request")
    text = json.dumps({"requests": items}) + "\n"
    size = len(text.encode("utf-8"))
    if len(items) > BATCH_MAX_REQUESTS or size > BATCH_MAX_BYTES:
        raise Bad(f"{folder / 'requests.jsonl'}: {len(items)} request(s), {size} bytes: past what one Message Batch "
                  f"holds ({BATCH_MAX_REQUESTS} requests, {BATCH_MAX_BYTES} bytes); take part of them with --first N")
    sys.stdout.write(text)
    print(f"{len(items)} request(s) for POST /v1/messages/batches", file=sys.stderr)


def positive(text):
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1, got {text!r}")
    return n


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
    b = sub.add_parser("anthropic-body")
    b.add_argument("dir")
    b.add_argument("--first", type=positive)
    b.set_defaults(fn=anthropic_body)
    args = ap.parse_args()
    try:
        args.fn(args)
    except Bad as e:
        sys.exit(f"batch-exchange.py: {e}")
    except OSError as e:
        sys.exit(f"batch-exchange.py: {e.filename or ''}: {e.strerror}")


if __name__ == "__main__":
    main()
