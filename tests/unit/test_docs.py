"""README.md and docs/*.md name only what exists.

Read from the Markdown, outside and inside code:

- repository paths in backticks (a token with a ``/`` or ending in .py, .md, .yaml, .txt, .toml or .sh,
  not a URL, not a template such as ``<target_root>/<topic>``) exist, a glob matches something; the
  exceptions are listed below (folders made at run time, the change feed container's own layout);
- dotted names in backticks under ``lakefeed.``, ``lakefeed_testing.`` or ``lakefeed_airflow.`` name a
  module or a module attribute. They are looked up in the source first (the longest prefix that is a module
  file, then the names it binds, then a class's members), since importing the jobs' modules costs a second
  (pyspark, pandas) and the plugin's two (Airflow); a library name the source does not show (an inherited
  method, say) is then imported: the longest importable prefix, then ``getattr`` the rest. ``python -m X``
  names an importable module;
- ``make <target>`` names a target of the Makefile; a flag of a Spark job (a span starting with ``--``, or
  a flag after ``spark_jobs/<job>.py`` in a shell block) is one its parser takes (the few flags of other
  tools the docs name are listed below);
- a bare CamelCase name in backticks is defined in the runtime code (or is one of the outside names listed
  below), a ``LAKEFEED_*`` variable is read somewhere in the project;
- relative links (``[text](docs/x.md)``, ``(../README.md)``, ``(images/x.png)``, ``(#anchor)``) resolve,
  anchors included;
- docs/configuration.md names every key of every configuration Variable, and only those;
- the README stays under 200 lines.

The last tests feed deliberately wrong samples through the same checks, to show each one fails.
No Spark session, no Airflow import.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import importlib
import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from lakefeed.cdf.config import CdfConfig, CdfPipeline
from lakefeed.config import RETIRED_KEYS
from lakefeed.feeds import specs

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
README_MAX_LINES = 200

# Paths the docs name that are not in a checkout: made at run time by set-up, the demo, the tests and
# the benchmarks (all ignored by git).
RUNTIME_PATHS = ("data/", ".airflow/", ".venv/")
# Paths inside a $blobchangefeed container: the feed's own layout, not this repository's.
FEED_LAYOUT_PATHS = {"meta/Segments.json", "log/"}
PATH_SUFFIXES = (".py", ".md", ".yaml", ".txt", ".toml", ".sh")
# A token with one of these is a template or an example (`<target_root>/<topic>`, `idx/segments/…`,
# `$LAKEFEED_TEST_ARTIFACTS`, `hh:10`), not a literal path.
TEMPLATE = re.compile(r"[<>…{}$=:\"'\[\]|@]")
# Placeholders a path may hold, checked for every value.
EXPANSIONS = {"<feed>": ("blob", "cdf", "crdb")}

# Where each package's source is.
SOURCE_FOLDERS = {
    "lakefeed": ROOT / "include",
    "lakefeed_testing": ROOT / "include",
    "lakefeed_airflow": ROOT / "include",
}
DOTTED = re.compile(rf"(?:{'|'.join(SOURCE_FOLDERS)})(?:\.[A-Za-z_]\w*)+")
# Spelled like a Python name, but not one.
NOT_PYTHON = {
    "lakefeed.cdf.baseVersion": "the table property a CDF full refresh sets",
    "lakefeed.cdf.historyFrom": "a table property of an SCD type 2 target",
    "lakefeed.cdf.historyThrough": "a table property of an SCD type 2 target",
    "lakefeed.tombstonesRemovedThrough": "a table property tombstone retention sets",
}

# Flags of other tools than the Spark jobs.
OTHER_TOOLS_FLAGS = {
    "--packages": "spark-submit",
    "--conf": "spark-submit",
    "--master": "spark-submit",
    "--py-files": "spark-submit",
    "--max-active-runs": "airflow backfill create",
    "--disableTelemetry": "Azurite",
}
# CamelCase names of other projects the docs name.
OUTSIDE_NAMES = {
    "WasbHook": "the Azure provider's hook",
    "WasbBlobSensor": "the Azure provider's sensor",
    "ConcurrentAppendException": "Delta Lake",
    "DateTimeOffset": ".NET",
    "BlobDeleted": "a change feed event type",
    "BlobEndpoint": "a part of an Azure connection string",
    "LocalExecutor": "Airflow",
}
CAMEL = re.compile(r"[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+")
SETTING = re.compile(r"\$?(LAKEFEED_[A-Z0-9_]+)(?:=\S*)?")
RUNTIME_CODE = ("include", "plugins", "dags", "spark_jobs")
PROJECT_TEXT = ("include", "plugins", "dags", "spark_jobs", "scripts", "tests", "bench", "docker")


@dataclass(frozen=True)
class Doc:
    """A Markdown file: ``name`` for messages, ``folder`` what its relative links start from."""

    name: str
    folder: Path
    text: str

    @classmethod
    def read(cls, path: Path) -> Doc:
        return cls(str(path.relative_to(ROOT)), path.parent, path.read_text())


@dataclass(frozen=True)
class Block:
    line: int
    lang: str
    lines: list[str]


@dataclass(frozen=True)
class Parsed:
    prose: str  # the text with fenced blocks blanked (line numbers kept)
    blocks: list[Block]
    spans: list[tuple[int, str]]  # inline code spans of the prose: (line, text with whitespace collapsed)
    links: list[tuple[int, str]]  # link targets of the prose
    anchors: set[str]


FENCE = re.compile(r"^ {0,3}(```+|~~~+)\s*([\w+-]*)")
SPAN = re.compile(r"(`+)(?!`)((?:[^`\n]|\n(?![ \t]*\n))+?)(?<!`)\1(?!`)")
LINK = re.compile(r"!?\[(?:[^\]\n]|\n(?!\n))*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.M)


def parse(text: str) -> Parsed:
    prose, blocks, block = [], [], None
    for number, line in enumerate(text.splitlines(), start=1):
        fence = FENCE.match(line)
        if block is None and fence:
            block = Block(number, fence.group(2), [])
            prose.append("")
        elif block is not None and fence and not fence.group(2):
            blocks.append(block)
            block = None
            prose.append("")
        elif block is not None:
            block.lines.append(line)
            prose.append("")
        else:
            prose.append(line)
    body = "\n".join(prose)
    spans = [(body.count("\n", 0, m.start()) + 1, " ".join(m.group(2).split())) for m in SPAN.finditer(body)]
    unspanned = SPAN.sub(lambda m: " " * len(m.group(0)), body)
    links = [(unspanned.count("\n", 0, m.start()) + 1, m.group(1)) for m in LINK.finditer(unspanned)]
    return Parsed(body, blocks, spans, links, anchors_of(body))


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.replace("`", "").lower()).replace(" ", "-")


def anchors_of(prose: str) -> set[str]:
    seen: dict[str, int] = {}
    anchors = set()
    for heading in HEADING.findall(prose):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        anchors.add(base if count == 0 else f"{base}-{count}")
    return anchors


def shell_lines(parsed: Parsed) -> list[tuple[int, str]]:
    """The commands of the shell blocks, comments dropped, continuation lines joined."""
    found = []
    for block in parsed.blocks:
        if block.lang not in ("bash", "sh", "shell", "console"):
            continue
        pending, start = "", block.line
        for offset, line in enumerate(block.lines, start=1):
            code = re.split(r"(?:^|\s)#", line, maxsplit=1)[0].rstrip()
            if not pending:
                start = block.line + offset
            if code.endswith("\\"):
                pending += code[:-1] + " "
                continue
            found.append((start, pending + code))
            pending = ""
    return found


def code_texts(parsed: Parsed) -> list[tuple[int, str]]:
    """Everything in the doc that is code: inline spans and shell commands."""
    return parsed.spans + shell_lines(parsed)


# -- what exists --


@functools.cache
def make_targets() -> frozenset[str]:
    text = (ROOT / "Makefile").read_text()
    return frozenset(re.findall(r"^([A-Za-z0-9_-][A-Za-z0-9_.-]*)\s*:(?!=)", text, re.M)) - {".PHONY"}


ARGUMENT = re.compile(r'add_argument\(\s*"(--[a-z0-9-]+)"')


@functools.cache
def job_flags() -> dict[str, frozenset[str]]:
    """Each Spark job's flags, read from its parser (and the one every job adds, ``--pipeline-id``)."""
    shared = set(ARGUMENT.findall((ROOT / "include" / "lakefeed" / "jobs.py").read_text()))
    flags = {}
    for job in sorted((ROOT / "spark_jobs").glob("*.py")):
        text = job.read_text()
        own = set(ARGUMENT.findall(text))
        flags[f"spark_jobs/{job.name}"] = frozenset(own | (shared if "add_pipeline_id_argument(" in text else set()))
    return flags


