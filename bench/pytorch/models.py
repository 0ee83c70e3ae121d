"""PyTorch versions of the bundled gradc models (models/*.yaml), for the benchmarks.

Each class builds the same computation as gradc's lowering of the spec (frontend/), with the
same parameter names (the state_dict keys equal gradc's spec names, so a weights file written
by one side loads into the other), shapes, dtypes (f32 parameters, i64 tokens), initial
distributions and op order:

  mlp       models/mlp.yaml       depth x (linear + relu), linear head, mean squared error
  gpt-mini  models/gpt-mini.yaml  pre-norm GPT blocks, exact GELU, causal attention written
                                  out as gradc lowers it (qkv linear, split, scaled q @ k^T,
                                  -inf above the diagonal, softmax, p @ v, proj), dropout 0.1
                                  after the position table, mean cross entropy
  lstm-lm   models/lstm-lm.yaml   embedding, one-layer LSTM (batch first), linear head, mean
                                  cross entropy
  gpt2      models/gpt2.yaml      GPT-2 small: gpt-mini's blocks with dropout on the embeddings,
                                  the attention probabilities and both residual branches, GELU
                                  (tanh), a 1024-row position table, GPT-2's N(0, 0.02)
                                  initialisation, and the LM head tied to wte (no lm_head key)
  bert-mlm  models/bert-mlm.yaml  Hugging Face's BertForMaskedLM computation: word + position +
                                  token-type embeddings, post-norm encoder layers, the MLM head
                                  with the decoder tied to the word embeddings, cross entropy
                                  over the masked positions (targets -100 elsewhere)
  llama     models/llama.yaml     Hugging Face's LlamaForCausalLM computation: RMSNorm, rotary
                                  embeddings (rotate_half), grouped-query attention (repeat_kv),
                                  SwiGLU, no biases; names are Hugging Face's without "model."
  resnet18-cifar  models/resnet18-cifar.yaml  torchvision's ResNet-18 with a 3x3 stem and no max
                                  pooling (CIFAR), BatchNorm2d in training mode, global average
                                  pooling, mean cross entropy over class labels
  resnet-deep     models/resnet-deep.yaml  the bottleneck ResNet of depth 9n + 2 (He et al. 2016)
  nanogpt-char    models/nanogpt-char.yaml  nanoGPT's GPT (model.py) at its shakespeare_char sizes:
                                  no biases anywhere (weight-only layer norms), exact GELU, the
                                  head tied to wte, nanoGPT's initialisation (N(0, 0.02), c_proj
                                  N(0, 0.02 / sqrt(2 * layers))), dropout dropout_pct / 100 on the
                                  embeddings, the attention probabilities and both residual branches

Every model's forward takes a `mode`:

  eager       plain autograd (gpt-mini, mlp) / the fused torch.nn.LSTM kernel (lstm-lm)
  seq         torch.utils.checkpoint.checkpoint_sequential over the model's chain of stages
              with round(sqrt(n)) segments (lstm-lm: the time steps cut into round(sqrt(seq))
              checkpointed segments, since nn.LSTM is one opaque module)
  block       torch.utils.checkpoint.checkpoint around every block (transformer block, hidden
              layer, LSTM time step)
  unrolled    lstm-lm only: the LSTM unrolled step by step as gradc lowers it, no checkpoint

Dims default to the spec's and are overridden like `gradc --set` (dependent dims follow:
gpt-mini's d_ff = 4 * d_model unless given).
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint, checkpoint_sequential

MODES = ("eager", "seq", "block")

# The dims of the bundled specs (models/*.yaml). tests/bench/first_loss_parity.sh checks that
# the parameter names and shapes built from them equal those of the weights gradc saves.
DEFAULT_DIMS = {
    "mlp": {"batch": 64, "features": 32, "hidden": 256, "outputs": 8, "depth": 4},
    "gpt-mini": {"batch": 16, "seq": 128, "vocab": 256, "d_model": 256, "heads": 4, "layers": 4},
    "lstm-lm": {"batch": 8, "seq": 512, "vocab": 256, "embed": 128, "hidden": 256},
    "bert-mlm": {"batch": 8, "seq": 128, "vocab": 256, "type_vocab": 2, "d_model": 256, "heads": 4, "layers": 4},
    "llama": {"batch": 8, "seq": 128, "vocab": 256, "d_model": 256, "heads": 8, "kv_heads": 2, "layers": 4,
              "d_ff": 688},
    "gpt2": {"batch": 8, "context": 1024, "seq": 1024, "vocab": 50257, "d_model": 768, "heads": 12, "layers": 12},
    "resnet18-cifar": {"batch": 32, "channels": 3, "image": 32, "classes": 10, "width": 64},
    "resnet-deep": {"batch": 16, "channels": 3, "image": 32, "classes": 10, "depth": 164, "width": 16},
    "nanogpt-char": {"batch": 12, "seq": 64, "vocab": 65, "d_model": 128, "heads": 4, "layers": 4, "dropout_pct": 0},
}

# Models with d_ff = 4 * d_model unless it is given.
_WITH_D_FF = ("gpt-mini", "gpt2", "bert-mlm", "nanogpt-char")


def resolve_dims(model, overrides=None):
    dims = dict(DEFAULT_DIMS[model])
    overrides = overrides or {}
    for k, v in overrides.items():
        if k not in dims and not (model in _WITH_D_FF and k == "d_ff"):
            raise ValueError(f"{model} has no dim {k!r}")
        dims[k] = int(v)
    if model in _WITH_D_FF and "d_ff" not in dims:
        dims["d_ff"] = 4 * dims["d_model"]
    if model == "gpt2" and "seq" not in overrides:
        dims["seq"] = dims["context"]  # the spec's `seq: context`
    return dims


def blocks_then_head(blocks, head, x, mode):
    """x through the blocks, then the head's stages, in a forward mode: eager; seq
    (checkpoint_sequential over blocks + head in about sqrt(n) segments); block (each block
    checkpointed, the head not)."""
    if mode == "seq":
        stages = list(blocks) + list(head)
        return checkpoint_sequential(stages, segments_for(len(stages)), x)
    if mode not in ("eager", "block"):
        raise ValueError(mode)
    for b in blocks:
        x = checkpoint(b, x) if mode == "block" else b(x)
    for h in head:
        x = h(x)
    return x


def segments_for(n):
    """About sqrt(n) segments, at least 1 and at most n."""
    return max(1, min(n, round(math.sqrt(n))))


# ---- mlp -----------------------------------------------------------------------------------


class _Hidden(nn.Module):
    def __init__(self, d_in, d_out):
        super().__init__()
        self.fc = nn.Linear(d_in, d_out)

    def forward(self, x):
        return F.relu(self.fc(x))


class MLP(nn.Module):
    def __init__(self, features, hidden, outputs, depth, **_):
        super().__init__()
        self.hidden = nn.ModuleList(_Hidden(features if i == 0 else hidden, hidden) for i in range(depth))
        self.head = nn.Linear(hidden, outputs)

    def input_names(self):
        return ("x", "y")

    def forward(self, x, y, mode="eager"):
        stages = list(self.hidden) + [self.head]
        if mode == "eager":
            for s in stages:
                x = s(x)
        elif mode == "seq":
            # x (a graph input) needs grad for the reentrant checkpoint to propagate; the
            # first hidden layer runs outside the checkpointed chain instead, as for gpt-mini.
            x = stages[0](x)
            rest = stages[1:]
            x = checkpoint_sequential(rest, segments_for(len(rest)), x)
        elif mode == "block":
            x = stages[0](x)
            for s in stages[1:-1]:
                x = checkpoint(s, x)
            x = stages[-1](x)
        else:
            raise ValueError(mode)
        return F.mse_loss(x, y)


# ---- gpt-mini ------------------------------------------------------------------------------


class _Attention(nn.Module):
    """Fused-qkv multi-head attention (causal unless told otherwise), dropout on the
    probabilities (none by default)."""

    def __init__(self, d_model, heads, dropout=0.0, causal=True, bias=True):
        super().__init__()
        self.heads, self.causal = heads, causal
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.proj = nn.Linear(d_model, d_model, bias=bias)
        self.attn_drop = nn.Dropout(dropout)

    def forward(self, x):
        B, S, D = x.shape
        H = self.heads
        Dh = D // H
        q, k, v = self.qkv(x).split(D, dim=2)
        q = q.reshape(B, S, H, Dh).transpose(1, 2)
        k = k.reshape(B, S, H, Dh).transpose(1, 2)
        v = v.reshape(B, S, H, Dh).transpose(1, 2)
        scores = torch.matmul(q, k.transpose(2, 3)) * (1.0 / math.sqrt(Dh))
        if self.causal:
            above = torch.ones(S, S, dtype=torch.bool, device=x.device).triu_(1)
            scores = scores.masked_fill(above, float("-inf"))
        p = self.attn_drop(torch.softmax(scores, dim=3))
        out = torch.matmul(p, v).transpose(1, 2).reshape(B, S, D)
        return self.proj(out)


class _Block(nn.Module):
    def __init__(self, d_model, heads, d_ff):
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = _Attention(d_model, heads)
        self.ln2 = nn.LayerNorm(d_model)
        self.fc1 = nn.Linear(d_model, d_ff)
        self.fc2 = nn.Linear(d_ff, d_model)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class _PosTable(nn.Module):
    def __init__(self, length, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(length, dim).normal_(0.0, 1.0))


class GPTMini(nn.Module):
    def __init__(self, seq, vocab, d_model, heads, layers, d_ff, dropout=0.1, **_):
        super().__init__()
        self.wte = nn.Embedding(vocab, d_model)
        self.wpe = _PosTable(seq, d_model)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(_Block(d_model, heads, d_ff) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab, bias=False)

    def input_names(self):
        return ("tokens", "targets")

    def forward(self, tokens, targets, mode="eager"):
        S = tokens.shape[1]
        x = self.drop(self.wte(tokens) + self.wpe.weight[:S])
        logits = blocks_then_head(self.blocks, (self.ln_f, self.lm_head), x, mode)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


# ---- gpt2 ----------------------------------------------------------------------------------


def _gpt2_attention(d_model, heads, dropout, proj_std, causal=True):
    """The attention with GPT-2's (and BERT's) initialisation: N(0, 0.02) qkv, N(0, proj_std)
    proj, zero biases."""
    a = _Attention(d_model, heads, dropout, causal)
    nn.init.normal_(a.qkv.weight, 0.0, 0.02)
    nn.init.normal_(a.proj.weight, 0.0, proj_std)
    nn.init.zeros_(a.qkv.bias)
    nn.init.zeros_(a.proj.bias)
    return a


class _Gpt2Block(nn.Module):
    def __init__(self, d_model, heads, d_ff, dropout, layers):
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = _gpt2_attention(d_model, heads, dropout, 0.02 / math.sqrt(2 * layers))
        self.ln2 = nn.LayerNorm(d_model)
        self.fc1 = nn.Linear(d_model, d_ff)
        self.fc2 = nn.Linear(d_ff, d_model)
        self.drop = nn.Dropout(dropout)
        nn.init.normal_(self.fc1.weight, 0.0, 0.02)
        nn.init.normal_(self.fc2.weight, 0.0, 0.02 / math.sqrt(2 * layers))
        nn.init.zeros_(self.fc1.bias)
        nn.init.zeros_(self.fc2.bias)

    def forward(self, x):
        x = x + self.drop(self.attn(self.ln1(x)))
        return x + self.drop(self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh")))


class _TiedHead(nn.Module):
    """logits = x @ wte.weight^T: the embedding's matrix, not a parameter of its own."""

    def __init__(self, wte):
        super().__init__()
        self._wte = [wte]  # a list: not registered, so state_dict holds the matrix once

    def forward(self, x):
        return F.linear(x, self._wte[0].weight)


