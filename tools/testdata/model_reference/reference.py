#!/usr/bin/env python3
"""Greedy tokens of random checkpoints from a PyTorch forward pass written from
the transformers model definitions (LlamaForCausalLM, MistralForCausalLM,
MixtralForCausalLM, Phi3ForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM,
Qwen3MoeForCausalLM, Gemma2ForCausalLM, Gemma3ForCausalLM;
default, linear, dynamic, llama3, yarn and longrope rope), independently of
Sightline's runner.

It asks `sightline make-model` for each family's checkpoint (a real Hugging
Face directory: config.json and safetensors; the case's config patch applied
by make-model before it makes the weights), reads the files itself, runs
the model in float64 and writes the prompts, greedy continuations and the
smallest top-1 margin to a JSON file that the engine tests compare against
(tests/engine_core/model_families_test.cc). Needs python3-torch (Debian).

  /usr/bin/python3 tools/testdata/model_reference/reference.py build/tools/sightline \
      tests/engine_core/testdata/model_reference/families.json

With --lora, the same for base models with a LoRA adapter merged into them
(LORA_CASES; tests/engine_core/lora_reference_test.cc):

  /usr/bin/python3 tools/testdata/model_reference/reference.py --lora build/tools/sightline \
      tests/engine_core/testdata/model_reference/lora.json
"""
import json
import math
import random
import struct
import subprocess
import sys
import tempfile

import torch

