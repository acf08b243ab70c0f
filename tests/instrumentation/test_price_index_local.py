"""The price index built at run time, for a genai-prices release evaltrace ships no index for.

Under any release but the one the shipped index (``_internal/price_index_data``) was built from, the first process
that loads genai-prices' table builds the same index from it and keeps it in the price cache folder
(``price-index-<RECORD digest>-f<format>/``); later processes read it without importing genai-prices. "Another release"
is made two ways: in this process, the shipped index is made to name another release than the installed one; in a
child process, a copy of the installed genai-prices whose record names release 9.9.9 comes first on ``sys.path``.
Prices are held to genai-prices' own lookup over its whole table, as ``test_price_index.py`` holds the shipped index.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import hashlib
import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from decimal import Decimal
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest

import evaltrace
from evaltrace import pricing
from evaltrace._internal import price_cache, price_index, price_index_build, price_index_local
from evaltrace._internal.price_index_build import PROVIDER_IDS

genai_prices = pytest.importorskip("genai_prices")
from genai_prices import Usage, data_snapshot  # noqa: E402
from price_table import genai_prices_answer, names  # noqa: E402

REPO_SRC = Path(__file__).resolve().parents[2] / "src"
INSTALLED = version("genai-prices")


@pytest.fixture
def cache_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A price cache folder, and a shipped index that names another release than the installed one."""
    shipped = tmp_path / "shipped"
    shipped.mkdir()
    for path in price_index.INDEX_DIR.glob("*.json"):
        document = json.loads(path.read_text(encoding="utf-8"))
        document["genai_prices"]["version"] = "0.0.1"
        (shipped / path.name).write_text(json.dumps(document), encoding="utf-8")
    monkeypatch.setattr(price_index, "INDEX_DIR", shipped)
    folder = tmp_path / "cache"
    monkeypatch.setenv(price_cache.PRICE_CACHE_ENV, f"{folder}/")
    _new_process()
    pricing.clear_model_prices()
    yield folder
    _new_process()
    pricing.clear_model_prices()


def _build_every_provider(now: dt.datetime) -> None:
    """Price one name at every provider id, as processes pricing under each would: each builds its own file."""
    for provider_id in PROVIDER_IDS:
        assert price_index.find(provider_id, "gpt-4o", now) == genai_prices_answer(provider_id, "gpt-4o", now)


def _new_process() -> None:
    """Forget what this process read and built, as a new process starts (the files stay)."""
    price_cache.reset()
    price_index.reset()


def _index(folder: Path) -> Path:
    """The folder of the installed release's index in the price cache folder ``folder``."""
    source = price_index.installed_source(INSTALLED)
    assert source is not None
    found = price_index_local.folder_for(source)
    assert found is not None
    return folder / found.name


def test_a_release_without_a_shipped_index_is_priced_by_the_index_built_here_as_by_genai_prices(
    cache_folder: Path,
) -> None:
    """The first lookup at a provider id builds and writes that provider's index; a new process then prices every
    name of every model at every provider id from those files alone, to the last bit as genai-prices does (or steps
    aside where it does)."""
    now = dt.datetime.now(tz=dt.UTC)
    assert price_index.find("openai", "gpt-4o", now) == genai_prices_answer("openai", "gpt-4o", now)
    assert [path.stem for path in _index(cache_folder).glob("*.json")] == ["openai"]
    assert list(_index(cache_folder).glob("*.tmp")) == []
    assert oct(_index(cache_folder).joinpath("openai.json").stat().st_mode & 0o777) == "0o600"
    shipped = json.loads((price_index.INDEX_DIR / "openai.json").read_text(encoding="utf-8"))
    built = json.loads((_index(cache_folder) / "openai.json").read_text(encoding="utf-8"))
    assert built["genai_prices"]["version"] == INSTALLED and built["models"] == shipped["models"]
    _build_every_provider(now)
    written = sorted(path.stem for path in _index(cache_folder).glob("*.json"))
    assert written == sorted(PROVIDER_IDS)
    for provider_id in PROVIDER_IDS:  # each file is the shipped one's table, provider by provider
        shipped = json.loads((price_index.INDEX_DIR / f"{provider_id}.json").read_text(encoding="utf-8"))
        built = json.loads((_index(cache_folder) / f"{provider_id}.json").read_text(encoding="utf-8"))
        assert built["models"] == shipped["models"], provider_id

    _new_process()
    all_names = names()
    served = stepped_aside = 0
    for provider_id in PROVIDER_IDS:
        for name in all_names:
            expected = genai_prices_answer(provider_id, name, now)
            got = price_index.find(provider_id, name, now)
            if expected is price_cache.MISS:
                assert got is price_cache.MISS, (provider_id, name)
                stepped_aside += 1
                continue
            assert got == expected, (provider_id, name)
            served += expected[0] is not None
    assert served > 5_000 and 0 < stepped_aside < served / 20, (served, stepped_aside)
    assert "built" not in price_index_local._state  # read from the files: nothing was built again


