"""Which pass of a training step an instruction belongs to, read from the scopes JAX writes into
``op_name``: ``transpose(...)`` for the backward pass ([ad.py][transpose]), and, after it,
``rematted_computation`` for the forward that ``jax.checkpoint`` recomputes there
([ad_checkpoint.py][remat], [and][remat3]). An instruction in a called computation (a ``shard_map`` body, a
nested ``jit``) carries a name relative to the call, so the calls' names come first.

[transpose]: https://github.com/jax-ml/jax/blob/jax-v0.12.0.1/jax/_src/interpreters/ad.py#L342
[remat]: https://github.com/jax-ml/jax/blob/jax-v0.12.0.1/jax/_src/ad_checkpoint.py#L764
[remat3]: https://github.com/jax-ml/jax/blob/jax-v0.12.0.1/jax/_src/ad_checkpoint.py#L1059
"""

from __future__ import annotations

import functools
import re

from find_barriers._program import Instruction, Program

FORWARD = "forward"
"""The forward pass, or the forward remat recomputes in the backward pass."""
BACKWARD = "backward"
"""The backward pass: gradients."""
BACKWARD_SCOPE = "transpose("
"""How JAX's backward pass begins a scope."""
RECOMPUTED_SCOPE = "rematted_computation"
"""The scope of the forward ``jax.checkpoint`` recomputes in the backward pass."""


def scope_phase(scope: str) -> str:
    """The pass a scope names: backward after ``transpose(``, unless ``rematted_computation``
    follows it (the forward recomputed in the backward pass).

    >>> scope_phase("jit(step)/transpose(jvp(M))/while/body/checkpoint/rematted_computation/dot")
    'forward'
    >>> scope_phase("jit(step)/transpose(jvp(M))/while/body/checkpoint/dot_general")
    'backward'
    """
    backward = scope.rfind(BACKWARD_SCOPE)
    return BACKWARD if backward > scope.rfind(RECOMPUTED_SCOPE) else FORWARD


class Phases:
    """Each instruction's pass in ``program``, its computation's callers' scopes worked out once."""

    def __init__(self, program: Program) -> None:
        self.program = program
        self.contexts = functools.cache(self._contexts)

    @functools.cached_property
    def top(self) -> str:
        """The module's name as a scope's first part is written (``jit_train_step`` for
        ``jit(train_step)``): a name that begins so is whole, any other relative to its call
        (without a module name, a name that begins with ``jit(`` is whole)."""
        return _plain(self.program.name)

    def _contexts(self, comp: str) -> frozenset[str]:
        """The scopes that reach computation ``comp``: "" for the entry (or a computation nothing
        calls), else each caller's whole name."""
        callers = [] if comp == self.program.entry else self.program.callers_of(comp)
        if not callers:
            return frozenset({""})
        return frozenset(scope for _, caller in callers for scope in self.scopes(caller))

    def scopes(self, inst: Instruction) -> frozenset[str]:
        """``inst``'s whole name in each context that reaches it ("" where it has none)."""
        name = self.program.op_name(inst) or ""
        first = name.partition("/")[0]
        if _plain(first) == self.top or (not self.top and first.startswith("jit(")):
            return frozenset({name})
        comp = self.program.owner.get(inst.name, self.program.entry)
        return frozenset(f"{context}/{name}" for context in self.contexts(comp))

    def of(self, inst: Instruction) -> str | None:
        """``inst``'s pass, :data:`FORWARD` or :data:`BACKWARD`; None where no scope names one,
        or its callers disagree."""
        found = {scope_phase(scope) for scope in self.scopes(inst) if scope.strip("/")}
        return found.pop() if len(found) == 1 else None


def _plain(name: str) -> str:
    """A name with each run of other characters than letters and digits one ``_``, as XLA names
    a module after its function (``jit(<lambda>)`` is ``jit__lambda``, read ``jit_lambda``)."""
    return re.sub(r"[\W_]+", "_", name).strip("_")
