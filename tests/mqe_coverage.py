"""Statement coverage of MAPush's MQE (the patched tree) by the real-MQE tests, children
included, as CI prints it (#48):

    MAPUSH_MQE_COVERAGE=DIR pytest -m real_mqe ...   # tests.conftest.real_env measures
    python tests/mqe_coverage.py DIR                 # combines, prints; exit 1 below 85%

The core is the go1push path: the env, its base classes, the NPCs, both wrappers and the RRT
planner. Two numbers are printed: the core's plain statement coverage, and the go1push path's,
which leaves out the lines that no go1push run can reach, each for a reason given in
``tests/mqe_coverage.yaml`` and checked:
- ``overridden``: a base class's method that the env class (``Go1Object``) overrides without
  ``super()`` on the way, found here from the source (``overridden``);
- ``holds``: an expression over ``self.cfg`` that holds in every go1push task config at the pin,
  evaluated by ``tests/test_real_mqe_coverage_reasons.py`` on the configs MQE builds;
- a written reason (the viewer, CUDA only), cited.
Every line that is not run and has no reason is listed as on the path; an entry of the YAML that
matches no line of the tree is an error. Needs coverage.py (the stack's venv: ci/stack-venv.sh)."""
import ast
import fnmatch
import functools
import json
import os
import sys
from pathlib import Path

import yaml

CORE = ("mqe/envs/go1/go1.py", "mqe/envs/base/legged_robot.py", "mqe/envs/base/base_task.py",
        "mqe/envs/field/legged_robot_field.py", "mqe/envs/npc/go1_object.py",
        "mqe/envs/wrappers/go1_push_mid_wrapper.py",
        "mqe/envs/wrappers/go1_push_upper_wrapper.py", "mqe/envs/wrappers/utils/rrt.py",
        "mqe/envs/wrappers/utils/trajectory.py", "mqe/envs/utils_dist.py")
# The env class of both go1push tasks (mqe/envs/utils.py: ENV_DICT) and its bases, in MRO order.
ENV_MRO = (("mqe/envs/npc/go1_object.py", "Go1Object"), ("mqe/envs/go1/go1.py", "Go1"),
           ("mqe/envs/field/legged_robot_field.py", "LeggedRobotField"),
           ("mqe/envs/base/legged_robot.py", "LeggedRobot"), ("mqe/envs/base/base_task.py", "BaseTask"))
THRESHOLD = 85.0
# A reason that starts so marks the GPU pipeline's lines (#79 item 6): on the path of every real
# GPU run, so counted on the go1push path, as not run (CI has no GPU), never left out of it.
GPU_ONLY = "CUDA only"


def off_and_gpu(groups: dict) -> tuple:
    """``(lines off the go1push path, its lines only the GPU pipeline runs)`` of one file's
    missing lines grouped by reason ("" for on the path, not run)."""
    gpu = sum(len(lines) for reason, lines in groups.items() if reason.startswith(GPU_ONLY))
    return sum(len(lines) for reason, lines in groups.items() if reason) - gpu, gpu
REASONS = Path(__file__).with_name("mqe_coverage.yaml")
# Outcomes the stand-in's world cannot produce (#79 item 5; tests/standin/README.md): its bodies
# keep their height and have no roll or pitch, so MQE's roll, pitch and z_wave terminations
# (legged_robot_field.py:148-163 at the pin) run every step and never trip. Their lines would
# count as covered; they are left out of the go1push path's figure instead, and printed.
UNPRODUCIBLE = {"mqe/envs/field/legged_robot_field.py": ("r_term_buff", "p_term_buff",
                                                          "z_wave_term_buff")}


def unproducible(tree: Path, name: str) -> set:
    """The statement lines of ``name`` that compute an outcome the world cannot produce."""
    words = UNPRODUCIBLE.get(name, ())
    lines = (tree / name).read_text().splitlines()
    return {n for n, text in enumerate(lines, 1) if any(w in text for w in words)}


