"""Can this process render MQE's camera? Checked before a simulation starts."""
import os
from pathlib import Path
from typing import List, Optional, Tuple

ICD_ENV = ("VK_ICD_FILENAMES", "VK_DRIVER_FILES")
ICD_PATHS = ("/usr/share/vulkan/icd.d/nvidia_icd.json", "/etc/vulkan/icd.d/nvidia_icd.json")
DATACENTER = ("A100", "A800", "H100", "H800", "H200", "A30", "B100", "B200")


def problems(in_container: bool) -> List[Tuple[str, str]]:
    """``(what is wrong, the fix)`` for each missing piece of rendering support."""
    found = []
    # the Vulkan ICD files this process would load (the loader's variables win)
    given = next((os.environ[name] for name in ICD_ENV if os.environ.get(name)), "")
    files = [Path(p) for p in (given.split(os.pathsep) if given else ICD_PATHS) if p]
    if not any(f.is_file() for f in files):
        found.append(("no NVIDIA Vulkan ICD (%s)" % ", ".join(str(f) for f in files),
                      "use the image (it installs isaacgym/docker/nvidia_icd.json from the "
                      "tarball), or point VK_ICD_FILENAMES at the driver's nvidia_icd.json"))
    if in_container:
        caps = os.environ.get("NVIDIA_DRIVER_CAPABILITIES", "")
        names = {c.strip() for c in caps.split(",")}
        if not ({"all", "graphics"} & names):
            found.append(("this container lacks the NVIDIA 'graphics' driver capability "
                          "(NVIDIA_DRIVER_CAPABILITIES=%r)" % caps,
                          "run it with NVIDIA_DRIVER_CAPABILITIES=all (make and compose set it)"
                          ", or docker run --gpus 'all,\"capabilities=graphics,compute,"
                          "utility\"'"))
    return found


def datacenter_gpu(names: List[str]) -> Optional[str]:
    """The first GPU name of a kind whose rendering MAPush's README warns about."""
    return next((name for name in names if any(model in name.upper() for model in DATACENTER)),
                None)
