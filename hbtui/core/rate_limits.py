"""Providers' rate limits: what their headers announce, which 429 is which, and the pace calls
keep so that a run slows down to an endpoint's limits instead of being refused.

Hosted endpoints limit requests and tokens per minute per model (OpenAI, Groq, Together,
Fireworks, Azure), some per day, and an account can run out of credit. Three kinds of refusal
need three answers:

* a rate limit (per minute): wait for the rate and go again, as often as needed. It is never a
  failed attempt: :class:`RatePacer` spreads the calls at the rate it knows, learned from the
  ``x-ratelimit-*`` headers (or ``anthropic-ratelimit-*``, OpenRouter's ``X-RateLimit-*``), from
  the RPM and TPM settings, or from the 429s themselves where no header says it;
* a quota (``insufficient_quota``, or a 402): no waiting cures it, so the run stops at once;
* a daily limit (a wait longer than RATE_LIMIT_PATIENCE, or a message naming requests or tokens
  per day): the run stops at once, saying when the limit resets.

The pacer is per endpoint and model, as OpenAI's limits are. Nothing here imports aiohttp or the
client: it reads header mappings and numbers, so the client, the connection check and the tests
share it.

Longer than most modules (about 560 lines) because three providers' ways of saying their limits
(x-ratelimit-*, anthropic-ratelimit-*, OpenRouter's), the classifier of a refusal and the pacer
that learns from both belong together: the pacer's rules are the headers' meaning.
"""

from __future__ import annotations

import asyncio
import math
import re
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

RATE_LIMIT = "rate"
QUOTA = "quota"
DAILY = "daily"

# A paced call goes at this share of the rate the endpoint announces: the last few per cent cost
# refusals (clocks, other users of the key) and gain next to nothing.
HEADROOM = 0.99
# How far a pace falls on a 429 while paced, and how soon after the last fall it may fall again
# (one burst of refusals counts once); it climbs back by RECOVERY a second of answers.
SLOW_DOWN = 0.85
SLOW_DOWN_EVERY = 1.0
RECOVERY = 0.02
LOWEST_SHARE = 0.1
# A limit whose window (estimated from its remaining count and reset) is this long or longer is
# a daily one: not a pace, but a budget that runs out, and then a stop.
LONG_WINDOW_SECONDS = 600.0
# The share of the last second's calls refused that makes a rate worth learning from 429s alone
# (a limit refuses most of what goes past it; a proxy refusing now and then, few), and the share
# that makes a known pace fall.
ENGAGE_SHARE = 0.2
SLOW_DOWN_SHARE = 0.05
RELEARN_AFTER = 60.0  # seconds after 429s were found to be at random before they may teach a rate again
WINDOW_TENTHS = 10  # a second, in tenths: what the endpoint took lately, when it refuses
CHARS_PER_TOKEN = 4.0  # the first estimate of a request's tokens; then the endpoint's own ratio

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
PER_DAY = re.compile(r"per day|\bRPD\b|\bTPD\b|daily", re.IGNORECASE)
TOKENS_PER_DAY = re.compile(r"tokens per day|\bTPD\b", re.IGNORECASE)


def parse_duration(text: str | None) -> float | None:
    """Seconds in a reset as providers write it: ``20ms``, ``1.2s``, ``6m0s``, ``1h2m3s``, or a
    plain number of seconds; None for anything else."""
    if text is None:
        return None
    text = text.strip()
    if not text:
        return None
    try:
        seconds = float(text)
    except ValueError:
        pass
    else:
        return seconds if math.isfinite(seconds) and seconds >= 0 else None
    total, end = 0.0, 0
    for match in _DURATION_PART.finditer(text):
        if match.start() != end:
            return None
        end = match.end()
        value, unit = float(match.group(1)), match.group(2)
        total += value * {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}[unit]
    return total if end == len(text) and end else None


