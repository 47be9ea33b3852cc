#!/usr/bin/env python3
"""Move hbtui's flat modules into packages by layer, and write the contracts that keep them there.

Issue 24, items 1 and 2. What it does, in order:

1. ``git mv`` each module of MAPPING to its package (an entry whose file is missing is skipped,
   with a note), creating the packages with a docstring each;
2. splits SPLITS' modules (``cli.py`` into one module per command group, ``demo.py`` into the
   model's part and the command's part), top-level statement by top-level statement;
3. moves DEFINITION_MOVES' definitions to a lower module, which breaks the three package cycles
   and the upward imports the issue names (Kappa to ``core/verdicts.py``, what grading needs of a
   call to ``core/calls.py``, ...), and applies the small patches around them (``patch_*``);
4. rewrites every import (``from hbtui import x``, ``from hbtui.x import y``, ``import hbtui.x``,
   relative ones) by their syntax tree, and every other dotted module path (``hbtui.x.y``
   attributes, monkeypatch targets, ``"module:Class"`` strings, ``python -m hbtui.x``) and file
   path (``hbtui/x.py``) as text, in hbtui/, tests/, bench/, scripts/, docs/, pyproject.toml,
   README.md and .env.example (not CHANGELOG.md: it tells what was true when it was written);
5. has the app import what starts runs from ``hbtui.services`` only, and the layers below
   ``services`` take it from its origin;
6. writes the import-linter contracts into pyproject.toml (layers, acyclic siblings, no Textual
   or Rich below the app, the app through services) and the test that every package has a layer;
7. checks that each dotted path the files name leads to a module and a name (a note if not),
   sorts the imports (``ruff check --fix --select I001,F401,RUF022``; ruff from the gate's
   requirements) and formats (``ruff format``). Its notes at the end say what to look at by hand.

Every text substitution that expects a text raises when it is not found: a run on files that
changed since says what to fix here, rather than doing half of it silently.

Run from anywhere, on a checkout (it uses git)::

    .venv/bin/python scripts/relayout.py           # then: lint-imports, ruff, mypy, the tests

It refuses a tree that is already moved. To run it again from the last commit::

    git reset -q && git checkout -- . && git clean -fdq hbtui tests bench
    git status --short        # shows nothing of hbtui/, tests/, bench/ (this script, if uncommitted)

``git reset`` unstages the renames, ``git checkout -- .`` brings back the flat modules and the
rewritten files, ``git clean`` removes the packages it created. Uncommitted work in those folders
goes too, which is why the script refuses a tree with uncommitted changes there (``--allow-dirty``
runs it all the same: a file not committed is moved, not ``git mv``'d, and a reset deletes it).
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SELF = Path(__file__).resolve()

# ---- the mapping: old module -> new module -------------------------------------------------------

MAPPING: dict[str, str] = {
    # core: what every layer may use; no I/O of its own beyond files and downloads
    "hbtui.background_import": "hbtui.core.background_import",
    "hbtui.completion_groups": "hbtui.core.completion_groups",
    "hbtui.completions": "hbtui.core.completions",
    "hbtui.dataset": "hbtui.core.dataset",
    "hbtui.downloads": "hbtui.core.downloads",
    "hbtui.errors": "hbtui.core.errors",
    "hbtui.events": "hbtui.core.events",
    "hbtui.fidelity": "hbtui.core.fidelity",
    "hbtui.files": "hbtui.core.files",
    "hbtui.grading": "hbtui.core.grading",
    "hbtui.numbering": "hbtui.core.numbering",
    "hbtui.rate_limits": "hbtui.core.rate_limits",
    "hbtui.redact": "hbtui.core.redact",
    "hbtui.reference": "hbtui.core.reference",
    "hbtui.reviews": "hbtui.core.reviews",
    "hbtui.run_kinds": "hbtui.core.run_kinds",
    "hbtui.score_bins": "hbtui.core.score_bins",
    "hbtui.scoring": "hbtui.core.scoring",
    "hbtui.text": "hbtui.core.text",
    "hbtui.verdict_cache": "hbtui.core.verdict_cache",
    # (core/verdicts.py and core/calls.py are new: see DEFINITION_MOVES)
    # core.settings: the settings, their kinds, presets, prices, .env and their documentation
    "hbtui.config": "hbtui.core.settings.config",
    "hbtui.envfile": "hbtui.core.settings.envfile",
    "hbtui.presets": "hbtui.core.settings.presets",
    "hbtui.prices": "hbtui.core.settings.prices",
    "hbtui.setting_kinds": "hbtui.core.settings.setting_kinds",
    "hbtui.settings_docs": "hbtui.core.settings.settings_docs",
    # client: the chat client, its limiter, the connection checks
    "hbtui.client": "hbtui.client.chat",
    "hbtui.limiter": "hbtui.client.limiter",
    "hbtui.checks": "hbtui.client.checks",
    # local: the local model (llama.cpp's server and SmolLM2) and the demo's use of it
    "hbtui.llama_server": "hbtui.local.llama_server",
    "hbtui.local_model": "hbtui.local.model",
    "hbtui.demo": "hbtui.local.demo",  # split: the command's half goes to hbtui.cli.demo (SPLITS)
    # store: as now, with the schema and the stored report
    "hbtui.schema": "hbtui.store.schema",
    "hbtui.run_report": "hbtui.store.run_report",
    # (store/answer_journal.py and store/disk_reserve.py, new on main, are in the store already)
    # analysis: computations over what the store reads
    "hbtui.compare": "hbtui.analysis.compare",
    "hbtui.criteria_table": "hbtui.analysis.criteria_table",
    "hbtui.progress": "hbtui.analysis.progress",
    "hbtui.review_report": "hbtui.analysis.review_report",
    "hbtui.run_stats": "hbtui.analysis.run_stats",
    # render: text, JSON and files made of runs
    "hbtui.compare_report": "hbtui.render.compare_report",
    "hbtui.conversation_markdown": "hbtui.render.conversation_markdown",
    "hbtui.export": "hbtui.render.export",
    "hbtui.export_reference": "hbtui.render.export_reference",
    "hbtui.export_reviews": "hbtui.render.export_reviews",
    "hbtui.printer": "hbtui.render.printer",
    "hbtui.report": "hbtui.render.report",
    "hbtui.run_metadata": "hbtui.render.run_metadata",
    # engine: as now, with the run actions (rename, delete, export) it guards
    "hbtui.run_admin": "hbtui.engine.run_admin",
    # web: `hbtui serve`
    "hbtui.serve": "hbtui.web.serve",
    # cli: a package, one module per command group (SPLITS)
    "hbtui.cli": "hbtui.cli",
    # the tui: the screens' own helpers among the screens (no cycle between tui's modules)
    "hbtui.tui.filter_menu": "hbtui.tui.screens.filter_menu",
    "hbtui.tui.reviewing": "hbtui.tui.screens.reviewing",
}
# Unchanged: hbtui.services (the facade), hbtui.engine.*, hbtui.store.*, hbtui.meta_eval.*,
# hbtui.imports.*, hbtui.tui.* (but the two above), hbtui.__main__, hbtui/templates.

PACKAGE_DOCS: dict[str, str] = {
    "hbtui.core": "The core: datasets, scoring, grading, reviews, verdicts, events, errors, text.\n\n"
    "What every layer above may use. It imports nothing of hbtui outside itself (pyproject.toml's\n"
    "layers contract holds it to that), and never Textual or Rich.",
    "hbtui.core.settings": "The settings: each described once (config), their kinds, presets, prices, .env, their docs.",
    "hbtui.client": "The model's side: the chat client, its per-endpoint limiter, and the connection checks.\n\n"
    "It never imports the store, nor the store it (pyproject.toml's layers contract).",
    "hbtui.local": "The local model: llama.cpp's server and SmolLM2, installed once, and the demo's use of them.",
    "hbtui.analysis": "Computations over what the store reads: comparisons, statistics, progress, reviews' glance.",
    "hbtui.render": "What is made of a run for people and files: reports, the printer, the exports, metadata.",
    "hbtui.web": "`hbtui serve`: the app in a browser.",
}

# ---- splits: a module cut top-level statement by top-level statement -----------------------------
# {source (old name): {"default": target of the file itself (git mv), "names": {name: target}}}
# A name not listed goes to the one target that uses it; used by several or none, the run stops
# and names it: list it here.

CLI = "hbtui.cli"
SPLITS: dict[str, dict] = {
    "hbtui.demo": {
        "default": "hbtui.local.demo",
        "names": {"cmd_demo": "hbtui.cli.demo", "drive_demo": "hbtui.cli.demo"},
        # the model's half takes every other name
        "rest": "hbtui.local.demo",
    },
    "hbtui.cli": {
        "default": CLI,
        "shared": "hbtui.cli.common",  # a name not listed that several groups use, when it can
        "reexport_attribute_uses": True,  # tests read cli.EXIT_OK, cli.main...: kept in hbtui.cli
        "names": {
            **dict.fromkeys(
                [
                    "EXIT_OK",
                    "EXIT_FAILED",
                    "EXIT_USAGE",
                    "EXIT_INCOMPLETE",
                    "EXIT_INTERRUPTED",
                    "EXIT_BROKEN_PIPE",
                    "STOP_SIGNALS",
                    "DETACHED_STOP_SIGNALS",
                    "SETTING_FLAGS",
                    "flag_help",
                    "UsageError",
                    "invoked_as",
                    "say",
                    "_complain",
                    "_warn",
                    "_warn_if_shared",
                    "READ_ONLY_COMMANDS",
                    "settings_from",
                    "_overrides",
                    "prices_or_warn",
                    "_download_progress",
                    "open_for_reading",
                ],
                "hbtui.cli.common",
            ),
            **dict.fromkeys(["OneLineParser", "build_parser", "port_number"], "hbtui.cli.parser"),
            **dict.fromkeys(
                [
                    "drive",
                    "_drove_a_run",
                    "cmd_run",
                    "cmd_meta_eval",
                    "cmd_resume",
                    "cmd_regrade",
                    "cmd_drive_detached",
                ],
                "hbtui.cli.runs",
            ),
            **dict.fromkeys(["cmd_check"], "hbtui.cli.check"),
            **dict.fromkeys(["PAUSED", "CANCELLED", "CONTROL_PATIENCE_SECONDS", "cmd_control"], "hbtui.cli.control"),
            **dict.fromkeys(["cmd_runs", "cmd_show", "cmd_compare"], "hbtui.cli.reading"),
            **dict.fromkeys(["cmd_import", "cmd_export", "cmd_rename", "cmd_delete"], "hbtui.cli.manage"),
            **dict.fromkeys(["check_monitored_run", "run_app", "_demo", "_serve"], "hbtui.cli.app"),
            **dict.fromkeys(["main", "RUN_COMMANDS", "entry", "event_loop_factory", "caught", "_main"], CLI),
        },
    },
}
SPLIT_DOCS: dict[str, str] = {
    "hbtui.cli.common": "What every command shares: exit codes, the one-line messages, settings from flags, the prices.",
    "hbtui.cli.parser": "The command line's parser: every command, its flags, and the settings' flags.",
    "hbtui.cli.runs": "The commands that make calls: `run`, `resume`, `regrade-errors`, `regrade`, `meta-eval`, and the\n"
    "detached driver of a run the app started; `drive` shows a run's progress as plain text.",
    "hbtui.cli.check": "`hbtui check`: each endpoint asked, before a run, whether it answers.",
    "hbtui.cli.control": "`hbtui pause`, `unpause` and `cancel`: asked of the process driving a run, through the database.",
    "hbtui.cli.reading": "The commands that read: `runs`, `show` and `compare`; they never write the database.",
    "hbtui.cli.manage": "The commands that manage runs: `import`, `export`, `rename` and `delete`.",
    "hbtui.cli.app": "The app's commands: the terminal app (no command, `monitor`), `serve`, and the demo's entry.",
    "hbtui.cli.demo": "`hbtui demo`: install the local model, drive a few records on it, then open the app on the run.",
}
CLI_DOC_TAIL = (
    "\n\nOne module a command group: parser (the flags), common (what they share), runs, check,\n"
    "control, reading, manage, app and demo. This module keeps ``main`` and ``entry``."
)

# ---- definitions moved to a lower module (the cycle breakers) ------------------------------------
# (source module (old name), names, destination (new name), docstring if the destination is new)

DEFINITION_MOVES: list[tuple[str, list[str], str, str | None]] = [
    # {compare, reviews, store}: reviews took Kappa from compare, which imports the store, which
    # imports reviews. Kappa is about verdicts: the core.
    (
        "hbtui.compare",
        ["Kappa", "kappa_of", "cell"],
        "hbtui.core.verdicts",
        "Verdicts of two graders (or reviewers) on the same criteria, and how far they agree.\n\n"
        "Cohen's kappa, for a comparison of two runs and for the reviewers of one run alike.",
    ),
    # grading imported the client for what a call is; the client is a layer above the core.
    (
        "hbtui.limiter",
        ["GRADING", "GENERATION"],
        "hbtui.core.calls",
        "What grading (and anything else that asks a model) needs of a call, without the client.\n\n"
        "The client answers to ``Completes``; a grader is given one. The priorities order the calls\n"
        "of one endpoint: grading ahead of generation.",
    ),
    (
        "hbtui.client",
        ["LONE_SURROGATE", "replace_lone_surrogates", "Completes", "ChatResult"],
        "hbtui.core.calls",
        None,
    ),
    # {engine, export, run_metadata}: run_metadata (render) read one set of the engine's.
    ("hbtui.engine.run_settings", ["UNRECORDED_SETTINGS"], "hbtui.core.settings.config", None),
    # The app planned a meta-eval with the runner's functions, and the runner imports the engine:
    # planning (no call made) is a module of its own, which the app may import.
    (
        "hbtui.meta_eval.runner",
        ["require_grader", "meta_requests", "GRADER_REQUEST_KEYS", "plan_meta_eval", "_chunks"],
        "hbtui.meta_eval.plan",
        "A meta-eval planned: its grader required, its requests described, its rows stored. No call is\n"
        "made here (the runner makes them), so the app plans one without reaching the engine.",
    ),
    # The app read the meta-eval's summary from its headless driver (which imports the engine).
    ("hbtui.meta_eval.headless", ["current_summary"], "hbtui.meta_eval.summary", None),
    # tui's screens: the criteria screen imported the run screen for its filter input, and the
    # run screen opens the criteria screen.
    (
        "hbtui.tui.screens.run",
        ["FilterInput"],
        "hbtui.tui.widgets.filter_input",
        "The filter bar's input: enter applies, escape clears and closes it.",
    ),
]
# Names that a module re-exports, read from their origin by everyone (below the re-exporter).
NAME_REDIRECTS: dict[tuple[str, str], str] = {
    ("hbtui.client", "UNPARSEABLE"): "hbtui.core.errors",
    ("hbtui.client", "TRANSIENT_KINDS"): "hbtui.core.errors",
}

# The app (these packages) takes what starts or drives runs from hbtui.services only: a name it
# imported from one of FACADE_OF is imported from services, which gets it from there.
APP_PACKAGES = ("hbtui.tui", "hbtui.web")
FACADE = "hbtui.services"
FACADE_OF = ("hbtui.engine", "hbtui.meta_eval.runner", "hbtui.meta_eval.headless", "hbtui.imports")
# Below services: a name they took from services is taken from its origin instead.
BELOW_FACADE = ("hbtui.engine", "hbtui.meta_eval", "hbtui.imports")

# Files rewritten (besides hbtui/, tests/, bench/, scripts/, docs/ as listed by git).
TOP_FILES = ("pyproject.toml", "README.md", ".env.example")
NOT_REWRITTEN = ("tests/golden/", "tests/__snapshots__/", "runs/", "CHANGELOG.md")
TEXT_SUFFIXES = {".py", ".md", ".toml", ".sh", ".txt", ".cfg", ".ini", ".example", ".tcss", ".yml", ".yaml", ""}

NOTES: list[str] = []


class RelayoutError(SystemExit):
    def __init__(self, message: str) -> None:
        if STARTED:
            message += (
                "\nrelayout: the tree is half moved: reset it before running again"
                " (git reset -q && git checkout -- . && git clean -fdq hbtui tests bench)"
            )
        super().__init__(f"relayout: error: {message}")


STARTED = False  # set once the first file has moved


def note(text: str) -> None:
    NOTES.append(text)
    print(f"relayout: {text}")


# ---- paths and names -----------------------------------------------------------------------------


def path_of(module: str, package: bool = False) -> Path:
    """The file of a module: ``hbtui/x/y.py``, or ``hbtui/x/y/__init__.py`` for a package."""
    parts = module.split(".")
    return ROOT.joinpath(*parts, "__init__.py") if package else ROOT.joinpath(*parts[:-1], parts[-1] + ".py")


def existing_path(module: str) -> Path | None:
    for package in (False, True):
        path = path_of(module, package)
        if path.exists():
            return path
    return None


def module_of(path: Path) -> str | None:
    rel = path.resolve().relative_to(ROOT)
    if rel.suffix != ".py" or rel.parts[0] != "hbtui":
        return None
    parts = list(rel.with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def git(*args: str) -> str:
    result = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
    if result.returncode:
        raise RelayoutError(f"git {' '.join(args)}: {result.stderr.strip()}")
    return result.stdout


def tracked(path: Path) -> bool:
    return not subprocess.run(
        ["git", "ls-files", "--error-unmatch", str(path.relative_to(ROOT))], cwd=ROOT, capture_output=True
    ).returncode


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


CREATED: list[Path] = []


def create(path: Path, text: str) -> None:
    if path.exists():
        raise RelayoutError(f"{path.relative_to(ROOT)} exists already")
    write(path, text)
    CREATED.append(path)


def docstring(text: str) -> str:
    return f'"""{text}\n"""\n' if "\n" in text else f'"""{text}"""\n'


# ---- top-level statements -----------------------------------------------------------------------


class Unit:
    """One top-level statement with the comments and blank lines above it."""

    def __init__(self, node: ast.stmt, text: str, start: int, end: int) -> None:
        self.node, self.text, self.start, self.end = node, text, start, end
        self.defines = defined_names(node)
        self.uses = used_names(node)
        self.globals = {name for n in ast.walk(node) if isinstance(n, ast.Global) for name in n.names}


def defined_names(node: ast.stmt) -> list[str]:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return [node.name]
    targets: list[ast.expr] = []
    if isinstance(node, ast.Assign):
        targets = node.targets
    elif isinstance(node, ast.AnnAssign | ast.AugAssign):
        targets = [node.target]
    names = []
    for target in targets:
        for n in ast.walk(target):
            if isinstance(n, ast.Name):
                names.append(n.id)
    return names


def used_names(node: ast.AST) -> set[str]:
    names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
    # Annotations written as strings name types too.
    for n in ast.walk(node):
        if (
            isinstance(n, ast.Constant)
            and isinstance(n.value, str)
            and re.fullmatch(r"[A-Za-z_][\w.\[\], |]*", n.value)
        ):
            names |= {word for word in re.findall(r"[A-Za-z_]\w*", n.value)}
    return names


def is_type_checking_block(node: ast.stmt) -> bool:
    return (
        isinstance(node, ast.If)
        and "TYPE_CHECKING" in ast.unparse(node.test)
        and not node.orelse
        and all(isinstance(n, ast.Import | ast.ImportFrom) for n in node.body)
    )


class Source:
    """A module's text cut into its docstring, its top-level imports and its other statements."""

    def __init__(self, text: str, label: str) -> None:
        self.text, self.label = text, label
        self.lines = text.splitlines(keepends=True)
        self.tree = ast.parse(text)
        body = self.tree.body
        self.doc: str | None = None
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            self.doc = "".join(self.lines[body[0].lineno - 1 : body[0].end_lineno])
            body = body[1:]
        self.imports: list[ast.stmt] = []  # Import, ImportFrom, or `if TYPE_CHECKING:` of imports
        self.units: list[Unit] = []
        previous_end = self.tree.body[0].end_lineno if self.doc else 0
        for node in body:
            start = previous_end + 1
            assert node.end_lineno is not None
            if isinstance(node, ast.Import | ast.ImportFrom) or is_type_checking_block(node):
                self.imports.append(node)
            else:
                self.units.append(Unit(node, "".join(self.lines[start - 1 : node.end_lineno]), start, node.end_lineno))
            previous_end = node.end_lineno
        self.last_import_line = max((n.end_lineno or 0 for n in self.imports), default=0)

    def defined(self) -> dict[str, Unit]:
        return {name: unit for unit in self.units for name in unit.defines}


