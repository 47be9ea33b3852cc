"""A base URL with a user name and password in it (`http://user:pw@proxy/v1`). The chat client
sends the API key as the Bearer token in its Authorization header, and one request carries one
such header: aiohttp refused every call ("Cannot combine AUTHORIZATION header with AUTH argument
or credentials encoded in URL"), after the run was planned. A URL's credentials would also be
stored with the run's settings and shown wherever the endpoint is named. So they are refused up
front, in one line naming the setting, and the password is never printed."""

from __future__ import annotations

import sqlite3
from urllib.parse import urlsplit

import pytest

from hbtui import cli

PASSWORD = "pw-4f1d9e"


def with_credentials(url: str) -> str:
    parts = urlsplit(url)
    return parts._replace(netloc=f"proxy-user:{PASSWORD}@{parts.netloc}").geturl()


@pytest.mark.parametrize(
    "env",
    [
        "BASE_URL={credentials}\nAPI_KEY=sk-test-key-123456\nMODEL_TEST=test-model\nMODEL_GRADER=grader-model\n",
        "BASE_URL={credentials}\nMODEL_TEST=test-model\nMODEL_GRADER=grader-model\n",
        "BASE_URL={plain}\nGRADER_BASE_URL={plain},{credentials}\nMODEL_TEST=test-model\nMODEL_GRADER=grader-model\n",
    ],
    ids=["with-a-key", "without-a-key", "grader-replica"],
)
def test_credentials_in_a_base_url_are_one_line_naming_it_and_never_the_password(
    server, tmp_path, monkeypatch, capsys, small_dataset, env
):
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text(env.format(credentials=with_credentials(server.base_url), plain=server.base_url))
    server.reset_stats()

    assert cli.main(["run", "--data", str(small_dataset), "--name", "proxied"]) == cli.EXIT_USAGE
    out, err = capsys.readouterr()
    assert PASSWORD not in out + err
    assert err.count("\n") == 1 and err.startswith("hbtui: error: ")
    setting = "GRADER_BASE_URL" if "GRADER_BASE_URL" in env else "BASE_URL"
    assert setting in err and "user name or password" in err
    assert "Traceback" not in err
    db = tmp_path / "runs" / "hbtui.sqlite"
    if db.exists():  # nothing planned, so no run whose every call would fail
        with sqlite3.connect(db) as conn:
            assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] == 0


def test_a_bad_scheme_with_credentials_does_not_print_the_password(tmp_path, monkeypatch, capsys, small_dataset):
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text(f"BASE_URL=ftp://u:{PASSWORD}@host/v1\nMODEL_TEST=m\nMODEL_GRADER=g\n")
    assert cli.main(["run", "--data", str(small_dataset)]) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert "BASE_URL" in err and PASSWORD not in err and err.count("\n") == 1
