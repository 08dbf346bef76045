"""Coverage of MAPush's MQE in the children of the real-MQE tests (tests/mqe_coverage.py).

On PYTHONPATH only when ``MAPUSH_MQE_COVERAGE`` is set (``tests.conftest.real_env``): every
Python process started then measures itself under ``COVERAGE_PROCESS_START``'s rc file, and
saves its data also when it ends by ``os._exit``, as mapush's children do
(mapush/common/leave.py), which skips the atexit hook coverage.py saves from."""
import os

if os.environ.get("COVERAGE_PROCESS_START"):
    import coverage

    _COVERAGE = coverage.process_startup()
    if _COVERAGE is not None:
        _exit = os._exit

        def _save_then_exit(code):
            try:
                _COVERAGE.stop()
                _COVERAGE.save()
            finally:
                _exit(code)

        os._exit = _save_then_exit