def _gpt2_embeddings(model, vocab, rows, d_model):
    """GPT-2's (and nanoGPT's) token and position tables, both drawn from N(0, 0.02)."""
    model.wte = nn.Embedding(vocab, d_model)
    model.wpe = _PosTable(rows, d_model)
    nn.init.normal_(model.wte.weight, 0.0, 0.02)
    nn.init.normal_(model.wpe.weight, 0.0, 0.02)


class GPT2(GPTMini):
    """GPTMini's forward (embeddings, dropout, blocks, ln_f, head; every mode) over GPT-2's
    modules: its blocks, a `context`-row position table and the head tied to wte."""

    def __init__(self, context, vocab, d_model, heads, layers, d_ff, dropout=0.1, **_):
        nn.Module.__init__(self)
        _gpt2_embeddings(self, vocab, context, d_model)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(_Gpt2Block(d_model, heads, d_ff, dropout, layers) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d_model)
        self.lm_head = _TiedHead(self.wte)


# ---- nanogpt-char --------------------------------------------------------------------------


class _LayerNormWeightOnly(nn.Module):
    """nn.LayerNorm(D, bias=False) (PyTorch >= 2.1; this is 1.13): a learned weight, no bias,
    as nanoGPT's LayerNorm with bias=False and the spec's `layer_norm` with `bias: false`."""

    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        return F.layer_norm(x, x.shape[-1:], self.weight, None, self.eps)


