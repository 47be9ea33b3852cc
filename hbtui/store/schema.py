"""The SQLite schema and its forward migrations.

``PRAGMA user_version`` carries the schema version. Each migration moves one version forward
inside the caller's transaction, so an upgrade either happens whole or not at all.
"""

from __future__ import annotations

import sqlite3

SCHEMA_VERSION = 14
APPLICATION_ID = 0x48425455  # "HBTU": marks the file as ours, so a stranger's SQLite file is refused

# Version 1: the first schema. Kept verbatim: the migration test builds a database from it.
SCHEMA_V1 = """
CREATE TABLE runs (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    status TEXT NOT NULL,
    created_at REAL NOT NULL,
    finished_at REAL,
    dataset_name TEXT NOT NULL,
    dataset_path TEXT,
    dataset_sha256 TEXT NOT NULL,
    model_test TEXT NOT NULL,
    model_grader TEXT NOT NULL,
    settings_json TEXT NOT NULL,
    plan_json TEXT NOT NULL,
    n_conversations INTEGER NOT NULL,
    n_criteria INTEGER NOT NULL,
    error TEXT,
    score REAL,
    report_json TEXT,
    folder TEXT
);
CREATE TABLE records (
    id INTEGER PRIMARY KEY,
    prompt_id TEXT NOT NULL,
    sha256 TEXT NOT NULL UNIQUE,
    body TEXT NOT NULL
);
CREATE TABLE conversations (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    position INTEGER NOT NULL,
    repeat INTEGER NOT NULL,
    prompt_id TEXT NOT NULL,
    record_id INTEGER NOT NULL REFERENCES records(id),
    theme TEXT,
    example_tags TEXT NOT NULL,
    preview TEXT NOT NULL,
    n_criteria INTEGER NOT NULL,
    status TEXT NOT NULL DEFAULT 'pending',
    reply TEXT,
    reasoning TEXT,
    finish_reason TEXT,
    error TEXT,
    error_kind TEXT,
    attempts INTEGER NOT NULL DEFAULT 0,
    latency_ms REAL,
    prompt_tokens INTEGER,
    completion_tokens INTEGER,
    generated_at REAL,
    score REAL,
    n_met INTEGER,
    n_errors INTEGER NOT NULL DEFAULT 0,
    penalties INTEGER NOT NULL DEFAULT 0,
    UNIQUE (run_id, position)
);
CREATE INDEX conversations_by_score ON conversations(run_id, score);
CREATE TABLE verdicts (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL,
    conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    idx INTEGER NOT NULL,
    criterion TEXT NOT NULL,
    points NUMERIC NOT NULL,
    tags TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'pending',
    explanation TEXT,
    raw_output TEXT,
    reasoning TEXT,
    error TEXT,
    error_kind TEXT,
    attempts INTEGER NOT NULL DEFAULT 0,
    latency_ms REAL,
    prompt_tokens INTEGER,
    completion_tokens INTEGER,
    graded_at REAL,
    UNIQUE (conversation_id, idx)
);
CREATE INDEX verdicts_by_status ON verdicts(run_id, status);
CREATE TABLE run_log (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL,
    at REAL NOT NULL,
    level TEXT NOT NULL,
    message TEXT NOT NULL
);
CREATE INDEX run_log_by_run ON run_log(run_id, id);
"""

# Version 2: a heartbeat and an owner, so a run whose process died reads as interrupted and two
# processes never drive one run; live figures for monitors in other processes; and an index on
# grading time for recent rates and latencies.
MIGRATE_V1_TO_V2 = """
ALTER TABLE runs ADD COLUMN heartbeat_at REAL;
ALTER TABLE runs ADD COLUMN owner TEXT;
ALTER TABLE runs ADD COLUMN live_json TEXT;
CREATE INDEX verdicts_by_time ON verdicts(run_id, graded_at);
CREATE INDEX conversations_by_time ON conversations(run_id, generated_at);
"""

# Version 3: a lease, the fence of every write a driving process makes. A takeover gives the run
# a new lease, so a driver that was stopped (Ctrl-Z) or cut off and then comes back finds its
# writes refused instead of driving the run alongside its successor and paying twice.
MIGRATE_V2_TO_V3 = """
ALTER TABLE runs ADD COLUMN lease TEXT;
"""

