"""The ``mapush`` command (contract: docs/cli.md). (docs/architecture.md, "Modules")."""
import argparse
import errno
import importlib
import json
import os
import re
import signal
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Set, Tuple

import yaml

from mapush import __version__, schema
from mapush.checkpoints.command_net import PUBLISHED_COMMAND_NET, command_net_from_args
from mapush.checkpoints.policy import kind
from mapush.checkpoints.source import RUN_CONFIG, describe, resolve
from mapush.diagnostics import step_check
from mapush.errors import FIXES, MapushError, UsageError
from mapush.proc import stop_signals
from mapush.eval import check_fits
from mapush.objects import ConfigReadError, check_object_name, read_object_facts, read_object_name
from mapush.run.ranks import ranks_from_args
from mapush.run.resume import holds_run
from mapush.run.train import train
from mapush.registry import ALGOS, DEFAULT_ALGO, TRAINERS, by_library, for_algo
from mapush.spec import check_path, config_with_sets, task_sets, CALCULATOR_NUM_ENVS, CALCULATOR_SEED, DEFAULT_CHECKPOINT_INTERVAL, \
    DEFAULT_STEPS, DEVICE, MID, SMOKE_NUM_ENVS, TASKS, TRAIN_NUM_ENVS, UPPER, RunSpec, \
    check_upper_object, default_run_dir

_DEVICE = re.compile(DEVICE)


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


def _int(kind: str, minimum: int, end: float = float("inf")):  # type: ignore[no-untyped-def]
    def parse(text: str) -> int:
        if re.match(r"^\s*[-+]?\d+\s*$", text) and minimum <= int(text) < end:
            return int(text)
        raise argparse.ArgumentTypeError("%r is not %s" % (text, kind))

    return parse


positive_int = _int("a positive integer", 1)
seed = _int("a seed in [0, 2**32) (numpy's range)", 0, 2 ** 32)


def device(text: str) -> str:
    if not _DEVICE.match(text):
        raise argparse.ArgumentTypeError("%r is not a device: use cpu, cuda or cuda:N" % text)
    return "cuda:0" if text == "cuda" else text


def run_folder(text: str) -> str:
    try:
        check_path("", text)
    except UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc).strip())
    if not text.strip() or Path(text).is_file():  # '' would write the run into the cwd
        raise argparse.ArgumentTypeError("%r is not a folder for a run: give a new folder" % text)
    under = next((p for p in Path(text).parents if p.exists() and not p.is_dir()), None)
    if under is not None:
        raise argparse.ArgumentTypeError("%r lies under %s, which is a file, not a folder: give "
                                         "another path" % (text, under))
    return text


def existing_file(text: str) -> str:
    if not Path(text).is_file():
        raise argparse.ArgumentTypeError("%r: no such file" % text)
    return text


OPTIONS = yaml.safe_load((Path(__file__).resolve().parent / "cli.yaml").read_text())
TYPES = {"positive_int": positive_int, "device": device, "existing_file": existing_file,
         "seed": seed, "run_folder": run_folder}
# the defaults and choices cli.yaml names ("$NAME"), and its help texts' "{NAME}"
CONSTANTS = {
    "ALGOS": ALGOS, "DEFAULT_ALGO": DEFAULT_ALGO, "TASKS": TASKS, "MID": MID, "UPPER": UPPER,
    "MID_ONLY": (MID,), "DEFAULT_DEVICE": "cuda:0", "DEFAULT_STEPS": DEFAULT_STEPS,
    "DEFAULT_CHECKPOINT_INTERVAL": DEFAULT_CHECKPOINT_INTERVAL, "CALCULATOR_SEED": CALCULATOR_SEED,
    "MID_NUM_ENVS": TRAIN_NUM_ENVS[MID], "UPPER_NUM_ENVS": TRAIN_NUM_ENVS[UPPER],
    "CALCULATOR_NUM_ENVS": CALCULATOR_NUM_ENVS, "PUBLISHED_COMMAND_NET": PUBLISHED_COMMAND_NET,
    "SMOKE_NUM_ENVS": SMOKE_NUM_ENVS, "CHECK_STEP_ENVS": step_check.ENVS,
    "CHECK_STEP_STEPS": step_check.STEPS, "TWO_ALGOS": ",".join(ALGOS[:2]), "trainers": ", ".join(
        "%s via %s" % ("/".join(a.upper() for a in t.algos), t.label.split()[0]) for t in TRAINERS),
}  # type: Dict[str, Any]


def _resolved(key: str, value: Any) -> Any:
    if key == "type":
        return TYPES[value]
    if key == "help":
        return value.format(**CONSTANTS)
    return CONSTANTS[value[1:]] if isinstance(value, str) and value.startswith("$") else value


