"""Human review: the store's append-only history, the reviewed score against the reference's
scoring, two reviewers and their agreement, and a regrade's hint."""

import asyncio
import sqlite3

import pytest

from hbtui.analysis.review_report import run_review
from hbtui.core import reviews as rv
from hbtui.core.verdicts import kappa_of
from hbtui.services import compute_report
from hbtui.store import NothingToReview, Store, schema
from tests.core.test_reference import needs_reference
from tests.core.test_reference import ref as ref  # a fixture
from tests.support.old_schema import make_database_before


def run(coro):
    return asyncio.run(coro)


async def verdict_rows(store, run_id):
    """(conversation id, idx, criterion, points, status) of the run, in rubric order."""
    return await store._all(
        "SELECT conversation_id, idx, criterion, points, status FROM verdicts WHERE run_id = ?"
        " ORDER BY conversation_id, idx",
        (run_id,),
    )


def test_reviews_are_appended_beside_the_verdicts_never_over_them(finished_run_db):
    async def scenario():
        async with await Store.open(finished_run_db) as store:
            before = await store._all("SELECT * FROM verdicts ORDER BY id")
            conv, idx, *_ = (await verdict_rows(store, 1))[0]
            flip = await store.add_review(conv, idx, "alice", rv.FLIP)
            flag = await store.add_review(conv, idx, "alice", rv.FLAG, note="unsure: the reply hedges")
            undo = await store.add_review(conv, idx, "alice", rv.UNDO)
            after = await store._all("SELECT * FROM verdicts ORDER BY id")
            history = await store.verdict_reviews(conv, idx)
            return before, after, flip, flag, undo, history

    before, after, flip, flag, undo, history = run(scenario())
    assert after == before  # the grader's verdicts untouched
    assert [r.action for r in history] == ["flip", "flag", "undo"]  # append-only
    assert flip.graded_status == "met" and flip.met is False and flip.reviewer == "alice" and flip.at > 0
    assert undo.undoes == flag.id  # u takes back the latest review standing: the flag
    state = rv.states(history)[(flip.conversation_id, flip.idx)]
    assert state.flag is None and state.decision == flip and state.flipped(True)


def test_a_second_flip_by_another_reviewer_flips_back_and_the_latest_wins(finished_run_db):
    async def scenario():
        async with await Store.open(finished_run_db) as store:
            conv, idx, *_ = (await verdict_rows(store, 1))[0]
            await store.add_review(conv, idx, "alice", rv.FLIP)
            bob = await store.add_review(conv, idx, "bob", rv.FLIP)
            return bob, await store.verdict_reviews(conv, idx)

    bob, history = run(scenario())
    assert bob.met is True  # bob holds the grader's verdict right: alice's flip is undone by his
    state = rv.states(history)[(bob.conversation_id, bob.idx)]
    assert state.met(True) is True and not state.flipped(True) and state.reviewers == ("alice", "bob")
    assert rv.states(history, "alice")[(bob.conversation_id, bob.idx)].flipped(True)


def test_undo_without_a_review_and_reviews_of_ungraded_verdicts_are_refused(finished_run_db):
    async def scenario():
        async with await Store.open(finished_run_db) as store:
            conv, idx, *_ = (await verdict_rows(store, 1))[0]
            with pytest.raises(NothingToReview, match="no review of this verdict to undo"):
                await store.add_review(conv, idx, "alice", rv.UNDO)
            await store.db.execute(
                "UPDATE verdicts SET status = 'error' WHERE conversation_id = ? AND idx = ?", (conv, idx)
            )
            await store.db.commit()
            with pytest.raises(NothingToReview, match="only a graded verdict"):
                await store.add_review(conv, idx, "alice", rv.FLIP)
            return await store.run_reviews(1)

    assert run(scenario()) == []


def test_a_database_of_the_previous_schema_gains_the_reviews_table(tmp_path):
    db = tmp_path / "old.sqlite"
    make_database_before(db, schema.MIGRATE_ADD_REVIEWS)
    assert "reviews" not in {r[0] for r in sqlite3.connect(db).execute("SELECT name FROM sqlite_master")}

    async def reopen():
        async with await Store.open(db) as store:
            return await store.run_reviews(1)

    assert run(reopen()) == []
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == schema.SCHEMA_VERSION
        columns = {row[1] for row in conn.execute("PRAGMA table_info(reviews)")}
    assert {"reviewer", "at", "action", "met", "note", "undoes", "graded_status", "subject"} <= columns


# ---- the reviewed score ---------------------------------------------------------------------


