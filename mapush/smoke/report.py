"""The smoke verdict as files: a JSON report and a JUnit XML file beside it.

Both are rewritten atomically after every stage, so a smoke run killed half-way still
leaves a readable report saying how far it got (``complete: false``). CI systems read the
JUnit file; people and scripts read the JSON.
"""
import datetime
import socket
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any, Dict, Optional, Sequence

from mapush.run.atomic import write_json, write_text
from mapush.smoke.runner import FAILED, PASSED, SKIPPED, ChildRecord, StageResult

REPORT_VERSION = 1
JUNIT_NAME = "junit.xml"
SUITE = "mapush-smoke"


def now() -> str:
    return datetime.datetime.now().astimezone().isoformat(timespec="seconds")


def junit_path(report: Path) -> Path:
    return Path(report).parent / JUNIT_NAME


def build_report(results: Sequence[StageResult], planned: Sequence[str],
                 children: Sequence[ChildRecord], meta: Dict[str, Any], complete: bool,
                 duration_s: float) -> Dict[str, Any]:
    """The JSON report: overall status, the first failed stage, and every stage."""
    done = {r.name for r in results}
    failed = [r.name for r in results if r.status == FAILED]
    passed = complete and bool(results) and all(r.status == PASSED for r in results)
    status = PASSED if passed else (FAILED if complete or failed else "running")
    return dict(meta, **{
        "version": REPORT_VERSION,
        "status": status,
        "passed": passed,
        "complete": complete,
        "failed_stage": failed[0] if failed else None,
        "failed_stages": failed,
        "duration_s": round(duration_s, 3),
        "updated": now(),
        "stages": [r.to_dict() for r in results],
        "pending": [name for name in planned if name not in done],
        "children": [c.to_dict() for c in children],
    })


def _failure_text(result: StageResult) -> str:
    lines = [result.message]
    for key in sorted(result.details):
        value = result.details[key]
        lines.append("%s: %s" % (key, value))
    return "\n".join(lines)


def build_junit(results: Sequence[StageResult], report: Dict[str, Any]) -> str:
    """JUnit XML with one test case per stage (failure, or skipped with the reason)."""
    suites = ET.Element("testsuites", name=SUITE)
    suite = ET.SubElement(suites, "testsuite", {
        "name": SUITE,
        "tests": str(len(results)),
        "failures": str(sum(r.status == FAILED for r in results)),
        "errors": "0",
        "skipped": str(sum(r.status == SKIPPED for r in results)),
        "time": "%.3f" % sum(r.duration_s for r in results),
        "timestamp": str(report.get("started", "")),
        "hostname": socket.gethostname(),
    })
    props = ET.SubElement(suite, "properties")
    for key in ("sim_device", "rl_device"):
        ET.SubElement(props, "property", name=key, value=str(report.get(key, "")))
    for result in results:
        case = ET.SubElement(suite, "testcase", {
            "classname": "mapush.smoke", "name": result.name, "time": "%.3f" % result.duration_s})
        if result.status == FAILED:
            failure = ET.SubElement(case, "failure", {
                "message": result.message, "type": "timeout" if result.timed_out else "failure"})
            failure.text = _failure_text(result)
        elif result.status == SKIPPED:
            ET.SubElement(case, "skipped", message=result.message)
        if result.description:
            out = ET.SubElement(case, "system-out")
            out.text = result.description
    body = ET.tostring(suites, encoding="unicode")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + body + "\n"


def write_report(path: Path, results: Sequence[StageResult], planned: Sequence[str],
                 children: Sequence[ChildRecord], meta: Dict[str, Any], complete: bool,
                 duration_s: float) -> Dict[str, Any]:
    """Write ``path`` (JSON) and ``junit.xml`` beside it; return the report."""
    report = build_report(results, planned, children, meta, complete, duration_s)
    report["junit"] = str(junit_path(path))
    write_json(path, report)
    write_text(junit_path(path), build_junit(results, report))
    return report


def verdict(report: Dict[str, Any], report_path: Optional[Path] = None) -> str:
    where = " (report %s)" % report_path if report_path else ""
    if report["passed"]:
        return "smoke: passed, %d stages in %.1f s%s" % (len(report["stages"]),
                                                        report["duration_s"], where)
    name = report["failed_stage"]
    message = ""
    for stage in report["stages"]:
        if stage["name"] == name:
            message = stage["message"]
    return "error: smoke test failed at stage %s: %s%s" % (name, message, where)
