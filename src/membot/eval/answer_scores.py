"""Scoring a bot's reply against a benchmark's answer: LoCoMo's token F1, "answer contained",
and the LLM judges LongMemEval and the mem0 paper published.

Token F1 is LoCoMo's (``task_eval/evaluation.py`` of github.com/snap-research/locomo, branch
``code``): both texts normalised by its ``normalize_answer`` (commas dropped, lower case,
ASCII punctuation removed, the words a, an, the and *and* removed, spaces collapsed), each word
Porter-stemmed, then the F1 of the two bags of words. Per category as its
``eval_question_answering`` scores them: category 1 (multi-hop) splits the reply and the
answer on commas and averages, over the answer's parts, the best F1 of any part of the reply;
category 3 (open-domain) keeps the answer up to its first ``;``; category 5 (adversarial) is 1
when the reply says "no information available" or "not mentioned", else 0.

One difference: LoCoMo stems with NLTK's ``PorterStemmer``, whose default mode adds NLTK's own
extensions to Porter's algorithm; here Snowball's ``porter`` (Porter's original algorithm,
already a dependency for BM25) stems, so a few words (``dying``, ``generously``) stem apart.

"Contained" is ours: the normalised answer's words appear, in order and adjacent, among the
normalised words of a text (no stemming); for category 1 every comma-separated part must.
It is read on the reply and on the recalled context, which tells "memory did not find it"
from "the model did not say it".
"""

from __future__ import annotations

import json
import re
import string
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import snowballstemmer

from membot.llm import LLM

MULTI_HOP = 1
OPEN_DOMAIN = 3
ADVERSARIAL = 5
_PUNCTUATION = str.maketrans("", "", string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the|and)\b")


