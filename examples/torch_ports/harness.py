"""Run a torch port as written (``import torch``) or renamed to ampcore, and say what ampcore still lacks.

Each port (``gpt.py``, ``cnn.py``, ``vae.py``, ``lstm.py``) is one source file written against PyTorch. The ampcore
variant is that source with the word ``torch`` replaced by ``ampcore`` and nothing else: the claim under
test is that torch training code runs with only the import renamed.

    python harness.py gpt --framework ampcore -- --device cpu --epochs 2
    python harness.py --missing                 # the features each port needs that ampcore lacks
    python harness.py --time -- --epochs 2 --batches-per-epoch 4   # ms/step, torch then ampcore

``missing_features(port)`` is what the tests skip on: every ``ampcore.X.Y`` the renamed source names
(imports, attribute chains, decorators), the Tensor methods the port calls, and the keyword arguments
it passes to ampcore callables, each checked with ``hasattr`` / ``inspect.signature``.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import inspect
import re
import sys
import time
import types
from collections.abc import Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
PORTS = ("gpt", "cnn", "vae", "lstm")

#: Tensor methods each port calls (from its source; attributes that torch.Tensor has).
TENSOR_METHODS: dict[str, tuple[str, ...]] = {
    "gpt": ("contiguous", "dim", "item", "masked_fill", "size", "split", "to", "tolist", "transpose", "view"),
    "cnn": ("argmax", "item", "size", "sum", "to", "view", "__format__"),
    "vae": ("exp", "float", "item", "mean", "pow", "size", "sum", "to", "tolist", "view"),
    "lstm": ("contiguous", "cpu", "detach", "float", "item", "narrow", "new_zeros", "numpy", "reshape", "size", "t")
    + ("to", "view"),
}

#: Keyword arguments the ports pass: (dotted callable, keyword).
KEYWORDS: dict[str, tuple[tuple[str, str], ...]] = {
    "gpt": (
        ("ampcore.optim.AdamW", "fused"),
        ("ampcore.load", "map_location"),
        ("ampcore.optim.Optimizer.zero_grad", "set_to_none"),
        ("ampcore.utils.data.DataLoader", "shuffle"),
        ("ampcore.utils.data.DataLoader", "drop_last"),
    ),
    "cnn": (
        ("ampcore.optim.AdamW", "foreach"),
        ("ampcore.load", "map_location"),
        ("ampcore.load", "weights_only"),
        ("ampcore.utils.data.DataLoader", "shuffle"),
        ("ampcore.utils.data.DataLoader", "drop_last"),
    ),
    "vae": (
        ("ampcore.load", "map_location"),
        ("ampcore.optim.Optimizer.zero_grad", "set_to_none"),
        ("ampcore.utils.data.DataLoader", "shuffle"),
        ("ampcore.utils.data.DataLoader", "drop_last"),
    ),
    "lstm": (
        ("ampcore.load", "map_location"),
        ("ampcore.amp.GradScaler", "enabled"),
        ("ampcore.autocast", "enabled"),
        ("ampcore.nn.RNN", "nonlinearity"),
    ),
}


def rename(source: str) -> str:
    """The ampcore variant of a port: every word ``torch`` replaced by ``ampcore``, nothing else."""
    return re.sub(r"\btorch\b", "ampcore", source)


def source(port: str, framework: str = "ampcore") -> str:
    """The source of ``port`` as it runs under ``framework`` ('torch': as written; 'ampcore': renamed)."""
    if port not in PORTS:
        raise ValueError(f"unknown port {port!r}; the ports are {', '.join(map(repr, PORTS))}")
    if framework not in ("torch", "ampcore"):
        raise ValueError(f"framework must be 'torch' or 'ampcore', got {framework!r}")
    text = (HERE / f"{port}.py").read_text(encoding="utf-8")
    return text if framework == "torch" else rename(text)


def load(port: str, framework: str = "ampcore") -> types.ModuleType:
    """Execute the port's source (renamed for ampcore) as a fresh module; its ``main(argv)`` returns the losses."""
    module = types.ModuleType(f"{port}_{framework}")
    module.__file__ = str(HERE / f"{port}.py")
    exec(compile(source(port, framework), module.__file__, "exec"), module.__dict__)
    return module


