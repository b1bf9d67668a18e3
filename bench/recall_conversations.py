# ruff: noqa: E501  (data tables: one sentence a line reads better than wrapped strings)
"""Generator of the long-conversation recall benchmark (deterministic, seeded; no data file).

Ten conversations between two friends, 20-30 sessions each (about 600 turns), stored the way
clawgate stores them: one daily note per session date (`memory/YYYY-MM-DD.md`), one
`- Speaker: text` line per turn, nothing else in the file. 150 questions of four kinds, in the
proportions of the held-out set the issue describes:

- `multi` (32): needs lines from two or more sessions ("which two companies has Maya worked
  for?", "what pets does Jonah have?"). Evidence is every line that holds a part of the
  answer; a question counts when ANY of them is inside a top-5 result and in its snippet
  (the held-out rule: "a line that holds the answer"). The benchmark also reports how often
  ALL of them are.
- `when` (25): the answer is the session's date (the file name); the evidence is the line
  telling the event ("ran the race on Saturday"), which never holds the date itself.
- `open` (12): open-ended, needs inference ("would Maya enjoy a hiking weekend?" answered by
  "nothing beats being up on a ridge at sunrise").
- `single` (81): one line answers it. Some ask for the current value of a fact that changed
  ("which neighbourhood does Jonah live in now?"), whose older value is a distractor.

Questions are written away from the evidence's words (dog / "a scruffy beagle mix", vehicle /
"driving a Subaru"), and every fact is surrounded by distractors: the same topic mentioned
again later without the answer, the other speaker's small talk on the same subject, and
generic chat. Each run of `build(seed)` gives the same data.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any

__all__ = ["KIND_COUNTS", "build"]

KIND_COUNTS = {"multi": 32, "when": 25, "open": 12, "single": 81}
# Topics where an arc (facts over several sessions) and a one-off event tell the same kind of
# thing; see `_conversation`.
ARC_TOPICS = ("pets", "travel", "running")
CONVERSATIONS = 10
QUESTIONS_PER_CONVERSATION = 15

NAMES = [
    "Maya",
    "Jonah",
    "Priya",
    "Derek",
    "Sofia",
    "Marcus",
    "Lena",
    "Tomas",
    "Aisha",
    "Caleb",
    "Nora",
    "Felix",
    "Imani",
    "Owen",
    "Rosa",
    "Victor",
    "Hana",
    "Elliot",
    "Zara",
    "Gabe",
]
SIBLINGS = ["Ruth", "Elena", "Ben", "Clara", "Theo", "Jess", "Mira", "Sam", "Iris", "Paul"]
COUSINS = ["Dana", "Kofi", "Lucy", "Rafael", "Anneke", "Tariq", "Bea", "Hugo", "Marta", "Jules"]
PARTNERS = ["Alex", "Robin", "Casey", "Jordan", "Morgan", "Riley", "Quinn", "Avery", "Reese", "Kai"]
DATES = [
    "Leo",
    "Simone",
    "Arjun",
    "Camille",
    "Nate",
    "Yuki",
    "Mateo",
    "Freya",
    "Ravi",
    "Ines",
    "Dmitri",
    "Olive",
    "Tobias",
    "Lila",
    "Emeka",
    "Greta",
    "Hamid",
    "Petra",
    "Silas",
    "Wren",
]
PET_NAMES = [
    "Pickle",
    "Biscuit",
    "Waffles",
    "Moose",
    "Pepper",
    "Noodle",
    "Ziggy",
    "Olive",
    "Turnip",
    "Bean",
    "Mango",
    "Scout",
    "Juniper",
    "Toast",
    "Pretzel",
    "Dumpling",
]
BREEDS = [
    "scruffy beagle mix",
    "three-legged greyhound",
    "tiny wire-haired dachshund",
    "goofy lab puppy",
    "shy border collie",
    "senior pug with one ear up",
    "husky with mismatched eyes",
    "wiggly corgi mix",
    "lanky pit bull mix",
    "fluffy samoyed",
]
CATS = [
    "grey tabby kitten",
    "one-eyed black kitten",
    "orange kitten with a crooked tail",
    "calico kitten",
    "tuxedo kitten",
    "fluffy white kitten",
]
STREETS = [
    "Route 9",
    "Maple Avenue",
    "Harbor Road",
    "Fifth Street",
    "Kingsley Lane",
    "Old Mill Road",
    "Cedar Street",
    "Station Road",
    "Water Street",
    "Linden Way",
]
CRAFTS = [
    "wheel-throwing pottery",
    "stained glass",
    "woodturning",
    "bookbinding",
    "life drawing",
    "silversmithing",
    "screen printing",
    "weaving",
    "watercolor",
    "furniture upholstery",
]
RACES = [
    "Riverside 10k",
    "Lakeshore Half",
    "Harbor Bridge Run",
    "Pine Hollow Trail 15k",
    "Turkey Trot 5k",
    "Canal Path Half",
    "Summit Sprint",
    "Foggy Bottom 10-miler",
]
FINISH = ["52 minutes", "1:58", "47 minutes flat", "2:04", "61 minutes", "1:49", "38 minutes"]
ALLERGENS = [
    "cashews",
    "sesame",
    "shellfish",
    "kiwi",
    "mustard seed",
    "buckwheat",
    "celery",
    "peanuts",
    "lupin flour",
    "mango skin",
]
BOOKS = [
    "Piranesi",
    "The Remains of the Day",
    "Circe",
    "Station Eleven",
    "A Gentleman in Moscow",
    "Klara and the Sun",
    "The Overstory",
    "Pachinko",
    "Middlemarch",
    "The Dispossessed",
]
CARS = [
    "Subaru Outback",
    "Honda Fit",
    "used Prius",
    "Mazda 3",
    "Ford Maverick pickup",
    "Kia Niro",
    "Volvo wagon",
    "Mini Cooper",
    "Toyota Tacoma",
    "Hyundai Kona",
]
COLORS = ["forest green", "bright orange", "silver", "navy", "cherry red", "white", "mustard"]
ROLES = [
    "senior designer",
    "team lead",
    "head nurse on the ward",
    "lead engineer",
    "store manager",
    "assistant principal",
    "senior analyst",
    "kitchen manager",
    "project coordinator",
    "head of support",
]
CITIES = [
    "Portland",
    "Denver",
    "Montreal",
    "Austin",
    "Edinburgh",
    "Lisbon",
    "Minneapolis",
    "Pittsburgh",
    "Asheville",
    "Tucson",
    "Halifax",
    "Madison",
]
BANDS = [
    "The Lumineers",
    "Khruangbin",
    "Phoebe Bridgers",
    "Vampire Weekend",
    "Big Thief",
    "The National",
    "Fleet Foxes",
    "Japanese Breakfast",
    "Bon Iver",
    "Alabama Shakes",
]
VENUES = [
    "the Fillmore",
    "an old theater downtown",
    "the amphitheater by the river",
    "a tiny club on the east side",
    "the county fairgrounds",
    "the Orpheum",
]
INJURIES = [
    ("ankle", "stepping off a curb wrong"),
    ("wrist", "catching myself on the ice"),
    ("knee", "twisting it at five-a-side"),
    ("shoulder", "lifting a couch up the stairs"),
    ("back", "pulling weeds for three hours"),
    ("thumb", "slamming it in the car door"),
]
TRIPS = [
    ("Iceland", "black sand beach"),
    ("the Dolomites", "hut at the top of the pass"),
    ("Kyoto", "bamboo grove at dawn"),
    ("Oaxaca", "mezcal farm in the hills"),
    ("the Scottish Highlands", "ruined castle on the loch"),
    ("Crete", "gorge hike"),
    ("Vancouver Island", "old-growth forest"),
    ("Morocco", "night in the desert camp"),
    ("Patagonia", "glacier boat tour"),
    ("Vietnam", "limestone bay by kayak"),
]
VEGGIES = ["tomatoes", "snap peas", "zucchini", "garlic", "kale", "peppers", "strawberries"]
INSTRUMENTS = ["cello", "banjo", "trumpet", "ukulele", "upright bass", "accordion", "clarinet"]
ORGS = [
    "food bank on Grant Street",
    "animal shelter",
    "library's literacy program",
    "community fridge project",
    "river cleanup crew",
    "refugee welcome center",
]
DISHES = [
    "spinach pie",
    "pozole",
    "jollof rice",
    "lasagna with nutmeg",
    "pierogi",
    "dal makhani",
    "banana bread",
    "tamales",
    "biryani",
    "shepherd's pie",
]
REPAIRS = [
    "radiator that clanked all night",
    "leaking skylight",
    "broken buzzer",
    "shower that only ran cold",
    "window that wouldn't close",
    "oven door hinge",
]
CERTS = [
    "CPA",
    "PMP",
    "nursing board",
    "bar",
    "AWS architect",
    "sommelier level one",
    "real estate license",
    "Spanish B2",
]
GIFTS = [
    "a vintage record player",
    "a pottery wheel",
    "a weekend at a cabin",
    "a film camera",
    "a pair of climbing shoes",
    "a telescope",
    "a cast iron dutch oven",
    "a kayak",
]
SHOWS = [
    "Severance",
    "The Bear",
    "Slow Horses",
    "Shogun",
    "Derry Girls",
    "Reservation Dogs",
    "Succession",
    "Only Murders in the Building",
    "Detectorists",
    "Blue Eye Samurai",
]
ITEMS = [
    ("laptop", "train"),
    ("wallet", "bus"),
    ("sketchbook", "ferry"),
    ("phone", "tram"),
    ("glasses", "subway"),
    ("backpack", "airport shuttle"),
]
BABIES = ["Hazel", "Otto", "June", "Milo", "Ada", "Ezra", "Luna", "Felix", "Ruby", "Arlo"]
TATTOOS = ["fern", "lighthouse", "tiny moon", "swallow", "mountain range", "koi", "bee"]
CUISINES = [
    ("Ethiopian", "injera with lentil stew"),
    ("Georgian", "cheese bread"),
    ("Peruvian", "ceviche"),
    ("Sichuan", "mapo tofu"),
    ("Lebanese", "mezze platter"),
    ("Korean", "kimchi stew"),
    ("Burmese", "tea leaf salad"),
]
COMPANIES = [
    "Lumenfield",
    "Brightwater Labs",
    "Kestrel Foods",
    "Northwind Health",
    "Oakline",
    "Parcelpoint",
    "Tidewell",
    "Greyhaven Studio",
    "Copperleaf",
    "Driftwood Media",
    "Halcyon Bank",
    "Mosaic Schools",
]
JOBS = [
    "doing UX research",
    "writing backend code",
    "running the front desk",
    "managing payroll",
    "teaching eighth grade science",
    "doing logistics",
    "answering support tickets",
    "designing packaging",
    "editing video",
    "working on the night shift",
]
HOODS = [
    "Riverside",
    "Old Town",
    "the Heights",
    "Mill District",
    "Eastgate",
    "Linden Park",
    "Harbor View",
    "Southside",
    "the Flats",
    "Elm Hollow",
]
PAINT = [
    ("farmers market", "a heron"),
    ("holiday craft fair", "the harbor"),
    ("art walk", "an orchard"),
    ("street fair", "an old barn"),
    ("cafe show", "a sunflower field"),
]


@dataclass
class Fact:
    """Lines a speaker says in one session, with the questions they can answer."""

    owner: str
    lines: list[str]  # evidence line first, then topical follow-ups (no answer)
    topic: str
    ask: str | None = None  # single-line question
    when: str | None = None  # "when" question
    key: str = ""  # groups facts of one arc (multi-session / changing facts)
    session: int = -1
    line_no: int = -1  # 1-based line of the evidence in the note, set when written


@dataclass
class Conversation:
    a: str
    b: str
    sessions: list[list[tuple[str, str]]] = field(default_factory=list)
    dates: list[date] = field(default_factory=list)
    facts: list[Fact] = field(default_factory=list)


# --- generic chat: greetings, reactions, small talk, closings -----------------------------

GREETINGS = [
    "Hey {you}! How's your week going?",
    "Hi {you}, long time no talk!",
    "Morning {you}!",
    "{you}! I have so much to tell you.",
    "Hey, you around? I need a distraction.",
    "Hi hi. Did you survive the week?",
    "Hello from my couch, I'm finally off work.",
    "Okay I'm back, sorry I disappeared for a bit.",
    "Hey you, what's new?",
    "Evening! Got a minute to catch up?",
    "Hey, are you free to chat for a bit?",
    "Happy Friday {you}!",
    "Ugh, what a day. Hi.",
    "Guess who finally has a free evening.",
]
GREET_BACK = [
    "Hey! Always. What's up?",
    "Hi! It's been a minute, tell me everything.",
    "Barely surviving, but hi!",
    "Perfect timing, I was just making tea.",
    "Hey! Busy but good. You first.",
    "I'm here! What's going on?",
    "Haha hi, I was about to message you.",
    "Hello! My week has been a blur honestly.",
    "Yes please, distract me from this laundry pile.",
    "Hey hey, good to hear from you.",
]
REACTIONS = [
    "No way, that's amazing!",
    "Oh wow, how did that happen?",
    "That's huge, congrats!",
    "Wait, seriously? Tell me more.",
    "Ha, that sounds exactly like you.",
    "Oh no, I'm sorry, that sounds rough.",
    "I love that for you.",
    "That's so cool.",
    "Honestly that made my day.",
    "Okay I'm a little jealous.",
    "Good for you, seriously.",
    "That sounds stressful but kind of exciting too.",
    "Oh I had no idea!",
    "Wow, big news.",
    "You never cease to surprise me.",
    "Classic. Of course it went like that.",
    "Did not see that coming at all.",
    "Oh that's lovely.",
    "How are you feeling about it?",
    "Wait, since when?",
    "Haha amazing.",
    "Oof, that's a lot.",
    "So proud of you!",
]
SMALL_TALK = [
    (
        "It's been raining for what feels like a week straight here.",
        "Same, my shoes have not been dry since Tuesday.",
    ),
    (
        "I finally cleaned out the fridge, there were things in there from another era.",
        "Brave of you. I just close the door quickly and hope.",
    ),
    ("Work has been nonstop, I had six meetings yesterday.", "Six? That should be illegal."),
    (
        "I've been trying to go to bed earlier, it's not working.",
        "Same, I keep saying one more episode and then it's 1am.",
    ),
    (
        "Made a huge pot of soup on Sunday and I'm still eating it.",
        "Soup season is the best season.",
    ),
    ("My neighbor has started learning the drums. At 7am.", "Oh no. That's a war crime."),
    (
        "I reorganized my whole closet this weekend, very satisfying.",
        "I need you to come do mine next.",
    ),
    (
        "The heat has been unbearable, I'm living in front of the fan.",
        "I bought a second fan yesterday, no regrets.",
    ),
    ("I tried to bake bread and it came out like a brick.", "Every first loaf is a brick."),
    ("My phone screen cracked again, third time this year.", "Have you considered a case?"),
    (
        "I went to the dentist today, no cavities, I'm thrilled.",
        "Look at you, a responsible adult.",
    ),
    ("Been listening to a lot of old jazz records lately.", "Nice, any favorites?"),
    (
        "Traffic was awful this morning, took me an hour to go five miles.",
        "That's why I never leave the house.",
    ),
    ("I've been doing a puzzle, a thousand pieces of sky.", "That sounds like torture."),
    ("Our office coffee machine broke and morale has collapsed.", "A true tragedy."),
    ("Spent the whole Saturday doing laundry and errands.", "The glamorous life."),
    (
        "I keep forgetting to water my plants, two of them look very sad.",
        "Plants are forgiving, mostly.",
    ),
    (
        "There's a new bakery on my corner and I've been three times this week.",
        "Three times is a relationship.",
    ),
    (
        "My mom called to ask how to send a photo, we were on the phone for forty minutes.",
        "That's love though.",
    ),
    ("I tried meditating again, lasted four minutes.", "Four minutes is a start!"),
    (
        "We had a power outage last night so I read by candlelight like a Victorian.",
        "Honestly that sounds kind of nice.",
    ),
    (
        "I watched a documentary about octopuses and now I think about them constantly.",
        "They're so smart it's unsettling.",
    ),
    (
        "The internet at home keeps dropping, I've restarted the router a hundred times.",
        "Have you tried yelling at it?",
    ),
    (
        "I've been drinking way too much coffee, I can hear colors.",
        "Maybe switch to decaf after noon?",
    ),
    ("Finally booked a dentist appointment I've been avoiding for a year.", "Proud of you."),
    (
        "I went to a trivia night and we came in second to last.",
        "Second to last is still not last!",
    ),
    ("My sleep schedule is a disaster lately.", "Mine too. We should start a club."),
    ("Bought a new plant, a fiddle leaf fig, it already hates me.", "They're so dramatic."),
    (
        "I rearranged the living room and now I keep walking into the couch.",
        "Muscle memory is real.",
    ),
    ("Had the best tacos from a food truck for lunch.", "Now I'm hungry, thanks."),
    ("The weather finally turned, it actually feels like spring.", "Finally! I'm so ready."),
    (
        "I'm trying to cut back on screen time, it's going badly.",
        "Same, I'm typing this on my phone.",
    ),
    ("There was a fox in my backyard this morning, just sitting there.", "That's magical."),
    ("I got a parking ticket for being two minutes late.", "The meter people are ruthless."),
    ("Spent all evening trying to fix a squeaky door.", "Did you win?"),
    ("I've started journaling again, a page a night.", "That's a nice habit."),
]
CLOSINGS = [
    ("Okay, I have to run, talk soon!", "Talk soon! Take care."),
    ("I should get some sleep, early start tomorrow.", "Sleep well!"),
    ("Dinner's ready, gotta go. Miss you!", "Miss you too, enjoy dinner."),
    ("Alright, back to work for me.", "Good luck, catch up later."),
    ("Let's chat again this weekend?", "Definitely, text me."),
    ("Okay that's enough procrastinating for me. Bye!", "Bye! This was fun."),
]


def _fmt(text: str, slots: dict[str, str]) -> str:
    return text.format(**slots)


def _single_facts(rng: random.Random, me: str, you: str) -> list[Fact]:
    """One-line facts of one speaker (each with a single and often a 'when' question)."""
    s: dict[str, str] = {
        "me": me,
        "you": you,
        "pet": rng.choice(PET_NAMES),
        "breed": rng.choice(BREEDS),
        "street": rng.choice(STREETS),
        "craft": rng.choice(CRAFTS),
        "race": rng.choice(RACES),
        "finish": rng.choice(FINISH),
        "food": rng.choice(ALLERGENS),
        "book": rng.choice(BOOKS),
        "car": rng.choice(CARS),
        "color": rng.choice(COLORS),
        "role": rng.choice(ROLES),
        "sib": rng.choice(SIBLINGS),
        "city": rng.choice(CITIES),
        "band": rng.choice(BANDS),
        "venue": rng.choice(VENUES),
        "veg": rng.choice(VEGGIES),
        "instrument": rng.choice(INSTRUMENTS),
        "org": rng.choice(ORGS),
        "dish": rng.choice(DISHES),
        "repair": rng.choice(REPAIRS),
        "cert": rng.choice(CERTS),
        "partner": rng.choice(PARTNERS),
        "gift": rng.choice(GIFTS),
        "show": rng.choice(SHOWS),
        "baby": rng.choice(BABIES),
        "tattoo": rng.choice(TATTOOS),
        "cousin": rng.choice(COUSINS),
    }
    body, cause = rng.choice(INJURIES)
    place, sight = rng.choice(TRIPS)
    item, transit = rng.choice(ITEMS)
    cuisine, plate = rng.choice(CUISINES)
    market, subject = rng.choice(PAINT)
    s.update(
        body=body,
        cause=cause,
        place=place,
        sight=sight,
        item=item,
        transit=transit,
        cuisine=cuisine,
        plate=plate,
        market=market,
        subject=subject,
        n=str(rng.randint(3, 9)),
        vineyard_town=rng.choice(CITIES),
    )
    t = [
        (
            "pets",
            [
                "We finally brought home a {breed} from the rescue on {street}. I'm calling him {pet}.",
                "He already chewed through a charging cable and one of my slippers.",
                "Walks at 6am are my life now.",
            ],
            "What name did {me} give the dog they adopted?",
            "When did {me} get a dog?",
        ),
        (
            "classes",
            [
                "I signed up for a {craft} course at the community center, Tuesday nights for ten weeks.",
                "First session is next week, I bought an apron and everything.",
            ],
            "What kind of class did {me} enroll in?",
            "When did {me} sign up for evening lessons?",
        ),
        (
            "running",
            [
                "Ran the {race} on Saturday and finished in {finish}. My legs are jelly.",
                "The last mile was all uphill, whoever planned that route is a villain.",
            ],
            "What was {me}'s finishing time in the {race}?",
            "When did {me} do the {race}?",
        ),
        (
            "health",
            [
                "Turns out the hives were from {food}, the allergist did the scratch test and it lit up.",
                "So I'm reading every label now like a detective.",
            ],
            "What food does {me} react badly to?",
            "When did {me} find out what was causing the hives?",
        ),
        (
            "books",
            [
                "Our book club picked {book} for next month, I'm about a third of the way in.",
                "I keep reading it on my lunch break instead of eating.",
            ],
            "Which novel is {me}'s reading group doing?",
            None,
        ),
        (
            "cars",
            [
                "Traded in the old hatchback, I'm driving a {color} {car} now. Still smells like new plastic.",
                "I keep parking it far away from everyone so nobody dings the doors.",
            ],
            "What vehicle did {me} buy?",
            "When did {me} get a new ride?",
        ),
        (
            "work",
            [
                "They made me {role} on Monday, so I get my own team of {n} people now.",
                "Which mostly means more meetings, but the raise is nice.",
            ],
            "What is {me}'s new title at work?",
            "When did {me} get promoted?",
        ),
        (
            "family",
            [
                "{sib} packed everything into a van and drove to {city}, she's subletting near the university.",
                "The apartment is tiny but she says the light is great.",
            ],
            "Where did {me}'s sister relocate to?",
            "When did {sib} leave town?",
        ),
        (
            "music",
            [
                "Saw {band} at {venue} last night, they closed with a twelve-minute jam.",
                "My ears are still ringing but it was worth it.",
            ],
            "Which group did {me} see perform live?",
            "When did {me} go to the {band} show?",
        ),
        (
            "health",
            [
                "I hurt my {body} {cause}, the doctor says six weeks in a brace.",
                "Typing with one hand is a whole new skill.",
            ],
            "Which part of {me}'s body got injured?",
            "When did {me} get hurt?",
        ),
        (
            "travel",
            [
                "Just got back from {place}! The {sight} was the best part of the whole trip.",
                "I took about nine hundred photos, I'll send you the good ones.",
            ],
            "Where did {me} go on holiday?",
            "When did {me} come back from vacation?",
        ),
        (
            "garden",
            [
                "The {veg} finally came up in the raised bed, I counted {n} sprouts this morning.",
                "I check on them every day like a nervous parent.",
            ],
            "What is {me} growing in the backyard?",
            None,
        ),
        (
            "music",
            [
                "I bought a secondhand {instrument} off a neighbor and I've been practicing scales every night.",
                "The neighbors have been very patient so far.",
            ],
            "What instrument is {me} learning to play?",
            "When did {me} start learning music?",
        ),
        (
            "volunteering",
            [
                "Did my first shift at the {org} on Sunday, four hours of sorting donations.",
                "I'm going to go every other week I think.",
            ],
            "Where does {me} give their time for free?",
            "When did {me} start volunteering?",
        ),
        (
            "cooking",
            [
                "Made my grandmother's {dish} for the potluck and the pan came back completely empty.",
                "Three people asked for the recipe, I said it's a family secret.",
            ],
            "Which dish did {me} cook that everyone loved?",
            None,
        ),
        (
            "home",
            [
                "The landlord finally fixed the {repair}, only took three weeks of emails.",
                "I'm almost sad, I'd gotten used to complaining about it.",
            ],
            "What repair in the apartment did {me} wait weeks for?",
            None,
        ),
        (
            "work",
            [
                "I passed the {cert} exam! Studied every lunch break for two months.",
                "Going to sleep for a week now.",
            ],
            "Which certification did {me} earn?",
            "When did {me} pass the big exam?",
        ),
        (
            "family",
            [
                "{partner} surprised me with {gift} for my birthday, I actually teared up.",
                "They'd been planning it since spring apparently.",
            ],
            "What present did {me} get from {partner}?",
            "When was {me}'s birthday?",
        ),
        (
            "tv",
            [
                "I'm hooked on {show}, I watched six episodes in one sitting.",
                "No spoilers please, I'm only halfway through.",
            ],
            "What series has {me} been bingeing?",
            None,
        ),
        (
            "mishaps",
            [
                "I left my {item} on the {transit}, someone turned it in two days later.",
                "Faith in humanity restored, honestly.",
            ],
            "What did {me} lose and get back?",
            "When did {me} misplace something on public transport?",
        ),
        (
            "family",
            [
                "{sib} had the baby! A little girl, {baby}, seven pounds and very loud.",
                "I'm officially an aunt, I already bought way too many tiny socks.",
            ],
            "What is the name of {me}'s niece?",
            "When was {me}'s niece born?",
        ),
        (
            "style",
            [
                "I got a small {tattoo} tattoo on my forearm, my mom hasn't seen it yet.",
                "It hurt less than I expected, like a cat scratching.",
            ],
            "What design did {me} get inked?",
            "When did {me} get the new ink?",
        ),
        (
            "food",
            [
                "Tried that {cuisine} place on {street}, the {plate} was unreal.",
                "We should go together next time you're in town.",
            ],
            "What cuisine was the new restaurant {me} tried?",
            None,
        ),
        (
            "art",
            [
                "Sold my first painting at the {market}, a small watercolor of {subject}!",
                "A stranger paid real money for something I made, I'm still in shock.",
            ],
            "What was the subject of the artwork {me} sold?",
            "When did {me} first sell a painting?",
        ),
        (
            "family",
            [
                "{cousin}'s wedding was at a vineyard outside {vineyard_town}, I cried during the vows.",
                "The dance floor was chaos in the best way.",
            ],
            "Where did {cousin} get married?",
            "When was {cousin}'s wedding?",
        ),
    ]
    facts = []
    for topic, lines, ask, when in t:
        facts.append(
            Fact(
                me,
                [_fmt(x, s) for x in lines],
                topic,
                _fmt(ask, s),
                _fmt(when, s) if when else None,
            )
        )
    return facts


def _arcs(rng: random.Random, me: str) -> list[tuple[str, list[Fact], str, str | None]]:
    """Facts that change or accumulate across sessions: (key, facts in order, multi-session
    question, question about the current value or None)."""
    c1, c2 = rng.sample(COMPANIES, 2)
    j1, j2 = rng.sample(JOBS, 2)
    h1, h2 = rng.sample(HOODS, 2)
    d1, d2 = rng.sample(DATES, 2)
    r1, r2 = rng.sample(RACES, 2)
    cat, catname = rng.choice(CATS), rng.choice(PET_NAMES)
    breed, dogname = rng.choice(BREEDS), rng.choice(PET_NAMES)
    while dogname == catname:
        dogname = rng.choice(PET_NAMES)
    t1, t2 = rng.sample(TRIPS, 2)
    arcs = [
        (
            "job",
            [
                Fact(
                    me,
                    [
                        f"First week at {c1} done, I'm {j1} there and the people seem kind.",
                        "The commute is long but I can read on the train.",
                    ],
                    "work",
                ),
                Fact(
                    me,
                    [
                        f"I handed in my notice at {c1}. Starting at {c2} next month, {j2}.",
                        "It felt weird saying goodbye, but it was time.",
                    ],
                    "work",
                ),
            ],
            f"Which two employers has {me} mentioned working for?",
            f"Which company does {me} work for now?",
        ),
        (
            "home",
            [
                Fact(
                    me,
                    [
                        f"Signed the lease on a place in {h1}, it has a tiny balcony and a bathtub.",
                        "Moving day is going to be a nightmare with all my books.",
                    ],
                    "home",
                ),
                Fact(
                    me,
                    [
                        f"We're leaving {h1}, we bought a little house over in {h2}!",
                        "It needs work, but it has a yard.",
                    ],
                    "home",
                ),
            ],
            f"Which neighborhoods has {me} lived in during these chats?",
            f"Which part of town does {me} live in these days?",
        ),
        (
            "dating",
            [
                Fact(
                    me,
                    [
                        f"Went on a third date with {d1}, we met at the climbing gym.",
                        "Trying not to get my hopes up too fast.",
                    ],
                    "dating",
                ),
                Fact(
                    me,
                    [
                        f"{d1} and I called it off, it was mutual and honestly fine.",
                        "Back to cooking for one, which I don't mind.",
                    ],
                    "dating",
                ),
                Fact(
                    me,
                    [
                        f"So I've been seeing someone new, {d2}. It's early but it feels easy.",
                        "We spent all Sunday at the flea market.",
                    ],
                    "dating",
                ),
            ],
            f"Who are the people {me} has gone out with?",
            f"Who is {me} romantically involved with now?",
        ),
        (
            "pets",
            [
                Fact(
                    me,
                    [
                        f"We finally brought home a {breed} from the shelter, his name is {dogname}.",
                        "He's already learned where the treats live.",
                    ],
                    "pets",
                ),
                Fact(
                    me,
                    [
                        f"Don't judge me, I also took in a {cat}. {catname} rules the house already.",
                        "The two of them are slowly becoming friends.",
                    ],
                    "pets",
                ),
            ],
            f"What animals live with {me}? Give their names.",
            None,
        ),
        (
            "races",
            [
                Fact(
                    me,
                    [
                        f"Did the {r1} this morning, my first ever race with a number on my shirt!",
                        "I was so nervous I tied my shoes four times.",
                    ],
                    "running",
                ),
                Fact(
                    me,
                    [
                        f"Finished the {r2}, longer than anything I've done, and I didn't walk once.",
                        "My toenails have opinions about it.",
                    ],
                    "running",
                ),
            ],
            f"Which events has {me} run in?",
            None,
        ),
        (
            "trips",
            [
                Fact(
                    me,
                    [
                        f"Booked flights to {t1[0]} for the spring, I can't stop looking at photos of the {t1[1]}.",
                        "I'm making a spreadsheet of every cafe within ten miles.",
                    ],
                    "travel",
                ),
                Fact(
                    me,
                    [
                        f"Back from {t2[0]}, the {t2[1]} was unreal. Already planning the next one.",
                        "Jet lag is destroying me though.",
                    ],
                    "travel",
                ),
            ],
            f"Which destinations has {me} flown to or planned a trip to?",
            None,
        ),
    ]
    return [(key, facts, multi, current) for key, facts, multi, current in arcs]


def _open_facts(me: str) -> list[tuple[Fact, str]]:
    """Lines that answer an open-ended question only by inference."""
    pairs = [
        (
            "Nothing beats being up on a ridge at sunrise, I'd live on the trail if I could.",
            f"Would {me} enjoy a weekend in the mountains?",
            "outdoors",
        ),
        (
            "I'm up at five every day, I love the quiet before anyone else is awake.",
            f"Is {me} more of an early bird or a night owl?",
            "routine",
        ),
        (
            "My thesis was on soil bacteria, two years of petri dishes and a very smelly lab.",
            f"What might {me} have studied in school?",
            "school",
        ),
        (
            "Cats make my eyes swell shut within minutes, I have to take pills just to visit my aunt.",
            f"Would {me} be comfortable staying at a house with a cat?",
            "health",
        ),
        (
            "The noise downtown wears me out, someday I want a farmhouse with a long gravel driveway.",
            f"Does {me} prefer city life or the countryside?",
            "home",
        ),
        (
            "I commute on two wheels every day, rain or shine, it's the best part of my morning.",
            f"Would {me} support adding more bike lanes?",
            "routine",
        ),
        (
            "After a big party I need a whole day alone on the couch to recharge.",
            f"Is {me} an introvert or an extrovert?",
            "routine",
        ),
        (
            "I redid all the plumbing in my parents' bathroom myself last summer.",
            f"Could {me} help fix a leaky faucet?",
            "home",
        ),
        (
            "Honestly I'd rather eat cereal for dinner than spend an hour in a kitchen.",
            f"Does {me} enjoy cooking?",
            "cooking",
        ),
        (
            "I've kept every ticket stub from every show since I was fifteen, three shoeboxes full.",
            f"Is {me} sentimental about keeping things?",
            "music",
        ),
        (
            "My grandmother taught me to read the tide tables, I still check them before every swim.",
            f"Is {me} likely to be a strong swimmer?",
            "outdoors",
        ),
        (
            "I always volunteer to plan the group trips, spreadsheets and color codes and all.",
            f"Is {me} an organized person?",
            "travel",
        ),
    ]
    return [(Fact(me, [line], topic), question) for line, question, topic in pairs]


# Other topical lines that mention a subject without answering anything about it.
DISTRACT = {
    "pets": [
        "The dog park was packed today, so many puppies.",
        "Pets are so much work but worth it.",
        "My neighbor's dog barks at every leaf that moves.",
    ],
    "work": [
        "My manager scheduled a meeting about meetings.",
        "Payday can't come soon enough.",
        "Someone microwaved fish in the office kitchen again.",
    ],
    "running": [
        "My running shoes are falling apart, I need new ones.",
        "I went for a jog but mostly walked, it counts.",
    ],
    "health": [
        "I've been trying to drink more water, it's harder than it sounds.",
        "Flu season is hitting my whole office.",
    ],
    "travel": ["I'm dying to go somewhere warm this winter.", "Airports make me so anxious."],
    "family": [
        "My family group chat is pure chaos today.",
        "My aunt keeps sending me chain emails.",
    ],
    "home": ["The rent went up again, unbelievable.", "I want to paint the kitchen yellow."],
    "music": [
        "I made a new playlist for the car, it's all 90s songs.",
        "Concert tickets cost so much now.",
    ],
    "cooking": [
        "I burned the rice again, I don't know how.",
        "I've been meal prepping on Sundays.",
    ],
    "dating": [
        "Dating apps are exhausting honestly.",
        "My friend set me up once and it was a disaster.",
    ],
    "outdoors": ["It was too cold to go outside all weekend.", "The park by me finally reopened."],
    "routine": [
        "I've been trying a new morning routine, it lasted two days.",
        "My alarm clock and I are not on speaking terms.",
    ],
    "school": [
        "I miss being a student sometimes, but not the exams.",
        "I found my old yearbooks in a box.",
    ],
}


def _follow_up(rng: random.Random, fact: Fact) -> str:
    """A later mention of a fact's topic that does not hold its answer."""
    pool = DISTRACT.get(fact.topic) or [line for lines in DISTRACT.values() for line in lines]
    return rng.choice(pool)


