"""Hand-written HLO the tests read: each module shows one thing a reader must get right."""

SITES = """
HloModule jit_step, entry_computation_layout={(f32[8,16]{1,0}, f32[8,32]{1,0})->(f32[16,32]{0,1}, f32[16,32]{1,0})}

FileNames
1 "/somewhere/site-packages/model/layers.py"

FunctionNames
1 "Dense.__call__"

FileLocations
1 {file_name_id=1 function_name_id=1 line=42 end_line=42 column=4 end_column=20}

StackFrames
1 {file_location_id=1 parent_frame_id=1}


ENTRY main.1 {
  a = f32[8,16]{1,0} parameter(0), metadata={op_name="a"}
  g = f32[8,32]{1,0} parameter(1), metadata={op_name="g"}
  d1 = f32[32,16]{1,0} dot(g, a), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  s1 = f32[32,16]{1,0} custom-call(d1), custom_call_target="Sharding", sharding={replicated}
  t1 = f32[16,32]{0,1} transpose(s1), dimensions={1,0}
  c1 = f32[16,32]{1,0} copy(t1)
  d2 = f32[32,16]{1,0} dot(g, a), lhs_contracting_dims={0}, rhs_contracting_dims={0}, metadata={op_name="jit(step)/dot_general" stack_frame_id=1}
  t2 = f32[16,32]{0,1} transpose(d2), dimensions={1,0}
  d3 = f32[32,16]{1,0} dot(g, a), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  r3 = (f32[], f32[32,16]{1,0}) all-reduce(a, d3), replica_groups={{0,1}}, to_apply=add
  e3 = f32[32,16]{1,0} get-tuple-element(r3), index=1
  t3 = f32[16,32]{0,1} transpose(e3), dimensions={1,0}
  n4 = f32[32,16]{1,0} negate(d3)
  t4 = f32[16,32]{0,1} transpose(n4), dimensions={1,0}
  t5 = f32[16,8]{0,1} transpose(a), dimensions={1,0}
  d6 = f32[32,16]{1,0} dot(g, a), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  s6 = f32[32,16]{1,0} custom-call(d6), custom_call_target="Sharding", sharding={replicated}
  t6 = f32[16,32]{0,1} transpose(s6), dimensions={1,0}
  n6 = f32[32,16]{1,0} negate(d6)
  f1 = f32[16,32]{1,0} custom-call(t1), custom_call_target="xla.sdy.FuncResultSharding"
  ROOT out = (f32[16,32]{0,1}, f32[16,32]{1,0}) tuple(t2, c1)
}
"""
"""Before optimisation, one site of each kind: ``t1``, a dot then a ``Sharding`` call (blocked),
its copy the second output; ``t2``, the dot's own transpose (foldable), with the dot's op name
and stack frame, the first output; ``t3``, an ``all-reduce`` between, read by nothing; ``t6``, a
``Sharding`` call between and a second user of the dot. ``t4`` reads a negate and ``t5`` a
parameter: no dot, no site."""

