"""ampcore.names: "did you mean" for every name looked up (ops, categories, dtypes, backends, CLI choices)."""

from __future__ import annotations

import pytest

import ampcore
from ampcore import policy
from ampcore.cli import main
from ampcore.names import close_matches, did_you_mean


def test_did_you_mean_names_the_closest_choice_or_nothing() -> None:
    assert did_you_mean("matmull", ["matmul", "linear", "conv2d"]) == " (did you mean 'matmul'?)"
    assert did_you_mean("xyzzy", ["matmul", "linear"]) == ""
    assert did_you_mean(3, ["matmul"]) == ""  # not a name: nothing to suggest
    assert did_you_mean("", ["matmul"]) == ""


def test_close_matches_ignore_case_keep_the_choices_spelling_and_skip_the_name_itself() -> None:
    assert close_matches("FLOAT16", ["float16", "float32"])[0] == "float16"
    assert close_matches("Lower", ["lower"]) == ["lower"]
    assert close_matches("lower", ["lower"]) == []
    assert len(close_matches("flaot", ["float16", "float32", "float64", "bfloat16"])) <= 2


def test_an_unknown_op_suggests_the_listed_one_instead_of_registering_a_new_op() -> None:
    with pytest.raises(policy.UnknownOpError, match=r"did you mean 'matmul'"):
        policy.get("cpu").category("matmull")
    with pytest.raises(policy.UnknownOpError, match=r"register it with @ampcore.op\('qqqzzz'\)") as err:
        policy.get("cpu").category("qqqzzz")
    assert "did you mean" not in str(err.value)


def test_an_unknown_category_suggests_the_valid_one() -> None:
    with pytest.raises(ValueError, match=r"unknown cast-policy category 'lowr' \(did you mean 'lower'\?\); valid"):
        policy.Category.parse("lowr")


def test_an_unknown_dtype_suggests_the_known_one() -> None:
    with pytest.raises(ValueError, match=r"unknown dtype 'flaot16' \(did you mean 'float16'"):
        ampcore.dtypes.as_dtype("flaot16")
    with pytest.raises(ValueError, match=r"did you mean 'bfloat16'"):
        ampcore.zeros(2, dtype="bfloa16")


def test_an_unknown_backend_suggests_the_installed_one_wherever_a_device_is_named() -> None:
    with pytest.raises(ampcore.UnknownBackendError, match=r"unknown backend 'cpo' \(did you mean 'cpu'\?\)"):
        ampcore.get_backend("cpo")
    with pytest.raises(ampcore.UnknownBackendError, match=r"did you mean 'cpu'"):
        ampcore.zeros(2, device="cpuu")
    with pytest.raises(ampcore.UnknownBackendError, match=r"did you mean 'cpu'"):
        ampcore.autocast("cpuu")


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["policy", "--op", "matmull"], "did you mean 'matmul'"),
        (["policy", "--category", "lowr"], "invalid choice: 'lowr' (did you mean 'lower'?); choose from 'lower'"),
        (["polcy"], "invalid choice: 'polcy' (did you mean 'policy'?)"),
        (["policy", "--device", "cpo"], "unknown backend 'cpo' (did you mean 'cpu'?)"),
    ],
)
def test_the_cli_suggests_the_closest_name(argv: list[str], expected: str, capsys: pytest.CaptureFixture[str]) -> None:
    try:
        status = main(argv)
    except SystemExit as exit_:  # argparse's own errors exit
        status = exit_.code
    assert status == 2
    assert expected in capsys.readouterr().err
