"""find-barriers on steps written as teams write them (``tests/checker_patterns.py`` in the site's
repository): remat in a scanned stack, tied embedding tables, ``shard_map`` experts, gradients
accumulated and returned. Every weight gradient is one, named by its parameter; each fix exits 0."""

import json

import pytest

from find_barriers import read_module
from find_barriers._rules import rule_of
from find_barriers._sites import find_sites


def sites_of(data, name: str):
    return find_sites(read_module(str(data / name)))


def findings(sites) -> dict[str, tuple]:
    """Each site's parameter (or role), with its rule and trip count."""
    return {
        site.parameter or site.role: (rule_of(site) and rule_of(site).code, site.trips)
        for site in sites
    }


def test_remat_in_a_linen_scan_hides_no_weight_gradient(data):
    """``nn.remat`` blocks in ``nn.scan``: the backward pass reads each layer's weights and
    residuals through an optimisation barrier, and recomputes the forward there. Every weight
    gradient costs nothing by the estimate (stacked in the scan, or summed): FB005."""
    layer = "params['layers']['{}']['kernel']"
    attention = "params['layers']['Attention_0']['{}']['kernel']"
    assert findings(sites_of(data, "linen_remat.hlo.txt")) == {
        **{attention.format(name): ("FB005", 2) for name in ("query", "key", "value", "out")},
        layer.format("wi"): ("FB005", 2),
        layer.format("wo"): ("FB005", 2),
        "params['embed']['table']": ("FB005", 1),  # the tied table, read transposed by the head
        "activation gradient": ("FB003", 2),  # the attention's, through the probabilities
    }


def test_a_tied_table_is_a_weight_gradient_named_by_path_in_tree_mode(data):
    """nnx's ``embed.attend``: the head's dot reads the table transposed; the table's gradient is
    that dot's, summed with the lookup's scatter (no cost by the estimate: FB005)."""
    assert findings(sites_of(data, "nnx_tied_tree.hlo.txt")) == {
        "model.embed.embedding.value": ("FB005", 1),
        "model.mlp.up.kernel.value": ("FB001", 1),  # in an nnx.remat
        "model.mlp.down.kernel.value": ("FB001", 1),
    }


def test_a_position_is_said_to_be_one_and_names_the_route_to_the_path(data, run):
    sites = sites_of(data, "nnx_tied.hlo.txt")
    assert {(site.role, site.by_position) for site in sites} == {("weight gradient", True)}
    assert {site.parameter for site in sites} == {f"model.states[0][{i}]" for i in (0, 2, 4)}
    status, out, _ = run(data / "nnx_tied.hlo.txt")
    (note,) = [line for line in out.splitlines() if line.startswith("note: ")]
    assert (status, "nnx.jit(..., graph=False)" in note) == (1, True)
    assert out.count("(by position)") == 3


def test_checkpointed_layers_shard_map_experts_and_returned_gradients(data):
    """Plain JAX: ``jax.checkpoint`` with a policy in ``lax.scan``, 3 micro-batches accumulated,
    the experts' weight gradient made in ``shard_map``'s backward (a name relative to its call).
    Each blocked one is stacked in the scan's loop, so costs nothing by the estimate: FB005."""
    assert findings(sites_of(data, "jax_checkpoint.hlo.txt")) == {
        "params['layers']['wi']": ("FB005", 6),  # 2 layers x 3 micro-batches
        "params['layers']['wo']": ("FB005", 6),
        "params['head']": ("FB005", 3),
        "params['experts']": (None, 3),  # no Sharding call between in a manual computation
    }


@pytest.mark.parametrize("name", ["linen_remat", "nnx_tied", "jax_checkpoint"])
def test_no_weight_gradient_is_called_an_activation_gradient_or_forward(data, name):
    sites = sites_of(data, f"{name}.hlo.txt")
    mislabelled = [s for s in sites if s.parameter and s.role != "weight gradient"]
    assert (len(sites) > 2, mislabelled) == (True, [])


@pytest.mark.parametrize("name", ["linen_remat", "nnx_tied", "jax_checkpoint"])
def test_each_fix_exits_0(data, run, name):
    """Every dot under ``auto_axes`` (the head as one dot against a tied table); under
    ``--min-bytes 0``, so that a blocked fold of no estimated cost (FB005) fails too."""
    assert run(data / f"{name}.hlo.txt", "--min-bytes", "0")[0] == 1
    status, out, _ = run(data / f"{name}_fixed.hlo.txt", "--min-bytes", "0")
    assert (status, out.count("\n")) == (0, 1)  # one summary line
    assert " 0 blocked, " in out


