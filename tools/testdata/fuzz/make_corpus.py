#!/usr/bin/env python3
"""Writes the HTTP fuzzer's seed corpus (tests/fuzz/corpus/) and the issue's
reproducers (tests/fuzz/regressions/issue12-*), so both can be regenerated:

    tools/testdata/fuzz/make_corpus.py            # from the repository root

Input format (tests/fuzz/http_fuzzer.cc): the first byte picks the mode
(bit 0) and the server (bit 1: the one without --api-key).
  0x00 + bytes                  the bytes are written to the socket as they are
  0x01 + route + flags + body   a well-framed request to route kRoutes[route]
  0x02, 0x03                    the same, to the server without an API key
Seeds stay under the fuzzer's -max_len (8192); larger reproducers go to
regressions/, which ctest replays whole. Files this script did not write are
left alone (crash reproducers saved by hand live beside the issue12-* ones).
"""
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
CORPUS = os.path.join(ROOT, "tests", "fuzz", "corpus")
REGRESSIONS = os.path.join(ROOT, "tests", "fuzz", "regressions")
MAX_LEN = 8192
KEY = "fuzz-key"  # the harness's --api-key

# Route indices: kRoutes in http_fuzzer.cc.
COMPLETIONS, CHAT, RESPONSES, TOKENIZE, DETOKENIZE, MODELS, HEALTH, METRICS = range(8)
PING_GET, PING_POST, VERSION, LOAD, HEAD_HEALTH, OPTIONS, QUERY, ABSOLUTE = range(8, 16)
# Flags.
HTTP10, CHUNKED, EXPECT, CLOSE, NOAUTH, GZIP, OPENMETRICS, LOWER_BEARER = (1 << i for i in range(8))


def framed(route, body=b"", flags=0, open_server=False):
    if not isinstance(body, bytes):
        body = json.dumps(body, separators=(",", ":")).encode()
    return bytes([3 if open_server else 1, route, flags]) + body


def raw(wire, open_server=False):
    return (b"\x02" if open_server else b"\x00") + (
        wire.encode("latin-1") if isinstance(wire, str) else wire)


def request(method, target, body=b"", headers=(), version="1.1", auth=True, open_server=False):
    if isinstance(body, str):
        body = body.encode()
    head = f"{method} {target} HTTP/{version}\r\nHost: 127.0.0.1\r\n"
    if auth:
        head += f"Authorization: Bearer {KEY}\r\n"
    for h in headers:
        head += h + "\r\n"
    if body:
        head += f"Content-Length: {len(body)}\r\n"
    return raw(head.encode("latin-1") + b"\r\n" + body, open_server)


def nested(depth, leaf="1"):
    return "[" * depth + leaf + "]" * depth