LOOP = """
HloModule jit_scan, entry_computation_layout={(f32[3,2]{1,0})->f32[2,2,3]{2,1,0}}

update {
  stack = f32[2,2,3]{2,1,0} parameter(0)
  slice = f32[2,3]{1,0} parameter(1)
  i = s32[] parameter(2)
  r = f32[1,2,3]{2,1,0} reshape(slice)
  z = s32[] constant(0)
  ROOT dus = f32[2,2,3]{2,1,0} dynamic-update-slice(stack, r, i, z, z)
}

body {
  carry = (s32[], f32[2,2,3]{2,1,0}, f32[3,2]{1,0}) parameter(0)
  i = s32[] get-tuple-element(carry), index=0
  stack = f32[2,2,3]{2,1,0} get-tuple-element(carry), index=1
  w = f32[3,2]{1,0} get-tuple-element(carry), index=2
  d = f32[3,2]{1,0} dot(w, w), lhs_contracting_dims={}, rhs_contracting_dims={}
  t = f32[2,3]{0,1} transpose(d), dimensions={1,0}
  stacked = f32[2,2,3]{2,1,0} call(stack, t, i), to_apply=update
  unrelated = f32[2,2,3]{2,1,0} call(stack, stack, i), to_apply=update
  one = s32[] constant(1)
  next = s32[] add(i, one)
  ROOT carry_out = (s32[], f32[2,2,3]{2,1,0}, f32[3,2]{1,0}) tuple(next, stacked, w)
}

cond {
  carry = (s32[], f32[2,2,3]{2,1,0}, f32[3,2]{1,0}) parameter(0)
  i = s32[] get-tuple-element(carry), index=0
  two = s32[] constant(2)
  ROOT lt = pred[] compare(i, two), direction=LT
}

ENTRY main {
  w = f32[3,2]{1,0} parameter(0)
  zero = s32[] constant(0)
  init = f32[2,2,3]{2,1,0} broadcast(), dimensions={}
  loop = (s32[], f32[2,2,3]{2,1,0}, f32[3,2]{1,0}) tuple(zero, init, w)
  result = (s32[], f32[2,2,3]{2,1,0}, f32[3,2]{1,0}) while(loop), condition=cond, body=body
  ROOT grads = f32[2,2,3]{2,1,0} get-tuple-element(result), index=1
}
"""
"""A loop of two trips that stacks a transpose of a dot into its result, read as
``get-tuple-element``; :data:`SHORTHAND_LOOP` is the same loop as JAX 0.12 dumps it."""

SHORTHAND_LOOP = (
    LOOP.replace("  i = s32[] get-tuple-element(carry), index=0\n", "")
    .replace("  stack = f32[2,2,3]{2,1,0} get-tuple-element(carry), index=1\n", "")
    .replace("  w = f32[3,2]{1,0} get-tuple-element(carry), index=2\n", "")
    .replace("dot(w, w)", "dot(carry#2, carry#2)")
    .replace("call(stack, t, i)", "call(carry#1, t, carry#0)")
    .replace("call(stack, stack, i)", "call(carry#1, carry#1, carry#0)")
    .replace("add(i, one)", "add(carry#0, one)")
    .replace("tuple(next, stacked, w)", "tuple(next, stacked, carry#2)")
    .replace("compare(i, two)", "compare(carry#0, two)")
)
"""HLO's shorthand for a tuple's element, ``%carry#2``: JAX 0.12's dumps read a loop's state so."""

FRAMES = """
HloModule jit_step, entry_computation_layout={(f32[2,3]{1,0}, f32[3,4]{1,0})->f32[4,2]{0,1}}

FileNames
1 "/home/me/train.py"
2 "/venv/lib/python3.12/site-packages/flax/nnx/nn/linear.py"

FunctionNames
1 "<module>"
2 "Linear.__call__"

FileLocations
1 {file_name_id=1 function_name_id=1 line=58 end_line=58 column=4 end_column=20}
2 {file_name_id=2 function_name_id=2 line=422 end_line=422 column=4 end_column=20}

StackFrames
1 {file_location_id=1 parent_frame_id=1}
2 {file_location_id=2 parent_frame_id=2}


ENTRY main.1 {
  a = f32[2,3]{1,0} parameter(0), metadata={op_name="params['w']"}
  b = f32[3,4]{1,0} parameter(1)
  d = f32[2,4]{1,0} dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="jit(step)/transpose(jvp())/dot_general" stack_frame_id=2}
  ROOT t = f32[4,2]{0,1} transpose(d), dimensions={1,0}
}
"""
"""A site whose dot's stack is Flax's line, then the user's."""

NO_TUPLE_INDEX = """HloModule m

ENTRY %main (a: f32[2,4], b: f32[4,8]) -> f32[8,2] {
  %a = f32[2,4]{1,0} parameter(0)
  %b = f32[4,8]{1,0} parameter(1)
  %tup = (f32[2,4]{1,0}, f32[4,8]{1,0}) tuple(f32[2,4]{1,0} %a, f32[4,8]{1,0} %b)
  %g = f32[2,4]{1,0} get-tuple-element((f32[2,4]{1,0}, f32[4,8]{1,0}) %tup)
  %d = f32[2,8]{1,0} dot(f32[2,4]{1,0} %g, f32[4,8]{1,0} %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT %t = f32[8,2]{1,0} transpose(f32[2,8]{1,0} %d), dimensions={1,0}
}
"""
"""A module whose get-tuple-element lost its ``index=``: an edited file, not one XLA writes."""

