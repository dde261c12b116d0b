"""Waivers and the date they are held to: each waiver on its own (one per class, a reason, a real date that
has not passed), and the waivers that can waive nothing, as far as the rules alone show it (with the
registry imported, codegen/checks/imports.py finds more)."""

from __future__ import annotations

import datetime
import os
import re

from stampgen.codegen import ir
from stampgen.codegen.checks.parity import draft_pattern
from stampgen.codegen.checks.report import Report

TODAY_ENV = "STAMPGEN_TODAY"  # YYYY-MM-DD: the date waivers are held to, instead of today's
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def current_date() -> datetime.date:
    """Today, as waivers see it: STAMPGEN_TODAY when set (tests hold a waiver before and after its date)."""
    given = os.environ.get(TODAY_ENV, "")
    if not given:
        return datetime.date.today()
    parsed = parse_date(given)
    if parsed is None:
        raise ValueError(f"{TODAY_ENV}={given!r} is not a date (YYYY-MM-DD)")
    return parsed


def parse_date(text: str) -> datetime.date | None:
    """A YYYY-MM-DD date, or None when `text` is not one."""
    if not _DATE.match(text):
        return None
    try:
        return datetime.date.fromisoformat(text)
    except ValueError:
        return None


def check_waivers(waivers: tuple[ir.Waiver, ...], today: datetime.date, report: Report) -> None:
    """Each waiver of one block on its own: one per class, a reason, a real date that has not passed."""
    seen: dict[str, ir.Name] = {}
    for waiver in waivers:
        cls = waiver.cls.value
        if cls in seen:
            report.error(
                "duplicate-waiver",
                f"`{cls}` is waived twice in this block",
                waiver.cls.loc,
                f"first waived at {seen[cls].loc}",
            )
        seen.setdefault(cls, waiver.cls)
        if waiver.reason is None or not waiver.reason.strip():
            report.error(
                "waiver-without-reason",
                f"the waiver for `{cls}` gives no reason",
                waiver.loc,
                f'say why it is acceptable until then: waive {cls} until {waiver.until} "reason"',
            )
        until = parse_date(waiver.until)
        if until is None:
            report.error(
                "bad-date",
                f"`{waiver.until}` is not a date: write YYYY-MM-DD, e.g. 2026-09-30",
                waiver.until_loc,
            )
        elif until < today:
            report.error(
                "expired-waiver",
                f"the waiver for `{cls}` expired on {until.isoformat()} (today is {today.isoformat()})",
                waiver.until_loc,
                "fix what it waives, or renew it with a new date and reason",
            )


def stale_validate_waivers(decl: ir.ValidateDecl, report: Report) -> None:
    """A validate block with no forbid or require waives nothing."""
    if decl.waivers and not any(isinstance(s, ir.Check) for s in decl.stmts):
        for waiver in decl.waivers:
            report.warning(
                "stale-waiver",
                f"validate block `{decl.name.value}` has no forbid or require: the waiver for "
                f"`{waiver.cls.value}` waives nothing",
                waiver.cls.loc,
                "remove the waiver",
            )


def stale_parity_waivers(decl: ir.ParityDecl, report: Report) -> None:
    """A parity never checks a class it excludes or whose name its draft pattern does not match."""
    pattern = draft_pattern(decl)
    excluded = {n.value for n in decl.exclude}
    for waiver in decl.waivers:
        cls = waiver.cls.value
        if cls in excluded or (pattern is not None and pattern.search(cls) is None):
            why = "is excluded" if cls in excluded else f"does not match the draft pattern /{decl.draft}/"
            report.warning(
                "stale-waiver",
                f"`{cls}` {why}, so parity `{decl.name.value}` never checks it: the waiver waives nothing",
                waiver.cls.loc,
                "name the draft class the waiver is for, or remove it",
            )
