"""memstream's long everyday-chat retrieval set (issue 40), built from the templates below each time it is read.

Seven conversations between two named friends, ten dated sessions each, about twenty exchanges a session
(one friend is ``[user]``, the other ``[assistant]``, as raw mode stores a chat). A session mixes small
talk with episodes of the speakers' lives: each episode is told over two or three exchanges, and the detail a
question asks about is usually said in an exchange that does not name its subject ("It was amazing, I
made a blue bowl"), as people talk; the subject was named one or two exchanges before. Some subjects come
back in several sessions with a different detail each time (a book, a restaurant, a hike), so a question
that names the month is the only way to tell them apart.

Questions (each labelled with the exchanges that answer it, ``session:index``) are of four kinds:

- ``single-hop``: one detail of one episode, asked in other words than it was said in;
- ``multi-hop``: needs two exchanges from different sessions (who the sister is, then where she moved);
- ``temporal``: when something happened (the answer is the session's date), or which of a recurring
  subject's details belongs to a named month ("in March 2024");
- ``open-domain``: an inference about a speaker from what they said (would they enjoy a cooking class?).

The question templates were written to share as few content words with their evidence as possible
(a "puppy from the shelter" is asked about as "the dog they adopted"); small talk reuses the same everyday
words (dog, book, trip, work) so that word overlap alone does not find the answer.

Split by conversation, fixed before any figure was measured: the first four conversations are ``dev``,
the last three ``test``. Deterministic (seed 40): ``build()`` gives the same set on every run, so the set
is not committed as data; ``python -m bench.quality.everyday_set [--out FILE]`` prints its counts and can
write it out as JSON to read.
"""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

SEED = 40
SESSIONS = 10
PAIRS = (
    ("Maya", "Jonah"), ("Priya", "Tom"), ("Elena", "Sam"), ("Kofi", "Lucia"),
    ("Hana", "Ben"), ("Omar", "Grace"), ("Ines", "Dev"),
)  # fmt: skip
DEV_CONVERSATIONS = 4
MONTHS = (
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
)  # fmt: skip

# Small talk: (user, assistant). {a} is the [user] speaker, {b} the [assistant] one.
SMALL_TALK = (
    ("Hey {b}! How's your week going?", "Pretty hectic, honestly, but good. You?"),
    (
        "Same old, work has been a lot. Any plans for the weekend?",
        "Not really, maybe just sleep in and clean the flat.",
    ),
    ("Did you see that storm last night?", "Yes! The thunder woke me up twice. The dog hid under the bed."),
    ("I need a holiday so badly.", "Don't we all. Even a long weekend somewhere quiet would do."),
    ("Ugh, Mondays.", "Ha, tell me about it. Coffee is the only thing keeping me going."),
    ("Have you been watching anything good lately?", "Just rewatching old comedies, nothing new has grabbed me."),
    ("My neighbour's dog barked all morning again.", "That would drive me up the wall. Did you say anything?"),
    (
        "I keep meaning to read more and then I scroll my phone instead.",
        "Same. I bought three books last year and finished none.",
    ),
    ("The weather finally turned nice here.", "Lucky you, it's still grey and drizzly on my side."),
    ("Work sent us on another training course today.", "Was it any use or just slides for four hours?"),
    ("I tried that new coffee place near the station.", "Any good? I always walk past and never go in."),
    ("My phone screen cracked again.", "Oh no, that's the second time this year, right?"),
    ("I'm so tired, I barely slept.", "Try putting the phone away an hour before bed, it helps me a bit."),
    ("Traffic was awful this morning.", "There's roadwork everywhere near me too, it's a mess."),
    ("Do you have any travel plans this year?", "Nothing booked yet, I keep looking at flights and closing the tab."),
    ("I made soup for the whole week.", "Very organised of you! I just order takeaway when I'm tired."),
    ("Sorry I didn't reply yesterday, it was chaos.", "No worries at all, I know how it gets."),
    ("How's your family doing?", "Everyone's fine, my mum keeps asking when I'll visit."),
    ("I finally cleaned out my closet.", "That's so satisfying. Did you give stuff away?"),
    ("We had a team lunch at work today.", "Nice, anywhere good or the usual sandwich place?"),
    ("I think I'm catching a cold.", "Drink lots of tea and rest, don't push through it."),
    ("Any good podcasts to recommend?", "I've been into history ones lately, they help on long walks."),
    ("I went for a short run after work.", "Good for you, I can't get myself out the door lately."),
    ("The new season of that baking show started.", "I saw! The first episode was a disaster, I loved it."),
    ("It's been ages since we talked properly.", "I know, let's not leave it so long next time."),
    ("My landlord finally fixed the heating.", "About time, it's been broken since autumn hasn't it?"),
    ("I started a budget spreadsheet.", "Very grown up! Is it working?"),
    ("I got lost driving to my cousin's place.", "Didn't your phone have a map?"),
)


