"""An option typo is answered with difflib's closest supported key ("did you mean"), for connector
options, the mysql source's and the pipeline block's."""

from __future__ import annotations

import pytest

from changelake.connectors.errors import OptionValidationError
from changelake.connectors.options import did_you_mean, validate_unsupported_options


def test_did_you_mean_names_the_close_match_only():
    assert did_you_mean(["scan.startup.mod"], ["scan.startup.mode", "topic"]) == \
        "\n\nDid you mean 'scan.startup.mode' instead of 'scan.startup.mod'?"
    assert did_you_mean(["zzz"], ["scan.startup.mode", "topic"]) == ""


def test_unsupported_option_message_keeps_flinks_wording_and_adds_the_hint():
    with pytest.raises(OptionValidationError) as err:
        validate_unsupported_options("kafka", {"topik": "t", "topic-pattern": "x"}, ["topic", "topic-pattern"])
    text = str(err.value)
    assert text.startswith("Unsupported options found for 'kafka'.\n\nUnsupported options:\n\ntopik\n\n"
                           "Supported options:\n\ntopic\ntopic-pattern")
    assert text.endswith("\n\nDid you mean 'topic' instead of 'topik'?")  # the last line the user reads


def test_the_registered_factories_suggest_too():
    from changelake.connectors.mysql_cdc.factory import validate_unsupported
    from changelake.pipeline.definition import validate_pipeline_block

    with pytest.raises(OptionValidationError, match="Did you mean 'server-id' instead of 'server_id'?"):
        validate_unsupported({"hostname": "h", "server_id": "1"})
    with pytest.raises(OptionValidationError, match="Did you mean 'parallelism' instead of 'paralelism'?"):
        validate_pipeline_block({"name": "p", "paralelism": "2"})
