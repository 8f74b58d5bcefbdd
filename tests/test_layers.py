"""Imports run one way: the engine <- a run's commit <- the remote job's side of Dagster Pipes
<- the Dagster resources <- the Dagster layer and tools <- the demo <- this project's
resources and definitions. The Feast offline store sits on the engine's reader alone: no
Spark, no Dagster, and nothing of the project imports it. Copying a sample dataset imports
neither Spark nor pandas (the base install has neither).

Parses every module of ``revisions_assets``, this project's ``resources`` and
``definitions`` (no import is executed) and fails on an import of a higher layer, on an
engine or remote-job module importing Dagster (``revisions_assets.pipes`` runs where only
``dagster-pipes`` is installed), on a library module importing a top-level module of the
project (a user's ``resources`` would shadow it), and on any cycle between modules.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("revisions_assets", "pyspark_revisions", "resources")
#: this project's own modules beside the library (not in the wheel)
PROJECT = ("resources", "definitions")

#: (layer, module prefixes), lowest first; the longest matching prefix decides. The engine
#: (layers 0-7, ``revisions_assets.core``) is arranged by concern, each folder importing only
#: the ones below it: shared helpers, storage, the log, read plans (pure), read executors,
#: writes, maintenance, the ``RevisionedDataset``/``DatasetReader`` facades and the root.
LAYERS: tuple[tuple[int, tuple[str, ...]], ...] = (
    (0, ("revisions_assets.core",)),
    (1, ("revisions_assets.core.storage",)),
    (2, ("revisions_assets.core.log",)),
    (3, ("revisions_assets.core.read.plan",)),
    (4, ("revisions_assets.core.read",)),
    (5, ("revisions_assets.core.write",)),
    (6, ("revisions_assets.core.maintain",)),
    (
        7,
        (
            "revisions_assets",
            "revisions_assets.core.dataset",
            "revisions_assets.core.reader",
            "revisions_assets.s3a",
        ),
    ),
    (
        8,
        (
            "revisions_assets.core.runs",
            "revisions_assets.feast",
            "revisions_assets.samples",
            "revisions_assets.spark",
            "pyspark_revisions",
        ),
    ),
    (9, ("revisions_assets.pipes",)),
    (10, ("revisions_assets.dagster.resources",)),
    (11, ("revisions_assets.dagster", "revisions_assets.cli")),
    (12, ("revisions_assets.demo", "revisions_assets.__main__")),
    (13, PROJECT),
)
ENGINE = 9  #: the highest layer without Dagster: the engine, runs and the remote job's side
LAYER_NAMES = {
    0: "engine: shared helpers",
    1: "engine: storage",
    2: "engine: log",
    3: "engine: read plans",
    4: "engine: read executors",
    5: "engine: writes",
    6: "engine: maintenance",
    7: "engine: facade",
    8: "engine: runs / the Feast offline store / samples / the Spark data source",
    9: "remote jobs (Dagster Pipes)",
    10: "Dagster resources",
    11: "Dagster layer / tools",
    12: "demo",
    13: "this project's resources / definitions",
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    found = {module_name(p): p for pkg in PACKAGES for p in sorted((REPO / pkg).rglob("*.py"))}
    return found | {"definitions": REPO / "definitions.py"}


def layer_of(module: str) -> int | None:
    best: tuple[int, int] | None = None  # (prefix length, layer)
    for layer, prefixes in LAYERS:
        for prefix in prefixes:
            if module == prefix or module.startswith(prefix + "."):
                if best is None or len(prefix) > best[0]:
                    best = (len(prefix), layer)
    return None if best is None else best[1]


def imports_of(module: str, path: Path, known: set[str], *, eager: bool = False) -> set[str]:
    """The project modules (and third-party top-level names) that ``module`` imports;
    ``eager``: only those importing it runs (not inside functions or ``TYPE_CHECKING``)."""
    is_package = path.name == "__init__.py"
    out: set[str] = set()
    for node in _nodes(ast.parse(path.read_text(), str(path)), eager):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                base = base if is_package else base[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:  # `from pkg import submodule` imports the submodule
                sub = f"{target}.{alias.name}"
                out.add(sub if sub in known else target)
    return out


def _nodes(tree: ast.AST, eager: bool) -> list[ast.AST]:
    """Every node of ``tree``; ``eager``: not those in functions or ``if TYPE_CHECKING:``."""
    if not eager:
        return list(ast.walk(tree))
    out, todo = [], [tree]
    while todo:
        node = todo.pop()
        out.append(node)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            continue
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            todo += node.orelse
            continue
        todo += ast.iter_child_nodes(node)
    return out


def graph(*, eager: bool = False) -> dict[str, set[str]]:
    mods = modules()
    known = set(mods)
    return {m: imports_of(m, p, known, eager=eager) for m, p in mods.items()}


def back_edges(edges: dict[str, set[str]]) -> list[str]:
    problems = []
    for module, targets in sorted(edges.items()):
        own = layer_of(module)
        for target in sorted(targets):
            dagster = ("dagster", "dagster_aws", "dagster_pyspark")
            top = target.split(".")[0]
            if own is not None and own <= ENGINE and top in dagster:
                problems.append(f"{module} ({LAYER_NAMES[own]}) imports {target}: no Dagster")
            if module.startswith("revisions_assets") and top in PROJECT:
                problems.append(f"{module} (library) imports {target} (a top-level module)")
            other = layer_of(target)
            if own is not None and other is not None and other > own:
                problems.append(
                    f"{module} ({LAYER_NAMES[own]}) imports {target} ({LAYER_NAMES[other]})"
                )
    return problems


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one module (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in edges:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(found)


def test_every_module_has_a_layer():
    unplaced = [m for m in graph() if layer_of(m) is None]
    assert not unplaced, f"modules outside every layer (add them to LAYERS): {unplaced}"


def test_imports_run_one_way():
    problems = back_edges(graph())
    assert not problems, "imports against the layering:\n" + "\n".join(problems)


def test_no_module_cycles():
    found = cycles(graph())
    assert not found, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in found)


def imports_reached(
    edges: dict[str, set[str]], roots: list[str], forbidden: tuple[str, ...]
) -> list[str]:
    """The imports of a ``forbidden`` top-level package by the modules ``roots`` or by a
    module of the project they reach through ``edges``."""
    reached, todo = set(), list(roots)
    while todo:
        module = todo.pop()
        if module not in reached:
            reached.add(module)
            todo += [t for t in edges[module] if t in edges]
    return [
        f"{module} (reached from {', '.join(roots)}) imports {target}"
        for module in sorted(reached)
        for target in sorted(edges[module])
        if target.split(".")[0] in forbidden
    ]


def feast_problems(edges: dict[str, set[str]]) -> list[str]:
    """The Feast offline store reads through ``DatasetReader``: nothing importing it loads
    (``graph(eager=True)``) imports Spark or Dagster, and no module outside it imports it
    (Dagster never does)."""
    feast = "revisions_assets.feast"
    store = [m for m in edges if m == feast or m.startswith(feast + ".")]
    problems = imports_reached(edges, store, ("pyspark", "dagster", "dagster_pipes"))
    problems += [
        f"{module} imports {target}: nothing of the project imports the Feast store"
        for module, targets in sorted(edges.items())
        if not module.startswith(feast)
        for target in sorted(targets)
        if target == feast or target.startswith(feast + ".")
    ]
    return problems


def test_the_feast_store_reads_through_the_reader_only():
    problems = feast_problems(graph(eager=True))
    assert not problems, "the Feast store's imports:\n" + "\n".join(problems)
    edges = graph(eager=True)
    edges["revisions_assets.dagster.training"] |= {"revisions_assets.feast"}
    assert any("nothing of the project imports" in p for p in feast_problems(edges))
    edges = graph(eager=True)
    edges["revisions_assets.feast.store"] |= {"revisions_assets.core.dataset"}
    assert any("imports pyspark" in p for p in feast_problems(edges))


def test_copying_a_sample_imports_neither_spark_nor_pandas():
    """``copy_sample`` runs in the base install: ``revisions_assets.samples`` never loads its
    ``writing`` module (the engine's, for the maintainers)."""
    edges, samples, heavy = graph(eager=True), ["revisions_assets.samples"], ("pyspark", "pandas")
    assert not imports_reached(edges, samples, heavy)
    edges["revisions_assets.samples"] |= {"revisions_assets.samples.writing"}
    assert any("imports pyspark" in p for p in imports_reached(edges, samples, heavy))


def test_the_spark_source_runs_on_the_base_install():
    """``format("revisions")`` runs in Spark's Python workers, which need only the base
    install beside PySpark (docs/guides/spark-sql.md): importing the source loads no pandas
    (the engine's Spark executor, ``spark_scan``, does) and no Dagster."""
    edges, source, heavy = graph(eager=True), ["revisions_assets.spark"], ("pandas", "dagster")
    assert not imports_reached(edges, source, heavy)
    edges["revisions_assets.spark.planning"] |= {"revisions_assets.core.read.execute.spark_scan"}
    assert any("imports pandas" in p for p in imports_reached(edges, source, heavy))


@pytest.mark.parametrize(
    "module, target, expected",
    [
        (
            "revisions_assets.core.log.revision_log",
            "revisions_assets.dagster.resources.slice",
            "(engine: log) imports revisions_assets.dagster.resources.slice (Dagster resources)",
        ),
        (
            "revisions_assets.dagster.resources.io_manager",
            "revisions_assets.dagster.featurized",
            "imports revisions_assets.dagster.featurized (Dagster layer",
        ),
        ("revisions_assets.dagster.featurized", "resources", "(library) imports resources"),
        ("revisions_assets.dagster.resources.slice", "resources.x", "(library) imports resources"),
        ("revisions_assets.demo.definitions", "definitions", "(library) imports definitions"),
        ("revisions_assets.dagster.scoring", "definitions", "(library) imports definitions"),
        (
            "revisions_assets.core.read.execute.spark",
            "dagster",
            "(engine: read executors) imports dagster: no Dagster",
        ),
        (
            "revisions_assets.pipes",
            "dagster",
            "(remote jobs (Dagster Pipes)) imports dagster: no Dagster",
        ),
        (
            "revisions_assets.pipes",
            "revisions_assets.dagster.resources.slice",
            "(remote jobs (Dagster Pipes)) imports revisions_assets.dagster.resources.slice",
        ),
        (
            "revisions_assets.core.read.plan.selection",
            "revisions_assets.core.read.execute.spark",
            "(engine: read plans) imports revisions_assets.core.read.execute.spark "
            "(engine: read executors)",
        ),
        (
            "revisions_assets.core.arguments",
            "revisions_assets.core.log.records",
            "(engine: shared helpers) imports revisions_assets.core.log.records (engine: log)",
        ),
    ],
)
def test_a_back_edge_is_reported(module, target, expected):
    edges = graph()
    edges[module] = set(edges[module]) | {target}
    assert any(expected in p for p in back_edges(edges))


def test_a_cycle_is_reported():
    edges = graph()
    edges["revisions_assets.core.log.records"] = set(edges["revisions_assets.core.log.records"]) | {
        "revisions_assets.core.log.revision_log"
    }
    pair = {"revisions_assets.core.log.revision_log", "revisions_assets.core.log.records"}
    assert any(pair <= set(cycle) for cycle in cycles(edges))
