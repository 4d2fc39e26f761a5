"""An answer keeps the structure of what it quotes, so a teammate reads it in ten seconds: a
checklist's sub-items stay under their step, and every step is quoted. Through the real
`threadwise eval`, offline, on pages written here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import requires_offline_model
from tests.test_answer_reading import answers

FIRST_WEEK = """# Your first week

Welcome to Brackenfold. Your team lead meets you at the front desk at half past nine.

## Setting up your laptop

Work through this list on your first morning:

1. Collect your laptop and its badge from the front desk.
2. Set up your accounts:
   - choose a password for your email
   - turn on two-step sign-in with the phone app
   - join the general chat channel
3. Install the printer driver from the self-service app.
4. Book a desk for the rest of the week in the desk planner.

Ask the service desk if any step fails.

## Lunch

The canteen on the ground floor serves lunch from noon until two.
"""

RELEASE = """# Cutting a release

Releases are cut on Thursdays by the engineer on the release rota.

## Release steps

1. Freeze the main branch in the repository settings.
2. Run the checks:
   1. the unit tests with `make test`
   2. the smoke tests against staging with `make smoke`
3. Tag the commit with the new version number.
4. Post the release notes in the announcements channel.

If a check fails, unfreeze the branch and tell the team.
"""

SICK_CALL = """# Calling in sick

We hope you feel better soon. Rest first; the paperwork can wait until you are back.

## Who to tell

On the first morning you are ill, tell:

* your team lead
    * by phone, before ten
* the people inbox
    * with the days you expect to be off
* your client contact, on client work
"""

NESTED = {"first-week.md": FIRST_WEEK, "release.md": RELEASE, "sick-call.md": SICK_CALL}

_LIST_LINE = re.compile(r"^( *)([-*+]|\d+[.)])\s+(.*)$")


def list_lines(page: str, first: str) -> list[tuple[int, str]]:
    """The list of ``page`` whose first item holds ``first``: each item as (its indentation, its text)."""
    lines = page.split("\n")
    at = next(i for i, line in enumerate(lines) if first in line)
    out = []
    for line in lines[at:]:
        m = _LIST_LINE.match(line)
        if not m:
            break
        out.append((len(m.group(1)), m.group(3)))
    return out


@pytest.mark.slow
@requires_offline_model
def test_a_checklist_with_sub_items_is_quoted_whole_its_sub_items_under_their_step(tmp_path: Path):
    """A list whose items have indented sub-items: every item is quoted, in the page's order, each on
    a line of its own; the page's top-level items start their line, the sub-items are indented under
    theirs (they are parts of one step, not steps of their own)."""
    asked = [
        ("how do I set up my laptop on my first morning", FIRST_WEEK, "Collect your laptop"),
        ("what are the release steps", RELEASE, "Freeze the main branch"),
        ("how do I call in sick, and tell whom", SICK_CALL, "your team lead"),
    ]
    got = answers(tmp_path, NESTED, [q for q, _, _ in asked])
    for (question, page, first), answer in zip(asked, got, strict=True):
        quoted = answer.split("\n")
        at = 0
        for indent, text in list_lines(page, first):
            line = next((k for k, q in enumerate(quoted) if k >= at and text in q), None)
            assert line is not None, f"{question}: {text!r} missing or out of order\n{answer}"
            m = _LIST_LINE.match(quoted[line])
            assert m, f"{question}: {text!r} quoted without its marker\n{answer}"
            if indent:
                assert m.group(1), f"{question}: the sub-item {text!r} reads as a step of its own\n{answer}"
            else:
                assert not m.group(1), f"{question}: the step {text!r} is indented\n{answer}"
            at = line + 1


VPN = """# Connecting to the VPN

The VPN lets you reach the build servers from home.

## Connecting on a laptop

1) Open the Tunnelbird app from the menu bar.
2) Choose the Dublin gateway from the list.
3) Sign in with your work email and password.
4) Approve the prompt on your phone.

The tunnel stays up until you close the lid.
"""

BADGE = """# Replacing a lost badge

Badges open the front door and the car park barrier.

## Getting a new badge

a. Report the lost badge on the facilities form so it is switched off.
b. Pick up a temporary pass from reception with your photo ID.
c. Collect the new badge from security after two working days.

A second lost badge in a year costs ten pounds.
"""

CLAIM = """# Filing an expense

Claims are paid with the next month's salary.

## Filing a claim

(1) Photograph the receipt with the Ledgerly app.
(2) Pick the project code the spending belongs to.
(3) Add a short note saying what the spending was for.
(4) Submit the claim to your team lead for approval.