# Episodes: each a list of exchanges (user, assistant); the teller is {b} (assistant) unless "teller" is "a".
# "ask" are the questions: (kind, question, indexes of the exchanges that answer it within the episode).
# Slots in braces are drawn from SLOTS per conversation.
EPISODES: tuple[dict[str, Any], ...] = (
    {
        "key": "pottery",
        "turns": (
            (
                "Didn't you sign up for something new a while back?",
                "Yes, the wheel-throwing workshop at the community centre! First evening was on Thursday.",
            ),
            (
                "How did it go?",
                "Messy but so much fun. I managed a lopsided {colour} bowl and gave it to my {relative}.",
            ),
        ),
        "ask": (
            ("single-hop", "What did {b} make at the ceramics class, and who got it?", (1,)),
            ("temporal", "When did {b} go to the clay class for the first time?", (0,)),
        ),
    },
    {
        "key": "puppy",
        "turns": (
            (
                "Any news from your side?",
                "Big news: we brought home a little {breed} from the rescue shelter on Saturday!",
            ),
            (
                "No way! What's the little one called?",
                "{pet}. The kids picked it, and he already chewed one of my shoes.",
            ),
        ),
        "ask": (
            ("single-hop", "What name did {b}'s family give the dog they adopted?", (1,)),
            ("temporal", "When did {b} adopt a pet?", (0,)),
        ),
    },
    {
        "key": "promotion",
        "teller": "a",
        "turns": (
            ("Guess who's the new {role} at the office?", "Wait, you?! {a}, that's huge, congratulations!"),
            (
                "Thanks! It means a bigger team, eight people now, and a lot more meetings.",
                "You'll be great at it. Celebrate properly this weekend.",
            ),
        ),
        "ask": (
            ("single-hop", "How many people report to {a} after the career step up?", (1,)),
            ("temporal", "When was {a} promoted?", (0,)),
        ),
    },
    {
        "key": "sister",
        "teller": "a",
        "turns": (
            (
                "My sister {sibling} called, she's coming to stay for a few days.",
                "Oh nice, the one who works as a nurse?",
            ),
            (
                "That's her. She's thinking of leaving the hospital though.",
                "Big decision. I hope she finds something that suits her.",
            ),
        ),
        "ask": (("single-hop", "What does {a}'s sibling do for a living?", (0,)),),
        "later": {
            "key": "sister-moves",
            "turns": (
                ("{sibling} made up her mind, she's moving to {city} next month.", "Wow, far away! For a job?"),
                ("A clinic offered her a post there. I'll miss her.", "You'll have a great excuse to visit though."),
            ),
            "ask": (("multi-hop", "Which city is the nurse in {a}'s family relocating to?", ((0, 0), (1, 0))),),
        },
    },
    {
        "key": "race",
        "turns": (
            (
                "Are you still doing that early morning training?",
                "Every day at six. The {distance} is in three weeks and I'm nervous.",
            ),
            ("You'll smash it. What time are you hoping for?", "Anything under {time} would make me happy, honestly."),
        ),
        "ask": (
            ("single-hop", "What finishing time is {b} aiming for?", (1,)),
            ("open-domain", "Would {b} be likely to say yes to a weekend of hill running?", (0,)),
        ),
        "later": {
            "key": "race-done",
            "turns": (
                (
                    "So?? How did it go on Sunday?",
                    "I did it! My legs were jelly for the last few kilometres, but I crossed the line.",
                ),
                ("And the clock?", "{finish}. My {relative} was at the finish with a sign, I nearly cried."),
            ),
            "ask": (
                ("multi-hop", "Did {b} beat the time they were hoping for in the race?", ((0, 1), (1, 1))),
                ("temporal", "When did {b} run the race?", ((1, 0),)),
            ),
        },
    },
    {
        "key": "book",
        "recurring": "book",
        "turns": (
            ("Reading anything good?", "I'm halfway through {book}. I stay up way too late with it."),
            ("What's it about?", "{book_plot}. Couldn't put it down last night."),
        ),
        "ask": (
            ("temporal", "Which novel was {b} reading in {month}?", (0,)),
            (
                "single-hop",
                "What is the story of the novel {b} could not put down at the time they mentioned {book}?",
                (1,),
            ),
        ),
    },
    {
        "key": "restaurant",
        "recurring": "restaurant",
        "teller": "a",
        "turns": (
            ("We finally tried {restaurant} for my {occasion}.", "Oh, how was it? I've heard mixed things."),
            (
                "The {dish} was unbelievable, the service less so. We waited an hour.",
                "An hour! Worth it for the food at least?",
            ),
        ),
        "ask": (
            ("temporal", "Where did {a} go out to eat in {month}?", (0,)),
            ("single-hop", "Which plate impressed {a} at the place where they celebrated their {occasion}?", (1,)),
        ),
    },
    {
        "key": "hike",
        "recurring": "hike",
        "turns": (
            ("What did you get up to on the weekend?", "We drove up to {mountain} and walked the ridge path."),
            ("That sounds lovely. Was it busy?", "Packed at the car park, but after an hour we only met {animal}."),
        ),
        "ask": (
            ("temporal", "Which mountain did {b} climb in {month}?", (0,)),
            ("single-hop", "What wildlife did {b} come across on the ridge walk near {mountain}?", (1,)),
            ("open-domain", "Is {b} someone who enjoys being outdoors in nature?", (0, 1)),
        ),
    },
    {
        "key": "move",
        "teller": "a",
        "turns": (
            ("We signed the lease! Moving on the {day_n}th.", "Finally! Is it the place with the balcony?"),
            (
                "Yes, two bedrooms near {area}, ten minutes' walk from the river.",
                "Perfect for summer evenings. Need help carrying boxes?",
            ),
        ),
        "ask": (
            ("single-hop", "What neighbourhood is {a}'s new flat in?", (1,)),
            ("temporal", "When did {a} sign the rental contract for the new home?", (0,)),
        ),
    },
    {
        "key": "allergy",
        "turns": (
            (
                "You look tired in your photos, everything okay?",
                "Ended up in urgent care on Tuesday. Turns out I'm allergic to {allergen}.",
            ),
            (
                "That's scary! Are you alright now?",
                "Fine now, but I carry an injector pen everywhere and read every label.",
            ),
        ),
        "ask": (
            ("single-hop", "What food reaction sent {b} to the doctor?", (0,)),
            ("open-domain", "Should you check the ingredients before cooking a meal for {b}?", (0, 1)),
        ),
    },
    {
        "key": "language",
        "teller": "a",
        "turns": (
            ("Estoy aprendiendo, guess what I'm learning.", "Ha, I'd guess {language}! Since when?"),
            (
                "Three evenings a week with an online tutor, for the trip to {country} in the autumn.",
                "That's dedication. Say something for me next time we meet.",
            ),
        ),
        "ask": (
            ("single-hop", "How often does {a} have lessons with the tutor?", (1,)),
            ("multi-hop", "Why is {a} studying a new tongue, and which one?", (0, 1)),
        ),
    },
    {
        "key": "camera",
        "turns": (
            (
                "Did you end up buying that thing you were saving for?",
                "I did, a second-hand {camera} with a fifty-millimetre lens.",
            ),
            (
                "Show me what you've shot so far!",
                "Mostly the old harbour at sunset, and a lot of blurry pictures of {pet_or_kid}.",
            ),
        ),
        "ask": (
            ("single-hop", "What photography gear did {b} get?", (0,)),
            ("open-domain", "What hobby has {b} taken up that a gift of a tripod would suit?", (0, 1)),
        ),
    },
    {
        "key": "garden",
        "teller": "a",
        "turns": (
            ("I've been spending every evening outside lately.", "In the allotment? How's it looking?"),
            (
                "The {vegetable} came up beautifully but slugs ate half the lettuce.",
                "Beer traps, my grandad swore by them.",
            ),
        ),
        "ask": (
            ("single-hop", "What pests damaged {a}'s salad greens?", (1,)),
            ("single-hop", "Which crop did well in {a}'s plot?", (1,)),
        ),
    },
    {
        "key": "concert",
        "turns": (
            (
                "You were at the gig last night, weren't you?",
                "Yes! {band}, front row nearly. My ears are still ringing.",
            ),
            ("Jealous! Did they play the old stuff?", "The encore was the whole first album. I lost my voice singing."),
        ),
        "ask": (
            ("single-hop", "Which group did {b} see live?", (0,)),
            ("temporal", "When did {b} see that band perform?", (0, 1)),
        ),
    },
)

