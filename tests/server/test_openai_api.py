"""The OpenAI-compatible endpoint, spoken to by the official ``openai`` client over a real
loopback server."""

from __future__ import annotations

import inspect
import json

import httpx
import openai
import pytest
from conftest import LiveServer, serving

from membot import MAX_LINE_CHARS, Bot, Memory, StoreError, resolve_llm
from membot.server import create_app
from membot.service.keys import create_key


def reply(text: str, *cited: str) -> str:
    """A model's reply as membot asks for it (JSON with the ids of the hints it used)."""
    return json.dumps({"response": text, "citation_ids": list(cited)})


def client_of(live_server: LiveServer, key: str, **options) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{live_server.url}/v1", api_key=key, **options)


def texts(memory: Memory, user: str, thread: str) -> list[str]:
    return [line.text for line in memory.thread_lines(user=user, bot="coach", thread=thread)]


@pytest.fixture
def coach(live_server: LiveServer) -> openai.OpenAI:
    """A client with an admin key, and a bot named coach to talk with."""
    live_server.memory.create_bot("coach")
    return client_of(live_server, live_server.key(admin=True))


def test_models_are_the_bots_the_key_may_use(live_server: LiveServer):
    for name in ("coach", "other"):
        live_server.memory.create_bot(name)
    admin = client_of(live_server, live_server.key(admin=True))
    assert [model.id for model in admin.models.list()] == ["coach", "other"]
    listed = client_of(live_server, live_server.key(bot="coach", user="sam")).models.list()
    assert [(model.id, model.object, model.owned_by) for model in listed] == [
        ("coach", "model", "membot")
    ]
    with pytest.raises(openai.AuthenticationError) as refused:
        client_of(live_server, "mb_nonsense").models.list()
    assert (refused.value.type, refused.value.code) == ("invalid_request_error", "invalid_api_key")


def test_a_completion_answers_and_stores_both_lines_in_the_thread(live_server, coach):
    live_server.llm.enqueue(reply("Hello Sam"))
    completion = coach.chat.completions.create(
        model="coach",
        messages=[{"role": "user", "content": "Hi, I'm Sam"}],
        user="sam",
        metadata={"thread": "t1"},
    )
    assert completion.object == "chat.completion" and completion.model == "coach"
    choice = completion.choices[0]
    assert (choice.message.role, choice.message.content) == ("assistant", "Hello Sam")
    assert choice.finish_reason == "stop"
    usage = completion.usage
    assert usage.prompt_tokens > 0 and usage.completion_tokens > 0
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    extra = completion.model_extra["membot"]
    assert (extra["thread"], extra["line_seq"], extra["reply_seq"]) == ("t1", 1, 2)
    assert texts(live_server.memory, "sam", "t1") == ["Hi, I'm Sam", "Hello Sam"]


def test_the_membot_object_gives_recalled_blocks_with_scores_and_citations(live_server, coach):
    earlier = live_server.memory.add("I live in Lisbon", user="sam", thread="old", bot="coach")
    hint = f"h{earlier.id}"
    live_server.llm.enqueue(reply("You live in Lisbon.", hint))
    completion = coach.chat.completions.create(
        model="coach",
        messages=[{"role": "user", "content": "Where do I live?"}],
        user="sam",
        metadata={"thread": "new"},
    )
    extra = completion.to_dict()["membot"]
    [block] = extra["recalled"]
    assert block["thread"] == "old" and block["score"] > 0
    assert [line["text"] for line in block["lines"]] == ["I live in Lisbon"]
    [citation] = extra["citations"]
    assert citation["id"] == hint and citation["source"] == "history"


class Conversation:
    """A client's conversation as OpenAI clients (and simonw's ``llm -c``) keep it: every
    call resends every message so far, and the reply is added to them."""

    def __init__(self, client: openai.OpenAI, user: str, **more) -> None:
        self.client, self.user, self.more = client, user, more
        self.messages: list[dict[str, str]] = []

    def say(self, text: str, stream: bool = False) -> str:
        """Send ``text``; the thread membot stored it in."""
        self.messages.append({"role": "user", "content": text})
        said = {"model": "coach", "messages": self.messages, "user": self.user, **self.more}
        if stream:
            chunks = list(self.client.chat.completions.create(stream=True, **said))
            answer = "".join(chunk.choices[0].delta.content or "" for chunk in chunks)
            extra = chunks[-1].model_extra["membot"]
        else:
            completion = self.client.chat.completions.create(**said)
            answer, extra = completion.choices[0].message.content, completion.model_extra["membot"]
        self.messages.append({"role": "assistant", "content": answer})
        return extra["thread"]


