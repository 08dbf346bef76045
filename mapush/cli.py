"""The ``mapush`` command (contract: docs/cli.md).

Validates options into one :class:`~mapush.spec.RunSpec` and hands it on; bad input is one
``error:`` line naming the option and the fix, exit status 2. Heavy modules (torch, Isaac
Gym, trainers) are imported only by the subcommand that needs them.
"""
import argparse
import importlib
import json
import re
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Set, Tuple

from mapush import __version__
from mapush.checkpoints.command_net import PUBLISHED_COMMAND_NET, command_net_from_args
from mapush.checkpoints.policy import kind
from mapush.checkpoints.source import RUN_CONFIG, describe, resolve
from mapush.errors import MapushError, UsageError
from mapush.eval import check_fits
from mapush.objects import ConfigReadError, check_object_name, read_object_facts, \
    read_object_name
from mapush.run.resume import holds_run
from mapush.run.train import train
from mapush.trainers import ALGOS, DEFAULT_ALGO, TRAINERS, by_library, for_algo
from mapush.spec import CALCULATOR_NUM_ENVS, CALCULATOR_SEED, DEFAULT_CHECKPOINT_INTERVAL, \
    DEFAULT_STEPS, MID, SMOKE_NUM_ENVS, TASKS, TRAIN_NUM_ENVS, UPPER, RunSpec, \
    check_upper_object, default_run_dir

_DEVICE = re.compile(r"^(cpu|cuda(:\d+)?)$")


