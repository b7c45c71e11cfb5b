"""A GPT-style decoder-only transformer, readable in one sitting.

Token and position embeddings, blocks of causal self-attention and an MLP
(each behind a LayerNorm, with a residual connection), a final LayerNorm,
and an output layer tied to the token embedding. The causal mask is a
buffer holding -inf above the diagonal, as many GPT scripts keep it.
"""
import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class GPTConfig:
    vocab_size: int = 256  # bytes
    block_size: int = 128  # context length
    n_layer: int = 6
    n_head: int = 6
    d_model: int = 384
    dropout: float = 0.0


# GPT-2 small's width and depth (85M parameters with the byte vocabulary).
GPT2_SMALL = dict(n_layer=12, n_head=12, d_model=768)


class CausalSelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.n_head = config.n_head
        self.qkv = nn.Linear(config.d_model, 3 * config.d_model)
        self.proj = nn.Linear(config.d_model, config.d_model)
        self.dropout = nn.Dropout(config.dropout)
        size = config.block_size
        mask = torch.full((size, size), float("-inf")).triu(1)
        self.register_buffer("mask", mask.view(1, 1, size, size))

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.n_head, c // self.n_head).transpose(1, 2)
                   for z in (q, k, v))
        scores = q @ k.transpose(-2, -1) / math.sqrt(k.shape[-1])
        weights = F.softmax(scores + self.mask[:, :, :t, :t], dim=-1)
        y = (self.dropout(weights) @ v).transpose(1, 2).reshape(b, t, c)
        return self.dropout(self.proj(y))


class Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.ln1 = nn.LayerNorm(config.d_model)
        self.attn = CausalSelfAttention(config)
        self.ln2 = nn.LayerNorm(config.d_model)
        self.mlp = nn.Sequential(
            nn.Linear(config.d_model, 4 * config.d_model), nn.GELU(),
            nn.Linear(4 * config.d_model, config.d_model),
            nn.Dropout(config.dropout))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.token = nn.Embedding(config.vocab_size, config.d_model)
        self.position = nn.Embedding(config.block_size, config.d_model)
        self.blocks = nn.ModuleList(Block(config)
                                    for _ in range(config.n_layer))
        self.ln_f = nn.LayerNorm(config.d_model)
        self.head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        self.head.weight = self.token.weight  # tied
        self.apply(self._init_weights)
        for name, p in self.named_parameters():  # GPT-2's scaled residuals
            if name.endswith("proj.weight") or name.endswith("mlp.2.weight"):
                nn.init.normal_(p, std=0.02 / math.sqrt(2 * config.n_layer))

    @staticmethod
    def _init_weights(module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(self, tokens, targets=None):
        t = tokens.shape[1]
        positions = torch.arange(t, device=tokens.device)
        x = self.token(tokens) + self.position(positions)
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln_f(x))
        if targets is None:
            return logits
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten())

    def optimizer_groups(self, weight_decay):
        """AdamW's usual groups: matrices and embeddings decay, biases and
        LayerNorm weights do not."""
        decay = [p for p in self.parameters() if p.dim() >= 2]
        other = [p for p in self.parameters() if p.dim() < 2]
        return [{"params": decay, "weight_decay": weight_decay},
                {"params": other, "weight_decay": 0.0}]