def import_bindings(node: ast.Import | ast.ImportFrom) -> list[tuple[ast.alias, str]]:
    out = []
    for alias in node.names:
        if isinstance(node, ast.Import):
            out.append((alias, alias.asname or alias.name.split(".")[0]))
        else:
            out.append((alias, alias.asname or alias.name))
    return out


def filtered_imports(source: Source, used: set[str], exclude: set[str] = frozenset()) -> list[str]:
    """The source's top-level imports that bind a name of ``used`` (not of ``exclude``), as text;
    an ``if TYPE_CHECKING:`` block of them too, with the TYPE_CHECKING it needs."""
    used = set(used) - set(exclude)

    def one(node: ast.Import | ast.ImportFrom, indent: str = "") -> str | None:
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            return indent + ast.unparse(node)
        kept = [alias for alias, bound in import_bindings(node) if bound in used]
        if not kept:
            return None
        copy = ast.ImportFrom(node.module, kept, node.level) if isinstance(node, ast.ImportFrom) else ast.Import(kept)
        segment = ast.get_source_segment(source.text, node) or ""
        noqa = re.search(r"#\s*noqa[^\n]*", segment)
        return indent + ast.unparse(copy) + (f"  {noqa.group(0)}" if noqa else "")

    blocks: dict[int, str] = {}
    for node in source.imports:
        if isinstance(node, ast.If):
            inner = [line for line in (one(n, "    ") for n in node.body) if line]  # type: ignore[arg-type]
            if inner:
                blocks[id(node)] = "if TYPE_CHECKING:\n" + "\n".join(inner)
                used.add("TYPE_CHECKING")
    out: list[str] = []
    for node in source.imports:
        line = blocks.get(id(node)) if isinstance(node, ast.If) else one(node)  # type: ignore[arg-type]
        if line:
            out.append(line)
    return out