SLOTS: dict[str, tuple[str, ...]] = {
    "colour": ("blue", "green", "speckled grey", "yellow", "rust-red", "white", "teal"),
    "relative": ("mum", "dad", "grandma", "aunt", "brother", "partner", "best friend"),
    "breed": ("beagle", "terrier mix", "spaniel", "greyhound", "collie pup", "dachshund", "lab mix"),
    "pet": ("Biscuit", "Pepper", "Moose", "Waffles", "Juniper", "Rocket", "Noodle"),
    "role": (
        "team lead",
        "head of design",
        "senior analyst",
        "project manager",
        "shift supervisor",
        "lead engineer",
        "store manager",
    ),
    "sibling": ("Nadia", "Ruth", "Leila", "Ama", "Mina", "Sofia", "Zara"),
    "city": ("Lisbon", "Melbourne", "Vancouver", "Edinburgh", "Nairobi", "Osaka", "Montreal"),
    "distance": ("half marathon", "marathon", "10K", "trail half", "half marathon", "marathon", "10K"),
    "time": (
        "two hours",
        "four hours",
        "fifty minutes",
        "two and a half hours",
        "one fifty-five",
        "three forty-five",
        "forty-eight minutes",
    ),
    "finish": (
        "One fifty-eight",
        "Four oh six",
        "Forty-nine minutes",
        "Two twenty-nine",
        "Two oh one",
        "Three forty-one",
        "Forty-seven flat",
    ),
    "mountain": ("Ben Lomond", "Mount Rainier", "Snowdon", "Table Mountain", "Mount Takao", "Pikes Peak", "Helvellyn"),
    "animal": (
        "a herd of goats",
        "two deer",
        "a golden eagle",
        "wild ponies",
        "a family of marmots",
        "a fox",
        "sheep everywhere",
    ),
    "area": (
        "Riverside",
        "the old town",
        "Canal Street",
        "Northgate",
        "the university quarter",
        "Parkhill",
        "the harbour",
    ),
    "allergen": ("sesame", "shellfish", "cashews", "peanuts", "kiwi", "mustard", "walnuts"),
    "language": ("Spanish", "Portuguese", "Italian", "Japanese", "French", "German", "Greek"),
    "country": ("Mexico", "Brazil", "Italy", "Japan", "Quebec", "Austria", "Crete"),
    "camera": ("Fujifilm X-T2", "Canon AE-1", "Sony a6000", "Nikon D750", "Olympus OM-1", "Pentax K1000", "Leica M6"),
    "pet_or_kid": (
        "the cat",
        "my nephew",
        "the dog",
        "my daughter",
        "the ducks in the park",
        "my son",
        "the neighbour's cat",
    ),
    "vegetable": ("courgettes", "tomatoes", "beans", "potatoes", "pumpkins", "beetroot", "peppers"),
    "band": (
        "The Lumineers",
        "Arctic Monkeys",
        "Florence + the Machine",
        "Bon Iver",
        "Coldplay",
        "Fleetwood Mac tribute band",
        "Paramore",
    ),
    "occasion": (
        "birthday",
        "anniversary",
        "graduation dinner",
        "engagement",
        "mum's sixtieth",
        "farewell do",
        "new year",
    ),
    "day_n": ("4", "12", "15", "20", "8", "25", "17"),
}
# The recurring subjects: each conversation's friend tells one per listed session, a different one each time.
RECURRING: dict[str, tuple[tuple[str, ...], ...]] = {
    "book": (
        ("Piranesi", "a man lives alone in an endless house full of statues and tides"),
        ("The Remains of the Day", "an English butler looks back on his years of service on a road trip"),
        ("Project Hail Mary", "a science teacher wakes up alone on a spaceship with no memory"),
        ("Circe", "the witch from the Odyssey tells her side of the myths"),
        ("Klara and the Sun", "a solar-powered companion robot watches over a sick girl"),
        ("The Overstory", "nine strangers whose lives are bound up with trees"),
        ("Pachinko", "four generations of a Korean family living in Japan"),
        ("Tomorrow, and Tomorrow, and Tomorrow", "two friends make video games together over thirty years"),
    ),
    "restaurant": (
        ("Casa Lupe", "mole negro"),
        ("the Golden Lotus", "crispy duck pancakes"),
        ("Trattoria Nonna", "truffle tagliatelle"),
        ("Sakura House", "omakase nigiri"),
        ("the Fat Olive", "grilled octopus"),
        ("Spice Route", "lamb biryani"),
        ("Le Petit Jardin", "duck confit"),
        ("Smokestack BBQ", "brisket"),
    ),
    "hike": (),
}