MSG = [{"role": "user", "content": "Hi"}]
SEEDS = {
    # --- valid requests on every route ---
    "completion": framed(COMPLETIONS, {"model": "tiny", "prompt": "Hello", "max_tokens": 4}),
    "completion-stream-usage": framed(COMPLETIONS, {"prompt": "Hi", "stream": True,
                                                    "stream_options": {"include_usage": True}}),
    "completion-n-prompts": framed(COMPLETIONS, {"prompt": ["a", "bc"], "n": 3, "seed": 7,
                                                 "temperature": 0.5, "top_p": 0.9, "top_k": 5}),
    "completion-token-prompt": framed(COMPLETIONS, {"prompt": [72, 105, 256], "max_tokens": 2}),
    "completion-stop": framed(COMPLETIONS, {"prompt": "abcabc", "stop": ["ca", "x"],
                                            "stop_token_ids": [257], "min_tokens": 1,
                                            "ignore_eos": True}),
    "completion-stop-many": framed(COMPLETIONS, {"prompt": "ab", "n": 8,
                                                 "stop": ["s%d" % i for i in range(300)]}),
    "completion-invalid-utf8-echo": framed(COMPLETIONS, b'{"prompt":[195,40,226,130],"max_tokens":4}'),
    "completion-penalties": framed(COMPLETIONS, {"prompt": "p", "repetition_penalty": 1.1,
                                                 "presence_penalty": 0.5, "frequency_penalty": 0.5,
                                                 "min_p": 0.1, "priority": 1, "cache_salt": "s"}),
    "chat": framed(CHAT, {"model": "tiny", "messages": MSG, "max_completion_tokens": 3}),
    "chat-stream": framed(CHAT, {"messages": [{"role": "system", "content": "S"}] + MSG,
                                 "stream": True, "stream_options": {"include_usage": True}}),
    "chat-parts": framed(CHAT, {"messages": [{"role": "user", "content": [
        {"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}],
        "add_generation_prompt": False}),
    "chat-assistant": framed(CHAT, {"messages": MSG + [{"role": "assistant", "content": "ok"},
                                                       {"role": "developer", "content": "d"}]}),
    "responses": framed(RESPONSES, {"model": "tiny", "input": "Hi", "max_output_tokens": 3}),
    "responses-stream": framed(RESPONSES, {"input": [{"role": "user", "content": [
        {"type": "input_text", "text": "x"}]}], "instructions": "be brief", "stream": True}),
    "responses-metadata": framed(RESPONSES, {"input": "a", "metadata": {"k": "v"}}),
    "tokenize": framed(TOKENIZE, {"prompt": "Hello"}),
    "tokenize-messages": framed(TOKENIZE, {"messages": MSG, "add_generation_prompt": True}),
    "detokenize": framed(DETOKENIZE, {"tokens": [72, 105, 256, 195]}),
    "models": framed(MODELS),
    "health": framed(HEALTH),
    "metrics": framed(METRICS),
    "metrics-gzip-openmetrics": framed(METRICS, flags=GZIP | OPENMETRICS),
    "ping": framed(PING_GET),
    "ping-post": framed(PING_POST),
    "version": framed(VERSION),
    "load": framed(LOAD),
    "head-health": framed(HEAD_HEALTH),
    "options": framed(OPTIONS),
    "query-string": framed(QUERY, {"prompt": "q"}),
    "absolute-form": framed(ABSOLUTE, {"messages": MSG}),
    "chunked-body": framed(CHAT, {"messages": MSG}, CHUNKED),
    "expect-continue": framed(COMPLETIONS, {"prompt": "e"}, EXPECT),
    "http10": framed(COMPLETIONS, {"prompt": "old"}, HTTP10),
    "http10-stream": framed(CHAT, {"messages": MSG, "stream": True}, HTTP10),
    "connection-close": framed(TOKENIZE, {"prompt": "c"}, CLOSE),
    "no-auth": framed(COMPLETIONS, {"prompt": "a"}, NOAUTH),
    "lowercase-bearer": framed(COMPLETIONS, {"prompt": "a"}, LOWER_BEARER),
    # --- invalid bodies: validation must answer 400/404 ---
    "not-json": framed(COMPLETIONS, b"{prompt"),
    "not-object": framed(CHAT, b"[1,2]"),
    "empty-body": framed(RESPONSES, b""),
    "wrong-model": framed(COMPLETIONS, {"model": "other", "prompt": "x"}),
    "model-not-string": framed(CHAT, {"model": 5, "messages": MSG}),
    "include-usage-string": framed(COMPLETIONS, {"prompt": "x", "stream": True,
                                                 "stream_options": {"include_usage": "yes"}}),
    "stream-options-no-stream": framed(COMPLETIONS, {"prompt": "x",
                                                     "stream_options": {"include_usage": True}}),
    "add-generation-prompt-string": framed(CHAT, {"messages": MSG, "add_generation_prompt": "yes"}),
    "tokenize-add-generation-prompt-string": framed(TOKENIZE, {"messages": MSG,
                                                                "add_generation_prompt": "yes"}),
    "content-part-type-int": framed(CHAT, {"messages": [{"role": "user", "content": [
        {"type": 5, "text": "x"}]}]}),
    "responses-part-type-int": framed(RESPONSES, {"input": [{"role": "user", "content": [
        {"type": 5, "text": "x"}]}]}),
    "max-tokens-float": framed(COMPLETIONS, {"prompt": "x", "max_tokens": 1.5}),
    "max-tokens-negative": framed(COMPLETIONS, {"prompt": "x", "max_tokens": -1}),
    "max-tokens-huge": framed(COMPLETIONS, {"prompt": "x", "max_tokens": 2 ** 64}),
    "min-over-max": framed(COMPLETIONS, {"prompt": "x", "min_tokens": 5, "max_tokens": 2}),
    "n-zero": framed(COMPLETIONS, {"prompt": "x", "n": 0}),
    "n-too-many": framed(COMPLETIONS, {"prompt": ["a", "b"], "n": 100}),
    "temperature-string": framed(COMPLETIONS, {"prompt": "x", "temperature": "hot"}),
    "seed-negative": framed(COMPLETIONS, {"prompt": "x", "seed": -1}),
    "stop-token-ids-bad": framed(COMPLETIONS, {"prompt": "x", "stop_token_ids": [-1, "a", 1e9]}),
    "stop-not-strings": framed(COMPLETIONS, {"prompt": "x", "stop": [1, None]}),
    "logprobs": framed(COMPLETIONS, {"prompt": "x", "logprobs": 5}),
    "logprobs-too-many": framed(COMPLETIONS, {"prompt": "x", "logprobs": 21}),
    "logprobs-n-stream": framed(COMPLETIONS, {"prompt": ["ab", [195, 40]], "logprobs": 3, "n": 2,
                                              "stream": True}),
    "echo-score-only": framed(COMPLETIONS, {"prompt": [195, 40, 226, 130], "echo": True,
                                            "max_tokens": 0, "logprobs": 2}),
    "echo-stream": framed(COMPLETIONS, {"prompt": "\u00e9t\u00e9", "echo": True, "logprobs": 1,
                                        "stream": True, "max_tokens": 2}),
    "prompt-logprobs": framed(COMPLETIONS, {"prompt": "xyz", "prompt_logprobs": 20}),
    "prompt-logprobs-stream": framed(COMPLETIONS, {"prompt": "x", "prompt_logprobs": 1,
                                                   "stream": True}),
    "chat-logprobs": framed(CHAT, {"messages": [{"role": "user", "content": "x"}],
                                   "logprobs": True, "top_logprobs": 20, "prompt_logprobs": 2}),
    "chat-logprobs-stream": framed(CHAT, {"messages": [{"role": "user", "content": "x"}],
                                          "logprobs": True, "top_logprobs": 2, "stream": True,
                                          "n": 3}),
    "chat-top-logprobs-alone": framed(CHAT, {"messages": [{"role": "user", "content": "x"}],
                                             "top_logprobs": 2}),
    "echo-suffix-best-of": framed(COMPLETIONS, {"prompt": "x", "echo": True, "suffix": "s",
                                                "best_of": 2}),
    "prompt-empty-list": framed(COMPLETIONS, {"prompt": []}),
    "prompt-token-out-of-range": framed(COMPLETIONS, {"prompt": [99999, -5]}),
    "prompt-nested-lists": framed(COMPLETIONS, {"prompt": [[1, 2], [3]]}),
    "prompt-too-long": framed(COMPLETIONS, {"prompt": "x" * 3000}),
    "messages-not-list": framed(CHAT, {"messages": "hi"}),
    "message-no-role": framed(CHAT, {"messages": [{"content": "x"}]}),
    "message-bad-role": framed(CHAT, {"messages": [{"role": "tool", "content": "x"}]}),
    "message-content-null": framed(CHAT, {"messages": [{"role": "user", "content": None}]}),
    "responses-tools": framed(RESPONSES, {"input": "x", "tools": [{}]}),
    "responses-previous": framed(RESPONSES, {"input": "x", "previous_response_id": "r"}),
    "responses-background": framed(RESPONSES, {"input": "x", "background": True}),
    "responses-input-int": framed(RESPONSES, {"input": 5}),
    "detokenize-bad": framed(DETOKENIZE, {"tokens": [1.5, -1, 99999, "a"]}),
    "detokenize-missing": framed(DETOKENIZE, {}),
    "tokenize-prompt-int": framed(TOKENIZE, {"prompt": 5}),
    "invalid-utf8-string": framed(COMPLETIONS, b'{"prompt":"\xff\xfe","stop":["\xc3"]}'),
    "escaped-surrogate": framed(CHAT, b'{"messages":[{"role":"user","content":"\\ud800"}]}'),
    "deep-nesting-messages": framed(CHAT, ('{"messages":' + nested(1000) + "}").encode()),
    "deep-nesting-tokenize": framed(TOKENIZE, ('{"messages":' + nested(1000) + "}").encode()),
    "deep-nesting-metadata": framed(RESPONSES, ('{"input":"a","metadata":' + nested(1000) + "}").encode()),
    "deep-nesting-objects": framed(COMPLETIONS, ('{"prompt":"a","x":' + '{"a":' * 500 + "1" + "}" * 500 + "}").encode()),
    "duplicate-keys": framed(COMPLETIONS, b'{"prompt":"a","prompt":5}'),
    # --- raw HTTP: framing and targets ---
    "raw-get-health": request("GET", "/health", auth=False),
    "raw-bad-utf8-target": raw(b"GET /\xff HTTP/1.1\r\nHost: a\r\n\r\n", True),
    "raw-bad-utf8-post": raw(b"POST /v1/\xc3\x28 HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\n{}",
                             True),
    "raw-bad-utf8-put": raw(b"PUT /\x80 HTTP/1.1\r\nHost: a\r\n\r\n", True),
    "raw-bad-utf8-keyed": request("GET", "/\xff\xfe"),
    "raw-method-not-allowed": request("DELETE", "/v1/completions"),
    "raw-method-not-allowed-utf8": raw("GET\xff /tokenize HTTP/1.1\r\nHost: a\r\n\r\n", True),
    "raw-unknown-path": request("GET", "/nope?x=\xff"),
    "raw-open-completion": request("POST", "/v1/completions", '{"prompt":"o","stream":true}',
                                   auth=False, open_server=True),
    "raw-no-host": raw("GET /health HTTP/1.1\r\n\r\n"),
    "raw-http10": raw("GET /health HTTP/1.0\r\n\r\n"),
    "raw-http09": raw("GET /health\r\n\r\n"),
    "raw-http2-preface": raw("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"),
    "raw-absolute-form": request("GET", "http://127.0.0.1:8000/v1/models"),
    "raw-asterisk": request("OPTIONS", "*"),
    "raw-connect": request("CONNECT", "127.0.0.1:80"),
    "raw-head": request("HEAD", "/v1/models"),
    "raw-te-gzip": request("POST", "/v1/completions", headers=["Transfer-Encoding: gzip"]),
    "raw-te-gzip-chunked": raw("POST /v1/completions HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer "
                               + KEY + "\r\nTransfer-Encoding: gzip, chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n"),
    "raw-te-and-cl": raw("POST /tokenize HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer " + KEY
                         + "\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
    "raw-two-cl": raw("POST /tokenize HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\nContent-Length: 3"
                      "\r\n\r\n{}"),
    "raw-bad-chunk": raw("POST /tokenize HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
                         "zz\r\n{}\r\n0\r\n\r\n"),
    "raw-chunk-ext-trailer": raw("POST /tokenize HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer " + KEY
                                 + "\r\nTransfer-Encoding: chunked\r\n\r\n10;ext=1\r\n"
                                 '{"prompt":"abc"}\r\n0\r\nX-T: 1\r\n\r\n'),
    "raw-expect-no-body": raw("POST /v1/completions HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\n"
                              "Content-Length: 20\r\n\r\n"),
    "raw-expect-unknown": request("POST", "/tokenize", '{"prompt":"a"}', ["Expect: 200-ok"]),
    "raw-body-limit": raw("POST /tokenize HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999\r\n\r\n"),
    "raw-negative-cl": raw("POST /tokenize HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n"),
    "raw-pipelined": raw("GET /health HTTP/1.1\r\nHost: a\r\n\r\nGET /version HTTP/1.1\r\nHost: a\r\n"
                         "Authorization: Bearer " + KEY + "\r\n\r\nGET /ping HTTP/1.1\r\n"),
    "raw-partial-header": raw("GET /health HTTP/1.1\r\nHost: a"),
    "raw-partial-body": raw("POST /tokenize HTTP/1.1\r\nHost: a\r\nContent-Length: 100\r\n\r\n{"),
    "raw-bare-lf": raw("GET /health HTTP/1.1\nHost: a\n\n"),
    "raw-obs-fold": raw("GET /health HTTP/1.1\r\nHost: a\r\nX: a\r\n b\r\n\r\n"),
    "raw-header-no-colon": raw("GET /health HTTP/1.1\r\nHost a\r\n\r\n"),
    "raw-nul-in-header": raw(b"GET /health HTTP/1.1\r\nHost: a\x00b\r\n\r\n"),
    "raw-long-header": raw("GET /health HTTP/1.1\r\nHost: a\r\nX: " + "a" * 6000 + "\r\n\r\n"),
    "raw-many-headers": raw("GET /health HTTP/1.1\r\nHost: a\r\n" + "X: 1\r\n" * 300 + "\r\n"),
    "raw-auth-wrong": request("POST", "/tokenize", '{"prompt":"a"}', ["Authorization: Bearer nope"],
                              auth=False),
    "raw-auth-basic": request("GET", "/v1/models", headers=["Authorization: Basic Zm9v"], auth=False),
    "raw-auth-lower": request("GET", "/v1/models", headers=["authorization: BEARER " + KEY],
                              auth=False),
    "raw-metrics-accept": request("GET", "/metrics", headers=[
        "Accept: application/openmetrics-text;version=1.0.0,text/plain;q=0.5",
        "Accept-Encoding: gzip, deflate"], auth=False),
    "raw-keepalive-10": raw("GET /health HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"
                            "GET /health HTTP/1.0\r\n\r\n"),
    "raw-upgrade-ws": raw("GET /health HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\n"
                          "Connection: Upgrade\r\n\r\n"),
    "raw-empty": raw(b""),
    "raw-crlf-only": raw("\r\n\r\n\r\n"),
    "raw-garbage": raw(bytes(range(256))),
}

REGRESSIONS_ISSUE12 = {
    # Section 1 of issue 12, as reported: each once ended the process.
    "issue12-bad-utf8-get": raw(b"GET /\xff HTTP/1.1\r\nHost: a\r\n\r\n", True),
    "issue12-bad-utf8-post": raw(
        b"POST /v1/\xc3\x28 HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\n{}", True),
    "issue12-bad-utf8-put": raw(b"PUT /\x80 HTTP/1.1\r\nHost: a\r\n\r\n", True),
    "issue12-include-usage-string": framed(COMPLETIONS, {"prompt": "x", "stream_options": {
        "include_usage": "yes"}}),
    "issue12-chat-add-generation-prompt-string": framed(CHAT, {"messages": MSG,
                                                               "add_generation_prompt": "yes"}),
    "issue12-tokenize-add-generation-prompt-string": framed(TOKENIZE, {
        "messages": MSG, "add_generation_prompt": "yes"}),
    "issue12-chat-part-type-int": framed(CHAT, {"messages": [{"role": "user", "content": [
        {"type": 5, "text": "x"}]}]}),
    "issue12-responses-part-type-int": framed(RESPONSES, {"input": [{"role": "user", "content": [
        {"type": 5, "text": "x"}]}]}),
    "issue12-deep-chat": framed(CHAT, ('{"messages":' + nested(100000) + "}").encode()),
    "issue12-deep-tokenize": framed(TOKENIZE, ('{"messages":' + nested(100000) + "}").encode()),
    "issue12-deep-responses-metadata": framed(
        RESPONSES, ('{"input":"a","metadata":' + nested(100000) + "}").encode()),
}


# The generation routes once more on the server without an API key.
for _name in ("completion-stream-usage", "chat-stream", "responses-stream", "tokenize-messages"):
    SEEDS["open-" + _name] = bytes([SEEDS[_name][0] | 2]) + SEEDS[_name][1:]


def write(directory, files, max_len=None):
    os.makedirs(directory, exist_ok=True)
    for name, data in sorted(files.items()):
        if max_len is not None and len(data) > max_len:
            sys.exit(f"make_corpus: seed {name} is {len(data)} bytes, over {max_len}")
        with open(os.path.join(directory, name), "wb") as f:
            f.write(data)


def main():
    # The corpus is all ours: stale seeds go.
    if os.path.isdir(CORPUS):
        for name in os.listdir(CORPUS):
            os.remove(os.path.join(CORPUS, name))
    write(CORPUS, SEEDS, MAX_LEN)
    write(REGRESSIONS, REGRESSIONS_ISSUE12)
    print(f"make_corpus: {len(SEEDS)} seeds in {CORPUS}, "
          f"{len(REGRESSIONS_ISSUE12)} reproducers in {REGRESSIONS}")


if __name__ == "__main__":
    main()