def build_parser() -> argparse.ArgumentParser:
    """The parser of every command, as ``cli.yaml`` declares them."""
    parser = _Parser(prog="mapush", description="Train and evaluate MAPush policies.")
    parser.add_argument("--version", action="version", version="mapush-env " + __version__)
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)
    sub.required = True
    parser.commands = sub.choices  # type: ignore[attr-defined]  # each command's parser
    for name, command in OPTIONS.items():
        cmd = sub.add_parser(name, help=_resolved("help", command["help"]))
        group = None
        for flags, keywords in command["options"].items():
            keywords = {k: _resolved(k, v) for k, v in keywords.items()}
            in_group = keywords.pop("group", None)
            if in_group and group is None:
                group = cmd.add_mutually_exclusive_group(required=True)
            (group if in_group else cmd).add_argument(*flags.split(), **keywords)
        cmd.add_argument("--verbose", action="store_true", help="show everything: third-party "
                         "warnings and prints, each update's losses (children inherit it)")
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
SPEC_EXCLUDED = ("spec", "resume", "no_preflight", "help", "verbose", "print_config")


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
    RunSpec.check_fields({"use_wandb" if k == "wandb" else k: v for k, v in options.items()
                          if v is not None}, "--spec %s" % path)
    parser = build_parser()
    actions = {a.dest: a for a in parser.commands["train"]._actions if a.dest not in SPEC_EXCLUDED}
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
    for action in parser.commands["train"]._actions:
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
    config = str(Path(args.config).resolve()) if args.config else None
    config = config_with_sets(args.algo, config, getattr(args, "set", None) or [])
    ranks, gpus = ranks_from_args(args)
    spec = RunSpec.from_dict(dict(
        algo=args.algo, task=args.task, object=obj,
        num_envs=args.num_envs or TRAIN_NUM_ENVS[args.task],
        steps=args.steps, seed=args.seed, run_dir=run_dir, sim_device=args.sim_device,
        rl_device=args.rl_device, resume=None, checkpoint_interval=args.checkpoint_interval,
        record_video=args.record_video,
        config=config,
        use_wandb=args.wandb, object_config=object_config, init_from=init_from,
        command_net=command_net, task_sets=task_sets(getattr(args, "set", None) or []),
        ranks=ranks, gpus=gpus), "mapush train", options=True)
    return spec, None


def _dispatch(args: argparse.Namespace, argv: List[str]) -> int:
    if args.command == "train":
        given = given_options(argv)
        others = sorted(given - {"--spec", "--no-preflight", "--verbose", "--print-config"})
        if args.spec and others:
            raise UsageError("--spec %s holds every option; give %s in it, not beside it"
                             % (args.spec, ", ".join(others)))
        spec, record = spec_from_file(args.spec) if args.spec else spec_from_args(args, given)
        return train(spec, preflight=not args.no_preflight, record=record,
                     show_config=args.print_config)
    # the command's module (cli.yaml), imported only when it runs: main(args) -> int
    return int(importlib.import_module(OPTIONS[args.command]["module"]).main(args))


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the command is, so that its ``finally`` blocks remove what it
    had not finished (a report's scratch folder, say), as Ctrl-C's KeyboardInterrupt does."""


def _interrupted(signum: int, frame: Any) -> None:
    raise Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()


def main(argv: Optional[List[str]] = None) -> int:
    with stop_signals(_interrupted):  # a command that supervises a child sets its own inside
        return _main(list(sys.argv[1:] if argv is None else argv))


def _main(argv: List[str]) -> int:
    try:
        args = build_parser().parse_args(argv)
        if args.verbose:
            os.environ["MAPUSH_VERBOSE"] = "1"
        schema.quiet_imports()
        return _dispatch(args, argv)
    except MapushError as exc:
        print("error: %s" % exc, file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt as exc:
        term = isinstance(exc, Terminated)
        print("error: stopped by %s; what it had not finished was removed"
              % ("SIGTERM" if term else "SIGINT"), file=sys.stderr)
        return 143 if term else 130
    except ModuleNotFoundError as exc:  # a host with `pip install .` only: no training stack
        top = (exc.name or "").split(".")[0]
        fix = FIXES["not_on_pypi"].get(top, "pip install '.[train]' ('.[export]' for export)")
        print("error: mapush %s needs the Python package %s, which is not installed here: run "
              "it in the image (make shell), or %s" % (argv[0] if argv else "", exc.name, fix),
              file=sys.stderr)
        return 1
    except OSError as exc:  # a write failure not met where it happens: one line, no traceback
        if exc.errno not in WRITE_FAILURES:
            raise
        print("error: %s: %s (%s); %s" % (
            exc.filename or "a file", exc.strerror, errno.errorcode.get(exc.errno, exc.errno),
            WRITE_FAILURES[exc.errno]), file=sys.stderr)
        return 1


# The write failures a user meets (#50): fixes.yaml
WRITE_FAILURES = {getattr(errno, name): fix for name, fix in FIXES["write_failures"].items()}
