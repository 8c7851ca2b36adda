"""A synthetic Yelp-style review set whose star rating depends on word order and context.

Every review is a few sentences about aspects of a restaurant (food, service, price, ambience). Each evaluative
clause carries a sentiment value; the star label comes from a weighted mean of those values, where

* negation flips and softens a word ("not great" is negative, "never disappointing" is positive),
  while "could not have been more helpful" is *strongly positive* despite its "not";
* intensifiers scale it ("extremely", "slightly");
* most sentences set two clauses of opposite mood against each other, and only their order and the word joining
  them say which one counts: the clause after "but", the main clause of "although" / "even though" and the
  "in the end" clause of "at first X, but in the end Y" weigh 1.85, the other clause 0.15. Both orders ("X, but Y" and
  "Y, even though X") are about equally common, so no word or word pair alone says which clause wins;
* things other people said or the menu promised weigh nothing, unless the writer confirms them.

So the same bag of words can belong to different labels (swap the clauses of a "but" sentence and a 5-star review
becomes a 1-star one), and a bag-of-n-grams model is clearly beaten by one that reads the sentence. About 7% of
the labels are moved one star away on purpose (label noise, as in real reviews). The generator uses only
`random.Random(seed)` and lists, so its output is byte-identical on every run.
"""
from __future__ import annotations

import os
import random
from dataclasses import dataclass
from pathlib import Path

from .yelp_format import write_yelp_csv

__all__ = ["SyntheticReview", "generate_reviews", "generate_splits", "score_to_stars", "LABEL_NOISE"]

LABEL_NOISE = 0.07  # probability that a stored label is one star away from the text's own rating

# --- vocabulary -----------------------------------------------------------------------------------------------
# Adjectives by tier: +2 very good, +1 good, 0 neutral, -1 poor, -2 very poor. Generic ones fit every aspect.
GENERIC = {
    2: ["amazing", "outstanding", "excellent", "fantastic", "superb", "wonderful", "phenomenal"],
    1: ["good", "nice", "solid", "pleasant", "enjoyable", "decent"],
    0: ["okay", "fine", "average", "alright", "ordinary"],
    -1: ["mediocre", "disappointing", "underwhelming", "forgettable", "lackluster"],
    -2: ["awful", "terrible", "horrible", "dreadful", "atrocious"],
}
SPECIFIC = {
    "food": {2: ["delicious", "perfectly cooked"], 1: ["tasty", "fresh"], 0: ["edible"],
             -1: ["bland", "greasy", "overcooked"], -2: ["inedible", "disgusting"]},
    "service": {2: ["attentive", "incredibly welcoming"], 1: ["friendly", "helpful", "quick"], 0: ["adequate"],
                -1: ["slow", "inattentive"], -2: ["rude", "hostile"]},
    "price": {2: ["a steal", "a bargain"], 1: ["reasonable", "fair"], 0: ["typical", "standard"],
              -1: ["steep", "pricey"], -2: ["a rip-off", "outrageous"]},
    "ambience": {2: ["gorgeous", "charming"], 1: ["cozy", "relaxing"], 0: ["plain"],
                 -1: ["noisy", "cramped"], -2: ["filthy", "deafening"]},
}
# (noun phrase, is_plural)
NOUNS = {
    "food": [("the food", False), ("the pasta", False), ("my burger", False), ("the tacos", True),
             ("the sushi", False), ("the steak", False), ("the fries", True), ("the soup", False),
             ("the dessert", False), ("the curry", False), ("the pizza", False), ("the noodles", True)],
    "service": [("the service", False), ("our server", False), ("the staff", False), ("the waiter", False),
                ("the bartender", False), ("the hostess", False), ("the manager", False)],
    "price": [("the prices", True), ("the bill", False), ("the menu prices", True), ("the wine list", False),
              ("the lunch special", False)],
    "ambience": [("the atmosphere", False), ("the decor", False), ("the music", False), ("the patio", False),
                 ("the dining room", False), ("the restrooms", True), ("the place", False)],
}
ASPECTS = ["food", "service", "price", "ambience"]
STRONG = ["extremely", "incredibly", "really", "truly", "absolutely", "very"]  # x1.5
SOFTENERS = ["very", "really", "particularly", "that", "especially"]  # after a negator: "not very good"
WEAK = ["somewhat", "slightly", "a bit", "fairly", "kind of"]  # x0.5
NEGATORS = ["not", "not at all", "hardly", "far from", "not exactly"]  # + "never" handled apart
NEGATED_VALUE = {2: -1.0, 1: -1.0, 0: -0.5, -1: 0.5, -2: 0.5}
NEVER_VALUE = {2: -1.5, 1: -1.0, 0: -0.5, -1: 1.0, -2: 1.5}  # "was never disappointing" -> good

