"""Which jars a session this process starts asks for: Ivy's packages, unless spark-defaults.conf loads Delta."""

from __future__ import annotations

from pathlib import Path

import pytest

from lakefeed.spark import default_jars, delta_package, session_jar_settings, spark_defaults_file


def _delta_jar(folder: Path) -> Path:
    group, artifact, release = delta_package().split(":")
    jar = folder / f"{group}_{artifact}-{release}.jar"  # Ivy's name for it, as make setup copies it
    jar.write_bytes(b"PK")
    return jar


@pytest.fixture(autouse=True)
def _no_jars_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LAKEFEED_JARS_DIR", raising=False)


def test_defaults_that_load_delta_leave_ivy_out(tmp_path: Path) -> None:
    jar = _delta_jar(tmp_path)
    defaults = tmp_path / "spark-defaults.conf"
    defaults.write_text(f"# Written by scripts/setup.sh\nspark.jars {tmp_path / 'other.jar'},file://{jar}\n")
    assert session_jar_settings(defaults) == {}


def test_without_delta_in_the_defaults_the_packages_are_asked_for(tmp_path: Path) -> None:
    defaults = tmp_path / "spark-defaults.conf"
    assert session_jar_settings(defaults) == {"spark.jars.packages": delta_package()}  # no file at all
    defaults.write_text(f"spark.jars {tmp_path / 'other.jar'}\nspark.jars.packages x:y:1\n")
    assert session_jar_settings(defaults) == {"spark.jars.packages": delta_package()}
    group, artifact, release = delta_package().split(":")
    defaults.write_text(f"spark.jars={tmp_path / f'{group}_{artifact}-{release}.jar'}\n")  # named, not there
    assert session_jar_settings(defaults) == {"spark.jars.packages": delta_package()}


def test_a_jars_folder_is_used_whatever_the_defaults_say(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    jar = _delta_jar(tmp_path)
    defaults = tmp_path / "spark-defaults.conf"
    defaults.write_text(f"spark.jars {jar}\n")
    monkeypatch.setenv("LAKEFEED_JARS_DIR", str(tmp_path))
    assert session_jar_settings(defaults) == {"spark.jars": str(jar)}


def test_properties_separators_and_the_last_entry(tmp_path: Path) -> None:
    defaults = tmp_path / "spark-defaults.conf"
    defaults.write_text("spark.jars /a.jar\n  spark.jars : /b.jar, /c.jar\n")
    assert default_jars(defaults) == [Path("/b.jar"), Path("/c.jar")]


def test_the_defaults_file_follows_spark_conf_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
    assert spark_defaults_file() == tmp_path / "spark-defaults.conf"
    monkeypatch.delenv("SPARK_CONF_DIR")
    monkeypatch.setenv("SPARK_HOME", str(tmp_path / "spark"))
    assert spark_defaults_file() == tmp_path / "spark" / "conf" / "spark-defaults.conf"
