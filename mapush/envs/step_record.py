"""Which of MQE's step graphs a run replays (patches/mapush/07-09, 12), in its record.

Patches 07, 08, 09 and 12 replay parts of MQE's step as CUDA graphs, and fall back to the eager
step (the same results, slower) when a capture fails. Which happened is part of what ran:
:func:`watch` waits the few steps the captures take, then writes ``<run>/step.json`` and
says one line on stderr, before the first progress line; ``mapush runs`` and the report
read the file."""
import sys
from pathlib import Path
from typing import Any, Dict, Optional

from mapush.common.atomic import write_json
from mapush.sim import graph_report

STEP_RECORD = "step.json"
# 12 captures on the 1st step, 07 on the 2nd, 08 on its 2nd call, 09 on its 9th (4 substeps)
SETTLED_AFTER = 5


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


def record(env: Any, run_dir: Path, steps: int, made: Optional[Dict[str, Any]] = None) -> str:
    """Write ``<run>/step.json`` (atomic), with OpenRL's act graph's state, and its line."""
    report = graph_report(env)
    state = getattr((made or {}).get("driver"), "act_graph_state", None)  # openrl/04's, or None
    on = state and not state.startswith("eager")  # (act_graph false: in the file, not the line)
    line = describe(report) + ("; OpenRL's act: %s" % state if on else "")
    write_json(Path(run_dir) / STEP_RECORD, {"graphs": report, "line": line,
                                            "after_steps": steps, "act": state})
    print("mapush: " + line, file=sys.stderr, flush=True)
    return line


def watch(env: Any, run_dir: Path, made: Optional[Dict[str, Any]] = None,
          after: int = SETTLED_AFTER) -> None:
    """:func:`record` once ``after`` env steps have run, then step as before (``step`` put back)."""
    step = env.step
    count = [0]

    def counted(*args: Any, **kwargs: Any) -> Any:
        out = step(*args, **kwargs)
        count[0] += 1
        if count[0] >= after:
            del env.step
            record(env, run_dir, count[0], made)
        return out

    env.step = counted
