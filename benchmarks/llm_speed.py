"""Load time and generation speed of the bundled SmolLM2-135M-Instruct (Q4_1 GGUF).

Measures the runtime membot uses, llama-cpp-python; with ``--transformers`` also the
alternative that was weighed against it, transformers de-quantising the same GGUF file
(needs ``pip install accelerate gguf`` in the venv; membot itself does not).

    .venv/bin/python benchmarks/llm_speed.py [--transformers] [--tokens 64]
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from machine import announce

from membot.bundled import load_llama, smollm2_gguf_path

MESSAGES: list[Any] = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "My name is Alice and I work in logistics. Where do I work?"},
]


def llama_cpp(tokens: int) -> None:
    started = time.perf_counter()
    model = load_llama(smollm2_gguf_path(), n_ctx=4096)
    loaded = time.perf_counter() - started
    started = time.perf_counter()
    result: Any = model.create_chat_completion(
        messages=MESSAGES, max_tokens=tokens, temperature=0, repeat_penalty=1.2
    )
    elapsed = time.perf_counter() - started
    made = result["usage"]["completion_tokens"]
    print(f"llama.cpp     load {loaded:6.2f} s   {made / elapsed:6.1f} tokens/s ({made} tokens)")


def transformers(tokens: int) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = smollm2_gguf_path()
    started = time.perf_counter()
    tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name)
    loaded = time.perf_counter() - started
    encoded: Any = tokenizer.apply_chat_template(
        MESSAGES, add_generation_prompt=True, return_tensors="pt", return_dict=True
    )
    started = time.perf_counter()
    with torch.inference_mode():
        output = model.generate(encoded["input_ids"], max_new_tokens=tokens, do_sample=False)
    elapsed = time.perf_counter() - started
    made = output.shape[1] - encoded["input_ids"].shape[1]
    print(f"transformers  load {loaded:6.2f} s   {made / elapsed:6.1f} tokens/s ({made} tokens)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--transformers", action="store_true")
    args = parser.parse_args()
    announce()
    llama_cpp(args.tokens)
    if args.transformers:
        transformers(args.tokens)


if __name__ == "__main__":
    main()