def test_a_baseline_written_from_one_driver_holds_under_another(data, run, tmp_path):
    """``train.py`` runs the nnx step at its top level, ``harness.py`` inside ``main()``; its
    parameters are positions, so its sites are keyed by the model's own functions."""
    baseline = tmp_path / "baseline.json"
    assert run(data / "nnx_tied.hlo.txt", "--write-baseline", baseline)[0] == 0
    entries = json.loads(baseline.read_text())["sites"]
    assert all(
        e["parameter"] is None and e["functions"][-1].endswith("train_step") for e in entries
    )
    stacks = [
        site.user_stack
        for name in ("nnx_tied", "nnx_tied_moved")
        for site in sites_of(data, f"{name}.hlo.txt")[:1]
    ]
    assert {f.file.rpartition("/")[2] for f in stacks[0]} != {
        f.file.rpartition("/")[2] for f in stacks[1]
    }
    summary = "3 transpose-of-dot sites: 3 blocked (3 accepted), 0 foldable, 0 kept"
    assert run(data / "nnx_tied_moved.hlo.txt", "--baseline", baseline) == (
        0,
        f"1 module: {summary}; estimated cost 129.0 kB a step\n",
        "",
    )


def test_a_fixed_model_reports_its_stale_entries_and_fails_when_strict(data, run, tmp_path):
    baseline = tmp_path / "baseline.json"
    run(data / "jax_checkpoint.hlo.txt", "--write-baseline", baseline)
    status, out, _ = run(data / "jax_checkpoint_fixed.hlo.txt", "--baseline", baseline)
    stale = [line for line in out.splitlines() if line.startswith("  FB004 stale ")]
    assert (status, len(stale)) == (0, 3)
    assert out.splitlines()[-1].endswith("; 3 stale baseline entries")
    strict = run(data / "jax_checkpoint_fixed.hlo.txt", "--baseline", baseline, "--strict-baseline")
    assert strict[0] == 1
    document = json.loads(
        run(data / "jax_checkpoint_fixed.hlo.txt", "--baseline", baseline, "--format", "json")[1]
    )
    assert (document["total"]["stale"], len(document["stale"]), document["exit_status"]) == (
        3,
        3,
        0,
    )
    assert {entry["parameter"] for entry in document["stale"]} == {
        "params['layers']['wi']", "params['layers']['wo']", "params['head']",
    }  # fmt: skip


def test_fsdp_by_hand_in_shard_map_names_each_kernel_and_follows_a_skipped_step(data):
    """Each layer gathers its kernel inside ``shard_map`` (the forward dot reads an
    ``all-gather``); ``optax.MultiSteps`` updates through a conditional; nothing is donated."""
    sites = sites_of(data, "shard_map_fsdp.hlo.txt")
    assert [(site.parameter, site.role, site.verdict) for site in sites] == [
        ("kernels[0]", "weight gradient", "foldable"),
        ("kernels[1]", "weight gradient", "foldable"),
    ]


def test_stale_entries_are_of_the_modules_and_rules_checked(data, run, tmp_path):
    """An entry of a rule --ignore names, or of a module not read, is not stale: not checked."""
    baseline = tmp_path / "baseline.json"
    run(data / "linen_remat.hlo.txt", "--write-baseline", baseline)
    document = json.loads(baseline.read_text())
    document["sites"].append(document["sites"][0] | {"module": "jit_eval_step"})
    baseline.write_text(json.dumps(document))
    fixed = data / "linen_remat_fixed.hlo.txt"

    def stale(*options: str) -> list[str]:
        out = run(fixed, "--baseline", baseline, "--format", "json", *options)[1]
        return sorted(entry["rule"] for entry in json.loads(out)["stale"])

    assert stale() == ["FB003"] + ["FB005"] * 7
    assert stale("--ignore", "FB003") == ["FB005"] * 7
    assert stale("--ignore", "FB005") == ["FB003"]


@pytest.mark.parametrize(
    ("name", "bases"),
    [
        ("linen_remat", {"params['embed']['table']": ("4.6",), "layers": ("4.7", "4.8")}),
        ("nnx_tied_tree", {"model.embed.embedding.value": ("4.6",), "mlp": ("4.3",)}),
        ("jax_checkpoint", {"layers": ("4.7", "4.8"), "params['head']": ("4.7", "4.8")}),
    ],
)
def test_each_weight_gradient_is_priced_by_where_it_goes(data, name, bases):
    """A tied table's gradient is summed with its lookup's first (no cost, §4.6); a scanned
    layer's, or one accumulated over micro-batches, is stacked in a loop (no cost, §4.7); an
    unrolled layer's is copied in and out of the transposed layout with adam's moments (§4.3)."""
    for site in sites_of(data, f"{name}.hlo.txt"):
        if site.blocked and site.role == "weight gradient":
            (basis,) = {b for key, b in bases.items() if key in site.parameter}
            assert (site.cost.basis, bool(site.cost.bytes)) == (basis, basis == ("4.3",))
