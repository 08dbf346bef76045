"""Which of MQE's step graphs a run replays (patches/mapush/07-09), in its record.

Patches 07, 08 and 09 replay parts of MQE's step as CUDA graphs, and fall back to the eager
step (the same results, slower) when a capture fails. Which happened is part of what ran:
:func:`watch` waits the few steps the captures take, then writes ``<run>/step.json`` and
says one line on stderr, before the first progress line; ``mapush runs`` and the report
read the file."""
import re
import sys
from pathlib import Path
from typing import Any, Dict, Optional

from mapush.common.atomic import write_json

STEP_RECORD = "step.json"
# the graphs: where each lives (the mid wrapper, or MQE's env under it), its attribute, and
# the env's method that says whether this task's path allows it (08: not with pushed robots
# or received goals, as the high level's; 09: only the actuator net's control)
GRAPHS = (("07", False, "_graph", None), ("08", True, "_core_graph", "_core_graph_allowed"),
          ("09", True, "_torques_graph", "_torques_graph_allowed"))
# 07 captures on the 2nd step, 08 on its 2nd call, 09 on its 9th (4 physics substeps a step)
SETTLED_AFTER = 5


def _plain(failure: str) -> str:
    """``what failed (in which function)`` from a patch's record of a failed capture: its
    first line names the graph, the rest is the exception's traceback."""
    text = failure.partition("\n")[2]
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    syncing = re.search(r"synchroniz|stream is capturing|not permitted", text, re.I)
    kind = "a host sync or copy inside the capture" if syncing else (lines or ["?"])[-1]
    script = text.partition("Traceback of TorchScript")[2]
    if script:  # the outermost TorchScript function (Isaac Gym's torch_utils, say)
        frames = re.findall(r", in (\w+)\s*$", script, re.M)[:1]
    else:  # the innermost frame in MQE's code
        frames = [name for path, name in re.findall(r'File "([^"]+)", line \d+, in (\w+)', text)
                  if "/mqe/" in path][-1:]
    return kind + (" (%s)" % frames[0] if frames else "")


def graph_report(env: Any) -> Dict[str, str]:
    """``{graph: state}`` of the patches' graphs in this env: ``captured``, ``waiting`` (not
    captured yet), ``eager: <why>`` or ``off: <what failed>``; a graph that is not in this
    tree or task (the high level has no mid wrapper) is left out."""
    report = {}
    for name, inner, attr, allowed in GRAPHS:
        layer = getattr(env, "env", None) if inner else env
        attrs = getattr(layer, "__dict__", {})
        if "graph_step" not in attrs:
            continue
        failure = attrs.get("_graph_failure")
        if attrs.get(attr) is not None:
            report[name] = "captured"
        elif not attrs.get("fast_step", True):
            report[name] = "eager: mqe_fast_step is false"
        elif failure:
            report[name] = "off: " + _plain(failure)
        elif not attrs["graph_step"]:
            report[name] = "eager: no CUDA graphs on the CPU pipeline"
        elif allowed and not getattr(layer, allowed)():
            report[name] = "eager: this task's path is not capturable"
        else:
            report[name] = "waiting"
    return report


def describe(report: Dict[str, str]) -> str:
    """One plain line: ``MQE's step: graphs 07, 08, 09 captured`` or ``MQE graph 08 off:
    a host sync or copy inside the capture (get_euler_xyz)``, the first problem first."""
    off = [(k, v) for k, v in report.items() if v.startswith("off: ")]
    if off:
        return "MQE graph %s off: %s" % (off[0][0], off[0][1][len("off: "):])
    captured = [k for k, v in report.items() if v == "captured"]
    rest = ["%s %s" % (k, v) for k, v in report.items() if v != "captured"]
    parts = (["graphs %s captured" % ", ".join(captured)] if captured else []) + rest
    return "MQE's step: " + ("; ".join(parts) if parts else "no step graphs in this tree")


def short(record: Optional[Dict[str, Any]]) -> str:
    """``mapush runs``' cell: ``07+08+09``, ``eager``, ``08 off`` or ``-``."""
    graphs = (record or {}).get("graphs") or {}
    if not isinstance(graphs, dict) or not graphs:
        return "-"
    off = [k for k, v in graphs.items() if str(v).startswith("off")]
    if off:
        return "%s off" % "+".join(off)
    captured = [k for k, v in graphs.items() if v == "captured"]
    return "+".join(captured) if len(captured) == len(graphs) else \
        "eager" if not captured else "+".join(captured) + " (rest eager)"


def record(env: Any, run_dir: Path, steps: int) -> str:
    """Write ``<run>/step.json`` (atomic) and say its line on stderr."""
    report = graph_report(env)
    line = describe(report)
    write_json(Path(run_dir) / STEP_RECORD, {"graphs": report, "line": line,
                                            "after_steps": steps})
    print("mapush: " + line, file=sys.stderr, flush=True)
    return line


def watch(env: Any, run_dir: Path, after: int = SETTLED_AFTER) -> None:
    """Record the env's step graphs once ``after`` of its steps have run (then step as
    before: the instance's own ``step`` is put back)."""
    step = env.step
    count = [0]

    def counted(*args: Any, **kwargs: Any) -> Any:
        out = step(*args, **kwargs)
        count[0] += 1
        if count[0] >= after:
            del env.step
            record(env, run_dir, count[0])
        return out

    env.step = counted