def test_costs_with_cached_reasoning_and_cache_write_tokens_are_genai_prices_own(cache_folder: Path) -> None:
    """For every model whose prices have cache-read, cache-write or tiered rates, a call with cached, reasoning and
    cache-write tokens (under and over the tier) costs from the built index what it costs from genai-prices' table,
    and, for flat prices of those kinds, what genai-prices' own ``calc_price`` totals."""
    now = dt.datetime.now(tz=dt.UTC)
    _build_every_provider(now)  # builds the index
    _new_process()
    snapshot = data_snapshot.get_snapshot()
    checked = totals = 0
    for provider_id in PROVIDER_IDS:
        provider = data_snapshot.find_provider_by_id(snapshot.providers, provider_id)
        assert provider is not None
        for model in provider.models:
            expected = genai_prices_answer(provider_id, model.id, now)
            if expected is price_cache.MISS or expected[0] is None:
                continue
            price = pricing.ModelPrice(*expected[0])
            if price.cached_input is None and price.cache_write is None and not price.tiers:
                continue
            for tokens in (10_000, 300_000):
                usage = {"input_tokens": tokens, "cached_tokens": 3_000, "cache_write_tokens": 1_000}
                usage |= {"output_tokens": 2_000, "reasoning_tokens": 500}
                pricing.clear_model_prices()  # no per-process memo: each cost is looked up afresh
                got = pricing.cost_of(model.id, provider=_provider_name(provider_id), **usage)
                assert got == pricing.cost_at(price, **usage), (provider_id, model.id)
                checked += 1
                if not price.tiers and _only_token_prices(model, now):
                    calc = model.get_prices(now).calc_price(
                        Usage(
                            input_tokens=tokens,
                            cache_read_tokens=3_000,
                            cache_write_tokens=1_000,
                            output_tokens=2_000,
                        )
                    )
                    assert got is not None
                    assert got.total_usd == pytest.approx(float(calc["total_price"]), rel=1e-12, abs=0), model.id
                    totals += 1
    assert checked > 200 and totals > 50, (checked, totals)
    assert "built" not in price_index_local._state


def _provider_name(provider_id: str) -> str:
    """A ``gen_ai.provider.name`` evaltrace prices under ``provider_id``."""
    return next(name for name, genai_id in pricing._GENAI_PRICES_PROVIDER.items() if genai_id == provider_id)


def _only_token_prices(model: Any, now: dt.datetime) -> bool:
    """Whether the model's price in force has only input, output and cache read/write rates (no audio, requests)."""
    prices = model.get_prices(now)
    keys = {key for key, value in vars(prices).items() if value is not None}
    return keys <= {"input_mtok", "output_mtok", "cache_read_mtok", "cache_write_mtok"} and all(
        isinstance(getattr(prices, key), Decimal) for key in keys
    )


