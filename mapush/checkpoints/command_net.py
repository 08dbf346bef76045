"""``--command-net``: the mid-level policy the high level (go1push_upper) drives, checked
before anything starts."""
import argparse
from pathlib import Path
from typing import Optional

from mapush.checkpoints.policy import input_dim, kind, module_path
from mapush.checkpoints.source import describe, resolve
from mapush.errors import UsageError
from mapush.objects import mapush_root
from mapush.spec import MID, UPPER, UPPER_MID_OBS_DIM, UPPER_OBJECT
from mapush.registry import DEFAULT_ALGO, for_algo

PUBLISHED_COMMAND_NET = Path("resources") / "command_nets" / "1.2x1.2.pt"


def command_net_from_args(args: argparse.Namespace) -> Optional[str]:
    """``--command-net`` of ``mapush train``: only for go1push_upper, with PPO."""
    if args.task == MID:
        if args.command_net:
            raise UsageError("--command-net is for --task %s (the mid-level policy the high "
                             "level drives); --task %s trains such a policy" % (UPPER, MID))
        return None
    if for_algo(args.algo).teams:
        raise UsageError("--algo %s: HARL's algorithms train several agents; --task %s has one "
                         "centralized agent (the high-level policy): use --algo %s"
                         % (args.algo, UPPER, DEFAULT_ALGO))
    return resolve_command_net(args.command_net)


def resolve_command_net(given: Optional[str]) -> str:
    """The mid-level ``module.pt`` the high level drives, checked before anything starts
    (docs/architecture.md, "Modules")."""
    target = given or str(mapush_root() / PUBLISHED_COMMAND_NET)
    if not Path(target).exists():
        raise UsageError("--command-net %s: no such file or folder%s" % (
            target, "" if given else " (the published mid-level policy; pass "
            "--command-net PATH, e.g. a mid-level run directory)"))
    checkpoint = resolve(target, "--command-net")
    if kind(checkpoint) != "openrl":
        raise UsageError("--command-net %s is not an OpenRL PPO policy (module.pt): the high "
                         "level calls its act(); train the mid level with --algo %s"
                         % (target, DEFAULT_ALGO))
    try:
        dim = input_dim(checkpoint)
    except UsageError as exc:
        raise UsageError("--command-net %s is not a policy: %s" % (target, exc))
    if dim != UPPER_MID_OBS_DIM:
        raise UsageError("--command-net %s takes %d-dim observations; the high level feeds it "
                         "%d-dim ones (2 robots: target, box and the other robot); train it on "
                         "the %s" % (target, dim, UPPER_MID_OBS_DIM, UPPER_OBJECT))
    try:  # the object its run recorded (a bare module file, as the published net, has none)
        trained_on = describe(checkpoint)["object"]  # type: Optional[str]
    except UsageError:
        trained_on = None
    if trained_on is not None and trained_on != UPPER_OBJECT:
        raise UsageError("--command-net %s was trained on %s; the high level pushes MQE's 1.2 x "
                         "1.2 box (go1_push_upper_config.py:20), the %s: pass a %s mid-level "
                         "policy, e.g. a run of `mapush train --object %s`"
                         % (target, trained_on, UPPER_OBJECT, UPPER_OBJECT, UPPER_OBJECT))
    return str(module_path(checkpoint).resolve())
