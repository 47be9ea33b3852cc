"""The kinds of failure a call can end in, as stored with replies and verdicts.

One small module that the client (which decides them), the store (which keeps and retries them)
and the engine (which acts on them) all import, so that the store needs nothing of the client.
"""

from __future__ import annotations

RATE_LIMITED = "rate_limited"  # only after RATE_LIMIT_PATIENCE of nothing else: a 429 is no failed try
SERVER_ERROR = "server_error"
TIMEOUT = "timeout"
CONNECTION = "connection"
REFUSED = "refused"  # a 4xx that retrying cannot fix: content filter, bad request
CONTEXT_LENGTH = "context_length"
AUTH = "auth"
NOT_FOUND = "not_found"
BAD_RESPONSE = "bad_response"
UNPARSEABLE = "unparseable"  # used by grading: a verdict that never parsed
# Refusals no waiting cures (hbtui.rate_limits): the run stops at once, resumable.
QUOTA = "quota"  # the account is out of credit or quota (429 insufficient_quota, 402)
DAILY_LIMIT = "daily_limit"  # a per-day limit, or a wait longer than RATE_LIMIT_PATIENCE

TRANSIENT_KINDS = {RATE_LIMITED, SERVER_ERROR, TIMEOUT, CONNECTION, BAD_RESPONSE}
FATAL_KINDS = {AUTH, NOT_FOUND, QUOTA, DAILY_LIMIT}  # every later call would fail the same way: stop the run