DEFINITION = re.compile(r"^\s*(?:async\s+def|def|class)\s+(\w+)|^[ \t]*(\w+)[ \t]*(?::[^=\n]+)?=(?!=)", re.M)


@functools.cache
def defined_names() -> frozenset[str]:
    """Every class, function and assigned name of the runtime code (module and class level)."""
    names: set[str] = set()
    for folder in RUNTIME_CODE:
        for path in (ROOT / folder).rglob("*.py"):
            names.update(a or b for a, b in DEFINITION.findall(path.read_text()))
    return frozenset(names)


@functools.cache
def project_text() -> str:
    parts = [(ROOT / name).read_text() for name in ("Makefile", "docker-compose.yaml")]
    for folder in PROJECT_TEXT:
        for path in sorted((ROOT / folder).rglob("*")):
            if path.suffix in (".py", ".sh", ".yaml", "") and path.is_file() and path != Path(__file__).resolve():
                parts.append(path.read_text(errors="replace"))
    return "\n".join(parts)


def python_name_problem(name: str) -> str | None:
    """Why ``name`` is neither a module nor a module attribute (None: it is one)."""
    if name in NOT_PYTHON:
        return None
    parts = name.split(".")
    problem = _source_problem(parts)
    if problem is None or parts[0] == "lakefeed_airflow":
        return problem
    return _import_problem(parts)


