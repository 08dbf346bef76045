"""The time stamps records carry: local time with its offset, to the second."""
import datetime


def now() -> str:
    return datetime.datetime.now().astimezone().isoformat(timespec="seconds")
