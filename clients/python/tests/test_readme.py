"""Runs the README's examples marked <!-- ci: run --> against the cluster in
RAFTLOCK_ENDPOINTS (go run ./cmd/raftlock-conformance -exec ... sets it);
skipped without one. The dev cluster's addresses in the examples are
replaced with the cluster's."""

import os
import re

import pytest

README = os.path.join(os.path.dirname(__file__), "..", "README.md")
DEV = '["127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003"]'


def examples():
    with open(README, encoding="utf-8") as f:
        text = f.read()
    return re.findall(r"<!-- ci: run -->\n```python\n(.*?)```", text, re.S)


def test_the_readme_has_examples_to_run():
    assert len(examples()) >= 3


@pytest.mark.parametrize("code", examples(), ids=lambda c: c.splitlines()[-1][:40])
def test_readme_example_runs(code):
    eps = os.environ.get("RAFTLOCK_ENDPOINTS")
    if not eps:
        pytest.skip("RAFTLOCK_ENDPOINTS is not set (run it under raftlock-conformance -exec)")
    assert DEV in code or "Client(" not in code
    code = code.replace(DEV, repr(eps.split(",")))
    exec(compile(code, "README.md", "exec"), {"__name__": "__readme__"})