def _import_problem(parts: list[str]) -> str | None:
    """Import the longest importable prefix of ``parts``, then ``getattr`` the rest."""
    for cut in range(len(parts), 0, -1):
        module_name = ".".join(parts[:cut])
        try:
            found: object = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name is not None and (module_name + ".").startswith(exc.name + "."):
                continue  # no module of that name: try a shorter prefix
            return f"{module_name} does not import: {exc}"
        for attribute in parts[cut:]:
            if not hasattr(found, attribute):
                return f"{'.'.join(parts[:cut])} has no {'.'.join(parts[cut:])}"
            found = getattr(found, attribute)
        return None
    return f"no module {parts[0]}"


@functools.cache
def _module_body(source: Path) -> list[ast.stmt]:
    return ast.parse(source.read_text(), str(source)).body


def _source_problem(parts: list[str]) -> str | None:
    """The same lookup on the source: the longest prefix that is a module file, the names the module binds,
    then a class's members."""
    folder = SOURCE_FOLDERS[parts[0]]
    for cut in range(len(parts), 0, -1):
        base = folder.joinpath(*parts[:cut])
        source = base / "__init__.py" if base.is_dir() else base.with_suffix(".py")
        if source.is_file():
            break
    else:
        return f"no module {parts[0]} in {folder.relative_to(ROOT)}/"
    scope = _module_body(source)
    for depth, attribute in enumerate(parts[cut:]):
        node = _binding(scope, attribute)
        if node is None:
            return f"{'.'.join(parts[: cut + depth])} has no {attribute}"
        scope = node.body if isinstance(node, ast.ClassDef) else []
    return None


def _binding(body: list[ast.stmt], name: str) -> ast.stmt | None:
    """The statement of ``body`` (a module's or a class's) that binds ``name``."""
    for node in body:
        if isinstance(node, (ast.If, ast.Try)):
            inner = _binding([*node.body, *getattr(node, "orelse", [])], name)
            if inner is not None:
                return inner
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            return node
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            return node
        if isinstance(node, (ast.Import, ast.ImportFrom)) and any(
            (alias.asname or alias.name.split(".")[0]) == name for alias in node.names
        ):
            return node
    return None


# -- the checks: each returns the problems of one doc, as "file:line: what" --


def expansions(path: str) -> list[str]:
    """``path`` with each placeholder of :data:`EXPANSIONS` replaced by each of its values."""
    for placeholder, values in EXPANSIONS.items():
        if placeholder in path:
            return [p for value in values for p in expansions(path.replace(placeholder, value))]
    return [path]