class _DefaultsFormatter(argparse.HelpFormatter):
    """Every option's help ends with its default (none shown for flags and unset options)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if (action.option_strings and "%(default)" not in text
                and action.default not in (None, False, argparse.SUPPRESS)):
            text += (" " if text else "") + "(default: %(default)s)"
        return text


class _Parser(argparse.ArgumentParser):
    """argparse, but an error is one ``error:`` line and exit status 2, and every help
    shows the defaults."""

    def __init__(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        kwargs.setdefault("formatter_class", _DefaultsFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> "None":  # type: ignore[override]
        raise UsageError("%s (see '%s --help')" % (message, self.prog))


def _int(kind: str, minimum: int):  # type: ignore[no-untyped-def]
    def parse(text: str) -> int:
        try:
            value = int(text)
            if value >= minimum:
                return value
        except ValueError:
            pass
        raise argparse.ArgumentTypeError("%r is not %s" % (text, kind))

    parse.__name__ = kind
    return parse


positive_int = _int("a positive integer", 1)
non_negative_int = _int("a non-negative integer", 0)


def device(text: str) -> str:
    if not _DEVICE.match(text):
        raise argparse.ArgumentTypeError("%r is not a device: use cpu, cuda or cuda:N" % text)
    return "cuda:0" if text == "cuda" else text


def _devices(parser: argparse.ArgumentParser, sim_help: str, rl_help: str) -> None:
    """``--sim-device`` and ``--rl-device``, as every command that simulates takes them."""
    parser.add_argument("--sim-device", type=device, default="cuda:0", help=sim_help)
    parser.add_argument("--rl-device", type=device, default="cuda:0", help=rl_help)


def existing_file(text: str) -> str:
    if not Path(text).is_file():
        raise argparse.ArgumentTypeError("%r: no such file" % text)
    return text


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="mapush", description="Train and evaluate MAPush policies.")
    parser.add_argument("--version", action="version", version="mapush-env " + __version__)
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)
    sub.required = True

    train = sub.add_parser("train", help="train a policy (%s)" % ", ".join(
        "%s via %s" % ("/".join(a.upper() for a in t.algos), t.label.split()[0])
        for t in TRAINERS))
    train.add_argument("--algo", choices=ALGOS, default=DEFAULT_ALGO,
                       help="%s: MAPush's recipe through OpenRL; the others through HARL"
                       % DEFAULT_ALGO)
    train.add_argument("--task", choices=TASKS, default="go1push_mid",
                       help="go1push_mid: the mid-level pushing policy; go1push_upper: the "
                            "high-level controller on top of a mid-level policy")
    train.add_argument("--object", default=None,
                       help="task/<object>/config.py under $MAPUSH_ROOT: cuboid, Tblock, "
                            "cylinder (default: cuboid, or the object --object-config loads)")
    train.add_argument("--object-config", type=existing_file, metavar="FILE",
                       help="train with this object config file instead of "
                            "task/<object>/config.py (e.g. an authors' results/<run>/task/"
                            "config.py); copied into the run directory")
    train.add_argument("--init-from", metavar="CHECKPOINT",
                       help="start a new run from these policy and value weights (ours or an "
                            "authors' module.pt), with a fresh optimizer and step count")
    train.add_argument("--num-envs", type=positive_int, default=None,
                       help="envs simulated at once (default: 200 for go1push_mid, 500 for "
                            "go1push_upper, as upstream trains it)")
    train.add_argument("--command-net", metavar="PATH",
                       help="go1push_upper: the mid-level policy it drives: a mid-level run "
                            "directory (its newest checkpoint), a checkpoint, or a module.pt "
                            "(default: $MAPUSH_ROOT/resources/command_nets/1.2x1.2.pt)")
    train.add_argument("--steps", type=positive_int, default=DEFAULT_STEPS,
                       help="environment steps to train for (all envs together)")
    train.add_argument("--seed", type=non_negative_int, default=1, help="random seed")
    train.add_argument("--run-dir", help="where the run is written (default: "
                                         "runs/<task>/<object>/<algo>/seed<seed>-<time>)")
    _devices(train, "device of the simulation (cpu, cuda, cuda:N)",
             "device of the policy (cpu, cuda, cuda:N)")
    train.add_argument("--resume", metavar="DIR_OR_CHECKPOINT",
                       help="a run directory (its newest complete checkpoint) or a checkpoint")
    train.add_argument("--checkpoint-interval", type=positive_int,
                       default=DEFAULT_CHECKPOINT_INTERVAL, metavar="STEPS",
                       help="env steps between checkpoints (and one at the end)")
    train.add_argument("--record-video", action="store_true",
                       help="set MQE's record_video flag (adds a camera to env 0)")
    train.add_argument("--config", type=existing_file, metavar="FILE",
                       help="YAML overriding the algorithm's shipped config")
    train.add_argument("--wandb", action="store_true", help="also log to Weights & Biases")
    train.add_argument("--no-preflight", action="store_true",
                       help="skip the doctor checks before starting (not recommended)")
    train.add_argument("--spec", metavar="FILE",
                       help="every option as one JSON object, e.g. {\"algo\": \"ppo\", "
                            "\"seed\": 2, \"run_dir\": \"runs/x\"} (mapush sweep writes one "
                            "per cell); a run already in its run_dir is resumed with them")

    doctor = sub.add_parser("doctor", help="check GPU, driver, Isaac Gym, patches, MAPush")
    doctor.add_argument("--num-envs", type=positive_int, default=TRAIN_NUM_ENVS[MID],
                        help="envs the memory check sizes for")
    doctor.add_argument("--object", default=None,
                        help="size the memory check for this object (default: the object "
                             "with the most robots found under MAPUSH_ROOT)")
    _devices(doctor, "device of the simulation to check", "device of the policy to check")
    doctor.add_argument("--video", action="store_true",
                        help="also check that MQE's camera can render (Vulkan ICD, the "
                             "graphics capability, the GPU kind)")
    doctor.add_argument("--json", action="store_true", help="one JSON object on stdout")

    smoke = sub.add_parser("smoke", help="short end-to-end GPU check with a JSON report")
    smoke.add_argument("--report", default="runs/smoke/report.json", metavar="FILE",
                       help="JSON report (a JUnit XML is written beside it)")
    _devices(smoke, "device of the simulation", "device of the policy")
    smoke.add_argument("--num-envs", type=positive_int, default=SMOKE_NUM_ENVS,
                       help="envs of the env, training and eval stages (a handful: it is a smoke test)")

    ev = sub.add_parser("eval", help="success rate, finished time, collision and "
                                     "collaboration degree of a checkpoint")
    which = ev.add_mutually_exclusive_group(required=True)
    which.add_argument("--checkpoint", metavar="PATH",
                       help="a checkpoint folder, its file, or a run (its newest checkpoint); "
                            "prints one JSON object")
    which.add_argument("--run", metavar="DIR",
                       help="evaluate every checkpoint of a run into DIR/eval.jsonl")
    ev.add_argument("--task", choices=TASKS, default=None,
                    help="the level the checkpoint drives (default: the one it was trained "
                         "on, else %s); %s evaluates a high-level policy, e.g. "
                         "$MAPUSH_ROOT/resources/goals_net/example.pt, planning with RRT as "
                         "upstream's test does" % (MID, UPPER))
    ev.add_argument("--command-net", metavar="PATH",
                    help="with --task %s: the mid-level policy it drives (default: the run's, "
                         "else $MAPUSH_ROOT/%s)" % (UPPER, PUBLISHED_COMMAND_NET))
    ev.add_argument("--object", default=None,
                    help="the object to evaluate on (default: the one the checkpoint was "
                         "trained on: its run's config.json or task/config.py)")
    ev.add_argument("--object-config", type=existing_file, metavar="FILE",
                    help="evaluate with this object config file (default: the run's copy, "
                         "else $MAPUSH_ROOT/task/<object>/config.py)")
    ev.add_argument("--out", metavar="PATH",
                    help="with --run: write the JSON lines to this file (default: "
                         "DIR/eval.jsonl; a high level's RRT figures go beside it, in "
                         "rrt/<checkpoint>/); with --video: the folder for the videos (default: "
                         "RUN/videos); with --checkpoint of a high-level policy: the folder "
                         "for its RRT figures (default: none kept)")
    ev.add_argument("--num-envs", type=positive_int, default=None,
                    help="envs, each run for its first episode (default: 300, MAPush's "
                         "calculator; 1 with --video)")
    ev.add_argument("--video", action="store_true",
                    help="record env 0 through MQE's camera into RUN/videos/"
                         "<checkpoint>-ep<k>-<success|fail>.mp4 (H.264) instead of the metrics")
    ev.add_argument("--episodes", type=positive_int, default=1,
                    help="with --video: episodes of env 0 to record")
    _devices(ev, "device of the simulation", "device of the policy")
    ev.add_argument("--seed", type=non_negative_int, default=CALCULATOR_SEED,
                    help="random seed (default: %(default)s, as upstream's calculator)")
    report = sub.add_parser("report", help="RUN/report/index.html: curves, eval metrics, "
                                           "videos and the run's config on one page")
    report.add_argument("run", metavar="RUN", help="a run directory")
    report.add_argument("--out", metavar="DIR",
                        help="where the page and its PNGs go (default: RUN/report)")

    exp = sub.add_parser("export", help="a checkpoint as a self-contained policy: TorchScript "
                                        "and ONNX, policy.json, the locomotion policy")
    source = exp.add_mutually_exclusive_group(required=True)
    source.add_argument("--run", metavar="RUN", help="a run directory: its newest checkpoint")
    source.add_argument("--checkpoint", metavar="PATH", help="a checkpoint folder or .pt file")
    exp.add_argument("--format", choices=("torchscript", "onnx", "both"), default="both")
    exp.add_argument("--out", metavar="DIR", help="default: RUN/export/<checkpoint>/, or "
                                                  "runs/export/<checkpoint>/ outside a run")
    exp.add_argument("--object", help="the object, where the checkpoint does not record it")

    pipe = sub.add_parser("pipeline", help="the whole method for one object: mid level, its "
                                           "eval, high level on the best, its eval")
    pipe.add_argument("--object", default="cuboid",
                      help="the object: cuboid (the high level pushes MQE's 1.2 x 1.2 box, "
                           "go1_push_upper_config.py:20, so other objects are refused)")
    pipe.add_argument("--seed", type=non_negative_int, default=1, help="random seed")
    pipe.add_argument("--num-envs", type=positive_int, default=TRAIN_NUM_ENVS[MID],
                      help="envs of the mid-level training")
    pipe.add_argument("--upper-num-envs", type=positive_int, default=TRAIN_NUM_ENVS[UPPER],
                      help="envs of the high-level training (upstream's 500)")
    pipe.add_argument("--mid-steps", type=positive_int, default=DEFAULT_STEPS,
                      help="env steps of the mid-level training")
    pipe.add_argument("--upper-steps", type=positive_int, default=DEFAULT_STEPS,
                      help="env steps of the high-level training")
    pipe.add_argument("--eval-envs", type=positive_int, default=CALCULATOR_NUM_ENVS,
                      help="envs of each evaluation (MAPush's calculator: 300)")
    pipe.add_argument("--config", type=existing_file, metavar="FILE",
                      help="YAML overriding the mid level's PPO config")
    pipe.add_argument("--upper-config", type=existing_file, metavar="FILE",
                      help="YAML overriding the high level's PPO config")
    pipe.add_argument("--dir", metavar="DIR",
                      help="where the stages' runs and pipeline.json go (default: "
                           "runs/pipeline/<object>/seed<seed>)")
    _devices(pipe, "device of the simulation", "device of the policy")

    sw = sub.add_parser("sweep", help="a grid of runs (algorithms x objects x seeds): one run "
                                     "per GPU at a time, or a Slurm job array")
    sw.add_argument("--seeds", help="seeds, e.g. 1,2,3")
    sw.add_argument("--objects", help="objects, e.g. cuboid,Tblock,cylinder")
    sw.add_argument("--algo", default=DEFAULT_ALGO, help="algorithms, e.g. %s or %s"
                    % (DEFAULT_ALGO, ",".join(ALGOS[:2])))
    sw.add_argument("--gpus", help="local: the GPUs to use, e.g. 0,1 (default: every GPU "
                                   "nvidia-smi shows)")
    sw.add_argument("--executor", default="local", choices=("local", "slurm"),
                    help="local: one run per GPU on this machine; slurm: a Slurm job array "
                         "(cluster/sweep.sbatch)")
    sw.add_argument("--name", help="the sweep's folder under runs/sweeps (default: from the "
                                   "grid)")
    sw.add_argument("--status", action="store_true", help="print each cell's state and stop")
    sw.add_argument("--report", action="store_true",
                    help="mean and std over seeds of each object and algorithm's final "
                         "checkpoints, into runs/sweeps/<name>/report/")
    sw.add_argument("--task", default=MID, choices=(MID,), help="the task of every cell")
    sw.add_argument("--steps", type=positive_int, help="env steps of each run (default: "
                                                       "mapush train's)")
    sw.add_argument("--num-envs", type=positive_int, help="envs of each run (default: "
                                                          "mapush train's)")
    sw.add_argument("--config", type=existing_file, metavar="FILE",
                    help="the algorithm's config override for every run")
    sw.add_argument("--runner", help="the command that runs `mapush` for a cell; {gpu} is the "
                                     "cell's GPU (default: this Python's mapush; make sweep "
                                     "uses docker compose)")
    sw.add_argument("--eval-envs", type=positive_int, default=CALCULATOR_NUM_ENVS,
                    help="--report: envs when a cell's final checkpoint is evaluated")
    sw.add_argument("--root", default="runs/sweeps", metavar="DIR",
                    help="where sweeps live")
    _devices(sw, "each run's simulation device (its one visible GPU)",
             "each run's policy device")

    rep = sub.add_parser("reproduce", help="the authors' published checkpoints evaluated "
                                           "beside their own success_rate.txt")
    rep.add_argument("--objects", nargs="+", metavar="OBJECT",
                     help="objects, as words or a comma list (default: every object with an "
                          "authors' results folder)")
    rep.add_argument("--checkpoints", default="last3", choices=("last3", "all"),
                     help="the last three checkpoints of each run, or all of them")
    rep.add_argument("--num-envs", type=positive_int, default=CALCULATOR_NUM_ENVS,
                     help="envs per checkpoint (the authors' calculator used 300)")
    rep.add_argument("--seed", type=non_negative_int, default=CALCULATOR_SEED,
                     help="the authors' test seed (default: %(default)s, OpenRL's default, "
                          "which their test.py kept)")
    rep.add_argument("--results", metavar="DIR",
                     help="the authors' results folder (default: $MAPUSH_ROOT/results)")
    rep.add_argument("--out", default="runs/reproduce", metavar="DIR",
                     help="where table.md and table.json go")
    _devices(rep, "device of the simulation", "device of the policy")
    return parser


DEFAULT_OBJECT = "cuboid"


def object_from_args(args: argparse.Namespace) -> Tuple[str, Optional[str]]:
    """``(object, object config file or None)`` of ``--object`` / ``--object-config``."""
    config = str(Path(args.object_config).resolve()) if args.object_config else None
    obj = args.object
    if config is not None:
        try:
            read_object_facts(Path(config))
        except ConfigReadError as exc:
            raise UsageError("--object-config %s: %s" % (args.object_config, exc))
        obj = obj or read_object_name(Path(config))
        if obj is None:
            raise UsageError("--object-config %s: it loads no resources/objects/<object>/ URDF "
                             "that names its object: add --object NAME" % args.object_config)
        return obj, config
    obj = obj or DEFAULT_OBJECT
    check_object_name(obj)
    return obj, None


def init_from_args(args: argparse.Namespace, obj: str, config: Optional[str]) -> Optional[str]:
    """``--init-from``: the checkpoint, checked against the algorithm and the env's obs dim
    before anything starts."""
    if not args.init_from:
        return None
    if args.resume:
        raise UsageError("--init-from starts a new run from weights; --resume continues a run: "
                         "use one of them")
    checkpoint = resolve(args.init_from, "--init-from")
    found = kind(checkpoint)
    wanted = for_algo(args.algo)
    if found != wanted.library:
        article = lambda label: ("an " if label[0] in "AEIOU" else "a ") + label  # noqa: E731
        raise UsageError("--init-from %s is %s checkpoint; --algo %s starts from %s checkpoint"
                         % (args.init_from, article(by_library(found).label) if found
                            else "not a", args.algo, article(wanted.label)))
    info = describe(checkpoint, obj=obj, object_config=config)
    info.update(object=obj, object_config=config, task=args.task)
    check_fits(info, "--init-from")
    return str(Path(checkpoint).resolve())


# train's options that a --spec file cannot hold: how the command runs, not what it trains
SPEC_EXCLUDED = ("spec", "resume", "no_preflight", "help")


def _train_parser(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The ``train`` subparser of ``parser`` (argparse has no public way to it)."""
    return parser._subparsers._group_actions[0].choices["train"]  # type: ignore


