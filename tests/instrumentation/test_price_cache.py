"""The file of prices already looked up: the same price as genai-prices' full table, and only when that is exact.

A later process prices its first call from this file instead of loading genai-prices' table of every provider
(issue 28's start-up row). These tests hold it to the full table for every model of every provider genai-prices
knows, and check that it is not used where it could differ: an expired dated price, an off-peak rate, a user's own
snapshot, another genai-prices install, an unusable file.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from evaltrace import pricing
from evaltrace._internal import price_cache, price_index

genai_prices = pytest.importorskip("genai_prices")
from genai_prices import data_snapshot, types  # noqa: E402

REPO_SRC = Path(__file__).resolve().parents[2] / "src"
# Whether a first process prices from evaltrace's shipped index (genai-prices' table for this exact release).
_INDEX_IN_USE = isinstance(price_index.find("openai", "gpt-4o", dt.datetime.now(tz=dt.UTC)), tuple)


@pytest.fixture
def cache_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    path = tmp_path / "cache" / "prices.json"
    monkeypatch.setenv(price_cache.PRICE_CACHE_ENV, str(path))
    price_cache.reset()
    pricing.clear_model_prices()
    yield path
    price_cache.reset()
    pricing.clear_model_prices()


def _full_table_price(model: str, provider_id: str) -> pricing.ModelPrice | None:
    """What ``_from_genai_prices`` returned before the cache: genai-prices' full table, converted."""
    try:
        _, info = data_snapshot.get_snapshot().find_provider_model(model, None, provider_id, None)
    except LookupError:
        return None
    return pricing._convert(info.get_prices(dt.datetime.now(tz=dt.UTC)))


def _names(clause: Any) -> Iterator[str]:
    """The exact names a model's match clause lists (``equals``), through its ``or``/``and`` clauses."""
    if isinstance(clause, types.ClauseEquals):
        yield clause.equals
    for inner in getattr(clause, "or_", None) or getattr(clause, "and_", None) or ():
        yield from _names(inner)


def _uncacheable(model: types.ModelInfo) -> bool:
    prices = model.prices if isinstance(model.prices, list) else []
    return any(not isinstance(p.constraint, types.StartDateConstraint | None) for p in prices)


def test_every_model_of_every_provider_is_priced_from_the_file_as_by_the_full_table(
    cache_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """For each model genai-prices knows (its id and the exact names it matches, at its own provider), the price
    looked up and written, then read back from the file alone, is the full table's, to the last bit."""
    monkeypatch.setattr(price_cache, "_MAX_ENTRIES", (10**6, 10**6))  # every model through the file, not a bounded few
    lookups = [
        (provider.id, name)
        for provider in data_snapshot.get_snapshot().providers
        for model in provider.models
        for name in dict.fromkeys([model.id, *list(_names(model.match))[:2]])
    ]
    assert len(lookups) > 2000
    uncacheable = {
        (provider.id, model.id)
        for provider in data_snapshot.get_snapshot().providers
        for model in provider.models
        if _uncacheable(model)
    }
    expected = {key: _full_table_price(key[1], key[0]) for key in lookups}
    for provider_id, name in lookups:
        assert pricing._from_genai_prices(name, provider_id) == expected[(provider_id, name)]

    price_cache.reset()  # a new process: only the file
    read_back = 0
    for provider_id, name in lookups:
        entry = price_cache.get(provider_id, name)
        if entry is price_cache.MISS:
            assert (provider_id, name) in uncacheable or (
                provider_id,
                data_snapshot.get_snapshot().find_provider_model(name, None, provider_id, None)[1].id,
            ) in uncacheable
            continue
        read_back += 1
        price = None if entry is None else pricing.ModelPrice(*entry)
        assert price == expected[(provider_id, name)], (provider_id, name)
        assert pricing._from_genai_prices(name, provider_id) == expected[(provider_id, name)]
    assert read_back > len(lookups) - 50  # only the few off-peak models are not in the file
    assert any(isinstance(p, pricing.ModelPrice) and p.tiers for p in expected.values())  # tiers went through


def test_a_new_process_prices_its_first_call_without_loading_genai_prices(cache_file: Path) -> None:
    """The start-up saving itself: the second process reads the price and never imports genai-prices."""
    code = (
        "import sys, json; from evaltrace import pricing\n"
        "p = pricing.price_of('gpt-4o-mini-2024-07-18', 'openai'); a = pricing.price_of('claude-sonnet-4-5', 'anthropic')\n"
        "print(json.dumps([repr(p), repr(a), 'genai_prices' in sys.modules]))"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO_SRC), price_cache.PRICE_CACHE_ENV: str(cache_file)}
    runs = [
        json.loads(
            subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
        )
        for _ in range(2)
    ]
    # The first process loads genai-prices only when evaltrace's shipped index is not for this release
    # (test_price_index.py); the second never does.
    assert runs[0][2] is not _INDEX_IN_USE and runs[1][2] is False
    assert set(json.loads(cache_file.read_text())["prices"]) == {"openai", "anthropic"}  # what the second one read
    assert runs[0][:2] == runs[1][:2]
    assert runs[1][0] == repr(_full_table_price("gpt-4o-mini-2024-07-18", "openai"))
    assert runs[1][1] == repr(_full_table_price("claude-sonnet-4-5", "anthropic"))
    assert oct(cache_file.stat().st_mode & 0o777) == "0o600"