def test_the_thread_is_the_header_else_the_conversations_own(live_server, coach):
    coach.chat.completions.create(
        model="coach",
        messages=[{"role": "user", "content": "Good morning"}],
        user="sam",
        extra_headers={"X-Membot-Thread": "mornings"},
    )
    assert texts(live_server.memory, "sam", "mornings")[0] == "Good morning"
    live_server.llm.enqueue(reply("Hello Sam"), reply("Tea, you said."))
    talk = Conversation(coach, "sam")
    thread = talk.say("I like tea")
    assert thread.startswith("chat-") and thread != "mornings"
    assert talk.say("What do I like?", stream=True) == thread
    # The earlier messages the client resent are not stored again.
    assert texts(live_server.memory, "sam", thread) == [
        "I like tea",
        "Hello Sam",
        "What do I like?",
        "Tea, you said.",
    ]


@pytest.mark.parametrize("memory", ["sqlite", "postgresql"], indirect=True)
def test_two_conversations_opening_alike_are_two_threads(live_server, coach):
    # The bot answers both openings word for word the same: the next lines tell them apart.
    first, second = Conversation(coach, "sam"), Conversation(coach, "sam")
    threads = [first.say("hi"), second.say("hi")]
    assert threads[0] != threads[1]
    threads += [first.say("I play chess"), second.say("I swim")]
    threads += [second.say("Since May"), first.say("Since June")]
    assert len(set(threads)) == 2
    chess, swim = (texts(live_server.memory, "sam", thread) for thread in threads[2:4])
    assert [chess[2], chess[4]] == ["I play chess", "Since June"]
    assert [swim[2], swim[4]] == ["I swim", "Since May"]
    assert len(live_server.memory.history(user="sam")) == 12


def test_a_named_thread_wins_over_the_conversation(live_server, coach):
    talk = Conversation(coach, "sam")
    thread = talk.say("hi")
    talk.more = {"metadata": {"thread": "named"}}
    assert talk.say("and now?") == "named"
    talk.more = {"extra_headers": {"X-Membot-Thread": "header"}}
    assert talk.say("and then?") == "header"
    assert texts(live_server.memory, "sam", thread) == ["hi", "(scripted reply)"]
    assert texts(live_server.memory, "sam", "named") == ["and now?", "(scripted reply)"]


def test_a_conversation_is_only_ever_the_persons_own_thread(live_server, coach):
    sam, ana = Conversation(coach, "sam"), Conversation(coach, "ana")
    sams = sam.say("hi")
    # Ana's client resends Sam's very conversation: it matches no thread of hers.
    ana.messages = list(sam.messages)
    anas = ana.say("I am Ana")
    assert texts(live_server.memory, "ana", anas) == ["I am Ana", "(scripted reply)"]
    assert ana.say("Still Ana") == anas and sam.say("Still Sam") == sams
    assert [line.person for line in live_server.memory.history(user="ana")] == ["ana"] * 4
    assert texts(live_server.memory, "sam", sams)[2] == "Still Sam"
    assert len(live_server.memory.history(user="sam")) == 4


def test_a_conversation_begun_elsewhere_goes_on_in_one_thread(live_server, coach):
    talk = Conversation(coach, "sam")
    talk.messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "An example question"},
        {"role": "assistant", "content": "An example answer"},
    ]
    thread = talk.say("A real question")
    assert talk.say("Another") == thread
    assert texts(live_server.memory, "sam", thread) == [
        "A real question",
        "(scripted reply)",
        "Another",
        "(scripted reply)",
    ]


def test_a_line_the_model_never_answered_does_not_lose_the_thread(live_server, coach):
    talk = Conversation(coach, "sam")
    thread = talk.say("hi")
    live_server.llm.enqueue("!error the model is down")
    with pytest.raises(openai.InternalServerError):
        talk.say("Are you there?")
    talk.messages.pop()  # the client keeps no message it got no answer to
    assert talk.say("Now?") == thread
    assert texts(live_server.memory, "sam", thread)[2:] == [
        "Are you there?",
        "Now?",
        "(scripted reply)",
    ]


