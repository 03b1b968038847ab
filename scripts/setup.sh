#!/usr/bin/env bash
# probench set-up: one step from a fresh clone to a working environment.
#
#   scripts/setup.sh            create/update .venv (pinned deps, vision_msgs, probench -e)
#   scripts/setup.sh --lock     rewrite requirements.txt from the venv (after a deliberate change)
#
# Idempotent: each step records a hash of its inputs under $VENV/.probench-setup/ and is
# skipped when they did not change, so a second run takes seconds and changes nothing.
# Environment: PROBENCH_VENV (default <repo>/.venv), PYTHON (default python3.11),
# PROBENCH_JOBS (parallel compile jobs, default nproc).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${PROBENCH_VENV:-$REPO/.venv}"
STAMPS="$VENV/.probench-setup"
JOBS="${PROBENCH_JOBS:-$(nproc 2>/dev/null || echo 2)}"
STEP="start"

say() { printf 'setup: %s\n' "$*" >&2; }
DIED=""
die() { printf 'setup: FAILED in step "%s": %s\n' "$STEP" "$*" >&2; DIED=1; exit 1; }
# Any other failing command (set -e) ends here, naming the step it failed in.
on_exit() {
  local rc=$?
  if [ "$rc" -ne 0 ] && [ -z "$DIED" ]; then
    printf 'setup: FAILED in step "%s" (exit %s); see the output above\n' "$STEP" "$rc" >&2
  fi
  return "$rc"
}
trap on_exit EXIT

hash_of() { cat "$@" | sha256sum | cut -d' ' -f1; }
stamp_ok() { [ -f "$STAMPS/$1" ] && [ "$(cat "$STAMPS/$1")" = "$2" ]; }
stamp_set() { mkdir -p "$STAMPS" && printf '%s\n' "$2" >"$STAMPS/$1.tmp" && mv "$STAMPS/$1.tmp" "$STAMPS/$1"; }

# ---------------------------------------------------------------------------------------
STEP="python"
PY_BASE="${PYTHON:-python3.11}"
command -v "$PY_BASE" >/dev/null 2>&1 || die "no '$PY_BASE' on PATH (the ROS 2 wheels are built for CPython 3.11; set PYTHON=/path/to/python3.11)"
"$PY_BASE" -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else 1)' \
  || die "'$PY_BASE' is not Python 3.11 (the ROS 2 wheels are cp311); set PYTHON=/path/to/python3.11"

# ---------------------------------------------------------------------------------------
STEP="venv"
if [ ! -x "$VENV/bin/python" ]; then
  say "creating $VENV"
  "$PY_BASE" -m venv "$VENV"
fi
PY="$VENV/bin/python"

if [ "${1:-}" = "--lock" ]; then
  STEP="lock"
  # Every distribution pip installed in the venv, pinned; ROS-internal egg-infos (no
  # INSTALLER), probench and vision_msgs (built here) are left out.
  "$PY" - "$REPO/requirements.txt" <<'EOF'
import importlib.metadata as md
import sys

path = sys.argv[1]
header = [line for line in open(path, encoding="utf-8") if line.startswith("#")]
pins = set()
for dist in md.distributions():
    name = dist.metadata["Name"]
    if (dist.read_text("INSTALLER") or "").strip() != "pip" or name.lower() == "probench":
        continue
    pins.add(f"{name}=={dist.version}")
with open(path + ".tmp", "w", encoding="utf-8") as f:
    f.writelines(header)
    f.write("\n".join(sorted(pins, key=str.lower)) + "\n")
import os
os.replace(path + ".tmp", path)
print(f"setup: wrote {len(pins)} pins to {path}", file=sys.stderr)
EOF
  exit 0
fi

# ---------------------------------------------------------------------------------------
STEP="python packages (pip install -r requirements.txt)"
deps_hash="$(hash_of "$REPO/requirements.txt"; "$PY" -VV)"
if stamp_ok deps "$deps_hash"; then
  say "python packages: up to date"
else
  say "installing the pinned python packages (first time: a few minutes; torch is large)"
  # pip itself first, at its pin (a new venv starts with the interpreter's bundled pip)
  pip_pin="$(grep -E '^pip==' "$REPO/requirements.txt" || true)"
  [ -n "$pip_pin" ] || die "requirements.txt has no pip== pin"
  "$PY" -m pip install --disable-pip-version-check --no-input -q "$pip_pin"
  "$PY" -m pip install --disable-pip-version-check --no-input -q -r "$REPO/requirements.txt"
  stamp_set deps "$deps_hash"
fi