def insert_after_imports(text: str, lines: list[str], label: str) -> str:
    """``lines`` (import statements) after the module's last top-level import."""
    source = Source(text, label)
    # after the plain imports: an `if TYPE_CHECKING:` block stays below them
    at = max((n.end_lineno or 0 for n in source.imports if not isinstance(n, ast.If)), default=0)
    block = "".join(line + "\n" for line in lines)
    if not at:
        at = source.tree.body[0].end_lineno or 0 if source.doc else 0
        block = "\n" + block
    body = source.lines
    return "".join(body[:at]) + block + "".join(body[at:])


# ---- step 2: the splits ------------------------------------------------------------------------


def split_modules(sources: dict[str, str]) -> dict[str, str]:
    """The text of each split's targets, and NAME_MAP's entries for them."""
    parts: dict[str, list[tuple[Source, Unit]]] = defaultdict(list)
    placed: dict[str, dict[str, str]] = {}  # source -> name -> target
    parsed = {old: Source(text, old) for old, text in sources.items()}
    for old, source in parsed.items():
        spec = SPLITS[old]
        where: dict[str, str] = {}
        unplaced: list[Unit] = []
        for unit in source.units:
            if not unit.defines:
                raise RelayoutError(
                    f"{old}, line {unit.start}: a top-level statement that defines no name"
                    f" ({unit.node.__class__.__name__}): place it by hand in SPLITS"
                )
            targets = {spec["names"].get(name) for name in unit.defines}
            if len(targets - {None}) > 1:
                raise RelayoutError(f"{old}, line {unit.start}: {unit.defines} are given different targets")
            target = next(iter(targets - {None}), None) or spec.get("rest")
            if target is None:
                unplaced.append(unit)
            else:
                where.update(dict.fromkeys(unit.defines, target))
        # Not listed: the one target whose statements use it (found again as names are placed),
        # else the shared target, when all it uses of this module is there.
        progress = True
        while unplaced and progress:
            progress = False
            for unit in list(unplaced):
                users = [other for other in source.units if other is not unit and set(unit.defines) & other.uses]
                targets = {where.get(other.defines[0]) for other in users}
                if users and None not in targets and len(targets) == 1:
                    target = targets.pop()
                elif (
                    spec.get("shared")
                    and None not in targets
                    and not (
                        {n for other in source.units for n in other.defines if n in unit.uses}
                        - {n for n, t in where.items() if t == spec["shared"]}
                        - {n for u in unplaced for n in u.defines}
                    )
                ):
                    target = spec["shared"]
                else:
                    continue
                assert target is not None
                note(f"{old}: {', '.join(unit.defines)} (line {unit.start}, not in SPLITS) goes to {target}")
                where.update(dict.fromkeys(unit.defines, target))
                unplaced.remove(unit)
                progress = True
        if spec.get("shared"):  # nothing in the shared target may use a name of another
            shared_names = {n for n, t in where.items() if t == spec["shared"]}
            for unit in source.units:
                if unit.defines[0] in shared_names:
                    above = sorted(
                        n for n in unit.uses if where.get(n, spec["shared"]) != spec["shared"] and n in where
                    )
                    if above:
                        raise RelayoutError(
                            f"{old}: {unit.defines[0]} ({spec['shared']}) uses {above}, placed elsewhere"
                        )
        for unit in unplaced:
            users = sorted({where.get(o.defines[0], "?") for o in source.units if set(unit.defines) & o.uses})
            raise RelayoutError(
                f"{old}: {', '.join(unit.defines)} (line {unit.start}) is not in SPLITS and is used by"
                f" {users or 'nothing'}: give it its module in SPLITS['{old}']['names']"
            )
        placed[old] = where
        for unit in source.units:
            parts[where[unit.defines[0]]].append((source, unit))
        for name, target in where.items():
            NAME_MAP[(old, name)] = target

    texts: dict[str, str] = {}
    for target, pieces in parts.items():
        sources_here = {id(s): s for s, _ in pieces}
        defined_here = {name for _, unit in pieces for name in unit.defines}
        header: list[str] = []
        cross: dict[str, set[str]] = defaultdict(set)
        module_refs: dict[str, str] = {}  # a shared global: name -> its module's alias here
        for source in sources_here.values():
            old = next(o for o, s in parsed.items() if s is source)
            mine = [unit for s, unit in pieces if s is source]
            used = set().union(*(unit.uses for unit in mine))
            for line in filtered_imports(source, set(used), exclude=defined_here):
                if line not in header:
                    header.append(line)
            for name in sorted(used - defined_here):
                other = placed[old].get(name)
                if other is None or other == target:
                    continue
                shared = [u for u in parsed[old].units if name in u.globals]
                if shared:  # rebound by a `global` there: read it through its module, never copied
                    module_refs[name] = "_" + other.rsplit(".", 1)[1]
                    package, leaf = other.rsplit(".", 1)
                    header.append(f"from {package} import {leaf} as {module_refs[name]}")
                else:
                    cross[other].add(name)
        for other, names in sorted(cross.items()):
            header.append(f"from {other} import {', '.join(sorted(names))}")
        body_texts = []
        previous: Unit | None = None
        for _, unit in pieces:
            text = qualify_names(unit.text, unit, module_refs) if module_refs else unit.text
            if previous is not None and previous.end + 1 == unit.start and body_texts:
                body_texts[-1] += text  # next to each other in the source: as they were
            else:
                body_texts.append(text.lstrip("\n"))
            previous = unit
        reexports: list[str] = []
        spec_of_target = next((spec for spec in SPLITS.values() if spec["default"] == target), None)
        if spec_of_target and spec_of_target.get("reexport_attribute_uses"):
            reexports = sorted(ATTRIBUTE_USES.get(target, set()) - defined_here)
            by_target: dict[str, list[str]] = defaultdict(list)
            for name in reexports:
                old = next(o for o, s in SPLITS.items() if s["default"] == target)
                home = placed[old].get(name)
                if home is not None:
                    by_target[home].append(name)
                    continue
                origin = [
                    line
                    for line in filtered_imports(parsed[old], {name})
                    if not line.startswith(("from __future__", "if "))
                ]
                if not origin:
                    raise RelayoutError(f"{target}: {name} is read as an attribute of it but is not defined in {old}")
                header.extend(line for line in origin if line not in header)
            for home, names in sorted(by_target.items()):
                header.append(f"from {home} import {', '.join(sorted(names))}")
            if reexports:
                note(f"{target} re-exports, for the callers that read them from it: {', '.join(reexports)}")
        first = next(iter(sources_here.values()))
        if target in SPLIT_DOCS:
            doc = docstring(SPLIT_DOCS[target])
        else:
            doc = first.doc or '""""""\n'
            if target == CLI:
                doc = doc.rstrip()[:-3].rstrip() + CLI_DOC_TAIL + '\n"""\n'
        future = [line for line in header if line.startswith("from __future__")]
        rest = list(dict.fromkeys(line for line in header if not line.startswith(("from __future__", "if "))))
        rest += list(dict.fromkeys(line for line in header if line.startswith("if ")))  # after the imports
        text = (
            doc
            + "\n"
            + "".join(line + "\n" for line in dict.fromkeys(future or ["from __future__ import annotations"]))
        )
        text += "\n" + "".join(line + "\n" for line in rest) + "\n"
        if reexports:
            text += "__all__ = [" + ", ".join(f'"{name}"' for name in reexports) + "]\n\n"
        text += "\n\n".join(t.rstrip("\n") + "\n" for t in body_texts)
        texts[target] = text
    return texts