def test_earlier_messages_are_not_stored_again_and_a_system_message_is_not_used(live_server, coach):
    live_server.llm.enqueue(reply("Hi Sam"), reply("Tea, you said."))
    said = {"model": "coach", "user": "sam", "metadata": {"thread": "t1"}}
    coach.chat.completions.create(messages=[{"role": "user", "content": "I like tea"}], **said)
    completion = coach.chat.completions.create(
        messages=[
            {"role": "system", "content": "You are a pirate."},
            {"role": "user", "content": "I like tea"},
            {"role": "assistant", "content": "Hi Sam"},
            {"role": "user", "content": [{"type": "text", "text": "What do I like?"}]},
        ],
        **said,
    )
    assert texts(live_server.memory, "sam", "t1") == [
        "I like tea",
        "Hi Sam",
        "What do I like?",
        "Tea, you said.",
    ]
    notes = completion.model_extra["membot"]["notes"]
    assert any("system message was not used" in note for note in notes)
    assert not any("tools" in note for note in notes)
    assert "pirate" not in json.dumps(live_server.llm.history[-1])


def test_tools_a_client_sends_are_not_offered_and_it_is_told(live_server, coach):
    live_server.llm.enqueue(reply("It is sunny."))
    weather = {"type": "function", "function": {"name": "weather", "parameters": {}}}
    completion = coach.chat.completions.create(
        model="coach", user="sam", messages=[{"role": "user", "content": "Weather?"}],
        tools=[weather],
    )  # fmt: skip
    assert completion.choices[0].message.content == "It is sunny."
    notes = completion.model_extra["membot"]["notes"]
    assert "the client's tools were not offered to the model: membot replies in text" in notes
    assert "weather" not in json.dumps(live_server.llm.history[-1])


def test_the_last_message_must_be_the_persons(live_server, coach):
    with pytest.raises(openai.BadRequestError, match="last message"):
        coach.chat.completions.create(
            model="coach",
            messages=[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}],
            user="sam",
        )
    assert live_server.memory.history(user="sam") == []


def test_a_person_key_talks_only_as_its_person(live_server, coach):
    sam = client_of(live_server, live_server.key(bot="coach", user="sam"))
    answered = sam.chat.completions.create(
        model="coach", messages=[{"role": "user", "content": "hi"}], metadata={"thread": "t"}
    )
    assert answered.model_extra["membot"]["user"] == "sam"
    with pytest.raises(openai.PermissionDeniedError):
        sam.chat.completions.create(
            model="coach", messages=[{"role": "user", "content": "hi"}], user="kim"
        )
    with pytest.raises(openai.BadRequestError, match="user") as unnamed:
        coach.chat.completions.create(model="coach", messages=[{"role": "user", "content": "hi"}])
    assert unnamed.value.param == "user"
    assert live_server.memory.history(user="kim") == []


def test_a_bot_outside_the_keys_scope_or_unknown_is_not_found(live_server, coach):
    live_server.memory.create_bot("other")
    sam = client_of(live_server, live_server.key(bot="coach", user="sam"))
    with pytest.raises(openai.NotFoundError) as refused:
        sam.chat.completions.create(model="other", messages=[{"role": "user", "content": "hi"}])
    assert refused.value.status_code == 404
    assert refused.value.body["type"] == "invalid_request_error"
    assert (refused.value.code, refused.value.param) == ("model_not_found", "model")
    with pytest.raises(openai.NotFoundError):
        coach.chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": "hi"}], user="sam"
        )
    assert live_server.memory.history(user="sam") == []
    assert live_server.memory.bots() == ["coach", "other"]


def are_you_there(client: openai.OpenAI):
    """Sam's line "Are you there?" in thread t1, through the client's default retries."""
    return client.chat.completions.create(
        model="coach",
        messages=[{"role": "user", "content": "Are you there?"}],
        user="sam",
        metadata={"thread": "t1"},
    )


def test_when_the_model_is_down_503_and_the_line_is_stored_once(live_server, coach):
    # The client keeps its default retries: the 503 tells it not to send the line again.
    live_server.llm.enqueue("!error the model is down", "!error still down", "!error down")
    with pytest.raises(openai.InternalServerError) as failed:
        are_you_there(coach)
    assert failed.value.status_code == 503 and "stored" in failed.value.message
    assert texts(live_server.memory, "sam", "t1") == ["Are you there?"]