# Version 4: numbers people can compare.
# - What a run sent (requests_json): its grader template's name and sha256, system messages, and
#   whether its requests are the reference's. Runs made before version 4 were graded with the
#   built-in prompt and recorded no template name: they are marked `builtin`, so that a resume or
#   a retry never switches an old run to the reference prompt halfway.
# - A regrade is a run of its own, linked to the run whose replies it reuses (source_run_id).
# - The verdict cache: a verdict already paid for is found by the key of its request (endpoint,
#   model, the exact messages, the parameters, the repeat). Its rows belong to no run, so
#   deleting a run never takes a verdict another run still uses.
MIGRATE_V3_TO_V4 = """
ALTER TABLE runs ADD COLUMN requests_json TEXT;
ALTER TABLE runs ADD COLUMN source_run_id INTEGER;
ALTER TABLE verdicts ADD COLUMN cache_key TEXT;
ALTER TABLE verdicts ADD COLUMN from_cache INTEGER NOT NULL DEFAULT 0;
CREATE TABLE verdict_cache (
    key TEXT PRIMARY KEY,
    status TEXT NOT NULL,
    explanation TEXT,
    raw_output TEXT,
    reasoning TEXT,
    attempts INTEGER NOT NULL DEFAULT 1,
    latency_ms REAL,
    prompt_tokens INTEGER,
    completion_tokens INTEGER,
    created_at REAL NOT NULL
);
UPDATE runs SET settings_json = json_set(settings_json, '$.grader_template', 'builtin')
    WHERE json_extract(settings_json, '$.grader_template') IS NULL;
"""

# Version 5: runs get a kind (hbtui.core.run_kinds): every run made before is a model run. An imported
# run keeps where it came from and what its file stated (format, path, stated score) in
# import_json, beside the score hbtui's own scoring gives it.
MIGRATE_V4_TO_V5 = """
ALTER TABLE runs ADD COLUMN kind TEXT NOT NULL DEFAULT 'model';
ALTER TABLE runs ADD COLUMN import_json TEXT;
"""

# Version 6: a running run's requested state, written by any process (`hbtui pause|unpause|cancel`,
# a monitor) and applied by the process driving it, which reads it about twice a second:
# 'paused', 'cancelled', or NULL to run.
MIGRATE_V5_TO_V6 = """
ALTER TABLE runs ADD COLUMN control TEXT;
"""

# Version 7: where a run's detached driver (started by the app, in a session of its own) writes its
# output: a log file beside the run folders, named by the app and `hbtui runs`. NULL for a run never
# driven detached (a headless `hbtui run` prints to its own terminal).
MIGRATE_ADD_DRIVER_LOG = """
ALTER TABLE runs ADD COLUMN driver_log TEXT;
"""

# Version 8: a run may grade the records' own completions instead of a model's replies (hbtui.core.completions):
# each such conversation keeps its physicians' group (scored apart) and which completion it is
# ("ideal", or "reference 1" to "reference 4"); NULL for a model's reply.
MIGRATE_ADD_COMPLETIONS = """
ALTER TABLE conversations ADD COLUMN completion_group TEXT;
ALTER TABLE conversations ADD COLUMN completion TEXT;
"""

# Version 9: which endpoint answered each call, when a model has several (replicas, or several
# keys of one URL): its URL, and the key's position when one URL is listed with several keys.
# Never a key. NULL for calls made before, verdicts from the cache and calls never answered.
MIGRATE_ADD_ENDPOINTS = """
ALTER TABLE conversations ADD COLUMN endpoint TEXT;
ALTER TABLE verdicts ADD COLUMN endpoint TEXT;
"""

