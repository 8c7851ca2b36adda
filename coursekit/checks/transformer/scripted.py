"""A stand-in for a trained Transformer whose next tokens are known in advance (`ScriptedModel`): the public check
of greedy_decode (checks.py) runs the student's decoding loop on it."""
from __future__ import annotations

import torch
from torch import nn

from coursekit.checks.toolkit import fail


class _OnlyThroughModel(nn.Module):
    """Stands in for model.encoder / model.decoder / model.generator: greedy decoding should use the model's own
    encode / decode (or forward), so calling a part directly fails with a message saying so."""

    def __init__(self, part: str):
        super().__init__()
        self.part = part
        self.register_buffer("pe", torch.zeros(64, 4))                              # like PositionalEncoding.pe
        self.norm = nn.Identity()

    @property
    def pos_encoding(self):
        return self

    def forward(self, *args, **kwargs):
        fail(f"greedy_decode called model.{self.part}(...) directly; this check's stand-in model only answers "
             "model.encode(src_ids), model.decode(tgt_ids, memory, src_mask) and model(src_ids, tgt_ids).",
             "use memory, src_mask = model.encode(src_ids) once, then model.decode(...) at every step.")


class ScriptedModel(nn.Module):
    """A stand-in for a trained Transformer whose next token is known: row b of the batch spells out script[b].

    decode() checks that what it is fed is <bos> followed by its own earlier answers, as greedy decoding must do.
    """

    def __init__(self, scripts: list[list[int]], vocab_size: int = 12, pad_id: int = 0, bos_id: int = 2):
        super().__init__()
        self.scripts, self.vocab_size, self.pad_id, self.bos_id = scripts, vocab_size, pad_id, bos_id
        self.anchor = nn.Parameter(torch.zeros(1))                                    # gives the model a device
        self.problems: list[str] = []
        self.encoder, self.decoder, self.generator = (_OnlyThroughModel(p) for p in ("encoder", "decoder", "generator"))

    def _answer(self, b: int, t: int) -> int:
        script = self.scripts[b]
        return script[t] if t < len(script) else 5                                    # past the script: keep going

    def encode(self, src_ids):
        memory = src_ids.float()[..., None].expand(-1, -1, 4)                          # (B, S, 4)
        return memory, (src_ids != self.pad_id)[:, None, None, :]

    def decode(self, tgt_ids, memory, src_mask):
        B, T = tgt_ids.shape
        if not bool((tgt_ids[:, 0] == self.bos_id).all()):
            self.problems.append("the first decoder input of every sequence must be bos_id.")
        logits = torch.zeros(B, T, self.vocab_size, device=tgt_ids.device)
        for b in range(B):
            for t in range(T):
                if t >= 1 and int(tgt_ids[b, t]) not in (self._answer(b, t - 1), self.pad_id):
                    self.problems.append("the decoder must be fed its own previous predictions (the argmax of "
                                         "the last position), appended one per step.")
                logits[b, t, self._answer(b, t)] = 5.0
        return logits                                                                 # (B, T, V)

    def forward(self, src_ids, tgt_ids):
        return self.decode(tgt_ids, *self.encode(src_ids))
