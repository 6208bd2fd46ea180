"""Cast policies: torch's tables as data, immutability and layering, and a decision for every op."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest

import ampcore
from ampcore import dtypes as dt
from ampcore import policy as P
from ampcore.dispatch import registered_ops
from ampcore.plugins import hookimpl, registry
from ampcore.policy import torch_lists

DOCS = Path(__file__).resolve().parent / "data" / "torch-amp-docs.txt"  # torch's page, its source in its header
AUTOCAST_DOC = Path(__file__).resolve().parents[1] / "docs" / "autocast.md"


# --------------------------------------------------------------------------- the transcription
def _doc_lists() -> list[list[str]]:
    """The op lists of the reference page, read independently of ampcore's transcription."""
    lines = [line.strip() for line in DOCS.read_text().splitlines() if not line.startswith("#")]
    blocks, current = [], []
    for i, line in enumerate(lines):
        is_name = re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", line) is not None
        continues = i + 1 < len(lines) and lines[i + 1] == ","
        if is_name and (continues or current):
            current.append(line)
            if not continues:
                blocks.append(current)
                current = []
    return blocks


def test_the_reference_page_ships_inside_the_project():
    assert DOCS.is_file() and DOCS.resolve().is_relative_to(Path(__file__).resolve().parents[1])
    assert "torch.amp" in DOCS.read_text().splitlines()[0]


def test_tables_are_the_reference_page_verbatim_and_in_order():
    transcribed = [
        torch_lists.CUDA_LOWER,
        torch_lists.CUDA_FP32,
        torch_lists.CUDA_PROMOTE,
        torch_lists.XPU_LOWER,
        torch_lists.XPU_FP32,
        torch_lists.XPU_PROMOTE,
        torch_lists.CPU_LOWER,
        torch_lists.CPU_FP32,
        torch_lists.CPU_PROMOTE,
    ]
    assert [list(t) for t in transcribed] == _doc_lists()


@pytest.mark.parametrize(
    "table, op, category",
    [
        ("cuda", "linear", P.LOWER),
        ("cuda", "matmul", P.LOWER),
        ("cuda", "conv2d", P.LOWER),
        ("cuda", "softmax", P.FP32),
        ("cuda", "exp", P.FP32),
        ("cuda", "sum", P.FP32),
        ("cuda", "layer_norm", P.FP32),
        ("cuda", "pow", P.FP32),
        ("cuda", "__rtruediv__", P.FP32),
        ("cuda", "__rpow__", P.FP32),
        ("cuda", "addcmul", P.PROMOTE),
        ("cuda", "scatter_add", P.PROMOTE),
        ("cpu", "linear", P.LOWER),
        ("cpu", "scaled_dot_product_attention", P.LOWER),
        ("cpu", "bmm", P.LOWER),
        ("cpu", "mse_loss", P.FP32),
        ("cpu", "cross_entropy", P.FP32),
        ("cpu", "nll_loss", P.FP32),
        ("cpu", "cat", P.PROMOTE),
        ("cpu", "stack", P.PROMOTE),
        ("cpu", "softmax", P.UNLISTED),
        ("cpu", "layer_norm", P.UNLISTED),
        ("cpu", "exp", P.UNLISTED),
        ("cuda", "gelu", P.UNLISTED),
        ("cuda", "add", P.UNLISTED),
        ("cuda", "relu", P.UNLISTED),
    ],
)
def test_builtin_tables_give_torchs_categories(table, op, category):
    assert P.builtin(table).category(op) is category


def _autocast_doc_table() -> tuple[list[str], list[tuple[list[str], list[str]]]]:
    """docs/autocast.md's categories by device type: the builtin tables its columns name, and per row the ops
    and one category per table."""
    lines = AUTOCAST_DOC.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| op |"))
    header, _, *rows = itertools.takewhile(lambda line: line.startswith("|"), lines[start:])
    cells = [[cell.strip() for cell in row.strip("|").split("|")] for row in rows]
    return (
        re.findall(r'builtin\("(\w+)"\)', header),
        [(re.findall(r"`(\w+)`", ops), [c.strip("`") for c in categories]) for ops, *categories in cells],
    )


def test_docs_autocast_md_gives_each_device_types_categories_as_the_builtin_tables_do():
    tables, rows = _autocast_doc_table()
    assert tables == ["cuda", "cpu"]
    assert "softmax" in {op for ops, _ in rows for op in ops}  # fp32 on cuda, unlisted on cpu
    for ops, categories in rows:
        for op in ops:
            assert [P.builtin(t).category(op).value for t in tables] == categories, op


def test_torch_aliases_map_onto_ampcore_op_names_with_the_source_recorded():
    cpu = P.builtin("cpu")
    assert (
        cpu.decision("cross_entropy").source
        == "torch docs cpu list (as cross_entropy_loss); torch 2.13 AutocastCPU registration (autocast_mode.cpp)"
    )
    assert P.builtin("cuda").decision("matmul").category is P.LOWER  # listed as both __matmul__ and matmul
    for table in P.BUILTIN_TABLES:
        assert not set(torch_lists.TORCH_ALIASES) & set(P.builtin(table).entries), "aliases must be folded"