def _conversation(
    rng: random.Random, number: int, a: str, b: str
) -> tuple[Conversation, list[dict]]:
    n_sessions = rng.randint(20, 30)
    start = date(2026, 1, 3) + timedelta(days=rng.randint(0, 20))
    dates, day = [], start
    for _ in range(n_sessions):
        dates.append(day)
        day += timedelta(days=rng.randint(4, 13))
    conv = Conversation(a, b, dates=dates)

    # Pick the facts whose questions are asked, by kind (see KIND_COUNTS).
    counts = {"multi": 3 + (number < 2), "when": 2 + (number < 5), "open": 1 + (number < 2)}
    counts["single"] = QUESTIONS_PER_CONVERSATION - sum(counts.values())
    # Each kind of event happens to one of the two, never both (the same wording twice).
    singles = [
        x if rng.random() < 0.5 else y
        for x, y in zip(_single_facts(rng, a, b), _single_facts(rng, b, a), strict=True)
    ]
    rng.shuffle(singles)
    arcs = _arcs(rng, a) + _arcs(rng, b)
    rng.shuffle(arcs)
    opens = [
        x if rng.random() < 0.5 else y for x, y in zip(_open_facts(a), _open_facts(b), strict=True)
    ]
    rng.shuffle(opens)

    questions: list[dict] = []
    placed: list[Fact] = []  # every fact told somewhere, asked about or not
    # Arcs: spread their facts over increasing sessions; some give a multi question, some a
    # question about the current value (single kind), the rest are distractors.
    n_multi = counts["multi"]
    current_questions = 0
    for i, (key, facts, multi_q, current_q) in enumerate(arcs[:7]):
        cuts = sorted(rng.sample(range(1, n_sessions - 1), len(facts)))
        for fact, where in zip(facts, cuts, strict=True):
            fact.session, fact.key = where, f"{key}:{fact.owner}"
            placed.append(fact)
        if i < n_multi:
            questions.append({"kind": "multi", "question": multi_q, "evidence": facts})
        elif current_q and current_questions < 2:
            current_questions += 1
            questions.append({"kind": "single", "question": current_q, "evidence": [facts[-1]]})
    # A one-off event on a topic an arc of the same person covers would answer the arc's
    # questions too (a second trip for "where did X go on holiday?", a third race for "which
    # events has X run in?") without being their evidence: such events are left out.
    free = [
        s
        for s in singles
        if not any(
            p.topic == s.topic and p.owner == s.owner and p.topic in ARC_TOPICS for p in placed
        )
    ]
    with_when = [f for f in free if f.when]
    for fact in with_when[: counts["when"]]:
        questions.append({"kind": "when", "question": fact.when, "evidence": [fact]})
    rest = [f for f in free if f not in with_when[: counts["when"]]]
    need_single = counts["single"] - current_questions
    for fact in rest[:need_single]:
        questions.append({"kind": "single", "question": fact.ask, "evidence": [fact]})
    for fact, question in opens[: counts["open"]]:
        questions.append({"kind": "open", "question": question, "evidence": [fact]})
    # Told but never asked about: more distractors of the same shapes.
    extra = rest[need_single : need_single + 8] + [
        f for f, _ in opens[counts["open"] : counts["open"] + 2]
    ]
    for q in questions:
        for fact in q["evidence"]:
            if fact.session < 0:
                fact.session = rng.randrange(n_sessions)
                placed.append(fact)
    for fact in extra:
        fact.session = rng.randrange(n_sessions)
        placed.append(fact)
    conv.facts = placed

    for number_s in range(n_sessions):
        conv.sessions.append(
            _session(rng, conv, number_s, [f for f in placed if f.session == number_s])
        )
    out = []
    for q in questions:
        out.append(
            {
                "conversation": number,
                "kind": q["kind"],
                "question": q["question"],
                "evidence": [{"session": f.session, "line": f.line_no} for f in q["evidence"]],
            }
        )
    return conv, out


