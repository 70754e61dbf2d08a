#!/usr/bin/env python3
"""Serves what train.py trained: a model server for a refuel service.

It loads the newest complete checkpoint of the PyTorch example (the
weights.bin of its highest step-<N> directory: the student MLP's
parameters as little-endian float32 in state_dict order) and answers
predictions with the standard library alone, so the replicas need no
torch. It follows the service contract: it listens on $REFUEL_PORT, and
GET /healthz answers 200 only once the weights are loaded (the readiness
probe; the time until then is the model-load time refuel measures).

  POST /v1/predict  {"x": [16 numbers in -1..1]}  ->  {"y": number, "step": N}
  GET  /healthz     200 "ok" once loaded, 503 before

Usage: serve.py CHECKPOINT_DIR   (the job's checkpoint directory in its
store, e.g. the file:// store's <root>/<job id>/, or a copy of it)
"""

import json
import math
import os
import re
import struct
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

FEATURES, HIDDEN = 16, 32  # train.py's model: Linear(16, 32), Tanh, Linear(32, 1)
_model = None


def newest_weights(root):
    """The weights.bin of the highest step-<N> directory that has one."""
    steps = []
    for dirpath, dirnames, _ in os.walk(root):
        for d in dirnames:
            m = re.fullmatch(r"step-(\d+)", d)
            if m and os.path.exists(os.path.join(dirpath, d, "weights.bin")):
                steps.append((int(m.group(1)), os.path.join(dirpath, d, "weights.bin")))
    if not steps:
        raise SystemExit("serve.py: no step-<N>/weights.bin under %s: train first (examples/pytorch/job.yaml)" % root)
    return max(steps)


def load(path):
    with open(path, "rb") as f:
        data = f.read()
    want = 4 * (HIDDEN * FEATURES + HIDDEN + HIDDEN + 1)
    if len(data) != want:
        raise SystemExit("serve.py: %s holds %d bytes; train.py's model has %d" % (path, len(data), want))
    v = struct.unpack("<%df" % (want // 4), data)
    i = 0

    def take(n):
        nonlocal i
        out = v[i:i + n]
        i += n
        return out

    w1 = [take(FEATURES) for _ in range(HIDDEN)]
    b1 = take(HIDDEN)
    w2 = take(HIDDEN)
    b2 = take(1)[0]
    return w1, b1, w2, b2


def predict(model, x):
    w1, b1, w2, b2 = model
    h = [math.tanh(sum(w * xi for w, xi in zip(row, x)) + b) for row, b in zip(w1, b1)]
    return sum(w * hi for w, hi in zip(w2, h)) + b2


class Handler(BaseHTTPRequestHandler):
    def reply(self, code, body):
        data = json.dumps(body).encode() if not isinstance(body, str) else body.encode()
        self.send_response(code)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/healthz":
            self.reply(200, "ok") if _model else self.reply(503, "loading")
        else:
            self.reply(404, {"error": "GET /healthz or POST /v1/predict"})

    def do_POST(self):
        if self.path != "/v1/predict":
            return self.reply(404, {"error": "POST /v1/predict"})
        if not _model:
            return self.reply(503, {"error": "loading"})
        try:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            x = [float(v) for v in body["x"]]
            if len(x) != FEATURES:
                raise ValueError("x needs %d numbers" % FEATURES)
        except (ValueError, KeyError, TypeError) as e:
            return self.reply(400, {"error": str(e)})
        self.reply(200, {"y": predict(_model[1], x), "step": _model[0]})

    def log_message(self, fmt, *args):
        pass


def main():
    global _model
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    port = int(os.environ.get("REFUEL_PORT", "8080"))
    server = ThreadingHTTPServer(("", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    step, path = newest_weights(sys.argv[1])
    print("loading %s (step %d)" % (path, step), file=sys.stderr, flush=True)
    _model = (step, load(path))
    print("serving step %d on port %d" % (step, port), file=sys.stderr, flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    sys.exit(main())