def path_token(token: str) -> str | None:
    """``token`` as a repository path, or None when it is not one (a URL, a template, a word)."""
    token = token.strip("(),;")
    if "://" in token or token.startswith(("/", "~", "-")) or TEMPLATE.search(expansions(token)[0]):
        return None
    if "/" in token or token.endswith(PATH_SUFFIXES):
        return token
    return None


def path_problems(doc: Doc, parsed: Parsed) -> list[str]:
    problems = []
    for line, text in code_texts(parsed):
        for token in text.split():
            path = path_token(token)
            if path is None or path.startswith(RUNTIME_PATHS) or path in FEED_LAYOUT_PATHS:
                continue
            for expanded in expansions(path):
                exists = any(ROOT.glob(expanded)) if "*" in expanded else (ROOT / expanded).exists()
                if not exists:
                    problems.append(f"{doc.name}:{line}: no file or folder {expanded}")
    return problems


def python_problems(doc: Doc, parsed: Parsed) -> list[str]:
    problems = []
    for line, text in parsed.spans:
        name = text.removesuffix("()")
        if DOTTED.fullmatch(name):
            problem = python_name_problem(name)
            if problem:
                problems.append(f"{doc.name}:{line}: {name}: {problem}")
    for line, text in code_texts(parsed):
        for module in re.findall(r"\bpython3? -m ([\w.]+)", text):
            if not _module_exists(module):
                problems.append(f"{doc.name}:{line}: python -m {module}: no such module")
    return problems


def _module_exists(module: str) -> bool:
    """A module of this project by its file (a plugins module is importable only with plugins/ on the
    path, as the docs say it runs), any other by its import spec."""
    top, *rest = module.split(".")
    if top in SOURCE_FOLDERS:
        base = SOURCE_FOLDERS[top].joinpath(top, *rest)
        return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()
    return importlib.util.find_spec(module) is not None


def make_problems(doc: Doc, parsed: Parsed) -> list[str]:
    problems = []
    for line, text in code_texts(parsed):
        for target in re.findall(r"(?:^|[;&|]\s*)make\s+([\w.-]+)", text):
            if target not in make_targets():
                problems.append(f"{doc.name}:{line}: make {target}: no such target in the Makefile")
    return problems


def flag_problems(doc: Doc, parsed: Parsed) -> list[str]:
    flags = job_flags()
    known = frozenset().union(*flags.values()) | set(OTHER_TOOLS_FLAGS)
    problems = []
    for line, text in parsed.spans:
        flag = text.split()[0].split("=")[0] if text.startswith("--") else None
        if flag is not None and flag not in known:
            problems.append(f"{doc.name}:{line}: {flag}: no Spark job takes it")
    for line, text in shell_lines(parsed):
        tokens = text.split()
        for index, token in enumerate(tokens):
            if token in flags:
                for later in tokens[index + 1 :]:
                    flag = later.strip("[]").split("=")[0]
                    if flag.startswith("--") and flag not in flags[token]:
                        problems.append(f"{doc.name}:{line}: {token} takes no {flag}")
    return problems


def name_problems(doc: Doc, parsed: Parsed) -> list[str]:
    problems = []
    for line, text in parsed.spans:
        if CAMEL.fullmatch(text) and text not in OUTSIDE_NAMES and text not in defined_names():
            problems.append(f"{doc.name}:{line}: {text} is defined nowhere in {', '.join(RUNTIME_CODE)}")
        setting = SETTING.fullmatch(text)
        if setting and setting.group(1) not in project_text():
            problems.append(f"{doc.name}:{line}: {setting.group(1)} is read nowhere in the project")
    return problems


def link_problems(doc: Doc, parsed: Parsed) -> list[str]:
    problems = []
    for line, target in parsed.links:
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        location, _, anchor = target.partition("#")
        path = (doc.folder / location).resolve() if location else None
        if path is not None and not path.exists():
            problems.append(f"{doc.name}:{line}: link to {target}: no such file")
            continue
        if anchor:
            anchors = parsed.anchors if path is None else anchors_of(parse(path.read_text()).prose)
            if path is not None and path.suffix != ".md":
                problems.append(f"{doc.name}:{line}: link to {target}: an anchor into a file that is not Markdown")
            elif anchor not in anchors:
                problems.append(f"{doc.name}:{line}: link to {target}: no heading with that anchor")
    return problems


