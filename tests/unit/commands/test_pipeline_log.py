"""``changelake pipeline run`` shows the pipeline's Python log at INFO on stderr (a ``log``
signal's message, as Debezium's connector log), not only warnings."""

import logging

from changelake.connectors.mysql_cdc.snapshot.signals import Signal, log_signal
from cli.pipeline import show_pipeline_log


def test_a_log_signal_reaches_stderr_at_info(capsys):
    logger = logging.getLogger("changelake")
    level = logger.level
    handler = show_pipeline_log()
    try:
        assert show_pipeline_log() is handler  # idempotent: one line per record
        log_signal(Signal("ad-hoc-log", "log", {"message": "hello from the signal table"}), None)
        logging.getLogger("changelake.connectors.mysql_cdc.source").debug("not shown")
        err = capsys.readouterr().err
        assert err == "info: signal 'ad-hoc-log': hello from the signal table\n", err
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