@pytest.mark.parametrize("table, category", [("cuda", P.BANNED), ("xpu", P.BANNED), ("cpu", P.FP32)])
def test_binary_cross_entropy_follows_torch_per_device_type(table, category):
    """torch bans it under CUDA (and XPU) autocast; its CPU autocast lists and registers it as float32."""
    assert P.builtin(table).category("binary_cross_entropy") is category
    assert P.builtin(table).category("binary_cross_entropy_with_logits") is P.FP32


def test_unknown_builtin_table_lists_the_valid_ones():
    with pytest.raises(ValueError, match=r"'tpu'.*'cuda', 'xpu', 'cpu'"):
        P.builtin("tpu")


# --------------------------------------------------------------------------- every op has a decision
@pytest.mark.parametrize("table", P.BUILTIN_TABLES)
def test_every_registered_op_has_a_decision_with_a_reason(table):
    policy = P.builtin(table)
    ops = registered_ops()
    assert len(ops) > 60
    for op in ops:
        entry = policy.decision(op)
        assert entry.category in set(P.Category) and entry.source


def test_an_op_known_to_neither_the_policy_nor_the_dispatcher_is_an_error_not_unlisted():
    with pytest.raises(P.UnknownOpError, match=r"'no_such_op'.*ampcore.op"):
        P.builtin("cpu").decision("no_such_op")
    assert P.builtin("cpu").decision("fft_fft").category is P.FP32  # listed, though ampcore lacks it


def _looks_like(op: str, name: str) -> bool:
    """Same name but for underscores, or ``op``'s words start or end ``name``'s (nll_loss / nll_loss2d)."""
    if name == op:
        return False
    if name.strip("_") == op.strip("_"):
        return True
    words, listed = op.strip("_").split("_"), name.strip("_").split("_")
    n = len(words)
    numbered = name.startswith(op) and name[len(op) : len(op) + 1].isdigit()
    return listed[:n] == words or listed[-n:] == words or numbered


# (ampcore op, listed torch op) pairs that look alike but are different ops, so the ampcore op is
# rightly unlisted where only the other is listed.
DISTINCT = {
    ("add", "scatter_add"),
    ("div", "kl_div"),
    ("dot", "multi_dot"),
    ("max", "max_pool3d"),
    ("max", "max_unpool2d"),
    ("max", "max_unpool3d"),
    ("max_pool2d", "fractional_max_pool2d"),
    ("view_as", "view_as_complex"),
    ("scatter", "scatter_add"),
    ("norm", "group_norm"),
    ("norm", "layer_norm"),
}


@pytest.mark.parametrize("table", P.BUILTIN_TABLES)
def test_no_ampcore_op_is_unlisted_because_torch_names_it_differently(table):
    """An unlisted op whose name looks like a listed one is either a real difference (DISTINCT) or a
    missing alias in TORCH_ALIASES, which would silently run the op in the wrong dtype."""
    policy = P.builtin(table)
    listed = set(
        itertools.chain(*(getattr(torch_lists, f"{table.upper()}_{group}") for group in ("LOWER", "FP32", "PROMOTE")))
    )
    unlisted = [
        op for op, kind in registered_ops().items() if kind != "in-place" and policy.category(op) is P.UNLISTED
    ]  # in-place ops never autocast
    suspicious = sorted(
        (op, name) for op in unlisted for name in listed if _looks_like(op, name) and (op, name) not in DISTINCT
    )
    assert suspicious == []


# --------------------------------------------------------------------------- building policies
def test_policies_are_immutable():
    policy = P.builtin("cpu")
    with pytest.raises(AttributeError, match="immutable"):
        policy.name = "x"
    with pytest.raises(TypeError):
        policy.entries["linear"] = None  # type: ignore[index]


def test_override_returns_a_new_layer_and_leaves_the_base_alone():
    base = P.builtin("cpu")
    custom = base.override(fp32=["gelu"], lower=["my_op"], unlisted=["cat"])
    assert custom.category("gelu") is P.FP32 and custom.decision("gelu").source == "user"
    assert custom.category("my_op") is P.LOWER  # a custom op may be given a category before it exists
    assert custom.category("cat") is P.UNLISTED
    assert base.category("gelu") is P.UNLISTED and base.category("cat") is P.PROMOTE
    assert custom != base and custom.override() == custom


def test_override_takes_one_name_as_a_string():
    assert P.builtin("cpu").override(fp32="gelu").category("gelu") is P.FP32


def test_override_refuses_one_op_in_two_categories_and_non_names():
    with pytest.raises(ValueError, match=r"'gelu' given two categories"):
        P.builtin("cpu").override(fp32=["gelu"], lower=["gelu"])
    with pytest.raises(TypeError, match="op names"):
        P.builtin("cpu").override(fp32=[3])


def test_layered_takes_category_names_and_rejects_unknown_ones():
    policy = P.builtin("cpu").layered({"gelu": "FP32", "softmax": P.LOWER}, "test")
    assert policy.category("gelu") is P.FP32 and policy.category("softmax") is P.LOWER
    with pytest.raises(ValueError, match=r"'half'.*'lower', 'fp32', 'promote'"):
        P.builtin("cpu").layered({"gelu": "half"}, "test")