CHECKS = (path_problems, python_problems, make_problems, flag_problems, name_problems, link_problems)


def problems_of(doc: Doc) -> list[str]:
    parsed = parse(doc.text)
    return [problem for check in CHECKS for problem in check(doc, parsed)]


def too_long(doc: Doc, limit: int = README_MAX_LINES) -> str | None:
    lines = doc.text.count("\n") + (not doc.text.endswith("\n"))
    return f"{doc.name} has {lines} lines (at most {limit - 1})" if lines >= limit else None


CONFIG_SECTIONS = {  # each feed's Variable: its configuration classes (a CDF configuration holds pipelines)
    spec.config_variable: (spec.config_type, *([CdfPipeline] if spec.config_type is CdfConfig else []))
    for spec in specs()
}


def config_problems(doc: Doc) -> list[str]:
    """Each Variable's section names every key of its configuration classes, and its tables no other key."""
    sections: dict[str, list[tuple[int, str]]] = {}
    current = None
    for number, line in enumerate(doc.text.splitlines(), start=1):
        if line.startswith("## "):
            current = next((name for name in CONFIG_SECTIONS if f"`{name}`" in line), None)
            if current:
                sections[current] = []
        elif current:
            sections[current].append((number, line))
    problems = [f"{doc.name}: no section for `{name}`" for name in CONFIG_SECTIONS if name not in sections]
    for name, lines in sections.items():
        keys = {f.name for cls in CONFIG_SECTIONS[name] for f in dataclasses.fields(cls)}
        named = {span for _, line in lines for span in re.findall(r"`([^`]+)`", line)}
        problems += [f"{doc.name}: the {name} section does not name {key}" for key in sorted(keys - named)]
        for number, line in lines:
            cells = line.split("|")
            if line.startswith("| `") and len(cells) > 2:
                for key in re.findall(r"`([^`]+)`", cells[1]):
                    if key not in keys and key not in RETIRED_KEYS:
                        problems.append(f"{doc.name}:{number}: {key} is not a key of {name}")
    return problems


# -- the docs as they are --


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_docs_name_only_what_exists(path: Path) -> None:
    assert problems_of(Doc.read(path)) == []


def test_the_readme_is_read_in_five_minutes() -> None:
    assert too_long(Doc.read(ROOT / "README.md")) is None


def test_the_readme_links_every_docs_page() -> None:
    linked = {target.partition("#")[0] for _, target in parse((ROOT / "README.md").read_text()).links}
    assert {f"docs/{p.name}" for p in DOCS[1:]} - linked == set()


def test_configuration_names_every_key_of_every_variable() -> None:
    assert config_problems(Doc.read(ROOT / "docs" / "configuration.md")) == []


def test_the_images_are_shown() -> None:
    images = {p.name for p in (ROOT / "docs" / "images").iterdir()}
    shown = {Path(t).name for p in DOCS for _, t in parse(p.read_text()).links if "images/" in t}
    assert images - shown == set()


# -- the checks can fail --

WRONG = """\
# Wrong

See `include/lakefeed/no_such_module.py`, `spark_jobs/*.scala`, `include/lakefeed_airflow/blob_tasks.py`, `include/lakefeed/<feed>/log.py`;
`lakefeed.no_such_module`, `lakefeed.pipeline.NoSuchThing`, `lakefeed.blob.generator`,
`lakefeed_testing.blob_generator.no_such_function`, `lakefeed_airflow.blob_tasks`,
`lakefeed_airflow.operators.FeedSparkSubmitOperator`, `lakefeed_airflow.sensors.FeedReadySensor.no_such`;
`make no-such-target`, `--no-such-flag`, `FeedSparkSubmitOperator`, `LAKEFEED_NO_SUCH_SETTING`;
[a page](docs/no_such_page.md), [an anchor](#no-such-heading), [another](docs/operations.md#no-such-heading).

```bash
spark-submit spark_jobs/delta_cdf_job.py --source-table S \\
    --feed-root F
python -m lakefeed_testing.no_such_generator --out data/x
```
"""