def rcfile(folder: Path, tree: Path, worker: str = "") -> Path:
    """The rc file every process measured over ``tree`` reads (COVERAGE_PROCESS_START), in
    ``worker``'s own subfolder (default: this pytest-xdist worker's name, else ``main``): each
    worker has its own tree, and ``main`` combines them."""
    folder = folder / (worker or os.environ.get("PYTEST_XDIST_WORKER", "main"))
    folder.mkdir(parents=True, exist_ok=True)
    rc = folder / "coveragerc"
    rc.write_text("[run]\nparallel = True\ndata_file = %s\nsource = %s\n"
                  % (folder / ".coverage", tree / "mqe"))
    (folder / "tree.json").write_text(json.dumps({"tree": str(tree)}))
    return rc


def combined(folder: Path):
    """``(tree, data)``: every worker's measurements under ``folder``, their trees (copies of
    one) mapped onto the first worker's by coverage's ``[paths]``; None when none ran."""
    import coverage
    workers = sorted(p.parent for p in folder.glob("*/tree.json"))
    if not workers:
        return None
    trees = [json.loads((w / "tree.json").read_text())["tree"] for w in workers]
    rc = folder / "combine.rc"
    rc.write_text("[run]\ndata_file = %s\n[paths]\nmqe =\n%s" % (
        folder / ".coverage", "".join("    %s/mqe\n" % tree for tree in trees)))
    cov = coverage.Coverage(data_file=str(folder / ".coverage"), config_file=str(rc))
    cov.combine(data_paths=[str(w) for w in workers], keep=True)
    cov.save()
    return Path(trees[0]), cov


def places(source: str) -> dict:
    """line -> (qualified name of the innermost def, conditions of the enclosing ifs): an if's
    body under its test's text, its else under ``not TEXT``."""
    out = {}

    def walk(node, qual, conds):
        for child in ast.iter_child_nodes(node):
            if not hasattr(child, "lineno"):
                continue
            if isinstance(child, (ast.FunctionDef, ast.ClassDef)):
                inner = qual + "." + child.name if qual else child.name
                for line in range(child.lineno, child.end_lineno + 1):
                    out[line] = (inner, ())
                walk(child, inner, ())
            elif isinstance(child, ast.If):
                test = ast.get_source_segment(source, child.test)
                out[child.lineno] = (qual, conds)
                for branch, text in ((child.body, test), (child.orelse, "not " + test)):
                    for stmt in branch:
                        for line in range(stmt.lineno, stmt.end_lineno + 1):
                            out[line] = (qual, conds + (text,))
                        walk(ast.Module(body=[stmt], type_ignores=[]), qual, conds + (text,))
            else:
                for line in range(child.lineno, child.end_lineno + 1):
                    out.setdefault(line, (qual, conds))
                walk(child, qual, conds)
    walk(ast.parse(source), "", ())
    return out


@functools.lru_cache(maxsize=None)
def places_in(path: Path) -> dict:
    """:func:`places` of one file, parsed once however often it is asked."""
    return places(path.read_text())


def matches(entry: dict, place) -> bool:
    """Whether an entry of the YAML covers a place (its def's name, its if's condition)."""
    qual, conds = place
    return fnmatch.fnmatchcase(qual, entry["where"]) and ("if" not in entry or entry["if"] in conds)


def _methods(tree: Path, name: str, cls: str) -> dict:
    source = (tree / name).read_text()
    for node in ast.parse(source).body:
        if isinstance(node, ast.ClassDef) and node.name == cls:
            return {f.name: ast.get_source_segment(source, f) for f in node.body
                    if isinstance(f, ast.FunctionDef)}
    raise SystemExit("mqe coverage: %s has no class %s: ENV_MRO is stale" % (name, cls))


def overridden(tree: Path) -> dict:
    """(file, 'Class.method') -> the class whose override, without super(), hides it."""
    chain = [(name, cls, _methods(tree, name, cls)) for name, cls in ENV_MRO]
    hidden = {}
    for i, (name, cls, methods) in enumerate(chain):
        for method in methods:
            for _, before, earlier in chain[:i]:
                if method in earlier and "super()" not in earlier[method]:
                    hidden[(name, cls + "." + method)] = before
                    break
    return hidden


def entries(reasons=None):
    """The written and checked reasons of tests/mqe_coverage.yaml, each with its file."""
    reasons = reasons if reasons is not None else yaml.safe_load(REASONS.read_text())
    return [dict(entry, file=name) for name, listed in reasons.items() for entry in listed]


