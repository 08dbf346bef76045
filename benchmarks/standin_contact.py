"""The Isaac Gym stand-in's own cost (tests/standin, not PhysX): ``Gym.simulate`` and its
contact in the plane (``isaacgym/contact.py: Plane.step``) per mid-level step of MAPush's real
MQE (patched tree), the scripted pushing controller's actions (``tests/real_mqe_probe.py:
pushing_actions``, so the robots push their boxes), one process per stand-in, alternated:

    python benchmarks/standin_contact.py --src MAPUSH_SRC --site SITE --records RECORDS \
        --out DIR [--num-envs 500] [--standin DIR ...] [--repeats 2]

The stand-ins are this checkout's ``tests/standin`` and each ``--standin`` folder (e.g. an
older checkout's ``tests/standin``). Writes ``standin-contact.json``: per stand-in and repeat,
ms per mid-level step of ``simulate``, of ``Plane.step`` and of
``refresh_net_contact_force_tensor`` (each synchronized), and of the whole step (the
controller's actions and MQE's own step included).
"""
import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.learning import STANDIN, child_env, prepare  # noqa: E402


def child(num_envs: int, steps: int, device: str) -> dict:
    sys.path.insert(0, str(REPO / "tests"))
    import real_mqe_probe as probe  # noqa: E402  (imports Isaac Gym first)
    import torch
    from isaacgym import contact, gymapi

    spent = {"simulate": 0.0, "plane": 0.0, "refresh_contact": 0.0}

    def timed(name, fn):
        def wrapper(*args, **kwargs):
            if device != "cpu":
                torch.cuda.synchronize()
            start = time.perf_counter()
            out = fn(*args, **kwargs)
            if device != "cpu":
                torch.cuda.synchronize()
            spent[name] += time.perf_counter() - start
            return out
        return wrapper

    gymapi.Gym.simulate = timed("simulate", gymapi.Gym.simulate)
    contact.Plane.step = timed("plane", contact.Plane.step)
    # a stand-in that reads the net contact forces when MQE refreshes them (#79 item 7) pays
    # for them here, no longer in simulate
    gymapi.Gym.refresh_net_contact_force_tensor = timed(
        "refresh_contact", gymapi.Gym.refresh_net_contact_force_tensor)
    env, _ = probe.sim.make_env(probe.spec(num_envs=num_envs, seed=3, device=device))
    env.reset()
    for _ in range(10):
        env.step(probe.pushing_actions(env))
    for key in spent:
        spent[key] = 0.0
    start = time.perf_counter()
    for _ in range(steps):
        env.step(probe.pushing_actions(env))
    if device != "cpu":
        torch.cuda.synchronize()
    wall = time.perf_counter() - start
    row = {k: round(v / steps * 1000, 3) for k, v in spent.items()}
    row["step"] = round(wall / steps * 1000, 3)
    return row


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--src")
    parser.add_argument("--site")
    parser.add_argument("--records")
    parser.add_argument("--out")
    parser.add_argument("--num-envs", type=int, default=500)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--standin", action="append", default=[],
                        help="another stand-in folder (holding isaacgym/), run as is")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.num_envs, args.steps, args.device)))
        return 0
    tree = Path("/tmp/standin-contact-tree/MAPush")
    prepare(args.src, tree)
    records = Path("/tmp/standin-contact-records")
    variants = [str(STANDIN)] + args.standin
    rows = []
    for repeat in range(args.repeats):
        for standin in (variants if repeat % 2 == 0 else variants[::-1]):
            env = child_env(args.site, tree, args.records, records, standin)
            proc = subprocess.run([sys.executable, __file__, "--child",
                                   "--num-envs", str(args.num_envs), "--steps", str(args.steps),
                                   "--device", args.device], env=env, capture_output=True,
                                  text=True, timeout=300)
            row = {"standin": standin, "repeat": repeat, "returncode": proc.returncode}
            if proc.returncode == 0:
                row.update(json.loads(proc.stdout.strip().splitlines()[-1]))
            else:
                row["error"] = proc.stderr[-400:]
            print(json.dumps(row), flush=True)
            rows.append(row)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "standin-contact.json").write_text(json.dumps({
        "what": "the Isaac Gym stand-in's own simulate (not PhysX), ms per mid-level step",
        "num_envs": args.num_envs, "steps": args.steps, "device": args.device,
        "cpus": os.cpu_count(), "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