def _resolve(dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            if not hasattr(obj, name):
                return False
            obj = getattr(obj, name)
        return True
    return False


def _lookup(dotted: str) -> object | None:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            obj = getattr(obj, name, None)
            if obj is None:
                return None
        return obj
    return None


def _dotted(node: ast.expr, aliases: dict[str, str]) -> str | None:
    if isinstance(node, ast.Name):
        return aliases.get(node.id)
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value, aliases)
        return None if base is None else f"{base}.{node.attr}"
    return None


def named_features(text: str, root: str = "ampcore") -> list[str]:
    """Every ``root.X.Y`` a source names through its imports, attribute chains and decorators, in order."""
    tree = ast.parse(text)
    aliases: dict[str, str] = {}
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == root:
                    found.append(alias.name)
                    aliases[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else root
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == root:
            for alias in node.names:
                found.append(f"{node.module}.{alias.name}")
                aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    parents = {child: parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and not isinstance(parents.get(node), ast.Attribute):
            dotted = _dotted(node, aliases)
            if dotted is not None:
                found.append(dotted)
    return list(dict.fromkeys(found))


def _tensor_lacks(tensor_cls: type, method: str) -> bool:
    if method == "__format__":  # object has one; torch's Tensor overrides it
        return all("__format__" not in vars(k) for k in tensor_cls.__mro__ if k is not object)
    return not hasattr(tensor_cls, method)


def _takes_keyword(dotted: str, keyword: str) -> bool:
    obj = _lookup(dotted)
    if obj is None:
        return False
    try:
        params = inspect.signature(obj).parameters  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return True  # cannot tell: let the run decide
    return keyword in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


def missing_features(port: str) -> list[str]:
    """What the renamed port uses that ampcore lacks (empty when the port can run on ampcore)."""
    import ampcore

    missing = [name for name in named_features(source(port, "ampcore")) if not _resolve(name)]
    missing += [f"ampcore.Tensor.{m}" for m in TENSOR_METHODS[port] if _tensor_lacks(ampcore.Tensor, m)]
    for dotted, keyword in KEYWORDS[port]:
        if _resolve(dotted) and not _takes_keyword(dotted, keyword):
            missing.append(f"{dotted}({keyword}=)")
    if port == "gpt" and not _bool_mask_assignment_works():
        missing.append("ampcore.Tensor.__setitem__ with a boolean mask")
    return list(dict.fromkeys(missing))


def _bool_mask_assignment_works() -> bool:
    import ampcore

    x = ampcore.tensor([1.0, 2.0, 3.0])
    try:
        x[x < 2.5] = 0.0
    except Exception:  # noqa: BLE001 - any failure means the feature is missing
        return False
    return x.tolist() == [0.0, 0.0, 3.0]


def run(port: str, framework: str, argv: Sequence[str]) -> tuple[list[float], float]:
    """Run ``port`` under ``framework`` with ``argv``; return its losses and the wall time in seconds."""
    module = load(port, framework)
    t0 = time.perf_counter()
    losses = module.main(list(argv))
    return losses, time.perf_counter() - t0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="run the torch ports on torch or, renamed, on ampcore", epilog="arguments after -- go to the port"
    )
    parser.add_argument("port", nargs="?", choices=PORTS)
    parser.add_argument("--framework", choices=("torch", "ampcore"), default="ampcore")
    parser.add_argument("--missing", action="store_true", help="list what each port needs that ampcore lacks")
    parser.add_argument("--time", action="store_true", help="time every port on torch, then on ampcore")
    argv = list(sys.argv[1:] if argv is None else argv)
    cut = argv.index("--") if "--" in argv else len(argv)
    args = parser.parse_args(argv[:cut])
    rest = argv[cut + 1 :]  # the port's own arguments, after --
    if args.missing:
        for port in PORTS:
            print(f"{port}: {', '.join(missing_features(port)) or 'nothing missing'}")
        return 0
    if args.time:
        for port in PORTS:
            for framework in ("torch", "ampcore"):
                if framework == "ampcore" and missing_features(port):
                    print(f"{port} on ampcore: skipped, missing {', '.join(missing_features(port))}")
                    continue
                losses, seconds = run(port, framework, rest)
                print(f"{port} on {framework}: {len(losses)} steps, last loss {losses[-1]:.4f}, {seconds:.1f} s")
        return 0
    if args.port is None:
        parser.error("name a port, or pass --missing or --time")
    run(args.port, args.framework, rest)
    return 0


if __name__ == "__main__":
    sys.exit(main())