@pytest.mark.parametrize("damage", ["truncated", "corrupt", "another table", "empty", "another evaltrace"])
def test_a_damaged_built_index_file_is_rebuilt_and_never_changes_a_price(cache_folder: Path, damage: str) -> None:
    """A file cut short (a full disk), garbage, or one naming another table is not read: the next process that
    needs it builds the index again and replaces the file; the price is genai-prices' throughout."""
    now = dt.datetime.now(tz=dt.UTC)
    price_index.find("openai", "gpt-4o", now)
    path = _index(cache_folder) / "openai.json"
    good = path.read_text(encoding="utf-8")
    if damage == "truncated":
        path.write_text(good[: len(good) // 2], encoding="utf-8")
    elif damage == "corrupt":
        path.write_bytes(b"\x00\xff" * 100)
    elif damage == "another table":
        document = json.loads(good)
        document["genai_prices"]["files"]["genai_prices/data.py"] = "sha256=AAAA,1593104"
        document["models"].insert(0, [["^", "gpt"], [["", [9.0, 9.0, None, [], None]]]])
        path.write_text(json.dumps(document), encoding="utf-8")
    elif damage == "another evaltrace":  # another evaltrace version may convert prices otherwise
        document = json.loads(good)
        assert document["evaltrace"] == evaltrace.__version__
        document["evaltrace"] = "0.0.0"
        document["models"].insert(0, [["^", "gpt"], [["", [9.0, 9.0, None, [], None]]]])
        path.write_text(json.dumps(document), encoding="utf-8")
    else:
        path.write_text("", encoding="utf-8")
    _new_process()
    for name in ("gpt-4o", "gpt-4o-mini-2024-07-18", "gpt-5", "no-such-model"):
        assert price_index.find("openai", name, now) == genai_prices_answer("openai", name, now), name
    assert path.read_text(encoding="utf-8") == good


def test_an_unwritable_cache_folder_builds_in_memory_and_never_raises(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cache_folder: Path
) -> None:
    """A folder that cannot be made (its parent is a file): the index built serves this process, from memory, each
    provider built once, when first priced; nothing is written and no error reaches the caller."""
    blocker = tmp_path / "a-file"
    blocker.write_text("", encoding="utf-8")
    monkeypatch.setenv(price_cache.PRICE_CACHE_ENV, f"{blocker}/cache/")
    _new_process()
    builds = _count_builds(monkeypatch)
    now = dt.datetime.now(tz=dt.UTC)
    assert pricing.price_of("gpt-4o", "openai") == pricing.ModelPrice(*genai_prices_answer("openai", "gpt-4o", now)[0])
    built = price_index_local._state["built"]
    assert isinstance(built, dict) and list(built) == ["openai"] and builds == [1]
    for provider_id, name in (("anthropic", "claude-sonnet-4-5"), ("google", "gemini-2.5-flash"), ("aws", "nope")):
        assert price_index.find(provider_id, name, now) == genai_prices_answer(provider_id, name, now)
    assert price_index_local._state["built"] is built and list(built) == ["openai", "anthropic", "google", "aws"]
    for provider_id in built:  # asked again (the index's own memo forgotten): from memory, not built again
        assert price_index_local.models(provider_id) is built[provider_id]
    assert builds == [4]  # one build per provider and process
    assert blocker.read_text(encoding="utf-8") == ""


def test_with_the_cache_off_nothing_is_built_or_kept(cache_folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``EVALTRACE_PRICE_CACHE=off``: no index is built (nowhere to keep it), the price is genai-prices' lookup."""
    monkeypatch.setenv(price_cache.PRICE_CACHE_ENV, "off")
    _new_process()
    now = dt.datetime.now(tz=dt.UTC)
    assert price_index.find("openai", "gpt-4o", now) is price_cache.MISS
    assert pricing.price_of("gpt-4o", "openai") == pricing.ModelPrice(*genai_prices_answer("openai", "gpt-4o", now)[0])
    assert "built" not in price_index_local._state
    assert not cache_folder.exists()


def test_a_release_the_builder_cannot_index_is_looked_up_in_genai_prices(
    cache_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A later release with a clause kind the index does not know, or whose lookup no longer agrees with the index's:
    nothing is written, and every price is genai-prices' own, as before the index existed."""
    now = dt.datetime.now(tz=dt.UTC)

    real_lookup = price_index.lookup

    def unknown_clause(clause: Any) -> list[Any]:
        raise ValueError(f"genai-prices clause {type(clause).__name__} is not known to evaltrace's price index")

    def later_match(models: list[Any], model: str, at: dt.datetime) -> Any:
        # a release whose lookup would now find another model first (say, a new rule ahead of the clauses)
        return real_lookup(list(reversed(models)), model, at)

    for breakage in ("unknown clause", "lookup differs"):
        with monkeypatch.context() as patch:
            if breakage == "unknown clause":
                patch.setattr(price_index_build, "_clause", unknown_clause)
            else:
                patch.setattr(price_index, "lookup", later_match)
            _new_process()
            # azure: the provider id whose fallback models (openai's) the reversed order puts ahead of its own
            assert price_index.find("azure", "gpt-4o", now) is price_cache.MISS
            assert price_index_local._state["built"] is None
            assert pricing.price_of("gpt-4o-mini", "openai") == pricing.ModelPrice(
                *genai_prices_answer("openai", "gpt-4o-mini", now)[0]
            )
            # no index; the marker that spares later processes the same failed build (test_a_failed_build_...)
            assert [path.name for path in _index(cache_folder).iterdir()] == [price_index_local.UNINDEXABLE]
            shutil.rmtree(_index(cache_folder))
            # openai under the same release: whatever its own index serves (its sample cannot see azure's divergence)
            # is genai-prices' own price, for every name of the table
            _new_process()
            served = 0
            for name in names():
                got = price_index.find("openai", name, now)
                if got is not price_cache.MISS:
                    served += 1
                    assert got == genai_prices_answer("openai", name, now), name
            assert served > 0 if breakage == "lookup differs" else served == 0
            shutil.rmtree(_index(cache_folder))


def _release_copy(site: Path, release: str) -> Path:
    """A copy of the installed genai-prices whose record (``.dist-info``, METADATA) names ``release``."""
    installed = Path(genai_prices.__file__).parent
    shutil.copytree(installed, site / "genai_prices", ignore=shutil.ignore_patterns("__pycache__"))
    record = site / f"genai_prices-{release}.dist-info"
    shutil.copytree(installed.parent / f"genai_prices-{INSTALLED}.dist-info", record)
    metadata = record / "METADATA"
    metadata.write_text(
        metadata.read_text(encoding="utf-8").replace(f"\nVersion: {INSTALLED}\n", f"\nVersion: {release}\n"),
        encoding="utf-8",
    )
    return site


def test_a_new_release_is_cold_once_then_its_later_processes_never_load_genai_prices(tmp_path: Path) -> None:
    """Release 9.9.9, which evaltrace ships no index for: its first process loads genai-prices and writes the index of
    the provider ids it priced, and only those; the next, asked there for models no earlier process priced (so the
    file of prices already looked up has none of them), reads one provider's file each and imports no genai-prices
    module and no builder; a process pricing under a provider id no earlier one priced builds that one's file alone.
    The prices are genai-prices' throughout."""
    site = _release_copy(tmp_path / "site", "9.9.9")
    cache = tmp_path / "cache"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO_SRC)])}
    env[price_cache.PRICE_CACHE_ENV] = f"{cache}/"
    code = (
        "import json, sys; from importlib.util import find_spec\n"
        "before = set(sys.modules)\n"
        "from evaltrace import pricing\n"
        "prices = [repr(pricing.price_of(m, p)) for m, p in json.loads(sys.argv[1])]\n"
        "loaded = sorted(set(sys.modules) - before)\n"
        "print(json.dumps([prices, loaded, find_spec('genai_prices').origin]))\n"
    )
    first_models = [["gpt-4o-mini-2024-07-18", "openai"], ["no-such-model", "openai"]]
    first_models += [["claude-3-5-haiku-latest", "anthropic"], ["gemini-2.0-flash", "gcp.gemini"]]
    later_models = [["gpt-5", "openai"], ["claude-sonnet-4-5", "anthropic"], ["gemini-2.5-flash", "gcp.gemini"]]
    new_provider_models = [["gpt-5", "openai"], ["anthropic.claude-3-haiku-20240307-v1:0", "aws.bedrock"]]

    def run(models: list[list[str]]) -> tuple[list[str], list[str]]:
        done = subprocess.run(
            [sys.executable, "-c", code, json.dumps(models)], env=env, capture_output=True, text=True, check=True
        )
        prices, loaded, imported_from = json.loads(done.stdout)
        assert imported_from.startswith(str(site))  # the copy, not the installed release
        return prices, loaded

    first_prices, first_loaded = run(first_models)
    assert "genai_prices.data" in first_loaded and "evaltrace._internal.price_index_build" in first_loaded
    [index] = cache.glob(f"price-index-*-f{price_index.FORMAT}")
    assert sorted(path.stem for path in index.glob("*.json")) == ["anthropic", "google", "openai"]

    later_prices, later_loaded = run(later_models)
    assert [m for m in later_loaded if m.startswith("genai_prices") or m.endswith("price_index_build")] == []
    assert {"evaltrace._internal.price_index", "evaltrace._internal.price_index_local"} <= set(later_loaded)

    new_prices, new_loaded = run(new_provider_models)
    assert "genai_prices.data" in new_loaded and "evaltrace._internal.price_index_build" in new_loaded
    assert sorted(path.stem for path in index.glob("*.json")) == ["anthropic", "aws", "google", "openai"]
    assert [m for m in run([["amazon.nova-pro-v1:0", "aws.bedrock"]])[1] if m.startswith("genai_prices")] == []

    now = dt.datetime.now(tz=dt.UTC)
    models = first_models + later_models + new_provider_models
    for (model, provider), got in zip(models, first_prices + later_prices + new_prices, strict=True):
        entry = genai_prices_answer(pricing._GENAI_PRICES_PROVIDER[provider], model, now)[0]
        assert got == repr(None if entry is None else pricing.ModelPrice(*entry)), model
    assert later_prices == run(later_models)[0]  # the same again, now from the file of prices already looked up


