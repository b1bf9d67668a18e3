"""When is a recalled block likely to help? The cheap checks in front of and behind the search.

Auto-recall (gateway/pipeline/auto_recall.py) used to decide by one number, the message's
cosine with a hit. The local embedder's cosines are compressed (unrelated text scores about
0.75, an answer 0.82-0.89), so one threshold let through a block for one in nine questions
asked in a workspace that could not answer them, and "still alive?" recalled a lorem-ipsum
chunk. Two checks that cost microseconds narrow it:

- **The message has something to look up** (`Message.worth_searching`): at least
  `MIN_CONTENT_WORDS` words that are neither function words ("what", "the", "und") nor small
  talk ("thanks", "lol", "good night", "merci"), in a few languages. "ok", "👍", "still
  alive?" and "gute Nacht!" have none, so they are not even searched (no index opened, no
  query embedded).
- **The hit is about what was asked** (`Message.names_agree`, `Message.topic_agrees`): when
  the message names someone or something (a capitalised word inside a sentence: "Jana",
  "Lofoten"; not months or days, which every dated heading has), the text shown must
  mention one of those names: a passage about another person's support group scores a
  cosine as high as one about the person asked about, and the name tells them apart. A hit
  that also shares a topic word with the message (the keyword side agreeing with the
  vector side) is trusted at a slightly lower cosine (auto_recall.AGREEMENT_MARGIN).

Words are compared by a short prefix (`STEM_CHARS`) so "painting" meets "paints" and
"Caroline's" meets "Caroline" without a stemmer per language; Chinese and Japanese runs are
taken whole to decide whether to search (a run that is not small talk is worth it) and by
their pairs of characters (the word index's CJK bigrams) to agree with a hit.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property, lru_cache

from memory.text import cjk_bigrams

MIN_CONTENT_WORDS = 2
STEM_CHARS = 5

# Letters (any script, with inner apostrophes and hyphens) or digits; CJK runs separately.
_WORD = re.compile(r"[^\W\d_](?:[^\W_]|['’-](?=[^\W\d_]))*|\d+(?:[.,:/-]\d+)*")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]+")
_SENTENCE_END = re.compile(r"[.!?…。！？:\n]")


def _wordlist(text: str) -> frozenset[str]:
    """A word list written as text (easier to read and extend than a literal)."""
    return frozenset(text.split())


# Function words: they carry no topic. English first (the local model's best language), then
# German, French, Spanish, Italian, Portuguese and Dutch, the languages people here write in.
STOP_WORDS = _wordlist("""
a about above after again against all also am an and any anything are aren't as at be
because been before being below between both but by can can't could couldn't did didn't do
does doesn't doing don't down during each go else ever every few for from further get gets got
had hadn't has hasn't have haven't having he he'd he'll he's her here here's hers herself him
himself his how how's i i'd i'll i'm i've if in into is isn't it it's its itself just know let
let's like ma make me might mine more most much must mustn't my myself need no nor not now of
off often on once one only or other ought our ours ourselves out over own please really said
same say says shall shan't she she'd she'll she's should shouldn't so some something still such
than that that's the their theirs them themselves then there there's these they they'd they'll
they're they've thing things think this those though through to too under until up upon us
very want was wasn't we we'd we'll we're we've were weren't what what's whatever when when's
where where's whether which while who who's whom whose why why's will with won't would wouldn't
yet you you'd you'll you're you've your yours yourself yourselves
aber alle als also am an auch auf aus bei bin bis bist da damit dann das dass dein deine dem
den denn der des die dies diese dir doch du durch ein eine einem einen einer es etwas für
gibt hab habe haben hast hat hatte ich ihr im in ist ja jetzt kann kannst kein keine mal man
mein meine mich mir mit nach nicht noch nur ob oder schon sehr sein sich sie sind so über um
und uns unser von vor war was wann warum wer wie wir wird wo zu zum zur
au aux avec ce ces comment dans de des du elle en est et eu il je la le les leur lui ma mais me
mes moi mon ne nos notre nous on ou où par pas pour qu que quel quelle qui quoi sa se ses son
sur ta te tes toi ton tu un une vos votre vous y
al algo como con cuál cuando cuándo de del dónde el ella en es esta está este esto hay la las
le lo los me mi mis muy no nos para pero por qué que quién se si sin su sus te tengo tu tú un
una uno y ya yo
che chi ci come cosa di dove è gli il io lei lo ma mi nel non per perché quando questo sei sono
ti tu una
ao com da do em eu não os para quando que se sou um uma você
een het ik je jij niet of op te van wat wie zijn
""")

# Small talk: greetings, thanks, assent, laughter, farewells and "are you there?", which ask
# memory for nothing. Words only; a message of them alone is not searched.
SMALL_TALK = _wordlist("""
hi hello hey heya hiya yo howdy morning evening afternoon night nite goodnight gn gm day
thanks thank thx ty tysm cheers appreciate appreciated welcome np
ok okay okey k kk alright right sure yes yeah yep yup no nope nah fine cool nice great good
awesome perfect amazing wow lovely excellent sweet neat indeed agreed understood gotcha noted
lot mate sounds anyone everyone
lol lmao rofl haha hahaha hehe heh hah xd omg wtf hmm hmmm umm uh oh ah aha
bye goodbye later cya see soon take care ttyl gtg night
alive there awake around busy working online back
how's going doing up sup wassup whats
sorry oops welcome bless congrats congratulations
hallo moin servus tschüss tschüs ciao danke dankeschön bitte gut gute guten nacht morgen abend
tag super klar genau okidoki alles
bonjour bonsoir salut coucou merci beaucoup bonne nuit bien oui non ça va
hola buenas buenos días noches tardes gracias muchas vale bueno sí adiós chao
ciao buongiorno buonanotte buonasera grazie mille prego
olá oi obrigado obrigada boa noite tchau
hoi dag dank bedankt goedemorgen goedenacht
привет спасибо пока ок да нет спокойной ночи доброе утро
""")
# Months and days are capitalised but name no one: every dated note heading has them.
CALENDAR_WORDS = _wordlist("""
january february march april may june july august september october november december
monday tuesday wednesday thursday friday saturday sunday christmas easter
januar februar märz juni juli oktober dezember montag dienstag mittwoch donnerstag freitag
samstag sonntag ostern weihnachten
janvier février mars avril mai juin juillet août septembre octobre novembre décembre lundi
mardi mercredi jeudi vendredi samedi dimanche noël pâques
enero febrero marzo abril mayo junio julio agosto septiembre octubre noviembre diciembre
lunes martes miércoles jueves viernes sábado domingo navidad
""")
# Chinese, Japanese and Korean small talk, matched as whole runs.
SMALL_TALK_RUNS = _wordlist("""
你好 您好 谢谢 谢谢你 多谢 晚安 早上好 早安 再见 好的 好 哈哈 哈哈哈 嗯 在吗 在不在 没事
こんにちは こんばんは おはよう おはようございます ありがとう ありがとうございます おやすみ
おやすみなさい さようなら はい うん いいね 了解 草
안녕 안녕하세요 감사합니다 고마워 잘자 네 응 ㅋㅋ ㅋㅋㅋ
""")
# Chinese pairs of characters too common to say what a message is about.
CJK_STOP_PAIRS = _wordlist(
    "我的 你的 什么 么时 时候 怎么 这个 那个 一个 我们 你们 是不 不是 有没 没有"
)


def _words(text: str) -> list[re.Match[str]]:
    """The Latin, Cyrillic, Greek... words of `text` (CJK runs are taken apart, by _CJK)."""
    return list(_WORD.finditer(_CJK.sub(" ", text)))


def stem(word: str) -> str:
    """A crude language-free stem: the word's first STEM_CHARS letters, lower case."""
    return word.lower().replace("’", "'").split("'")[0][:STEM_CHARS]