def _session(
    rng: random.Random, conv: Conversation, number: int, facts: list[Fact]
) -> list[tuple[str, str]]:
    """About 20-28 turns: greeting, the session's facts among small talk, a closing."""
    lines: list[tuple[str, str]] = []
    first = rng.choice([conv.a, conv.b])
    other = conv.b if first == conv.a else conv.a
    lines.append((first, rng.choice(GREETINGS).format(you=other)))
    lines.append((other, rng.choice(GREET_BACK)))
    target = rng.randint(18, 26)
    blocks: list[list[tuple[str, str, Fact | None]]] = []
    for fact in facts:
        you = conv.b if fact.owner == conv.a else conv.a
        block: list[tuple[str, str, Fact | None]] = [(fact.owner, fact.lines[0], fact)]
        block.append((you, rng.choice(REACTIONS), None))
        for extra in fact.lines[1:]:
            block.append((fact.owner, extra, None))
            if rng.random() < 0.6:
                block.append((you, rng.choice(REACTIONS), None))
        blocks.append(block)
    # Callbacks to facts told in earlier sessions: the topic again, without the answer.
    earlier = [f for f in conv.facts if 0 <= f.session < number]
    for fact in rng.sample(earlier, min(len(earlier), rng.randint(1, 2))):
        you = conv.b if fact.owner == conv.a else conv.a
        blocks.append(
            [
                (you, f"How's everything going with the {fact.topic} stuff?", None),
                (fact.owner, _follow_up(rng, fact), None),
            ]
        )
    size = sum(len(b) for b in blocks) + 4
    talk = rng.sample(SMALL_TALK, len(SMALL_TALK))
    while size < target and talk:
        one, two = talk.pop()
        speaker = rng.choice([conv.a, conv.b])
        reply = conv.b if speaker == conv.a else conv.a
        blocks.append([(speaker, one, None), (reply, two, None)])
        size += 2
    rng.shuffle(blocks)
    for block in blocks:
        for speaker, text, fact in block:
            lines.append((speaker, text))
            if fact is not None:
                fact.line_no = len(lines)
    closer = rng.choice([conv.a, conv.b])
    bye, bye_back = rng.choice(CLOSINGS)
    lines.append((closer, bye))
    lines.append((conv.b if closer == conv.a else conv.a, bye_back))
    return lines