class _NanoGptBlock(nn.Module):
    """nanoGPT's Block with bias=False: x + drop(c_proj(attn(ln_1(x)))), then
    x + drop(c_proj(gelu(c_fc(ln_2(x))))), under the spec's names (qkv = c_attn, proj = attn's
    c_proj, fc1 = c_fc, fc2 = mlp's c_proj)."""

    def __init__(self, d_model, heads, d_ff, dropout, layers):
        super().__init__()
        proj_std = 0.02 / math.sqrt(2 * layers)
        self.ln1 = _LayerNormWeightOnly(d_model)
        self.attn = _Attention(d_model, heads, dropout, causal=True, bias=False)
        self.ln2 = _LayerNormWeightOnly(d_model)
        self.fc1 = nn.Linear(d_model, d_ff, bias=False)
        self.fc2 = nn.Linear(d_ff, d_model, bias=False)
        self.drop = nn.Dropout(dropout)
        nn.init.normal_(self.attn.qkv.weight, 0.0, 0.02)
        nn.init.normal_(self.attn.proj.weight, 0.0, proj_std)
        nn.init.normal_(self.fc1.weight, 0.0, 0.02)
        nn.init.normal_(self.fc2.weight, 0.0, proj_std)

    def forward(self, x):
        x = x + self.drop(self.attn(self.ln1(x)))
        return x + self.drop(self.fc2(F.gelu(self.fc1(self.ln2(x)))))


