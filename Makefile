# probench: the two README commands and a few helpers.
#   make demo   set-up, then the main job on the bundled sample (scripts/demo.sh)
#   make test   set-up, then the whole test suite
# Everything runs from the repo's .venv (made by scripts/setup.sh); nothing needs sourcing.

SHELL := /bin/bash
VENV ?= $(CURDIR)/.venv
PYTHON := $(VENV)/bin/python
PYTEST_ARGS ?=

# DDS stays on loopback: every target that can start rclpy runs with this (a test checks it).
ROS_ENV := ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST
# No model hub is reachable: fail fast instead of waiting on network timeouts.
OFFLINE_ENV := HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 YOLO_OFFLINE=1

.PHONY: setup demo test lint help

help:
	@echo "make setup | demo | test | lint"

setup:
	PROBENCH_VENV=$(VENV) scripts/setup.sh

demo: setup
	$(ROS_ENV) $(OFFLINE_ENV) PATH=$(VENV)/bin:$$PATH scripts/demo.sh

# pytest exit 5 (no tests collected) fails like any other failure, and says so.
test: setup
	@rc=0; $(ROS_ENV) $(OFFLINE_ENV) PATH=$(VENV)/bin:$$PATH $(PYTHON) -m pytest $(PYTEST_ARGS) || rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test: FAILED: no tests were collected (pytest exit 5)" >&2; fi; \
	exit $$rc

lint: setup
	$(VENV)/bin/ruff check src test bench launch
