"""`pip install .` brings what the library imports: every third-party module imported by the library and
the Spark jobs comes from a distribution pyproject.toml declares (in its dependencies, or in the `spark`
extra for Spark itself), at a version the pinned set satisfies."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions, version
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def imported_modules(folders: list[Path]) -> dict[str, Path]:
    found: dict[str, Path] = {}
    for folder in folders:
        for path in folder.rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                else:
                    continue
                for name in names:
                    found.setdefault(name.split(".")[0], path)
    return found


def test_every_third_party_import_of_the_library_and_jobs_is_a_declared_dependency():
    declared = {canonical(Requirement(r).name) for r in PROJECT["dependencies"]}
    declared |= {canonical(Requirement(r).name) for r in PROJECT["optional-dependencies"]["spark"]}
    distributions = packages_distributions()
    missing = {}
    for module, path in imported_modules([ROOT / "include" / "lakefeed", ROOT / "spark_jobs"]).items():
        if module in sys.stdlib_module_names or module in ("lakefeed", "_typeshed", "py4j"):
            continue  # py4j is pyspark's own dependency
        owners = {canonical(d) for d in distributions.get(module, [])}
        assert owners, f"{module} (imported by {path.relative_to(ROOT)}) is not installed"
        if not owners & declared:
            missing[module] = sorted(owners)
    assert missing == {}, f"imported but not declared in pyproject.toml: {missing}"


def test_the_pinned_versions_satisfy_the_declared_ranges():
    requirements = [
        *PROJECT["dependencies"],
        *(r for extra in PROJECT["optional-dependencies"].values() for r in extra),
    ]
    for text in requirements:
        requirement = Requirement(text)
        assert requirement.specifier.contains(version(requirement.name)), (text, version(requirement.name))


def test_runtime_requirements_carry_no_test_tools():
    runtime = {
        canonical(Requirement(line).name)
        for line in (ROOT / "requirements.txt").read_text().splitlines()
        if line and not line.startswith("#")
    }
    assert not runtime & {"pytest", "pytest-xdist", "ruff", "mypy", "hypothesis", "playwright"}
