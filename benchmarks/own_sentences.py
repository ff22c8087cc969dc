"""Sentences of our own: corrections, forget requests and near-miss questions said as people say them.

    MNEMO_DATA_DIR= .venv/bin/python benchmarks/own_sentences.py [--embedder minilm] [-v]

Written by the team during the eleventh session (#30, #31) to try the write path and recall the way a new
user would, with ordinary sentences no scenario holds. They are not held-out: the session's fixes were
made looking at what failed here, so they are development data, reported beside scenarios-dev. Each
correction pair is played into its own user ("old" then, three days later, "new"); it passes when no
active positive memory still says the old value without the new one and an active memory says the new
value. Each forget request runs against its own user's copy of `FORGET_STORE`; it passes when no active
memory still says the value and nothing else was retired. The questions are asked of one store
(`ASK_STORE`): answerable ones should not be "unknown", unanswerable ones should.
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mnemo import Memory, SimulatedClock  # noqa: E402

T0 = datetime(2025, 3, 1, tzinfo=timezone.utc)

CORRECTIONS = [
 ("My dentist is Dr Patel on King Street.", "I've switched dentists, I go to Dr Okoro now.", "Patel", "Okoro"),
 ("I drive a blue Honda Civic.", "Sold the Civic last week, I've got a Kia Niro now.", "Civic", "Niro"),
 ("My gym membership is 32 pounds a month.", "The gym put the price up, it's 38 pounds now.", "32", "38"),
 ("I work at Halden Bank as an analyst.", "I started a new job at Corvin Insurance on Monday.", "Halden", "Corvin"),
 ("My daughter's swimming lessons are on Tuesdays.", "Swimming's moved to Fridays from next week.", "Tuesdays", "Fridays"),
 ("The wifi password is tulip2020.", "I changed the wifi password to maple77.", "tulip2020", "maple77"),
 ("I'm vegetarian.", "I started eating fish again, so I'm pescatarian now.", "vegetarian", "pescatarian"),
 ("My flight to Lisbon leaves at 7:40.", "Actually the Lisbon flight is at 9:15, I misread it.", "7:40", "9:15"),
 ("We live in Brixton.", "We moved to Hackney in the summer.", "Brixton", "Hackney"),
 ("My son's teacher is Mr Evans.", "Correction: his teacher is Ms Hughes, Mr Evans is the head.", None, "Hughes"),
 ("My running coach is Dana.", "I stopped working with Dana, Priya coaches me now.", "Dana", "Priya"),
 ("The boiler service is booked for 12 May.", "The engineer rescheduled the boiler service to 19 May.", "12 May", "19 May"),
 ("My phone number is 07700 900123.", "New number: 07700 900456.", "900123", "900456"),
 ("I take 50mg of sertraline.", "The GP upped my sertraline to 100mg.", "50mg", "100mg"),
 ("Our landlord is Mr Grant.", "The flat was sold, our landlord is now Mrs Achebe.", "Grant", "Achebe"),
 ("My favourite band is Radiohead.", "These days my favourite band is Big Thief.", "Radiohead", "Big Thief"),
 ("My book club meets on the first Monday of the month.", "Book club now meets on the last Thursday instead.", "first Monday", "last Thursday"),
 ("The rent is 1,200 a month.", "Rent went up to 1,275 in April.", "1,200", "1,275"),
 ("I'm learning Spanish on Duolingo.", "I gave up Spanish, I'm doing Italian now.", "Spanish", "Italian"),
 ("My car insurance is with Direct Line.", "I switched my car insurance to Aviva.", "Direct Line", "Aviva"),
]
CORRECTIONS_2 = [
 ("My manager is Helga.", "I now report to Farid.", "Helga", "Farid"),
 ("The team standup is at 9:30.", "Standup's at 10 from Monday.", "9:30", "10"),
 ("I weigh 82 kg.", "Down to 78 kg now!", "82", "78"),
 ("My mum's number is 07700 900111.", "Mum got a new phone, it's 07700 900222.", "900111", "900222"),
 ("We're going to Crete in June.", "Change of plan, we're going to Sicily instead.", "Crete", "Sicily"),
 ("My daughter goes to Riverside Primary.", "My daughter has started at Oakfield Academy.", "Riverside", "Oakfield"),
 ("I bank with Barclays.", "I've moved my account to Monzo.", "Barclays", "Monzo"),
 ("The plumber is coming on Tuesday.", "The plumber can't make Tuesday, he's coming Thursday.", "Tuesday", "Thursday"),
 ("My son is in year 4.", "My son just went up to year 5.", "year 4", "year 5"),
 ("Our cleaner comes every Friday.", "The cleaner switched to Mondays.", "Friday", "Mondays"),
 ("I'm reading Middlemarch.", "Finished Middlemarch, now reading Dune.", None, "Dune"),
 ("My salary is 42,000.", "I got a raise, I'm on 46,000 now.", "42,000", "46,000"),
 ("My GP is Dr Lewis.", "Dr Lewis retired, my new GP is Dr Amin.", None, "Amin"),
 ("The kids' bedtime is 7:30.", "We've pushed bedtime back to 8.", "7:30", "8"),
 ("I run 20 km a week.", "I'm running 35 km a week these days.", "20 km", "35 km"),
 ("My favourite restaurant is Dishoom.", "Honestly Padella is my favourite restaurant now.", "Dishoom", "Padella"),
 ("Rent is due on the 1st.", "The landlord wants rent on the 15th from now on.", "1st", "15th"),
 ("My partner works at the BBC.", "My partner left the BBC and joined Channel 4.", None, "Channel 4"),
 ("I drink oat milk.", "I've switched to soy milk.", "oat milk", "soy milk"),
 ("The gym opens at 6am.", "The gym now opens at 5:30am.", "6am", "5:30am"),
]
FORGET_STORE = ["My locker code at the gym is 5521.", "I'm allergic to penicillin.", "My dog Bruno is a beagle.",
        "I take 10mg of amlodipine every morning.", "My sister Ines lives in Porto.", "I'm training for the Bath half marathon in March.",
        "Our wifi password is heron-77.", "I work at Linden Pharmacy as a dispenser."]
FORGETS = [
 ("Please forget my locker code.", "5521"),
 ("Erase anything about my medication.", "amlodipine"),
 ("Scrap the wifi password I gave you.", "heron-77"),
 ("Forget everything about my dog.", "Bruno"),
 ("Don't keep my allergy on file.", "penicillin"),
 ("Can you delete what I said about my sister?", "Ines"),
 ("Forget that I'm doing the half marathon.", "marathon"),
 ("Remove my workplace from your memory.", "Linden"),
 ("I'd rather you didn't remember my locker number.", "5521"),
 ("Wipe the bit about the beagle.", "beagle"),
]
ASK_STORE = ["My dog Bruno is a beagle.", "Bruno turned 4 in January.", "My sister Ines lives in Porto, she's a nurse.",
         "I work at Linden Pharmacy as a dispenser.", "My dentist is Dr Patel on King Street.",
         "I'm flying to Lisbon on 12 May for a friend's wedding.", "I'm training for the Bath half marathon.",
         "Keep your answers short please.", "My car is a grey Mazda 3.", "I've started learning the cello."]
ANSWERABLE = ["What breed is Bruno?", "How old is Bruno?", "Where does the user's sister live?", "Where does the user work?",
       "Who is the user's dentist?", "When is the user flying to Lisbon?", "What race is the user training for?",
       "What does the user drive?", "What instrument is the user learning?", "What does Ines do for a living?",
       "Why is the user going to Lisbon?", "What colour is the user's car?"]
UNANSWERABLE = ["What is Bruno's favourite toy?", "When is Ines's birthday?", "What is the dentist's phone number?",
         "Which hotel is the user staying at in Lisbon?", "How much does the user earn?", "What year is the user's car?",
         "Who is the user's cello teacher?", "What is the user's half marathon target time?", "What is the name of the user's brother?",
         "Which vet does Bruno go to?", "What is the user's home address?", "When is the user's wedding anniversary?"]

def corrections(mem: Memory, cases: list[tuple], verbose: bool) -> int:
    """Return how many correction pairs pass (see the module docstring)."""
    ok = 0
    for k, (old_turn, new_turn, old, new) in enumerate(cases):
        user = f"c{id(cases)}-{k}"
        mem.remember(old_turn, user=user, at=T0)
        mem.remember(new_turn, user=user, at=T0 + timedelta(days=3))
        held = mem.memories(user, include_inactive=True)
        stale = [m for m in held if m.active and old and old.lower() in m.text.lower()
                 and new.lower() not in m.text.lower() and not m.meta.get("negated")]
        good = not stale and any(m.active and new.lower() in m.text.lower() for m in held)
        ok += good
        if verbose and not good:
            print("FAIL", old_turn, "=>", new_turn, [(m.status, m.text) for m in held])
    return ok


def forgets(mem: Memory, verbose: bool) -> int:
    """Return how many forget requests take exactly what they mean."""
    ok = 0
    for k, (request, gone) in enumerate(FORGETS):
        user = f"f{k}"
        for i, turn in enumerate(FORGET_STORE):
            mem.remember(turn, user=user, at=T0 + timedelta(minutes=i))
        mem.remember(request, user=user, at=T0 + timedelta(days=1))
        held = mem.memories(user, include_inactive=True)
        left = [m.text for m in held if m.active and gone.lower() in m.text.lower()]
        lost = [m.text for m in held if not m.active and gone.lower() not in m.text.lower()]
        ok += not left and not lost
        if verbose and (left or lost):
            print("FAIL", request, "| left:", left, "| collateral:", lost)
    return ok


def questions(mem: Memory, verbose: bool) -> tuple[int, int]:
    """Return (answerable said "unknown", unanswerable said "unknown")."""
    for k, turn in enumerate(ASK_STORE):
        mem.remember(turn, user="q", at=T0 + timedelta(minutes=k))
    said = {q: mem.recall(q, user="q").confidence for q in ANSWERABLE + UNANSWERABLE}
    if verbose:
        for q, c in said.items():
            print(c.ljust(8), q)
    return (sum(said[q] == "unknown" for q in ANSWERABLE), sum(said[q] == "unknown" for q in UNANSWERABLE))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--embedder", default="minilm")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    with Memory.open(":memory:", embedder=args.embedder, clock=SimulatedClock(T0)) as mem:
        c1 = corrections(mem, CORRECTIONS, args.verbose)
        c2 = corrections(mem, CORRECTIONS_2, args.verbose)
        f = forgets(mem, args.verbose)
        false_unknown, unknown = questions(mem, args.verbose)
    print(f"corrections {c1}/{len(CORRECTIONS)}, {c2}/{len(CORRECTIONS_2)}; forget requests {f}/{len(FORGETS)}; "
          f"'unknown' on answerable {false_unknown}/{len(ANSWERABLE)}, on unanswerable {unknown}/{len(UNANSWERABLE)}")


if __name__ == "__main__":
    main()
