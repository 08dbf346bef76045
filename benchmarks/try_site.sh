#!/bin/bash
# Sourced by the device calls that run `make try`'s stand-in world on the GPU machine
# (try_gpu_call.sh, oracle_call.sh): the device has no network, so the carried wheels (.whl)
# go into $W/whl, MAPush at the pin is unpacked into $W/MAPush, and the patched OpenRL/HARL
# site (.bench_site) is put where tests/standin/try.py keeps its own, stamped as try.py
# stamps it. Needs W (a fresh folder) set; exits on a failure.
python3 -m pip install -q --no-index --no-deps --no-compile --target "$W/whl" .whl/*.whl || exit 1
export PYTHONPATH=$W/whl
tar -xzf .bench_site/mapush-0e61e1b.tar.gz -C "$W" || exit 1
mkdir -p "$W/work/upstream" && cp -r .bench_site/site .bench_site/records "$W/work/upstream/"
python3 -c "import importlib, sys; sys.path.insert(0, 'tests/standin')
print(importlib.import_module('try').site_stamp(), end='')" > "$W/work/upstream/.stamp" || exit 1