Claims over five hundred pounds also need a director's approval.
"""

_STEP = re.compile(r"^(\d+\)|[a-z]\.|\(\d+\)) (.+)$", re.M)


@pytest.mark.slow
@requires_offline_model
def test_steps_numbered_otherwise_than_1_dot_are_quoted_one_step_a_line(tmp_path: Path):
    """Steps numbered "1)", "a." or "(1)" (the first a Markdown list, the others paragraphs to a Markdown
    parser) are quoted as steps: each on a line of its own opening with its marker as the page writes
    it, all of them, in order; they ran together into one line."""
    asked = [
        ("how do I connect to the vpn on my laptop", VPN),
        ("how do I get a new badge", BADGE),
        ("how do I file an expense claim", CLAIM),
    ]
    pages = {"vpn.md": VPN, "badge.md": BADGE, "claim.md": CLAIM}
    got = answers(tmp_path, pages, [q for q, _ in asked])
    for (question, page), answer in zip(asked, got, strict=True):
        steps = [m.group(0) for m in _STEP.finditer(page)]
        assert "\n".join(steps) in answer, f"{question}:\n{answer}"


BILLING_FAQ = """# Billing questions

<dl>
<dt>Can I pay by invoice?</dt>
<dd>Yes, on the yearly plan. Ask the billing team for a purchase order form.</dd>
<dt>When is my card charged?</dt>
<dd>On the first day of each month, for the month ahead.</dd>
<dt>Do you offer refunds?</dt>
<dd>Only within fourteen days of the first payment, in full.</dd>
<dt>Can I change the currency I pay in?</dt>
<dd>No, the currency is fixed by the country of the billing address.</dd>
</dl>
"""

ACCOUNT_FAQ = """# Account questions

**Q:** Can I rename my workspace?
A: Yes, an owner can rename it under Settings, then General.

**Q:** How many owners can a workspace have?
A: Up to three owners at a time.

**Q:** Can I merge two workspaces?
A: No, move the projects across one by one instead.

**Q:** What happens to my data when I close my account?
A: It is deleted after thirty days, and exports stay available until then.
"""

MOBILE_FAQ = """# Mobile app questions

**Does the app work offline?**
Partly. Notes you opened recently stay readable without a connection.

**Which phones are supported?**
Phones running Android 12 or iOS 16 and later.

**Can I turn off push notifications?**
Yes, in the app's Settings under Alerts.

**Is there a tablet layout?**
Not yet, tablets show the phone layout enlarged.
"""

# each question, the reply that answers it, and the other entries' replies
FAQ_REPLIES = [
    ("when is my card charged?", "On the first day of each month, for the month ahead."),
    ("do you offer refunds?", "Only within fourteen days of the first payment, in full."),
    ("how many owners can a workspace have?", "Up to three owners at a time."),
    ("can I merge two workspaces?", "No, move the projects across one by one instead."),
    ("which phones are supported?", "Phones running Android 12 or iOS 16 and later."),
    ("can I turn off push notifications?", "Yes, in the app's Settings under Alerts."),
]


@pytest.mark.slow
@requires_offline_model
def test_an_faq_written_as_question_lines_answers_with_the_entrys_own_reply_alone(tmp_path: Path):
    """An FAQ written without headings, as an HTML definition list, as "**Q:**" / "A:" lines or as a bold
    question above its reply: asking one entry's question opens with that entry's reply, and quotes no
    other entry's reply (they ran on into the next entries, "When is my card charged?: On the first day
    ... Do you offer refunds?: Only within ...", and the question's own line came first)."""
    pages = {"billing-faq.md": BILLING_FAQ, "account-faq.md": ACCOUNT_FAQ, "mobile-faq.md": MOBILE_FAQ}
    got = answers(tmp_path, pages, [q for q, _ in FAQ_REPLIES])
    others = {reply for _, reply in FAQ_REPLIES}
    for (question, reply), answer in zip(FAQ_REPLIES, got, strict=True):
        assert answer.startswith(reply), f"{question}:\n{answer}"
        for other in others - {reply}:
            assert other not in answer, f"{question}: quotes another entry's reply\n{answer}"


SCANNER = """# The Scanbridge agent

The Scanbridge agent sends scanned documents from the office scanners to your shared drive.

## Install

Install the agent with the package manager:

```bash
sudo apt install scanbridge-agent
```

The agent starts on its own after the install.

## Uninstall

Remove the agent and its settings with:

```bash
sudo apt purge scanbridge-agent
```
"""

HARBOUR = """# The Harbour command line

The Harbour command line talks to the deploy service.

## Managing the tool

- To install it, run `pipx install harbour-cli`.
- To remove it, run `pipx uninstall harbour-cli`.
- To update it, run `pipx upgrade harbour-cli`.
"""

DARK_MODE = """# Dark mode

Dark mode is easier on the eyes in the evening. It is available on the web app and the desktop app.

To enable dark mode, open Settings, then Appearance, and pick Dark.
To disable dark mode, pick Light in the same menu.
Your choice is saved to your account and follows you to every device.
"""

