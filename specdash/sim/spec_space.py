"""How EAGLE's draft parameters shape acceptance and step cost: the simulator's model of the tuning space.

SGLang's EAGLE / EAGLE-3 worker drafts `steps` levels of a tree, keeping `topk` children per node, and
verifies the best `draft - 1` drafted tokens (plus the root) in one target forward pass
(`organize_draft_results` in `speculative/eagle_utils.py`, v0.5.6). Two effects decide which setting wins:

* **Acceptance** grows with depth and width. The tree's usable depth is `D = min(steps, draft - 1)` and
  its width per level `w = clamp((draft - 1) / D, 1, topk)`. Each level is accepted with probability
  `q = 1 - (1 - p) * w ** -ALPHA` (a wider level is more likely to hold the target's token; `p` is the
  chain acceptance of a single candidate), so the accepted length (bonus token included) is
  `L = 1 + q + ... + q**D`.
* **Cost** of one step over `bs` running requests is `a + b * bs` ms with
  `a = A + steps * A_DRAFT` (the draft chain runs `steps` small forwards: latency-bound, so a fixed cost
  per step) and `b = B + steps * B_DRAFT * sqrt(topk) + (draft - 1) * B_VERIFY` (every request adds the
  draft tokens it drafts and the tokens it verifies: compute that grows with the batch).

So at batch 1, where `a` dominates, deeper drafts pay (they multiply `L` at a small fixed cost per step);
as the batch grows, `b * bs` dominates and each extra draft or verify token costs more than it returns,
so the best depth falls, then speculation stops paying at all. That is the field's finding
(sglang#22246: 4 steps best at batch 1, 2 steps at batch 64 for one model), which this model reproduces
for topk = 1 (see `best_chain_steps`, and tests/unit/test_sim_spec_space.py).

Calibration. The seed's server ran EAGLE-3 at (steps, topk, draft) = (2, 4, 16) (the demo's `eagle3` mode),
so that setting carries the calibrated EAGLE-3 figures of `specdash.sim.model` exactly (a = 21.05 ms,
b = 5.776 ms per request, L = 2.2: 82 tok/s at C = 1, 354 tok/s at 48 running). `p` is solved from L at that
shape; the per-request cost without draft and verify tokens is `B_BASE`, and the draft and verify costs keep
their 5 : 3 ratio, scaled to make up the rest of `b`. Other settings are
extrapolations from that point under the two effects above, not measurements. For EAGLE (EAGLE-2) the chain
acceptance is lower (mean 2.0 at the calibration setting) at the same costs.

`python -m specdash.sim.spec_space` prints the best setting per batch size over the tune demo's grid.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from specdash.engines.spec_settings import SpecSetting, sglang_flags
from specdash.sim.model import BASELINE, EAGLE3, StepCost, solve_accept_prob

CHAIN_ANCHOR = (3, 1, 4)
"""The chain (topk = 1) setting whose mean accepted length is the calibrated one too: SGLang's default for
DeepSeek-like models, the simulator's calibration point before the seed's setting was known."""
A_DRAFT = 0.4
"""ms per draft step, fixed (a draft forward at small batch is latency-bound)."""
CALIBRATION = (2, 4, 16)
"""The (steps, topk, draft) setting that carries the field calibration: the seed's server's flags."""
CALIBRATION_FLAGS = sglang_flags(SpecSetting(*CALIBRATION))
"""SGLang's draft flags for `CALIBRATION` (the demo's `eagle3` mode and the tests that hold the seed's figures)."""
B_BASE = 1.5
"""Per-request cost of a speculative step without the draft and verify tokens: a little above the plain target
step's 1.16 ms; the value that keeps the field's best chain depths (4 at batch 1, 2 at batch 64)."""
_DRAFT_SHARE, _VERIFY_SHARE = 0.5, 0.3  # the draft : verify per-request cost ratio (5 : 3)
_SCALE = (EAGLE3.b_ms - B_BASE) / (
    CALIBRATION[0] * _DRAFT_SHARE * math.sqrt(CALIBRATION[1]) + (CALIBRATION[2] - 1) * _VERIFY_SHARE
)
B_DRAFT = _DRAFT_SHARE * _SCALE
"""ms per draft step per running request at topk = 1 (times sqrt(topk) for wider levels)."""
B_VERIFY = _VERIFY_SHARE * _SCALE
"""ms per verified draft token per running request."""
A_BASE = EAGLE3.a_ms - CALIBRATION[0] * A_DRAFT
"""Fixed cost of a speculative step without the draft chain (target verify, tree build, draft extend)."""
MEAN_ACCEPT_AT_CALIBRATION: dict[str, float] = {"EAGLE3": EAGLE3.mean_accept, "EAGLE": 2.0}
"""Mean accepted length at the calibration setting per algorithm."""