def fill(text: str, slots: dict[str, str]) -> str:
    return text.format(**slots)


def build() -> dict[str, Any]:
    rng = random.Random(SEED)
    conversations: dict[str, Any] = {}
    questions: list[dict[str, Any]] = []
    for c, (a, b) in enumerate(PAIRS):
        name = f"{a.lower()}-{b.lower()}"
        slots = {k: v[(c + rng.randrange(len(v))) % len(v)] for k, v in SLOTS.items()}
        slots.update(a=a, b=b)
        day = datetime(2023, 1, 1, 18, tzinfo=UTC) + timedelta(days=rng.randrange(400))
        dates = []
        for _ in range(SESSIONS):
            dates.append(day)
            day += timedelta(days=rng.randrange(9, 40), minutes=rng.randrange(-240, 240))
        # Which session each episode goes to; a "later" part goes two to five sessions after its start.
        plan: dict[int, list[tuple[dict[str, Any], dict[str, str], str]]] = {s: [] for s in range(SESSIONS)}
        starts: dict[str, int] = {}
        episodes = [e for e in EPISODES if "recurring" not in e]
        rng.shuffle(episodes)
        for n, episode in enumerate(episodes):
            at = n % (SESSIONS - 3) if "later" in episode else n % SESSIONS
            plan[at].append((episode, slots, episode["key"]))
            starts[episode["key"]] = at
            if "later" in episode:
                plan[min(SESSIONS - 1, at + rng.randrange(2, 6))].append(
                    (episode["later"], slots, episode["later"]["key"])
                )
        for episode in (e for e in EPISODES if "recurring" in e):
            kind = episode["recurring"]
            items = list(RECURRING[kind]) or [(m, "") for m in SLOTS["mountain"]]
            rng.shuffle(items)
            for i, s in enumerate(rng.sample(range(SESSIONS), 3)):
                item = items[i]
                local = dict(slots)
                if kind == "book":
                    local.update(book=item[0], book_plot=item[1][0].upper() + item[1][1:])
                elif kind == "restaurant":
                    local.update(restaurant=item[0], dish=item[1], occasion=SLOTS["occasion"][(c + i) % 7])
                else:
                    local.update(mountain=item[0], animal=SLOTS["animal"][(c + 2 * i) % 7])
                local["month"] = f"{MONTHS[dates[s].month - 1]} {dates[s].year}"
                plan[s].append((episode, local, f"{episode['key']}-{i}"))
        sessions = []
        where: dict[str, list[str]] = {}
        for s in range(SESSIONS):
            session = f"{name}-s{s + 1:02d}"
            exchanges: list[list[str]] = []
            talk = rng.sample(SMALL_TALK, 12)
            exchanges += [[fill(u, slots), fill(v, slots)] for u, v in talk[:2]]
            filler = talk[2:]
            for episode, local, key in plan[s]:
                where[key] = []
                for u, v in episode["turns"]:
                    where[key].append(f"{session}:{len(exchanges)}")
                    exchanges.append([fill(u, local), fill(v, local)])
                # Small talk between episodes, so that neighbours are not always the same subject.
                for _ in range(rng.randrange(1, 4)):
                    if filler:
                        u, v = filler.pop()
                        exchanges.append([fill(u, slots), fill(v, slots)])
            exchanges += [[fill(u, slots), fill(v, slots)] for u, v in filler[: rng.randrange(0, 3)]]
            exchanges.append(["Anyway, I should get going. Talk soon!", f"Bye {a}, take care!"])
            sessions.append({"name": session, "date": dates[s].isoformat(), "exchanges": exchanges})
            for episode, local, key in plan[s]:
                for kind, template, picks in episode["ask"]:
                    if picks and isinstance(picks[0], tuple):  # (0: the first episode, 1: its later part, index)
                        answers = [where[_first_key(key) if h == 0 else key][i] for h, i in picks]
                    else:
                        answers = [where[key][i] for i in picks]
                    questions.append(
                        {
                            "conversation": name,
                            "q": fill(template, local),
                            "kind": kind,
                            "answers": answers,
                            "split": "dev" if c < DEV_CONVERSATIONS else "test",
                        }
                    )
        conversations[name] = {"speakers": {"user": a, "assistant": b}, "sessions": sessions}
    return {
        "about": __doc__.split("\n\n")[0].strip() + " See bench/quality/everyday_set.py for how it was made.",
        "license": "Apache-2.0 (written for memstream; no third-party text)",
        "conversations": conversations,
        "questions": questions,
    }


def _first_key(later: str) -> str:
    """The episode a "later" part continues."""
    return next(e["key"] for e in EPISODES if e.get("later", {}).get("key") == later)


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="also write the set to this JSON file")
    data = build()
    out = parser.parse_args().out
    if out:
        out.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    turns = sum(2 * len(s["exchanges"]) for c in data["conversations"].values() for s in c["sessions"])
    kinds: dict[str, int] = {}
    for q in data["questions"]:
        kinds[f"{q['split']} {q['kind']}"] = kinds.get(f"{q['split']} {q['kind']}", 0) + 1
    print(f"{len(data['conversations'])} conversations, {turns} turns, {len(data['questions'])} questions: {kinds}")