def _model(prices: Any) -> types.ModelInfo:
    return types.ModelInfo(id="m", match=types.ClauseEquals(equals="m"), prices=prices)


def test_a_dated_price_is_kept_only_until_the_next_price_starts(cache_file: Path) -> None:
    now = dt.datetime(2026, 11, 29, 23, 30, tzinfo=dt.UTC)
    old, new = types.ModelPrice(input_mtok=Decimal(1)), types.ModelPrice(input_mtok=Decimal(2))
    dated = _model(
        [
            types.ConditionalPrice(prices=old),
            types.ConditionalPrice(constraint=types.StartDateConstraint(start_date=dt.date(2026, 11, 1)), prices=old),
            types.ConditionalPrice(constraint=types.StartDateConstraint(start_date=dt.date(2026, 12, 5)), prices=new),
            types.ConditionalPrice(constraint=types.StartDateConstraint(start_date=dt.date(2026, 11, 30)), prices=new),
        ]
    )
    assert price_cache.valid_until(dated, now) == dt.date(2026, 11, 30)
    # 23:30 at UTC-2 is already the 30th in UTC: genai-prices' rule, and the cache's.
    assert price_cache.valid_until(dated, now.astimezone(dt.timezone(dt.timedelta(hours=-2)))) == dt.date(2026, 11, 30)
    assert price_cache.valid_until(_model(old), now) is None
    assert price_cache.valid_until(_model([types.ConditionalPrice(prices=old)]), now) is None

    today = dt.datetime.now(tz=dt.UTC).date()
    price = (1.0, 2.0, None, (), None)
    price_cache.put("p", "expires-today", price, today)
    price_cache.put("p", "expires-tomorrow", price, today + dt.timedelta(days=1))
    price_cache.reset()
    assert price_cache.get("p", "expires-today") is price_cache.MISS
    assert price_cache.get("p", "expires-tomorrow") == price