# Closing remarks with their values; several contain a misleading word.
CLOSINGS = {
    2: ["I can't recommend it enough.", "I will definitely be back.", "Five stars, no question.",
        "Easily the best meal I've had this year.", "I wouldn't change a thing.", "Can't wait to come back."],
    1: ["I would come back.", "Worth a visit.", "Four stars from me.", "Not perfect, but I'd return.",
        "I wouldn't mind coming back."],
    0: ["Three stars.", "Nothing to write home about.", "Not bad, not great.", "It was fine for a quick bite.",
        "I have mixed feelings."],
    -1: ["Two stars.", "I probably won't return.", "I expected more.", "Not worth the hype.",
         "I wouldn't go out of my way for it."],
    -2: ["One star.", "Never again.", "Avoid this place.", "I would give zero stars if I could.",
         "I can't recommend it at all."],
}
FILLERS = [
    "We came here on a {day} night.", "We came here for {occasion}.", "I ordered the {dish}.",
    "My friend ordered the {dish}.", "We sat {seat}.", "We had a reservation for {n}.",
    "I had the {dish} and my partner had the {dish2}.", "Parking was on the street.",
    "This was our first visit.", "I have been here {times} times now.",
    "The {dish} sounded {adj} on the menu.", "My {relative} picked this place.",
    "The place was {busy} when we arrived.",
]
DISHES = ["pad thai", "ramen", "margherita pizza", "chicken tikka", "fish tacos", "caesar salad", "burrito",
          "pho", "club sandwich", "lasagna", "bibimbap", "falafel wrap", "cheesecake", "house special"]
FILL_WORDS = {
    "day": ["Monday", "Tuesday", "Friday", "Saturday", "Sunday"],
    "occasion": ["a birthday", "an anniversary", "a work lunch", "brunch", "a first date", "a quick dinner"],
    "seat": ["outside", "at the bar", "by the window", "in a booth", "near the kitchen"],
    "n": ["two", "four", "six"],
    "times": ["two", "three", "a few", "many"],
    "relative": ["sister", "brother", "boss", "roommate", "mom"],
    "busy": ["packed", "quiet", "half full", "empty"],
}
HEARSAY = ["My friends told me", "Online reviews said", "I had heard", "The menu promised", "A coworker warned me"]
CONFIRM = ["and it was true", "and they were right", "and that turned out to be accurate"]

STAR_TARGET = {1: -1.6, 2: -0.8, 3: 0.0, 4: 0.8, 5: 1.6}  # typical review score of each rating


def score_to_stars(score: float) -> int:
    """Map a weighted sentiment score (about -3..3) to 1..5 stars."""
    if score <= -1.15:
        return 1
    if score <= -0.4:
        return 2
    if score < 0.4:
        return 3
    if score < 1.15:
        return 4
    return 5


@dataclass(frozen=True)
class SyntheticReview:
    label: int  # 1..5 stars, the stored (possibly noisy) label
    text: str  # may contain real newlines; the CSV writer escapes them
    clean_label: int  # the rating the text itself implies


# --- clause builders --------------------------------------------------------------------------------------------
@dataclass
class _Clause:
    text: str
    value: float


def _capitalize(sentence: str) -> str:
    return sentence[:1].upper() + sentence[1:]


def _pick_tier(rng: random.Random, mood: float) -> int:
    """A tier near the review's mood, with some spread (reviews are rarely uniform)."""
    weights = [2.0 ** (-abs(tier - mood) * 1.6) for tier in (-2, -1, 0, 1, 2)]
    return rng.choices([-2, -1, 0, 1, 2], weights=weights)[0]


def _adjective(rng: random.Random, aspect: str, tier: int) -> str:
    return rng.choice(GENERIC[tier] + SPECIFIC[aspect][tier])