def _edit_release(site: Path, module: str, old: str, new: str, after: str = "") -> None:
    """Replace the first ``old`` (after ``after``) in ``genai_prices/<module>`` of the copy at ``site``, and its
    ``RECORD`` line with the edited file's sha256 and size, as a real release of that code would list it."""
    path = site / "genai_prices" / module
    text = path.read_text(encoding="utf-8")
    start = text.index(after) if after else 0
    at = text.index(old, start)
    path.write_text(text[:at] + new + text[at + len(old) :], encoding="utf-8")
    data = path.read_bytes()
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    [record] = site.glob("genai_prices-*.dist-info/RECORD")
    lines = [
        f"genai_prices/{module},sha256={digest},{len(data)}" if line.startswith(f"genai_prices/{module},") else line
        for line in record.read_text(encoding="utf-8").splitlines()
    ]
    record.write_text("\n".join(lines) + "\n", encoding="utf-8")


# Run in a child whose sys.path has the copy first: the index's answer (or MISS) and that genai-prices' own, for
# every name of its table at every provider id evaltrace prices; then whether an index was built (None: not built).
_COMPARE = """
import json, sys, datetime as dt
from evaltrace import pricing
from evaltrace._internal import price_cache, price_index, price_index_local
first = repr(pricing.price_of("gpt-4o", "openai"))
import price_table
now = dt.datetime.now(tz=dt.UTC)
differ = served = missed = 0
for provider_id in price_index_build_ids:
    for name in price_table.names():
        got = price_index.find(provider_id, name, now)
        expected = price_table.genai_prices_answer(provider_id, name, now)
        missed += got is price_cache.MISS
        if got is not price_cache.MISS:
            differ += got != expected
            served += 1
built = price_index_local._state.get("built", "not tried")
print(json.dumps([first, built is None, built == "not tried", differ, served, missed, __import__("genai_prices").__file__]))
"""


