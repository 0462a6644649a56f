"""A decode curve's time on a pool and the engine size it runs, worked by hand
(``optimizer/demand/decode.py`` :class:`DecodeCurve`; issue #27 item 5, the surviving mutants of
the whole-module run, docs/testing.md).

Two engine sizes for one asynchronous phase of 2 runs of 100 sequences: a 1-GPU engine that
sustains 10 sequences at 0.5 s each (floor 3 s), and a 4-GPU engine that sustains 40 at 0.1 s
each (floor 1 s). A pool of g GPUs runs g / e replicas of an e-GPU engine, each serving
100 / (g / e) sequences; a larger engine needs at least one whole replica in the pool, the
smallest may run below one (docs/demand-model.md §4). The engines are plain records here: the
curve reads only their GPU count.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from ptplan.demand.decode import DecodeCurve, DecodeOption
from ptplan.demand.lengths import fixed
from ptplan.demand.steps import AsyncModel


def _option(gpus: int, batch: int, per_seq: float, floor: float) -> DecodeOption:
    # below the cap: 1 sequence takes the floor, `batch` sequences batch x per_seq
    model = AsyncModel(np.array([1.0, float(batch)]), np.array([floor, batch * per_seq]),
                       batch, per_seq, floor)
    engine: Any = SimpleNamespace(gpus=gpus)
    return DecodeOption(engine, batch, None, 0.0, model, floor)


def curve() -> DecodeCurve:
    rollout: Any = SimpleNamespace(sequences=100.0, prompt_tokens=512.0, lengths=fixed(256))
    return DecodeCurve(2, 100.0, False, rollout,
                       (_option(1, 10, 0.5, 3.0), _option(4, 40, 0.1, 1.0)))


def test_seconds_take_the_fastest_engine_that_fits_the_pool() -> None:
    """g = 2: only the 1-GPU engine fits, 2 replicas x 50 sequences x 0.5 s = 25 s a run, 50 s.
    g = 4: 1-GPU 4 x 25 x 0.5 = 12.5 s; 4-GPU one replica of 100 x 0.1 = 10 s: 20 s.
    g = 8: 1-GPU 12.5 x 0.5 = 6.25 s; 4-GPU 2 x 50 x 0.1 = 5 s: 10 s.
    g = 0.5: half a 1-GPU replica, 200 sequences' worth: 100 s a run, 200 s."""
    c = curve()
    assert list(c.seconds(np.array([2.0, 4.0, 8.0, 0.5]))) == pytest.approx(
        [2 * 25.0, 2 * 10.0, 2 * 5.0, 2 * 100.0])
    assert float(c.seconds(2.0)) == pytest.approx(50.0)


def test_option_at_names_that_engine() -> None:
    c = curve()
    assert c.option_at(2.0).engine.gpus == 1  # the 4-GPU engine does not fit 2 GPUs
    assert c.option_at(4.0).engine.gpus == 4
    assert c.option_at(8.0).engine.gpus == 4
    assert c.option_at(0.5).engine.gpus == 1


def test_floor_reference_and_the_smallest_engine() -> None:
    """Floor: 2 runs x the faster engine's 1 s alone. Reference replicas: ⌈100 / 10⌉ = 10 of
    the smallest engine, whose batch is 10."""
    c = curve()
    assert c.floor_seconds == pytest.approx(2.0)
    assert c.reference_replicas() == 10.0
    assert (c.engine.gpus, c.batch) == (1, 10)
