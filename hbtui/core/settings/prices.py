"""Token counts of a run and what they cost, from a price table the user keeps beside the presets.

The table (``prices.json``) maps a model name, exactly as the run sent it, to its input and
output price per million tokens, and optionally the batch API's (``batch_input`` and
``batch_output``, both or neither). A cost is never guessed: a model missing from the table (or
no table at all) shows its tokens only, a total is given only when every model is priced, and a
batch price is never derived from the online one.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from hbtui.core.errors import HbtuiError
from hbtui.core.settings.presets import presets_path

PRICE_FIELDS = ("input", "output")
BATCH_PRICE_FIELDS = ("batch_input", "batch_output")  # optional: a provider's batch API prices


class PriceError(HbtuiError, ValueError):
    """A price table that cannot be used; the message names the file and the line or key."""


@dataclass(frozen=True, slots=True)
class Price:
    input: float  # per million prompt tokens
    output: float  # per million completion tokens
    batch_input: float | None = None  # the same through the provider's batch API; None: not given
    batch_output: float | None = None

    @property
    def batch(self) -> Price | None:
        """The batch API's prices as a price of their own; None where the table gives none."""
        if self.batch_input is None or self.batch_output is None:
            return None
        return Price(self.batch_input, self.batch_output)


def prices_path(environ: Mapping[str, str] | None = None) -> Path:
    return presets_path(environ).with_name("prices.json")


def load_prices(path: Path | None = None) -> dict[str, Price]:
    """The table at ``path`` (default: beside the presets); none at all is an empty table."""
    path = path or prices_path()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except UnicodeDecodeError as exc:
        raise PriceError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise PriceError(f"{path}: cannot read the price table ({exc.strerror or exc})") from None
    try:
        data = json.loads(text)  # NaN and Infinity load, and are refused below with their key
    except json.JSONDecodeError as exc:
        raise PriceError(f"{path}:{exc.lineno}:{exc.colno}: not valid JSON ({exc.msg})") from None
    except RecursionError:
        raise PriceError(f"{path}: not valid JSON (nested too deeply)") from None
    example = (
        '{"model": {"input": 2.0, "output": 8.0}} (prices per million tokens; optionally "batch_input"'
        ' and "batch_output" too)'
    )
    if not isinstance(data, dict):
        raise PriceError(f"{path}: must be a JSON object such as {example}")
    table: dict[str, Price] = {}
    for model, entry in data.items():
        if not isinstance(entry, dict):
            raise PriceError(f"{path}: {model!r}: must be an object such as {example}")
        for name in PRICE_FIELDS:
            if name not in entry:
                raise PriceError(f"{path}: {model!r}.{name} is missing (price per million {name} tokens)")
        batch_given = [name for name in BATCH_PRICE_FIELDS if name in entry]
        if len(batch_given) == 1:
            other = next(name for name in BATCH_PRICE_FIELDS if name not in entry)
            raise PriceError(f"{path}: {model!r}.{other} is missing: batch prices are given both or neither")
        unknown = sorted(set(entry) - set(PRICE_FIELDS) - set(BATCH_PRICE_FIELDS))
        if unknown:
            raise PriceError(
                f"{path}: {model!r}.{unknown[0]}: not a price field (known: {', '.join(PRICE_FIELDS + BATCH_PRICE_FIELDS)})"
            )
        values = [_price_value(path, model, name, entry[name]) for name in (*PRICE_FIELDS, *batch_given)]
        table[model] = Price(*values)
    return table


def _price_value(path: Path, model: str, name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise PriceError(
            f"{path}: {model!r}.{name}: {value!r} is not a price (a number of 0 or more, per million tokens)"
        )
    return float(value)


@dataclass(frozen=True, slots=True)
class ModelUsage:
    """The tokens one model of a run used, and their cost where the model has a price."""

    model: str
    input_tokens: int
    output_tokens: int
    cost: float | None
    batch: bool = False  # paid at the batch API's price (a run through it): never a guessed discount

    def as_dict(self) -> dict:
        return {
            "model": self.model,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost": self.cost,
        }


def cost_of(input_tokens: int, output_tokens: int, price: Price | None) -> float | None:
    if price is None:
        return None
    return (input_tokens * price.input + output_tokens * price.output) / 1_000_000


def model_usage(
    model: str, input_tokens: int, output_tokens: int, prices: Mapping[str, Price], batch: bool = False
) -> ModelUsage:
    """``batch``: at the batch API's price, which the table gives or not (then the cost is unknown)."""
    price = prices.get(model)
    if batch and price is not None:
        price = price.batch
    return ModelUsage(model, input_tokens, output_tokens, cost_of(input_tokens, output_tokens, price), batch)


def total_cost(usages: list[ModelUsage]) -> float | None:
    """The sum, only when every model is priced: a partial sum would read as the whole."""
    if any(u.cost is None for u in usages):
        return None
    return sum(u.cost for u in usages if u.cost is not None)


def usage_json(test: ModelUsage, grader: ModelUsage) -> dict:
    """`show --json`'s "tokens" and "cost" objects."""
    return {
        "tokens": {"test": test.as_dict(), "grader": grader.as_dict()},
        "cost": {"test": test.cost, "grader": grader.cost, "total": total_cost([test, grader])},
    }


def tokens_text(count: int) -> str:
    """A token count short enough for a status line: 950, 12.3k, 216k, 4.56M."""
    if count >= 1_000_000:
        return f"{count / 1e6:.2f}M"
    if count >= 100_000:
        return f"{count / 1e3:.0f}k"
    if count >= 1_000:
        return f"{count / 1e3:.1f}k"
    return str(count)


def cost_text(cost: float) -> str:
    """Enough digits for a small run's cost to show (0.0031), without 12 digits on a large one."""
    return f"{cost:.2f}" if cost >= 100 else f"{cost:.4f}" if cost >= 0.01 else f"{cost:.6f}"


def usage_line(usage: ModelUsage) -> str:
    line = f"{tokens_text(usage.input_tokens)} in / {tokens_text(usage.output_tokens)} out"
    if usage.batch:
        return line + (
            f", cost {cost_text(usage.cost)} at the batch price" if usage.cost is not None else " (batch price unknown)"
        )
    return line + (f", cost {cost_text(usage.cost)}" if usage.cost is not None else " (no price)")