class NanoGPTChar(GPTMini):
    """nanoGPT's character-level Shakespeare model (models/nanogpt-char.yaml): GPTMini's forward
    (embeddings + dropout, blocks, ln_f, head; every mode) over bias-free blocks, weight-only
    layer norms, a `seq`-row position table and the head tied to wte. The dropout probability
    is dropout_pct / 100, as in the spec (dims are integers)."""

    def __init__(self, seq, vocab, d_model, heads, layers, d_ff, dropout_pct=0, **_):
        nn.Module.__init__(self)
        p = dropout_pct / 100
        _gpt2_embeddings(self, vocab, seq, d_model)
        self.drop = nn.Dropout(p)
        self.blocks = nn.ModuleList(_NanoGptBlock(d_model, heads, d_ff, p, layers) for _ in range(layers))
        self.ln_f = _LayerNormWeightOnly(d_model)
        self.lm_head = _TiedHead(self.wte)

    def optimizer_groups(self, weight_decay):
        """nanoGPT's configure_optimizers: weight decay on parameters of rank >= 2 (every matrix,
        the tied wte included), none on the layer-norm weights (gradc's --decay matrices)."""
        params = list(self.parameters())
        return [{"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
                {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]


# ---- bert-mlm ------------------------------------------------------------------------------


def _normal_linear(d_in, d_out):
    m = nn.Linear(d_in, d_out)
    nn.init.normal_(m.weight, 0.0, 0.02)
    nn.init.zeros_(m.bias)
    return m


class _BertLayer(nn.Module):
    def __init__(self, d_model, heads, d_ff, dropout):
        super().__init__()
        self.attention = _gpt2_attention(d_model, heads, dropout, 0.02, causal=False)  # bidirectional
        self.attention_norm = nn.LayerNorm(d_model, eps=1e-12)
        self.intermediate = _normal_linear(d_model, d_ff)
        self.output = _normal_linear(d_ff, d_model)
        self.output_norm = nn.LayerNorm(d_model, eps=1e-12)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        x = self.attention_norm(x + self.drop(self.attention(x)))
        return self.output_norm(x + self.drop(self.output(F.gelu(self.intermediate(x)))))


class BertMLM(nn.Module):
    def __init__(self, seq, vocab, type_vocab, d_model, heads, layers, d_ff, dropout=0.1, **_):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab, d_model)
        self.position_embeddings = _PosTable(seq, d_model)
        self.token_type_embeddings = nn.Embedding(type_vocab, d_model)
        for e in (self.word_embeddings, self.position_embeddings, self.token_type_embeddings):
            nn.init.normal_(e.weight, 0.0, 0.02)
        self.embeddings_norm = nn.LayerNorm(d_model, eps=1e-12)
        self.drop = nn.Dropout(dropout)
        self.layer = nn.ModuleList(_BertLayer(d_model, heads, d_ff, dropout) for _ in range(layers))
        self.transform = _normal_linear(d_model, d_model)
        self.transform_norm = nn.LayerNorm(d_model, eps=1e-12)
        self.decoder = nn.Module()
        self.decoder.bias = nn.Parameter(torch.zeros(vocab))  # the weight is word_embeddings'

    def input_names(self):
        return ("tokens", "targets", "token_types")

    def forward(self, tokens, targets, token_types=None, mode="eager"):
        S = tokens.shape[1]
        x = self.word_embeddings(tokens) + self.position_embeddings.weight[:S] + self.token_type_embeddings(token_types)
        x = self.drop(self.embeddings_norm(x))
        if mode == "block":
            for b in self.layer:
                x = checkpoint(b, x)
        elif mode == "seq":
            x = checkpoint_sequential(list(self.layer), segments_for(len(self.layer)), x)
        elif mode == "eager":
            for b in self.layer:
                x = b(x)
        else:
            raise ValueError(mode)
        h = self.transform_norm(F.gelu(self.transform(x)))
        logits = F.linear(h, self.word_embeddings.weight, self.decoder.bias)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=-100)