def spec_from_file(path: str) -> Tuple[RunSpec, Optional[Dict[str, Any]]]:
    """``mapush train --spec FILE``: the options in FILE, checked as the parser checks them,
    into a RunSpec; when the run_dir already holds a run (its config.json), that run
    continues with them (each must then equal the record, but the adjustable ones)."""
    try:
        options = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise UsageError("--spec %s: cannot read it as a JSON object (%s)" % (path, exc))
    if not isinstance(options, dict):
        raise UsageError("--spec %s: holds %s, not a JSON object of options"
                         % (path, type(options).__name__))
    parser = build_parser()
    actions = {a.dest: a for a in _train_parser(parser)._actions
               if a.dest not in SPEC_EXCLUDED}
    for key, value in sorted(options.items()):
        action = actions.get(key)
        if action is None:
            raise UsageError("--spec %s: %r is not an option of mapush train (known: %s)"
                             % (path, key, ", ".join(sorted(actions))))
        try:
            if action.type is not None and value is not None:
                options[key] = action.type(str(value))
        except (argparse.ArgumentTypeError, ValueError) as exc:
            raise UsageError("--spec %s: %s: %s" % (path, key, exc))
        if action.choices is not None and options[key] not in action.choices:
            raise UsageError("--spec %s: %s %r is not one of %s"
                             % (path, key, value, ", ".join(map(str, action.choices))))
    given = {max(actions[k].option_strings, key=len) for k in options}
    args = parser.parse_args(["train"])  # every default, then the file's options
    vars(args).update(options)
    if args.run_dir and (Path(args.run_dir) / RUN_CONFIG).is_file():
        args.resume = args.run_dir
        given.add("--resume")
    return spec_from_args(args, given)