ROLES = """
HloModule jit_step, input_output_alias={ {0}: (0, {}, may-alias) }

shared {
  v = f32[4,8]{1,0} parameter(0)
  ROOT n = f32[4,8]{1,0} negate(v)
}

branch_a {
  pa = (f32[4,8]{1,0}) parameter(0)
  one = f32[] constant(1)
  ROOT ea = f32[4,8]{1,0} broadcast(one), dimensions={}
}

branch_b {
  pb = (f32[4,8]{1,0}) parameter(0)
  eb = f32[4,8]{1,0} get-tuple-element(pb), index=0
  ROOT zb = f32[4,8]{1,0} multiply(eb, eb)
}

ENTRY main {
  w = f32[4,8]{1,0} parameter(0), metadata={op_name="params['w']"}
  g = f32[2,8]{1,0} parameter(1)
  x = f32[2,4]{1,0} parameter(2)
  flag = pred[] parameter(3)
  d1 = f32[8,4]{1,0} dot(g, x), lhs_contracting_dims={0}, rhs_contracting_dims={0}, metadata={op_name="jit(step)/transpose(jvp(f))/dot_general"}
  s1 = f32[8,4]{1,0} custom-call(d1), custom_call_target="Sharding", sharding={replicated}
  t1 = f32[4,8]{0,1} transpose(s1), dimensions={1,0}
  u1 = f32[4,8]{1,0} subtract(w, t1)
  d2 = f32[8,4]{1,0} dot(g, x), lhs_contracting_dims={0}, rhs_contracting_dims={0}, metadata={op_name="jit(step)/transpose(jvp(f))/dot_general"}
  s2 = f32[8,4]{1,0} custom-call(d2), custom_call_target="Sharding", sharding={replicated}
  t2 = f32[4,8]{0,1} transpose(s2), dimensions={1,0}
  r2 = f32[4] reduce(t2, zero), dimensions={1}, to_apply=shared
  zero = f32[] constant(0)
  d3 = f32[8,4]{1,0} dot(g, x), lhs_contracting_dims={0}, rhs_contracting_dims={0}, metadata={op_name="jit(step)/transpose(jvp(f))/dot_general"}
  s3 = f32[8,4]{1,0} custom-call(d3), custom_call_target="Sharding", sharding={replicated}
  t3 = f32[4,8]{0,1} transpose(s3), dimensions={1,0}
  o3 = f32[4,8]{1,0} custom-call(t3), custom_call_target="SomeKernel"
  d4 = f32[8,4]{1,0} dot(g, x), lhs_contracting_dims={0}, rhs_contracting_dims={0}, metadata={op_name="jit(step)/transpose(jvp(f))/checkpoint/rematted_computation/dot_general"}
  s4 = f32[8,4]{1,0} custom-call(d4), custom_call_target="Sharding", sharding={replicated}
  t4 = f32[4,8]{0,1} transpose(s4), dimensions={1,0}
  d5 = f32[8,4]{1,0} dot(g, x), lhs_contracting_dims={0}, rhs_contracting_dims={0}, metadata={op_name="jit(step)/transpose(jvp(f))/dot_general"}
  s5 = f32[8,4]{1,0} custom-call(d5), custom_call_target="Sharding", sharding={replicated}
  t5 = f32[4,8]{0,1} transpose(s5), dimensions={1,0}
  c5 = f32[4,8]{1,0} call(t5), to_apply=shared
  c6 = f32[4,8]{1,0} call(w), to_apply=shared
  k5 = (f32[4,8]{1,0}) tuple(c5)
  kw = (f32[4,8]{1,0}) tuple(w)
  b5 = f32[4,8]{1,0} conditional(flag, kw, k5), true_computation=branch_a, false_computation=branch_b
  d7 = f32[8,4]{1,0} dot(g, x), lhs_contracting_dims={0}, rhs_contracting_dims={0}, metadata={op_name="jit(step)/transpose(jvp(f))/dot_general"}
  s7 = f32[8,4]{1,0} custom-call(d7), custom_call_target="Sharding", sharding={replicated}
  t7 = f32[4,8]{0,1} transpose(s7), dimensions={1,0}
  ids = s32[4,1]{1,0} parameter(4)
  table = f32[16,8]{1,0} broadcast(zero), dimensions={}
  l7 = f32[16,8]{1,0} scatter(table, ids, t7), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=shared
  ROOT out = (f32[4,8]{1,0}, f32[4,8]{1,0}, f32[4,8]{1,0}, f32[16,8]{1,0}) tuple(u1, b5, c6, l7)
}
"""
"""Six backward dots a ``Sharding`` call blocks, each value going somewhere else: ``t1`` into the
update of the donated parameter ``w`` (output 0), ``t2`` into a reduction only, ``t3`` into a
custom call nobody knows, ``t4`` a forward recomputed under remat, ``t5`` through a computation
called twice (the other call, on ``w``, is output 2) and the false branch of a conditional (the
true one drops what it is given) to output 1, ``t7`` only as what a scatter writes into a table (a lookup's gradient, output 3)."""

