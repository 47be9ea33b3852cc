"""The kinds of failure a call can end in, as stored with replies and verdicts.

One small module that the client (which decides them), the store (which keeps and retries them)
and the engine (which acts on them) all import, so that the store needs nothing of the client.
"""

from __future__ import annotations

from hbtui.core.text import one_line

RATE_LIMITED = "rate_limited"  # only after RATE_LIMIT_PATIENCE of nothing else: a 429 is no failed try
SERVER_ERROR = "server_error"
TIMEOUT = "timeout"
CONNECTION = "connection"
# The two refusals: answers, final (the conversation is left out of the score, as the reference
# leaves it), never asked again by `regrade-errors`.
CONTENT_FILTER = "content_filter"  # a 4xx coded content_filter / content_policy_violation, or a 200 so ended
CONTEXT_LENGTH = "context_length"
# Any other 4xx (a misconfigured proxy's "400 bad request"): an error of that call, not a
# verdict on the conversation; not retried within the call (it would say the same), but asked
# again by resume and `regrade-errors`. Older versions stored every 4xx as "refused": those rows
# are read as this.
CLIENT_ERROR = "client_error"
REFUSED = "refused"  # stored by older versions for any 4xx; never written now
TOO_LARGE = "too_large"  # an answer over MAX_ANSWER_MIB after decompression: an error of that call
AUTH = "auth"
NOT_FOUND = "not_found"
BAD_RESPONSE = "bad_response"
REDIRECTED = "redirected"  # a model call redirected off its endpoint's origin: refused, and the run stops
UNPARSEABLE = "unparseable"  # used by grading: a verdict that never parsed
# Refusals no waiting cures (hbtui.core.rate_limits): the run stops at once, resumable.
QUOTA = "quota"  # the account is out of credit or quota (429 insufficient_quota, 402)
DAILY_LIMIT = "daily_limit"  # a per-day limit, or a wait longer than RATE_LIMIT_PATIENCE

# A stopped run's reason in a few words, for a list's narrow column; its whole error is elsewhere.
FAILURE_WORDS = {
    AUTH: "key refused",
    NOT_FOUND: "model not found",
    CONNECTION: "unreachable",
    QUOTA: "out of quota",
    DAILY_LIMIT: "daily limit",
    RATE_LIMITED: "rate limited",
    REDIRECTED: "redirected",
    CLIENT_ERROR: "calls refused",
    SERVER_ERROR: "server errors",
    TIMEOUT: "timed out",
}


def failure_words(error: str | None) -> str:
    """A run's error (``"auth: HTTP 401: ..."``, as a call's failure says it) in a few words;
    an error of another shape (a database that refused writes) by its first words."""
    if not error:
        return ""
    kind = error.split(":", 1)[0].strip()
    return FAILURE_WORDS.get(kind) or one_line(error, 16)


# Retried within the call, with backoff, up to MAX_ATTEMPTS.
RETRIED_KINDS = {RATE_LIMITED, SERVER_ERROR, TIMEOUT, CONNECTION, BAD_RESPONSE}
# No answer that counts: work still missing, asked again by a resume and `regrade-errors`, and
# what leaves an ended run incomplete.
TRANSIENT_KINDS = RETRIED_KINDS | {CLIENT_ERROR, REFUSED, TOO_LARGE}
# Every later call would fail the same way: stop the run.
FATAL_KINDS = {AUTH, NOT_FOUND, QUOTA, DAILY_LIMIT, REDIRECTED}


# ---- hbtui's own errors ----------------------------------------------------------------------

EXIT_FAILED, EXIT_USAGE = 1, 2  # the exit statuses of the two kinds of HbtuiError (cli.common has the rest)


class HbtuiError(Exception):
    """An error that is the user's to read in one line: a setting, a file, a name, an endpoint.

    The command line catches this class once, at its edge, says the message and exits with
    ``exit_code``: 2 for what the user fixes (a usage error, as argparse exits), 1 where a call or
    the machinery failed (a subclass says so). Every module's errors derive from it, so moving a
    module never turns its error into an internal one."""

    exit_code: int = EXIT_USAGE
