"""Trainers: OpenRL (PPO, MAPush's recipe) and HARL (HAPPO, MAPPO, HATRPO).

Each module exposes ``train(ctx: RunContext) -> int``, run inside the training child.
"""
