"""The layer contracts (pyproject.toml, run by the gate's lint-imports) cover every core module."""

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_core_module_is_held_to_the_contract_that_it_never_imports_the_app():
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    core = next(c for c in contracts if "hbtui.tui" in c.get("forbidden_modules", []))
    modules = {
        f"hbtui.{p.stem}"
        for p in (ROOT / "hbtui").glob("*.py")
        if p.stem not in ("__init__", "__main__", "cli", "demo", "serve")
    }
    # Packages too (store), but the app; cli, demo and serve are entry points, above the app and the core.
    modules |= {
        f"hbtui.{p.name}" for p in (ROOT / "hbtui").iterdir() if (p / "__init__.py").exists() and p.name != "tui"
    }
    assert modules == set(core["source_modules"]), "a new core module must be added to the contract"
    assert {"textual", "rich"} <= set(core["forbidden_modules"])


def test_the_command_line_starts_without_the_heavy_modules_it_needs_only_later():
    # numpy (scoring, at a run's end; 0.1-0.15 s to import), Textual (the app) and textual-serve
    # (`hbtui serve`) are loaded when used: `hbtui run` and the other headless commands start
    # without them, and the engine loads numpy while its first calls are out. aiohttp (the chat
    # calls, 0.15-0.2 s) is loaded in a thread while a run reads its dataset and writes its plan;
    # httpx (downloads, the model list) and the modules of compare, import and the local model
    # by the commands that use them.
    code = (
        "import sys, hbtui.cli, hbtui.services, hbtui.store\n"
        "heavy = {'numpy', 'textual', 'textual_serve', 'hbtui.serve', 'aiohttp', 'httpx', 'hbtui.compare',"
        " 'hbtui.imports', 'hbtui.llama_server', 'hbtui.local_model'} & set(sys.modules)\n"
        "assert not heavy, heavy"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_aiohttp_loaded_in_the_background_fails_without_a_traceback():
    # The thread that loads aiohttp while a run starts says nothing of its own: were aiohttp
    # broken, the first request imports it again and its one-line error says so there.
    code = (
        "import sys, importlib.abc\n"
        "class Refuse(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path, target=None):\n"
        "        if name == 'aiohttp':\n"
        "            raise ImportError('aiohttp broken')\n"
        "sys.meta_path.insert(0, Refuse())\n"
        "from hbtui.client import load_http_in_background\n"
        "load_http_in_background()\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0 and result.stderr == ""
