"""Unvalidated construction of our own values (the live pipeline's Trace and results) equals model_construct's."""

from __future__ import annotations

import datetime as dt
import os
import uuid

import pytest

from evaltrace._internal.ids import evaluation_id
from evaltrace._internal.trusted_models import trusted
from evaltrace.schema import EvaluationResult, Trace, TraceMetrics, TraceOutput

NOW = dt.datetime(2026, 1, 2, tzinfo=dt.UTC)


def test_trusted_equals_model_construct_fields_set_and_order_included() -> None:
    values = {"evaluator": "x", "passed": True, "started_at": NOW, "finished_at": NOW, "evaluation_id": "e"}
    built, reference = trusted(EvaluationResult, None, **values), EvaluationResult.model_construct(None, **values)
    assert built == reference
    assert list(built.__dict__) == list(reference.__dict__)
    assert built.model_fields_set == reference.model_fields_set == set(values)
    assert built.model_dump() == reference.model_dump()
    trace_values = {"run_id": "r", "case_id": "c", "variant_name": "v", "started_at": NOW, "finished_at": NOW}
    trace = trusted(Trace, {"run_id"}, **trace_values, output=trusted(TraceOutput, None, final_answer="Paris"))
    assert trace == Trace.model_construct({"run_id"}, **trace_values, output=TraceOutput(final_answer="Paris"))
    assert trace.model_fields_set == {"run_id"}


def test_defaults_are_fresh_per_instance_and_required_fields_are_checked() -> None:
    first, second = trusted(TraceMetrics), trusted(TraceMetrics)
    first.custom["k"] = 1
    assert second.custom == {}  # a default factory's value is never shared
    with pytest.raises(TypeError, match="required field 'evaluator'"):
        trusted(EvaluationResult, None, passed=True)


def test_evaluation_ids_are_version_4_uuids_and_differ_in_a_forked_child() -> None:
    ids = {evaluation_id() for _ in range(1000)}
    assert len(ids) == 1000
    parsed = uuid.UUID(next(iter(ids)).removeprefix("eval_"))
    assert (parsed.version, parsed.variant) == (4, uuid.RFC_4122)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next id must not be the parent's next id
        os.write(write, evaluation_id().encode())
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    child = os.read(read, 100).decode()
    os.close(read)
    assert child.startswith("eval_") and child != evaluation_id()


def test_evaluation_ids_made_in_batches_are_each_the_text_of_a_random_version_4_uuid_across_threads() -> None:
    """Ids are made a batch at a time: every one is uuid4's exact text, none repeats across batches and threads."""
    import threading

    per_thread: list[list[str]] = [[] for _ in range(4)]

    def take(into: list[str]) -> None:
        into.extend(evaluation_id() for _ in range(2_000))  # several batches each, threads racing at the refill

    threads = [threading.Thread(target=take, args=(ids,)) for ids in per_thread]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    ids = [i for ids in per_thread for i in ids]
    assert len(set(ids)) == len(ids) == 8_000
    for text in ids:
        parsed = uuid.UUID(text.removeprefix("eval_"))
        assert text == f"eval_{parsed}"  # lowercase, 8-4-4-4-12, nothing else
        assert (parsed.version, parsed.variant) == (4, uuid.RFC_4122)
    # The random digits are all used (a digit stuck at one value would show here), the variant's four too.
    assert {text[5 + 19] for text in ids} == set("89ab")
    for at in (0, 9, 15, 20, 35):
        assert {text[5 + at] for text in ids} == set("0123456789abcdef")