@dataclass(frozen=True)
class DraftShape:
    """The tree SGLang verifies for one (steps, topk, draft) setting."""

    steps: int
    """`--speculative-num-steps`."""
    topk: int
    """`--speculative-eagle-topk`."""
    draft: int
    """`--speculative-num-draft-tokens` (after SGLang's topk = 1 adjustment)."""

    @property
    def depth(self) -> int:
        """Usable tree depth: the longest chain of draft tokens one verify can accept."""
        return max(0, min(self.steps, self.draft - 1))

    @property
    def width(self) -> float:
        """Candidates per level of the verified tree (1 for a chain)."""
        if self.depth == 0:
            return 1.0
        return min(float(self.topk), max(1.0, (self.draft - 1) / self.depth))


def chain_acceptance(algo: str) -> float:
    """Per-token acceptance of a single-candidate chain for `algo` (EAGLE or EAGLE3): the calibrated mean
    over the chain anchor's depth."""
    steps = CHAIN_ANCHOR[0]
    return solve_accept_prob(MEAN_ACCEPT_AT_CALIBRATION.get(algo, EAGLE3.mean_accept), steps)


def _fit_alpha() -> float:
    """`ALPHA` such that the calibration setting's tree gives the calibrated EAGLE-3 mean with the chain's `p`."""
    shape = DraftShape(*CALIBRATION)
    q = solve_accept_prob(EAGLE3.mean_accept, shape.depth)
    p = chain_acceptance("EAGLE3")
    return math.log((1.0 - p) / (1.0 - q)) / math.log(shape.width)


ALPHA = _fit_alpha()
"""How fast a wider level raises its acceptance: `1 - q` falls as `w ** -ALPHA` (about 0.18: fitted so that
the seed's (2, 4, 16) tree and SGLang's (3, 1, 4) chain both give the calibrated mean of 2.2)."""


def level_acceptance(algo: str, shape: DraftShape) -> float:
    """`q`: the probability that one level of the tree holds the target's next token."""
    p = chain_acceptance(algo)
    return 1.0 - (1.0 - p) * float(shape.width**-ALPHA)


def mean_accept(algo: str, shape: DraftShape) -> float:
    """Expected tokens a request gains per step (bonus token included)."""
    q = level_acceptance(algo, shape)
    return sum(q**k for k in range(shape.depth + 1))


def step_cost(algo: str, shape: DraftShape) -> StepCost:
    """The linear step cost and mean accepted length of `shape` (see the module docstring)."""
    a = A_BASE + shape.steps * A_DRAFT
    b = B_BASE + shape.steps * B_DRAFT * math.sqrt(shape.topk) + (shape.draft - 1) * B_VERIFY
    return StepCost(a_ms=a, b_ms=b, mean_accept=mean_accept(algo, shape))


def aggregate(algo: str | None, shape: DraftShape | None, bs: int) -> float:
    """Steady-state aggregate decode tok/s at running batch `bs` (no cap; None = no speculation)."""
    if algo is None or shape is None:
        return bs * 1000.0 / BASELINE.step_ms(bs)
    cost = step_cost(algo, shape)
    return bs * cost.mean_accept * 1000.0 / cost.step_ms(bs)


def best_chain_steps(bs: int, steps: Iterable[int] = range(1, 8), algo: str = "EAGLE3") -> int:
    """The topk = 1 depth with the highest throughput at batch `bs`."""
    return max(steps, key=lambda s: aggregate(algo, DraftShape(s, 1, s + 1), bs))


if __name__ == "__main__":
    grid = [DraftShape(s, k, d) for s in (1, 2, 3, 5) for k in (1, 4, 8) for d in (2, 4, 8, 16)]
    for bs in (1, 2, 4, 8, 16, 32, 64):
        best = max(grid, key=lambda g: aggregate("EAGLE3", g, bs))
        base = aggregate(None, None, bs)
        print(f"bs {bs:3d}: best {best} {aggregate('EAGLE3', best, bs):7.1f} tok/s, baseline {base:7.1f}")
