"""What a failed Spark job's error says, told apart without Spark: the texts below are Spark
4's, as its jobs raised them on damaged files (cut to their telling lines and frames)."""

from __future__ import annotations

import pytest

from revisions_assets.core.spark_errors import damaged_file, spark_cause, storage_cause

FILE = "file:/data/ds/r0/t/part-00000-8a88.snappy.parquet"

#: Hadoop's local filesystem on a file rewritten without its .crc sidecar
CHECKSUM = f"""An error occurred while calling o58.parquet.
: org.apache.spark.SparkException: [FAILED_READ_FILE.CANNOT_READ_FILE_FOOTER] Encountered \
error while reading file {FILE}. Could not read footer. Please ensure that the file is in \
either ORC or Parquet format.
	at org.apache.spark.sql.errors.QueryExecutionErrors$.cannotReadFooterForFileError(\
QueryExecutionErrors.scala:1109)
	... 9 more
Caused by: org.apache.hadoop.fs.ChecksumException: Checksum error: {FILE} at 2048
	at org.apache.hadoop.fs.ChecksumFileSystem$ChecksumFSInputChecker.readChunk(\
ChecksumFileSystem.java:316)
"""
#: a row whose stored hash disagrees with its values (``hashing.checked_hash_sql``)
HASH = (
    "[USER_RAISED_EXCEPTION] revisions-assets: a stored row hash disagrees with its row, in "
    f"file {FILE} SQLSTATE: P0001"
)
#: a file Spark cannot decode, for another cause
UNREADABLE = f"""An error occurred while calling o707.count.
: org.apache.spark.SparkException: [FAILED_READ_FILE.NO_HINT] Encountered error while \
reading file {FILE}.  SQLSTATE: KD001
	at org.apache.spark.sql.errors.QueryExecutionErrors$.cannotReadFilesError(\
QueryExecutionErrors.scala:920)
Caused by: org.apache.parquet.io.ParquetDecodingException: Can not read value at 0 in block \
-1 in file {FILE}
	at org.apache.parquet.hadoop.InternalParquetRecordReader.nextKeyValue(\
InternalParquetRecordReader.java:264)
"""
#: a file gone after the gate passed it: a storage failure, not damage
MISSING = f"""An error occurred while calling o90.count.
: org.apache.spark.SparkException: [FAILED_READ_FILE.NO_HINT] Encountered error while \
reading file {FILE}.  SQLSTATE: KD001
Caused by: java.io.FileNotFoundException: File {FILE} does not exist
"""


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (CHECKSUM, "its bytes do not match the checksum of its .crc file"),
        (HASH, "a stored row hash disagrees with its row's values"),
        (
            UNREADABLE,
            "Spark cannot read it (org.apache.parquet.io.ParquetDecodingException: Can not "
            f"read value at 0 in block -1 in file {FILE})",
        ),
    ],
)
def test_a_damaged_file_is_named_with_what_is_wrong(text, problem):
    assert storage_cause(Exception(text)) is None
    assert damaged_file(Exception(text)) == (FILE, problem)


def test_a_missing_file_is_a_storage_failure():
    assert storage_cause(Exception(MISSING)).startswith("Caused by: java.io.FileNotFound")


def test_the_cause_of_an_unexpected_error_is_its_deepest_caused_by():
    assert spark_cause(Exception(CHECKSUM)) == (
        f"org.apache.hadoop.fs.ChecksumException: Checksum error: {FILE} at 2048"
    )
    # without a cause: the error's class and message, not Py4J's call
    first = "An error occurred while calling o117.parquet.\n: org.apache.spark.SparkException: "
    assert spark_cause(Exception(first + "[X] it broke\n\tat a.b(C.java:1)")) == (
        "org.apache.spark.SparkException: [X] it broke"
    )
    assert spark_cause(ValueError("plain")) == "plain"
    assert spark_cause(ValueError()) == "ValueError"
