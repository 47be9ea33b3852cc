"""The kinds of failure a call can end in, as stored with replies and verdicts.

One small module that the client (which decides them), the store (which keeps and retries them)
and the engine (which acts on them) all import, so that the store needs nothing of the client.
"""

from __future__ import annotations

RATE_LIMITED = "rate_limited"
SERVER_ERROR = "server_error"
TIMEOUT = "timeout"
CONNECTION = "connection"
REFUSED = "refused"  # a 4xx that retrying cannot fix: content filter, bad request
CONTEXT_LENGTH = "context_length"
AUTH = "auth"
NOT_FOUND = "not_found"
BAD_RESPONSE = "bad_response"
UNPARSEABLE = "unparseable"  # used by grading: a verdict that never parsed

TRANSIENT_KINDS = {RATE_LIMITED, SERVER_ERROR, TIMEOUT, CONNECTION, BAD_RESPONSE}
FATAL_KINDS = {AUTH, NOT_FOUND}  # every later call would fail the same way: stop the run
