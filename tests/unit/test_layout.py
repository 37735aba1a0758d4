"""The module map holds: feed packages never import each other, the shared library imports no feed, and the
runtime (library, plugins, jobs, DAGs) never imports the test-data package. Read from the source with ``ast``,
lazy imports inside functions included. The library's doctests run here too."""

from __future__ import annotations

import ast
import doctest
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LIBRARY = ROOT / "include" / "lakefeed"
FEEDS = ("blob", "cdf", "crdb", "crdbsql")
AIRFLOW_SIDE = ROOT / "include" / "lakefeed_airflow"
RUNTIME = [LIBRARY, AIRFLOW_SIDE, ROOT / "plugins", ROOT / "spark_jobs", ROOT / "dags"]


def imported_modules(path: Path) -> set[str]:
    """Every module ``path`` imports (absolute names; relative imports are not used in this project)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def importers(folder: Path, prefix: str) -> dict[str, list[str]]:
    """The files under ``folder`` that import a module named ``prefix`` or below it, with what they import."""
    found: dict[str, list[str]] = {}
    for path in sorted(folder.rglob("*.py")):
        hits = sorted(n for n in imported_modules(path) if n == prefix or n.startswith(prefix + "."))
        if hits:
            found[str(path.relative_to(ROOT))] = hits
    return found


# A feed built on another: the SQL-pulled CockroachDB feed stages its ranges in the sink's layout and applies
# them with the CockroachDB feed's job, checkpoint and commit hooks (one apply path).
BASES = {"crdbsql": "crdb"}


@pytest.mark.parametrize("feed", FEEDS)
def test_no_feed_package_imports_another(feed: str) -> None:
    others = {
        other: importers(LIBRARY / feed, f"lakefeed.{other}") for other in FEEDS if other not in (feed, BASES.get(feed))
    }
    assert others == {other: {} for other in others}


def test_the_shared_library_imports_no_feed() -> None:
    shared = list(LIBRARY.glob("*.py"))
    found = {
        str(path.relative_to(ROOT)): sorted(
            n
            for n in imported_modules(path)
            if any(n == f"lakefeed.{f}" or n.startswith(f"lakefeed.{f}.") for f in FEEDS)
        )
        for path in shared
    }
    assert {path: names for path, names in found.items() if names} == {}


def test_the_airflow_layer_imports_no_feed_and_each_dag_file_its_own_spec() -> None:
    """A feed is declared once, in its package's spec: the plugin loops over the specs (lakefeed.feeds), and a
    DAG file names its feed's spec and nothing else of it."""
    feeds = {f"lakefeed.{f}" for f in FEEDS}
    plugin = {
        str(path.relative_to(ROOT)): hits
        for path in sorted([*AIRFLOW_SIDE.rglob("*.py"), *(ROOT / "plugins").rglob("*.py")])
        if (hits := sorted(n for n in imported_modules(path) if ".".join(n.split(".")[:2]) in feeds))
    }
    assert plugin == {}
    for path in sorted((ROOT / "dags").glob("*.py")):
        named = sorted(n for n in imported_modules(path) if ".".join(n.split(".")[:2]) in feeds)
        assert len(named) == 1 and named[0].endswith(".spec"), (path.name, named)


def test_every_feed_is_found_by_its_spec() -> None:
    from lakefeed.feeds import specs

    found = {spec.hooks.__module__.split(".")[1] for spec in specs()}
    assert found == set(FEEDS)
    assert len({spec.dag_id for spec in specs()}) == len({spec.key for spec in specs()}) == len(FEEDS)


@pytest.mark.parametrize("folder", RUNTIME, ids=lambda p: p.name)
def test_the_runtime_never_imports_test_data_generators(folder: Path) -> None:
    assert importers(folder, "lakefeed_testing") == {}


def test_imports_of_the_module_map_are_read() -> None:
    """The checks above can fail: a feed's job does import the shared library, and the tests the generators."""
    assert "lakefeed.delta" in imported_modules(LIBRARY / "cdf" / "job.py")
    assert importers(ROOT / "tests" / "unit", "lakefeed_testing")


DOCTESTED = sorted(
    ".".join(path.relative_to(LIBRARY.parent).with_suffix("").parts)
    for path in LIBRARY.rglob("*.py")
    if ">>> " in path.read_text()
)


@pytest.mark.parametrize("module", DOCTESTED)
def test_doctests(module: str) -> None:
    result = doctest.testmod(importlib.import_module(module))
    assert result.failed == 0 and result.attempted > 0


def test_sensors_and_triggers_depend_on_the_library_not_on_the_wired_feeds() -> None:
    plugin = AIRFLOW_SIDE
    found = {
        name: sorted(n for n in imported_modules(plugin / name) if n == "lakefeed_airflow.feeds")
        for name in ("sensors.py", "triggers.py", "trigger_check.py", "operators.py")
    }
    assert {name: hits for name, hits in found.items() if hits} == {}


# The parts every feed package has, and what the skeleton, the sensors and the monitor call in each.
FEED_PARTS = {
    "checkpoint": (),
    "pipeline": (),  # its FeedHooks: test_every_feed_plugs_its_hooks_into_the_sequences
    "run_plan": (),
    "summary": (),
    "readiness": ("ready",),
    "spec": (),
    "monitoring": ("watched",),
    "job": (),
    "transforms": (),
}


@pytest.mark.parametrize("feed", FEEDS)
def test_every_feed_package_has_the_same_parts(feed: str) -> None:
    missing = []
    for part, names in FEED_PARTS.items():
        path = LIBRARY / feed / f"{part}.py"
        if not path.exists() and feed in BASES:  # a part it takes from the feed it is built on
            path = LIBRARY / BASES[feed] / f"{part}.py"
        if not path.exists():
            missing.append(part)
            continue
        defined = {n.name for n in ast.parse(path.read_text()).body if isinstance(n, ast.FunctionDef | ast.ClassDef)}
        missing += [f"{part}.{name}" for name in names if name not in defined]
    assert missing == []


@pytest.mark.parametrize("feed", FEEDS)
def test_every_feed_plugs_its_hooks_into_the_sequences(feed: str) -> None:
    """A feed's plan and commit are the skeleton's sequences: its pipeline module brings hooks, not steps."""
    import importlib

    from lakefeed.pipeline import FeedHooks

    module = importlib.import_module(f"lakefeed.{feed}.pipeline")
    assert isinstance(module.HOOKS, FeedHooks)
    overridden = {
        name
        for name in ("plan_run", "commit_run", "_plan_pipeline", "_commit_pipeline", "change")
        if name in vars(type(module.HOOKS))
    }
    assert overridden == set()


def test_plugins_hold_only_the_plugin() -> None:
    """Airflow 3 loads plugins/ at start-up and does not version it with the DAGs: the operators, sensors,
    triggers and DAG factory live in the installed package lakefeed_airflow, which the DAGs import; plugins/
    holds the AirflowPlugin alone (the monitor page, the trigger check, the pools)."""
    assert sorted(p.name for p in (ROOT / "plugins").iterdir() if p.name != "__pycache__") == [
        "lakefeed_monitor_plugin.py"
    ]
    source = (ROOT / "plugins" / "lakefeed_monitor_plugin.py").read_text()
    assert "class LakefeedMonitorPlugin(AirflowPlugin)" in source
