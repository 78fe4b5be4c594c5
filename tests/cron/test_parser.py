"""The guides' cron syntax, exactly: what is accepted, what is refused, and
when a schedule fires next, DST transitions of America/Chicago included."""

from __future__ import annotations

import itertools
import logging
from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from wurk_cron import Parser
from wurk_cron.zones import ZoneResolver, zone_name

CHICAGO = ZoneInfo("America/Chicago")


def fires(expression: str, start: datetime, count: int, tz=None) -> list[datetime]:
    """The next ``count`` fires after ``start``, as wall-clock datetimes of ``tz``."""
    parser, moment, found = Parser(expression), start.timestamp(), []
    zone = tz or UTC
    for _ in range(count):
        moment = parser.next_fire_at(moment, tz)
        if moment is None:
            break
        found.append(datetime.fromtimestamp(moment, zone))
    return found


def hm(moments: list[datetime]) -> list[str]:
    return [m.strftime("%m-%d %H:%M %Z") for m in moments]


@pytest.mark.parametrize(
    ("alias", "fields"),
    [
        ("@hourly", "0 * * * *"),
        ("@daily", "0 0 * * *"),
        ("@midnight", "0 0 * * *"),
        ("@weekly", "0 0 * * 0"),
        ("@monthly", "0 0 1 * *"),
        ("@yearly", "0 0 1 1 *"),
        ("@annually", "0 0 1 1 *"),
    ],
)
def test_aliases_expand_to_their_five_fields(alias, fields):
    assert Parser(alias).schedule == fields
    start = datetime(2025, 5, 17, 13, 7, tzinfo=UTC)
    assert fires(alias, start, 3) == fires(fields, start, 3)


def test_lists_ranges_and_steps():
    parser = Parser("1,2,10-12 */6 1-31/10 */5 1-5")
    assert parser.minutes == {1, 2, 10, 11, 12}
    assert parser.hours == {0, 6, 12, 18}
    assert parser.days == {1, 11, 21, 31}
    assert parser.months == {1, 6, 11}
    assert parser.weekdays == {1, 2, 3, 4, 5}


def test_a_bare_step_base_runs_to_the_field_maximum_as_in_vixie_cron():
    assert Parser("5/15 * * * *").minutes == {5, 20, 35, 50}
    assert hm(fires("5/15 * * * *", datetime(2025, 1, 1, tzinfo=UTC), 5)) == [
        "01-01 00:05 UTC",
        "01-01 00:20 UTC",
        "01-01 00:35 UTC",
        "01-01 00:50 UTC",
        "01-01 01:05 UTC",
    ]


def test_day_of_week_seven_is_sunday():
    assert Parser("0 0 * * 7").weekdays == {0}
    assert Parser("0 0 * * 5-7").weekdays == {0, 5, 6}
    sundays = fires("0 0 * * 7", datetime(2025, 6, 1, 12, tzinfo=UTC), 3)
    assert [d.isoweekday() for d in sundays] == [7, 7, 7]


def test_day_of_month_and_day_of_week_are_ored_when_both_are_restricted():
    found = fires("0 0 13 * 5", datetime(2025, 6, 1, tzinfo=UTC), 5)
    assert [d.strftime("%d %a") for d in found] == ["06 Fri", "13 Fri", "20 Fri", "27 Fri", "04 Fri"]
    found = fires("0 0 13 * 5", datetime(2025, 8, 1, tzinfo=UTC), 4)
    assert [d.strftime("%d %a") for d in found] == ["08 Fri", "13 Wed", "15 Fri", "22 Fri"]


def test_only_the_restricted_one_of_the_day_fields_must_match():
    assert {d.day for d in fires("0 0 13 * *", datetime(2025, 1, 1, tzinfo=UTC), 4)} == {13}
    assert {d.isoweekday() for d in fires("0 0 * * 5", datetime(2025, 1, 1, tzinfo=UTC), 4)} == {5}
    # A starred step is a wildcard for the OR rule (Vixie cron): both must match.
    found = fires("0 0 */2 * 1", datetime(2025, 9, 1, tzinfo=UTC), 3)
    assert all(d.isoweekday() == 1 and d.day % 2 == 1 for d in found)


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("* * * * * *", "got 6 (there is no seconds field"),
        ("* * * *", "expected 5 fields"),
        ("0 0 * * MON", "day-of-week field 'MON'"),
        ("0 0 1 JAN *", "month field 'JAN'"),
        ("0 0 L * *", "day-of-month field 'L'"),
        ("0 0 15W * *", "day-of-month field '15W'"),
        ("0 0 * * 5#2", "day-of-week field '5#2'"),
        ("0 0 ? * *", "day-of-month field '?'"),
        ("@reboot", "unknown alias '@reboot'"),
        ("@every 5m", "unknown alias"),
        ("5-1 * * * *", "minute range 5-1 runs backwards"),
        ("*/0 * * * *", "minute step must be >= 1"),
        ("60 * * * *", "minute value 60 is outside 0-59"),
        ("0 24 * * *", "hour value 24 is outside 0-23"),
        ("0 0 0 * *", "day-of-month value 0 is outside 1-31"),
        ("0 0 * 13 *", "month value 13 is outside 1-12"),
        ("0 0 * * 8", "day-of-week value 8 is outside 0-7"),
        ("1,,2 * * * *", "minute field '1,,2'"),
        ("-1 * * * *", "minute field '-1'"),
        ("", "non-empty string"),
    ],
)
def test_everything_beyond_the_guides_syntax_is_refused_by_name(expression, message):
    with pytest.raises(ValueError, match=r"cron schedule|non-empty") as raised:
        Parser(expression)
    assert message in str(raised.value)
    if expression:
        assert repr(expression) in str(raised.value)