def test_an_off_peak_price_is_never_written(cache_file: Path) -> None:
    off_peak = types.TimeOfDateConstraint(start_time=dt.time(16, 30), end_time=dt.time(0, 30))
    model = _model(
        [
            types.ConditionalPrice(prices=types.ModelPrice(input_mtok=Decimal(1))),
            types.ConditionalPrice(constraint=off_peak, prices=types.ModelPrice(input_mtok=Decimal(2))),
        ]
    )
    until = price_cache.valid_until(model, dt.datetime.now(tz=dt.UTC))
    price_cache.put("p", "off-peak", (1.0, 0.0, None, (), None), until)
    assert not cache_file.exists()
    # The real ones: deepseek's off-peak models are looked up in genai-prices in every process.
    expected = _full_table_price("deepseek-reasoner", "deepseek")
    assert expected is not None and pricing.price_of("deepseek-reasoner", "deepseek") == expected
    price_cache.reset()
    assert price_cache.get("deepseek", "deepseek-reasoner") is price_cache.MISS


def test_a_users_own_snapshot_is_used_and_the_file_left_alone(cache_file: Path) -> None:
    assert pricing.price_of("gpt-4o-mini", "openai") == _full_table_price("gpt-4o-mini", "openai")
    written = cache_file.read_text()
    custom = types.Provider(
        id="openai",
        name="OpenAI",
        api_pattern="x",
        models=[
            types.ModelInfo(
                id="gpt-4o-mini",
                match=types.ClauseEquals(equals="gpt-4o-mini"),
                prices=types.ModelPrice(input_mtok=Decimal(7), output_mtok=Decimal(9)),
            )
        ],
    )
    data_snapshot.set_custom_snapshot(data_snapshot.DataSnapshot(providers=[custom], from_auto_update=True))
    try:
        pricing.clear_model_prices()
        assert pricing.price_of("gpt-4o-mini", "openai") == pricing.ModelPrice(7.0, 9.0)
        assert pricing._from_genai_prices("gpt-4.1", "openai") is None  # only the snapshot's models
    finally:
        data_snapshot.set_custom_snapshot(None)
    assert cache_file.read_text() == written


@pytest.mark.parametrize("damage", ["corrupt", "bad entry", "other install", "a folder", "off"])
def test_an_unusable_file_never_changes_a_price(cache_file: Path, damage: str, monkeypatch: pytest.MonkeyPatch) -> None:
    expected = _full_table_price("gpt-4o", "openai")
    assert pricing.price_of("gpt-4o", "openai") == expected
    document = json.loads(cache_file.read_text())
    if damage == "corrupt":
        cache_file.write_text(cache_file.read_text()[:-7])
    elif damage == "bad entry":
        document["prices"]["openai"]["gpt-4o"] = ["", [1, "2", None, [], None]]
        cache_file.write_text(json.dumps(document))
    elif damage == "other install":
        document["prices"]["openai"]["gpt-4o"] = ["", [9.0, 9.0, None, [], None]]
        document["source"][1] += 1
        cache_file.write_text(json.dumps(document))
    elif damage == "a folder":
        cache_file.unlink()
        cache_file.mkdir()
    else:
        monkeypatch.setenv(price_cache.PRICE_CACHE_ENV, "off")
    price_cache.reset()
    pricing.clear_model_prices()
    assert pricing.price_of("gpt-4o", "openai") == expected
    price_cache.reset()
    if damage == "a folder":
        assert cache_file.is_dir()
    elif damage != "off":
        assert price_cache.get("openai", "gpt-4o") == (
            expected.input,
            expected.output,
            expected.cached_input,
            expected.tiers,
            expected.cache_write,
        )


def test_threads_writing_at_once_never_fail_and_leave_a_valid_file(cache_file: Path) -> None:
    """Exporter threads may price new models at the same moment: no error, and the file holds only true prices."""
    import threading

    errors: list[BaseException] = []

    def write(thread: int) -> None:
        try:
            for i in range(150):
                price_cache.put(f"p{thread}", f"m{i}", (float(thread), float(i), None, (), None), None)
        except BaseException as error:  # the assertion below reports it
            errors.append(error)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    price_cache.reset()
    rows = json.loads(cache_file.read_text())["prices"]
    assert rows  # the last writer's whole snapshot: a later process looks up what it lacks
    for provider, models in rows.items():
        for model in models:
            assert price_cache.get(provider, model) == (float(provider[1:]), float(model[1:]), None, (), None)
    assert not list(cache_file.parent.glob("*.tmp"))