def joined(units: list[Unit]) -> str:
    """The units' text: those next to each other in the source as they were, others apart."""
    out = ""
    for previous, unit in zip([None, *units], units):
        if previous is not None and previous.end + 1 == unit.start:
            out += unit.text
        else:
            out += ("\n\n" if out else "") + unit.text.lstrip("\n")
    return out


def qualify_names(text: str, unit: Unit, refs: dict[str, str]) -> str:
    """``text`` (the unit's) with each read of a name of ``refs`` as ``alias.name``."""
    lines = text.splitlines(keepends=True)
    offset = unit.start  # the unit's text starts at that line
    hits = sorted(
        (n.lineno, n.col_offset, n.id)
        for n in ast.walk(unit.node)
        if isinstance(n, ast.Name) and n.id in refs and isinstance(n.ctx, ast.Load)
    )
    for lineno, col, name in reversed(hits):
        index = lineno - offset
        line = lines[index]
        if line[col : col + len(name)] != name:
            raise RelayoutError(f"qualify {name}: not found where the syntax tree says")
        lines[index] = line[:col] + f"{refs[name]}.{name}" + line[col + len(name) :]
        if any(
            isinstance(n, ast.Name) and n.id == name and not isinstance(n.ctx, ast.Load) for n in ast.walk(unit.node)
        ):
            raise RelayoutError(f"{name} is assigned outside its module: move it with its writer")
    return "".join(lines)


