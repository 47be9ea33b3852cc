"""The price table as the app reads it: a broken one is a notice (tokens shown without a cost),
said once per problem, never a crash of the screen that asked."""

from __future__ import annotations

from textual.app import App

from hbtui.core.settings.prices import Price, PriceError, load_prices
from hbtui.core.text import one_line


def prices_or_notice(app: App) -> dict[str, Price]:
    try:
        return load_prices()
    except PriceError as exc:
        said: set[str] = app.__dict__.setdefault("price_problems_said", set())
        if str(exc) not in said:  # a screen that reads it every few seconds says it once
            said.add(str(exc))
            app.notify(
                one_line(f"{exc}; tokens are shown without a cost", 300),
                title="price table",
                severity="warning",
                timeout=15,
                markup=False,
            )
        return {}