def test_without_reviews_the_reviewed_report_is_the_graded_report(finished_run_db):
    async def scenario():
        async with await Store.open(finished_run_db) as store:
            return await compute_report(store, 1), await run_review(store, 1, from_cache=0)

    graded, review = run(scenario())
    assert review.reviewed.to_json() == review.graded.to_json()
    assert review.graded.metrics == graded.metrics and review.graded.score == graded.score


@needs_reference
def test_reviewed_score_is_the_reference_score_of_the_reviewed_verdicts(finished_run_db, ref):
    """Flips (one undone, one flipped back by a second reviewer) and a flag: the reviewed score is
    the reference's calculate_score of each conversation over the verdicts as reviewed."""

    async def scenario():
        async with await Store.open(finished_run_db) as store:
            rows = await verdict_rows(store, 1)
            (c0, i0, *_), (c1, i1, *_), (c2, i2, *_), (c3, i3, *_) = rows[0], rows[1], rows[4], rows[6]
            await store.add_review(c0, i0, "alice", rv.FLIP)
            await store.add_review(c1, i1, "alice", rv.FLIP)
            await store.add_review(c1, i1, "alice", rv.UNDO)  # taken back: as graded
            await store.add_review(c2, i2, "alice", rv.FLIP)
            await store.add_review(c2, i2, "bob", rv.FLIP)  # flipped back by bob: as graded
            await store.add_review(c3, i3, "bob", rv.FLAG, note="a flag changes no score")
            return rows, await run_review(store, 1)

    rows, review = run(scenario())
    flipped = {(rows[0][0], rows[0][1])}
    by_conversation: dict[int, tuple[list, list]] = {}
    for conv, idx, criterion, points, status in rows:
        met = (status == "met") != ((conv, idx) in flipped)
        items, grades = by_conversation.setdefault(conv, ([], []))
        items.append(ref.RubricItem(criterion=criterion, points=points, tags=[]))
        grades.append({"criteria_met": met})
    expected = [ref.calculate_score(items, grades) for items, grades in by_conversation.values()]
    assert review.reviewed.score == pytest.approx(sum(expected) / len(expected), abs=1e-12)
    assert review.reviewed.score != review.graded.score
    assert review.glance.progress.overall.reviewed == 3 and review.glance.progress.overall.flipped == 1
    assert review.glance.progress.overall.flagged == 1


def test_each_reviewer_has_a_reviewed_score_and_two_reviewers_their_agreement(finished_run_db):
    async def scenario():
        async with await Store.open(finished_run_db) as store:
            rows = await verdict_rows(store, 1)
            keys = [(conv, idx) for conv, idx, *_ in rows]
            for key in keys[:4]:
                await store.add_review(*key, "alice", rv.FLAG)  # seen, kept as graded
            await store.add_review(*keys[0], "alice", rv.FLIP)
            await store.add_review(*keys[0], "bob", rv.FLIP)  # bob flips alice's flip back
            for key in keys[1:3]:
                await store.add_review(*key, "bob", rv.FLAG)
            await store.add_review(*keys[5], "bob", rv.FLIP)
            return await run_review(store, 1)

    review = run(scenario())
    (agreement,) = review.glance.agreements
    assert (agreement.first, agreement.second) == ("alice", "bob")
    # Both reviewed keys 0, 1, 2: alice flipped 0, bob held it as graded; they agree on 1 and 2.
    assert agreement.kappa == kappa_of([(False, True), (False, False), (True, True)])
    assert agreement.percent == pytest.approx(2 / 3)
    assert set(review.glance.by_reviewer) == {"alice", "bob"}
    assert review.glance.by_reviewer["alice"] != review.glance.by_reviewer["bob"]
    assert review.reviewed.score is not None
    by_axis = review.glance.progress.as_json()["by_axis"]
    assert sum(t["flipped"] for t in by_axis.values()) >= review.glance.progress.overall.flipped == 1


def test_cohen_kappa_of_the_review_is_the_textbook_one():
    pairs = [(True, True)] * 20 + [(True, False)] * 5 + [(False, True)] * 10 + [(False, False)] * 15
    observed, chance = 35 / 50, (25 / 50) * (30 / 50) + (25 / 50) * (20 / 50)
    assert kappa_of(pairs).kappa == pytest.approx((observed - chance) / (1 - chance), abs=1e-12)