# ---- step 3: definitions moved ------------------------------------------------------------------


def move_definitions(old: str, names: list[str], dst: str, doc: str | None) -> None:
    src_path = existing_path(new_name(old))
    if src_path is None:
        raise RelayoutError(f"moving {names} from {old}: its file is missing")
    source = Source(src_path.read_text(encoding="utf-8"), old)
    defined = source.defined()
    missing = [name for name in names if name not in defined]
    if missing:
        raise RelayoutError(
            f"{old} ({src_path.relative_to(ROOT)}) no longer defines {missing}: update DEFINITION_MOVES"
        )
    units = list(dict.fromkeys(defined[name] for name in names))
    for unit in units:
        extra = set(unit.defines) - set(names)
        if extra:
            raise RelayoutError(f"{old}: {names} share a statement with {sorted(extra)}: list them too")
    moved_uses = set().union(*(unit.uses for unit in units))
    left_behind = sorted((moved_uses & set(defined)) - set(names))
    if left_behind:
        raise RelayoutError(f"{old}: {names} use {left_behind}, which stay: move them too, or leave the move")
    moved_text = joined(units)
    dst_path = path_of(dst)
    dst_defines = set(Source(dst_path.read_text(encoding="utf-8"), dst).defined()) if dst_path.exists() else set()
    needed = filtered_imports(source, moved_uses, exclude=dst_defines)  # a re-export of dst's own: not imported
    # The source, without them, and importing them back where it still uses them.
    keep = source.lines[:]
    for unit in sorted(units, key=lambda u: -u.start):
        del keep[unit.start - 1 : unit.end]
    rest = "".join(keep)
    still = used_names(ast.parse(rest)) & set(names)
    rest = re.sub(r"\n{4,}", "\n\n\n", rest)
    if still:
        rest = insert_after_imports(rest, [f"from {dst} import {', '.join(sorted(still))}"], old)
    write(src_path, rest)
    needed = [line for line in needed if not line.startswith("from __future__")]
    if dst_path.exists():
        text = dst_path.read_text(encoding="utf-8")
        clash = set(Source(text, dst).defined()) & set(names)
        if clash:
            raise RelayoutError(f"{dst} defines {sorted(clash)} already")
        if needed:
            text = insert_after_imports(text, needed, dst)
        write(dst_path, text.rstrip("\n") + "\n\n\n" + moved_text)
    else:
        if doc is None:
            raise RelayoutError(f"{dst} is new: give it a docstring in DEFINITION_MOVES")
        text = docstring(doc) + "\nfrom __future__ import annotations\n\n" + "".join(line + "\n" for line in needed)
        create(dst_path, text + "\n\n" + moved_text)
    for name in names:
        NAME_MAP[(old, name)] = dst


# ---- step 4: the rewrite -------------------------------------------------------------------------

NAME_MAP: dict[tuple[str, str], str] = {}
OLD: dict[str, str] = {}  # old module -> new module (present ones)
NEW: set[str] = set()  # every new module and package
ATTRIBUTE_USES: dict[str, set[str]] = defaultdict(set)  # split module -> names read as its attributes
FACADE_NEEDS: dict[str, set[str]] = defaultdict(set)  # origin module -> names services must export
CHAIN = re.compile(r"(?<![\w.])hbtui(?:\.[A-Za-z_]\w*)+(?::[A-Za-z_]\w*)?")
PATH = re.compile(r"(?<![\w.-])hbtui/((?:[A-Za-z_]\w*/)*[A-Za-z_]\w*)\.py\b")


def new_name(old: str) -> str:
    return OLD.get(old, old)


def destination(module: str, name: str) -> str | None:
    """Where ``name`` of ``module`` (old names) lives now; None when it did not move."""
    if (module, name) in NAME_MAP:
        return NAME_MAP[(module, name)]
    if module in OLD:
        return OLD[module]
    return None


def rewrite_chain(match: re.Match) -> str:
    text = match.group(0)
    chain, _, colon_name = text.partition(":")
    parts = chain.split(".")
    for i in range(len(parts), 0, -1):
        prefix = ".".join(parts[:i])
        following = parts[i] if i < len(parts) else colon_name
        if following and (prefix, following) in NAME_MAP:
            new = NAME_MAP[(prefix, following)]
            return ".".join([new, *parts[i:]]) + (f":{colon_name}" if colon_name else "")
        if prefix in OLD:
            new = OLD[prefix]
            return ".".join([new, *parts[i:]]) + (f":{colon_name}" if colon_name else "")
        if prefix in NEW:  # a new module already (written by this script)
            return text
    return text


def rewrite_path(match: re.Match) -> str:
    module = "hbtui." + match.group(1).replace("/", ".")
    if module not in OLD:
        return match.group(0)
    new = OLD[module]
    if new in PACKAGES_FROM_MODULES:
        return "hbtui/" + "/".join(new.split(".")[1:]) + "/"
    return "hbtui/" + "/".join(new.split(".")[1:]) + ".py"


PACKAGES_FROM_MODULES: set[str] = set()  # modules that became packages (cli)


def rewrite_text(text: str) -> str:
    return PATH.sub(rewrite_path, CHAIN.sub(rewrite_chain, text))