def _compare(site: Path, cache: Path) -> list[Any]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO_SRC), str(Path(__file__).parent)])}
    env[price_cache.PRICE_CACHE_ENV] = f"{cache}/"
    code = f"price_index_build_ids = {list(PROVIDER_IDS)!r}\n{_COMPARE}"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    result: list[Any] = json.loads(done.stdout)
    assert result[-1].startswith(str(site))  # the copy's genai-prices, not the installed one
    return result


def test_a_release_whose_lookup_code_changed_is_not_indexed_and_priced_as_that_genai_prices(tmp_path: Path) -> None:
    """Release 9.9.9 whose ``types.py`` lacks genai-prices 0.2.3's compact-date retry (``-20240718`` read as
    ``-2024-07-18``), a change the sample check of the index cannot see: its lookup code is not the code the matcher
    was verified against (``price_index.LOOKUP_CODE``), so no index is built, in the first process or a later one,
    and every name at every provider id is genai-prices' own lookup (the index answers MISS throughout)."""
    site = _release_copy(tmp_path / "site", "9.9.9")
    _edit_release(
        site,
        "types.py",
        "        if normalized != model_ref:\n            return self._match_model(normalized, all_providers=all_providers)\n",
        "        # (a release without the compact-date retry)\n",
    )
    cache = tmp_path / "cache"
    for _ in range(2):
        first, not_built, not_tried, differ, served, missed, _origin = _compare(site, cache)
        assert (not_built, not_tried, differ, served) == (True, False, 0, 0)
        assert missed > 100_000
    assert list(cache.glob("price-index-*")) == []  # nothing built, nothing kept
    # and that genai-prices really prices otherwise than the verified one: a compact-dated name it no longer dates
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO_SRC)]), price_cache.PRICE_CACHE_ENV: "off"}
    code = "from evaltrace import pricing; print(pricing.price_of('gpt-4o-mini-20240718', 'openai'))"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "None"
    assert pricing.price_of("gpt-4o-mini-20240718", "openai") is not None  # the verified lookup dates it