def _evaluative_clause(rng: random.Random, mood: float) -> _Clause:
    aspect = rng.choice(ASPECTS)
    noun, plural = rng.choice(NOUNS[aspect])
    be = "were" if plural else "was"
    wanted = _pick_tier(rng, mood)
    form = rng.random()
    if form < 0.30 and wanted != 0:
        # negation: choose the surface tier whose negation lands near the wanted value
        tier = rng.choice([2, 1]) if wanted < 0 else rng.choice([-1, -2])
        adjective = _adjective(rng, aspect, tier)
        if rng.random() < 0.3:
            value = NEVER_VALUE[tier]
            return _Clause(f"{noun} {be} never {adjective}", value)
        negator = rng.choice(NEGATORS)
        if rng.random() < 0.4:
            negator = {"not": "n't"}.get(negator, negator)
        if negator in ("not", "n't") and not adjective.startswith("a ") and rng.random() < 0.5:
            adjective = f"{rng.choice(SOFTENERS)} {adjective}"  # bigram "very good" now means the opposite
        text = f"{noun} {be}n't {adjective}" if negator == "n't" else f"{noun} {be} {negator} {adjective}"
        return _Clause(text, NEGATED_VALUE[tier])
    if form < 0.37 and abs(wanted) >= 1:
        # "could not have been more X": the "not" does not negate
        tier = 1 if wanted > 0 else -1
        adjective = rng.choice(SPECIFIC[aspect][tier] + GENERIC[tier])
        if adjective.startswith("a "):
            adjective = rng.choice(GENERIC[tier])
        return _Clause(f"{noun} could not have been more {adjective}", 2.0 * tier)
    if form < 0.42 and wanted >= 1:
        return _Clause(f"I have no complaints about {noun}", 1.0)
    if form < 0.46 and wanted <= -1:
        return _Clause(f"{noun} left a lot to be desired", -1.5)
    adjective = _adjective(rng, aspect, wanted)
    value = float(wanted)
    if wanted != 0 and not adjective.startswith("a ") and rng.random() < 0.4:
        if rng.random() < 0.5:
            adjective, value = f"{rng.choice(STRONG)} {adjective}", value * 1.5
        elif abs(wanted) == 1:
            adjective, value = f"{rng.choice(WEAK)} {adjective}", value * 0.5
    return _Clause(f"{noun} {be} {adjective}", value)


# --- review shape ---------------------------------------------------------------------------------------------
SENTENCES_PER_REVIEW = [1, 1, 2]  # judging sentences, drawn uniformly from this list
FILLERS_PER_REVIEW = [0, 1]  # neutral sentences
CLOSING_PROBABILITY = 0.05  # a closing remark ("Never again.") counts like a clause of its own
SINGLE_CLAUSE_PROBABILITY = 0.06  # sentences with one judging clause; the rest join two
OPPOSITE_MOOD_PROBABILITY = 0.95  # the second clause of a sentence swings against the review's mood
MAIN_WEIGHT, OTHER_WEIGHT = 1.85, 0.15  # the clause that wins a contrast, and the one it beats
# how two clauses are joined -> relative frequency. The main clause comes last in the first group and first in
# the second; the groups are about equally common, so "awful ," (an adjective ending the first clause) says
# nothing on its own about whether the awful clause counts.
SHAPES = [("but", 0.22), ("although_first", 0.08), ("first_then_end", 0.08),
          ("even_though", 0.14), ("although_last", 0.12), ("end_then_first", 0.08),
          ("and", 0.06), ("hearsay", 0.10), ("confirmed_hearsay", 0.02)]