# ---------------------------------------------------------------------------------------
STEP="vision_msgs"
VM_SRC="$REPO/interfaces/vision_msgs"
vm_hash="$(cd "$VM_SRC" && hash_of CMakeLists.txt package.xml msg/*.msg; echo "$deps_hash")"
# True when the venv's vision_msgs was installed from exactly the repo's definitions.
vm_installed_matches() {
  local f
  cmp -s "$VM_SRC/package.xml" "$VENV/share/vision_msgs/package.xml" || return 1
  for f in "$VM_SRC"/msg/*.msg; do
    cmp -s "$f" "$VENV/share/vision_msgs/msg/$(basename "$f")" || return 1
  done
  [ "$(ls "$VM_SRC"/msg/*.msg | wc -l)" = "$(ls "$VENV"/share/vision_msgs/msg/*.msg | wc -l)" ]
}
# Where does vision_msgs come from now, if anywhere? (A ROS 2 install provides its own.)
vm_origin="$("$PY" -c 'import vision_msgs.msg, vision_msgs; print(vision_msgs.__file__)' 2>/dev/null || true)"
if stamp_ok vision_msgs "$vm_hash"; then
  say "vision_msgs: up to date"
elif [[ "$vm_origin" == "$VENV"/* ]] && vm_installed_matches; then
  say "vision_msgs: already built from these files"
  stamp_set vision_msgs "$vm_hash"
elif [ -n "$vm_origin" ] && [[ "$vm_origin" != "$VENV"/* ]]; then
  say "vision_msgs: provided by the system ($vm_origin); the in-repo copy is not built"
else
  for tool in cmake cc c++ make; do
    command -v "$tool" >/dev/null 2>&1 \
      || die "'$tool' not found: building vision_msgs needs cmake, make and a C/C++ compiler (Debian: apt-get install cmake build-essential)"
  done
  say "building vision_msgs into the venv (about a minute)"
  # The ros-* wheels export the include folders of the Python they were built with
  # (/opt/python/cp311-cp311/...); point them at this Python and this numpy, or CMake
  # stops with "includes non-existent path".
  py_inc="$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')"
  np_inc="$("$PY" -c 'import numpy; print(numpy.get_include())')"
  [ -f "$py_inc/Python.h" ] || die "Python headers missing at $py_inc (install the python3.11 dev package)"
  shopt -s nullglob
  for f in "$VENV"/share/*/cmake/*__rosidl_generator_pyExport.cmake; do
    if grep -q '/opt/python/' "$f"; then
      sed -i -e "s#/opt/python/[^;\"]*/site-packages/numpy/_core/include#$np_inc#g" \
             -e "s#/opt/python/[^;\"]*/include/python3\.11#$py_inc#g" "$f"
    fi
  done
  shopt -u nullglob
  build_dir="$(mktemp -d "${TMPDIR:-/tmp}/probench-vision_msgs.XXXXXX")"
  log="$build_dir/build.log"
  if ! (
    cd "$build_dir" &&
      export CMAKE_PREFIX_PATH="$VENV" AMENT_PREFIX_PATH="$VENV" PATH="$VENV/bin:$PATH" &&
      cmake "$VM_SRC" -DCMAKE_INSTALL_PREFIX="$VENV" -DPython3_EXECUTABLE="$PY" \
        -DBUILD_TESTING=OFF -DCMAKE_BUILD_TYPE=Release &&
      make -j"$JOBS" && make install
  ) >"$log" 2>&1; then
    tail -n 40 "$log" >&2
    die "building vision_msgs failed (full log: $log)"
  fi
  rm -rf "$build_dir"
  "$PY" -c 'from vision_msgs.msg import Detection2DArray, LabelInfo' \
    || die "vision_msgs was built but does not import"
  stamp_set vision_msgs "$vm_hash"
fi

# ---------------------------------------------------------------------------------------
STEP="probench (pip install --no-deps -e .)"
pb_hash="$(cd "$REPO" && hash_of setup.py setup.cfg package.xml; echo "$REPO $deps_hash")"
if stamp_ok probench "$pb_hash" && "$PY" -c 'import probench' 2>/dev/null; then
  say "probench: up to date"
else
  say "installing probench (editable)"
  "$PY" -m pip install --disable-pip-version-check --no-input -q --no-deps --no-build-isolation -e "$REPO"
  stamp_set probench "$pb_hash"
fi

# ---------------------------------------------------------------------------------------
STEP="chromium (the console's browser test)"
# test/console/test_console_browser.py drives Debian's Chromium through Playwright. Playwright's
# own browser download (`playwright install`) is never used: it fetches from outside the package
# registries. As root (CI) the Debian package is installed; otherwise a clear message says how.
CHROMIUM=/usr/bin/chromium
if [ -x "$CHROMIUM" ]; then
  say "chromium: $("$CHROMIUM" --version 2>/dev/null | head -n 1)"
elif [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  say "installing Debian's chromium for the console's browser test (apt-get; a minute)"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium
  [ -x "$CHROMIUM" ] || die "apt-get installed chromium, but $CHROMIUM is missing"
else
  say "WARNING: $CHROMIUM is missing, so the console's browser test (test/console/test_console_browser.py)"
  say "  will fail. Install Debian's chromium package as root: sudo apt-get install chromium"
fi

# ---------------------------------------------------------------------------------------
STEP="final check"
ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST "$PY" -c '
import rclpy, rclpy.lifecycle  # noqa: F401  (loads the RMW and the DDS libraries)
from vision_msgs.msg import Detection2DArray, LabelInfo  # noqa: F401
import probench  # noqa: F401
' || die "the environment does not import (rclpy, vision_msgs, probench)"
[ -x "$VENV/bin/probench" ] || die "the probench console script is missing from $VENV/bin"
say "ready: . $VENV/bin/activate"