def reason_for(name: str, place, listed, hidden) -> str:
    qual = place[0]
    if (name, qual) in hidden:
        return "overridden by %s without super()" % hidden[(name, qual)]
    for entry in listed:
        if entry["file"] == name and matches(entry, place):
            return entry["reason"]
    return ""


def classify(tree: Path, name: str, missing, listed, hidden):
    """missing lines -> {reason: [lines]} ('' for on the path)."""
    where = places_in(tree / name)
    out = {}
    for line in missing:
        out.setdefault(reason_for(name, where.get(line, ("", ())), listed, hidden), []).append(line)
    return out


def stale(tree: Path, listed) -> list:
    """The entries that match no statement of the tree (a reason for code that is gone)."""
    gone = []
    for entry in listed:
        if not any(matches(entry, place) for place in places_in(tree / entry["file"]).values()):
            gone.append(entry)
    return gone


def main(folder: str) -> int:
    from coverage.results import format_lines
    found = combined(Path(folder))
    if found is None:
        print("mqe coverage: no real_mqe test ran in %s, so no MQE coverage to print" % folder)
        return 0
    tree, cov = found
    listed, hidden = entries(), overridden(tree)
    gone = stale(tree, listed)
    total = [0, 0]
    core, path = [0, 0], [0, 0]
    rows, gpu_lines, unproduced = {}, 0, 0
    for measured in sorted(cov.get_data().measured_files()):
        if tree not in Path(measured).parents:  # a test's own copy of the tree (none expected)
            continue
        _, statements, _, missing, _ = cov.analysis2(measured)
        name = str(Path(measured).relative_to(tree))
        total[0] += len(statements) - len(missing)
        total[1] += len(statements)
        if name in CORE:
            groups = classify(tree, name, missing, listed, hidden)
            off_path, gpu = off_and_gpu(groups)
            gpu_lines += gpu
            core[0] += len(statements) - len(missing)
            core[1] += len(statements)
            never = unproducible(tree, name) & (set(statements) - set(missing))
            unproduced += len(never)
            path[0] += len(statements) - len(missing) - len(never)
            path[1] += len(statements) - off_path - len(never)
            rows[name] = (statements, missing, groups, off_path)
    share = 100.0 * path[0] / max(path[1], 1)
    print("mqe coverage: go1push path %.1f%% (%d of %d statements; %d of those not run are the "
          "GPU pipeline's, on the path of every GPU run but not run in CI; %d not reachable on "
          "it, each with its reason in tests/mqe_coverage.yaml; %d run but left out: outcomes "
          "the stand-in cannot produce, roll, pitch and z_wave terminations); core %.1f%% (%d "
          "of %d); all of mqe %.1f%% (%d of %d)" % (
              share, path[0], path[1], gpu_lines, core[1] - path[1] - unproduced, unproduced,
              100.0 * core[0] / max(core[1], 1), core[0], core[1],
              100.0 * total[0] / max(total[1], 1), total[0], total[1]))
    for name in CORE:
        if name not in rows:
            print("  %s: never imported" % name)
            continue
        statements, missing, groups, off_path = rows[name]
        run = len(statements) - len(missing)
        print("  %s: path %.1f%% of %d, core %.1f%% of %d" % (
            name, 100.0 * run / max(len(statements) - off_path, 1), len(statements) - off_path,
            100.0 * run / max(len(statements), 1), len(statements)))
        for reason, lines in sorted(groups.items()):
            print("    %s: %s" % (reason or "ON THE PATH, NOT RUN",
                                  format_lines(statements, lines)))
    status = 0
    for entry in gone:
        print("mqe coverage: error: %s: the entry for %s%s matches no code of the tree; "
              "update tests/mqe_coverage.yaml" % (entry["file"], entry["where"],
                                                  " if " + entry["if"] if "if" in entry else ""))
        status = 1
    if share < THRESHOLD:
        print("mqe coverage: error: the go1push path's coverage %.1f%% is below %.0f%%"
              % (share, THRESHOLD))
        status = 1
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
