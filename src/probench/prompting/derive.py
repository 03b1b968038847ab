"""The paper's three formulations of an operator's query, derived offline and deterministically.

- ``orig``: the query as typed (stripped; an explicit categorical form removed);
- ``tmpl``: exactly the paper's ``"a photo of " + orig`` (§III-C);
- ``cat``: a concise class-level noun phrase that keeps the intended target and drops
  attributes, relations, state, affordance and negation ("the red fire extinguisher
  mounted next to the door" -> "fire extinguisher", "a chair without armrests" -> "chair").

The categorical form comes from hand-written rules (no model, nothing downloaded): a
command prefix ("find", "show me") and determiners go, the noun phrase ends at the first
relation, relative clause, participle, affordance or negation ("on", "next to", "that",
"mounted", "for", "without", ...), and inside it colour, size, material, state, shape,
position and other attribute words go; what remains (at most the last three words, a
compound noun such as "fire extinguisher" kept whole) is the head noun phrase. Parts keep
their whole ("the handle of the door" -> "door handle"); collectives and containers of a
kind take their complement ("a pile of bricks" -> "bricks"). When no noun phrase is left
("something to sit on") the derivation falls back to the text as typed and says so
(:attr:`Formulations.fallback`); it never returns an empty prompt.

The operator can give the categorical form explicitly, which wins over the derived one:
``ORIG => CAT`` (e.g. ``red fire extinguisher by the door => fire extinguisher``), in a
``prompt`` message (``;`` between prompts) and in the ``prompts`` parameter alike. An empty
side of ``=>`` is an :class:`ExplicitFormError` (one line).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

from probench.errors import UsageError
from probench.vocabulary import EXPLICIT_SEPARATOR as _EXPLICIT_SEPARATOR
from probench.vocabulary import TEMPLATE_PREFIX

__all__ = ["EXPLICIT_SEPARATOR", "ExplicitFormError", "Formulations", "derive", "derive_cat",
           "split_explicit"]

EXPLICIT_SEPARATOR = _EXPLICIT_SEPARATOR  # the one spelling lives in vocabulary


class ExplicitFormError(UsageError):
    """``ORIG => CAT`` with an empty side (or more than one ``=>``)."""


@dataclass(frozen=True)
class Formulations:
    """The three forms of one operator query (``probench prompt --json`` prints them)."""

    orig: str
    cat: str
    tmpl: str
    explicit: bool = False  # cat was given by the operator (``ORIG => CAT``)
    fallback: bool = False  # no noun phrase found: cat is orig as typed

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def _words(*groups: str) -> frozenset[str]:
    return frozenset(w for g in groups for w in g.split())


# A command the operator may put before the target ("find the ...", "show me all ...").
_COMMAND = re.compile(
    r"^(?:please\s+)?(?:(?:can|could)\s+you\s+)?"
    r"(?:find|detect|locate|show(?:\s+me)?|highlight|track|segment|spot|identify|mark|point\s+(?:to|at)|"
    r"look\s+for|search\s+for|where\s+(?:is|are))\s+(?:all\s+(?:of\s+)?|every\s+|any\s+)?",
    re.IGNORECASE,
)

_DETERMINERS = _words(
    "a an the this that these those some any each every all both either neither another other",
    "my your our their its his her one two three four five six seven eight nine ten several many",
    "few more most no only single pair-of lone",
)
# Materials: attributes before a noun ("a glass door"), the head when nothing follows ("an empty glass").
_MATERIALS = _words(
    "metal wood plastic steel glass concrete stone rubber leather paper cardboard iron aluminium "
    "aluminum copper brass bronze fabric cotton wool marble granite brick tin chrome bamboo",
)
# Words that end a noun phrase (what follows is a relation, clause, affordance, negation).
_BOUNDARY = _words(
    # relations
    "on in at by near next beside besides behind under underneath beneath below above over "
    "between among amongst along across against around inside outside within into onto upon "
    "of from to toward towards through past beyond opposite alongside atop via throughout off",
    # relative clauses, conjunctions, comparison
    "that which who whom whose where when while whereas and or but nor than as like unlike",
    # negation, affordance, accompaniment
    "not without except excluding no none never for with having",
    # auxiliaries and copulas
    "is are was were be been being has have had can could will would should may might must does do did",
    # pronouns: a clause's subject ("the part of the cup you hold")
    "you i we they he she it me us him them",
)
# Past participles and -ing forms that, after the head noun, start a reduced clause.
_IRREGULAR_PARTICIPLES = _words(
    "left held worn made built seen hung kept set put shown torn fallen lit stuck bent spilt "
    "caught found laid thrown sat stood lain driven ridden written drawn grown known hidden "
    "frozen broken stolen chosen spun sunk",
)
_ATTRIBUTES = _words(
    # colours and tones
    "red green blue yellow orange purple violet pink brown black white grey gray silver golden gold "
    "beige tan maroon navy teal turquoise cyan magenta crimson olive khaki cream ivory dark "
    "pale bright vivid colourful colorful multicoloured multicolored striped spotted checkered "
    "transparent translucent opaque reddish greenish bluish yellowish whitish blackish",
    # size, shape, number-like
    "big small large little tiny huge giant enormous tall short long wide narrow thick thin "
    "round square rectangular circular cylindrical flat tall-ish medium mini oversized massive "
    "high low deep shallow heavy lightweight compact full-size full-sized half",
    # material words that are no nouns themselves
    "metallic wooden stainless ceramic woolen rusty rusted galvanized galvanised woven wicker",
    # state and condition
    "open opened closed shut broken damaged cracked dirty clean empty full new old used worn-out "
    "wet dry hot cold warm frozen burning burnt lit unlit on-off active inactive running stopped "
    "parked moving stationary standing sitting lying hanging fallen overturned upright tilted "
    "bent loose tight folded unfolded empty-looking abandoned discarded unused damaged dusty muddy "
    "leaking smoking flashing blinking glowing illuminated dim dark-coloured faded rotten fresh "
    "blurred blurry ripe unripe half-open half-closed wrecked dented collapsed flooded",
    # position and order
    "left right top bottom front back rear upper lower middle central centre center inner outer "
    "nearest closest farthest furthest leftmost rightmost topmost uppermost lowermost bottommost "
    "first second third fourth last next-to-last far near nearby distant",
    # superlatives, quality, other attributes
    "biggest largest smallest tallest shortest longest widest highest lowest brightest darkest "
    "oldest newest heaviest lightest cleanest dirtiest ancient modern antique vintage typical "
    "standard regular ordinary usual strange unusual weird odd common plain simple fancy "
    "beautiful ugly pretty nice shiny glossy matte rough smooth soft hard sharp blunt striped "
    "wild domestic young elderly adult male female human wooden-looking portable handheld "
    "hand-held electric electrical industrial commercial residential public private official "
    "yellow-and-black red-and-white black-and-white",
    # degree adverbs
    "very quite rather slightly partially partly fully completely totally mostly somewhat really "
    "almost nearly extremely fairly",
)
# Nouns ending in -ing / -ed that are not participles.
_NOUNS_ING_ED = _words(
    "ceiling building railing ring string wing painting drawing clothing lighting piping tubing "
    "scaffolding wiring siding opening crossing landing sling spring king sibling awning bedding "
    "housing fitting coupling bearing casing mooring dwelling fencing flooring roofing cladding "
    "parking dining living sewing washing swimming shopping filling stuffing frosting icing "
    "pudding seasoning offering wedding morning evening thing something anything everything "
    "nothing ding sing bed shed sled seed weed reed steed shred speed feed need red",
)
# A head that names a part: "the X of the Y" -> "Y X"; "the Y's X" -> "Y X".
_PARTS = _words(
    "handle lid cap wheel wheels tire tires tyre tyres leg legs arm arms armrest armrests seat "
    "backrest screen button buttons knob knobs nose eye eyes ear ears head tail mouth hand hands "
    "foot feet face roof blade blades switch plug spout pedal pedals mirror mirrors headlight "
    "headlights valve nozzle hose trigger door doors window windows edge corner lens keyboard "
    "display panel hood trunk bumper hinge latch lock strap straps zipper collar sleeve pocket "
    "sole heel lace laces tip stem petal petals leaf leaves branch branches trunk beak wing wings "
    "paw paws horn horns antenna antennas cable cord label tag sticker logo badge gauge dial "
    "spokes spoke chain propeller rotor fin fins frame base top bottom side",
)
# A head that stands for its complement: "a pile of bricks" -> "bricks".
_COLLECTIVES = _words(
    "pile piles stack stacks heap heaps bunch bunches group groups set sets row rows line lines "
    "pair pairs couple crowd cluster clusters collection bundle bundles roll rolls sheet sheets "
    "piece pieces kind type sort kinds types sorts part parts section portion lot lots number "
    "array series flock herd swarm batch",
    # a depiction stands for what it depicts ("a small model of the space shuttle")
    "model models replica miniature picture pictures image images photo photos photograph drawing "
    "painting poster",
)
# Heads that name nothing on their own: never a categorical form.
_GENERIC = _words(
    "something anything everything nothing thing things object objects item items stuff one ones "
    "someone somebody anyone anybody it them this that these those what which whatever "
    "place area region spot",
)
# Multi-word nouns whose first word would otherwise be dropped as an attribute.
_COMPOUNDS = (
    ("hard", "hat"), ("hard", "hats"), ("traffic", "light"), ("traffic", "lights"), ("first", "aid"),
    ("red", "light"), ("white", "board"), ("black", "board"), ("green", "house"), ("high", "chair"),
    ("hot", "dog"), ("light", "bulb"), ("light", "switch"), ("light", "fixture"), ("light", "pole"),
    ("stop", "sign"), ("wet", "floor"), ("dry", "erase"), ("top", "hat"), ("glass", "bottle"),
    ("paper", "towel"), ("paper", "cup"), ("rubber", "duck"), ("iron", "bar"), ("steel", "beam"),
    ("brick", "wall"), ("stone", "wall"), ("concrete", "mixer"), ("high", "visibility"),
    ("safety", "vest"), ("left", "luggage"),
)
_MAX_HEAD_WORDS = 3
_TOKEN = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9'\-]*[A-Za-z0-9])?|[,;:()]")


def split_explicit(text: str) -> tuple[str, str | None]:
    """``"red cup by the door => cup"`` -> ``("red cup by the door", "cup")``; text without
    ``=>`` -> ``(text, None)``. Both sides are stripped (the query is kept as typed, the
    categorical form has its whitespace collapsed); an empty side is an
    :class:`ExplicitFormError`."""
    if EXPLICIT_SEPARATOR not in text:
        return text.strip(), None
    parts = text.split(EXPLICIT_SEPARATOR)
    if len(parts) != 2:
        raise ExplicitFormError(f"more than one {EXPLICIT_SEPARATOR!r} in prompt {text[:60]!r}")
    orig, cat = parts[0].strip(), " ".join(parts[1].split())
    if not orig:
        raise ExplicitFormError(f"empty query before {EXPLICIT_SEPARATOR!r} in prompt {text[:60]!r}")
    if not cat:
        raise ExplicitFormError(f"empty categorical form after {EXPLICIT_SEPARATOR!r} in prompt "
                                f"{text[:60]!r} (write ORIG {EXPLICIT_SEPARATOR} CAT, or leave out "
                                f"{EXPLICIT_SEPARATOR})")
    return orig, cat


def derive(text: str) -> Formulations:
    """The three formulations of one operator prompt (``ORIG => CAT`` gives cat explicitly)."""
    orig, explicit = split_explicit(text)
    if explicit is not None:
        return Formulations(orig, explicit, TEMPLATE_PREFIX + orig, explicit=True)
    cat = derive_cat(orig)
    if cat is None:
        return Formulations(orig, orig, TEMPLATE_PREFIX + orig, fallback=True)
    return Formulations(orig, cat, TEMPLATE_PREFIX + orig)


def derive_cat(text: str) -> str | None:
    """The categorical noun phrase of a query, or None when the rules find none."""
    text = _COMMAND.sub("", " ".join(text.split()))
    tokens = _TOKEN.findall(text)
    head, rest = _noun_phrase(tokens)
    if not head:
        return None
    low = head[-1].lower()
    complement = rest[1:] if rest and rest[0].lower() == "of" else None
    if complement is not None and (low in _COLLECTIVES or low in _GENERIC) and len(head) == 1:
        inner, _ = _noun_phrase(complement)
        return " ".join(inner) if inner else None
    if complement is not None and low in _PARTS and len(head) == 1:
        inner, _ = _noun_phrase(complement)
        if inner and inner[-1].lower() not in _GENERIC:
            return " ".join([inner[-1], *head])
    if len(head) == 1 and low in _GENERIC:
        return None
    return " ".join(head)


def _is_participle(word: str) -> bool:
    w = word.lower()
    if w in _NOUNS_ING_ED or len(w) < 4:
        return False
    if w in _IRREGULAR_PARTICIPLES or w.endswith(("ing", "ed")):
        return True
    return w.startswith("un") and w[2:] in _IRREGULAR_PARTICIPLES  # "unmade", "unlit"


def _noun_phrase(tokens: list[str]) -> tuple[list[str], list[str]]:
    """(the head noun phrase, the tokens after the boundary that ended it)."""
    kept: list[str] = []
    before: list[str] = []  # the words kept before an attribute after them
    material: list[str] = []  # the last material word dropped: the head when nothing else is
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        low = tok.lower()
        nxt = tokens[i + 1].lower() if i + 1 < len(tokens) else ""
        if tok in ",;:()":
            if kept or before or material:
                return _trim(kept or before or material), tokens[i:]
            i += 1
            continue
        if (low, nxt) in _COMPOUNDS:
            kept.extend(tokens[i : i + 2])
            i += 2
            continue
        if low.endswith(("'s", "s'")) and len(low) > 2:  # a possessor: "the cat's eyes"
            base = tok[:-2] if low.endswith("'s") else tok[:-1]
            rest_head, rest = _noun_phrase(tokens[i + 1 :])
            if rest_head and rest_head[-1].lower() in _PARTS:
                return [base, *rest_head], rest
            if rest_head:
                return rest_head, rest
            kept = [base]
            i += 1
            continue
        if low in _BOUNDARY:
            if kept or before or material:
                return _trim(kept or before or material), tokens[i:]
            i += 1  # a leading "not", "no", "that": no head yet, skip it
            continue
        if kept and _is_participle(low):  # a reduced clause: "mounted next to", "leaking water"
            return _trim(kept), tokens[i:]
        if low in _MATERIALS:
            material = [tok]
        if low in _DETERMINERS or low in _ATTRIBUTES or low in _MATERIALS or low.isdigit() or _is_adverb(low):
            if kept:  # an attribute inside the phrase: the head is what follows it
                before, kept = kept, []
            i += 1
            continue
        if not kept and _is_participle(low) and low not in _NOUNS_ING_ED:
            i += 1  # a participle before the noun: "the flashing light", "a parked car"
            continue
        kept.append(tok)
        i += 1
    return _trim(kept or before or material), []


_NOUNS_LY = _words("assembly supply family jelly belly lily rally ally fly butterfly dragonfly trolly")


def _is_adverb(word: str) -> bool:
    return len(word) > 4 and word.endswith("ly") and word not in _NOUNS_LY


def _trim(kept: list[str]) -> list[str]:
    if len(kept) <= _MAX_HEAD_WORDS:
        return kept
    return kept[-_MAX_HEAD_WORDS:]