HEAD = """
HloModule jit_train_step, input_output_alias={ {0}: (0, {}, may-alias), {1}: (1, {}, may-alias), {2}: (2, {}, may-alias) }

ENTRY main {
  w = bf16[EMB,32000]{1,0} parameter(0), sharding={devices=[4,1]<=[4]}, metadata={op_name="params['head']"}
  mu = bf16[EMB,32000]{1,0} parameter(1), sharding={devices=[4,1]<=[4]}
  nu = bf16[EMB,32000]{1,0} parameter(2), sharding={devices=[4,1]<=[4]}
  x = bf16[64,EMB]{1,0} parameter(3), sharding={devices=[4,1]<=[4]}
  g = bf16[64,32000]{1,0} parameter(4), sharding={devices=[4,1]<=[4]}
  d = bf16[32000,EMB]{1,0} dot(g, x), lhs_contracting_dims={0}, rhs_contracting_dims={0}, metadata={op_name="jit(train_step)/transpose(jvp())/dot_general"}
  s = bf16[32000,EMB]{1,0} custom-call(d), custom_call_target="Sharding", sharding={devices=[1,4]<=[4]}
  t = bf16[EMB,32000]{0,1} transpose(s), dimensions={1,0}
  m = bf16[EMB,32000]{1,0} add(mu, t)
  tt = bf16[EMB,32000]{1,0} multiply(t, t)
  n = bf16[EMB,32000]{1,0} add(nu, tt)
  q = bf16[EMB,32000]{1,0} divide(m, n)
  u = bf16[EMB,32000]{1,0} subtract(w, q)
  ROOT out = (bf16[EMB,32000]{1,0}, bf16[EMB,32000]{1,0}, bf16[EMB,32000]{1,0}) tuple(u, m, n)
}
"""
"""An LM head's weight gradient, blocked, updated with two moments as Adam does, the kernel
sharded four ways on its embedding dimension (``EMB``, written in before reading)."""


DOT_THEN_TRANSPOSE = """HloModule m

ENTRY main {
  a = f32[8,16]{1,0} parameter(0)
  b = f32[8,32]{1,0} parameter(1)
  d = f32[16,32]{1,0} dot(a, b), lhs_contracting_dims={0}, rhs_contracting_dims={0}
OPS
  ROOT t = f32[32,16]{0,1} transpose(LAST), dimensions={1,0}
}
"""
"""A dot and a transpose, with the ops ``OPS`` between: :func:`dot_then_transpose` fills it in."""


def dot_then_transpose(*ops: str, last: str) -> str:
    """:data:`DOT_THEN_TRANSPOSE` with ``ops`` between the dot and the transpose, which reads
    ``last``."""
    return DOT_THEN_TRANSPOSE.replace("OPS", "\n".join(f"  {op}" for op in ops)).replace(
        "LAST", last
    )