def test_the_file_keeps_a_bounded_number_of_models_and_stops_rewriting_once_full(
    cache_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Model names come from responses (fine-tunes, deployments, one per run): thousands of distinct names keep at
    most a few hundred entries, in memory and in the file, and stop rewriting it once full (linear cost); a model
    past the bound is still priced exactly, from genai-prices."""
    writes: list[str] = []
    replace = os.replace

    def counting_replace(src: Any, dst: Any) -> None:
        writes.append(str(dst))
        replace(src, dst)

    monkeypatch.setattr(os, "replace", counting_replace)
    price = (1.0, 2.0, None, (), None)
    for i in range(3000):
        price_cache.put("openai", f"ft:gpt-4o-mini:acme:run-{i}", price, None)  # priced (e.g. a deployment name)
        price_cache.put("openai", f"unknown-{i}", None, None)  # genai-prices does not know it
    in_memory = sum(len(rows) for rows in price_cache._state["prices"].values())
    assert in_memory <= 1000 and len(writes) <= 1000
    document = json.loads(cache_file.read_text())["prices"]["openai"]
    kept = [name for name, row in document.items() if row[1] is not None]
    unknown = [name for name, row in document.items() if row[1] is None]
    assert 100 <= len(kept) <= 600 and 10 <= len(unknown) <= 100
    assert len(writes) == len(document)  # one write per kept entry, none once full

    price_cache.reset()  # a new process: the kept entries are read back, the others are misses
    assert price_cache.get("openai", kept[0]) == price and price_cache.get("openai", unknown[0]) is None
    assert price_cache.get("openai", "ft:gpt-4o-mini:acme:run-2999") is price_cache.MISS
    writes.clear()
    assert pricing.price_of("gpt-4o", "openai") == _full_table_price("gpt-4o", "openai")  # full: genai-prices
    assert pricing.price_of("gpt-4o", "openai") is not None and writes == []


def test_two_installs_sharing_the_cache_folder_each_keep_their_warm_start(tmp_path: Path) -> None:
    """Two environments with their own genai-prices install (another venv) and the same ``~/.cache``: each has its
    own file, so neither discards the other's prices; each loads genai-prices only on its first start."""
    import shutil

    alt = tmp_path / "alt"
    shutil.copytree(
        Path(genai_prices.__file__).parent, alt / "genai_prices", ignore=shutil.ignore_patterns("__pycache__")
    )
    code = (
        "import sys; from evaltrace import pricing\n"
        "import genai_prices as g; assert g.__file__.startswith(sys.argv[1]) or sys.argv[1] == '-'\n"
        "assert pricing.price_of('gpt-4o', 'openai') is not None\n"
        "print('genai_prices.data' in sys.modules)"
    )
    env = {k: v for k, v in os.environ.items() if k != price_cache.PRICE_CACHE_ENV}
    env["XDG_CACHE_HOME"] = str(tmp_path / "xdg")

    def start(install: str) -> bool:
        paths = ([str(alt)] if install == "alt" else []) + [str(REPO_SRC)]
        marker = str(alt) if install == "alt" else "-"
        result = subprocess.run(
            [sys.executable, "-c", code, marker],
            env={**env, "PYTHONPATH": os.pathsep.join(paths)},
            capture_output=True,
            text=True,
            check=True,
        )
        return bool(json.loads(result.stdout.strip().lower()))

    # The copy has no RECORD beside it, so evaltrace's shipped index is not used for it (test_price_index.py);
    # this install's first start needs genai-prices' table only when the index is not for its release.
    expected = [not _INDEX_IN_USE, True, False, False]
    assert [start(install) for install in ("main", "alt", "main", "alt")] == expected
    files = sorted((tmp_path / "xdg" / "evaltrace").glob("prices-*.json"))
    assert len(files) == 2
    assert all(oct(file.stat().st_mode & 0o777) == "0o600" for file in files)


def test_a_named_folder_holds_the_file_and_a_killed_writers_temporary_file_is_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "prices-folder"
    folder.mkdir()
    monkeypatch.setenv(price_cache.PRICE_CACHE_ENV, str(folder))
    price_cache.reset()
    pricing.clear_model_prices()
    try:
        assert pricing.price_of("gpt-4o", "openai") == _full_table_price("gpt-4o", "openai")
        (file,) = folder.glob("prices-*.json")
        stale, fresh = folder / f"{file.name}.999.1.tmp", folder / f"{file.name}.998.1.tmp"
        stale.write_text("{")
        fresh.write_text("{")  # a live writer's, mid-write: left alone
        os.utime(stale, (0, 0))
        price_cache.reset()  # a new process, which writes a new model
        assert pricing.price_of("gpt-4o-mini", "openai") == _full_table_price("gpt-4o-mini", "openai")
        assert not stale.exists() and fresh.exists()
        price_cache.reset()
        assert price_cache.get("openai", "gpt-4o-mini") is not price_cache.MISS
    finally:
        price_cache.reset()
        pricing.clear_model_prices()


@pytest.mark.parametrize("setting", ["~nosuchuser-evaltrace/x/", "~nosuchuser-evaltrace/prices.json"])
def test_a_setting_naming_an_unknown_users_home_is_no_cache_and_never_raises(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, setting: str
) -> None:
    """``$EVALTRACE_PRICE_CACHE`` whose ``~user`` has no home (``expanduser`` raises RuntimeError): no cache folder,
    no file, no index built at run time; the price is looked up as without the cache, and nothing is raised."""
    monkeypatch.setenv(price_cache.PRICE_CACHE_ENV, setting)
    monkeypatch.chdir(tmp_path)
    price_cache.reset()
    pricing.clear_model_prices()
    try:
        with pytest.raises(RuntimeError):
            Path(setting).expanduser()  # what the setting did before: a bare error from the first priced call
        assert price_cache.folder() is None
        assert price_cache.get("openai", "gpt-4o") is price_cache.MISS
        assert pricing.price_of("gpt-4o", "openai") == _full_table_price("gpt-4o", "openai")
        price_cache.put("openai", "gpt-4o", None, None)
        assert list(tmp_path.iterdir()) == []
    finally:
        price_cache.reset()
        pricing.clear_model_prices()


def test_an_entry_is_withdrawn_once_the_file_it_names_exists(cache_file: Path) -> None:
    """An entry written with ``withdrawn_by`` (a price from the index built at run time) is served until the marker it
    names appears beside the file, then never by a process started after it, nor by the process that wrote it
    (``withdraw``); a marker naming something outside the folder is not trusted. Entries without one stay served."""
    price = (2.5, 10.0, 1.25, (), None)
    price_cache.put("openai", "gpt-4o", price, None, "price-index-x-f1/unindexable.json")
    price_cache.put("openai", "gpt-4o-mini", price, None)
    price_cache.put("openai", "outside", price, None, "../unindexable.json")
    price_cache.reset()  # a later process
    assert price_cache.get("openai", "gpt-4o") == price
    assert price_cache.get("openai", "gpt-4o-mini") == price
    assert price_cache.get("openai", "outside") is price_cache.MISS
    marker = cache_file.parent / "price-index-x-f1" / "unindexable.json"
    marker.parent.mkdir()
    marker.write_text("{}", encoding="utf-8")
    assert price_cache.get("openai", "gpt-4o") == price  # a running process keeps what it checked ...
    price_cache.withdraw()  # ... unless it wrote the marker itself
    assert price_cache.get("openai", "gpt-4o") is price_cache.MISS
    price_cache.reset()
    assert price_cache.get("openai", "gpt-4o") is price_cache.MISS
    assert price_cache.get("openai", "gpt-4o-mini") == price