@pytest.mark.parametrize(("failure", "status"), [("busy store", 503), ("bug", 500)])
def test_a_turn_failing_after_its_line_is_stored_is_not_retried(
    live_server, coach, monkeypatch, failure, status
):
    """A busy store or a bug after the line was stored: the client's own retries (on by
    default) stored the line two or three times. Where the store is stays in the server's
    log."""
    where = live_server.memory.location

    def recall(*args, **kwargs):
        if failure == "bug":
            raise KeyError("bug")
        raise StoreError(f"the store at {where} failed: another process held it; try again")

    monkeypatch.setattr(live_server.memory, "recall", recall)
    with pytest.raises(openai.APIStatusError) as failed:
        are_you_there(coach)
    assert failed.value.status_code == status
    assert failed.value.response.headers["x-should-retry"] == "false"
    assert failed.value.body["stored"] == {"thread": "t1", "seq": 1}
    assert "Your line was stored" in failed.value.message
    assert where not in failed.value.message
    if failure == "busy store":
        told = failed.value.body["message"]
        assert told.startswith("the store failed: another process held it. Your line was")
    assert texts(live_server.memory, "sam", "t1") == ["Are you there?"]


def test_a_line_too_long_is_refused_before_it_is_stored(live_server, coach):
    with pytest.raises(openai.APIStatusError) as refused:
        coach.chat.completions.create(
            model="coach",
            messages=[{"role": "user", "content": "x" * (MAX_LINE_CHARS + 1)}],
            user="sam",
        )
    assert refused.value.status_code == 413
    assert live_server.memory.history(user="sam") == []


def test_errors_take_openais_shape_and_status(live_server, coach):
    """OpenAI answers a request it cannot take with 400, never 422, and names the field;
    membot's own routes keep their shape (422, type and message only)."""
    key = live_server.key(admin=True)
    headers = {"Authorization": f"Bearer {key}"}
    answer = httpx.post(
        f"{live_server.url}/v1/chat/completions",
        json={"model": "coach", "messages": [], "user": "sam"},
        headers=headers,
    )
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert (error["type"], error["param"], error["code"]) == (
        "invalid_request_error",
        "messages",
        "invalid_request",
    )
    wrong_role = httpx.post(
        f"{live_server.url}/v1/chat/completions",
        json={"model": "coach", "messages": [{"role": "user"}, {"rol": "x"}], "user": "sam"},
        headers=headers,
    )
    assert wrong_role.status_code == 400
    assert wrong_role.json()["error"]["param"] == "messages.1.role"
    own_route = httpx.post(
        f"{live_server.url}/v1/bots/coach/turns", json={"user": "sam"}, headers=headers
    )
    assert own_route.status_code == 422 and set(own_route.json()["error"]) == {"type", "message"}
    with pytest.raises(openai.BadRequestError) as refused:
        coach.chat.completions.create(
            model="coach",
            messages=[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "?"}],
            user="sam",
        )
    assert refused.value.param == "messages" and "the person's" in refused.value.message
    with pytest.raises(openai.BadRequestError, match="a text part's text is a string"):
        coach.chat.completions.create(  # was stored as "{'a': 1}"
            model="coach",
            messages=[{"role": "user", "content": [{"type": "text", "text": {"a": 1}}]}],
            user="sam",
        )
    assert live_server.memory.history(user="sam") == []


# -- streaming -------------------------------------------------------------------------------

# Bot.turn hands the reply over as it is written once branch `llm` is in (on_text); until then
# these wait for it rather than fail.
needs_streaming = pytest.mark.skipif(
    "on_text" not in inspect.signature(Bot.turn).parameters,
    reason="Bot.turn(on_text=...) arrives with branch llm",
)


