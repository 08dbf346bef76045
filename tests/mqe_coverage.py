"""Statement coverage of MAPush's MQE (the patched tree) by the real-MQE tests, children
included, as CI prints it (#48):

    MAPUSH_MQE_COVERAGE=DIR pytest -m real_mqe ...   # tests.conftest.real_env measures
    python tests/mqe_coverage.py DIR                 # combines, prints, exit 0

The core is the go1push path: the env, its base classes, the NPCs, both wrappers and the RRT
planner. Each core file's lines left out are listed. Needs coverage.py (the stack's venv has
it: ci/stack-venv.sh)."""
import json
import sys
from pathlib import Path

import coverage
from coverage.results import format_lines

CORE = ("mqe/envs/go1/go1.py", "mqe/envs/base/legged_robot.py", "mqe/envs/base/base_task.py",
        "mqe/envs/field/legged_robot_field.py", "mqe/envs/npc/go1_object.py",
        "mqe/envs/wrappers/go1_push_mid_wrapper.py",
        "mqe/envs/wrappers/go1_push_upper_wrapper.py", "mqe/envs/wrappers/utils/rrt.py",
        "mqe/envs/wrappers/utils/trajectory.py", "mqe/envs/utils_dist.py")


def rcfile(folder: Path, tree: Path) -> Path:
    """The rc file every measured process reads (COVERAGE_PROCESS_START)."""
    folder.mkdir(parents=True, exist_ok=True)
    rc = folder / "coveragerc"
    rc.write_text("[run]\nparallel = True\ndata_file = %s\nsource = %s\n"
                  % (folder / ".coverage", tree / "mqe"))
    (folder / "tree.json").write_text(json.dumps({"tree": str(tree)}))
    return rc


def main(folder: str) -> int:
    folder = Path(folder)
    tree = Path(json.loads((folder / "tree.json").read_text())["tree"])
    cov = coverage.Coverage(data_file=str(folder / ".coverage"),
                            config_file=str(folder / "coveragerc"))
    cov.combine(data_paths=[str(folder)], keep=True)
    cov.save()
    total_run = total_all = 0
    core_run = core_all = 0
    rows, statements_of = [], {}
    for path in sorted(cov.get_data().measured_files()):
        if tree not in Path(path).parents:  # a test's own copy of the tree (none expected)
            continue
        _, statements, _, missing, _ = cov.analysis2(path)
        name = str(Path(path).relative_to(tree))
        total_run += len(statements) - len(missing)
        total_all += len(statements)
        statements_of[name] = statements
        if name in CORE:
            core_run += len(statements) - len(missing)
            core_all += len(statements)
            rows.append((name, len(statements), missing))
    for name in CORE:  # a core file no test imported
        if name not in [row[0] for row in rows]:
            rows.append((name, None, []))
    print("mqe coverage: core %.1f%% (%d of %d statements), all of mqe %.1f%% (%d of %d)"
          % (100.0 * core_run / max(core_all, 1), core_run, core_all,
             100.0 * total_run / max(total_all, 1), total_run, total_all))
    for name, count, missing in rows:
        if count is None:
            print("  %s: never imported" % name)
            continue
        print("  %s: %.1f%% of %d; left out: %s" % (
            name, 100.0 * (count - len(missing)) / max(count, 1), count,
            format_lines(statements_of[name], missing) if missing else "none"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