def absolute_module(node: ast.ImportFrom, own: str | None, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    if own is None:
        raise RelayoutError("a relative import outside hbtui")
    base = own.split(".") if is_package else own.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def rewrite_import(
    node: ast.Import | ast.ImportFrom, segment: str, own: str | None, is_package: bool, in_app: bool
) -> str | None:
    """The import's new text, or None when it stays as written."""
    if isinstance(node, ast.Import):
        changed = False
        names = []
        for alias in node.names:
            new = CHAIN.sub(rewrite_chain, alias.name) if alias.name.startswith("hbtui.") else alias.name
            if alias.name in SPLITS:
                note(f"`import {alias.name}` imports {new}; the names split off are not read through it")
            changed |= new != alias.name
            names.append(new + (f" as {alias.asname}" if alias.asname else ""))
        return "import " + ", ".join(names) if changed else None
    module = absolute_module(node, own, is_package)
    if not module.startswith("hbtui"):
        return None
    groups: dict[str, list[str]] = {}
    dropped = []
    for alias in node.names:
        bound = alias.asname or alias.name
        full = f"{module}.{alias.name}"
        if full in OLD and alias.name != "*":  # a module: from hbtui import client
            parent, leaf = OLD[full].rsplit(".", 1)
            groups.setdefault(parent, []).append(leaf if leaf == bound else f"{leaf} as {bound}")
            continue
        if full in NEW:  # a module of the new layout: from hbtui.cli import runs
            groups.setdefault(module, []).append(alias.name + (f" as {alias.asname}" if alias.asname else ""))
            continue
        dest = destination(module, alias.name) or module
        if in_app and dest.startswith(FACADE_OF) and dest != FACADE:
            FACADE_NEEDS[dest].add(alias.name)
            dest = FACADE
        if dest == own:  # defined in this very module now
            if alias.asname:
                raise RelayoutError(f"{own}: `from {module} import {alias.name} as {alias.asname}` imports itself")
            dropped.append(alias.name)
            continue
        groups.setdefault(dest, []).append(alias.name + (f" as {alias.asname}" if alias.asname else ""))
    original = [a.name + (f" as {a.asname}" if a.asname else "") for a in node.names]
    if not dropped and list(groups) == [module] and groups[module] == original and not node.level:
        return None
    if not groups:
        return "pass"
    if len(groups) == 1 and not dropped and groups[next(iter(groups))] == original and not node.level:
        # one new module for all: keep the text as written (comments, parentheses)
        new = next(iter(groups))
        replaced, count = re.subn(r"^from\s+" + re.escape(module) + r"\s+import\b", f"from {new} import", segment)
        if count == 1:
            return replaced
    comments = re.findall(r"#\s*(?:noqa|type:)[^\n]*", segment)
    other_comments = [c for c in re.findall(r"#[^\n]*", segment) if c not in comments]
    if other_comments:
        note(f"{own or 'a file'}: comment dropped from a rewritten import: {other_comments[0]}")
    tail = f"  {comments[0]}" if comments else ""
    return "\n".join(f"from {dest} import {', '.join(names)}{tail}" for dest, names in groups.items())


def rewrite_python(path: Path, text: str) -> str:
    own = module_of(path) if path.is_relative_to(ROOT / "hbtui") else None
    is_package = path.name == "__init__.py"
    in_app = bool(own) and own.startswith(APP_PACKAGES)  # type: ignore[union-attr]
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        raise RelayoutError(f"{path.relative_to(ROOT)}: {exc}") from None
    offsets = [0]
    for line in text.splitlines(keepends=True):
        offsets.append(offsets[-1] + len(line))
    edits: list[tuple[int, int, str]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Import | ast.ImportFrom):
            continue
        start = offsets[node.lineno - 1] + node.col_offset
        end = offsets[node.end_lineno - 1] + node.end_col_offset  # type: ignore[operator]
        segment = text[start:end]
        new = rewrite_import(node, segment, own, is_package, in_app)
        if new is None:
            edits.append((start, end, segment))
            continue
        line_start = text[offsets[node.lineno - 1] : start]
        if line_start.strip():
            raise RelayoutError(f"{path.relative_to(ROOT)}:{node.lineno}: an import after other code on its line")
        if new == "pass" and node.col_offset == 0:
            end = end + 1 if text[end : end + 1] == "\n" else end
            edits.append((start, end, ""))
            continue
        edits.append((start, end, new.replace("\n", "\n" + line_start)))
    edits.sort()
    out, at = [], 0
    for start, end, new in edits:
        if start < at:
            continue
        out.append(rewrite_text(text[at:start]))
        out.append(new)
        at = end
    out.append(rewrite_text(text[at:]))
    return "".join(out)


def files_to_rewrite() -> list[Path]:
    listed = git(
        "ls-files", "-co", "--exclude-standard", "--", "hbtui", "tests", "bench", "scripts", "docs", *TOP_FILES
    )
    out = []
    for name in listed.splitlines():
        path = ROOT / name
        if not path.is_file() or path.resolve() == SELF or name.startswith(NOT_REWRITTEN):
            continue
        if path.suffix not in TEXT_SUFFIXES and path.name not in TOP_FILES:
            continue
        out.append(path)
    return out


def collect_attribute_uses() -> None:
    """Names read as attributes of a split module that keeps its name (``cli.EXIT_OK``)."""
    for path in files_to_rewrite():
        if path.suffix != ".py":
            continue
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text)
        for old, spec in SPLITS.items():
            parent, leaf = old.rsplit(".", 1)
            for name in re.findall(re.escape(old) + r"\.([A-Za-z_]\w*)", text):
                ATTRIBUTE_USES[spec["default"]].add(name)
            bound = set()  # what the module is called here
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and node.module == parent and not node.level:
                    bound |= {a.asname or a.name for a in node.names if a.name == leaf}
                elif isinstance(node, ast.Import):
                    bound |= {a.asname for a in node.names if a.name == old and a.asname}
            for node in ast.walk(tree):
                if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in bound:
                    ATTRIBUTE_USES[spec["default"]].add(node.attr)
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "setattr"
                    and node.args
                    and (
                        (isinstance(node.args[0], ast.Name) and node.args[0].id in bound)
                        or (isinstance(node.args[0], ast.Constant) and str(node.args[0].value).startswith(old + "."))
                    )
                ):
                    where = f"{path.relative_to(ROOT)}:{node.lineno}"
                    note(f"{where} monkeypatches {old}: check that it patches where the name is read now")
    for target in list(ATTRIBUTE_USES):
        spec = next(s for s in SPLITS.values() if s["default"] == target)
        if not spec.get("reexport_attribute_uses"):
            names = {n for n in ATTRIBUTE_USES[target] if spec["names"].get(n, spec.get("rest")) != target}
            if names:
                note(f"{target} is read for {sorted(names)}, which moved elsewhere: fix those callers by hand")


# ---- step 5 and the patches ----------------------------------------------------------------------


def replace_once(path: Path, pattern: str, replacement: str, what: str, regex: bool = True) -> None:
    text = path.read_text(encoding="utf-8")
    if regex:
        new, count = re.subn(pattern, replacement, text, count=1, flags=re.M)
    else:
        count = text.count(pattern)
        new = text.replace(pattern, replacement, 1)
    if count != 1:
        raise RelayoutError(
            f"{path.relative_to(ROOT)}: {what}: the text expected is not there (or not once): {pattern!r}"
        )
    write(path, new)


def patch_reviews() -> None:
    """reviews.py read Kappa from compare under TYPE_CHECKING, and kappa_of inside a function,
    because compare imports the store, which imports reviews: both come from core.verdicts now."""
    path = existing_path(new_name("hbtui.reviews"))
    assert path is not None
    replace_once(
        path,
        r"^if TYPE_CHECKING:[^\n]*\n    from hbtui\.compare import Kappa\n",
        "from hbtui.core.verdicts import Kappa, kappa_of\n",
        "the TYPE_CHECKING import of Kappa",
    )
    replace_once(path, r"^    from hbtui\.compare import kappa_of\n\n?", "", "the lazy import of kappa_of")


def patch_services() -> None:
    """services exports what the app imported from the engine or the meta-eval's driver."""
    path = ROOT / "hbtui" / "services.py"
    text = path.read_text(encoding="utf-8")
    exported = set(re.findall(r'"(\w+)"', text[text.index("__all__") :])) if "__all__" in text else None
    if exported is None:
        raise RelayoutError("hbtui/services.py has no __all__")
    lines, names = [], []
    for origin, wanted in sorted(FACADE_NEEDS.items()):
        missing = sorted(wanted - exported)
        if missing:
            lines.append(f"from {origin} import {', '.join(missing)}")
            names += missing
    if not names:
        return
    text = insert_after_imports(text, lines, "hbtui.services")
    text, count = re.subn(r"__all__ = \[\n", "__all__ = [\n" + "".join(f'    "{n}",\n' for n in names), text, count=1)
    if count != 1:
        raise RelayoutError('hbtui/services.py: "__all__ = [" followed by a new line was expected')
    write(path, text)
    note(f"hbtui.services exports now, for the app: {', '.join(names)}")


