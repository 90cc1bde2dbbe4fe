"""The estimated cost of a blocked weight-gradient fold: relayout copies of the parameter and its
optimizer states (design doc §4.3; only those in for a pinned gradient of a wide lhs), a lost
reduce-scatter (§4.2), and none where the gradient is summed first (§4.6), stacked in a loop
(§4.7), or laid out by TPU with no copy (§4.1)."""

import ast
from pathlib import Path
from string import Template

import pytest
from hlo_texts import HEAD, WIDE_SHARDING, wide_gradient

import find_barriers
from find_barriers._cost import measured_copy_bytes
from find_barriers._program import read_hlo
from find_barriers._shapes import shard_bytes
from find_barriers._sites import find_sites


def head_cost(emb: int, text: str = HEAD):
    (site,) = find_sites(read_hlo(text.replace("EMB", str(emb))))
    return site.cost


def test_the_parameter_and_two_moments_are_copied_in_and_out_a_shard_each():
    cost = head_cost(512)
    shard = 128 * 32000 * 2  # one device's quarter of the bf16 kernel
    assert (cost.relayout_copies, cost.relayout_copy_bytes) == (6, 2 * 6 * shard)
    assert cost.basis == ("4.3", "4.2")


@pytest.mark.parametrize(("emb", "lost"), [(512, 3 * 32000 * 512 * 2 // 4), (2048, 0)])
def test_a_reduce_scatter_is_lost_only_under_512_bytes_a_shard_minor_most(emb, lost):
    """At emb 512 a shard of the minor-most embedding is 128 bf16 = 256 bytes: under the gate,
    so a full all-reduce moves (N - 1) / N of the gradient more; at emb 2048, 1,024 bytes."""
    assert head_cost(emb).lost_reduce_scatter_bytes == lost


@pytest.mark.parametrize(
    ("emb", "vocab", "copies"),
    [
        (512, 32000, 6),  # a shard of [128, 32000]: both fill whole tiles
        (400, 32000, 0),  # [100, 32000]: only the stored minor-most fills them
        (512, 50257, 0),  # [128, 50257]: only the one the dot writes minor-most fills them
        (400, 50257, 6),  # [100, 50257]: neither fills them
    ],
)
def test_no_copies_where_exactly_one_minor_most_candidate_fills_whole_tiles(emb, vocab, copies):
    """Sharded four ways on its rows, the head's shard keeps its last dimension (the vocabulary)
    and a quarter of the rows, the dimension the dot writes minor-most: where exactly one of
    them is a multiple of 128, TPU keeps that one minor-most and copies nothing (§4.1); where
    both are, or neither, the shard is copied in and out with its two moments (§4.3)."""
    cost = head_cost(emb, HEAD.replace("32000", str(vocab)))
    assert (cost.relayout_copies, cost.basis[0]) == (copies, "4.3" if copies else "4.1")
    assert (cost.relayout_copy_bytes == 0) is (copies == 0)


@pytest.mark.parametrize(("vocab", "copies"), [(32000, 0), (32768, 6)])
def test_no_copies_where_tpu_stores_the_shard_as_the_gradient_comes(vocab, copies):
    """Sharded on the vocabulary (tensor parallel), a shard of 8,000 columns fills no whole
    128-element tiles and its 512 rows do: TPU keeps it rows minor-most, as the gradient comes.
    8,192 columns fill them: stored row-major, copied in and out."""
    text = HEAD.replace("32000", str(vocab)).replace("devices=[4,1]<=[4]", "devices=[1,4]<=[4]")
    cost = head_cost(512, text)
    assert cost.relayout_copies == copies
    assert cost.basis == (("4.1",) if copies == 0 else ("4.3",))


def test_a_gradient_summed_with_another_contribution_first_costs_nothing():
    """A tied table: the head's gradient is added to the lookup's scatter before the update."""
    tied = HEAD.replace(
        "  m = bf16[EMB,32000]{1,0} add(mu, t)",
        "  z = bf16[EMB,32000]{1,0} broadcast(), dimensions={}\n"
        "  ids = s32[8,1]{1,0} parameter(5)\n"
        "  rows = bf16[8,32000]{1,0} parameter(6)\n"
        "  lookup = bf16[EMB,32000]{1,0} scatter(z, ids, rows), update_window_dims={1}, "
        "inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, "
        "to_apply=main\n"
        "  grad = bf16[EMB,32000]{1,0} add(t, lookup)\n"
        "  m = bf16[EMB,32000]{1,0} add(mu, grad)",
    )
    cost = head_cost(512, tied)
    assert (cost.relayout_copy_bytes, cost.basis) == (0, ("4.6", "4.2"))
    assert cost.lost_reduce_scatter_bytes > 0  # summed first, still under §4.2's gate


def test_per_device_bytes_follow_both_sharding_spellings():
    text = HEAD.replace("EMB", "512")
    program = read_hlo(text)
    assert shard_bytes(program.by_name["w"]) == 128 * 32000 * 2
    shardy = text.replace(
        "w = bf16[512,32000]{1,0} parameter(0), sharding={devices=[4,1]<=[4]}",
        "w = bf16[512,32000]{1,0} parameter(0), sharding={mesh['data'=1,'fsdp'=4], [{'fsdp'}, {}]}",
    )
    assert shard_bytes(read_hlo(shardy).by_name["w"]) == 128 * 32000 * 2


def test_measured_copies_are_the_entrys_read_and_written():
    compiled = """HloModule m, is_scheduled=true

%body (p: f32[8]) -> f32[8] {
  %p = f32[8]{0} parameter(0)
  ROOT %c = f32[8]{0:T(128)} copy(%p)
}

ENTRY %main (a: f32[128,32000]) -> f32[128,32000] {
  %a = f32[128,32000]{1,0:T(8,128)} parameter(0)
  %in = f32[128,32000]{0,1:T(8,128)} copy(%a)
  ROOT %out = f32[128,32000]{1,0:T(8,128)} copy(%in)
}
"""
    assert measured_copy_bytes(compiled) == 2 * 2 * 128 * 32000 * 4  # not the body's copy


def test_a_shard_stored_as_the_gradient_comes_still_loses_its_reduce_scatter():
    """Sharded on its 512 rows, 128 a shard (whole tiles), and 50,257 columns (not): TPU stores
    the shard rows minor-most, as the gradient comes, with no copy; its 256-byte rows still keep
    the all-reduce (§4.2)."""
    cost = head_cost(512, HEAD.replace("32000", "50257"))
    assert (cost.relayout_copies, cost.basis) == (0, ("4.1", "4.2"))
    assert cost.lost_reduce_scatter_bytes == 3 * 50257 * 512 * 2 // 4


@pytest.mark.parametrize(
    ("shards", "emb", "lost"),
    [
        (2, 256, 32000 * 256 * 2 // 2),  # two shards of 128 rows, 256 bytes: half more
        (2, 512, 0),  # 256 rows a shard are 512 bytes: at the gate, not under it
        (3, 100, 2 * 32000 * 100 * 2 // 3),  # 34 rows a shard; bytes rounded down
    ],
)
def test_a_reduce_scatter_is_lost_from_two_shards_under_the_gate(shards, emb, lost):
    """Two shards are enough to lose it, a shard of exactly 512 bytes is not under the gate,
    and the wire bytes are whole: ``(N - 1) / N`` of the gradient, rounded down."""
    text = HEAD.replace("devices=[4,1]<=[4]", f"devices=[{shards},1]<=[{shards}]")
    cost = head_cost(emb, text)
    assert cost.lost_reduce_scatter_bytes == lost
    assert isinstance(cost.lost_reduce_scatter_bytes, int)


def test_an_output_the_gradient_reaches_with_other_elements_is_not_copied():
    """A slice of the gradient is a fourth output: it holds no copy of the parameter's
    elements, so the copies stay the parameter's and its two moments'."""
    text = HEAD.replace(
        "  ROOT out = (bf16[EMB,32000]{1,0}, bf16[EMB,32000]{1,0}, bf16[EMB,32000]{1,0}) "
        "tuple(u, m, n)",
        "  part = bf16[8,32000]{1,0} slice(t), slice={[0:8], [0:32000]}\n"
        "  ROOT out = (bf16[EMB,32000]{1,0}, bf16[EMB,32000]{1,0}, bf16[EMB,32000]{1,0}, "
        "bf16[8,32000]{1,0}) tuple(u, m, n, part)",
    )
    assert head_cost(512, text).relayout_copies == 6


STEP = Template("""
HloModule jit_train_step, input_output_alias={ {0}: (0, {}, may-alias), {1}: (1, {}, may-alias), {2}: (2, {}, may-alias) }
$called
ENTRY main {
  w = bf16[$weight]{$layout} parameter(0), metadata={op_name="params['w']"}
  mu = bf16[$weight]{$layout} parameter(1)
  nu = bf16[$weight]{$layout} parameter(2)
$gradient
  m = bf16[$weight]{$layout} add(mu, $into)
  tt = bf16[$weight]{$layout} multiply($into, $into)
  n = bf16[$weight]{$layout} add(nu, tt)
  q = bf16[$weight]{$layout} divide(m, n)
  u = bf16[$weight]{$layout} subtract(w, q)
  ROOT out = (bf16[$weight]{$layout}, bf16[$weight]{$layout}, bf16[$weight]{$layout}) tuple(u, m, n)
}
""")
"""A step that updates the parameter ``w`` with two moments, as Adam does, from the value
``into`` that ``gradient`` makes; ``called`` holds the computations it calls."""
GRADIENT = """  x = bf16[64,512]{1,0} parameter(3)
  g = bf16[64,256]{1,0} parameter(4)
  y = bf16[64,256]{1,0} dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="jit(train_step)/jvp()/dot_general"}
  d = bf16[256,512]{1,0} dot(g, x), lhs_contracting_dims={0}, rhs_contracting_dims={0}, metadata={op_name="jit(train_step)/transpose(jvp())/dot_general"}
  s = bf16[256,512]{1,0} custom-call(d), custom_call_target="Sharding", sharding={replicated}
  t = bf16[512,256]{0,1} transpose(s), dimensions={1,0}"""
"""A ``bf16[512,256]`` kernel's forward dot, and its gradient ``t``, blocked."""


def step_cost(called="", gradient=GRADIENT, into="t", weight="512,256", layout="1,0"):
    """The estimated cost of the one site of a :data:`STEP`."""
    text = STEP.substitute(
        called=called, gradient=gradient, into=into, weight=weight, layout=layout
    )
    (site,) = find_sites(read_hlo(text))
    return site.cost


def test_a_kernel_of_three_dimensions_is_stored_as_the_gradient_comes():
    """``bf16[8,256,100]``: its last dimension (100) fills no whole tile and the one the dot
    writes minor-most (256, the middle) does: stored that way, no copy."""
    gradient = """  g = bf16[8,64,100]{2,1,0} parameter(3)
  x = bf16[8,64,256]{2,1,0} parameter(4)
  d = bf16[8,100,256]{2,1,0} dot(g, x), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={1}, rhs_contracting_dims={1}, metadata={op_name="jit(train_step)/transpose(jvp())/dot_general"}
  s = bf16[8,100,256]{2,1,0} custom-call(d), custom_call_target="Sharding", sharding={replicated}
  t = bf16[8,256,100]{1,2,0} transpose(s), dimensions={0,2,1}"""
    cost = step_cost(gradient=gradient, weight="8,256,100", layout="2,1,0")
    assert (cost.relayout_copies, cost.basis) == (0, ("4.1",))


def test_a_gradient_reshaped_to_the_kernel_is_copied():
    """A two-dimensional transpose reshaped into a ``bf16[256,2,100]`` kernel: which kernel
    dimension the dot writes minor-most is unknown, so TPU is not taken to store the shard as
    the gradient comes."""
    gradient = """  g = bf16[64,100]{1,0} parameter(3)
  x = bf16[64,512]{1,0} parameter(4)
  d = bf16[100,512]{1,0} dot(g, x), lhs_contracting_dims={0}, rhs_contracting_dims={0}, metadata={op_name="jit(train_step)/transpose(jvp())/dot_general"}
  s = bf16[100,512]{1,0} custom-call(d), custom_call_target="Sharding", sharding={replicated}
  t = bf16[512,100]{0,1} transpose(s), dimensions={1,0}
  r = bf16[256,2,100]{2,1,0} reshape(t)"""
    cost = step_cost(gradient=gradient, into="r", weight="256,2,100", layout="2,1,0")
    assert (cost.relayout_copies, cost.basis) == (6, ("4.3",))


def test_a_gradient_summed_after_a_use_that_reads_it_twice_costs_nothing():
    """The gradient squared (read twice by one multiply) before a copy of it is added to a
    lookup's scatter: every use is followed, so the sum is found (§4.6)."""
    gradient = (
        GRADIENT
        + """
  tt0 = bf16[512,256]{1,0} multiply(t, t)
  c = bf16[512,256]{1,0} copy(t)
  z = bf16[512,256]{1,0} broadcast(), dimensions={}
  ids = s32[8,1]{1,0} parameter(5)
  rows = bf16[8,256]{1,0} parameter(6)
  lookup = bf16[512,256]{1,0} scatter(z, ids, rows), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=main
  grad = bf16[512,256]{1,0} add(c, lookup)"""
    )
    assert step_cost(gradient=gradient, into="grad").basis == ("4.6",)


LOOP_STATE = "(s32[], bf16[512,256]{1,0})"


def test_a_gradient_carried_through_a_loops_state_is_stacked():
    """Gradient accumulation: the gradient goes into a loop's state, which the body hands on
    whole (through an optimization barrier, no instruction of its own), and out to the update
    (§4.7)."""
    called = f"""
body {{
  carry = {LOOP_STATE} parameter(0)
  ROOT state = {LOOP_STATE} opt-barrier(carry)
}}

cond {{
  carry = {LOOP_STATE} parameter(0)
  i = s32[] get-tuple-element(carry), index=0
  two = s32[] constant(2)
  ROOT lt = pred[] compare(i, two), direction=LT
}}
"""
    gradient = (
        GRADIENT
        + f"""
  zero = s32[] constant(0)
  init = {LOOP_STATE} tuple(zero, t)
  loop = {LOOP_STATE} while(init), condition=cond, body=body
  acc = bf16[512,256]{{1,0}} get-tuple-element(loop), index=1"""
    )
    cost = step_cost(called, gradient, into="acc")
    assert (cost.relayout_copies, cost.basis) == (0, ("4.7", "4.8"))


def test_a_gradient_made_in_a_computation_a_loop_body_calls_is_stacked():
    """A scanned layer whose body calls the layer's backward, which stacks the gradient into
    the loop's buffer: made in a loop, so no copies (§4.7)."""
    state = (
        "(s32[], bf16[2,512,256]{2,1,0}, bf16[64,512]{1,0}, bf16[64,256]{1,0}, bf16[512,256]{1,0})"
    )
    called = f"""
backward {{
  stack = bf16[2,512,256]{{2,1,0}} parameter(0)
  xi = bf16[64,512]{{1,0}} parameter(1)
  gi = bf16[64,256]{{1,0}} parameter(2)
  i = s32[] parameter(3)
  wi = bf16[512,256]{{1,0}} parameter(4)
  yi = bf16[64,256]{{1,0}} dot(xi, wi), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}, metadata={{op_name="jit(train_step)/jvp()/dot_general"}}
  d = bf16[256,512]{{1,0}} dot(gi, xi), lhs_contracting_dims={{0}}, rhs_contracting_dims={{0}}, metadata={{op_name="jit(train_step)/transpose(jvp())/dot_general"}}
  s = bf16[256,512]{{1,0}} custom-call(d), custom_call_target="Sharding", sharding={{replicated}}
  t = bf16[512,256]{{0,1}} transpose(s), dimensions={{1,0}}
  r = bf16[1,512,256]{{2,1,0}} reshape(t)
  z = s32[] constant(0)
  ROOT dus = bf16[2,512,256]{{2,1,0}} dynamic-update-slice(stack, r, i, z, z)
}}

body {{
  carry = {state} parameter(0)
  st = bf16[2,512,256]{{2,1,0}} call(carry#1, carry#2, carry#3, carry#0, carry#4), to_apply=backward
  one = s32[] constant(1)
  next = s32[] add(carry#0, one)
  ROOT state = {state} tuple(next, st, carry#2, carry#3, carry#4)
}}

cond {{
  carry = {state} parameter(0)
  two = s32[] constant(2)
  ROOT lt = pred[] compare(carry#0, two), direction=LT
}}
"""
    gradient = f"""  x = bf16[64,512]{{1,0}} parameter(3)
  g = bf16[64,256]{{1,0}} parameter(4)
  zero = s32[] constant(0)
  empty = bf16[2,512,256]{{2,1,0}} broadcast(), dimensions={{}}
  init = {state} tuple(zero, empty, x, g, w)
  loop = {state} while(init), condition=cond, body=body
  grads = bf16[2,512,256]{{2,1,0}} get-tuple-element(loop), index=1
  first = bf16[1,512,256]{{2,1,0}} slice(grads), slice={{[0:1], [0:512], [0:256]}}
  total = bf16[512,256]{{1,0}} reshape(first)"""
    cost = step_cost(called, gradient, into="total")
    assert (cost.relayout_copies, cost.basis) == (0, ("4.7", "4.8"))


def test_a_computation_that_calls_itself_is_not_a_loop():
    """The gradient goes into a conditional's branch that calls itself (no module XLA writes):
    no loop, so not stacked."""
    called = """
again {
  p = (bf16[512,256]{1,0}) parameter(0)
  e = bf16[512,256]{1,0} get-tuple-element(p), index=0
  self = bf16[512,256]{1,0} conditional(flag, p, p), true_computation=again, false_computation=again
  ROOT n = bf16[512,256]{1,0} negate(e)
}
"""
    gradient = (
        GRADIENT
        + """
  flag = pred[] parameter(5)
  k = (bf16[512,256]{1,0}) tuple(t)
  b = bf16[512,256]{1,0} conditional(flag, k, k), true_computation=again, false_computation=again"""
    )
    assert step_cost(called, gradient, into="b").basis == ("4.3",)


def test_the_entry_is_never_in_a_loop_even_where_a_loop_body_calls_it():
    """A loop's body that calls the entry back (no module XLA writes): the entry's own
    gradient is not stacked, and is copied in and out with its two moments."""
    state = "(s32[], bf16[64,512]{1,0})"
    called = f"""
body {{
  carry = {state} parameter(0)
  one = s32[] constant(1)
  next = s32[] add(carry#0, one)
  back = bf16[512,256]{{1,0}} call(carry#1), to_apply=main
  ROOT state = {state} tuple(next, carry#1)
}}

cond {{
  carry = {state} parameter(0)
  two = s32[] constant(2)
  ROOT lt = pred[] compare(carry#0, two), direction=LT
}}
"""
    gradient = (
        GRADIENT
        + f"""
  zero = s32[] constant(0)
  init = {state} tuple(zero, x)
  loop = {state} while(init), condition=cond, body=body"""
    )
    cost = step_cost(called, gradient)
    assert (cost.relayout_copies, cost.basis) == (6, ("4.3",))


@pytest.mark.parametrize(
    ("kernel", "copies", "basis", "lost"),
    [
        ("query", 3, ("4.3", "4.7", "4.2"), 3 * 8 * 128 * 512 * 2 // 4),
        ("out", 6, ("4.3",), 0),
    ],
)
def test_a_pinned_gradient_of_a_wide_lhs_is_copied_in_only(kernel, copies, basis, lost):
    """The query's gradient (its dot's lhs wide) is copied in only, once for the parameter and
    each moment, as auto mode copies them out too (§4.7); the output projection's (the rhs
    wide), in and out, six copies. Each copy reads and writes a quarter of the bf16 kernel; the
    query's rows, 128 a shard, written minor-most, lose the reduce-scatter (§4.2)."""
    (site,) = find_sites(read_hlo(wide_gradient(kernel, WIDE_SHARDING, last="s")))
    shard = 512 // 4 * 8 * 128 * 2
    assert site.verdict == "pinned"
    assert site.cost.relayout_copies == copies
    assert site.cost.relayout_copy_bytes == 2 * copies * shard
    assert (site.cost.basis, site.cost.lost_reduce_scatter_bytes) == (basis, lost)
    assert site.cost.bytes == 2 * copies * shard + lost


MODELS = ("llama", "mistral", "mixtral", "qwen", "gemma", "deepseek", "logits_dense", "embedder")
"""What a rule written for one model would name: the design doc's models and MaxText's layers."""


def test_no_rule_names_a_model_or_a_layer():
    """The checker decides by what a module computes: no name or string in its code names a model
    or a layer; its docstrings, which cite the design doc's measurements, and the doc's section
    anchors aside."""
    source = Path(find_barriers.__file__).parent
    for path in sorted(source.rglob("*.py")):
        tree = ast.parse(path.read_text())
        documented = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)}
        for node in ast.walk(tree):
            word = node.id if isinstance(node, ast.Name) else getattr(node, "attr", None)
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                cited = id(node) in documented or node.value.startswith(("#", "https://"))
                word = None if cited else node.value
            named = [model for model in MODELS if word and model in word.lower()]
            assert not named, f"{path.name}:{getattr(node, 'lineno', '?')} names {named}"
