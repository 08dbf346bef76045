"""The ground floor: helpers every other module may use and that import nothing of mapush
but :mod:`mapush.errors` (atomic writes, phase marks, the child's exit, the clock)."""
