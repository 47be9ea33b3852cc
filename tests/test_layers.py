"""The layer contracts (pyproject.toml, run by the gate's lint-imports) cover every core module."""

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
