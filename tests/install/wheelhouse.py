"""Fresh environments from the built wheel, without a download on every run.

``ensure()`` (``./dev.sh test`` runs ``python tests/install/wheelhouse.py`` first) keeps in
``.setup/wheelhouse`` a wheel of every distribution that the base install and the
``spark`` and ``dagster`` extras pull in, at the versions of this development environment:
built once with ``pip wheel`` (from pip's cache where it can, pyspark's source
distribution built once), rebuilt when those versions change. Beside it,
``.setup/wheelhouse-tools`` holds what a user's project takes from elsewhere (``TOOLS``,
with what they need): the newest ``create-dagster`` (run in an environment of its own, as
``uvx`` runs it) and the build backend of the project it scaffolds (hatchling), downloaded
once (``ensure_tools``). ``fresh_env`` then
installs the package's wheel into a new virtual environment with uv, offline, from that
wheelhouse: uv's cache (``.setup/uv-cache``) hardlinks the files, so an environment with
pyspark and Dagster takes seconds after the first time. ``python tests/install/wheelhouse.py
env DIR`` builds one (the benchmark of ``revisions --help`` in the base install uses it).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

PROJECT = "revisions-assets"
EXTRAS = ("spark", "dagster")
REPO = Path(__file__).resolve().parents[2]
SETUP = REPO / ".setup"
WHEELHOUSE = SETUP / "wheelhouse"
UV_CACHE = SETUP / "uv-cache"
#: what a wheel of the package is built from
SOURCES = ("pyproject.toml", "README.md", "revisions_assets")
#: the newest create-dagster release (``pip index versions create-dagster``): the one
#: docs/guides/your-project.md is run with (tests/dagster/test_your_project.py). Raise it
#: when a newer one is out; the guide's test then proves the guide against it.
CREATE_DAGSTER = "1.13.29"
#: what a user's project takes besides the package: create-dagster, and the build backend
#: (and its editable-install helper) of the project it scaffolds
TOOLS = (f"create-dagster=={CREATE_DAGSTER}", "hatchling==1.33.0", "editables==0.6")
TOOLS_HOUSE = SETUP / "wheelhouse-tools"


def pins(extras: tuple[str, ...] = EXTRAS) -> dict[str, str]:
    """Every distribution the package with ``extras`` needs -> its version installed here
    (the requirement graph of the installed metadata, markers evaluated)."""
    found: dict[str, str] = {}
    seen: set[tuple[str, str]] = set()
    todo = [(PROJECT, extra) for extra in ("", *extras)]
    while todo:
        name, extra = todo.pop()
        key = (canonicalize_name(name), extra)
        if key in seen:
            continue
        seen.add(key)
        dist = metadata.distribution(name)
        if key[0] != PROJECT:
            found[key[0]] = dist.version
        for text in dist.requires or ():
            requirement = Requirement(text)
            if requirement.marker and not requirement.marker.evaluate({"extra": extra}):
                continue
            todo += [(requirement.name, e) for e in ("", *requirement.extras)]
    return dict(sorted(found.items()))


@contextmanager
def _locked() -> Iterator[None]:
    """One builder at a time (the test workers share the wheelhouse)."""
    SETUP.mkdir(exist_ok=True)
    with open(SETUP / "wheelhouse.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def ensure() -> Path:
    """The wheelhouse, built when the pinned versions changed (see the module doc)."""
    wanted = pins()
    stamp = hashlib.sha1(repr(wanted).encode()).hexdigest()[:12]
    with _locked():
        if (WHEELHOUSE / f".pins-{stamp}").exists():
            return WHEELHOUSE
        print(
            f"[setup] wheelhouse for the install tests: {len(wanted)} wheels into "
            f"{WHEELHOUSE.relative_to(REPO)} (once)",
            file=sys.stderr,
        )
        building = Path(tempfile.mkdtemp(prefix="wheelhouse-", dir=SETUP))
        requirements = building / "requirements.txt"
        requirements.write_text("".join(f"{n}=={v}\n" for n, v in wanted.items()))
        subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps"]
            + ["--wheel-dir", str(building), "-r", str(requirements)],
            check=True,
        )
        requirements.unlink()
        (building / f".pins-{stamp}").touch()
        shutil.rmtree(WHEELHOUSE, ignore_errors=True)
        building.rename(WHEELHOUSE)
    return WHEELHOUSE


def ensure_tools() -> Path:
    """The tools' wheelhouse (``TOOLS`` and what they need), downloaded when ``TOOLS``
    changed."""
    stamp = hashlib.sha1(repr(TOOLS).encode()).hexdigest()[:12]
    with _locked():
        if (TOOLS_HOUSE / f".tools-{stamp}").exists():
            return TOOLS_HOUSE
        print(
            f"[setup] {', '.join(TOOLS)} into {TOOLS_HOUSE.relative_to(REPO)} (once)",
            file=sys.stderr,
        )
        building = Path(tempfile.mkdtemp(prefix="wheelhouse-tools-", dir=SETUP))
        subprocess.run(  # with their dependencies: resolved once, from the index
            [sys.executable, "-m", "pip", "download", "-q", "--dest", str(building), *TOOLS],
            check=True,
        )
        (building / f".tools-{stamp}").touch()
        shutil.rmtree(TOOLS_HOUSE, ignore_errors=True)
        building.rename(TOOLS_HOUSE)
    return TOOLS_HOUSE


def build_wheel(out: Path) -> Path:
    """A wheel of the package built from a copy of this tree (the tree stays clean)."""
    source = out / "source"
    source.mkdir(parents=True)
    for name in SOURCES:
        path = REPO / name
        if path.is_dir():
            shutil.copytree(path, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(path, source / name)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"]
        + ["--wheel-dir", str(out), str(source)],
        check=True,
        capture_output=True,
    )
    (wheel,) = out.glob("revisions_assets-*.whl")
    return wheel


#: what a user's shell does not have: this project on the path, its venv active, and
#: PYTHONDONTWRITEBYTECODE (set on some CI machines), under which every command in a fresh
#: environment would compile Dagster and Spark's Python again (uv installs no bytecode)
USER_SHELL_UNSET = ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONDONTWRITEBYTECODE")


def clean_env(venv: Path | None = None) -> dict[str, str]:
    """The environment of a user's shell: this project neither on the path nor active
    (its resources/ would shadow the user's), ``venv`` activated when given, bytecode
    written as Python does by default."""
    env = {k: v for k, v in os.environ.items() if k not in USER_SHELL_UNSET}
    if venv is not None:
        env["VIRTUAL_ENV"] = str(venv)
        env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env['PATH']}"
    return env


def fresh_env(
    venv: Path, wheel: Path, extras: tuple[str, ...] = (), *, compile_bytecode: bool = False
) -> Path:
    """A new virtual environment at ``venv`` with the wheel (and ``extras``) installed,
    offline from the wheelhouse; returns its python. ``compile_bytecode``: as pip installs
    (start-up times then compare with an installed environment's)."""
    uv_env = {**clean_env(), "UV_CACHE_DIR": str(UV_CACHE)}
    subprocess.run(
        [*UV, "venv", "-q", "--python", sys.executable, str(venv)], check=True, env=uv_env
    )
    python = venv / "bin" / "python"
    target = f"{wheel}[{','.join(extras)}]" if extras else str(wheel)
    install(python, target, compile_bytecode=compile_bytecode)
    return python


UV = [sys.executable, "-m", "uv"]


def install(
    python: Path, *args: str, cwd: Path | None = None, compile_bytecode: bool = False
) -> None:
    """``pip install args`` into the environment of ``python``, as uv installs it: offline,
    from the wheelhouse and its tools (a project's build backend), in seconds."""
    subprocess.run(
        [*UV, "pip", "install", "-q", "--offline", "--no-index", "--python", str(python)]
        + ["--find-links", str(ensure()), "--find-links", str(ensure_tools()), *args]
        + (["--compile-bytecode"] if compile_bytecode else []),
        check=True,
        cwd=cwd,
        env={**clean_env(), "UV_CACHE_DIR": str(UV_CACHE)},
    )


def tool_env(venv: Path, requirement: str) -> Path:
    """A command line in an environment of its own at ``venv`` (as ``uvx`` runs one), from
    the tools of the wheelhouse; returns the environment's ``bin`` folder."""
    subprocess.run(
        [*UV, "venv", "-q", "--python", sys.executable, str(venv)],
        check=True,
        env={**clean_env(), "UV_CACHE_DIR": str(UV_CACHE)},
    )
    install(venv / "bin" / "python", requirement)
    return venv / "bin"


def run_in(
    venv: Path, *args: str, cwd: Path, code: int = 0, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``args`` as a user types them in a shell where ``venv`` is active; exits with ``code``."""
    done = subprocess.run(
        args,
        cwd=cwd,
        env={**clean_env(venv), **(env or {})},
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == code, f"{args}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done


def installed_bytes(venv: Path) -> int:
    """The size of everything installed in ``venv`` (its site-packages)."""
    (site,) = (venv / "lib").glob("python3*/site-packages")
    return sum(p.stat().st_size for p in site.rglob("*") if p.is_file() and not p.is_symlink())


if __name__ == "__main__":  # the wheelhouse; with `env DIR [EXTRA ...]`, a fresh environment
    if sys.argv[1:2] == ["env"]:
        with tempfile.TemporaryDirectory() as tmp:
            wheel = build_wheel(Path(tmp))
            print(fresh_env(Path(sys.argv[2]), wheel, tuple(sys.argv[3:]), compile_bytecode=True))
    else:
        ensure()
        ensure_tools()
