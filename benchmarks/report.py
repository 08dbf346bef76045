"""The short Markdown table of a benchmark result, with the issue's targets checked."""
from typing import Any, Dict, List

TARGET_ENVS = 500
TARGET_MS = 0.5
TARGET_SPEEDUP = 5.0
TARGET_SHARE_PCT = 5.0
TARGET_GROWTH_PCT = 1.0
OURS = ("harl", "openrl")
LABEL = {"harl": "our HARL", "openrl": "our OpenRL"}


def _ms(s: Dict[str, Any]) -> str:
    if not s or not s.get("n"):
        return "-"
    return "%.3f [%.3f-%.3f]" % (s["median"], s["min"], s["max"])


def _num(s: Dict[str, Any], fmt: str = "%.0f") -> str:
    if not s or not s.get("n"):
        return "-"
    return (fmt + " [" + fmt + "-" + fmt + "]") % (s["median"], s["min"], s["max"])


def _ok(flag: Any) -> str:
    return "-" if flag is None else ("PASS" if flag else "MISS")


def targets(result: Dict[str, Any]) -> List[List[str]]:
    rows = []
    sec = result.get("sections", {})
    row = sec.get("adapters", {}).get("sizes", {}).get(str(TARGET_ENVS))
    if row:
        for name in [k for k in OURS if k in row["cost_ms"]]:
            cost = row["cost_ms"].get(name, {}).get("median")
            speed = row.get("speedup_vs_seed", {}).get(name)
            rows.append(["%s adapter cost at %d envs < %.1f ms" % (name, TARGET_ENVS, TARGET_MS),
                         "-" if cost is None else "%.3f ms" % cost,
                         _ok(None if cost is None else cost < TARGET_MS)])
            rows.append(["%s adapter >= %.0fx cheaper than seed-style" % (name, TARGET_SPEEDUP),
                         "-" if speed is None else "%.1fx" % speed,
                         _ok(None if speed is None else speed >= TARGET_SPEEDUP)])
    for run in sec.get("train", {}).get("runs", []):
        if run.get("num_envs") == TARGET_ENVS and "layer_share_pct" in run:
            share = run["layer_share_pct"].get("median")
            rows.append(["%s: our layer < %.0f%% of loop wall time at %d envs (double %.0f us)"
                         % (run["algo"], TARGET_SHARE_PCT, TARGET_ENVS,
                            run.get("physics_us", 0)),
                         "-" if share is None else "%.2f%%" % share,
                         _ok(None if share is None else share < TARGET_SHARE_PCT)])
    for name, var in sec.get("memory", {}).get("variants", {}).items():
        if name == "seed" or "device_allocated_mb" not in var:
            continue
        worst = max(var[k]["growth_pct"] for k in ("device_allocated_mb", "device_reserved_mb",
                                                    "host_rss_mb"))
        rows.append(["%s: memory growth < %.0f%% over %d steps"
                     % (name, TARGET_GROWTH_PCT, sec["memory"]["steps"]),
                     "%.3f%%" % worst, _ok(worst < TARGET_GROWTH_PCT)])
    return rows


def _table(head: List[str], rows: List[List[str]]) -> List[str]:
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return out + [""]


def _by_function(runs: List[Dict[str, Any]], top: int = 4) -> List[str]:
    """Where our layer's time goes in the training runs at the target size."""
    rows = []
    for run in runs:
        funcs = run.get("layer_by_function_ms_per_step")
        if run.get("num_envs") != TARGET_ENVS or not funcs:
            continue
        rows.append([run["algo"], "%.0f" % run.get("physics_us", 0),
                     "; ".join("%s %.3f" % kv for kv in list(funcs.items())[:top])])
    if not rows:
        return []
    return (["Our layer at %d envs by outermost function, ms per env step after warm-up "
             "(the double's own time taken out):" % TARGET_ENVS, ""]
            + _table(["algo", "double physics us", "largest"], rows))


def failures(result: Dict[str, Any]) -> List[str]:
    """What did not run (a variant not built, a run that failed); missed targets are no
    failure. ``run.py`` exits 1 when this is not empty."""
    out = []
    sec = result.get("sections", {})
    for n, row in sec.get("adapters", {}).get("sizes", {}).items():
        out += ["adapters at %s envs: %s: %s" % (n, k, v) for k, v in row["skipped"].items()]
    for name, var in sec.get("memory", {}).get("variants", {}).items():
        if "skipped" in var:
            out.append("memory: %s: %s" % (name, var["skipped"]))
    pr = sec.get("profile", {})
    out += ["profile: %s: %s" % (k, a["skipped"]) for k, a in pr.get("adapters", {}).items()
            if "skipped" in a]
    if "skipped" in pr.get("stats_update_ms", {}):
        out.append("profile: EpisodeStats: %s" % pr["stats_update_ms"]["skipped"])
    for run in sec.get("train", {}).get("runs", []):
        if "error" in run or run.get("exit") != 0:
            out.append("train %s at %s envs: %s" % (run["algo"], run["num_envs"],
                                                    (run.get("error") or "exit %s"
                                                     % run.get("exit")).strip()[-300:]))
    for run in sec.get("startup", {}).get("runs", []):
        if "error" in run or not run.get("to_first_update_s"):
            out.append("startup %s: %s" % (run["algo"], (run.get("error") or
                                                        "no first update").strip()[-300:]))
    return out