def given_options(argv: List[str]) -> Set[str]:
    """The ``mapush train`` options written on the command line (not left at a default)."""
    parser = build_parser()
    dests = {}  # type: Dict[str, str]
    for action in _train_parser(parser)._actions:
        if action.option_strings and action.dest != "help":
            action.default = argparse.SUPPRESS
            dests[action.dest] = max(action.option_strings, key=len)
    seen = vars(parser.parse_args(argv))
    return {option for dest, option in dests.items() if dest in seen}


def spec_from_args(args: argparse.Namespace, given: Optional[Set[str]] = None
                   ) -> Tuple[RunSpec, Optional[Dict[str, Any]]]:
    """Validate ``mapush train`` options into a RunSpec (UsageError on bad input), and the
    record of the run ``--resume`` continues (None for a new run). ``given``: the options
    written on the command line (default: every option that is not at its default)."""
    if args.resume:
        from mapush.run.resume import resume_spec

        if given is None:
            given = {"--resume"}
        return resume_spec(args, given)
    command_net = command_net_from_args(args)
    obj, object_config = object_from_args(args)
    if args.task == UPPER:
        check_upper_object(obj, object_config)
    init_from = init_from_args(args, obj, object_config)
    run_dir = args.run_dir
    if run_dir is not None and holds_run(Path(run_dir)):
        raise UsageError("--run-dir %s already holds a run: continue it with --resume %s, "
                         "or pick a new folder" % (run_dir, run_dir))
    if run_dir is None:
        run_dir = default_run_dir(args.task, obj, args.algo, args.seed)
    return RunSpec(
        algo=args.algo, task=args.task, object=obj,
        num_envs=args.num_envs or TRAIN_NUM_ENVS[args.task],
        steps=args.steps, seed=args.seed, run_dir=run_dir, sim_device=args.sim_device,
        rl_device=args.rl_device, resume=None, checkpoint_interval=args.checkpoint_interval,
        record_video=args.record_video,
        config=str(Path(args.config).resolve()) if args.config else None,
        use_wandb=args.wandb, object_config=object_config, init_from=init_from,
        command_net=command_net,
    ), None


# Each command's module, imported only when it runs; each has ``main(args) -> int``.
COMMANDS = {
    "doctor": "mapush.diagnostics.doctor", "smoke": "mapush.smoke",
    "eval": "mapush.eval", "report": "mapush.report", "sweep": "mapush.sweep",
    "pipeline": "mapush.pipeline", "reproduce": "mapush.reproduce", "export": "mapush.export",
}


def _dispatch(args: argparse.Namespace, argv: List[str]) -> int:
    if args.command == "train":
        given = given_options(argv)
        others = sorted(given - {"--spec", "--no-preflight"})
        if args.spec and others:
            raise UsageError("--spec %s holds every option; give %s in it, not beside it"
                             % (args.spec, ", ".join(others)))
        spec, record = spec_from_file(args.spec) if args.spec else spec_from_args(args, given)
        return train(spec, preflight=not args.no_preflight, record=record)
    if args.command not in COMMANDS:  # pragma: no cover - argparse knows the commands
        raise UsageError("unknown command %r" % args.command)
    return int(importlib.import_module(COMMANDS[args.command]).main(args))


def main(argv: Optional[List[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser().parse_args(argv)
        return _dispatch(args, argv)
    except MapushError as exc:
        print("error: %s" % exc, file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
