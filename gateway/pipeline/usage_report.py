"""`/usage`: what a person's turns used and cost, as plain text for a chat.

Shown only in a private chat: a group must not learn what its owner spends. `/usage all` is
the owner's view of everyone (this month, by person).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gateway.stores.usage import Totals

if TYPE_CHECKING:
    from gateway.pipeline.commands import CommandContext

GROUP_REPLY = "Usage is shown only in a direct message with me."
NOT_RECORDED = "Usage is not recorded in this chat."


def money(amount: float) -> str:
    """Dollars with enough digits for small amounts ($0.0042), cents for large ones."""
    return f"${amount:,.2f}" if amount >= 1 or amount == 0 else f"${amount:.4f}"


def line(label: str, totals: Totals) -> str:
    if not totals.calls:
        return f"{label}: nothing yet"
    cache = f", {totals.cache_share:.0%} of the prompt from the cache" if totals.cache_read else ""
    return (
        f"{label}: {totals.tokens:,} tokens ({totals.input:,} in, {totals.output:,} out, "
        f"{totals.cache_read:,} cache read, {totals.cache_write:,} cache write){cache}, "
        f"{money(totals.cost)} over {totals.calls:,} model calls"
    )


async def usage_command(ctx: CommandContext) -> str:
    route, ledger = ctx.route, ctx.usage
    if not route.private:
        return GROUP_REPLY
    if ledger is None:
        return NOT_RECORDED
    periods = ledger.periods()
    owner = route.person_id == ctx.settings.owner
    if ctx.args.strip().lower() == "all":
        if not owner:
            return "Only the owner can see everyone's usage; /usage shows yours."
        people = await ledger.grouped("person", None, periods.month)
        if not people:
            return "Nobody used anything this month yet."
        rows = [
            f"  {person or '(no person)'}: {t.tokens:,} tokens, {money(t.cost)}"
            for person, t in people.items()
        ]
        total = sum(people.values(), Totals())
        return "\n".join(
            [
                f"This month, by person (since {periods.month:%B} 1):",
                *rows,
                f"  all: {total.tokens:,} tokens, {money(total.cost)}",
            ]
        )
    person = route.person_id
    lines = [
        line("Today", await ledger.total(person, periods.today)),
        line("This week", await ledger.total(person, periods.week)),
        line("This month", await ledger.total(person, periods.month)),
    ]
    kinds = await ledger.grouped("kind", person, periods.week)
    if kinds:
        lines.append("This week by kind:")
        lines += [
            f"  {kind}: {t.tokens:,} {'characters' if kind == 'speech' else 'tokens'}, "
            f"{money(t.cost)}"
            for kind, t in kinds.items()
        ]
    models = await ledger.grouped("model", person, periods.month)
    unpriced = [m for m in models if not ledger.prices.known(m)]
    if unpriced:
        lines.append(f"(no price known for {', '.join(unpriced)}: counted as $0)")
    if ctx.budgets is not None:
        lines += [f"Your {status.describe()}" for status in await ctx.budgets.status(person)]
    return "\n".join(lines)