# Version 10: the results browser's indexes.
# - Criterion texts and grader explanations searchable (`/`), in an FTS5 index over the verdicts
#   table (external content: the text is stored once, in verdicts). Triggers keep it in step
#   with every insert, delete and change of either text, so verdicts written as a run goes are
#   found at once; the rebuild indexes the runs made before. (Version 13 replaced both.)
# - The criteria view's grouping of a run's verdicts by text and tags read from a covering index
#   (a fifth of the time of reading the rows, which carry the grader's whole output).
# - Where the reviewer left each run: the last conversation and criterion, opened there again.
MIGRATE_ADD_BROWSER_INDEXES = """
CREATE INDEX verdicts_by_criterion ON verdicts(run_id, criterion, tags, points, status);
CREATE TABLE review_positions (
    run_id INTEGER PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
    conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    criterion INTEGER NOT NULL,
    at REAL NOT NULL
);
CREATE VIRTUAL TABLE verdict_text USING fts5(
    criterion, explanation, content='verdicts', content_rowid='id', tokenize='unicode61 remove_diacritics 2'
);
CREATE TRIGGER verdict_text_insert AFTER INSERT ON verdicts BEGIN
    INSERT INTO verdict_text (rowid, criterion, explanation) VALUES (new.id, new.criterion, new.explanation);
END;
CREATE TRIGGER verdict_text_delete AFTER DELETE ON verdicts BEGIN
    INSERT INTO verdict_text (verdict_text, rowid, criterion, explanation)
        VALUES ('delete', old.id, old.criterion, old.explanation);
END;
CREATE TRIGGER verdict_text_update AFTER UPDATE OF criterion, explanation ON verdicts BEGIN
    INSERT INTO verdict_text (verdict_text, rowid, criterion, explanation)
        VALUES ('delete', old.id, old.criterion, old.explanation);
    INSERT INTO verdict_text (rowid, criterion, explanation) VALUES (new.id, new.criterion, new.explanation);
END;
INSERT INTO verdict_text (verdict_text) VALUES ('rebuild');
"""

# Version 11: meta-eval runs (hbtui.meta_eval). Their rows are judgements of a completion against a
# rubric text, with physicians' labels and no points, so they get their own table rather than
# conversations and verdicts. A conversation and completion rated under many rubrics is stored
# once (meta_eval_texts, by the sha256 of both). A meta-eval's report (agreement metrics, the
# physicians' distribution) is kept in runs.meta_eval_json, its headline F1 in runs.score.
MIGRATE_ADD_META_EVAL_ROWS = """
CREATE TABLE meta_eval_texts (
    id INTEGER PRIMARY KEY,
    sha256 TEXT NOT NULL UNIQUE,
    prompt_json TEXT NOT NULL,
    completion TEXT NOT NULL
);
CREATE TABLE meta_eval_rows (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    position INTEGER NOT NULL,
    line INTEGER NOT NULL,
    text_id INTEGER NOT NULL REFERENCES meta_eval_texts(id),
    rubric TEXT NOT NULL,
    category TEXT NOT NULL,
    labels TEXT NOT NULL,
    physician_ids TEXT NOT NULL,
    prompt_id TEXT,
    completion_id TEXT,
    status TEXT NOT NULL DEFAULT 'pending',
    explanation TEXT,
    raw_output TEXT,
    reasoning TEXT,
    error TEXT,
    error_kind TEXT,
    attempts INTEGER NOT NULL DEFAULT 0,
    latency_ms REAL,
    prompt_tokens INTEGER,
    completion_tokens INTEGER,
    graded_at REAL,
    UNIQUE (run_id, position)
);
CREATE INDEX meta_eval_rows_by_status ON meta_eval_rows(run_id, status);
ALTER TABLE runs ADD COLUMN meta_eval_json TEXT;
"""

# Version 12: human review (hbtui.core.reviews). A reviewer's flips, flags and undos, an append-only
# history beside the verdicts, never written into them: who, when, what, the note, and the
# grader's verdict as it was reviewed. ``subject`` (the prompt, reply and criterion, hashed) finds
# an earlier review of the same reply and criterion when it is graded again in another run.
MIGRATE_ADD_REVIEWS = """
CREATE TABLE reviews (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    idx INTEGER NOT NULL,
    reviewer TEXT NOT NULL,
    at REAL NOT NULL,
    action TEXT NOT NULL CHECK (action IN ('flip', 'flag', 'undo')),
    met INTEGER,
    note TEXT,
    undoes INTEGER REFERENCES reviews(id),
    graded_status TEXT NOT NULL,
    subject TEXT NOT NULL
);
CREATE INDEX reviews_by_run ON reviews(run_id);
CREATE INDEX reviews_by_verdict ON reviews(conversation_id, idx);
CREATE INDEX reviews_undone ON reviews(undoes) WHERE undoes IS NOT NULL;
CREATE INDEX reviews_by_subject ON reviews(subject);
"""

# Version 13: the search index off the run's write path (hbtui.store.search_index). Its triggers
# tokenized every criterion as a plan was stored and every explanation as it was graded, a fifth of
# the harness's time per call; a run is now indexed when it is first searched. The index becomes a
# table of its own text (a re-graded verdict's row replaced by rowid), empty until then, with how
# far each run is indexed.
MIGRATE_INDEX_SEARCH_WHEN_SEARCHED = """
DROP TRIGGER verdict_text_insert;
DROP TRIGGER verdict_text_delete;
DROP TRIGGER verdict_text_update;
DROP TABLE verdict_text;
CREATE VIRTUAL TABLE verdict_text USING fts5(criterion, explanation, tokenize='unicode61 remove_diacritics 2');
CREATE TABLE verdict_text_runs (
    run_id INTEGER PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
    graded_to REAL,
    ties INTEGER NOT NULL
);
"""

