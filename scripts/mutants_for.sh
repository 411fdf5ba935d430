#!/usr/bin/env bash
# Mutation score of a few modules against a few test files, in a scratch copy of the repository whose
# [tool.mutmut] source_paths and test selection are narrowed to them; the tree itself is not touched.
#   scripts/mutants_for.sh "imagination/bias.py" "tests/imagination/test_mixing_and_gate.py tests/imagination/test_bias_edges.py"
# Prints scripts/mutation_report.py's table and survivors; the copy stays in $MUTANTS_DIR (default: a new
# temporary folder) for `mutmut show NAME`. One worker: MUTMUT_CHILDREN overrides it.
set -euo pipefail
if [ $# -ne 2 ]; then echo "usage: $0 'SOURCE_PATHS...' 'TEST_PATHS...'" >&2; exit 2; fi
root=$(cd "$(dirname "$0")/.." && pwd)
venv=${VENV:-$root/.venv}
dir=${MUTANTS_DIR:-$(mktemp -d)}
mkdir -p "$dir"
# tracked and untracked-but-not-ignored files: what the tests can import, without outputs or mutants/
(cd "$root" && git ls-files -co --exclude-standard -z | xargs -0 tar -cf -) | tar -C "$dir" -xf -
cd "$dir"
"$venv/bin/python" - "$1" "$2" <<'PY'
import re
import sys

def listed(paths):
    return "[\n" + "".join(f'    "{p}",\n' for p in paths.split()) + "]"

text = open("pyproject.toml").read()
text = re.sub(r"source_paths = \[.*?\]", "source_paths = " + listed(sys.argv[1]), text, flags=re.S)
text = re.sub(r"pytest_add_cli_args_test_selection = \[.*?\]",
              "pytest_add_cli_args_test_selection = " + listed(sys.argv[2]), text, flags=re.S)
open("pyproject.toml", "w").write(text)
PY
OMP_NUM_THREADS=1 "$venv/bin/mutmut" run --max-children "${MUTMUT_CHILDREN:-1}" > run.log 2>&1 || true
"$venv/bin/mutmut" results --all true > results.txt
"$venv/bin/python" "$root/scripts/mutation_report.py" results.txt
echo "(the copy, its run.log and results.txt: $dir)"
