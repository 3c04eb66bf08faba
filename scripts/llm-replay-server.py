#!/usr/bin/env python3
"""A stand-in LLM endpoint on loopback for runs without a model (docs/evolve.md, "The LLM proposer").

It speaks the OpenAI chat-completions API and answers every request with the recorded answer for the
prompt's task: the shipped seed (tasks/<suite>/seeds/<name>.md), marked with a counter so each answer
is a new candidate. It reads only the request text. Use:

    python3 scripts/llm-replay-server.py 8765 &
    OPENAI_BASE_URL=http://127.0.0.1:8765/v1 OPENAI_API_KEY=none kforge evolve smoke --model openai:replay
"""
import http.server
import json
import pathlib
import re
import sys
import threading

ROOT = pathlib.Path(__file__).resolve().parent.parent
count = 0
lock = threading.Lock()


class Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        global count
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        prompt = body["messages"][-1]["content"]
        m = re.search(r"## The operation: (\S+)/(\S+)", prompt)
        seed = ROOT / "tasks" / m.group(1) / "seeds" / (m.group(2) + ".md") if m else None
        if seed and seed.exists():
            with lock:
                count += 1
                n = count
            text = seed.read_text().replace("```cuda\n", f"```cuda\n// replayed answer {n}\n", 1)
        else:
            text = "I have no recorded answer for this prompt."
        reply = {"model": "replay", "choices": [{"index": 0, "message": {"role": "assistant", "content": text}}],
                 "usage": {"prompt_tokens": len(prompt) // 4, "completion_tokens": len(text) // 4}}
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


if __name__ == "__main__":
    http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1]) if len(sys.argv) > 1 else 8765), Handler).serve_forever()
