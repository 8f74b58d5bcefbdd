# Sourced by dev.sh: makes sure Java 17+ and the repo-local virtualenv exist and are current.
# Idempotent: reinstalls Python dependencies only when pyproject.toml changed.

_java_ok() {
  command -v java >/dev/null 2>&1 || return 1
  local v
  v=$(java -version 2>&1 | head -1 | sed -E 's/.*version "([0-9]+).*/\1/')
  [ "${v:-0}" -ge 17 ] 2>/dev/null
}

if ! _java_ok; then
  echo "[setup] Java 17+ not found: installing openjdk-17-jre-headless" >&2
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq openjdk-17-jre-headless >/dev/null
fi
# the UI test drives Debian's chromium through playwright (a browser download is impossible here)
if ! command -v chromium >/dev/null 2>&1; then
  echo "[setup] chromium not found: installing Debian's chromium for the UI test" >&2
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium fonts-dejavu-core >/dev/null
fi
if [ -z "${JAVA_HOME:-}" ]; then
  JAVA_HOME="$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")"
  export JAVA_HOME
fi

PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  echo "[setup] creating virtualenv .venv" >&2
  "$PY" -m venv .venv
fi
# reinstall only when what pip installs changed: every table except the [tool.*] settings
# (setuptools' package list included)
install_hash=$(awk '/^\[/{skip = ($0 ~ /^\[tool\./ && $0 !~ /^\[tool\.setuptools/)} !skip' \
  pyproject.toml | sha1sum | cut -c1-12)
stamp=".venv/.installed-$install_hash"
if [ ! -f "$stamp" ]; then
  echo "[setup] installing Python dependencies into .venv (first run takes a few minutes)" >&2
  if ! { .venv/bin/python -m pip install -q --upgrade pip &&
         .venv/bin/python -m pip install -q -e '.[dev]'; } >.venv/install.log 2>&1; then
    cat .venv/install.log >&2
    echo "[setup] pip install failed (log: .venv/install.log)" >&2
    exit 1
  fi
  rm -f .venv/.installed-*
  touch "$stamp"
fi
# shellcheck disable=SC1091
source .venv/bin/activate
export PYSPARK_PYTHON="$PWD/.venv/bin/python"
export PYSPARK_DRIVER_PYTHON="$PWD/.venv/bin/python"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