def _reset_seconds(text: str | None, now: float) -> float | None:
    """A reset as a duration, an RFC 3339 time (Anthropic's) or a Unix time in s or ms
    (OpenRouter's), as seconds from ``now`` (wall clock)."""
    seconds = parse_duration(text)
    if seconds is not None:
        if seconds > 1e12:  # Unix milliseconds
            return max(0.0, seconds / 1000 - now)
        if seconds > 1e9:  # Unix seconds
            return max(0.0, seconds - now)
        return seconds
    if text:
        try:
            moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
        except ValueError:
            return None
        return max(0.0, moment.timestamp() - now)
    return None


def _number(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None


@dataclass(frozen=True, slots=True)
class Limit:
    """One announced limit: per minute unless its window says longer."""

    limit: float
    remaining: float | None
    reset: float | None  # seconds until it is whole again

    @property
    def window(self) -> float:
        """Its window in seconds, as the reset tells it (a bucket refilled continuously is whole
        again after (limit - remaining) / rate); a minute when the reset says nothing of it."""
        if self.remaining is None or self.reset is None or self.remaining >= self.limit:
            return 60.0
        return max(60.0, self.reset * self.limit / (self.limit - self.remaining))

    @property
    def daily(self) -> bool:
        return self.window >= LONG_WINDOW_SECONDS

    @property
    def per_second(self) -> float:
        return self.limit / 60.0


@dataclass(frozen=True, slots=True)
class AnnouncedLimits:
    requests: Limit | None
    tokens: Limit | None


# (limit, remaining, reset) header names per provider, for requests and then tokens.
_HEADER_NAMES = (
    (
        ("x-ratelimit-limit-requests", "x-ratelimit-remaining-requests", "x-ratelimit-reset-requests"),
        ("x-ratelimit-limit-tokens", "x-ratelimit-remaining-tokens", "x-ratelimit-reset-tokens"),
    ),
    (
        (
            "anthropic-ratelimit-requests-limit",
            "anthropic-ratelimit-requests-remaining",
            "anthropic-ratelimit-requests-reset",
        ),
        (
            "anthropic-ratelimit-tokens-limit",
            "anthropic-ratelimit-tokens-remaining",
            "anthropic-ratelimit-tokens-reset",
        ),
    ),
    (("x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset"), None),  # OpenRouter
)
# What a header mapping is asked first: an answer without any of these has no limits to read.
_FIRST_NAMES = tuple(names[0][0] for names in _HEADER_NAMES)


def announced_limits(headers: Mapping[str, str], now: float | None = None) -> AnnouncedLimits | None:
    """The limits an answer's headers announce (names matched without regard to case, as HTTP
    headers are), or None when it announces none."""
    getter = headers.get
    for first_names, (request_names, token_names) in zip(_FIRST_NAMES, _HEADER_NAMES):
        if getter(first_names) is None and _lower_get(headers, first_names) is None:
            continue
        wall = time.time() if now is None else now
        return AnnouncedLimits(
            _limit(headers, request_names, wall), _limit(headers, token_names, wall) if token_names else None
        )
    return None


def _lower_get(headers: Mapping[str, str], name: str) -> str | None:
    """A plain dict's headers (tests, httpx's own are case-blind already) by any case."""
    if isinstance(headers, dict):
        for key, value in headers.items():
            if key.lower() == name:
                return value
    return None


def _header(headers: Mapping[str, str], name: str) -> str | None:
    value = headers.get(name)
    return value if value is not None else _lower_get(headers, name)


def _limit(headers: Mapping[str, str], names: tuple[str, str, str], now: float) -> Limit | None:
    limit = _number(_header(headers, names[0]))
    if not limit:
        return None
    return Limit(limit, _number(_header(headers, names[1])), _reset_seconds(_header(headers, names[2]), now))


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """``retry-after-ms``, else ``Retry-After`` in seconds (an HTTP date is left to our backoff)."""
    ms = _number(_header(headers, "retry-after-ms"))
    if ms is not None:
        return ms / 1000
    return _number(_header(headers, "retry-after"))


@dataclass(frozen=True, slots=True)
class Refusal:
    """A 429 (or 402) as it is to be acted on."""

    kind: str  # RATE_LIMIT, QUOTA or DAILY
    wait: float | None  # seconds the provider asks for, if it says
    what: str = "requests"  # which limit: requests or tokens


def classify_refusal(
    status: int,
    code: str | None,
    error_type: str | None,
    message: str,
    headers: Mapping[str, str],
    patience: float,
) -> Refusal:
    """Which refusal a 429 or 402 is: by status and error code first, then by how long the
    provider says to wait; the message only where it names a daily limit (OpenAI's ordinary
    per-minute text points at its billing page too, so billing words decide nothing)."""
    if status == 402 or "insufficient_quota" in (code, error_type):
        return Refusal(QUOTA, None)
    wait = retry_after_seconds(headers)
    limits = announced_limits(headers)
    what = "tokens" if TOKENS_PER_DAY.search(message) else "requests"
    if limits is not None:
        for name, limit in (("requests", limits.requests), ("tokens", limits.tokens)):
            if limit is not None and limit.remaining == 0 and limit.reset is not None:
                if limit.daily or limit.reset > patience:
                    return Refusal(DAILY, limit.reset, name)
    if PER_DAY.search(message) or (wait is not None and wait > patience):
        return Refusal(DAILY, wait, what)
    return Refusal(RATE_LIMIT, wait)


def duration_text(seconds: float) -> str:
    """``2h0m``, ``4m10s``, ``12 s``: a wait as a person reads it."""
    seconds = max(0, round(seconds))
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60}m"
    if seconds >= 60:
        return f"{seconds // 60}m{seconds % 60}s"
    return f"{seconds} s"


