"""The bundled model's reply ends where it starts writing the person's next turn."""

from membot.llm.bundled import STOP


def test_every_way_the_model_was_seen_opening_the_persons_turn_stops_the_reply():
    seen = [
        "\nHUMAN: What about tomorrow?",
        "\nHUMAN (not in the first person): No, I'm not sure.",  # through `membot serve`
        "\nHuman: ok",
        "\nUser: thanks",
    ]
    for continuation in seen:
        assert any(continuation.startswith(stop) for stop in STOP), continuation
    assert not any("\nAI: Sure, I can help.".startswith(stop) for stop in STOP)
