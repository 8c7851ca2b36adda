"""Issue 35's naming figure: the share of the typical mistakes tried by the hidden-check tests that the checks name.

Every wrong answer those tests try goes through `variants.fails_with`, which records it in `variants.TRIED`. An
answer whose failure carries a catalogue id is named. The others are sorted by the first line of their message:

    stub         "not implemented yet"
    edge case    only stated edge cases missed (partial credit: their own criteria and message)
    trained      a trained model that does not reach its check's bar (a result of training, not one mistake)
    form         a wrong type, shape or dtype, a missing submodule, method or object, a NaN, an error raised
    mistake      the rest: an answer that runs, has the right form, and computes something wrong

The typical mistakes are the named answers and the unnamed of the last kind.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

NAMED_AT_LEAST = 0.95
FORM = ("wrong shape", "must return", "must be a", "expected submodule", "needs a method", "float32", "int64",
        "bool tensor", "NaN or inf", "must be a buffer", "raised an error", "tuple (output", "numpy array",
        "needs the vocabulary", "needs your trained model", "too large to be evaluated", "the contract's names",
        "was not defined", "needs the parameter", "must be tensors", "does not load into", "could not be read as",
        "is not the exported")


def kind(message: str) -> str:
    first = message.splitlines()[0]
    if "not implemented yet" in first:
        return "stub"
    if "stated edge case" in first and "argument" not in first:
        return "edge case"
    if "not accurate enough" in first:
        return "trained"
    if any(words in first for words in FORM):
        return "form"
    return "mistake"


@dataclass
class Figure:
    tried: int
    named: int
    unnamed: Counter
    not_named: list          # the first lines of the unnamed typical mistakes

    @property
    def typical(self) -> int:
        return self.named + self.unnamed["mistake"]

    @property
    def share(self) -> float:
        return self.named / max(1, self.typical)

    def __str__(self) -> str:
        lines = [f"{self.tried} wrong answers tried; {self.named} named by a catalogue id; unnamed by kind: "
                 f"{dict(self.unnamed)}",
                 f"typical mistakes named: {self.named} of {self.typical} ({self.share:.1%})"]
        return "\n".join(lines + [f"  not named: {line}" for line in self.not_named])


def figure(tried: list[tuple[str | None, str]]) -> Figure:
    unnamed = [message for mistake, message in tried if not mistake]
    return Figure(tried=len(tried), named=len(tried) - len(unnamed), unnamed=Counter(map(kind, unnamed)),
                  not_named=[m.splitlines()[0][:110] for m in unnamed if kind(m) == "mistake"])
