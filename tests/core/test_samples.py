"""The samples shipped in the package (``revisions_assets.samples``) read as the engine
writes them today: each is rewritten with the session's Spark and both copies give the same
rows on every read the notebook guide shows, so a shipped sample cannot drift from the
engine unnoticed (``python -m revisions_assets.samples`` rewrites them)."""

from __future__ import annotations

import pytest

from revisions_assets import DatasetReader
from revisions_assets.core.errors import DatasetNotEmptyError, InvalidArgumentError
from revisions_assets.samples import SAMPLES, copy_sample
from revisions_assets.samples.writing import WRITERS

#: log columns that differ between two writes of the same revisions: when, the file names,
#: and the files' sizes (Parquet metadata carries the writer's version)
PER_WRITE = ("committed_at", "files", "bytes")
#: the guide's times: before and on each revision of ``features``, and between them
TIMES = ("2020-01-01T00:00Z", "2020-01-04T00:00Z", "2020-01-05T00:00Z", "2020-01-06T00:00Z")


def reads(reader: DatasetReader) -> dict:
    """Every read kind of the guide, on every table, sorted to compare."""
    got: dict = {"log": reader.inspect.log().drop(PER_WRITE).rows()}
    for table, info in reader.tables().items():
        ids = list(info.id_columns)
        got[table, "read"] = reader.read(table).sort(ids).rows()
        for at in TIMES:
            got[table, "as_of", at] = reader.read(table, as_of=at).sort(ids).rows()
            changes = reader.changes(table, since=at)
            got[table, "changes", at] = (changes.is_reset, changes.df.sort(ids).rows())
        got[table, "history"] = reader.history(table).sort([*ids, "valid_from"]).rows()
        got[table, "revisions"] = [r.name for r in reader.revisions(table)]
    return got


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_the_shipped_sample_reads_as_the_engine_writes_it(name, spark, tmp_path):
    fresh = WRITERS[name](tmp_path / "fresh", spark)
    shipped = copy_sample(name, tmp_path / "shipped")
    expected = reads(DatasetReader(fresh.root))
    assert reads(DatasetReader(shipped)) == expected
    assert len(expected) > 1 and all(expected.values())  # reads that found rows


def test_copy_sample_refuses_an_unknown_name_a_uri_and_a_target_with_files(tmp_path):
    with pytest.raises(InvalidArgumentError, match="no sample named 'drivers'.*'features'"):
        copy_sample("drivers", tmp_path / "drivers")
    assert not (tmp_path / "drivers").exists()
    with pytest.raises(InvalidArgumentError, match="'s3://bucket/f'.*a local folder"):
        copy_sample("features", "s3://bucket/f")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    for taken in (tmp_path / "mine", tmp_path / "mine" / "notes.txt"):
        with pytest.raises(DatasetNotEmptyError, match=f"{taken.name}: not an empty folder"):
            copy_sample("features", taken)
    assert [p.name for p in (tmp_path / "mine").iterdir()] == ["notes.txt"]
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me"
    (tmp_path / "empty").mkdir()
    assert copy_sample("features", tmp_path / "empty") == tmp_path / "empty"
    assert DatasetReader(tmp_path / "empty").read("featurizer_A").height == 7