# ---- llama ---------------------------------------------------------------------------------


class _RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


def _rotate_half(t):
    h = t.shape[-1] // 2
    return torch.cat((-t[..., h:], t[..., :h]), dim=-1)


class _LlamaAttention(nn.Module):
    def __init__(self, d_model, heads, kv_heads, base=10000.0):
        super().__init__()
        self.heads, self.kv_heads, self.dh, self.base = heads, kv_heads, d_model // heads, base
        self.q_proj = nn.Linear(d_model, heads * self.dh, bias=False)
        self.k_proj = nn.Linear(d_model, kv_heads * self.dh, bias=False)
        self.v_proj = nn.Linear(d_model, kv_heads * self.dh, bias=False)
        self.o_proj = nn.Linear(heads * self.dh, d_model, bias=False)

    def forward(self, x):
        B, S, D = x.shape
        H, KV, dh = self.heads, self.kv_heads, self.dh
        q = self.q_proj(x).view(B, S, H, dh).transpose(1, 2)
        k = self.k_proj(x).view(B, S, KV, dh).transpose(1, 2)
        v = self.v_proj(x).view(B, S, KV, dh).transpose(1, 2)
        inv = 1.0 / (self.base ** (torch.arange(0, dh, 2, dtype=torch.float32, device=x.device) / dh))
        freqs = torch.outer(torch.arange(S, dtype=torch.float32, device=x.device), inv)
        emb = torch.cat((freqs, freqs), dim=-1)
        q = q * emb.cos() + _rotate_half(q) * emb.sin()
        k = k * emb.cos() + _rotate_half(k) * emb.sin()
        k = k.repeat_interleave(H // KV, dim=1)  # repeat_kv
        v = v.repeat_interleave(H // KV, dim=1)
        scores = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(dh)
        above = torch.ones(S, S, dtype=torch.bool, device=x.device).triu_(1)
        p = torch.softmax(scores.masked_fill(above, float("-inf")), dim=-1)
        return self.o_proj(torch.matmul(p, v).transpose(1, 2).reshape(B, S, H * dh))


class _LlamaMLP(nn.Module):
    def __init__(self, d_model, d_ff):
        super().__init__()
        self.gate_proj = nn.Linear(d_model, d_ff, bias=False)
        self.up_proj = nn.Linear(d_model, d_ff, bias=False)
        self.down_proj = nn.Linear(d_ff, d_model, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class _LlamaBlock(nn.Module):
    def __init__(self, d_model, heads, kv_heads, d_ff):
        super().__init__()
        self.input_layernorm = _RMSNorm(d_model)
        self.self_attn = _LlamaAttention(d_model, heads, kv_heads)
        self.post_attention_layernorm = _RMSNorm(d_model)
        self.mlp = _LlamaMLP(d_model, d_ff)

    def forward(self, x):
        x = x + self.self_attn(self.input_layernorm(x))
        return x + self.mlp(self.post_attention_layernorm(x))


class Llama(nn.Module):
    def __init__(self, vocab, d_model, heads, kv_heads, layers, d_ff, **_):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, d_model)
        self.layers = nn.ModuleList(_LlamaBlock(d_model, heads, kv_heads, d_ff) for _ in range(layers))
        self.norm = _RMSNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab, bias=False)
        for m in self.modules():  # the spec's init_std: 0.02
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, 0.0, 0.02)

    def input_names(self):
        return ("tokens", "targets")

    def forward(self, tokens, targets, mode="eager"):
        logits = blocks_then_head(self.layers, (self.norm, self.lm_head), self.embed_tokens(tokens), mode)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


