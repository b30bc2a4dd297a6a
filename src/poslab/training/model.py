"""A small decoder-only transformer with learned absolute position embeddings (torch)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["Block", "CharTransformer"]


class Block(nn.Module):
    """Pre-LN transformer block: x + attn(LN(x)), then x + MLP(LN(x)); causal multi-head self-attention.

    Attention is :func:`torch.nn.functional.scaled_dot_product_attention` with
    ``is_causal=True`` (its fused CPU kernel never forms the full mask); the
    MLP is d_model → 4·d_model → d_model with GELU; no dropout.
    """

    def __init__(self, d_model: int, heads: int):
        super().__init__()
        self.heads = heads
        self.attn_norm = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)
        self.mlp_norm = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, width = x.shape
        q, k, v = self.qkv(self.attn_norm(x)).view(batch, length, 3, self.heads, width // self.heads).permute(2, 0, 3, 1, 4)
        attended = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.out(attended.transpose(1, 2).reshape(batch, length, width))
        return x + self.mlp(self.mlp_norm(x))


class CharTransformer(nn.Module):
    """GPT-style character language model: token + learned absolute position embeddings, pre-LN causal blocks.

    Parameters
    ----------
    vocab_size, context_length, d_model, heads, layers : int
        Sizes (``d_model % heads == 0``). A final LayerNorm and an untied linear head follow the blocks.

    Every weight matrix and embedding starts as N(0, 0.02²), biases at 0, as in
    GPT-2 (Radford et al. 2019; Karpathy's nanoGPT), so the step-0 position table is random.
    ``position_embedding.weight``, shape (context_length, d_model), is the table poslab saves.
    """

    def __init__(self, vocab_size: int, context_length: int, d_model: int, heads: int, layers: int):
        super().__init__()
        self.context_length = context_length
        self.token_embedding = nn.Embedding(vocab_size, d_model)
        self.position_embedding = nn.Embedding(context_length, d_model)
        self.blocks = nn.Sequential(*(Block(d_model, heads) for _ in range(layers)))
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size)
        self.apply(self._init)

    @staticmethod
    def _init(module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, 0.0, 0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """Logits of shape (batch, length, vocab_size) for ids of shape (batch, length ≤ context_length)."""
        x = self.token_embedding(ids) + self.position_embedding.weight[: ids.shape[1]]
        return self.head(self.norm(self.blocks(x)))

    def position_table(self):
        """The learned position table: float32 ndarray of shape (context_length, d_model)."""
        return self.position_embedding.weight.detach().to(torch.float32).cpu().numpy().copy()