def refusal_message(refusal: Refusal, key_name: str, now: float | None = None) -> str:
    """The one line a run (or the check) stops with for a quota or a daily limit."""
    if refusal.kind == QUOTA:
        return (
            f"the account behind {key_name} is out of credit or quota (insufficient_quota): check its plan and billing"
        )
    if refusal.wait is None:
        when = "it did not say when it resets"
    else:
        at = time.localtime((time.time() if now is None else now) + refusal.wait)
        when = f"it resets in {duration_text(refusal.wait)} (at {time.strftime('%H:%M', at)} local time)"
    return f"the endpoint's {refusal.what}-per-day limit is reached; {when}"


SOURCE_WORDS = {"settings": "the RPM/TPM settings", "headers": "the endpoint's headers", "429s": "its 429 answers"}


class RatePacer:
    """The pace of one endpoint and model: a request rate and a token rate that calls wait for
    before they are sent, spread out (one every 1/rate seconds, never released together when a
    reset comes), plus what calls waited and how many 429s came back.

    Settings (RPM, TPM) win over what is learned. Without either, the first 429 sets the request
    rate to what the endpoint accepted over the last two seconds; then it slows on each later 429
    and climbs a little each second of answers, as TCP finds a link's rate.
    """

    def __init__(self, rpm: float | None = None, tpm: float | None = None) -> None:
        self.set_rpm, self.set_tpm = rpm, tpm
        self.request_rate: float | None = rpm / 60 if rpm else None  # per second, before the share
        self.token_rate: float | None = tpm / 60 if tpm else None
        self.request_source: str | None = "settings" if rpm else None
        self.token_source: str | None = "settings" if tpm else None
        self.share = HEADROOM
        self._next_at = 0.0  # monotonic: the next call may go then
        self._next_token_at = 0.0
        self._hold_until = 0.0  # a Retry-After: nothing goes before it
        self._lock = asyncio.Lock()
        self._last_slow_down = -math.inf
        self._last_climb = 0.0
        # Sends and refusals by tenth of a second, the last WINDOW of them: what the endpoint
        # took while it refused is its rate (a refusal comes back at once, an answer a latency
        # later, so sends not refused count as taken).
        self._tenths: deque[list[int]] = deque()  # [tenth, sent, refused], newest last
        self._last_waited = -math.inf  # monotonic: when a call last waited for the pace
        # The refused share when the pace last fell, and how often in a row it did not fall since.
        self._share_at_slow_down: tuple[float, float] | None = None  # (taken a second, refused share)
        self._ineffective = 0
        self._refusing_since: float | None = None  # the first refusal before any pace was known
        self.unpaced_refusals = False  # slowing down did not make the 429s rarer: not a rate limit
        self._unpaced_at = 0.0
        self._chars = 0
        self._tokens = 0
        self.refused = 0
        self.waited = 0.0  # seconds, over every call
        self.paced_calls = 0  # calls that waited for the rate

    # ---- what is known -------------------------------------------------------------------
    @property
    def paced(self) -> bool:
        return self.request_rate is not None or self.token_rate is not None

    def holding(self) -> bool:
        """Whether a call's turn will wait: a pace is known, or a Retry-After holds calls back."""
        return self.paced or self._hold_until > time.monotonic()

    def chars_per_token(self) -> float:
        return self._chars / self._tokens if self._tokens >= 1 and self._chars else CHARS_PER_TOKEN

    def estimate_tokens(self, prompt_chars: int, max_tokens: int | None) -> float:
        """A request's tokens as providers count them for a limit: its prompt and the most it
        may answer."""
        return prompt_chars / self.chars_per_token() + (max_tokens or 0)

    def describe(self) -> str | None:
        """``1,800 requests/min, 200,000 tokens/min from the endpoint's headers``, or None."""
        parts = []
        if self.request_rate is not None:
            parts.append((f"{self.request_rate * 60:,.0f} requests/min", self.request_source))
        if self.token_rate is not None:
            parts.append((f"{self.token_rate * 60:,.0f} tokens/min", self.token_source))
        if not parts:
            return None
        sources = {source for _, source in parts}
        if len(sources) == 1:
            return ", ".join(text for text, _ in parts) + f" from {SOURCE_WORDS.get(parts[0][1] or '', '?')}"
        return ", ".join(f"{text} from {SOURCE_WORDS.get(source or '', '?')}" for text, source in parts)

    # ---- a call's turn -------------------------------------------------------------------
    async def turn(self, tokens: float = 0.0) -> float:
        """Wait until a call of ``tokens`` may be sent; returns the seconds waited. Free when
        nothing is known and no Retry-After holds calls back."""
        if self.request_rate is None and self.token_rate is None and self._hold_until <= time.monotonic():
            return 0.0
        entered = time.monotonic()
        async with self._lock:  # first come, first sent: asyncio's lock wakes in order
            now = time.monotonic()
            at = max(now, self._next_at, self._next_token_at, self._hold_until)
            if at > now:
                await asyncio.sleep(at - now)
                now = time.monotonic()
            # The next slot follows this one's planned time, not a late wake-up (which would lose
            # rate), but never from further back than one interval (which would bank a burst).
            if self.request_rate is not None:
                interval = 1.0 / (self.request_rate * self.share)
                self._next_at = max(at, now - interval) + interval
            if self.token_rate is not None and tokens > 0:
                cost = tokens / (self.token_rate * self.share)
                self._next_token_at = max(at, now - cost) + cost
        waited = time.monotonic() - entered
        if waited > 0.001:
            self.waited += waited
            self.paced_calls += 1
            self._last_waited = entered + waited
        return waited

    # ---- what the answers say ------------------------------------------------------------
    def sent(self, now: float) -> None:
        """A call leaves now (each one: what it took is learned from these when it refuses)."""
        tenth = int(now * 10)
        tenths = self._tenths
        if tenths and tenths[-1][0] == tenth:
            tenths[-1][1] += 1
            return
        tenths.append([tenth, 1, 0])
        if len(tenths) > WINDOW_TENTHS:
            tenths.popleft()

    def _window(self, now: float, since: float | None = None) -> tuple[float, int, float]:
        """(sends not refused a second, sends, refused share) over the last second, or since
        ``since`` (a bucket refusing since then is empty: what it took since is its rate, without
        the burst it held before)."""
        newest = int(now * 10)
        oldest = newest - WINDOW_TENTHS + 1
        if since is not None:
            oldest = max(oldest, int(since * 10) + 1)
        sent = refused = 0
        first = newest
        for tenth, sends, refusals in self._tenths:
            if tenth >= oldest:
                first = min(first, tenth)
                sent += sends
                refused += refusals
        # Over the tenths it has been sending in (a run's first second is not a whole one).
        seconds = max(now - first / 10, 0.1)
        return (sent - refused) / seconds, sent, refused / sent if sent else 0.0

    def answered(self, headers: Mapping[str, str], sent_at: float, prompt_chars: int, prompt_tokens: int) -> str | None:
        """An answer that was not a 429; returns a note when the pace it announces is new."""
        now = time.monotonic()
        if prompt_tokens > 0 and prompt_chars > 0:
            self._chars += prompt_chars
            self._tokens += prompt_tokens
        if now - self._last_climb >= 1.0 and now - self._last_slow_down >= 1.0:
            if self.share < HEADROOM:
                self._last_climb = now
                self.share = min(HEADROOM, self.share + RECOVERY)
            elif self.request_source == "429s" and self.request_rate is not None and now - self._last_waited < 1.0:
                # Learned from refusals alone, and holding calls back: look a little higher, as
                # the limit may be (a pace that holds nothing back has no need to).
                self._last_climb = now
                self.request_rate *= 1 + RECOVERY
        return self.learn(headers)

    def learn(self, headers: Mapping[str, str]) -> str | None:
        limits = announced_limits(headers)
        if limits is None:
            return None
        before = self.describe()
        for name, limit in (("requests", limits.requests), ("tokens", limits.tokens)):
            if limit is None:
                continue
            if limit.daily:
                continue  # a budget, not a pace: when it runs out, the 429 says so and the run stops
            if name == "requests" and not self.set_rpm:
                self.request_rate, self.request_source = limit.per_second, "headers"
            elif name == "tokens" and not self.set_tpm:
                self.token_rate, self.token_source = limit.per_second, "headers"
            if name == "requests" and limit.remaining == 0 and limit.reset is not None:
                # Used up (by others of the key too): nothing goes until one more request is there.
                one = limit.reset / max(limit.limit, 1.0)
                self._hold_until = max(self._hold_until, time.monotonic() + min(one, 60.0))
        after = self.describe()
        return f"paced to {after}" if after and after != before else None

    def refused_now(self, headers: Mapping[str, str], wait: float | None) -> str | None:
        """A rate-limit 429: nothing goes before its Retry-After, and the pace falls (or, with
        nothing known yet, is set to what the endpoint accepted over the last seconds). Returns a
        note when the pace is new.

        Only a 429 that names a wait teaches a rate: a provider's limit always says how long
        (its bucket's time to the next request). One with none, or a wait of 0, is a refusal now
        and then, which slowing down would not cure; the client backs off that call alone."""
        self.refused += 1
        now = time.monotonic()
        if self._tenths:
            self._tenths[-1][2] += 1  # refused at once: counted with the tenth it was sent in
        before = self.describe()
        note = self.learn(headers)
        if wait is None or wait <= 0:
            return note
        self._hold_until = max(self._hold_until, now + min(wait, 60.0))
        if self.unpaced_refusals and now - self._unpaced_at >= RELEARN_AFTER:
            # A minute on: the endpoint may have a limit by now (or a new one); look again.
            self.unpaced_refusals, self._ineffective, self._share_at_slow_down = False, 0, None
        cooldown = 0.3 if self._refusing_since is not None else SLOW_DOWN_EVERY / 2  # a first guess is made good soon
        if self.unpaced_refusals or now - self._last_slow_down < cooldown:
            return note
        taken, sent, share = self._window(now)
        if self._share_at_slow_down is not None and now - self._last_slow_down >= SLOW_DOWN_EVERY:
            # Below a limit, the endpoint takes as much as before and refuses less. Refusals that
            # go on at the same share while less and less is taken (a proxy or a shared key
            # refusing now and then) are no rate to find: stop slowing, or the pace falls to nothing.
            taken_before, share_before = self._share_at_slow_down
            if taken < 0.93 * taken_before and share >= 0.6 * share_before:
                self._ineffective += 1
            elif share < 0.3 * share_before:
                self._ineffective = 0  # what a limit does once the pace is below it
            if self._ineffective >= 2:
                self.unpaced_refusals, self._unpaced_at = True, now
                if self.request_source == "429s":
                    self.request_rate, self.request_source = None, None
                self.share = HEADROOM
                return "refusals at random, not a rate: calls wait their Retry-After only"
        self._share_at_slow_down = (taken, share)
        if self.request_rate is None and self.token_rate is None:
            if sent < 4 or share < ENGAGE_SHARE or taken <= 0:
                # Too few calls to tell a rate from, a refusal now and then, or nothing taken at
                # all (no rate, only a wait: a pace of nothing would hold its calls for ever).
                return note
            # A first guess (what it took over the last second holds the burst its bucket held,
            # so it is high), made good by the next refusals: see below.
            self.request_rate, self.request_source = max(taken, 0.5), "429s"
            self.share = HEADROOM
            self._refusing_since = now
        elif self._refusing_since is not None and self.request_rate is not None:
            if now - self._refusing_since < 0.3:
                return note
            # Refusing since the first guess, so its bucket was empty all along: what it took
            # since then is its rate.
            taken, _, _ = self._window(now, since=self._refusing_since)
            if taken > 0:
                self.request_rate = max(0.5, min(self.request_rate, taken))
            self._refusing_since = None
        elif share < SLOW_DOWN_SHARE:
            return note  # the odd refusal at the edge of the limit: its Retry-After is enough
        elif self.request_source == "429s" and self.request_rate is not None:
            # What it took while refusing is its rate; a pace already below that falls anyway.
            taken, _, _ = self._window(now, since=self._last_slow_down)
            if 0 < taken < self.request_rate:
                self.request_rate = max(0.5, taken)
            else:  # nothing taken since, or already below it: a step down, not a pace of nothing
                self.request_rate = max(0.5, self.request_rate * SLOW_DOWN)
        elif now - self._last_slow_down >= SLOW_DOWN_EVERY:
            self.share = max(LOWEST_SHARE, self.share * SLOW_DOWN)
        self._last_slow_down = now
        self._last_climb = now
        after = self.describe()
        return f"paced to {after}" if after and after != before else note