def test_a_release_with_only_its_table_changed_is_indexed_and_priced_as_that_genai_prices(tmp_path: Path) -> None:
    """Release 9.9.9 whose lookup code is 0.2.3's but whose table prices gpt-4o's input at 2.75 USD/Mtok: its index
    is built by the first process, and a later process prices every name at every provider id from the index as that
    genai-prices does (the edited price included), building nothing."""
    site = _release_copy(tmp_path / "site", "9.9.9")
    _edit_release(site, "data.py", "input_mtok=Decimal('2.5')", "input_mtok=Decimal('2.75')", after="name='gpt 4o',\n")
    cache = tmp_path / "cache"
    first, not_built, not_tried, differ, served, _missed, _origin = _compare(site, cache)
    assert "input=2.75" in first and not not_built and differ == 0
    [index] = cache.glob(f"price-index-*-f{price_index.FORMAT}")
    assert sorted(path.name for path in index.glob("*.json")) == sorted(f"{p}.json" for p in PROVIDER_IDS)
    first, not_built, not_tried, differ, served, missed, _origin = _compare(site, cache)
    assert "input=2.75" in first and not_tried  # a later process: read from the files, nothing built
    assert differ == 0 and served > 100_000 and missed < served / 20, (served, missed)


def test_a_provider_the_release_lacks_gets_an_empty_file_so_it_is_never_rebuilt(
    cache_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A provider id the release has no provider for: its file lists no models (no price, as genai-prices answers),
    so a later process meeting a model there reads it and builds nothing."""
    builds = _count_builds(monkeypatch)
    now = dt.datetime.now(tz=dt.UTC)
    assert price_index.find("no-such-provider", "gpt-4o", now) == (None, None)
    assert genai_prices_answer("no-such-provider", "gpt-4o", now) == (None, None)
    document = json.loads((_index(cache_folder) / "no-such-provider.json").read_text(encoding="utf-8"))
    assert document["models"] == [] and builds == [1]
    _new_process()
    assert price_index.find("no-such-provider", "gpt-4o", now) == (None, None)
    assert builds == [1] and "built" not in price_index_local._state


def test_the_first_process_builds_only_the_provider_ids_it_prices(
    cache_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Building every provider's index on the application thread made the first process under a new release cost
    2.50x its baseline against 1.99x for genai-prices alone (issue 28): a lookup builds the index of its provider id
    only, and the next provider id priced builds its own, each once."""
    calls: list[tuple[str, ...]] = []
    real = price_index_build.build

    def recorded(version: str, providers: Any = None, provider_ids: Any = PROVIDER_IDS) -> Any:
        calls.append(tuple(provider_ids))
        return real(version, providers, provider_ids)

    monkeypatch.setattr(price_index_build, "build", recorded)
    now = dt.datetime.now(tz=dt.UTC)
    for name in ("gpt-4o", "gpt-4o-mini", "gpt-5"):
        assert price_index.find("openai", name, now) == genai_prices_answer("openai", name, now)
    assert calls == [("openai",)]
    assert price_index.find("azure", "gpt-4o", now) == genai_prices_answer("azure", "gpt-4o", now)
    assert calls == [("openai",), ("azure",)]
    assert sorted(path.name for path in _index(cache_folder).iterdir()) == ["azure.json", "openai.json"]


def test_a_provider_that_fails_its_build_marks_the_release_and_no_file_of_it_is_read_again(
    cache_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """openai's index is built and kept; a later process whose azure build disagrees with genai-prices marks the
    release unindexable; from then on openai's file is not read either (a release any part of which failed is not
    indexed), nothing is built again, and every price is genai-prices' own."""
    now = dt.datetime.now(tz=dt.UTC)
    assert price_index.find("openai", "gpt-4o", now) == genai_prices_answer("openai", "gpt-4o", now)
    real_lookup = price_index.lookup

    def later_match(models: list[Any], model: str, at: dt.datetime) -> Any:
        return real_lookup(list(reversed(models)), model, at)

    with monkeypatch.context() as patch:
        patch.setattr(price_index, "lookup", later_match)
        _new_process()
        assert price_index.find("azure", "gpt-4o", now) is price_cache.MISS  # its sample disagrees
    assert sorted(path.name for path in _index(cache_folder).iterdir()) == [
        "openai.json",
        price_index_local.UNINDEXABLE,
    ]
    builds = _count_builds(monkeypatch)
    for _ in range(2):
        _new_process()
        assert price_index.find("openai", "gpt-4o", now) is price_cache.MISS
        assert price_index.find("google", "gemini-2.5-flash", now) is price_cache.MISS
        assert pricing.price_of("gpt-4o", "openai") == pricing.ModelPrice(
            *genai_prices_answer("openai", "gpt-4o", now)[0]
        )
        assert builds == [0] and price_index_local._state["built"] is None


def _count_builds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the calls of the real ``price_index_build.build`` (one element, updated in place)."""
    count = [0]
    real = price_index_build.build

    def counted(*args: Any, **kwargs: Any) -> Any:
        count[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(price_index_build, "build", counted)
    return count


def test_a_failed_build_is_not_tried_again_by_later_processes(
    cache_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A release the builder cannot index: the first process leaves ``unindexable.json`` (naming the release's
    RECORD and evaltrace's version), and later processes find it and do not load, build and check again; a marker
    for other files (another install) is not trusted, and the build is tried."""

    def unknown_clause(clause: Any) -> list[Any]:
        raise ValueError(f"genai-prices clause {type(clause).__name__} is not known to evaltrace's price index")

    monkeypatch.setattr(price_index_build, "_clause", unknown_clause)
    builds = _count_builds(monkeypatch)
    now = dt.datetime.now(tz=dt.UTC)
    assert price_index.find("openai", "gpt-4o", now) is price_cache.MISS
    marker = _index(cache_folder) / price_index_local.UNINDEXABLE
    document = json.loads(marker.read_text(encoding="utf-8"))
    assert document["genai_prices"] == price_index.installed_source(INSTALLED) and builds == [1]
    for _ in range(2):
        _new_process()
        assert price_index.find("anthropic", "claude-sonnet-4-5", now) is price_cache.MISS
        assert builds == [1] and price_index_local._state["built"] is None
    document["genai_prices"]["files"]["genai_prices/data.py"] = "sha256=AAAA,1593104"
    marker.write_text(json.dumps(document), encoding="utf-8")
    _new_process()
    assert price_index.find("openai", "gpt-4o", now) is price_cache.MISS
    assert builds == [2]


def test_two_installs_of_one_version_keep_their_indexes_apart(cache_folder: Path) -> None:
    """The folder is keyed by the install's RECORD and the index format, not the version: an install of the same
    version with another table gets another folder (neither overwrites the other's index)."""
    source = price_index.installed_source(INSTALLED)
    assert source is not None
    other = json.loads(json.dumps(source))
    other["files"]["genai_prices/data.py"] = "sha256=AAAA,1593104"
    here, there = price_index_local.folder_for(source), price_index_local.folder_for(other)
    assert here is not None and there is not None and here != there
    assert here.parent == there.parent == cache_folder and here.name.endswith(f"-f{price_index.FORMAT}")


def test_a_build_failing_in_another_thread_meanwhile_never_raises_out_of_pricing(
    cache_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Thread A is reading openai's file when thread B's azure build fails and marks the release unindexable: A's
    price is genai-prices' own, and nothing raises out of ``price_of`` (it once raised TypeError)."""
    now = dt.datetime.now(tz=dt.UTC)
    real_lookup, real_load = price_index.lookup, price_index.load

    def later_match(models: list[Any], model: str, at: dt.datetime) -> Any:  # azure's sample disagrees
        return real_lookup(list(reversed(models)), model, at)

    a_reading, b_done = threading.Event(), threading.Event()

    def reading_while_b_builds(path: Path, evaltrace: str | None = None) -> list[Any] | None:
        if evaltrace is not None and path.name == "openai.json":
            a_reading.set()
            assert b_done.wait(60)
        return real_load(path, evaltrace)

    monkeypatch.setattr(price_index, "lookup", later_match)
    monkeypatch.setattr(price_index, "load", reading_while_b_builds)
    assert price_index.find("google", "gemini-2.5-flash", now) != price_cache.MISS  # the release resolved, indexed
    results: list[Any] = []
    a = threading.Thread(target=lambda: results.append(_priced("gpt-4o", "openai")))
    a.start()
    assert a_reading.wait(60)
    assert price_index.find("azure", "gpt-4o", now) is price_cache.MISS  # thread B: its sample disagrees
    assert price_index_local._state["built"] is None
    b_done.set()
    a.join(60)
    assert results == [pricing.ModelPrice(*genai_prices_answer("openai", "gpt-4o", now)[0])]


def _priced(model: str, provider: str) -> Any:
    try:
        return pricing.price_of(model, provider)
    except Exception as error:  # the assertion shows what escaped
        return error


def test_no_fault_of_the_index_built_here_reaches_the_app(cache_folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever the run-time index raises (a bug, a filesystem oddity), the price is genai-prices' own."""
    now = dt.datetime.now(tz=dt.UTC)

    def faulty(provider_id: str) -> Any:
        raise RuntimeError("a fault of the run-time index")

    monkeypatch.setattr(price_index_local, "models", faulty)
    assert price_index.find("openai", "gpt-4o", now) is price_cache.MISS
    assert pricing.price_of("gpt-4o", "openai") == pricing.ModelPrice(*genai_prices_answer("openai", "gpt-4o", now)[0])


def test_prices_taken_from_an_index_later_marked_unindexable_are_not_served_again(
    cache_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Process 1 prices GPT-4O from openai's index (a divergence only azure's sample shows) into the file of prices
    already looked up; process 2 marks the release unindexable; process 3, and process 2 itself, get genai-prices'
    own price, not the one process 1 kept. Prices from the shipped index stay served (nothing withdraws them)."""
    now = dt.datetime.now(tz=dt.UTC)
    real_lookup = price_index.lookup

    def diverging(models: list[Any], model: str, at: dt.datetime) -> Any:
        got = real_lookup(list(reversed(models)), model, at)
        if model == "GPT-4O" and got is not price_cache.MISS and got[0]:  # a name openai's sample does not try
            return ((99.0, *got[0][1:]), got[1])
        return got

    truth = pricing.ModelPrice(*genai_prices_answer("openai", "GPT-4O", now)[0])
    with monkeypatch.context() as patch:
        patch.setattr(price_index, "lookup", diverging)
        assert pricing.price_of("GPT-4O", "openai") == dataclasses.replace(truth, input=99.0)  # process 1
        _new_process()
        pricing.clear_model_prices()
        assert price_cache.get("openai", "GPT-4O") == (99.0, *genai_prices_answer("openai", "GPT-4O", now)[0][1:])
        assert price_index.find("azure", "gpt-4o", now) is price_cache.MISS  # process 2: marks the release
        assert price_cache.get("openai", "GPT-4O") is price_cache.MISS
        assert pricing.price_of("GPT-4O", "openai") == truth
    for _ in range(2):  # process 3, then one that reads the entry process 3 wrote
        _new_process()
        pricing.clear_model_prices()
        assert pricing.price_of("GPT-4O", "openai") == truth
