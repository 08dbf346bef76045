#!/usr/bin/env bash
# The rehearsal's Isaac Gym tarball: the tests' stand-in (tests/standin/isaacgym, no PhysX)
# laid out as NVIDIA's IsaacGym_Preview_4_Package.tar.gz is, so docker/install-isaacgym.sh,
# docker/prebuild_gymtorch.py and docker/host-check.sh's layout check take it as they take
# the real one:
#   isaacgym/python/setup.py                       (ours: version VERSION, e.g. 0+stand.in)
#   isaacgym/python/isaacgym/...                   (the stand-in package)
#   isaacgym/python/isaacgym/_bindings/src/gymtorch/gymtorch.cpp   (ours: a torch extension)
#   isaacgym/python/isaacgym/_bindings/linux-x86_64/gym_38.so      (ours, compiled: it
#       serves the stand-in's gym_38 module, renamed _gym_38.py, under the real name)
#   isaacgym/docker/{nvidia_icd.json,10_nvidia.json}              (ours: the ICD files)
# Nothing of NVIDIA's is in it.
# usage: ci/rehearsal/isaacgym-tarball.sh PYTHON38 VERSION OUT.tar.gz
set -euo pipefail

if [ "$#" -ne 3 ]; then
    echo "usage: $0 PYTHON38 VERSION OUT.tar.gz" >&2
    exit 2
fi
python=$1 version=$2 out=$3
repo=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
top=$work/isaacgym
pkg=$top/python/isaacgym
mkdir -p "$top/python" "$top/docker"
cp -r "$repo/tests/standin/isaacgym" "$pkg"
find "$pkg" -name __pycache__ -prune -exec rm -rf {} +

cat >"$top/python/setup.py" <<PY
"""The Isaac Gym stand-in as a package (the rehearsal's tarball; tests/standin/README.md)."""
from setuptools import find_packages, setup

setup(name="isaacgym", version="$version", packages=find_packages(),
      package_data={"isaacgym": ["_bindings/linux-x86_64/*.so"]},
      description="the tests' Isaac Gym stand-in: no PhysX, no result")
PY

bindings=$pkg/_bindings/linux-x86_64
mv "$bindings/gym_38.py" "$bindings/_gym_38.py"
# its classes pickle under the real module's name, as the authors' checkpoints name them
printf '\nfor _cls in (SimType,):\n    _cls.__module__ = __name__.replace("._gym_38", ".gym_38")\n' \
    >>"$bindings/_gym_38.py"
cat >"$work/gym_38.c" <<'C'
/* gym_38 of the rehearsal's tarball: an extension module holding the stand-in's _gym_38. */
#include <Python.h>
static struct PyModuleDef gym_38 = {PyModuleDef_HEAD_INIT, "gym_38", NULL, -1, NULL};
PyMODINIT_FUNC PyInit_gym_38(void) {
    PyObject *module = PyModule_Create(&gym_38), *key, *value;
    PyObject *source = PyImport_ImportModule("isaacgym._bindings.linux-x86_64._gym_38");
    Py_ssize_t pos = 0;
    if (module == NULL || source == NULL) return NULL;
    while (PyDict_Next(PyModule_GetDict(source), &pos, &key, &value)) {
        if (PyUnicode_Tailmatch(key, PyUnicode_FromString("__"), 0, 2, -1)) continue;
        if (PyModule_AddObject(module, PyUnicode_AsUTF8(key), value) < 0) return NULL;
        Py_INCREF(value);
    }
    Py_DECREF(source);
    return module;
}
C
include=$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
gcc -shared -fPIC -O1 -I"$include" "$work/gym_38.c" -o "$bindings/gym_38.so"

mkdir -p "$pkg/_bindings/src/gymtorch"
cat >"$pkg/_bindings/src/gymtorch/gymtorch.cpp" <<'CPP'
// gymtorch of the rehearsal's tarball: an empty torch extension, compiled at build time as
// Isaac Gym's own gymtorch.cpp is (docker/prebuild_gymtorch.py); the stand-in's gymtorch.py
// does not load it.
#include <torch/extension.h>

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.attr("stand_in") = true;
}
CPP

cat >"$top/docker/nvidia_icd.json" <<'JSON'
{"file_format_version": "1.0.0", "ICD": {"library_path": "libGLX_nvidia.so.0", "api_version": "1.2.155"}}
JSON
cat >"$top/docker/10_nvidia.json" <<'JSON'
{"file_format_version": "1.0.0", "ICD": {"library_path": "libEGL_nvidia.so.0"}}
JSON

mkdir -p "$(dirname "$out")"
tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$work" -cf - isaacgym | gzip -n >"$out.part"
mv "$out.part" "$out"
echo "rehearsal: $out: the Isaac Gym stand-in in Preview 4's layout, version $version"