def test_describe_shows_category_and_source_and_repr_counts():
    text = P.builtin("cpu").describe(["linear", "gelu", "nope"])
    assert re.search(r"linear\s+lower\s+torch docs cpu list", text)
    assert re.search(r"gelu\s+unlisted\s+unlisted", text)
    assert re.search(r"nope\s+unknown", text)
    assert repr(P.builtin("cpu")).startswith("<Policy 'cpu': lower=")


# --------------------------------------------------------------------------- get(): base -> plugins -> user
def test_get_uses_the_table_the_backend_names(register_fake):
    gpu_like = register_fake(policy="cuda")
    assert P.get(gpu_like.name).category("softmax") is P.FP32
    assert P.get("cpu").category("softmax") is P.UNLISTED
    assert P.get(gpu_like.name).name == gpu_like.name


def test_get_rejects_unknown_and_indexed_device_types():
    with pytest.raises(ampcore.UnknownBackendError, match="'nope'"):
        P.get("nope")
    with pytest.raises(ValueError, match="pass 'cpu', not 'cpu:0'"):
        P.get("cpu:0")


def test_plugin_policy_hook_layers_over_the_builtin_table(register_fake):
    fake = register_fake()

    class SlowConvOnThisDevice:
        @hookimpl
        def ampcore_policy(self, device_type):
            return {"conv2d": "fp32", "gelu": "lower"} if device_type == fake.name else None

    ampcore.register_plugin(SlowConvOnThisDevice(), name=f"policy-plugin-{fake.name}")
    policy = P.get(fake.name)
    assert policy.category("conv2d") is P.FP32 and policy.category("gelu") is P.LOWER
    assert policy.decision("conv2d").source == f"plugin policy-plugin-{fake.name}"
    assert P.get("cpu").category("conv2d") is P.LOWER  # other device types untouched


def test_plugin_policy_hook_that_raises_or_returns_nonsense_is_recorded_and_skipped(register_fake):
    fake = register_fake()

    class Broken:
        @hookimpl
        def ampcore_policy(self, device_type):
            if device_type == fake.name:
                return {"gelu": "sometimes"}
            return None

    name = f"broken-policy-{fake.name}"
    ampcore.register_plugin(Broken(), name=name)
    assert P.get(fake.name).category("gelu") is P.UNLISTED
    assert any(b.name == name and b.where == "ampcore_policy" and "sometimes" in b.error for b in registry.broken)


def test_user_registration_is_the_top_layer_and_can_be_undone(register_fake):
    fake = register_fake()
    P.register("gelu", "fp32", device_type=fake.name)
    try:
        assert P.get(fake.name).category("gelu") is P.FP32
        assert P.get("cpu").category("gelu") is P.UNLISTED
    finally:
        P.unregister("gelu", device_type=fake.name)
    assert P.get(fake.name).category("gelu") is P.UNLISTED


def test_register_validates_its_arguments():
    with pytest.raises(ValueError, match="'sometimes'"):
        P.register("gelu", "sometimes")
    with pytest.raises(TypeError, match="non-empty str"):
        P.register("", "fp32")


# --------------------------------------------------------------------------- jmp-style dtype policies
@pytest.mark.parametrize(
    "spec, expected",
    [
        ("params=float32,compute=bfloat16,output=float32", (dt.float32, dt.bfloat16, dt.float32)),
        ("p=f32,c=f16,o=f32", (dt.float32, dt.float16, dt.float32)),
        ("c=bf16", (dt.float32, dt.bfloat16, dt.float32)),
        ("half", (dt.float16, dt.float16, dt.float16)),
    ],
)
def test_dtype_policy_parses_jmp_strings_and_round_trips(spec, expected):
    p = P.DtypePolicy.parse(spec)
    assert (p.param_dtype, p.compute_dtype, p.output_dtype) == expected
    assert P.DtypePolicy.parse(str(p)) == p


@pytest.mark.parametrize(
    "spec, message",
    [
        ("compute=int32", "'int32' is not a floating dtype"),
        ("c=bf16,c=f16", "sets compute_dtype twice"),
        ("weights=f16", "cannot read 'weights=f16'"),
    ],
)
def test_dtype_policy_errors_name_the_bad_part(spec, message):
    with pytest.raises(ValueError, match=message):
        P.DtypePolicy.parse(spec)


def test_dtype_policy_casts_floating_tensors_in_nested_structures_only():
    p = P.DtypePolicy.parse("p=f32,c=bf16,o=f32")
    tree = {"x": ampcore.ones(2), "ids": ampcore.tensor([1, 2]), "pair": (ampcore.ones(1, dtype=dt.float64), 3)}
    out = p.cast_to_compute(tree)
    assert out["x"].dtype == dt.bfloat16 and out["ids"].dtype == dt.int64
    assert out["pair"][0].dtype == dt.bfloat16 and out["pair"][1] == 3
    with p.autocast("cpu") as region:
        assert ampcore.get_autocast_dtype("cpu") == dt.bfloat16 and region.enabled
