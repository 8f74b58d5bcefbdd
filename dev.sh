#!/usr/bin/env bash
# One entry point for set-up, the demo, the tests, the UI and the benchmarks.
# Every command sets the environment up first (idempotent, fast when nothing changed).
set -euo pipefail
cd "$(dirname "$0")"
source scripts/setup.sh

cmd="${1:-help}"; shift || true
case "$cmd" in
  setup) echo "environment ready: $(python --version), $(java -version 2>&1 | head -1)" ;;
  demo)  exec python -m revisions_assets.demo "$@" ;;
  test)  echo "[setup] s3a connector jars for the S3 tests (downloaded once into .setup/jars)" >&2
         python -m revisions_assets.s3a >/dev/null
         python tests/install/wheelhouse.py  # the install tests' wheels (once, into .setup/)
         python tests/harness/jvm_archive.py  # Spark's classes shared by every test JVM (once)
         # this tree's bytecode, written once: the suite starts some 200 Python processes, and
         # where PYTHONDONTWRITEBYTECODE is set each would compile the package again
         python -m compileall -q revisions_assets tests bench >/dev/null
         ruff format --check --quiet . || { echo "ruff format: run ./dev.sh format" >&2; exit 1; }
         # the property tests replay hypothesis's derandomized `ci` examples (no database), so
         # every run proves the same thing and a failure reproduces; another profile overrides
         profile=(--hypothesis-profile=ci)
         [[ " $* " == *" --hypothesis-profile"* ]] && profile=()
         # the long tier (./dev.sh long) runs apart: its tests take minutes each
         tier=(-m "not long")
         [[ " $* " == *" -m "* ]] && tier=()
         # two workers, each taking whole test files (module fixtures such as the standalone
         # cluster start once): most tests wait on JVMs and subprocesses, so two halve the time.
         # Files start in collection order, the longest first (LONGEST_FIRST, tests/conftest.py)
         exec python -m pytest -n "${TEST_WORKERS:-2}" --dist loadfile --no-loadscope-reorder \
           "${profile[@]}" "${tier[@]}" "$@" ;;
  long)  # the long tier: the UI in a browser, the standalone cluster, the bench smoke, 100k entries
         python -m revisions_assets.s3a >/dev/null
         python tests/harness/jvm_archive.py
         exec python -m pytest -n "${TEST_WORKERS:-2}" --dist loadfile --no-loadscope-reorder \
           --hypothesis-profile=ci -m long "$@" ;;
  explore)  # the property tests with many new random examples: ./dev.sh explore [N | 30m]
         # N examples per test (default 100); 30m: rounds of that until 30 minutes have passed
         budget=0
         if [[ "${1:-}" =~ ^[0-9]+m$ ]]; then budget=$(( ${1%m} * 60 )); shift
         elif [[ "${1:-}" =~ ^[0-9]+$ ]]; then export EXPLORE_EXAMPLES="$1"; shift; fi
         end=$(( SECONDS + budget )); round=1
         while :; do
           echo "[explore] round $round: ${EXPLORE_EXAMPLES:-100} new examples per property test" >&2
           python -m pytest -n "${TEST_WORKERS:-2}" --dist loadfile -m hypothesis \
             --hypothesis-profile=explore --hypothesis-show-statistics "$@" || exit $?
           (( SECONDS < end )) || break
           round=$(( round + 1 ))
         done ;;
  fast)  # before every commit: the tests that start no JVM plus one per area (under 3 min)
         ruff format --check --quiet . || { echo "ruff format: run ./dev.sh format" >&2; exit 1; }
         exec python -m pytest -n "${TEST_WORKERS:-2}" --dist loadfile -m fast "$@" ;;
  screenshots)  # refresh docs/ui/ from the UI test (./dev.sh long writes to a tmp folder)
         export REVISIONS_REFRESH_SCREENSHOTS=1
         exec python -m pytest tests/dagster/test_ui.py "$@" ;;
  ui)    export DAGSTER_HOME="${DAGSTER_HOME:-$PWD/.dagster_home}"; mkdir -p "$DAGSTER_HOME"
         exec dg dev "$@" ;;  # the code location of [tool.dg] in pyproject.toml
  bench) exec python -m bench.run "$@" ;;
  docs)  export NO_MKDOCS_2_WARNING=1  # the site in docs/ (mkdocs.yml); offline, no fonts fetched
         if [ "${1:-serve}" = build ]; then shift; exec python -m mkdocs build --strict "$@"; fi
         [ "${1:-}" = serve ] && shift
         exec python -m mkdocs serve "$@" ;;
  lint)  ruff format --check . && exec ruff check . ;;
  format) ruff format . && exec ruff check --fix . ;;
  *) echo "usage: ./dev.sh {setup|demo|test|long|fast|explore [N|30m]|ui|screenshots|docs [build]|bench|lint|format} [args]"; exit 2 ;;
esac
