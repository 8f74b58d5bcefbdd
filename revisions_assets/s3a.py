"""Spark's ``s3a://`` connector: the jars pyspark lacks, and the settings to reach an endpoint.

The pyspark wheel bundles the Hadoop client but not ``hadoop-aws``. This module
resolves ``org.apache.hadoop:hadoop-aws`` at exactly the bundled Hadoop version
(read from ``pyspark/jars/hadoop-client-api-<version>.jar``), plus the runtime
dependencies its POM declares (the AWS SDK v2 ``bundle`` and the S3 analytics
accelerator, versions read from ``hadoop-project``'s POM), downloads them once
from Maven Central into the repo-local ``.setup/jars`` folder, and returns the
Spark settings that put them on the driver's and executors' classpath: by default
``extraClassPath`` (no copy of the 700 MB SDK bundle per application; right for
``local[*]`` and for a cluster whose hosts share the path), or ``spark.jars`` when
the driver must ship them to remote executors.

``python -m revisions_assets.s3a`` fetches the jars (the set-up calls it).

Credentials: when given explicitly they go into the Hadoop settings (Spark redacts
``*secret*``/``*token*``/``*access.key*`` values in its UI and logs); when not, the
connector's default provider chain reads the standard AWS environment variables,
instance profiles, etc. This module never prints or logs them.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import urllib.request
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from pathlib import Path
from typing import Literal
from urllib.parse import urlparse

import pyspark
from pyspark.sql import SparkSession

from .core.arguments import check_choice, check_text, check_type
from .core.errors import ArgumentTypeError, RevisionsError

MAVEN_CENTRAL = "https://repo1.maven.org/maven2"
_POM_NS = {"m": "http://maven.apache.org/POM/4.0.0"}
_SECRET_KEYS = re.compile(r"(?i)secret|token|access\.key|password")
_CLASSPATHS = ("spark.driver.extraClassPath", "spark.executor.extraClassPath")

#: how the jars reach the JVMs: the local classpath, shipped by the driver, or not at all
JarMode = Literal["classpath", "ship", "none"]


class ConnectorError(RevisionsError):
    """The s3a connector jars could not be found or downloaded."""


class SparkConf(dict):
    """A dict of Spark settings whose repr hides credential values."""

    def __repr__(self) -> str:
        shown = {k: ("*****" if _SECRET_KEYS.search(k) else v) for k, v in self.items()}
        return f"SparkConf({shown!r})"

    __str__ = __repr__


def default_cache_dir() -> Path:
    """``$REVISIONS_SETUP_DIR/jars``, else ``<repo>/.setup/jars`` in a source checkout,
    else ``~/.cache/revisions-assets/jars`` (an installed package)."""
    base = os.environ.get("REVISIONS_SETUP_DIR")
    if base:
        return Path(base) / "jars"
    repo = Path(__file__).resolve().parent.parent
    if (repo / "pyproject.toml").exists():
        return repo / ".setup" / "jars"
    return Path.home() / ".cache" / "revisions-assets" / "jars"


def hadoop_version() -> str:
    """The Hadoop version bundled with the installed pyspark (e.g. ``3.5.0``)."""
    jars = Path(pyspark.__file__).parent / "jars"
    for jar in sorted(jars.glob("hadoop-client-api-*.jar")):
        match = re.fullmatch(r"hadoop-client-api-(.+)\.jar", jar.name)
        if match:
            return match.group(1)
    raise ConnectorError(f"no hadoop-client-api-*.jar in {jars}: cannot tell pyspark's Hadoop")


def _url(group: str, artifact: str, version: str, ext: str) -> str:
    return (
        f"{MAVEN_CENTRAL}/{group.replace('.', '/')}/{artifact}/{version}/{artifact}-{version}.{ext}"
    )


def _fetch(url: str, target: Path) -> Path:
    """Download ``url`` to ``target`` atomically (a partial download never looks complete)."""
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=60) as response:
            shutil.copyfileobj(response, out, length=1 << 20)
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise ConnectorError(
            f"cannot download {url}: {exc}; check access to Maven Central or put the jar "
            f"at {target} yourself"
        ) from exc
    return target


def _pom_properties(pom: Path) -> dict[str, str]:
    props = ET.parse(pom).getroot().find("m:properties", _POM_NS)
    if props is None:
        return {}
    return {child.tag.split("}", 1)[1]: (child.text or "").strip() for child in props}


def _runtime_dependencies(aws_pom: Path, project_pom: Path) -> list[tuple[str, str, str]]:
    """(group, artifact, version) of hadoop-aws's compile-scope dependencies outside Hadoop.

    Those are what pyspark lacks (the AWS SDK bundle, the analytics accelerator); their
    versions live in the hadoop-project POM's dependencyManagement.
    """
    props = _pom_properties(project_pom)
    managed = {}
    for dep in (
        ET.parse(project_pom)
        .getroot()
        .iterfind("m:dependencyManagement/m:dependencies/m:dependency", _POM_NS)
    ):
        group, artifact = (
            dep.findtext("m:groupId", "", _POM_NS),
            dep.findtext("m:artifactId", "", _POM_NS),
        )
        version = dep.findtext("m:version", "", _POM_NS)
        version = re.sub(r"\$\{([^}]+)\}", lambda m: props.get(m.group(1), m.group(0)), version)
        managed[(group, artifact)] = version
    out = []
    for dep in ET.parse(aws_pom).getroot().iterfind("m:dependencies/m:dependency", _POM_NS):
        group = dep.findtext("m:groupId", "", _POM_NS)
        artifact = dep.findtext("m:artifactId", "", _POM_NS)
        scope = dep.findtext("m:scope", "compile", _POM_NS)
        if scope != "compile" or group.startswith("org.apache.hadoop"):
            continue
        version = managed.get((group, artifact), "")
        if not version or "${" in version:
            raise ConnectorError(f"cannot resolve the version of {group}:{artifact} for hadoop-aws")
        out.append((group, artifact, version))
    return out


def s3a_jars(cache_dir: str | os.PathLike[str] | None = None) -> list[Path]:
    """The hadoop-aws jar and its runtime dependencies, downloaded once into ``cache_dir``."""
    cache = Path(cache_dir) if cache_dir else default_cache_dir()
    version = hadoop_version()
    poms = cache / "poms"
    aws_pom = _fetch(
        _url("org.apache.hadoop", "hadoop-aws", version, "pom"), poms / f"hadoop-aws-{version}.pom"
    )
    project_pom = _fetch(
        _url("org.apache.hadoop", "hadoop-project", version, "pom"),
        poms / f"hadoop-project-{version}.pom",
    )
    coordinates = [("org.apache.hadoop", "hadoop-aws", version)]
    coordinates += _runtime_dependencies(aws_pom, project_pom)
    return [_fetch(_url(g, a, v, "jar"), cache / f"{a}-{v}.jar") for g, a, v in coordinates]


def s3a_conf(
    endpoint_url: str | None = None,
    region_name: str | None = None,
    aws_access_key_id: str | None = None,
    aws_secret_access_key: str | None = None,
    aws_session_token: str | None = None,
    *,
    path_style: bool | None = None,
    jars: JarMode = "classpath",
    cache_dir: str | os.PathLike[str] | None = None,
) -> SparkConf:
    """Spark settings for ``s3a://`` (pass to ``build_spark_session(conf=...)``).

    The option names are the S3 storage's (``S3Storage``), so one options dict configures
    both the log and Spark. Unset options fall back to ``AWS_ENDPOINT_URL_S3`` /
    ``AWS_ENDPOINT_URL`` and ``AWS_REGION`` / ``AWS_DEFAULT_REGION``; unset credentials
    leave the connector's default provider chain (environment, profile, instance role).
    Path-style access is on by default for a custom endpoint; an ``http://`` endpoint
    turns TLS off. ``jars``: ``"classpath"`` (this machine's cache, no copies),
    ``"ship"`` (``spark.jars``: remote executors), ``"none"`` (the cluster has them).
    """
    for what, value in (
        ("endpoint_url", endpoint_url),
        ("region_name", region_name),
        ("aws_access_key_id", aws_access_key_id),
        ("aws_secret_access_key", aws_secret_access_key),
        ("aws_session_token", aws_session_token),
    ):
        if value is not None and not isinstance(value, str):  # the value is never shown
            raise ArgumentTypeError(f"{what} must be a string, got {type(value).__name__}")
    if path_style is not None:
        check_type(path_style, bool, "path_style", "True, False or None")
    check_choice(jars, ("classpath", "ship", "none"), "jars")
    endpoint_url = (
        endpoint_url or os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    )
    region_name = (
        region_name or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    )
    hadoop = "spark.hadoop.fs.s3a."
    conf = SparkConf({f"{hadoop}impl": "org.apache.hadoop.fs.s3a.S3AFileSystem"})
    if jars == "ship":
        conf["spark.jars"] = ",".join(str(p) for p in s3a_jars(cache_dir))
    elif jars == "classpath":
        classpath = os.pathsep.join(str(p) for p in s3a_jars(cache_dir))
        conf.update(dict.fromkeys(_CLASSPATHS, classpath))
    if endpoint_url:
        conf[f"{hadoop}endpoint"] = endpoint_url
        conf[f"{hadoop}connection.ssl.enabled"] = str(
            urlparse(endpoint_url).scheme != "http"
        ).lower()
        conf[f"{hadoop}path.style.access"] = str(path_style is not False).lower()
    elif path_style is not None:
        conf[f"{hadoop}path.style.access"] = str(path_style).lower()
    if region_name:
        conf[f"{hadoop}endpoint.region"] = region_name
    if aws_access_key_id and aws_secret_access_key:
        conf[f"{hadoop}access.key"] = aws_access_key_id
        conf[f"{hadoop}secret.key"] = aws_secret_access_key
        provider = "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"
        if aws_session_token:
            conf[f"{hadoop}session.token"] = aws_session_token
            provider = "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"
        conf[f"{hadoop}aws.credentials.provider"] = provider
    return conf


def apply_s3a_conf(spark: SparkSession, conf: Mapping[str, str], bucket: str | None = None) -> None:
    """Set the ``fs.s3a.*`` settings of ``conf`` on a running (classic) session.

    With ``bucket``, they become per-bucket settings (``fs.s3a.bucket.<bucket>.*``), so one
    session can reach several endpoints. The jars cannot be added this way: they must be on
    the classpath when the JVM starts. Spark Connect clients cannot do this at all (the
    server's own configuration applies).
    """
    check_type(conf, Mapping, "conf", "a dict of Spark settings")
    check_text(bucket, "bucket", optional=True)
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    prefix = "spark.hadoop.fs.s3a."
    for key, value in conf.items():
        if not key.startswith(prefix):
            continue
        option = key[len(prefix) :]
        scoped = option != "impl" and bucket is not None
        hadoop.set(f"fs.s3a.bucket.{bucket}.{option}" if scoped else f"fs.s3a.{option}", value)


if __name__ == "__main__":
    for jar in s3a_jars():
        print(jar)