RIGHT = """\
# Right

## A heading, with `code`

See `include/lakefeed/pipeline.py`, `include/lakefeed/<feed>/job.py`, `spark_jobs/*.py`, `dags/`, `data/demo/logs/`, `.airflow/`, `meta/Segments.json`,
`<target_root>/<topic>`, `idx/segments/…`, `az://container/path`, `~/.ivy2.5.2` and `requirements.txt`;
`lakefeed.pipeline`, `lakefeed.pipeline.JobOutputs.credited`, `lakefeed.cdf.baseVersion`, `lakefeed.spark.get_session()`,
`lakefeed_testing.blob_generator.main`, `lakefeed_airflow.feeds`, `lakefeed_airflow.turns.Registers`,
`lakefeed_airflow.operators.LakefeedSparkSubmitOperator.execute`; `make test`, `--feed-root`, `--packages`,
`WasbHook`, `LakefeedSparkSubmitOperator`, `LAKEFEED_READ_ATTEMPTS`, `$LAKEFEED_TEST_ARTIFACTS`;
[a page](docs/operations.md#azure-and-production), [here](#a-heading-with-code), [a site](https://delta.io/).

```bash
make demo   # see `make nothing` in a comment: not a command
spark-submit --packages x spark_jobs/delta_cdf_job.py --source-table S --target-table T \\
    --keys id --starting-version 1 --ending-version 2 [--pipeline-id NAME]
python -m lakefeed_testing.blob_generator --out data/feed
```
"""


def test_each_check_catches_a_name_that_does_not_exist() -> None:
    found = "\n".join(problems_of(Doc("WRONG.md", ROOT, WRONG)))
    for expected in (
        "WRONG.md:3: no file or folder include/lakefeed/no_such_module.py",
        "no file or folder spark_jobs/*.scala",
        "no file or folder include/lakefeed_airflow/blob_tasks.py",
        "no file or folder include/lakefeed/blob/log.py",
        "no file or folder include/lakefeed/crdb/log.py",
        "WRONG.md:4: lakefeed.no_such_module: lakefeed has no no_such_module",
        "lakefeed.pipeline.NoSuchThing: lakefeed.pipeline has no NoSuchThing",
        "lakefeed.blob.generator: lakefeed.blob has no generator",
        "lakefeed_testing.blob_generator.no_such_function: lakefeed_testing.blob_generator has no no_such_function",
        "lakefeed_airflow.blob_tasks: lakefeed_airflow has no blob_tasks",
        "lakefeed_airflow.operators has no FeedSparkSubmitOperator",
        "lakefeed_airflow.sensors.FeedReadySensor has no no_such",
        "make no-such-target: no such target in the Makefile",
        "--no-such-flag: no Spark job takes it",
        "FeedSparkSubmitOperator is defined nowhere",
        "LAKEFEED_NO_SUCH_SETTING is read nowhere in the project",
        "link to docs/no_such_page.md: no such file",
        "link to #no-such-heading: no heading with that anchor",
        "link to docs/operations.md#no-such-heading: no heading with that anchor",
        "WRONG.md:11: spark_jobs/delta_cdf_job.py takes no --feed-root",
        "python -m lakefeed_testing.no_such_generator: no such module",
    ):
        assert expected in found
    assert len(found.splitlines()) == 21, found


def test_the_checks_pass_what_exists_and_what_is_not_a_name() -> None:
    assert problems_of(Doc("RIGHT.md", ROOT, RIGHT)) == []


def test_a_readme_of_200_lines_is_too_long() -> None:
    assert too_long(Doc("README.md", ROOT, "line\n" * 199)) is None
    assert too_long(Doc("README.md", ROOT, "line\n" * 200)) == "README.md has 200 lines (at most 199)"


def test_a_configuration_page_missing_a_key_or_naming_another_is_caught() -> None:
    lines = (ROOT / "docs" / "configuration.md").read_text().splitlines()
    row = next(number for number, line in enumerate(lines, start=1) if line.startswith("| `decoder` |"))
    lines[row - 1] = lines[row - 1].replace("`decoder`", "`decoders`")
    assert config_problems(Doc("configuration.md", ROOT, "\n".join(lines))) == [
        "configuration.md: the lakefeed_blob_config section does not name decoder",
        f"configuration.md:{row}: decoders is not a key of lakefeed_blob_config",
    ]