@dataclass(frozen=True)
class Message:
    """The person's message as the gate sees it: its content words and its names."""

    text: str

    @cached_property
    def content(self) -> tuple[str, ...]:
        """The words that could name a topic: not function words, not small talk, and not
        a single Latin letter; CJK runs that are not small talk nor one character repeated."""
        words: list[str] = []
        for match in _words(self.text):
            word = match.group().lower().replace("’", "'")
            if word in STOP_WORDS or word in SMALL_TALK:
                continue
            if word.isdigit() or len(word) >= 2:
                words.append(word)
        words.extend(
            run
            for run in _CJK.findall(self.text)
            if run not in SMALL_TALK_RUNS and len(set(run)) > 1
        )  # not "哈哈哈哈"
        return tuple(words)

    @cached_property
    def names(self) -> frozenset[str]:
        """Stems of capitalised words inside a sentence ("when is Jana's birthday?"): a name
        the answer must mention. The first word of a sentence, "I", months and days are not
        names."""
        found: set[str] = set()
        previous_end = 0
        text = _CJK.sub(" ", self.text)
        for match in _WORD.finditer(text):
            word = match.group()
            first = previous_end == 0 or bool(
                _SENTENCE_END.search(text[previous_end : match.start()])
            )
            lower = word.lower()
            if (
                not first
                and word[0].isupper()
                and len(word) >= 2
                and lower not in STOP_WORDS
                and lower not in SMALL_TALK
                and lower not in CALENDAR_WORDS
            ):
                found.add(stem(word))
            previous_end = match.end()
        return frozenset(found)

    @property
    def worth_searching(self) -> bool:
        """Enough to look up: small talk, acknowledgements and emoji are not, nor numbers
        alone ("what's 15% of 80?")."""
        if any(_CJK.fullmatch(word) for word in self.content):
            return True
        return len(self.content) >= MIN_CONTENT_WORDS and any(
            not word.isdigit() for word in self.content
        )

    def names_agree(self, shown: str) -> bool:
        """Does the text a hit shows mention one of the message's names (if it has any)?"""
        return not self.names or bool(self.names & _stems(shown))

    def topic_agrees(self, shown: str) -> bool:
        """Does the text a hit shows share a content word with the message, other than its
        names (by stem; CJK runs by their pairs of characters)? A message of names only
        ("When was Jon in Paris?") agrees through them."""
        stems = _stems(shown)
        topic = [word for word in self.content if stem(word) not in self.names]
        if not topic:
            return bool(self.names & stems)
        return any(_mentions(word, stems, shown) for word in topic)


@lru_cache(maxsize=16)  # a hit's text is read by names_agree and then topic_agrees
def _stems(text: str) -> frozenset[str]:
    return frozenset(stem(match.group()) for match in _words(text))


def _mentions(word: str, stems: frozenset[str], shown: str) -> bool:
    if _CJK.fullmatch(word):
        return any(pair in shown for pair in cjk_bigrams(word) if pair not in CJK_STOP_PAIRS)
    return stem(word) in stems
