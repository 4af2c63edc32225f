"""changelake.pipeline.collector: the young-generation threshold of a run, and that it is put back."""

import gc

from changelake.pipeline.collector import YOUNG_THRESHOLD, young_generation


def test_the_threshold_is_raised_inside_the_block_and_put_back_after():
    before = gc.get_threshold()
    gc.set_threshold(700, before[1], before[2])
    try:
        with young_generation():
            assert gc.get_threshold() == (YOUNG_THRESHOLD, before[1], before[2])
            with young_generation():  # nested: nothing changes, nothing is put back early
                assert gc.get_threshold()[0] == YOUNG_THRESHOLD
            assert gc.get_threshold()[0] == YOUNG_THRESHOLD
        assert gc.get_threshold() == (700, before[1], before[2])
    finally:
        gc.set_threshold(*before)


def test_the_threshold_is_put_back_when_the_run_fails():
    before = gc.get_threshold()
    gc.set_threshold(700, before[1], before[2])
    try:
        try:
            with young_generation():
                raise RuntimeError("run failed")
        except RuntimeError:
            pass
        assert gc.get_threshold()[0] == 700
    finally:
        gc.set_threshold(*before)


def test_a_disabled_collector_or_a_higher_threshold_is_left_alone():
    before = gc.get_threshold()
    try:
        gc.set_threshold(YOUNG_THRESHOLD * 2, before[1], before[2])
        with young_generation():
            assert gc.get_threshold()[0] == YOUNG_THRESHOLD * 2
        gc.set_threshold(700, before[1], before[2])
        gc.disable()
        with young_generation():
            assert gc.get_threshold()[0] == 700
    finally:
        gc.enable()
        gc.set_threshold(*before)