def _sentence(rng: random.Random, mood: float) -> tuple[str, list[tuple[float, float]]]:
    """One sentence and its (weight, value) pairs."""
    main = _evaluative_clause(rng, mood)  # the clause that carries the sentence
    if rng.random() < SINGLE_CLAUSE_PROBABILITY:
        return _capitalize(main.text) + ".", [(1.0, main.value)]
    # the other clause usually swings the other way: in a contrast only word order says which one counts
    other = _evaluative_clause(rng, -mood if rng.random() < OPPOSITE_MOOD_PROBABILITY else mood)
    shape = rng.choices([name for name, _ in SHAPES], weights=[weight for _, weight in SHAPES])[0]
    main_pair, other_pair = (MAIN_WEIGHT, main.value), (OTHER_WEIGHT, other.value)
    if shape == "but":
        return _capitalize(f"{other.text}, but {main.text}."), [other_pair, main_pair]
    if shape == "although_first":
        return _capitalize(f"although {other.text}, {main.text}."), [other_pair, main_pair]
    if shape == "first_then_end":
        return _capitalize(f"at first {other.text}, but in the end {main.text}."), [other_pair, main_pair]
    if shape == "even_though":
        return _capitalize(f"{main.text}, even though {other.text}."), [main_pair, other_pair]
    if shape == "although_last":
        return _capitalize(f"{main.text}, although {other.text}."), [main_pair, other_pair]
    if shape == "end_then_first":
        return _capitalize(f"in the end {main.text}, though at first {other.text}."), [main_pair, other_pair]
    if shape == "and":
        return _capitalize(f"{main.text} and {other.text}."), [(1.0, main.value), (1.0, other.value)]
    hearsay = rng.choice(HEARSAY)
    if shape == "hearsay":
        return f"{hearsay} {other.text}, but honestly {main.text}.", [(0.0, other.value), (1.5, main.value)]
    return f"{hearsay} {main.text}, {rng.choice(CONFIRM)}.", [(1.0, main.value)]


def _filler(rng: random.Random) -> str:
    template = rng.choice(FILLERS)
    dish = rng.choice(DISHES)
    if rng.random() < 0.15:
        dish = f'"{dish}"'  # quotes exercise the CSV quoting
    words = {key: rng.choice(options) for key, options in FILL_WORDS.items()}
    adjective = rng.choice(GENERIC[2] + GENERIC[-2])
    return template.format(dish=dish, dish2=rng.choice(DISHES), adj=adjective, **words)


def _review_for(rng: random.Random, stars: int) -> tuple[str, float]:
    mood = STAR_TARGET[stars] + rng.uniform(-0.6, 0.6)
    sentences: list[str] = []
    weighted: list[tuple[float, float]] = []
    for _ in range(rng.choice(SENTENCES_PER_REVIEW)):
        sentence, pairs = _sentence(rng, mood)
        sentences.append(sentence)
        weighted.extend(pairs)
    for _ in range(rng.choice(FILLERS_PER_REVIEW)):
        sentences.insert(rng.randrange(len(sentences) + 1), _filler(rng))
    if rng.random() < CLOSING_PROBABILITY:
        closing_value = max(-2, min(2, round(mood + rng.uniform(-0.7, 0.7))))
        sentences.append(rng.choice(CLOSINGS[closing_value]))
        weighted.append((1.0, float(closing_value)))
    total_weight = sum(weight for weight, _ in weighted)
    score = sum(weight * value for weight, value in weighted) / total_weight
    separator_choices = [" ", " ", " ", " ", "\n", "\n\n"]
    text = sentences[0]
    for sentence in sentences[1:]:
        text += rng.choice(separator_choices) + sentence
    return text, score


def _noisy(rng: random.Random, stars: int) -> int:
    """The rating the text is written for: `stars`, or one star away with probability LABEL_NOISE."""
    if rng.random() >= LABEL_NOISE:
        return stars
    if stars == 1:
        return 2
    if stars == 5:
        return 4
    return stars + rng.choice([-1, 1])


def generate_reviews(count: int, seed: int, exclude: set[str] | None = None) -> list[SyntheticReview]:
    """`count` reviews with exactly balanced stored labels (as far as count allows), no duplicate texts."""
    if count < 0:
        raise ValueError(f"count must be >= 0, got {count}")
    rng = random.Random(seed)
    labels = [1 + i % 5 for i in range(count)]
    rng.shuffle(labels)
    seen = set(exclude or ())  # membership only; never iterated, so hash order plays no part
    reviews = []
    for stars in labels:
        clean = _noisy(rng, stars)
        while True:
            text, score = _review_for(rng, clean)
            if score_to_stars(score) == clean and text not in seen:
                break
        seen.add(text)
        reviews.append(SyntheticReview(label=stars, text=text, clean_label=clean))
    return reviews


def generate_splits(seed: int = 0, train_size: int = 8000, test_size: int = 2000):
    """(train, test) lists of SyntheticReview; the test texts never occur in train."""
    train = generate_reviews(train_size, seed=2 * seed)
    test = generate_reviews(test_size, seed=2 * seed + 1, exclude={review.text for review in train})
    return train, test


# --- writing the data set ---------------------------------------------------------------------------------------
README_MARKER = "SYNTHETIC DATA"