WIDE_GRADIENT = """
HloModule jit_train_step, input_output_alias={ {0}: (0, {}, may-alias), {1}: (1, {}, may-alias), {2}: (2, {}, may-alias) }

ENTRY main {
  w = bf16[KERNEL] parameter(0), sharding={devices=[SHARDS]<=[4]}, metadata={op_name="params['w']"}
  mu = bf16[KERNEL] parameter(1), sharding={devices=[SHARDS]<=[4]}
  nu = bf16[KERNEL] parameter(2), sharding={devices=[SHARDS]<=[4]}
  a = bf16[LHS] parameter(3)
  b = bf16[RHS] parameter(4)
  d = bf16[DOT] dot(a, b), DIMS, metadata={op_name="jit(train_step)/transpose(jvp())/dot_general"}
OPS
  t = bf16[KERNEL] transpose(LAST), dimensions={ORDER}
  m = bf16[KERNEL] add(mu, t)
  tt = bf16[KERNEL] multiply(t, t)
  n = bf16[KERNEL] add(nu, tt)
  q = bf16[KERNEL] divide(m, n)
  u = bf16[KERNEL] subtract(w, q)
  ROOT out = (bf16[KERNEL], bf16[KERNEL], bf16[KERNEL]) tuple(u, m, n)
}
"""
"""An attention kernel's weight gradient, updated with two moments as Adam does, the kernel
sharded four ways on its embedding dimension (512): a dot over the batch and sequence (both
contracted) of operands ``LHS`` and ``RHS``, the ops ``OPS`` between, and a transpose of order
``ORDER`` to the kernel's dimensions: :func:`wide_gradient` fills it in."""

WIDE_KERNELS = {
    "query": ((2, 4, 8, 128), (2, 4, 512), (2, 0, 1)),
    "out": ((2, 4, 512), (2, 4, 8, 128), (1, 2, 0)),
}
"""Each kernel's gradient dot, as (lhs, rhs, the transpose's order): the query's ``[emb, heads,
head_dim]`` from ``dq[b,s,8,128]`` and ``x[b,s,512]`` (the lhs wide), the output projection's
``[heads, head_dim, emb]`` from ``ct[b,s,512]`` and ``attn[b,s,8,128]`` (the rhs wide); each
order puts the rhs dimensions before the lhs ones."""

WIDE_SHARDING = 's = bf16[DOT] custom-call(d), custom_call_target="Sharding", sharding={replicated}'
"""A ``Sharding`` call of the dot's value, as :func:`wide_gradient` takes an op between."""


def wide_gradient(
    kernel: str,
    *ops: str,
    last: str,
    order: tuple[int, ...] | None = None,
    batch: bool = False,
) -> str:
    """:data:`WIDE_GRADIENT` of :data:`WIDE_KERNELS` ``kernel`` with ``ops`` between the dot and
    the transpose, which reads ``last``; ``order``: the transpose's, in place of the kernel's
    (the kernel's dimensions follow it); ``batch``: the batch dimension is the dot's batch
    dimension, not contracted, and leads the dot and the kernel."""
    lhs, rhs, swap = WIDE_KERNELS[kernel]
    dims = "lhs_contracting_dims={0,1}, rhs_contracting_dims={0,1}"
    dot = (*lhs[2:], *rhs[2:])
    if batch:
        dims = (
            "lhs_batch_dims={0}, rhs_batch_dims={0}, "
            "lhs_contracting_dims={1}, rhs_contracting_dims={1}"
        )
        dot, swap = (lhs[0], *dot), (0, *(1 + i for i in swap))
    order = order or swap
    shape = [dot[i] for i in order]
    text = WIDE_GRADIENT.replace("OPS", "\n".join(f"  {op}" for op in ops))
    for name, value in (
        ("KERNEL", shape),
        ("SHARDS", [4 if n == 512 else 1 for n in shape]),
        ("LHS", lhs),
        ("RHS", rhs),
        ("DOT", dot),
        ("ORDER", order),
    ):
        text = text.replace(name, ",".join(map(str, value)))
    return text.replace("DIMS", dims).replace("LAST", last)
