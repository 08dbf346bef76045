"""Process lifecycle of a run: child process, phases, signals, checkpoints, resume."""