def test_the_review_filters_find_flagged_flipped_and_not_yet_reviewed_conversations(finished_run_db):
    from hbtui.store import ConversationFilter

    async def scenario():
        async with await Store.open(finished_run_db) as store:
            ids = await store.conversation_ids(1)
            keys = {conv: [idx for c, idx, *_ in await verdict_rows(store, 1) if c == conv] for conv in ids}
            first, second, third = ids

            async def listed():
                return {
                    name: await store.conversation_ids(1, ConversationFilter(review=name)) for name in rv.REVIEW_FILTERS
                }

            seen = [await listed()]
            await store.add_review(first, keys[first][0], "alice", rv.FLIP)
            await store.add_review(second, keys[second][0], "alice", rv.FLIP)
            await store.add_review(second, keys[second][0], "bob", rv.FLIP)  # flipped back: kept
            await store.add_review(third, keys[third][1], "bob", rv.FLAG, note="?")
            for idx in keys[third]:
                await store.add_review(third, idx, "bob", rv.FLAG)
            await store.add_review(third, keys[third][1], "bob", rv.UNDO)  # one flag of two taken back
            seen.append(await listed())
            for idx in keys[third]:
                await store.add_review(third, idx, "bob", rv.UNDO)
            seen.append(await listed())
            return ids, seen

    (first, second, third), (none, some, undone) = run(scenario())
    assert none == {rv.FLAGGED: [], rv.FLIPPED: [], rv.NOT_REVIEWED: [first, second, third]}
    assert some == {rv.FLAGGED: [third], rv.FLIPPED: [first], rv.NOT_REVIEWED: [first, second]}
    assert undone[rv.FLAGGED] == [] and undone[rv.NOT_REVIEWED] == [first, second, third]


def test_deleting_a_run_takes_its_reviews_and_their_undos_with_it(finished_run_db):
    async def scenario():
        async with await Store.open(finished_run_db) as store:
            conv, idx, *_ = (await verdict_rows(store, 1))[0]
            await store.add_review(conv, idx, "alice", rv.FLIP)
            await store.add_review(conv, idx, "alice", rv.UNDO)
            await store.delete_run(await store.get_run(1))  # as `hbtui delete` and the app's D do
            return await store._all("SELECT count(*) FROM reviews")

    assert run(scenario()) == [(0,)]


def test_the_glance_scores_again_only_what_reviews_touch_and_agrees_with_a_full_pass(tmp_path):
    """`show --reviewed` scores every conversation once as graded, then again only those with a
    review: on a synthesized run with flips, flags and undos by three reviewers, each figure equals
    scoring every conversation over again."""
    import random

    from hbtui.analysis.review_report import glance
    from hbtui.core.scoring import clipped_mean, conversation_score
    from tests.support.synth import synthesize_run

    async def scenario():
        async with await Store.open(tmp_path / "synth.sqlite") as store:
            run_id = await synthesize_run(store, conversations=300, criteria_per=6, seed=3)
            keys = await store._all(
                "SELECT conversation_id, idx FROM verdicts WHERE run_id = ? AND status IN ('met', 'not_met')",
                (run_id,),
            )
            pick = random.Random(7)
            for key in pick.sample(keys, 120):
                reviewer = pick.choice(["ann", "bo", "cy"])
                await store.add_review(*key, reviewer, pick.choice([rv.FLIP, rv.FLIP, rv.FLAG]))
                if pick.random() < 0.2:
                    await store.add_review(*key, reviewer, rv.UNDO)
            return await store.review_inputs(run_id), await store.run_reviews(run_id)

    conversations, history = run(scenario())
    seen = glance(conversations, history)

    def every_score(reviewer=None) -> list[float]:
        """Every conversation's score over its reviewed verdicts, read here from the reviews."""
        by_key, scores = rv.states(history, reviewer), []
        for c in conversations:
            states = [by_key.get((c.conversation_id, idx), rv.NOT_REVIEWED_STATE) for idx in c.indexes]
            met = [state.met(k.met) for state, k in zip(states, c.criteria)]
            if not c.excluded and None not in met:
                score = conversation_score([k.points for k in c.criteria], met)
                scores += [] if score is None else [score]
        return scores

    def full_pass(reviewer=None):
        return clipped_mean(every_score(reviewer))

    assert seen.reviewed_score == full_pass() != seen.graded_score == full_pass("nobody")
    assert seen.by_reviewer == {name: full_pass(name) for name in ("ann", "bo", "cy")}
    assert rv.reviewed_report(conversations, history).scores == every_score()
    graded = {(c.conversation_id, idx): k.met for c in conversations for idx, k in zip(c.indexes, c.criteria)}
    states = {key: state for key, state in rv.states(history).items() if graded[key] is not None}
    overall = seen.progress.overall
    assert overall.verdicts == sum(met is not None for met in graded.values())
    assert overall.reviewed == len(states) and overall.flagged == sum(s.flag is not None for s in states.values())
    assert overall.flipped == sum(s.flipped(graded[key]) for key, s in states.items()) > 0
