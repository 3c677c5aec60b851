#!/usr/bin/env python3
"""Greedy tokens of random checkpoints from a PyTorch forward pass written from
the transformers model definitions (LlamaForCausalLM, MistralForCausalLM,
Qwen2ForCausalLM, Qwen3ForCausalLM), independently of Sightline's runner.

It asks `sightline make-model` for each family's checkpoint (a real Hugging
Face directory: config.json and safetensors), reads the files itself, runs
the model in float64 and writes the prompts, greedy continuations and the
smallest top-1 margin to a JSON file that the engine tests compare against
(tests/engine_core/model_families_test.cc). Needs python3-torch (Debian).

  /usr/bin/python3 tools/model_reference/reference.py build/tools/sightline \
      tests/engine_core/testdata/model_reference/families.json
"""
import json
import random
import struct
import subprocess
import sys
import tempfile

import torch

SEED = 77
# (family, preset, sliding window written into config.json or None)
CASES = [("llama", "sightline-small", None), ("mistral", "sightline-small", 12),
         ("qwen2", "sightline-small", None), ("qwen2", "sightline-small-hd128", None),
         ("qwen3", "sightline-small", None), ("qwen3", "sightline-small-hd128", None)]
PROMPT_LENGTHS = [7, 19, 33, 48]
GREEDY_TOKENS = 10


def read_safetensors(path):
    """The safetensors format: 8-byte header length, JSON header, raw data."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        assert t["dtype"] == "F32", t["dtype"]
        begin, end = t["data_offsets"]
        buf = bytearray(data[base + begin:base + end])
        out[name] = torch.frombuffer(buf, dtype=torch.float32).reshape(t["shape"]).double()
    return out


def rms_norm(x, w, eps):  # LlamaRMSNorm / Qwen2RMSNorm / Qwen3RMSNorm
    var = x.pow(2).mean(-1, keepdim=True)
    return w * (x * torch.rsqrt(var + eps))


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def forward(cfg, w, tokens):
    """Logits at every position (transformers' eager attention path)."""
    arch = cfg["architectures"][0]
    hidden, heads = cfg["hidden_size"], cfg["num_attention_heads"]
    kv_heads = cfg["num_key_value_heads"]
    hd = cfg.get("head_dim") or hidden // heads
    eps, theta = cfg["rms_norm_eps"], cfg["rope_theta"]
    t = len(tokens)
    x = w["model.embed_tokens.weight"][torch.tensor(tokens)]
    inv_freq = 1.0 / (theta ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
    freqs = torch.outer(torch.arange(t, dtype=torch.float64), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos()[:, None, :], emb.sin()[:, None, :]
    # Causal; with a sliding window (Mistral) position i sees (i - W, i].
    pos = torch.arange(t)
    visible = pos[None, :] <= pos[:, None]
    if cfg.get("sliding_window"):
        visible &= pos[None, :] > pos[:, None] - cfg["sliding_window"]
    mask = torch.zeros((t, t), dtype=torch.float64).masked_fill(~visible, float("-inf"))
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        h = rms_norm(x, w[p + "input_layernorm.weight"], eps)

        def proj(name, n):
            y = h @ w[p + f"self_attn.{name}_proj.weight"].T
            if arch == "Qwen2ForCausalLM":  # q/k/v biases, none on o
                y = y + w[p + f"self_attn.{name}_proj.bias"]
            return y.view(t, n, hd)

        q, k, v = proj("q", heads), proj("k", kv_heads), proj("v", kv_heads)
        if arch == "Qwen3ForCausalLM":  # per-head norms before the rotation
            q = rms_norm(q, w[p + "self_attn.q_norm.weight"], eps)
            k = rms_norm(k, w[p + "self_attn.k_norm.weight"], eps)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = k.repeat_interleave(heads // kv_heads, dim=1)  # repeat_kv
        v = v.repeat_interleave(heads // kv_heads, dim=1)
        scores = torch.einsum("qhd,khd->hqk", q, k) * hd ** -0.5 + mask
        att = torch.einsum("hqk,khd->qhd", scores.softmax(-1), v).reshape(t, heads * hd)
        x = x + att @ w[p + "self_attn.o_proj.weight"].T
        h = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
        gate, up = h @ w[p + "mlp.gate_proj.weight"].T, h @ w[p + "mlp.up_proj.weight"].T
        x = x + (torch.nn.functional.silu(gate) * up) @ w[p + "mlp.down_proj.weight"].T
    x = rms_norm(x, w["model.norm.weight"], eps)
    head = w["model.embed_tokens.weight"] if cfg["tie_word_embeddings"] else w["lm_head.weight"]
    return x @ head.T


def greedy(cfg, w, prompt, n):
    seq, margins = list(prompt), []
    for _ in range(n):
        logits = forward(cfg, w, seq)[-1]
        top = torch.topk(logits, 2)
        margins.append(float(top.values[0] - top.values[1]))
        seq.append(int(top.indices[0]))
    return seq[len(prompt):], min(margins)


def main():
    sightline, out_path = sys.argv[1], sys.argv[2]
    cases = []
    for family, preset, window in CASES:
        with tempfile.TemporaryDirectory() as d:
            subprocess.run([sightline, "make-model", d, "--family", family, "--preset", preset,
                            "--seed", str(SEED)], check=True)
            with open(d + "/config.json") as f:
                cfg = json.load(f)
            if window:
                cfg["sliding_window"] = window
            w = read_safetensors(d + "/model.safetensors")
        rng = random.Random(f"{family}-{preset}")
        prompts, case_margin = [], float("inf")
        for length in PROMPT_LENGTHS:
            while True:  # a prompt whose continuation has no near-tie
                prompt = [rng.randrange(256) for _ in range(length)]
                tokens, margin = greedy(cfg, w, prompt, GREEDY_TOKENS)
                if margin > 1e-2:
                    break
            prompts.append({"prompt": prompt, "greedy": tokens})
            case_margin = min(case_margin, margin)
        print(f"{family} {preset}: min margin {case_margin:.4f}", file=sys.stderr)
        case = {"family": family, "preset": preset, "seed": SEED,
                "architecture": cfg["architectures"][0], "min_margin": case_margin,
                "prompts": prompts}
        if window:
            case["sliding_window"] = window
        cases.append(case)
    with open(out_path, "w") as f:
        json.dump({"generated_by": "tools/model_reference/reference.py",
                   "torch": torch.__version__, "dtype": "float64", "cases": cases}, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
