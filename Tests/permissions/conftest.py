"""Fixtures of the owners-and-permissions tests (Tests/permissions).

    DOCFS_BIN=/path/to/docfs python3 -m pytest -q -s -p no:cacheprovider Tests/permissions

They must run as root (the daemon mounts with allow_other; the tests become other users by
numeric ids in forked children, without /etc/passwd entries).
"""
import os
import shutil
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import docfs_testlib as lib  # noqa: E402


def pytest_collection_modifyitems(config, items):
    if os.geteuid() != 0:
        skip = pytest.mark.skip(reason="the permission tests need root (they switch to uids 2001-2003 in forked children)")
        for item in items:
            item.add_marker(skip)


@pytest.fixture(scope="module")
def docfs_mount():
    """A docfs mount (-o auto_unmount,allow_other) on a fresh store, plus `plain`: an empty
    directory on the local filesystem beside it, for the same operations."""
    with lib.mounted("perm") as m:
        m.plain = os.path.join(m.base, "plain")
        os.mkdir(m.plain)
        os.chmod(m.plain, 0o755)
        yield m
        shutil.rmtree(m.plain, ignore_errors=True)