@needs_streaming
def test_a_stream_sends_the_reply_as_written_and_stores_exactly_it(live_server, coach):
    live_server.llm.enqueue(reply("Hello Sam, good to see you again."))
    stream = coach.chat.completions.create(
        model="coach",
        messages=[{"role": "user", "content": "Hi, it's Sam"}],
        user="sam",
        metadata={"thread": "t1"},
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    pieces = [chunk.choices[0].delta.content for chunk in chunks[1:-2]]
    assert len(pieces) > 1 and "".join(pieces) == "Hello Sam, good to see you again."
    assert texts(live_server.memory, "sam", "t1") == ["Hi, it's Sam", "".join(pieces)]
    assert chunks[0].choices[0].delta.role == "assistant"
    finish = chunks[-2]
    assert finish.choices[0].finish_reason == "stop"
    assert finish.model_extra["membot"]["reply_seq"] == 2
    usage = chunks[-1]
    assert usage.choices == [] and usage.usage.completion_tokens > 0
    assert {chunk.id for chunk in chunks} == {chunks[0].id}


@needs_streaming
def test_the_raw_stream_is_server_sent_events_ending_done(live_server, coach):
    live_server.llm.enqueue(reply("Fine, thanks."))
    request = {
        "model": "coach",
        "user": "sam",
        "stream": True,
        "messages": [{"role": "user", "content": "How are you?"}],
    }
    key = {"Authorization": f"Bearer {live_server.key(admin=True)}"}
    url = f"{live_server.url}/v1/chat/completions"
    with httpx.stream("POST", url, json=request, headers=key) as answer:
        assert answer.headers["content-type"].startswith("text/event-stream")
        lines = list(answer.iter_lines())
    events = [line for line in lines if line]
    assert all(event.startswith("data: ") for event in events) and events[-1] == "data: [DONE]"
    chunks = [json.loads(event.removeprefix("data: ")) for event in events[:-1]]
    assert {chunk["object"] for chunk in chunks} == {"chat.completion.chunk"}
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert all("usage" not in chunk for chunk in chunks)  # only with include_usage
    said = "".join(chunk["choices"][0]["delta"].get("content", "") for chunk in chunks)
    assert said == "Fine, thanks."


@needs_streaming
def test_a_model_failing_midway_ends_the_stream_with_an_error(live_server, coach):
    live_server.llm.enqueue('{"response": "Let me think about that for a mom!error connection lost')
    stream = coach.chat.completions.create(
        model="coach",
        messages=[{"role": "user", "content": "Are you there?"}],
        user="sam",
        metadata={"thread": "t1"},
        stream=True,
    )
    shown = []
    with pytest.raises(openai.APIError, match="did not answer"):
        for chunk in stream:
            shown.append(chunk.choices[0].delta.content or "")
    assert "".join(shown).startswith("Let me think")
    assert texts(live_server.memory, "sam", "t1") == ["Are you there?"]


@needs_streaming
def test_an_error_after_a_stream_began_is_an_event_in_openais_shape(live_server, coach):
    live_server.llm.enqueue('{"response": "Let me think!error connection lost')
    key = live_server.key(admin=True)
    body = {
        "model": "coach",
        "messages": [{"role": "user", "content": "Are you there?"}],
        "user": "sam",
        "metadata": {"thread": "t1"},
        "stream": True,
    }
    with httpx.stream(
        "POST",
        f"{live_server.url}/v1/chat/completions",
        json=body,
        headers={"Authorization": f"Bearer {key}"},
    ) as answer:
        events = [line[6:] for line in answer.iter_lines() if line.startswith("data: ")]
    error = json.loads(events[-1])["error"]
    assert (error["type"], error["code"], error["param"]) == (
        "server_error",
        "llm_unavailable",
        None,
    )
    assert error["stored"] == {"thread": "t1", "seq": 1} and "stored" in error["message"]


@needs_streaming
def test_a_model_down_before_a_stream_begins_is_503_with_the_line_stored_once(live_server, coach):
    live_server.llm.enqueue("!error the model is down", "!error still down", "!error down")
    with pytest.raises(openai.InternalServerError) as failed:
        coach.chat.completions.create(
            model="coach",
            messages=[{"role": "user", "content": "Anyone?"}],
            user="sam",
            metadata={"thread": "t1"},
            stream=True,
        )
    assert failed.value.status_code == 503
    assert texts(live_server.memory, "sam", "t1") == ["Anyone?"]


@needs_streaming
def test_an_openai_compatible_model_streams_through_to_the_client(memory: Memory, openai_server):
    openai_server.reply = reply("Streamed from the model behind membot.")
    memory.create_bot("coach")
    llm = resolve_llm(f"openai:tiny@{openai_server.base_url}")
    with serving(create_app(memory, llm=llm)) as url:
        client = openai.OpenAI(base_url=f"{url}/v1", api_key=create_key(memory, admin=True).secret)
        stream = client.chat.completions.create(
            model="coach",
            messages=[{"role": "user", "content": "Say something"}],
            user="sam",
            metadata={"thread": "t1"},
            stream=True,
        )
        pieces = [
            chunk.choices[0].delta.content for chunk in stream if chunk.choices[0].delta.content
        ]
    assert len(pieces) > 1 and "".join(pieces) == "Streamed from the model behind membot."
    assert openai_server.requests[-1][1]["stream"] is True
    assert texts(memory, "sam", "t1") == ["Say something", "".join(pieces)]
