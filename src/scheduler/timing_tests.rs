use chrono::{DateTime, TimeZone, Utc};

use super::*;
use crate::scheduler::store::tests::schedule;

fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(y, mo, d, h, mi, 0).unwrap()
}

fn in_zone(when: When, timezone: &str, created_at: DateTime<Utc>) -> Schedule {
    let mut schedule = schedule("ann", when, None);
    schedule.timezone = timezone.into();
    schedule.created_at = created_at;
    schedule
}

fn invalid(result: Result<(), SchedulerError>) -> String {
    match result {
        Err(SchedulerError::Invalid(message)) => message,
        other => panic!("expected Invalid, got {other:?}"),
    }
}

#[test]
fn berlin_0230_daily_fires_once_on_both_change_days() {
    let daily = in_zone(
        When::Cron("30 2 * * *".into()),
        "Europe/Berlin",
        utc(2026, 3, 1, 0, 0),
    );
    // Spring: 02:00 CET jumps to 03:00 CEST, so 02:30 does not exist; it fires at 03:00 CEST.
    let spring = upcoming(&daily, utc(2026, 3, 28, 12, 0), 2);
    assert_eq!(spring, [utc(2026, 3, 29, 1, 0), utc(2026, 3, 30, 0, 30)]);
    assert_eq!(
        local_label("Europe/Berlin", spring[0]),
        "Sun 2026-03-29 03:00 CEST"
    );
    // Autumn: 03:00 CEST falls back to 02:00 CET, so 02:30 happens twice; it fires once, at
    // the first (CEST), and next at 02:30 CET the day after.
    let autumn = upcoming(&daily, utc(2026, 10, 24, 12, 0), 2);
    assert_eq!(autumn, [utc(2026, 10, 25, 0, 30), utc(2026, 10, 26, 1, 30)]);
    assert_eq!(
        local_label("Europe/Berlin", autumn[0]),
        "Sun 2026-10-25 02:30 CEST"
    );
    assert_eq!(
        local_label("Europe/Berlin", autumn[1]),
        "Mon 2026-10-26 02:30 CET"
    );
}

#[test]
fn monday_at_nine_from_a_saturday_in_the_schedules_zone() {
    let saturday = utc(2026, 12, 5, 21, 0);
    let utc_monday = in_zone(When::Cron("0 9 * * MON".into()), "UTC", saturday);
    assert_eq!(
        next_after(&utc_monday, saturday),
        Some(utc(2026, 12, 7, 9, 0))
    );
    let berlin = in_zone(When::Cron("0 9 * * mon".into()), "Europe/Berlin", saturday);
    let slots = upcoming(&berlin, saturday, 3);
    assert_eq!(
        slots,
        [
            utc(2026, 12, 7, 8, 0),
            utc(2026, 12, 14, 8, 0),
            utc(2026, 12, 21, 8, 0)
        ]
    );
    assert_eq!(
        local_label("Europe/Berlin", slots[0]),
        "Mon 2026-12-07 09:00 CET"
    );
    // A slot is strictly after: asked at the slot itself, the next one is a week later.
    assert_eq!(next_after(&berlin, slots[0]), Some(slots[1]));
}

#[test]
fn at_is_local_in_the_zone_an_offset_wins_and_dst_is_resolved() {
    let made = utc(2026, 3, 1, 0, 0);
    let local = in_zone(
        When::At("2026-12-06T08:00:00".into()),
        "Europe/Berlin",
        made,
    );
    assert_eq!(next_after(&local, made), Some(utc(2026, 12, 6, 7, 0)));
    assert_eq!(
        next_after(&local, utc(2026, 12, 6, 7, 0)),
        None,
        "once only"
    );
    let explicit = in_zone(
        When::At("2026-12-06T08:00:00Z".into()),
        "Europe/Berlin",
        made,
    );
    assert_eq!(next_after(&explicit, made), Some(utc(2026, 12, 6, 8, 0)));
    let gap = in_zone(When::At("2026-03-29T02:30".into()), "Europe/Berlin", made);
    assert_eq!(
        next_after(&gap, made),
        Some(utc(2026, 3, 29, 1, 0)),
        "03:00 CEST"
    );
    let overlap = in_zone(When::At("2026-10-25 02:30".into()), "Europe/Berlin", made);
    assert_eq!(
        next_after(&overlap, made),
        Some(utc(2026, 10, 25, 0, 30)),
        "the earlier"
    );
}

#[test]
fn every_seconds_counts_from_creation() {
    let made = utc(2026, 12, 5, 10, 0) + chrono::Duration::seconds(7);
    let every = in_zone(When::EverySeconds(1800), "UTC", made);
    let slots = upcoming(&every, made, 3);
    let step = chrono::Duration::seconds(1800);
    assert_eq!(slots, [made + step, made + step * 2, made + step * 3]);
    // From any time between slots the next slot keeps the anchor.
    assert_eq!(
        next_after(&every, made + step * 5 + chrono::Duration::seconds(1)),
        Some(made + step * 6)
    );
}

#[test]
fn validate_refuses_what_cannot_be_used_and_says_what_to_write() {
    let now = utc(2026, 12, 5, 21, 0);
    assert!(validate(&When::Cron("0 9 * * MON".into()), "Europe/Berlin", now, 300).is_ok());
    assert!(validate(&When::Cron("*/5 * * * *".into()), "UTC", now, 300).is_ok());
    assert!(validate(&When::EverySeconds(300), "UTC", now, 300).is_ok());
    assert!(validate(&When::At("2026-12-06T08:00".into()), "UTC", now, 300).is_ok());

    let minutely = invalid(validate(&When::Cron("* * * * *".into()), "UTC", now, 300));
    assert!(
        minutely.contains("fires every 60 s; the shortest allowed interval is 300 s"),
        "{minutely}"
    );
    // Two slots close together once a day are found too.
    let bunched = invalid(validate(&When::Cron("0,2 9 * * *".into()), "UTC", now, 300));
    assert!(bunched.contains("fires every 120 s"), "{bunched}");
    let often = invalid(validate(&When::EverySeconds(60), "UTC", now, 300));
    assert!(often.contains("scheduler.min_interval_seconds"), "{often}");
    let six = invalid(validate(
        &When::Cron("0 0 9 * * MON".into()),
        "UTC",
        now,
        300,
    ));
    assert!(six.contains("has 6 fields; write five"), "{six}");
    let broken = invalid(validate(&When::Cron("0 25 * * *".into()), "UTC", now, 300));
    assert!(broken.contains("is not a valid cron"), "{broken}");
    let never = invalid(validate(&When::Cron("0 9 30 2 *".into()), "UTC", now, 300));
    assert!(
        never.contains("never fires") || never.contains("not a valid cron"),
        "{never}"
    );
    let zone = invalid(validate(&When::EverySeconds(600), "Mars/Olympus", now, 300));
    assert!(
        zone.contains("`Mars/Olympus` is not an IANA timezone"),
        "{zone}"
    );
    let past = invalid(validate(
        &When::At("2026-12-05T08:00:00".into()),
        "UTC",
        now,
        300,
    ));
    assert!(
        past.contains("is in the past; give a future time"),
        "{past}"
    );
    let garbled = invalid(validate(&When::At("tomorrow at 8".into()), "UTC", now, 300));
    assert!(garbled.contains("YYYY-MM-DDTHH:MM"), "{garbled}");
}
