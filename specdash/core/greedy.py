"""The greedy spot check: the same prompts at temperature 0 against the reference and the speculative mode
(pure comparison). Speculative decoding is meant to be lossless: under greedy sampling the outputs should be
identical. A difference is a finding (a draft/verify bug, or numerics of batched verification), shown with
where it starts."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

CONTEXT = 40
"""Characters of each text shown around the first difference."""


@dataclass(frozen=True)
class Difference:
    """Where two outputs for one prompt first differ."""

    prompt_index: int
    """Index of the prompt in the set."""
    offset: int
    """Character offset of the first differing character."""
    reference: str
    """The reference output around the offset."""
    other: str
    """The other output around the offset."""


@dataclass(frozen=True)
class GreedyCheck:
    """The outcome over N prompts."""

    reference: str
    """Reference mode name."""
    other: str
    """Speculative mode name."""
    total: int
    """Prompts compared."""
    identical: int
    """Prompts with identical output."""
    first: Difference | None
    """The first difference, if any."""

    @property
    def text(self) -> str:
        """`greedy check eagle3 vs baseline: 8/8 identical` or the first difference, on a few lines."""
        head = f"greedy check {self.other} vs {self.reference}: {self.identical}/{self.total} outputs identical"
        if self.first is None:
            return head
        d = self.first
        return (
            f"{head}; first difference: prompt {d.prompt_index}, character {d.offset}\n"
            f"  {self.reference}: …{d.reference!r}\n  {self.other}: …{d.other!r}"
        )


def first_difference(a: str, b: str) -> int | None:
    """The index of the first differing character (the shorter length if one is a prefix); None if equal."""
    if a == b:
        return None
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return min(len(a), len(b))


def compare_outputs(reference: str, other: str, ref_texts: Sequence[str], other_texts: Sequence[str]) -> GreedyCheck:
    """Compare outputs prompt by prompt (the lists are in prompt order and of equal length)."""
    if len(ref_texts) != len(other_texts):
        raise ValueError("both modes must answer the same prompts")
    identical = 0
    first: Difference | None = None
    for i, (a, b) in enumerate(zip(ref_texts, other_texts, strict=True)):
        at = first_difference(a, b)
        if at is None:
            identical += 1
        elif first is None:
            lo = max(0, at - CONTEXT // 4)
            first = Difference(i, at, a[lo : at + CONTEXT], b[lo : at + CONTEXT])
    return GreedyCheck(reference, other, len(ref_texts), identical, first)