README_TEMPLATE = """# yelp_synthetic: {marker}, not real Yelp reviews

Every review in this folder was written by a program, `coursekit/data/synth.py`, not by a person, and no
business named in it exists. It is here so the course runs offline and fast on a laptop CPU. Results on it say
nothing about real Yelp reviews; use `python -m coursekit.data download yelp_review_full` for those.

Regenerate (byte-identical) with:

    python -m coursekit.data synthesize --seed {seed} --train {train_size} --test {test_size} --dest <folder>

## Format

Exactly the yelp_review_full CSV format: no header, two columns `"label","text"`, every field quoted, a quote in
a text doubled (`""`), labels 1..5 (stars), a line break inside a review stored as a literal backslash + n.
`coursekit.load_yelp("synthetic")` returns the labels as 0..4.

| split | reviews | per label |
|-------|---------|-----------|
| train.csv | {train_size} | {train_per_label} |
| test.csv | {test_size} | {test_per_label} |

No test text appears in train.

## How a rating is decided

Each review has one or two sentences about the food, the service, the prices or the ambience, plus an optional
neutral sentence (what was ordered, when) and, rarely, a closing remark. Each judging clause has a value from
-2 to +2; the rating comes from the weighted mean of these values:

- negation: "not great" counts as bad, "never disappointing" as good, "not very good" as bad, while
  "could not have been more helpful" is very good;
- intensifiers: "extremely" multiplies by 1.5, "slightly" by 0.5;
- contrast: most sentences join two clauses of opposite mood. In "X, but Y", "although X, Y", "Y, although X",
  "Y, even though X", "at first X, but in the end Y" and "in the end Y, though at first X" the clause Y weighs
  1.85 and X 0.15. The main clause comes first about as often as last, so only the order together with the
  joining word tells which clause decides the rating;
- hearsay: "Online reviews said X, but honestly Y" gives X no weight; "..., and they were right" keeps it;
- neutral sentences weigh nothing, even when they contain strong words ("the ramen sounded amazing on the menu").

So the same words in another order can mean another rating: a bag-of-words model is clearly beaten by one that
reads the sentence. About {noise_percent}% of the labels were moved one star away on purpose (label noise),
so even a perfect reader scores a little below 100%.
"""


def _per_label(reviews: list[SyntheticReview]) -> str:
    counts = [sum(1 for review in reviews if review.label == stars) for stars in range(1, 6)]
    return ", ".join(f"{stars}: {count}" for stars, count in zip(range(1, 6), counts))


def synthesize(dest, seed: int = 0, train_size: int = 8000, test_size: int = 2000, force: bool = False):
    """Write train.csv, test.csv and README.md of the synthetic set into `dest`; returns the three paths.

    Refuses to overwrite a train.csv/test.csv that is not a synthetic set written by this function (one whose
    folder has no README.md with the synthetic marker) unless force=True. Files are written to temporary names
    and renamed, so an interrupted run leaves the old files intact.
    """
    dest = Path(dest)
    existing = [dest / name for name in ("train.csv", "test.csv") if (dest / name).exists()]
    readme = dest / "README.md"
    ours = readme.is_file() and README_MARKER in readme.read_text(encoding="utf-8", errors="replace")
    if existing and not ours and not force:
        raise FileExistsError(
            f"{dest} already holds {', '.join(p.name for p in existing)} that this generator did not write; "
            "choose another --dest or pass --force to overwrite"
        )
    train, test = generate_splits(seed=seed, train_size=train_size, test_size=test_size)
    dest.mkdir(parents=True, exist_ok=True)
    readme_text = README_TEMPLATE.format(
        marker=README_MARKER, seed=seed, train_size=train_size, test_size=test_size,
        train_per_label=_per_label(train), test_per_label=_per_label(test), noise_percent=round(LABEL_NOISE * 100),
    )
    written = []
    for name, reviews in (("train.csv", train), ("test.csv", test), ("README.md", None)):
        final = dest / name
        partial = dest / f".{name}.partial"
        try:
            if reviews is None:
                partial.write_text(readme_text, encoding="utf-8", newline="\n")
            else:
                write_yelp_csv(partial, ((review.label, review.text) for review in reviews))
            os.replace(partial, final)
        finally:
            if partial.exists():
                partial.unlink()
        written.append(final)
    return written
