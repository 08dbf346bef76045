"""Scalar series out of a run's TensorBoard event files, through TensorBoard's own reader."""
from pathlib import Path
from typing import Dict, List, Tuple

Scalars = Dict[str, List[Tuple[int, float]]]


def event_files(logdir: Path) -> List[Path]:
    return sorted(p for p in Path(logdir).rglob("*") if "tfevents" in p.name and p.is_file())


def read_scalars(logdir: Path) -> Scalars:
    """``{tag: [(step, value), ...]}`` over every event file under ``logdir``, by step: the
    series TensorBoard's scalars plugin shows (legacy ``simple_value`` ones and new-style
    tensors alike; histograms and the rest are left out)."""
    from tensorboard.backend.event_processing.plugin_event_accumulator import EventAccumulator
    from tensorboard.util import tensor_util

    found = {}  # type: Scalars
    for path in event_files(logdir):
        events = EventAccumulator(str(path), size_guidance={"tensors": 0})
        events.Reload()
        for tag in events.Tags().get("tensors", []):
            if events.SummaryMetadata(tag).plugin_data.plugin_name != "scalars":
                continue
            found.setdefault(tag, []).extend(
                (e.step, float(tensor_util.make_ndarray(e.tensor_proto).item()))
                for e in events.Tensors(tag))
    for series in found.values():
        series.sort(key=lambda item: item[0])
    return found