# ---- lstm-lm -------------------------------------------------------------------------------


def _lstm_cell(xp_t, h, c, w_hh, b_hh):
    g = xp_t + F.linear(h, w_hh, b_hh)
    i, f, gg, o = g.chunk(4, dim=1)
    c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(gg)
    h = torch.sigmoid(o) * torch.tanh(c)
    return h, c


class LSTMLM(nn.Module):
    def __init__(self, vocab, embed, hidden, **_):
        super().__init__()
        self.hidden_size = hidden
        self.embed = nn.Embedding(vocab, embed)
        self.lstm = nn.LSTM(embed, hidden, 1, batch_first=True)
        self.head = nn.Linear(hidden, vocab)

    def input_names(self):
        return ("tokens", "targets")

    def _unrolled(self, x, mode):
        B, S, _ = x.shape
        l = self.lstm
        xp = F.linear(x, l.weight_ih_l0, l.bias_ih_l0)  # [B, S, 4H], as gradc's lowering
        h = x.new_zeros(B, self.hidden_size)
        c = x.new_zeros(B, self.hidden_size)
        w_hh, b_hh = l.weight_hh_l0, l.bias_hh_l0
        # unbind/split once (their backward is one stack/cat), not xp[:, t] per step: each
        # select's backward would materialise a zero gradient of the whole [B, S, 4H] tensor.
        if mode == "unrolled":
            hs = []
            for xp_t in xp.unbind(1):
                h, c = _lstm_cell(xp_t, h, c, w_hh, b_hh)
                hs.append(h)
            return torch.stack(hs, dim=1)
        if mode == "block":
            hs = []
            for xp_t in xp.unbind(1):
                h, c = checkpoint(_lstm_cell, xp_t, h, c, w_hh, b_hh)
                hs.append(h)
            return torch.stack(hs, dim=1)
        # mode == "seq": round(sqrt(S)) checkpointed segments of consecutive time steps.
        n = segments_for(S)
        bounds = [round(i * S / n) for i in range(n + 1)]

        def segment(xp_seg, h, c, w_hh, b_hh):
            hs = []
            for xp_t in xp_seg.unbind(1):
                h, c = _lstm_cell(xp_t, h, c, w_hh, b_hh)
                hs.append(h)
            return torch.stack(hs, dim=1), h, c

        outs = []
        sizes = [b - a for a, b in zip(bounds[:-1], bounds[1:])]
        for xp_seg in xp.split(sizes, dim=1):
            y, h, c = checkpoint(segment, xp_seg, h, c, w_hh, b_hh)
            outs.append(y)
        return torch.cat(outs, dim=1)

    def forward(self, tokens, targets, mode="eager"):
        x = self.embed(tokens)
        if mode == "eager":
            y, _ = self.lstm(x)
        elif mode in ("seq", "block", "unrolled"):
            y = self._unrolled(x, mode)
        else:
            raise ValueError(mode)
        logits = self.head(y)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


