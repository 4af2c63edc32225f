"""The demo's MySQL pre-check: one line naming the server and where the settings come from."""

from __future__ import annotations

import pytest

from cli.demo import _check_mysql
from changelake.errors import ChangelakeError
from changelake.services import free_port


def test_unreachable_mysql_is_one_line_without_the_password():
    params = {"host": "127.0.0.1", "port": free_port(), "user": "changelake", "password": "s3cret-pw"}
    with pytest.raises(ChangelakeError) as info:
        _check_mysql(params)
    text = str(info.value)
    assert f"127.0.0.1:{params['port']}" in text and "MYSQL_HOST/PORT/USER/PASSWORD" in text
    assert "s3cret-pw" not in text and "\n" not in text
