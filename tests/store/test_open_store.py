"""open_store: which URL opens which store, and the sentence a user sees when it cannot."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from orchestrator import kairo_dir
from orchestrator.errors import EnvironmentProblem, UsageError
from orchestrator.store import SqliteStore, open_store
from tests import postgres


def test_no_url_means_sqlite_inside_the_git_common_dir(tmp_path: Path) -> None:
    git_dir = tmp_path / ".git"
    git_dir.mkdir()
    with open_store(None, git_common_dir=git_dir) as store:
        assert isinstance(store, SqliteStore)
        assert store.path == git_dir / "kairo" / "kairo.db" == kairo_dir.default_store(git_dir)
    assert (git_dir / "kairo" / "kairo.db").is_file()


def test_a_sqlite_url_names_an_absolute_file(tmp_path: Path) -> None:
    (tmp_path / "with space").mkdir()
    path = tmp_path / "with space" / "s.db"
    with open_store(f"sqlite://{tmp_path}/with%20space/s.db", git_common_dir=tmp_path) as store:
        assert isinstance(store, SqliteStore)
        assert store.path == path
    assert path.is_file()


@pytest.mark.parametrize(
    "url", ["sqlite://relative.db", "sqlite:relative.db", "sqlite:///a.db?mode=ro", "sqlite://"]
)
def test_a_malformed_sqlite_url_is_a_usage_error(url: str, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"sqlite:///an/absolute/path\.db"):
        open_store(url, git_common_dir=tmp_path)


@pytest.mark.parametrize("url", ["mysql://db", "", "kairo.db", "file:///tmp/x.db"])
def test_an_unknown_url_is_a_usage_error(url: str, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="unknown store URL"):
        open_store(url, git_common_dir=tmp_path)


@pytest.mark.parametrize("scheme", ["postgresql", "postgres"])
def test_a_postgresql_url_opens_the_postgresql_store(scheme: str, tmp_path: Path) -> None:
    with postgres.fresh_schema() as url:
        with open_store(url.replace("postgresql", scheme, 1), git_common_dir=tmp_path) as store:
            assert type(store).__name__ == "PostgresStore"
            assert store.list_executions() == []
        assert not (tmp_path / "kairo").exists()


def test_an_unreachable_postgresql_says_so_without_its_password(tmp_path: Path) -> None:
    # Port 1 on this host: refused at once, where a host that does not answer would wait.
    url = "postgresql://kairo:s3cret@127.0.0.1:1/kairo"
    with pytest.raises(EnvironmentProblem) as caught:
        open_store(url, git_common_dir=tmp_path)
    message = caught.value.message
    assert message.startswith(
        "cannot reach the store at postgresql://kairo:***@127.0.0.1:1/kairo: "
    )
    assert "s3cret" not in message and "\n" not in message
    assert caught.value.exit_code == 5


def test_a_postgresql_database_that_does_not_exist(tmp_path: Path) -> None:
    postgres.admin_connection().close()  # the server itself must answer
    url = postgres.BASE_URL.rsplit("/", 1)[0] + "/kairo_no_such_database"
    with pytest.raises(EnvironmentProblem, match='database "kairo_no_such_database" does not'):
        open_store(url, git_common_dir=tmp_path)


def test_a_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(EnvironmentProblem, match=r"the directory .*/nowhere does not exist"):
        open_store(f"sqlite://{tmp_path}/nowhere/s.db", git_common_dir=tmp_path)


def test_a_directory_where_the_file_should_be(tmp_path: Path) -> None:
    with pytest.raises(EnvironmentProblem, match="it is a directory"):
        open_store(f"sqlite://{tmp_path}", git_common_dir=tmp_path)


def test_a_file_that_is_not_a_database(tmp_path: Path) -> None:
    (tmp_path / "s.db").write_text("not a database, just text " * 100)
    with pytest.raises(EnvironmentProblem, match=r"cannot use the store at .*s\.db: file is not"):
        open_store(f"sqlite://{tmp_path}/s.db", git_common_dir=tmp_path)


def test_a_git_dir_where_the_store_cannot_be_made(tmp_path: Path) -> None:
    (tmp_path / "kairo").write_text("a file in the way")
    with pytest.raises(EnvironmentProblem, match="cannot create the store's directory"):
        open_store(None, git_common_dir=tmp_path)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through file permissions")
def test_a_read_only_directory(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        with pytest.raises(EnvironmentProblem, match=r"cannot (open|use) the store at .*s\.db"):
            open_store(f"sqlite://{locked}/s.db", git_common_dir=tmp_path)
    finally:
        locked.chmod(0o700)


def test_a_malformed_postgresql_url_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"^the store URL postgresql://\.\.\. is not a valid URL"):
        open_store("postgresql://kairo@[::1:5432/kairo", git_common_dir=tmp_path)


def test_a_password_in_the_query_is_not_shown_either(tmp_path: Path) -> None:
    url = "postgresql://127.0.0.1:1/kairo?user=kairo&password=s3cret&sslmode=disable"
    with pytest.raises(EnvironmentProblem) as caught:
        open_store(url, git_common_dir=tmp_path)
    assert "?user=kairo&password=***&sslmode=disable:" in caught.value.message
    assert "s3cret" not in caught.value.message


def test_a_url_of_several_hosts_is_libpq_s_to_try_in_turn(tmp_path: Path) -> None:
    with postgres.fresh_schema() as url:
        several = url.replace("127.0.0.1:5432", "127.0.0.1:1,127.0.0.1:5432", 1)
        assert several != url  # the first refuses; libpq goes on to the second
        with open_store(several, git_common_dir=tmp_path) as store:
            assert store.list_executions() == []


def test_the_scheme_may_be_written_in_any_case(tmp_path: Path) -> None:
    with (
        postgres.fresh_schema() as url,
        open_store("PostgreSQL" + url.removeprefix("postgresql"), git_common_dir=tmp_path) as store,
    ):
        assert store.list_executions() == []
