"""The trainers (one module a library) and their shipped configs; which trains an algorithm
is :mod:`mapush.registry`'s answer."""
