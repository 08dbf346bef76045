# MAPush training environment. `make help` lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help

include env/pins.env

# Refusals: each problem is one `error:` line on stderr, all of them in one pass; then $(_stop)
# ends make (exit 2) with GNU make's own closing line, the one line no Makefile can leave out.
_shq = '$(subst ','\'',$(1))'
_check = $(if $(strip $(1)),$(shell printf '%s\n' $(call _shq,$(strip $(1))) >&2)$(eval _PROBLEMS += x))
_stop = $(if $(_PROBLEMS),$(error nothing was started: the error lines above say what to fix))

# The stack: cu116 (default) or cu121 (env/pins.env). Every CU121_<KEY> pin replaces <KEY>.
# (STACK's default, cu116, is in env/pins.env; the cu116 lock is kept for make lock)
_LOCK_CU116 := $(LOCK_FILE)
STACKS := cu116 cu121
ifeq ($(filter $(STACKS),$(STACK)),)
$(call _check,error: STACK='$(STACK)' is not one of: $(STACKS) (cu116: CUDA 11.6, the default; cu121: the stack MAPush's authors trained with))
$(_stop)
endif
_STACK_KEYS := CUDA_BASE_IMAGE CUDA_VERSION TORCH_VERSION TORCHVISION_VERSION TORCH_INDEX_URL \
	LOCK_FILE TORCH_PYPI_VERSION TORCHVISION_PYPI_VERSION
ifeq ($(STACK),cu121)
$(foreach key,$(_STACK_KEYS),$(eval $(key) := $(CU121_$(key))))
endif

PYTHON ?= python3
VENV ?= .venv
VENV_PY := $(VENV)/bin/python
PYTEST_ARGS ?=
# make test's pytest workers (pytest-xdist, a test file to a worker): most tests wait on one
# child process, so one worker per core takes about half the time on two cores; 0: one process
TEST_WORKERS ?= auto
# make test's selection (pytest -m): the product suite; make test-real runs the real_mqe rest
TEST_MARKERS ?= not real_mqe

# Options of `make train` (and eval, doctor, smoke-test). Checked before Docker starts.
# 200 for the mid level; 500 for TASK=go1push_upper, as upstream trains the high level
NUM_ENVS ?= $(if $(filter go1push_upper,$(TASK)),500,200)
ALGO ?= ppo
TASK ?= go1push_mid
OBJECT ?= cuboid
SEED ?= 1
STEPS ?=
GPU ?= 0
RUN_DIR ?=
EXTRA ?=
RUN ?=
# make sweep / sweep-report / sif
SEEDS ?= 1 2 3
OBJECTS ?= $(OBJECT)
APPTAINER ?= apptainer
GPUS ?=
NAME ?=
EXECUTOR ?= local
SIF ?= mapush.sif
CHECKPOINT ?=
# make train TASK=go1push_upper: the mid-level policy it drives (mapush train --command-net)
MID ?=
# The choices of mapush train (tests/test_makefile.py keeps them equal to mapush.spec/objects).
ALGOS := ppo happo mappo hatrpo
TASKS := go1push_mid go1push_upper
OBJECT_CHOICES := cuboid Tblock cylinder

# Image and Docker. Compose reads the pins from env/pins.env; the shell environment wins.
# one tag per stack: the default stack keeps :latest
IMAGE ?= mapush-env:$(if $(filter cu116,$(STACK)),latest,$(STACK))
TENSORBOARD_IMAGE ?= mapush-tensorboard:latest
TENSORBOARD_PORT ?= 6006
# TensorBoard's base image; empty: the one the existing TensorBoard image was built from (its
# label org.mapush.base), so a plain `make tensorboard` keeps a base given once, else the
# Dockerfile's default (_TB_DEFAULT_BASE).
TENSORBOARD_BASE_IMAGE ?=
DOCKER ?= docker
_TB_DEFAULT_BASE := $(shell sed -n 's/^ARG TENSORBOARD_BASE_IMAGE=//p' docker/tensorboard.Dockerfile)
ifneq ($(filter tensorboard,$(MAKECMDGOALS)),)
ifeq ($(TENSORBOARD_BASE_IMAGE),)
_TB_BUILT_BASE := $(shell $(DOCKER) image inspect --format \
	'{{ index .Config.Labels "org.mapush.base" }}' $(TENSORBOARD_IMAGE) 2>/dev/null)
TENSORBOARD_BASE_IMAGE := $(filter-out $(_TB_DEFAULT_BASE),$(_TB_BUILT_BASE))
endif
endif
# The TensorBoard image is built only when missing or when its inputs changed: their hash is
# the image's label org.mapush.inputs (docker/tensorboard.Dockerfile).
TENSORBOARD_INPUTS = $(shell cat docker/tensorboard.Dockerfile docker/tensorboard-entry.sh env/tensorboard.lock | \
	{ cat; printf '%s' '$(TENSORBOARD_BASE_IMAGE)'; } | sha256sum | cut -c1-16)
# The container user owns what it writes in runs/: the invoking user's ids (under sudo, the
# user who ran sudo); root without sudo gets 1000, the image's default user.
_ID_U := $(or $(SUDO_UID),$(shell id -u))
_ID_G := $(or $(SUDO_GID),$(shell id -g))
HOST_UID ?= $(if $(filter 0,$(_ID_U)),1000,$(_ID_U))
HOST_GID ?= $(if $(filter 0,$(_ID_U)),1000,$(_ID_G))
ISAACGYM_TARBALL_PATH ?= vendor/$(ISAACGYM_TARBALL)
# Compose's project is the checkout's folder name (compose.yaml sets none), so two clones
# do not stop each other's services; COMPOSE_PROJECT_NAME=... picks another.
COMPOSE := $(DOCKER) compose --env-file env/pins.env
HOST_CHECK := bash docker/host-check.sh
export DOCKER
export MAPUSH_IMAGE := $(IMAGE)
export GPU HOST_UID HOST_GID TENSORBOARD_PORT TENSORBOARD_IMAGE
# Only when set: an empty build argument would replace the Dockerfile's default base.
ifneq ($(TENSORBOARD_BASE_IMAGE),)
export TENSORBOARD_BASE_IMAGE
endif
# The tarball reaches the build through a named build context holding only it (never a layer).
ISAACGYM_CONTEXT := build/isaacgym-context

# ---------------------------------------------------------------------------------------
# Option checks: one line each, exit status 2, before anything runs ($(_check), above).
_nodigits = $(subst 9,,$(subst 8,,$(subst 7,,$(subst 6,,$(subst 5,,$(subst 4,,$(subst 3,,$(subst 2,,$(subst 1,,$(subst 0,,$(1)))))))))))
# $(call _uint,NAME,allow-zero?) -> error text, or empty when $(NAME) is a plain integer
_uint = $(if $(and $(filter 1,$(words $($(1)))),$(if $(call _nodigits,$($(1))),,ok),$(or $(2),$(subst 0,,$($(1))))),,error: $(1)='$($(1))' is not a $(if $(2),non-negative,positive) integer (e.g. $(1)=$(3)))
_choice = $(if $(and $(filter 1,$(words $($(1)))),$(filter $($(1)),$(2))),,error: $(1)='$($(1))' is not one of: $(2))
_under_runs = $(if $(filter runs/%,$($(1))),,error: $(1)='$($(1))' must be a path under runs/ (the folder mounted in the container))

_GPU_GOALS := train resume eval video pipeline reproduce doctor smoke-test shell dev
_TARBALL_MSG = error: Isaac Gym tarball not found at $(ISAACGYM_TARBALL_PATH): download Isaac Gym Preview 4 ($(ISAACGYM_TARBALL)) from $(ISAACGYM_DOWNLOAD_URL) (free NVIDIA developer login) and put it at vendor/$(ISAACGYM_TARBALL), or pass ISAACGYM_TARBALL_PATH=/path/to/$(ISAACGYM_TARBALL)

ifneq ($(filter $(_GPU_GOALS),$(MAKECMDGOALS)),)
$(call _check,$(call _uint,GPU,zero,0))
endif
ifneq ($(filter train,$(MAKECMDGOALS)),)
$(call _check,$(if $(findstring --resume,$(EXTRA)),error: EXTRA='$(EXTRA)': make train starts a new run with Make's defaults; continue a run with: make resume RUN=runs/... [STEPS=N]))
$(call _check,$(call _uint,NUM_ENVS,,200))
$(call _check,$(call _choice,ALGO,$(ALGOS)))
$(call _check,$(call _choice,TASK,$(TASKS)))
$(call _check,$(call _choice,OBJECT,$(OBJECT_CHOICES)))
$(call _check,$(call _uint,SEED,zero,1))
$(call _check,$(if $(STEPS),$(call _uint,STEPS,,1000000)))
$(call _check,$(if $(RUN_DIR),$(call _under_runs,RUN_DIR)))
$(call _check,$(if $(MID),$(if $(filter go1push_upper,$(TASK)),,error: MID='$(MID)' is for TASK=go1push_upper (the mid-level policy the high level drives))))
$(call _check,$(if $(MID),$(call _under_runs,MID)$(if $(wildcard $(MID)),,error: MID='$(MID)' does not exist (e.g. MID=runs/go1push_mid/cuboid/ppo/seed1-...))))
endif
# Lists (make sweep): the words that are not non-negative integers / not among the choices,
# then one error line naming the first of them.
_badints = $(strip $(foreach w,$($(1)),$(if $(call _nodigits,$(w)),$(w))))
_badchoices = $(strip $(foreach w,$($(1)),$(if $(filter $(w),$(2)),,$(w))))
_intwords = $(if $(strip $($(1))),$(if $(call _badints,$(1)),error: $(1)='$($(1))': '$(firstword $(call _badints,$(1)))' is not a non-negative integer (e.g. $(1)="$(2)")),error: $(1) is empty (e.g. $(1)="$(2)"))
_choicewords = $(if $(strip $($(1))),$(if $(call _badchoices,$(1),$(2)),error: $(1)='$($(1))': '$(firstword $(call _badchoices,$(1),$(2)))' is not one of: $(2)),error: $(1) is empty (e.g. $(1)="$(word 1,$(2))"))
ifneq ($(filter sweep,$(MAKECMDGOALS)),)
$(call _check,$(call _intwords,SEEDS,1 2 3))
$(call _check,$(call _choicewords,OBJECTS,$(OBJECT_CHOICES)))
$(call _check,$(call _choicewords,ALGO,$(ALGOS)))
$(call _check,$(if $(GPUS),$(call _intwords,GPUS,0 1)))
$(call _check,$(call _choice,EXECUTOR,local slurm))
endif
ifneq ($(filter sweep-report,$(MAKECMDGOALS)),)
$(call _check,$(if $(NAME),$(if $(wildcard runs/sweeps/$(NAME)/sweep.json),,error: NAME='$(NAME)': no runs/sweeps/$(NAME)/sweep.json (make sweep first)),error: NAME is not set: make sweep-report NAME=<a folder of runs/sweeps>))
endif
ifneq ($(filter pipeline,$(MAKECMDGOALS)),)
$(call _check,$(call _uint,NUM_ENVS,,200))
$(call _check,$(if $(filter cuboid,$(OBJECT)),,error: OBJECT='$(OBJECT)': the pipeline's high level pushes MQE's 1.2 x 1.2 box whatever the mid level pushed, so it runs on OBJECT=cuboid only (train another object's mid level with make train OBJECT=$(OBJECT))))
$(call _check,$(call _uint,SEED,zero,1))
endif
ifneq ($(filter doctor,$(MAKECMDGOALS)),)
$(call _check,$(call _uint,NUM_ENVS,,200))
endif
ifneq ($(filter dev,$(MAKECMDGOALS)),)
$(call _check,$(if $(MAPUSH_DIR),$(if $(shell test -f $(call _shq,$(MAPUSH_DIR))/mqe/__init__.py && echo ok),,error: MAPUSH_DIR='$(MAPUSH_DIR)' is no MAPush checkout (no mqe/__init__.py): pass the folder git clone made),error: MAPUSH_DIR is not set: make dev MAPUSH_DIR=<your MAPush checkout> (e.g. ../MAPush)))
endif
ifneq ($(filter resume,$(MAKECMDGOALS)),)
$(call _check,$(if $(RUN),$(call _under_runs,RUN)$(if $(wildcard $(RUN)/config.json),,error: RUN='$(RUN)' is not a run (no config.json; e.g. make resume RUN=runs/go1push_mid/cuboid/ppo/seed1-...)),error: RUN is not set: make resume RUN=runs/<task>/<object>/<algo>/<run>))
$(call _check,$(if $(STEPS),$(call _uint,STEPS,,1000000)))
endif
ifneq ($(filter eval video report export,$(MAKECMDGOALS)),)
$(call _check,$(if $(RUN),$(call _under_runs,RUN)$(if $(wildcard $(RUN)),,error: RUN='$(RUN)' does not exist (e.g. make eval RUN=runs/go1push_mid/cuboid/ppo/seed1-...)),error: RUN is not set: make eval RUN=runs/<task>/<object>/<algo>/<run>))
endif
$(_stop)
# Host checks (docker/host-check.sh prereqs) before any Docker call, in one pass: Compose v2
# for the compose targets, a running daemon, and, when the image must be built (make build,
# or a target whose IMAGE is missing), the tarball (readable gzip, Preview 4 layout, pinned
# sha256 if any) and BuildKit. One `error:` line for each that is missing, exit 2. Skipped by
# `make -n`.
_DRY_RUN := $(findstring n,$(firstword -$(MAKEFLAGS)))
# (make doctor runs its own host checks, one line each, then the container's doctor)
_COMPOSE_GOALS := train resume eval video export pipeline reproduce smoke-test shell dev \
	sweep sweep-report tensorboard tensorboard-stop compose-check demo
_IMAGE_GOALS := train resume eval video export pipeline reproduce smoke-test shell dev \
	sweep sweep-report sif demo
# the goals that start the training container on a GPU: the driver and the Container Toolkit
_GPU_GOALS := train resume eval video export pipeline reproduce smoke-test shell dev sweep \
	demo
NVIDIA_SMI ?= nvidia-smi
# 0: no host GPU checks (make image-check's CPU rehearsal, whose compose file asks for no GPU)
HOST_GPU_CHECK ?= 1
_HOST_ENV = DOCKER='$(DOCKER)' NVIDIA_SMI='$(NVIDIA_SMI)' \
	TARBALL_MISSING_MSG='$(subst error: ,,$(_TARBALL_MSG))'
# $(call _prereqs,COMPOSE 0/1,BUILD always/if-missing/never) -> the last error line, or empty
_prereqs = $(if $(_DRY_RUN),,$(shell $(_HOST_ENV) \
	NEEDS_GPU=$(if $(and $(filter 1,$(HOST_GPU_CHECK)),$(filter $(_GPU_GOALS),$(MAKECMDGOALS))),1,0) $(HOST_CHECK) prereqs $(1) $(2) \
	'$(IMAGE)' '$(ISAACGYM_TARBALL_PATH)' '$(ISAACGYM_TARBALL_SHA256)'))
_NEEDS_COMPOSE := $(if $(filter $(_COMPOSE_GOALS),$(MAKECMDGOALS)),1,0)
ifneq ($(filter build,$(MAKECMDGOALS)),)
$(call _check,$(call _uint,HOST_UID,zero,1000)$(call _uint,HOST_GID,zero,1000))
$(call _check,$(call _prereqs,$(_NEEDS_COMPOSE),always))
else ifneq ($(filter $(_IMAGE_GOALS),$(MAKECMDGOALS)),)
$(call _check,$(call _prereqs,$(_NEEDS_COMPOSE),if-missing))
else ifneq ($(filter $(_COMPOSE_GOALS),$(MAKECMDGOALS)),)
$(call _check,$(call _prereqs,1,never))
endif
$(_stop)
# make tensorboard builds its image when missing or changed: its base must be at hand.
ifneq ($(filter tensorboard,$(MAKECMDGOALS)),)
ifeq ($(_DRY_RUN),)
ifneq ($(shell $(DOCKER) image inspect --format '{{ index .Config.Labels "org.mapush.inputs" }}' $(TENSORBOARD_IMAGE) 2>/dev/null),$(TENSORBOARD_INPUTS))
$(call _check,$(shell DOCKER='$(DOCKER)' $(HOST_CHECK) tensorboard-base '$(or $(TENSORBOARD_BASE_IMAGE),$(_TB_DEFAULT_BASE))' 2>&1 >/dev/null))
endif
endif
endif
$(_stop)

# ---------------------------------------------------------------------------------------
.PHONY: help
help: ## list the targets and their variables
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  make %-16s %s\n", $$1, $$2}' $(MAKEFILE_LIST)
	@echo
	@echo
	@echo "  Variables (current value; the default unless you set it):"
	@echo "    NUM_ENVS=$(NUM_ENVS)  envs simulated at once"
	@echo "    ALGO=$(ALGO)  one of: $(ALGOS)"
	@echo "    TASK=$(TASK)  one of: $(TASKS)"
	@echo "    OBJECT=$(OBJECT)  one of: $(OBJECT_CHOICES)"
	@echo "    SEED=$(SEED)"
	@echo "    STEPS=$(or $(STEPS),(empty: mapush train's 100000000 env steps))"
	@echo "    GPU=$(GPU)  host GPU index the container gets"
	@echo "    RUN_DIR=$(or $(RUN_DIR),(empty: runs/<task>/<object>/<algo>/seed<seed>-<time>))"
	@echo "    EXTRA='$(EXTRA)'  more mapush options, e.g. '--config my.yaml' (continue a run: make resume RUN=...)"
	@echo "    RUN=$(or $(RUN),(empty; make resume, eval, video, export and report need it: RUN=runs/...))"
	@echo "    CHECKPOINT=$(or $(CHECKPOINT),(empty: RUN's newest; make video, make export))"
	@echo "    MID=$(or $(MID),(empty: the published command net; TASK=go1push_upper's mid level))"
	@echo "    STACK=$(STACK)  one of: $(STACKS) (cu121: the authors' torch $(CU121_TORCH_VERSION))"
	@echo "    IMAGE=$(IMAGE)  TENSORBOARD_IMAGE=$(TENSORBOARD_IMAGE)"
	@echo "    PYTHON=$(PYTHON)  any Python 3.10-3.13 (make venv, make test)  VENV=$(VENV)"
	@echo "    HOST_VENV=$(HOST_VENV)  (make report: mapush on the host)"
	@echo "    TEST_WORKERS=$(TEST_WORKERS)  make test's pytest-xdist workers, one per core (0: one process)"
	@echo "    TEST_MARKERS=$(TEST_MARKERS)  make test's pytest -m selection (make test-real: real_mqe)"
	@echo "    PYTHON38=$(PYTHON38)  (make test-stack)"
	@echo "    MAPUSH_SRC=$(or $(MAPUSH_SRC),(empty: fetched into build/ for the real-MQE tests, else they skip))  MAPush at the pin (make test, test-stack)"
	@echo "    TENSORBOARD_PORT=$(TENSORBOARD_PORT)"
	@echo "    TENSORBOARD_BASE_IMAGE=$(or $(TENSORBOARD_BASE_IMAGE),(empty: $(_TB_DEFAULT_BASE)))"
	@echo "    ISAACGYM_TARBALL_PATH=$(ISAACGYM_TARBALL_PATH)"
	@echo "    NVIDIA_SMI=$(NVIDIA_SMI)  (the host checks of make doctor and the GPU targets)"
	@echo "    HOST_GPU_CHECK=$(HOST_GPU_CHECK)  (0: no host GPU checks; make image-check's CPU run)"
	@echo "    DOCKER=$(DOCKER)  (docker, or podman: make build, doctor, and podman run; compose needs podman 4.7+)"
	@echo "    make demo: DEMO_RUN=$(DEMO_RUN) DEMO_ENVS=$(DEMO_ENVS) DEMO_DIR=$(DEMO_DIR)"
	@echo "    make try: TRY_DIR=$(TRY_DIR) DEVICE=$(DEVICE) CMD=$(or $(CMD),(empty: the tour))  (and MAPUSH_SRC, as make test)"
	@echo "    make dev: MAPUSH_DIR=$(or $(MAPUSH_DIR),(empty: required, your MAPush checkout)) CMD=$(or $(CMD),(empty: bash))"
	@echo "    HOST_UID=$(HOST_UID) HOST_GID=$(HOST_GID)  the container user (yours)"
	@echo "    COMPOSE_PROJECT_NAME=$(or $(COMPOSE_PROJECT_NAME),(empty: this folder's name))"
	@echo "    GPUS='$(GPUS)'  make train: one run across these GPUs (empty: GPU alone); make sweep: one cell a GPU (empty: every GPU)"
	@echo "    make sweep: SEEDS='$(SEEDS)' OBJECTS='$(OBJECTS)'"
	@echo "      NAME=$(or $(NAME),(empty: from the grid)) EXECUTOR=$(EXECUTOR) (local slurm)  SIF=$(SIF) APPTAINER=$(APPTAINER)"

# PYTHON as given, else (a name like python3.13 that pyenv's shims do not run because another
# version is the global one) the newest such build under pyenv.
_PYTHON_BIN = $(or $(shell $(PYTHON) -c 'import sys; print(sys.executable)' 2>/dev/null),$(lastword \
	$(sort $(wildcard $(or $(PYENV_ROOT),$(HOME)/.pyenv)/versions/$(patsubst python%,%,$(notdir $(PYTHON))).*/bin/python))))
$(VENV)/.stamp: env/requirements-test.txt env/harl-carrier.txt pyproject.toml
	@test -n "$(_PYTHON_BIN)" || { echo "error: PYTHON=$(PYTHON) is not a Python interpreter here (nor under pyenv): install it, or pass PYTHON=/path/to/python3.X (3.10 to 3.13)" >&2; exit 2; }
	@$(_PYTHON_BIN) -c 'import sys; sys.exit(not (3, 10) <= sys.version_info[:2] <= (3, 13))' || { echo "error: PYTHON=$(PYTHON) is Python $$($(_PYTHON_BIN) -c 'import platform; print(platform.python_version())'); the test venv needs 3.10 to 3.13: pass PYTHON=python3.11 (the image's Python 3.8 stack is make test-stack)" >&2; exit 2; }
	$(_PYTHON_BIN) -m venv $(VENV)
	$(VENV_PY) -m pip install -q --upgrade pip
	$(VENV_PY) -m pip install -q -r env/requirements-test.txt
	$(VENV_PY) -m pip download -q --no-deps --require-hashes --only-binary=:all: --python-version 3.11 \
	  -r env/harl-carrier.txt -d $(VENV)/wheels
	$(VENV_PY) -m pip install -q --no-deps -e .
	touch $@

.PHONY: venv
venv: $(VENV)/.stamp ## create the test virtualenv (.venv) from env/requirements-test.txt

.PHONY: test
test: $(VENV)/.stamp ## run the CPU test suite (no Docker, no GPU needed; the real-MQE tests are make test-real)
	$(WITH_MAPUSH_SRC) $(VENV_PY) -m pytest -n $(TEST_WORKERS) --dist loadfile -m '$(TEST_MARKERS)' $(PYTEST_ARGS)

.PHONY: test-real
test-real: $(VENV)/.stamp ## the slow real-MQE tests over the Isaac Gym stand-in (learning, equivalence traces; needs MAPUSH_SRC)
	OMP_NUM_THREADS=$${OMP_NUM_THREADS:-1} $(MAKE) test TEST_MARKERS=real_mqe

# The real-MQE tests (tests/standin) need MAPush at the pin: MAPUSH_SRC, else a tree fetched
# once into build/ as the image fetches it; without either they skip, saying why.
MAPUSH_SRC ?=
WITH_MAPUSH_SRC = mkdir -p build && src=$$(bash ci/mapush-src.sh '$(MAPUSH_REPO)' '$(MAPUSH_COMMIT)' \
	  build/mapush-$(MAPUSH_COMMIT) 2>build/.mapush-src.why) && \
	  MAPUSH_SRC="$$src" MAPUSH_SRC_MISSING="$$(cat build/.mapush-src.why)"

# make test-stack: the suite on the image's own stack: Python 3.8 and STACK's hashed lock,
# patched by patches/apply (ci/stack-venv.sh); torch from PyPI and the tests' double
# instead of Isaac Gym are the two substitutions, printed each run.
PYTHON38 ?= $(or $(lastword $(sort $(wildcard $(or $(PYENV_ROOT),$(HOME)/.pyenv)/versions/3.8*/bin/python))),$(shell command -v python3.8 2>/dev/null),python3.8)
STACK_VENV := build/stack-$(STACK)
HARL_WHEEL := $(VENV)/wheels/harl_aht-$(HARL_AHT_VERSION)-py3-none-any.whl

$(STACK_VENV)/.stamp: $(LOCK_FILE) ci/stack-venv.sh \
		$(wildcard patches/*/*) pyproject.toml $(VENV)/.stamp
	bash ci/stack-venv.sh '$(PYTHON38)' $(STACK_VENV) $(LOCK_FILE) $(TORCH_PYPI_VERSION) \
	  $(TORCHVISION_PYPI_VERSION) $(HARL_WHEEL)
	touch $@

.PHONY: stack
stack: $(STACK_VENV)/.stamp ## build the image's Python 3.8 stack (build/stack-STACK) that test-stack runs on

.PHONY: test-stack
test-stack: $(VENV)/.stamp $(STACK_VENV)/.stamp ## the suite on the image's Python 3.8 stack (STACK's lock)
	@echo "test-stack: STACK=$(STACK): Python 3.8 with $(LOCK_FILE) and our patches, as the image; substituted:"
	@echo "test-stack:   torch $(TORCH_VERSION) / torchvision $(TORCHVISION_VERSION) -> $(TORCH_PYPI_VERSION) / $(TORCHVISION_PYPI_VERSION) from PyPI (same API; runs on a CPU)"
	@echo "test-stack:   Isaac Gym -> the tests' stand-in (tests/standin), under MAPush's real MQE where MAPUSH_SRC is at hand; the MQE double elsewhere (as make test)"
	$(WITH_MAPUSH_SRC) MAPUSH_STACK=$(STACK) \
	  MAPUSH_PRISTINE_OPENRL=$(abspath $(STACK_VENV))/pristine/openrl \
	  $(STACK_VENV)/bin/python -m pytest $(PYTEST_ARGS)

# ---------------------------------------------------------------------------------------
# The training image. Every pin reaches the build as a --build-arg from env/pins.env.
_PIN_ARGS := STACK LOCK_FILE CUDA_BASE_IMAGE CUDA_VERSION PYTHON_VERSION TORCH_VERSION \
	TORCHVISION_VERSION TORCH_INDEX_URL OPENRL_VERSION GYMNASIUM_VERSION NUMPY_VERSION JSONARGPARSE_VERSION \
	MAPUSH_REPO MAPUSH_COMMIT HARL_REPO HARL_COMMIT ISAACGYM_TARBALL ISAACGYM_VERSION
# podman: Docker's image format, whose SHELL (bash, pipefail) OCI's drops
DOCKER_BUILD = $(DOCKER) build --file docker/Dockerfile --tag $(IMAGE) \
	$(if $(findstring podman,$(notdir $(DOCKER))),--format docker) \
	$(foreach pin,$(_PIN_ARGS),--build-arg $(pin)=$($(pin))) \
	--build-arg HOST_UID=$(HOST_UID) --build-arg HOST_GID=$(HOST_GID) \
	--build-arg ISAACGYM_TARBALL_DIGEST=$$(sha256sum $(ISAACGYM_CONTEXT)/$(ISAACGYM_TARBALL) | cut -c1-64) \
	--build-context isaacgym=$(ISAACGYM_CONTEXT) $(BUILD_ARGS) .
# Stage the tarball alone in the context folder: a hard link, or a copy across file systems.
STAGE_TARBALL = mkdir -p $(ISAACGYM_CONTEXT) && rm -f $(ISAACGYM_CONTEXT)/* && \
	{ ln -L $(ISAACGYM_TARBALL_PATH) $(ISAACGYM_CONTEXT)/$(ISAACGYM_TARBALL) 2>/dev/null || \
	cp $(ISAACGYM_TARBALL_PATH) $(ISAACGYM_CONTEXT)/$(ISAACGYM_TARBALL); }
# Before any layer when `make train` builds a missing image: the tarball and BuildKit.
CHECK_TARBALL = { test -f $(ISAACGYM_TARBALL_PATH) || { echo "$(_TARBALL_MSG)" >&2; exit 2; }; } && \
	$(HOST_CHECK) tarball $(ISAACGYM_TARBALL_PATH) $(ISAACGYM_TARBALL_SHA256) && \
	$(HOST_CHECK) buildkit

.PHONY: build
build: ## build the training image IMAGE (needs the Isaac Gym tarball, see vendor/README.md)
	$(STAGE_TARBALL)
	$(DOCKER_BUILD)

.PHONY: image
image: ## build the training image only if IMAGE does not exist yet
	@if ! $(DOCKER) image inspect $(IMAGE) >/dev/null 2>&1; then \
	  $(CHECK_TARBALL) && $(STAGE_TARBALL) && $(DOCKER_BUILD); fi

.PHONY: runs-dir
runs-dir: ## create runs/ as you before Docker mounts it (Docker would create it owned by root)
	@$(HOST_CHECK) runs-dir runs $(HOST_UID)

.PHONY: compose-check
compose-check: ## check that Docker Compose v2 is installed (every compose target does first)
	@echo "Docker Compose v2: $$($(DOCKER) compose version --short 2>/dev/null || echo ok)"

.PHONY: train
# GPUS="0 1": one run across these host GPUs (the container gets them, numbered from 0 inside)
_COMMA := ,
_GPU_LIST = $(subst $() ,$(_COMMA),$(strip $(GPUS)))
_INNER_GPUS = $(shell seq -s, 0 $$(( $(words $(GPUS)) - 1 )))
train: image runs-dir ## train: mapush train with ALGO TASK OBJECT NUM_ENVS SEED [STEPS RUN_DIR GPUS EXTRA]
	$(if $(GPUS),GPU=$(_GPU_LIST)) $(COMPOSE) run --rm train mapush train --algo $(ALGO) --task $(TASK) --object $(OBJECT) \
	  --num-envs $(NUM_ENVS) --seed $(SEED)$(if $(STEPS), --steps $(STEPS))$(if $(RUN_DIR), --run-dir $(RUN_DIR))$(if $(MID), --command-net $(MID))$(if $(GPUS), --gpus $(_INNER_GPUS)) $(EXTRA)

# A resume takes everything from the run's config.json: no Make default reaches it.
.PHONY: resume
resume: image runs-dir ## continue RUN=runs/... as it recorded it [STEPS=N: a new target; EXTRA]
	$(COMPOSE) run --rm train mapush train --resume $(RUN)$(if $(STEPS), --steps $(STEPS)) $(EXTRA)

.PHONY: eval
eval: image ## evaluate every checkpoint of RUN=runs/... (writes RUN/eval.jsonl)
	$(COMPOSE) run --rm train mapush eval --run $(RUN) $(EXTRA)

# make demo: MAPush working within minutes of the build, before any training of yours.
DEMO_RUN ?= 10-15-23_cuboid
DEMO_ENVS ?= 20
DEMO_DIR ?= runs/demo
_DEMO_CKPT = /opt/mapush/results/$(DEMO_RUN)
.PHONY: demo
demo: image runs-dir ## a first success in minutes: the authors' DEMO_RUN policy evaluated on DEMO_ENVS envs, a video and the report, in DEMO_DIR
	@start=$$(date +%s); mkdir -p $(DEMO_DIR) && \
	echo "demo: evaluating the authors' $(DEMO_RUN) policy on $(DEMO_ENVS) envs" && \
	$(COMPOSE) run --rm train mapush eval --checkpoint $(_DEMO_CKPT) --num-envs $(DEMO_ENVS) \
	  > $(DEMO_DIR)/eval.json && \
	echo "demo: recording 2 episodes of env 0" && \
	$(COMPOSE) run --rm train mapush eval --checkpoint $(_DEMO_CKPT) --video --episodes 2 \
	  --out $(DEMO_DIR)/videos && \
	$(COMPOSE) run --rm train mapush report $(_DEMO_CKPT) --out $(DEMO_DIR)/report && \
	echo "demo: success rate $$(sed -n 's/.*"success_rate": *\([0-9.]*\).*/\1/p' \
	  $(DEMO_DIR)/eval.json | tail -n 1) over $(DEMO_ENVS) envs ($(DEMO_DIR)/eval.json);" \
	  "videos in $(DEMO_DIR)/videos/" && \
	echo "demo: open $(DEMO_DIR)/report/index.html (took $$(( $$(date +%s) - start )) s)"

# make try: the whole method on a CPU (DEVICE=cuda:0: a GPU), over the tests' Isaac Gym
# stand-in; CMD="mapush ...": that command over it instead of the tour (no GPU, no image,
# no tarball; labelled in each run's record and report: no result of MAPush).
TRY_DIR ?= runs/try
.PHONY: try
DEVICE ?= cpu
try: $(VENV)/.stamp ## no GPU: the whole method in minutes on the CPU over the tests' Isaac Gym stand-in (not a result), reports in TRY_DIR; CMD="mapush ...": your command over it
	$(WITH_MAPUSH_SRC) $(VENV_PY) tests/standin/try.py --dir $(TRY_DIR) --device $(DEVICE)$(if $(CMD), --cmd '$(subst ','"'"',$(CMD))')

.PHONY: video
video: image ## record env 0 of CHECKPOINT (default: RUN's newest) into RUN/videos/*.mp4
	$(COMPOSE) run --rm train mapush eval --checkpoint $(or $(CHECKPOINT),$(RUN)) --video $(EXTRA)

.PHONY: export
export: image ## RUN's newest checkpoint (or CHECKPOINT) as TorchScript + ONNX into RUN/export/
	$(COMPOSE) run --rm train mapush export $(if $(CHECKPOINT),--checkpoint $(CHECKPOINT),--run $(RUN)) $(EXTRA)

# make report runs on the host: no image, no GPU, no Docker. HOST_VENV is a virtualenv with
# this checkout installed by pip (pyproject.toml's dependencies: matplotlib, tqdm, ...).
HOST_VENV ?= build/host-venv
$(HOST_VENV)/.stamp: pyproject.toml
	$(_PYTHON_BIN) -m venv $(HOST_VENV)
	$(HOST_VENV)/bin/python -m pip install -q --upgrade pip
	$(HOST_VENV)/bin/python -m pip install -q -e .
	touch $@

.PHONY: host-venv
host-venv: $(HOST_VENV)/.stamp ## HOST_VENV: mapush with its host dependencies (pip install -e .)

.PHONY: report
report: $(HOST_VENV)/.stamp ## RUN/report/index.html: curves, eval metrics, videos and config of RUN (on the host)
	$(HOST_VENV)/bin/mapush report $(RUN) $(EXTRA)

# A sweep runs on the host (plain Python 3, this checkout's mapush): each cell is a
# `docker compose run` of the training service with only its GPU (GPU=N), one per GPU.
SWEEP_RUNNER = env GPU={gpu} $(COMPOSE) run --rm train mapush
SWEEP_ARGS = --seeds "$(SEEDS)" --objects "$(OBJECTS)" --algo "$(ALGO)" \
	$(if $(GPUS),--gpus "$(GPUS)") $(if $(NAME),--name $(NAME)) --executor $(EXECUTOR)

.PHONY: sweep
sweep: image runs-dir ## a grid of runs: SEEDS x OBJECTS x ALGO, one per GPU of GPUS (or EXECUTOR=slurm)
	$(PYTHON) -m mapush sweep $(SWEEP_ARGS) --runner '$(SWEEP_RUNNER)' $(EXTRA)

.PHONY: sweep-report
sweep-report: image ## mean and std over seeds of sweep NAME -> runs/sweeps/NAME/report/
	$(COMPOSE) run --rm train mapush sweep --report --name $(NAME) $(EXTRA)

.PHONY: sif
sif: image ## SIF=mapush.sif: the training image as an Apptainer/Singularity image (for Slurm)
	@command -v $(APPTAINER) >/dev/null || { echo "error: $(APPTAINER) is not installed (https://apptainer.org/docs/admin/main/installation.html; Singularity works too: make sif APPTAINER=singularity)" >&2; exit 2; }
	$(APPTAINER) build $(SIF) docker-daemon://$(IMAGE)

.PHONY: pipeline
pipeline: image runs-dir ## the whole method for OBJECT: mid level, eval, high level on the best, eval
	$(COMPOSE) run --rm train mapush pipeline --object $(OBJECT) --num-envs $(NUM_ENVS) \
	  --seed $(SEED) $(EXTRA)

.PHONY: reproduce
reproduce: image runs-dir ## the authors' checkpoints evaluated beside their table -> runs/reproduce/table.md
	$(COMPOSE) run --rm train mapush reproduce $(EXTRA)

.PHONY: doctor
doctor: ## check the host (driver, GPU, Container Toolkit, Docker, tarball, disk), then Isaac Gym, patches and MAPush in the image once it is built
	@rc=0; $(_HOST_ENV) $(HOST_CHECK) host '$(IMAGE)' '$(ISAACGYM_TARBALL_PATH)' \
	  '$(ISAACGYM_TARBALL_SHA256)' || rc=$$?; \
	if [ $$rc = 3 ]; then exit 0; elif [ $$rc != 0 ]; then exit $$rc; fi; \
	$(COMPOSE) run --rm doctor mapush doctor --num-envs $(NUM_ENVS)

.PHONY: smoke-test
smoke-test: image runs-dir ## short end-to-end GPU check; report in runs/smoke/report.json
	$(COMPOSE) run --rm smoke-test

.PHONY: shell
shell: image runs-dir ## a bash shell in the training container (GPU, runs/ mounted)
	$(COMPOSE) run --rm train bash

# Your own variant of MAPush: your checkout, mounted read-only, is copied into the container
# and patched there at each start (docker/dev-tree.py; a patch that does not apply is one
# line naming it), and used instead of the image's /opt/mapush; runs record it.
.PHONY: dev
dev: image runs-dir ## MAPUSH_DIR=../MAPush: a shell (or CMD='mapush train ...') on your MAPush checkout, patched
	@# MAPUSH_DIR reaches the shell as the environment variable make exports, never as
	@# recipe text: a quote or a semicolon in its path is a character of the path
	$(COMPOSE) run --rm -v "$$(cd -- "$$MAPUSH_DIR" && pwd -P):/mnt/mapush-src:ro" \
	  -e MAPUSH_DEV_SRC=/mnt/mapush-src train $(or $(CMD),bash)

.PHONY: tensorboard
tensorboard: runs-dir ## TensorBoard over runs/ at http://127.0.0.1:TENSORBOARD_PORT (no GPU needed)
	@if [ "$$($(DOCKER) image inspect --format '{{ index .Config.Labels "org.mapush.inputs" }}' \
	  $(TENSORBOARD_IMAGE) 2>/dev/null)" != "$(TENSORBOARD_INPUTS)" ]; then \
	  echo "building $(TENSORBOARD_IMAGE) (missing, or its Dockerfile, lock or base changed)"; \
	  TENSORBOARD_INPUTS=$(TENSORBOARD_INPUTS) $(COMPOSE) build tensorboard; fi
	$(COMPOSE) up --detach --no-build tensorboard
	@echo "TensorBoard: http://127.0.0.1:$(TENSORBOARD_PORT)  (stop: make tensorboard-stop)"

.PHONY: tensorboard-stop
tensorboard-stop: ## stop the TensorBoard service
	$(COMPOSE) stop tensorboard

# The rehearsal build (docs/image-check.md): docker/Dockerfile as committed, with podman, on a
# machine without a GPU, a CUDA base, PyTorch's index or GitHub; then the image run.
.PHONY: image-check
image-check: $(VENV)/.stamp ## build docker/Dockerfile here with podman (REHEARSAL_* pins) and run the stack's tests, a training run, eval, report and TensorBoard in it (MAPUSH_SRC)
	$(WITH_MAPUSH_SRC) bash ci/image-check.sh all

.PHONY: test-image
test-image: $(VENV)/.stamp ## check the invariants of the built image IMAGE (tests/image)
	IMAGE=$(IMAGE) $(VENV_PY) -m pytest tests/image -m image $(PYTEST_ARGS)

.PHONY: bench
bench: $(VENV)/.stamp ## quick benchmark of our layer (benchmarks/run.py --quick)
	$(VENV_PY) benchmarks/run.py --quick

.PHONY: lock
lock: $(VENV)/.stamp ## re-lock both stacks' locks and env/tensorboard.lock (hashed) from env/*.in
	mkdir -p build
	printf '%s\n' openrl==$(OPENRL_VERSION) gymnasium==$(GYMNASIUM_VERSION) \
	  numpy==$(NUMPY_VERSION) jsonargparse==$(JSONARGPARSE_VERSION) > build/lock-constraints.txt
	printf '%s\n' "torch ; sys_platform == 'never'" "torchvision ; sys_platform == 'never'" \
	  > build/lock-overrides.txt
	$(VENV)/bin/uv pip compile --quiet --python-version $(PYTHON_VERSION) \
	  --python-platform x86_64-manylinux_2_31 --generate-hashes --custom-compile-command 'make lock' \
	  --no-emit-package torch --no-emit-package torchvision \
	  -c build/lock-constraints.txt --override build/lock-overrides.txt \
	  env/requirements.in -o $(_LOCK_CU116)
	printf '%s\n' torch==$(CU121_TORCH_PYPI_VERSION) torchvision==$(CU121_TORCHVISION_PYPI_VERSION) \
	  > build/lock-torch-cu121.txt
	$(VENV)/bin/uv pip compile --quiet --python-version $(PYTHON_VERSION) \
	  --python-platform x86_64-manylinux_2_31 --generate-hashes --custom-compile-command 'make lock' \
	  --no-emit-package torch --no-emit-package torchvision -c build/lock-constraints.txt \
	  env/requirements.in build/lock-torch-cu121.txt -o $(CU121_LOCK_FILE)
	sed -n 's/^\(tensorboard==[^ ]*\).*/\1/p; s/^\(numpy==[^ ]*\).*/\1/p' $(_LOCK_CU116) \
	  > build/tensorboard-constraints.txt
	$(VENV)/bin/uv pip compile --quiet --python-version 3.11 \
	  --python-platform x86_64-manylinux_2_31 --generate-hashes --custom-compile-command 'make lock' \
	  -c build/tensorboard-constraints.txt env/tensorboard.in -o env/tensorboard.lock

.PHONY: clean
clean: ## remove build outputs and caches (keeps runs/, vendor/ and the images)
	rm -rf build .pytest_cache
	find . -path ./.venv -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +
