"""The fence against the shared vectors (testdata/fence-vectors.json)."""

import json
import os

import pytest

from raftlock import Fence, MalformedSequencer, Sequencer, StaleSequencer

VECTORS = os.path.join(os.path.dirname(__file__), "..", "..", "..", "testdata", "fence-vectors.json")


def load():
    with open(VECTORS, encoding="utf-8") as f:
        return json.load(f)["vectors"]


def verdict(fence, text):
    try:
        fence.check(text)
    except StaleSequencer:
        return "stale"
    except MalformedSequencer:
        return "malformed"
    return "admit"


@pytest.mark.parametrize("vector", load(), ids=lambda v: v["name"])
def test_fence_gives_the_shared_vectors_verdicts(vector):
    f = Fence()
    got = [verdict(f, st["sequencer"]) for st in vector["steps"]]
    assert got == [st["verdict"] for st in vector["steps"]]


def test_sequencer_round_trips_its_printable_form():
    for text in ["rl1:x:5:jobs/a", "rl1:s:18446744073709551615:a:b", "rl1:x:1:日本", "rl1:p0/1:5:sem", "rl1:p255/256:7:a:b"]:
        assert str(Sequencer.parse(text)) == text
    assert Sequencer.parse("rl1:p3/4:9:sem") == Sequencer("sem", "exclusive", 9, 3, 4)
    assert Sequencer.parse("rl1:p3/4:9:sem").config() == 4
    assert Sequencer.parse("rl1:s:9:sem").config() == 0


def test_the_slot_form_without_permits_is_refused_clearly():
    with pytest.raises(MalformedSequencer, match="permits"):
        Sequencer.parse("rl1:p2:54:pool")


def test_a_refused_earlier_tenure_names_both_tokens():
    f = Fence()
    f.check("rl1:p0/1:68:pool")
    with pytest.raises(StaleSequencer) as e:
        f.check("rl1:p2/3:54:pool")
    for want in ("54", "68", "semaphore of 3", "semaphore of 1", "kind or permits changed"):
        assert want in str(e.value)


def test_fence_refuses_an_invalid_sequencer_object():
    with pytest.raises(MalformedSequencer):
        Fence().check(Sequencer("a", "exclusive", 0))
    with pytest.raises(MalformedSequencer):
        Fence().check(Sequencer("a", "upgrade", 3))
    with pytest.raises(MalformedSequencer):
        Fence().check(Sequencer("a", "shared", 3, 1, 2))
    with pytest.raises(MalformedSequencer):
        Fence().check(Sequencer("a", "exclusive", 3, 256, 256))
    with pytest.raises(MalformedSequencer):
        Fence().check(Sequencer("a", "exclusive", 3, 1))
    with pytest.raises(MalformedSequencer):
        Fence().check(Sequencer("a", "exclusive", 3, None, 2))
    with pytest.raises(MalformedSequencer):
        Fence().check(Sequencer("a", "exclusive", 3, 2, 2))
    with pytest.raises(MalformedSequencer):
        Fence().check(Sequencer("a", "exclusive", 3, 0, 257))


def test_fence_marks():
    f = Fence()
    f.check("rl1:s:4:a")
    f.check("rl1:x:6:a")
    assert (f.highest("a"), f.highest_exclusive("a"), f.highest("b")) == (6, 6, 0)


def test_fence_slot_marks():
    f = Fence()
    f.check("rl1:p0/2:10:sem")
    f.check("rl1:p1/2:12:sem")
    assert (f.highest_slot("sem", 0), f.highest_slot("sem", 1), f.highest("sem"), f.highest_exclusive("sem")) == (10, 12, 12, 0)
