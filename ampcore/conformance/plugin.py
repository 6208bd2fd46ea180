"""The conformance suite's pytest plugin (entry point ``pytest11``: ``ampcore``).

It adds the ``backend`` fixture, parametrized over the backends named with
``--ampcore-backend NAME[:N]`` (default: every installed backend; one that is
unavailable here is skipped with its reason), marks the checks a backend's
known-gaps file lists as expected failures, and prints the op x dtype report
at the end (``--ampcore-json PATH`` writes it as JSON).

It does nothing in a pytest run whose tests never ask for ``backend``.
"""

from __future__ import annotations

import json
from collections.abc import Generator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pluggy
import pytest

from .. import dtypes as dt
from ..kernels import PRIMITIVES, set_debug_kernels
from .gaps import KnownGap, KnownGapsError, load_known_gaps
from .report import OUTCOMES, BackendReport, Case, TestResult, environment, section_order
from .subject import NOT_SUPPORTED, BackendUnderTest

__all__ = ["pytest_addoption", "pytest_configure", "backend"]

_RUN = pytest.StashKey["_Run"]()
_CASE = pytest.StashKey[tuple[str, Case]]()
_OUTCOMES = pytest.StashKey[list[tuple[str, str]]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("ampcore", "ampcore conformance suite")
    group.addoption(
        "--ampcore-backend",
        action="append",
        default=[],
        metavar="NAME[:N]",
        help="backend (device) the conformance suite checks; repeatable; default: every installed one",
    )
    group.addoption("--ampcore-json", metavar="PATH", help="write the conformance report as JSON to PATH")
    group.addoption(
        "--ampcore-known-gaps",
        metavar="PATH",
        help="TOML file of known gaps (default: the one the backend ships, if any)",
    )
    group.addoption(
        "--ampcore-report",
        choices=("auto", "full", "summary", "none"),
        default="auto",
        help="the report printed at the end: the op x dtype table (full), one line per backend "
        "(summary), or none; auto: full when --ampcore-backend is given",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "conformance(check=None, op=None): where a check lands in the conformance "
        "report (default: its module, and its 'op' parameter or its name)",
    )
    config.stash[_RUN] = _Run(config)


@dataclass
class _Run:
    config: pytest.Config
    _targets: list[str] | None = None
    reports: dict[str, BackendReport] = field(default_factory=dict)
    gaps: dict[str, list[KnownGap]] = field(default_factory=dict)
    used_gaps: set[KnownGap] = field(default_factory=set)

    def targets(self) -> list[str]:
        """The devices to check: the option's, or one per installed backend (and broken backend plugin)."""
        if self._targets is None:
            from ..plugins import broken_plugins, list_backends

            named = self.config.getoption("ampcore_backend")
            wanted = named or [r.backend.name for r in list_backends()] + [b.name for b in broken_plugins()]
            self._targets = list(dict.fromkeys(t for name in wanted for t in _devices_of(name)))
        return self._targets

    def report(self, target: str) -> BackendReport:
        return self.reports.setdefault(target, BackendReport(target))

    def gaps_for(self, target: str) -> list[KnownGap]:
        if target not in self.gaps:
            self.gaps[target] = _load_gaps(self.config.getoption("ampcore_known_gaps"), _backend_name(target))
        return self.gaps[target]


def _devices_of(target: str) -> list[str]:
    """``NAME`` of an available backend with several devices means each of them (``NAME:0`` .. ``NAME:N-1``, an
    unusable one then skipped with its reason); anything else stays as it is, to be checked or refused."""
    from ..plugins.registry import registry

    if ":" in target:
        return [target]
    try:
        backend = registry.get_backend(target)
        count = backend.device_count()
    except Exception:  # noqa: BLE001 - unknown, broken or unavailable: _resolve reports it
        return [target]
    return [f"{target}:{i}" for i in range(count)] if count > 1 else [target]


def _backend_name(target: str) -> str:
    return target.split(":", 1)[0]


def _load_gaps(option: str | None, name: str) -> list[KnownGap]:
    """The known gaps for backend ``name``: the --ampcore-known-gaps file, else the backend's own, else none."""
    path = option
    if path is None:
        from ..plugins.registry import registry

        registry.ensure_loaded()
        record = registry.records.get(name)
        path = record.backend.conformance_known_gaps() if record is not None else None
    if path is None:
        return []
    try:
        return load_known_gaps(path)
    except KnownGapsError as exc:
        raise pytest.UsageError(str(exc)) from exc


def _is_conformance_test(metafunc: pytest.Metafunc) -> bool:
    """Ours, or one the user runs against a backend: another project's own ``backend`` fixture is left alone."""
    module = getattr(metafunc.module, "__name__", "")
    return (
        module.startswith(f"{__package__}.")
        or bool(metafunc.config.getoption("ampcore_backend"))
        or metafunc.definition.get_closest_marker("conformance") is not None
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "backend" in metafunc.fixturenames and _is_conformance_test(metafunc):
        targets = metafunc.config.stash[_RUN].targets()
        metafunc.parametrize("backend", targets, ids=targets, indirect=True, scope="session")


@pytest.fixture(scope="session")
def backend(request: pytest.FixtureRequest) -> BackendUnderTest:
    """The backend (one device of it) the conformance suite checks.

    Skipped with the backend's reason where it is unavailable; fails with the
    plugin's error where the plugin is broken.
    """
    target: str = request.param
    # The suite checks every kernel's output against its contract (AMPCORE_DEBUG_KERNELS), not only the
    # cheap per-op check a training run pays for.
    set_debug_kernels(True)
    subject = _resolve(target)
    request.config.stash[_RUN].report(target).info.update(_describe(subject))
    return subject


def _resolve(target: str) -> BackendUnderTest:
    from ..backend import BackendUnavailableError
    from ..device import parse_device
    from ..plugins import PluginLoadError, UnknownBackendError, get_backend
    from ..plugins.registry import device_status, registry

    try:
        device = parse_device(target)
        backend = get_backend(device.type)
    except BackendUnavailableError as exc:
        pytest.skip(f"backend {exc.name!r} is unavailable here: {exc.reason}")
    except (PluginLoadError, UnknownBackendError, ValueError, TypeError) as exc:
        pytest.fail(f"cannot check {target!r}: {exc}", pytrace=False)
    count = backend.device_count()
    if not 0 <= device.index < count:
        pytest.fail(f"cannot check {target!r}: backend {device.type!r} has {count} device(s)", pytrace=False)
    if not device.explicit_index:
        device = registry.resolve(target)  # the backend's first usable device
    status = device_status(backend, device.index)
    if not status.ok:
        pytest.skip(f"device {target!r} is unusable here: {status.reason}")
    return BackendUnderTest(backend, device.index)


def _describe(subject: BackendUnderTest) -> dict[str, Any]:
    """Capabilities and versions for the JSON report."""
    from ..plugins.registry import registry

    record = registry.records.get(subject.name)
    return {
        "backend": subject.name,
        "device": subject.device,
        "distribution": record.distribution if record else None,
        "version": record.version if record else None,
        "capabilities": subject.capabilities.as_dict(),
        "kernels": {"fused": sorted(n for n in subject.kernels.names() if n not in PRIMITIVES)},
        "environment": environment(),
    }


# --------------------------------------------------------------------------- where each test lands
def _label(value: Any) -> str:
    if isinstance(value, dt.DType):
        return value.name
    return value if isinstance(value, str) else getattr(value, "__name__", str(value))


def _case_of(item: pytest.Item) -> tuple[str, Case] | None:
    callspec = getattr(item, "callspec", None)
    if callspec is None or "backend" not in callspec.params:
        return None
    params = callspec.params
    kwargs: dict[str, Any] = {}
    for marker in item.iter_markers("conformance"):  # closest first: a test's op= beside its module's check=
        for key, value in marker.kwargs.items():
            kwargs.setdefault(key, value)
    module = getattr(item, "module", None)
    stem = module.__name__.rsplit(".", 1)[-1] if module else "checks"
    check = kwargs.get("check") or stem.removeprefix("test_")
    op = kwargs.get("op") or (
        _label(params["op"]) if "op" in params else getattr(item, "originalname", item.name).removeprefix("test_")
    )
    dtype = _label(params["dtype"]) if "dtype" in params else "-"
    return params["backend"], Case(check, op, dtype)


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    run = config.stash[_RUN]
    _run_in_section_order(items)
    for item in items:
        where = _case_of(item)
        if where is None:
            continue
        target, case = where
        item.stash[_CASE] = where
        run.report(target)
        for gap in run.gaps_for(target):
            if gap.matches(_backend_name(target), case.check, case.op, case.dtype):
                # strict: a known gap that starts passing fails the run (reported "stale": remove the entry)
                item.add_marker(pytest.mark.xfail(reason=f"known gap {gap.describe()}: {gap.reason}", strict=True))
                run.used_gaps.add(gap)
                break
    for target, report in run.reports.items():
        report.unused_gaps = [
            f"{g.describe()} ({g.source})" for g in run.gaps.get(target, []) if g not in run.used_gaps
        ]


def _run_in_section_order(items: list[pytest.Item]) -> None:
    """Conformance checks run (and so fail, in pytest's summary) kernels before the ops built on them:
    stable-sorted by report section; the positions of other tests are kept."""
    cased = [(i, case) for i, case in ((i, _case_of(item)) for i, item in enumerate(items)) if case is not None]
    ordered = [items[j] for j, _ in sorted(cased, key=lambda slot: section_order(slot[1][1].check))]
    for (i, _), item in zip(cased, ordered):
        items[i] = item


# --------------------------------------------------------------------------- collecting outcomes
@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pluggy.Result[pytest.TestReport], None]:
    outcome = yield
    where = item.stash.get(_CASE, None)
    if where is None:
        return
    rep = outcome.get_result()
    seen = item.stash.setdefault(_OUTCOMES, [])
    if rep.when == "call" or not rep.passed:
        seen.append(_classify(rep))
    if rep.when == "teardown" and seen:
        result, message = min(seen, key=lambda s: OUTCOMES.index(s[0]))
        target, case = where
        item.config.stash[_RUN].report(target).add(case, TestResult(item.nodeid, result, message))


_STRICT_XPASS = "[XPASS(strict)] "


def _classify(rep: pytest.TestReport) -> tuple[str, str]:
    if rep.failed and isinstance(rep.longrepr, str) and rep.longrepr.startswith(_STRICT_XPASS):
        return "stale", f"listed as a known gap but passes, remove it: {rep.longrepr.removeprefix(_STRICT_XPASS)}"
    if hasattr(rep, "wasxfail"):
        return "xfail", rep.wasxfail
    if rep.failed:
        crash = getattr(getattr(rep.longrepr, "reprcrash", None), "message", None)
        text = crash or str(rep.longrepr).strip().splitlines()[-1]
        return "fail", text.splitlines()[0][:400] if text else "failed"
    if rep.skipped:
        reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
        reason = reason.removeprefix("Skipped: ")
        return ("not supported" if reason.startswith(NOT_SUPPORTED) else "skipped"), reason
    return "pass", ""


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    run = config.stash.get(_RUN, None)
    if run is None or not run.reports:
        return
    mode = config.getoption("ampcore_report")
    if mode == "auto":
        mode = "full" if config.getoption("ampcore_backend") else "summary"
    if mode != "none":
        tr = terminalreporter
        for report in run.reports.values():
            if mode == "full" and report.results:
                # A terminal gets its width; a log file gets room for the whole table.
                width = tr._tw.fullwidth if tr.hasmarkup else max(tr._tw.fullwidth, 110)
                tr.write(report.render(color=tr.hasmarkup, width=width))
                for line in report.problems():
                    tr.write_line(line)
            for gap in report.unused_gaps:
                tr.write_line(f"known gap matches no check (remove it?): {gap}", yellow=True)
            tr.write_line(report.summary_line(), bold=True, red=report.failed(), green=not report.failed())
    path = config.getoption("ampcore_json")
    if path:
        data = {"environment": environment(), "backends": [r.as_json() for r in run.reports.values()]}
        Path(path).write_text(json.dumps(data, indent=2, default=str) + "\n", encoding="utf-8")
        terminalreporter.write_line(f"ampcore conformance: report written to {path}")