def test_a_schedule_that_never_matches_has_no_next_fire():
    assert Parser("0 0 30 2 *").next_fire_at(datetime(2025, 1, 1, tzinfo=UTC).timestamp()) is None
    assert Parser("0 0 31 4,6,9,11 *").next_fire_at(0) is None
    # A leap day is within the lookahead.
    leap = fires("0 0 29 2 *", datetime(2025, 3, 1, tzinfo=UTC), 1)
    assert leap == [datetime(2028, 2, 29, tzinfo=UTC)]


def test_the_next_fire_is_strictly_after_the_given_time():
    on_the_minute = datetime(2025, 1, 1, 10, 5, tzinfo=UTC).timestamp()
    assert Parser("5 * * * *").next_fire_at(on_the_minute) == on_the_minute + 3600
    assert Parser("* * * * *").next_fire_at(on_the_minute + 59.9) == on_the_minute + 60


# -- DST in America/Chicago ------------------------------------------------------------


def test_spring_forward_the_skipped_hour_never_fires():
    # 2025-03-09 02:00 CST jumps to 03:00 CDT.
    found = fires("0 2 * * *", datetime(2025, 3, 8, 12, tzinfo=CHICAGO), 3, CHICAGO)
    assert hm(found) == ["03-10 02:00 CDT", "03-11 02:00 CDT", "03-12 02:00 CDT"]
    found = fires("30 * * * *", datetime(2025, 3, 9, 0, tzinfo=CHICAGO), 3, CHICAGO)
    assert hm(found) == ["03-09 00:30 CST", "03-09 01:30 CST", "03-09 03:30 CDT"]


def test_fall_back_a_fixed_hour_schedule_fires_once():
    # 2025-11-02 02:00 CDT falls back to 01:00 CST: 01:xx happens twice.
    found = fires("30 1 * * *", datetime(2025, 11, 1, 12, tzinfo=CHICAGO), 3, CHICAGO)
    assert hm(found) == ["11-02 01:30 CDT", "11-03 01:30 CST", "11-04 01:30 CST"]
    found = fires("0,30 1 * * *", datetime(2025, 11, 2, 0, tzinfo=CHICAGO), 3, CHICAGO)
    assert hm(found) == ["11-02 01:00 CDT", "11-02 01:30 CDT", "11-03 01:00 CST"]


def test_fall_back_a_wildcard_hour_schedule_keeps_both_hours():
    found = fires("30 * * * *", datetime(2025, 11, 2, 0, tzinfo=CHICAGO), 4, CHICAGO)
    assert hm(found) == ["11-02 00:30 CDT", "11-02 01:30 CDT", "11-02 01:30 CST", "11-02 02:30 CST"]
    gaps = {int(b.timestamp() - a.timestamp()) for a, b in itertools.pairwise(found)}
    assert gaps == {3600}


def test_a_daily_schedule_in_a_zone_fires_at_local_midnight_across_both_transitions():
    found = fires("@daily", datetime(2025, 3, 8, 12, tzinfo=CHICAGO), 2, CHICAGO)
    assert hm(found) == ["03-09 00:00 CST", "03-10 00:00 CDT"]
    found = fires("@daily", datetime(2025, 11, 1, 12, tzinfo=CHICAGO), 2, CHICAGO)
    assert hm(found) == ["11-02 00:00 CDT", "11-03 00:00 CST"]


# -- zones ------------------------------------------------------------------------------


def test_zones_are_stored_by_name():
    assert zone_name(None) == ""
    assert zone_name("Asia/Tokyo") == "Asia/Tokyo"
    assert zone_name(ZoneInfo("Europe/Berlin")) == "Europe/Berlin"
    assert zone_name(UTC) == "UTC"
    assert zone_name(timezone(timedelta(hours=5))) == "Etc/GMT-5"
    assert zone_name(timezone(timedelta(hours=-3))) == "Etc/GMT+3"
    assert ZoneInfo(zone_name(timezone(timedelta(hours=5)))).utcoffset(datetime(2025, 1, 1)) == timedelta(hours=5)
    with pytest.raises(ValueError, match="whole-hour"):
        zone_name(timezone(timedelta(hours=5, minutes=30)))
    with pytest.raises(ValueError, match="tz must be"):
        zone_name(42)  # type: ignore[arg-type]


def test_an_unknown_zone_warns_once_and_runs_as_utc(caplog, monkeypatch):
    monkeypatch.setenv("TZ", "Pacific/Auckland")
    logger = logging.getLogger("cron-zones-test")
    resolver = ZoneResolver(logger)
    with caplog.at_level(logging.WARNING, logger="cron-zones-test"):
        assert resolver.zone("Mars/Olympus_Mons") is UTC
        assert resolver.zone("Mars/Olympus_Mons") is UTC
    assert [r.getMessage() for r in caplog.records if "Mars/Olympus_Mons" in r.getMessage()] == [
        "[cron] unknown time zone 'Mars/Olympus_Mons': its loops run as UTC"
    ]
    assert resolver.zone("America/Chicago") == CHICAGO
    assert resolver.zone(None) is UTC
    import os

    assert os.environ["TZ"] == "Pacific/Auckland"  # never touched
