#!/usr/bin/env bash
# The release checks: build the sdist and the wheel, check their metadata with twine and
# what they hold (the license text; in the sdist no benchmark data, CI or npm files),
# install the wheel in a new, empty venv (no editable checkout, no dev packages), and
# there import agcore_tools and run a module's doctests, from outside the checkout.
#
#   bash scripts/release_check.sh        # or: make release-check
#
# PYTHON (default: .venv/bin/python) builds and checks; the clean venv uses the
# interpreter that venv was made from.
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON:-.venv/bin/python}
work=$(mktemp -d "${TMPDIR:-/tmp}/agcore-release.XXXXXX")
trap 'rm -rf "$work"' EXIT

"$py" -m build --sdist --wheel --outdir "$work/dist" . >"$work/build.log" 2>&1 ||
  { cat "$work/build.log"; exit 1; }
"$py" -m twine check --strict "$work"/dist/*
wheel=$(ls "$work"/dist/agcore_tools-*.whl)
sdist=$(ls "$work"/dist/agcore_tools-*.tar.gz)

# What the distributions carry: the license text (MIT asks for it with every copy),
# and in the sdist only the package, its docs, examples and tests (no benchmark data,
# CI or npm files).
"$py" - "$wheel" "$sdist" <<'PY'
import sys
import tarfile
import zipfile

wheel, sdist = sys.argv[1:]
with zipfile.ZipFile(wheel) as whl:
    metadata = next(n for n in whl.namelist() if n.endswith(".dist-info/METADATA"))
    assert "License-File: LICENSE" in whl.read(metadata).decode(), "no License-File in METADATA"
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in whl.namelist()), "no LICENSE in the wheel"
with tarfile.open(sdist) as tar:
    top = {name.split("/")[1] for name in tar.getnames() if name.count("/")}
expected = {"agcore_tools", "tests", "docs", "examples", "README.md", "CHANGELOG.md",
            "LICENSE", "mkdocs.yml", "pyproject.toml", "PKG-INFO", ".gitignore"}
assert top == expected, f"the sdist holds {sorted(top - expected)}, lacks {sorted(expected - top)}"
PY
echo "release-check: built $(cd "$work/dist" && ls | tr '\n' ' ')"

base=$("$py" -c 'import sys; print(sys.base_prefix)')/bin/python3
"$base" -m venv "$work/venv"
"$work/venv/bin/python" -m pip install --quiet --upgrade pip
"$work/venv/bin/python" -m pip install --quiet "$wheel"
cd "$work"  # not the checkout: the import must find the installed wheel
"$work/venv/bin/python" - <<'PY'
import doctest
import sys

import agcore_tools
import agcore_tools.policies
import agcore_tools.registry

where = agcore_tools.__file__
assert "site-packages" in where, f"imported {where}, not the installed wheel"
failed = attempted = 0
for module in (agcore_tools.registry, agcore_tools.policies):
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    failed += result.failed
    attempted += result.attempted
print(f"release-check: agcore_tools {agcore_tools.__version__} from {where}: "
      f"{attempted} doctests, {failed} failed")
sys.exit(1 if failed or not attempted else 0)
PY
