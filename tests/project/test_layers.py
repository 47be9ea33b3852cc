"""The layer contracts (pyproject.toml, run by the gate's lint-imports) cover every package."""

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_package_of_hbtui_has_its_layer_in_the_contracts():
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


def test_the_command_line_starts_without_the_heavy_modules_it_needs_only_later():
    # numpy (scoring, at a run's end; 0.1-0.15 s to import), Textual (the app) and textual-serve
    # (`hbtui serve`) are loaded when used: `hbtui run` and the other headless commands start
    # without them, and the engine loads numpy while its first calls are out. aiohttp (0.15-0.2 s;
    # the batch API's client and `hbtui serve`), httpx (downloads) and the modules of compare,
    # import and the local model by the commands that use them.
    code = (
        "import sys, hbtui.cli, hbtui.services, hbtui.store\n"
        # Every command group's module, as its command imports it (hbtui.cli loads none at start).
        "import hbtui.cli.runs, hbtui.cli.reading, hbtui.cli.manage, hbtui.cli.control, hbtui.cli.check\n"
        "import hbtui.cli.estimate, hbtui.cli.batch, hbtui.cli.app\n"
        "heavy = {'numpy', 'textual', 'textual_serve', 'hbtui.web.serve', 'aiohttp', 'httpx', 'hbtui.analysis.compare',"
        " 'hbtui.imports', 'hbtui.local.llama_server', 'hbtui.local.model'} & set(sys.modules)\n"
        "assert not heavy, heavy"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_a_module_loaded_in_the_background_fails_without_a_traceback():
    # The thread that loads numpy while a run's first calls are out says nothing of its own:
    # were numpy broken, the report imports it again and its one-line error says so there.
    code = (
        "import sys, importlib.abc\n"
        "class Refuse(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path, target=None):\n"
        "        if name == 'numpy':\n"
        "            raise ImportError('numpy broken')\n"
        "sys.meta_path.insert(0, Refuse())\n"
        "from hbtui.core.background_import import import_in_background\n"
        "import_in_background('numpy.random', 'numpy.ma')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0 and result.stderr == ""