# Version 14: a run through a provider's batch API (hbtui.engine.batch_api). Each file submitted
# is recorded before its upload, with what it holds (batch_lines: a reply is idx -1), then its
# file id and its batch id the moment each is known, so that no process's death loses a batch
# that is billed, or submits a request twice.
MIGRATE_ADD_BATCH_SUBMISSIONS = """
CREATE TABLE batch_submissions (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    number INTEGER NOT NULL,
    stage TEXT NOT NULL,
    model TEXT NOT NULL,
    endpoint TEXT NOT NULL,
    path TEXT NOT NULL,
    lines INTEGER NOT NULL,
    sha256 TEXT NOT NULL,
    state TEXT NOT NULL,
    file_id TEXT,
    batch_id TEXT,
    batch_status TEXT,
    total INTEGER NOT NULL DEFAULT 0,
    completed INTEGER NOT NULL DEFAULT 0,
    failed INTEGER NOT NULL DEFAULT 0,
    written_at REAL NOT NULL,
    submitted_at REAL,
    expires_at REAL,
    ended_at REAL,
    error TEXT,
    UNIQUE (run_id, number)
);
CREATE TABLE batch_lines (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    submission_id INTEGER NOT NULL REFERENCES batch_submissions(id) ON DELETE CASCADE,
    conversation_id INTEGER NOT NULL,
    idx INTEGER NOT NULL,
    PRIMARY KEY (submission_id, conversation_id, idx)
) WITHOUT ROWID;
CREATE INDEX batch_lines_by_run ON batch_lines(run_id);
"""

MIGRATIONS = {
    1: MIGRATE_V1_TO_V2,
    2: MIGRATE_V2_TO_V3,
    3: MIGRATE_V3_TO_V4,
    4: MIGRATE_V4_TO_V5,
    5: MIGRATE_V5_TO_V6,
    6: MIGRATE_ADD_DRIVER_LOG,
    7: MIGRATE_ADD_COMPLETIONS,
    8: MIGRATE_ADD_ENDPOINTS,
    9: MIGRATE_ADD_BROWSER_INDEXES,
    10: MIGRATE_ADD_META_EVAL_ROWS,
    11: MIGRATE_ADD_REVIEWS,
    12: MIGRATE_INDEX_SEARCH_WHEN_SEARCHED,
    13: MIGRATE_ADD_BATCH_SUBMISSIONS,
}


def holds_our_header(path) -> bool:
    """Whether the file at ``path`` is an SQLite database marked as hbtui's, of a schema this
    hbtui can use, read from its header alone (big-endian integers: the user version at byte 60,
    the application id at byte 68) without opening it."""
    try:
        with open(path, "rb") as handle:
            header = handle.read(72)
    except OSError:
        return False
    return (
        header.startswith(b"SQLite format 3\x00")
        and int.from_bytes(header[68:72], "big") == APPLICATION_ID
        and int.from_bytes(header[60:64], "big") <= SCHEMA_VERSION
    )


def fresh_schema_script() -> str:
    """A new file's schema: version 1 and every migration since, as one script."""
    return (
        ";\n".join(
            [
                *statements(SCHEMA_V1),
                f"PRAGMA application_id={APPLICATION_ID}",
                *(statement for version in range(1, SCHEMA_VERSION) for statement in statements(MIGRATIONS[version])),
                f"PRAGMA user_version={SCHEMA_VERSION}",
            ]
        )
        + ";"
    )


def statements(script: str) -> list[str]:
    """The statements of ``script`` one by one; a trigger's body (``BEGIN ...; ...; END``) holds
    semicolons of its own, so a piece ends only where SQLite says a statement is complete."""
    found: list[str] = []
    pending = ""
    for piece in script.split(";"):
        pending += piece + ";"
        if sqlite3.complete_statement(pending):
            if pending.strip(" \n;"):
                found.append(pending.strip().removesuffix(";").strip())
            pending = ""
    if pending.strip(" \n;"):
        found.append(pending.strip().removesuffix(";").strip())
    return found
