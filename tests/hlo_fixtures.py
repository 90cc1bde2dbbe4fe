"""Hand-written HLO that more than one test module reads."""

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