def markdown(result: Dict[str, Any]) -> str:
    env = result.get("environment", {})
    sec = result.get("sections", {})
    up = env.get("upstream") or {}
    lines = ["# Adapter-layer benchmark", ""]
    if result.get("produced_by"):
        lines += ["Produced by: `%s` (see ../README.md)." % result["produced_by"], ""]
    lines += ["%s, driver %s; Python %s, torch %s (CUDA %s), numpy %s; openrl %s + %s; "
             "HARL (pin) + %s; commit %s; %s"
             % (env.get("gpu", env.get("device")), env.get("driver", "-"),
                env.get("python"), env.get("torch"), env.get("torch_cuda"), env.get("numpy"),
                up.get("openrl"), ", ".join(up.get("openrl_patches") or []),
                ", ".join(up.get("harl_patches") or []),
                (env.get("commit") or "?")[:12], env.get("date")), "",
              "Values: median [min-max] over repetitions.", ""]
    rows = targets(result)
    if rows:
        lines += ["## Targets", ""] + _table(["target", "measured", ""], rows)
    ad = sec.get("adapters")
    if ad:
        lines += ["## (a) Adapter cost per env step, ms (minus the double + one sync)", ""]
        ours = [k for k in OURS if any(k in row["cost_ms"] for row in ad["sizes"].values())]
        rows = []
        for n, row in ad["sizes"].items():
            rows.append([n, _ms(row["step_ms"].get("double_sync", {})),
                         _ms(row["cost_ms"].get("seed", {}))]
                        + ["%s (%s)" % (_ms(row["cost_ms"].get(k, {})),
                                        "%.1fx" % row["speedup_vs_seed"][k]
                                        if row.get("speedup_vs_seed", {}).get(k) else "-")
                           for k in ours])
        lines += _table(["envs", "double+sync", "seed-style"]
                        + ["%s (vs seed)" % LABEL[k] for k in ours], rows)
        skipped = {k: v for row in ad["sizes"].values() for k, v in row["skipped"].items()}
        for k, v in skipped.items():
            lines.append("- %s not measured: %s" % (k, v))
        if skipped:
            lines.append("")
    tr = sec.get("train")
    if tr:
        lines += ["## (b) Training loop over the double (real HARL / OpenRL, patched)", ""]
        rows = []
        for run in tr["runs"]:
            phys = "%.0f" % run.get("physics_us", 0)
            if "error" in run:
                rows.append([run["algo"], run["num_envs"], phys, "-", "error", "-", "-", "-"])
                continue
            mg = run.get("memory_growth", {})
            worst = max([mg[k]["growth_pct"] for k in ("device_allocated_mb",
                                                        "device_reserved_mb", "host_rss_mb")
                         if k in mg] or [float("nan")])
            rows.append([run["algo"], run["num_envs"], phys,
                         run["layer_share_pct"].get("n", 0), _num(run["env_steps_per_s"]),
                         _num(run["layer_share_pct"], "%.2f"),
                         _num(run["layer_ms_per_step"], "%.3f"), "%+.2f%%" % worst])
        lines += _table(["algo", "envs", "double physics us", "iterations", "env steps/s",
                         "our layer % of wall", "our layer ms/step",
                         "memory growth after 2 rollouts (worst)"], rows)
        for run in tr["runs"]:
            if "error" in run:
                lines.append("- %s at %s envs failed: `%s`" % (
                    run["algo"], run["num_envs"], run["error"].strip().splitlines()[-1:]))
        lines.append("")
        lines += _by_function(tr["runs"])
    mem = sec.get("memory")
    if mem:
        lines += ["## (c) Memory over %d steps after %d warm-up steps, %d envs (MB)"
                  % (mem["steps"], mem["warmup"], mem["num_envs"]), ""]
        rows = []
        for name, var in mem["variants"].items():
            if "device_allocated_mb" not in var:
                rows.append([name, var.get("skipped", "-"), "-", "-"])
                continue
            rows.append([name] + ["%.1f -> %.1f (%+.2f%%)" % (var[k]["first"], var[k]["last"],
                                                             var[k]["growth_pct"])
                                  for k in ("device_allocated_mb", "device_reserved_mb",
                                            "host_rss_mb")])
        lines += _table(["adapter", "device allocated", "device reserved", "host RSS"], rows)
    pr = sec.get("profile")
    if pr:
        lines += ["## Profile per step at %d envs (torch.profiler, %d steps)"
                  % (pr["num_envs"], pr["steps"]), ""]
        rows = []
        for name, a in pr["adapters"].items():
            if "skipped" in a:
                rows.append([name, a["skipped"], "-", "-", "-"])
                continue
            rows.append([name, "%.1f" % a["aten_ops_per_step"], "%.1f" % a["launches_per_step"],
                         "%.1f / %.1f / %.1f" % (a.get("h2d_per_step", 0), a.get("d2h_per_step", 0),
                                                 a.get("d2d_per_step", 0)),
                         "%.1f" % a["syncs_per_step"]])
        lines += _table(["variant", "aten ops (incl. nested)", "kernel launches",
                         "copies H2D / D2H / D2D", "stream syncs"], rows)
        lines += ["`EpisodeStats` alone (synchronized, ms): `update` %s per step; `flush` of a "
                  "full buffer (%s steps) %s; per step with the fold shared out: %s"
                  % (_ms(pr.get("stats_update_ms")), pr.get("stats_capacity", "?"),
                     _ms(pr.get("stats_flush_ms")),
                     "%.3f" % pr["stats_amortized_ms"] if "stats_amortized_ms" in pr
                     else "-"), ""]
    st = sec.get("startup")
    if st:
        lines += ["## (d) `mapush train` start to first update (s)", ""]
        rows = []
        for run in st["runs"]:
            ph = run.get("phases_s", {})
            rows.append([run["algo"], run["num_envs"], ph.get("start", "-"),
                         ph.get("first_step", "-"), run.get("to_first_update_s") or "error"])
        lines += _table(["algo", "envs", "child start", "first env step", "first update"],
                        rows)
    return "\n".join(lines) + "\n"
