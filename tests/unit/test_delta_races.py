"""Which Delta errors a tagged write retries as a creation race (two writers creating one table)."""

from lakefeed.delta import TableCreationRace, _creation_race


def test_creation_races_are_retried_and_a_missing_table_elsewhere_is_not():
    assert _creation_race(TableCreationRace("/lake/events: created by another writer at the same time"))
    assert _creation_race(RuntimeError("[DELTA_TABLE_ALREADY_EXISTS] Table `x` already exists."))
    assert _creation_race(RuntimeError("[DELTA_CREATE_TABLE_WITH_NON_EMPTY_LOCATION] Cannot create table"))
    # Outside createIfNotExists, a table that is not there is an error, not a race.
    assert not _creation_race(RuntimeError("[DELTA_TABLE_NOT_FOUND] Delta table `/lake/events` doesn't exist."))
    assert not _creation_race(ValueError("bad input"))
