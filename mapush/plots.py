"""matplotlib without a display, for the commands that draw (report, sweep)."""
from pathlib import Path
from typing import Any


def pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(plt: Any, fig: Any, path: Path) -> None:
    fig.tight_layout()
    fig.savefig(str(path), dpi=90)
    plt.close(fig)