def patch_below_facade() -> None:
    """What the engine, the meta-eval and the imports took from services (above them) they take
    from its origin."""
    services = Source((ROOT / "hbtui" / "services.py").read_text(encoding="utf-8"), FACADE)
    origin: dict[str, str] = {}
    for node in services.imports:
        if isinstance(node, ast.ImportFrom) and node.module:
            for _, bound in import_bindings(node):
                origin[bound] = node.module
    for package in BELOW_FACADE:
        folder = path_of(package, package=True).parent
        for path in sorted(folder.rglob("*.py")) if folder.is_dir() else []:
            text = path.read_text(encoding="utf-8")
            if "hbtui.services" not in text:
                continue
            tree = ast.parse(text)
            offsets = [0]
            for line in text.splitlines(keepends=True):
                offsets.append(offsets[-1] + len(line))
            edits = []
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and node.module == FACADE:
                    by: dict[str, list[str]] = defaultdict(list)
                    for alias in node.names:
                        if alias.name not in origin:
                            raise RelayoutError(f"{path.relative_to(ROOT)}: {alias.name} of services has no origin")
                        by[origin[alias.name]].append(alias.name + (f" as {alias.asname}" if alias.asname else ""))
                    indent = " " * node.col_offset
                    new = ("\n" + indent).join(f"from {m} import {', '.join(n)}" for m, n in by.items())
                    start = offsets[node.lineno - 1] + node.col_offset
                    end = offsets[node.end_lineno - 1] + node.end_col_offset  # type: ignore[operator]
                    edits.append((start, end, new))
                elif isinstance(node, ast.Import) and any(a.name == FACADE for a in node.names):
                    raise RelayoutError(f"{path.relative_to(ROOT)}: `import hbtui.services` below services")
            for start, end, new in sorted(edits, reverse=True):
                text = text[:start] + new + text[end:]
            if edits:
                write(path, text)
                note(f"{path.relative_to(ROOT)}: takes from the engine what it took from services")


def fix_file_depths(moves: dict[Path, Path]) -> None:
    """``Path(__file__).resolve().parents[N]`` in a module that moved deeper."""
    for old, new in moves.items():
        delta = len(new.relative_to(ROOT).parts) - len(old.relative_to(ROOT).parts)
        text = new.read_text(encoding="utf-8")
        if "__file__" not in text or not delta:
            continue
        pattern = r"Path\(__file__\)\.resolve\(\)\.parents\[(\d+)\]"
        if len(re.findall(r"__file__", text)) != len(re.findall(pattern, text)):
            raise RelayoutError(
                f"{new.relative_to(ROOT)} reads __file__ otherwise than through parents[N]: fix it by hand"
            )
        text = re.sub(pattern, lambda m, d=delta: f"Path(__file__).resolve().parents[{int(m.group(1)) + d}]", text)
        write(new, text)


CONTRACTS = """[tool.importlinter]
root_package = "hbtui"
include_external_packages = true
# An import made for the type checker alone (under `if TYPE_CHECKING:`) is no dependency when the
# code runs: the contracts leave it out, as harlequin's do.
exclude_type_checking_imports = true

[[tool.importlinter.contracts]]
name = "Layers: each package imports only those below it; store, client and local never import each other"
type = "layers"
containers = ["hbtui"]
layers = [
    "cli",
    "tui | web",
    "services",
    "meta_eval | imports",
    "engine",
    "render",
    "analysis",
    "store | client | local",
    "core",
]
# A new module or package of hbtui must be given its layer here.
exhaustive = true
exhaustive_ignores = ["__main__"]

[[tool.importlinter.contracts]]
name = "No import cycle between the modules of any package"
type = "acyclic_siblings"
ancestors = ["hbtui"]
ignore_imports = [
    # The help shows every screen's keys, read from the screens' bindings, the help's own among them.
    "hbtui.tui.screens.help -> hbtui.tui.keymap",
]

[[tool.importlinter.contracts]]
name = "Below the app nothing imports Textual or Rich (the headless commands and the engine stay light)"
type = "forbidden"
source_modules = [
    "hbtui.core", "hbtui.client", "hbtui.local", "hbtui.store", "hbtui.analysis", "hbtui.render",
    "hbtui.engine", "hbtui.meta_eval", "hbtui.imports", "hbtui.services",
]
forbidden_modules = ["textual", "rich"]

[[tool.importlinter.contracts]]
name = "The app reaches runs only through hbtui.services"
type = "forbidden"
source_modules = ["hbtui.tui", "hbtui.web"]
forbidden_modules = ["hbtui.engine", "hbtui.meta_eval.runner", "hbtui.meta_eval.headless", "hbtui.imports"]
# Indirect imports count too: only the facade's own imports are let through.
ignore_imports = ["hbtui.services -> hbtui.**"]
"""


def write_contracts() -> None:
    path = ROOT / "pyproject.toml"
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == "[tool.importlinter]")
    except StopIteration:
        raise RelayoutError("pyproject.toml: no [tool.importlinter] table") from None
    end = next(
        (
            i
            for i in range(start + 1, len(lines))
            if lines[i].startswith("[") and not lines[i].startswith(("[tool.importlinter", "[[tool.importlinter"))
        ),
        len(lines),
    )
    after = "".join(lines[end:])
    write(path, "".join(lines[:start]) + CONTRACTS + ("\n" + after if after else ""))


LAYERS_TEST = """def test_every_package_of_hbtui_has_its_layer_in_the_contracts():
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    layers = next(c for c in contracts if c["type"] == "layers")
    named = {part.strip() for layer in layers["layers"] for part in layer.replace(":", "|").split("|")}
    hbtui = ROOT / "hbtui"
    children = {p.stem for p in hbtui.glob("*.py")} | {p.name for p in hbtui.iterdir() if (p / "__init__.py").exists()}
    assert children - {"__init__", "__main__"} == named, "a new module or package of hbtui must be given its layer"
    assert layers["exhaustive"] and layers["containers"] == ["hbtui"]
    # Below the app (cli, tui, web), no package imports Textual or Rich.
    light = next(c for c in contracts if "textual" in c.get("forbidden_modules", []))
    assert {"textual", "rich"} <= set(light["forbidden_modules"])
    assert named - {m.removeprefix("hbtui.") for m in light["source_modules"]} == {"cli", "tui", "web"}
    assert any(c["type"] == "acyclic_siblings" and c["ancestors"] == ["hbtui"] for c in contracts)
"""


OLD_LAYERS_TEST = "test_every_core_module_is_held_to_the_contract_that_it_never_imports_the_app"


def patch_layers_test() -> None:
    path = ROOT / "tests" / "test_layers.py"
    text = path.read_text(encoding="utf-8")
    tree = ast.parse(text)
    node = next(
        (n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == OLD_LAYERS_TEST),
        None,
    )
    if node is None:
        raise RelayoutError(
            "tests/test_layers.py: the test of the core contract's module list is gone: rewrite LAYERS_TEST"
        )
    lines = text.splitlines(keepends=True)
    text = "".join(lines[: node.lineno - 1]) + LAYERS_TEST + "".join(lines[node.end_lineno :])
    text = text.replace(
        '"""The layer contracts (pyproject.toml, run by the gate\'s lint-imports) cover every core module."""',
        '"""The layer contracts (pyproject.toml, run by the gate\'s lint-imports) cover every package."""',
    )
    write(path, text)


# ---- main -------------------------------------------------------------------------------------


