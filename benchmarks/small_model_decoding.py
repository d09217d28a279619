"""Decoding settings for the bundled SmolLM2 on the small prompt: does greedy decoding, or a
logit bonus for the words of the memories (a "copy bias"), get the answer said more often
than the shipped sampling? (docs/answers.md, "100 questions from all five conversations".)

Each conversation's first ``--limit`` single-hop questions are recalled once, as
``small_prompt_layouts.py`` recalls them, laid out as the small prompt lays them out (the
memories in the system message), and put to the bundled model with each setting (64 tokens);
the reply is cleaned as a turn cleans it. Per setting: F1, *contained*, *in context* and
*said* (of those in context, the replies that hold the answer), as that script prints them.

    .venv/bin/python benchmarks/small_model_decoding.py --conversations conv-26 --limit 50
    .venv/bin/python benchmarks/small_model_decoding.py \\
        --conversations conv-30,conv-41,conv-42,conv-43 --limit 15 --settings shipped,bias1.5

The model samples (temperature 0.2, seed 1 here): a setting moves by a question or two from
run to run, so compare settings on the held-out conversations too.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np
from small_prompt_layouts import layout, recalled

from membot.eval.answer_scores import contained, locomo_f1
from membot.llm import BundledSmolLM2
from membot.llm.bundled import STOP
from membot.turn.artefacts import ReplyContext, clean_reply
from membot.turn.small_prompt import REPLY_TOKENS

SETTINGS: dict[str, dict[str, float]] = {
    "shipped": {"temperature": 0.2, "repeat_penalty": 1.2},
    "greedy": {"temperature": 0.0, "repeat_penalty": 1.2},
    "greedy-no-penalty": {"temperature": 0.0, "repeat_penalty": 1.0},
    "bias1": {"temperature": 0.2, "repeat_penalty": 1.2, "bias": 1.0},
    "bias1.5": {"temperature": 0.2, "repeat_penalty": 1.2, "bias": 1.5},
    "bias2": {"temperature": 0.2, "repeat_penalty": 1.2, "bias": 2.0},
}


def copy_bias(model: Any, text: str, bias: float) -> Any:
    """A llama.cpp logits processor adding ``bias`` to every token of ``text``."""
    from llama_cpp import LogitsProcessorList

    tokens = np.array(sorted(set(model.tokenize(text.encode(), add_bos=False, special=False))))

    def raise_tokens(_ids: np.ndarray, scores: np.ndarray) -> np.ndarray:
        scores[tokens] += bias
        return scores

    return LogitsProcessorList([raise_tokens])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", default="conv-26")
    parser.add_argument("--limit", type=int, default=50)
    parser.add_argument("--settings", default="shipped,greedy,greedy-no-penalty,bias1.5")
    args = parser.parse_args()
    questions = [found for conversation in args.conversations.split(",")
                 for found in recalled(conversation, args.limit)]  # fmt: skip
    model = BundledSmolLM2()._load()
    lay = layout(in_system=True)
    print("| setting | n | F1 | contained | in context | said, of in context | s |")
    print("|---|---|---|---|---|---|---|")
    for name in args.settings.split(","):
        options: dict[str, Any] = dict(SETTINGS[name])
        bias = options.pop("bias", 0.0)
        started, rows = time.perf_counter(), []
        for question, blocks in questions:
            messages, memories = lay(question.text, blocks)
            extra = {"logits_processor": copy_bias(model, memories, bias)} if bias else {}
            answer: Any = model.create_chat_completion(
                messages=messages, max_tokens=REPLY_TOKENS, stop=STOP, seed=1, **options, **extra
            )
            raw = answer["choices"][0]["message"]["content"] or ""
            speakers = {line.speaker for block in blocks for line in block.lines if line.speaker}
            context = ReplyContext.of("AI", "HUMAN", speakers, question.text)
            reply = clean_reply(raw, context).text
            rows.append((locomo_f1(reply, question.answer, 4),
                         contained(reply, question.answer, 4),
                         contained(memories, question.answer, 4)))  # fmt: skip
        in_context = [row for row in rows if row[2]]
        print(f"| {name} | {len(rows)} | {sum(row[0] for row in rows) / len(rows):.3f} | "
              f"{sum(row[1] for row in rows)} | {len(in_context)} | "
              f"{sum(row[1] for row in in_context)} | {time.perf_counter() - started:.0f} |",
              flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
