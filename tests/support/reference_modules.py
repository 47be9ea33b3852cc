"""The reference's own modules (../shared/reference, MIT), imported by path for tests.

Small stub modules stand in for their package's siblings (``common``, ``types``, the sampler)
and for blobfile and pandas; none of the reference's text is copied. ``common`` gets only what
the tests call: a sequential map, and an aggregation written here (mean and sample count per
metric name, as simple-evals' ``aggregate_results`` gives them; its bootstrap is unseeded there,
so tests never compare it).
"""

from __future__ import annotations

import contextlib
import importlib.util
import sys
import types
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

from hbtui.core import reference

PACKAGE = "simple_evals_stub"


class _Record:
    """A stand-in for the reference's result types: keyword arguments as attributes."""

    def __init__(self, **fields) -> None:
        self.__dict__.update(fields)


def _aggregate(results, default_stats=("mean", "std"), name2stats=None):
    values = defaultdict(list)
    for result in results:
        for name, value in result.metrics.items():
            values[name].append(value)
        if result.score is not None:
            values["score"].append(result.score)
    metrics = {}
    for name, items in values.items():
        metrics[name] = sum(items) / len(items)
        metrics[f"{name}:n_samples"] = len(items)
    return _Record(score=metrics.pop("score", None), metrics=metrics, htmls=[], convos=[], metadata=None)


def _stubs() -> dict[str, types.ModuleType]:
    package = types.ModuleType(PACKAGE)
    package.__path__ = []
    common = types.ModuleType(f"{PACKAGE}.common")
    common.HTML_JINJA = ""
    common.map_with_progress = lambda fn, items, *args, **kwargs: [fn(item) for item in items]
    common.aggregate_results = _aggregate
    common.jinja_env = types.SimpleNamespace(from_string=lambda text: types.SimpleNamespace(render=lambda **fields: ""))
    stub_types = types.ModuleType(f"{PACKAGE}.types")
    for name in ("Eval", "SamplerBase"):
        setattr(stub_types, name, type(name, (), {}))
    for name in ("EvalResult", "SingleEvalResult", "SamplerResponse"):
        setattr(stub_types, name, type(name, (_Record,), {}))
    stub_types.MessageList = list
    sampler = types.ModuleType(f"{PACKAGE}.sampler")
    sampler.__path__ = []
    chat = types.ModuleType(f"{PACKAGE}.sampler.chat_completion_sampler")
    chat.OPENAI_SYSTEM_MESSAGE_API = reference.SYSTEM_MESSAGE  # the value its sampler module defines
    chat.ChatCompletionSampler = type("ChatCompletionSampler", (), {})
    return {
        PACKAGE: package,
        f"{PACKAGE}.common": common,
        f"{PACKAGE}.types": stub_types,
        f"{PACKAGE}.sampler": sampler,
        f"{PACKAGE}.sampler.chat_completion_sampler": chat,
        "blobfile": types.ModuleType("blobfile"),
        "pandas": types.ModuleType("pandas"),
    }


@contextlib.contextmanager
def reference_modules(folder: Path, *names: str) -> Iterator[list[types.ModuleType]]:
    """The reference's modules ``names`` (e.g. ``healthbench_eval``), loaded in that order from
    ``folder`` as members of a stub package; sys.modules is restored on exit."""
    modules = _stubs()
    saved = {name: sys.modules.get(name) for name in [*modules, *(f"{PACKAGE}.{n}" for n in names)]}
    sys.modules.update(modules)
    try:
        loaded = []
        for name in names:  # a dotted name is a module in a folder: sampler.responses_sampler
            spec = importlib.util.spec_from_file_location(f"{PACKAGE}.{name}", folder / f"{name.replace('.', '/')}.py")
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module
            spec.loader.exec_module(module)
            loaded.append(module)
        yield loaded
    finally:
        for name, value in saved.items():
            if value is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = value