def refuse_a_moved_tree() -> None:
    if (ROOT / "hbtui" / "core").exists() or not (ROOT / "hbtui" / "cli.py").exists():
        raise RelayoutError(
            "the tree is moved already (hbtui/core exists, or hbtui/cli.py does not). To run again:"
            " git reset -q && git checkout -- . && git clean -fdq hbtui tests bench (see this script's docstring)"
        )
    if not (ROOT / ".git").exists():
        raise RelayoutError(f"{ROOT} is not a git checkout")
    dirty = git("status", "--porcelain", "--", "hbtui", "tests", "bench", "pyproject.toml", "README.md", ".env.example")
    if dirty.strip() and "--allow-dirty" not in sys.argv:
        raise RelayoutError(
            "uncommitted changes in the files it rewrites: commit them first, so that a reset (see the"
            " docstring) cannot take them; or run with --allow-dirty\n" + dirty
        )


def top_level_names(module: str) -> set[str] | None:
    path = existing_path(module)
    if path is None:
        return None
    if module not in _NAMES:
        source = Source(path.read_text(encoding="utf-8"), module)
        names = set(source.defined()) | {"__file__", "__path__", "__name__", "__doc__"}
        for node in ast.walk(source.tree):
            if isinstance(node, ast.Import | ast.ImportFrom) and node.col_offset == 0:
                names |= {bound for _, bound in import_bindings(node)}
        if path.name == "__init__.py":
            names |= {p.stem for p in path.parent.glob("*.py")} | {p.name for p in path.parent.iterdir() if p.is_dir()}
        _NAMES[module] = names
    return _NAMES[module]


_NAMES: dict[str, set[str]] = {}


def verify_named_paths() -> None:
    """Each dotted path into hbtui that the files name leads somewhere: a "module:Class" caught by
    name, a monkeypatch target, a `python -m` module, a docstring's pointer."""
    moved_leaves = {old.split(".")[1] for old, new in OLD.items() if old != new}
    problems = []
    for path in files_to_rewrite():
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for match in CHAIN.finditer(text):
            chain, _, colon = match.group(0).partition(":")
            parts = chain.split(".")
            deepest = max((i for i in range(1, len(parts) + 1) if existing_path(".".join(parts[:i]))), default=1)
            if deepest == 1:
                if parts[1] in moved_leaves:
                    problems.append(f"{path.relative_to(ROOT)}: {match.group(0)}")
                continue  # hbtui.sqlite: no module
            rest = [*parts[deepest:], *([colon] if colon else [])]
            names = top_level_names(".".join(parts[:deepest]))
            if rest and names is not None and rest[0] not in names:
                problems.append(
                    f"{path.relative_to(ROOT)}: {match.group(0)} ({rest[0]} is not in {'.'.join(parts[:deepest])})"
                )
    for problem in dict.fromkeys(problems):
        note(f"a dotted path that leads nowhere (it may have before the move too): {problem}")


EMPTY_TC = re.compile(r"^if TYPE_CHECKING:\n    pass\n\n?", re.M)


def find_ruff() -> list[str]:
    for candidate in (
        [sys.executable, "-m", "ruff"],
        [str(ROOT / ".venv" / "bin" / "ruff")],
        [str(ROOT / ".venv-gate" / "bin" / "ruff")],
        ["ruff"],
    ):
        try:
            if not subprocess.run([*candidate, "--version"], capture_output=True).returncode:
                return candidate
        except OSError:
            continue
    raise RelayoutError("ruff is not found (pip install -r scripts/gate-requirements.txt)")


def main() -> int:
    started = time.monotonic()
    refuse_a_moved_tree()
    for old, new in MAPPING.items():
        if existing_path(old) is None:
            note(f"{old}: no file, skipped (its mapping to {new} applies once it exists)")
            continue
        if old in SPLITS or new != old:
            OLD[old] = new
    NEW.update(OLD.values())
    NEW.update(dst for _, _, dst, _ in DEFINITION_MOVES)
    NEW.update(target for spec in SPLITS.values() for target in [spec["default"], *spec["names"].values()])
    for module in list(NEW):
        parts = module.split(".")
        NEW.update(".".join(parts[:i]) for i in range(2, len(parts)))
    PACKAGES_FROM_MODULES.update(new for old, new in OLD.items() if old == new)  # cli
    NAME_MAP.update(NAME_REDIRECTS)
    collect_attribute_uses()

    # 1. the moves
    global STARTED
    STARTED = True
    split_texts = {old: existing_path(old).read_text(encoding="utf-8") for old in SPLITS}  # type: ignore[union-attr]
    moved: dict[Path, Path] = {}
    packages = sorted({".".join(new.split(".")[:i]) for new in NEW for i in range(2, len(new.split(".")))})
    for old, new in OLD.items():
        source = existing_path(old)
        assert source is not None
        target = path_of(new, package=old == new) if old in SPLITS else path_of(new)
        if target.exists():
            raise RelayoutError(f"{target.relative_to(ROOT)} exists already")
        target.parent.mkdir(parents=True, exist_ok=True)
        if tracked(source):
            git("mv", str(source.relative_to(ROOT)), str(target.relative_to(ROOT)))
        else:
            source.rename(target)
            CREATED.append(target)
            note(f"{source.relative_to(ROOT)} is not committed: moved (and added), not git mv'd")
        moved[source] = target
    for package in packages:
        init = path_of(package, package=True)
        if not init.exists():
            if package not in PACKAGE_DOCS:
                raise RelayoutError(f"the new package {package} needs a docstring in PACKAGE_DOCS")
            create(init, docstring(PACKAGE_DOCS[package]))

    # 2. the splits
    for target, text in split_modules(split_texts).items():
        path = path_of(target, package=target == CLI)
        if path.exists() and path in moved.values():
            write(path, text)
        else:
            create(path, text)

    # 3. the definitions moved, and the patches written against the old names
    for old, names, dst, doc in DEFINITION_MOVES:
        move_definitions(old, names, dst, doc)
    patch_reviews()

    # 4. the rewrite
    for path in files_to_rewrite():
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        new = rewrite_python(path, text) if path.suffix == ".py" else rewrite_text(text)
        if new != text:
            write(path, new)

    # 5. the facade, the depths, the contracts
    patch_services()
    patch_below_facade()
    fix_file_depths(moved)
    write_contracts()
    patch_layers_test()

    verify_named_paths()

    # 6. imports sorted, then formatted
    git("add", "--", *[str(p.relative_to(ROOT)) for p in CREATED])
    ruff = find_ruff()
    targets = ["hbtui", "tests", "bench"]
    fix = [*ruff, "check", "--fix", "--select", "I001,F401,RUF022", "--quiet", *targets]
    subprocess.run(fix, cwd=ROOT)
    # An `if TYPE_CHECKING:` whose one import went unused (the name is imported where it is used)
    # is left as `pass` by ruff: gone, and then the TYPE_CHECKING it imported.
    emptied = [p for p in files_to_rewrite() if p.suffix == ".py" and EMPTY_TC.search(p.read_text(encoding="utf-8"))]
    for path in emptied:
        write(path, EMPTY_TC.sub("", path.read_text(encoding="utf-8")))
    if emptied:
        subprocess.run(fix, cwd=ROOT)
    subprocess.run([*ruff, "format", "--quiet", *targets], cwd=ROOT, check=True)
    left = subprocess.run([*ruff, "check", "--quiet", *targets], cwd=ROOT, capture_output=True, text=True)
    if left.returncode:
        note("ruff check still finds:\n" + left.stdout)
    print(
        f"relayout: done in {time.monotonic() - started:.1f} s: {len(moved)} modules moved, {len(CREATED)} files created"
    )
    if NOTES:
        print("relayout: notes:\n  " + "\n  ".join(NOTES))
    print("relayout: next: lint-imports --no-cache, ruff check, mypy, the tests")
    print("relayout: and: python -m hbtui.core.settings.settings_docs --check")
    return 0


if __name__ == "__main__":
    sys.exit(main())
