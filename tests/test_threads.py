"""Host threads are a setting: ampcore.set_num_threads / get_num_threads and AMPCORE_NUM_THREADS, handed to
every backend (Backend.set_num_threads) when it loads and when it changes; the cpu backend applies it to BLAS
(threadpoolctl) and numba; ampcore info prints it; --nproc divides it among the ranks."""

import json
import os

import pytest
import threadpoolctl

import ampcore
from ampcore.cli import main
from ampcore.distributed.launch import rank_environment, rank_threads
from ampcore.plugins import registry, thread_info, threads
from ampcore.testing import FakeBackend

CPUS = len(os.sched_getaffinity(0))
CLEAN = {"PATH": "/usr/bin"}


@pytest.fixture(autouse=True)
def _back_to_default():
    yield
    ampcore.set_num_threads(None)


class CountingBackend(FakeBackend):
    def __init__(self, name):
        super().__init__(name)
        self.calls = []

    def set_num_threads(self, n):
        self.calls.append(n)

    def thread_counts(self):
        return {"pool": self.calls[-1]} if self.calls else {}


def test_default_is_the_cpus_this_process_may_use():
    assert threads.current(CLEAN) == threads.ThreadSetting(CPUS, "the CPUs this process may use")


@pytest.mark.parametrize(
    ("env", "want"),
    [
        ({"AMPCORE_NUM_THREADS": "3", "OMP_NUM_THREADS": "5"}, (3, "AMPCORE_NUM_THREADS")),
        ({"OMP_NUM_THREADS": "5", "OPENBLAS_NUM_THREADS": "1"}, (5, "OMP_NUM_THREADS")),
        ({"OPENBLAS_NUM_THREADS": "1"}, (1, "OPENBLAS_NUM_THREADS")),
        ({"MKL_NUM_THREADS": " 4 ", "AMPCORE_NUM_THREADS": ""}, (4, "MKL_NUM_THREADS")),
    ],
)
def test_the_environment_decides_in_order_ampcore_then_openmp_then_blas(env, want):
    assert threads.current(env) == threads.ThreadSetting(*want)


@pytest.mark.parametrize("raw", ["0", "-2", "two", "1.5"])
def test_a_malformed_variable_names_itself_and_the_fix(raw):
    with pytest.raises(ValueError, match=rf"AMPCORE_NUM_THREADS='{raw}' is not a positive integer; set it to"):
        threads.current({"AMPCORE_NUM_THREADS": raw})


@pytest.mark.parametrize("bad", [0, -1, True, 2.0, "2"])
def test_set_num_threads_refuses_what_is_not_a_positive_integer(bad):
    with pytest.raises(ValueError, match=r"the number of threads must be a positive integer, got "):
        ampcore.set_num_threads(bad)
    assert ampcore.get_num_threads() == threads.current().n


def test_set_num_threads_reaches_loaded_backends_and_those_loaded_later():
    early = ampcore.register_backend(CountingBackend("threads_early"))
    try:
        assert early.calls == [ampcore.get_num_threads()]  # the setting holds from the moment it loads
        ampcore.set_num_threads(3)
        assert early.calls[-1] == 3 and ampcore.get_num_threads() == 3
        late = ampcore.register_backend(CountingBackend("threads_late"))
        try:
            assert late.calls == [3]
            info = thread_info()
            assert info["num_threads"] == 3 and info["source"] == "ampcore.set_num_threads"
            assert info["backends"]["threads_early"] == {"pool": 3} and info["backends"]["threads_late"] == {"pool": 3}
        finally:
            registry.unregister_backend("threads_late")
        ampcore.set_num_threads(None)
        assert early.calls[-1] == threads.current().n == ampcore.get_num_threads()
    finally:
        registry.unregister_backend("threads_early")


def _blas_threads():
    return {lib["num_threads"] for lib in threadpoolctl.threadpool_info() if lib["user_api"] == "blas"}


def test_the_cpu_backend_sets_blas_and_numba_threads():
    from ampcore_cpu import compiled

    ampcore.get_backend("cpu")
    ampcore.set_num_threads(1)
    assert _blas_threads() == {1}
    counts = thread_info()["backends"]["cpu"]
    assert counts["blas"] == 1
    if compiled.status().enabled:
        numba = compiled.loaded_numba()
        assert counts["numba"] == 1 == numba.get_num_threads()
    ampcore.set_num_threads(CPUS + 5)  # numba's pool cannot grow past the CPUs it found: capped, and shown
    counts = thread_info()["backends"]["cpu"]
    assert counts["blas"] == CPUS + 5  # BLAS may run more threads than CPUs, as torch may
    if compiled.status().enabled:
        assert counts["numba"] == compiled.loaded_numba().config.NUMBA_NUM_THREADS


def test_info_prints_the_thread_setting_and_each_library(capsys):
    ampcore.set_num_threads(1)
    assert main(["info", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["threads"]["num_threads"] == 1 and data["threads"]["backends"]["cpu"]["blas"] == 1
    assert main(["info"]) == 0
    line = capsys.readouterr().out.splitlines()[1]
    assert line.startswith("threads 1 (ampcore.set_num_threads): cpu blas 1")


def test_nproc_divides_the_budget_among_the_ranks_and_says_so():
    split = rank_threads(2, {"AMPCORE_NUM_THREADS": "4"})
    assert (split.budget, split.per_rank) == (4, 2)
    assert split.describe() == (
        "--nproc 2: 4 threads (AMPCORE_NUM_THREADS) divided among 2 ranks, 2 each (AMPCORE_NUM_THREADS=2 in every rank)"
    )
    env = rank_environment(2, {"AMPCORE_NUM_THREADS": "4", "OPENBLAS_NUM_THREADS": "7"})
    assert env["AMPCORE_NUM_THREADS"] == "2" and env["OMP_NUM_THREADS"] == "2" and env["OPENBLAS_NUM_THREADS"] == "7"
    crowded = rank_threads(3, CLEAN | {"OMP_NUM_THREADS": "2"})
    assert crowded.per_rank == 1 and crowded.describe().endswith("; more ranks than threads, so the 3 ranks share 2")
    assert rank_threads(2, CLEAN).budget == CPUS


def test_nproc_takes_the_budget_set_in_this_process():
    ampcore.set_num_threads(6)
    assert rank_threads(3).per_rank == 2 and rank_environment(3)["AMPCORE_NUM_THREADS"] == "2"
