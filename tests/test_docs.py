"""The product's documentation stands on its own: nothing points at files outside the
repository (the developers' notes), and every local link resolves."""
import re
import subprocess

from tests.conftest import REPO

OUTSIDE = re.compile(r"shared/|UPSTREAM\.md|CLI\.md|seeds/")


def tracked():
    out = subprocess.run(["git", "ls-files"], cwd=str(REPO), capture_output=True, text=True,
                         check=True).stdout.split()
    return [REPO / name for name in out if (REPO / name).is_file()
            and not name.startswith("benchmarks/results/")]


def test_no_file_points_at_notes_outside_the_product():
    found = []
    for path in tracked():
        # CI's entry point unpacks the shared MAPush snapshot (CI cannot reach GitHub); it is
        # no user's file
        if path.name == "test_docs.py" or path.relative_to(REPO).as_posix() == ".ci/run":
            continue
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            if OUTSIDE.search(line):
                found.append("%s:%d: %s" % (path.relative_to(REPO), number, line.strip()))
    assert found == []


def test_the_contract_and_the_upstream_facts_are_in_the_product():
    cli = (REPO / "docs" / "cli.md").read_text()
    for command in ("mapush train", "mapush doctor", "mapush smoke", "mapush eval",
                    "mapush reproduce", "mapush report", "mapush pipeline", "mapush sweep"):
        assert "## `%s" % command in cli, command
    upstream = (REPO / "docs" / "upstream.md").read_text()
    for source in ("go1_config.py:122-123", "legged_robot.py:196", "task/<object>/config.py",
                   "legged_robot_field.py:24-31,204-230", "go1_push_mid_wrapper.py:71-80",
                   "on_policy_base_runner.py:448-460"):
        assert source in upstream, source


def test_every_local_link_in_the_docs_resolves():
    broken = []
    for path in [REPO / "README.md"] + sorted((REPO / "docs").glob("*.md")) + \
            sorted(REPO.glob("*/README.md")):
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", path.read_text()):
            if re.match(r"^[a-z]+://", target):
                continue
            if not (path.parent / target).exists():
                broken.append("%s -> %s" % (path.relative_to(REPO), target))
    assert broken == []


def test_the_readme_is_a_front_page_with_contents_and_one_set_of_minimums():
    """#38: the README was 504 lines with no table of contents, and it and docs/docker.md
    gave different minimums for the driver and Docker."""
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    assert "## Contents" in readme
    for anchor in re.findall(r"\]\(#([^)]+)\)", readme):
        titles = [re.sub(r"[^\w\- ]", "", line[3:].strip().lower()).replace(" ", "-")
                  for line in readme.splitlines() if line.startswith("## ") or
                  line.startswith("### ")]
        assert anchor in titles, anchor
    docker = (REPO / "docs" / "docker.md").read_text()
    for minimum in ("R510 (510.39.01) or newer", "Docker Engine 23.0 or newer"):
        assert minimum in readme and minimum in " ".join(docker.split()), minimum
    assert "docker-buildx-plugin docker-compose-plugin" in readme