# ---- resnets -------------------------------------------------------------------------------


def _conv(c_in, c_out, k, stride=1):
    return nn.Conv2d(c_in, c_out, k, stride=stride, padding=k // 2, bias=False)


class _BasicBlock(nn.Module):
    """conv3x3-bn-relu-conv3x3-bn plus the shortcut, then relu; the first block of a stage
    projects the shortcut (strided 1x1 conv + bn), named downsample_conv/downsample_bn as the spec."""

    def __init__(self, c_in, c_out, stride):
        super().__init__()
        self.conv1, self.bn1 = _conv(c_in, c_out, 3, stride), nn.BatchNorm2d(c_out)
        self.conv2, self.bn2 = _conv(c_out, c_out, 3), nn.BatchNorm2d(c_out)
        self.down = stride != 1 or c_in != c_out
        if self.down:
            self.downsample_conv, self.downsample_bn = _conv(c_in, c_out, 1, stride), nn.BatchNorm2d(c_out)

    def forward(self, x):
        main = self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)))))
        if self.down:
            return F.relu(main + self.downsample_bn(self.downsample_conv(x)))
        return F.relu(x + main)


class _Bottleneck(nn.Module):
    """1x1 reduce, 3x3 (strided in a stage's first block), 1x1 expand to 4x the width, each
    with batch norm; the shortcut added before the last relu."""

    def __init__(self, c_in, width, stride):
        super().__init__()
        self.conv1, self.bn1 = _conv(c_in, width, 1), nn.BatchNorm2d(width)
        self.conv2, self.bn2 = _conv(width, width, 3, stride), nn.BatchNorm2d(width)
        self.conv3, self.bn3 = _conv(width, 4 * width, 1), nn.BatchNorm2d(4 * width)
        self.down = stride != 1 or c_in != 4 * width
        if self.down:
            self.downsample_conv, self.downsample_bn = _conv(c_in, 4 * width, 1, stride), nn.BatchNorm2d(4 * width)

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = F.relu(self.bn2(self.conv2(y)))
        main = self.bn3(self.conv3(y))
        if self.down:
            return F.relu(main + self.downsample_bn(self.downsample_conv(x)))
        return F.relu(x + main)


class _ResNet(nn.Module):
    """Stem (conv1, bn1, relu), residual stages, global average pooling and fc; modes as
    blocks_then_head over the residual blocks (the stem runs eagerly)."""

    def input_names(self):
        return ("images", "labels")

    def _stem_and_head(self, channels, width, features, classes):
        self.conv1, self.bn1 = _conv(channels, width, 3), nn.BatchNorm2d(width)
        self.fc = nn.Linear(features, classes)

    def _classify(self, x):
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))

    def forward(self, images, labels, mode="eager"):
        x = F.relu(self.bn1(self.conv1(images)))
        blocks = [b for stage in self.stages() for b in stage]
        logits = blocks_then_head(blocks, [self._classify], x, mode)
        return F.cross_entropy(logits, labels)


