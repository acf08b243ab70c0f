"""Live evaluation, offline: a tiny agent is traced, evaluated as its spans end, and scores land in a JSONL file.

Run: ``python examples/live_evaluation.py [output-dir]``. No network, no API keys.

- ``@evaltrace.agent(evaluators=[...])`` attaches an evaluator to the agent span: it judges the agent's subtree.
- ``EvaluatorSpec(..., trace_level=True)`` runs once per trace when it is complete: its root span has ended and
  no span of it arrived for ``trace_quiet_period_s`` (``force_flush()`` below does not wait for that).
- ``EvaluatorSpec(..., span_kinds={"tool"})`` runs on every tool span.
Scores go to ``scores.jsonl``; spans (enriched with ``gen_ai.evaluation.result`` events) to the local store.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import evaltrace
from evaltrace.evaluation import EvaluatorSpec, JsonlScoreSink, evaluator
from evaltrace.schema import Trace

WEATHER = {"paris": "sunny, 21 C", "oslo": "rain, 9 C"}


@evaltrace.tool
def get_weather(city: str) -> str:
    return WEATHER.get(city.lower(), "unknown")


@evaltrace.agent
def plan(question: str) -> str:
    return question.rsplit(" ", 1)[-1].strip("?")


@evaluator(name="answers_with_weather")
def answers_with_weather(trace: Trace) -> bool:
    answer = trace.output.final_answer or ""
    return "C" in answer and "unknown" not in answer


@evaluator(name="answer_length", threshold=0.3)
def answer_length(trace: Trace) -> float:
    return min(1.0, len(trace.output.final_answer or "") / 60)


@evaluator(name="tool_result_known")
def tool_result_known(trace: Trace) -> str:
    results = [str(result.content) for result in trace.tool_results] or [str(trace.output.final_answer)]
    return "fail" if any("unknown" in text for text in results) else "pass"


@evaltrace.agent(evaluators=[answers_with_weather])
def answer(question: str) -> str:
    city = plan(question)
    return f"The weather in {city} is {get_weather(city)}."


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="evaltrace-example-"))
    scores = out / "scores.jsonl"
    handle = evaltrace.configure(
        service_name="live-evaluation-example",
        local_store=out / "store",
        evaluators=[
            EvaluatorSpec(answer_length, trace_level=True),
            EvaluatorSpec(tool_result_known, span_kinds={"tool"}),
        ],
        sinks=[JsonlScoreSink(scores)],
        evaluation_options={"dead_letter_dir": out / "dead-letter", "sink_schedule_delay_s": 0.05},
        batch=False,
    )
    for question in ("What is the weather in Paris?", "What is the weather in Atlantis?"):
        print(f"{question} -> {answer(question)}")
    handle.force_flush()
    stats = handle.evaluation_processor.stats() if handle.evaluation_processor is not None else {}
    handle.shutdown()
    print(f"\nscores written to {scores}")
    for line in scores.read_text().splitlines():
        score = json.loads(line)
        value = score["string_value"] if score["data_type"] == "CATEGORICAL" else score["value"]
        print(f"  {score['name']:<22} {score['data_type']:<11} value={value!s:<6} span={score['observation_id']}")
    for name, per in sorted(stats.get("evaluators", {}).items()):
        print(f"  {name:<22} pass_rate={per['pass_rate']} p50={per['latency_ms_p50']} ms")
    print(f"spans (with evaluation events) in {out / 'store'}; see: evaltrace traces list --store {out / 'store'}")


if __name__ == "__main__":
    main()
