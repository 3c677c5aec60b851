#!/usr/bin/env python3
"""Writes tests/tokenizer/testdata/utf8_lossy.json: byte sequences and the
text Python's bytes.decode("utf-8", errors="replace") makes of them (one
U+FFFD per maximal subpart of an ill-formed sequence, Unicode 3.9; the same
as Rust's String::from_utf8_lossy, which Hugging Face tokenizers and so
vLLM use). The C++ detokenizer is tested against this file, so the
expectations come from an implementation that is not ours.

Run from the repository root: python3 tools/testdata/utf8_reference/generate_utf8_lossy.py
The output is deterministic (fixed seed); commit it.
"""
import json
import os
import random

# Pieces random sequences are made of: each kind of well-formed and
# ill-formed UTF-8 the standard distinguishes.
VALID = [
    b"a", b"Z", b" ", b"\n", b"\x00", b"\x7f",
    "é".encode(), "ß".encode(), "\u07ff".encode(),            # 2 bytes
    "世".encode(), "\u0800".encode(), "\ud7ff".encode(),       # 3 bytes
    "\ue000".encode(), "\uffff".encode(), "\ufffd".encode(),
    "🎉".encode(), "\U00010000".encode(), "\U0010ffff".encode(),  # 4 bytes
]
INVALID = [
    b"\x80", b"\xbf", b"\x9f",                   # lone continuation bytes
    b"\xc0\x80", b"\xc1\xbf",                    # overlong 2-byte
    b"\xe0\x80\x80", b"\xe0\x9f\xbf",            # overlong 3-byte
    b"\xf0\x80\x80\x80", b"\xf0\x8f\xbf\xbf",    # overlong 4-byte
    b"\xed\xa0\x80", b"\xed\xbf\xbf",            # surrogates
    b"\xf4\x90\x80\x80", b"\xf7\xbf\xbf\xbf",    # above U+10FFFF
    b"\xf5", b"\xf8\x88\x80\x80\x80", b"\xfe", b"\xff",
    b"\xc3", b"\xe4\xb8", b"\xf0\x9f\x98",       # truncated (then anything)
    b"\xe4", b"\xf0\x9f", b"\xf0",
]

HANDPICKED = [
    b"",
    b"\xf0\x9f\x98\x41",          # the example: U+FFFD "A"
    b"\xf0\x9f\x98",              # truncated at the end
    b"\xe2\x82",
    b"a\xff\xc3b\xe4\xb8",
    b"\xc0\x80",
    b"\xed\xa0\x80\xed\xb0\x80",  # a surrogate pair in CESU-8
    b"\xf4\x8f\xbf\xbf\xf4\x90\x80\x80",
    b"\xe0\xa0\x80\xe0\x9f\x80",
    b"\xf0\x90\x80\x80\xf0\x8f\x80\x80",
    b"\x80\x80\x80\x80",
    b"\xc2\xc2\xc2\xa9",
    b"\xe4\xb8\xe4\xb8\x96",
    b"\xf1\x80\x80\xe1\x80\xc2",
    b"\xef\xbf\xbd\xef\xbf",
]


def random_case(rng):
    out = b""
    for _ in range(rng.randint(1, 12)):
        pool = VALID if rng.random() < 0.55 else INVALID
        out += rng.choice(pool)
    if rng.random() < 0.3:  # cut anywhere, often inside a character
        out = out[: rng.randint(0, len(out))]
    return out


def uniform_case(rng):
    return bytes(rng.randint(0x80, 0xff) if rng.random() < 0.7 else rng.randint(0, 0xff)
                 for _ in range(rng.randint(1, 10)))


def main():
    rng = random.Random(15)
    cases = list(HANDPICKED)
    cases += [random_case(rng) for _ in range(300)]
    cases += [uniform_case(rng) for _ in range(100)]
    seen, rows = set(), []
    for b in cases:
        if b in seen:
            continue
        seen.add(b)
        rows.append({"bytes": list(b), "text": b.decode("utf-8", errors="replace")})
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(here, "..", "..", "..", "tests", "tokenizer", "testdata", "utf8_lossy.json")
    with open(path, "w", encoding="ascii") as f:  # one case a line, for readable diffs
        f.write('{"generator": "tools/testdata/utf8_reference/generate_utf8_lossy.py",\n')
        f.write(' "reference": "Python bytes.decode(\'utf-8\', errors=\'replace\')",\n')
        f.write(' "cases": [\n')
        f.write(",\n".join(json.dumps(r, ensure_ascii=True) for r in rows))
        f.write("\n]}\n")
    print(len(rows), "cases written to", os.path.normpath(path))


if __name__ == "__main__":
    main()