SSO = """# Single sign-on

Single sign-on lets your team sign in with the company's identity provider.

## Turning on single sign-on

An owner turns it on under Security, then Single sign-on, by pasting the provider's metadata address.

## Turning off single sign-on

Turning it off under Security sends every member a link to set a password.
"""


@pytest.mark.slow
@requires_offline_model
def test_how_to_do_something_is_not_answered_with_how_to_undo_it(tmp_path: Path):
    """A page says how to do a thing and how to undo it side by side (a list of the install and remove
    commands, "To enable ..." then "To disable ...", sections turning a setting on and off): asking how
    to do the one quotes how to do it, and not how to undo it; asking how to undo it, the other way round."""
    asked = [
        ("how do I install the harbour cli", "pipx install harbour-cli", "pipx uninstall harbour-cli"),
        ("how do I enable dark mode", "To enable dark mode", "To disable dark mode"),
        ("how do I turn on single sign-on", "An owner turns it on", "Turning it off"),
        ("how do I uninstall the harbour cli", "pipx uninstall harbour-cli", "pipx install harbour-cli"),
        ("how do I disable dark mode", "To disable dark mode", "To enable dark mode"),
        ("how do I install the scanbridge agent", "sudo apt install scanbridge-agent", "sudo apt purge"),
    ]
    pages = {"scanner.md": SCANNER, "harbour.md": HARBOUR, "dark-mode.md": DARK_MODE, "sso.md": SSO}
    got = answers(tmp_path, pages, [q for q, _, _ in asked])
    for (question, does, undoes), answer in zip(asked, got, strict=True):
        assert does in answer, f"{question}:\n{answer}"
        assert undoes not in answer, f"{question}: quotes how to undo it\n{answer}"


OFFSITE = """# The team offsite

The offsite is held each spring at a farm two hours north of the office. A coach leaves from the office at eight.

## What to bring

- a photo ID for the hotel check-in
- your laptop and its charger
  - a travel adapter if your charger has a foreign plug
  - a long extension cable for the barn
- walking boots for the afternoon hike
- a refillable water bottle
- a warm coat, since the evenings are cold

Rooms are shared between two people and there are towels in every room.
"""

HACK_DAY = """# Hack day

Hack day is the last Friday of every quarter. Teams of two to four build whatever they like and show it at five.

## Bring along

- an idea written on one card, pinned to the board by Wednesday
- the name of a teammate from another squad
- a laptop with the demo cluster login already working
- snacks to share, nothing with nuts
- a two minute demo, recorded in case the projector fails

Prizes go to the best demo, the most useful tool and the silliest idea.
"""

WELCOME_KIT = """# Your welcome kit

New starters get a welcome kit on their desk on the first morning. It is theirs to keep when they leave.

## In the box

- a notebook and two pens with the company logo
- a reusable coffee cup that the canteen fills at half price
- a lanyard for your badge, in your team's colour
- a printed map of the building with the quiet rooms marked
- a voucher for a free lunch in your first week
- a sticker sheet for your laptop lid

The kit is packed by the office team the Friday before you start.
"""

DESK_MOVE = """# Moving desks

Desk moves happen on Friday afternoons so nobody loses a working day. The office team moves the furniture.

## Before the move

- empty your drawers into the crate left on your chair
- label the crate with your name and your new desk number
- unplug your monitor and leave its cables in the crate
- take anything fragile or valuable home for the weekend
- water your plants and put them on the windowsill by the lift

The crates are at your new desk on Monday morning.
"""


@pytest.mark.slow
@requires_offline_model
def test_a_list_item_quoted_apart_keeps_its_marker(tmp_path: Path):
    """A list longer than a short one is quoted in passages (the page's opening sentences and the first
    items, then the items a support holds): an item quoted apart from the items before it lost its "- "
    ("a lanyard for your badge, in your team's colour [1]"), read as a stray fragment, and the items after
    it hung under it. Every item quoted keeps its marker, on a line of its own: each is one of a list's items
    (the offsite's sub-items too, indented under theirs)."""
    asked = [
        ("what should I bring to hack day", HACK_DAY),
        ("what is in the welcome kit", WELCOME_KIT),
        ("what do I do before a desk move", DESK_MOVE),
        ("what should I bring to the offsite", OFFSITE),
    ]
    pages = {"hackday.md": HACK_DAY, "kit.md": WELCOME_KIT, "moving-desk.md": DESK_MOVE, "offsite.md": OFFSITE}
    got = answers(tmp_path, pages, [q for q, _ in asked])
    for (question, page), answer in zip(asked, got, strict=True):
        items = [m.group(3) for line in page.split("\n") if (m := _LIST_LINE.match(line))]
        quoted = [line for line in answer.split("\n") if any(item in line for item in items)]
        assert len(quoted) >= 3, f"{question}:\n{answer}"
        for line in quoted:
            assert _LIST_LINE.match(line), f"{question}: an item quoted without its marker: {line!r}\n{answer}"