def build(seed: int = 18) -> dict[str, Any]:
    """The benchmark: {"conversations": [{speakers, sessions: [{date, lines}]}], "questions"}."""
    rng = random.Random(seed)
    names = rng.sample(NAMES, 2 * CONVERSATIONS)
    conversations, questions = [], []
    for number in range(CONVERSATIONS):
        a, b = names[2 * number], names[2 * number + 1]
        conv, asked = _conversation(rng, number, a, b)
        conversations.append(
            {
                "speakers": [a, b],
                "sessions": [
                    {"date": d.isoformat(), "lines": [list(x) for x in s]}
                    for d, s in zip(conv.dates, conv.sessions, strict=True)
                ],
            }
        )
        questions.extend(asked)
    return {"conversations": conversations, "questions": questions}


if __name__ == "__main__":
    import json
    import sys
    from collections import Counter

    data = build()
    turns = [sum(len(s["lines"]) for s in c["sessions"]) for c in data["conversations"]]
    sessions = [len(c["sessions"]) for c in data["conversations"]]
    print(f"turns per conversation {turns}, sessions {sessions}", file=sys.stderr)
    print(Counter(q["kind"] for q in data["questions"]), file=sys.stderr)
    if "--json" in sys.argv:
        json.dump(data, sys.stdout, indent=1, ensure_ascii=False)
