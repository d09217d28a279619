"""What the optional LLM relevance check adds to a turn, with the bundled SmolLM2.

A store holds the 5 LoCoMo dev conversations; 10 LoCoMo questions are asked in a new thread
by a bot that shares memory (so history is recalled), once with ``relevance_check`` off and
once on. It prints the median ``llm`` and ``relevance_check`` milliseconds per turn and the
hints judged per turn. The replies are short (``reply_tokens`` 32) so the check's share shows.

    .venv/bin/python benchmarks/relevance_latency.py
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from machine import announce

from membot import Bot, Memory
from membot.eval import shared_data_dir
from membot.llm import BundledSmolLM2
from membot.memory.importers import read_file

LOCOMO = shared_data_dir() / "locomo" / "locomo_dev.json"


def main() -> None:
    announce()
    questions = [qa["question"] for qa in json.loads(LOCOMO.read_text())[0]["qa"][:10]]
    llm = BundledSmolLM2()
    with tempfile.TemporaryDirectory() as folder:
        memory = Memory(Path(folder) / "bench.db")
        memory.add_many(read_file(LOCOMO, "locomo", "bench", None).lines)
        memory.configure_bot("bench", share_across_people=True, reply_tokens=32)
        memory.warm_up()
        for check in (False, True):
            bot = Bot(memory, llm, "bench")
            llm_ms, check_ms, hints = [], [], []
            for number, question in enumerate(questions):
                turn = bot.turn(question, user="bench-user", thread=f"check-{check}-{number}",
                                settings={"relevance_check": check})  # fmt: skip
                llm_ms.append(turn.timings_ms["llm"])
                check_ms.append(turn.timings_ms["relevance_check"])
                hints.append(len(turn.history_matches) + len(turn.expertise_matches))
            print(f"relevance_check={'on ' if check else 'off'}: median llm "
                  f"{statistics.median(llm_ms):7.1f} ms, median relevance_check "
                  f"{statistics.median(check_ms):7.1f} ms, hints in the prompt per turn "
                  f"{statistics.mean(hints):.1f}")  # fmt: skip
        memory.close()


if __name__ == "__main__":
    main()
