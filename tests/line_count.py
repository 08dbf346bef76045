"""What mapush/'s size budget counts (issue 78): code lines of mapush/**/*.py (no docstrings,
comments or blank lines) plus the lines of its YAML and templates that are neither blank nor
comments; beside it, the lines the patch series adds to upstream, so that logic does not drift
into patches/ unseen. ``python -m tests.line_count`` prints both (.ci/run does)."""
import ast
import io
import sys
import tokenize
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "mapush"
BUDGET = 7500
SKIPPED = (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
           tokenize.ENDMARKER)


def docstring_lines(source):
    """The line numbers of every module, class and function docstring of ``source``."""
    lines = set()
    for node in ast.walk(ast.parse(source)):
        body = getattr(node, "body", None)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) \
                and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            lines.update(range(body[0].lineno, body[0].end_lineno + 1))
    return lines


def code_lines(source):
    """Lines of ``source`` that hold a token of code (not a docstring, comment or blank)."""
    docs, lines = docstring_lines(source), set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type not in SKIPPED:
            lines.update(n for n in range(token.start[0], token.end[0] + 1) if n not in docs)
    return len(lines)


def data_lines(text):
    return sum(1 for line in text.splitlines() if line.strip() and not line.strip().startswith("#"))


def counts(package=PACKAGE, patches=REPO / "patches"):
    python = sum(code_lines(p.read_text()) for p in package.rglob("*.py"))
    data = sum(data_lines(p.read_text()) for p in package.rglob("*")
               if p.suffix in (".yaml", ".yml") or p.parent.name == "templates")
    added = sum(1 for p in patches.rglob("*.patch") for line in p.read_text().splitlines()
                if line.startswith("+") and not line.startswith("+++"))
    return {"python": python, "data": data, "total": python + data, "patches_added": added}


def line(found):
    return ("mapush/: %(total)d counted lines (%(python)d of Python code, %(data)d of YAML and "
            "templates) of %(budget)d; patches/ adds %(patches_added)d lines to upstream"
            % dict(found, budget=BUDGET))


if __name__ == "__main__":
    print(line(counts()))
    sys.exit(0)