def normalize_answer(text: str) -> str:
    """LoCoMo's ``normalize_answer``, step for step."""
    text = text.replace(",", "").lower().translate(_PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


@lru_cache(maxsize=1)
def _stemmer() -> snowballstemmer.stemmer:
    return snowballstemmer.stemmer("porter")


def _stems(text: str) -> list[str]:
    stems: list[str] = _stemmer().stemWords(normalize_answer(text).split())  # untyped package
    return stems


def token_f1(prediction: str, gold: str) -> float:
    """LoCoMo's ``f1_score``: F1 of the stemmed, normalised words."""
    predicted, expected = _stems(prediction), _stems(gold)
    same = sum((Counter(predicted) & Counter(expected)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(predicted), same / len(expected)
    return 2 * precision * recall / (precision + recall)


def multi_answer_f1(prediction: str, gold: str) -> float:
    """LoCoMo's ``f1`` for answers that list several things (category 1)."""
    predictions = [part.strip() for part in prediction.split(",")]
    golds = [part.strip() for part in gold.split(",")]
    best = [max(token_f1(part, expected) for part in predictions) for expected in golds]
    return sum(best) / len(best)


def gold_text(answer: object, category: int | None = None) -> str:
    """The answer as LoCoMo's scorer reads it: a string, open-domain cut at its ``;``."""
    text = str(answer)
    return text.split(";")[0].strip() if category == OPEN_DOMAIN else text


def locomo_f1(reply: str, answer: object, category: int | None = None) -> float:
    """A reply's score by LoCoMo's rule for the question's category (None: plain F1)."""
    if category == ADVERSARIAL:
        said = reply.lower()
        return float("no information available" in said or "not mentioned" in said)
    gold = gold_text(answer, category)
    if category == MULTI_HOP:
        return float(multi_answer_f1(reply, gold))
    return token_f1(reply, gold)


def contained(text: str, answer: object, category: int | None = None) -> bool:
    """Whether the normalised answer (each comma-separated part, for category 1) appears in
    the normalised ``text`` as adjacent words. For category 5 (adversarial), whose answer is
    the trap, it is the category's F1 rule: the text says the thing was never mentioned."""
    if category == ADVERSARIAL:
        return bool(locomo_f1(text, answer, category))
    gold = gold_text(answer, category)
    parts = gold.split(",") if category == MULTI_HOP else [gold]
    words = f" {normalize_answer(text)} "
    needed = [normalize_answer(part) for part in parts]
    return bool([part for part in needed if part]) and all(
        f" {part} " in words for part in needed if part
    )


# -- LLM judges, with the prompts as the benchmarks published them ------------------------

# mem0's LoCoMo judge, ACCURACY_PROMPT of evaluation/metrics/llm_judge.py in
# github.com/mem0ai/mem0 (commit aae5989e7; the folder was later moved out of that repository),
# quoted as published, typographic quotes included. mem0 asks gpt-4o-mini at temperature 0
# with a JSON response format and counts label == "CORRECT".
LOCOMO_JUDGE_PROMPT = """
Your task is to label an answer to a question as ’CORRECT’ or ’WRONG’. You will be given the following data:
    (1) a question (posed by one user to another user), 
    (2) a ’gold’ (ground truth) answer, 
    (3) a generated answer
which you will score as CORRECT/WRONG.

The point of the question is to ask about something one user should know about the other user based on their prior conversations.
The gold answer will usually be a concise and short answer that includes the referenced topic, for example:
Question: Do you remember what I got the last time I went to Hawaii?
Gold answer: A shell necklace
The generated answer might be much longer, but you should be generous with your grading - as long as it touches on the same topic as the gold answer, it should be counted as CORRECT. 

For time related questions, the gold answer will be a specific date, month, year, etc. The generated answer might be much longer or use relative time references (like "last Tuesday" or "next month"), but you should be generous with your grading - as long as it refers to the same date or time period as the gold answer, it should be counted as CORRECT. Even if the format differs (e.g., "May 7th" vs "7 May"), consider it CORRECT if it's the same date.

Now it's time for the real question:
Question: {question}
Gold answer: {gold_answer}
Generated answer: {generated_answer}

First, provide a short (one sentence) explanation of your reasoning, then finish with CORRECT or WRONG. 
Do NOT include both CORRECT and WRONG in your response, or it will break the evaluation script.

Just return the label CORRECT or WRONG in a json format with the key as "label".
"""  # noqa: E501, W291

# LongMemEval's judge, get_anscheck_prompt of src/evaluation/evaluate_qa.py in
# github.com/xiaowu0162/LongMemEval (commit 9e0b455), quoted as published: one template per
# question type, another for abstention questions (``_abs``). The official run asks gpt-4o at
# temperature 0 for at most 10 tokens and counts a reply containing "yes".
# fmt: off
_LONGMEMEVAL_START = "I will give you a question, a correct answer, and a response from a model. Please answer yes if the response contains the correct answer. Otherwise, answer no. If the response is equivalent to the correct answer or contains all the intermediate steps to get the correct answer, you should also answer yes. If the response only contains a subset of the information required by the answer, answer no. "  # noqa: E501
_LONGMEMEVAL_END = "\n\nQuestion: {}\n\nCorrect Answer: {}\n\nModel Response: {}\n\nIs the model response correct? Answer yes or no only."  # noqa: E501
LONGMEMEVAL_JUDGE_PROMPTS = {
    "single-session-user": _LONGMEMEVAL_START + _LONGMEMEVAL_END,
    "single-session-assistant": _LONGMEMEVAL_START + _LONGMEMEVAL_END,
    "multi-session": _LONGMEMEVAL_START + _LONGMEMEVAL_END,
    "temporal-reasoning": _LONGMEMEVAL_START + "In addition, do not penalize off-by-one errors for the number of days. If the question asks for the number of days/weeks/months, etc., and the model makes off-by-one errors (e.g., predicting 19 days when the answer is 18), the model's response is still correct. " + _LONGMEMEVAL_END,  # noqa: E501
    "knowledge-update": "I will give you a question, a correct answer, and a response from a model. Please answer yes if the response contains the correct answer. Otherwise, answer no. If the response contains some previous information along with an updated answer, the response should be considered as correct as long as the updated answer is the required answer." + _LONGMEMEVAL_END,  # noqa: E501
    "single-session-preference": "I will give you a question, a rubric for desired personalized response, and a response from a model. Please answer yes if the response satisfies the desired response. Otherwise, answer no. The model does not need to reflect all the points in the rubric. The response is correct as long as it recalls and utilizes the user's personal information correctly.\n\nQuestion: {}\n\nRubric: {}\n\nModel Response: {}\n\nIs the model response correct? Answer yes or no only.",  # noqa: E501
}
LONGMEMEVAL_ABSTENTION_PROMPT = "I will give you an unanswerable question, an explanation, and a response from a model. Please answer yes if the model correctly identifies the question as unanswerable. The model could say that the information is incomplete, or some other information is given but the asked information is not.\n\nQuestion: {}\n\nExplanation: {}\n\nModel Response: {}\n\nDoes the model correctly identify the question as unanswerable? Answer yes or no only."  # noqa: E501
# fmt: on

_LABEL_SCHEMA = {
    "type": "object",
    "properties": {"label": {"type": "string", "enum": ["CORRECT", "WRONG"]}},
    "required": ["label"],
}


@dataclass(frozen=True)
class Verdict:
    """A judge's decision and the text it gave for it."""

    correct: bool
    said: str


def judge_locomo(judge: LLM, question: str, answer: object, reply: str) -> Verdict:
    """mem0's LoCoMo judge: CORRECT or WRONG, asked for as JSON."""
    prompt = LOCOMO_JUDGE_PROMPT.format(
        question=question, gold_answer=answer, generated_answer=reply
    )
    said = judge.complete([{"role": "user", "content": prompt}], 256, schema=_LABEL_SCHEMA)
    return Verdict(_locomo_label(said) == "CORRECT", said)


def _locomo_label(said: str) -> str:
    """The ``label`` of the judge's JSON; a reply that is not JSON counts by its words, and
    only one that says CORRECT without WRONG counts as correct."""
    match = re.search(r"\{.*\}", said, re.DOTALL)
    if match:
        try:
            data = json.loads(match.group())
        except json.JSONDecodeError:
            data = None
        if isinstance(data, dict) and isinstance(data.get("label"), str):
            return str(data["label"]).strip().upper()
    return "CORRECT" if "CORRECT" in said and "WRONG" not in said else "WRONG"


def judge_longmemeval(
    judge: LLM, question_type: str, question: str, answer: object, reply: str, abstention: bool
) -> Verdict:
    """LongMemEval's judge for the question's type: correct when its reply says yes."""
    template: str | None
    if abstention:
        template = LONGMEMEVAL_ABSTENTION_PROMPT
    else:
        template = LONGMEMEVAL_JUDGE_PROMPTS.get(question_type)
    if template is None:
        known = ", ".join(LONGMEMEVAL_JUDGE_PROMPTS)
        raise ValueError(f"LongMemEval has no judge prompt for {question_type!r}: {known}")
    prompt = template.format(question, answer, reply)
    said = judge.complete([{"role": "user", "content": prompt}], 10)
    return Verdict("yes" in said.lower(), said)


def mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None
