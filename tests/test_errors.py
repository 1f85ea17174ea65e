"""The exception tree drawn in ``pulsar_rebalance.errors``' docstring is the module's real class hierarchy."""

from __future__ import annotations

import inspect
import re

from pulsar_rebalance import errors

_ROOT = re.compile(r"^(?P<name>[A-Z]\w*)$")
_BRANCH = re.compile(r"^(?P<indent>(?:│   |    )*)(?P<connector>├── |└── )(?P<name>[A-Z]\w*)(?:\s|$)")
_CONTINUATION = re.compile(r"^(?:│   |    )*│?\s")


def drawn_tree(doc: str) -> tuple[dict[str, str | None], list[str]]:
    """``(class -> drawn parent (None for the root), problems with the drawing)`` from the docstring's tree."""
    parents: dict[str, str | None] = {}
    problems: list[str] = []
    stack: list[str] = []  # the path from the root to the last class drawn
    children: dict[str, list[tuple[str, str]]] = {}  # parent -> [(connector, child)] in drawn order
    for line in doc.splitlines():
        if not stack:
            if m := _ROOT.match(line):
                stack = [m["name"]]
                parents[m["name"]] = None
            continue
        if not line.strip():
            break  # the tree ends at the first blank line after its root
        m = _BRANCH.match(line)
        if m is None:
            if not _CONTINUATION.match(line):
                problems.append(f"not part of the tree: {line!r}")
            continue
        depth = len(m["indent"]) // 4 + 1
        if depth > len(stack):
            problems.append(f"{m['name']} is drawn below no class: {line!r}")
            continue
        parent = stack[depth - 1]
        if m["name"] in parents:
            problems.append(f"{m['name']} is drawn twice")
        parents[m["name"]] = parent
        children.setdefault(parent, []).append((m["connector"], m["name"]))
        del stack[depth:]
        stack.append(m["name"])
    for parent, kids in children.items():
        for i, (connector, child) in enumerate(kids):
            want = "└── " if i == len(kids) - 1 else "├── "
            if connector != want:
                problems.append(f"{child} (under {parent}) is drawn with {connector.strip()!r}, not {want.strip()!r}")
    return parents, problems


def real_tree() -> dict[str, str | None]:
    """Every exception class defined in the module -> its base class in the module (None: a root)."""
    classes = {
        name: cls
        for name, cls in inspect.getmembers(errors, inspect.isclass)
        if cls.__module__ == errors.__name__ and issubclass(cls, BaseException)
    }
    tree: dict[str, str | None] = {}
    for name, cls in classes.items():
        bases = [b.__name__ for b in cls.__bases__ if b.__name__ in classes and b is classes[b.__name__]]
        assert len(bases) <= 1, f"{name} has several bases in the module: the docstring's tree cannot draw it"
        tree[name] = bases[0] if bases else None
    return tree


def test_docstring_draws_every_exception_class_under_its_real_base() -> None:
    assert errors.__doc__ is not None
    drawn, problems = drawn_tree(errors.__doc__)
    assert problems == []
    real = real_tree()
    assert sorted(set(real) - set(drawn)) == [], "classes missing from the docstring's tree"
    assert sorted(set(drawn) - set(real)) == [], "classes drawn in the docstring's tree that the module lacks"
    assert drawn == real


def test_the_parser_sees_a_missing_or_misplaced_class() -> None:
    doc = "Tree.\n\nRootError\n├── AError       text\n│   └── BError   more\n│                 continued\n└── CError\n"
    assert drawn_tree(doc) == (
        {"RootError": None, "AError": "RootError", "BError": "AError", "CError": "RootError"},
        [],
    )
    _, problems = drawn_tree(doc.replace("└── CError", "├── CError"))
    assert problems == ["CError (under RootError) is drawn with '├──', not '└──'"]
    _, problems = drawn_tree(doc.replace("│   └── BError", "    └── BError"))
    assert problems == []  # still drawn under AError (the bar is only drawing)
    _, problems = drawn_tree(doc.replace("│   └── BError", "│   │   └── BError"))
    assert problems and "drawn below no class" in problems[0]