class ResNet18Cifar(_ResNet):
    def __init__(self, channels, classes, width, **_):
        super().__init__()
        self._stem_and_head(channels, width, 8 * width, classes)
        c = width
        for s, w in enumerate((width, 2 * width, 4 * width, 8 * width), start=1):
            stride = 1 if s == 1 else 2
            setattr(self, f"layer{s}", nn.Sequential(_BasicBlock(c, w, stride), _BasicBlock(w, w, 1)))
            c = w

    def stages(self):
        return (self.layer1, self.layer2, self.layer3, self.layer4)


class ResNetDeep(_ResNet):
    def __init__(self, channels, classes, width, depth, **_):
        super().__init__()
        if (depth - 2) % 9 != 0 or depth < 20:
            raise ValueError(f"depth must be 9 n + 2 with n >= 2, got {depth}")
        n = (depth - 2) // 9
        self._stem_and_head(channels, width, 16 * width, classes)
        c = width
        for s in (1, 2, 3):
            w = width * 2 ** (s - 1)
            blocks = [_Bottleneck(c, w, 1 if s == 1 else 2)] + [_Bottleneck(4 * w, w, 1) for _ in range(n - 1)]
            setattr(self, f"stage{s}", nn.Sequential(*blocks))
            c = 4 * w

    def stages(self):
        return (self.stage1, self.stage2, self.stage3)


def build(model, dims):
    if model == "mlp":
        return MLP(**dims)
    if model == "gpt-mini":
        return GPTMini(**dims)
    if model == "lstm-lm":
        return LSTMLM(**dims)
    if model == "gpt2":
        return GPT2(**dims)
    if model == "llama":
        return Llama(**dims)
    if model == "bert-mlm":
        return BertMLM(**dims)
    if model == "resnet18-cifar":
        return ResNet18Cifar(**dims)
    if model == "resnet-deep":
        return ResNetDeep(**dims)
    if model == "nanogpt-char":
        return NanoGPTChar(**dims)
    raise ValueError(model)


def make_batch(model, dims, generator):
    """A random batch with the spec's input shapes and dtypes (tokens i64 in [0, vocab))."""
    if model == "mlp":
        x = torch.randn(dims["batch"], dims["features"], generator=generator)
        y = torch.randn(dims["batch"], dims["outputs"], generator=generator)
        return {"x": x, "y": y}
    if model.startswith("resnet"):
        images = torch.randn(dims["batch"], dims["channels"], dims["image"], dims["image"], generator=generator)
        labels = torch.randint(0, dims["classes"], (dims["batch"],), generator=generator, dtype=torch.int64)
        return {"images": images, "labels": labels}
    shape = (dims["batch"], dims["seq"])
    if model == "bert-mlm":
        # 15% of the positions masked: their targets are the original tokens, the rest -100.
        tokens = torch.randint(0, dims["vocab"], shape, generator=generator, dtype=torch.int64)
        masked = torch.rand(shape, generator=generator) < 0.15
        masked[0, 0] = True
        targets = torch.where(masked, tokens, torch.full_like(tokens, -100))
        return {
            "tokens": torch.where(masked, torch.zeros_like(tokens), tokens),  # token 0 as [MASK]
            "targets": targets,
            "token_types": (torch.arange(dims["seq"]) >= dims["seq"] // 2).long().expand(shape).contiguous(),
        }
    return {
        "tokens": torch.randint(0, dims["vocab"], shape, generator=generator, dtype=torch.int64),
        "targets": torch.randint(0, dims["vocab"], shape, generator=generator, dtype=torch.int64),
    }


def adamw(params):
    """gradc train's default optimizer: AdamW, lr 1e-3, betas (0.9, 0.999), eps 1e-8, weight
    decay 0.01 on every parameter, constant learning rate (no --warmup-steps/--decay-steps)."""
    return torch.optim.AdamW(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
