"""One schema for every input: the types and ranges in ``schema.yaml``, checked by pydantic
in strict mode (so ``"false"`` is not a boolean and ``"200"`` not an integer); a violation is
one UsageError naming the key, the value and the allowed range."""
import os
import warnings
from functools import lru_cache
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import yaml
from pydantic import ConfigDict, Field, ValidationError, conint, create_model
from typing_extensions import Literal

from mapush.errors import UsageError

SCHEMA = yaml.safe_load((Path(__file__).resolve().parent / "schema.yaml").read_text())
LAX = "environment"  # the one section read from text, so checked in pydantic's lax mode
MEANS = {}  # type: Dict[Tuple[str, str], Optional[str]]  # the words for a pattern
TYPES = {"int": int, "float": float, "bool": bool, "str": str}


@lru_cache(maxsize=None)
def model(section: str) -> Any:
    fields = {}
    for key, rule in SCHEMA[section].items():
        rule = dict(rule)
        kind, choices, nullable = rule.pop("type"), rule.pop("choices", None), \
            rule.pop("nullable", False)  # type: Any, Optional[List[Any]], bool
        MEANS[section, key] = rule.pop("means", None)
        if kind == "ints":
            kind = List[conint(ge=rule.pop("item_ge"))]  # type: ignore[misc]
        kind = Literal[tuple(choices)] if choices else TYPES.get(kind, kind)
        fields[key.replace(".", "__")] = (Optional[kind] if nullable else kind, Field(None, **rule))
    return create_model(section, __config__=ConfigDict(strict=section != LAX,
                                                       allow_inf_nan=False), **fields)


def flat(config: Dict[str, Any], prefix: str = "") -> Dict[str, Any]:
    """``{"train": {"episode_length": 200}}`` -> ``{"train": {...}, "train.episode_length": 200}``."""
    out = {}  # type: Dict[str, Any]
    for key, value in config.items():
        out[prefix + str(key)] = value
        if isinstance(value, dict):
            out.update(flat(value, prefix + str(key) + "."))
    return out


def check(section: str, values: Dict[str, Any], where: str, options: bool = False
          ) -> Dict[str, Any]:
    """``values`` (dotted keys for nested ones) against ``section``; keys it does not list
    are left to their owner (argparse, OpenRL's parser, HARL's config merge). ``options``:
    name a key as its command-line option (``num_envs``: ``--num-envs``)."""
    known = {k: v for k, v in values.items() if k in SCHEMA[section]}
    try:
        valid = model(section).model_validate({k.replace(".", "__"): v for k, v in known.items()})
        return {k: getattr(valid, k.replace(".", "__")) for k in known}
    except ValidationError as exc:
        raise usage_error(exc, where, options, {
            key: means for (name, key), means in MEANS.items() if name == section})


def usage_error(exc: ValidationError, where: str, options: bool = False,
                means: Optional[Dict[str, Optional[str]]] = None) -> UsageError:
    """pydantic's first violation as one UsageError: where, the key (``--num-envs`` with
    ``options``), the value and the rule (``means``: the words for a key's pattern)."""
    error = exc.errors()[0]
    key = ".".join(str(part) for part in error["loc"]).replace("__", ".")
    said = (means or {}).get(key)
    message = "input should be " + said if said else error["msg"][0].lower() + error["msg"][1:]
    return UsageError("%s: %s %s: %s" % (where, "--" + key.replace("_", "-") if options
                                         else key, repr(error["input"])[:60], message))


def verbose() -> bool:
    return bool(environ().get("MAPUSH_VERBOSE"))


def quiet_imports() -> None:
    """Not ours to say, in each process (#81): gym's notice that it is unmaintained (printed
    at its import, from gym_notices' table, which is emptied here) and treevalue's
    FutureWarnings about torch's pytree API. --verbose shows them."""
    try:
        if verbose():
            return
    except UsageError:  # a bad MAPUSH_* variable: the command that reads it refuses it
        pass
    warnings.filterwarnings("ignore", category=FutureWarning, module="treevalue")
    try:
        import gym_notices.notices as notices
    except ImportError:
        return
    notices.notices.clear()


def environ() -> Dict[str, Any]:
    """The ``MAPUSH_*`` variables of the ``environment`` section that are set, checked as
    text and converted (``"50"`` is 50)."""
    return check(LAX, {k: os.environ[k].strip() for k in SCHEMA[LAX]
                       if os.environ.get(k, "").strip()}, "environment", options=False)
