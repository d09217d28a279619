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


def test_the_bundled_models_grammar_ends_its_lists_in_time():
    """A point repeated until the tokens run out left a cut-off, unreadable JSON: the schema
    the bundled model is held to bounds each list and its string items (not free strings
    such as a summary, nor what a schema bounds itself)."""
    from membot.llm.bundled import MAX_CHARS, MAX_ITEMS, bounded
    from membot.turn.ending import SCHEMAS

    points = bounded(SCHEMAS["points"])["properties"]["points"]
    assert points["maxItems"] == MAX_ITEMS and points["items"]["maxLength"] == MAX_CHARS
    policy = bounded(SCHEMAS["policy"])["properties"]
    assert "maxLength" not in policy["summary"] and "maxLength" not in policy["decision"]
    own = {"type": "array", "maxItems": 3, "items": {"type": "string", "maxLength": 9}}
    assert bounded(own) == own
    assert "maxItems" not in SCHEMAS["points"]["properties"]["points"]  # a copy, not changed