SEED = 77
# (family, preset, a JSON merge patch (RFC 7386) applied to the config.json
# make-model writes (`--config-patch`): how the cases get a sliding window, a
# rope scaling or a feature with its tensors (attention_bias),
# and optionally the prompt lengths instead of PROMPT_LENGTHS).
CASES = [
    ("llama", "sightline-small", {}),
    ("mistral", "sightline-small", {"sliding_window": 12}),
    ("qwen2", "sightline-small", {}),
    ("qwen2", "sightline-small-hd128", {}),
    ("qwen3", "sightline-small", {}),
    ("qwen3", "sightline-small-hd128", {}),
    ("mixtral", "sightline-small", {}),
    ("mixtral", "sightline-small-hd128", {"num_experts_per_tok": 1, "sliding_window": 16}),
    ("phi3", "sightline-small", {}),
    ("phi3", "sightline-small-hd128",
     {"sliding_window": 16, "max_position_embeddings": 8192,
      "original_max_position_embeddings": 2048,
      "rope_scaling": {"type": "longrope", "short_factor": [round(1.0 + 0.05 * i, 2) for i in range(64)],
                       "long_factor": [4.0] * 64}}),
    ("gemma2", "sightline-small", {"sliding_window": 12, "attn_logit_softcapping": 0.1}),
    ("gemma3_text", "sightline-small-hd128",
     {"sliding_window": 10, "sliding_window_pattern": 2,
      "rope_scaling": {"rope_type": "linear", "factor": 8.0}}),
    ("llama", "sightline-small", {"rope_scaling": {"rope_type": "linear", "factor": 4.0}}),
    ("llama", "sightline-small", {"rope_scaling": {"rope_type": "dynamic", "factor": 4.0}}),
    ("llama", "sightline-small-hd128",
     {"rope_theta": 500000.0,
      "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                       "high_freq_factor": 4.0, "original_max_position_embeddings": 64}}),
    ("qwen2", "sightline-small",
     {"rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 512}}),
    # Longrope past the original context: prompts of 6 and 9 (+ 10 tokens)
    # stay within 20, those of 33 and 48 start past it, so transformers
    # rotates each with one set of factors throughout, as the engine does.
    ("phi3", "sightline-small",
     {"max_position_embeddings": 256, "original_max_position_embeddings": 20,
      "rope_scaling": {"type": "longrope",
                       "short_factor": [round(1.0 + 0.02 * i, 2) for i in range(32)],
                       "long_factor": [round(1.5 + 0.25 * i, 2) for i in range(32)]}},
     [6, 9, 33, 48]),
    ("qwen3", "sightline-small-hd128",
     {"rope_theta": None,
      "rope_parameters": {"rope_type": "yarn", "rope_theta": 1000000.0, "factor": 2.0,
                          "beta_fast": 16.0, "beta_slow": 2.0}}),
    # Issue 45: Llama's attention_bias and mlp_bias, Qwen3's and Gemma's
    # attention_bias, Phi-3's partial rotary (Phi-4-mini: 0.75 with longrope
    # factors for the rotated 96 of 128 dimensions).
    ("llama", "sightline-small", {"attention_bias": True, "mlp_bias": True}),
    ("llama", "sightline-small-hd128", {"mlp_bias": True}),
    ("qwen3", "sightline-small-hd128", {"attention_bias": True}),
    ("gemma2", "sightline-small", {"attention_bias": True, "sliding_window": 12}),
    ("phi3", "sightline-small", {"partial_rotary_factor": 0.5}),
    ("phi3", "sightline-small-hd128",
     {"partial_rotary_factor": 0.75, "max_position_embeddings": 256,
      "original_max_position_embeddings": 20,
      "rope_scaling": {"type": "longrope",
                       "short_factor": [round(1.0 + 0.02 * i, 2) for i in range(48)],
                       "long_factor": [round(1.5 + 0.25 * i, 2) for i in range(48)]}},
     [6, 9, 33, 48]),
    # Qwen3-MoE: 4 experts of half the dense width, 2 per token; its class
    # default norm_topk_prob false, then true with a dense layer
    # (mlp_only_layers), then every other layer sparse (decoder_sparse_step).
    ("qwen3_moe", "sightline-small", {}),
    ("qwen3_moe", "sightline-small-hd128", {"norm_topk_prob": True, "mlp_only_layers": [1]}),
    ("qwen3_moe", "sightline-small", {"decoder_sparse_step": 2, "attention_bias": True}),
]
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


def rope_inv_freq(cfg, hd, seq_len):
    """Inverse frequencies and the cos/sin factor, as modeling_rope_utils
    computes them (dynamic: vLLM's fixed base for max_position * factor;
    longrope: the long factors when the forward pass's input, seq_len tokens,
    passes original_max_position_embeddings, as longrope_frequency_update)."""
    rope = cfg.get("rope_parameters") or cfg.get("rope_scaling") or {}
    theta = cfg.get("rope_theta", rope.get("rope_theta", 10000.0))
    kind = rope.get("rope_type", rope.get("type", "default"))
    exponent = torch.arange(0, hd, 2, dtype=torch.float64) / hd
    inv = 1.0 / theta ** exponent
    factor = rope.get("factor", 1.0)
    if kind == "default":
        return inv, 1.0
    if kind == "linear":
        return inv / factor, 1.0
    if kind == "dynamic":
        max_len = cfg["max_position_embeddings"] * factor
        base = theta * ((factor * max_len / cfg["max_position_embeddings"]) - (factor - 1)) ** (
            hd / (hd - 2))
        return 1.0 / base ** exponent, 1.0
    if kind in ("longrope", "su"):  # Phi-3
        old = cfg.get("original_max_position_embeddings", cfg["max_position_embeddings"])
        scale = cfg["max_position_embeddings"] / old
        factor = 1.0 if scale <= 1 else math.sqrt(1 + math.log(scale) / math.log(old))
        ext = rope["long_factor"] if seq_len > old else rope["short_factor"]
        return 1.0 / (torch.tensor(ext, dtype=torch.float64) * theta ** exponent), factor
    if kind == "llama3":
        old = rope["original_max_position_embeddings"]
        low_wavelen = old / rope["low_freq_factor"]
        high_wavelen = old / rope["high_freq_factor"]
        wavelen = 2 * math.pi / inv
        scaled = torch.where(wavelen > low_wavelen, inv / factor, inv)
        smooth = (old / wavelen - rope["low_freq_factor"]) / (
            rope["high_freq_factor"] - rope["low_freq_factor"])
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = ~(wavelen < high_wavelen) & ~(wavelen > low_wavelen)
        return torch.where(medium, smoothed, scaled), 1.0
    if kind == "yarn":
        old = rope.get("original_max_position_embeddings", cfg["max_position_embeddings"])

        def correction_dim(rotations):
            return hd * math.log(old / (rotations * 2 * math.pi)) / (2 * math.log(theta))

        low = max(math.floor(correction_dim(rope.get("beta_fast", 32.0))), 0)
        high = min(math.ceil(correction_dim(rope.get("beta_slow", 1.0))), hd - 1)
        if low == high:
            high += 0.001
        ramp = ((torch.arange(hd // 2, dtype=torch.float64) - low) / (high - low)).clamp(0, 1)
        extrapolation = 1 - ramp
        inv = inv / factor * (1 - extrapolation) + inv * extrapolation
        return inv, (0.1 * math.log(factor) + 1.0 if factor > 1 else 1.0)
    raise ValueError(kind)


def rms_norm(x, w, eps):  # LlamaRMSNorm / Qwen2RMSNorm / Qwen3RMSNorm
    var = x.pow(2).mean(-1, keepdim=True)
    return w * (x * torch.rsqrt(var + eps))


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def sparse_moe(cfg, w, p, h):
    """MixtralSparseMoeBlock: softmax router, top-k, renormalised weights."""
    probs = torch.softmax(h @ w[p + "gate.weight"].T, dim=-1)
    weights, chosen = torch.topk(probs, cfg["num_experts_per_tok"], dim=-1)
    weights = weights / weights.sum(dim=-1, keepdim=True)
    out = torch.zeros_like(h)
    for e in range(cfg["num_local_experts"]):
        rows, slot = torch.where(chosen == e)
        if rows.numel() == 0:
            continue
        x = h[rows]
        y = (torch.nn.functional.silu(x @ w[p + f"experts.{e}.w1.weight"].T) *
             (x @ w[p + f"experts.{e}.w3.weight"].T)) @ w[p + f"experts.{e}.w2.weight"].T
        out.index_add_(0, rows, y * weights[rows, slot, None])
    return out


def qwen3_moe_block(cfg, w, p, h):
    """Qwen3MoeSparseMoeBlock: softmax router, top-k, renormalised only with
    norm_topk_prob; experts named as the checkpoints on the Hub name them."""
    probs = torch.softmax(h @ w[p + "gate.weight"].T, dim=-1)
    weights, chosen = torch.topk(probs, cfg.get("num_experts_per_tok", 8), dim=-1)
    if cfg.get("norm_topk_prob", False):
        weights = weights / weights.sum(dim=-1, keepdim=True)
    out = torch.zeros_like(h)
    for e in range(cfg.get("num_experts", 128)):
        rows, slot = torch.where(chosen == e)
        if rows.numel() == 0:
            continue
        x, q = h[rows], p + f"experts.{e}."
        y = (torch.nn.functional.silu(x @ w[q + "gate_proj.weight"].T) *
             (x @ w[q + "up_proj.weight"].T)) @ w[q + "down_proj.weight"].T
        out.index_add_(0, rows, y * weights[rows, slot, None])
    return out


def qwen3_moe_sparse(cfg, layer):
    """Qwen3MoeDecoderLayer's condition for a sparse MLP."""
    return (layer not in (cfg.get("mlp_only_layers") or []) and cfg.get("num_experts", 128) > 0
            and (layer + 1) % cfg.get("decoder_sparse_step", 1) == 0)


def gemma_sliding_layers(cfg):
    """Gemma2: even layers slide; Gemma 3: all but every pattern-th."""
    if "layer_types" in cfg:
        return [t == "sliding_attention" for t in cfg["layer_types"]]
    n = cfg["num_hidden_layers"]
    if cfg["architectures"][0] == "Gemma2ForCausalLM":
        return [l % 2 == 0 for l in range(n)]
    pattern = cfg.get("sliding_window_pattern", 6)
    return [(l + 1) % pattern != 0 for l in range(n)]


def forward(cfg, w, tokens):
    """Logits at every position (transformers' eager attention path)."""
    arch = cfg["architectures"][0]
    gemma = arch in ("Gemma2ForCausalLM", "Gemma3ForCausalLM")
    hidden, heads = cfg["hidden_size"], cfg["num_attention_heads"]
    kv_heads = cfg["num_key_value_heads"]
    hd = cfg.get("head_dim") or hidden // heads
    eps = cfg["rms_norm_eps"]
    t = len(tokens)
    x = w["model.embed_tokens.weight"][torch.tensor(tokens)]
    if gemma:  # the normalizer
        x = x * hidden ** 0.5

    def norm(v, name):  # Gemma's RMSNorm scales by (1 + w)
        return rms_norm(v, (1.0 + w[name]) if gemma else w[name], eps)

    # Phi-3's partial rotary: the first rot of each head's dimensions rotate
    # (modeling_rope_utils: dim = int(head_dim * partial_rotary_factor)).
    rot = int(hd * cfg.get("partial_rotary_factor", 1.0))

    def rotary(config):
        inv_freq, attention_factor = rope_inv_freq(config, rot, t)
        freqs = torch.outer(torch.arange(t, dtype=torch.float64), inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        return ((emb.cos() * attention_factor)[:, None, :],
                (emb.sin() * attention_factor)[:, None, :])

    cos, sin = rotary(cfg)
    local_cos, local_sin = cos, sin
    if arch == "Gemma3ForCausalLM":  # sliding layers: rope_local_base_freq, unscaled
        local = {"rope_theta": cfg.get("rope_local_base_freq", 10000.0),
                 "max_position_embeddings": cfg["max_position_embeddings"]}
        local_cos, local_sin = rotary(local)
    sliding = gemma_sliding_layers(cfg) if gemma else [True] * cfg["num_hidden_layers"]
    scale = cfg.get("query_pre_attn_scalar", 256) ** -0.5 if gemma else hd ** -0.5
    if arch == "Gemma2ForCausalLM":
        attn_cap = cfg.get("attn_logit_softcapping", 50.0)
        final_cap = cfg.get("final_logit_softcapping", 30.0)
    else:
        attn_cap = cfg.get("attn_logit_softcapping")
        final_cap = cfg.get("final_logit_softcapping")
    # Causal; with a sliding window position i sees (i - W, i].
    pos = torch.arange(t)
    causal = pos[None, :] <= pos[:, None]
    windowed = causal.clone()
    if cfg.get("sliding_window"):
        windowed &= pos[None, :] > pos[:, None] - cfg["sliding_window"]

    def mask_of(visible):
        return torch.zeros((t, t), dtype=torch.float64).masked_fill(~visible, float("-inf"))

    full_mask, window_mask = mask_of(causal), mask_of(windowed)
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        h = norm(x, p + "input_layernorm.weight")

        def proj(name, n):
            if arch == "Phi3ForCausalLM":  # qkv_proj: q, k, v rows stacked
                qkv = w[p + "self_attn.qkv_proj.weight"]
                q_rows, kv_rows = heads * hd, kv_heads * hd
                begin = {"q": 0, "k": q_rows, "v": q_rows + kv_rows}[name]
                rows = q_rows if name == "q" else kv_rows
                return (h @ qkv[begin:begin + rows].T).view(t, n, hd)
            y = h @ w[p + f"self_attn.{name}_proj.weight"].T
            # Qwen2: q/k/v biases, none on o; attention_bias: all four
            if arch == "Qwen2ForCausalLM" or cfg.get("attention_bias"):
                y = y + w[p + f"self_attn.{name}_proj.bias"]
            return y.view(t, n, hd)

        q, k, v = proj("q", heads), proj("k", kv_heads), proj("v", kv_heads)
        if arch in ("Qwen3ForCausalLM", "Qwen3MoeForCausalLM", "Gemma3ForCausalLM"):
            # per-head norms, then rope
            q = norm(q, p + "self_attn.q_norm.weight")
            k = norm(k, p + "self_attn.k_norm.weight")
        c, s_ = (local_cos, local_sin) if sliding[l] else (cos, sin)
        q = torch.cat((q[..., :rot] * c + rotate_half(q[..., :rot]) * s_, q[..., rot:]), dim=-1)
        k = torch.cat((k[..., :rot] * c + rotate_half(k[..., :rot]) * s_, k[..., rot:]), dim=-1)
        k = k.repeat_interleave(heads // kv_heads, dim=1)  # repeat_kv
        v = v.repeat_interleave(heads // kv_heads, dim=1)
        scores = torch.einsum("qhd,khd->hqk", q, k) * scale
        if attn_cap:
            scores = torch.tanh(scores / attn_cap) * attn_cap
        scores = scores + (window_mask if sliding[l] else full_mask)
        att = torch.einsum("hqk,khd->qhd", scores.softmax(-1), v).reshape(t, heads * hd)
        out = att @ w[p + "self_attn.o_proj.weight"].T
        if cfg.get("attention_bias"):
            out = out + w[p + "self_attn.o_proj.bias"]
        if gemma:
            x = x + norm(out, p + "post_attention_layernorm.weight")
            h = norm(x, p + "pre_feedforward_layernorm.weight")
            gate, up = h @ w[p + "mlp.gate_proj.weight"].T, h @ w[p + "mlp.up_proj.weight"].T
            mlp = (torch.nn.functional.gelu(gate, approximate="tanh") * up) @ \
                w[p + "mlp.down_proj.weight"].T
            x = x + norm(mlp, p + "post_feedforward_layernorm.weight")
            continue
        x = x + out
        h = norm(x, p + "post_attention_layernorm.weight")
        if arch == "MixtralForCausalLM":
            x = x + sparse_moe(cfg, w, p + "block_sparse_moe.", h)
        elif arch == "Qwen3MoeForCausalLM" and qwen3_moe_sparse(cfg, l):
            x = x + qwen3_moe_block(cfg, w, p + "mlp.", h)
        elif arch == "Phi3ForCausalLM":  # gate_up_proj: gate, then up
            gate, up = (h @ w[p + "mlp.gate_up_proj.weight"].T).chunk(2, dim=-1)
            x = x + (torch.nn.functional.silu(gate) * up) @ w[p + "mlp.down_proj.weight"].T
        else:
            def linear(name, v):  # LlamaMLP: bias=config.mlp_bias
                y = v @ w[p + f"mlp.{name}.weight"].T
                return y + w[p + f"mlp.{name}.bias"] if cfg.get("mlp_bias") else y
            gate, up = linear("gate_proj", h), linear("up_proj", h)
            x = x + linear("down_proj", torch.nn.functional.silu(gate) * up)
    x = norm(x, "model.norm.weight")
    head = w["model.embed_tokens.weight"] if cfg["tie_word_embeddings"] else w["lm_head.weight"]
    logits = x @ head.T
    if final_cap:
        logits = torch.tanh(logits / final_cap) * final_cap
    return logits


def greedy(cfg, w, prompt, n):
    seq, margins = list(prompt), []
    for _ in range(n):
        logits = forward(cfg, w, seq)[-1]
        top = torch.topk(logits, 2)
        margins.append(float(top.values[0] - top.values[1]))
        seq.append(int(top.indices[0]))
    return seq[len(prompt):], min(margins)


# LoRA (issue 41): (family, preset, rank, lora_alpha, use_rslora, target
# modules, seed). The adapter is Sightline's RandomLoraAdapter of that seed,
# its values made here the same way (engine_core/src/lora/lora_adapter.cc:
# the i-th value is SampleUniform(seed, i) scaled, in layer, module, A then
# B, row-major order); merged into the base weights as PEFT merges it.
LORA_CASES = [
    ("llama", "sightline-small", 8, 16, False, ["q_proj", "v_proj"], 1),
    ("llama", "sightline-small", 16, 16, True,
     ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"], 2),
    ("qwen2", "sightline-small", 16, 32, False, ["o_proj", "gate_proj", "down_proj"], 3),
    ("qwen3", "sightline-small-hd128", 8, 16, True, ["q_proj", "k_proj", "up_proj"], 4),
]
LORA_MODULES = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
MASK = (1 << 64) - 1


def mix64(z):  # SplitMix64's output function (runner/sampler.cc)
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def sample_uniform(seed, index):  # runner/sampler.h's SampleUniform
    z = mix64((mix64(seed) + (index + 1) * 0x9E3779B97F4A7C15) & MASK)
    return (z >> 11) * 2.0 ** -53


def f32(x):
    return torch.tensor(x, dtype=torch.float32)


def lora_shape(cfg, module):
    """(in, out) of a projection."""
    h, i = cfg["hidden_size"], cfg["intermediate_size"]
    hd = cfg.get("head_dim") or h // cfg["num_attention_heads"]
    q, kv = cfg["num_attention_heads"] * hd, cfg["num_key_value_heads"] * hd
    return {"q_proj": (h, q), "k_proj": (h, kv), "v_proj": (h, kv), "o_proj": (q, h),
            "gate_proj": (h, i), "up_proj": (h, i), "down_proj": (i, h)}[module]


def merge_lora(cfg, w, rank, alpha, rslora, targets, seed):
    """w with W += scale * B @ A for each target, A [r, in] and B [out, r]."""
    scale = f32(alpha) / (torch.sqrt(f32(rank)) if rslora else f32(rank))  # float32, as the runner
    merged, index = dict(w), 0
    for l in range(cfg["num_hidden_layers"]):
        for module in LORA_MODULES:
            if module not in targets:
                continue
            n_in, n_out = lora_shape(cfg, module)
            sa = f32(1.0) / torch.sqrt(f32(n_in))
            sb = f32(1.0) / (scale * torch.sqrt(f32(rank)))

            def values(n, sigma):
                nonlocal index
                out = [(2 * sample_uniform(seed, index + k) - 1) * math.sqrt(3.0) * float(sigma)
                       for k in range(n)]
                index += n
                return torch.tensor(out, dtype=torch.float32).double()

            a = values(rank * n_in, sa).reshape(rank, n_in)
            b = values(n_out * rank, sb).reshape(n_out, rank)
            kind = "self_attn" if module in ("q_proj", "k_proj", "v_proj", "o_proj") else "mlp"
            name = f"model.layers.{l}.{kind}.{module}.weight"
            merged[name] = w[name] + float(scale) * (b @ a)
    return merged


def lora_main(sightline, out_path):
    cases = []
    for family, preset, rank, alpha, rslora, targets, seed in LORA_CASES:
        with tempfile.TemporaryDirectory() as d:
            subprocess.run([sightline, "make-model", d, "--family", family, "--preset", preset,
                            "--seed", str(SEED)], check=True)
            with open(d + "/config.json") as f:
                cfg = json.load(f)
            w = read_safetensors(d + "/model.safetensors")
        merged = merge_lora(cfg, w, rank, alpha, rslora, targets, seed)
        rng = random.Random(f"lora-{family}-{preset}-{seed}")
        prompts, case_margin, changed = [], float("inf"), 0
        for length in PROMPT_LENGTHS:
            while True:  # a prompt with no near-tie, with the adapter or without
                prompt = [rng.randrange(256) for _ in range(length)]
                tokens, margin = greedy(cfg, merged, prompt, GREEDY_TOKENS)
                base, base_margin = greedy(cfg, w, prompt, GREEDY_TOKENS)
                if min(margin, base_margin) > 1e-2:
                    break
            changed += tokens != base
            prompts.append({"prompt": prompt, "greedy": tokens, "base_greedy": base})
            case_margin = min(case_margin, margin, base_margin)
        assert changed, f"the adapter of {family} {preset} seed {seed} changes no tokens"
        print(f"lora {family} {preset} r={rank} rslora={rslora} {targets}: min margin "
              f"{case_margin:.4f}, {changed} of {len(prompts)} prompts changed", file=sys.stderr)
        cases.append({"family": family, "preset": preset, "seed": SEED, "rank": rank,
                      "lora_alpha": alpha, "use_rslora": rslora, "target_modules": targets,
                      "lora_seed": seed, "min_margin": case_margin, "prompts": prompts})
    with open(out_path, "w") as f:
        json.dump({"generated_by": "tools/testdata/model_reference/reference.py --lora",
                   "torch": torch.__version__, "dtype": "float64", "cases": cases}, f, indent=1)
        f.write("\n")


def main():
    if sys.argv[1] == "--lora":
        return lora_main(sys.argv[2], sys.argv[3])
    sightline, out_path = sys.argv[1], sys.argv[2]
    cases = []
    for case in CASES:
        family, preset, patch = case[:3]
        lengths = case[3] if len(case) > 3 else PROMPT_LENGTHS
        with tempfile.TemporaryDirectory() as d:
            # The patch applies before the weights are made (a feature's
            # tensors come with it); config.json is the patched file.
            subprocess.run([sightline, "make-model", d, "--family", family, "--preset", preset,
                            "--seed", str(SEED), "--config-patch", json.dumps(patch)],
                           check=True)
            with open(d + "/config.json") as f:
                cfg = json.load(f)
            w = read_safetensors(d + "/model.safetensors")
        rng = random.Random(f"{family}-{preset}-{json.dumps(patch, sort_keys=True)}")
        prompts, case_margin = [], float("inf")
        for length in lengths:
            while True:  # a prompt whose continuation has no near-tie
                prompt = [rng.randrange(256) for _ in range(length)]
                tokens, margin = greedy(cfg, w, prompt, GREEDY_TOKENS)
                if margin > 1e-2:
                    break
            prompts.append({"prompt": prompt, "greedy": tokens})
            case_margin = min(case_margin, margin)
        print(f"{family} {preset} {json.dumps(patch)}: min margin {case_margin:.4f}",
              file=sys.stderr)
        cases.append({"family": family, "preset": preset, "seed": SEED, "config_patch": patch,
                      "architecture": cfg["architectures"][0], "min_margin": case_margin,
                      "prompts": prompts})
    with open(out_path, "w") as f:
        json.dump({"generated_by": "tools/testdata/model_reference/reference.py",
                   "torch": torch.__version__, "dtype": "float64", "cases": cases}, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