def pace_summary(pacers: Mapping[str, RatePacer]) -> dict | None:
    """What the limits did, over ``pacers`` (by "model at endpoint"), for the heartbeat and the
    run's record; None when nothing was paced or refused."""
    paced = {where: pacer.describe() for where, pacer in pacers.items() if pacer.paced}
    refused = sum(pacer.refused for pacer in pacers.values())
    if not paced and not refused:
        return None
    return {
        "paced": {where: text for where, text in paced.items() if text},
        "refused": refused,
        "waited_seconds": round(sum(pacer.waited for pacer in pacers.values()), 1),
        "paced_calls": sum(pacer.paced_calls for pacer in pacers.values()),
    }


def merge_summaries(before: dict | None, now: dict | None) -> dict | None:
    """A resumed run's figures: its earlier processes' and this one's."""
    if not before:
        return now
    if not now:
        return before
    return {
        "paced": {**before.get("paced", {}), **now.get("paced", {})},
        "refused": before.get("refused", 0) + now.get("refused", 0),
        "waited_seconds": round(before.get("waited_seconds", 0.0) + now.get("waited_seconds", 0.0), 1),
        "paced_calls": before.get("paced_calls", 0) + now.get("paced_calls", 0),
    }


def limits_line(summary: dict | None) -> str | None:
    """``limits: paced to 1,800 requests/min from the endpoint's headers; 12 answers refused
    (429); 300 calls waited for the rate, 41 s summed over them``, or None when the limits did nothing."""
    if not summary:
        return None
    paced = summary.get("paced") or {}
    parts = []
    if len(paced) == 1:
        parts.append(f"paced to {next(iter(paced.values()))}")
    elif paced:
        parts.append("paced: " + "; ".join(f"{where} to {text}" for where, text in sorted(paced.items())))
    refused = summary.get("refused", 0)
    parts.append(f"{refused:,} answer{'s' if refused != 1 else ''} refused (429)")
    waited = summary.get("waited_seconds", 0.0)
    if waited:
        calls = summary.get("paced_calls", 0)
        # Summed over the calls that waited, which wait side by side: more than the run's length.
        parts.append(f"{calls:,} calls waited for the rate, {duration_text(waited)} summed over them")
    return "limits: " + "; ".join(parts)
